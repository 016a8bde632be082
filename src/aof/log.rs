//! [`AofLog`]: the effect buffer a shard's commands write into.
//!
//! Lives inside [`ShardDb`](crate::shard::db::ShardDb) so every `apply_*`
//! function can record what it did with
//! [`ShardDb::log_effect`](crate::shard::db::ShardDb::log_effect). The shard
//! loop takes the bytes after each round of batches and hands them to the
//! writer ([`super::writer::ShardAof`]).

/// RESP-encoded effect records waiting to be written, plus what the reader of
/// the current file will have selected when it reaches the end of them.
#[derive(Debug, Default)]
pub struct AofLog {
    enabled: bool,
    buf: Vec<u8>,
    /// Database the file's reader has selected (`SELECT`), if any yet.
    db: Option<usize>,
    /// Last clock record written to the current file, ms since the Unix epoch.
    clock_ms: Option<u64>,
    /// A client asked for BGREWRITEAOF; the shard loop starts it after the batch.
    pub rewrite_requested: bool,
    /// The cross-shard transaction holding this shard `(coordinator, seq)`,
    /// and whether its [`TX_BEGIN_RECORD`] is already written.
    tx: Option<(u16, u64, bool)>,
}

/// Internal record name: the shard clock (ms) for the records that follow, so
/// replay sees the same time the live commands saw (consumer seen-times,
/// lazy expiry). Not a client command.
pub const CLOCK_RECORD: &[u8] = b"SS.CLOCK";

/// `SS.TXBEGIN <coordinator> <seq>`: the effects that follow, up to the
/// matching [`TX_END_RECORD`] (or, in the coordinator's own file,
/// [`TX_COMMIT_RECORD`]), belong to one cross-shard transaction. Written
/// before the transaction's first effect on the shard, not at all when it
/// has none there.
pub const TX_BEGIN_RECORD: &[u8] = b"SS.TXBEGIN";
/// `SS.TXEND <coordinator> <seq>`: a participant's part is complete (prepared).
pub const TX_END_RECORD: &[u8] = b"SS.TXEND";
/// `SS.TXABORT <coordinator> <seq>`: the transaction's coordinator went
/// away before committing (the server was stopping): the block it closes
/// is discarded at load.
pub const TX_ABORT_RECORD: &[u8] = b"SS.TXABORT";
/// `SS.TXCOMMIT <seq>`, in the coordinator's file only: transaction `seq` of
/// this shard committed, written once every participant's part is written
/// (the commit point; it also closes the coordinator's own part).
pub const TX_COMMIT_RECORD: &[u8] = b"SS.TXCOMMIT";
/// `SS.TXFLOOR <seq>`, at the start of a rewritten base: every transaction
/// this shard coordinated up to `seq` committed (their `SS.TXCOMMIT`
/// records are gone with the old files).
pub const TX_FLOOR_RECORD: &[u8] = b"SS.TXFLOOR";

impl AofLog {
    /// Whether records are kept (`appendonly yes` and the shard's file is open).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Start or stop keeping records. Stopping drops anything unwritten.
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
        if !on {
            self.buf.clear();
        }
    }

    /// Bytes recorded and not yet taken.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Record one effect `args` against database `db` at shard time `now_ms`,
    /// preceded by `SELECT` and clock records when those changed.
    pub fn record(&mut self, db: usize, now_ms: u64, args: &[&[u8]]) {
        if !self.enabled {
            return;
        }
        if let Some((coord, seq, false)) = self.tx {
            let (mut a, mut b) = (itoa::Buffer::new(), itoa::Buffer::new());
            encode(
                &mut self.buf,
                &[
                    TX_BEGIN_RECORD,
                    a.format(coord).as_bytes(),
                    b.format(seq).as_bytes(),
                ],
            );
            self.tx = Some((coord, seq, true));
        }
        if self.db != Some(db) {
            let mut n = itoa::Buffer::new();
            encode(&mut self.buf, &[b"SELECT", n.format(db).as_bytes()]);
            self.db = Some(db);
        }
        if self.clock_ms != Some(now_ms) {
            let mut n = itoa::Buffer::new();
            encode(&mut self.buf, &[CLOCK_RECORD, n.format(now_ms).as_bytes()]);
            self.clock_ms = Some(now_ms);
        }
        encode(&mut self.buf, args);
    }

    /// Append pre-encoded effect records (whole RESP multibulks) right
    /// after a [`record`](Self::record) call for the same database and time,
    /// whose `SELECT` and clock framing they share.
    pub fn append_encoded(&mut self, bytes: &[u8]) {
        if self.enabled {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// This shard is held by cross-shard transaction `seq` of `coordinator`:
    /// its next effect opens the transaction's block (see [`TX_BEGIN_RECORD`]).
    pub fn begin_tx(&mut self, coordinator: u16, seq: u64) {
        self.tx = Some((coordinator, seq, false));
    }

    /// Close this shard's part of the transaction begun with
    /// [`begin_tx`](Self::begin_tx): with `commit`, this shard coordinated it
    /// and writes [`TX_COMMIT_RECORD`] (whenever `others_wrote` or it wrote
    /// itself); otherwise writes [`TX_END_RECORD`] if it wrote a block.
    /// Returns whether this shard wrote a block.
    pub fn end_tx(&mut self, commit: bool, others_wrote: bool) -> bool {
        let Some((coord, seq, wrote)) = self.tx.take() else {
            return false;
        };
        if !self.enabled {
            return false;
        }
        let mut n = itoa::Buffer::new();
        if commit {
            if wrote || others_wrote {
                encode(&mut self.buf, &[TX_COMMIT_RECORD, n.format(seq).as_bytes()]);
            }
        } else if wrote {
            let mut c = itoa::Buffer::new();
            encode(
                &mut self.buf,
                &[
                    TX_END_RECORD,
                    c.format(coord).as_bytes(),
                    n.format(seq).as_bytes(),
                ],
            );
        }
        wrote
    }

    /// The transaction holding this shard ended without committing (its
    /// coordinator went away): close its block, if one was written, with
    /// [`TX_ABORT_RECORD`] so start-up discards it.
    pub fn abort_tx(&mut self) {
        let Some((coord, seq, wrote)) = self.tx.take() else {
            return;
        };
        if self.enabled && wrote {
            let (mut c, mut n) = (itoa::Buffer::new(), itoa::Buffer::new());
            encode(
                &mut self.buf,
                &[
                    TX_ABORT_RECORD,
                    c.format(coord).as_bytes(),
                    n.format(seq).as_bytes(),
                ],
            );
        }
    }

    /// Take the recorded bytes (the shard loop writes them).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// The next records go to a new file: repeat `SELECT` and the clock there.
    pub fn new_file(&mut self) {
        self.db = None;
        self.clock_ms = None;
    }
}

/// Append `args` to `out` as one RESP multibulk (`*n\r\n$len\r\narg\r\n...`).
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut n = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(n.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(n.format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_and_clock_only_when_changed() {
        let mut log = AofLog::default();
        log.record(0, 5, &[b"DEL", b"k"]);
        assert!(log.is_empty(), "disabled log keeps nothing");
        log.set_enabled(true);
        log.record(0, 5, &[b"DEL", b"k"]);
        log.record(0, 5, &[b"DEL", b"j"]);
        log.record(2, 6, &[b"DEL", b"k"]);
        let text = String::from_utf8(log.take()).unwrap();
        assert_eq!(
            text,
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*2\r\n$8\r\nSS.CLOCK\r\n$1\r\n5\r\n\
             *2\r\n$3\r\nDEL\r\n$1\r\nk\r\n*2\r\n$3\r\nDEL\r\n$1\r\nj\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n*2\r\n$8\r\nSS.CLOCK\r\n$1\r\n6\r\n\
             *2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"
        );
        log.new_file();
        log.record(2, 6, &[b"DEL", b"k"]);
        assert!(log.take().starts_with(b"*2\r\n$6\r\nSELECT"));
    }
}
