//! Idempotent production (Redis 8.6): a stream's IDMP map, pure data with
//! time as a parameter (ms since the Unix epoch).
//!
//! `XADD key IDMP pid iid * ...` (or `IDMPAUTO pid`, where the iid is a
//! digest of the entry's fields and values) records `(pid, iid) -> entry ID`.
//! A later XADD with a pair still recorded adds nothing and answers the
//! original entry's ID, even if that entry was deleted since. Each producer
//! keeps its iids in arrival order; an iid is forgotten after
//! `IDMP-DURATION` seconds or when the producer holds more than
//! `IDMP-MAXSIZE` of them (oldest first). `XCFGSET` sets both; changing them
//! empties the map.
//!
//! A stream that never used IDMP has no [`Idmp`] (`Stream::idmp` is `None`)
//! and reports the defaults, so entries pay nothing for the feature.
//!
//! # Source
//! redis.io XADD, XCFGSET, XINFO STREAM and "Idempotent message processing"
//! (develop/data-types/streams/idempotency), Redis 8.6.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;

use super::StreamId;

/// `IDMP-DURATION` when never set, in seconds.
pub const DEFAULT_DURATION_S: u64 = 100;
/// Greatest `IDMP-DURATION`, in seconds (one day).
pub const MAX_DURATION_S: u64 = 86_400;
/// `IDMP-MAXSIZE` when never set: iids kept per producer.
pub const DEFAULT_MAXSIZE: u64 = 100;
/// Greatest `IDMP-MAXSIZE`.
pub const MAX_MAXSIZE: u64 = 10_000;

/// A stream's IDMP settings (`XCFGSET`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdmpConfig {
    /// How long an iid is remembered, in seconds (1..=86400).
    pub duration_s: u64,
    /// How many iids each producer keeps at most (1..=10000).
    pub maxsize: u64,
}

impl Default for IdmpConfig {
    fn default() -> Self {
        IdmpConfig {
            duration_s: DEFAULT_DURATION_S,
            maxsize: DEFAULT_MAXSIZE,
        }
    }
}

/// One recorded iid.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Recorded {
    iid: Bytes,
    /// The entry the first XADD with this iid created.
    id: StreamId,
    /// When it was recorded, ms since the Unix epoch.
    added_ms: u64,
}

/// The iids of one producer, oldest first, with an index by iid (entry ID
/// and time recorded).
#[derive(Clone, Debug, Default)]
struct Producer {
    order: VecDeque<Recorded>,
    by_iid: HashMap<Bytes, (StreamId, u64)>,
}

/// A stream's IDMP map and its lifetime counters.
#[derive(Clone, Debug, Default)]
pub struct Idmp {
    config: IdmpConfig,
    producers: BTreeMap<Bytes, Producer>,
    /// iids recorded over the stream's life (`iids-added`).
    pub iids_added: u64,
    /// XADDs answered as duplicates (`iids-duplicates`).
    pub iids_duplicates: u64,
}

/// One recorded `(pid, iid)` pair, as the AOF rewrite writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdmpRecord {
    pub pid: Bytes,
    pub iid: Bytes,
    pub id: StreamId,
    pub added_ms: u64,
}

impl Idmp {
    /// The settings in force.
    pub fn config(&self) -> IdmpConfig {
        self.config
    }

    fn duration_ms(&self) -> u64 {
        self.config.duration_s.saturating_mul(1000)
    }

    fn live(&self, r: &Recorded, now_ms: u64) -> bool {
        self.live_at(r.added_ms, now_ms)
    }

    fn live_at(&self, added_ms: u64, now_ms: u64) -> bool {
        added_ms.saturating_add(self.duration_ms()) > now_ms
    }

    /// `XCFGSET`: sets the settings; a change empties the map (the lifetime
    /// counters stay). Returns whether the map was emptied.
    ///
    /// # Source
    /// redis.io "Idempotent message processing", Persistence: XCFGSET with
    /// values other than the current ones clears the key's IDMP map.
    pub fn configure(&mut self, config: IdmpConfig) -> bool {
        if config == self.config {
            return false;
        }
        self.config = config;
        self.producers.clear();
        true
    }

    /// The entry ID recorded for `(pid, iid)`, if still remembered at `now_ms`.
    pub fn lookup(&self, pid: &[u8], iid: &[u8], now_ms: u64) -> Option<StreamId> {
        let &(id, added_ms) = self.producers.get(pid)?.by_iid.get(iid)?;
        self.live_at(added_ms, now_ms).then_some(id)
    }

    /// Records `(pid, iid) -> id` at `added_ms` (a new entry was added):
    /// first forgets the producer's expired iids (as of `added_ms`), then
    /// keeps at most `IDMP-MAXSIZE` of them, dropping the oldest.
    pub fn record(&mut self, pid: &Bytes, iid: &Bytes, id: StreamId, added_ms: u64) {
        let duration_ms = self.duration_ms();
        let maxsize = usize::try_from(self.config.maxsize).unwrap_or(usize::MAX);
        let p = self.producers.entry(pid.clone()).or_default();
        while p
            .order
            .front()
            .is_some_and(|r| r.added_ms.saturating_add(duration_ms) <= added_ms)
        {
            if let Some(r) = p.order.pop_front() {
                p.by_iid.remove(&r.iid);
            }
        }
        if p.by_iid.remove(iid).is_some() {
            p.order.retain(|r| r.iid != *iid);
        }
        p.order.push_back(Recorded {
            iid: iid.clone(),
            id,
            added_ms,
        });
        p.by_iid.insert(iid.clone(), (id, added_ms));
        while p.order.len() > maxsize {
            if let Some(r) = p.order.pop_front() {
                p.by_iid.remove(&r.iid);
            }
        }
        self.iids_added += 1;
    }

    /// Producers with at least one iid remembered at `now_ms` (`pids-tracked`).
    pub fn pids_tracked(&self, now_ms: u64) -> u64 {
        self.producers
            .values()
            .filter(|p| p.order.iter().any(|r| self.live(r, now_ms)))
            .count() as u64
    }

    /// iids remembered at `now_ms`, over all producers (`iids-tracked`).
    pub fn iids_tracked(&self, now_ms: u64) -> u64 {
        self.producers
            .values()
            .map(|p| p.order.iter().filter(|r| self.live(r, now_ms)).count() as u64)
            .sum()
    }

    /// Every pair remembered at `now_ms`, by producer, oldest first.
    pub fn records(&self, now_ms: u64) -> Vec<IdmpRecord> {
        self.producers
            .iter()
            .flat_map(|(pid, p)| {
                p.order
                    .iter()
                    .filter(move |r| self.live(r, now_ms))
                    .map(move |r| IdmpRecord {
                        pid: pid.clone(),
                        iid: r.iid.clone(),
                        id: r.id,
                        added_ms: r.added_ms,
                    })
            })
            .collect()
    }

    /// Estimated heap bytes.
    pub fn memory_usage_bytes(&self) -> usize {
        self.producers
            .iter()
            .map(|(pid, p)| {
                pid.len() + 64 + p.order.iter().map(|r| 2 * r.iid.len() + 96).sum::<usize>()
            })
            .sum::<usize>()
            + std::mem::size_of::<Self>()
    }
}

/// The iid `IDMPAUTO` derives from an entry's fields and values: SHA-1 over
/// each field and value prefixed by its length, so that different splits of
/// the same bytes differ. Stable across restarts (the AOF relies on it).
pub fn auto_iid(fields: &[(Bytes, Bytes)]) -> Bytes {
    let mut h = sha1_smol::Sha1::new();
    for (f, v) in fields {
        for part in [f, v] {
            h.update(&(part.len() as u64).to_be_bytes());
            h.update(part);
        }
    }
    Bytes::copy_from_slice(&h.digest().bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    #[test]
    fn remembers_until_duration_then_forgets() {
        let mut m = Idmp::default();
        m.record(&b("p"), &b("i1"), id(1), 1_000);
        assert_eq!(m.lookup(b"p", b"i1", 1_000), Some(id(1)));
        assert_eq!(m.lookup(b"p", b"i1", 100_999), Some(id(1)));
        assert_eq!(m.lookup(b"p", b"i1", 101_000), None);
        assert_eq!(m.lookup(b"q", b"i1", 1_000), None);
        assert_eq!((m.pids_tracked(1_000), m.iids_tracked(1_000)), (1, 1));
        assert_eq!((m.pids_tracked(101_000), m.iids_tracked(101_000)), (0, 0));
        // Expired iids are dropped when the producer records again.
        m.record(&b("p"), &b("i1"), id(9), 200_000);
        assert_eq!(m.lookup(b"p", b"i1", 200_000), Some(id(9)));
        assert_eq!(m.records(200_000).len(), 1);
        assert_eq!(m.iids_added, 2);
    }

    #[test]
    fn maxsize_evicts_the_oldest_per_producer() {
        let mut m = Idmp::default();
        assert!(m.configure(IdmpConfig {
            duration_s: 100,
            maxsize: 2
        }));
        for (n, iid) in ["a", "b", "c"].iter().enumerate() {
            m.record(&b("p"), &b(iid), id(n as u64 + 1), 0);
        }
        m.record(&b("q"), &b("a"), id(7), 0);
        assert_eq!(m.lookup(b"p", b"a", 0), None);
        assert_eq!(m.lookup(b"p", b"b", 0), Some(id(2)));
        assert_eq!(m.lookup(b"q", b"a", 0), Some(id(7)));
        assert_eq!(m.iids_tracked(0), 3);
    }

    #[test]
    fn configure_clears_only_on_change() {
        let mut m = Idmp::default();
        m.record(&b("p"), &b("i"), id(1), 0);
        assert!(!m.configure(IdmpConfig::default()));
        assert_eq!(m.lookup(b"p", b"i", 0), Some(id(1)));
        assert!(m.configure(IdmpConfig {
            duration_s: 5,
            maxsize: 100
        }));
        assert_eq!(m.lookup(b"p", b"i", 0), None);
        assert_eq!(m.iids_added, 1);
    }

    #[test]
    fn auto_iid_depends_on_content_and_split() {
        let f = |pairs: &[(&str, &str)]| {
            auto_iid(&pairs.iter().map(|(a, c)| (b(a), b(c))).collect::<Vec<_>>())
        };
        assert_eq!(f(&[("f", "v")]), f(&[("f", "v")]));
        assert_ne!(f(&[("f", "v")]), f(&[("f", "w")]));
        assert_ne!(f(&[("ab", "c")]), f(&[("a", "bc")]));
        assert_eq!(f(&[("f", "v")]).len(), 20);
    }
}
