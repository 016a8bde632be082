//! Command line: the latency test (default) and the `xadd` throughput mode.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

/// End-to-end XADD → XREADGROUP latency for shardstream or any Redis.
///
/// With no target (`--host`, `--port` or `--url`) it starts shardstream
/// in-process on 127.0.0.1:0 and measures that.
#[derive(Debug, Parser)]
#[command(
    name = "loadgen",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Exit status: 0 OK; 1 FAILED (entries lost or duplicated, commands failed); \
                  2 setup error; 3 SATURATED (nothing lost, but consumers or producers \
                  fell behind the target rate)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub mode: Option<Mode>,
    #[command(flatten)]
    pub latency: LatencyArgs,
}

/// Modes other than the default latency test.
#[derive(Debug, Subcommand)]
pub enum Mode {
    /// XADD throughput, like redis-benchmark for streams: ops/s and per-call latency.
    Xadd(XaddArgs),
    /// Delayed delivery accuracy (shardstream's XSCHEDULE): lateness of each
    /// entry, receive time minus due time, p50/p99/p99.9.
    Delayed(DelayedArgs),
}

/// Which server to talk to, shared by every mode.
#[derive(Debug, Clone, Args, Serialize)]
pub struct TargetArgs {
    /// Server host (default 127.0.0.1 when `--port` is given).
    #[arg(long)]
    pub host: Option<String>,
    /// Server port.
    #[arg(long)]
    pub port: Option<u16>,
    /// Server URL, e.g. `redis://:password@127.0.0.1:6379/0` (overrides --host/--port).
    #[arg(long)]
    #[serde(serialize_with = "crate::redact::serialize_opt_url")]
    pub url: Option<String>,
    /// Discover the topology with CLUSTER SLOTS and route each key to its node,
    /// following MOVED.
    #[arg(long)]
    pub cluster: bool,
    /// Shard threads of the embedded server (when no target is given; default: cores).
    #[arg(long)]
    pub embedded_shards: Option<u16>,
}

impl TargetArgs {
    /// The URL to connect to, or `None` to start an embedded server.
    pub fn url(&self) -> Option<String> {
        if let Some(u) = &self.url {
            return Some(u.clone());
        }
        if self.host.is_none() && self.port.is_none() {
            return None;
        }
        let host = self.host.as_deref().unwrap_or("127.0.0.1");
        Some(format!("redis://{}:{}/", host, self.port.unwrap_or(6379)))
    }
}

/// Options of the latency test.
#[derive(Debug, Clone, Args, Serialize)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Entries per second over all producers, open loop. 0 = closed loop: producers
    /// send as fast as the consumers drain (see --max-backlog), which measures the
    /// maximum sustainable throughput.
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    /// Closed loop only: producers pause when this many entries are sent but not
    /// yet read, and resume when half of them are (default: 4 × max(consumers ×
    /// COUNT, producers × pipeline), at least 1000).
    #[arg(long)]
    pub max_backlog: Option<u64>,
    /// Stream keys; entries go round-robin over them (at least 1).
    #[arg(long, default_value_t = 1, value_parser = at_least_one())]
    pub streams: usize,
    /// Put all stream keys in one hash slot (`{loadgen}:N`) instead of spreading them.
    #[arg(long, conflicts_with = "partition")]
    pub hash_tag: bool,
    /// Partitioned streams, as a sharded deployment runs them: stream `i`'s key
    /// lies in the `i`-th of `--streams` equal hash-slot ranges (so the
    /// streams land on different shards), and each consumer reads only its
    /// own streams (stream `i` goes to consumer `i % consumers`). Producer `p`
    /// writes entries `p, p + producers, ...` round-robin over the streams, so
    /// with `--streams` a multiple of `--producers` each producer writes only
    /// its own streams too.
    #[arg(long)]
    pub partition: bool,
    /// Key prefix of the streams.
    #[arg(long, default_value = "loadgen")]
    pub key_prefix: String,
    /// Producer threads (one connection per node each), at least 1.
    #[arg(long, default_value_t = 2, value_parser = at_least_one())]
    pub producers: usize,
    /// Consumer threads, all in one consumer group, at least 1.
    #[arg(long, default_value_t = 2, value_parser = at_least_one())]
    pub consumers: usize,
    /// Consumer group name.
    #[arg(long, default_value = "g")]
    pub group: String,
    /// XREADGROUP COUNT.
    #[arg(long, default_value_t = 10)]
    pub count: usize,
    /// XREADGROUP BLOCK, milliseconds, at least 1 (a consumer checks for the
    /// end of the run between reads, so it must not block forever).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub block_ms: u64,
    /// Producer pipelining depth: at most this many *due* XADDs per round trip.
    /// On schedule a producer sends one entry at a time; depth only lets a
    /// producer that fell behind catch up instead of adding its own queueing.
    #[arg(long, default_value_t = 16)]
    pub pipeline: usize,
    /// XADD MAXLEN ~ N (trimming may drop unread entries: losses then only warn).
    #[arg(long)]
    pub maxlen: Option<u64>,
    /// Read with NOACK and send no XACK.
    #[arg(long)]
    pub noack: bool,
    /// Fields per entry besides the bookkeeping ones.
    #[arg(long, default_value_t = 1)]
    pub fields: usize,
    /// Bytes per payload field value.
    #[arg(long, default_value_t = 16)]
    pub value_size: usize,
    /// Measured time, seconds (after the warmup); more than 0.
    #[arg(long, default_value_t = 10.0, value_parser = positive_secs)]
    pub duration: f64,
    /// Time before measuring, seconds: entries scheduled then are checked but not recorded.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Drain stall timeout, seconds: after producers stop, consumers read until the
    /// group is drained or nothing arrived for this long.
    #[arg(long, default_value_t = 5.0)]
    pub drain_timeout: f64,
    /// Hard limit on the drain, seconds; entries still undelivered then are backlog.
    #[arg(long, default_value_t = 120.0)]
    pub drain_max: f64,
    /// Simulated processing time per entry, microseconds: a consumer sleeps this long
    /// per entry read, before XACK (a slow consumer, to saturate on purpose).
    #[arg(long, default_value_t = 0)]
    pub work_us: u64,
    /// Seed of the payload bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Force the latency table's row width, microseconds. Default: 1 ms rows when
    /// the spread fits in 40 rows, else wider linear or power-of-two rows covering p50..max.
    #[arg(long)]
    pub bucket_us: Option<u64>,
    /// Write every figure, the config and the target's INFO server as JSON.
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
    /// Write the merged histogram as an HdrHistogram interval log.
    #[arg(long)]
    #[serde(skip)]
    pub hdr: Option<PathBuf>,
    /// Write latency by percentile as an SVG plot (HdrHistogram plotter style).
    #[arg(long)]
    #[serde(skip)]
    pub plot: Option<PathBuf>,
    /// Overlay another run on the plot: a `--json` report or an `--hdr` log of it
    /// (repeatable), e.g. the same configuration against redis-server.
    #[arg(long, value_name = "FILE.json|FILE.hlog")]
    #[serde(skip)]
    pub compare: Vec<PathBuf>,
    /// Name of this run in the plot's legend and the JSON (default: from INFO server).
    #[arg(long)]
    pub label: Option<String>,
    /// No progress output.
    #[arg(long, short)]
    #[serde(skip)]
    pub quiet: bool,
    /// Keep the stream keys after the run (they are deleted by default).
    #[arg(long)]
    pub keep: bool,
}

/// Options of the `xadd` throughput mode.
#[derive(Debug, Clone, Args, Serialize)]
pub struct XaddArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Clients (one connection per node each), at least 1.
    #[arg(long, short = 'c', default_value_t = 50, value_parser = at_least_one())]
    pub clients: usize,
    /// Threads driving the clients, each its share of them (0: one per core,
    /// at most one per client). Each round a thread sends every client's
    /// pipeline, then reads their replies, as redis-benchmark's one thread
    /// drives all of its connections.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// XADDs per round trip.
    #[arg(long, short = 'P', default_value_t = 1)]
    pub pipeline: usize,
    /// Stream keys, chosen round-robin per call (at least 1).
    #[arg(long, default_value_t = 1, value_parser = at_least_one())]
    pub keys: usize,
    /// Put all stream keys in one hash slot.
    #[arg(long, conflicts_with_all = ["partition", "multi"])]
    pub hash_tag: bool,
    /// Partitioned streams: key `i` lies in the `i`-th of `--keys` equal
    /// hash-slot ranges (different shards), and client `c` writes only key
    /// `c % keys` instead of going round-robin over all of them.
    #[arg(long, conflicts_with = "multi")]
    pub partition: bool,
    /// Send transactions instead: each is MULTI, one XADD to each of N
    /// streams, EXEC, and the streams' keys are spread over the hash-slot
    /// space (key i in the i-th of N equal slot ranges), so they land on
    /// different shards of a server whose shard count is a multiple of N.
    /// `--pipeline` then counts transactions; ops are transactions.
    /// Standalone servers only (Redis Cluster refuses CROSSSLOT).
    #[arg(long, default_value_t = 0)]
    pub multi: usize,
    /// Key prefix of the streams.
    #[arg(long, default_value = "loadgen:xadd")]
    pub key_prefix: String,
    /// Total XADDs (0 = run for --duration).
    #[arg(long, short = 'n', default_value_t = 0)]
    pub requests: u64,
    /// Seconds to run when --requests is 0.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Payload fields per entry.
    #[arg(long, default_value_t = 1)]
    pub fields: usize,
    /// Bytes per field value.
    #[arg(long, default_value_t = 16)]
    pub value_size: usize,
    /// XADD MAXLEN ~ N.
    #[arg(long)]
    pub maxlen: Option<u64>,
    /// Seed of the payload bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the figures as JSON.
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short)]
    #[serde(skip)]
    pub quiet: bool,
    /// Keep the stream keys after the run.
    #[arg(long)]
    pub keep: bool,
}

/// Options of `loadgen delayed`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct DelayedArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Delayed entries scheduled per second over all producers, open loop.
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    /// Delay of each entry: due this many ms after its scheduled send time.
    #[arg(long, default_value_t = 100)]
    pub delay_ms: u64,
    /// Seconds of scheduling.
    #[arg(long, default_value_t = 10.0, value_parser = positive_secs)]
    pub duration: f64,
    /// Producer threads (each pipelines up to --pipeline XSCHEDULEs).
    #[arg(long, default_value_t = 2, value_parser = at_least_one())]
    pub producers: usize,
    /// Consumer threads, one consumer each in one group over all streams.
    #[arg(long, default_value_t = 2, value_parser = at_least_one())]
    pub consumers: usize,
    /// Largest pipeline of XSCHEDULEs a producer sends at once.
    #[arg(long, default_value_t = 256)]
    pub pipeline: usize,
    /// XREADGROUP COUNT.
    #[arg(long, default_value_t = 1000)]
    pub count: usize,
    /// Stream keys, chosen round-robin (at least 1).
    #[arg(long, default_value_t = 8, value_parser = at_least_one())]
    pub keys: usize,
    /// Put all stream keys in one hash slot.
    #[arg(long)]
    pub hash_tag: bool,
    /// Key prefix of the streams.
    #[arg(long, default_value = "loadgen:delayed")]
    pub key_prefix: String,
    /// Write the figures as JSON.
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
    /// Keep the stream keys after the run.
    #[arg(long)]
    pub keep: bool,
}

/// A count that must be at least 1 (a run with no producers or no consumers
/// measures nothing): clap refuses 0 with exit status 2.
fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

/// A duration in seconds that must be more than 0 (and finite).
fn positive_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err("must be a number of seconds greater than 0".into())
    }
}
