//! Starting and stopping a server: spawn pinned shard threads and IO threads,
//! and the state they share (configuration, client registry, counters).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::config::Config;
use crate::io::conn::ClientShared;
use crate::route::slot::{slot_of, ShardId};
use crate::shard::msg::{IoOutbox, ShardMsg};

/// Server-wide counters (INFO stats).
#[derive(Default)]
pub struct ServerStats {
    pub total_connections_received: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_net_input_bytes: AtomicU64,
    pub total_net_output_bytes: AtomicU64,
    pub total_error_replies: AtomicU64,
    /// Clients closed for exceeding `client-query-buffer-limit`.
    pub client_query_buffer_limit_disconnections: AtomicU64,
    /// Clients closed for exceeding `client-output-buffer-limit`.
    pub client_output_buffer_limit_disconnections: AtomicU64,
    /// Largest query buffer seen in the last 4 to 8 seconds, bytes
    /// (INFO `client_recent_max_input_buffer`).
    pub recent_max_input_bytes: PeakWindow,
    /// Largest output buffer seen in the last 4 to 8 seconds, bytes
    /// (INFO `client_recent_max_output_buffer`).
    pub recent_max_output_bytes: PeakWindow,
    /// `used_memory` as last sampled by an IO thread (refreshed at most every
    /// millisecond while `maxmemory` is set), bytes.
    pub used_memory_cached_bytes: AtomicU64,
}

/// A maximum over a sliding window of two periods: `observe` raises the
/// current period's peak, `rotate` (called once a period) starts a new one.
#[derive(Default)]
pub struct PeakWindow {
    current: AtomicU64,
    previous: AtomicU64,
}

impl PeakWindow {
    /// Record a value seen now.
    pub fn observe(&self, v: u64) {
        if v > self.current.load(Ordering::Relaxed) {
            self.current.fetch_max(v, Ordering::Relaxed);
        }
    }

    /// Start a new period; the peak of the one just ended stays visible for one more.
    pub fn rotate(&self) {
        let cur = self.current.swap(0, Ordering::Relaxed);
        self.previous.store(cur, Ordering::Relaxed);
    }

    /// Largest value observed in this period and the previous one.
    pub fn get(&self) -> u64 {
        self.current
            .load(Ordering::Relaxed)
            .max(self.previous.load(Ordering::Relaxed))
    }
}

/// Per-command counters for INFO commandstats: one row of atomics per command
/// table row (subcommands included), found by the row's static name, so
/// counting a call takes no lock and allocates nothing.
pub struct CmdStats {
    /// Lowercase names (`get`, `client|list`), by row index.
    names: Vec<String>,
    index: HashMap<&'static str, usize, BuildHasherDefault<crate::cmd::table::NameHasher>>,
    calls: Vec<AtomicU64>,
    failed: Vec<AtomicU64>,
    rejected: Vec<AtomicU64>,
}

impl CmdStats {
    fn new() -> CmdStats {
        let mut rows: Vec<&'static str> = Vec::new();
        for spec in crate::cmd::table::all_specs() {
            rows.push(spec.name);
            rows.extend(spec.subcommands.iter().map(|s| s.name));
        }
        let zeros = || rows.iter().map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        CmdStats {
            names: rows.iter().map(|n| n.to_ascii_lowercase()).collect(),
            index: rows.iter().enumerate().map(|(i, n)| (*n, i)).collect(),
            calls: zeros(),
            failed: zeros(),
            rejected: zeros(),
        }
    }

    /// Row index of a table row's name (`"GET"`, `"CLIENT|LIST"`).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Lowercase name of row `i` (`CLIENT LIST cmd=`).
    pub fn name(&self, i: usize) -> &str {
        self.names.get(i).map(String::as_str).unwrap_or("NULL")
    }

    /// `(name, calls, failed_calls, rejected_calls)` of every command used so far, by name.
    pub fn snapshot(&self) -> Vec<(String, u64, u64, u64)> {
        let mut out: Vec<_> = (0..self.names.len())
            .map(|i| {
                (
                    self.names[i].clone(),
                    self.calls[i].load(Ordering::Relaxed),
                    self.failed[i].load(Ordering::Relaxed),
                    self.rejected[i].load(Ordering::Relaxed),
                )
            })
            .filter(|(_, c, f, r)| c + f + r > 0)
            .collect();
        out.sort();
        out
    }

    /// Zero every counter (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for v in [&self.calls, &self.failed, &self.rejected] {
            for c in v {
                c.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// State shared by every IO thread (never by shards' data).
pub struct Shared {
    /// Effective configuration; `CONFIG SET` changes it.
    pub config: RwLock<Config>,
    /// Number of shards (fixed for the server's life).
    pub shards: u16,
    /// Which shard owns each slot (a cluster node splits only its own slots).
    pub slot_map: Arc<crate::route::slot::SlotMap>,
    /// Number of databases (fixed for the server's life).
    pub databases: usize,
    /// Shard inboxes, indexed by shard id.
    pub shard_tx: Vec<Sender<ShardMsg>>,
    /// IO threads' reply channels and wakers, indexed by IO thread.
    pub io: Vec<IoOutbox>,
    /// Connected clients by id.
    pub clients: Mutex<HashMap<u64, Arc<ClientShared>>>,
    pub next_client_id: AtomicU64,
    pub stats: ServerStats,
    /// Calls per command table row (INFO commandstats).
    pub cmdstats: CmdStats,
    pub started: Instant,
    /// Address actually bound (port resolved when 0 was asked).
    pub addr: SocketAddr,
    /// 40 hex characters, fixed for the process life (INFO `run_id`, CLUSTER MYID).
    pub run_id: String,
    pub shutdown: AtomicBool,
    /// Settings shards read at run time; CONFIG SET updates them.
    pub tunables: Arc<crate::config::Tunables>,
    /// Clients parked in XREAD/XREADGROUP BLOCK (INFO clients `blocked_clients`).
    pub blocked_clients: AtomicU64,
    /// Multi-node cluster topology (`cluster-config`); `None` is a one-node
    /// cluster serving every slot, with no redirections.
    pub cluster: Option<crate::cluster::Topology>,
}

impl Shared {
    /// The shard owning `key`.
    pub fn shard_of(&self, key: &[u8]) -> ShardId {
        self.slot_map.shard(slot_of(key))
    }

    /// Milliseconds since the server started.
    pub fn uptime_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Ask every thread to stop.
    pub fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        for io in &self.io {
            let _ = io.waker.wake();
        }
    }

    /// Whether `maxmemory` is set and the last sampled `used_memory` exceeds it
    /// (DENYOOM commands are then refused).
    pub fn over_maxmemory(&self) -> bool {
        let max = self.tunables.maxmemory_bytes.load(Ordering::Relaxed);
        max > 0 && self.stats.used_memory_cached_bytes.load(Ordering::Relaxed) > max
    }

    /// Count one call of the table row named `name` (`"GET"`, `"CLIENT|LIST"`;
    /// unknown names only count as processed), and whether it failed or was
    /// rejected before running.
    pub fn count_call(&self, name: &str, failed: bool, rejected: bool) {
        self.stats
            .total_commands_processed
            .fetch_add(1, Ordering::Relaxed);
        if let Some(i) = self.cmdstats.index_of(name) {
            let st = &self.cmdstats;
            if !rejected {
                st.calls[i].fetch_add(1, Ordering::Relaxed);
            }
            if failed {
                st.failed[i].fetch_add(1, Ordering::Relaxed);
            }
            if rejected {
                st.rejected[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A running server. Dropping it does not stop it: call [`ServerHandle::shutdown`].
pub struct ServerHandle {
    pub shared: Arc<Shared>,
    io_threads: Vec<JoinHandle<()>>,
    shard_threads: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Stop every thread and wait for them.
    pub fn shutdown(mut self) {
        self.shared.request_shutdown();
        self.join_all();
    }

    /// Wait until the server stops (SHUTDOWN command or [`Shared::request_shutdown`]).
    pub fn wait(mut self) {
        self.join_all();
    }

    /// IO threads stop first (they own the clients); then shards drain and exit.
    fn join_all(&mut self) {
        for t in self.io_threads.drain(..) {
            let _ = t.join();
        }
        for tx in &self.shared.shard_tx {
            let _ = tx.send(ShardMsg::Shutdown);
        }
        for t in self.shard_threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn random_hex40() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// Bind, spawn shard and IO threads, and return once the server accepts connections.
///
/// With `appendonly yes`, every shard first loads its append-only files (in
/// parallel, each on its own thread); connections are served only after all
/// have loaded.
///
/// # Errors
/// Binding fails; a `cluster-config` file is unreadable or invalid
/// (`InvalidInput`, with a message naming the file and line); or loading the
/// AOF fails (`InvalidData`, with a message naming the file and offset, or the
/// shard-count mismatch).
pub fn start(config: Config) -> io::Result<ServerHandle> {
    // A bad topology is reported before binding, so the message is about the file.
    let cluster = load_topology(&config, config.port)?;
    let listener = std::net::TcpListener::bind((config.bind.as_str(), config.port))?;
    let port = listener.local_addr()?.port();
    let cluster = match cluster {
        Some(t) if port == config.port => Some(t),
        _ => load_topology(&config, port)?,
    };
    start_with(config, listener, cluster)
}

/// [`start`] on an already bound listener (its port overrides `config.port`;
/// a cluster node finds its topology line by it). Lets a caller learn every
/// node's port before any node starts.
pub fn start_on(config: Config, listener: std::net::TcpListener) -> io::Result<ServerHandle> {
    let cluster = load_topology(&config, listener.local_addr()?.port())?;
    start_with(config, listener, cluster)
}

/// The `cluster-config` topology for a node listening on `port`, if configured.
///
/// # Errors
/// `InvalidInput` with a message naming the file and line.
fn load_topology(config: &Config, port: u16) -> io::Result<Option<crate::cluster::Topology>> {
    let Some(path) = &config.cluster_config else {
        return Ok(None);
    };
    crate::cluster::Topology::load(path, &config.bind, port)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

fn start_with(
    config: Config,
    listener: std::net::TcpListener,
    cluster: Option<crate::cluster::Topology>,
) -> io::Result<ServerHandle> {
    if config.appendonly {
        crate::aof::manifest::check_shard_count(&config.dir, config.shards.max(1))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    }
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let shards = config.shards.max(1);
    let io_threads = config.io_threads.max(1);
    let databases = config.databases.max(1);

    let cores = if config.pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };

    let mut shard_tx = Vec::new();
    let mut shard_rx = Vec::new();
    for _ in 0..shards {
        let (tx, rx) = crossbeam_channel::unbounded();
        shard_tx.push(tx);
        shard_rx.push(rx);
    }
    let mut io_parts = Vec::new();
    let mut outboxes = Vec::new();
    for _ in 0..io_threads {
        let poll = mio::Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), crate::io::WAKER)?);
        let (tx, rx) = crossbeam_channel::unbounded();
        let parked = Arc::new(AtomicBool::new(false));
        outboxes.push(IoOutbox {
            tx,
            waker,
            parked: parked.clone(),
        });
        io_parts.push((poll, rx, parked));
    }

    let tunables = Arc::new(crate::config::Tunables::from_config(&config));
    let slot_map = Arc::new(match &cluster {
        Some(topology) => crate::route::slot::SlotMap::balanced(shards, |s| {
            topology.is_local(crate::route::slot::Slot(s))
        }),
        None => crate::route::slot::SlotMap::uniform(shards),
    });
    let shared = Arc::new(Shared {
        slot_map: slot_map.clone(),
        tunables: tunables.clone(),
        config: RwLock::new(Config {
            port: addr.port(),
            ..config
        }),
        shards,
        databases,
        shard_tx,
        io: outboxes.clone(),
        clients: Mutex::new(HashMap::new()),
        next_client_id: AtomicU64::new(1),
        stats: ServerStats::default(),
        cmdstats: CmdStats::new(),
        started: Instant::now(),
        addr,
        run_id: random_hex40(),
        shutdown: AtomicBool::new(false),
        blocked_clients: AtomicU64::new(0),
        cluster,
    });

    let mut shard_threads = Vec::new();
    let (ready_tx, ready_rx) = crossbeam_channel::unbounded();
    let dir = shared
        .config
        .read()
        .map(|c| c.dir.clone())
        .unwrap_or_default();
    for (i, rx) in shard_rx.into_iter().enumerate() {
        let seed = crate::shard::ShardSeed {
            id: ShardId(i as u16),
            shards,
            databases,
            core: (!cores.is_empty()).then(|| cores[i % cores.len()]),
            inbox: rx,
            outboxes: outboxes.clone(),
            tunables: tunables.clone(),
            slot_map: slot_map.clone(),
            dir: dir.clone(),
            ready: ready_tx.clone(),
        };
        shard_threads.push(crate::shard::spawn_shard(seed)?);
    }
    drop(ready_tx);
    let loading = Instant::now();
    let mut load_error = None;
    let mut loaded = crate::aof::load::LoadStats::default();
    for _ in 0..shards {
        match ready_rx.recv() {
            Ok(Ok(st)) => {
                loaded.records += st.records;
                loaded.bytes += st.bytes;
            }
            Ok(Err(e)) => {
                load_error.get_or_insert(e);
            }
            Err(_) => {
                load_error.get_or_insert("a shard thread exited while loading".into());
            }
        }
    }
    if let Some(e) = load_error {
        for tx in &shared.shard_tx {
            let _ = tx.send(ShardMsg::Shutdown);
        }
        for t in shard_threads {
            let _ = t.join();
        }
        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
    }
    if loaded.records > 0 {
        eprintln!(
            "shardstream: loaded {} AOF records ({} bytes) in {:.3} s",
            loaded.records,
            loaded.bytes,
            loading.elapsed().as_secs_f64()
        );
    }
    let mut io_threads = Vec::new();
    for (i, (poll, rx, parked)) in io_parts.into_iter().enumerate() {
        let l = listener.try_clone()?;
        io_threads.push(crate::io::spawn_io(
            i as u16,
            poll,
            l,
            rx,
            parked,
            shared.clone(),
        )?);
    }
    Ok(ServerHandle {
        shared,
        io_threads,
        shard_threads,
    })
}
