//! ZMPOP and ZRANGESTORE, whose keys may live on different shards.
//!
//! # Same shard
//! When one shard owns every key (always with `--shards 1`, or with a
//! shared `{hash tag}`) the command is one shard request, atomic like any
//! other ([`apply_pop`], [`apply_zrangestore`]).
//!
//! # Across shards
//! Otherwise it runs as steps of one fan-out (`io::conn::Then::Fan`), as a
//! cross-shard COPY does:
//!
//! * ZMPOP: every shard reports, without side effects, its first key (in
//!   the caller's order) that holds a sorted set or another type (step 1);
//!   the first of them all decides: another type answers WRONGTYPE, none
//!   answers null, a sorted set is popped by its shard (step 2).
//! * ZRANGESTORE: the source's shard selects the members (step 1, its
//!   WRONGTYPE ends the command); the destination's shard stores them
//!   (step 2).
//!
//! **Atomicity caveat.** Between the steps other clients' commands may run
//! (Redis runs these atomically): a ZMPOP whose chosen key was emptied in
//! between answers null, and a ZRANGESTORE stores the members as they were
//! at step 1. Inside MULTI, keys on several shards are refused like any
//! transaction spanning shards.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use crossbeam_channel::bounded;

use crate::cmd::{on_shard, Action, ConnCtx, Merge, ShardReq};
use crate::error::CmdError;
use crate::io::conn::Then;
use crate::reply::Reply;
use crate::route::slot::ShardId;

use super::pop::{apply_pop, parse_zmpop_req, PopReq};
use super::range::{apply_zrangestore, parse_range_req, select, store_members, ZrangeReq};

/// One request on one shard, its reply unchanged.
fn one_part(shard: ShardId, req: ShardReq) -> Action {
    Action::FanOut {
        parts: vec![(shard, req)],
        merge: Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk)),
    }
}

/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]`
///
/// # Reply
/// `[key, [[member, score], ...]]` from the first key holding a sorted set;
/// null array when none does.
/// # Errors
/// Those of the parser (`ERR numkeys should be greater than 0`, `ERR syntax
/// error`, `ERR count should be greater than 0`), then `WrongType` for a
/// key of another type met before any sorted set.
/// # Source
/// `zmpopGenericCommand`, redis/src/t_zset.c.
pub(super) fn zmpop_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let req = parse_zmpop_req(argv, 1)?;
    let shards: Vec<ShardId> = req.keys.iter().map(|k| cx.shared.shard_of(k)).collect();
    if shards.iter().all(|s| *s == shards[0]) {
        return Ok(one_part(
            shards[0],
            on_shard(move |db, cx| apply_pop(db, cx, &req).into()),
        ));
    }
    let mut involved: Vec<ShardId> = Vec::new();
    for s in &shards {
        if !involved.contains(s) {
            involved.push(*s);
        }
    }
    // Step 1: each shard's first key holding a value, as `[global index,
    // 1 if a sorted set else 0]`, or null.
    let check_parts: Vec<(ShardId, ShardReq)> = involved
        .iter()
        .map(|&shard| {
            let mine: Vec<(usize, Bytes)> = req
                .keys
                .iter()
                .enumerate()
                .filter(|(i, _)| shards[*i] == shard)
                .map(|(i, k)| (i, k.clone()))
                .collect();
            let check = on_shard(move |db, cx| {
                for (i, k) in &mine {
                    match db.check_zset(cx.db, k, cx.now_ms) {
                        Ok(false) => continue,
                        Ok(true) => {
                            return Reply::Array(vec![Reply::Int(*i as i64), Reply::Int(1)])
                        }
                        Err(_) => return Reply::Array(vec![Reply::Int(*i as i64), Reply::Int(0)]),
                    }
                }
                Reply::NullArray
            });
            (shard, check)
        })
        .collect();
    let chosen: Arc<OnceLock<Option<usize>>> = Arc::new(OnceLock::new());
    let decide = chosen.clone();
    let check_merge: Merge = Box::new(move |replies: Vec<Reply>| {
        let mut first: Option<(i64, bool)> = None;
        for r in replies {
            if let Reply::Array(v) = r {
                if let [Reply::Int(i), Reply::Int(z)] = v[..] {
                    if first.is_none_or(|(f, _)| i < f) {
                        first = Some((i, z == 1));
                    }
                }
            }
        }
        match first {
            Some((_, false)) => Reply::Error(CmdError::WrongType),
            Some((i, true)) => {
                let _ = decide.set(usize::try_from(i).ok());
                Reply::Ok
            }
            None => {
                let _ = decide.set(None);
                Reply::Ok
            }
        }
    });
    // Step 2: the chosen key's shard pops; the others answer a placeholder.
    let pop_parts: Vec<(ShardId, ShardReq)> = involved
        .iter()
        .map(|&shard| {
            let chosen = chosen.clone();
            let req: PopReq = req.clone();
            let shards = shards.clone();
            let pop = on_shard(move |db, cx| match chosen.get().copied().flatten() {
                Some(i) if shards[i] == shard => {
                    let one = PopReq {
                        keys: vec![req.keys[i].clone()],
                        ..req
                    };
                    apply_pop(db, cx, &one).into()
                }
                _ => Reply::NullBulk,
            });
            (shard, pop)
        })
        .collect();
    let pop_merge: Merge = Box::new(|replies: Vec<Reply>| {
        replies
            .into_iter()
            .find(|r| !matches!(r, Reply::NullBulk))
            .unwrap_or(Reply::NullArray)
    });
    Ok(Action::FanOutThen {
        parts: check_parts,
        merge: check_merge,
        then: Then::Fan {
            parts: pop_parts,
            merge: pop_merge,
            then: None,
        },
    })
}

/// `ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]`
///
/// # Reply
/// Integer: members stored in `dst`.
/// # Errors
/// Those of the ZRANGE parser, then `WrongType` for the source.
/// # Source
/// `zrangestoreCommand`, redis/src/t_zset.c.
pub(super) fn zrangestore_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let dst = argv[1].clone();
    let req: ZrangeReq = parse_range_req(argv, 2, true)?;
    let (src_shard, dst_shard) = (cx.shared.shard_of(&req.key), cx.shared.shard_of(&dst));
    if src_shard == dst_shard {
        return Ok(one_part(
            src_shard,
            on_shard(move |db, cx| apply_zrangestore(db, cx, &dst, &req).into()),
        ));
    }
    let (tx, rx) = bounded::<Vec<(f64, Bytes)>>(1);
    let step1 = on_shard(
        move |db, cx| match db.get_zset(cx.db, &req.key, cx.now_ms) {
            Err(e) => Reply::Error(e),
            Ok(z) => {
                let picked = z.map_or_else(Vec::new, |z| {
                    select(z, &req)
                        .into_iter()
                        .map(|(s, m)| (s, Bytes::copy_from_slice(m)))
                        .collect()
                });
                let _ = tx.send(picked);
                Reply::Ok
            }
        },
    );
    let step2 = on_shard(move |db, cx| {
        let picked = rx.try_recv().unwrap_or_default();
        Reply::Int(store_members(db, cx, &dst, &picked) as i64)
    });
    let last: fn() -> Merge = || Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk));
    Ok(Action::FanOutThen {
        parts: vec![(src_shard, step1)],
        merge: last(),
        then: Then::Fan {
            parts: vec![(dst_shard, step2)],
            merge: last(),
            then: None,
        },
    })
}
