//! Shard threads: one per core, each running its own event loop over the
//! connections handed to it and owning one [`ShardDb`](db::ShardDb) — Redis's
//! event loop, once per core.
//!
//! One iteration of the loop ([`ShardThread::turn`]):
//! 1. `poll` for socket readiness (parked only when there is nothing to do);
//!    read every readable socket, decode RESP, admit and parse its commands
//!    ([`crate::io::process_input`]) into this iteration's batch per shard;
//! 2. take the inbox: requests other shard threads sent for keys owned here,
//!    replies to this thread's remote requests, new and handed-over connections;
//! 3. run this shard's own batch **inline** — with `--shards 1` no command
//!    ever crosses a thread — and serve readers parked on keys that became ready;
//! 4. send one batch message per other shard (waking it only if it is parked);
//! 5. AOF group commit: this iteration's effects are written, and under
//!    `appendfsync always` fdatasynced, once, before any of its replies leave
//!    (a failed write under `always` ends the process, as Redis 7 does);
//! 6. release replies: to other threads' connections as one message each,
//!    to this thread's connections into their in-order reply queues;
//! 7. write every touched socket once — readers served in this iteration
//!    first, then the others newest first, as Redis writes them (see
//!    `write_order`); hand over connections whose commands keep landing on
//!    one other shard.
//!
//! The thread parks in `poll` only after setting its `parked` flag and
//! re-checking its inbox; senders wake it (an eventfd write through
//! `mio::Waker`) only when that flag is set, so a busy thread is never woken
//! by a syscall. Right after it sent requests or replies to another shard
//! thread it keeps polling for up to `shard-spin-us` (20 µs), yielding the
//! core each round, because the answer usually comes sooner than a park and
//! a wake-up would take; otherwise an idle thread never spins.

pub mod blocking;
pub mod db;
pub mod delayed;
pub mod hold;
pub mod msg;
pub mod watch;

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Receiver;
use mio::{Events, Interest, Poll, Token};

use crate::io::conn::{Conn, ConnIdHasher, ConnMap, Then};
use crate::io::{self, Limits, Outgoing, HANDOVER_STREAK, KILL_EPOCH};
use crate::reply::Reply;
use crate::route::router::{start_block, start_fan};
use crate::route::slot::ShardId;
use crate::server::Shared;
use db::ShardDb;
use msg::{Job, ReplyTo, ShardMsg};

thread_local! {
    /// The shard this thread runs (`None` off shard threads).
    static CURRENT_SHARD: std::cell::Cell<Option<u16>> = const { std::cell::Cell::new(None) };
}

/// The shard whose thread is calling: connection commands run on the thread
/// owning the connection, which coordinates the cross-shard work they start
/// ([`hold`]). `None` off shard threads (unit tests).
pub fn current_shard() -> Option<ShardId> {
    CURRENT_SHARD.with(|c| c.get()).map(ShardId)
}

/// Wall clock in ms since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Token of a shard thread's waker.
pub const WAKER: Token = Token(usize::MAX);
/// How often the shard runs active expiry, serves polling waiters and ticks
/// the AOF, ms, before the first tick; afterwards `1000 / hz`
/// ([`crate::config::Tunables::timer_period_ms`], Redis's default `hz` 10).
const EXPIRE_PERIOD_MS: u64 = 100;
/// Most keys one active-expiry pass removes before returning to the loop.
const EXPIRE_BUDGET: usize = 1000;
/// Delayed stream entries delivered per loop iteration at most (more due
/// ones keep the poll timeout at zero until they are all in).
const DELAYED_BUDGET: usize = 10_000;
/// Longest the thread sleeps in `poll`, so kills and shutdown are noticed.
const TICK: Duration = Duration::from_millis(100);
/// How often the connection housekeeping runs (idle `timeout`, peak windows).
const CRON: Duration = Duration::from_secs(1);
/// Length of one period of INFO's `client_recent_max_*_buffer` windows.
const PEAK_PERIOD: Duration = Duration::from_secs(4);
/// Most times a monitor's output is refilled with waiting lines and written
/// in one iteration (each at most [`crate::io::conn::MONITOR_OUTPUT_BYTES`]),
/// so a busy monitor does not keep its thread from the other connections.
const MONITOR_WRITE_ROUNDS: usize = 4;
/// Shortest interval between two `used_memory` samples while `maxmemory` is set.
const MEM_SAMPLE: Duration = Duration::from_millis(1);

/// The `Send` seed of a shard: everything needed to start it on its own thread.
pub struct ShardSeed {
    pub id: ShardId,
    pub shards: u16,
    pub databases: usize,
    pub core: Option<core_affinity::CoreId>,
    /// The thread's event loop; its waker is registered as [`WAKER`].
    pub poll: Poll,
    pub inbox: Receiver<ShardMsg>,
    /// Set while the thread sleeps in `poll` (see [`msg::Outbox`]).
    pub parked: Arc<AtomicBool>,
    pub shared: Arc<Shared>,
    /// Data directory (append-only files).
    pub dir: std::path::PathBuf,
    /// Told once the shard has loaded its AOF and serves, or why it cannot.
    pub ready: crossbeam_channel::Sender<Result<crate::aof::load::LoadStats, String>>,
    /// Where the shards' loaders meet to judge cross-shard transaction
    /// blocks at the end of their files (shared by every shard).
    pub tx_sync: Arc<crate::aof::load::TxSync>,
}

/// Start a shard thread; it loads its AOF, reports on `seed.ready`, then runs
/// its event loop until the server shuts down.
pub fn spawn_shard(seed: ShardSeed) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name(format!("shard-{}", seed.id.0))
        .spawn(move || {
            if let Some(core) = seed.core {
                core_affinity::set_for_current(core);
            }
            crate::server::count_on_block(usize::from(seed.id.0));
            CURRENT_SHARD.with(|c| c.set(Some(seed.id.0)));
            let mut db = ShardDb::new(seed.id, seed.shards, seed.databases);
            db.tunables = seed.shared.tunables.clone();
            db.slot_map = seed.shared.slot_map.clone();
            db.scripts = seed.shared.scripts.clone();
            db.monitors = seed.shared.monitors.clone();
            db.slowlog = seed.shared.slowlog.clone();
            let aof = match load_aof(&mut db, &seed) {
                Ok((aof, stats)) => {
                    let _ = seed.ready.send(Ok(stats));
                    aof
                }
                Err(e) => {
                    let _ = seed.ready.send(Err(e));
                    return;
                }
            };
            let shards = usize::from(seed.shards);
            let limits = Limits::read(&seed.shared, None);
            let mut t = ShardThread {
                me: seed.id.0,
                poll: seed.poll,
                conns: ConnMap::default(),
                inbox: seed.inbox,
                parked: seed.parked,
                shared: seed.shared,
                out: Outgoing::new(seed.id.0, shards),
                replies: (0..shards).map(|_| Vec::new()).collect(),
                touched: Vec::new(),
                quiet: Vec::new(),
                read_again: Vec::new(),
                scratch: vec![0u8; io::READ_CHUNK_BYTES].into_boxed_slice(),
                kill_epoch: 0,
                blocked_ids: HashSet::default(),
                monitor_ids: Vec::new(),
                limits,
                config_epoch: 0,
                last_cron: Instant::now(),
                last_peak_rotate: Instant::now(),
                last_mem_sample: Instant::now(),
                nothing_to_evict: false,
                db,
                aof,
                next_expire_ms: now_ms() + EXPIRE_PERIOD_MS,
                panic_after: debug_panic_after_ops(),
                now_ms: now_ms(),
                stopping: false,
                cluster_version: 0,
                spin_until: None,
            };
            t.run();
            if !t.aof.shutdown(&mut t.db) {
                t.shared
                    .stats
                    .aof_unflushed_at_shutdown
                    .fetch_add(1, Ordering::SeqCst);
            }
        })
}

/// Debug builds only: `SHARDSTREAM_DEBUG_PANIC_AFTER_OPS=<n>` makes a shard
/// panic when it has applied `n` commands, so tests can prove that a
/// panicking shard ends the process (exit 70, clients see EOF) instead of
/// hanging its clients. Like Redis's `DEBUG PANIC`; always off in release
/// builds (the variable is not even read there).
fn debug_panic_after_ops() -> Option<u64> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var("SHARDSTREAM_DEBUG_PANIC_AFTER_OPS")
        .ok()?
        .parse()
        .ok()
}

/// Load this shard's append-only files (when `appendonly yes`) and open its
/// writer. Runs on the shard thread, so shards load in parallel.
fn load_aof(
    db: &mut ShardDb,
    seed: &ShardSeed,
) -> Result<(crate::aof::writer::ShardAof, crate::aof::load::LoadStats), String> {
    use crate::aof::{load, manifest::Manifest, writer::ShardAof};
    let manifest = Manifest::read(&seed.dir, seed.id.0).inspect_err(|_| {
        if seed.shared.tunables.aof.is_enabled() {
            // Meet the other loaders anyway (see below), then fail.
            seed.tx_sync.meet(usize::from(seed.shards), seed.id.0, 0);
        }
    })?;
    let mut aof = ShardAof::new(
        seed.id.0,
        seed.shards,
        seed.dir.clone(),
        seed.shared.tunables.clone(),
        manifest.clone(),
    );
    let mut stats = load::LoadStats::default();
    if seed.shared.tunables.aof.is_enabled() {
        let loaded = match &manifest {
            Some(m) => load::load_shard(db, &seed.dir, m).map(Some),
            None => Ok(None),
        };
        // Every shard meets the others, even one that failed (it reports
        // nothing committed), so no loader waits forever.
        let max_commit = match &loaded {
            Ok(Some((_, tx))) => tx.max_commit,
            _ => 0,
        };
        let committed = seed
            .tx_sync
            .meet(usize::from(seed.shards), seed.id.0, max_commit);
        if let Some((st, tx)) = loaded? {
            stats = st;
            if let Some(tail) = tx.pending {
                let committed = |c: u16| committed.get(&c).copied().unwrap_or(0);
                load::resolve_tail(db, tail, committed, &mut stats)?;
            }
            db.tx_seq = tx.max_commit;
            db.stats = Default::default();
        }
        aof.open(&mut db.aof).map_err(|e| {
            format!(
                "cannot open the append only file in {}: {e}",
                seed.dir.display()
            )
        })?;
    }
    Ok((aof, stats))
}

/// One shard thread's state: its event loop, its connections, its data.
struct ShardThread {
    me: u16,
    poll: Poll,
    conns: ConnMap<Conn>,
    inbox: Receiver<ShardMsg>,
    parked: Arc<AtomicBool>,
    shared: Arc<Shared>,
    /// Requests collected this iteration, per destination shard.
    out: Outgoing,
    /// Replies produced this iteration, per shard thread owning the connection.
    replies: Vec<Vec<(ReplyTo, Reply)>>,
    /// Connections with something to write or to close.
    touched: Vec<u64>,
    /// Connections read this iteration with no reply to write yet (a
    /// parked blocking read, replies still due from another shard): they
    /// go through [`Self::flush_touched`] too, but their place in the write
    /// order is that of their first reply, if one comes (see [`newest_first`]).
    quiet: Vec<u64>,
    /// Connections that stopped reading at their per-iteration budget with
    /// input left in the socket: read again next iteration.
    read_again: Vec<u64>,
    /// Where sockets are read into before the bytes join a query buffer
    /// (allocated once: zeroing a fresh buffer per read cost more than the read).
    scratch: Box<[u8]>,
    kill_epoch: u64,
    /// Connections parked in a blocking read (their deadlines are checked every iteration).
    blocked_ids: HashSet<u64, BuildHasherDefault<ConnIdHasher>>,
    /// This thread's connections in MONITOR mode (their channels are
    /// looked at every iteration, and before the thread sleeps).
    monitor_ids: Vec<u64>,
    limits: Limits,
    /// `Shared::config_epoch` when `limits` was read.
    config_epoch: u64,
    last_cron: Instant,
    last_peak_rotate: Instant,
    last_mem_sample: Instant,
    /// This shard's last eviction found nothing `maxmemory-policy` may
    /// evict (counted in `ServerStats::shards_with_nothing_to_evict`).
    nothing_to_evict: bool,
    db: ShardDb,
    aof: crate::aof::writer::ShardAof,
    next_expire_ms: u64,
    panic_after: Option<u64>,
    /// Wall clock snapshot of this loop iteration, ms since the Unix epoch.
    now_ms: u64,
    /// A [`ShardMsg::Shutdown`] arrived.
    stopping: bool,
    /// The cluster slot map version last looked at (blocked clients).
    cluster_version: u64,
    /// Until when the thread keeps polling rather than parking, after it
    /// sent requests or replies to another shard thread (`shard-spin-us`).
    spin_until: Option<Instant>,
}

/// What a client blocked on keys gets from `CLIENT UNBLOCK <id> ERROR`
/// (redis/src/networking.c).
const UNBLOCKED_ERROR: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";

/// Order the connections touched in one loop iteration for writing: each
/// once, the one touched first last. Redis queues a client for writing
/// when it gets its first reply of the iteration, at the head of the list
/// it then writes from, so a reader served by this iteration's XADD is
/// written before the producer whose XADD served it. [`write_order`] goes
/// one step further for served readers.
/// # Source
/// `putClientInPendingWriteQueue` (head insertion) and
/// `handleClientsWithPendingWrites`, redis/src/networking.c (7.x/8.x).
fn newest_first(ids: &mut Vec<u64>) {
    if ids.len() < 2 {
        return;
    }
    let mut first: Vec<(u64, usize)> = ids.iter().enumerate().map(|(at, &id)| (id, at)).collect();
    // By id, then position: the dedup keeps each id's first touch.
    first.sort_unstable();
    first.dedup_by_key(|&mut (id, _)| id);
    first.sort_unstable_by_key(|&(_, at)| std::cmp::Reverse(at));
    ids.clear();
    ids.extend(first.iter().map(|&(id, _)| id));
}

impl ShardThread {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            if self.stopping || self.shared.shutdown.load(Ordering::SeqCst) {
                self.close_all();
                return;
            }
            if self.spin_until.is_some_and(|t| Instant::now() >= t) {
                self.spin_until = None;
                self.thread_stats()
                    .spin_misses
                    .fetch_add(1, Ordering::Relaxed);
            }
            let timeout = self.poll_timeout();
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    log::warn!("shard-{}: poll failed: {e}", self.me);
                    return;
                }
            }
            if self.spin_until.is_some() && (!events.is_empty() || !self.inbox.is_empty()) {
                self.spin_until = None;
                self.thread_stats()
                    .spin_hits
                    .fetch_add(1, Ordering::Relaxed);
            }
            self.parked.store(false, Ordering::SeqCst);
            self.now_ms = now_ms();
            let epoch = self.shared.config_epoch.load(Ordering::Relaxed);
            if epoch != self.config_epoch {
                self.config_epoch = epoch;
                self.limits = Limits::read(&self.shared, Some(self.limits));
            }
            self.sample_memory();
            for id in std::mem::take(&mut self.read_again) {
                self.read(id, false);
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {}
                    Token(t) => {
                        let id = t as u64;
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read(id, ev.is_read_closed() || ev.is_error());
                        }
                        if ev.is_writable() {
                            self.touched.push(id);
                        }
                    }
                }
            }
            self.turn();
        }
    }

    /// How long `poll` may sleep: not at all with work queued, nor for
    /// `shard-spin-us` after sending to another shard thread; otherwise
    /// until the next BLOCK deadline or timer, at most [`TICK`]. Sets `parked` first
    /// and re-checks the inbox, so a sender either sees the flag and wakes us
    /// or its message is seen here.
    fn poll_timeout(&self) -> Duration {
        let me = usize::from(self.me);
        if !self.inbox.is_empty()
            || !self.out.batches[me].is_empty()
            || !self.read_again.is_empty()
            || self.db.blocking.has_ready()
            || !self.db.coordinate.is_empty()
            || self.monitor_work()
        {
            return Duration::ZERO;
        }
        // Just sent work to another shard thread: its answer usually comes
        // within microseconds, sooner than a park and wake-up would take.
        // Poll again at once, but give the core to anything else runnable.
        if self.spin_until.is_some_and(|t| Instant::now() < t) {
            thread::yield_now();
            return Duration::ZERO;
        }
        self.parked.store(true, Ordering::SeqCst);
        // Feeders of a monitor's channel wake this thread only when they
        // see `parked`: lines sent before it was set are seen here.
        if !self.inbox.is_empty() || self.monitor_work() {
            return Duration::ZERO;
        }
        let now = now_ms();
        let timer = Duration::from_millis(self.next_expire_ms.saturating_sub(now));
        // Wake for the earliest delayed stream entry (XSCHEDULE).
        let due = self
            .db
            .delayed
            .next_due_ms()
            .map_or(TICK, |d| Duration::from_millis(d.saturating_sub(now)));
        self.next_deadline()
            .unwrap_or(TICK)
            .min(TICK)
            .min(timer)
            .min(due)
    }

    /// Everything after the sockets were read (see the module doc).
    fn turn(&mut self) {
        let now = self.now_ms;
        // Accesses outside requests (delayed deliveries) count per turn.
        self.db.begin_command();
        self.drain_inbox(now);
        // Left by a transaction's job that ran inline after the last turn's
        // replies went out (a pipeline resumed in `flush_touched`).
        self.coordinate_pending(now);
        let me = usize::from(self.me);
        let local = std::mem::take(&mut self.out.batches[me]);
        if !local.is_empty() {
            self.run_jobs(local, now);
        }
        // Delayed stream entries now due go in before readers are served.
        if self.db.delayed.next_due_ms().is_some_and(|d| d <= now) {
            delayed::deliver_due(&mut self.db, now, DELAYED_BUDGET);
        }
        let timer = now >= self.next_expire_ms;
        if timer {
            if self.db.active_expire_enabled {
                self.db.active_expire(now, EXPIRE_BUDGET);
            }
            self.db.blocking.sweep();
            self.db.blocking.end_stale_rerun_holds(now);
            // Expired streams and CLAIM readers waiting for entries to idle
            // are served on the timer too.
            self.db.blocking.mark_polling_ready();
            // `hz` (CONFIG SET hz) sets the period; EXPIRE_PERIOD_MS at hz 10.
            self.next_expire_ms = now + self.shared.tunables.timer_period_ms();
            if self.me == 0 {
                self.shared.sample_metrics();
            }
        }
        if self.db.blocking.has_ready() {
            self.serve_waiters(now);
        }
        // Waiters dropped after their timeout (inbox, sweep) go to SLOWLOG.
        log_slow_unblocked(&mut self.db, &self.shared);
        self.redirect_blocked();
        self.forward_jobs();
        self.send_batches();
        commit_round(&mut self.db, &mut self.aof);
        if timer || self.db.aof.rewrite_requested {
            // BGREWRITEAOF starts (files switched, data copied) before its
            // reply leaves, so INFO shows it in progress.
            self.aof.tick(&mut self.db, now);
        }
        self.release_replies();
        self.expire_blocked();
        self.touch_monitors();
        self.flush_touched();
        if self.out.batches[usize::from(self.me)].is_empty() {
            self.send_batches();
        }
        // Otherwise a resumed pipeline queued work here: the next turn runs
        // it first, then sends (a transaction coordinated here must hold its
        // shards before this connection's later requests reach them).
        self.publish_stats();
        // This iteration's command latencies (INFO latencystats).
        self.shared.cmdstats.flush_latency();
        let epoch = KILL_EPOCH.load(Ordering::SeqCst);
        if epoch != self.kill_epoch {
            self.kill_epoch = epoch;
            self.reap_killed();
        }
        if self.last_cron.elapsed() >= CRON {
            self.last_cron = Instant::now();
            self.cron();
        }
    }

    /// Read a readable connection and route what it sent.
    ///
    /// `closing`: the event said the peer closed (or the socket failed), so
    /// read until EOF rather than stopping at a short read.
    fn read(&mut self, id: u64, closing: bool) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.peer_closed |= closing;
        let read = io::read_conn(
            &self.shared,
            conn,
            self.limits.query_buffer_bytes,
            &mut self.scratch,
        );
        if read.more {
            self.read_again.push(id);
        }
        // This thread's own counters (a cache line no other thread writes),
        // counted as the bytes arrive so an INFO in them counts itself, as
        // in Redis.
        let st = &self.shared.thread_stats[usize::from(self.me)];
        st.net_input_bytes.fetch_add(read.bytes, Ordering::Relaxed);
        st.reads_processed.fetch_add(1, Ordering::Relaxed);
        self.shared
            .stats
            .recent_max_input_bytes
            .observe(conn.rbuf.len() as u64);
        conn.session
            .shared
            .last_interaction_ms
            .store(self.shared.uptime_ms(), Ordering::Relaxed);
        let mut exec = Exec::new(
            &mut self.db,
            &mut self.replies,
            &mut self.aof,
            &self.shared,
            self.now_ms,
            self.panic_after,
        );
        io::process_input(&self.shared, &mut self.out, conn, &self.limits, &mut exec);
        if conn.blocked.is_some() {
            self.blocked_ids.insert(id);
        }
        if conn.has_output() {
            self.touched.push(id);
        } else {
            self.quiet.push(id);
        }
        // A transaction's job that ran inline left its coordination here.
        self.coordinate_pending(self.now_ms);
    }

    /// Take every message waiting in the inbox.
    fn drain_inbox(&mut self, now: u64) {
        while let Ok(msg) = self.inbox.try_recv() {
            match msg {
                ShardMsg::Batch(jobs) => self.run_jobs(jobs, now),
                ShardMsg::Replies(replies) => {
                    for (to, reply) in replies {
                        self.deliver(to, reply, true);
                    }
                }
                ShardMsg::Accept(sock, addr) => self.accept(sock, addr),
                ShardMsg::Adopt(conn) => self.adopt(*conn),
                ShardMsg::Unblocked(conn) => self.db.blocking.forget_client(conn),
                ShardMsg::Shutdown => self.stopping = true,
            }
        }
    }

    /// Run requests on this shard's data, in order, queueing each reply for
    /// the thread that owns its connection, and serve the readers parked on
    /// keys each request made ready before the next request runs (Redis
    /// serves them after each command, so a pipelined XADD then XDEL, or a
    /// second reader's XREADGROUP, cannot take the entry from them).
    ///
    /// A job that asks to hold this shard for a cross-shard transaction
    /// (see [`hold`]) stops the batch: the shard runs only that
    /// transaction's operations until released, then goes on with the rest.
    fn run_jobs(&mut self, jobs: Vec<Job>, now: u64) {
        let mut jobs = jobs.into_iter().peekable();
        loop {
            let mut exec = self.exec(now);
            let mut held = None;
            let mut stopped = false;
            while let Some(job) = jobs.next() {
                if let Some((to, reply)) = exec.run(job) {
                    exec.queue_reply(to, reply);
                }
                exec.serve_waiters();
                held = exec.db.hold.take();
                // Transactions this shard coordinates run before the next
                // request — together when they come one after another.
                let coordinating = !exec.db.coordinate.is_empty();
                if held.is_some()
                    || (coordinating && !jobs.peek().is_some_and(|j| j.req.coordinates()))
                {
                    stopped = true;
                    break;
                }
            }
            self.coordinate_pending(now);
            if let Some(h) = held {
                self.held(h, now);
            }
            if !stopped {
                return;
            }
        }
    }

    /// Run the cross-shard transactions this shard coordinates that jobs
    /// left (see [`hold::Coordinate`]); each reply joins this iteration's.
    fn coordinate_pending(&mut self, now: u64) {
        if !self.db.coordinate.is_empty() {
            self.exec(now).coordinate();
        }
    }

    /// Held by a cross-shard transaction (see [`hold`]): ack, then run its
    /// operations until it releases this shard (or its coordinator goes
    /// away); commit their AOF effects before acking the release.
    fn held(&mut self, h: hold::Hold, now: u64) {
        let _ = h.ack.send(());
        while let Ok(op) = h.ops.recv() {
            match op {
                hold::TxOp::Begin(coordinator, seq) => self.db.aof.begin_tx(coordinator, seq),
                hold::TxOp::Apply(f) => f(&mut self.db),
                hold::TxOp::Prepare(done) => {
                    let wrote = self.db.aof.end_tx(false, false);
                    if wrote {
                        commit_round(&mut self.db, &mut self.aof);
                    }
                    let _ = done.send(wrote);
                }
                hold::TxOp::Release => break,
            }
        }
        // Released after prepare, nothing is left open; a coordinator gone
        // without committing (the server stopping) leaves its block aborted.
        self.db.aof.abort_tx();
        // What the transaction's commands and scripts ran here counts now,
        // not at this thread's next request (a CONFIG RESETSTAT between
        // would not clear it).
        self.shared.cmdstats.flush_script_calls();
        self.shared.cmdstats.flush_latency();
        self.serve_waiters(now);
    }

    /// The shard's data, ready to run requests at time `now`.
    fn exec(&mut self, now: u64) -> Exec<'_> {
        Exec::new(
            &mut self.db,
            &mut self.replies,
            &mut self.aof,
            &self.shared,
            now,
            self.panic_after,
        )
    }

    /// Serve the waiters of ready keys (Redis: `handleClientsBlockedOnKeys`).
    fn serve_waiters(&mut self, now: u64) {
        self.exec(now).serve_waiters();
    }

    /// A cluster node whose slot map changed answers the clients blocked
    /// here on keys of slots that left (see [`cluster_redirect`]).
    fn redirect_blocked(&mut self) {
        let Some(c) = &self.shared.cluster else {
            return;
        };
        let version = c.version();
        if version == self.cluster_version || self.db.blocking.is_empty() {
            self.cluster_version = version;
            return;
        }
        self.cluster_version = version;
        let view = c.view();
        // Only slots that left count here (a key of a migrating slot is
        // asked for elsewhere only when it is deleted: `serve_waiters`).
        let refused = self
            .db
            .blocking
            .redirect(&|key: &[u8]| cluster_redirect(&view, key, true));
        for (to, reply) in refused {
            if let Some(o) = self.replies.get_mut(usize::from(to.io)) {
                o.push((to, reply));
            }
        }
    }

    /// Queue the requests shard-side code handed on to other shards
    /// ([`ShardDb::forward`]), before the batches go out.
    fn forward_jobs(&mut self) {
        for (shard, db, reply_to, req) in std::mem::take(&mut self.db.forward) {
            if let Some(batch) = self.out.batches.get_mut(usize::from(shard.0)) {
                batch.push(Job {
                    req,
                    db: db as u16,
                    reply_to,
                    cmd: msg::NO_CMD,
                    argv: None,
                    reply_budget_bytes: u64::MAX,
                    no_touch: false,
                });
            }
        }
    }

    /// Send this iteration's requests for other shards, one message each.
    fn send_batches(&mut self) {
        let me = usize::from(self.me);
        let mut sent = false;
        for (i, batch) in self.out.batches.iter_mut().enumerate() {
            if i != me && !batch.is_empty() {
                // The next batch starts at this one's size: no regrowth.
                let next = Vec::with_capacity(batch.len());
                self.shared.threads[i].send(ShardMsg::Batch(std::mem::replace(batch, next)));
                sent = true;
            }
        }
        if sent {
            self.spin_after_send();
        }
    }

    /// This thread's counters in [`Shared::thread_stats`].
    fn thread_stats(&self) -> &crate::server::ThreadStats {
        &self.shared.thread_stats[usize::from(self.me)]
    }

    /// Keep polling for a while before parking: the shard thread just sent
    /// to will answer, or send more, shortly (see [`Self::poll_timeout`]).
    fn spin_after_send(&mut self) {
        let spin = self.shared.tunables.shard_spin();
        if !spin.is_zero() {
            self.spin_until = Some(Instant::now() + spin);
        }
    }

    /// After the group commit: replies for other threads' connections go out
    /// as one message per thread; this thread's own are delivered in place.
    fn release_replies(&mut self) {
        let me = usize::from(self.me);
        let mut sent = false;
        for i in 0..self.replies.len() {
            if i != me && !self.replies[i].is_empty() {
                let next = Vec::with_capacity(self.replies[i].len());
                let batch = std::mem::replace(&mut self.replies[i], next);
                self.shared.threads[i].send(ShardMsg::Replies(batch));
                sent = true;
            }
        }
        if sent {
            self.spin_after_send();
        }
        let mine = std::mem::take(&mut self.replies[me]);
        for (to, reply) in mine {
            self.deliver(to, reply, false);
        }
    }

    /// Put a reply (or one part of a fan-out's reply) into its connection's
    /// queue; a finished fan-out may start its next step (park the read, or
    /// run the second pass). `remote`: it came in another thread's reply
    /// message (see [`Conn::defer_write`]).
    fn deliver(&mut self, to: ReplyTo, reply: Reply, remote: bool) {
        let Some(conn) = self.conns.get_mut(&to.conn) else {
            return;
        };
        conn.answered |= remote;
        let row = conn.fan_row(to.seq);
        let then = conn.fill(to.seq, to.part, reply);
        if !conn.slow_timers.is_empty() {
            let parked = matches!(then, Some(Then::Block(_) | Then::Rerun));
            crate::io::finish_slow_timer(&self.shared, conn, to.seq, parked);
        }
        let mut release = None;
        if row != msg::NO_CMD {
            // A transaction's merge notes its failed commands (see
            // `note_failed`): EXEC is a fan-out with a row.
            self.shared.cmdstats.flush_failed();
            // A command over several shards failed as a whole (its merged
            // reply is an error): one failed call, as Redis counts it.
            if let Some(e) = conn.ready_error(to.seq) {
                self.shared.cmdstats.count_exec(row, 0, Some(e));
            }
        }
        match then {
            Some(Then::Block(plan)) => {
                start_block(
                    self.me,
                    &self.shared,
                    &mut self.out.batches,
                    conn,
                    to.seq,
                    plan,
                    // A read over several shards parks after a first pass:
                    // the command's row is the fan-out's.
                    row,
                );
                if conn.blocked.is_some() {
                    self.blocked_ids.insert(to.conn);
                }
            }
            Some(Then::Fan { parts, merge, then }) => start_fan(
                self.me,
                &mut self.out.batches,
                conn,
                to.seq,
                parts,
                merge,
                then.map(|t| *t),
                row,
            ),
            Some(Then::Rerun) => {
                if let Some(b) = conn.blocked.take() {
                    b.ticket.finish();
                    // The shards that did not wake it still hold its waiters.
                    release = Some(b.shards);
                    let argv = b.rerun.as_ref().map(|r| {
                        (
                            r.spec,
                            crate::route::router::rerun_argv(r, b.deadline, &b.ticket),
                        )
                    });
                    match argv {
                        Some((spec, argv)) => {
                            let routed = crate::route::router::route(
                                spec,
                                &argv,
                                &mut conn.session,
                                &self.shared,
                            );
                            crate::route::router::start_routed(
                                self.me,
                                &self.shared,
                                &mut self.out.batches,
                                conn,
                                to.seq,
                                routed,
                                b.row,
                            );
                        }
                        None => {
                            conn.fill(to.seq, 0, Reply::NullArray);
                        }
                    }
                }
                if conn.blocked.is_some() {
                    self.blocked_ids.insert(to.conn);
                } else {
                    self.blocked_ids.remove(&to.conn);
                }
            }
            None => {}
        }
        if let Some(shards) = release {
            self.release_waiters(to.conn, shards);
        }
        self.touched.push(to.conn);
    }

    /// The connection's thread ended client `conn`'s blocked read (timeout,
    /// CLIENT UNBLOCK, disconnect, a rerun): the shards it was parked on
    /// (`shards`, a bit per shard) drop its waiters now, so INFO's
    /// `total_blocking_keys` no longer counts them.
    fn release_waiters(&mut self, conn: u64, shards: u64) {
        for (i, thread) in self.shared.threads.iter().enumerate() {
            if shards & (1 << (i % 64)) == 0 {
                continue;
            }
            if i == usize::from(self.me) {
                self.db.blocking.forget_client(conn);
            } else {
                thread.send(ShardMsg::Unblocked(conn));
            }
        }
    }

    /// Serve a connection from the acceptor (or refuse it: `maxclients`).
    fn accept(&mut self, sock: io::socket::Socket, addr: io::socket::Endpoint) {
        match io::new_conn(&self.shared, sock, addr, self.me) {
            Some(conn) => self.adopt(conn),
            None => {
                self.shared.thread_conns[usize::from(self.me)].fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Register a connection's socket with this thread's `poll` and serve it
    /// (a new one, or one handed over with unread input).
    fn adopt(&mut self, mut conn: Conn) {
        let id = conn.session.id;
        conn.session.shared.thread.store(self.me, Ordering::SeqCst);
        if self
            .poll
            .registry()
            .register(&mut conn.sock, Token(id as usize), Interest::READABLE)
            .is_err()
        {
            if let Ok(mut c) = self.shared.clients.lock() {
                c.remove(&id);
            }
            self.shared.thread_conns[usize::from(self.me)].fetch_sub(1, Ordering::Relaxed);
            return;
        }
        conn.want_write = false;
        self.conns.insert(id, conn);
        // Input may have arrived while the socket was between threads.
        self.read(id, false);
    }

    /// Move a connection to shard thread `to`: its commands keep landing
    /// there, so they will run inline instead of hopping (Dragonfly calls
    /// this connection migration). Only called when [`Conn::can_hand_over`].
    fn hand_over(&mut self, id: u64, to: ShardId) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.sock);
        conn.streak = 0;
        self.blocked_ids.remove(&id);
        let me = usize::from(self.me);
        let t = usize::from(to.0);
        self.shared.thread_conns[me].fetch_sub(1, Ordering::Relaxed);
        self.shared.thread_conns[t].fetch_add(1, Ordering::Relaxed);
        self.shared
            .stats
            .conn_handovers
            .fetch_add(1, Ordering::Relaxed);
        self.shared.threads[t].send(ShardMsg::Adopt(Box::new(conn)));
    }

    /// Refresh the shared `used_memory` sample while `maxmemory` is set
    /// (reading allocator statistics per command would cost too much).
    fn sample_memory(&mut self) {
        if self.limits.maxmemory_bytes == 0 || self.last_mem_sample.elapsed() < MEM_SAMPLE {
            return;
        }
        self.last_mem_sample = Instant::now();
        let used = crate::alloc_stats::used_memory_bytes();
        self.shared
            .stats
            .used_memory_cached_bytes
            .store(used, Ordering::Relaxed);
        if used > self.limits.maxmemory_bytes {
            self.evict(used);
        }
    }

    /// Over `maxmemory` with an evicting `maxmemory-policy`: evict this
    /// shard's keys in small batches until the allocator reports memory
    /// under the limit or nothing is left to evict. Every shard thread
    /// does so for its own keys, so memory falls roughly in proportion.
    /// Tells the OOM gate when this shard has nothing the policy may evict
    /// (writes are then refused, as Redis does when eviction fails).
    ///
    /// # Source
    /// `performEvictions`, redis/src/evict.c (run there before each command;
    /// here once per loop iteration, at most every millisecond).
    ///
    /// Each shard frees its share of what is over the limit (by the evicted
    /// values' size) and then waits for the next sample: memory that
    /// eviction cannot give back (client buffers, allocator caches) must not
    /// make it empty the keyspace, as Redis stops once what it freed covers
    /// the excess.
    fn evict(&mut self, used: u64) {
        let policy = self.shared.tunables.eviction_policy();
        if policy == crate::config::EvictionPolicy::NoEviction {
            return;
        }
        let samples = self
            .shared
            .tunables
            .maxmemory_samples
            .load(Ordering::Relaxed);
        let now = now_ms();
        let over = used.saturating_sub(self.limits.maxmemory_bytes);
        let share = usize::try_from(over / u64::from(self.shared.shards.max(1)))
            .unwrap_or(usize::MAX)
            .max(1);
        let mut total = 0;
        let mut freed = 0usize;
        let mut stuck = false;
        for _ in 0..64 {
            let (n, bytes) = self.db.evict_bytes(policy, samples, now, 16, share - freed);
            total += n;
            freed = freed.saturating_add(bytes);
            if n == 0 {
                stuck = true;
                break;
            }
            let used = crate::alloc_stats::used_memory_bytes();
            self.shared
                .stats
                .used_memory_cached_bytes
                .store(used, Ordering::Relaxed);
            if used <= self.limits.maxmemory_bytes || freed >= share {
                break;
            }
        }
        if total > 0 {
            self.shared
                .stats
                .evicted_keys
                .fetch_add(total as u64, Ordering::Relaxed);
        }
        if stuck != self.nothing_to_evict {
            self.nothing_to_evict = stuck;
            let counter = &self.shared.stats.shards_with_nothing_to_evict;
            if stuck {
                counter.fetch_add(1, Ordering::Relaxed);
            } else {
                counter.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Publish this iteration's local/remote command counts for INFO.
    fn publish_stats(&mut self) {
        let st = &self.shared.thread_stats[usize::from(self.me)];
        // Recounted only when waiters came or went (at most a sweep period
        // late for a waiter whose client another shard served).
        if self.db.blocking.take_changed() {
            let (keys, nokey) = self.db.blocking.key_counts();
            st.blocking_keys.store(keys, Ordering::Relaxed);
            st.blocking_keys_nokey.store(nokey, Ordering::Relaxed);
        }
        let local = std::mem::take(&mut self.out.local_commands);
        let remote = std::mem::take(&mut self.out.remote_commands);
        if local > 0 {
            st.local_commands.fetch_add(local, Ordering::Relaxed);
        }
        if remote > 0 {
            st.remote_commands.fetch_add(remote, Ordering::Relaxed);
        }
    }

    /// Once a second: close clients over the soft output buffer limit for
    /// longer than its seconds (though no reply came since), close clients
    /// idle longer than `timeout` (never blocked ones or monitors, as Redis
    /// spares blocked clients and replicas), close MIGRATE sockets idle for
    /// 10 s, and turn the INFO peak windows over.
    ///
    /// # Source
    /// `clientsCron` (redis/src/server.c) with
    /// `closeClientOnOutputBufferLimitReached`; `clientsCronHandleTimeout`,
    /// redis/src/timeout.c; `migrateCloseTimedoutSockets`,
    /// redis/src/cluster.c.
    fn cron(&mut self) {
        self.db.migrate_sockets.close_idle(Instant::now());
        let output = self.limits.output;
        for (id, conn) in self.conns.iter_mut() {
            if conn.close_if_over_soft_limit(&output) {
                self.touched.push(*id);
            }
        }
        if self.me == 0 && self.last_peak_rotate.elapsed() >= PEAK_PERIOD {
            self.last_peak_rotate = Instant::now();
            self.shared.stats.recent_max_input_bytes.rotate();
            self.shared.stats.recent_max_output_bytes.rotate();
        }
        if self.limits.timeout_s == 0 {
            return;
        }
        let now_ms = self.shared.uptime_ms();
        let max_idle_ms = self.limits.timeout_s.saturating_mul(1000);
        let idle: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.blocked.is_none()
                    && c.session.monitor.is_none()
                    && c.slots.is_empty()
                    && now_ms.saturating_sub(
                        c.session.shared.last_interaction_ms.load(Ordering::Relaxed),
                    ) > max_idle_ms
            })
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            self.remove_conn(id);
        }
    }

    /// Whether one of this thread's monitors has lines it can take now, or
    /// must be closed (see [`Conn::monitor_work`]).
    fn monitor_work(&self) -> bool {
        self.monitor_ids
            .iter()
            .any(|id| self.conns.get(id).is_some_and(Conn::monitor_work))
    }

    /// Forget connections that left MONITOR mode or went away, and queue
    /// for writing the monitors with lines to take (or to close).
    fn touch_monitors(&mut self) {
        if self.monitor_ids.is_empty() {
            return;
        }
        let conns = &self.conns;
        self.monitor_ids
            .retain(|id| conns.get(id).is_some_and(|c| c.session.monitor.is_some()));
        for id in &self.monitor_ids {
            if conns.get(id).is_some_and(Conn::monitor_work) {
                self.touched.push(*id);
            }
        }
    }

    /// Time until the earliest BLOCK deadline, if any connection is blocked.
    fn next_deadline(&self) -> Option<Duration> {
        let now = Instant::now();
        self.blocked_ids
            .iter()
            .filter_map(|id| self.conns.get(id)?.blocked.as_ref()?.deadline)
            .min()
            .map(|d| d.saturating_duration_since(now))
    }

    /// Answer blocked reads whose BLOCK timeout passed with a null array,
    /// unless a shard claimed the ticket first (its reply is on the way),
    /// and those `CLIENT UNBLOCK` ended (see [`blocking::Ticket::unblock`]).
    fn expire_blocked(&mut self) {
        if self.blocked_ids.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut done = Vec::new();
        let mut ended = Vec::new();
        for id in &self.blocked_ids {
            let Some(conn) = self.conns.get_mut(id) else {
                done.push(*id);
                continue;
            };
            let Some(b) = &conn.blocked else {
                done.push(*id);
                continue;
            };
            let (seq, shards) = (b.seq, b.shards);
            if let Some(how) = b.ticket.take_unblocked() {
                let reply = match how {
                    blocking::Unblocked::Timeout => b.timeout_reply.clone(),
                    blocking::Unblocked::Error => {
                        // An error reply of the blocked command: one failed
                        // call and errorstat UNBLOCKED, as Redis counts it.
                        let e = crate::error::CmdError::msg(UNBLOCKED_ERROR);
                        self.shared.cmdstats.count_exec(b.row, 0, Some(&e));
                        Reply::Error(e)
                    }
                };
                conn.fill(seq, 0, reply);
                crate::io::finish_slow_timer(&self.shared, conn, seq, false);
                self.touched.push(*id);
                ended.push((*id, shards));
            } else if b.deadline.is_some_and(|d| d <= now) {
                // Noted before the claim: a shard may drop the waiter as
                // soon as the ticket fires. If a shard served it instead,
                // the note is never read (a served waiter is logged as
                // served).
                b.ticket.note_answered_by_timeout();
                if b.ticket.claim() {
                    conn.fill(seq, 0, b.timeout_reply.clone());
                    crate::io::finish_slow_timer(&self.shared, conn, seq, false);
                    ended.push((*id, shards));
                }
                self.touched.push(*id);
            }
        }
        for id in done {
            self.blocked_ids.remove(&id);
        }
        for (id, shards) in ended {
            self.release_waiters(id, shards);
        }
    }

    fn flush_touched(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        write_order(
            &mut touched,
            &mut self.quiet,
            &mut self.db.blocking.served_here,
        );
        let limits = self.limits;
        let now_ms = self.shared.uptime_ms();
        for id in touched.drain(..) {
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            let was_held = conn.hold_until.is_some();
            conn.encode_ready(Some(&limits.output));
            if conn.blocked.as_ref().is_some_and(|b| b.seq < conn.base_seq) {
                if let Some(b) = conn.blocked.take() {
                    b.ticket.finish();
                }
            }
            let resume = (was_held && conn.hold_until.is_none())
                || (conn.paused && conn.slots.len() < io::MAX_PENDING_REPLIES);
            if resume && (!conn.rbuf.is_empty() || conn.deferred.is_some()) {
                // A blocking command finished, or queued replies drained:
                // go on with the pipeline.
                conn.paused = false;
                let mut exec = Exec::new(
                    &mut self.db,
                    &mut self.replies,
                    &mut self.aof,
                    &self.shared,
                    self.now_ms,
                    self.panic_after,
                );
                io::process_input(&self.shared, &mut self.out, conn, &limits, &mut exec);
                conn.encode_ready(Some(&limits.output));
            }
            if conn.session.monitor.is_some() {
                if !self.monitor_ids.contains(&id) {
                    self.monitor_ids.push(id);
                }
                conn.take_lines(Some(&limits.output));
            }
            if let Some(pending) = conn.output_limit_hit.take() {
                self.shared
                    .stats
                    .recent_max_output_bytes
                    .observe(pending as u64);
                self.shared
                    .stats
                    .client_output_buffer_limit_disconnections
                    .fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "Client id={} addr={} closed for overcoming of output buffer limits ({pending} bytes pending).",
                    conn.session.id, conn.session.shared.addr
                );
            }
            self.shared
                .stats
                .recent_max_output_bytes
                .observe(conn.output_bytes() as u64);
            // When the rest of this pipeline's replies come back from another
            // shard in a moment, write them all then.
            let written = if conn.defer_write() {
                0
            } else {
                if conn.output_bytes() > 0 {
                    self.shared.thread_stats[usize::from(self.me)]
                        .writes_processed
                        .fetch_add(1, Ordering::Relaxed);
                }
                let mut written = io::write_conn(conn);
                // A monitor's lines keep coming: while its socket takes
                // them all, take more, a few rounds per iteration.
                let mut rounds = 1;
                while rounds < MONITOR_WRITE_ROUNDS
                    && conn.output_bytes() == 0
                    && conn.take_lines(Some(&limits.output))
                {
                    written += io::write_conn(conn);
                    rounds += 1;
                }
                // Ask for WRITABLE only while output is left over (as Redis
                // installs its write handler): otherwise every ACK on an
                // edge-triggered socket would wake the loop for nothing.
                let pending = conn.output_bytes() > 0 && !conn.dead;
                if pending != conn.want_write {
                    let interest = if pending {
                        Interest::READABLE | Interest::WRITABLE
                    } else {
                        Interest::READABLE
                    };
                    let token = Token(id as usize);
                    if self
                        .poll
                        .registry()
                        .reregister(&mut conn.sock, token, interest)
                        .is_ok()
                    {
                        conn.want_write = pending;
                    }
                }
                written
            };
            if written > 0 {
                conn.session
                    .shared
                    .last_interaction_ms
                    .store(now_ms, Ordering::Relaxed);
            }
            if written > 0 {
                self.shared.thread_stats[usize::from(self.me)]
                    .net_output_bytes
                    .fetch_add(written, Ordering::Relaxed);
            }
            conn.session
                .shared
                .omem_bytes
                .store(conn.output_bytes(), Ordering::Relaxed);
            conn.session
                .shared
                .qbuf_bytes
                .store(conn.rbuf.len(), Ordering::Relaxed);
            if conn.blocked.is_some() {
                self.blocked_ids.insert(id);
            }
            if conn.finished() {
                self.remove_conn(id);
            } else if conn.streak >= HANDOVER_STREAK && conn.can_hand_over() {
                let to = conn.streak_shard;
                self.hand_over(id, to);
            }
        }
        self.touched = touched;
    }

    fn remove_conn(&mut self, id: u64) {
        if let Some(mut conn) = self.conns.remove(&id) {
            let _ = self.poll.registry().deregister(&mut conn.sock);
            if let Some(b) = conn.blocked.take() {
                // Claiming makes every shard drop its waiter for this client.
                b.ticket.claim();
                b.ticket.finish();
                self.release_waiters(id, b.shards);
            }
            self.blocked_ids.remove(&id);
            if conn.session.monitor.take().is_some() {
                self.shared.monitors.detach(id);
                conn.session.shared.monitor.store(false, Ordering::Relaxed);
            }
            // Its watches go with it (the replies find no connection and are dropped).
            for shard in std::mem::take(&mut conn.session.watching) {
                let job = conn.job(self.me, 0, 0, watch::unwatch_req());
                self.out.batches[usize::from(shard.0)].push(job);
            }
            if let Ok(mut c) = self.shared.clients.lock() {
                c.remove(&id);
            }
            self.shared.thread_conns[usize::from(self.me)].fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn reap_killed(&mut self) {
        let killed: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.session.shared.killed.load(Ordering::SeqCst))
            .map(|(id, _)| *id)
            .collect();
        for id in killed {
            self.remove_conn(id);
        }
    }

    fn close_all(&mut self) {
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.encode_ready(None);
                io::write_conn(conn);
            }
            self.remove_conn(id);
        }
    }
}

/// A shard's data and this iteration's reply queues, borrowed to run requests.
struct Exec<'a> {
    db: &'a mut ShardDb,
    /// Replies per shard thread owning the connection; they leave after
    /// this iteration's group commit.
    replies: &'a mut [Vec<(ReplyTo, Reply)>],
    /// The shard's AOF writer (cross-shard transactions commit through it).
    aof: &'a mut crate::aof::writer::ShardAof,
    /// Server-wide counters (commandstats, latencystats, slowlog).
    shared: &'a Shared,
    now_ms: u64,
    panic_after: Option<u64>,
}

impl<'a> Exec<'a> {
    /// The shard's data and queues, borrowed from its thread (fields one by
    /// one, so the thread's connection map stays free to borrow).
    fn new(
        db: &'a mut ShardDb,
        replies: &'a mut [Vec<(ReplyTo, Reply)>],
        aof: &'a mut crate::aof::writer::ShardAof,
        shared: &'a Shared,
        now_ms: u64,
        panic_after: Option<u64>,
    ) -> Self {
        Exec {
            db,
            replies,
            aof,
            shared,
            now_ms,
            panic_after,
        }
    }

    /// Run one request; its reply, unless it parked (a blocking read).
    fn run(&mut self, job: Job) -> Option<(ReplyTo, Reply)> {
        let cx = msg::ExecCtx {
            db: usize::from(job.db),
            now_ms: self.now_ms,
            reply_to: job.reply_to,
            reply_budget_bytes: job.reply_budget_bytes,
            no_touch: job.no_touch,
        };
        // A TSC read (quanta) costs ~19 ns a pair here, `std::time::Instant`
        // ~46 ns: per command, for commandstats, SLOWLOG and latencystats.
        let started = quanta::Instant::now();
        let reply = msg::apply_as_client(job.req, self.db, &cx);
        let ns = started.elapsed().as_nanos() as u64;
        // The commands a script called (EVAL, FCALL, in EXEC too).
        self.shared.cmdstats.flush_script_calls();
        if matches!(reply, Reply::NoReply) {
            // A blocking read that parked: its call's latency sample comes
            // when it is served.
            self.shared.cmdstats.count_time(job.cmd, ns);
        } else {
            self.shared
                .cmdstats
                .count_exec(job.cmd, ns, reply.error_text());
        }
        if matches!(reply, Reply::NoReply) {
            // Parked: offered to SLOWLOG when it is over (`note_parked`).
            if let Some(argv) = job.argv.filter(|_| self.shared.slowlog.is_on()) {
                self.db.blocking.note_parked(job.reply_to.conn, argv, ns);
            }
        } else if self.shared.slowlog.is_slow(ns) {
            if let Some(argv) = &job.argv {
                log_slow(self.shared, argv, ns / 1000, job.reply_to.conn);
            }
        }
        self.db.stats.ops += 1;
        if self.panic_after.is_some_and(|n| self.db.stats.ops >= n) {
            panic!(
                "SHARDSTREAM_DEBUG_PANIC_AFTER_OPS reached on shard {}",
                self.db.id.0
            );
        }
        (!matches!(reply, Reply::NoReply)).then_some((job.reply_to, reply))
    }

    /// Run the cross-shard transactions jobs left on this shard (see
    /// [`hold::run_group`]), together, and queue their replies; then serve
    /// the readers they made ready here.
    fn coordinate(&mut self) {
        let group = std::mem::take(&mut self.db.coordinate);
        if group.is_empty() {
            return;
        }
        let stats = &self.shared.stats;
        stats.cross_shard_holds.fetch_add(1, Ordering::Relaxed);
        stats
            .cross_shard_txs
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        let aof = &mut *self.aof;
        let shared = self.shared;
        let stopping = || shared.shutdown.load(Ordering::SeqCst);
        let replies = hold::run_group(group, self.db, &mut |db| commit_round(db, aof), &stopping);
        // Commands cross-shard scripts called, counted before their replies leave.
        shared.cmdstats.flush_script_calls();
        for (to, reply) in replies {
            self.queue_reply(to, reply);
        }
        self.serve_waiters();
    }

    /// Queue a reply for the thread that owns its connection.
    fn queue_reply(&mut self, to: ReplyTo, reply: Reply) {
        if let Some(o) = self.replies.get_mut(usize::from(to.io)) {
            o.push((to, reply));
        }
    }

    /// Serve the waiters of keys the requests made ready (Redis:
    /// `handleClientsBlockedOnKeys`).
    fn serve_waiters(&mut self) {
        if !self.db.blocking.has_ready() {
            return;
        }
        let mut served = Vec::new();
        match &self.shared.cluster {
            Some(c) => {
                let view = c.view();
                let redirect = |key: &[u8], exists: bool| cluster_redirect(&view, key, exists);
                blocking::serve_ready(self.db, self.now_ms, &mut served, &redirect);
            }
            None => {
                blocking::serve_ready(self.db, self.now_ms, &mut served, &blocking::no_redirect)
            }
        }
        for (row, ns) in self.db.blocking.take_timings() {
            self.shared.cmdstats.count_exec(row, ns, None);
        }
        log_slow_unblocked(self.db, self.shared);
        for (to, reply) in served {
            // An unblocked reader's error (NOGROUP, UNBLOCKED...) is an
            // error reply like any other (INFO errorstats).
            // Only XREADGROUP answers an error when unblocked (NOGROUP,
            // WRONGTYPE, UNBLOCKED): it counts as its failed call, as Redis
            // counts the failed re-execution of the blocked command.
            if let Some(e) = reply.error_text() {
                let row = self.shared.cmdstats.index_of("XREADGROUP");
                let row = row.map_or(msg::NO_CMD, |i| i as u32);
                self.shared.cmdstats.count_exec(row, 0, Some(e));
            }
            if to.io == self.db.id.0 {
                self.db.blocking.served_here.push(to.conn);
            }
            self.queue_reply(to, reply);
        }
    }
}

impl io::RunLocal for Exec<'_> {
    fn run_local(&mut self, out: &mut Outgoing, conn: &mut Conn, job: Job) {
        // Requests queued for this shard earlier in the iteration (fan-out
        // parts, parked reads) run first, so this shard sees them in order.
        // A cross-shard transaction among them (a job that only leaves its
        // coordination) runs before the next of them, as in `run_jobs`:
        // consecutive ones together, then the rest.
        let me = usize::from(job.reply_to.io);
        let mut queued = std::mem::take(&mut out.batches[me]).into_iter().peekable();
        while let Some(next) = queued.next() {
            if let Some((to, reply)) = self.run(next) {
                self.queue_reply(to, reply);
            }
            self.serve_waiters();
            if !queued.peek().is_some_and(|j| j.req.coordinates()) {
                self.coordinate();
            }
        }
        self.coordinate();
        if let Some((to, reply)) = self.run(job) {
            // A single-shard request's slot: filling it never starts a next step.
            let _ = conn.fill(to.seq, to.part, reply);
        }
        self.serve_waiters();
    }
}

/// What a cluster node answers a client blocked on `key` instead of serving
/// it, if anything: `CLUSTERDOWN` when the cluster is down or the slot is
/// unserved, `MOVED` when the slot went to another node (and is not being
/// imported here), `ASK` when the slot is migrating and the key already left.
///
/// # Source
/// `clusterRedirectBlockedClientIfNeeded`, redis/src/cluster.c (7.x); ASK as
/// Redis 7.2+ answers a woken blocked command re-run through
/// `getNodeByQuery` after MIGRATE deleted its key.
fn cluster_redirect(
    view: &crate::cluster::SlotView,
    key: &[u8],
    exists: bool,
) -> Option<crate::error::CmdError> {
    use crate::cluster::SlotRoute;
    use crate::error::CmdError;
    if !view.ok {
        return Some(CmdError::msg("CLUSTERDOWN The cluster is down"));
    }
    let slot = crate::route::slot::slot_of(key).0;
    match view.route(slot) {
        SlotRoute::Here | SlotRoute::Importing(_) => None,
        SlotRoute::Migrating(to) if !exists => Some(CmdError::msg(format!("ASK {slot} {to}"))),
        SlotRoute::Migrating(_) => None,
        SlotRoute::Moved(addr) => Some(CmdError::Moved {
            slot,
            addr: addr.to_string(),
        }),
        SlotRoute::Unserved => Some(CmdError::msg("CLUSTERDOWN Hash slot not served")),
    }
}

/// Offer SLOWLOG the blocking commands that ended on this shard (see
/// [`blocking::Waiters::note_parked`]).
fn log_slow_unblocked(db: &mut ShardDb, shared: &Shared) {
    if !db.blocking.has_slow() {
        return;
    }
    for (conn, argv, ns) in db.blocking.take_slow() {
        if shared.slowlog.is_slow(ns) {
            log_slow(shared, &argv, ns / 1000, conn);
        }
    }
}

/// Record a slow command in SLOWLOG with its client's address and name.
fn log_slow(shared: &Shared, argv: &[bytes::Bytes], duration_us: u64, conn: u64) {
    let client = shared
        .clients
        .lock()
        .ok()
        .and_then(|c| c.get(&conn).cloned());
    match client {
        Some(c) => shared.slowlog.push_for(argv, duration_us, &c),
        None => shared
            .slowlog
            .push(argv, duration_us, String::new(), String::new()),
    }
}

/// Write (and under `appendfsync always`, fdatasync) this iteration's AOF
/// effects, before any of its replies is released.
///
/// The failed-write contract (see `CommitError::act`): under `always` the
/// process exits here, before any reply of the iteration leaves, as Redis 7
/// does; under `everysec`/`no` the iteration's commands stay applied, their
/// replies stand and their bytes are retried, while later writes get
/// `-MISCONF` before they run. Never "error, but applied".
fn commit_round(db: &mut ShardDb, aof: &mut crate::aof::writer::ShardAof) {
    if let Err(e) = aof.commit(&mut db.aof) {
        e.act();
    }
}

/// The order [`ShardThread::flush_touched`] writes in, each connection
/// once: first the readers whose parked XREAD/XREADGROUP was served (moved
/// out of `served`), then, newest first (see [`newest_first`]), the
/// connections touched with a reply (`touched`), then those read with no
/// reply yet (`quiet`, moved out) — a quiet read's place is that of its
/// first reply, if one comes.
///
/// Served readers go first even when an earlier reply of theirs (the XACK
/// pipelined before the read) queued them before the producer whose XADD
/// served them, where redis-server writes the producer first: the entry
/// reaches its consumer one write sooner, and the order of writes to
/// different connections is not something a client can observe.
fn write_order(touched: &mut Vec<u64>, quiet: &mut Vec<u64>, served: &mut Vec<u64>) {
    touched.append(quiet);
    if !served.is_empty() {
        let mut first: Vec<u64> = served.clone();
        first.sort_unstable();
        touched.retain(|id| first.binary_search(id).is_err());
        touched.append(served);
    }
    newest_first(touched);
}

#[cfg(test)]
mod write_order_tests {
    use super::{newest_first, write_order};

    #[test]
    fn served_readers_are_written_before_the_producer_that_served_them() {
        // Reader 3's XREADGROUP is read and parks (no reply: quiet), then
        // producer 7's XADD is read (reply) and serves reader 3 (reply).
        let (mut touched, mut quiet, mut served) = (vec![7, 3], vec![3], vec![3]);
        write_order(&mut touched, &mut quiet, &mut served);
        assert_eq!(touched, vec![3, 7]);
        assert!(quiet.is_empty() && served.is_empty());
        // Reader 3 sent XACK + XREADGROUP: its XACK reply touched it before
        // producer 7, and it is still written first.
        let (mut touched, mut quiet, mut served) = (vec![3, 7, 3], vec![], vec![3]);
        write_order(&mut touched, &mut quiet, &mut served);
        assert_eq!(touched, vec![3, 7]);
        // Without a served read, a reply's first touch decides (Redis's
        // order), and a quiet read comes after every touch with a reply.
        let (mut touched, mut quiet, mut served) = (vec![3, 7, 3], vec![], vec![]);
        write_order(&mut touched, &mut quiet, &mut served);
        assert_eq!(touched, vec![7, 3]);
        let (mut touched, mut quiet, mut served) = (vec![7, 5], vec![5, 9], vec![]);
        write_order(&mut touched, &mut quiet, &mut served);
        assert_eq!(touched, vec![9, 5, 7]);
        // Two readers served by one XADD: each once, both before it.
        let (mut touched, mut quiet, mut served) = (vec![7, 3, 4], vec![3, 4], vec![3, 4]);
        write_order(&mut touched, &mut quiet, &mut served);
        assert_eq!(touched, vec![4, 3, 7]);
    }

    #[test]
    fn each_connection_once_newest_first_touch_first() {
        // Producer 7 sends XADD (touched), reader 3 is served (touched), 7
        // is touched again by its next reply, 5 becomes writable.
        let mut ids = vec![7, 3, 7, 5];
        newest_first(&mut ids);
        assert_eq!(ids, vec![5, 3, 7]);
        let mut one = vec![4, 4, 4];
        newest_first(&mut one);
        assert_eq!(one, vec![4]);
        let mut none: Vec<u64> = Vec::new();
        newest_first(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn matches_a_model_on_many_sequences() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in 0..200 {
            let ids: Vec<u64> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed % 40
                })
                .collect();
            // Model: walk the list, note each id where it first appears,
            // and write the noted ids in reverse.
            let mut model: Vec<u64> = Vec::new();
            for &id in &ids {
                if !model.contains(&id) {
                    model.push(id);
                }
            }
            model.reverse();
            let mut got = ids.clone();
            newest_first(&mut got);
            assert_eq!(got, model, "{ids:?}");
        }
    }
}
