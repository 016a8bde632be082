//! XREADGROUP (with BLOCK, NOACK, CLAIM, MAXCOUNT / MAXSIZE): validation in
//! Redis's order, delivery into the PEL, and the parked reader.
//!
//! Blocking XREADGROUP: the shard-side attempt first checks (without side
//! effects) whether anything can be delivered, then claims the shared ticket,
//! and only then inserts into the PEL and advances last-delivered, so a read
//! parked on several shards is delivered exactly once.
//!
//! # Source
//! redis/src/t_stream.c: `xreadCommand`, `streamReplyWithRange`; blocked.c
//! `handleClientsBlockedOnKey` (7.2+).

use crate::aof::effects::{log_group_change, GroupChange};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::blocking::{Attempt, Ticket, Waiter};
use crate::shard::db::ShardDb;
use crate::stream::id::parse_id;
use crate::stream::{Stream, StreamId};
use bytes::Bytes;
use std::sync::Arc;

use super::*;

pub(super) const ERR_DOLLAR_IN_XREADGROUP: &str = "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.";

pub(super) const ERR_PLUS_IN_XREADGROUP: &str = "ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set.";

/// One stream's ID argument of XREADGROUP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupFrom {
    /// `>`: entries never delivered to the group.
    New,
    /// The consumer's own pending entries with IDs greater than this.
    History(StreamId),
    /// An invalid ID argument, reported in key order after the type/group checks.
    Invalid(CmdError),
}

/// A parsed `XREADGROUP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XreadgroupReq {
    pub group: Bytes,
    pub consumer: Bytes,
    /// `COUNT n`: at most n entries per stream; 0 = no limit.
    pub count: u64,
    /// `BLOCK ms` (0 = forever); `None` without BLOCK.
    pub block_ms: Option<u64>,
    /// `NOACK`: delivered entries are not added to the PEL.
    pub noack: bool,
    /// `CLAIM min-idle-time` (Redis 8.4), ms: `>` reads first claim the
    /// group's pending entries idle at least this long.
    pub claim_min_idle_ms: Option<u64>,
    /// `MAXCOUNT` / `MAXSIZE` (Redis 8.10): caps over the whole reply.
    pub caps: ReadCaps,
    pub keys: Vec<Bytes>,
    pub from: Vec<GroupFrom>,
    /// The running budget shared with the other parts of the same read
    /// when its streams span shards (see [`super::read::cumulative_read`]).
    pub budget: Option<super::read::BudgetCell>,
}

/// `XREADGROUP GROUP group consumer [COUNT count] [MAXCOUNT maxcount]
/// [MAXSIZE maxsize] [BLOCK ms] [CLAIM min-idle-time] [NOACK] STREAMS key
/// [key ...] id [id ...]` (CLAIM: Redis 8.4; a negative min-idle-time is `ERR
/// value is out of range, must be positive`. MAXCOUNT, MAXSIZE: Redis 8.10,
/// capping new and history reads alike; an entry they turn away is neither
/// sent nor added to the PEL).
///
/// # Errors
/// Those of [`parse_read_args`], then `ERR Missing GROUP option for
/// XREADGROUP`. ID errors are deferred.
/// # Source
/// `xreadCommand`.
pub fn parse_xreadgroup_req(argv: &[Bytes]) -> Result<XreadgroupReq, CmdError> {
    let ReadArgs {
        count,
        block_ms,
        group,
        noack,
        claim_min_idle_ms,
        caps,
        keys,
        ids,
    } = parse_read_args(argv, true)?;
    let (group, consumer) =
        group.ok_or(CmdError::msg("ERR Missing GROUP option for XREADGROUP"))?;
    let from = ids
        .iter()
        .map(|a| match &a[..] {
            b">" => GroupFrom::New,
            b"$" => GroupFrom::Invalid(CmdError::msg(ERR_DOLLAR_IN_XREADGROUP)),
            b"+" => GroupFrom::Invalid(CmdError::msg(ERR_PLUS_IN_XREADGROUP)),
            // Redis stands for `>` with the greatest ID, so that ID written
            // out reads new entries (and blocks) exactly as `>` does.
            _ => match parse_id(a) {
                Ok(StreamId::MAX) => GroupFrom::New,
                Ok(id) => GroupFrom::History(id),
                Err(e) => GroupFrom::Invalid(e),
            },
        })
        .collect();
    Ok(XreadgroupReq {
        group,
        consumer,
        count,
        block_ms,
        noack,
        claim_min_idle_ms,
        caps,
        keys,
        from,
        budget: None,
    })
}

pub(super) fn parse_xreadgroup(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xreadgroup_req(argv)?;
    Ok(on_shard(move |db, cx| {
        // Perhaps the rerun of a read woken here: the waiters held behind
        // it are served after it (see `blocking::serve_ready`).
        db.blocking.rerun_arrived(cx.reply_to.conn);
        apply_xreadgroup(db, cx, &req).into()
    }))
}

/// `Some(timeout_ms)` when the argv is a valid XREADGROUP with `BLOCK`.
pub(super) fn xreadgroup_block_ms(argv: &[Bytes]) -> Option<u64> {
    parse_xreadgroup_req(argv).ok()?.block_ms
}

/// XREADGROUP BLOCK on one shard: serve now when there is something to
/// deliver (claiming the ticket first), else park a waiter.
pub(super) fn park_xreadgroup(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_xreadgroup_req(argv)?;
    Ok(on_shard(move |db, cx| {
        park_xreadgroup_apply(db, cx, req, ticket)
    }))
}

/// The validation step of a multi-shard XREADGROUP (see
/// [`Handler::Blocking`]): `+OK`, or `[local key index, error]` for the first
/// key of this part that fails [`validate_xreadgroup`]. No side effects.
pub(super) fn check_xreadgroup(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xreadgroup_req(argv)?;
    Ok(on_shard(move |db, cx| {
        match first_invalid_key(db, cx, &req) {
            None => Reply::Ok,
            Some((n, e)) => {
                // A rerun that fails here reads nothing after: the waiters
                // held behind it need not wait.
                db.blocking.rerun_arrived(cx.reply_to.conn);
                Reply::Array(vec![Reply::Int(n as i64), Reply::Error(e)])
            }
        }
    }))
}

/// Checks XREADGROUP's keys in order: type, group, ID.
///
/// # Errors
/// `WrongType`; `NOGROUP No such key '<k>' or consumer group '<g>' in
/// XREADGROUP with GROUP option`; the key's ID error.
pub(super) fn validate_xreadgroup(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
) -> Result<(), CmdError> {
    match first_invalid_key(db, cx, req) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// The index (in `req.keys`) and error of the first key failing
/// [`validate_xreadgroup`]'s checks.
pub(super) fn first_invalid_key(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
) -> Option<(usize, CmdError)> {
    for (n, (key, from)) in req.keys.iter().zip(&req.from).enumerate() {
        let s = match db.get_stream(cx.db, key, cx.now_ms) {
            Ok(s) => s,
            Err(e) => return Some((n, e)),
        };
        if s.and_then(|s| s.group(&req.group)).is_none() {
            return Some((n, CmdError::no_group_in_xreadgroup(key, &req.group)));
        }
        if let GroupFrom::Invalid(e) = from {
            return Some((n, e.clone()));
        }
    }
    None
}

/// Whether the read would return something now: any history read, or a `>`
/// read on a stream with entries after the group's last-delivered ID. No
/// side effects (called before the ticket is claimed).
pub(super) fn xreadgroup_has_data(db: &mut ShardDb, cx: &ExecCtx, req: &XreadgroupReq) -> bool {
    req.keys
        .iter()
        .zip(&req.from)
        .any(|(key, from)| match from {
            GroupFrom::History(_) => true,
            GroupFrom::Invalid(_) => false,
            GroupFrom::New => {
                let Ok(Some(s)) = db.get_stream(cx.db, key, cx.now_ms) else {
                    return false;
                };
                let Some(g) = s.group(&req.group) else {
                    return false;
                };
                let idle = req
                    .claim_min_idle_ms
                    .is_some_and(|min| g.pel().values().any(|p| p.idle_ms(cx.now_ms) >= min));
                idle || g
                    .last_id
                    .next()
                    .is_some_and(|start| s.has_entry_from(start))
            }
        })
}

/// Performs a validated XREADGROUP: creates the consumer where missing,
/// delivers new entries (PEL insert unless NOACK, last-delivered and
/// entries-read advance) or replays the consumer's history.
pub(super) fn perform_xreadgroup(db: &mut ShardDb, cx: &ExecCtx, req: &XreadgroupReq) -> Reply {
    perform_xreadgroup_up_to(db, cx, req, usize::MAX)
}

/// [`perform_xreadgroup`] delivering at most `most` entries per stream
/// (besides COUNT): 0 only creates the consumers, as a read that blocks does.
fn perform_xreadgroup_up_to(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
    most: usize,
) -> Reply {
    let take = if req.count == 0 {
        usize::MAX
    } else {
        usize::try_from(req.count).unwrap_or(usize::MAX)
    }
    .min(most);
    let mut pairs = Vec::new();
    // MAXCOUNT / MAXSIZE: one budget over all streams, in key order.
    let mut budget = super::read::budget_from(req.budget.as_ref(), req.caps);
    // Per key: what changed, logged once the stream borrow ends.
    let mut changes: Vec<(&Bytes, GroupChange)> = Vec::new();
    let mut created_consumers = 0u64;
    for (key, from) in req.keys.iter().zip(&req.from) {
        if budget.is_done() {
            break;
        }
        let Ok(Some(s)) = db.get_stream_mut(cx.db, key, cx.now_ms) else {
            continue;
        };
        match from {
            GroupFrom::Invalid(_) => continue,
            GroupFrom::New if req.claim_min_idle_ms.is_some() => {
                let (reply, claim) = read_claiming(s, cx, req, take, &mut budget);
                if let Some(r) = reply {
                    pairs.push((Reply::Bulk(key.clone()), r));
                }
                created_consumers += u64::from(claim.created);
                if claim.created || claim.meta || !claim.pel.is_empty() || !claim.acked.is_empty() {
                    let change = GroupChange {
                        consumer: Some(&req.consumer),
                        meta: claim.meta,
                        pel: claim.pel,
                        acked: claim.acked,
                        ..Default::default()
                    };
                    changes.push((key, change));
                }
            }
            GroupFrom::New => {
                // Each entry is written out as it is delivered, if MAXCOUNT
                // and MAXSIZE admit it.
                let mut out = EntriesOut::default();
                let admit = |e: &crate::stream::EntryView<'_>| out.push_if(e, |n| budget.admit(n));
                let Some(d) =
                    s.deliver_new(&req.group, &req.consumer, take, req.noack, cx.now_ms, admit)
                else {
                    continue;
                };
                created_consumers += u64::from(d.created);
                if d.ids.is_empty() {
                    if d.created {
                        let change = GroupChange {
                            consumer: Some(&req.consumer),
                            ..Default::default()
                        };
                        changes.push((key, change));
                    }
                    continue;
                }
                let change = GroupChange {
                    meta: true,
                    consumer: Some(&req.consumer),
                    pel: if req.noack { Vec::new() } else { d.ids },
                    ..Default::default()
                };
                changes.push((key, change));
                pairs.push((Reply::Bulk(key.clone()), out.finish()));
            }
            GroupFrom::History(after) => {
                // MAX-MAX was taken for `>` when parsed: every other ID has
                // a next one.
                let Some(start) = after.next() else {
                    continue;
                };
                let admit = |id: StreamId, e: Option<&crate::stream::Entry>| match e {
                    Some(e) => budget.admit(entry_reply_bytes(e)),
                    // `[id, nil]`: the ID's bulk plus `*2` and `*-1`.
                    None => budget.admit(id.to_bytes().len() as u64 + 15),
                };
                let Some(h) =
                    s.read_history(&req.group, &req.consumer, start, take, cx.now_ms, admit)
                else {
                    continue;
                };
                created_consumers += u64::from(h.created);
                let found: Vec<StreamId> = h
                    .entries
                    .iter()
                    .filter(|(_, e)| e.is_some())
                    .map(|(id, _)| *id)
                    .collect();
                let out = h
                    .entries
                    .into_iter()
                    .map(|(id, e)| match e {
                        Some(e) => entry_reply(e),
                        None => Reply::Array(vec![Reply::Bulk(id.to_bytes()), Reply::NullArray]),
                    })
                    .collect();
                if h.created || !found.is_empty() {
                    let change = GroupChange {
                        consumer: Some(&req.consumer),
                        pel: found,
                        ..Default::default()
                    };
                    changes.push((key, change));
                }
                pairs.push((Reply::Bulk(key.clone()), Reply::Array(out)));
            }
        }
    }
    super::read::budget_back(req.budget.as_ref(), budget);
    // A consumer created by the read is a change of its own (Redis:
    // streamCreateConsumer's dirty++), whatever was read.
    db.stats.dirty += created_consumers;
    for (key, change) in &changes {
        log_group_change(db, cx, key, &req.group, change);
    }
    if pairs.is_empty() {
        Reply::NullArray
    } else {
        Reply::PairMap(pairs)
    }
}

/// A `>` read with `CLAIM min-idle-time` on one stream (Redis 8.4): first
/// the entries XNACK released (Redis 8.8), in release order, then the
/// group's pending entries idle at least min-idle-time, longest idle
/// first (ties by ID), claimed for the consumer (delivery time now, count +1,
/// kept pending even with NOACK); then new entries, as a plain `>` read, with
/// what is left of the `take` budget (COUNT per stream, shared by both kinds).
/// Pending entries whose stream entry was deleted are dropped from the PEL,
/// as XAUTOCLAIM does.
///
/// # Reply
/// The stream's entries, each `[id, [field, value, ...], idle-ms,
/// delivery-count]`: for a claimed entry its idle time and delivery count
/// before this claim; `0`, `0` for a new entry. `None` when nothing is read.
/// # Source
/// redis.io XREADGROUP "The CLAIM option" and "Reply extension for claimed
/// entries" (8.4).
pub(super) fn read_claiming(
    s: &mut Stream,
    cx: &ExecCtx,
    req: &XreadgroupReq,
    take: usize,
    budget: &mut ReadBudget,
) -> (Option<Reply>, ClaimChange) {
    let mut change = ClaimChange::default();
    let reply = read_claiming_into(s, cx, req, take, budget, &mut change);
    (reply, change)
}

/// What a CLAIM read changed in the group, for the AOF.
#[derive(Default)]
pub(super) struct ClaimChange {
    /// The consumer was created.
    created: bool,
    /// Last-delivered ID / entries-read advanced.
    meta: bool,
    /// PEL entries claimed or delivered.
    pel: Vec<StreamId>,
    /// PEL entries dropped because their stream entry is gone.
    acked: Vec<StreamId>,
}

pub(super) fn read_claiming_into(
    s: &mut Stream,
    cx: &ExecCtx,
    req: &XreadgroupReq,
    take: usize,
    budget: &mut ReadBudget,
    change: &mut ClaimChange,
) -> Option<Reply> {
    let min = req.claim_min_idle_ms.unwrap_or(0);
    let now = cx.now_ms;
    let counters = s.counters();
    let g = s.group(&req.group)?;
    // Released (XNACKed) entries first, oldest release first; then the
    // owned ones idle long enough, longest idle first (ties by ID).
    let mut owned: Vec<(u64, StreamId, u64, bool)> = g
        .pel()
        .iter()
        .filter(|(_, p)| !p.is_nacked() && p.idle_ms(now) >= min)
        .map(|(id, p)| (p.delivery_time_ms, *id, p.delivery_count, false))
        .collect();
    owned.sort_unstable_by_key(|(t, id, _, _)| (*t, *id));
    let idle: Vec<(u64, StreamId, u64, bool)> = g
        .nacked_in_order()
        .filter_map(|id| g.pending(id).map(|p| (0, id, p.delivery_count, true)))
        .chain(owned)
        .collect();
    let last = g.last_id;
    let mut out = Vec::new();
    let mut claimed = Vec::new();
    let mut dangling = Vec::new();
    for (t, id, count, nacked) in idle {
        if claimed.len() >= take {
            break;
        }
        match s.get(id) {
            Some(e) => {
                if !budget.admit(entry_reply_bytes(&e)) {
                    break;
                }
                claimed.push((id, count));
                let idle_ms = if nacked {
                    -1
                } else {
                    i64::try_from(now.saturating_sub(t)).unwrap_or(i64::MAX)
                };
                out.push(claimed_entry_reply(e, idle_ms, count));
            }
            None => dangling.push(id),
        }
    }
    let left = take.saturating_sub(claimed.len());
    let fresh: Vec<_> = match last.next() {
        Some(start) if left > 0 => s
            .iter_range(start, StreamId::MAX, false)
            .take(left)
            .take_while(|e| budget.admit(entry_reply_bytes(e)))
            .collect(),
        _ => Vec::new(),
    };
    let g = s.group_mut(&req.group)?;
    let (cid, created) = g.get_or_create_consumer(&req.consumer, now);
    change.created = created;
    g.touch_seen(cid, now);
    for id in dangling {
        g.ack(id);
        change.acked.push(id);
    }
    if claimed.is_empty() && fresh.is_empty() {
        return None;
    }
    if !claimed.is_empty() || !req.noack {
        g.touch_active(cid, now);
    }
    for (id, count) in claimed {
        g.claim(id, cid, now, count.saturating_add(1));
        change.pel.push(id);
    }
    for e in fresh {
        g.advance_last_delivered(e.id, &counters);
        g.latency.record_delivery(e.id.ms, now);
        change.meta = true;
        if !req.noack {
            g.deliver(e.id, cid, now);
            change.pel.push(e.id);
        }
        out.push(claimed_entry_reply(e, 0, 0));
    }
    Some(Reply::Array(out))
}

/// One entry of a CLAIM read: `[id, [field, value, ...], idle-ms, delivery-count]`
/// (idle `-1` for an entry released by XNACK, as XPENDING shows it).
pub(super) fn claimed_entry_reply(e: crate::stream::Entry, idle_ms: i64, count: u64) -> Reply {
    let Reply::Array(mut items) = entry_reply(e) else {
        return Reply::NullArray;
    };
    items.push(Reply::Int(idle_ms));
    items.push(Reply::Int(i64::try_from(count).unwrap_or(i64::MAX)));
    Reply::Array(items)
}

/// `XREADGROUP` without blocking.
///
/// # Reply
/// `PairMap[(key, entries)]`: for `>`, streams with new entries only; for an
/// explicit ID, always the stream (history entries whose stream entry was
/// deleted are `[id, nil]`). Null array when nothing at all.
/// # Errors
/// See [`validate_xreadgroup`]; nothing changes on error.
/// # Source
/// `xreadCommand`, `streamReplyWithRange`, `streamReplyWithRangeFromConsumerPEL`.
pub fn apply_xreadgroup(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
) -> Result<Reply, CmdError> {
    validate_xreadgroup(db, cx, req)?;
    Ok(perform_xreadgroup(db, cx, req))
}

/// The shard side of XREADGROUP BLOCK (see [`park_xreadgroup`]).
pub(super) fn park_xreadgroup_apply(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: XreadgroupReq,
    ticket: Arc<Ticket>,
) -> Reply {
    db.blocking.rerun_arrived(cx.reply_to.conn);
    if ticket.is_fired() {
        return Reply::NoReply;
    }
    // Over several shards a shard never answers alone: it has the read run
    // again over all of them (see `Ticket::reruns`).
    let rerun = ticket.reruns();
    let answer = |r: Reply| match ticket.claim() {
        true if rerun => Reply::Rerun,
        true => r,
        false => Reply::NoReply,
    };
    if let Err(e) = validate_xreadgroup(db, cx, &req) {
        return answer(Reply::Error(e));
    }
    // A key held for a woken consumer's rerun (see
    // `blocking::serve_ready`): its new entries are that consumer's, and
    // the waiters parked before this read come first (Redis served them
    // before this command arrived), so this read waits in line. Not for
    // CLAIM reads, which may take idle pending entries now.
    let held = req.claim_min_idle_ms.is_none() && db.blocking.holds_any(cx.db, &req.keys);
    if !held && xreadgroup_has_data(db, cx, &req) {
        if !ticket.claim() {
            return Reply::NoReply;
        }
        if rerun {
            return Reply::Rerun;
        }
        return perform_xreadgroup(db, cx, &req);
    }
    // Nothing yet (or in line): the consumer exists from now on (as Redis
    // creates it before blocking), then wait.
    let _ = perform_xreadgroup_up_to(db, cx, &req, if held { 0 } else { usize::MAX });
    let dbi = cx.db;
    let watched = req.keys.iter().map(|k| (dbi, k.clone())).collect();
    db.blocking.park(Waiter {
        no_touch: db.no_touch,
        ticket: ticket.clone(),
        reply_to: cx.reply_to,
        keys: watched,
        poll: req.claim_min_idle_ms.is_some(),
        nokey: true,
        attempt: Box::new(move |db, cx, ready, ticket| {
            attempt_xreadgroup(db, cx, &req, ready, ticket)
        }),
    });
    Reply::NoReply
}

/// One service attempt of a parked XREADGROUP after a write to one of its
/// keys (`ready`): the read runs again as a whole, as Redis 7.2+ re-executes
/// an unblocked command. A key now missing (deleted, expired) or of another
/// type, or a destroyed group, ends the wait with the error the command
/// itself gives (first failing key in order: `NOGROUP No such key ... in
/// XREADGROUP with GROUP option`, `WRONGTYPE ...`); otherwise, if any of its
/// streams has data, it is served from every such stream (so one MULTI/EXEC
/// or pipeline that feeds several streams is read at once), claiming the
/// ticket before any side effect.
///
/// # Source
/// blocked.c `handleClientsBlockedOnKey` (7.2+: unblock on key deletion or
/// type change for XREADGROUP, then reprocess the command).
pub(super) fn attempt_xreadgroup(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
    ready: &[u8],
    ticket: &Ticket,
) -> Attempt {
    if !req.keys.iter().any(|k| k[..] == *ready) {
        return Attempt::NotReady;
    }
    let reply = match first_invalid_key(db, cx, req) {
        Some((_, e)) => Reply::Error(e),
        None if !xreadgroup_has_data(db, cx, req) => return Attempt::NotReady,
        None => {
            if !ticket.claim() {
                return Attempt::Lost;
            }
            if ticket.reruns() {
                return Attempt::RerunConsuming;
            }
            return Attempt::Served(perform_xreadgroup(db, cx, req));
        }
    };
    match ticket.claim() {
        true if ticket.reruns() => Attempt::Served(Reply::Rerun),
        true => Attempt::Served(reply),
        false => Attempt::Lost,
    }
}
