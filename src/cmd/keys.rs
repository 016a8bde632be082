//! Keyspace commands: DEL, UNLINK, EXISTS, TOUCH, TYPE (on the shards owning
//! their keys) and KEYS, SCAN, DBSIZE, FLUSHDB, FLUSHALL (fanned out from the
//! connection's thread to every shard, or to the one shard a SCAN cursor names).

use bytes::Bytes;

use crate::cmd::args::{self, Args};
use crate::cmd::glob::{glob_match, is_match_all};
use crate::cmd::{
    merge_concat, merge_ok, merge_sum, on_shard, Action, CommandSpec, ConnCtx, ExecCtx, FanMerge,
    Flags, Handler, Keys, ShardReq,
};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::{ShardId, Slot, SlotMap, SLOTS};
use crate::shard::db::ShardDb;

/// A row of this family (group `generic`, no subcommands).
#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    keys: Keys,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        acl,
        summary,
        since,
        group: "generic",
        subcommands: &[],
        handler,
    }
}

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row(
        "DEL",
        -2,
        Flags::WRITE,
        Keys::ALL,
        &["keyspace", "write", "slow"],
        "Deletes one or more keys.",
        "1.0.0",
        Handler::Keyed {
            parse: parse_del,
            merge: FanMerge::SumInt,
        },
    ),
    row(
        "UNLINK",
        -2,
        Flags::WRITE.with(Flags::FAST),
        Keys::ALL,
        &["keyspace", "write", "fast"],
        "Asynchronously deletes one or more keys.",
        "4.0.0",
        Handler::Keyed {
            parse: parse_del,
            merge: FanMerge::SumInt,
        },
    ),
    row(
        "EXISTS",
        -2,
        Flags::READONLY.with(Flags::FAST),
        Keys::ALL,
        &["keyspace", "read", "fast"],
        "Determines whether one or more keys exist.",
        "1.0.0",
        Handler::Keyed {
            parse: parse_exists,
            merge: FanMerge::SumInt,
        },
    ),
    row(
        "TOUCH",
        -2,
        Flags::READONLY.with(Flags::FAST),
        Keys::ALL,
        &["keyspace", "read", "fast"],
        "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
        "3.2.1",
        Handler::Keyed {
            parse: parse_touch,
            merge: FanMerge::SumInt,
        },
    ),
    row(
        "TYPE",
        2,
        Flags::READONLY.with(Flags::FAST),
        Keys::FIRST,
        &["keyspace", "read", "fast"],
        "Determines the type of value stored at a key.",
        "1.0.0",
        Handler::Keyed {
            parse: parse_type,
            merge: FanMerge::Refuse,
        },
    ),
    row(
        "KEYS",
        2,
        Flags::READONLY,
        Keys::None,
        &["keyspace", "read", "slow", "dangerous"],
        "Returns all key names that match a pattern.",
        "1.0.0",
        Handler::Conn(keys_cmd),
    ),
    row(
        "SCAN",
        -2,
        Flags::READONLY,
        Keys::None,
        &["keyspace", "read", "slow"],
        "Iterates over the key names in the database.",
        "2.8.0",
        Handler::Conn(scan_cmd),
    ),
    row(
        "DBSIZE",
        1,
        Flags::READONLY.with(Flags::FAST),
        Keys::None,
        &["keyspace", "read", "fast"],
        "Returns the number of keys in the database.",
        "1.0.0",
        Handler::Conn(dbsize_cmd),
    ),
    row(
        "FLUSHDB",
        -1,
        Flags::WRITE,
        Keys::None,
        &["keyspace", "write", "slow", "dangerous"],
        "Removes all keys from the current database.",
        "1.0.0",
        Handler::Conn(flushdb_cmd),
    ),
    row(
        "FLUSHALL",
        -1,
        Flags::WRITE,
        Keys::None,
        &["keyspace", "write", "slow", "dangerous"],
        "Removes all keys from all databases.",
        "1.0.0",
        Handler::Conn(flushall_cmd),
    ),
];

/// A parsed `SCAN` request, run on the shard owning the cursor's slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Where to resume: (slot, hash48) decoded from the cursor.
    pub from: (u16, u64),
    /// How many keys to visit (before MATCH / TYPE filtering), at least 1.
    pub count: usize,
    /// `MATCH` pattern; `None` when absent or `*`.
    pub pattern: Option<Bytes>,
    /// `TYPE` filter, compared case-insensitively with the type names of `TYPE`.
    pub type_name: Option<Bytes>,
}

// ---------------------------------------------------------------- parsing (connection's thread)

/// `DEL key [key ...]` / `UNLINK key [key ...]`: this shard's part of the keys.
fn parse_del(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let keys = argv.get(1..).unwrap_or_default().to_vec();
    Ok(on_shard(move |db, cx| apply_del(db, cx, &keys)))
}

/// `EXISTS key [key ...]` / `TOUCH key [key ...]`.
fn parse_exists(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let keys = argv.get(1..).unwrap_or_default().to_vec();
    Ok(on_shard(move |db, cx| apply_exists(db, cx, &keys)))
}

/// `TOUCH key [key ...]`.
fn parse_touch(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let keys = argv.get(1..).unwrap_or_default().to_vec();
    Ok(on_shard(move |db, cx| apply_touch(db, cx, &keys)))
}

/// `TYPE key`.
fn parse_type(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = args::key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| apply_type(db, cx, &key)))
}

/// Parse a SCAN cursor as Redis's `parseScanCursorOrReply` does (`strtoul`):
/// optional sign (`-n` wraps modulo 2^64), decimal digits, no leading space,
/// no overflow. An empty argument reads as 0.
pub fn parse_cursor(b: &[u8]) -> Option<u64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        Some(_) => (false, b),
        None => return Some(0),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// The type names `SCAN ... TYPE` accepts, as `TYPE` answers them (any case).
const TYPE_NAMES: [&str; 6] = ["string", "list", "set", "zset", "hash", "stream"];

/// Parse `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`.
///
/// # Errors
/// In Redis's order: `ERR invalid cursor`; then per option: `ERR value is not
/// an integer or out of range` for a bad COUNT, `ERR syntax error` for COUNT < 1,
/// an unknown option or a missing option value, `ERR unknown type name 'x'`
/// for a TYPE that names no Redis type (Redis 7.2+; 7.0 answered an empty
/// page). Repeated options: the last wins.
/// # Reply
/// `Ok(None)` when the cursor lies past the last slot (the scan is over).
/// # Source
/// `scanCommand` / `scanGenericCommand`, redis/src/db.c (7.0).
pub fn parse_scan(argv: &[Bytes]) -> Result<Option<Scan>, CmdError> {
    let cursor = argv
        .get(1)
        .and_then(|c| parse_cursor(c))
        .ok_or_else(|| CmdError::msg("ERR invalid cursor"))?;
    let mut scan = Scan {
        from: (0, 0),
        count: 10,
        pattern: None,
        type_name: None,
    };
    let mut a = Args::new(argv);
    a.next_arg()?; // the cursor, parsed above
    while let Some(opt) = a.next_opt() {
        if a.is_empty() {
            return Err(CmdError::Syntax);
        }
        if args::is(opt, "COUNT") {
            let n = a.next_i64()?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            scan.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if args::is(opt, "MATCH") {
            let p = a.next_arg()?.clone();
            scan.pattern = (!is_match_all(&p)).then_some(p);
        } else if args::is(opt, "TYPE") {
            let name = a.next_arg()?;
            if !TYPE_NAMES.iter().any(|t| args::is(name, t)) {
                return Err(CmdError::msg(format!(
                    "ERR unknown type name '{}'",
                    String::from_utf8_lossy(name)
                )));
            }
            scan.type_name = Some(name.clone());
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let slot = cursor >> 48;
    if slot >= u64::from(SLOTS) {
        return Ok(None);
    }
    scan.from = (slot as u16, cursor & ((1 << 48) - 1));
    Ok(Some(scan))
}

/// `FLUSHDB` / `FLUSHALL` option: nothing, `ASYNC` or `SYNC` (both flush at once here).
fn parse_flush_mode(argv: &[Bytes]) -> Result<(), CmdError> {
    match argv {
        [_] => Ok(()),
        [_, mode] if args::is(mode, "ASYNC") || args::is(mode, "SYNC") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

/// One part per shard, each running `f`.
fn every_shard(cx: &ConnCtx<'_>, f: impl Fn() -> ShardReq) -> Vec<(ShardId, ShardReq)> {
    (0..cx.shared.shards.max(1))
        .map(|s| (ShardId(s), f()))
        .collect()
}

/// `KEYS pattern`
///
/// Every live key of the selected database matching the glob `pattern`
/// (see [`glob_match`]; `*` also matches the empty key), from every shard.
///
/// # Reply
/// Array of bulk strings, grouped by shard (Redis's order is unspecified too).
/// # Source
/// `keysCommand`, redis/src/db.c.
fn keys_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let pattern = args::key_at(argv, 1)?;
    let parts = every_shard(cx, || {
        let pattern = pattern.clone();
        on_shard(move |db, cx| apply_keys(db, cx, &pattern))
    });
    Ok(Action::FanOut {
        parts,
        merge: Box::new(merge_concat),
    })
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`
///
/// Fans out to the shard owning the cursor's slot and every later shard; each
/// scans up to COUNT keys of its own range (see [`apply_scan`] for the cursor
/// scheme and guarantees). The pages are joined in shard order for as long as
/// each shard finished its range, so a large COUNT walks the whole keyspace in
/// one call as it does in Redis; COUNT stays a hint (a call may return up to
/// COUNT keys per shard).
///
/// # Reply
/// `[next cursor as bulk string, [keys...]]`; cursor `0` ends the iteration.
/// # Errors
/// See [`parse_scan`].
fn scan_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let Some(scan) = parse_scan(argv)? else {
        return Ok(reply_scan(0, Vec::new()).into());
    };
    let map = cx.shared.slot_map.clone();
    let shards = map.shards();
    let first = map.shard(Slot(scan.from.0));
    let parts: Vec<(ShardId, ShardReq)> = (first.0..shards)
        .map(|s| {
            let mut part = scan.clone();
            if s != first.0 {
                part.from = (map.first_slot(ShardId(s)).0, 0);
            }
            let req = on_shard(move |db, cx| apply_scan(db, cx, &part));
            (ShardId(s), req)
        })
        .collect();
    let owners: Vec<ShardId> = parts.iter().map(|(s, _)| *s).collect();
    Ok(Action::FanOut {
        parts,
        merge: Box::new(move |pages| merge_scan(pages, &owners, &map)),
    })
}

/// Join SCAN pages from consecutive shards: take each page, and continue with
/// the next shard's page only while the current shard reported its range done
/// (its next cursor is 0 or lies in a later shard).
fn merge_scan(pages: Vec<Reply>, owners: &[ShardId], map: &SlotMap) -> Reply {
    if let Some(e) = crate::cmd::first_error(&pages) {
        return e;
    }
    let mut keys = Vec::new();
    let mut cursor = 0;
    for (page, owner) in pages.into_iter().zip(owners) {
        let Reply::Array(mut pair) = page else {
            break;
        };
        let (Some(Reply::Array(page_keys)), Some(Reply::Bulk(c))) = (pair.pop(), pair.pop()) else {
            break;
        };
        keys.extend(page_keys);
        cursor = parse_cursor(&c).unwrap_or(0);
        let done = cursor == 0 || map.shard(Slot((cursor >> 48) as u16)) != *owner;
        if !done {
            break;
        }
    }
    reply_scan(cursor, keys)
}

/// `DBSIZE` — number of keys in the selected database, summed over shards.
///
/// # Reply
/// Integer (keys whose TTL passed but were not yet collected count, as in Redis).
/// # Source
/// `dbsizeCommand`, redis/src/db.c.
fn dbsize_cmd(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let parts = every_shard(cx, || {
        on_shard(|db, cx| Reply::Int(db.keyspace(cx.db).len() as i64))
    });
    Ok(Action::FanOut {
        parts,
        merge: Box::new(merge_sum),
    })
}

/// `FLUSHDB [ASYNC|SYNC]` — delete every key of the selected database on every shard.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR syntax error` for any other argument.
/// # Source
/// `flushdbCommand`, redis/src/db.c.
fn flushdb_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    parse_flush_mode(argv)?;
    let parts = every_shard(cx, || {
        on_shard(|db, cx| {
            db.flush(cx.db);
            db.log_effect(cx, &[b"FLUSHDB"]);
            Reply::Ok
        })
    });
    Ok(Action::FanOut {
        parts,
        merge: Box::new(merge_ok),
    })
}

/// `FLUSHALL [ASYNC|SYNC]` — delete every key of every database on every shard.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR syntax error` for any other argument.
/// # Source
/// `flushallCommand`, redis/src/db.c.
fn flushall_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    parse_flush_mode(argv)?;
    let parts = every_shard(cx, || {
        on_shard(|db, cx| {
            for n in 0..db.databases() {
                db.flush(n);
            }
            db.log_effect(cx, &[b"FLUSHALL"]);
            Reply::Ok
        })
    });
    Ok(Action::FanOut {
        parts,
        merge: Box::new(merge_ok),
    })
}

// ---------------------------------------------------------------- apply (shard thread)

/// `DEL` / `UNLINK` on this shard's keys.
///
/// # Reply
/// Integer: how many of `keys` existed (and were removed); a key named twice counts once.
/// # Source
/// `delGenericCommand`, redis/src/db.c.
pub fn apply_del(db: &mut ShardDb, cx: &ExecCtx, keys: &[Bytes]) -> Reply {
    let mut n = 0;
    for k in keys {
        if db.remove(cx.db, k, cx.now_ms).is_some() {
            db.log_effect(cx, &[b"DEL", k]);
            n += 1;
        }
    }
    Reply::Int(n)
}

/// `EXISTS` on this shard's keys: not an access (OBJECT IDLETIME and FREQ
/// do not move).
///
/// # Reply
/// Integer: how many of `keys` exist; a key named twice counts twice.
/// # Source
/// `existsCommand`, redis/src/db.c (`LOOKUP_NOTOUCH`).
pub fn apply_exists(db: &mut ShardDb, cx: &ExecCtx, keys: &[Bytes]) -> Reply {
    Reply::Int(
        keys.iter()
            .filter(|k| db.peek(cx.db, k, cx.now_ms).is_some())
            .count() as i64,
    )
}

/// `TOUCH` on this shard's keys: each existing key's access time (and LFU
/// counter, under an LFU policy) moves, even for a client in `CLIENT
/// NO-TOUCH` mode (Redis 7.2+ exempts TOUCH).
///
/// # Reply
/// Integer: how many of `keys` exist; a key named twice counts twice.
/// # Source
/// `touchCommand`, redis/src/db.c.
pub fn apply_touch(db: &mut ShardDb, cx: &ExecCtx, keys: &[Bytes]) -> Reply {
    Reply::Int(
        keys.iter()
            .filter(|k| db.touch(cx.db, k, cx.now_ms))
            .count() as i64,
    )
}

/// `TYPE key`
///
/// # Reply
/// Simple string: the value's type (`string`, `stream`, ...) or `none` when missing.
/// # Source
/// `typeCommand`, redis/src/db.c.
pub fn apply_type(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Reply {
    // Not an access (Redis: LOOKUP_NOTOUCH).
    let name = db
        .peek(cx.db, key, cx.now_ms)
        .map(|e| e.value.type_name())
        .unwrap_or("none");
    Reply::simple(name)
}

/// `KEYS pattern` on this shard: live keys of the selected database matching `pattern`.
///
/// # Reply
/// Array of bulk strings in SCAN order.
pub fn apply_keys(db: &mut ShardDb, cx: &ExecCtx, pattern: &[u8]) -> Reply {
    let all = is_match_all(pattern);
    let mut out = Vec::new();
    db.scan_from(cx.db, (0, 0), cx.now_ms, |_, key, _| {
        if all || glob_match(pattern, key, false) {
            out.push(Reply::Bulk(key.clone()));
        }
        true
    });
    Reply::Array(out)
}

/// `SCAN` on the shard owning the cursor's slot.
///
/// Visits up to `count` live keys of this shard's slot range from the cursor's
/// (slot, hash48) position on, plus every further key sharing the last visited
/// position, so that resuming at the next position skips nothing. Then MATCH
/// and TYPE filter what is returned. The next cursor is the position of the first
/// key not visited; when this shard's range is exhausted it is the next
/// shard's first slot `<< 48`, or 0 after the last shard.
///
/// Guarantees (as Redis's): a key present for the whole iteration is returned
/// at least once (exactly once here, while no key is added or removed positions
/// never shift); keys added or removed meanwhile may or may not be returned.
///
/// # Reply
/// `[cursor, [keys...]]`.
/// # Source
/// `scanGenericCommand`, redis/src/db.c (cursor scheme is ours: slot, then hash).
pub fn apply_scan(db: &mut ShardDb, cx: &ExecCtx, scan: &Scan) -> Reply {
    let end_slot = db.slot_map.end_slot(db.id);
    let mut visited = 0usize;
    let mut last_pos: Option<(u16, u64)> = None;
    let mut next: Option<(u16, u64)> = None;
    let mut out = Vec::new();
    db.scan_from(cx.db, scan.from, cx.now_ms, |pos, key, entry| {
        if u32::from(pos.0) >= end_slot {
            return false;
        }
        if visited >= scan.count && last_pos != Some(pos) {
            next = Some(pos);
            return false;
        }
        visited += 1;
        last_pos = Some(pos);
        let type_ok = scan
            .type_name
            .as_ref()
            .is_none_or(|t| t.eq_ignore_ascii_case(entry.value.type_name().as_bytes()));
        let match_ok = scan
            .pattern
            .as_ref()
            .is_none_or(|p| glob_match(p, key, false));
        if type_ok && match_ok {
            out.push(Reply::Bulk(key.clone()));
        }
        true
    });
    let cursor = match next {
        Some((slot, hash)) => (u64::from(slot) << 48) | hash,
        None if db.id.0 + 1 < db.shards => {
            u64::from(db.slot_map.first_slot(ShardId(db.id.0 + 1)).0) << 48
        }
        None => 0,
    };
    reply_scan(cursor, out)
}

// ---------------------------------------------------------------- replies

/// `[cursor as bulk string, keys]`, the SCAN family's reply shape.
pub fn reply_scan(cursor: u64, keys: Vec<Reply>) -> Reply {
    let mut buf = itoa::Buffer::new();
    Reply::Array(vec![
        Reply::bulk_copy(buf.format(cursor)),
        Reply::Array(keys),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::db::Value;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn cursor_parsing_follows_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"123"), Some(123));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"abc"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1 "), None);
        assert_eq!(parse_cursor(b"-"), None);
    }

    #[test]
    fn scan_options() {
        let argv = |a: &[&str]| a.iter().map(|s| b(s)).collect::<Vec<_>>();
        assert_eq!(
            parse_scan(&argv(&["SCAN", "0", "COUNT", "0"])),
            Err(CmdError::Syntax)
        );
        assert_eq!(
            parse_scan(&argv(&["SCAN", "0", "COUNT", "x"])),
            Err(CmdError::NotInteger)
        );
        assert_eq!(
            parse_scan(&argv(&["SCAN", "0", "MATCH"])),
            Err(CmdError::Syntax)
        );
        let s = parse_scan(&argv(&["SCAN", "0", "match", "*", "type", "string"]))
            .unwrap()
            .unwrap();
        assert_eq!(s.pattern, None);
        assert_eq!(s.type_name, Some(b("string")));
        assert_eq!(
            parse_scan(&argv(&["SCAN", "0", "TYPE", "bogus"])),
            Err(CmdError::msg("ERR unknown type name 'bogus'"))
        );
        // Every name TYPE can answer is accepted, in any case.
        assert!(parse_scan(&argv(&["SCAN", "0", "TYPE", "HASH"])).is_ok());
        assert_eq!(
            parse_scan(&argv(&["SCAN", "18446744073709551615"])),
            Ok(None)
        );
    }

    #[test]
    fn scan_walks_one_shard_range_then_hands_over() {
        let mut db = ShardDb::new(ShardId(0), 2, 1);
        let cx = ExecCtx::at(0, 0);
        let mut keys = Vec::new();
        for i in 0..200 {
            let k = b(&format!("k{i}"));
            if crate::route::slot::slot_of(&k).shard(2) == ShardId(0) {
                keys.push(k.clone());
            }
            db.set(0, k, Value::Str(Bytes::new()), None);
        }
        let mut seen = Vec::new();
        let mut scan = Scan {
            from: (0, 0),
            count: 7,
            pattern: None,
            type_name: None,
        };
        loop {
            let Reply::Array(r) = apply_scan(&mut db, &cx, &scan) else {
                panic!("array")
            };
            let (Reply::Bulk(c), Reply::Array(ks)) = (&r[0], &r[1]) else {
                panic!("shape")
            };
            seen.extend(ks.iter().cloned());
            let c = parse_cursor(c).unwrap();
            if (c >> 48) >= 8192 {
                assert_eq!(c, 8192 << 48, "hands over to shard 1's first slot");
                break;
            }
            scan.from = ((c >> 48) as u16, c & ((1 << 48) - 1));
        }
        assert_eq!(seen.len(), keys.len());
    }
}
