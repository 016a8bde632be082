//! [`Delayed`]: one shard's stream entries waiting for their due time
//! (`XSCHEDULE`), pure data with no threads, IO or clock.
//!
//! Each pending entry is keyed by a [`StreamId`]-shaped token
//! `<due-ms>-<seq>`: ordering by token is ordering by due time, then by
//! scheduling order, so the shard's timer pops due entries from the front.
//! `seq` is unique per shard (it only grows), so a token names one entry.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::stream::StreamId;

/// One entry waiting for its due time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// Database of the stream key.
    pub db: usize,
    /// The stream key the entry goes to.
    pub key: Bytes,
    /// The entry's field-value pairs.
    pub fields: Vec<(Bytes, Bytes)>,
}

/// A shard's pending delayed entries, ordered by token (due time, then seq).
#[derive(Clone, Debug, Default)]
pub struct Delayed {
    pending: BTreeMap<StreamId, Pending>,
    /// The next `seq` of a token.
    next_seq: u64,
}

impl Delayed {
    /// Number of pending entries.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Schedule `p` for `due_ms` (Unix ms); returns its token.
    pub fn schedule(&mut self, due_ms: u64, p: Pending) -> StreamId {
        let token = StreamId {
            ms: due_ms,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.pending.insert(token, p);
        token
    }

    /// Put `p` back under a known token (AOF replay and rewrite); later
    /// tokens get higher sequence numbers.
    pub fn restore(&mut self, token: StreamId, p: Pending) {
        self.next_seq = self.next_seq.max(token.seq.saturating_add(1));
        self.pending.insert(token, p);
    }

    /// Due time of the earliest pending entry, Unix ms.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.pending.first_key_value().map(|(t, _)| t.ms)
    }

    /// Remove and return the earliest entry if it is due at `now_ms`.
    pub fn pop_due(&mut self, now_ms: u64) -> Option<(StreamId, Pending)> {
        if self.next_due_ms()? > now_ms {
            return None;
        }
        self.pending.pop_first()
    }

    /// Remove the entry `token` if it belongs to `(db, key)`.
    pub fn cancel(&mut self, token: StreamId, db: usize, key: &[u8]) -> bool {
        match self.pending.get(&token) {
            Some(p) if p.db == db && p.key[..] == *key => {
                self.pending.remove(&token);
                true
            }
            _ => false,
        }
    }

    /// Remove the entry `token` whoever it belongs to.
    pub fn take(&mut self, token: StreamId) -> Option<Pending> {
        self.pending.remove(&token)
    }

    /// Number of entries pending for `(db, key)`, O(pending).
    pub fn count_for(&self, db: usize, key: &[u8]) -> usize {
        self.pending
            .values()
            .filter(|p| p.db == db && p.key[..] == *key)
            .count()
    }

    /// Drop every entry of database `db` (FLUSHDB / FLUSHALL). Returns how many.
    pub fn clear_db(&mut self, db: usize) -> usize {
        let before = self.pending.len();
        self.pending.retain(|_, p| p.db != db);
        before - self.pending.len()
    }

    /// Every pending entry in token order.
    pub fn iter(&self) -> impl Iterator<Item = (&StreamId, &Pending)> {
        self.pending.iter()
    }

    /// Approximate heap footprint in bytes.
    pub fn memory_usage_bytes(&self) -> usize {
        self.pending
            .values()
            .map(|p| {
                64 + p.key.len()
                    + p.fields
                        .iter()
                        .map(|(f, v)| f.len() + v.len() + 64)
                        .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(key: &str) -> Pending {
        Pending {
            db: 0,
            key: Bytes::copy_from_slice(key.as_bytes()),
            fields: vec![(Bytes::from_static(b"f"), Bytes::from_static(b"v"))],
        }
    }

    #[test]
    fn due_order_and_cancel() {
        let mut d = Delayed::default();
        let late = d.schedule(200, p("a"));
        let early = d.schedule(100, p("b"));
        let same = d.schedule(100, p("c"));
        assert_eq!(d.next_due_ms(), Some(100));
        assert_eq!(d.pop_due(99), None);
        assert_eq!(d.pop_due(100).map(|(t, _)| t), Some(early));
        assert!(!d.cancel(same, 0, b"a"), "belongs to another key");
        assert!(d.cancel(same, 0, b"c"));
        assert_eq!(d.count_for(0, b"a"), 1);
        d.restore(StreamId { ms: 5, seq: 40 }, p("x"));
        assert_eq!(d.schedule(1, p("y")).seq, 41);
        assert_eq!(d.clear_db(0), 3);
        assert!(d.take(late).is_none());
    }
}
