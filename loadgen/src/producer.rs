//! Paced XADD: each entry carries its *scheduled* send time, so a slow server
//! shows up as latency instead of as a lower send rate (coordinated omission).
//!
//! Entry fields: `t` = scheduled send time (ns since the shared epoch), `p` =
//! producer id, `n` = the producer's sequence number, then the payload fields
//! `f0`, `f1`, ... of `--value-size` bytes each.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::latency::Plan;
use crate::pack::Packer;
use crate::target::{slot_of, Router};

/// One entry waiting to be sent (or re-sent after MOVED).
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Global schedule index: entry `k` is due at `start + k × period`.
    k: u64,
    /// This producer's sequence number.
    seq: u64,
    /// Scheduled send time, ns since the epoch.
    due_ns: u64,
}

/// What a producer did, for the report.
#[derive(Debug, Default, Clone)]
pub struct ProducerStats {
    /// Entries the server accepted.
    pub sent: u64,
    /// Entries scheduled before the end that were never sent (producer fell behind).
    pub unsent: u64,
    /// Time of the last accepted XADD, ns since the epoch.
    pub last_send_ns: u64,
}

/// Run producer `id` until the plan's end (or the stop flag).
pub fn run(plan: &Plan, id: usize, mut router: Router) -> ProducerStats {
    let shared = &plan.shared;
    let producers = plan.args.producers.max(1) as u64;
    let depth = plan.args.pipeline.max(1);
    let mut stats = ProducerStats::default();
    let mut next_k = id as u64;
    let mut next_seq = 0u64;
    let mut retry: Vec<Pending> = Vec::new();
    let mut batch: Vec<Pending> = Vec::with_capacity(depth);
    let mut pipe = Packer::default();
    // Closed loop: the backlog passed the limit and has not yet drained to
    // half of it.
    let mut paused = false;
    loop {
        if shared.stop_producers.load(Ordering::Relaxed) {
            break;
        }
        let now = shared.now_ns();
        batch.clear();
        batch.append(&mut retry);
        match plan.args.rate {
            rate if rate > 0 => {
                let due = |k: u64| plan.due_ns(k);
                let first_due = due(next_k);
                if first_due >= plan.end_ns && batch.is_empty() {
                    break;
                }
                if first_due > now && batch.is_empty() {
                    sleep_until(shared, first_due);
                    continue;
                }
                while batch.len() < depth {
                    let d = due(next_k);
                    if d > now || d >= plan.end_ns {
                        break;
                    }
                    batch.push(Pending {
                        k: next_k,
                        seq: next_seq,
                        due_ns: d,
                    });
                    next_k += producers;
                    next_seq += 1;
                }
            }
            _ => {
                if now >= plan.end_ns {
                    break;
                }
                // Closed loop: send only as fast as the consumers drain, so the
                // run measures sustainable throughput, not a growing queue.
                // Each producer keeps its share of the backlog; past it, it
                // pauses until half of it is drained.
                let share = plan.max_backlog / producers;
                let limit = share.saturating_sub(depth as u64).max(1) as i64;
                if batch.is_empty() {
                    paused |= shared.backlog_of(id) > limit;
                    if paused && shared.backlog_of(id) > limit / 2 {
                        shared.wait_backlog_below(id, limit / 2);
                        continue;
                    }
                    paused = false;
                }
                while batch.len() < depth {
                    batch.push(Pending {
                        k: next_k,
                        seq: next_seq,
                        due_ns: now,
                    });
                    next_k += producers;
                    next_seq += 1;
                }
            }
        }
        send_batch(
            plan,
            id,
            &mut router,
            &batch,
            &mut retry,
            &mut stats,
            &mut pipe,
        );
    }
    // Anything still scheduled before the end was never sent.
    if plan.args.rate > 0 {
        let total_due = plan.scheduled_total();
        let mine = (total_due + producers - 1 - id as u64) / producers;
        stats.unsent = mine.saturating_sub(next_seq) + retry.len() as u64;
    }
    stats
}

/// Sleep until `due_ns`, spinning for the last stretch so the send is not late
/// by the scheduler's wake-up slack.
fn sleep_until(shared: &crate::latency::Shared, due_ns: u64) {
    const SPIN_NS: u64 = 60_000;
    loop {
        let now = shared.now_ns();
        if now >= due_ns || shared.stop_producers.load(Ordering::Relaxed) {
            return;
        }
        let left = due_ns - now;
        if left > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(left - SPIN_NS));
        } else {
            std::thread::yield_now();
        }
    }
}

/// Send `batch` as one pipeline per node; MOVED entries go to `retry`.
fn send_batch(
    plan: &Plan,
    id: usize,
    router: &mut Router,
    batch: &[Pending],
    retry: &mut Vec<Pending>,
    stats: &mut ProducerStats,
    pipe: &mut Packer,
) {
    let shared = &plan.shared;
    // Partition before sending anything: a MOVED below replaces the topology,
    // and re-partitioning mid-batch would send some entries twice.
    let mut by_node: Vec<(usize, Vec<&Pending>)> = Vec::new();
    for e in batch {
        let node = router
            .topo
            .node_of_slot(slot_of(plan.key_of(e.k).as_bytes()));
        match by_node.iter_mut().find(|(n, _)| *n == node) {
            Some((_, v)) => v.push(e),
            None => by_node.push((node, vec![e])),
        }
    }
    // XADD key [MAXLEN ~ n] * t <due> p <id> n <seq> <payload fields>.
    let maxlen = if plan.args.maxlen.is_some() { 3 } else { 0 };
    let args = 9 + maxlen + 2 * plan.payload.len();
    for (node, mine) in by_node {
        pipe.clear();
        for e in &mine {
            pipe.command(args)
                .arg(b"XADD")
                .arg(plan.key_of(e.k).as_bytes());
            if let Some(m) = plan.args.maxlen {
                pipe.arg(b"MAXLEN").arg(b"~").num(m);
            }
            pipe.arg(b"*")
                .arg(b"t")
                .num(e.due_ns)
                .arg(b"p")
                .num(id as u64)
                .arg(b"n")
                .num(e.seq);
            for (f, v) in &plan.payload {
                pipe.arg(f.as_bytes()).arg(v);
            }
        }
        // Replies are decoded in place, as consumers do (see `crate::reply`).
        let res = router
            .raw(node)
            .and_then(|c| c.query(pipe.bytes(), mine.len()))
            .map(|replies| {
                (0..mine.len())
                    .map(|i| replies.get(i).and_then(crate::reply::Node::to_error))
                    .collect::<Vec<_>>()
            });
        match res {
            Ok(errors) => {
                let now = shared.now_ns();
                let mut sent = 0;
                for (e, err) in mine.iter().zip(errors) {
                    match err {
                        None => {
                            sent += 1;
                            stats.last_send_ns = now;
                        }
                        Some(err) => {
                            if router.handle_error(node, &err) {
                                retry.push(**e);
                            } else {
                                shared.error(format!("XADD: {err}"));
                            }
                        }
                    }
                }
                stats.sent += sent;
                shared.note_sent(id, sent);
            }
            Err(err) => {
                // The whole round trip failed: we cannot tell which entries
                // landed, so count them as errors and move on.
                router.handle_error(node, &err);
                for _ in &mine {
                    shared.error(format!("XADD pipeline: {err}"));
                }
            }
        }
    }
}
