//! XREADGROUP BLOCK + XACK; latency = receive time − scheduled send time.
//!
//! One histogram per consumer thread (µs, 1 µs..60 s, 3 digits), merged by
//! the report; a copy of the last few hundred ms goes to the progress line.

use std::sync::atomic::Ordering;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::reply::{for_each_entry, for_each_field, Tree};

use crate::latency::{new_histogram, Plan};
use crate::pack::{Acks, Packer};
use crate::seen::Seen;
use crate::target::{slot_of, Router};

/// What a consumer saw, for the report.
#[derive(Debug)]
pub struct ConsumerStats {
    /// Latencies of entries scheduled inside the measured window, µs.
    pub hist: Histogram<u64>,
    /// Every (producer, seq) received.
    pub seen: Seen,
    /// Sum of XACK replies.
    pub acked: u64,
}

/// One entry as read back: who sent it, when it was due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub due_ns: u64,
    pub producer: usize,
    pub seq: u64,
}

/// Streams read together in one XREADGROUP: they live on one node (and, in
/// cluster mode, in one slot, since Redis Cluster refuses cross-slot reads).
#[derive(Debug, Clone)]
pub struct ReadSet {
    pub keys: Vec<String>,
    pub slot: u16,
}

/// Run consumer `id` until told to stop.
pub fn run(plan: &Plan, id: usize, sets: Vec<ReadSet>, mut router: Router) -> ConsumerStats {
    let shared = &plan.shared;
    let name = format!("c{id}");
    let mut stats = ConsumerStats {
        hist: new_histogram(),
        seen: Seen::default(),
        acked: 0,
    };
    let mut live = new_histogram();
    // Recorded latencies of the current receive second (see `Shared::per_second`).
    let mut second = new_histogram();
    let mut second_idx = 0usize;
    let mut last_flush_ns = shared.now_ns();
    let mut idle_pass = false;
    // With one read set, the XACK of a batch goes out in one pipeline with
    // the next XREADGROUP (as a consumer that acks as it reads on does):
    // one round trip per batch instead of two.
    let mut deferred_ack = Acks::default();
    // IDs of the current read; with several read sets, acknowledged at once.
    let mut to_ack = Acks::default();
    let mut pipe = Packer::default();
    let group = plan.args.group.as_bytes();
    let count = plan.args.count.max(1) as u64;
    // Entries of each producer in the last read (closed-loop accounting).
    let mut by_producer = vec![0u64; plan.args.producers.max(1)];
    while !shared.stop_consumers.load(Ordering::Relaxed) {
        let mut got_any = false;
        for set in &sets {
            // With one read set we block as asked. With several, a pass first
            // polls each without blocking and only then waits briefly on each.
            let block_ms = if sets.len() == 1 {
                Some(plan.args.block_ms)
            } else if idle_pass {
                Some(1)
            } else {
                None
            };
            let node = router.topo.node_of_slot(set.slot);
            // The XACKs of the last batch, then the read; replies decoded in
            // place (see `crate::reply`).
            pipe.clear();
            let acks = deferred_ack.pack(&mut pipe, group, |_| true);
            deferred_ack.clear();
            // XREADGROUP GROUP g c COUNT n [BLOCK ms] [NOACK] STREAMS key... >...
            let args = 7
                + 2 * usize::from(block_ms.is_some())
                + usize::from(plan.args.noack)
                + 2 * set.keys.len();
            pipe.command(args)
                .arg(b"XREADGROUP")
                .arg(b"GROUP")
                .arg(group)
                .arg(name.as_bytes())
                .arg(b"COUNT")
                .num(count);
            if let Some(b) = block_ms {
                pipe.arg(b"BLOCK").num(b);
            }
            if plan.args.noack {
                pipe.arg(b"NOACK");
            }
            pipe.arg(b"STREAMS");
            for k in &set.keys {
                pipe.arg(k.as_bytes());
            }
            for _ in &set.keys {
                pipe.arg(b">");
            }
            let replies = match router
                .raw(node)
                .and_then(|c| c.query(pipe.bytes(), acks + 1))
            {
                Ok(r) => r,
                Err(err) => {
                    if !router.handle_error(node, &err) {
                        shared.error(format!("XREADGROUP: {err}"));
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    continue;
                }
            };
            let now_ns = shared.now_ns();
            for r in (0..acks).filter_map(|i| replies.get(i)) {
                match (r.int(), r.to_error()) {
                    (Some(k), _) => stats.acked += k.max(0) as u64,
                    (None, Some(e)) => shared.error(format!("XACK: {e}")),
                    (None, None) => {}
                }
            }
            let Some(reply) = replies.get(acks) else {
                continue;
            };
            if let Some(err) = reply.to_error() {
                if !router.handle_error(node, &err) {
                    shared.error(format!("XREADGROUP: {err}"));
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            to_ack.clear();
            let mut n = 0u64;
            by_producer.iter_mut().for_each(|k| *k = 0);
            for_each_entry(reply, |key, id, fields| {
                let entry = parse_fields(fields);
                match entry {
                    Some(e) => {
                        stats.seen.record(e.producer, e.seq);
                        if let Some(k) = by_producer.get_mut(e.producer) {
                            *k += 1;
                        }
                        let lat_us = (now_ns.saturating_sub(e.due_ns) / 1_000).max(1);
                        // Warmup entries too: the progress line should not say 0 µs then.
                        live.saturating_record(lat_us);
                        if e.due_ns >= plan.measure_from_ns && e.due_ns < plan.end_ns {
                            stats.hist.saturating_record(lat_us);
                            let idx = (now_ns.saturating_sub(plan.measure_from_ns) / 1_000_000_000)
                                as usize;
                            if idx != second_idx && !second.is_empty() {
                                shared.add_second(second_idx, &second);
                                second.reset();
                            }
                            second_idx = idx;
                            second.saturating_record(lat_us);
                        }
                    }
                    None => shared.error("entry without t/p/n fields".into()),
                }
                n += 1;
                if !plan.args.noack {
                    to_ack.add(key, id);
                }
            });
            if n > 0 {
                got_any = true;
                if plan.args.work_us > 0 {
                    std::thread::sleep(Duration::from_micros(plan.args.work_us * n));
                }
                shared.note_received(&by_producer);
            }
            if !to_ack.is_empty() {
                if sets.len() == 1 {
                    std::mem::swap(&mut deferred_ack, &mut to_ack);
                } else {
                    stats.acked += ack(plan, &mut router, &to_ack, &mut pipe);
                }
            }
        }
        idle_pass = !got_any;
        let now = shared.now_ns();
        if now - last_flush_ns > 100_000_000 {
            if let Ok(mut h) = shared.live.lock() {
                let _ = h.add(&live);
            }
            live.reset();
            last_flush_ns = now;
        }
    }
    if !deferred_ack.is_empty() {
        stats.acked += ack(plan, &mut router, &deferred_ack, &mut pipe);
    }
    if !second.is_empty() {
        shared.add_second(second_idx, &second);
    }
    stats
}

/// XACK the ids, one pipeline per node; returns how many the server acknowledged.
fn ack(plan: &Plan, router: &mut Router, to_ack: &Acks, pipe: &mut Packer) -> u64 {
    let shared = &plan.shared;
    let mut acked = 0;
    // Partition first: a MOVED below replaces the topology mid-loop.
    let mut nodes: Vec<usize> = Vec::new();
    let by_key: Vec<(&[u8], usize)> = to_ack
        .keys()
        .map(|key| (key, router.topo.node_of_slot(slot_of(key))))
        .collect();
    for &(_, node) in &by_key {
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    for node in nodes {
        pipe.clear();
        let n = to_ack.pack(pipe, plan.args.group.as_bytes(), |key| {
            by_key.iter().any(|&(k, at)| k == key && at == node)
        });
        let res = router.raw(node).and_then(|c| {
            c.query(pipe.bytes(), n).map(|r| {
                (0..r.len())
                    .filter_map(|i| r.get(i))
                    .map(|x| (x.int(), x.to_error()))
                    .collect::<Vec<_>>()
            })
        });
        match res {
            Ok(replies) => {
                for r in replies {
                    match r {
                        (Some(n), _) => acked += n.max(0) as u64,
                        (None, Some(err)) => shared.error(format!("XACK: {err}")),
                        (None, None) => shared.error("XACK: not an integer reply".into()),
                    }
                }
            }
            Err(err) => {
                router.handle_error(node, &err);
                shared.error(format!("XACK pipeline: {err}"));
            }
        }
    }
    acked
}

/// The bookkeeping fields `t`, `p`, `n` of an entry's field/value list.
pub fn parse_fields<'a, T: Tree<'a>>(fields: T) -> Option<Received> {
    let (mut t, mut p, mut n) = (None, None, None);
    for_each_field(fields, |k, v| {
        let num = || -> Option<u64> { std::str::from_utf8(v).ok()?.parse().ok() };
        match k {
            b"t" => t = t.or_else(num),
            b"p" => p = p.or_else(num),
            b"n" => n = n.or_else(num),
            _ => {}
        }
    });
    Some(Received {
        due_ns: t?,
        producer: usize::try_from(p?).ok()?,
        seq: n?,
    })
}
