//! String commands: GET, SET, GETDEL, GETEX, SETNX, SETEX, PSETEX, INCR,
//! INCRBY, DECR, DECRBY, INCRBYFLOAT, APPEND, STRLEN, MGET, MSET, MSETNX.

use crate::ldouble::LongDouble;
use bytes::{Bytes, BytesMut};

use crate::cmd::args::{self, key_at, Args};
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::{Entry, ShardDb, Value};

/// A row of this family (group `string`).
#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    keys: Keys,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    merge: FanMerge,
) -> CommandSpec {
    CommandSpec::keyed(
        name, arity, flags, keys, "string", acl, summary, since, parse, merge,
    )
}

const W_OOM: Flags = Flags::WRITE.with(Flags::DENYOOM);
const W_OOM_FAST: Flags = W_OOM.with(Flags::FAST);
const R_FAST: Flags = Flags::READONLY.with(Flags::FAST);
const ACL_W_SLOW: &[&str] = &["write", "string", "slow"];
const ACL_W_FAST: &[&str] = &["write", "string", "fast"];
const ACL_R_FAST: &[&str] = &["read", "string", "fast"];
const REFUSE: FanMerge = FanMerge::Refuse;

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row(
        "GET",
        2,
        R_FAST,
        Keys::FIRST,
        ACL_R_FAST,
        "Returns the string value of a key.",
        "1.0.0",
        parse_get,
        REFUSE,
    ),
    row(
        "SET",
        -3,
        W_OOM,
        Keys::FIRST,
        ACL_W_SLOW,
        "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
        "1.0.0",
        parse_set,
        REFUSE,
    ),
    row(
        "GETDEL",
        2,
        Flags::WRITE.with(Flags::FAST),
        Keys::FIRST,
        ACL_W_FAST,
        "Returns the string value of a key after deleting the key.",
        "6.2.0",
        parse_getdel,
        REFUSE,
    ),
    row(
        "GETEX",
        -2,
        Flags::WRITE.with(Flags::FAST),
        Keys::FIRST,
        ACL_W_FAST,
        "Returns the string value of a key after setting its expiration time.",
        "6.2.0",
        parse_getex,
        REFUSE,
    ),
    row(
        "SETNX",
        3,
        W_OOM_FAST,
        Keys::FIRST,
        ACL_W_FAST,
        "Set the string value of a key only when the key doesn't exist.",
        "1.0.0",
        parse_setnx,
        REFUSE,
    ),
    row(
        "SETEX",
        4,
        W_OOM,
        Keys::FIRST,
        ACL_W_SLOW,
        "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.",
        "2.0.0",
        parse_setex,
        REFUSE,
    ),
    row(
        "PSETEX",
        4,
        W_OOM,
        Keys::FIRST,
        ACL_W_SLOW,
        "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.",
        "2.6.0",
        parse_psetex,
        REFUSE,
    ),
    row(
        "INCR",
        2,
        W_OOM_FAST,
        Keys::FIRST,
        ACL_W_FAST,
        "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
        "1.0.0",
        parse_incr,
        REFUSE,
    ),
    row(
        "DECR",
        2,
        W_OOM_FAST,
        Keys::FIRST,
        ACL_W_FAST,
        "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
        "1.0.0",
        parse_decr,
        REFUSE,
    ),
    row(
        "INCRBY",
        3,
        W_OOM_FAST,
        Keys::FIRST,
        ACL_W_FAST,
        "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        "1.0.0",
        parse_incrby,
        REFUSE,
    ),
    row(
        "DECRBY",
        3,
        W_OOM_FAST,
        Keys::FIRST,
        ACL_W_FAST,
        "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.",
        "1.0.0",
        parse_decrby,
        REFUSE,
    ),
    row(
        "INCRBYFLOAT",
        3,
        W_OOM_FAST,
        Keys::FIRST,
        ACL_W_FAST,
        "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        "2.6.0",
        parse_incrbyfloat,
        REFUSE,
    ),
    row(
        "APPEND",
        3,
        W_OOM_FAST,
        Keys::FIRST,
        ACL_W_FAST,
        "Appends a string to the value of a key. Creates the key if it doesn't exist.",
        "2.0.0",
        parse_append,
        REFUSE,
    ),
    row(
        "STRLEN",
        2,
        R_FAST,
        Keys::FIRST,
        ACL_R_FAST,
        "Returns the length of a string value.",
        "2.2.0",
        parse_strlen,
        REFUSE,
    ),
    row(
        "MGET",
        -2,
        R_FAST,
        Keys::Range {
            first: 1,
            last: -1,
            step: 1,
        },
        ACL_R_FAST,
        "Atomically returns the string values of one or more keys.",
        "1.0.0",
        parse_mget,
        FanMerge::KeyOrder,
    ),
    row(
        "MSET",
        -3,
        W_OOM,
        Keys::Range {
            first: 1,
            last: -1,
            step: 2,
        },
        ACL_W_SLOW,
        "Atomically creates or modifies the string values of one or more keys.",
        "1.0.1",
        parse_mset,
        FanMerge::AllOk,
    ),
    row(
        "MSETNX",
        -3,
        W_OOM,
        Keys::Range {
            first: 1,
            last: -1,
            step: 2,
        },
        ACL_W_SLOW,
        "Atomically modifies the string values of one or more keys only when all keys don't exist.",
        "1.0.1",
        parse_msetnx,
        FanMerge::AtomicIfNoneExist,
    ),
];

/// A deadline given to SET / GETEX / SETEX / PSETEX, validated as far as
/// possible without the clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    /// Positive milliseconds: an offset from now when `relative`, else Unix ms.
    pub ms: i64,
    /// EX / PX (offset from now) rather than EXAT / PXAT (absolute).
    pub relative: bool,
}

impl Deadline {
    /// Validate `raw` (seconds when `seconds`) as Redis's
    /// `getExpireMillisecondsOrReply` does before the clock is added.
    ///
    /// # Errors
    /// `ERR value is not an integer or out of range`; `ERR invalid expire time
    /// in '<cmd>' command` for values <= 0 or seconds that overflow as ms.
    pub fn parse(
        raw: &[u8],
        seconds: bool,
        relative: bool,
        cmd: &str,
    ) -> Result<Deadline, CmdError> {
        let v = args::int_arg(raw)?;
        let invalid = || CmdError::InvalidExpire { cmd: cmd.into() };
        if v <= 0 {
            return Err(invalid());
        }
        let ms = if seconds {
            v.checked_mul(1000).ok_or_else(invalid)?
        } else {
            v
        };
        Ok(Deadline { ms, relative })
    }

    /// The absolute deadline in Unix ms.
    ///
    /// # Errors
    /// `ERR invalid expire time in '<cmd>' command` when now + offset overflows.
    pub fn resolve(self, now_ms: u64, cmd: &str) -> Result<u64, CmdError> {
        let at = if self.relative {
            self.ms
                .checked_add(i64::try_from(now_ms).unwrap_or(i64::MAX))
                .ok_or_else(|| CmdError::InvalidExpire { cmd: cmd.into() })?
        } else {
            self.ms
        };
        Ok(at.max(0) as u64)
    }
}

/// What SET / GETEX do to the key's TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlChange {
    /// SET: clear it; GETEX: leave it.
    Default,
    /// `KEEPTTL` (SET): keep the old TTL.
    Keep,
    /// `PERSIST` (GETEX): remove it.
    Persist,
    /// `EX` / `PX` / `EXAT` / `PXAT`.
    At(Deadline),
}

/// A parsed `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT t|KEEPTTL]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    /// The key to write.
    pub key: Bytes,
    /// The new string: an allocation of its own when short (made with
    /// [`own_small`](crate::shard::db::own_small)), stored as it is.
    pub value: Bytes,
    /// `NX`: write only when the key is missing.
    pub nx: bool,
    /// `XX`: write only when the key exists.
    pub xx: bool,
    /// `GET`: reply with the old string instead of `+OK`.
    pub get: bool,
    /// What happens to the TTL.
    pub ttl: TtlChange,
    /// Command name for `ERR invalid expire time in '<cmd>' command` (set, setex, psetex).
    pub cmd: &'static str,
}

/// Options shared by SET and GETEX.
#[derive(Default)]
struct StrOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// (unit in seconds?, absolute?, raw argument): the last EX/PX/EXAT/PXAT.
    expire: Option<(bool, bool, Bytes)>,
    /// Which kind of expire option was seen (EX, PX, EXAT, PXAT bits).
    expire_kinds: u8,
}

/// Parse the options of SET (`is_set`) or GETEX, from `a` on.
///
/// # Errors
/// `ERR syntax error` for an unknown or conflicting option or a missing
/// value (checked for every option before any value). The expire value is
/// validated separately (the returned `Result`): SET reports its errors before
/// looking at the key, GETEX after. Repeating the same option is allowed; the last wins.
/// # Source
/// `parseExtendedStringArgumentsOrReply`, redis/src/t_string.c (7.0).
fn parse_str_opts(
    a: &mut Args<'_>,
    is_set: bool,
    cmd: &str,
) -> Result<(StrOpts, Result<TtlChange, CmdError>), CmdError> {
    let mut o = StrOpts::default();
    while let Some(opt) = a.next_opt() {
        let kind = [("EX", 1u8), ("PX", 2), ("EXAT", 4), ("PXAT", 8)]
            .iter()
            .find(|(n, _)| args::is(opt, n))
            .map(|&(_, bit)| bit);
        if let Some(bit) = kind {
            let others = o.expire_kinds & !bit;
            if others != 0 || o.keepttl || o.persist || a.is_empty() {
                return Err(CmdError::Syntax);
            }
            o.expire_kinds |= bit;
            let seconds = bit == 1 || bit == 4;
            let absolute = bit >= 4;
            o.expire = Some((seconds, absolute, a.next_arg()?.clone()));
        } else if is_set && args::is(opt, "NX") && !o.xx {
            o.nx = true;
        } else if is_set && args::is(opt, "XX") && !o.nx {
            o.xx = true;
        } else if is_set && args::is(opt, "GET") {
            o.get = true;
        } else if is_set && args::is(opt, "KEEPTTL") && o.expire_kinds == 0 {
            o.keepttl = true;
        } else if !is_set && args::is(opt, "PERSIST") && o.expire_kinds == 0 {
            o.persist = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let ttl = opts_ttl(&o, cmd);
    Ok((o, ttl))
}

/// The TTL change the options ask for; the expire value errors of [`Deadline::parse`].
fn opts_ttl(o: &StrOpts, cmd: &str) -> Result<TtlChange, CmdError> {
    Ok(match &o.expire {
        Some((seconds, absolute, raw)) => {
            TtlChange::At(Deadline::parse(raw, *seconds, !*absolute, cmd)?)
        }
        None if o.keepttl => TtlChange::Keep,
        None if o.persist => TtlChange::Persist,
        None => TtlChange::Default,
    })
}

// ---------------------------------------------------------------- parsing (connection's thread)

/// `GET key`.
fn parse_get(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| apply_get(db, cx, &key).into()))
}

/// Parse `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts|KEEPTTL]`.
///
/// # Errors
/// See [`parse_str_opts`].
pub fn parse_set_req(argv: &[Bytes]) -> Result<Set, CmdError> {
    let mut a = Args::new(argv);
    let key = a.next_arg()?.clone();
    // Taken as the copy the store keeps (see `ShardDb::set`): no reference
    // to the connection's read buffer to count up and down.
    let value = crate::shard::db::own_small(a.next_arg()?);
    let (o, ttl) = parse_str_opts(&mut a, true, "set")?;
    let ttl = ttl?;
    Ok(Set {
        key,
        value,
        nx: o.nx,
        xx: o.xx,
        get: o.get,
        ttl,
        cmd: "set",
    })
}

fn parse_set(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_set_req(argv)?;
    Ok(on_shard(move |db, cx| apply_set(db, cx, req).into()))
}

/// `GETDEL key`.
fn parse_getdel(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| apply_getdel(db, cx, &key).into()))
}

/// `GETEX key [EX s|PX ms|EXAT ts|PXAT ts|PERSIST]`.
fn parse_getex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let mut a = Args::new(argv);
    let key = a.next_arg()?.clone();
    let (_, ttl) = parse_str_opts(&mut a, false, "getex")?;
    Ok(on_shard(move |db, cx| {
        apply_getex(db, cx, &key, ttl).into()
    }))
}

/// `SETNX key value`.
fn parse_setnx(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = Set {
        key: key_at(argv, 1)?,
        value: crate::shard::db::own_small(&key_at(argv, 2)?),
        nx: true,
        xx: false,
        get: false,
        ttl: TtlChange::Default,
        cmd: "setnx",
    };
    Ok(on_shard(move |db, cx| match apply_set(db, cx, req) {
        Ok(Reply::Ok) => Reply::Int(1),
        Ok(_) => Reply::Int(0),
        Err(e) => Reply::Error(e),
    }))
}

fn parse_setex_generic(
    argv: &[Bytes],
    seconds: bool,
    cmd: &'static str,
) -> Result<ShardReq, CmdError> {
    let deadline = Deadline::parse(&key_at(argv, 2)?, seconds, true, cmd)?;
    let req = Set {
        key: key_at(argv, 1)?,
        value: crate::shard::db::own_small(&key_at(argv, 3)?),
        nx: false,
        xx: false,
        get: false,
        ttl: TtlChange::At(deadline),
        cmd,
    };
    Ok(on_shard(move |db, cx| apply_set(db, cx, req).into()))
}

/// `SETEX key seconds value`.
fn parse_setex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_setex_generic(argv, true, "setex")
}

/// `PSETEX key milliseconds value`.
fn parse_psetex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_setex_generic(argv, false, "psetex")
}

fn incr_req(key: Bytes, delta: i64) -> ShardReq {
    on_shard(move |db, cx| apply_incrby(db, cx, &key, delta).into())
}

/// `INCR key`.
fn parse_incr(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    Ok(incr_req(key_at(argv, 1)?, 1))
}

/// `DECR key`.
fn parse_decr(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    Ok(incr_req(key_at(argv, 1)?, -1))
}

/// `INCRBY key increment`.
fn parse_incrby(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let delta = args::int_arg(&key_at(argv, 2)?)?;
    Ok(incr_req(key_at(argv, 1)?, delta))
}

/// `DECRBY key decrement` (`ERR decrement would overflow` for i64::MIN).
fn parse_decrby(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let v = args::int_arg(&key_at(argv, 2)?)?;
    let delta = v
        .checked_neg()
        .ok_or_else(|| CmdError::msg("ERR decrement would overflow"))?;
    Ok(incr_req(key_at(argv, 1)?, delta))
}

/// `INCRBYFLOAT key increment`.
fn parse_incrbyfloat(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let delta = LongDouble::parse(&key_at(argv, 2)?).ok_or(CmdError::NotFloat)?;
    let key = key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| {
        apply_incrbyfloat(db, cx, &key, &delta).into()
    }))
}

/// `APPEND key value`.
fn parse_append(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    let value = key_at(argv, 2)?;
    Ok(on_shard(move |db, cx| {
        apply_append(db, cx, key, &value).into()
    }))
}

/// `STRLEN key`.
fn parse_strlen(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| {
        db.get_str(cx.db, &key, cx.now_ms)
            .map(|v| Reply::Int(v.map_or(0, |s| s.len() as i64)))
            .into()
    }))
}

/// `MGET key [key ...]` (this shard's part of the keys).
fn parse_mget(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let keys = argv.get(1..).unwrap_or_default().to_vec();
    Ok(on_shard(move |db, cx| apply_mget(db, cx, &keys)))
}

/// Key/value pairs of MSET / MSETNX; an odd count is an arity error, as in Redis.
fn parse_pairs(argv: &[Bytes], cmd: &str) -> Result<Vec<(Bytes, Bytes)>, CmdError> {
    let rest = argv.get(1..).unwrap_or_default();
    if rest.is_empty() || rest.len() % 2 != 0 {
        return Err(CmdError::arity(cmd));
    }
    Ok(rest
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect())
}

/// `MSET key value [key value ...]` (this shard's part of the pairs).
fn parse_mset(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let pairs = parse_pairs(argv, "mset")?;
    Ok(on_shard(move |db, cx| {
        for (k, v) in pairs {
            db.log_effect(cx, &[b"SET", &k, &v]);
            db.set(cx.db, k, Value::Str(v), None);
        }
        Reply::Ok
    }))
}

/// `MSETNX key value [key value ...]` (all keys on one shard).
fn parse_msetnx(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let pairs = parse_pairs(argv, "msetnx")?;
    Ok(on_shard(move |db, cx| apply_msetnx(db, cx, pairs)))
}

// ---------------------------------------------------------------- apply (shard thread)

/// `GET key`
///
/// # Reply
/// The string, or a null bulk when missing.
/// # Errors
/// `WRONGTYPE` for non-strings.
/// # Source
/// `getCommand`, redis/src/t_string.c.
pub fn apply_get(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Result<Reply, CmdError> {
    let v = db.get_str(cx.db, key, cx.now_ms)?.cloned();
    db.count_lookup(v.is_some());
    Ok(v.map(Reply::Bulk).unwrap_or(Reply::NullBulk))
}

/// `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT t|KEEPTTL]`
///
/// Stores `value` (replacing a value of any type) unless NX/XX forbid it. The
/// TTL is cleared, kept (KEEPTTL) or set; a deadline in the past leaves a key
/// that is already expired (lazy expiry removes it).
///
/// # Reply
/// `+OK`, or a null bulk when NX/XX prevented the write; with GET, the old
/// string (or null) whether or not the write happened.
/// # Errors
/// `ERR invalid expire time in 'set' command` when now + EX/PX overflows;
/// `WRONGTYPE` with GET when the old value is not a string (nothing is written).
/// # Source
/// `setCommand` / `setGenericCommand`, redis/src/t_string.c (7.0).
pub fn apply_set(db: &mut ShardDb, cx: &ExecCtx, req: Set) -> Result<Reply, CmdError> {
    let deadline = match req.ttl {
        TtlChange::At(d) => Some(d.resolve(cx.now_ms, req.cmd)?),
        _ => None,
    };
    if !(req.nx || req.xx || req.get || matches!(req.ttl, TtlChange::Keep)) {
        // A plain SET needs nothing of the old value: lazy expiry (for
        // its bookkeeping), then one write.
        db.set_clock(cx.now_ms);
        db.expire_if_needed(cx.db, &req.key, cx.now_ms);
        return Ok(store_set(db, cx, req.key, req.value, deadline));
    }
    let (exists, old_ttl, old_value) = match db.get(cx.db, &req.key, cx.now_ms) {
        None => (false, None, None),
        Some(Entry {
            value: Value::Str(s),
            expire_at_ms,
            ..
        }) => (true, *expire_at_ms, req.get.then(|| s.clone())),
        #[allow(unreachable_patterns)]
        Some(e) => {
            if req.get {
                return Err(CmdError::WrongType);
            }
            (true, e.expire_at_ms, None)
        }
    };
    let old_reply = || old_value.clone().map_or(Reply::NullBulk, Reply::Bulk);
    if (req.nx && exists) || (req.xx && !exists) {
        return Ok(if req.get {
            old_reply()
        } else {
            Reply::NullBulk
        });
    }
    let expire_at_ms = match req.ttl {
        TtlChange::Keep => old_ttl,
        _ => deadline,
    };
    store_set(db, cx, req.key, req.value, expire_at_ms);
    Ok(if req.get { old_reply() } else { Reply::Ok })
}

/// SET's write: `value` (its own copy already, see `parse_set_req`) under
/// `key`, and its AOF effect, which states the result (relative TTLs
/// become absolute deadlines). `+OK`.
fn store_set(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: Bytes,
    value: Bytes,
    expire_at_ms: Option<u64>,
) -> Reply {
    if !db.aof.is_enabled() {
        db.set_owned(cx.db, key, Value::Str(value), expire_at_ms);
        return Reply::Ok;
    }
    db.set_owned(cx.db, key.clone(), Value::Str(value), expire_at_ms);
    db.log_string_state(cx, &key);
    Reply::Ok
}

/// `GETDEL key`
///
/// # Reply
/// The string (and the key is deleted), or a null bulk when missing.
/// # Errors
/// `WRONGTYPE` for non-strings (nothing deleted).
/// # Source
/// `getdelCommand`, redis/src/t_string.c.
pub fn apply_getdel(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Result<Reply, CmdError> {
    let v = apply_get(db, cx, key)?;
    if matches!(v, Reply::Bulk(_)) {
        db.remove(cx.db, key, cx.now_ms);
        db.log_effect(cx, &[b"DEL", key]);
    }
    Ok(v)
}

/// `GETEX key [EX s|PX ms|EXAT ts|PXAT ts|PERSIST]`
///
/// Returns the string and changes its TTL; a deadline in the past deletes the key.
///
/// # Reply
/// The string, or a null bulk when missing (even if the expire value is bad).
/// # Errors
/// In Redis's order: `WRONGTYPE` for non-strings; then the expire value's
/// error carried in `ttl`; `ERR invalid expire time in 'getex' command` when
/// now + EX/PX overflows.
/// # Source
/// `getexCommand`, redis/src/t_string.c (7.0).
pub fn apply_getex(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    ttl: Result<TtlChange, CmdError>,
) -> Result<Reply, CmdError> {
    let v = apply_get(db, cx, key)?;
    if !matches!(v, Reply::Bulk(_)) {
        return Ok(v);
    }
    let ttl = ttl?;
    let deadline = match ttl {
        TtlChange::At(d) => Some(d.resolve(cx.now_ms, "getex")?),
        _ => None,
    };
    match (ttl, deadline) {
        (TtlChange::Persist, _) => {
            db.set_expire(cx.db, key, None);
        }
        (_, Some(at)) if at <= cx.now_ms => {
            db.remove(cx.db, key, cx.now_ms);
        }
        (_, Some(at)) => {
            db.set_expire(cx.db, key, Some(at));
        }
        _ => return Ok(v),
    }
    db.log_ttl_state(cx, key);
    Ok(v)
}

/// The integer stored under `key` (0 when missing), as INCR-family commands read it.
fn stored_i64(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Result<i64, CmdError> {
    match db.get_str(cx.db, key, cx.now_ms)? {
        None => Ok(0),
        Some(s) => args::parse_i64(s).ok_or(CmdError::NotInteger),
    }
}

/// Store a new string under `key`, keeping its TTL (INCR, APPEND...).
fn store_keep_ttl(db: &mut ShardDb, cx: &ExecCtx, key: &[u8], value: Bytes) {
    match db.get_mut(cx.db, key, cx.now_ms) {
        Some(e) => e.value = Value::Str(value),
        None => {
            db.set(cx.db, Bytes::copy_from_slice(key), Value::Str(value), None);
        }
    }
}

/// `INCR` / `DECR` / `INCRBY` / `DECRBY`: add `delta` to the integer under `key`.
///
/// # Reply
/// Integer: the new value (stored as its decimal string; the TTL is kept).
/// # Errors
/// `WRONGTYPE`; `ERR value is not an integer or out of range` when the string
/// is not a 64-bit integer; `ERR increment or decrement would overflow`.
/// # Source
/// `incrDecrCommand`, redis/src/t_string.c.
pub fn apply_incrby(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    delta: i64,
) -> Result<Reply, CmdError> {
    let n = stored_i64(db, cx, key)?
        .checked_add(delta)
        .ok_or(CmdError::Overflow)?;
    let mut buf = itoa::Buffer::new();
    store_keep_ttl(
        db,
        cx,
        key,
        Bytes::copy_from_slice(buf.format(n).as_bytes()),
    );
    db.log_string_state(cx, key);
    Ok(Reply::Int(n))
}

/// `INCRBYFLOAT key increment`
///
/// Adds `delta` to the number stored at `key` (a missing key is 0) in
/// x87 80-bit extended precision, as Redis does in `long double` on x86-64:
/// both operands are read with `strtold`'s syntax (so `0x10` and `1e308`
/// are numbers), and the sum is stored as `%.17Lf` without trailing zeros
/// (`INCRBYFLOAT n 1e308` twice stores a 309-digit integer). See
/// [`crate::ldouble`]. The TTL is kept.
///
/// # Reply
/// Bulk string: the new value in plain decimal notation (no exponent).
/// # Errors
/// `WRONGTYPE`; `ERR value is not a valid float` when the stored string is not
/// a number; `ERR increment would produce NaN or Infinity`.
/// # Source
/// `incrbyfloatCommand`, redis/src/t_string.c (7.0, same in 8.x).
pub fn apply_incrbyfloat(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    delta: &LongDouble,
) -> Result<Reply, CmdError> {
    let cur = match db.get_str(cx.db, key, cx.now_ms)? {
        None => LongDouble::ZERO,
        Some(s) => LongDouble::parse(s).ok_or(CmdError::NotFloat)?,
    };
    let n = cur
        .add(delta)
        .ok_or_else(|| CmdError::msg("ERR increment would produce NaN or Infinity"))?;
    let text = Bytes::from(n.to_human_string());
    store_keep_ttl(db, cx, key, text.clone());
    db.log_string_state(cx, key);
    Ok(Reply::Bulk(text))
}

/// `APPEND key value`
///
/// # Reply
/// Integer: the string's length after the append (a missing key starts empty).
/// # Errors
/// `WRONGTYPE` for non-strings.
/// # Source
/// `appendCommand`, redis/src/t_string.c.
pub fn apply_append(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: Bytes,
    value: &[u8],
) -> Result<Reply, CmdError> {
    let Some(old) = db.get_str(cx.db, &key, cx.now_ms)? else {
        let len = value.len();
        db.set(
            cx.db,
            key.clone(),
            Value::Str(Bytes::copy_from_slice(value)),
            None,
        );
        db.log_string_state(cx, &key);
        return Ok(Reply::Int(len as i64));
    };
    let mut buf = BytesMut::with_capacity(old.len() + value.len());
    buf.extend_from_slice(old);
    buf.extend_from_slice(value);
    let len = buf.len();
    store_keep_ttl(db, cx, &key, buf.freeze());
    db.log_string_state(cx, &key);
    Ok(Reply::Int(len as i64))
}

/// `MGET` on this shard's keys.
///
/// # Reply
/// Array with one element per key: the string, or a null bulk when the key is
/// missing or not a string.
/// # Source
/// `mgetCommand`, redis/src/t_string.c.
pub fn apply_mget(db: &mut ShardDb, cx: &ExecCtx, keys: &[Bytes]) -> Reply {
    Reply::Array(
        keys.iter()
            .map(|k| match db.get_str(cx.db, k, cx.now_ms) {
                Ok(Some(v)) => Reply::Bulk(v.clone()),
                _ => Reply::NullBulk,
            })
            .collect(),
    )
}

/// `MSETNX` on one shard: set every pair only if none of the keys exists.
///
/// # Reply
/// Integer 1 when all were set, 0 when nothing was.
/// # Source
/// `msetGenericCommand`, redis/src/t_string.c.
pub fn apply_msetnx(db: &mut ShardDb, cx: &ExecCtx, pairs: Vec<(Bytes, Bytes)>) -> Reply {
    if pairs.iter().any(|(k, _)| db.exists(cx.db, k, cx.now_ms)) {
        return Reply::Int(0);
    }
    for (k, v) in pairs {
        db.log_effect(cx, &[b"SET", &k, &v]);
        db.set(cx.db, k, Value::Str(v), None);
    }
    Reply::Int(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::slot::ShardId;

    fn argv(a: &[&str]) -> Vec<Bytes> {
        a.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn set_option_conflicts() {
        for bad in [
            &["SET", "k", "v", "NX", "XX"][..],
            &["SET", "k", "v", "EX", "1", "PX", "1"],
            &["SET", "k", "v", "KEEPTTL", "EX", "1"],
            &["SET", "k", "v", "EX"],
            &["SET", "k", "v", "PERSIST"],
            &["SET", "k", "v", "EX", "x", "NX", "XX"],
        ] {
            assert_eq!(parse_set_req(&argv(bad)), Err(CmdError::Syntax), "{bad:?}");
        }
        assert_eq!(
            parse_set_req(&argv(&["SET", "k", "v", "EX", "0"])),
            Err(CmdError::InvalidExpire { cmd: "set".into() })
        );
        assert_eq!(
            parse_set_req(&argv(&["SET", "k", "v", "EX", "x"])),
            Err(CmdError::NotInteger)
        );
        let ok = parse_set_req(&argv(&["SET", "k", "v", "ex", "10", "EX", "20", "get"])).unwrap();
        assert_eq!(
            ok.ttl,
            TtlChange::At(Deadline {
                ms: 20_000,
                relative: true
            })
        );
        assert!(ok.get);
    }

    #[test]
    fn incr_keeps_ttl_and_checks_overflow() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        let cx = ExecCtx::at(0, 10);
        db.set(
            0,
            Bytes::from_static(b"n"),
            Value::Str(Bytes::from_static(b"9223372036854775806")),
            Some(1000),
        );
        assert_eq!(
            apply_incrby(&mut db, &cx, b"n", 1),
            Ok(Reply::Int(i64::MAX))
        );
        assert_eq!(apply_incrby(&mut db, &cx, b"n", 1), Err(CmdError::Overflow));
        assert_eq!(db.get(0, b"n", 10).and_then(|e| e.expire_at_ms), Some(1000));
    }
}
