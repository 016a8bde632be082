//! Atomic work over several shards: the steps that send a transaction to
//! its coordinator, the lowest involved shard, which holds the others in
//! ascending order and runs the body ([`crate::shard::hold`]).
//!
//! Used by EXEC when a transaction's keys (or watched keys) live on more
//! than one shard, and by MSET / MSETNX across shards. The result is an
//! ordinary fan-out chain, so the connection layer treats it like any
//! multi-step command: its pipeline waits, its reply takes its place in order.

use crate::io::conn::Then;
use crate::reply::Reply;
use crate::route::router::{merge_ok, Merge};
use crate::route::slot::ShardId;
use crate::server::Shared;
use crate::shard::hold::{Coordinate, CoordinateJob, TxBody, TxRun};
use crate::shard::msg::{on_shard, ShardReq};

/// A transaction body (see [`TxBody`]).
pub type Body = TxBody;

/// Steps that run `body` atomically over `shards`: the first fan-out and
/// what follows it, in the shape of `Routed::Fan` / `Action::FanOutThen`.
/// `merge` shapes the body's reply (it gets a one-element vector); `then`
/// follows it (a blocking read parks when the merged reply is null).
///
/// The body's job goes to the lowest shard. With `flush` (the connection
/// has earlier requests still in flight), a no-op first goes to every other
/// involved shard, so those requests run before the transaction holds their
/// shards (the holds travel from the coordinator, not from the connection).
pub fn held_steps(
    shared: &Shared,
    shards: &[ShardId],
    body: Body,
    merge: Merge,
    flush: bool,
    then: Option<Then>,
) -> (Vec<(ShardId, ShardReq)>, Merge, Option<Then>) {
    let mut all: Vec<u16> = shards.iter().map(|s| s.0).collect();
    all.sort_unstable();
    all.dedup();
    let coordinator = all.first().copied().unwrap_or(0);
    let others: Vec<u16> = all.iter().copied().skip(1).collect();
    let barrier: Vec<(ShardId, ShardReq)> = if flush {
        others
            .iter()
            .map(|&s| (ShardId(s), on_shard(|_, _| Reply::Ok)))
            .collect()
    } else {
        Vec::new()
    };
    let outboxes = shared.threads.clone();
    // The job only leaves the work on the coordinator's shard: the shard
    // loop runs it, since committing needs the AOF writer.
    let run: ShardReq = Box::new(CoordinateJob(Coordinate {
        cx: crate::shard::msg::ExecCtx::at(0, 0),
        others,
        outboxes,
        body,
    }));
    let first = vec![(ShardId(coordinator), run)];
    if barrier.is_empty() {
        return (first, merge, then);
    }
    let next = Then::Fan {
        parts: first,
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
