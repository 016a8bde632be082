//! Commands on a slot in transit (a migration under way): whether one runs
//! here depends on which of its keys this node still has, which only the
//! shard owning them can tell. The cluster gate ([`crate::io::gates`]) hands
//! the check over; [`guard`] runs it on the shard, right before the command.
//!
//! # Source
//! `getNodeByQuery`, redis/src/cluster.c (7.x/8.x): ASK when every key is
//! missing from a migrating slot, TRYAGAIN when only some are (or several
//! keys are asked for on an importing slot and some are missing).

use crate::cluster::TransitCheck;
use crate::io::conn::Then;
use crate::reply::Reply;
use crate::route::router::Routed;
use crate::shard::msg::on_shard;

/// `routed` with `check` made first on its shard: a refusal (ASK,
/// TRYAGAIN) is the reply and the command does not run. A blocking read
/// checks before it is served or parks. Commands over several shards cannot
/// be on one slot, so they are returned unchanged.
pub fn guard(routed: Routed, check: TransitCheck) -> Routed {
    match routed {
        Routed::One(shard, req) => Routed::One(
            shard,
            on_shard(move |db, cx| {
                if let Err(e) = check.decide(|k| db.is_live(cx.db, k, cx.now_ms)) {
                    return Reply::Error(e);
                }
                req.apply(db, cx)
            }),
        ),
        Routed::Block(plan) => {
            let Some(&(shard, _)) = plan.parts.first() else {
                return Routed::Block(plan);
            };
            let first = on_shard(move |db, cx| {
                match check.decide(|k| db.is_live(cx.db, k, cx.now_ms)) {
                    Err(e) => Reply::Error(e),
                    // Go on: serve or park the read.
                    Ok(()) => Reply::NullArray,
                }
            });
            let single = |mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullArray);
            Routed::Fan(
                vec![(shard, first)],
                Box::new(single),
                Some(Then::Block(plan)),
            )
        }
        other => other,
    }
}
