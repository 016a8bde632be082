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
use crate::reply::Reply;
use crate::route::router::Routed;
use crate::shard::msg::{on_shard, ShardReq};

/// `routed` with `check` made first on its shard: a refusal (ASK,
/// TRYAGAIN) is the reply and the command does not run. A blocking read
/// checks in the same step that serves or parks it, so a key migrated in
/// between cannot turn the ASK into the missing key's own error. Commands
/// over several shards cannot be on one slot, so they are returned
/// unchanged.
pub fn guard(routed: Routed, check: TransitCheck) -> Routed {
    match routed {
        Routed::One(shard, req) => Routed::One(shard, checked(check, req)),
        Routed::Block(mut plan) => {
            plan.transit = Some(check);
            Routed::Block(plan)
        }
        other => other,
    }
}

/// `req`, run only if `check` passes on its shard (its refusal otherwise).
pub fn checked(check: TransitCheck, req: ShardReq) -> ShardReq {
    on_shard(move |db, cx| {
        if let Err(e) = check.decide(|k| db.is_live(cx.db, k, cx.now_ms)) {
            return Reply::Error(e);
        }
        req.apply(db, cx)
    })
}
