//! `loadgen xadd`: XADD throughput, like redis-benchmark for streams.
//!
//! `--clients` threads each send pipelines of `--pipeline` XADDs over
//! `--keys` streams (round-robin) as fast as the server answers. Each XADD's
//! latency is its pipeline's round trip (what redis-benchmark reports).
//!
//! With `--multi N` each request is a transaction (MULTI, one XADD to each
//! of N streams spread over the slot space, EXEC): the cost of atomic
//! writes across shards.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use redis::{RedisResult, Value};
use serde::Serialize;

use crate::cli::XaddArgs;
use crate::latency::{new_histogram, payload, server_info, spread_keys, stream_keys};
use crate::report::{percentiles, Percentiles};
use crate::target::{slot_of, Router, Topology};

/// Result of a throughput run; the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct XaddReport {
    pub config: XaddArgs,
    pub target: String,
    pub server_info: std::collections::BTreeMap<String, String>,
    /// XADDs the server accepted.
    pub ops: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub ops_per_s: f64,
    /// Per-XADD latency (its pipeline's round trip), µs.
    pub latency_us: Percentiles,
}

impl XaddReport {
    /// Human-readable summary.
    pub fn render(&self) -> String {
        let l = &self.latency_us;
        let what = if self.config.multi > 0 {
            format!("MULTI + {} XADD + EXEC", self.config.multi)
        } else {
            "XADD".to_string()
        };
        format!(
            "{what}: {} ops in {:.2} s -> {:.0} ops/s ({} clients, pipeline {}, {} keys, {} errors)\n\
             latency us: p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}\n",
            self.ops,
            self.elapsed_s,
            self.ops_per_s,
            self.config.clients,
            self.config.pipeline,
            if self.config.multi > 0 {
                self.config.multi
            } else {
                self.config.keys
            },
            self.errors,
            l.p50,
            l.p90,
            l.p99,
            l.p99_9,
            l.p99_99,
            l.max
        )
    }
}

struct Counters {
    ops: AtomicU64,
    errors: AtomicU64,
    /// Requests handed out so far (for `--requests`).
    claimed: AtomicU64,
    stop: AtomicBool,
}

/// Run the throughput test against `url`.
pub fn run(args: &XaddArgs, url: &str, target_desc: String) -> Result<XaddReport, String> {
    let cluster = args.target.cluster;
    let topo = if cluster {
        Topology::discover(url)
    } else {
        Topology::single(url)
    }
    .map_err(|e| format!("cannot reach {}: {e}", crate::redact::redact_url(url)))?;
    let mut admin = Router::new(url, topo.clone(), cluster);
    let info = server_info(&mut admin);
    let keys = Arc::new(if args.multi > 0 {
        spread_keys(&args.key_prefix, args.multi)
    } else if args.partition {
        spread_keys(&args.key_prefix, args.keys)
    } else {
        stream_keys(&args.key_prefix, args.keys, args.hash_tag)
    });
    let fields = Arc::new(payload(args.fields, args.value_size, args.seed));
    let counters = Arc::new(Counters {
        ops: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        claimed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let started = Instant::now();
    let mut threads = Vec::new();
    for c in 0..args.clients.max(1) {
        let (args, keys, fields, counters) =
            (args.clone(), keys.clone(), fields.clone(), counters.clone());
        let router = Router::new(url, topo.clone(), cluster);
        threads.push(
            std::thread::Builder::new()
                .name(format!("xadd-{c}"))
                .spawn(move || client(&args, c, &keys, &fields, &counters, router))
                .map_err(|e| e.to_string())?,
        );
    }
    let deadline = started + Duration::from_secs_f64(args.duration.max(0.0));
    let mut last = (Instant::now(), 0u64);
    while !threads.iter().all(|t| t.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if args.requests == 0 && Instant::now() >= deadline {
            counters.stop.store(true, Ordering::Relaxed);
        }
        if !args.quiet && last.0.elapsed() >= Duration::from_secs(1) {
            let ops = counters.ops.load(Ordering::Relaxed);
            eprintln!(
                "[{:>5.1}s] {:.0} ops/s",
                started.elapsed().as_secs_f64(),
                (ops - last.1) as f64 / last.0.elapsed().as_secs_f64()
            );
            last = (Instant::now(), ops);
        }
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let mut hist = new_histogram();
    for t in threads {
        let h = t.join().map_err(|_| "a client panicked".to_string())?;
        hist.add(&h)
            .map_err(|e| format!("merging histograms: {e:?}"))?;
    }
    if !args.keep {
        for k in keys.iter() {
            let node = admin.topo.node_of_slot(slot_of(k.as_bytes()));
            let _ = admin
                .conn(node)
                .and_then(|c| redis::cmd("DEL").arg(k).query::<Value>(c));
        }
    }
    let ops = counters.ops.load(Ordering::Relaxed);
    Ok(XaddReport {
        config: args.clone(),
        target: target_desc,
        server_info: info,
        ops,
        errors: counters.errors.load(Ordering::Relaxed),
        elapsed_s,
        ops_per_s: ops as f64 / elapsed_s.max(1e-9),
        latency_us: percentiles(&hist),
    })
}

fn client(
    args: &XaddArgs,
    id: usize,
    keys: &[String],
    fields: &[(String, Vec<u8>)],
    counters: &Counters,
    mut router: Router,
) -> Histogram<u64> {
    let mut hist = new_histogram();
    let depth = args.pipeline.max(1) as u64;
    let mut next = id;
    loop {
        if counters.stop.load(Ordering::Relaxed) {
            break;
        }
        let n = if args.requests > 0 {
            let got = counters.claimed.fetch_add(depth, Ordering::Relaxed);
            if got >= args.requests {
                break;
            }
            depth.min(args.requests - got)
        } else {
            depth
        };
        // One pipeline per node this batch touches.
        let mut by_node: Vec<(usize, redis::Pipeline, u64)> = Vec::new();
        if args.multi > 0 {
            tx_round(args, n, keys, fields, counters, &mut router, &mut hist);
            continue;
        }
        for _ in 0..n {
            let key = &keys[next % keys.len()];
            if !args.partition {
                next += 1;
            }
            let node = router.topo.node_of_slot(slot_of(key.as_bytes()));
            let idx = match by_node.iter().position(|(n, _, _)| *n == node) {
                Some(i) => i,
                None => {
                    let mut p = redis::pipe();
                    p.ignore_errors();
                    by_node.push((node, p, 0));
                    by_node.len() - 1
                }
            };
            let (_, pipe, count) = &mut by_node[idx];
            push_xadd(pipe, key, args.maxlen, fields);
            *count += 1;
        }
        for (node, pipe, count) in by_node {
            round_trip(
                pipe,
                node,
                count,
                &mut router,
                &mut hist,
                counters,
                |_, r| {
                    if r.is_ok() {
                        Tally::Op
                    } else {
                        Tally::Error
                    }
                },
            );
        }
    }
    hist
}

/// Queue `XADD key [MAXLEN ~ m] * field value ...` on `pipe`.
fn push_xadd(
    pipe: &mut redis::Pipeline,
    key: &str,
    maxlen: Option<u64>,
    fields: &[(String, Vec<u8>)],
) {
    let cmd = pipe.cmd("XADD").arg(key);
    if let Some(m) = maxlen {
        cmd.arg("MAXLEN").arg("~").arg(m);
    }
    cmd.arg("*");
    for (f, v) in fields {
        cmd.arg(f.as_str()).arg(v.as_slice());
    }
}

/// How a reply of a pipeline counts.
enum Tally {
    /// One op done.
    Op,
    /// One op failed.
    Error,
    /// Part of an op (MULTI's `+OK`, `+QUEUED`).
    Skip,
}

/// Send `pipe` (`sent` ops) to `node`; `tally` says how each reply (by
/// position) counts. Every op done gets the pipeline's round trip as its
/// latency; a failed round trip counts every op as an error and backs off.
fn round_trip(
    pipe: redis::Pipeline,
    node: usize,
    sent: u64,
    router: &mut Router,
    hist: &mut Histogram<u64>,
    counters: &Counters,
    tally: impl Fn(usize, &RedisResult<Value>) -> Tally,
) {
    let t0 = Instant::now();
    let res: RedisResult<Vec<RedisResult<Value>>> = router.conn(node).and_then(|c| pipe.query(c));
    let us = (t0.elapsed().as_micros() as u64).max(1);
    match res {
        Ok(replies) => {
            let mut ok = 0;
            for (i, r) in replies.iter().enumerate() {
                match tally(i, r) {
                    Tally::Op => ok += 1,
                    Tally::Skip => {}
                    Tally::Error => {
                        if let Err(e) = r {
                            router.handle_error(node, e);
                        }
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            let _ = hist.record_n(us.min(60_000_000), ok);
            counters.ops.fetch_add(ok, Ordering::Relaxed);
        }
        Err(e) => {
            router.handle_error(node, &e);
            counters.errors.fetch_add(sent, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// One pipeline of `n` transactions, each MULTI + one XADD per key + EXEC;
/// an op is a transaction whose EXEC answered an array.
fn tx_round(
    args: &XaddArgs,
    n: u64,
    keys: &[String],
    fields: &[(String, Vec<u8>)],
    counters: &Counters,
    router: &mut Router,
    hist: &mut Histogram<u64>,
) {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for _ in 0..n {
        pipe.cmd("MULTI");
        for key in keys {
            push_xadd(&mut pipe, key, args.maxlen, fields);
        }
        pipe.cmd("EXEC");
    }
    let node = router.topo.node_of_slot(slot_of(keys[0].as_bytes()));
    let per_tx = keys.len() + 2;
    round_trip(pipe, node, n, router, hist, counters, |i, r| {
        let exec = i % per_tx == per_tx - 1;
        match r {
            Ok(Value::Array(_)) if exec => Tally::Op,
            _ if exec => Tally::Error,
            _ => Tally::Skip,
        }
    });
}
