//! The `shardstream` binary: redis-server's command line → configuration →
//! log, pidfile and server; it waits for SIGINT/SIGTERM or SHUTDOWN.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use shardstream::cmdline::{self, Invocation, Startup};

fn main() {
    // A panic in any shard thread or the acceptor would leave a half-dead server whose
    // clients hang: log it and exit non-zero instead. (server::start installs
    // the same for server threads when the library is embedded.)
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        log::error!("fatal: a thread panicked; exiting");
        std::process::exit(shardstream::server::PANIC_EXIT_CODE);
    }));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let startup = match cmdline::parse(&args) {
        Ok(Invocation::Help) => {
            print!("{}", cmdline::USAGE);
            return;
        }
        Ok(Invocation::Version) => {
            println!("shardstream v={}", env!("CARGO_PKG_VERSION"));
            return;
        }
        Ok(Invocation::Run(s)) => *s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    std::process::exit(run(startup));
}

/// Start the server, wait for a stop request, stop it. Returns the exit status.
fn run(startup: Startup) -> i32 {
    let Startup {
        mut config,
        config_file,
        warnings,
    } = startup;
    if let Err(e) = shardstream::logging::init(&config) {
        eprintln!("shardstream: {e}");
        return 1;
    }
    let pid = std::process::id();
    log::warn!("oO0OoO0OoO0Oo shardstream is starting oO0OoO0OoO0Oo");
    log::warn!(
        "shardstream version={}, bits={}, pid={pid}, just started",
        env!("CARGO_PKG_VERSION"),
        usize::BITS
    );
    match &config_file {
        Some(f) => log::warn!("Configuration loaded from {}", f.display()),
        None => log::warn!(
            "Warning: no config file specified, using the default config. In order to specify a config file use shardstream /path/to/redis.conf"
        ),
    }
    for w in &warnings {
        log::warn!("{w}");
    }
    if !adjust_open_files_limit(&mut config) {
        return 1;
    }
    let pidfile = config.pidfile.clone();
    let banner = Banner::of(&config);
    // As redis-server, the pid file is written before the data loads, and
    // a signal while it loads removes it.
    if let Some(path) = &pidfile {
        if let Err(e) = std::fs::write(path, format!("{pid}\n")) {
            log::warn!("Failed to write PID file {}: {e}", path.display());
        }
    }
    let remove_pidfile = || {
        if let Some(path) = &pidfile {
            log::info!("Removing the pid file.");
            let _ = std::fs::remove_file(path);
        }
    };
    // Watch the signals before loading: a signal while the append only
    // file loads stops the server cleanly too.
    let signals = watch_signals(config.unixsocket.clone(), pidfile.clone());
    let handle = match shardstream::server::start(config) {
        Ok(h) => h,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            log::warn!("Fatal error loading the DB: {e}. Exiting.");
            remove_pidfile();
            return 1;
        }
        Err(e) => {
            log::warn!("{e}, exiting.");
            remove_pidfile();
            return 1;
        }
    };
    let shared = handle.shared.clone();
    // From here a signal shuts the server down gracefully.
    signals.serving(&shared);
    banner.log(&handle);
    notify_supervisor(&banner.supervised);

    // Sleep until SHUTDOWN or a signal: no periodic wake-up, which on a
    // small host would preempt the shard threads (redis-server's main
    // thread has none either).
    shared.wait_shutdown_request();
    if !signals.received() {
        // A signal's line was logged when it came.
        log::warn!("User requested shutdown...");
    }
    handle.shutdown();
    if banner.appendonly {
        let unflushed = shared
            .stats
            .aof_unflushed_at_shutdown
            .load(Ordering::SeqCst);
        if unflushed == 0 {
            log::info!(
                "Append only files flushed and fsynced on all {} shards.",
                banner.shards
            );
        } else {
            log::warn!(
                "Append only files NOT fully flushed on {unflushed} of {} shards: the last writes may be lost.",
                banner.shards
            );
        }
    } else {
        log::info!("appendonly no: no append only file to flush.");
    }
    remove_pidfile();
    log::warn!("shardstream is now ready to exit, bye bye...");
    0
}

/// What the `signals` thread knows: the server once it serves (`None`
/// while the append only file loads), and whether a signal asked for the
/// shutdown.
#[derive(Default)]
struct SignalState {
    shared: std::sync::Mutex<Option<Arc<shardstream::server::Shared>>>,
    received: AtomicBool,
}

/// Handle to the `signals` thread's state, for the main thread.
struct SignalWatch(Arc<SignalState>);

impl SignalWatch {
    /// The server is up: from now on a signal asks it to shut down.
    fn serving(&self, shared: &Arc<shardstream::server::Shared>) {
        *lock(&self.0.shared) = Some(shared.clone());
    }

    /// Whether SIGINT or SIGTERM (rather than SHUTDOWN) asked for the shutdown.
    fn received(&self) -> bool {
        self.0.received.load(Ordering::SeqCst)
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Handle signals as redis-server does (`setupSignalHandlers`,
/// `sigShutdownHandler` in Redis's server.c):
/// - SIGINT or SIGTERM asks for a graceful shutdown (clients closed, append
///   only files flushed), logged as "Received SIGTERM scheduling
///   shutdown...";
/// - a SIGINT once a shutdown is under way (the second Ctrl-C) logs "You
///   insist... exiting now." and exits at once with status 1;
/// - while the append only file loads (until the server is up), either
///   signal logs "Received shutdown signal during loading, scheduling
///   shutdown.", removes the pid file and the Unix socket, and exits with
///   status 0 (nothing was served yet; the files are left as they are, as
///   after a crash, which loading recovers from);
/// - SIGHUP is ignored.
///
/// A thread blocks in `signal_hook`'s iterator for this: it wakes only when
/// a signal arrives.
fn watch_signals(
    unixsocket: Option<std::path::PathBuf>,
    pidfile: Option<std::path::PathBuf>,
) -> SignalWatch {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let state = Arc::new(SignalState::default());
    let unwatched = |e: std::io::Error| {
        log::warn!("Cannot watch SIGINT/SIGTERM: {e}; only SHUTDOWN stops the server.");
    };
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        Ok(s) => s,
        Err(e) => {
            unwatched(e);
            return SignalWatch(state);
        }
    };
    let st = state.clone();
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGHUP {
                    continue;
                }
                let Some(shared) = lock(&st.shared).clone() else {
                    log::warn!("Received shutdown signal during loading, scheduling shutdown.");
                    for path in [&unixsocket, &pidfile].into_iter().flatten() {
                        let _ = std::fs::remove_file(path);
                    }
                    log::warn!("shardstream is now ready to exit, bye bye...");
                    std::process::exit(0);
                };
                let stopping = shared.shutdown.load(Ordering::SeqCst);
                if stopping && sig == SIGINT {
                    log::warn!("You insist... exiting now.");
                    std::process::exit(1);
                }
                let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                log::warn!("Received {name} scheduling shutdown...");
                if !stopping {
                    st.received.store(true, Ordering::SeqCst);
                    shared.request_shutdown();
                }
            }
        });
    if let Err(e) = spawned {
        unwatched(e);
    }
    SignalWatch(state)
}

/// Make room for `maxclients` clients under the open files limit, as
/// redis-server does at start (see [`shardstream::nofile::fit`]); if the
/// limit stays short, lower `maxclients` to fit and say so with Redis's log
/// lines, so that clients past the limit get "-ERR max number of clients
/// reached" instead of an `accept` that fails. False (after logging why)
/// when not even the server's own descriptors fit.
fn adjust_open_files_limit(config: &mut shardstream::config::Config) -> bool {
    use shardstream::nofile::{fit, reserved_fds, Fit};
    let reserved = reserved_fds(config.shards);
    let needed = config.maxclients as u64 + reserved;
    match fit(config.maxclients, config.shards) {
        // `fit` logged a raise.
        Fit::Enough | Fit::Raised { .. } => {}
        Fit::Short {
            limit,
            maxclients,
            error,
        } => {
            log::warn!(
                "You requested maxclients of {} requiring at least {needed} max file descriptors.",
                config.maxclients
            );
            if let Some(e) = error {
                log::warn!(
                    "Server can't set maximum open files to {needed} because of OS error: {e}."
                );
            }
            log::warn!(
                "Current maximum open files is {limit}. maxclients has been reduced to {maxclients} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
            );
            config.maxclients = maxclients;
        }
        Fit::TooLow { limit } => {
            log::warn!(
                "Your current 'ulimit -n' of {limit} is not enough for the server to start. Please increase your open file limit to at least {}. Exiting.",
                reserved + 1
            );
            return false;
        }
        Fit::Unknown(e) => {
            config.maxclients = 1024u64.saturating_sub(reserved).max(1) as usize;
            log::warn!(
                "Unable to obtain the current NOFILE limit ({e}), assuming 1024 and setting the max clients configuration accordingly."
            );
        }
    }
    true
}

/// What the start banner says about the configuration.
struct Banner {
    shards: u16,
    dir: String,
    appendonly: bool,
    appendfsync: &'static str,
    supervised: String,
}

impl Banner {
    fn of(c: &shardstream::config::Config) -> Banner {
        Banner {
            shards: c.shards,
            dir: std::fs::canonicalize(&c.dir)
                .unwrap_or_else(|_| c.dir.clone())
                .display()
                .to_string(),
            appendonly: c.appendonly,
            appendfsync: c.appendfsync.name(),
            supervised: c.supervised.clone(),
        }
    }

    fn log(&self, handle: &shardstream::server::ServerHandle) {
        let port = handle.shared.addr.port();
        let mode = if handle.shared.cluster.is_some() {
            "cluster"
        } else {
            "standalone"
        };
        log::info!(
            "Running mode={mode}, port={port}, shards={}, pid={}.",
            self.shards,
            std::process::id()
        );
        log::info!(
            "dir={}, appendonly={}, appendfsync={}",
            self.dir,
            if self.appendonly { "yes" } else { "no" },
            self.appendfsync
        );
        match &handle.shared.cluster {
            Some(cluster) => {
                let st = cluster.lock();
                let me = st.me();
                let ranges: Vec<String> = st
                    .ranges_of(&me.id)
                    .iter()
                    .map(|(a, b)| format!("{a}-{b}"))
                    .collect();
                log::info!(
                    "Cluster node {} ({} nodes known), serving slots {} ({} slots) over {} shards; cluster bus port {}",
                    me.id,
                    st.nodes.len(),
                    if ranges.is_empty() { "none".to_string() } else { ranges.join(",") },
                    st.slot_count(&me.id),
                    self.shards,
                    me.cport
                );
            }
            None => log::info!(
                "Single node serving all 16384 hash slots over {} shards",
                self.shards
            ),
        }
        if port != 0 {
            log::info!("Ready to accept connections tcp on {}", handle.addr());
        }
        if let Some(path) = handle.unixsocket() {
            log::info!("Ready to accept connections unix on {}", path.display());
        }
    }
}

/// Tell systemd the server is ready (`supervised systemd`, or `auto` under
/// systemd): `READY=1` on the datagram socket `$NOTIFY_SOCKET`.
///
/// # Source
/// `redisCommunicateSystemd`, redis/src/server.c.
fn notify_supervisor(supervised: &str) {
    if supervised != "systemd" && supervised != "auto" {
        return;
    }
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        if supervised == "systemd" {
            log::warn!("systemd supervision requested, but NOTIFY_SOCKET not found");
        }
        return;
    };
    let msg = b"STATUS=Ready to accept connections\nREADY=1\n";
    let sent = std::os::unix::net::UnixDatagram::unbound().and_then(|s| {
        use std::os::linux::net::SocketAddrExt;
        let path = path.to_string_lossy();
        match path.strip_prefix('@') {
            // An abstract socket name (systemd's usual NOTIFY_SOCKET).
            Some(name) => {
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
                s.send_to_addr(msg, &addr)
            }
            None => s.send_to(msg, &*path),
        }
    });
    match sent {
        Ok(_) => log::info!("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."),
        Err(e) => log::warn!("Can't notify systemd ({e})"),
    }
}
