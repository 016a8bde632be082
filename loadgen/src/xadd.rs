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
use redis::Value;
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
    /// The first error's text, when there were errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
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
        ) + &self
            .first_error
            .as_ref()
            .map(|e| format!("first error: {e}\n"))
            .unwrap_or_default()
    }
}

struct Counters {
    ops: AtomicU64,
    errors: AtomicU64,
    /// The text of the first error, shown with the report.
    first_error: std::sync::OnceLock<String>,
    /// Requests handed out so far (for `--requests`).
    claimed: AtomicU64,
    stop: AtomicBool,
}

/// Run the throughput test against `url`.
pub fn run(args: &XaddArgs, url: &str, target_desc: String) -> Result<XaddReport, String> {
    let cluster = args.target.cluster;
    let topo = Topology::of(url, cluster)?;
    let mut admin = Router::new(url, topo.clone(), cluster);
    admin.check_nodes()?;
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
        first_error: std::sync::OnceLock::new(),
        claimed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let started = Instant::now();
    let mut threads = Vec::new();
    let clients = args.clients.max(1);
    let nthreads = match args.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        t => t,
    }
    .min(clients);
    for t in 0..nthreads {
        let (args, keys, fields, counters) =
            (args.clone(), keys.clone(), fields.clone(), counters.clone());
        let mine: Vec<Client> = (t..clients)
            .step_by(nthreads)
            .map(|id| Client {
                next: id,
                router: Router::new(url, topo.clone(), cluster),
                packed: Default::default(),
            })
            .collect();
        threads.push(
            std::thread::Builder::new()
                .name(format!("xadd-{t}"))
                .spawn(move || drive(&args, mine, &keys, &fields, &counters))
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
        first_error: counters.first_error.get().cloned(),
        elapsed_s,
        ops_per_s: ops as f64 / elapsed_s.max(1e-9),
        latency_us: percentiles(&hist),
    })
}

/// One connection of the run: the key it writes next (round-robin over the
/// keys, or always its own with `--partition`) and its connections per node.
struct Client {
    next: usize,
    router: Router,
    /// Packed pipelines by the key the round starts at (see [`pipelines`]).
    packed: std::collections::HashMap<(usize, u64), Vec<Packed>>,
}

/// One pipeline, packed: `(node, bytes, replies, ops, replies per transaction)`.
type Packed = (usize, Vec<u8>, usize, u64, usize);

/// Rounds are packed once per starting key and reused while there are at
/// most this many keys (a round is the same bytes each time it starts
/// there, `*` IDs included).
const CACHE_KEYS: usize = 64;

/// A pipeline sent and not read yet.
struct Flight {
    /// Index of the client (in its thread) that sent it.
    client: usize,
    node: usize,
    /// Replies to read.
    replies: usize,
    /// Ops it carries (XADDs, or transactions).
    ops: u64,
    /// Replies per transaction with `--multi` (0: every reply is an op).
    per_tx: usize,
    sent_at: Instant,
}

/// Drive `clients` from one thread, as redis-benchmark drives all of its
/// connections from one: each round sends every client's pipeline, then
/// reads the replies. A thread per connection would spend the client's CPU
/// on context switches, which a 2-core host takes from the server.
fn drive(
    args: &XaddArgs,
    mut clients: Vec<Client>,
    keys: &[String],
    fields: &[(String, Vec<u8>)],
    counters: &Counters,
) -> Histogram<u64> {
    let mut hist = new_histogram();
    let depth = args.pipeline.max(1) as u64;
    let mut flights: Vec<Flight> = Vec::new();
    while !counters.stop.load(Ordering::Relaxed) {
        for (ci, c) in clients.iter_mut().enumerate() {
            let n = if args.requests > 0 {
                let got = counters.claimed.fetch_add(depth, Ordering::Relaxed);
                if got >= args.requests {
                    break;
                }
                depth.min(args.requests - got)
            } else {
                depth
            };
            let start = (c.next % keys.len(), n);
            let round = match c.packed.remove(&start) {
                Some(round) => {
                    if !args.partition && args.multi == 0 {
                        c.next += n as usize;
                    }
                    round
                }
                None => pipelines(args, n, c, keys, fields),
            };
            for (node, packed, replies, ops, per_tx) in &round {
                let (node, replies, ops, per_tx) = (*node, *replies, *ops, *per_tx);
                match c.router.raw(node).and_then(|k| k.send(packed)) {
                    Ok(()) => flights.push(Flight {
                        client: ci,
                        node,
                        replies,
                        ops,
                        per_tx,
                        sent_at: Instant::now(),
                    }),
                    Err(e) => {
                        c.router.handle_error(node, &e);
                        c.packed.clear();
                        counters.errors.fetch_add(ops, Ordering::Relaxed);
                        let _ = counters.first_error.set(e.to_string());
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
            if keys.len() <= CACHE_KEYS {
                c.packed.insert(start, round);
            }
        }
        if flights.is_empty() {
            break;
        }
        for f in flights.drain(..) {
            let c = &mut clients[f.client];
            let (ok, failed) = read_flight(&f, &mut c.router, &counters.first_error);
            if failed > 0 {
                // The topology may have changed (MOVED): pack anew.
                c.packed.clear();
            }
            let us = (f.sent_at.elapsed().as_micros() as u64).max(1);
            let _ = hist.record_n(us.min(60_000_000), ok);
            counters.ops.fetch_add(ok, Ordering::Relaxed);
            counters.errors.fetch_add(failed, Ordering::Relaxed);
        }
    }
    hist
}

/// The pipelines of one round of client `c`: `(node, pipeline, replies, ops,
/// replies per transaction)`, one per node its `n` XADDs go to (one in all
/// with `--multi`: `n` transactions of MULTI, one XADD per key, EXEC).
fn pipelines(
    args: &XaddArgs,
    n: u64,
    c: &mut Client,
    keys: &[String],
    fields: &[(String, Vec<u8>)],
) -> Vec<Packed> {
    if args.multi > 0 {
        let mut pipe = redis::pipe();
        for _ in 0..n {
            pipe.cmd("MULTI");
            for key in keys {
                push_xadd(&mut pipe, key, args.maxlen, fields);
            }
            pipe.cmd("EXEC");
        }
        let node = c.router.topo.node_of_slot(slot_of(keys[0].as_bytes()));
        let per_tx = keys.len() + 2;
        return vec![(
            node,
            pipe.get_packed_pipeline(),
            per_tx * n as usize,
            n,
            per_tx,
        )];
    }
    let mut by_node: Vec<(usize, redis::Pipeline, usize, u64, usize)> = Vec::new();
    for _ in 0..n {
        let key = &keys[c.next % keys.len()];
        if !args.partition {
            c.next += 1;
        }
        let node = c.router.topo.node_of_slot(slot_of(key.as_bytes()));
        let idx = match by_node.iter().position(|(n, ..)| *n == node) {
            Some(i) => i,
            None => {
                by_node.push((node, redis::pipe(), 0, 0, 0));
                by_node.len() - 1
            }
        };
        let (_, pipe, replies, ops, _) = &mut by_node[idx];
        push_xadd(pipe, key, args.maxlen, fields);
        *replies += 1;
        *ops += 1;
    }
    by_node
        .into_iter()
        .map(|(node, pipe, replies, ops, per_tx)| {
            (node, pipe.get_packed_pipeline(), replies, ops, per_tx)
        })
        .collect()
}

/// Read a flight's replies: `(ops done, ops failed)`. An XADD is done when
/// it answered (an ID, or nil under NOMKSTREAM); a transaction when its EXEC answered an array. A lost
/// connection fails what is left of the flight.
fn read_flight(
    f: &Flight,
    router: &mut Router,
    first_error: &std::sync::OnceLock<String>,
) -> (u64, u64) {
    // Replies are decoded in place (see `crate::reply`): per reply, whether
    // it is an array, or its error.
    let replies = router.raw(f.node).and_then(|k| {
        k.recv(f.replies).map(|r| {
            (0..r.len())
                .filter_map(|i| r.get(i))
                .map(|n| (n.is_array(), n.to_error()))
                .collect::<Vec<_>>()
        })
    });
    let replies = match replies {
        Ok(r) => r,
        Err(e) => {
            // The round trip failed: nothing of it can be counted as done.
            let _ = first_error.set(e.to_string());
            router.handle_error(f.node, &e);
            return (0, f.ops);
        }
    };
    let (mut ok, mut failed) = (0u64, 0u64);
    for (i, (array, err)) in replies.into_iter().enumerate() {
        let exec = f.per_tx > 0 && i % f.per_tx == f.per_tx - 1;
        let counts = f.per_tx == 0 || exec;
        match err {
            None if exec && array => ok += 1,
            None if exec => failed += 1,
            None if counts => ok += 1,
            None => {}
            Some(e) => {
                let _ = first_error.set(e.to_string());
                router.handle_error(f.node, &e);
                if counts {
                    failed += 1;
                }
            }
        }
    }
    (ok, failed)
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
