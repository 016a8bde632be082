//! ZADD, ZINCRBY, ZREM, ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX.

use bytes::Bytes;

use crate::cmd::args::{self, int_arg};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::{ShardDb, Value};
use crate::zset::score::{self, format_score, LexRange, ScoreRange};
use crate::zset::{AddFlags, AddOutcome, Member, SortedSet};

use super::{key_at, reply_score};

/// `ERR min or max is not a float`
pub const ERR_MIN_MAX_FLOAT: &str = "ERR min or max is not a float";
/// `ERR min or max not valid string range item`
pub const ERR_MIN_MAX_LEX: &str = "ERR min or max not valid string range item";
/// `ERR resulting score is not a number (NaN)`
pub const ERR_NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

/// A parsed `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Zadd {
    pub key: Bytes,
    pub flags: AddFlags,
    /// `CH`: reply with added + updated instead of added.
    pub ch: bool,
    /// `(score, member)` pairs, scores already parsed.
    pub pairs: Vec<(f64, Bytes)>,
}

/// Parse ZADD (or ZINCRBY's form of it).
///
/// # Errors
/// In Redis's order, all before the key is looked up: `ERR syntax error`
/// (no pairs, or an odd number of arguments after the options), `ERR XX and
/// NX options at the same time are not compatible`, `ERR GT, LT, and/or NX
/// options at the same time are not compatible`, `ERR INCR option supports a
/// single increment-element pair`, `ERR value is not a valid float`.
/// # Source
/// `zaddGenericCommand`, redis/src/t_zset.c.
pub fn parse_zadd_req(argv: &[Bytes]) -> Result<Zadd, CmdError> {
    let key = key_at(argv, 1)?;
    let mut flags = AddFlags::default();
    let mut ch = false;
    let mut i = 2;
    while i < argv.len() {
        let o = &argv[i];
        if args::is(o, "NX") {
            flags.nx = true;
        } else if args::is(o, "XX") {
            flags.xx = true;
        } else if args::is(o, "CH") {
            ch = true;
        } else if args::is(o, "INCR") {
            flags.incr = true;
        } else if args::is(o, "GT") {
            flags.gt = true;
        } else if args::is(o, "LT") {
            flags.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &argv[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if flags.nx && flags.xx {
        return Err(CmdError::msg(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        return Err(CmdError::msg(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if flags.incr && rest.len() > 2 {
        return Err(CmdError::msg(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let pairs = rest
        .chunks_exact(2)
        .map(|p| {
            Ok((
                score::parse_score(&p[0]).ok_or(CmdError::NotFloat)?,
                p[1].clone(),
            ))
        })
        .collect::<Result<Vec<_>, CmdError>>()?;
    Ok(Zadd {
        key,
        flags,
        ch,
        pairs,
    })
}

pub(super) fn parse_zadd(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_zadd_req(argv)?;
    Ok(on_shard(move |db, cx| apply_zadd(db, cx, req).into()))
}

/// `ZINCRBY key increment member`: `ZADD key INCR increment member`.
pub(super) fn parse_zincrby(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let increment = score::parse_score(&argv[2]).ok_or(CmdError::NotFloat)?;
    let req = Zadd {
        key: key_at(argv, 1)?,
        flags: AddFlags {
            incr: true,
            ..AddFlags::default()
        },
        ch: false,
        pairs: vec![(increment, argv[3].clone())],
    };
    Ok(on_shard(move |db, cx| apply_zadd(db, cx, req).into()))
}

/// Apply ZADD / ZINCRBY: creates the key unless XX, adds or updates each
/// member in order, records `ZADD key score member ...` (final scores of the
/// members that changed) and wakes blocked poppers.
///
/// # Reply
/// Integer: members added (with CH: added or updated). With INCR: the new
/// score (double), or null when nothing was done (NX/XX/GT/LT).
/// # Errors
/// `WrongType`; `ERR resulting score is not a number (NaN)` when INCR adds
/// `inf` and `-inf`.
/// # Source
/// `zaddGenericCommand` / `zsetAdd`, redis/src/t_zset.c.
pub fn apply_zadd(db: &mut ShardDb, cx: &ExecCtx, req: Zadd) -> Result<Reply, CmdError> {
    let limits = db.tunables.zset_limits();
    let exists = db.check_zset(cx.db, &req.key, cx.now_ms)?;
    let nothing = || {
        if req.flags.incr {
            Reply::NullBulk
        } else {
            Reply::Int(0)
        }
    };
    if !exists && req.flags.xx {
        return Ok(nothing());
    }
    let t = if exists {
        let z = db
            .get_zset_mut(cx.db, &req.key, cx.now_ms)?
            .ok_or(CmdError::WrongType)?;
        z.maybe_convert(req.pairs.len(), limits);
        add_all(z, &req, limits)
    } else {
        let mut fresh = SortedSet::with_hint(req.pairs.len(), req.pairs[0].1.len(), limits);
        let t = add_all(&mut fresh, &req, limits);
        if !fresh.is_empty() {
            db.set(cx.db, req.key.clone(), Value::Zset(Box::new(fresh)), None);
        }
        t
    };
    let AddTally {
        added,
        updated,
        processed,
        last_score,
        changed,
        nan,
    } = t;
    if !changed.is_empty() {
        log_zadd(db, cx, &req.key, &changed);
        db.blocking.mark_ready(cx.db, &req.key);
    }
    if nan {
        return Err(CmdError::msg(ERR_NAN_SCORE));
    }
    Ok(if req.flags.incr {
        if processed > 0 {
            reply_score(last_score)
        } else {
            Reply::NullBulk
        }
    } else {
        Reply::Int(if req.ch { added + updated } else { added })
    })
}

/// What ZADD did to a set.
struct AddTally {
    added: i64,
    updated: i64,
    /// Members not refused by NX/XX/GT/LT (INCR replies null when 0).
    processed: i64,
    last_score: f64,
    /// Final scores of the members added or updated (the AOF effect).
    changed: Vec<(f64, Bytes)>,
    /// INCR produced NaN: the command stopped there.
    nan: bool,
}

fn add_all(set: &mut SortedSet, req: &Zadd, limits: crate::zset::EncodingLimits) -> AddTally {
    let mut t = AddTally {
        added: 0,
        updated: 0,
        processed: 0,
        last_score: 0.0,
        changed: Vec::new(),
        nan: false,
    };
    for (score, member) in &req.pairs {
        match set.add(member, *score, req.flags, limits) {
            outcome @ (AddOutcome::Added(s) | AddOutcome::Updated(s)) => {
                if matches!(outcome, AddOutcome::Added(_)) {
                    t.added += 1;
                } else {
                    t.updated += 1;
                }
                t.processed += 1;
                t.last_score = s;
                t.changed.push((s, member.clone()));
            }
            AddOutcome::Unchanged(s) => {
                t.processed += 1;
                t.last_score = s;
            }
            AddOutcome::Nop => {}
            AddOutcome::NotANumber => {
                t.nan = true;
                break;
            }
        }
    }
    t
}

/// Record `ZADD key score member ...` for `entries` (nothing when empty).
pub(super) fn log_zadd(db: &mut ShardDb, cx: &ExecCtx, key: &[u8], entries: &[(f64, Bytes)]) {
    if entries.is_empty() || !db.aof.is_enabled() {
        return;
    }
    let scores: Vec<String> = entries.iter().map(|(s, _)| format_score(*s)).collect();
    let mut rec: Vec<&[u8]> = Vec::with_capacity(2 + 2 * entries.len());
    rec.extend([&b"ZADD"[..], key]);
    for ((_, m), s) in entries.iter().zip(&scores) {
        rec.push(s.as_bytes());
        rec.push(m);
    }
    db.log_effect(cx, &rec);
}

/// Record `ZREM key member ...` for `removed` (nothing when empty).
pub(super) fn log_zrem(db: &mut ShardDb, cx: &ExecCtx, key: &[u8], removed: &[(f64, Member)]) {
    if removed.is_empty() || !db.aof.is_enabled() {
        return;
    }
    let mut rec: Vec<&[u8]> = Vec::with_capacity(2 + removed.len());
    rec.extend([&b"ZREM"[..], key]);
    rec.extend(removed.iter().map(|(_, m)| &m[..]));
    db.log_effect(cx, &rec);
}

/// Delete `key` when its sorted set became empty (a key never holds an empty set).
pub(super) fn drop_if_empty(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) {
    if matches!(db.get_zset(cx.db, key, cx.now_ms), Ok(Some(z)) if z.is_empty()) {
        db.remove(cx.db, key, cx.now_ms);
    }
}

pub(super) fn parse_zrem(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    let members = argv[2..].to_vec();
    Ok(on_shard(move |db, cx| {
        apply_zrem(db, cx, &key, &members).into()
    }))
}

/// `ZREM key member [member ...]`
///
/// # Reply
/// Integer: members removed; the key is deleted with its last member.
/// # Errors
/// `WrongType`.
/// # Source
/// `zremCommand`.
pub fn apply_zrem(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &Bytes,
    members: &[Bytes],
) -> Result<Reply, CmdError> {
    if !db.check_zset(cx.db, key, cx.now_ms)? {
        return Ok(Reply::Int(0));
    }
    let mut removed: Vec<(f64, Member)> = Vec::new();
    if let Some(z) = db.get_zset_mut(cx.db, key, cx.now_ms)? {
        for m in members {
            if let Some(s) = z.remove(m) {
                removed.push((s, m.clone()));
            }
            if z.is_empty() {
                break;
            }
        }
    }
    log_zrem(db, cx, key, &removed);
    drop_if_empty(db, cx, key);
    Ok(Reply::Int(removed.len() as i64))
}

/// The range of a ZREMRANGEBY* command.
#[derive(Clone, Debug, PartialEq)]
pub enum RemoveRange {
    /// Ranks `start..=stop`, negative from the end.
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

pub(super) fn parse_zremrangebyrank(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let range = RemoveRange::Rank(int_arg(&argv[2])?, int_arg(&argv[3])?);
    remove_req(argv, range)
}

pub(super) fn parse_zremrangebyscore(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let range =
        score::parse_score_range(&argv[2], &argv[3]).ok_or(CmdError::msg(ERR_MIN_MAX_FLOAT))?;
    remove_req(argv, RemoveRange::Score(range))
}

pub(super) fn parse_zremrangebylex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let range = score::parse_lex_range(&argv[2], &argv[3]).ok_or(CmdError::msg(ERR_MIN_MAX_LEX))?;
    remove_req(argv, RemoveRange::Lex(range))
}

fn remove_req(argv: &[Bytes], range: RemoveRange) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| {
        apply_zremrange(db, cx, &key, &range).into()
    }))
}

/// Clamp Redis-style ranks `start..=stop` (negative from the end) to a
/// half-open span of a set of `len` members; empty when out of range.
///
/// # Source
/// The index sanitizing of `zremrangeGenericCommand` / `genericZrangebyrankCommand`.
pub fn rank_span(start: i64, stop: i64, len: usize) -> (usize, usize) {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        return (0, 0);
    }
    if stop >= len {
        stop = len - 1;
    }
    (start as usize, stop as usize + 1)
}

/// `ZREMRANGEBYRANK key start stop`, `ZREMRANGEBYSCORE key min max`,
/// `ZREMRANGEBYLEX key min max`.
///
/// # Reply
/// Integer: members removed; the key is deleted with its last member.
/// # Errors
/// Range errors come from the parser (`ERR value is not an integer or out of
/// range`, `ERR min or max is not a float`, `ERR min or max not valid string
/// range item`); then `WrongType`.
/// # Source
/// `zremrangeGenericCommand`.
pub fn apply_zremrange(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &Bytes,
    range: &RemoveRange,
) -> Result<Reply, CmdError> {
    if !db.check_zset(cx.db, key, cx.now_ms)? {
        return Ok(Reply::Int(0));
    }
    let removed = match db.get_zset_mut(cx.db, key, cx.now_ms)? {
        Some(z) => {
            let (start, end) = match range {
                RemoveRange::Rank(a, b) => rank_span(*a, *b, z.len()),
                RemoveRange::Score(r) => z.score_span(r),
                RemoveRange::Lex(r) => z.lex_span(r),
            };
            z.remove_range(start, end)
        }
        None => Vec::new(),
    };
    log_zrem(db, cx, key, &removed);
    drop_if_empty(db, cx, key);
    Ok(Reply::Int(removed.len() as i64))
}
