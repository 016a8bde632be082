//! ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT, ZRANDMEMBER, ZSCAN.

use bytes::Bytes;

use crate::cmd::args::{self, parse_i64};
use crate::cmd::glob::{glob_match, is_match_all};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::zset::score::{self, format_score, LexRange, ScoreRange};

use super::write::{ERR_MIN_MAX_FLOAT, ERR_MIN_MAX_LEX};
use super::{key_at, reply_members, reply_score};

pub(super) fn parse_zcard(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| {
        db.get_zset(cx.db, &key, cx.now_ms)
            .map(|z| Reply::Int(z.map_or(0, |z| z.len() as i64)))
            .into()
    }))
}

pub(super) fn parse_zscore(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    let member = argv[2].clone();
    Ok(on_shard(move |db, cx| {
        db.get_zset(cx.db, &key, cx.now_ms)
            .map(|z| {
                z.and_then(|z| z.score(&member))
                    .map_or(Reply::NullBulk, reply_score)
            })
            .into()
    }))
}

/// `ZMSCORE key member [member ...]`: one score (or null) per member; a
/// missing key reads as an empty set.
pub(super) fn parse_zmscore(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = key_at(argv, 1)?;
    let members = argv[2..].to_vec();
    Ok(on_shard(move |db, cx| {
        db.get_zset(cx.db, &key, cx.now_ms)
            .map(|z| {
                Reply::Array(
                    members
                        .iter()
                        .map(|m| {
                            z.and_then(|z| z.score(m))
                                .map_or(Reply::NullBulk, reply_score)
                        })
                        .collect(),
                )
            })
            .into()
    }))
}

pub(super) fn parse_zrank(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    rank_req(argv, false)
}

pub(super) fn parse_zrevrank(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    rank_req(argv, true)
}

/// `ZRANK key member [WITHSCORE]` / `ZREVRANK ...` (WITHSCORE: Redis 7.2).
///
/// # Reply
/// Integer rank (0-based, descending for ZREVRANK), or `[rank, score]`
/// with WITHSCORE; null (null array with WITHSCORE) for a missing member or key.
/// # Errors
/// The arity error for more than 4 arguments, `ERR syntax error` for a 4th
/// argument other than WITHSCORE, then `WrongType`.
/// # Source
/// `zrankGenericCommand`.
fn rank_req(argv: &[Bytes], rev: bool) -> Result<ShardReq, CmdError> {
    if argv.len() > 4 {
        return Err(CmdError::arity(if rev { "zrevrank" } else { "zrank" }));
    }
    let withscore = match argv.get(3) {
        None => false,
        Some(a) if args::is(a, "WITHSCORE") => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    let key = key_at(argv, 1)?;
    let member = argv[2].clone();
    Ok(on_shard(move |db, cx| {
        let missing = if withscore {
            Reply::NullArray
        } else {
            Reply::NullBulk
        };
        let z = match db.get_zset(cx.db, &key, cx.now_ms) {
            Err(e) => return Reply::Error(e),
            Ok(None) => return missing,
            Ok(Some(z)) => z,
        };
        match (z.rank(&member), z.score(&member)) {
            (Some(r), Some(s)) => {
                let r = if rev { z.len() - 1 - r } else { r };
                if withscore {
                    Reply::Array(vec![Reply::Int(r as i64), reply_score(s)])
                } else {
                    Reply::Int(r as i64)
                }
            }
            _ => missing,
        }
    }))
}

pub(super) fn parse_zcount(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let range: ScoreRange =
        score::parse_score_range(&argv[2], &argv[3]).ok_or(CmdError::msg(ERR_MIN_MAX_FLOAT))?;
    let key = key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| {
        db.get_zset(cx.db, &key, cx.now_ms)
            .map(|z| {
                let (a, b) = z.map_or((0, 0), |z| z.score_span(&range));
                Reply::Int((b - a) as i64)
            })
            .into()
    }))
}

pub(super) fn parse_zlexcount(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let range: LexRange =
        score::parse_lex_range(&argv[2], &argv[3]).ok_or(CmdError::msg(ERR_MIN_MAX_LEX))?;
    let key = key_at(argv, 1)?;
    Ok(on_shard(move |db, cx| {
        db.get_zset(cx.db, &key, cx.now_ms)
            .map(|z| {
                let (a, b) = z.map_or((0, 0), |z| z.lex_span(&range));
                Reply::Int((b - a) as i64)
            })
            .into()
    }))
}

/// A parsed `ZRANDMEMBER key [count [WITHSCORES]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zrandmember {
    pub key: Bytes,
    /// `None`: one member as a bulk string. Negative: that many picks with
    /// repetitions allowed; positive: distinct members.
    pub count: Option<i64>,
    pub withscores: bool,
}

/// Parse ZRANDMEMBER.
///
/// # Errors
/// `ERR value is not an integer or out of range`, `ERR value is out of
/// range, value must between -9223372036854775807 and 9223372036854775807`
/// (i64::MIN), `ERR syntax error`, `ERR value is out of range` (a count
/// beyond ±i64::MAX/2 with WITHSCORES).
/// # Source
/// `zrandmemberCommand`.
pub fn parse_zrandmember_req(argv: &[Bytes]) -> Result<Zrandmember, CmdError> {
    let key = key_at(argv, 1)?;
    let Some(raw) = argv.get(2) else {
        return Ok(Zrandmember {
            key,
            count: None,
            withscores: false,
        });
    };
    let count = parse_i64(raw).ok_or(CmdError::NotInteger)?;
    if count == i64::MIN {
        return Err(CmdError::msg(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    if argv.len() > 4 || (argv.len() == 4 && !args::is(&argv[3], "WITHSCORES")) {
        return Err(CmdError::Syntax);
    }
    let withscores = argv.len() == 4;
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::msg("ERR value is out of range"));
    }
    Ok(Zrandmember {
        key,
        count: Some(count),
        withscores,
    })
}

pub(super) fn parse_zrandmember(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_zrandmember_req(argv)?;
    Ok(on_shard(move |db, cx| {
        apply_zrandmember(db, cx, &req).into()
    }))
}

/// Apply ZRANDMEMBER (read-only: nothing goes to the AOF).
///
/// # Reply
/// Without count: a random member, null for a missing key. With count: an
/// array (pairs with WITHSCORES, see [`reply_members`]); empty for a missing
/// key or count 0; a positive count gives distinct members (the whole set,
/// in order, when count ≥ size); a negative count gives |count| picks that
/// may repeat.
/// # Errors
/// `WrongType`.
/// # Source
/// `zrandmemberWithCountCommand`.
pub fn apply_zrandmember(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &Zrandmember,
) -> Result<Reply, CmdError> {
    let len = match db.get_zset(cx.db, &req.key, cx.now_ms)? {
        None => {
            return Ok(if req.count.is_some() {
                Reply::Array(Vec::new())
            } else {
                Reply::NullBulk
            })
        }
        Some(z) => z.len(),
    };
    let Some(count) = req.count else {
        let r = (db.rand_u64() % len as u64) as usize;
        let z = db.get_zset(cx.db, &req.key, cx.now_ms)?;
        let m = z
            .and_then(|z| z.by_rank(r))
            .map(|(_, m)| Bytes::copy_from_slice(m));
        return Ok(m.map_or(Reply::NullBulk, |m| Reply::bulk_copy(&m[..])));
    };
    // Each pick is at least a few reply bytes: a count the client's output
    // limit (or memory) cannot take closes the connection instead.
    let picks_max = if count < 0 {
        count.unsigned_abs()
    } else {
        (count as u64).min(len as u64)
    };
    if picks_max.saturating_mul(4) > cx.reply_budget_bytes || picks_max > 1 << 30 {
        return Ok(Reply::OverOutputLimit);
    }
    let picks: Vec<usize> = if count < 0 {
        let n = count.unsigned_abs() as usize;
        (0..n)
            .map(|_| (db.rand_u64() % len as u64) as usize)
            .collect()
    } else if count as u64 >= len as u64 {
        (0..len).collect()
    } else {
        // Distinct ranks: a partial Fisher-Yates over the ranks when the
        // sample is a large part of the set, else rejection sampling.
        let n = count as usize;
        if n * 3 > len {
            let mut all: Vec<usize> = (0..len).collect();
            for i in 0..n {
                let j = i + (db.rand_u64() % (len - i) as u64) as usize;
                all.swap(i, j);
            }
            all.truncate(n);
            all
        } else {
            let mut seen = std::collections::HashSet::with_capacity(n);
            let mut out = Vec::with_capacity(n);
            while out.len() < n {
                let r = (db.rand_u64() % len as u64) as usize;
                if seen.insert(r) {
                    out.push(r);
                }
            }
            out
        }
    };
    let z = db
        .get_zset(cx.db, &req.key, cx.now_ms)?
        .ok_or(CmdError::WrongType)?;
    let entries: Vec<(f64, &[u8])> = picks.iter().filter_map(|&r| z.by_rank(r)).collect();
    Ok(reply_members(entries.into_iter(), req.withscores))
}

/// ZSCAN's options, checked after the key's type (as Redis does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZscanOpts {
    /// Members to visit per call (COUNT, at least 1; default 10).
    pub count: usize,
    /// MATCH pattern; `None` when absent or `*`.
    pub pattern: Option<Bytes>,
}

/// Parse ZSCAN's options (`MATCH`, `COUNT`; `TYPE` and `NOVALUES` are
/// SCAN's and HSCAN's only: `ERR syntax error`, and since Redis 7.4 `ERR
/// NOVALUES option can only be used in HSCAN`).
fn parse_zscan_opts(argv: &[Bytes]) -> Result<ZscanOpts, CmdError> {
    let mut o = ZscanOpts {
        count: 10,
        pattern: None,
    };
    let mut i = 3;
    while i < argv.len() {
        if args::is(&argv[i], "NOVALUES") {
            // Redis 7.4's HSCAN option, refused by name for other types.
            return Err(CmdError::msg(
                "ERR NOVALUES option can only be used in HSCAN",
            ));
        }
        if i + 1 >= argv.len() {
            return Err(CmdError::Syntax);
        }
        let (opt, val) = (&argv[i], &argv[i + 1]);
        if args::is(opt, "COUNT") {
            let n = args::int_arg(val)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if args::is(opt, "MATCH") {
            o.pattern = (!is_match_all(val)).then(|| val.clone());
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`
///
/// A compact (listpack) set is returned whole in one call with cursor 0,
/// as Redis does; a larger set about `COUNT` members per call, in score
/// order, the cursor being the next score to visit (see [`score_cursor`];
/// a run of equal scores is never split across calls).
///
/// # Reply
/// `[next cursor, [member, score, ...]]`, scores as bulk strings in Redis's
/// text (both protocols).
/// # Errors
/// `ERR invalid cursor` (before the key is looked up), `WrongType`, then the
/// option errors (`ERR value is not an integer or out of range`, `ERR
/// syntax error`).
/// # Source
/// `zscanCommand` / `scanGenericCommand`, redis/src/db.c. Redis walks its
/// hash table; the score cursor is this server's own, with the same
/// guarantee for members whose score does not change during the scan: each
/// is returned at least once, whatever else is added or removed.
/// ZSCAN cursor of a score: its bits mapped so that cursor order is score
/// order (never 0, which starts a scan: NaN is never a score).
pub fn score_cursor(score: f64) -> u64 {
    let bits = score.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The score a ZSCAN cursor stands for (inverse of [`score_cursor`]).
pub fn cursor_score(cursor: u64) -> f64 {
    if cursor >> 63 == 1 {
        f64::from_bits(cursor & !(1 << 63))
    } else {
        f64::from_bits(!cursor)
    }
}

pub(super) fn parse_zscan(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let cursor = crate::cmd::keys::parse_cursor(&argv[2])
        .ok_or_else(|| CmdError::msg("ERR invalid cursor"))?;
    let key = key_at(argv, 1)?;
    let opts = parse_zscan_opts(argv);
    Ok(on_shard(move |db, cx| {
        let empty = || Reply::Array(vec![Reply::bulk_copy("0"), Reply::Array(Vec::new())]);
        let z = match db.get_zset(cx.db, &key, cx.now_ms) {
            Err(e) => return Reply::Error(e),
            Ok(None) => return empty(),
            Ok(Some(z)) => z,
        };
        let opts = match &opts {
            Ok(o) => o,
            Err(e) => return Reply::Error(e.clone()),
        };
        let len = z.len();
        let (start, end) = if z.is_listpack() {
            (0, len)
        } else {
            // Resume at the cursor's score; members of the score at the
            // boundary may come twice (SCAN allows it), none is skipped.
            let start = match cursor {
                0 => 0,
                c => {
                    let from = cursor_score(c);
                    z.count_while(|s, _| s < from)
                }
            };
            let mut end = start.saturating_add(opts.count).min(len);
            if end < len && end > start {
                // Never cut a run of equal scores: the next cursor must move.
                let last = z.by_rank(end - 1).map_or(f64::INFINITY, |(s, _)| s);
                end = z.count_while(|s, _| s <= last).max(end);
            }
            (start, end)
        };
        let next = match z.by_rank(end) {
            Some((s, _)) if end < len => score_cursor(s),
            _ => 0,
        };
        let mut items = Vec::new();
        for (s, m) in z.range(start, end, false) {
            if opts
                .pattern
                .as_ref()
                .is_some_and(|p| !glob_match(p, m, false))
            {
                continue;
            }
            items.push(Reply::bulk_copy(m));
            items.push(Reply::bulk(format_score(s)));
        }
        Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(items)])
    }))
}
