//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE,
//! LINDEX, LSET, LINSERT, LPOS, LREM, LTRIM, LMOVE, RPOPLPUSH, LMPOP and the
//! blocking BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP. The data structure is
//! [`crate::list::List`].
//!
//! # Effects in the AOF
//! Every write is logged as a deterministic command: pushes as themselves,
//! pops (LPOP/RPOP/LMPOP and the blocking pops once served) as `LPOP key n`
//! / `RPOP key n` with the number actually popped, LMOVE as the pop of one
//! element and its push (on one shard's log, or each on its own shard's).
//!
//! # Keys on several shards
//! * BLPOP / BRPOP / BLMPOP over keys of several shards first try each run
//!   of consecutive keys of one shard, one run after the other in key order,
//!   and answer from the first key with data, as Redis does (between the
//!   steps other clients may push to a key already tried). If none had
//!   data the command parks on every shard at once; the first push to any
//!   of its keys serves it, and exactly one pop happens (one ticket). Keys
//!   sharing a `{hash tag}` run as one atomic step.
//! * LMPOP over several shards tries each shard in key order, one after the
//!   other, and pops from the first key with data (between the steps other
//!   clients may push to an earlier key).
//! * LMOVE / RPOPLPUSH across shards run as steps ([`cross_move`]): the
//!   destination's type is read, the element popped on the source, pushed
//!   on the destination. Between the steps other clients can see the element
//!   in neither list; if the destination changed type meanwhile the element
//!   goes back to where it came from, so it is never lost.
//! * BLMOVE / BRPOPLPUSH across shards park on the source shard; the popped
//!   element is forwarded to the destination shard, which pushes it and
//!   answers (see [`ShardDb::forward`]).
//!
//! In cluster mode multi-key commands need one slot (CROSSSLOT), as Redis.

use std::sync::Arc;

use bytes::Bytes;
use crossbeam_channel::bounded;

use crate::cmd::args::{int_arg, is, parse_i64, parse_timeout_s};
use crate::cmd::{
    on_shard, Action, CommandSpec, ConnCtx, ExecCtx, FanMerge, Flags, Handler, Keys, ShardReq,
};
use crate::error::CmdError;
use crate::list::End;
use crate::reply::Reply;
use crate::route::slot::ShardId;
use crate::shard::blocking::{Attempt, Ticket, Waiter};
use crate::shard::db::{ShardDb, Value};

const W_OOM: Flags = Flags::WRITE.with(Flags::DENYOOM);
const W_OOM_FAST: Flags = W_OOM.with(Flags::FAST);
const W_FAST: Flags = Flags::WRITE.with(Flags::FAST);
const R_FAST: Flags = Flags::READONLY.with(Flags::FAST);
const ACL_W_FAST: &[&str] = &["write", "list", "fast"];
const ACL_W_SLOW: &[&str] = &["write", "list", "slow"];
const ACL_R_FAST: &[&str] = &["read", "list", "fast"];
const ACL_R_SLOW: &[&str] = &["read", "list", "slow"];
const ACL_BLOCK: &[&str] = &["write", "list", "slow", "blocking"];
const REFUSE: FanMerge = FanMerge::Refuse;

/// Source and destination at argv[1] and argv[2].
const TWO_KEYS: Keys = Keys::Range {
    first: 1,
    last: 2,
    step: 1,
};

/// BLPOP / BRPOP: every argument but the last (the timeout) is a key.
const KEYS_BUT_LAST: Keys = Keys::Range {
    first: 1,
    last: -2,
    step: 1,
};

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
) -> CommandSpec {
    CommandSpec::keyed(
        name, arity, flags, keys, "list", acl, summary, since, parse, REFUSE,
    )
}

#[allow(clippy::too_many_arguments)]
const fn blocking(
    name: &'static str,
    arity: i16,
    keys: Keys,
    summary: &'static str,
    since: &'static str,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    block_ms: fn(&[Bytes]) -> Option<u64>,
    park: fn(&[Bytes], Arc<Ticket>) -> Result<ShardReq, CmdError>,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: Flags::WRITE.with(Flags::BLOCKING),
        keys,
        acl: ACL_BLOCK,
        summary,
        since,
        group: "list",
        subcommands: &[],
        // Refuse: parts of a blocking pop cannot be merged; over several
        // shards the router parks on every shard at once instead.
        handler: Handler::Blocking {
            parse,
            merge: REFUSE,
            block_ms,
            park,
            validate: None,
        },
    }
}

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row("LPUSH", -3, W_OOM_FAST, Keys::FIRST, ACL_W_FAST, "Prepends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0", parse_lpush),
    row("RPUSH", -3, W_OOM_FAST, Keys::FIRST, ACL_W_FAST, "Appends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0", parse_rpush),
    row("LPUSHX", -3, W_OOM_FAST, Keys::FIRST, ACL_W_FAST, "Prepends one or more elements to a list only when the list exists.", "2.2.0", parse_lpushx),
    row("RPUSHX", -3, W_OOM_FAST, Keys::FIRST, ACL_W_FAST, "Appends an element to a list only when the list exists.", "2.2.0", parse_rpushx),
    row("LPOP", -2, W_FAST, Keys::FIRST, ACL_W_FAST, "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "1.0.0", parse_lpop),
    row("RPOP", -2, W_FAST, Keys::FIRST, ACL_W_FAST, "Returns and removes the last elements of the list. Deletes the list if the last element was popped.", "1.0.0", parse_rpop),
    row("LLEN", 2, R_FAST, Keys::FIRST, ACL_R_FAST, "Returns the length of a list.", "1.0.0", parse_llen),
    row("LRANGE", 4, Flags::READONLY, Keys::FIRST, ACL_R_SLOW, "Returns a range of elements from a list.", "1.0.0", parse_lrange),
    row("LINDEX", 3, Flags::READONLY, Keys::FIRST, ACL_R_SLOW, "Returns an element from a list by its index.", "1.0.0", parse_lindex),
    row("LSET", 4, W_OOM, Keys::FIRST, ACL_W_SLOW, "Sets the value of an element in a list by its index.", "1.0.0", parse_lset),
    row("LINSERT", 5, W_OOM, Keys::FIRST, ACL_W_SLOW, "Inserts an element before or after another element in a list.", "2.2.0", parse_linsert),
    row("LPOS", -3, Flags::READONLY, Keys::FIRST, ACL_R_SLOW, "Returns the index of matching elements in a list.", "6.0.6", parse_lpos),
    row("LREM", 4, Flags::WRITE, Keys::FIRST, ACL_W_SLOW, "Removes elements from a list. Deletes the list if the last element was removed.", "1.0.0", parse_lrem),
    row("LTRIM", 4, Flags::WRITE, Keys::FIRST, ACL_W_SLOW, "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "1.0.0", parse_ltrim),
    CommandSpec {
        keys: TWO_KEYS,
        ..CommandSpec::conn("LMOVE", 5, W_OOM, "list", ACL_W_SLOW, "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "6.2.0", lmove_cmd)
    },
    CommandSpec {
        keys: TWO_KEYS,
        ..CommandSpec::conn("RPOPLPUSH", 3, W_OOM, "list", ACL_W_SLOW, "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "1.2.0", rpoplpush_cmd)
    },
    CommandSpec {
        keys: Keys::NumKeys { at: 1 },
        ..CommandSpec::conn("LMPOP", -4, Flags::WRITE, "list", ACL_W_SLOW, "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "7.0.0", lmpop_cmd)
    },
    blocking("BLPOP", -3, KEYS_BUT_LAST, "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0", parse_blpop, bpop_block_ms, park_blpop),
    blocking("BRPOP", -3, KEYS_BUT_LAST, "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0", parse_brpop, bpop_block_ms, park_brpop),
    blocking("BLMOVE", 6, TWO_KEYS, "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "6.2.0", parse_blmove, blmove_block_ms, park_blmove),
    blocking("BRPOPLPUSH", 4, TWO_KEYS, "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "2.2.0", parse_brpoplpush, blmove_block_ms, park_brpoplpush),
    blocking("BLMPOP", -5, Keys::NumKeys { at: 2 }, "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "7.0.0", parse_blmpop, blmpop_block_ms, park_blmpop),
];

// ---------------------------------------------------------------- parsing

fn copy(b: &Bytes) -> Bytes {
    Bytes::copy_from_slice(b)
}

fn parse_push(argv: &[Bytes], end: End, xx: bool) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let items: Vec<Bytes> = argv[2..].iter().map(copy).collect();
    Ok(on_shard(move |db, cx| {
        apply_push(db, cx, key, items, end, xx).into()
    }))
}

fn parse_lpush(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_push(argv, End::Left, false)
}
fn parse_rpush(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_push(argv, End::Right, false)
}
fn parse_lpushx(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_push(argv, End::Left, true)
}
fn parse_rpushx(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_push(argv, End::Right, true)
}

/// `ERR value is out of range, must be positive`: Redis's text for a
/// non-negative integer argument that is negative or not an integer.
fn positive(arg: &[u8], msg: &'static str) -> Result<u64, CmdError> {
    parse_i64(arg)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or(CmdError::msg(msg))
}

const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";

fn parse_pop(argv: &[Bytes], end: End) -> Result<ShardReq, CmdError> {
    if argv.len() > 3 {
        return Err(CmdError::arity(
            std::str::from_utf8(&argv[0]).unwrap_or("lpop"),
        ));
    }
    let count = match argv.get(2) {
        Some(c) => Some(positive(c, MUST_BE_POSITIVE)?),
        None => None,
    };
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        apply_pop(db, cx, &key, end, count).into()
    }))
}

fn parse_lpop(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_pop(argv, End::Left)
}
fn parse_rpop(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_pop(argv, End::Right)
}

fn parse_llen(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        db.get_list(cx.db, &key, cx.now_ms)
            .map(|l| Reply::Int(l.map_or(0, |l| l.len() as i64)))
            .into()
    }))
}

fn parse_lrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let (start, stop) = (int_arg(&argv[2])?, int_arg(&argv[3])?);
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        apply_lrange(db, cx, &key, start, stop).into()
    }))
}

fn parse_lindex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    // Redis looks the key up before it parses the index.
    let index = int_arg(&argv[2]);
    Ok(on_shard(move |db, cx| {
        let found = (|| {
            let Some(l) = db.get_list(cx.db, &key, cx.now_ms)? else {
                return Ok(Reply::NullBulk);
            };
            Ok(l.get(index?)
                .map_or(Reply::NullBulk, |v| Reply::Bulk(Bytes::copy_from_slice(v))))
        })();
        found.into()
    }))
}

fn parse_lset(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let index = int_arg(&argv[2]);
    let value = copy(&argv[3]);
    Ok(on_shard(move |db, cx| {
        apply_lset(db, cx, &key, index, value).into()
    }))
}

fn parse_linsert(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let after = if is(&argv[2], "AFTER") {
        true
    } else if is(&argv[2], "BEFORE") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let (key, pivot, value) = (argv[1].clone(), argv[3].clone(), copy(&argv[4]));
    Ok(on_shard(move |db, cx| {
        apply_linsert(db, cx, &key, after, &pivot, value).into()
    }))
}

/// Options of `LPOS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LposOpts {
    /// `RANK` (never 0; negative: from the tail).
    pub rank: i64,
    /// `COUNT` (0 = all matches); `None` without COUNT (single reply).
    pub count: Option<u64>,
    /// `MAXLEN` (0 = no limit): compare at most this many elements.
    pub maxlen: u64,
}

fn parse_lpos(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let mut o = LposOpts {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut j = 3;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        if is(&argv[j], "RANK") && more {
            j += 1;
            let r = int_arg(&argv[j])?;
            if r == i64::MIN {
                return Err(CmdError::msg("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"));
            }
            if r == 0 {
                return Err(CmdError::msg("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
            o.rank = r;
        } else if is(&argv[j], "COUNT") && more {
            j += 1;
            o.count = Some(positive(&argv[j], "ERR COUNT can't be negative")?);
        } else if is(&argv[j], "MAXLEN") && more {
            j += 1;
            o.maxlen = positive(&argv[j], "ERR MAXLEN can't be negative")?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let (key, elem) = (argv[1].clone(), argv[2].clone());
    Ok(on_shard(move |db, cx| {
        apply_lpos(db, cx, &key, &elem, o).into()
    }))
}

fn parse_lrem(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let count = int_arg(&argv[2])?;
    let (key, elem) = (argv[1].clone(), argv[3].clone());
    Ok(on_shard(move |db, cx| {
        apply_lrem(db, cx, &key, count, &elem).into()
    }))
}

fn parse_ltrim(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let (start, stop) = (int_arg(&argv[2])?, int_arg(&argv[3])?);
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        apply_ltrim(db, cx, &key, start, stop).into()
    }))
}

/// `LEFT` / `RIGHT` (any case), else `ERR syntax error`.
fn parse_end(arg: &[u8]) -> Result<End, CmdError> {
    if is(arg, "LEFT") {
        Ok(End::Left)
    } else if is(arg, "RIGHT") {
        Ok(End::Right)
    } else {
        Err(CmdError::Syntax)
    }
}

/// A parsed `LMPOP` / `BLMPOP` (without its timeout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mpop {
    /// The keys, tried in order.
    pub keys: Vec<Bytes>,
    /// `LEFT` or `RIGHT`.
    pub end: End,
    /// `COUNT` (1 without it): most elements popped.
    pub count: u64,
}

/// Parse `numkeys key... LEFT|RIGHT [COUNT n]` starting at `argv[at]`.
///
/// # Errors
/// `ERR numkeys should be greater than 0`, `ERR syntax error` (too few
/// arguments, bad direction, unknown option), `ERR count should be greater than 0`.
/// # Source
/// `lmpopGenericCommand`, redis/src/t_list.c.
pub fn parse_mpop(argv: &[Bytes], at: usize) -> Result<Mpop, CmdError> {
    let numkeys = parse_i64(&argv[at])
        .filter(|n| *n >= 1)
        .ok_or(CmdError::msg("ERR numkeys should be greater than 0"))?;
    let where_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(at + 1))
        .filter(|w| *w < argv.len())
        .ok_or(CmdError::Syntax)?;
    let end = parse_end(&argv[where_at])?;
    let mut count = None;
    let mut j = where_at + 1;
    while j < argv.len() {
        if count.is_none() && is(&argv[j], "COUNT") && j + 1 < argv.len() {
            j += 1;
            let n = parse_i64(&argv[j])
                .filter(|n| *n >= 1)
                .ok_or(CmdError::msg("ERR count should be greater than 0"))?;
            count = Some(n as u64);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(Mpop {
        keys: argv[at + 1..where_at].to_vec(),
        end,
        count: count.unwrap_or(1),
    })
}

// ---------------------------------------------------------------- apply

/// Delete `key` when its list became empty (Redis never keeps empty lists).
fn drop_if_empty(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) {
    let fill = db.tunables.list_fill();
    match db.get_list_mut(cx.db, key, cx.now_ms) {
        Ok(Some(l)) if l.is_empty() => {
            db.remove(cx.db, key, cx.now_ms);
        }
        Ok(Some(l)) => l.shrink_check(fill),
        _ => {}
    }
}

/// `LPUSH|RPUSH key element [element ...]`, `LPUSHX|RPUSHX` (`xx`).
///
/// # Reply
/// Integer: the list's length after the push (0 for a missing key with X).
/// # Errors
/// `WrongType`.
/// # Source
/// `pushGenericCommand`, redis/src/t_list.c.
pub fn apply_push(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: Bytes,
    items: Vec<Bytes>,
    end: End,
    xx: bool,
) -> Result<Reply, CmdError> {
    let fill = db.tunables.list_fill();
    if db.get_list(cx.db, &key, cx.now_ms)?.is_none() {
        if xx {
            return Ok(Reply::Int(0));
        }
        db.set(cx.db, key.clone(), Value::List(Box::default()), None);
    }
    let Some(l) = db.get_list_mut(cx.db, &key, cx.now_ms)? else {
        return Ok(Reply::Int(0));
    };
    l.grow_check(fill, items.iter().map(|v| &v[..]));
    for v in &items {
        l.push(end, v);
    }
    let len = l.len() as i64;
    let cmd: &[u8] = if end == End::Left { b"LPUSH" } else { b"RPUSH" };
    let mut rec: Vec<&[u8]> = Vec::with_capacity(items.len() + 2);
    rec.extend([cmd, &key[..]]);
    rec.extend(items.iter().map(|v| &v[..]));
    db.log_effect(cx, &rec);
    db.blocking.mark_ready(cx.db, &key);
    Ok(Reply::Int(len))
}

/// Pop up to `n` elements from `end` of the list at `key`, logging the
/// effect and deleting the emptied key. `Ok(None)` when the key is missing.
pub fn pop_n(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    end: End,
    n: u64,
) -> Result<Option<Vec<Bytes>>, CmdError> {
    let Some(l) = db.get_list_mut(cx.db, key, cx.now_ms)? else {
        return Ok(None);
    };
    let take = usize::try_from(n).unwrap_or(usize::MAX).min(l.len());
    let out: Vec<Bytes> = (0..take).filter_map(|_| l.pop(end)).collect();
    if !out.is_empty() {
        let mut b = itoa::Buffer::new();
        let cmd: &[u8] = if end == End::Left { b"LPOP" } else { b"RPOP" };
        db.log_effect(cx, &[cmd, key, b.format(out.len()).as_bytes()]);
    }
    drop_if_empty(db, cx, key);
    Ok(Some(out))
}

/// `LPOP|RPOP key [count]`
///
/// # Reply
/// Without count: the element, or null bulk for a missing key. With count:
/// an array of up to `count` elements; null array for a missing key; an
/// empty array for count 0.
/// # Errors
/// (count errors at parse time) `WrongType`.
/// # Source
/// `popGenericCommand`, redis/src/t_list.c.
pub fn apply_pop(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    end: End,
    count: Option<u64>,
) -> Result<Reply, CmdError> {
    let Some(l) = db.get_list(cx.db, key, cx.now_ms)? else {
        return Ok(if count.is_some() {
            Reply::NullArray
        } else {
            Reply::NullBulk
        });
    };
    if count == Some(0) || l.is_empty() {
        return Ok(Reply::Array(Vec::new()));
    }
    let items = pop_n(db, cx, key, end, count.unwrap_or(1))?.unwrap_or_default();
    Ok(match count {
        Some(_) => Reply::Array(items.into_iter().map(Reply::Bulk).collect()),
        None => items
            .into_iter()
            .next()
            .map_or(Reply::NullBulk, Reply::Bulk),
    })
}

/// `LRANGE key start stop`
///
/// # Reply
/// Array of the elements from `start` to `stop` inclusive (negative indexes
/// from the tail); empty for a missing key.
/// # Errors
/// `WrongType`.
pub fn apply_lrange(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    start: i64,
    stop: i64,
) -> Result<Reply, CmdError> {
    let Some(l) = db.get_list(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(Reply::Array(match l.clamp(start, stop) {
        None => Vec::new(),
        Some((a, b)) => l
            .range(a, b)
            .map(|v| Reply::Bulk(Bytes::copy_from_slice(v)))
            .collect(),
    }))
}

/// `LSET key index element`
///
/// # Reply
/// `+OK`.
/// # Errors
/// In order: `ERR no such key`, `WrongType`, a bad index
/// (`ERR value is not an integer or out of range`), `ERR index out of range`.
/// # Source
/// `lsetCommand`, redis/src/t_list.c.
pub fn apply_lset(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    index: Result<i64, CmdError>,
    value: Bytes,
) -> Result<Reply, CmdError> {
    let fill = db.tunables.list_fill();
    let Some(l) = db.get_list_mut(cx.db, key, cx.now_ms)? else {
        return Err(CmdError::NoSuchKey);
    };
    let index = index?;
    l.grow_check(fill, [&value[..]]);
    if !l.set(index, &value) {
        return Err(CmdError::msg("ERR index out of range"));
    }
    let mut b = itoa::Buffer::new();
    db.log_effect(cx, &[b"LSET", key, b.format(index).as_bytes(), &value]);
    drop_if_empty(db, cx, key);
    Ok(Reply::Ok)
}

/// `LINSERT key BEFORE|AFTER pivot element`
///
/// # Reply
/// Integer: the new length; -1 when `pivot` is not found; 0 for a missing key.
/// # Errors
/// `ERR syntax error` (at parse), `WrongType`.
pub fn apply_linsert(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    after: bool,
    pivot: &[u8],
    value: Bytes,
) -> Result<Reply, CmdError> {
    let fill = db.tunables.list_fill();
    let Some(l) = db.get_list_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Int(0));
    };
    l.grow_check(fill, [&value[..]]);
    if !l.insert(after, pivot, &value) {
        return Ok(Reply::Int(-1));
    }
    let len = l.len() as i64;
    let place: &[u8] = if after { b"AFTER" } else { b"BEFORE" };
    db.log_effect(cx, &[b"LINSERT", key, place, pivot, &value]);
    db.blocking.mark_ready(cx.db, key);
    Ok(Reply::Int(len))
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`
///
/// # Reply
/// Without COUNT: the index of the match, or null bulk. With COUNT: an
/// array of indexes (empty for a missing key).
/// # Errors
/// (options at parse time) `WrongType`.
/// # Source
/// `lposCommand`, redis/src/t_list.c.
pub fn apply_lpos(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    elem: &[u8],
    o: LposOpts,
) -> Result<Reply, CmdError> {
    let Some(l) = db.get_list(cx.db, key, cx.now_ms)? else {
        return Ok(if o.count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::NullBulk
        });
    };
    let len = l.len();
    let limit = if o.maxlen == 0 {
        len
    } else {
        usize::try_from(o.maxlen).unwrap_or(usize::MAX).min(len)
    };
    let want = match o.count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let mut skip = o.rank.unsigned_abs() - 1;
    let mut found = Vec::new();
    let mut visit = |i: usize, v: &[u8]| {
        if found.len() >= want {
            return false;
        }
        if v == elem {
            if skip > 0 {
                skip -= 1;
            } else {
                found.push(Reply::Int(i as i64));
            }
        }
        true
    };
    if o.rank > 0 {
        for (i, v) in l.iter().enumerate().take(limit) {
            if !visit(i, v) {
                break;
            }
        }
    } else {
        for (k, v) in l.iter().rev().enumerate().take(limit) {
            if !visit(len - 1 - k, v) {
                break;
            }
        }
    }
    Ok(match o.count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::NullBulk),
    })
}

/// `LREM key count element`
///
/// # Reply
/// Integer: how many elements were removed.
/// # Errors
/// (count at parse) `WrongType`.
pub fn apply_lrem(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    count: i64,
    elem: &[u8],
) -> Result<Reply, CmdError> {
    let Some(l) = db.get_list_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Int(0));
    };
    let n = l.remove(count, elem);
    if n > 0 {
        let mut b = itoa::Buffer::new();
        db.log_effect(cx, &[b"LREM", key, b.format(count).as_bytes(), elem]);
        drop_if_empty(db, cx, key);
    }
    Ok(Reply::Int(n as i64))
}

/// `LTRIM key start stop`
///
/// # Reply
/// `+OK` (also for a missing key).
/// # Errors
/// (indexes at parse) `WrongType`.
pub fn apply_ltrim(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    start: i64,
    stop: i64,
) -> Result<Reply, CmdError> {
    let Some(l) = db.get_list_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Ok);
    };
    let keep = l.clamp(start, stop);
    let before = l.len();
    l.trim(keep);
    if l.len() != before {
        let mut a = itoa::Buffer::new();
        let mut b = itoa::Buffer::new();
        db.log_effect(
            cx,
            &[
                b"LTRIM",
                key,
                a.format(start).as_bytes(),
                b.format(stop).as_bytes(),
            ],
        );
    }
    drop_if_empty(db, cx, key);
    Ok(Reply::Ok)
}

/// LMOVE on one shard: pop from `src`'s `from` end, push at `dst`'s `to` end.
///
/// # Reply
/// The element moved; null bulk when `src` is missing.
/// # Errors
/// `WrongType` for `src`; for `dst` only when `src` has an element, before
/// anything moves.
/// # Source
/// `lmoveGenericCommand`, redis/src/t_list.c.
pub fn apply_lmove(
    db: &mut ShardDb,
    cx: &ExecCtx,
    src: &Bytes,
    dst: &Bytes,
    from: End,
    to: End,
) -> Result<Reply, CmdError> {
    match db.get_list(cx.db, src, cx.now_ms)? {
        Some(l) if !l.is_empty() => {}
        _ => return Ok(Reply::NullBulk),
    }
    db.get_list(cx.db, dst, cx.now_ms)?;
    let fill = db.tunables.list_fill();
    let Some(v) = db
        .get_list_mut(cx.db, src, cx.now_ms)?
        .and_then(|l| l.pop(from))
    else {
        return Ok(Reply::NullBulk);
    };
    drop_if_empty(db, cx, src);
    if db.get_list(cx.db, dst, cx.now_ms)?.is_none() {
        db.set(cx.db, dst.clone(), Value::List(Box::default()), None);
    }
    if let Some(l) = db.get_list_mut(cx.db, dst, cx.now_ms)? {
        l.grow_check(fill, [&v[..]]);
        l.push(to, &v);
    }
    // LMOVE runs on the connection's thread (it may span shards): its
    // effect is the pop and the push, both keyed records.
    let pop: &[u8] = if from == End::Left { b"LPOP" } else { b"RPOP" };
    let push: &[u8] = if to == End::Left { b"LPUSH" } else { b"RPUSH" };
    db.log_effect(cx, &[pop, src, b"1"]);
    db.log_effect(cx, &[push, dst, &v]);
    db.blocking.mark_ready(cx.db, dst);
    Ok(Reply::Bulk(v))
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`
///
/// # Reply
/// The element moved, or null bulk when `source` is missing or empty.
/// # Errors
/// `ERR syntax error`, then `WrongType` (source, then destination).
/// # Source
/// `lmoveCommand`, redis/src/t_list.c. Across shards: see the module doc.
fn lmove_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let (from, to) = (parse_end(&argv[3])?, parse_end(&argv[4])?);
    Ok(plan_lmove(cx, argv[1].clone(), argv[2].clone(), from, to))
}

/// `RPOPLPUSH source destination`: `LMOVE source destination RIGHT LEFT`.
fn rpoplpush_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(plan_lmove(
        cx,
        argv[1].clone(),
        argv[2].clone(),
        End::Right,
        End::Left,
    ))
}

fn plan_lmove(cx: &ConnCtx<'_>, src: Bytes, dst: Bytes, from: End, to: End) -> Action {
    let (s, d) = (cx.shared.shard_of(&src), cx.shared.shard_of(&dst));
    if s == d {
        return one_part(
            s,
            on_shard(move |db, cx| apply_lmove(db, cx, &src, &dst, from, to).into()),
        );
    }
    let (src2, dst2) = (src.clone(), dst.clone());
    cross_move(
        (s, d),
        Box::new(move |db, cx| db.get_list(cx.db, &dst2, cx.now_ms).err()),
        Box::new(move |db, cx, dst_err| {
            match db.get_list(cx.db, &src, cx.now_ms)? {
                Some(l) if !l.is_empty() => {}
                _ => return Ok(None),
            }
            if let Some(e) = dst_err {
                return Err(e);
            }
            Ok(pop_n(db, cx, &src, from, 1)?.and_then(|mut v| v.pop()))
        }),
        Box::new(move |db, cx, v| {
            let r = apply_push(db, cx, dst.clone(), vec![v.clone()], to, false);
            r.map(|_| Reply::Bulk(v))
        }),
        Box::new(move |db, cx, v| {
            // Back where it came from, on the same end.
            let _ = apply_push(db, cx, src2.clone(), vec![v], from, false);
        }),
        Reply::NullBulk,
    )
}

/// Checks the destination's type on its shard: `Some(error)` refuses the move.
pub type CheckDst = Box<dyn FnOnce(&mut ShardDb, &ExecCtx) -> Option<CmdError> + Send>;
/// Checks the source and takes the element on the source shard (`Ok(None)`:
/// nothing to move). Gets the destination's type error, to be answered
/// after the source's own checks and before anything is taken (Redis's
/// order of checks).
pub type TakeSrc = Box<
    dyn FnOnce(&mut ShardDb, &ExecCtx, Option<CmdError>) -> Result<Option<Bytes>, CmdError> + Send,
>;
/// Puts the element on the destination shard; its reply answers the command.
pub type PutDst = Box<dyn FnOnce(&mut ShardDb, &ExecCtx, Bytes) -> Result<Reply, CmdError> + Send>;
/// Gives the element back to the source when the put failed.
pub type GiveBack = Box<dyn FnOnce(&mut ShardDb, &ExecCtx, Bytes) + Send>;

/// A move of one element between keys on two shards (LMOVE, SMOVE), in
/// four single-shard steps of one fan-out: (1) the destination shard reads
/// the destination's type; (2) the source shard checks the source, refuses
/// with the destination's type error (Redis checks both before moving), or
/// takes the element; (3) the destination shard puts it, or — if the
/// destination changed type in between — hands it back; (4) the source
/// shard puts a handed-back element back, and the command answers step 3's
/// reply (`none` when there was nothing to move).
pub fn cross_move(
    (src_shard, dst_shard): (ShardId, ShardId),
    check: CheckDst,
    take: TakeSrc,
    put: PutDst,
    give_back: GiveBack,
    none: Reply,
) -> Action {
    let (dst_err_tx, dst_err_rx) = bounded::<Option<CmdError>>(1);
    let (val_tx, val_rx) = bounded::<Bytes>(1);
    let (back_tx, back_rx) = bounded::<Bytes>(1);
    let (reply_tx, reply_rx) = bounded::<Reply>(1);
    let step1 = on_shard(move |db, cx| {
        let _ = dst_err_tx.send(check(db, cx));
        Reply::Ok
    });
    let step2 = on_shard(move |db, cx| {
        let dst_err = dst_err_rx.try_recv().ok().flatten();
        match take(db, cx, dst_err) {
            Ok(Some(v)) => {
                let _ = val_tx.send(v);
                Reply::Ok
            }
            Ok(None) => Reply::Ok,
            Err(e) => Reply::Error(e),
        }
    });
    let step3 = on_shard(move |db, cx| {
        let Ok(v) = val_rx.try_recv() else {
            let _ = reply_tx.send(none);
            return Reply::Ok;
        };
        match put(db, cx, v.clone()) {
            Ok(r) => {
                let _ = reply_tx.send(r);
            }
            Err(e) => {
                let _ = back_tx.send(v);
                let _ = reply_tx.send(Reply::Error(e));
            }
        }
        Reply::Ok
    });
    let step4 = on_shard(move |db, cx| {
        if let Ok(v) = back_rx.try_recv() {
            give_back(db, cx, v);
        }
        reply_rx.try_recv().unwrap_or(Reply::NullBulk)
    });
    crate::cmd::steps(vec![
        (dst_shard, step1),
        (src_shard, step2),
        (dst_shard, step3),
        (src_shard, step4),
    ])
}

/// One request on one shard, its reply unchanged.
pub fn one_part(shard: ShardId, req: ShardReq) -> Action {
    Action::FanOut {
        parts: vec![(shard, req)],
        merge: Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk)),
    }
}

/// Pop up to `count` elements from the first key of `keys` (in order) that
/// holds a non-empty list.
///
/// # Reply
/// `[key, [elements]]`, or null array when every key is missing or empty.
/// # Errors
/// `WrongType` for the first key of another type met before a list with data.
/// # Source
/// `mpopGenericCommand`, redis/src/t_list.c.
pub fn apply_mpop(db: &mut ShardDb, cx: &ExecCtx, m: &Mpop) -> Result<Reply, CmdError> {
    for key in &m.keys {
        match db.get_list(cx.db, key, cx.now_ms)? {
            Some(l) if !l.is_empty() => {
                let items = pop_n(db, cx, key, m.end, m.count)?.unwrap_or_default();
                return Ok(Reply::Array(vec![
                    Reply::Bulk(key.clone()),
                    Reply::Array(items.into_iter().map(Reply::Bulk).collect()),
                ]));
            }
            _ => {}
        }
    }
    Ok(Reply::NullArray)
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`
///
/// # Reply
/// `[key, [elements]]` from the first non-empty list; null array when none.
/// # Errors
/// Those of [`parse_mpop`], then `WrongType`.
/// # Source
/// `lmpopCommand`, redis/src/t_list.c. Keys on several shards: tried shard
/// after shard in key order (see the module doc).
fn lmpop_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let m = parse_mpop(argv, 1)?;
    // Consecutive runs of keys on one shard, in key order.
    let mut runs: Vec<(ShardId, Vec<Bytes>)> = Vec::new();
    for k in &m.keys {
        let s = cx.shared.shard_of(k);
        match runs.last_mut() {
            Some((rs, ks)) if *rs == s => ks.push(k.clone()),
            _ => runs.push((s, vec![k.clone()])),
        }
    }
    if runs.len() == 1 {
        return Ok(one_part(
            runs[0].0,
            on_shard(move |db, cx| apply_mpop(db, cx, &m).into()),
        ));
    }
    // Each step answers its pop, or passes the turn on: a shared flag says
    // whether an earlier step already answered.
    let (done_tx, done_rx) = bounded::<Reply>(1);
    let done_rx = Arc::new(done_rx);
    let n = runs.len();
    let list: Vec<(ShardId, ShardReq)> = runs
        .into_iter()
        .enumerate()
        .map(|(i, (s, keys))| {
            let part = Mpop {
                keys,
                end: m.end,
                count: m.count,
            };
            let (done_tx, done_rx) = (done_tx.clone(), done_rx.clone());
            let req = on_shard(move |db, cx| {
                let prev = done_rx.try_recv().ok();
                let reply = match prev {
                    Some(r) => r,
                    None => match apply_mpop(db, cx, &part) {
                        Ok(Reply::NullArray) => Reply::NullArray,
                        Ok(r) => r,
                        Err(e) => Reply::Error(e),
                    },
                };
                if i + 1 == n || !matches!(reply, Reply::NullArray) {
                    if i + 1 < n {
                        let _ = done_tx.send(reply);
                        return Reply::Ok;
                    }
                    return reply;
                }
                Reply::Ok
            });
            (s, req)
        })
        .collect();
    Ok(crate::cmd::steps(list))
}

// ---------------------------------------------------------------- blocking

/// A parsed blocking pop: BLPOP / BRPOP (count `None`) or BLMPOP.
#[derive(Clone, Debug)]
struct Bpop {
    keys: Vec<Bytes>,
    end: End,
    /// BLMPOP's COUNT (reply `[key, [elements]]`); `None`: `[key, element]`.
    count: Option<u64>,
    timeout_ms: u64,
}

fn parse_bpop_req(argv: &[Bytes], end: End) -> Result<Bpop, CmdError> {
    let timeout_ms = parse_timeout_s(&argv[argv.len() - 1])?;
    Ok(Bpop {
        keys: argv[1..argv.len() - 1].to_vec(),
        end,
        count: None,
        timeout_ms,
    })
}

fn parse_blmpop_req(argv: &[Bytes]) -> Result<Bpop, CmdError> {
    let timeout_ms = parse_timeout_s(&argv[1])?;
    let m = parse_mpop(argv, 2)?;
    Ok(Bpop {
        keys: m.keys,
        end: m.end,
        count: Some(m.count),
        timeout_ms,
    })
}

/// One non-blocking pass of a blocking pop over its keys on this shard.
/// `Ok(None)`: every key is missing or empty.
///
/// # Source
/// `blockingPopGenericCommand` / `blmpopCommand`, redis/src/t_list.c: keys
/// in order, the first of another type fails the command.
fn try_bpop(db: &mut ShardDb, cx: &ExecCtx, req: &Bpop) -> Result<Option<Reply>, CmdError> {
    for key in &req.keys {
        match db.get_list(cx.db, key, cx.now_ms)? {
            Some(l) if !l.is_empty() => {}
            _ => continue,
        }
        let items = pop_n(db, cx, key, req.end, req.count.unwrap_or(1))?.unwrap_or_default();
        let k = Reply::Bulk(key.clone());
        return Ok(Some(match req.count {
            None => Reply::Array(vec![
                k,
                items
                    .into_iter()
                    .next()
                    .map_or(Reply::NullBulk, Reply::Bulk),
            ]),
            Some(_) => Reply::Array(vec![
                k,
                Reply::Array(items.into_iter().map(Reply::Bulk).collect()),
            ]),
        }));
    }
    Ok(None)
}

fn bpop_now(req: Bpop) -> ShardReq {
    on_shard(move |db, cx| match try_bpop(db, cx, &req) {
        Ok(Some(r)) => r,
        Ok(None) => Reply::NullArray,
        Err(e) => Reply::Error(e),
    })
}

fn parse_blpop(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    Ok(bpop_now(parse_bpop_req(argv, End::Left)?))
}
fn parse_brpop(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    Ok(bpop_now(parse_bpop_req(argv, End::Right)?))
}
fn parse_blmpop(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    Ok(bpop_now(parse_blmpop_req(argv)?))
}

fn bpop_block_ms(argv: &[Bytes]) -> Option<u64> {
    parse_bpop_req(argv, End::Left).ok().map(|r| r.timeout_ms)
}
fn blmpop_block_ms(argv: &[Bytes]) -> Option<u64> {
    parse_blmpop_req(argv).ok().map(|r| r.timeout_ms)
}

fn park_blpop(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_bpop_req(argv, End::Left)?;
    Ok(on_shard(move |db, cx| park_bpop(db, cx, req, ticket)))
}
fn park_brpop(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_bpop_req(argv, End::Right)?;
    Ok(on_shard(move |db, cx| park_bpop(db, cx, req, ticket)))
}
fn park_blmpop(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_blmpop_req(argv)?;
    Ok(on_shard(move |db, cx| park_bpop(db, cx, req, ticket)))
}

/// Whether `key` holds a non-empty list now (what wakes a blocked pop).
fn has_items(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> bool {
    matches!(db.get_list(cx.db, key, cx.now_ms), Ok(Some(l)) if !l.is_empty())
}

/// The shard side of a blocking pop: serve now if a key has data (claiming
/// the ticket before popping), else park. Served later when a push marks
/// one of its keys ready: the pop runs again over its keys on this shard.
fn park_bpop(db: &mut ShardDb, cx: &ExecCtx, mut req: Bpop, ticket: Arc<Ticket>) -> Reply {
    if ticket.is_fired() {
        return Reply::NoReply;
    }
    // Over several shards every shard gets the whole command: each serves
    // its own keys.
    let me = db.id;
    req.keys.retain(|k| db.slot_map.shard_of_key(k) == me);
    if req.keys.is_empty() {
        return Reply::NoReply;
    }
    let ready_now = req.keys.iter().any(|k| has_items(db, cx, k))
        || req
            .keys
            .iter()
            .any(|k| db.get_list(cx.db, k, cx.now_ms).is_err());
    if ready_now {
        if !ticket.claim() {
            return Reply::NoReply;
        }
        return match try_bpop(db, cx, &req) {
            Ok(Some(r)) => r,
            Ok(None) => Reply::NullArray,
            Err(e) => Reply::Error(e),
        };
    }
    let watched = req.keys.iter().map(|k| (cx.db, k.clone())).collect();
    db.blocking.park(Waiter {
        no_touch: db.no_touch,
        ticket: ticket.clone(),
        reply_to: cx.reply_to,
        keys: watched,
        poll: false,
        nokey: false,
        attempt: Box::new(move |db, cx, ready, ticket| {
            // Woken only by a key that now is a list with elements.
            if !has_items(db, cx, ready) {
                return Attempt::NotReady;
            }
            if !ticket.claim() {
                return Attempt::Lost;
            }
            Attempt::Served(match try_bpop(db, cx, &req) {
                Ok(Some(r)) => r,
                Ok(None) => Reply::NullArray,
                Err(e) => Reply::Error(e),
            })
        }),
    });
    Reply::NoReply
}

/// A parsed BLMOVE / BRPOPLPUSH.
#[derive(Clone, Debug)]
struct Bmove {
    src: Bytes,
    dst: Bytes,
    from: End,
    to: End,
    timeout_ms: u64,
}

fn parse_blmove_req(argv: &[Bytes]) -> Result<Bmove, CmdError> {
    let (from, to) = (parse_end(&argv[3])?, parse_end(&argv[4])?);
    Ok(Bmove {
        src: argv[1].clone(),
        dst: argv[2].clone(),
        from,
        to,
        timeout_ms: parse_timeout_s(&argv[5])?,
    })
}

fn parse_brpoplpush_req(argv: &[Bytes]) -> Result<Bmove, CmdError> {
    Ok(Bmove {
        src: argv[1].clone(),
        dst: argv[2].clone(),
        from: End::Right,
        to: End::Left,
        timeout_ms: parse_timeout_s(&argv[3])?,
    })
}

fn bmove_now(req: Bmove) -> ShardReq {
    on_shard(move |db, cx| apply_lmove(db, cx, &req.src, &req.dst, req.from, req.to).into())
}

fn parse_blmove(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    Ok(bmove_now(parse_blmove_req(argv)?))
}
fn parse_brpoplpush(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    Ok(bmove_now(parse_brpoplpush_req(argv)?))
}

fn blmove_block_ms(argv: &[Bytes]) -> Option<u64> {
    let r = if argv.len() == 4 {
        parse_brpoplpush_req(argv)
    } else {
        parse_blmove_req(argv)
    };
    r.ok().map(|r| r.timeout_ms)
}

fn park_blmove(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_blmove_req(argv)?;
    Ok(park_bmove(req, ticket))
}
fn park_brpoplpush(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_brpoplpush_req(argv)?;
    Ok(park_bmove(req, ticket))
}

/// BLMOVE on the source's shard. The router parks it on every shard of its
/// keys; only the source's shard acts (the destination's part answers
/// nothing and parks nothing). With the destination on this shard the move
/// is [`apply_lmove`]; on another shard the element is popped here and
/// forwarded there ([`ShardDb::forward`]), where it is pushed and answered.
fn park_bmove(req: Bmove, ticket: Arc<Ticket>) -> ShardReq {
    on_shard(move |db, cx| {
        if ticket.is_fired() {
            return Reply::NoReply;
        }
        let me = db.id;
        let src_here = db.slot_map.shard_of_key(&req.src) == me;
        if !src_here {
            return Reply::NoReply;
        }
        let dst_here = db.slot_map.shard_of_key(&req.dst) == me;
        if has_items(db, cx, &req.src) || db.get_list(cx.db, &req.src, cx.now_ms).is_err() {
            if !ticket.claim() {
                return Reply::NoReply;
            }
            return serve_bmove(db, cx, &req, dst_here);
        }
        let key = req.src.clone();
        db.blocking.park(Waiter {
            no_touch: db.no_touch,
            ticket: ticket.clone(),
            reply_to: cx.reply_to,
            keys: vec![(cx.db, key)],
            poll: false,
            nokey: false,
            attempt: Box::new(move |db, cx, ready, ticket| {
                if !has_items(db, cx, ready) {
                    return Attempt::NotReady;
                }
                if !ticket.claim() {
                    return Attempt::Lost;
                }
                match serve_bmove(db, cx, &req, dst_here) {
                    // Answered by the destination's shard.
                    Reply::NoReply => Attempt::Lost,
                    r => Attempt::Served(r),
                }
            }),
        });
        Reply::NoReply
    })
}

/// Move for a claimed BLMOVE: here, or pop here and forward the push.
fn serve_bmove(db: &mut ShardDb, cx: &ExecCtx, req: &Bmove, dst_here: bool) -> Reply {
    if dst_here {
        return apply_lmove(db, cx, &req.src, &req.dst, req.from, req.to).into();
    }
    let v = match pop_n(db, cx, &req.src, req.from, 1) {
        Ok(Some(mut v)) => match v.pop() {
            Some(v) => v,
            None => return Reply::NullArray,
        },
        Ok(None) => return Reply::NullArray,
        Err(e) => return Reply::Error(e),
    };
    let (dst, to, src, from) = (req.dst.clone(), req.to, req.src.clone(), req.from);
    let dst_shard = db.slot_map.shard_of_key(&dst);
    let src_shard = db.id;
    let reply_to = cx.reply_to;
    let dbi = cx.db;
    db.forward.push((
        dst_shard,
        dbi,
        reply_to,
        on_shard(move |db, cx| {
            match apply_push(db, cx, dst, vec![v.clone()], to, false) {
                Ok(_) => Reply::Bulk(v),
                Err(e) => {
                    // The destination is of another type: the element goes
                    // back to the source, and the client gets the error.
                    db.forward.push((
                        src_shard,
                        dbi,
                        reply_to,
                        on_shard(move |db, cx| {
                            let _ = apply_push(db, cx, src, vec![v], from, false);
                            Reply::Error(e)
                        }),
                    ));
                    Reply::NoReply
                }
            }
        }),
    ));
    Reply::NoReply
}

#[cfg(test)]
mod tests {
    use crate::cmd::testing::exec;
    use crate::reply::Reply;
    use crate::route::slot::ShardId;
    use crate::shard::db::ShardDb;

    fn b(s: &str) -> Reply {
        Reply::bulk(s.to_string())
    }

    #[test]
    fn push_pop_range() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        assert_eq!(exec(&mut db, "RPUSH l a b c"), Reply::Int(3));
        assert_eq!(exec(&mut db, "LPUSH l z"), Reply::Int(4));
        assert_eq!(
            exec(&mut db, "LRANGE l 0 -1"),
            Reply::Array(vec![b("z"), b("a"), b("b"), b("c")])
        );
        assert_eq!(exec(&mut db, "LPOP l"), b("z"));
        assert_eq!(
            exec(&mut db, "RPOP l 5"),
            Reply::Array(vec![b("c"), b("b"), b("a")])
        );
        assert_eq!(exec(&mut db, "EXISTS l"), Reply::Int(0));
        assert_eq!(exec(&mut db, "LPOP l 2"), Reply::NullArray);
        assert_eq!(exec(&mut db, "LPUSHX l a"), Reply::Int(0));
    }

    #[test]
    fn lpos_and_lmpop() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        exec(&mut db, "RPUSH l a b c a b c a");
        assert_eq!(exec(&mut db, "LPOS l a RANK -2"), Reply::Int(3));
        assert_eq!(
            exec(&mut db, "LPOS l a COUNT 0"),
            Reply::Array(vec![Reply::Int(0), Reply::Int(3), Reply::Int(6)])
        );
        assert_eq!(exec(&mut db, "LPOS l a MAXLEN 1 RANK 2"), Reply::NullBulk);
        assert_eq!(
            exec(&mut db, "BLMPOP 0 2 x l RIGHT COUNT 2"),
            Reply::Array(vec![b("l"), Reply::Array(vec![b("a"), b("c")])])
        );
    }
}
