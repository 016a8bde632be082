//! INFO: server, clients, memory, persistence, stats, replication, cpu,
//! modules, commandstats, cluster, keyspace and shardstream sections, in
//! Redis's field names.
//!
//! Values the connection's thread can read (counters in [`Shared`], the client registry,
//! process data from `/proc` and `getrusage`) are captured when the command
//! arrives; per-shard values (ops, keys, expiries, hits/misses) come from a
//! fan-out to every shard ([`ShardInfo`]) and are merged into the text on the
//! connection's thread.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::alloc_stats::AllocStats;
use crate::cmd::connection::REDIS_COMPAT_VERSION;
use crate::cmd::memory::{ratio, Overhead};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::error::CmdError;
use crate::metrics::Metric;
use crate::reply::Reply;
use crate::route::slot::ShardId;
use crate::server::Shared;
use crate::shard::db::ShardDb;

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[CommandSpec {
    name: "INFO",
    arity: -1,
    flags: Flags::LOADING.with(Flags::STALE),
    keys: Keys::None,
    acl: &["slow", "dangerous"],
    summary: "Returns information and statistics about the server.",
    since: "1.0.0",
    group: "server",
    subcommands: &[],
    handler: Handler::Conn(info),
}];

/// INFO sections in output order: `(name, in the default set)`.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
    ("shardstream", true),
    ("streamlatency", false),
];

/// Sections whose text needs data from the shards.
const SHARD_SECTIONS: &[&str] = &[
    "memory",
    "persistence",
    "stats",
    "keyspace",
    "shardstream",
    "streamlatency",
];

/// `INFO [section [section ...]]`
///
/// Sections: any of [`SECTIONS`] by name (any case), `default` (no argument),
/// `all` (every section) or `everything` (same as `all` here). Unknown section
/// names contribute nothing. Sections appear in Redis's fixed order, whatever
/// order they were asked in.
///
/// # Reply
/// Verbatim text (RESP2: bulk string): `# Section\r\nfield:value\r\n...`,
/// sections separated by an empty line; empty when nothing matched.
/// # Source
/// `infoCommand` / `genRedisInfoString`, redis/src/server.c.
pub fn info(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let wanted = wanted_sections(&argv[1..]);
    let mut snap = Snapshot::take(cx.shared);
    if wanted.contains(&"latencystats") {
        snap.latencystats = cx.shared.cmdstats.latency_snapshot();
    }
    let needs_shards = wanted.iter().any(|s| SHARD_SECTIONS.contains(s));
    if !needs_shards {
        return Ok(Reply::Verbatim(render(&wanted, &snap, &[])).into());
    }
    let want_latency = wanted.contains(&"streamlatency");
    let parts = (0..cx.shared.shards)
        .map(|i| {
            let req = on_shard(move |db, cx| {
                let info = ShardInfo::of(db, cx.now_ms).to_reply();
                if !want_latency {
                    return info;
                }
                let lines = crate::cmd::group_latency::info_lines(db, cx.now_ms);
                Reply::Array(vec![
                    info,
                    Reply::Array(lines.into_iter().map(Reply::bulk).collect()),
                ])
            });
            (ShardId(i), req)
        })
        .collect();
    Ok(Action::FanOut {
        parts,
        merge: Box::new(move |replies: Vec<Reply>| {
            let mut shards = Vec::with_capacity(replies.len());
            for r in replies {
                match r {
                    Reply::Array(mut v) if want_latency && v.len() == 2 => {
                        if let Reply::Array(lines) = v.pop().unwrap_or(Reply::Ok) {
                            snap.streamlatency
                                .extend(lines.into_iter().filter_map(|l| match l {
                                    Reply::Bulk(b) => {
                                        Some(String::from_utf8_lossy(&b).into_owned())
                                    }
                                    _ => None,
                                }));
                        }
                        shards.push(ShardInfo::from_reply(&v[0]));
                    }
                    r => shards.push(ShardInfo::from_reply(&r)),
                }
            }
            Reply::Verbatim(render(&wanted, &snap, &shards))
        }),
    })
}

/// The section names selected by INFO's arguments, in output order.
fn wanted_sections(args: &[Bytes]) -> Vec<&'static str> {
    let pick_default = args.is_empty() || args.iter().any(|a| a.eq_ignore_ascii_case(b"default"));
    let pick_all = args
        .iter()
        .any(|a| a.eq_ignore_ascii_case(b"all") || a.eq_ignore_ascii_case(b"everything"));
    SECTIONS
        .iter()
        .filter(|(name, default)| {
            let named = args.iter().any(|a| a.eq_ignore_ascii_case(name.as_bytes()));
            // `streamlatency` walks every key of every shard: only on request,
            // never as part of `all` (which exporters scrape).
            if *name == "streamlatency" {
                return named;
            }
            pick_all || (pick_default && *default) || named
        })
        .map(|(name, _)| *name)
        .collect()
}

/// What one shard reports for INFO.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardInfo {
    pub ops: u64,
    pub expired_keys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// Changes made (`rdb_changes_since_last_save`).
    pub dirty: u64,
    /// One entry per database.
    pub dbs: Vec<DbInfo>,
}

/// What one shard reports of one database for INFO keyspace.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DbInfo {
    pub keys: u64,
    /// Keys with a TTL.
    pub expires: u64,
    /// Keys whose TTL has not run out yet, and their average TTL, ms.
    pub ttl_keys: u64,
    pub avg_ttl_ms: u64,
}

impl ShardInfo {
    /// Read a shard's counters and key counts (on the shard thread) at `now_ms`.
    pub fn of(db: &ShardDb, now_ms: u64) -> Self {
        ShardInfo {
            ops: db.stats.ops,
            expired_keys: db.stats.expired_keys,
            keyspace_hits: db.stats.keyspace_hits,
            keyspace_misses: db.stats.keyspace_misses,
            dirty: db.stats.dirty,
            dbs: (0..db.databases())
                .map(|i| {
                    let ks = db.keyspace(i);
                    let (ttl_keys, avg_ttl_ms) = ks.ttl_stats(now_ms);
                    DbInfo {
                        keys: ks.len() as u64,
                        expires: ks.expires_len() as u64,
                        ttl_keys,
                        avg_ttl_ms,
                    }
                })
                .collect(),
        }
    }

    /// Carry the numbers back to the connection's thread as an integer array.
    fn to_reply(&self) -> Reply {
        let mut v = vec![
            self.ops,
            self.expired_keys,
            self.keyspace_hits,
            self.keyspace_misses,
            self.dirty,
        ];
        for d in &self.dbs {
            v.extend([d.keys, d.expires, d.ttl_keys, d.avg_ttl_ms]);
        }
        Reply::Array(v.into_iter().map(|n| Reply::Int(n as i64)).collect())
    }

    /// Inverse of `to_reply`; anything else reads as an empty shard.
    fn from_reply(r: &Reply) -> Self {
        let Reply::Array(items) = r else {
            return ShardInfo::default();
        };
        let n: Vec<u64> = items
            .iter()
            .map(|i| match i {
                Reply::Int(n) => *n as u64,
                _ => 0,
            })
            .collect();
        let at = |i: usize| n.get(i).copied().unwrap_or(0);
        ShardInfo {
            ops: at(0),
            expired_keys: at(1),
            keyspace_hits: at(2),
            keyspace_misses: at(3),
            dirty: at(4),
            dbs: n
                .get(5..)
                .unwrap_or(&[])
                .chunks_exact(4)
                .map(|c| DbInfo {
                    keys: c[0],
                    expires: c[1],
                    ttl_keys: c[2],
                    avg_ttl_ms: c[3],
                })
                .collect(),
        }
    }

    fn keys(&self) -> u64 {
        self.dbs.iter().map(|d| d.keys).sum()
    }
}

/// Values read on the connection's thread when INFO arrives.
struct Snapshot {
    run_id: String,
    port: u16,
    /// `config_file`: absolute path of the config file given, or "".
    config_file: String,
    /// `process_supervised`.
    supervised: String,
    /// `hz` and `configured_hz`: the `hz` setting in force (no dynamic hz).
    hz: u32,
    uptime_s: u64,
    now_usec: u128,
    connected_clients: usize,
    maxclients: usize,
    inbox_depth: Vec<usize>,
    /// Per shard thread: connections served, local and remote single-shard commands.
    threads: Vec<(usize, u64, u64)>,
    /// Per shard thread: `shard-spin-us` spins that work ended, and that ran out.
    spins: Vec<(u64, u64)>,
    handovers: u64,
    cross_shard_txs: u64,
    cross_shard_holds: u64,
    connections: u64,
    commands: u64,
    rejected: u64,
    /// Keys evicted under `maxmemory`.
    evicted_keys: u64,
    net_in: u64,
    net_out: u64,
    /// INFO `total_reads_processed` / `total_writes_processed`.
    reads: u64,
    writes: u64,
    errors: u64,
    blocked_clients: u64,
    /// INFO clients `total_blocking_keys` / `total_blocking_keys_on_nokey`.
    blocking_keys: (u64, u64),
    recent_max_input: u64,
    recent_max_output: u64,
    qbuf_disconnections: u64,
    obuf_disconnections: u64,
    maxmemory: u64,
    /// `maxmemory-policy` as CONFIG GET prints it.
    maxmemory_policy: String,
    /// `(cached scripts, functions, libraries)` (INFO memory).
    scripting: (usize, usize, usize),
    /// `(name, calls, failed, rejected)`, sorted by name.
    cmdstats: Vec<(String, u64, u64, u64, u64)>,
    errorstats: Vec<(String, u64)>,
    latencystats: Vec<(String, crate::server::LatencyHistogram)>,
    /// INFO `streamlatency` lines from every shard (see
    /// [`crate::cmd::group_latency::info_lines`]).
    streamlatency: Vec<String>,
    percentiles: Vec<f64>,
    /// Allocator figures now.
    mem: AllocStats,
    /// Highest allocated figure seen (`used_memory_peak`), bytes.
    peak: u64,
    /// Allocated bytes once the server had started, bytes.
    startup: u64,
    /// Client buffers, bytes (`mem_clients_normal`).
    client_bytes: u64,
    /// `total_system_memory`, bytes.
    system_memory: u64,
    /// Instantaneous commands/s, input bytes/s, output bytes/s.
    rates: [f64; 3],
    cpu: (f64, f64),
    /// Cluster mode: emulated one-node cluster or a topology (`cluster_enabled:1`).
    cluster: bool,
    aof: AofInfo,
}

/// INFO persistence's AOF fields, read from the shards' shared status.
struct AofInfo {
    enabled: bool,
    rewrites_in_progress: u64,
    last_rewrite_ok: bool,
    last_rewrite_time_ms: i64,
    rewrites: u64,
    write_ok: bool,
    current_size: u64,
    base_size: u64,
    delayed_fsync: u64,
}

impl AofInfo {
    fn read(a: &crate::aof::AofShared) -> Self {
        AofInfo {
            enabled: a.is_enabled(),
            rewrites_in_progress: a.rewrites_in_progress.load(Ordering::Relaxed),
            last_rewrite_ok: a.last_rewrite_ok.load(Ordering::Relaxed),
            last_rewrite_time_ms: a.last_rewrite_time_ms.load(Ordering::Relaxed),
            rewrites: a.rewrites.load(Ordering::Relaxed),
            write_ok: a.failing_shards.load(Ordering::Relaxed) == 0,
            current_size: a.current_size_bytes.load(Ordering::Relaxed),
            base_size: a.base_size_bytes.load(Ordering::Relaxed),
            delayed_fsync: a.delayed_fsync.load(Ordering::Relaxed),
        }
    }
}

impl Snapshot {
    fn take(shared: &Shared) -> Self {
        let (port, maxclients, config_file, supervised) = shared
            .config
            .read()
            .map(|c| {
                let file = c.config_file.as_ref().map(|p| {
                    std::fs::canonicalize(p)
                        .unwrap_or_else(|_| p.clone())
                        .display()
                        .to_string()
                });
                (
                    c.port,
                    c.maxclients,
                    file.unwrap_or_default(),
                    c.supervised.clone(),
                )
            })
            .unwrap_or((shared.addr.port(), 0, String::new(), "no".into()));
        let cmdstats = shared.cmdstats.snapshot();
        let st = &shared.stats;
        Snapshot {
            scripting: {
                let libs = shared.scripts.libraries();
                (
                    shared.scripts.scripts_len(),
                    libs.functions.len(),
                    libs.by_name.len(),
                )
            },
            cluster: crate::cmd::cluster::is_cluster_mode(shared),
            run_id: shared.run_id.clone(),
            port,
            config_file,
            supervised,
            hz: shared.tunables.hz.load(Ordering::Relaxed),
            uptime_s: shared.uptime_ms() / 1000,
            now_usec: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or(0),
            connected_clients: shared.clients.lock().map(|c| c.len()).unwrap_or(0),
            maxclients,
            inbox_depth: shared.threads.iter().map(|t| t.tx.len()).collect(),
            threads: (0..shared.threads.len())
                .map(|i| {
                    let st = &shared.thread_stats[i];
                    (
                        shared.thread_conns[i].load(Ordering::Relaxed),
                        st.local_commands.load(Ordering::Relaxed),
                        st.remote_commands.load(Ordering::Relaxed),
                    )
                })
                .collect(),
            spins: shared
                .thread_stats
                .iter()
                .map(|t| {
                    (
                        t.spin_hits.load(Ordering::Relaxed),
                        t.spin_misses.load(Ordering::Relaxed),
                    )
                })
                .collect(),
            handovers: st.conn_handovers.load(Ordering::Relaxed),
            cross_shard_txs: st.cross_shard_txs.load(Ordering::Relaxed),
            cross_shard_holds: st.cross_shard_holds.load(Ordering::Relaxed),
            connections: st.total_connections_received.load(Ordering::Relaxed),
            commands: shared.cmdstats.total_processed(),
            rejected: st.rejected_connections.load(Ordering::Relaxed),
            evicted_keys: st.evicted_keys.load(Ordering::Relaxed),
            net_in: shared.thread_sum(|t| &t.net_input_bytes),
            net_out: shared.thread_sum(|t| &t.net_output_bytes),
            reads: shared.thread_sum(|t| &t.reads_processed),
            writes: shared.thread_sum(|t| &t.writes_processed),
            errors: shared.cmdstats.total_errors(),
            errorstats: shared.cmdstats.error_snapshot(),
            latencystats: Vec::new(),
            streamlatency: Vec::new(),
            percentiles: shared
                .config
                .read()
                .map(|c| c.latency_tracking_info_percentiles.clone())
                .unwrap_or_default(),
            blocked_clients: shared.blocked_clients.load(Ordering::Relaxed),
            blocking_keys: shared.thread_stats.iter().fold((0, 0), |(k, n), st| {
                (
                    k + st.blocking_keys.load(Ordering::Relaxed),
                    n + st.blocking_keys_nokey.load(Ordering::Relaxed),
                )
            }),
            recent_max_input: st.recent_max_input_bytes.get(),
            recent_max_output: st.recent_max_output_bytes.get(),
            qbuf_disconnections: st
                .client_query_buffer_limit_disconnections
                .load(Ordering::Relaxed),
            obuf_disconnections: st
                .client_output_buffer_limit_disconnections
                .load(Ordering::Relaxed),
            maxmemory: shared.tunables.maxmemory_bytes.load(Ordering::Relaxed),
            maxmemory_policy: shared
                .config
                .read()
                .ok()
                .and_then(|c| c.get("maxmemory-policy"))
                .unwrap_or_else(|| "noeviction".to_string()),
            cmdstats,
            mem: AllocStats::read(),
            peak: crate::alloc_stats::peak_allocated(),
            startup: shared.startup_allocated_bytes,
            client_bytes: crate::cmd::memory::client_buffer_bytes(shared),
            system_memory: total_system_memory(),
            rates: [
                shared.instant.per_sec(Metric::Commands),
                shared.instant.per_sec(Metric::NetInput),
                shared.instant.per_sec(Metric::NetOutput),
            ],
            cpu: cpu_times(),
            aof: AofInfo::read(&shared.tunables.aof),
        }
    }
}

/// INFO memory `mem_allocator`.
const ALLOCATOR: &str = if cfg!(feature = "jemalloc") {
    "jemalloc-5.3.0"
} else {
    "libc"
};

/// `lru_clock`: seconds of the Unix time, modulo 2^24 (Redis's LRU clock
/// at its 1000 ms resolution; `getLRUClock`, redis/src/evict.c).
fn lru_clock(now_usec: u128) -> u64 {
    ((now_usec / 1_000_000) as u64) & ((1 << 24) - 1)
}

/// `total_system_memory`: the host's memory (`MemTotal` of
/// `/proc/meminfo`), bytes; 0 where unknown, as Redis prints it.
fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let kb = t.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
            kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// `(system, user)` CPU seconds used by the process.
fn cpu_times() -> (f64, f64) {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; RUSAGE_SELF is a valid `who`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (secs(ru.ru_stime), secs(ru.ru_utime))
}

/// `1.23M`-style size as Redis's `bytesToHuman` prints it.
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: &[(f64, &str)] = &[
        (1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0, "P"),
        (1024.0 * 1024.0 * 1024.0 * 1024.0, "T"),
        (1024.0 * 1024.0 * 1024.0, "G"),
        (1024.0 * 1024.0, "M"),
        (1024.0, "K"),
    ];
    let f = n as f64;
    for (size, unit) in UNITS {
        if f >= *size {
            return format!("{:.2}{unit}", f / size);
        }
    }
    format!("{n}B")
}

/// `Linux 6.1.0 x86_64`-style OS description.
fn os_name() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let kind = read("/proc/sys/kernel/ostype");
    let kind = if kind.is_empty() {
        std::env::consts::OS.to_string()
    } else {
        kind
    };
    format!(
        "{kind} {} {}",
        read("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH
    )
}

/// Build the INFO text for `wanted` sections.
fn render(wanted: &[&str], s: &Snapshot, shards: &[ShardInfo]) -> Bytes {
    let mut out = String::new();
    for (n, name) in wanted.iter().enumerate() {
        if n > 0 {
            out.push_str("\r\n");
        }
        render_section(&mut out, name, s, shards);
    }
    Bytes::from(out)
}

fn render_section(out: &mut String, name: &str, s: &Snapshot, shards: &[ShardInfo]) {
    // `write!` into a String cannot fail.
    macro_rules! line {
        ($($arg:tt)*) => {{
            let _ = write!(out, $($arg)*);
            out.push_str("\r\n");
        }};
    }
    let sum = |f: fn(&ShardInfo) -> u64| shards.iter().map(f).sum::<u64>();
    match name {
        "server" => {
            line!("# Server");
            line!("redis_version:{REDIS_COMPAT_VERSION}");
            line!("shardstream_version:{}", env!("CARGO_PKG_VERSION"));
            line!("redis_git_sha1:00000000");
            line!("redis_git_dirty:0");
            line!("redis_mode:standalone");
            line!("os:{}", os_name());
            line!("arch_bits:{}", usize::BITS);
            // Rust's `Instant` reads CLOCK_MONOTONIC.
            line!("monotonic_clock:POSIX clock_gettime");
            line!("multiplexing_api:epoll");
            line!("process_id:{}", std::process::id());
            line!("process_supervised:{}", s.supervised);
            line!("run_id:{}", s.run_id);
            line!("tcp_port:{}", s.port);
            line!("server_time_usec:{}", s.now_usec);
            line!("uptime_in_seconds:{}", s.uptime_s);
            line!("uptime_in_days:{}", s.uptime_s / 86400);
            line!("hz:{}", s.hz);
            line!("configured_hz:{}", s.hz);
            line!("lru_clock:{}", lru_clock(s.now_usec));
            line!(
                "executable:{}",
                std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            line!("config_file:{}", s.config_file);
            // Shard threads do their own I/O: no I/O threads.
            line!("io_threads_active:0");
        }
        "clients" => {
            line!("# Clients");
            line!("connected_clients:{}", s.connected_clients);
            line!("cluster_connections:0");
            line!("maxclients:{}", s.maxclients);
            line!("client_recent_max_input_buffer:{}", s.recent_max_input);
            line!("client_recent_max_output_buffer:{}", s.recent_max_output);
            line!("blocked_clients:{}", s.blocked_clients);
            line!("tracking_clients:0");
            line!("total_blocking_keys:{}", s.blocking_keys.0);
            line!("total_blocking_keys_on_nokey:{}", s.blocking_keys.1);
        }
        "memory" => {
            line!("# Memory");
            let m = &s.mem;
            let per_db: Vec<(u64, u64)> = {
                let ndb = shards.iter().map(|i| i.dbs.len()).max().unwrap_or(0);
                (0..ndb)
                    .map(|db| {
                        let at = |i: &ShardInfo| i.dbs.get(db).copied().unwrap_or_default();
                        (
                            shards.iter().map(|i| at(i).keys).sum(),
                            shards.iter().map(|i| at(i).expires).sum(),
                        )
                    })
                    .collect()
            };
            let o = Overhead::of(m.allocated, s.startup, s.client_bytes, &per_db);
            let peak = s.peak.max(m.allocated);
            let signed = |a: u64, b: u64| a as i64 - b as i64;
            line!("used_memory:{}", m.allocated);
            line!("used_memory_human:{}", bytes_to_human(m.allocated));
            line!("used_memory_rss:{}", m.rss);
            line!("used_memory_rss_human:{}", bytes_to_human(m.rss));
            line!("used_memory_peak:{peak}");
            line!("used_memory_peak_human:{}", bytes_to_human(peak));
            line!(
                "used_memory_peak_perc:{:.2}%",
                ratio(m.allocated * 100, peak)
            );
            line!("used_memory_overhead:{}", o.total);
            line!("used_memory_startup:{}", o.startup);
            line!("used_memory_dataset:{}", o.dataset);
            line!("used_memory_dataset_perc:{:.2}%", o.dataset_percent());
            line!("allocator_allocated:{}", m.allocated);
            line!("allocator_active:{}", m.active);
            line!("allocator_resident:{}", m.resident);
            line!("total_system_memory:{}", s.system_memory);
            line!(
                "total_system_memory_human:{}",
                bytes_to_human(s.system_memory)
            );
            line!("number_of_cached_scripts:{}", s.scripting.0);
            line!("number_of_functions:{}", s.scripting.1);
            line!("number_of_libraries:{}", s.scripting.2);
            line!("maxmemory:{}", s.maxmemory);
            line!("maxmemory_human:{}", bytes_to_human(s.maxmemory));
            line!("maxmemory_policy:{}", s.maxmemory_policy);
            line!("allocator_frag_ratio:{:.2}", ratio(m.active, m.allocated));
            line!("allocator_frag_bytes:{}", signed(m.active, m.allocated));
            line!("allocator_rss_ratio:{:.2}", ratio(m.resident, m.active));
            line!("allocator_rss_bytes:{}", signed(m.resident, m.active));
            line!("rss_overhead_ratio:{:.2}", ratio(m.rss, m.resident));
            line!("rss_overhead_bytes:{}", signed(m.rss, m.resident));
            line!("mem_fragmentation_ratio:{:.2}", ratio(m.rss, m.allocated));
            line!("mem_fragmentation_bytes:{}", signed(m.rss, m.allocated));
            // No replicas, replication backlog or AOF rewrite buffer here.
            line!("mem_not_counted_for_evict:0");
            line!("mem_replication_backlog:0");
            line!("mem_total_replication_buffers:0");
            line!("mem_clients_slaves:0");
            line!("mem_clients_normal:{}", o.clients);
            line!("mem_cluster_links:0");
            line!("mem_aof_buffer:0");
            line!("mem_allocator:{ALLOCATOR}");
            line!("active_defrag_running:0");
            line!("lazyfree_pending_objects:0");
            line!("lazyfreed_objects:0");
        }
        "persistence" => {
            line!("# Persistence");
            line!("loading:0");
            line!("async_loading:0");
            line!(
                "rdb_changes_since_last_save:{}",
                shards.iter().map(|i| i.dirty).sum::<u64>()
            );
            line!("rdb_bgsave_in_progress:0");
            line!("rdb_last_bgsave_status:ok");
            let a = &s.aof;
            let status = |ok: bool| if ok { "ok" } else { "err" };
            line!("aof_enabled:{}", u8::from(a.enabled));
            line!(
                "aof_rewrite_in_progress:{}",
                u8::from(a.rewrites_in_progress > 0)
            );
            line!("aof_rewrite_scheduled:0");
            line!(
                "aof_last_rewrite_time_sec:{}",
                if a.last_rewrite_time_ms < 0 {
                    -1
                } else {
                    a.last_rewrite_time_ms / 1000
                }
            );
            line!("aof_current_rewrite_time_sec:-1");
            line!("aof_last_bgrewrite_status:{}", status(a.last_rewrite_ok));
            line!("aof_rewrites:{}", a.rewrites);
            line!("aof_rewrites_consecutive_failures:0");
            line!("aof_last_write_status:{}", status(a.write_ok));
            line!("aof_last_cow_size:0");
            if a.enabled {
                line!("aof_current_size:{}", a.current_size);
                line!("aof_base_size:{}", a.base_size);
                line!("aof_pending_rewrite:0");
                line!("aof_buffer_length:0");
                line!("aof_pending_bio_fsync:0");
                line!("aof_delayed_fsync:{}", a.delayed_fsync);
            }
        }
        "stats" => {
            line!("# Stats");
            line!("total_connections_received:{}", s.connections);
            line!("total_commands_processed:{}", s.commands);
            line!("instantaneous_ops_per_sec:{}", s.rates[0] as u64);
            line!("total_net_input_bytes:{}", s.net_in);
            line!("total_net_output_bytes:{}", s.net_out);
            line!("total_net_repl_input_bytes:0");
            line!("total_net_repl_output_bytes:0");
            line!("instantaneous_input_kbps:{:.2}", s.rates[1] / 1024.0);
            line!("instantaneous_output_kbps:{:.2}", s.rates[2] / 1024.0);
            line!("instantaneous_input_repl_kbps:0.00");
            line!("instantaneous_output_repl_kbps:0.00");
            line!("rejected_connections:{}", s.rejected);
            line!("expired_keys:{}", sum(|i| i.expired_keys));
            line!("evicted_keys:{}", s.evicted_keys);
            line!("evicted_clients:0");
            line!("keyspace_hits:{}", sum(|i| i.keyspace_hits));
            line!("keyspace_misses:{}", sum(|i| i.keyspace_misses));
            line!("pubsub_channels:0");
            line!("pubsub_patterns:0");
            // Errors from an AOF load or a master's stream: none reach a
            // client here (Redis 7.0's field, always present).
            line!("unexpected_error_replies:0");
            line!("total_error_replies:{}", s.errors);
            line!("total_reads_processed:{}", s.reads);
            line!("total_writes_processed:{}", s.writes);
            line!(
                "client_query_buffer_limit_disconnections:{}",
                s.qbuf_disconnections
            );
            line!(
                "client_output_buffer_limit_disconnections:{}",
                s.obuf_disconnections
            );
        }
        "replication" => {
            line!("# Replication");
            line!("role:master");
            line!("connected_slaves:0");
            line!("master_failover_state:no-failover");
            line!("master_replid:{}", s.run_id);
            line!("master_replid2:0000000000000000000000000000000000000000");
            line!("master_repl_offset:0");
            line!("second_repl_offset:-1");
            line!("repl_backlog_active:0");
        }
        "cpu" => {
            line!("# CPU");
            line!("used_cpu_sys:{:.6}", s.cpu.0);
            line!("used_cpu_user:{:.6}", s.cpu.1);
            line!("used_cpu_sys_children:0.000000");
            line!("used_cpu_user_children:0.000000");
        }
        "modules" => line!("# Modules"),
        "commandstats" => {
            line!("# Commandstats");
            for (name, calls, failed, rejected, usec) in &s.cmdstats {
                let per_call = if *calls > 0 {
                    *usec as f64 / *calls as f64
                } else {
                    0.0
                };
                line!(
                    "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}"
                );
            }
        }
        "latencystats" => {
            line!("# Latencystats");
            for (name, h) in &s.latencystats {
                let fields: Vec<String> = s
                    .percentiles
                    .iter()
                    .map(|p| format!("p{p}={:.3}", h.value_at_percentile(*p) as f64 / 1000.0))
                    .collect();
                line!("latency_percentiles_usec_{name}:{}", fields.join(","));
            }
        }
        "errorstats" => {
            line!("# Errorstats");
            for (name, count) in &s.errorstats {
                line!("errorstat_{name}:count={count}");
            }
        }
        "cluster" => {
            line!("# Cluster");
            line!("cluster_enabled:{}", u8::from(s.cluster));
        }
        "keyspace" => {
            line!("# Keyspace");
            let ndb = shards.iter().map(|i| i.dbs.len()).max().unwrap_or(0);
            for db in 0..ndb {
                let at = |i: &ShardInfo| i.dbs.get(db).copied().unwrap_or_default();
                let keys: u64 = shards.iter().map(|i| at(i).keys).sum();
                let expires: u64 = shards.iter().map(|i| at(i).expires).sum();
                // Each shard's average weighted by its keys with a TTL.
                let ttl_keys: u128 = shards.iter().map(|i| u128::from(at(i).ttl_keys)).sum();
                let ttl_sum: u128 = shards
                    .iter()
                    .map(|i| u128::from(at(i).ttl_keys) * u128::from(at(i).avg_ttl_ms))
                    .sum();
                let avg_ttl = ttl_sum.checked_div(ttl_keys).unwrap_or(0);
                if keys > 0 {
                    // `subexpiry` (Redis 7.4+): keys with hash fields that
                    // expire; shardstream has no hashes.
                    line!("db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl},subexpiry=0");
                }
            }
        }
        "streamlatency" => {
            line!("# Streamlatency");
            for l in &s.streamlatency {
                line!("{l}");
            }
        }
        "shardstream" => {
            line!("# Shardstream");
            line!("shards:{}", s.inbox_depth.len());
            let local: u64 = s.threads.iter().map(|t| t.1).sum();
            let remote: u64 = s.threads.iter().map(|t| t.2).sum();
            line!("local_commands:{local}");
            line!("remote_commands:{remote}");
            line!("local_hit_rate:{:.4}", hit_rate(local, remote));
            line!("handovers:{}", s.handovers);
            line!("cross_shard_transactions:{}", s.cross_shard_txs);
            line!("cross_shard_holds:{}", s.cross_shard_holds);
            line!("spin_hits:{}", s.spins.iter().map(|t| t.0).sum::<u64>());
            line!("spin_misses:{}", s.spins.iter().map(|t| t.1).sum::<u64>());
            for (n, depth) in s.inbox_depth.iter().enumerate() {
                let (ops, keys) = shards.get(n).map_or((0, 0), |i| (i.ops, i.keys()));
                let (conns, l, r) = s.threads.get(n).copied().unwrap_or_default();
                let (hits, misses) = s.spins.get(n).copied().unwrap_or_default();
                line!(
                    "shard{n}:ops={ops},keys={keys},inbox_depth={depth},connections={conns},local_commands={l},remote_commands={r},spin_hits={hits},spin_misses={misses}"
                );
            }
        }
        _ => {}
    }
}

/// Share of single-shard commands that ran on the connection's own shard
/// thread, with no hop (1.0 when there were none).
fn hit_rate(local: u64, remote: u64) -> f64 {
    if local + remote == 0 {
        1.0
    } else {
        local as f64 / (local + remote) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn section_selection() {
        assert!(!wanted_sections(&[]).contains(&"commandstats"));
        assert!(wanted_sections(&[]).contains(&"keyspace"));
        assert_eq!(wanted_sections(&[b("CPU"), b("server")]), ["server", "cpu"]);
        assert_eq!(wanted_sections(&[b("nope")]), Vec::<&str>::new());
        assert_eq!(wanted_sections(&[b("all")]).len(), SECTIONS.len() - 1);
        assert_eq!(wanted_sections(&[b("streamlatency")]), ["streamlatency"]);
    }

    #[test]
    fn shard_info_round_trips() {
        let i = ShardInfo {
            ops: 7,
            expired_keys: 1,
            keyspace_hits: 2,
            keyspace_misses: 3,
            dirty: 9,
            dbs: vec![
                DbInfo {
                    keys: 5,
                    expires: 2,
                    ttl_keys: 1,
                    avg_ttl_ms: 90_000,
                },
                DbInfo::default(),
            ],
        };
        assert_eq!(ShardInfo::from_reply(&i.to_reply()), i);
        assert_eq!(ShardInfo::from_reply(&Reply::Ok), ShardInfo::default());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(bytes_to_human(10), "10B");
        assert_eq!(bytes_to_human(1536), "1.50K");
        assert_eq!(bytes_to_human(3 * 1024 * 1024), "3.00M");
    }
}
