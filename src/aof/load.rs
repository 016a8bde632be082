//! Loading a shard's append-only files at startup: parse RESP records and
//! replay them through the command table on the shard's fresh `ShardDb`.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

use bytes::Bytes;

use crate::cmd::table::{self, Handler};
use crate::cmd::ExecCtx;
use crate::reply::Reply;
use crate::shard::db::ShardDb;

use super::log::{
    CLOCK_RECORD, TX_ABORT_RECORD, TX_BEGIN_RECORD, TX_COMMIT_RECORD, TX_END_RECORD,
    TX_FLOOR_RECORD,
};
use super::manifest::Manifest;

/// What loading one shard found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Records replayed.
    pub records: u64,
    /// Bytes read (after any truncation).
    pub bytes: u64,
    /// Records whose replay answered an error. Always 0 after a successful
    /// load: such a record stops start-up (see [`load_shard`]).
    pub replay_errors: u64,
    /// Bytes cut from a torn tail, if any.
    pub truncated_bytes: u64,
}

/// Cross-shard transactions as one shard's files show them (see
/// [`crate::shard::hold`] and the `SS.TX*` records of [`super::log`]).
#[derive(Debug, Default)]
pub struct TxTail {
    /// Highest transaction sequence number this shard coordinated and
    /// committed (`SS.TXCOMMIT`, `SS.TXFLOOR`).
    pub max_commit: u64,
    /// A transaction block at the very end of the last file: whether it
    /// committed is known only once every shard has reported its
    /// `max_commit` (see [`resolve_tail`]).
    pub pending: Option<TailBlock>,
}

/// A transaction block left at the end of a shard's last file.
#[derive(Debug)]
pub struct TailBlock {
    /// Coordinating shard and its sequence number.
    pub coordinator: u16,
    pub seq: u64,
    /// `SS.TXEND` (or the coordinator's `SS.TXCOMMIT`) was seen.
    pub closed: bool,
    /// The block's records, `SS.TXBEGIN` excluded.
    records: Vec<Vec<Bytes>>,
    /// Replay position at the block's start.
    state: Replay,
    /// File and offset of the block's `SS.TXBEGIN` record.
    path: std::path::PathBuf,
    offset: u64,
}

/// Apply or cut the block left at the end of a shard's last file, once
/// `committed(coordinator)` can say up to which sequence number that
/// shard's transactions committed. A block is applied only when it is
/// complete and its transaction committed; otherwise the crash came before
/// the commit point and the file is cut at the block's start, so the
/// transaction is gone from every shard (all or nothing).
///
/// # Errors
/// When a record of an applied block fails, or the file cannot be cut.
pub fn resolve_tail(
    db: &mut ShardDb,
    tail: TailBlock,
    committed: impl Fn(u16) -> u64,
    stats: &mut LoadStats,
) -> Result<(), String> {
    let shown = tail.path.display().to_string();
    if tail.closed && committed(tail.coordinator) >= tail.seq {
        let mut state = tail.state;
        for argv in tail.records {
            state.apply(db, argv, stats).map_err(|e| {
                format!(
                    "cannot replay the transaction block at offset {} of {shown}: {e}",
                    tail.offset
                )
            })?;
        }
        return Ok(());
    }
    log::warn!(
        "the append only file {shown} ends with cross-shard transaction {}:{} that did not \
         commit before the server stopped; cutting it off at offset {} (no shard keeps any of it)",
        tail.coordinator,
        tail.seq,
        tail.offset
    );
    let f = OpenOptions::new()
        .write(true)
        .open(&tail.path)
        .map_err(|e| format!("cannot open {shown} to truncate it: {e}"))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(tail.offset);
    stats.truncated_bytes += len.saturating_sub(tail.offset);
    f.set_len(tail.offset)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("cannot truncate {shown}: {e}"))
}

/// Start-up meeting point of the shards' loaders: each reports the
/// transactions it committed as a coordinator, then waits for all, so a
/// block at the end of one shard's file can be judged by another's records.
#[derive(Debug, Default)]
pub struct TxSync {
    state: std::sync::Mutex<(usize, std::collections::HashMap<u16, u64>)>,
    all_in: std::sync::Condvar,
}

impl TxSync {
    /// Report shard `shard`'s highest committed sequence number, then wait
    /// until `shards` shards reported (a shard that fails to load reports
    /// 0, so nobody waits forever). Returns every shard's report.
    pub fn meet(
        &self,
        shards: usize,
        shard: u16,
        max_commit: u64,
    ) -> std::collections::HashMap<u16, u64> {
        let Ok(mut st) = self.state.lock() else {
            return Default::default();
        };
        st.0 += 1;
        st.1.insert(shard, max_commit);
        self.all_in.notify_all();
        while st.0 < shards {
            st = match self.all_in.wait(st) {
                Ok(g) => g,
                Err(_) => return Default::default(),
            };
        }
        st.1.clone()
    }
}

/// Parse one RESP multibulk record at the start of `buf`.
///
/// `Ok(Some((argv, len)))` for a complete record of `len` bytes, `Ok(None)`
/// when `buf` is a valid but incomplete prefix of one, `Err(what)` when the
/// bytes cannot begin a record.
pub fn parse_record(buf: &[u8]) -> Result<Option<(Vec<Bytes>, usize)>, String> {
    let mut pos = 0;
    let Some(n) = read_header(buf, &mut pos, b'*')? else {
        return Ok(None);
    };
    if n == 0 || n > 1024 * 1024 {
        return Err(format!("bad argument count {n}"));
    }
    let mut argv = Vec::with_capacity(n);
    for _ in 0..n {
        let Some(len) = read_header(buf, &mut pos, b'$')? else {
            return Ok(None);
        };
        if len > 512 * 1024 * 1024 {
            return Err(format!("bad bulk length {len}"));
        }
        let Some(end) = pos.checked_add(len) else {
            return Err("bad bulk length".into());
        };
        if buf.len() < end + 2 {
            // A valid prefix only if what we have of the terminator is right.
            if buf.len() == end + 1 && buf[end] != b'\r' {
                return Err("bulk string not terminated by CRLF".into());
            }
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err("bulk string not terminated by CRLF".into());
        }
        argv.push(Bytes::copy_from_slice(&buf[pos..end]));
        pos = end + 2;
    }
    Ok(Some((argv, pos)))
}

/// Read `<prefix><decimal>\r\n` at `*pos`; `Ok(None)` when incomplete.
fn read_header(buf: &[u8], pos: &mut usize, prefix: u8) -> Result<Option<usize>, String> {
    let Some(&first) = buf.get(*pos) else {
        return Ok(None);
    };
    if first != prefix {
        return Err(format!(
            "expected '{}', found byte 0x{first:02x}",
            prefix as char
        ));
    }
    let mut i = *pos + 1;
    let mut n: usize = 0;
    let mut digits = 0;
    loop {
        let Some(&b) = buf.get(i) else {
            return Ok(None);
        };
        match b {
            b'0'..=b'9' if digits < 12 => {
                n = n * 10 + usize::from(b - b'0');
                digits += 1;
            }
            b'\r' if digits > 0 => {
                return match buf.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => {
                        *pos = i + 2;
                        Ok(Some(n))
                    }
                    Some(_) => Err("header not terminated by CRLF".into()),
                };
            }
            _ => return Err(format!("bad header byte 0x{b:02x}")),
        }
        i += 1;
    }
}

/// Whether some complete record starts after a line end inside `tail`
/// (then an "incomplete" record before it is damage, not a torn write).
fn complete_record_follows(tail: &[u8]) -> bool {
    let mut i = 1;
    while i + 2 < tail.len() {
        if tail[i] == b'\r' && tail[i + 1] == b'\n' && tail[i + 2] == b'*' {
            if let Ok(Some(_)) = parse_record(&tail[i + 2..]) {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// Load every file of shard `m` from `dir` into `db` (whose log must be off).
///
/// Only one thing is ever changed on disk: an incomplete record at the very
/// end of the last file (a torn last write) is cut off, and only under
/// `aof-load-truncated yes` (the default, as in Redis). Everything else that
/// is wrong stops start-up, with the file untouched.
///
/// # Errors
/// A message naming the file, the byte offset and the repair step, for the
/// first record that is malformed, names an unknown command, or parses but
/// fails when replayed (its effect, and everything after it, would be
/// wrong); for an incomplete record that is not the torn tail of the last
/// file; and for a torn tail under `aof-load-truncated no`.
///
/// # Source
/// `loadSingleAppendOnlyFile`, redis/src/aof.c (7.x): the truncated-tail
/// rule and `aof-load-truncated`.
///
/// Cross-shard transaction blocks are applied when more records follow
/// them (the transaction was released, so it had committed); one at the
/// very end is left in [`TxTail::pending`] for [`resolve_tail`].
pub fn load_shard(
    db: &mut ShardDb,
    dir: &Path,
    m: &Manifest,
) -> Result<(LoadStats, TxTail), String> {
    let mut stats = LoadStats::default();
    let mut tx = TxTail::default();
    let cut_torn_tail = db.tunables.aof.load_truncated();
    let names: Vec<&String> = m.files().collect();
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        load_file(
            db,
            &dir.join(name),
            last,
            cut_torn_tail,
            &mut stats,
            &mut tx,
        )?;
    }
    Ok((stats, tx))
}

/// Replay the records in `bytes` (a whole file's worth, e.g. a rewrite's
/// serialized snapshot) into `db`, whose log must be off.
///
/// # Errors
/// A message naming the offset of the first record that is malformed,
/// incomplete or fails when replayed.
pub fn load_bytes(db: &mut ShardDb, bytes: &[u8]) -> Result<LoadStats, String> {
    let mut stats = LoadStats::default();
    let mut state = Replay::default();
    let mut tx = TxTail::default();
    let mut off = 0usize;
    while off < bytes.len() {
        match parse_record(&bytes[off..]) {
            Ok(Some((argv, len))) => {
                state
                    .feed(db, argv, off as u64, &mut stats, &mut tx)
                    .map_err(|e| format!("record at offset {off}: {e}"))?;
                off += len;
                stats.records += 1;
                stats.bytes += len as u64;
            }
            Ok(None) => return Err(format!("incomplete record at offset {off}")),
            Err(e) => return Err(format!("bad record at offset {off}: {e}")),
        }
    }
    // A running server's files hold no unfinished transaction.
    if let Some(block) = state.block.take() {
        if block.closed {
            state.apply_block(db, block, &mut stats)?;
        }
    }
    Ok(stats)
}

/// The repair step for damage at `offset` of `path`.
fn repair_step(path: &str, offset: u64) -> String {
    format!(
        "To repair: make a backup of the file, then cut it at that offset \
         (truncate -s {offset} {path}) to keep the records before it; the records \
         from that offset on are lost"
    )
}

/// Replay one file; `last` allows cutting a torn tail when `cut_torn_tail`.
fn load_file(
    db: &mut ShardDb,
    path: &Path,
    last: bool,
    cut_torn_tail: bool,
    stats: &mut LoadStats,
    tx: &mut TxTail,
) -> Result<(), String> {
    let shown = path.display().to_string();
    let mut f = File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut start = 0usize; // unconsumed bytes begin here in buf
    let mut file_off = 0u64; // file offset of buf[start]
    let mut eof = false;
    let mut state = Replay::default();
    loop {
        match parse_record(&buf[start..]) {
            Ok(Some((argv, len))) => {
                state.feed(db, argv, file_off, stats, tx).map_err(|e| {
                    format!(
                        "cannot replay the record at offset {file_off} of the append only \
                         file {shown}: {e}. Refusing to start: the state after it would be \
                         wrong. {}",
                        repair_step(&shown, file_off)
                    )
                })?;
                start += len;
                file_off += len as u64;
                stats.records += 1;
                stats.bytes += len as u64;
                continue;
            }
            Ok(None) if !eof => {}
            Ok(None) => break,
            Err(e) => {
                return Err(format!(
                    "bad file format reading the append only file {shown} at offset {file_off}: \
                     {e}. Refusing to start. {}",
                    repair_step(&shown, file_off)
                ))
            }
        }
        // Need more bytes: compact, then read.
        buf.drain(..start);
        start = 0;
        let old = buf.len();
        buf.resize(old + (1 << 20), 0);
        let n = f
            .read(&mut buf[old..])
            .map_err(|e| format!("cannot read {shown}: {e}"))?;
        buf.truncate(old + n);
        if n == 0 {
            eof = true;
        }
    }
    let tail = &buf[start..];
    if tail.is_empty() {
        return state.end_of_file(db, path, last, stats, tx);
    }
    if !last || complete_record_follows(tail) {
        return Err(format!(
            "bad file format reading the append only file {shown} at offset {file_off}: \
             incomplete record{}. Refusing to start. {}",
            if last {
                " followed by more records"
            } else {
                " in a file that is not the last"
            },
            repair_step(&shown, file_off)
        ));
    }
    if !cut_torn_tail {
        return Err(format!(
            "the append only file {shown} ends with an incomplete record ({} bytes at \
             offset {file_off}, a torn last write) and aof-load-truncated is no: refusing \
             to start. To repair: make a backup of the file, then cut it at that offset \
             (truncate -s {file_off} {shown}), or start with aof-load-truncated yes to \
             have the server cut it",
            tail.len()
        ));
    }
    log::warn!(
        "!!! the append only file {shown} ends with an incomplete record \
         ({} bytes at offset {file_off}, a torn last write); cutting it off (aof-load-truncated yes)",
        tail.len()
    );
    stats.truncated_bytes += tail.len() as u64;
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| format!("cannot open {shown} to truncate it: {e}"))?;
    f.set_len(file_off)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("cannot truncate {shown}: {e}"))?;
    state.end_of_file(db, path, last, stats, tx)
}

/// Replay position inside one file: selected database and clock, and the
/// cross-shard transaction block being read, if any.
#[derive(Debug, Default)]
struct Replay {
    db: usize,
    clock_ms: u64,
    block: Option<Block>,
}

/// A cross-shard transaction block read but not applied yet.
#[derive(Debug)]
struct Block {
    coordinator: u16,
    seq: u64,
    closed: bool,
    records: Vec<Vec<Bytes>>,
    /// Database and clock at the block's start.
    db: usize,
    clock_ms: u64,
    offset: u64,
}

/// `(coordinator, seq)` of an `SS.TXBEGIN` / `SS.TXEND` record.
fn tx_id(argv: &[Bytes]) -> Result<(u16, u64), String> {
    let num = |i: usize| {
        argv.get(i)
            .and_then(|a| std::str::from_utf8(a).ok())
            .and_then(|s| s.parse::<u64>().ok())
    };
    match (num(1), num(2), argv.len()) {
        (Some(c), Some(s), 3) => Ok((u16::try_from(c).map_err(|_| "bad shard")?, s)),
        _ => Err("bad transaction record".into()),
    }
}

impl Replay {
    /// Take one record in file order: transaction markers open and close
    /// blocks, records inside a block wait with it, anything else applies
    /// now (after a closed block waiting before it, which therefore
    /// committed).
    fn feed(
        &mut self,
        db: &mut ShardDb,
        argv: Vec<Bytes>,
        offset: u64,
        stats: &mut LoadStats,
        tx: &mut TxTail,
    ) -> Result<(), String> {
        let name = argv.first().map(|b| b.as_ref()).unwrap_or_default();
        if name.eq_ignore_ascii_case(TX_BEGIN_RECORD) {
            let (coordinator, seq) = tx_id(&argv)?;
            self.flush_closed(db, stats)?;
            if self.block.is_some() {
                return Err("a transaction block begins inside another".into());
            }
            self.block = Some(Block {
                coordinator,
                seq,
                closed: false,
                records: Vec::new(),
                db: self.db,
                clock_ms: self.clock_ms,
                offset,
            });
            return Ok(());
        }
        if name.eq_ignore_ascii_case(TX_ABORT_RECORD) {
            let id = tx_id(&argv)?;
            return match self.block.take() {
                Some(b) if !b.closed && (b.coordinator, b.seq) == id => Ok(()),
                _ => Err("SS.TXABORT without its SS.TXBEGIN".into()),
            };
        }
        if name.eq_ignore_ascii_case(TX_END_RECORD) {
            let id = tx_id(&argv)?;
            return match self.block.as_mut() {
                Some(b) if !b.closed && (b.coordinator, b.seq) == id => {
                    b.closed = true;
                    Ok(())
                }
                _ => Err("SS.TXEND without its SS.TXBEGIN".into()),
            };
        }
        if name.eq_ignore_ascii_case(TX_COMMIT_RECORD) || name.eq_ignore_ascii_case(TX_FLOOR_RECORD)
        {
            let seq = argv
                .get(1)
                .and_then(|a| std::str::from_utf8(a).ok())
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or("bad transaction record")?;
            tx.max_commit = tx.max_commit.max(seq);
            // The coordinator's own block ends with its commit record.
            if let Some(b) = self
                .block
                .take_if(|b| !b.closed && b.coordinator == db.id.0)
            {
                if b.seq != seq {
                    return Err("SS.TXCOMMIT for another transaction than the open block".into());
                }
                self.apply_block(db, b, stats)?;
            }
            return Ok(());
        }
        match self.block.as_mut() {
            Some(b) if !b.closed => {
                b.records.push(argv);
                Ok(())
            }
            _ => {
                self.flush_closed(db, stats)?;
                self.apply(db, argv, stats)
            }
        }
    }

    /// Apply a closed block waiting before the current record.
    fn flush_closed(&mut self, db: &mut ShardDb, stats: &mut LoadStats) -> Result<(), String> {
        if let Some(b) = self.block.take_if(|b| b.closed) {
            self.apply_block(db, b, stats)?;
        }
        Ok(())
    }

    /// Replay a block's records from its starting position.
    fn apply_block(
        &mut self,
        db: &mut ShardDb,
        b: Block,
        stats: &mut LoadStats,
    ) -> Result<(), String> {
        self.db = b.db;
        self.clock_ms = b.clock_ms;
        for argv in b.records {
            self.apply(db, argv, stats)?;
        }
        Ok(())
    }

    /// The file ended: a block still waiting is applied when later files
    /// follow (it was released, so it committed), refused when open there,
    /// and left to [`resolve_tail`] at the end of the last file.
    fn end_of_file(
        &mut self,
        db: &mut ShardDb,
        path: &Path,
        last: bool,
        stats: &mut LoadStats,
        tx: &mut TxTail,
    ) -> Result<(), String> {
        let Some(b) = self.block.take() else {
            return Ok(());
        };
        if !last {
            if !b.closed {
                return Err(format!(
                    "the append only file {} ends inside a transaction block but is not the last file",
                    path.display()
                ));
            }
            return self.apply_block(db, b, stats);
        }
        tx.pending = Some(TailBlock {
            coordinator: b.coordinator,
            seq: b.seq,
            closed: b.closed,
            records: b.records,
            state: Replay {
                db: b.db,
                clock_ms: b.clock_ms,
                block: None,
            },
            path: path.to_path_buf(),
            offset: b.offset,
        });
        Ok(())
    }

    /// Run one record. Every failure is fatal: an unknown or disallowed
    /// command, a bad record, and a command that answers an error (the log
    /// holds effects that applied when they were recorded, so an error means
    /// the state has diverged from what was acknowledged).
    fn apply(
        &mut self,
        db: &mut ShardDb,
        argv: Vec<Bytes>,
        stats: &mut LoadStats,
    ) -> Result<(), String> {
        let Some(name) = argv.first() else {
            return Err("empty record".into());
        };
        let num = |i: usize| -> Result<u64, String> {
            argv.get(i)
                .and_then(|a| std::str::from_utf8(a).ok())
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("bad {} record", String::from_utf8_lossy(name)))
        };
        if name.eq_ignore_ascii_case(b"SELECT") {
            let n = num(1)? as usize;
            if n >= db.databases() {
                return Err(format!("SELECT {n} beyond the configured databases"));
            }
            self.db = n;
            return Ok(());
        }
        if name.eq_ignore_ascii_case(CLOCK_RECORD) {
            self.clock_ms = num(1)?;
            return Ok(());
        }
        if name.eq_ignore_ascii_case(super::rewrite::MKSTREAM_RECORD) {
            let key = argv.get(1).ok_or("bad SS.MKSTREAM record")?;
            if let Err(e) = db.stream_for_write(self.db, key, true, self.clock_ms) {
                stats.replay_errors += 1;
                return Err(format!("SS.MKSTREAM answered '{e}'"));
            }
            return Ok(());
        }
        if name.eq_ignore_ascii_case(b"FLUSHDB") {
            db.flush(self.db);
            return Ok(());
        }
        if name.eq_ignore_ascii_case(b"FLUSHALL") {
            for n in 0..db.databases() {
                db.flush(n);
            }
            return Ok(());
        }
        if name.eq_ignore_ascii_case(b"FUNCTION") {
            return crate::cmd::function::replay_record(db, &argv)
                .map_err(|e| format!("FUNCTION record: {e}"));
        }
        if let Some(r) = crate::shard::delayed::replay(db, self.db, self.clock_ms, &argv)
            .or_else(|| super::effects::replay(db, self.db, self.clock_ms, &argv))
        {
            if let Err(e) = r {
                stats.replay_errors += 1;
                return Err(format!(
                    "{} answered '{e}'",
                    String::from_utf8_lossy(name).to_ascii_uppercase()
                ));
            }
            return Ok(());
        }
        let Some(spec) = table::lookup(name) else {
            return Err(format!(
                "unknown command '{}' reading the append only file",
                String::from_utf8_lossy(name)
            ));
        };
        if !spec.arity_ok(argv.len()) {
            return Err(format!(
                "wrong number of arguments for '{}' record",
                spec.name
            ));
        }
        let parse = match spec.handler {
            Handler::Keyed { parse, .. } | Handler::Blocking { parse, .. } => parse,
            Handler::Conn(_) => {
                return Err(format!(
                    "'{}' cannot appear in an append only file",
                    spec.name
                ))
            }
        };
        let cx = ExecCtx::at(self.db, self.clock_ms);
        let reply = match parse(&argv) {
            Ok(req) => crate::shard::msg::apply_as_client(req, db, &cx),
            Err(e) => Reply::Error(e),
        };
        if let Reply::Error(e) = reply {
            stats.replay_errors += 1;
            return Err(format!("{} answered '{e}'", spec.name));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_complete_incomplete_and_bad() {
        let rec = b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n";
        let (argv, len) = parse_record(rec).unwrap().unwrap();
        assert_eq!(len, rec.len());
        assert_eq!(
            argv,
            vec![Bytes::from_static(b"DEL"), Bytes::from_static(b"k")]
        );
        for cut in 0..rec.len() {
            assert_eq!(parse_record(&rec[..cut]), Ok(None), "prefix {cut}");
        }
        assert!(parse_record(b"+OK\r\n").is_err());
        assert!(parse_record(b"*2\r\n$3\r\nDELx\r\n").is_err());
        assert!(parse_record(b"*x\r\n").is_err());
        assert!(complete_record_follows(
            b"*2\r\n$9\r\nDEL\r\n*1\r\n$1\r\nk\r\n"
        ));
        assert!(!complete_record_follows(b"*2\r\n$9\r\nDEL\r\n$1\r\n"));
    }

    fn rec(args: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        super::super::log::encode(&mut out, &a);
        out
    }

    fn db() -> ShardDb {
        ShardDb::new(crate::route::slot::ShardId(1), 4, 16)
    }

    fn get(db: &mut ShardDb, key: &str) -> Option<Bytes> {
        db.get_str(0, key.as_bytes(), 0).ok().flatten().cloned()
    }

    #[test]
    fn transaction_blocks_followed_by_records_apply() {
        let mut bytes = Vec::new();
        for r in [
            &["SET", "a", "1"][..],
            &["SS.TXBEGIN", "0", "7"],
            &["SET", "b", "2"],
            &["SS.TXEND", "0", "7"],
            &["SET", "c", "3"],
            // This shard's own block closes with its commit record.
            &["SS.TXBEGIN", "1", "4"],
            &["SET", "d", "4"],
            &["SS.TXCOMMIT", "4"],
        ] {
            bytes.extend(rec(r));
        }
        let mut d = db();
        load_bytes(&mut d, &bytes).unwrap();
        for (k, v) in [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")] {
            assert_eq!(get(&mut d, k).as_deref(), Some(v.as_bytes()), "{k}");
        }
        // An aborted block (its coordinator went away) is dropped.
        let aborted = [
            rec(&["SS.TXBEGIN", "0", "8"]),
            rec(&["SET", "e", "5"]),
            rec(&["SS.TXABORT", "0", "8"]),
            rec(&["SET", "f", "6"]),
        ]
        .concat();
        let mut d2 = db();
        load_bytes(&mut d2, &aborted).unwrap();
        assert_eq!(get(&mut d2, "e"), None);
        assert_eq!(get(&mut d2, "f").as_deref(), Some(&b"6"[..]));
        let bad = [rec(&["SS.TXEND", "0", "7"])].concat();
        assert!(load_bytes(&mut db(), &bad).is_err());
    }

    #[test]
    fn a_block_at_the_end_waits_for_the_coordinators_verdict() {
        let dir = std::env::temp_dir().join(format!("ss-load-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tail.aof");
        let head = [rec(&["SET", "a", "1"]), rec(&["SS.TXCOMMIT", "9"])].concat();
        let block = [
            rec(&["SS.TXBEGIN", "2", "5"]),
            rec(&["SET", "b", "2"]),
            rec(&["SS.TXEND", "2", "5"]),
        ]
        .concat();
        for (committed, kept) in [(5u64, true), (4, false)] {
            std::fs::write(&path, [head.clone(), block.clone()].concat()).unwrap();
            let mut d = db();
            let (mut stats, mut tx) = (LoadStats::default(), TxTail::default());
            load_file(&mut d, &path, true, true, &mut stats, &mut tx).unwrap();
            assert_eq!(tx.max_commit, 9, "this shard's own commits");
            let tail = tx.pending.take().expect("the block waits");
            assert_eq!((tail.coordinator, tail.seq, tail.closed), (2, 5, true));
            assert_eq!(get(&mut d, "b"), None, "not applied before the verdict");
            resolve_tail(
                &mut d,
                tail,
                |c| if c == 2 { committed } else { 0 },
                &mut stats,
            )
            .unwrap();
            assert_eq!(get(&mut d, "b").is_some(), kept);
            let len = std::fs::metadata(&path).unwrap().len() as usize;
            let want = if kept {
                head.len() + block.len()
            } else {
                head.len()
            };
            assert_eq!(len, want, "an uncommitted block is cut from the file");
            assert_eq!(get(&mut d, "a").as_deref(), Some(&b"1"[..]));
        }
        // An open block (no SS.TXEND) never applies, whatever the verdict.
        std::fs::write(
            &path,
            [head.clone(), block[..block.len() - 20].to_vec()].concat(),
        )
        .unwrap();
        let mut d = db();
        let (mut stats, mut tx) = (LoadStats::default(), TxTail::default());
        load_file(&mut d, &path, true, true, &mut stats, &mut tx).unwrap();
        let tail = tx.pending.take().expect("the torn block waits");
        assert!(!tail.closed);
        resolve_tail(&mut d, tail, |_| u64::MAX, &mut stats).unwrap();
        assert_eq!(get(&mut d, "b"), None);
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, head.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
