//! ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES) and its older forms
//! ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX, ZREVRANGE;
//! ZRANGESTORE.

use bytes::Bytes;

use crate::cmd::args::{self, int_arg};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::{ShardDb, Value};
use crate::zset::score::{self, LexRange, ScoreRange};
use crate::zset::{AddFlags, SortedSet};

use super::write::{log_zadd, rank_span, ERR_MIN_MAX_FLOAT, ERR_MIN_MAX_LEX};
use super::{key_at, reply_members};

/// What a range selects.
#[derive(Clone, Debug, PartialEq)]
pub enum RangeBy {
    /// Ranks `start..=stop` (negative from the end), in the chosen direction.
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// A parsed ZRANGE-family request.
#[derive(Clone, Debug, PartialEq)]
pub struct ZrangeReq {
    /// The source key.
    pub key: Bytes,
    pub by: RangeBy,
    /// Descending order (REV, ZREV*).
    pub rev: bool,
    pub withscores: bool,
    /// `LIMIT offset count` (score and lex ranges): offset, and count
    /// (negative = no limit).
    pub limit: Option<(i64, i64)>,
}

/// Which form of the family is being parsed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// ZRANGE / ZRANGESTORE: BYSCORE, BYLEX and REV are options.
    Auto,
    /// ZRANGE[BY...] / ZREV[RANGE][BY...]: the kind and direction are fixed.
    Fixed { kind: Kind, rev: bool },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rank,
    Score,
    Lex,
}

/// Parse a ZRANGE-family command whose source key is `argv[at]`, followed by
/// min, max and options (`store`: ZRANGESTORE, which takes no WITHSCORES).
///
/// # Errors
/// In Redis's order: `ERR syntax error` (unknown option, LIMIT without its
/// two values), `ERR value is not an integer or out of range` (LIMIT), `ERR
/// syntax error, LIMIT is only supported in combination with either BYSCORE
/// or BYLEX`, `ERR syntax error, WITHSCORES not supported in combination
/// with BYLEX`, then the range's error (`ERR value is not an integer or out
/// of range`, `ERR min or max is not a float`, `ERR min or max not valid
/// string range item`).
/// # Source
/// `zrangeGenericCommand`, redis/src/t_zset.c.
fn parse_range(argv: &[Bytes], at: usize, store: bool, form: Form) -> Result<ZrangeReq, CmdError> {
    let key = key_at(argv, at)?;
    let (mut kind, mut rev, fixed) = match form {
        Form::Auto => (None, None, false),
        Form::Fixed { kind, rev } => (Some(kind), Some(rev), true),
    };
    let mut withscores = false;
    let mut limit = None;
    let mut j = at + 3;
    while j < argv.len() {
        let o = &argv[j];
        let left = argv.len() - j - 1;
        if !store && args::is(o, "WITHSCORES") {
            withscores = true;
        } else if args::is(o, "LIMIT") && left >= 2 {
            limit = Some((int_arg(&argv[j + 1])?, int_arg(&argv[j + 2])?));
            j += 2;
        } else if !fixed && rev.is_none() && args::is(o, "REV") {
            rev = Some(true);
        } else if !fixed && kind.is_none() && args::is(o, "BYLEX") {
            kind = Some(Kind::Lex);
        } else if !fixed && kind.is_none() && args::is(o, "BYSCORE") {
            kind = Some(Kind::Score);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let kind = kind.unwrap_or(Kind::Rank);
    let rev = rev.unwrap_or(false);
    if limit.is_some() && kind == Kind::Rank {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == Kind::Lex {
        return Err(CmdError::msg(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // Reversed score and lex ranges are written max first.
    let (lo, hi) = if rev && kind != Kind::Rank {
        (&argv[at + 2], &argv[at + 1])
    } else {
        (&argv[at + 1], &argv[at + 2])
    };
    let by = match kind {
        Kind::Rank => RangeBy::Rank(int_arg(lo)?, int_arg(hi)?),
        Kind::Score => RangeBy::Score(
            score::parse_score_range(lo, hi).ok_or(CmdError::msg(ERR_MIN_MAX_FLOAT))?,
        ),
        Kind::Lex => {
            RangeBy::Lex(score::parse_lex_range(lo, hi).ok_or(CmdError::msg(ERR_MIN_MAX_LEX))?)
        }
    };
    Ok(ZrangeReq {
        key,
        by,
        rev,
        withscores,
        limit,
    })
}

/// The entries a range selects, in reply order.
///
/// # Source
/// `genericZrangebyrankCommand`, `genericZrangebyscoreCommand`,
/// `genericZrangebylexCommand`: a negative LIMIT offset selects nothing, a
/// negative count means no limit.
pub fn select<'a>(z: &'a SortedSet, req: &ZrangeReq) -> Vec<(f64, &'a [u8])> {
    let len = z.len();
    match &req.by {
        RangeBy::Rank(a, b) => {
            let (start, end) = rank_span(*a, *b, len);
            if start >= end {
                return Vec::new();
            }
            if req.rev {
                // Ranks count from the highest score.
                z.range(len - end, len - start, true)
            } else {
                z.range(start, end, false)
            }
        }
        RangeBy::Score(_) | RangeBy::Lex(_) => {
            let (start, end) = match &req.by {
                RangeBy::Score(r) => z.score_span(r),
                RangeBy::Lex(r) => z.lex_span(r),
                RangeBy::Rank(..) => (0, 0),
            };
            let (offset, count) = req.limit.unwrap_or((0, -1));
            if offset < 0 || (offset > 0 && offset as u64 >= len as u64) {
                return Vec::new();
            }
            let offset = offset as usize;
            let n = end - start;
            if offset >= n {
                return Vec::new();
            }
            let take = if count < 0 {
                n - offset
            } else {
                (count as u64).min((n - offset) as u64) as usize
            };
            if req.rev {
                z.range(end - offset - take, end - offset, true)
            } else {
                z.range(start + offset, start + offset + take, false)
            }
        }
    }
}

fn range_req(argv: &[Bytes], form: Form) -> Result<ShardReq, CmdError> {
    let req = parse_range(argv, 1, false, form)?;
    Ok(on_shard(move |db, cx| apply_zrange(db, cx, &req).into()))
}

pub(super) fn parse_zrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    range_req(argv, Form::Auto)
}

pub(super) fn parse_zrangebyscore(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    range_req(
        argv,
        Form::Fixed {
            kind: Kind::Score,
            rev: false,
        },
    )
}

pub(super) fn parse_zrevrangebyscore(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    range_req(
        argv,
        Form::Fixed {
            kind: Kind::Score,
            rev: true,
        },
    )
}

pub(super) fn parse_zrangebylex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    range_req(
        argv,
        Form::Fixed {
            kind: Kind::Lex,
            rev: false,
        },
    )
}

pub(super) fn parse_zrevrangebylex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    range_req(
        argv,
        Form::Fixed {
            kind: Kind::Lex,
            rev: true,
        },
    )
}

pub(super) fn parse_zrevrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    range_req(
        argv,
        Form::Fixed {
            kind: Kind::Rank,
            rev: true,
        },
    )
}

/// `ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count]
/// [WITHSCORES]` and the older forms.
///
/// # Reply
/// Array of members; with WITHSCORES member/score pairs (RESP2 flat, RESP3
/// nested, see [`reply_members`]). Empty for a missing key.
/// # Errors
/// Argument errors from the parser, then `WrongType`.
pub fn apply_zrange(db: &mut ShardDb, cx: &ExecCtx, req: &ZrangeReq) -> Result<Reply, CmdError> {
    let Some(z) = db.get_zset(cx.db, &req.key, cx.now_ms)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let picked = select(z, req);
    // Each member costs at least its bytes in the reply.
    let bytes: u64 = picked.iter().map(|(_, m)| m.len() as u64 + 8).sum();
    if bytes > cx.reply_budget_bytes {
        return Ok(Reply::OverOutputLimit);
    }
    Ok(reply_members(picked.into_iter(), req.withscores))
}

/// Parse a ZRANGE-form range whose source key is `argv[at]` (ZRANGESTORE:
/// `at` 2, `store` true).
pub(super) fn parse_range_req(
    argv: &[Bytes],
    at: usize,
    store: bool,
) -> Result<ZrangeReq, CmdError> {
    parse_range(argv, at, store, Form::Auto)
}

/// Apply ZRANGESTORE: the selected members of `req.key` replace whatever
/// `dst` held (any type; its TTL is cleared); an empty selection deletes
/// `dst`. Recorded as `DEL dst` then `ZADD dst ...`; wakes poppers blocked
/// on `dst`.
///
/// # Reply
/// Integer: members stored.
/// # Errors
/// `WrongType` when the source is not a sorted set.
/// # Source
/// `zrangeResultFinalizeStore`, redis/src/t_zset.c.
pub fn apply_zrangestore(
    db: &mut ShardDb,
    cx: &ExecCtx,
    dst: &Bytes,
    req: &ZrangeReq,
) -> Result<Reply, CmdError> {
    let picked: Vec<(f64, Bytes)> = match db.get_zset(cx.db, &req.key, cx.now_ms)? {
        Some(z) => select(z, req)
            .into_iter()
            .map(|(s, m)| (s, Bytes::copy_from_slice(m)))
            .collect(),
        None => Vec::new(),
    };
    Ok(Reply::Int(store_members(db, cx, dst, &picked) as i64))
}

/// ZRANGESTORE's write: `picked` replaces whatever `dst` held (any type, TTL
/// cleared), or `dst` is deleted when `picked` is empty. Records `DEL dst`
/// (and `ZADD dst ...`), wakes poppers blocked on `dst`. Returns the number
/// of members stored.
pub(super) fn store_members(
    db: &mut ShardDb,
    cx: &ExecCtx,
    dst: &Bytes,
    picked: &[(f64, Bytes)],
) -> usize {
    if picked.is_empty() {
        if db.remove(cx.db, dst, cx.now_ms).is_some() {
            db.log_effect(cx, &[b"DEL", dst]);
        }
        return 0;
    }
    let limits = db.tunables.zset_limits();
    let mut set = SortedSet::with_hint(picked.len(), 0, limits);
    for (s, m) in picked {
        set.add(m, *s, AddFlags::default(), limits);
    }
    let n = set.len();
    db.set(cx.db, dst.clone(), Value::Zset(Box::new(set)), None);
    db.log_effect(cx, &[b"DEL", dst]);
    log_zadd(db, cx, dst, picked);
    db.blocking.mark_ready(cx.db, dst);
    n
}
