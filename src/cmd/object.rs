//! Introspection of one key's value: OBJECT ENCODING, FREQ, IDLETIME,
//! REFCOUNT, MEMORY USAGE.
//!
//! # Source
//! redis/src/object.c (7.x): `objectCommand`, `memoryCommand`.

use bytes::Bytes;

use crate::cmd::args::{int_arg, is, parse_i64};
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Handler, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::{ShardDb, Value};

const fn sub(
    name: &'static str,
    arity: i16,
    keys: Keys,
    summary: &'static str,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
) -> CommandSpec {
    CommandSpec::keyed(
        name,
        arity,
        Flags::READONLY,
        keys,
        "generic",
        &["keyspace", "read", "slow"],
        summary,
        "4.0.0",
        parse,
        FanMerge::Refuse,
    )
}

/// A HELP subcommand row: no keys, no `readonly` flag (Redis flags them
/// `loading`, `stale`), so a monitor may ask for help as in Redis.
const fn help_sub(
    name: &'static str,
    acl: &'static [&'static str],
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
) -> CommandSpec {
    CommandSpec {
        flags: Flags::LOADING.with(Flags::STALE),
        acl,
        ..sub(
            name,
            2,
            Keys::None,
            "Returns helpful text about the different subcommands.",
            parse,
        )
    }
}

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
        name: "OBJECT",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::SECOND,
        acl: &["slow"],
        summary: "A container for object introspection commands.",
        since: "2.2.3",
        group: "generic",
        subcommands: &[
            sub(
                "OBJECT|ENCODING",
                3,
                Keys::SECOND,
                "Returns the internal encoding of a Redis object.",
                parse_object,
            ),
            sub(
                "OBJECT|FREQ",
                3,
                Keys::SECOND,
                "Returns the logarithmic access frequency counter of a Redis object.",
                parse_object,
            ),
            sub(
                "OBJECT|IDLETIME",
                3,
                Keys::SECOND,
                "Returns the time since the last access to a Redis object.",
                parse_object,
            ),
            CommandSpec {
                since: "2.2.3",
                ..sub(
                    "OBJECT|REFCOUNT",
                    3,
                    Keys::SECOND,
                    "Returns the reference count of a value of a key.",
                    parse_object,
                )
            },
            help_sub("OBJECT|HELP", &["keyspace", "slow"], parse_object),
        ],
        handler: Handler::Keyed {
            parse: parse_object,
            merge: FanMerge::Refuse,
        },
    },
    CommandSpec {
        name: "MEMORY",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::SECOND,
        acl: &["slow"],
        summary: "A container for memory diagnostics commands.",
        since: "4.0.0",
        group: "server",
        subcommands: &[
            sub(
                "MEMORY|USAGE",
                -3,
                Keys::SECOND,
                "Estimates the memory usage of a key.",
                parse_memory,
            ),
            crate::cmd::memory::SUBS[0],
            crate::cmd::memory::SUBS[1],
            crate::cmd::memory::SUBS[2],
            help_sub("MEMORY|HELP", &["slow"], parse_memory),
        ],
        handler: Handler::Keyed {
            parse: parse_memory,
            merge: FanMerge::Refuse,
        },
    },
];

/// `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key` | `OBJECT HELP`.
///
/// # Errors
/// `ERR wrong number of arguments for 'object|<sub>' command`,
/// `ERR unknown subcommand '<sub>'. Try OBJECT HELP.`
fn parse_object(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let sub = &argv[1];
    if is(sub, "ENCODING") {
        if argv.len() != 3 {
            return Err(CmdError::arity("object|encoding"));
        }
        let key = argv[2].clone();
        return Ok(on_shard(move |db, cx| {
            apply_object_encoding(db, cx, &key).into()
        }));
    }
    if is(sub, "REFCOUNT") {
        if argv.len() != 3 {
            return Err(CmdError::arity("object|refcount"));
        }
        let key = argv[2].clone();
        return Ok(on_shard(move |db, cx| apply_object_refcount(db, cx, &key)));
    }
    for (name, freq) in [("IDLETIME", false), ("FREQ", true)] {
        if is(sub, name) {
            if argv.len() != 3 {
                return Err(CmdError::arity(&format!("object|{}", name.to_lowercase())));
            }
            let key = argv[2].clone();
            return Ok(on_shard(move |db, cx| {
                apply_object_access(db, cx, &key, freq)
            }));
        }
    }
    if is(sub, "HELP") {
        if argv.len() != 2 {
            return Err(CmdError::arity("object|help"));
        }
        return Ok(on_shard(|_, _| {
            help_reply(&[
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key>.",
                "FREQ <key>",
                "    Return the access frequency index of the <key>. The returned integer is",
                "    proportional to the logarithm of the recent access frequency of the key.",
                "IDLETIME <key>",
                "    Return the idle time of the <key>, that is the approximated number of",
                "    seconds elapsed since the last access to the key.",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with the specified",
                "    <key>.",
                "HELP",
                "    Prints this help.",
            ])
        }));
    }
    Err(CmdError::unknown_subcommand("OBJECT", sub))
}

/// `MEMORY USAGE key [SAMPLES count]` | `MEMORY HELP`.
///
/// # Errors
/// `ERR wrong number of arguments for 'memory|usage' command`, `ERR value is
/// not an integer or out of range` (SAMPLES), `ERR syntax error` (negative
/// SAMPLES or another token), `ERR unknown subcommand '<sub>'. Try MEMORY HELP.`
fn parse_memory(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let sub = &argv[1];
    if is(sub, "USAGE") {
        if argv.len() < 3 {
            return Err(CmdError::arity("memory|usage"));
        }
        let mut j = 3;
        while j < argv.len() {
            if is(&argv[j], "SAMPLES") && j + 1 < argv.len() {
                if int_arg(&argv[j + 1])? < 0 {
                    return Err(CmdError::Syntax);
                }
                j += 2;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        let key = argv[2].clone();
        return Ok(on_shard(move |db, cx| apply_memory_usage(db, cx, &key)));
    }
    if is(sub, "HELP") {
        if argv.len() != 2 {
            return Err(CmdError::arity("memory|help"));
        }
        return Ok(on_shard(|_, _| {
            help_reply(&[
                "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return memory problems reports.",
                "MALLOC-STATS",
                "    Return internal statistics report from the memory allocator.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value. Nested values are",
                "    sampled up to <count> times (default: 5, 0 means sample all).",
                "HELP",
                "    Prints this help.",
            ])
        }));
    }
    Err(CmdError::unknown_subcommand("MEMORY", sub))
}

/// `OBJECT ENCODING key`.
///
/// # Reply
/// Bulk string: `stream` for streams; `listpack` / `quicklist` for lists
/// and `intset` / `listpack` / `hashtable` for sets (see [`crate::list`],
/// [`crate::set`]); `listpack` or `skiplist` for sorted sets
/// ([`zset_encoding`]); for strings `int` (a canonical 64-bit integer),
/// `embstr` (up to 44 bytes) or `raw`, as Redis encodes a value written by
/// SET (Redis also says `raw` for a short string after APPEND, SETRANGE or
/// a bit write; this does not). Null bulk for a missing key.
/// # Source
/// `objectCommand`, `tryObjectEncoding` (`OBJ_ENCODING_EMBSTR_SIZE_LIMIT` 44).
pub fn apply_object_encoding(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
) -> Result<Reply, CmdError> {
    // Not an access (Redis's OBJECT looks keys up with LOOKUP_NOTOUCH).
    let Some(entry) = db.peek(cx.db, key, cx.now_ms) else {
        return Ok(Reply::NullBulk);
    };
    let name = match &entry.value {
        Value::Stream(_) => "stream",
        Value::Str(s) => string_encoding(s),
        Value::List(l) => l.encoding(),
        Value::Set(s) => s.encoding(),
        Value::Zset(z) => zset_encoding(z),
    };
    Ok(Reply::bulk(name))
}

/// `OBJECT REFCOUNT key`. Not an access.
///
/// Every value here has one owner, so the answer is Redis's for a value
/// held by one key, except where Redis would hold one of its shared
/// integer objects: a string that [`string_encoding`] calls `int` with a
/// value in `0..=9999`, while `maxmemory` is 0 or the policy is neither
/// LRU nor LFU (Redis stops sharing then, so each key keeps its own
/// LRU/LFU data).
///
/// # Reply
/// Integer: [`SHARED_REFCOUNT`] for such a shared integer, else 1; null
/// bulk for a missing key.
/// # Source
/// `objectCommand` (`OBJ_SHARED_REFCOUNT` is `INT_MAX`), `tryObjectEncoding`
/// and `OBJ_SHARED_INTEGERS` (10000), redis/src/object.c, server.h (7.x);
/// checked against redis-server 7.0.15 (SET, INCR, MSET, a script's SET;
/// 1 for streams, lists, sets and sorted sets).
pub fn apply_object_refcount(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Reply {
    let maxmemory = db
        .tunables
        .maxmemory_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    let policy = db.tunables.eviction_policy();
    let sharing = maxmemory == 0 || !(policy.is_lru() || policy.is_lfu());
    let Some(entry) = db.peek(cx.db, key, cx.now_ms) else {
        return Reply::NullBulk;
    };
    let shared = match &entry.value {
        Value::Str(s) => {
            sharing
                && string_encoding(s) == "int"
                && parse_i64(s).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n))
        }
        _ => false,
    };
    Reply::Int(if shared { SHARED_REFCOUNT } else { 1 })
}

/// The reference count Redis reports for its shared objects
/// (`OBJ_SHARED_REFCOUNT`, `INT_MAX`).
pub const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// Integers `0..SHARED_INTEGERS` are shared objects in Redis
/// (`OBJ_SHARED_INTEGERS`).
const SHARED_INTEGERS: i64 = 10_000;

/// Encoding Redis reports for a sorted set: `listpack` while compact (see
/// [`crate::zset`]), `skiplist` once past `zset-max-listpack-*`.
pub fn zset_encoding(z: &crate::zset::SortedSet) -> &'static str {
    if z.is_listpack() {
        "listpack"
    } else {
        "skiplist"
    }
}

/// `OBJECT IDLETIME key` (`freq` false) / `OBJECT FREQ key` (`freq` true).
/// Neither counts as an access.
///
/// # Reply
/// Integer: seconds since the last access, or the LFU counter (decayed to
/// now); null bulk for a missing key.
/// # Errors
/// IDLETIME under an LFU `maxmemory-policy`, FREQ under any other: Redis's
/// texts (the data is not tracked then).
/// # Source
/// `objectCommand`, redis/src/object.c.
pub fn apply_object_access(db: &mut ShardDb, cx: &ExecCtx, key: &[u8], freq: bool) -> Reply {
    let lfu = db.tunables.eviction_policy().is_lfu();
    let params = db.tunables.lfu();
    let Some(entry) = db.peek(cx.db, key, cx.now_ms) else {
        return Reply::NullBulk;
    };
    const ADJUST: &str = "Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
    match (freq, lfu) {
        (false, true) => Reply::Error(CmdError::msg(format!(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. {ADJUST}"
        ))),
        (true, false) => Reply::Error(CmdError::msg(format!(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. {ADJUST}"
        ))),
        (false, false) => {
            Reply::Int((cx.now_ms.saturating_sub(entry.access.last_access_ms) / 1000) as i64)
        }
        (true, true) => Reply::Int(i64::from(entry.access.lfu_decayed(cx.now_ms, params))),
    }
}

/// Encoding Redis gives a string value stored by SET.
pub fn string_encoding(s: &[u8]) -> &'static str {
    if s.len() <= 20 && parse_i64(s).is_some() {
        "int"
    } else if s.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// `MEMORY USAGE key [SAMPLES count]`: estimated bytes held by the key and
/// its value (SAMPLES is accepted; streams are measured in full).
///
/// # Reply
/// Integer bytes; null bulk for a missing key.
pub fn apply_memory_usage(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Reply {
    // Not an access (Redis reads the dict entry directly).
    let Some(entry) = db.peek(cx.db, key, cx.now_ms) else {
        return Reply::NullBulk;
    };
    // Key bytes plus the dict entry and object header Redis also counts.
    let overhead = key.len() + 3 * std::mem::size_of::<usize>() + 16;
    Reply::Int((entry.value.memory_usage_bytes() + overhead) as i64)
}

fn help_reply(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::slot::ShardId;

    #[test]
    fn encodings_and_usage() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        let cx = ExecCtx::at(0, 0);
        for (v, enc) in [
            ("123", "int"),
            ("-5", "int"),
            ("0123", "embstr"),
            ("hello", "embstr"),
            (&"x".repeat(45)[..], "raw"),
        ] {
            db.set(
                0,
                Bytes::from_static(b"k"),
                Value::Str(Bytes::copy_from_slice(v.as_bytes())),
                None,
            );
            assert_eq!(
                apply_object_encoding(&mut db, &cx, b"k"),
                Ok(Reply::bulk(enc))
            );
        }
        db.set(
            0,
            Bytes::from_static(b"s"),
            Value::Stream(Box::default()),
            None,
        );
        assert_eq!(
            apply_object_encoding(&mut db, &cx, b"s"),
            Ok(Reply::bulk("stream"))
        );
        assert_eq!(
            apply_object_encoding(&mut db, &cx, b"none"),
            Ok(Reply::NullBulk)
        );
        assert!(matches!(apply_memory_usage(&mut db, &cx, b"s"), Reply::Int(n) if n > 0));
        assert_eq!(apply_memory_usage(&mut db, &cx, b"none"), Reply::NullBulk);
    }

    #[test]
    fn refcount_shares_small_integers_as_redis() {
        use std::sync::atomic::Ordering;
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        let cx = ExecCtx::at(0, 0);
        let put = |db: &mut ShardDb, v: &'static str| {
            db.set(
                0,
                Bytes::from_static(b"k"),
                Value::Str(Bytes::from_static(v.as_bytes())),
                None,
            );
        };
        for (v, want) in [
            ("100", SHARED_REFCOUNT),
            ("9999", SHARED_REFCOUNT),
            ("10000", 1),
            ("-1", 1),
            ("0100", 1),
        ] {
            put(&mut db, v);
            assert_eq!(
                apply_object_refcount(&mut db, &cx, b"k"),
                Reply::Int(want),
                "{v}"
            );
        }
        assert_eq!(
            apply_object_refcount(&mut db, &cx, b"none"),
            Reply::NullBulk
        );
        // No sharing under an LRU or LFU policy with a maxmemory.
        put(&mut db, "7");
        db.tunables
            .maxmemory_bytes
            .store(1 << 30, Ordering::Relaxed);
        db.tunables.maxmemory_policy.store(
            crate::config::EvictionPolicy::AllkeysLfu as u8,
            Ordering::Relaxed,
        );
        assert_eq!(apply_object_refcount(&mut db, &cx, b"k"), Reply::Int(1));
    }
}
