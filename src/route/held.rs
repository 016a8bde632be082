//! Atomic work over several shards: the steps that take the holds of
//! [`crate::shard::hold`] in shard order and then run a body on the
//! coordinator (the thread owning the client connection).
//!
//! Used by EXEC when a transaction's keys (or watched keys) live on more
//! than one shard, and by MSETNX across shards. The result is an ordinary
//! fan-out chain, so the connection layer treats it like any multi-step
//! command: its pipeline waits, its reply takes its place in order.

use crossbeam_channel::Sender;

use crate::io::conn::Then;
use crate::reply::Reply;
use crate::route::router::{merge_ok, Merge};
use crate::route::slot::ShardId;
use crate::server::Shared;
use crate::shard::hold::{hold_req, Coordinate, HoldAck, TxBody, TxOp, TxRun};
use crate::shard::msg::{on_shard, ShardReq};

/// A transaction body (see [`TxBody`]).
pub type Body = TxBody;

/// Steps that run `body` atomically over `shards`: the first fan-out and
/// what follows it, in the shape of `Routed::Fan` / `Action::FanOutThen`.
/// `merge` shapes the body's reply (it gets a one-element vector).
///
/// Steps: a no-op on every shard above the coordinator (so requests this
/// connection sent there earlier run first), the hold of each shard below
/// the coordinator in ascending order, then the body's job on the
/// coordinator, which holds the shards above it and runs.
pub fn held_steps(
    shared: &Shared,
    shards: &[ShardId],
    body: Body,
    merge: Merge,
) -> (Vec<(ShardId, ShardReq)>, Merge, Option<Then>) {
    let mut all: Vec<u16> = shards.iter().map(|s| s.0).collect();
    let me = crate::shard::current_shard()
        .map(|s| s.0)
        .or_else(|| all.iter().copied().min())
        .unwrap_or(0);
    all.push(me);
    all.sort_unstable();
    all.dedup();
    let lowers: Vec<u16> = all.iter().copied().filter(|&s| s < me).collect();
    let uppers: Vec<u16> = all.iter().copied().filter(|&s| s > me).collect();

    let mut lower_ops: Vec<(u16, Sender<TxOp>)> = Vec::with_capacity(lowers.len());
    let mut hold_steps = Vec::with_capacity(lowers.len());
    let coordinator = shared.threads[usize::from(me)].clone();
    for &l in &lowers {
        let (tx, rx) = crossbeam_channel::unbounded();
        hold_steps.push((
            ShardId(l),
            hold_req(rx, HoldAck::Reply(coordinator.clone())),
        ));
        lower_ops.push((l, tx));
    }
    let outboxes = shared.threads.clone();
    let barrier_to = uppers.clone();
    // The body's job only leaves the work on the coordinator's shard: the
    // shard loop runs it, since committing needs the AOF writer.
    let run = on_shard(move |db, cx| {
        db.coordinate.push(Coordinate {
            cx: *cx,
            uppers,
            outboxes,
            lowers: lower_ops,
            body,
        });
        Reply::NoReply
    });

    // Built back to front: the body's job, preceded by each lower hold.
    let mut first: (Vec<(ShardId, ShardReq)>, Merge, Option<Then>) =
        (vec![(ShardId(me), run)], merge, None);
    for step in hold_steps.into_iter().rev() {
        let (parts, merge, then) = first;
        let next = Then::Fan {
            parts,
            merge,
            then: then.map(Box::new),
        };
        first = (vec![step], Box::new(merge_ok), Some(next));
    }
    if barrier_to.is_empty() {
        return first;
    }
    let (parts, merge, then) = first;
    let barrier = barrier_to
        .into_iter()
        .map(|u| (ShardId(u), on_shard(|_, _| Reply::Ok)))
        .collect();
    let next = Then::Fan {
        parts,
        merge,
        then: then.map(Box::new),
    };
    (barrier, Box::new(merge_ok), Some(next))
}

/// Run a fan-out chain (parts, merge, then-steps) inside a held
/// transaction, step after step, exactly as the connection layer would run
/// it outside one: an error merged reply ends the chain.
pub fn run_chain(
    tx: &mut TxRun<'_>,
    db: usize,
    mut parts: Vec<(ShardId, ShardReq)>,
    mut merge: Merge,
    mut then: Option<Then>,
) -> Reply {
    loop {
        let replies = parts
            .into_iter()
            .map(|(shard, req)| tx.run(shard.0, db, req))
            .collect();
        let merged = merge(replies);
        match then {
            Some(Then::Fan {
                parts: p,
                merge: m,
                then: t,
            }) if !matches!(merged, Reply::Error(_)) => {
                parts = p;
                merge = m;
                then = t.map(|b| *b);
            }
            _ => return merged,
        }
    }
}

/// Every shard a chain's steps run on, in step order (with repeats).
pub fn chain_shards(parts: &[(ShardId, ShardReq)], then: Option<&Then>) -> Vec<ShardId> {
    let mut out: Vec<ShardId> = parts.iter().map(|(s, _)| *s).collect();
    let mut next = then;
    while let Some(Then::Fan { parts, then, .. }) = next {
        out.extend(parts.iter().map(|(s, _)| *s));
        next = then.as_deref();
    }
    out
}
