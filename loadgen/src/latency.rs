//! The latency test: set up streams and group, run producers and consumers on
//! one shared monotonic clock, drain, check exactly-once, report.
//!
//! Timeline (ns since `Shared::epoch`): consumers connect and block; the first
//! entry is due at `start_ns`; entries due before `measure_from_ns` (warmup)
//! are checked but not recorded; producers stop at `end_ns`; consumers keep
//! reading until every sent entry arrived, nothing arrived for the stall
//! timeout, or the drain's hard limit passed. Then the group's `lag` tells
//! entries still waiting (backlog) from entries gone (lost), and
//! [`crate::verdict`] decides OK / SATURATED / FAILED.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use redis::Value;
use serde::Serialize;

use crate::cli::LatencyArgs;
use crate::consumer::{self, ReadSet};
use crate::producer;
use crate::progress::Progress;
use crate::report::{LatencyReport, Totals};
use crate::seen::Seen;
use crate::target::{slot_of, Router, Topology};
use crate::verdict::{self, DrainEnd, Evidence};

/// A histogram of µs latencies: 1 µs..60 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("static histogram bounds are valid")
}

/// State shared by every thread of a run.
#[derive(Debug)]
pub struct Shared {
    /// The one clock: producers stamp entries with ns since this instant and
    /// consumers subtract from it. Valid because all threads share one process.
    pub epoch: Instant,
    pub stop_producers: AtomicBool,
    pub stop_consumers: AtomicBool,
    /// XADDs the server accepted.
    pub sent: AtomicU64,
    /// Entries read back (duplicates included).
    pub received: AtomicU64,
    pub errors: AtomicU64,
    /// First few error messages, for the report.
    pub error_samples: Mutex<Vec<String>>,
    /// Recent latencies for the progress line; the progress thread drains it.
    pub live: Mutex<Histogram<u64>>,
    /// Recorded latencies by receive second since the measured window began;
    /// consumers flush into it once a second. The `.hlog` intervals and the
    /// JSON timeline come from here.
    pub per_second: Mutex<Vec<Histogram<u64>>>,
    /// Closed loop: producers waiting for the backlog to drain sleep on
    /// `drained` (under `drain_lock`) until a consumer reads entries, instead
    /// of waking every few µs to look (which costs the client CPU the server
    /// could use).
    drain_lock: Mutex<()>,
    drained: std::sync::Condvar,
    drain_waiters: std::sync::atomic::AtomicUsize,
    /// Closed loop, per producer: its entries sent and not yet read (a read
    /// may be counted before its send, hence signed), and the backlog it
    /// resumes at while it waits (see [`Shared::wait_backlog_below`]).
    backlog_by: Vec<(AtomicI64, AtomicI64)>,
}

impl Shared {
    /// State shared by `producers` producers and the consumers.
    pub fn new(producers: usize) -> Shared {
        Shared {
            epoch: Instant::now(),
            stop_producers: AtomicBool::new(false),
            stop_consumers: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            error_samples: Mutex::new(Vec::new()),
            live: Mutex::new(new_histogram()),
            per_second: Mutex::new(Vec::new()),
            drain_lock: Mutex::new(()),
            drained: std::sync::Condvar::new(),
            drain_waiters: std::sync::atomic::AtomicUsize::new(0),
            backlog_by: (0..producers)
                .map(|_| (AtomicI64::new(0), AtomicI64::new(-1)))
                .collect(),
        }
    }

    /// Entries sent and not yet read.
    pub fn backlog(&self) -> u64 {
        self.sent
            .load(Ordering::Relaxed)
            .saturating_sub(self.received.load(Ordering::Relaxed))
    }

    /// Producer `p`'s XADDs of `n` entries were accepted: counted once per
    /// round trip, as the counters are shared with the consumers' threads.
    pub fn note_sent(&self, p: usize, n: u64) {
        if n == 0 {
            return;
        }
        self.sent.fetch_add(n, Ordering::Relaxed);
        if let Some((backlog, _)) = self.backlog_by.get(p) {
            backlog.fetch_add(n as i64, Ordering::SeqCst);
        }
    }

    /// Entries sent by producer `p` and not yet read (closed loop).
    pub fn backlog_of(&self, p: usize) -> i64 {
        self.backlog_by
            .get(p)
            .map_or(0, |(b, _)| b.load(Ordering::SeqCst))
    }

    /// A consumer read `by_producer[p]` entries of each producer `p`: count
    /// them, and wake the producers waiting for their backlog to drain once
    /// it is down to where they resume.
    pub fn note_received(&self, by_producer: &[u64]) {
        let n: u64 = by_producer.iter().sum();
        self.received.fetch_add(n, Ordering::SeqCst);
        let mut wake = false;
        for (&k, (backlog, resume_at)) in by_producer.iter().zip(&self.backlog_by) {
            if k > 0 {
                let left = backlog.fetch_sub(k as i64, Ordering::SeqCst) - k as i64;
                wake |= left <= resume_at.load(Ordering::SeqCst);
            }
        }
        if wake && self.drain_waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.drain_lock.lock();
            self.drained.notify_all();
        }
    }

    /// Closed loop: producer `p` waits until its backlog is at most `limit`
    /// (or 1 ms passed, so the run's end and stops are seen).
    ///
    /// A producer resumes at half the backlog it pauses at, not as soon as a
    /// read makes room: one wake-up per half backlog drained instead of one
    /// per read, so the client's threads spend their CPU on requests rather
    /// than on waking each other (the consumers still find entries waiting).
    /// Each producer counts its own entries, so with partitioned streams a
    /// drained stream's producer resumes whatever the other streams hold.
    pub fn wait_backlog_below(&self, p: usize, limit: i64) {
        let Ok(guard) = self.drain_lock.lock() else {
            return;
        };
        let Some((backlog, resume_at)) = self.backlog_by.get(p) else {
            return;
        };
        resume_at.store(limit, Ordering::SeqCst);
        self.drain_waiters.fetch_add(1, Ordering::SeqCst);
        if backlog.load(Ordering::SeqCst) > limit {
            let _ = self.drained.wait_timeout(guard, Duration::from_millis(1));
        }
        resume_at.store(-1, Ordering::SeqCst);
        self.drain_waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Add `h` into second `sec` of the timeline.
    pub fn add_second(&self, sec: usize, h: &Histogram<u64>) {
        if let Ok(mut v) = self.per_second.lock() {
            if v.len() <= sec {
                v.resize_with(sec + 1, new_histogram);
            }
            let _ = v[sec].add(h);
        }
    }

    /// Nanoseconds since the epoch.
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Count an error, keeping the first few messages.
    pub fn error(&self, msg: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut s) = self.error_samples.lock() {
            if s.len() < 5 {
                s.push(msg);
            }
        }
    }
}

impl Default for Shared {
    /// State for one producer.
    fn default() -> Self {
        Self::new(1)
    }
}

/// Everything a worker needs to know, fixed before threads start.
#[derive(Debug)]
pub struct Plan {
    pub args: LatencyArgs,
    pub shared: Arc<Shared>,
    pub keys: Vec<String>,
    /// Field/value pairs appended to every entry.
    pub payload: Vec<(String, Vec<u8>)>,
    /// When entry 0 is due, ns since the epoch.
    pub start_ns: u64,
    /// Entries due before this are not recorded (warmup).
    pub measure_from_ns: u64,
    /// No entry is due at or after this; producers stop here.
    pub end_ns: u64,
    /// Closed loop: most entries sent but not yet read before producers pause.
    pub max_backlog: u64,
}

impl Plan {
    /// Stream key for global entry index `k` (round-robin).
    pub fn key_of(&self, k: u64) -> &str {
        let n = self.keys.len().max(1) as u64;
        self.keys.get((k % n) as usize).map_or("", String::as_str)
    }

    /// Scheduled send time of global entry `k` at `--rate` (open loop).
    pub fn due_ns(&self, k: u64) -> u64 {
        let rate = u128::from(self.args.rate.max(1));
        self.start_ns + (u128::from(k) * 1_000_000_000 / rate) as u64
    }

    /// How many entries are due before `end_ns` at `--rate`.
    pub fn scheduled_total(&self) -> u64 {
        let span = u128::from(self.end_ns - self.start_ns);
        (span * u128::from(self.args.rate)).div_ceil(1_000_000_000) as u64
    }
}

/// Stream key names: `prefix:i`, or `{prefix}:i` with `--hash-tag`.
pub fn stream_keys(prefix: &str, n: usize, hash_tag: bool) -> Vec<String> {
    (0..n.max(1))
        .map(|i| {
            if hash_tag {
                format!("{{{prefix}}}:{i}")
            } else {
                format!("{prefix}:{i}")
            }
        })
        .collect()
}

/// `n` stream keys, key `i` in the `i`-th of `n` equal ranges of the
/// hash-slot space (so on different shards of an n-shard server).
pub fn spread_keys(prefix: &str, n: usize) -> Vec<String> {
    let n = n.max(1);
    (0..n)
        .map(|i| {
            let (lo, hi) = (i * 16384 / n, (i + 1) * 16384 / n);
            (0u64..)
                .map(|j| format!("{prefix}:{i}:{j}"))
                .find(|k| (lo..hi).contains(&usize::from(slot_of(k.as_bytes()))))
                .unwrap_or_else(|| format!("{prefix}:{i}"))
        })
        .collect()
}

/// `fields` payload fields of `size` printable bytes, deterministic in `seed`.
pub fn payload(fields: usize, size: usize, seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut x = seed.max(1);
    (0..fields)
        .map(|i| {
            let v = (0..size)
                .map(|_| {
                    // xorshift64
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b'a' + (x % 26) as u8
                })
                .collect();
            (format!("f{i}"), v)
        })
        .collect()
}

/// Group keys into read sets: all keys together on a standalone server; one
/// set per slot in cluster mode.
pub fn read_sets(keys: &[String], cluster: bool) -> Vec<ReadSet> {
    if !cluster {
        return vec![ReadSet {
            keys: keys.to_vec(),
            slot: keys.first().map_or(0, |k| slot_of(k.as_bytes())),
        }];
    }
    let mut sets: Vec<ReadSet> = Vec::new();
    for k in keys {
        let slot = slot_of(k.as_bytes());
        match sets.iter_mut().find(|s| s.slot == slot) {
            Some(s) => s.keys.push(k.clone()),
            None => sets.push(ReadSet {
                keys: vec![k.clone()],
                slot,
            }),
        }
    }
    sets
}

/// Read sets of consumer `c` of `consumers`: spread sets over consumers; if
/// there are fewer sets than consumers, several consumers share a set.
pub fn sets_for(sets: &[ReadSet], c: usize, consumers: usize) -> Vec<ReadSet> {
    if sets.len() <= consumers {
        return sets
            .get(c % sets.len().max(1))
            .cloned()
            .into_iter()
            .collect();
    }
    sets.iter()
        .enumerate()
        .filter(|(i, _)| i % consumers == c)
        .map(|(_, s)| s.clone())
        .collect()
}

/// Run one command on the node owning `key`, following one MOVED.
fn keyed(router: &mut Router, key: &str, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
    let mut last = None;
    for _ in 0..3 {
        let node = router.topo.node_of_slot(slot_of(key.as_bytes()));
        match router.conn(node).and_then(|c| cmd.query::<Value>(c)) {
            Ok(v) => return Ok(v),
            Err(e) => {
                let retry = router.handle_error(node, &e);
                last = Some(e);
                if !retry {
                    break;
                }
            }
        }
    }
    match last {
        Some(e) if e.redirect_node().is_some() && !router.cluster() => {
            Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the target is a Redis Cluster node (it answered MOVED): add --cluster",
                e.to_string(),
            )))
        }
        Some(e) => Err(e),
        None => Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "no node",
        ))),
    }
}

/// `INFO server` of the first node, as key/value pairs.
pub fn server_info(router: &mut Router) -> std::collections::BTreeMap<String, String> {
    let text: redis::RedisResult<String> = router
        .conn(0)
        .and_then(|c| redis::cmd("INFO").arg("server").query(c));
    text.unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The group's `lag` (entries in the stream never delivered to it) summed over
/// `keys`, from XINFO GROUPS; `None` if any key's server does not report it.
fn group_lag(router: &mut Router, keys: &[String], group: &str) -> Option<u64> {
    let mut total = 0;
    for k in keys {
        let reply = keyed(router, k, redis::cmd("XINFO").arg("GROUPS").arg(k)).ok()?;
        let Value::Array(groups) = reply else {
            return None;
        };
        let mut lag = None;
        for g in &groups {
            let pairs: Vec<(&Value, &Value)> = match g {
                Value::Array(flat) => flat
                    .chunks(2)
                    .filter_map(|c| Some((c.first()?, c.get(1)?)))
                    .collect(),
                Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
                _ => continue,
            };
            let field = |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| {
                        matches!(k, Value::BulkString(b) if b == name.as_bytes())
                            || matches!(k, Value::SimpleString(s) if s == name)
                    })
                    .map(|(_, v)| *v)
            };
            let is_ours =
                matches!(field("name"), Some(Value::BulkString(b)) if b == group.as_bytes());
            if is_ours {
                if let Some(Value::Int(n)) = field("lag") {
                    lag = Some((*n).max(0) as u64);
                }
            }
        }
        total += lag?;
    }
    Some(total)
}

/// Counters sampled by the main thread about every 100 ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// ns since the epoch.
    pub t_ns: u64,
    pub sent: u64,
    pub received: u64,
}

/// A counter's value at `t_ns`, linearly interpolated between samples.
pub fn counter_at(samples: &[Sample], t_ns: u64, f: impl Fn(&Sample) -> u64) -> u64 {
    let after = samples.iter().position(|s| s.t_ns >= t_ns);
    match after {
        None => samples.last().map_or(0, &f),
        Some(0) => samples.first().map_or(0, &f),
        Some(i) => {
            let (a, b) = (&samples[i - 1], &samples[i]);
            let (va, vb) = (f(a) as f64, f(b) as f64);
            let frac = (t_ns - a.t_ns) as f64 / (b.t_ns - a.t_ns).max(1) as f64;
            (va + (vb - va) * frac).round() as u64
        }
    }
}

/// One second of the run, as in the JSON `timeline`.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    /// Seconds since the measured window began (drain seconds follow the window).
    pub t_s: u64,
    /// `measure` or `drain`.
    pub phase: &'static str,
    /// XADDs accepted during this second.
    pub sent: u64,
    /// Entries read during this second.
    pub delivered: u64,
    /// `sent − received` at the end of this second.
    pub backlog: u64,
    /// Latency of recorded entries received during this second, µs (0 if none).
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Recorded entries received during this second.
    pub samples: u64,
}

/// The per-second timeline from the sampled counters and per-second histograms.
pub fn timeline(
    samples: &[Sample],
    per_second: &[Histogram<u64>],
    measure_from_ns: u64,
    end_ns: u64,
) -> Vec<Second> {
    let last_ns = samples.last().map_or(measure_from_ns, |s| s.t_ns);
    let secs = ((last_ns.saturating_sub(measure_from_ns)).div_ceil(1_000_000_000) as usize)
        .max(per_second.len());
    (0..secs)
        .map(|i| {
            let a = measure_from_ns + i as u64 * 1_000_000_000;
            let b = (a + 1_000_000_000).min(last_ns.max(a));
            let sent = |t| counter_at(samples, t, |s| s.sent);
            let recv = |t| counter_at(samples, t, |s| s.received);
            let h = per_second.get(i);
            let q = |q: f64| {
                h.filter(|h| !h.is_empty())
                    .map_or(0, |h| h.value_at_quantile(q))
            };
            Second {
                t_s: i as u64,
                phase: if a < end_ns { "measure" } else { "drain" },
                sent: sent(b).saturating_sub(sent(a)),
                delivered: recv(b).saturating_sub(recv(a)),
                backlog: sent(b).saturating_sub(recv(b)),
                p50_us: q(0.5),
                p99_us: q(0.99),
                max_us: h.map_or(0, |h| h.max()),
                samples: h.map_or(0, |h| h.len()),
            }
        })
        .collect()
}

/// What a run produced: the report, the merged histogram and one histogram per
/// second of the timeline (for the `.hlog`).
pub struct RunOutput {
    pub report: LatencyReport,
    pub hist: Histogram<u64>,
    pub per_second: Vec<Histogram<u64>>,
    /// Wall-clock time when the measured window began.
    pub window_start: std::time::SystemTime,
}

/// Closed-loop backlog bound: `--max-backlog`, or 4 × max(consumers × COUNT,
/// producers × pipeline), at least 1000.
pub fn max_backlog(args: &LatencyArgs) -> u64 {
    args.max_backlog.unwrap_or_else(|| {
        let reads = args.consumers.max(1) * args.count.max(1);
        let writes = args.producers.max(1) * args.pipeline.max(1);
        (4 * reads.max(writes) as u64).max(1000)
    })
}

/// Run the latency test against `url`.
pub fn run(args: &LatencyArgs, url: &str, target_desc: String) -> Result<RunOutput, String> {
    let cluster = args.target.cluster;
    let topo = Topology::of(url, cluster)?;
    let mut admin = Router::new(url, topo.clone(), cluster);
    admin.check_nodes()?;
    let info = server_info(&mut admin);

    let keys = if args.partition {
        spread_keys(&args.key_prefix, args.streams)
    } else {
        stream_keys(&args.key_prefix, args.streams, args.hash_tag)
    };
    for k in &keys {
        keyed(&mut admin, k, redis::cmd("DEL").arg(k)).map_err(|e| format!("DEL {k}: {e}"))?;
        keyed(
            &mut admin,
            k,
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(k)
                .arg(&args.group)
                .arg("0")
                .arg("MKSTREAM"),
        )
        .map_err(|e| format!("XGROUP CREATE {k}: {e}"))?;
    }

    let shared = Arc::new(Shared::new(args.producers.max(1)));
    // Give consumers time to connect and block before the first entry is due.
    let start_ns = shared.now_ns() + 200_000_000;
    let measure_from_ns = start_ns + (args.warmup.max(0.0) * 1e9) as u64;
    let end_ns = measure_from_ns + (args.duration.max(0.0) * 1e9) as u64;
    let window_start = std::time::SystemTime::now()
        + Duration::from_nanos(measure_from_ns.saturating_sub(shared.now_ns()));
    let plan = Arc::new(Plan {
        args: args.clone(),
        shared: shared.clone(),
        keys: keys.clone(),
        payload: payload(args.fields, args.value_size, args.seed),
        start_ns,
        measure_from_ns,
        end_ns,
        max_backlog: max_backlog(args),
    });

    let sets = if args.partition {
        keys.iter()
            .map(|k| ReadSet {
                keys: vec![k.clone()],
                slot: slot_of(k.as_bytes()),
            })
            .collect()
    } else {
        read_sets(&keys, cluster)
    };
    let consumers = args.consumers.max(1);
    if sets.len() > consumers && !args.quiet {
        eprintln!(
            "note: {} slots of streams for {consumers} consumers: each consumer polls several \
             slots (BLOCK 1 ms each), which adds latency; use --consumers {} or --hash-tag",
            sets.len(),
            sets.len()
        );
    }
    let mut consumer_threads = Vec::new();
    for c in 0..consumers {
        let plan = plan.clone();
        let mine = sets_for(&sets, c, consumers);
        let router = Router::new(url, topo.clone(), cluster);
        consumer_threads.push(
            std::thread::Builder::new()
                .name(format!("consumer-{c}"))
                .spawn(move || consumer::run(&plan, c, mine, router))
                .map_err(|e| e.to_string())?,
        );
    }
    let mut producer_threads = Vec::new();
    for p in 0..args.producers.max(1) {
        let plan = plan.clone();
        let router = Router::new(url, topo.clone(), cluster);
        producer_threads.push(
            std::thread::Builder::new()
                .name(format!("producer-{p}"))
                .spawn(move || producer::run(&plan, p, router))
                .map_err(|e| e.to_string())?,
        );
    }

    let mut samples: Vec<Sample> = Vec::new();
    let sample = |samples: &mut Vec<Sample>| {
        samples.push(Sample {
            t_ns: shared.now_ns(),
            sent: shared.sent.load(Ordering::Relaxed),
            received: shared.received.load(Ordering::Relaxed),
        })
    };
    let mut progress = Progress::new(args.quiet, measure_from_ns, end_ns, shared.clone());
    while shared.now_ns() < end_ns {
        progress.tick();
        sample(&mut samples);
        let left_ns = end_ns.saturating_sub(shared.now_ns());
        std::thread::sleep(Duration::from_nanos(left_ns.min(100_000_000)));
    }
    shared.stop_producers.store(true, Ordering::Relaxed);
    let mut pstats = Vec::new();
    for t in producer_threads {
        pstats.push(t.join().map_err(|_| "a producer panicked".to_string())?);
    }
    let sent: u64 = pstats.iter().map(|s| s.sent).sum();
    sample(&mut samples);
    let backlog_at_end = sent.saturating_sub(shared.received.load(Ordering::Relaxed));

    // Drain: until everything sent was received, nothing arrived for the
    // stall timeout, or the hard limit.
    let drain_start_ns = shared.now_ns();
    let stall_ns = (args.drain_timeout.max(0.0) * 1e9) as u64;
    let cap_ns = drain_start_ns + (args.drain_max.max(0.0) * 1e9) as u64;
    let (mut last_received, mut last_progress_ns) =
        (shared.received.load(Ordering::Relaxed), drain_start_ns);
    let mut last_sample_ns = drain_start_ns;
    let drain = loop {
        let now = shared.now_ns();
        let received = shared.received.load(Ordering::Relaxed);
        if received >= sent {
            break DrainEnd::Drained;
        }
        if received > last_received {
            (last_received, last_progress_ns) = (received, now);
        } else if now - last_progress_ns >= stall_ns {
            break DrainEnd::Stalled;
        }
        if now >= cap_ns {
            break DrainEnd::Capped;
        }
        progress.tick();
        if now - last_sample_ns >= 100_000_000 {
            sample(&mut samples);
            last_sample_ns = now;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let drain_s = (shared.now_ns() - drain_start_ns) as f64 / 1e9;
    shared.stop_consumers.store(true, Ordering::Relaxed);
    let mut cstats = Vec::new();
    for t in consumer_threads {
        cstats.push(t.join().map_err(|_| "a consumer panicked".to_string())?);
    }
    sample(&mut samples);
    progress.finish();
    let undelivered_in_server = match drain {
        DrainEnd::Drained => Some(0),
        _ => group_lag(&mut admin, &keys, &args.group),
    };

    let mut hist = new_histogram();
    let mut seen = Seen::default();
    let mut acked = 0;
    for c in &cstats {
        hist.add(&c.hist)
            .map_err(|e| format!("merging histograms: {e:?}"))?;
        seen.merge(&c.seen);
        acked += c.acked;
    }
    if !args.keep {
        for k in &keys {
            let _ = keyed(&mut admin, k, redis::cmd("DEL").arg(k));
        }
    }
    let per_second = std::mem::take(&mut *shared.per_second.lock().map_err(|_| "poisoned")?);
    let seconds = timeline(&samples, &per_second, measure_from_ns, end_ns);
    let window_s = (end_ns - measure_from_ns) as f64 / 1e9;
    let at = |t: u64, f: fn(&Sample) -> u64| counter_at(&samples, t, f);
    let growth: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.t_ns >= measure_from_ns && s.t_ns <= end_ns)
        .map(|s| {
            (
                s.t_ns as f64 / 1e9,
                s.sent.saturating_sub(s.received) as f64,
            )
        })
        .collect();
    let errors = shared.errors.load(Ordering::Relaxed);
    let evidence = Evidence {
        rate_target: args.rate,
        window_s,
        sent,
        received: seen.received,
        unique: seen.unique(),
        acked,
        errors,
        sent_in_window: at(end_ns, |s| s.sent).saturating_sub(at(measure_from_ns, |s| s.sent)),
        delivered_in_window: at(end_ns, |s| s.received)
            .saturating_sub(at(measure_from_ns, |s| s.received)),
        backlog_at_end,
        backlog_growth_per_s: verdict::slope(&growth),
        drain,
        undelivered_in_server,
        maxlen: args.maxlen.is_some(),
        noack: args.noack,
    };
    let error_samples = shared
        .error_samples
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default();
    let totals = Totals {
        sent,
        unsent: pstats.iter().map(|s| s.unsent).sum(),
        received: seen.received,
        unique: seen.unique(),
        acked,
        errors,
        error_samples,
        elapsed_s: window_s,
        drain_s,
    };
    let report = LatencyReport::build(args, target_desc, info, &hist, totals, evidence, seconds);
    Ok(RunOutput {
        report,
        hist,
        per_second,
        window_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sets_and_schedule() {
        let spread = spread_keys("lg", 2);
        assert!(slot_of(spread[0].as_bytes()) < 8192, "{spread:?}");
        assert!(slot_of(spread[1].as_bytes()) >= 8192, "{spread:?}");
        let keys = stream_keys("lg", 4, true);
        assert_eq!(keys[3], "{lg}:3");
        assert_eq!(read_sets(&keys, true).len(), 1);
        let spread = stream_keys("lg", 4, false);
        assert_eq!(read_sets(&spread, false).len(), 1);
        let sets = read_sets(&spread, true);
        assert_eq!(sets.iter().map(|s| s.keys.len()).sum::<usize>(), 4);
        // Every set is read by some consumer, and each consumer reads something.
        for consumers in 1..6 {
            let mut covered = 0;
            for c in 0..consumers {
                let mine = sets_for(&sets, c, consumers);
                assert!(!mine.is_empty());
                covered += mine.len();
            }
            assert!(covered >= sets.len());
        }
        use clap::Parser;
        let cli = crate::cli::Cli::parse_from(["loadgen", "--rate", "3"]);
        let plan = Plan {
            args: cli.latency,
            shared: Arc::new(Shared::new(1)),
            keys: spread.clone(),
            payload: Vec::new(),
            start_ns: 1_000,
            measure_from_ns: 1_000,
            end_ns: 1_000 + 2_000_000_000,
            max_backlog: 1000,
        };
        assert_eq!(plan.due_ns(0), 1_000);
        assert_eq!(plan.due_ns(1), 1_000 + 333_333_333);
        assert_eq!(plan.due_ns(6), 1_000 + 2_000_000_000);
        // Due before end_ns: entries 0..=5.
        assert_eq!(plan.scheduled_total(), 6);
        assert_eq!(plan.key_of(5), "lg:1");
        let p = payload(2, 5, 9);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].0, "f1");
        assert_eq!(p[0].1.len(), 5);
        assert_eq!(p, payload(2, 5, 9));
        assert_ne!(p, payload(2, 5, 10));
    }

    /// `lag` as the verdict reads it, from a real (embedded) shardstream:
    /// entries in the stream not yet delivered to the group.
    #[test]
    fn group_lag_counts_undelivered_entries() {
        let target = crate::resolve(&crate::cli::TargetArgs {
            host: None,
            port: None,
            url: None,
            cluster: false,
            embedded_shards: Some(1),
        })
        .unwrap();
        let topo = Topology::single(&target.url).unwrap();
        let mut router = Router::new(&target.url, topo, false);
        let keys = stream_keys("lagtest", 2, false);
        for k in &keys {
            keyed(
                &mut router,
                k,
                redis::cmd("XGROUP")
                    .arg("CREATE")
                    .arg(k)
                    .arg("g")
                    .arg("0")
                    .arg("MKSTREAM"),
            )
            .unwrap();
        }
        assert_eq!(group_lag(&mut router, &keys, "g"), Some(0));
        for _ in 0..3 {
            keyed(
                &mut router,
                &keys[0],
                redis::cmd("XADD").arg(&keys[0]).arg("*").arg("f").arg("v"),
            )
            .unwrap();
        }
        keyed(
            &mut router,
            &keys[1],
            redis::cmd("XADD").arg(&keys[1]).arg("*").arg("f").arg("v"),
        )
        .unwrap();
        assert_eq!(group_lag(&mut router, &keys, "g"), Some(4));
        keyed(
            &mut router,
            &keys[0],
            redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg("g")
                .arg("c")
                .arg("COUNT")
                .arg(2)
                .arg("STREAMS")
                .arg(&keys[0])
                .arg(">"),
        )
        .unwrap();
        // Delivered but not acked is no longer lag.
        assert_eq!(group_lag(&mut router, &keys, "g"), Some(2));
        // No such group: the server gives no lag for it.
        assert_eq!(group_lag(&mut router, &keys, "nope"), None);
        if let Some(h) = target.embedded {
            h.shutdown();
        }
    }
}
