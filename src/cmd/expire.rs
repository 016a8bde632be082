//! Expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, PERSIST,
//! EXPIRETIME, PEXPIRETIME. Deadlines are absolute wall-clock ms; lazy and
//! active expiry live in [`ShardDb`].

use bytes::Bytes;

use crate::cmd::args;
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::ShardDb;

/// A single-key row of this family (group `generic`).
const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
) -> CommandSpec {
    CommandSpec::keyed(
        name,
        arity,
        flags,
        Keys::FIRST,
        "generic",
        acl,
        summary,
        since,
        parse,
        FanMerge::Refuse,
    )
}

const WRITE_FAST: Flags = Flags::WRITE.with(Flags::FAST);
const READ_FAST: Flags = Flags::READONLY.with(Flags::FAST);
const ACL_WRITE: &[&str] = &["keyspace", "write", "fast"];
const ACL_READ: &[&str] = &["keyspace", "read", "fast"];

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row(
        "EXPIRE",
        -3,
        WRITE_FAST,
        ACL_WRITE,
        "Sets the expiration time of a key in seconds.",
        "1.0.0",
        parse_expire,
    ),
    row(
        "PEXPIRE",
        -3,
        WRITE_FAST,
        ACL_WRITE,
        "Sets the expiration time of a key in milliseconds.",
        "2.6.0",
        parse_pexpire,
    ),
    row(
        "EXPIREAT",
        -3,
        WRITE_FAST,
        ACL_WRITE,
        "Sets the expiration time of a key to a Unix timestamp.",
        "1.2.0",
        parse_expireat,
    ),
    row(
        "PEXPIREAT",
        -3,
        WRITE_FAST,
        ACL_WRITE,
        "Sets the expiration time of a key to a Unix milliseconds timestamp.",
        "2.6.0",
        parse_pexpireat,
    ),
    row(
        "TTL",
        2,
        READ_FAST,
        ACL_READ,
        "Returns the expiration time in seconds of a key.",
        "1.0.0",
        parse_ttl,
    ),
    row(
        "PTTL",
        2,
        READ_FAST,
        ACL_READ,
        "Returns the expiration time in milliseconds of a key.",
        "2.6.0",
        parse_pttl,
    ),
    row(
        "EXPIRETIME",
        2,
        READ_FAST,
        ACL_READ,
        "Returns the expiration time of a key as a Unix timestamp.",
        "7.0.0",
        parse_expiretime,
    ),
    row(
        "PEXPIRETIME",
        2,
        READ_FAST,
        ACL_READ,
        "Returns the expiration time of a key as a Unix milliseconds timestamp.",
        "7.0.0",
        parse_pexpiretime,
    ),
    row(
        "PERSIST",
        2,
        WRITE_FAST,
        ACL_WRITE,
        "Removes the expiration time of a key.",
        "2.2.0",
        parse_persist,
    ),
];

/// `EXPIRE`-family condition flags (Redis 7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireFlags {
    /// Set only when the key has no TTL.
    pub nx: bool,
    /// Set only when the key has a TTL.
    pub xx: bool,
    /// Set only when the new deadline is later than the current one (no TTL = infinite).
    pub gt: bool,
    /// Set only when the new deadline is earlier than the current one (no TTL = infinite).
    pub lt: bool,
}

/// A parsed `EXPIRE` / `PEXPIRE` / `EXPIREAT` / `PEXPIREAT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expire {
    /// The key whose TTL changes.
    pub key: Bytes,
    /// The deadline in ms: relative to now when `relative`, else absolute (Unix ms).
    pub when_ms: i64,
    /// EXPIRE / PEXPIRE (offset from now) rather than EXPIREAT / PEXPIREAT.
    pub relative: bool,
    /// NX / XX / GT / LT conditions.
    pub flags: ExpireFlags,
    /// Command name for `ERR invalid expire time in '<cmd>' command`.
    pub cmd: &'static str,
}

// ---------------------------------------------------------------- parsing (connection's thread)

/// Parse `<cmd> key time [NX|XX|GT|LT ...]`; `seconds` says whether `time` is in
/// seconds, `relative` whether it is an offset from now.
///
/// # Errors
/// In Redis's order: `ERR Unsupported option <opt>` for an unknown flag;
/// `ERR NX and XX, GT or LT options at the same time are not compatible`;
/// `ERR GT and LT options at the same time are not compatible`; `ERR value is
/// not an integer or out of range` for `time`; `ERR invalid expire time in
/// '<cmd>' command` when converting seconds to ms overflows.
/// # Source
/// `expireGenericCommand`, `parseExtendedExpireArgumentsOrReply`, redis/src/expire.c (7.0).
pub fn parse_expire_generic(
    argv: &[Bytes],
    cmd: &'static str,
    seconds: bool,
    relative: bool,
) -> Result<Expire, CmdError> {
    let (Some(key), Some(time)) = (argv.get(1), argv.get(2)) else {
        return Err(CmdError::arity(cmd));
    };
    let mut flags = ExpireFlags::default();
    for opt in argv.get(3..).unwrap_or_default() {
        if args::is(opt, "NX") {
            flags.nx = true;
        } else if args::is(opt, "XX") {
            flags.xx = true;
        } else if args::is(opt, "GT") {
            flags.gt = true;
        } else if args::is(opt, "LT") {
            flags.lt = true;
        } else {
            return Err(CmdError::quoting(&[
                b"ERR Unsupported option ",
                args::c_str(opt),
            ]));
        }
    }
    if flags.nx && (flags.xx || flags.gt || flags.lt) {
        return Err(CmdError::msg(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if flags.gt && flags.lt {
        return Err(CmdError::msg(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let t = args::int_arg(time)?;
    let when_ms = if seconds {
        t.checked_mul(1000)
            .ok_or_else(|| CmdError::InvalidExpire { cmd: cmd.into() })?
    } else {
        t
    };
    Ok(Expire {
        key: key.clone(),
        when_ms,
        relative,
        flags,
        cmd,
    })
}

fn expire_req(e: Expire) -> ShardReq {
    on_shard(move |db, cx| apply_expire(db, cx, &e).into())
}

/// `EXPIRE key seconds [NX|XX|GT|LT]`.
fn parse_expire(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_expire_generic(argv, "expire", true, true).map(expire_req)
}

/// `PEXPIRE key milliseconds [NX|XX|GT|LT]`.
fn parse_pexpire(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_expire_generic(argv, "pexpire", false, true).map(expire_req)
}

/// `EXPIREAT key unix-time-seconds [NX|XX|GT|LT]`.
fn parse_expireat(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_expire_generic(argv, "expireat", true, false).map(expire_req)
}

/// `PEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT]`.
fn parse_pexpireat(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_expire_generic(argv, "pexpireat", false, false).map(expire_req)
}

/// What a TTL-reading command reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TtlKind {
    /// Remaining time (TTL / PTTL).
    Remaining,
    /// Absolute deadline (EXPIRETIME / PEXPIRETIME).
    Absolute,
}

fn ttl_req(argv: &[Bytes], kind: TtlKind, ms: bool) -> Result<ShardReq, CmdError> {
    let key = args::key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| apply_ttl(db, cx, &key, kind, ms)))
}

/// `TTL key`.
fn parse_ttl(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    ttl_req(argv, TtlKind::Remaining, false)
}

/// `PTTL key`.
fn parse_pttl(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    ttl_req(argv, TtlKind::Remaining, true)
}

/// `EXPIRETIME key`.
fn parse_expiretime(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    ttl_req(argv, TtlKind::Absolute, false)
}

/// `PEXPIRETIME key`.
fn parse_pexpiretime(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    ttl_req(argv, TtlKind::Absolute, true)
}

/// `PERSIST key`.
fn parse_persist(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = args::key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| apply_persist(db, cx, &key)))
}

// ---------------------------------------------------------------- apply (shard thread)

/// `EXPIRE` / `PEXPIRE` / `EXPIREAT` / `PEXPIREAT` on the owning shard.
///
/// Sets the key's deadline (ms since the Unix epoch) to `when_ms` (+ now when
/// relative). A deadline at or before now deletes the key.
///
/// # Reply
/// Integer 1 when the TTL was set (or the key deleted), 0 when the key is
/// missing or a NX/XX/GT/LT condition failed.
/// # Errors
/// `ERR invalid expire time in '<cmd>' command` when now + time overflows.
/// # Source
/// `expireGenericCommand`, redis/src/expire.c (7.0).
pub fn apply_expire(db: &mut ShardDb, cx: &ExecCtx, e: &Expire) -> Result<Reply, CmdError> {
    let now = i64::try_from(cx.now_ms).unwrap_or(i64::MAX);
    let when = if e.relative {
        e.when_ms
            .checked_add(now)
            .ok_or_else(|| CmdError::InvalidExpire { cmd: e.cmd.into() })?
    } else {
        e.when_ms
    };
    let Some(entry) = db.get(cx.db, &e.key, cx.now_ms) else {
        return Ok(Reply::Int(0));
    };
    let current = entry
        .expire_at_ms
        .map(|at| i64::try_from(at).unwrap_or(i64::MAX));
    let f = e.flags;
    let refused = (f.nx && current.is_some())
        || (f.xx && current.is_none())
        || (f.gt && current.is_none_or(|cur| when <= cur))
        || (f.lt && current.is_some_and(|cur| when >= cur));
    if refused {
        return Ok(Reply::Int(0));
    }
    if when <= now {
        db.remove(cx.db, &e.key, cx.now_ms);
    } else {
        db.set_expire(cx.db, &e.key, Some(when as u64));
    }
    // Logged as an absolute PEXPIREAT (or DEL): replay never depends on when it runs.
    db.log_ttl_state(cx, &e.key);
    Ok(Reply::Int(1))
}

/// `TTL` / `PTTL` / `EXPIRETIME` / `PEXPIRETIME` on the owning shard.
///
/// # Reply
/// Integer: -2 when the key is missing, -1 when it has no TTL; else the
/// remaining time (TTL/PTTL) or the absolute deadline (Unix time), in ms when
/// `ms`, else in seconds rounded to the nearest second.
/// # Source
/// `ttlGenericCommand`, redis/src/expire.c (7.0).
fn apply_ttl(db: &mut ShardDb, cx: &ExecCtx, key: &[u8], kind: TtlKind, ms: bool) -> Reply {
    // Not an access (Redis: LOOKUP_NOTOUCH).
    let Some(entry) = db.peek(cx.db, key, cx.now_ms) else {
        return Reply::Int(-2);
    };
    let Some(at) = entry.expire_at_ms else {
        return Reply::Int(-1);
    };
    let v = match kind {
        TtlKind::Remaining => at.saturating_sub(cx.now_ms),
        TtlKind::Absolute => at,
    };
    let v = if ms { v } else { v.saturating_add(500) / 1000 };
    Reply::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

/// `PERSIST key` on the owning shard: drop the key's TTL.
///
/// # Reply
/// Integer 1 when a TTL was removed, 0 when the key is missing or had none.
/// # Source
/// `persistCommand`, redis/src/expire.c.
pub fn apply_persist(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Reply {
    let had_ttl = db
        .get(cx.db, key, cx.now_ms)
        .is_some_and(|e| e.expire_at_ms.is_some());
    if had_ttl {
        db.set_expire(cx.db, key, None);
        db.log_effect(cx, &[b"PERSIST", key]);
    }
    Reply::Int(i64::from(had_ttl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::slot::ShardId;
    use crate::shard::db::Value;

    fn argv(a: &[&str]) -> Vec<Bytes> {
        a.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn flags_and_conditions() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        let cx = ExecCtx::at(0, 1_000_000);
        db.set(0, Bytes::from_static(b"k"), Value::Str(Bytes::new()), None);
        let run = |db: &mut ShardDb, a: &[&str]| {
            let e = parse_expire_generic(&argv(a), "expire", true, true).unwrap();
            apply_expire(db, &cx, &e).unwrap()
        };
        assert_eq!(run(&mut db, &["EXPIRE", "k", "100", "XX"]), Reply::Int(0));
        assert_eq!(run(&mut db, &["EXPIRE", "k", "100", "GT"]), Reply::Int(0));
        assert_eq!(run(&mut db, &["EXPIRE", "k", "100", "LT"]), Reply::Int(1));
        assert_eq!(run(&mut db, &["EXPIRE", "k", "50", "NX"]), Reply::Int(0));
        assert_eq!(run(&mut db, &["EXPIRE", "k", "200", "GT"]), Reply::Int(1));
        assert_eq!(run(&mut db, &["EXPIRE", "k", "300", "LT"]), Reply::Int(0));
        assert_eq!(
            apply_ttl(&mut db, &cx, b"k", TtlKind::Remaining, false),
            Reply::Int(200)
        );
        assert_eq!(run(&mut db, &["EXPIRE", "k", "-1"]), Reply::Int(1));
        assert_eq!(
            apply_ttl(&mut db, &cx, b"k", TtlKind::Remaining, true),
            Reply::Int(-2)
        );
    }

    #[test]
    fn parse_errors_in_redis_order() {
        let err = |a: &[&str]| parse_expire_generic(&argv(a), "expire", true, true).unwrap_err();
        assert_eq!(
            err(&["EXPIRE", "k", "x", "foo"]).to_string(),
            "ERR Unsupported option foo"
        );
        assert_eq!(err(&["EXPIRE", "k", "x"]), CmdError::NotInteger);
        assert_eq!(
            err(&["EXPIRE", "k", "9223372036854775807"]).to_string(),
            "ERR invalid expire time in 'expire' command"
        );
    }
}
