//! ZPOPMIN, ZPOPMAX, ZMPOP and the blocking BZPOPMIN, BZPOPMAX, BZMPOP.
//!
//! The blocking forms reuse the generic machinery of
//! [`crate::shard::blocking`]: each shard owning some of the keys gets a park
//! request under one shared [`Ticket`]; a shard that finds a member (now, or
//! when a write marks a key ready) claims the ticket *before* popping, so a
//! client blocked on keys of several shards gets exactly one pop. The pop is
//! recorded as `ZREM key member` (the effect, not the command).
//!
//! Keys on one shard are checked in the caller's order, as Redis does. When
//! keys of several shards already hold members, which shard answers first is
//! not defined (Redis would pop from the first key in argument order).

use std::sync::Arc;

use bytes::Bytes;

use crate::cmd::args::{self, parse_i64, parse_timeout_s};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::blocking::{Attempt, Ticket, Waiter};
use crate::shard::db::ShardDb;
use crate::zset::Member;

use super::reply_score;
use super::write::{drop_if_empty, log_zrem};

/// Which end a pop takes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Lowest scores first (ZPOPMIN, `MIN`).
    Min,
    /// Highest scores first (ZPOPMAX, `MAX`).
    Max,
}

/// How a pop's reply is shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PopShape {
    /// ZPOPMIN/ZPOPMAX: `[member, score]` without a count, pairs with one.
    Plain { counted: bool },
    /// BZPOPMIN/BZPOPMAX: `[key, member, score]`.
    WithKey,
    /// ZMPOP/BZMPOP: `[key, [[member, score], ...]]`.
    Nested,
}

/// A parsed pop over one or more keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PopReq {
    pub keys: Vec<Bytes>,
    pub end: End,
    /// Members to pop from the first non-empty key.
    pub count: u64,
    pub shape: PopShape,
    /// Blocking forms: how long to wait, ms (0 = forever).
    pub timeout_ms: Option<u64>,
}

/// Remove up to `count` members from `end` of the sorted set at `key`
/// (which must hold one), record `ZREM key ...`, delete the emptied key.
fn pop_from(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &Bytes,
    end: End,
    count: u64,
) -> Vec<(f64, Member)> {
    let popped = match db.get_zset_mut(cx.db, key, cx.now_ms) {
        Ok(Some(z)) => {
            let n = usize::try_from(count).unwrap_or(usize::MAX).min(z.len());
            match end {
                End::Min => z.remove_range(0, n),
                End::Max => {
                    let len = z.len();
                    let mut v = z.remove_range(len - n, len);
                    v.reverse();
                    v
                }
            }
        }
        _ => Vec::new(),
    };
    log_zrem(db, cx, key, &popped);
    drop_if_empty(db, cx, key);
    popped
}

/// The first of `keys` (in order) that holds a sorted set, without side
/// effects: `Ok(Some(index))`, `Ok(None)` when none exists.
///
/// # Errors
/// `WrongType` for a key of another type met before any sorted set.
fn first_zset(db: &mut ShardDb, cx: &ExecCtx, keys: &[Bytes]) -> Result<Option<usize>, CmdError> {
    for (i, k) in keys.iter().enumerate() {
        if db.check_zset(cx.db, k, cx.now_ms)? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn shape_reply(shape: PopShape, key: &Bytes, popped: &[(f64, Member)]) -> Reply {
    let pair = |(s, m): &(f64, Member)| (Reply::bulk_copy(&m[..]), reply_score(*s));
    match shape {
        PopShape::Plain { counted: true } => Reply::Pairs(popped.iter().map(pair).collect()),
        PopShape::Plain { counted: false } => Reply::Array(
            popped
                .iter()
                .flat_map(|e| {
                    let (m, s) = pair(e);
                    [m, s]
                })
                .collect(),
        ),
        PopShape::WithKey => {
            let mut v = vec![Reply::Bulk(key.clone())];
            for e in popped {
                let (m, s) = pair(e);
                v.push(m);
                v.push(s);
            }
            Reply::Array(v)
        }
        PopShape::Nested => Reply::Array(vec![
            Reply::Bulk(key.clone()),
            Reply::Array(
                popped
                    .iter()
                    .map(|e| {
                        let (m, s) = pair(e);
                        Reply::Array(vec![m, s])
                    })
                    .collect(),
            ),
        ]),
    }
}

/// Pop now, without blocking (ZPOPMIN/ZPOPMAX/ZMPOP, and the blocking forms
/// inside MULTI or when a key has members).
///
/// # Reply
/// See [`PopShape`]. Nothing to pop: an empty array (ZPOPMIN/ZPOPMAX,
/// also for count 0), a null array (ZMPOP, BZPOP*, BZMPOP).
/// # Errors
/// `WrongType` for the first existing key of another type before a sorted set.
/// # Source
/// `genericZpopCommand`, `blockingGenericZpopCommand`, redis/src/t_zset.c.
pub fn apply_pop(db: &mut ShardDb, cx: &ExecCtx, req: &PopReq) -> Result<Reply, CmdError> {
    let none = || match req.shape {
        PopShape::Plain { .. } => Reply::Array(Vec::new()),
        _ => Reply::NullArray,
    };
    let Some(i) = first_zset(db, cx, &req.keys)? else {
        return Ok(none());
    };
    if req.count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let key = req.keys[i].clone();
    let popped = pop_from(db, cx, &key, req.end, req.count);
    Ok(shape_reply(req.shape, &key, &popped))
}

fn pop_req(argv: &[Bytes], end: End) -> Result<ShardReq, CmdError> {
    if argv.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match argv.get(2) {
        None => None,
        Some(a) => {
            // Redis's getPositiveLongFromObjectOrReply: one text for both.
            let n = parse_i64(a)
                .filter(|n| *n >= 0)
                .ok_or(CmdError::msg("ERR value is out of range, must be positive"))?;
            Some(n as u64)
        }
    };
    let req = PopReq {
        keys: vec![argv[1].clone()],
        end,
        count: count.unwrap_or(1),
        shape: PopShape::Plain {
            counted: count.is_some(),
        },
        timeout_ms: None,
    };
    Ok(on_shard(move |db, cx| apply_pop(db, cx, &req).into()))
}

/// `ZPOPMIN key [count]`
pub(super) fn parse_zpopmin(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    pop_req(argv, End::Min)
}

/// `ZPOPMAX key [count]`
pub(super) fn parse_zpopmax(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    pop_req(argv, End::Max)
}

/// Parse `BZPOPMIN key [key ...] timeout` / BZPOPMAX.
fn parse_bzpop_req(argv: &[Bytes], end: End) -> Result<PopReq, CmdError> {
    let timeout_ms = parse_timeout_s(&argv[argv.len() - 1])?;
    Ok(PopReq {
        keys: argv[1..argv.len() - 1].to_vec(),
        end,
        count: 1,
        shape: PopShape::WithKey,
        timeout_ms: Some(timeout_ms),
    })
}

/// Parse `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]` (with
/// `numkeys_at` 1) or `BZMPOP timeout numkeys ...` (with `numkeys_at` 2;
/// the timeout is checked after the other arguments, as Redis does).
///
/// # Errors
/// `ERR numkeys should be greater than 0`, `ERR syntax error` (missing or
/// wrong MIN/MAX, unknown or repeated option), `ERR count should be greater
/// than 0`, then the timeout errors of [`parse_timeout_s`].
/// # Source
/// `zmpopGenericCommand`.
pub(super) fn parse_zmpop_req(argv: &[Bytes], numkeys_at: usize) -> Result<PopReq, CmdError> {
    let numkeys_err = || CmdError::msg("ERR numkeys should be greater than 0");
    let numkeys = parse_i64(&argv[numkeys_at]).ok_or_else(numkeys_err)?;
    if numkeys < 1 {
        return Err(numkeys_err());
    }
    let where_at = numkeys_at
        .checked_add(usize::try_from(numkeys).unwrap_or(usize::MAX))
        .and_then(|n| n.checked_add(1))
        .filter(|&n| n < argv.len())
        .ok_or(CmdError::Syntax)?;
    let end = if args::is(&argv[where_at], "MIN") {
        End::Min
    } else if args::is(&argv[where_at], "MAX") {
        End::Max
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < argv.len() {
        if count.is_none() && args::is(&argv[j], "COUNT") && j + 1 < argv.len() {
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
    let timeout_ms = if numkeys_at == 2 {
        Some(parse_timeout_s(&argv[1])?)
    } else {
        None
    };
    Ok(PopReq {
        keys: argv[numkeys_at + 1..where_at].to_vec(),
        end,
        count: count.unwrap_or(1),
        shape: PopShape::Nested,
        timeout_ms,
    })
}

fn now_req(req: PopReq) -> ShardReq {
    on_shard(move |db, cx| apply_pop(db, cx, &req).into())
}

/// BZPOPMIN without blocking (inside MULTI): pops now or answers a null array.
pub(super) fn parse_bzpopmin(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_bzpop_req(argv, End::Min).map(now_req)
}

pub(super) fn parse_bzpopmax(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_bzpop_req(argv, End::Max).map(now_req)
}

pub(super) fn parse_bzmpop(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    parse_zmpop_req(argv, 2).map(now_req)
}

/// The timeout of a valid BZPOPMIN / BZPOPMAX (they always block).
pub(super) fn bzpop_block_ms(argv: &[Bytes]) -> Option<u64> {
    parse_bzpop_req(argv, End::Min).ok()?.timeout_ms
}

/// The timeout of a valid BZMPOP.
pub(super) fn bzmpop_block_ms(argv: &[Bytes]) -> Option<u64> {
    parse_zmpop_req(argv, 2).ok()?.timeout_ms
}

pub(super) fn park_bzpopmin(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_bzpop_req(argv, End::Min)?;
    Ok(on_shard(move |db, cx| park_pop(db, cx, req, ticket)))
}

pub(super) fn park_bzpopmax(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_bzpop_req(argv, End::Max)?;
    Ok(on_shard(move |db, cx| park_pop(db, cx, req, ticket)))
}

pub(super) fn park_bzmpop(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_zmpop_req(argv, 2)?;
    Ok(on_shard(move |db, cx| park_pop(db, cx, req, ticket)))
}

/// One attempt at a blocked pop on this shard: check (no side effect) which
/// key answers, claim the ticket, then pop. `None`: nothing to pop yet.
fn try_pop(db: &mut ShardDb, cx: &ExecCtx, req: &PopReq, ticket: &Ticket) -> Option<Reply> {
    match first_zset(db, cx, &req.keys) {
        Ok(None) => None,
        Ok(Some(i)) => {
            if !ticket.claim() {
                return Some(Reply::NoReply);
            }
            let key = req.keys[i].clone();
            let popped = pop_from(db, cx, &key, req.end, req.count);
            Some(shape_reply(req.shape, &key, &popped))
        }
        Err(e) => Some(if ticket.claim() {
            Reply::Error(e)
        } else {
            Reply::NoReply
        }),
    }
}

/// The shard side of a blocking pop: serve now when one of this shard's keys
/// holds a sorted set (or answer its WRONGTYPE), else park a waiter that a
/// write to any of the keys re-runs (Redis 7.2+ re-executes the command).
///
/// # Source
/// `blockingGenericZpopCommand`; `blockForKeys` / `handleClientsBlockedOnKey`
/// (redis/src/blocked.c): a waiter is woken only by a key that now holds a
/// sorted set.
pub(super) fn park_pop(db: &mut ShardDb, cx: &ExecCtx, req: PopReq, ticket: Arc<Ticket>) -> Reply {
    if ticket.is_fired() {
        return Reply::NoReply;
    }
    if let Some(reply) = try_pop(db, cx, &req, &ticket) {
        return reply;
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
            if !matches!(db.get_zset(cx.db, ready, cx.now_ms), Ok(Some(_))) {
                return Attempt::NotReady;
            }
            match try_pop(db, cx, &req, ticket) {
                None => Attempt::NotReady,
                Some(Reply::NoReply) => Attempt::Lost,
                Some(reply) => Attempt::Served(reply),
            }
        }),
    });
    Reply::NoReply
}
