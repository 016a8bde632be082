//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP,
//! SRANDMEMBER, SSCAN, SMOVE, SINTER, SUNION, SDIFF, SINTERCARD,
//! SINTERSTORE, SUNIONSTORE, SDIFFSTORE. The data structure is
//! [`crate::set::Set`].
//!
//! # Effects in the AOF
//! SADD / SREM as themselves; SPOP as the `SREM` of the members it drew
//! (randomness resolved); SMOVE as SREM on the source and SADD on the
//! destination; a `*STORE` as the whole
//! new value of its destination (`DEL`, then `SADD` records).
//!
//! # Keys on several shards
//! SINTER, SUNION, SDIFF and SINTERCARD gather a copy of each set from its
//! shard (one request per shard, each atomic) and compute on the
//! connection's thread; the `*STORE` forms then store the result on the
//! destination's shard as a second step. Redis runs each atomically: across
//! shards, writes to the sets on one shard may land between the reads of
//! another, and a write between the gather and the store is not in the
//! stored result. SMOVE across shards runs as the steps of
//! [`crate::cmd::list::cross_move`]. Keys sharing a `{hash tag}` (one
//! shard) run as one atomic request. In cluster mode CROSSSLOT, as Redis.

use std::collections::HashSet;

use bytes::Bytes;
use crossbeam_channel::bounded;

use crate::cmd::args::{int_arg, is, parse_i64};
use crate::cmd::list::{cross_move, one_part};
use crate::cmd::{
    on_shard, Action, CommandSpec, ConnCtx, ExecCtx, FanMerge, Flags, Keys, ShardReq,
};
use crate::error::CmdError;
use crate::io::conn::Then;
use crate::reply::Reply;
use crate::route::slot::ShardId;
use crate::set::Set;
use crate::shard::db::{ShardDb, Value};

const W_OOM_FAST: Flags = Flags::WRITE.with(Flags::DENYOOM).with(Flags::FAST);
const W_FAST: Flags = Flags::WRITE.with(Flags::FAST);
const W_OOM: Flags = Flags::WRITE.with(Flags::DENYOOM);
const R_FAST: Flags = Flags::READONLY.with(Flags::FAST);
const ACL_W_FAST: &[&str] = &["write", "set", "fast"];
const ACL_W_SLOW: &[&str] = &["write", "set", "slow"];
const ACL_R_FAST: &[&str] = &["read", "set", "fast"];
const ACL_R_SLOW: &[&str] = &["read", "set", "slow"];

#[allow(clippy::too_many_arguments)]
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
        "set",
        acl,
        summary,
        since,
        parse,
        FanMerge::Refuse,
    )
}

#[allow(clippy::too_many_arguments)]
const fn multi(
    name: &'static str,
    arity: i16,
    flags: Flags,
    keys: Keys,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<crate::cmd::Action, CmdError>,
) -> CommandSpec {
    CommandSpec {
        keys,
        ..CommandSpec::conn(name, arity, flags, "set", acl, summary, since, f)
    }
}

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row("SADD", -3, W_OOM_FAST, ACL_W_FAST, "Adds one or more members to a set. Creates the key if it doesn't exist.", "1.0.0", parse_sadd),
    row("SREM", -3, W_FAST, ACL_W_FAST, "Removes one or more members from a set. Deletes the set if the last member was removed.", "1.0.0", parse_srem),
    row("SMEMBERS", 2, Flags::READONLY, ACL_R_SLOW, "Returns all members of a set.", "1.0.0", parse_smembers),
    row("SISMEMBER", 3, R_FAST, ACL_R_FAST, "Determines whether a member belongs to a set.", "1.0.0", parse_sismember),
    row("SMISMEMBER", -3, R_FAST, ACL_R_FAST, "Determines whether multiple members belong to a set.", "6.2.0", parse_smismember),
    row("SCARD", 2, R_FAST, ACL_R_FAST, "Returns the number of members in a set.", "1.0.0", parse_scard),
    row("SPOP", -2, W_FAST, ACL_W_FAST, "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", "1.0.0", parse_spop),
    row("SRANDMEMBER", -2, Flags::READONLY, ACL_R_SLOW, "Get one or multiple random members from a set", "1.0.0", parse_srandmember),
    row("SSCAN", -3, Flags::READONLY, ACL_R_SLOW, "Iterates over members of a set.", "2.8.0", parse_sscan),
    multi("SMOVE", 4, W_FAST, Keys::Range { first: 1, last: 2, step: 1 }, ACL_W_FAST, "Moves a member from one set to another.", "1.0.0", smove_cmd),
    multi("SINTER", -2, Flags::READONLY, Keys::ALL, ACL_R_SLOW, "Returns the intersect of multiple sets.", "1.0.0", sinter_cmd),
    multi("SUNION", -2, Flags::READONLY, Keys::ALL, ACL_R_SLOW, "Returns the union of multiple sets.", "1.0.0", sunion_cmd),
    multi("SDIFF", -2, Flags::READONLY, Keys::ALL, ACL_R_SLOW, "Returns the difference of multiple sets.", "1.0.0", sdiff_cmd),
    multi("SINTERCARD", -3, Flags::READONLY, Keys::NumKeys { at: 1 }, ACL_R_SLOW, "Returns the number of members of the intersect of multiple sets.", "7.0.0", sintercard_cmd),
    multi("SINTERSTORE", -3, W_OOM, Keys::ALL, ACL_W_SLOW, "Stores the intersect of multiple sets in a key.", "1.0.0", sinterstore_cmd),
    multi("SUNIONSTORE", -3, W_OOM, Keys::ALL, ACL_W_SLOW, "Stores the union of multiple sets in a key.", "1.0.0", sunionstore_cmd),
    multi("SDIFFSTORE", -3, W_OOM, Keys::ALL, ACL_W_SLOW, "Stores the difference of multiple sets in a key.", "1.0.0", sdiffstore_cmd),
];

// ---------------------------------------------------------------- single-key

fn parse_sadd(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let members = argv[2..].to_vec();
    Ok(on_shard(move |db, cx| {
        apply_sadd(db, cx, &key, &members).into()
    }))
}

/// `SADD key member [member ...]`
///
/// # Reply
/// Integer: how many members were new.
/// # Errors
/// `WrongType`.
/// # Source
/// `saddCommand`, redis/src/t_set.c (7.2 encodings, see [`crate::set`]).
pub fn apply_sadd(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &Bytes,
    members: &[Bytes],
) -> Result<Reply, CmdError> {
    let limits = db.tunables.set_limits();
    match db.get_set_mut(cx.db, key, cx.now_ms)? {
        Some(s) => s.maybe_convert(members.len(), &limits),
        None => {
            let s = Set::create(&members[0], members.len(), &limits);
            db.set(cx.db, key.clone(), Value::Set(Box::new(s)), None);
        }
    }
    let Some(s) = db.get_set_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Int(0));
    };
    let added = members.iter().filter(|m| s.add(m, &limits)).count();
    if added > 0 {
        let mut rec: Vec<&[u8]> = vec![b"SADD", key];
        rec.extend(members.iter().map(|m| &m[..]));
        db.log_effect(cx, &rec);
    }
    Ok(Reply::Int(added as i64))
}

fn parse_srem(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let members = argv[2..].to_vec();
    Ok(on_shard(move |db, cx| {
        apply_srem(db, cx, &key, &members).into()
    }))
}

/// Delete `key` when its set became empty.
fn drop_if_empty(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) {
    if matches!(db.get_set(cx.db, key, cx.now_ms), Ok(Some(s)) if s.is_empty()) {
        db.remove(cx.db, key, cx.now_ms);
    }
}

/// `SREM key member [member ...]`
///
/// # Reply
/// Integer: how many members were removed.
/// # Errors
/// `WrongType`.
pub fn apply_srem(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &Bytes,
    members: &[Bytes],
) -> Result<Reply, CmdError> {
    let Some(s) = db.get_set_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Int(0));
    };
    let removed = members.iter().filter(|m| s.remove(m)).count();
    if removed > 0 {
        let mut rec: Vec<&[u8]> = vec![b"SREM", key];
        rec.extend(members.iter().map(|m| &m[..]));
        db.log_effect(cx, &rec);
        drop_if_empty(db, cx, key);
    }
    Ok(Reply::Int(removed as i64))
}

fn members_reply(members: impl Iterator<Item = Bytes>) -> Reply {
    Reply::Set(members.map(Reply::Bulk).collect())
}

fn parse_smembers(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        db.get_set(cx.db, &key, cx.now_ms)
            .map(|s| s.map_or(Reply::Set(Vec::new()), |s| members_reply(s.iter())))
            .into()
    }))
}

fn parse_sismember(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let (key, m) = (argv[1].clone(), argv[2].clone());
    Ok(on_shard(move |db, cx| {
        db.get_set(cx.db, &key, cx.now_ms)
            .map(|s| Reply::Int(i64::from(s.is_some_and(|s| s.contains(&m)))))
            .into()
    }))
}

fn parse_smismember(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let members = argv[2..].to_vec();
    Ok(on_shard(move |db, cx| {
        db.get_set(cx.db, &key, cx.now_ms)
            .map(|s| {
                Reply::Array(
                    members
                        .iter()
                        .map(|m| Reply::Int(i64::from(s.is_some_and(|s| s.contains(m)))))
                        .collect(),
                )
            })
            .into()
    }))
}

fn parse_scard(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        db.get_set(cx.db, &key, cx.now_ms)
            .map(|s| Reply::Int(s.map_or(0, |s| s.len() as i64)))
            .into()
    }))
}

fn parse_spop(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    if argv.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match argv.get(2) {
        Some(c) => Some(
            parse_i64(c)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(CmdError::msg("ERR value is out of range, must be positive"))?,
        ),
        None => None,
    };
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        apply_spop(db, cx, &key, count).into()
    }))
}

/// `SPOP key [count]`
///
/// # Reply
/// Without count: a random member, or null bulk for a missing key. With
/// count: a set of up to `count` distinct random members (empty for a
/// missing key or count 0).
/// # Errors
/// (count at parse: `ERR value is out of range, must be positive`) `WrongType`.
/// # Source
/// `spopCommand` / `spopWithCountCommand`, redis/src/t_set.c. Logged as the
/// `SREM` of the drawn members.
pub fn apply_spop(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &Bytes,
    count: Option<u64>,
) -> Result<Reply, CmdError> {
    let missing = if count.is_some() {
        Reply::Set(Vec::new())
    } else {
        Reply::NullBulk
    };
    let mut seed = db.rand_u64() | 1;
    let Some(s) = db.get_set(cx.db, key, cx.now_ms)? else {
        return Ok(missing);
    };
    if count == Some(0) {
        return Ok(Reply::Set(Vec::new()));
    }
    let want = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    let drawn = s.random_distinct(want, || {
        // xorshift64 seeded from the shard's generator (the set is borrowed).
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    });
    if let Some(set) = db.get_set_mut(cx.db, key, cx.now_ms)? {
        for m in &drawn {
            set.remove(m);
        }
    }
    let mut rec: Vec<&[u8]> = vec![b"SREM", key];
    rec.extend(drawn.iter().map(|m| &m[..]));
    db.log_effect(cx, &rec);
    drop_if_empty(db, cx, key);
    Ok(match count {
        Some(_) => members_reply(drawn.into_iter()),
        None => drawn
            .into_iter()
            .next()
            .map_or(Reply::NullBulk, Reply::Bulk),
    })
}

fn parse_srandmember(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    if argv.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match argv.get(2) {
        Some(c) => {
            let n = int_arg(c)?;
            if n == i64::MIN {
                return Err(CmdError::msg("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"));
            }
            Some(n)
        }
        None => None,
    };
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        apply_srandmember(db, cx, &key, count).into()
    }))
}

/// `SRANDMEMBER key [count]`
///
/// # Reply
/// Without count: a random member or null bulk. With count > 0: an array
/// of up to `count` distinct members; count < 0: exactly `-count` members,
/// repeats allowed; empty array for a missing key or count 0.
/// # Errors
/// (count at parse) `WrongType`; [`ERR_RAND_TOO_LARGE`] when a negative
/// count's reply would pass [`MAX_RAND_REPLY_BYTES`] (past the client's
/// output buffer limit the client is closed instead, as Redis does).
/// # Source
/// `srandmemberCommand` / `srandmemberWithCountCommand`, redis/src/t_set.c.
pub fn apply_srandmember(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &Bytes,
    count: Option<i64>,
) -> Result<Reply, CmdError> {
    let Some(s) = db.get_set(cx.db, key, cx.now_ms)? else {
        return Ok(match count {
            Some(_) => Reply::Array(Vec::new()),
            None => Reply::NullBulk,
        });
    };
    let len = s.len() as u64;
    let mut seed = db.rand_u64() | 1;
    let mut rand = move || {
        // xorshift64 seeded from the shard's generator (the set is borrowed).
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let Some(s) = db.get_set(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::NullBulk);
    };
    Ok(match count {
        None => {
            let i = (rand() % len.max(1)) as usize;
            s.nth(i).map_or(Reply::NullBulk, Reply::Bulk)
        }
        Some(n) if n >= 0 => {
            let want = usize::try_from(n).unwrap_or(usize::MAX);
            Reply::Array(
                s.random_distinct(want, rand)
                    .into_iter()
                    .map(Reply::Bulk)
                    .collect(),
            )
        }
        Some(n) => {
            // Repeats allowed: the reply's size follows the count, not the
            // set. Estimate it from a few draws before building it.
            let want = n.unsigned_abs();
            let sampled: u64 = (0..8)
                .filter_map(|_| s.nth((rand() % len) as usize))
                .map(|m| m.len() as u64 + 16)
                .sum();
            let est_bytes = want.saturating_mul(sampled / 8);
            if est_bytes > cx.reply_budget_bytes {
                return Ok(Reply::OverOutputLimit);
            }
            if est_bytes > MAX_RAND_REPLY_BYTES {
                return Err(CmdError::msg(ERR_RAND_TOO_LARGE));
            }
            Reply::Array(
                (0..want)
                    .filter_map(|_| s.nth((rand() % len) as usize))
                    .map(Reply::Bulk)
                    .collect(),
            )
        }
    })
}

/// Largest reply SRANDMEMBER with a negative count builds, bytes (1 GiB).
/// Redis has no such cap and runs out of memory building a reply of
/// `-9223372036854775807` members; shardstream refuses instead.
pub const MAX_RAND_REPLY_BYTES: u64 = 1 << 30;

/// The error past [`MAX_RAND_REPLY_BYTES`] (our text; Redis has none).
pub const ERR_RAND_TOO_LARGE: &str =
    "ERR value is out of range: the reply would be larger than 1 GiB";

/// Options of SSCAN.
#[derive(Clone, Debug)]
struct SscanOpts {
    cursor: u64,
    pattern: Option<Bytes>,
    count: usize,
}

fn parse_sscan(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let cursor = crate::cmd::keys::parse_cursor(&argv[2])
        .ok_or_else(|| CmdError::msg("ERR invalid cursor"))?;
    // Redis checks the options after the key's type.
    let opts = (|| {
        let mut o = SscanOpts {
            cursor,
            pattern: None,
            count: 10,
        };
        let mut j = 3;
        while j < argv.len() {
            let more = j + 1 < argv.len();
            if is(&argv[j], "COUNT") && more {
                let n = int_arg(&argv[j + 1])?;
                if n < 1 {
                    return Err(CmdError::Syntax);
                }
                o.count = usize::try_from(n).unwrap_or(usize::MAX);
            } else if is(&argv[j], "MATCH") && more {
                o.pattern = Some(argv[j + 1].clone());
            } else {
                return Err(CmdError::Syntax);
            }
            j += 2;
        }
        Ok(o)
    })();
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        apply_sscan(db, cx, &key, opts).into()
    }))
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`
///
/// # Reply
/// `[next cursor, [members]]`. Intset and listpack sets answer whole in one
/// call (cursor 0), as Redis. A hash-table set is walked by position from
/// its last member down: cursor `c` means positions `0..c` are still to be
/// visited (0 to start: the whole set), each call returns up to COUNT of
/// them. Removal moves a set's last member into the freed position and
/// additions go after the last, so a member never moves from the positions
/// still to visit to those visited: every member present for the whole
/// scan is returned (one moved the other way may come twice), as Redis
/// guarantees. O(COUNT) per call.
/// # Errors
/// `ERR invalid cursor` (at parse), `WrongType`, then the options' errors.
/// # Source
/// `sscanCommand` / `scanGenericCommand`, redis/src/db.c.
fn apply_sscan(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    opts: Result<SscanOpts, CmdError>,
) -> Result<Reply, CmdError> {
    let empty = || Reply::Array(vec![Reply::bulk("0"), Reply::Array(Vec::new())]);
    let Some(s) = db.get_set(cx.db, key, cx.now_ms)? else {
        return Ok(empty());
    };
    let o = opts?;
    let keep = |m: &Bytes| {
        o.pattern
            .as_ref()
            .is_none_or(|p| crate::cmd::glob::glob_match(p, m, false))
    };
    let (next, members): (u64, Vec<Bytes>) = match s {
        Set::Hash(h) => {
            let len = h.len() as u64;
            let top = if o.cursor == 0 {
                len
            } else {
                o.cursor.min(len)
            };
            let bottom = top.saturating_sub(o.count as u64);
            let page = (bottom..top)
                .rev()
                .filter_map(|i| h.get_index(i as usize))
                .map(|m| Bytes::copy_from_slice(m))
                .filter(keep)
                .collect();
            (bottom, page)
        }
        s => (0, s.iter().filter(keep).collect()),
    };
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(members.into_iter().map(Reply::Bulk).collect()),
    ]))
}

// ---------------------------------------------------------------- multi-key

/// SINTER / SUNION / SDIFF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    /// Members of every set.
    Inter,
    /// Members of any set.
    Union,
    /// Members of the first set in none of the others.
    Diff,
}

/// Copies of the sets at `keys` (None: missing), or the first key's type
/// error in key order — per key, so that parts from several shards can be
/// merged in the caller's key order.
fn gather(db: &mut ShardDb, cx: &ExecCtx, keys: &[Bytes]) -> Vec<Result<Option<Set>, CmdError>> {
    keys.iter()
        .map(|k| db.get_set(cx.db, k, cx.now_ms).map(|s| s.cloned()))
        .collect()
}

/// The first error of a gather, in key order; else the sets.
fn checked(sets: Vec<Result<Option<Set>, CmdError>>) -> Result<Vec<Option<Set>>, CmdError> {
    sets.into_iter().collect()
}

/// The result of `op` over `sets` (in key order; `None`: a missing key), at
/// most `limit` members for an intersection (0 = no limit). Works on
/// borrowed sets: an intersection walks the smallest set and probes the
/// others, as Redis does.
///
/// # Source
/// `sinterGenericCommand` / `sunionDiffGenericCommand`, redis/src/t_set.c.
pub fn compute(op: SetOp, sets: &[Option<&Set>], limit: usize) -> Vec<Bytes> {
    match op {
        SetOp::Inter => {
            if sets.iter().any(Option::is_none) {
                return Vec::new();
            }
            let mut sets: Vec<&Set> = sets.iter().flatten().copied().collect();
            sets.sort_by_key(|s| s.len());
            let Some((first, rest)) = sets.split_first() else {
                return Vec::new();
            };
            let mut out = Vec::new();
            for m in first.iter() {
                if limit > 0 && out.len() >= limit {
                    break;
                }
                if rest.iter().all(|s| s.contains(&m)) {
                    out.push(m);
                }
            }
            out
        }
        SetOp::Union => {
            let mut seen = HashSet::new();
            let mut out = Vec::new();
            for s in sets.iter().flatten() {
                for m in s.iter() {
                    if seen.insert(m.clone()) {
                        out.push(m);
                    }
                }
            }
            out
        }
        SetOp::Diff => {
            let Some(Some(first)) = sets.first() else {
                return Vec::new();
            };
            let rest: Vec<&Set> = sets[1..].iter().flatten().copied().collect();
            first
                .iter()
                .filter(|m| !rest.iter().any(|s| s.contains(m)))
                .collect()
        }
    }
}

/// Store `members` as the set at `dst` (replacing any value), or delete
/// `dst` when empty; logs the new state. Returns the stored cardinality.
fn store(db: &mut ShardDb, cx: &ExecCtx, dst: &Bytes, members: Vec<Bytes>) -> i64 {
    let existed = db.remove(cx.db, dst, cx.now_ms).is_some();
    if members.is_empty() {
        if existed {
            db.log_effect(cx, &[b"DEL", dst]);
        }
        return 0;
    }
    let limits = db.tunables.set_limits();
    let mut s = Set::empty_intset();
    for m in &members {
        s.add(m, &limits);
    }
    let n = s.len() as i64;
    db.set(cx.db, dst.clone(), Value::Set(Box::new(s)), None);
    db.log_key_state(cx, dst);
    n
}

/// What to do with a computed result.
#[derive(Clone, Debug)]
enum Sink {
    /// Reply with the members in the order they come (SINTER: the
    /// smallest set's order).
    Members,
    /// Reply with the members in the order of a set built from them
    /// (SUNION, SDIFF: Redis builds the result set, then replies it).
    Built(crate::set::SetLimits),
    /// Reply with the count, at most `limit` (SINTERCARD; 0 = no limit).
    Card(usize),
    /// Store at the key and reply with the count (`*STORE`).
    Store(Bytes),
}

fn finish(db: Option<(&mut ShardDb, &ExecCtx)>, sink: &Sink, members: Vec<Bytes>) -> Reply {
    match (sink, db) {
        (Sink::Members, _) => members_reply(members.into_iter()),
        (Sink::Built(limits), _) => {
            let mut s = Set::empty_intset();
            for m in &members {
                s.add(m, limits);
            }
            members_reply(s.iter())
        }
        (Sink::Card(_), _) => Reply::Int(members.len() as i64),
        (Sink::Store(dst), Some((db, cx))) => Reply::Int(store(db, cx, dst, members)),
        (Sink::Store(_), None) => Reply::Error(CmdError::msg("ERR internal: store without shard")),
    }
}

/// Plan a set operation over `keys`: one atomic request when every key
/// (and the destination) lives on one shard, else gather + merge (+ store).
fn plan_setop(cx: &ConnCtx<'_>, op: SetOp, keys: Vec<Bytes>, sink: Sink) -> Action {
    let limit = match sink {
        Sink::Card(l) => l,
        _ => 0,
    };
    let mut shards: Vec<ShardId> = keys.iter().map(|k| cx.shared.shard_of(k)).collect();
    if let Sink::Store(dst) = &sink {
        shards.push(cx.shared.shard_of(dst));
    }
    let first = shards[0];
    if shards.iter().all(|s| *s == first) {
        return one_part(
            first,
            on_shard(move |db, cx| {
                // Type checks (and lazy expiry) first, in key order; then
                // the sets are read in place, without copies.
                for k in &keys {
                    if let Err(e) = db.get_set(cx.db, k, cx.now_ms) {
                        return Reply::Error(e);
                    }
                }
                let sets: Vec<Option<&Set>> = keys.iter().map(|k| db.peek_set(cx.db, k)).collect();
                let m = compute(op, &sets, limit);
                finish(Some((db, cx)), &sink, m)
            }),
        );
    }
    // Gather: one part per shard with that shard's keys, in key order.
    let mut by_shard: Vec<(ShardId, Vec<usize>)> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let s = cx.shared.shard_of(k);
        match by_shard.iter_mut().find(|(x, _)| *x == s) {
            Some((_, v)) => v.push(i),
            None => by_shard.push((s, vec![i])),
        }
    }
    let nkeys = keys.len();
    let (result_tx, result_rx) = bounded::<Vec<Bytes>>(1);
    let positions: Vec<Vec<usize>> = by_shard.iter().map(|(_, p)| p.clone()).collect();
    let parts: Vec<(ShardId, ShardReq)> = by_shard
        .into_iter()
        .map(|(s, pos)| {
            let ks: Vec<Bytes> = pos.iter().map(|&i| keys[i].clone()).collect();
            let req = on_shard(move |db, cx| gather_reply(gather(db, cx, &ks)));
            (s, req)
        })
        .collect();
    let merge_sink = sink.clone();
    let merge: crate::cmd::Merge = Box::new(move |replies: Vec<Reply>| {
        let mut sets: Vec<Option<Result<Option<Set>, CmdError>>> =
            (0..nkeys).map(|_| None).collect();
        for (reply, pos) in replies.into_iter().zip(&positions) {
            let Reply::Array(items) = reply else {
                if let Reply::Error(e) = reply {
                    return Reply::Error(e);
                }
                continue;
            };
            for (item, &i) in items.into_iter().zip(pos) {
                sets[i] = Some(decode_part(item));
            }
        }
        let sets: Vec<Result<Option<Set>, CmdError>> =
            sets.into_iter().map(|s| s.unwrap_or(Ok(None))).collect();
        match checked(sets) {
            Ok(sets) => match (
                &merge_sink,
                compute(
                    op,
                    &sets.iter().map(Option::as_ref).collect::<Vec<_>>(),
                    limit,
                ),
            ) {
                (Sink::Store(_), m) => {
                    let _ = result_tx.send(m);
                    Reply::Ok
                }
                (other, m) => finish(None, other, m),
            },
            Err(e) => Reply::Error(e),
        }
    });
    match sink {
        Sink::Store(dst) => {
            let dst_shard = cx.shared.shard_of(&dst);
            let step = on_shard(move |db, cx| {
                let members = result_rx.try_recv().unwrap_or_default();
                Reply::Int(store(db, cx, &dst, members))
            });
            Action::FanOutThen {
                parts,
                merge,
                then: Then::Fan {
                    parts: vec![(dst_shard, step)],
                    merge: Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::Int(0))),
                    then: None,
                },
            }
        }
        _ => Action::FanOut { parts, merge },
    }
}

/// A gather part's reply, per key: a set's members as a RESP set, null
/// for a missing key, or the key's error. The copies cross threads as
/// owned data inside the reply.
fn gather_reply(sets: Vec<Result<Option<Set>, CmdError>>) -> Reply {
    Reply::Array(
        sets.into_iter()
            .map(|s| match s {
                Ok(None) => Reply::NullBulk,
                Ok(Some(s)) => members_reply(s.iter()),
                Err(e) => Reply::Error(e),
            })
            .collect(),
    )
}

/// The inverse of [`gather_reply`] for one key.
fn decode_part(item: Reply) -> Result<Option<Set>, CmdError> {
    match item {
        Reply::Error(e) => Err(e),
        Reply::Set(members) => {
            let h: HashSet<Bytes> = members
                .into_iter()
                .filter_map(|m| match m {
                    Reply::Bulk(b) => Some(b),
                    _ => None,
                })
                .collect();
            Ok(Some(Set::from_hash(h)))
        }
        _ => Ok(None),
    }
}

/// `SINTER key [key ...]`: reply a set of the members in every set.
/// # Errors
/// `WrongType` (first wrong key in order). # Source `sinterCommand`.
fn sinter_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(plan_setop(
        cx,
        SetOp::Inter,
        argv[1..].to_vec(),
        Sink::Members,
    ))
}

/// `SUNION key [key ...]`: reply a set of the members of any set.
/// # Errors
/// `WrongType`. # Source `sunionCommand`.
fn sunion_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let sink = Sink::Built(cx.shared.tunables.set_limits());
    Ok(plan_setop(cx, SetOp::Union, argv[1..].to_vec(), sink))
}

/// `SDIFF key [key ...]`: reply a set of the first set's members in no other.
/// # Errors
/// `WrongType`. # Source `sdiffCommand`.
fn sdiff_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let sink = Sink::Built(cx.shared.tunables.set_limits());
    Ok(plan_setop(cx, SetOp::Diff, argv[1..].to_vec(), sink))
}

/// `SINTERSTORE destination key [key ...]`: store the intersection; reply
/// its cardinality (an empty result deletes `destination`).
fn sinterstore_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let sink = Sink::Store(argv[1].clone());
    Ok(plan_setop(cx, SetOp::Inter, argv[2..].to_vec(), sink))
}

/// `SUNIONSTORE destination key [key ...]`: as SINTERSTORE, for the union.
fn sunionstore_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let sink = Sink::Store(argv[1].clone());
    Ok(plan_setop(cx, SetOp::Union, argv[2..].to_vec(), sink))
}

/// `SDIFFSTORE destination key [key ...]`: as SINTERSTORE, for the difference.
fn sdiffstore_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let sink = Sink::Store(argv[1].clone());
    Ok(plan_setop(cx, SetOp::Diff, argv[2..].to_vec(), sink))
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`
///
/// # Reply
/// Integer: the intersection's cardinality, at most `limit` (0 = no limit).
/// # Errors
/// `ERR numkeys should be greater than 0`, `ERR Number of keys can't be
/// greater than number of args`, `ERR LIMIT can't be negative`,
/// `ERR syntax error`, then `WrongType`.
/// # Source
/// `sinterCardCommand`, redis/src/t_set.c.
fn sintercard_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let numkeys = parse_i64(&argv[1])
        .filter(|n| *n >= 1)
        .ok_or(CmdError::msg("ERR numkeys should be greater than 0"))?;
    if numkeys > (argv.len() - 2) as i64 {
        return Err(CmdError::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let n = numkeys as usize;
    let mut limit = 0;
    let mut j = 2 + n;
    while j < argv.len() {
        if is(&argv[j], "LIMIT") && j + 1 < argv.len() {
            j += 1;
            limit = parse_i64(&argv[j])
                .and_then(|l| usize::try_from(l).ok())
                .ok_or(CmdError::msg("ERR LIMIT can't be negative"))?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(plan_setop(
        cx,
        SetOp::Inter,
        argv[2..2 + n].to_vec(),
        Sink::Card(limit),
    ))
}

/// `SMOVE source destination member`
///
/// # Reply
/// Integer: 1 when moved, 0 when `source` is missing or `member` is not in it.
/// # Errors
/// `WrongType` for `source`, then for `destination` (checked when `source`
/// exists, before anything moves).
/// # Source
/// `smoveCommand`, redis/src/t_set.c. Across shards: the steps of
/// [`cross_move`].
fn smove_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let (src, dst, m) = (argv[1].clone(), argv[2].clone(), argv[3].clone());
    let (s, d) = (cx.shared.shard_of(&src), cx.shared.shard_of(&dst));
    if s == d {
        return Ok(one_part(
            s,
            on_shard(move |db, cx| apply_smove(db, cx, &src, &dst, &m).into()),
        ));
    }
    let (src2, dst2) = (src.clone(), dst.clone());
    Ok(cross_move(
        (s, d),
        Box::new(move |db, cx| db.get_set(cx.db, &dst2, cx.now_ms).err()),
        Box::new(move |db, cx, dst_err| {
            if db.get_set(cx.db, &src, cx.now_ms)?.is_none() {
                return Ok(None);
            }
            if let Some(e) = dst_err {
                return Err(e);
            }
            let removed = apply_srem(db, cx, &src, std::slice::from_ref(&m))?;
            Ok((removed == Reply::Int(1)).then_some(m))
        }),
        Box::new(move |db, cx, v| {
            apply_sadd(db, cx, &dst, std::slice::from_ref(&v)).map(|_| Reply::Int(1))
        }),
        Box::new(move |db, cx, v| {
            let _ = apply_sadd(db, cx, &src2, std::slice::from_ref(&v));
        }),
        Reply::Int(0),
    ))
}

/// SMOVE with both keys on this shard (see [`smove_cmd`]).
pub fn apply_smove(
    db: &mut ShardDb,
    cx: &ExecCtx,
    src: &Bytes,
    dst: &Bytes,
    m: &Bytes,
) -> Result<Reply, CmdError> {
    if db.get_set(cx.db, src, cx.now_ms)?.is_none() {
        return Ok(Reply::Int(0));
    }
    db.get_set(cx.db, dst, cx.now_ms)?;
    if src == dst {
        let member = db
            .get_set(cx.db, src, cx.now_ms)?
            .is_some_and(|s| s.contains(m));
        return Ok(Reply::Int(i64::from(member)));
    }
    let Some(s) = db.get_set_mut(cx.db, src, cx.now_ms)? else {
        return Ok(Reply::Int(0));
    };
    if !s.remove(m) {
        return Ok(Reply::Int(0));
    }
    drop_if_empty(db, cx, src);
    let limits = db.tunables.set_limits();
    if db.get_set(cx.db, dst, cx.now_ms)?.is_none() {
        let s = Set::create(m, 1, &limits);
        db.set(cx.db, dst.clone(), Value::Set(Box::new(s)), None);
    }
    if let Some(d) = db.get_set_mut(cx.db, dst, cx.now_ms)? {
        d.add(m, &limits);
    }
    // SMOVE runs on the connection's thread: its effect is SREM + SADD.
    db.log_effect(cx, &[b"SREM", src, m]);
    db.log_effect(cx, &[b"SADD", dst, m]);
    Ok(Reply::Int(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::testing::exec;
    use crate::route::slot::ShardId;

    #[test]
    fn sadd_srem_encodings() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        assert_eq!(exec(&mut db, "SADD s 3 1 2 1"), Reply::Int(3));
        assert_eq!(exec(&mut db, "OBJECT ENCODING s"), Reply::bulk("intset"));
        assert_eq!(exec(&mut db, "SADD s a"), Reply::Int(1));
        assert_eq!(exec(&mut db, "OBJECT ENCODING s"), Reply::bulk("listpack"));
        assert_eq!(
            exec(&mut db, "SMEMBERS s"),
            Reply::Set(
                ["1", "2", "3", "a"]
                    .iter()
                    .map(|m| Reply::bulk(*m))
                    .collect()
            )
        );
        assert_eq!(exec(&mut db, "SREM s 1 2 3 a x"), Reply::Int(4));
        assert_eq!(exec(&mut db, "EXISTS s"), Reply::Int(0));
        assert_eq!(exec(&mut db, "SPOP s 3"), Reply::Set(Vec::new()));
    }

    #[test]
    fn a_huge_negative_srandmember_is_refused_not_built() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        exec(&mut db, "SADD s a b c");
        assert_eq!(
            exec(&mut db, "SRANDMEMBER s -9223372036854775807"),
            Reply::Error(CmdError::msg(ERR_RAND_TOO_LARGE))
        );
    }

    #[test]
    fn spop_and_srandmember_draw_members() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        exec(&mut db, "SADD s a b c d e");
        let Reply::Array(r) = exec(&mut db, "SRANDMEMBER s -20") else {
            panic!()
        };
        assert_eq!(r.len(), 20);
        let Reply::Set(p) = exec(&mut db, "SPOP s 2") else {
            panic!()
        };
        assert_eq!(p.len(), 2);
        assert_eq!(exec(&mut db, "SCARD s"), Reply::Int(3));
    }

    #[test]
    fn set_algebra() {
        let sets = |v: &[&[&str]]| -> Vec<Option<Set>> {
            v.iter()
                .map(|ms| {
                    let lim = crate::set::SetLimits::default();
                    let mut s = Set::create(b"x", 1, &lim);
                    for m in *ms {
                        s.add(m.as_bytes(), &lim);
                    }
                    Some(s)
                })
                .collect()
        };
        let run = |op, v: &[&[&str]]| {
            let owned = sets(v);
            let refs: Vec<Option<&Set>> = owned.iter().map(Option::as_ref).collect();
            let mut out = compute(op, &refs, 0);
            out.sort();
            out
        };
        let b = |m: &str| Bytes::copy_from_slice(m.as_bytes());
        assert_eq!(
            run(SetOp::Inter, &[&["a", "b", "c"], &["b", "c", "d"]]),
            vec![b("b"), b("c")]
        );
        assert_eq!(
            run(SetOp::Diff, &[&["a", "b", "c"], &["b"], &["c"]]),
            vec![b("a")]
        );
        assert_eq!(
            run(SetOp::Union, &[&["a"], &["a", "b"]]),
            vec![b("a"), b("b")]
        );
        assert!(compute(SetOp::Inter, &[None], 0).is_empty());
    }
}
