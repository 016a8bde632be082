//! Commands packed straight into one reused buffer, as the RESP arrays of
//! bulk strings every Redis client sends (`*3\r\n$4\r\nXACK\r\n...`).
//!
//! Producers and consumers send one pipeline per round trip, many times a
//! second. Building a `redis::Cmd` per command allocated and regrew its
//! buffers for every argument, which made allocation the client's largest
//! user-space cost in the closed loop; the client shares the host's cores
//! with the server it measures, so its CPU per entry lowers the figure for
//! every server alike.

use bytes::BytesMut;
use shardstream::io::codec::{bulk, header};

/// A pipeline of commands being packed; cleared, not dropped, between
/// round trips.
#[derive(Debug, Default)]
pub struct Packer {
    buf: BytesMut,
}

impl Packer {
    /// Start over (the buffer keeps its capacity).
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Begin a command of `args` arguments (the command name included);
    /// exactly that many [`Packer::arg`] / [`Packer::num`] calls follow.
    pub fn command(&mut self, args: usize) -> &mut Self {
        header(&mut self.buf, b'*', args as i64);
        self
    }

    /// One argument.
    pub fn arg(&mut self, a: &[u8]) -> &mut Self {
        bulk(&mut self.buf, a);
        self
    }

    /// One argument: `n` in decimal.
    pub fn num(&mut self, n: u64) -> &mut Self {
        self.arg(itoa::Buffer::new().format(n).as_bytes())
    }

    /// Append bytes already in RESP form (arguments packed elsewhere).
    pub fn raw(&mut self, packed: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(packed);
        self
    }

    /// The packed commands.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// IDs to acknowledge, grouped by stream key, packed as they arrive: one
/// XACK per key when sent. Reused from read to read.
#[derive(Debug, Default)]
pub struct Acks {
    /// `(key, how many IDs, the IDs as packed arguments)`; a key with no
    /// IDs is a slot kept for reuse.
    keys: Vec<(Vec<u8>, usize, Packer)>,
}

impl Acks {
    /// Note `id` of stream `key` for acknowledgement.
    pub fn add(&mut self, key: &[u8], id: &[u8]) {
        let at = match self.keys.iter().position(|(k, _, _)| k.as_slice() == key) {
            Some(i) => i,
            None => match self.keys.iter().position(|(_, n, _)| *n == 0) {
                Some(i) => {
                    let slot = &mut self.keys[i];
                    slot.0.clear();
                    slot.0.extend_from_slice(key);
                    i
                }
                None => {
                    self.keys.push((key.to_vec(), 0, Packer::default()));
                    self.keys.len() - 1
                }
            },
        };
        let (_, n, ids) = &mut self.keys[at];
        *n += 1;
        ids.arg(id);
    }

    /// Whether no ID waits.
    pub fn is_empty(&self) -> bool {
        self.keys.iter().all(|(_, n, _)| *n == 0)
    }

    /// The keys with IDs waiting.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.keys
            .iter()
            .filter(|(_, n, _)| *n > 0)
            .map(|(k, _, _)| k.as_slice())
    }

    /// Pack `XACK key group id...` for each key `pick` accepts; returns how
    /// many commands were packed.
    pub fn pack(
        &self,
        out: &mut Packer,
        group: &[u8],
        mut pick: impl FnMut(&[u8]) -> bool,
    ) -> usize {
        let mut commands = 0;
        for (key, n, ids) in self.keys.iter().filter(|(_, n, _)| *n > 0) {
            if pick(key) {
                out.command(3 + n)
                    .arg(b"XACK")
                    .arg(key)
                    .arg(group)
                    .raw(ids.bytes());
                commands += 1;
            }
        }
        commands
    }

    /// Forget every waiting ID (the slots stay for reuse).
    pub fn clear(&mut self) {
        for (_, n, ids) in &mut self.keys {
            *n = 0;
            ids.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_what_the_redis_crate_packs() {
        let mut p = Packer::default();
        p.command(4).arg(b"XADD").arg(b"s").arg(b"*").num(42);
        p.command(1).arg(b"PING");
        let mut expect = redis::cmd("XADD")
            .arg("s")
            .arg("*")
            .arg(42u64)
            .get_packed_command();
        expect.extend(redis::cmd("PING").get_packed_command());
        assert_eq!(p.bytes(), expect.as_slice());
        p.clear();
        assert!(p.bytes().is_empty());
    }

    #[test]
    fn acks_group_ids_by_key_and_reuse_slots() {
        let mut acks = Acks::default();
        assert!(acks.is_empty());
        acks.add(b"a", b"1-0");
        acks.add(b"b", b"2-0");
        acks.add(b"a", b"3-0");
        assert_eq!(acks.keys().collect::<Vec<_>>(), vec![&b"a"[..], &b"b"[..]]);
        let mut out = Packer::default();
        assert_eq!(acks.pack(&mut out, b"g", |_| true), 2);
        let mut expect = redis::cmd("XACK")
            .arg("a")
            .arg("g")
            .arg("1-0")
            .arg("3-0")
            .get_packed_command();
        expect.extend(
            redis::cmd("XACK")
                .arg("b")
                .arg("g")
                .arg("2-0")
                .get_packed_command(),
        );
        assert_eq!(out.bytes(), expect.as_slice());
        // Only the keys `pick` takes.
        out.clear();
        assert_eq!(acks.pack(&mut out, b"g", |k| k == b"b"), 1);
        assert_eq!(
            out.bytes(),
            redis::cmd("XACK")
                .arg("b")
                .arg("g")
                .arg("2-0")
                .get_packed_command()
        );
        // Cleared: empty, and a new key takes a freed slot.
        acks.clear();
        assert!(acks.is_empty() && acks.keys().next().is_none());
        acks.add(b"c", b"4-0");
        assert_eq!(acks.keys.len(), 2);
        assert_eq!(acks.keys().collect::<Vec<_>>(), vec![&b"c"[..]]);
    }
}
