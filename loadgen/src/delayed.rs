//! `loadgen delayed`: accuracy of delayed delivery (shardstream's XSCHEDULE).
//!
//! Producers schedule entries open loop at `--rate` per second: entry `n`
//! is due at `start + n / rate + --delay-ms`, an absolute Unix time in ms
//! sent as `XSCHEDULE key AT <due> d <due> p <producer> n <n>`, so a
//! producer running late does not move the due times (no coordinated
//! omission). Consumers read with `XREADGROUP ... NOACK BLOCK` over all
//! streams; per entry, lateness = receive time − due time on the Unix
//! clock of this machine (server and loadgen share it), in µs, into one
//! HdrHistogram per consumer, merged at the end.
//!
//! The server delivers an entry once its millisecond clock reaches the due
//! millisecond, so lateness includes up to ~1 ms of clock granularity.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use redis::{RedisResult, Value};
use serde::Serialize;

use crate::cli::DelayedArgs;
use crate::latency::{new_histogram, server_info, stream_keys};
use crate::reply::{for_each_entry, for_each_field};
use crate::report::{percentiles, Percentiles};
use crate::target::{Router, Topology};

/// Result of a delayed-delivery run; the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct DelayedReport {
    pub config: DelayedArgs,
    pub target: String,
    pub server_info: std::collections::BTreeMap<String, String>,
    /// Entries scheduled (XSCHEDULE answered with a token).
    pub scheduled: u64,
    /// Entries received by consumers.
    pub received: u64,
    /// Entries received more than once (by `p`/`n`).
    pub duplicates: u64,
    pub errors: u64,
    /// Scheduling rate achieved, entries/s.
    pub rate_scheduled: f64,
    /// Receive time − due time, µs.
    pub lateness_us: Percentiles,
}

impl DelayedReport {
    /// Human-readable summary.
    pub fn render(&self) -> String {
        let l = &self.lateness_us;
        format!(
            "XSCHEDULE -> XREADGROUP: {} scheduled ({:.0}/s, delay {} ms), {} received, {} duplicates, {} errors\n\
             lateness (receive - due) us: p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}\n",
            self.scheduled,
            self.rate_scheduled,
            self.config.delay_ms,
            self.received,
            self.duplicates,
            self.errors,
            l.p50,
            l.p90,
            l.p99,
            l.p99_9,
            l.p99_99,
            l.max
        )
    }

    /// 0 when every scheduled entry arrived once, else 1.
    pub fn exit_code(&self) -> i32 {
        if self.errors == 0 && self.duplicates == 0 && self.received == self.scheduled {
            0
        } else {
            1
        }
    }
}

struct Counters {
    scheduled: AtomicU64,
    received: AtomicU64,
    errors: AtomicU64,
    producers_done: AtomicBool,
    stop: AtomicBool,
}

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Run the delayed-delivery test against `url` (a single node).
pub fn run(args: &DelayedArgs, url: &str, target_desc: String) -> Result<DelayedReport, String> {
    let topo = Topology::of(url, false)?;
    let mut admin = Router::new(url, topo.clone(), false);
    let info = server_info(&mut admin);
    let keys = Arc::new(stream_keys(&args.key_prefix, args.keys, args.hash_tag));
    {
        let c = admin.conn(0).map_err(|e| e.to_string())?;
        for k in keys.iter() {
            let _: RedisResult<Value> = redis::cmd("DEL").arg(k).query(c);
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(k)
                .arg("g")
                .arg("$")
                .arg("MKSTREAM")
                .query::<Value>(c)
                .map_err(|e| format!("XGROUP CREATE {k}: {e}"))?;
        }
    }
    let counters = Arc::new(Counters {
        scheduled: AtomicU64::new(0),
        received: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        producers_done: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    });
    let producers = args.producers.max(1);
    let total = (args.rate as f64 * args.duration) as u64;
    // Scheduling starts a little after the threads are up.
    let start_us = unix_us() + 100_000;
    let mut consumers = Vec::new();
    for c in 0..args.consumers.max(1) {
        let (args, keys, counters) = (args.clone(), keys.clone(), counters.clone());
        let router = Router::new(url, topo.clone(), false);
        consumers.push(
            std::thread::Builder::new()
                .name(format!("consumer-{c}"))
                .spawn(move || consume(&args, c, &keys, &counters, router, producers))
                .map_err(|e| e.to_string())?,
        );
    }
    let mut threads = Vec::new();
    for p in 0..producers {
        let (args, keys, counters) = (args.clone(), keys.clone(), counters.clone());
        let router = Router::new(url, topo.clone(), false);
        threads.push(
            std::thread::Builder::new()
                .name(format!("producer-{p}"))
                .spawn(move || {
                    produce(
                        &args, p, producers, total, start_us, &keys, &counters, router,
                    )
                })
                .map_err(|e| e.to_string())?,
        );
    }
    let started = Instant::now();
    for t in threads {
        t.join().map_err(|_| "a producer panicked".to_string())?;
    }
    let produce_s = started.elapsed().as_secs_f64();
    counters.producers_done.store(true, Ordering::SeqCst);
    // Drain: everything is due within delay_ms of the last schedule.
    let deadline = Instant::now() + Duration::from_millis(args.delay_ms + 3000);
    while Instant::now() < deadline
        && counters.received.load(Ordering::SeqCst) < counters.scheduled.load(Ordering::SeqCst)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    counters.stop.store(true, Ordering::SeqCst);
    let mut hist = new_histogram();
    let mut duplicates = 0;
    for t in consumers {
        let (h, d) = t.join().map_err(|_| "a consumer panicked".to_string())?;
        hist.add(&h)
            .map_err(|e| format!("merging histograms: {e:?}"))?;
        duplicates += d;
    }
    if !args.keep {
        if let Ok(c) = admin.conn(0) {
            for k in keys.iter() {
                let _: RedisResult<Value> = redis::cmd("DEL").arg(k).query(c);
            }
        }
    }
    let scheduled = counters.scheduled.load(Ordering::SeqCst);
    Ok(DelayedReport {
        config: args.clone(),
        target: target_desc,
        server_info: info,
        scheduled,
        received: counters.received.load(Ordering::SeqCst),
        duplicates,
        errors: counters.errors.load(Ordering::SeqCst),
        rate_scheduled: scheduled as f64 / produce_s.max(1e-9),
        lateness_us: percentiles(&hist),
    })
}

/// Producer `p` of `producers`: entries `p, p + producers, ...` below
/// `total`, each sent once its scheduled time has come, in pipelines.
#[allow(clippy::too_many_arguments)]
fn produce(
    args: &DelayedArgs,
    p: usize,
    producers: usize,
    total: u64,
    start_us: u64,
    keys: &[String],
    counters: &Counters,
    mut router: Router,
) {
    let period_us = 1e6 / args.rate.max(1) as f64;
    let mut n = p as u64;
    while n < total {
        let now = unix_us();
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        let mut batch = 0u64;
        while n < total && batch < args.pipeline as u64 {
            let send_us = start_us + (n as f64 * period_us) as u64;
            if send_us > now {
                break;
            }
            let due_ms = (send_us / 1000) + args.delay_ms;
            let key = &keys[(n as usize) % keys.len()];
            pipe.cmd("XSCHEDULE")
                .arg(key)
                .arg("AT")
                .arg(due_ms)
                .arg("d")
                .arg(due_ms)
                .arg("p")
                .arg(p)
                .arg("n")
                .arg(n);
            batch += 1;
            n += producers as u64;
        }
        if batch == 0 {
            let next_us = start_us + (n as f64 * period_us) as u64;
            let wait = next_us.saturating_sub(unix_us());
            if wait > 50 {
                std::thread::sleep(Duration::from_micros(wait.min(1000)));
            }
            continue;
        }
        let res: RedisResult<Vec<RedisResult<Value>>> = router.conn(0).and_then(|c| pipe.query(c));
        match res {
            Ok(replies) => {
                for r in replies {
                    match r {
                        Ok(_) => counters.scheduled.fetch_add(1, Ordering::SeqCst),
                        Err(_) => counters.errors.fetch_add(1, Ordering::SeqCst),
                    };
                }
            }
            Err(_) => {
                counters.errors.fetch_add(batch, Ordering::SeqCst);
            }
        }
    }
}

/// Consumer `c`: XREADGROUP NOACK BLOCK over every stream until stopped;
/// returns its lateness histogram and how many duplicates it saw.
fn consume(
    args: &DelayedArgs,
    c: usize,
    keys: &[String],
    counters: &Counters,
    mut router: Router,
    producers: usize,
) -> (Histogram<u64>, u64) {
    let mut hist = new_histogram();
    // Seen entries per producer (bit n / producers), for duplicates.
    let per = ((args.rate as f64 * args.duration) as usize / producers) + 2;
    let mut seen: Vec<Vec<u64>> = vec![vec![0; per / 64 + 1]; producers];
    let mut duplicates = 0;
    let consumer = format!("c{c}");
    while !counters.stop.load(Ordering::SeqCst) {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg("g")
            .arg(&consumer)
            .arg("COUNT")
            .arg(args.count)
            .arg("BLOCK")
            .arg(100)
            .arg("NOACK")
            .arg("STREAMS");
        for k in keys {
            cmd.arg(k);
        }
        for _ in keys {
            cmd.arg(">");
        }
        let reply: RedisResult<Value> = router.conn(0).and_then(|conn| cmd.query(conn));
        let now_us = unix_us();
        let Ok(reply) = reply else {
            counters.errors.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        for_each_entry(&reply, |_, _, fields| {
            let (mut d, mut p, mut n) = (None, None, None);
            for_each_field(fields, |k, v| {
                let num = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok());
                match k {
                    b"d" => d = num,
                    b"p" => p = num,
                    b"n" => n = num,
                    _ => {}
                }
            });
            let (Some(d), Some(p), Some(n)) = (d, p, n) else {
                return;
            };
            let (p, i) = (p as usize, (n as usize) / producers);
            if let Some(word) = seen.get_mut(p).and_then(|s| s.get_mut(i / 64)) {
                if *word & (1 << (i % 64)) != 0 {
                    duplicates += 1;
                    return;
                }
                *word |= 1 << (i % 64);
            }
            counters.received.fetch_add(1, Ordering::SeqCst);
            let late_us = now_us.saturating_sub(d * 1000).max(1);
            let _ = hist.record(late_us.min(60_000_000));
        });
    }
    (hist, duplicates)
}
