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

use super::log::CLOCK_RECORD;
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
pub fn load_shard(db: &mut ShardDb, dir: &Path, m: &Manifest) -> Result<LoadStats, String> {
    let mut stats = LoadStats::default();
    let cut_torn_tail = db.tunables.aof.load_truncated();
    let names: Vec<&String> = m.files().collect();
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        load_file(db, &dir.join(name), last, cut_torn_tail, &mut stats)?;
    }
    Ok(stats)
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
    let mut off = 0usize;
    while off < bytes.len() {
        match parse_record(&bytes[off..]) {
            Ok(Some((argv, len))) => {
                state
                    .apply(db, argv, &mut stats)
                    .map_err(|e| format!("record at offset {off}: {e}"))?;
                off += len;
                stats.records += 1;
                stats.bytes += len as u64;
            }
            Ok(None) => return Err(format!("incomplete record at offset {off}")),
            Err(e) => return Err(format!("bad record at offset {off}: {e}")),
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
                state.apply(db, argv, stats).map_err(|e| {
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
        return Ok(());
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
    Ok(())
}

/// Replay position inside one file: selected database and clock.
#[derive(Default)]
struct Replay {
    db: usize,
    clock_ms: u64,
}

impl Replay {
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
        if let Some(r) = super::effects::replay(db, self.db, self.clock_ms, &argv) {
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
            Ok(req) => req.apply(db, &cx),
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
}
