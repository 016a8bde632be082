//! Server configuration: defaults, a redis.conf-style file, command-line flags.
//!
//! Precedence: built-in defaults < config file (`shardstream path/to/file.conf`,
//! one `key value` directive per line, `#` comments) < `--directive value`
//! on the command line (see [`crate::cmdline`], parsed as redis-server
//! parses its argv). Directive names are Redis's (`port`, `bind`,
//! `unixsocket`, `requirepass`, `maxclients`, `databases`, `dir`,
//! `proto-max-bulk-len`, ...), plus shardstream's own (`shards`,
//! `cluster-config`, `pin-threads`, `no-pin`, `shard-spin-us`). Redis directives shardstream does not
//! implement are refused with a reason ([`UNSUPPORTED_FATAL`]) or accepted
//! with a warning and kept for `CONFIG GET` ([`ignored`]); any other name is
//! an error.

pub mod ignored;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Settings that shards read while they run and `CONFIG SET` may change:
/// plain atomics shared by one server's shards (configuration, not data).
#[derive(Debug)]
pub struct Tunables {
    /// `stream-node-max-entries` (0 = unlimited).
    pub stream_node_max_entries: AtomicUsize,
    /// `stream-node-max-bytes` (0 = unlimited).
    pub stream_node_max_bytes: AtomicUsize,
    /// `zset-max-listpack-entries`: sorted sets up to this many members use
    /// the compact (listpack) encoding.
    pub zset_max_listpack_entries: AtomicUsize,
    /// `zset-max-listpack-value`: ... and members up to this many bytes.
    pub zset_max_listpack_value: AtomicUsize,
    /// `maxmemory`, bytes (0 = no limit); shard threads refuse DENYOOM commands above it.
    pub maxmemory_bytes: AtomicU64,
    /// `maxmemory-policy` ([`EvictionPolicy`] as `u8`).
    pub maxmemory_policy: std::sync::atomic::AtomicU8,
    /// `maxmemory-samples`: keys sampled per eviction.
    pub maxmemory_samples: AtomicUsize,
    /// `lfu-log-factor` and `lfu-decay-time` (minutes), see [`Tunables::lfu`].
    pub lfu_log_factor: AtomicU64,
    pub lfu_decay_time_min: AtomicU64,
    /// `cluster-allow-local-multislot`: serve multi-slot commands whose slots
    /// are all served by this node instead of refusing them with CROSSSLOT.
    pub cluster_allow_local_multislot: AtomicBool,
    /// `appendonly`, `appendfsync`, auto-rewrite settings and AOF status.
    pub aof: crate::aof::AofShared,
    /// `dump-payload-version`: the RDB version DUMP payloads carry.
    pub dump_payload_version: std::sync::atomic::AtomicU16,
    /// `list-max-listpack-size` (see [`Config::list_max_listpack_size`]).
    pub list_max_listpack_size: std::sync::atomic::AtomicI64,
    /// `set-max-intset-entries`, `set-max-listpack-entries`, `set-max-listpack-value`.
    pub set_limits: [AtomicUsize; 3],
    /// `busy-reply-threshold`, ms (scripts past it make the server answer `-BUSY`).
    pub busy_reply_threshold_ms: AtomicU64,
    /// `hz` (1..=500): how many times a second each shard runs its timer
    /// (active expiry, waiter sweep, AOF tick); see [`Tunables::timer_period_ms`].
    pub hz: std::sync::atomic::AtomicU32,
    /// `shard-spin-us`, µs: see [`Config::shard_spin_us`].
    pub shard_spin_us: AtomicU64,
    /// Whether this node presents itself as a cluster node
    /// ([`crate::cmd::cluster::is_cluster_mode`]), fixed at start: MIGRATE
    /// sends RESTORE-ASKING rather than RESTORE when it is set.
    pub cluster_enabled: AtomicBool,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables::from_config(&Config::default())
    }
}

impl Tunables {
    /// The shard-visible settings of `cfg`.
    pub fn from_config(cfg: &Config) -> Tunables {
        Tunables {
            stream_node_max_entries: AtomicUsize::new(cfg.stream_node_max_entries),
            stream_node_max_bytes: AtomicUsize::new(cfg.stream_node_max_bytes),
            zset_max_listpack_entries: AtomicUsize::new(cfg.zset_max_listpack_entries),
            zset_max_listpack_value: AtomicUsize::new(cfg.zset_max_listpack_value),
            maxmemory_bytes: AtomicU64::new(cfg.maxmemory_bytes),
            maxmemory_policy: std::sync::atomic::AtomicU8::new(cfg.maxmemory_policy as u8),
            maxmemory_samples: AtomicUsize::new(cfg.maxmemory_samples),
            lfu_log_factor: AtomicU64::new(cfg.lfu_log_factor),
            lfu_decay_time_min: AtomicU64::new(cfg.lfu_decay_time_min),
            cluster_allow_local_multislot: AtomicBool::new(cfg.cluster_allow_local_multislot),
            aof: crate::aof::AofShared::new(cfg),
            dump_payload_version: std::sync::atomic::AtomicU16::new(cfg.dump_payload_version),
            list_max_listpack_size: std::sync::atomic::AtomicI64::new(cfg.list_max_listpack_size),
            set_limits: [
                AtomicUsize::new(cfg.set_limits.max_intset_entries),
                AtomicUsize::new(cfg.set_limits.max_listpack_entries),
                AtomicUsize::new(cfg.set_limits.max_listpack_value_bytes),
            ],
            busy_reply_threshold_ms: AtomicU64::new(cfg.busy_reply_threshold_ms),
            hz: std::sync::atomic::AtomicU32::new(cfg.hz),
            shard_spin_us: AtomicU64::new(cfg.shard_spin_us),
            cluster_enabled: AtomicBool::new(
                cfg.cluster_emulated || cfg.cluster_enabled || cfg.cluster_config.is_some(),
            ),
        }
    }

    /// Publish `cfg`'s shard-visible settings (after CONFIG SET).
    pub fn update(&self, cfg: &Config) {
        self.stream_node_max_entries
            .store(cfg.stream_node_max_entries, Ordering::Relaxed);
        self.stream_node_max_bytes
            .store(cfg.stream_node_max_bytes, Ordering::Relaxed);
        self.zset_max_listpack_entries
            .store(cfg.zset_max_listpack_entries, Ordering::Relaxed);
        self.zset_max_listpack_value
            .store(cfg.zset_max_listpack_value, Ordering::Relaxed);
        self.maxmemory_bytes
            .store(cfg.maxmemory_bytes, Ordering::Relaxed);
        self.maxmemory_policy
            .store(cfg.maxmemory_policy as u8, Ordering::Relaxed);
        self.maxmemory_samples
            .store(cfg.maxmemory_samples, Ordering::Relaxed);
        self.lfu_log_factor
            .store(cfg.lfu_log_factor, Ordering::Relaxed);
        self.lfu_decay_time_min
            .store(cfg.lfu_decay_time_min, Ordering::Relaxed);
        self.cluster_allow_local_multislot
            .store(cfg.cluster_allow_local_multislot, Ordering::Relaxed);
        self.aof.update(cfg);
        self.dump_payload_version
            .store(cfg.dump_payload_version, Ordering::Relaxed);
        self.list_max_listpack_size
            .store(cfg.list_max_listpack_size, Ordering::Relaxed);
        let l = &cfg.set_limits;
        for (a, v) in self.set_limits.iter().zip([
            l.max_intset_entries,
            l.max_listpack_entries,
            l.max_listpack_value_bytes,
        ]) {
            a.store(v, Ordering::Relaxed);
        }
        self.busy_reply_threshold_ms
            .store(cfg.busy_reply_threshold_ms, Ordering::Relaxed);
        self.hz.store(cfg.hz, Ordering::Relaxed);
        self.shard_spin_us
            .store(cfg.shard_spin_us, Ordering::Relaxed);
    }

    /// How long a shard thread keeps polling for the answer after it sent
    /// requests or replies to another shard thread (`shard-spin-us`).
    pub fn shard_spin(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.shard_spin_us.load(Ordering::Relaxed))
    }

    /// Period of the shards' timer, ms: `1000 / hz` (100 ms at Redis's
    /// default `hz 10`, 2 ms at the maximum 500), as Redis runs `serverCron`
    /// `hz` times a second.
    pub fn timer_period_ms(&self) -> u64 {
        1000 / u64::from(self.hz.load(Ordering::Relaxed).clamp(MIN_HZ, MAX_HZ))
    }

    /// `list-max-listpack-size` in force.
    pub fn list_fill(&self) -> i64 {
        self.list_max_listpack_size.load(Ordering::Relaxed)
    }

    /// Set encoding thresholds in force.
    pub fn set_limits(&self) -> crate::set::SetLimits {
        let [a, b, c] = &self.set_limits;
        crate::set::SetLimits {
            max_intset_entries: a.load(Ordering::Relaxed),
            max_listpack_entries: b.load(Ordering::Relaxed),
            max_listpack_value_bytes: c.load(Ordering::Relaxed),
        }
    }

    /// The `maxmemory-policy` in force.
    pub fn eviction_policy(&self) -> EvictionPolicy {
        EvictionPolicy::from_u8(self.maxmemory_policy.load(Ordering::Relaxed))
    }

    /// The LFU counter's growth and decay (`lfu-log-factor`, `lfu-decay-time`).
    pub fn lfu(&self) -> crate::shard::db::LfuParams {
        crate::shard::db::LfuParams {
            log_factor: self.lfu_log_factor.load(Ordering::Relaxed) as f64,
            decay_ms: self
                .lfu_decay_time_min
                .load(Ordering::Relaxed)
                .saturating_mul(60_000),
        }
    }

    /// Sorted-set encoding thresholds (`zset-max-listpack-*`).
    pub fn zset_limits(&self) -> crate::zset::EncodingLimits {
        crate::zset::EncodingLimits {
            max_listpack_entries: self.zset_max_listpack_entries.load(Ordering::Relaxed),
            max_listpack_value_bytes: self.zset_max_listpack_value.load(Ordering::Relaxed),
        }
    }

    /// Stream node caps for new appends.
    pub fn node_limits(&self) -> crate::stream::NodeLimits {
        crate::stream::NodeLimits {
            max_entries: self.stream_node_max_entries.load(Ordering::Relaxed),
            max_bytes: self.stream_node_max_bytes.load(Ordering::Relaxed),
        }
    }
}

/// The effective configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: String,
    pub port: u16,
    pub shards: u16,
    pub io_threads: u16,
    /// `pin-threads` (default no; `no-pin yes` is the older spelling of
    /// `pin-threads no`): pin shard threads to cores when there are enough.
    pub pin: bool,
    pub dir: PathBuf,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    pub databases: usize,
    /// `proto-max-bulk-len`, bytes (Redis default 512 MB).
    pub proto_max_bulk_len: i64,
    /// `client-query-buffer-limit`, bytes (Redis default 1 GB).
    pub client_query_buffer_limit: usize,
    /// `timeout`: close idle clients after this many seconds (0 = never).
    pub timeout_s: u64,
    /// `stream-node-max-entries` (default 100, 0 = unlimited).
    pub stream_node_max_entries: usize,
    /// `stream-node-max-bytes` (default 4096, 0 = unlimited).
    pub stream_node_max_bytes: usize,
    /// `list-max-listpack-size` (alias `list-max-ziplist-size`, default -2):
    /// a list stays one listpack up to this many elements (positive) or
    /// 4/8/16/32/64 KiB (-1..-5).
    pub list_max_listpack_size: i64,
    /// `set-max-intset-entries` (512), `set-max-listpack-entries` (128),
    /// `set-max-listpack-value` (64).
    pub set_limits: crate::set::SetLimits,
    /// `zset-max-listpack-entries` (alias `zset-max-ziplist-entries`, default 128).
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value` (alias `zset-max-ziplist-value`, default 64), bytes.
    pub zset_max_listpack_value: usize,
    /// `client-output-buffer-limit`: the `normal`, `replica` and `pubsub`
    /// classes, in that order (only `normal` applies to shardstream's clients).
    pub client_output_buffer_limit: [OutputBufferLimit; 3],
    /// `maxmemory`, bytes (0 = no limit).
    pub maxmemory_bytes: u64,
    /// `maxmemory-policy` (default noeviction).
    pub maxmemory_policy: EvictionPolicy,
    /// `maxmemory-samples` (default 5): keys sampled to pick each victim.
    pub maxmemory_samples: usize,
    /// `lfu-log-factor` (default 10, 0..=2^31-1): the higher, the more
    /// accesses an LFU counter needs to grow.
    pub lfu_log_factor: u64,
    /// `lfu-decay-time` (default 1, 0..=2^31-1): minutes without access
    /// per step down of an LFU counter; 0: counters never decay.
    pub lfu_decay_time_min: u64,
    /// `tcp-keepalive`: seconds of idleness before TCP keepalive probes
    /// (0 = keepalive off); applies to connections accepted afterwards.
    pub tcp_keepalive_s: u64,
    /// `cluster-config`: the static cluster topology file (see [`crate::cluster`]).
    pub cluster_config: Option<PathBuf>,
    /// `cluster-allow-local-multislot` (default no): in cluster mode, serve
    /// commands whose keys hash to several slots when this node serves them
    /// all, instead of refusing them with CROSSSLOT as Redis Cluster does.
    pub cluster_allow_local_multislot: bool,
    /// `appendonly` (default yes): one append-only file set per shard in `dir`.
    pub appendonly: bool,
    /// `appendfsync` (default everysec).
    pub appendfsync: crate::aof::FsyncPolicy,
    /// `auto-aof-rewrite-percentage` (default 100; 0 disables automatic rewrites).
    pub auto_aof_rewrite_percentage: u64,
    /// `auto-aof-rewrite-min-size`, bytes (default 64 MB).
    pub auto_aof_rewrite_min_size_bytes: u64,
    /// `aof-load-truncated` (default yes): at start-up, cut an incomplete
    /// last record (a torn last write) off the last AOF file; with `no`,
    /// refuse to start instead.
    pub aof_load_truncated: bool,
    /// `tcp-backlog` (default 511, as Redis): the listen queue length passed
    /// to `listen(2)` (the kernel caps it at `net.core.somaxconn`). Fixed at
    /// start; see [`crate::listener::bind_listener`].
    pub tcp_backlog: i32,
    /// `enable-debug-command`: `no` (default, as Redis), `yes` or `local`
    /// (loopback clients only). Fixed at start.
    pub enable_debug_command: &'static str,
    /// `aof-use-rdb-preamble`: accepted for compatibility (Redis test suites
    /// set it); shardstream's rewrites always write effect records.
    pub aof_use_rdb_preamble: bool,
    /// `latency-tracking` (default yes): per-command latency histograms (INFO latencystats).
    pub latency_tracking: bool,
    /// `slowlog-log-slower-than`, µs (default 10000; negative disables, 0 logs every command).
    pub slowlog_log_slower_than_us: i64,
    /// `slowlog-max-len` (default 128).
    pub slowlog_max_len: usize,
    /// `hz` (default 10): shard timer frequency, kept in `1..=500` as Redis
    /// clamps it (`CONFIG SET hz 0` stores 1, `hz 1000` stores 500); INFO
    /// shows it as `hz` and `configured_hz`. Each shard runs its timer
    /// (active expiry, blocked-reader sweep, AOF tick) every `1000 / hz` ms.
    pub hz: u32,
    /// `shard-spin-us` (shardstream's own, default 20, at most 10000), µs:
    /// after a shard thread sends requests or replies to another shard
    /// thread, it keeps polling its sockets and inbox for up to this long,
    /// yielding the core each round, before it parks, so the answer that
    /// usually comes within microseconds finds it awake rather than costing
    /// a wake-up on both sides. 0 parks at once. Never used with one shard.
    pub shard_spin_us: u64,
    /// `latency-monitor-threshold`, ms (default 0). Stored and reported for
    /// clients and tools that set it; shardstream records no latency-monitor
    /// events (LATENCY LATEST/HISTORY stay empty), per-command latencies are
    /// in INFO latencystats and LATENCY HISTOGRAM.
    pub latency_monitor_threshold_ms: i64,
    /// `busy-reply-threshold` (alias `lua-time-limit`), ms: a script running
    /// longer makes other clients' commands answer `-BUSY` (0 = never).
    pub busy_reply_threshold_ms: u64,
    /// `latency-tracking-info-percentiles` (default `50 99 99.9`): the
    /// percentiles INFO latencystats reports.
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// `unixsocket`: also (or, with `port 0`, only) listen on this Unix
    /// domain socket. Fixed at start.
    pub unixsocket: Option<PathBuf>,
    /// `unixsocketperm`: mode of the socket file (octal; 0 = leave it to the umask).
    pub unixsocketperm: u32,
    /// `pidfile`: written at start, removed at a clean shutdown ("" = none).
    pub pidfile: Option<PathBuf>,
    /// `logfile`: where the log goes ("" = standard error). Fixed at start.
    pub logfile: String,
    /// `loglevel` (default notice).
    pub loglevel: LogLevel,
    /// `protected-mode` (default yes). Accepted for compatibility: shardstream
    /// listens on 127.0.0.1 unless `bind` says otherwise, and `requirepass`
    /// protects other interfaces.
    pub protected_mode: bool,
    /// `supervised` (no, upstart, systemd, auto; default no). With systemd
    /// (or auto under systemd), readiness is reported on `$NOTIFY_SOCKET`.
    pub supervised: String,
    /// The config file the server was started with (INFO `config_file`);
    /// not a directive.
    pub config_file: Option<PathBuf>,
    /// Values given to the Redis settings that change nothing here (see
    /// [`ignored`]), by name; the others read as Redis's default.
    pub ignored: BTreeMap<&'static str, String>,
    /// `dump-payload-version` (shardstream's own, default 12 as Redis 7.4
    /// to 8.4 write): the RDB version of DUMP payloads, 9 to 12. Lower it
    /// to RESTORE our payloads into an older Redis (7.0 accepts at most 10,
    /// 6.x at most 9); see [`crate::rdb`].
    pub dump_payload_version: u16,
    /// `cluster-mode` (shardstream's own): `standalone` (default, as Redis
    /// without `cluster-enabled`) or `emulated`, a one-node cluster owning
    /// every slot (INFO `cluster_enabled:1`, CLUSTER SLOTS/NODES/SHARDS
    /// answer). Fixed at start.
    pub cluster_emulated: bool,
    /// `cluster-enabled yes` (or `cluster-mode cluster`): a Redis Cluster
    /// node with a cluster bus, nodes.conf and the CLUSTER commands that
    /// `redis-cli --cluster` drives (see [`crate::cluster`]). Fixed at start.
    pub cluster_enabled: bool,
    /// `cluster-config-file` (default `nodes.conf`, relative to `dir`): where
    /// a cluster node keeps its configuration.
    pub cluster_config_file: PathBuf,
    /// `cluster-port`: the cluster bus port (0, the default: `port + 10000`).
    pub cluster_port: u16,
    /// `cluster-node-timeout`, ms (default 15000): a node that has not
    /// answered a PING for this long is flagged `fail?`.
    pub cluster_node_timeout_ms: u64,
    /// `cluster-require-full-coverage` (default yes): the cluster is `ok`
    /// (and serves keys) only while every slot is served.
    pub cluster_require_full_coverage: bool,
    /// `cluster-announce-ip`: the address this node gives the others and
    /// its clients (default: the one the other nodes see it at).
    pub cluster_announce_ip: String,
}

/// Redis's log levels, least verbose last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Verbose,
    Notice,
    Warning,
    Nothing,
}

impl LogLevel {
    const NAMES: [(&'static str, LogLevel); 5] = [
        ("debug", LogLevel::Debug),
        ("verbose", LogLevel::Verbose),
        ("notice", LogLevel::Notice),
        ("warning", LogLevel::Warning),
        ("nothing", LogLevel::Nothing),
    ];

    /// Parse a `loglevel` value (any case).
    pub fn parse(s: &str) -> Option<LogLevel> {
        Self::NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(s))
            .map(|(_, l)| *l)
    }

    /// The name CONFIG GET prints.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, l)| *l == self)
            .map(|(n, _)| *n)
            .unwrap_or("notice")
    }

    /// The `log` crate's filter for this level: Redis's debug, verbose,
    /// notice and warning are `Trace`, `Debug`, `Info` and `Warn`.
    pub fn filter(self) -> log::LevelFilter {
        match self {
            LogLevel::Debug => log::LevelFilter::Trace,
            LogLevel::Verbose => log::LevelFilter::Debug,
            LogLevel::Notice => log::LevelFilter::Info,
            LogLevel::Warning => log::LevelFilter::Warn,
            LogLevel::Nothing => log::LevelFilter::Off,
        }
    }
}

/// One class of `client-output-buffer-limit`: a client whose pending output
/// reaches `hard_bytes`, or stays at or above `soft_bytes` for `soft_s`
/// seconds, is disconnected. Zero disables each limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputBufferLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_s: u64,
}

/// Class names of `client-output-buffer-limit` as CONFIG GET prints them.
const OBUF_CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// Parse a `client-output-buffer-limit` value (`<class> <hard> <soft> <soft-seconds>`
/// repeated) over `current`, validating every group before changing anything.
///
/// # Errors
/// Redis's texts: wrong group size, unknown class, bad number.
/// # Source
/// `setConfigClientOutputBufferLimitOption`, redis/src/config.c (7.x).
fn parse_obuf_limits(
    value: &str,
    current: &[OutputBufferLimit; 3],
) -> Result<[OutputBufferLimit; 3], String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut out = *current;
    for group in words.chunks_exact(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let bad = || "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
        let mem = |s: &str| parse_memory(s).filter(|v| *v >= 0).map(|v| v as u64);
        let hard_bytes = mem(group[1]).ok_or_else(bad)?;
        let soft_bytes = mem(group[2]).ok_or_else(bad)?;
        let soft_s = group[3]
            .parse::<i64>()
            .ok()
            .filter(|v| *v >= 0)
            .ok_or_else(bad)? as u64;
        out[class] = OutputBufferLimit {
            hard_bytes,
            soft_bytes,
            soft_s,
        };
    }
    Ok(out)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            shards: std::thread::available_parallelism()
                .map(|n| n.get() as u16)
                .unwrap_or(1),
            io_threads: 1,
            pin: false,
            dir: PathBuf::from("./data"),
            requirepass: None,
            maxclients: 10000,
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            timeout_s: 0,
            stream_node_max_entries: 100,
            list_max_listpack_size: -2,
            set_limits: crate::set::SetLimits::default(),
            stream_node_max_bytes: 4096,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            client_output_buffer_limit: [
                OutputBufferLimit::default(),
                OutputBufferLimit {
                    hard_bytes: 256 * 1024 * 1024,
                    soft_bytes: 64 * 1024 * 1024,
                    soft_s: 60,
                },
                OutputBufferLimit {
                    hard_bytes: 32 * 1024 * 1024,
                    soft_bytes: 8 * 1024 * 1024,
                    soft_s: 60,
                },
            ],
            maxmemory_bytes: 0,
            maxmemory_policy: EvictionPolicy::NoEviction,
            maxmemory_samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time_min: 1,
            tcp_keepalive_s: 300,
            cluster_config: None,
            cluster_allow_local_multislot: false,
            appendonly: true,
            appendfsync: crate::aof::FsyncPolicy::EverySec,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size_bytes: 64 * 1024 * 1024,
            aof_load_truncated: true,
            tcp_backlog: 511,
            enable_debug_command: "no",
            aof_use_rdb_preamble: true,
            latency_tracking: true,
            slowlog_log_slower_than_us: 10_000,
            slowlog_max_len: 128,
            hz: 10,
            shard_spin_us: DEFAULT_SHARD_SPIN_US,
            latency_monitor_threshold_ms: 0,
            busy_reply_threshold_ms: 5000,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            unixsocket: None,
            unixsocketperm: 0,
            pidfile: None,
            logfile: String::new(),
            loglevel: LogLevel::Notice,
            protected_mode: true,
            supervised: "no".into(),
            config_file: None,
            ignored: BTreeMap::new(),
            dump_payload_version: crate::rdb::DEFAULT_DUMP_VERSION,
            cluster_emulated: false,
            cluster_enabled: false,
            cluster_config_file: PathBuf::from("nodes.conf"),
            cluster_port: 0,
            cluster_node_timeout_ms: 15_000,
            cluster_require_full_coverage: true,
            cluster_announce_ip: String::new(),
        }
    }
}

/// Parse a Redis memory size (`512mb`, `1gb`, `4096`, `1k`), bytes.
pub fn parse_memory(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let (num, mul) = [
        ("gb", 1024 * 1024 * 1024),
        ("mb", 1024 * 1024),
        ("kb", 1024),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, mul)| lower.strip_suffix(suf).map(|n| (n.to_string(), *mul)))
    .unwrap_or((lower.clone(), 1));
    num.parse::<i64>().ok()?.checked_mul(mul)
}

/// Parse an unsigned memory size as Redis's `memtoull` does for memory
/// directives (digits plus an optional unit: `b`, `k`, `kb`, `m`, `mb`, `g`,
/// `gb`, any case), bytes. No digits at all is 0 (redis-server 7.0.15
/// accepts `CONFIG SET maxmemory ""` and stores 0). A number beyond `u64`
/// is `u64::MAX`, as `strtoull` saturates; so is a product beyond it (Redis
/// lets that product wrap; we do not). Signs, spaces, decimals and hex are
/// refused.
///
/// # Source
/// `memtoull`, redis/src/util.c (7.x).
pub fn parse_memory_u64(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let (num, mul): (&str, u64) = [
        ("gb", 1024 * 1024 * 1024),
        ("mb", 1024 * 1024),
        ("kb", 1024),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, mul)| lower.strip_suffix(suf).map(|n| (n, *mul)))
    .unwrap_or((lower.as_str(), 1));
    if !num.bytes().all(|b| b.is_ascii_digit()) || num.len() >= 128 {
        return None;
    }
    if num.is_empty() {
        return Some(0);
    }
    let n = num.parse::<u64>().unwrap_or(u64::MAX);
    Some(n.saturating_mul(mul))
}

/// `maxmemory-policy` values Redis knows, in its error message's order.
const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// `maxmemory-policy`: what to do when `maxmemory` is exceeded. Variants
/// are in [`POLICIES`] order (the `u8` of [`Tunables::maxmemory_policy`]).
///
/// # Source
/// `maxmemory_policy_enum`, redis/src/config.c; eviction in redis/src/evict.c.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionPolicy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    NoEviction,
}

impl EvictionPolicy {
    /// Inverse of `as u8`; out of range is noeviction.
    pub fn from_u8(v: u8) -> EvictionPolicy {
        use EvictionPolicy::*;
        [
            VolatileLru,
            VolatileLfu,
            VolatileRandom,
            VolatileTtl,
            AllkeysLru,
            AllkeysLfu,
            AllkeysRandom,
        ]
        .get(usize::from(v))
        .copied()
        .unwrap_or(NoEviction)
    }

    /// Victims are chosen by access frequency (`*-lfu`).
    pub fn is_lfu(self) -> bool {
        matches!(self, Self::AllkeysLfu | Self::VolatileLfu)
    }

    /// An LRU policy (`allkeys-lru`, `volatile-lru`).
    pub fn is_lru(self) -> bool {
        matches!(self, Self::AllkeysLru | Self::VolatileLru)
    }

    /// Only keys with a TTL may be evicted (`volatile-*`).
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            Self::VolatileLru | Self::VolatileLfu | Self::VolatileRandom | Self::VolatileTtl
        )
    }
}

/// A double as Redis's `string2d` reads it: `strtod` syntax (decimal, hex,
/// `inf`), the whole word, no leading space, not NaN, and not a value that
/// overflows or underflows to zero (`ERANGE`).
///
/// # Source
/// `string2d`, redis/src/util.c (7.x).
fn parse_string2d(word: &str) -> Option<f64> {
    let ld = crate::ldouble::LongDouble::parse(word.as_bytes())?;
    let v = ld.to_f64();
    let was_inf = matches!(ld, crate::ldouble::LongDouble::Inf { .. });
    let was_zero = matches!(ld, crate::ldouble::LongDouble::Finite { mant: 0, .. });
    if (v.is_infinite() && !was_inf) || (v == 0.0 && !was_zero) {
        return None;
    }
    Some(v)
}

/// Default `shard-spin-us`: long enough for another shard thread that is
/// awake to answer a batch, short enough that a thread waiting on a busy
/// shard soon gives up its core. Measured on a 2-core host shared with the
/// client (XADD over 1000 keys, `redis-benchmark -c 50 -P 16`, two shards):
/// 15–60 µs all gave about a tenth more throughput than parking at once.
pub const DEFAULT_SHARD_SPIN_US: u64 = 20;
/// Largest `shard-spin-us` accepted (10 ms).
pub const MAX_SHARD_SPIN_US: u64 = 10_000;

/// Lowest `hz` Redis runs at (`CONFIG_MIN_HZ`); lower values are raised to it.
pub const MIN_HZ: u32 = 1;
/// Highest `hz` Redis runs at (`CONFIG_MAX_HZ`); higher values are lowered to it.
pub const MAX_HZ: u32 = 500;

/// Value of an integer directive: Redis's `string2ll` (no `+`, spaces,
/// leading zeros, units or decimals), then the directive's range `lo..=hi`
/// (the bounds of its declaration in Redis's config table).
///
/// # Errors
/// `argument couldn't be parsed into an integer`; `argument must be between
/// <lo> and <hi> inclusive`.
/// # Source
/// `numericParseString` and `numericBoundaryCheck`, redis/src/config.c (7.x).
fn int_in(value: &str, lo: i64, hi: i64) -> Result<i64, String> {
    let v = crate::cmd::args::parse_i64(value.as_bytes())
        .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
    in_range(v, lo, hi)
}

/// Value of a memory directive (`1gb`, `64mb`, `4096`; see
/// [`parse_memory_u64`]) that Redis keeps in a signed or `size_t` field:
/// a size past `i64::MAX` is out of range, as the unsigned result read as a
/// signed number is negative there.
///
/// # Errors
/// `argument must be a memory value`; `argument must be between <lo> and
/// <hi> inclusive`.
/// # Source
/// `numericParseString` (`MEMORY_CONFIG`, `memtoull`) and
/// `numericBoundaryCheck`, redis/src/config.c (7.x).
fn mem_in(value: &str, lo: i64, hi: i64) -> Result<i64, String> {
    let v = parse_memory_u64(value).ok_or("argument must be a memory value")?;
    in_range(i64::try_from(v).unwrap_or(-1), lo, hi)
}

fn in_range(v: i64, lo: i64, hi: i64) -> Result<i64, String> {
    if !(lo..=hi).contains(&v) {
        return Err(format!("argument must be between {lo} and {hi} inclusive"));
    }
    Ok(v)
}

/// An integer setting in `0..=i32::MAX` (`timeout`, `tcp-keepalive`), with Redis's error.
fn non_negative_i32(value: &str) -> Result<u64, String> {
    Ok(int_in(value, 0, i64::from(i32::MAX))? as u64)
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

impl Config {
    /// Apply one directive (`CONFIG SET` and config-file lines use the same names).
    /// Returns an error text when the name is unknown or the value is invalid.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let bad = || "argument couldn't be parsed into an integer".to_string();
        match name.to_ascii_lowercase().as_str() {
            "bind" => {
                self.bind = value
                    .split_whitespace()
                    .next()
                    .unwrap_or("127.0.0.1")
                    .to_string()
            }
            "port" => self.port = int_in(value, 0, 65535)? as u16,
            "shards" => self.shards = int_in(value, 1, 1024)? as u16,
            "io-threads" => self.io_threads = int_in(value, 1, 64)? as _,
            "pin-threads" => self.pin = parse_bool(value).ok_or("argument must be 'yes' or 'no'")?,
            "no-pin" => self.pin = !parse_bool(value).ok_or("argument must be 'yes' or 'no'")?,
            "dir" => self.dir = PathBuf::from(value),
            "requirepass" => self.requirepass = (!value.is_empty()).then(|| value.to_string()),
            "maxclients" => {
                self.maxclients = int_in(value, 1, i64::from(u32::MAX))? as usize
            }
            "databases" => self.databases = int_in(value, 1, 1024)? as usize,
            "proto-max-bulk-len" => self.proto_max_bulk_len = mem_in(value, 1 << 20, i64::MAX)?,
            "client-query-buffer-limit" => {
                self.client_query_buffer_limit = mem_in(value, 1 << 20, i64::MAX)? as usize
            }
            "timeout" => self.timeout_s = non_negative_i32(value)?,
            "tcp-keepalive" => self.tcp_keepalive_s = non_negative_i32(value)?,
            "maxmemory" => {
                self.maxmemory_bytes =
                    parse_memory_u64(value).ok_or("argument must be a memory value")?
            }
            "maxmemory-policy" => {
                let v = value.to_ascii_lowercase();
                let i = POLICIES.iter().position(|p| *p == v).ok_or_else(|| {
                    format!(
                        "argument(s) must be one of the following: {}",
                        POLICIES.join(", ")
                    )
                })?;
                self.maxmemory_policy = EvictionPolicy::from_u8(i as u8);
            }
            "maxmemory-samples" => {
                self.maxmemory_samples = int_in(value, 1, i64::from(i32::MAX))? as usize
            }
            "lfu-log-factor" => self.lfu_log_factor = int_in(value, 0, i64::from(i32::MAX))? as u64,
            "lfu-decay-time" => {
                self.lfu_decay_time_min = int_in(value, 0, i64::from(i32::MAX))? as u64
            }
            "client-output-buffer-limit" => {
                self.client_output_buffer_limit =
                    parse_obuf_limits(value, &self.client_output_buffer_limit)?
            }
            "stream-node-max-entries" => {
                self.stream_node_max_entries = int_in(value, 0, i64::MAX)? as usize
            }
            "cluster-mode" => {
                (self.cluster_emulated, self.cluster_enabled) =
                    match value.to_ascii_lowercase().as_str() {
                        "standalone" => (false, false),
                        "emulated" => (true, false),
                        "cluster" => (false, true),
                        _ => return Err(
                            "argument must be one of the following: standalone, emulated, cluster"
                                .into(),
                        ),
                    }
            }
            "cluster-enabled" => {
                self.cluster_enabled = parse_bool(value).ok_or("argument must be 'yes' or 'no'")?;
                if self.cluster_enabled {
                    self.cluster_emulated = false;
                }
            }
            "cluster-config-file" => self.cluster_config_file = PathBuf::from(value),
            "cluster-port" => self.cluster_port = int_in(value, 0, 65535)? as u16,
            "cluster-node-timeout" => {
                self.cluster_node_timeout_ms = int_in(value, 0, i64::MAX)? as u64
            }
            "cluster-require-full-coverage" => {
                self.cluster_require_full_coverage =
                    parse_bool(value).ok_or("argument must be 'yes' or 'no'")?
            }
            "cluster-announce-ip" => self.cluster_announce_ip = value.to_string(),
            "dump-payload-version" => {
                let v: i64 = value.parse().map_err(|_| bad())?;
                let (lo, hi) = (crate::rdb::MIN_DUMP_VERSION, crate::rdb::DEFAULT_DUMP_VERSION);
                self.dump_payload_version = u16::try_from(v)
                    .ok()
                    .filter(|v| (lo..=hi).contains(v))
                    .ok_or_else(|| format!("argument must be between {lo} and {hi} inclusive"))?
            }
            "list-max-listpack-size" | "list-max-ziplist-size" => {
                self.list_max_listpack_size =
                    int_in(value, i64::from(i32::MIN), i64::from(i32::MAX))?
            }
            "set-max-intset-entries" | "set-max-listpack-entries" | "set-max-listpack-value" => {
                // All three are integers in Redis (7.0 / 7.2), not memory values.
                let v = int_in(value, 0, i64::MAX)? as usize;
                let l = &mut self.set_limits;
                match name.to_ascii_lowercase().as_str() {
                    "set-max-intset-entries" => l.max_intset_entries = v,
                    "set-max-listpack-entries" => l.max_listpack_entries = v,
                    _ => l.max_listpack_value_bytes = v,
                }
            }
            "stream-node-max-bytes" => {
                self.stream_node_max_bytes = mem_in(value, 0, i64::MAX)? as usize
            }
            "zset-max-listpack-entries" | "zset-max-ziplist-entries" => {
                self.zset_max_listpack_entries = int_in(value, 0, i64::MAX)? as usize
            }
            "zset-max-listpack-value" | "zset-max-ziplist-value" => {
                self.zset_max_listpack_value = mem_in(value, 0, i64::MAX)? as usize
            }
            "cluster-config" => {
                self.cluster_config = (!value.is_empty()).then(|| PathBuf::from(value))
            }
            "cluster-allow-local-multislot" => {
                self.cluster_allow_local_multislot =
                    parse_bool(value).ok_or("argument must be 'yes' or 'no'")?
            }
            "appendonly" => {
                self.appendonly = parse_bool(value).ok_or("argument must be 'yes' or 'no'")?
            }
            "appendfsync" => {
                self.appendfsync = crate::aof::FsyncPolicy::parse(value)
                    .ok_or("argument(s) must be one of the following: everysec, always, no")?
            }
            "auto-aof-rewrite-percentage" => {
                self.auto_aof_rewrite_percentage = int_in(value, 0, i64::from(i32::MAX))? as u64
            }
            "auto-aof-rewrite-min-size" => {
                self.auto_aof_rewrite_min_size_bytes = mem_in(value, 0, i64::MAX)? as u64
            }
            "aof-load-truncated" => {
                self.aof_load_truncated =
                    parse_bool(value).ok_or("argument must be 'yes' or 'no'")?
            }
            "tcp-backlog" => self.tcp_backlog = int_in(value, 0, i64::from(i32::MAX))? as i32,
            "enable-debug-command" => {
                self.enable_debug_command = ["no", "yes", "local"]
                    .into_iter()
                    .find(|v| v.eq_ignore_ascii_case(value))
                    .ok_or("argument(s) must be one of the following: no, yes, local")?
            }
            "aof-use-rdb-preamble" => {
                self.aof_use_rdb_preamble =
                    parse_bool(value).ok_or("argument must be 'yes' or 'no'")?
            }
            "slowlog-log-slower-than" => {
                self.slowlog_log_slower_than_us = int_in(value, -1, i64::MAX)?
            }
            "busy-reply-threshold" | "lua-time-limit" => {
                self.busy_reply_threshold_ms = int_in(value, 0, i64::MAX)? as u64
            }
            "slowlog-max-len" => self.slowlog_max_len = int_in(value, 0, i64::MAX)? as usize,
            "hz" => {
                // Redis accepts 0..=INT_MAX and keeps the result in 1..=500.
                let v = int_in(value, 0, i64::from(i32::MAX))?;
                self.hz = v.clamp(i64::from(MIN_HZ), i64::from(MAX_HZ)) as u32;
            }
            "shard-spin-us" => {
                self.shard_spin_us = int_in(value, 0, MAX_SHARD_SPIN_US as i64)? as u64
            }
            "latency-monitor-threshold" => {
                self.latency_monitor_threshold_ms = int_in(value, 0, i64::MAX)?
            }
            "latency-tracking" => {
                self.latency_tracking = parse_bool(value).ok_or("argument must be 'yes' or 'no'")?
            }
            "latency-tracking-info-percentiles" => {
                let mut v = Vec::new();
                // Split on single spaces as Redis's sdssplitlen does (two
                // spaces make an empty, invalid word); each word is read as
                // `string2d` reads it (strtod syntax, hex included).
                let words = value.split(' ').filter(|_| !value.is_empty());
                for w in words {
                    let p = parse_string2d(w).ok_or_else(|| {
                        "Invalid latency-tracking-info-percentiles parameters".to_string()
                    })?;
                    if !(0.0..=100.0).contains(&p) {
                        return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                    }
                    v.push(p);
                }
                self.latency_tracking_info_percentiles = v;
            }
            "unixsocket" => self.unixsocket = (!value.is_empty()).then(|| PathBuf::from(value)),
            "unixsocketperm" => {
                self.unixsocketperm = u32::from_str_radix(value, 8)
                    .ok()
                    .filter(|v| *v <= 0o777)
                    .ok_or("argument couldn't be parsed as an octal number")?
            }
            "pidfile" => self.pidfile = (!value.is_empty()).then(|| PathBuf::from(value)),
            "logfile" => self.logfile = value.to_string(),
            "loglevel" => {
                self.loglevel = LogLevel::parse(value).ok_or(
                    "argument(s) must be one of the following: debug, verbose, notice, warning, nothing",
                )?
            }
            "protected-mode" => {
                self.protected_mode = parse_bool(value).ok_or("argument must be 'yes' or 'no'")?
            }
            "supervised" => {
                let v = value.to_ascii_lowercase();
                if !["upstart", "systemd", "auto", "no"].contains(&v.as_str()) {
                    return Err(
                        "argument(s) must be one of the following: upstart, systemd, auto, no"
                            .into(),
                    );
                }
                self.supervised = v;
            }
            "daemonize" => {
                if parse_bool(value).ok_or("argument must be 'yes' or 'no'")? {
                    return Err("daemonize yes is not supported: run shardstream in the \
                                foreground under a supervisor (systemd, docker, ...)"
                        .into());
                }
            }
            "save" => {
                if !value.trim().is_empty() {
                    return Err("snapshots (RDB) are not supported, use appendonly yes \
                                (save \"\" turns snapshots off)"
                        .into());
                }
            }
            other => {
                let Some(&(known, _, kind, _)) = ignored::find(other) else {
                    return Err(format!(
                        "Unknown option or number of arguments for CONFIG SET - '{name}'"
                    ));
                };
                let value = ignored::normalize(kind, value)?;
                self.ignored.insert(known, value);
            }
        }
        Ok(())
    }

    /// Current value of a directive as `CONFIG GET` prints it.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "bind" => self.bind.clone(),
            "port" => self.port.to_string(),
            "shards" => self.shards.to_string(),
            "io-threads" => self.io_threads.to_string(),
            "pin-threads" => if self.pin { "yes" } else { "no" }.to_string(),
            "dir" => self.dir.display().to_string(),
            "requirepass" => self.requirepass.clone().unwrap_or_default(),
            "maxclients" => self.maxclients.to_string(),
            "databases" => self.databases.to_string(),
            "proto-max-bulk-len" => self.proto_max_bulk_len.to_string(),
            "client-query-buffer-limit" => self.client_query_buffer_limit.to_string(),
            "timeout" => self.timeout_s.to_string(),
            "tcp-keepalive" => self.tcp_keepalive_s.to_string(),
            "maxmemory" => self.maxmemory_bytes.to_string(),
            "maxmemory-policy" => POLICIES[self.maxmemory_policy as usize].to_string(),
            "maxmemory-samples" => self.maxmemory_samples.to_string(),
            "lfu-log-factor" => self.lfu_log_factor.to_string(),
            "lfu-decay-time" => self.lfu_decay_time_min.to_string(),
            "client-output-buffer-limit" => OBUF_CLASSES
                .iter()
                .zip(&self.client_output_buffer_limit)
                .map(|(c, l)| format!("{c} {} {} {}", l.hard_bytes, l.soft_bytes, l.soft_s))
                .collect::<Vec<_>>()
                .join(" "),
            "stream-node-max-entries" => self.stream_node_max_entries.to_string(),
            "stream-node-max-bytes" => self.stream_node_max_bytes.to_string(),
            "list-max-listpack-size" | "list-max-ziplist-size" => {
                self.list_max_listpack_size.to_string()
            }
            "set-max-intset-entries" => self.set_limits.max_intset_entries.to_string(),
            "set-max-listpack-entries" => self.set_limits.max_listpack_entries.to_string(),
            "set-max-listpack-value" => self.set_limits.max_listpack_value_bytes.to_string(),
            "zset-max-listpack-entries" | "zset-max-ziplist-entries" => {
                self.zset_max_listpack_entries.to_string()
            }
            "zset-max-listpack-value" | "zset-max-ziplist-value" => {
                self.zset_max_listpack_value.to_string()
            }
            "dump-payload-version" => self.dump_payload_version.to_string(),
            "cluster-mode" => if self.cluster_emulated {
                "emulated"
            } else if self.cluster_enabled {
                "cluster"
            } else {
                "standalone"
            }
            .to_string(),
            "cluster-config-file" => self.cluster_config_file.display().to_string(),
            "cluster-port" => self.cluster_port.to_string(),
            "cluster-node-timeout" => self.cluster_node_timeout_ms.to_string(),
            "cluster-require-full-coverage" => if self.cluster_require_full_coverage {
                "yes"
            } else {
                "no"
            }
            .to_string(),
            "cluster-announce-ip" => self.cluster_announce_ip.clone(),
            "cluster-enabled" => {
                if self.cluster_emulated || self.cluster_enabled || self.cluster_config.is_some() {
                    "yes"
                } else {
                    "no"
                }
                .to_string()
            }
            "cluster-config" => self
                .cluster_config
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            "cluster-allow-local-multislot" => if self.cluster_allow_local_multislot {
                "yes"
            } else {
                "no"
            }
            .to_string(),
            "appendonly" => if self.appendonly { "yes" } else { "no" }.to_string(),
            "appendfsync" => self.appendfsync.name().to_string(),
            "auto-aof-rewrite-percentage" => self.auto_aof_rewrite_percentage.to_string(),
            "auto-aof-rewrite-min-size" => self.auto_aof_rewrite_min_size_bytes.to_string(),
            "aof-load-truncated" => if self.aof_load_truncated { "yes" } else { "no" }.to_string(),
            "tcp-backlog" => self.tcp_backlog.to_string(),
            "enable-debug-command" => self.enable_debug_command.to_string(),
            "aof-use-rdb-preamble" => if self.aof_use_rdb_preamble {
                "yes"
            } else {
                "no"
            }
            .to_string(),
            "latency-tracking" => if self.latency_tracking { "yes" } else { "no" }.to_string(),
            "slowlog-log-slower-than" => self.slowlog_log_slower_than_us.to_string(),
            "slowlog-max-len" => self.slowlog_max_len.to_string(),
            "hz" => self.hz.to_string(),
            "shard-spin-us" => self.shard_spin_us.to_string(),
            "latency-monitor-threshold" => self.latency_monitor_threshold_ms.to_string(),
            "busy-reply-threshold" | "lua-time-limit" => self.busy_reply_threshold_ms.to_string(),
            "latency-tracking-info-percentiles" => self
                .latency_tracking_info_percentiles
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            "unixsocket" => self
                .unixsocket
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            "unixsocketperm" => format!("{:o}", self.unixsocketperm),
            "pidfile" => self
                .pidfile
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            "logfile" => self.logfile.clone(),
            "loglevel" => self.loglevel.name().to_string(),
            "protected-mode" => if self.protected_mode { "yes" } else { "no" }.to_string(),
            "supervised" => self.supervised.clone(),
            "daemonize" => "no".to_string(),
            "save" => String::new(),
            other => {
                let &(known, default, _, _) = ignored::find(other)?;
                self.ignored
                    .get(known)
                    .map_or_else(|| default.to_string(), Clone::clone)
            }
        })
    }

    /// Every setting, each once under its own name (no alias): the ones
    /// shardstream implements ([`Self::NAMES`]), then the [`ignored`] ones.
    pub fn all_names() -> impl Iterator<Item = &'static str> {
        Self::NAMES.iter().copied().chain(
            ignored::IGNORED
                .iter()
                .map(|row| row.0)
                .filter(|n| !Self::NAMES.contains(n)),
        )
    }

    /// Every directive name `CONFIG GET` knows.
    pub const NAMES: &'static [&'static str] = &[
        "bind",
        "port",
        "shards",
        "io-threads",
        "pin-threads",
        "dir",
        "requirepass",
        "maxclients",
        "databases",
        "proto-max-bulk-len",
        "client-query-buffer-limit",
        "timeout",
        "tcp-keepalive",
        "maxmemory",
        "maxmemory-policy",
        "maxmemory-samples",
        "lfu-log-factor",
        "lfu-decay-time",
        "client-output-buffer-limit",
        "stream-node-max-entries",
        "stream-node-max-bytes",
        "list-max-listpack-size",
        "list-max-ziplist-size",
        "set-max-intset-entries",
        "set-max-listpack-entries",
        "set-max-listpack-value",
        "zset-max-listpack-entries",
        "zset-max-listpack-value",
        "zset-max-ziplist-entries",
        "zset-max-ziplist-value",
        "dump-payload-version",
        "cluster-mode",
        "cluster-enabled",
        "cluster-config",
        "cluster-config-file",
        "cluster-port",
        "cluster-node-timeout",
        "cluster-require-full-coverage",
        "cluster-announce-ip",
        "cluster-allow-local-multislot",
        "appendonly",
        "appendfsync",
        "auto-aof-rewrite-percentage",
        "auto-aof-rewrite-min-size",
        "aof-load-truncated",
        "tcp-backlog",
        "enable-debug-command",
        "aof-use-rdb-preamble",
        "latency-tracking",
        "latency-tracking-info-percentiles",
        "slowlog-log-slower-than",
        "slowlog-max-len",
        "hz",
        "shard-spin-us",
        "latency-monitor-threshold",
        "busy-reply-threshold",
        "lua-time-limit",
        "unixsocket",
        "unixsocketperm",
        "pidfile",
        "logfile",
        "loglevel",
        "protected-mode",
        "supervised",
        "daemonize",
        "save",
    ];

    /// Apply one directive as redis-server reads it at start-up (a config
    /// file line, or `--name args...` on the command line): `args` are the
    /// line's words after the name. Returns a warning for a Redis directive
    /// shardstream accepts but ignores.
    ///
    /// # Errors
    /// `Bad directive or wrong number of arguments` for a name neither
    /// shardstream nor Redis knows; the reason for a Redis directive whose
    /// absence would change what the server does ([`UNSUPPORTED_FATAL`]);
    /// `wrong number of arguments`; the value error of [`Config::set`].
    /// # Source
    /// `loadServerConfigFromString`, redis/src/config.c (7.x): the same
    /// error texts.
    pub fn apply_directive(
        &mut self,
        name: &str,
        args: &[String],
    ) -> Result<Option<String>, String> {
        let lower = name.to_ascii_lowercase();
        if let Some(row) = ignored::find(&lower).filter(|_| !Self::NAMES.contains(&lower.as_str()))
        {
            if args.is_empty() || (args.len() > 1 && row.2 != ignored::Kind::Text) {
                return Err("wrong number of arguments".into());
            }
            self.set(&lower, &args.join(" "))?;
            return Ok(Some(format!(
                "ignoring unsupported directive '{lower}' (it changes nothing shardstream does)"
            )));
        }
        let known = self.get(&lower).is_some() || lower == "no-pin";
        if !known {
            if let Some((_, why)) = UNSUPPORTED_FATAL.iter().find(|(n, _)| *n == lower) {
                return Err(why.to_string());
            }
            if lower == "tls-port" && args.iter().all(|a| a == "0") {
                return Ok(Some(format!("ignoring '{lower} 0' (TLS is not supported)")));
            }
            if lower.starts_with("tls-") {
                return Ok(Some(format!(
                    "ignoring unsupported directive '{lower}' (it changes nothing shardstream does)"
                )));
            }
            return Err("Bad directive or wrong number of arguments".into());
        }
        let multi = MULTI_ARG.contains(&lower.as_str());
        let value = match (args.len(), lower.as_str()) {
            (0, "no-pin") => "yes".to_string(),
            (0, "save") => String::new(),
            (1, _) => args[0].clone(),
            (n, _) if n > 1 && multi => args.join(" "),
            _ => return Err("wrong number of arguments".into()),
        };
        self.set(&lower, &value)?;
        if lower == "bind" && args.len() > 1 {
            return Ok(Some(format!(
                "bind: listening on {} only (one TCP address is supported)",
                self.bind
            )));
        }
        Ok(None)
    }

    /// Apply a redis.conf-style text: one directive per line, words split
    /// as Redis splits them (quotes, escapes; see
    /// [`crate::cmdline::split_config_line`]), `#` comments. Returns the
    /// warnings of ignored directives.
    ///
    /// # Errors
    /// The first bad line, Redis-style: its number, its text and the reason.
    pub fn apply_file_text(&mut self, text: &str) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |why: String| format!("at line {}\n>>> '{line}'\n{why}", n + 1);
            let words = crate::cmdline::split_config_line(line).map_err(fail)?;
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            if let Some(w) = self.apply_directive(name, args).map_err(fail)? {
                warnings.push(format!("line {}: {w}", n + 1));
            }
        }
        Ok(warnings)
    }

    /// Check the settings that are fixed at start-up once every directive
    /// has been applied. Returns warnings (deprecated settings).
    ///
    /// # Errors
    /// A value out of its start-up range (`shards`, `io-threads`, `databases`).
    pub fn check_startup(&self) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        if self.shards == 0 || self.shards > 1024 {
            return Err("shards must be between 1 and 1024".into());
        }
        if self.io_threads == 0 || self.io_threads > 64 {
            return Err("io-threads must be between 1 and 64".into());
        }
        if self.io_threads != 1 {
            warnings.push(format!(
                "io-threads {} is deprecated and ignored: every shard thread serves its own connections (set shards instead)",
                self.io_threads
            ));
        }
        if self.databases == 0 || self.databases > 1024 {
            return Err("databases must be between 1 and 1024".into());
        }
        Ok(warnings)
    }
}

/// Directives that take several words (`save 900 1 300 10`, `bind a b`,
/// `client-output-buffer-limit normal 0 0 0 ...`); every other one takes one.
const MULTI_ARG: &[&str] = &[
    "save",
    "bind",
    "client-output-buffer-limit",
    "latency-tracking-info-percentiles",
];

/// Redis directives refused at start-up, with the reason: ignoring them
/// would expose data, lose it, or silently change how the server behaves.
pub const UNSUPPORTED_FATAL: &[(&str, &str)] = &[
    (
        "include",
        "include is not supported: put the settings in one file",
    ),
    (
        "rename-command",
        "rename-command is not supported (ignoring it would leave the command reachable)",
    ),
    ("user", "ACL users are not supported: use requirepass"),
    ("aclfile", "ACL files are not supported: use requirepass"),
    ("loadmodule", "modules are not supported"),
    ("replicaof", "replication is not supported"),
    ("slaveof", "replication is not supported"),
    ("tls-port", "TLS is not supported"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// redis-server 7.0.15 accepts any size for maxmemory: past u64 it
    /// keeps 18446744073709551615.
    #[test]
    fn maxmemory_accepts_huge_values() {
        let mut cfg = Config::default();
        for (v, want) in [
            ("18446744073709551615", u64::MAX),
            ("18446744073709551616", u64::MAX),
            ("1000000000000000000000", u64::MAX),
            ("9223372036854775808", 1 << 63),
            ("100gb", 100 << 30),
            ("0", 0),
        ] {
            cfg.set("maxmemory", v).unwrap();
            assert_eq!(cfg.maxmemory_bytes, want, "{v}");
        }
        // No digits is 0, as memtoull reads it.
        cfg.set("maxmemory", "").unwrap();
        assert_eq!(cfg.maxmemory_bytes, 0);
        for v in ["-1", "abc", "1x", "1.5", "0x10", "+1"] {
            assert_eq!(
                cfg.set("maxmemory", v),
                Err("argument must be a memory value".to_string()),
                "{v}"
            );
        }
    }

    /// Texts and ranges of redis-server 7.0.15 for the same bad values
    /// (tests/server_cmds.rs compares them with a live redis-server too).
    #[test]
    fn numeric_directives_follow_redis_types() {
        let mut cfg = Config::default();
        let range =
            |lo: &str, hi: &str| Err(format!("argument must be between {lo} and {hi} inclusive"));
        let not_int = Err("argument couldn't be parsed into an integer".to_string());
        let not_mem = Err("argument must be a memory value".to_string());
        let i64max = "9223372036854775807";
        assert_eq!(cfg.set("port", "abc"), not_int);
        assert_eq!(cfg.set("port", "65536"), range("0", "65535"));
        assert_eq!(cfg.set("auto-aof-rewrite-min-size", "abc"), not_mem);
        assert_eq!(cfg.set("auto-aof-rewrite-min-size", "-1"), not_mem);
        assert_eq!(
            cfg.set("zset-max-ziplist-value", "99999999999999999999"),
            range("0", i64max)
        );
        assert_eq!(cfg.set("slowlog-max-len", "-1"), range("0", i64max));
        assert_eq!(
            cfg.set("slowlog-log-slower-than", "-2"),
            range("-1", i64max)
        );
        assert_eq!(cfg.set("set-max-intset-entries", "1k"), not_int);
        assert_eq!(cfg.set("maxmemory-samples", "0"), range("1", "2147483647"));
        assert_eq!(cfg.set("proto-max-bulk-len", ""), range("1048576", i64max));
        assert_eq!(cfg.set("hz", "-1"), range("0", "2147483647"));
        assert_eq!(cfg.set("hz", "+5"), not_int);
        let pct = |cfg: &mut Config, v: &str| {
            cfg.set("latency-tracking-info-percentiles", v)
                .map(|()| cfg.latency_tracking_info_percentiles.clone())
        };
        assert_eq!(pct(&mut cfg, "0x10 0X1.8p1"), Ok(vec![16.0, 3.0]));
        assert_eq!(pct(&mut cfg, ""), Ok(vec![]));
        for bad in ["1  2", " 5", "5 ", "nan", "1e400", "1e-400", "0x"] {
            assert_eq!(
                pct(&mut cfg, bad),
                Err("Invalid latency-tracking-info-percentiles parameters".to_string()),
                "{bad:?}"
            );
        }
        // A config-file line takes several words.
        cfg.apply_file_text("latency-tracking-info-percentiles 50 99.9\n")
            .unwrap();
        assert_eq!(cfg.latency_tracking_info_percentiles, vec![50.0, 99.9]);
        cfg.set("maxmemory-samples", "65").unwrap();
        assert_eq!(cfg.maxmemory_samples, 65);
        for (v, want) in [("0", 1), ("501", 500), ("100", 100)] {
            cfg.set("hz", v).unwrap();
            assert_eq!(cfg.get("hz").as_deref(), Some(want.to_string().as_str()));
        }
        let t = Tunables::from_config(&cfg);
        assert_eq!(t.timer_period_ms(), 10);
        cfg.set("latency-monitor-threshold", "100").unwrap();
        assert_eq!(cfg.get("latency-monitor-threshold").as_deref(), Some("100"));
    }

    #[test]
    fn file_then_flags() {
        let mut cfg = Config::default();
        let w = cfg
            .apply_file_text(
                "# c\nport 7000\nrequirepass \"s3cret\"\nhz 50\nproto-max-bulk-len 1gb\nactiverehashing yes\n",
            )
            .unwrap();
        assert_eq!(cfg.port, 7000);
        assert_eq!(cfg.requirepass.as_deref(), Some("s3cret"));
        assert_eq!(cfg.proto_max_bulk_len, 1024 * 1024 * 1024);
        assert_eq!(cfg.hz, 50);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(cfg
            .apply_file_text("port abc")
            .unwrap_err()
            .contains("line 1"));
        // Unknown names are errors; snapshots are refused rather than ignored.
        let e = cfg.apply_file_text("port 1\nfoo bar").unwrap_err();
        assert!(e.contains("line 2") && e.contains("Bad directive"), "{e}");
        let e = cfg.apply_file_text("save 900 1").unwrap_err();
        assert!(e.contains("snapshots"), "{e}");
        assert!(cfg.apply_file_text("save \"\"\nsave").is_ok());
    }
}
