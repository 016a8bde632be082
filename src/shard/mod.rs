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
//! 7. write every touched socket once; hand over connections whose commands
//!    keep landing on one other shard.
//!
//! The thread parks in `poll` only after setting its `parked` flag and
//! re-checking its inbox; senders wake it (an eventfd write through
//! `mio::Waker`) only when that flag is set, so a busy thread is never woken
//! by a syscall and an idle one never spins.

pub mod blocking;
pub mod db;
pub mod msg;
pub mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Receiver;
use mio::{Events, Interest, Poll, Token};

use crate::io::conn::{Conn, Then};
use crate::io::{self, Limits, Outgoing, HANDOVER_STREAK, KILL_EPOCH};
use crate::reply::Reply;
use crate::route::router::{start_block, start_fan};
use crate::route::slot::ShardId;
use crate::server::Shared;
use db::ShardDb;
use msg::{Job, ReplyTo, ShardMsg};

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
/// the AOF, ms (Redis: `hz` 10).
const EXPIRE_PERIOD_MS: u64 = 100;
/// Most keys one active-expiry pass removes before returning to the loop.
const EXPIRE_BUDGET: usize = 1000;
/// Longest the thread sleeps in `poll`, so kills and shutdown are noticed.
const TICK: Duration = Duration::from_millis(100);
/// How often the connection housekeeping runs (idle `timeout`, peak windows).
const CRON: Duration = Duration::from_secs(1);
/// Length of one period of INFO's `client_recent_max_*_buffer` windows.
const PEAK_PERIOD: Duration = Duration::from_secs(4);
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
            let mut db = ShardDb::new(seed.id, seed.shards, seed.databases);
            db.tunables = seed.shared.tunables.clone();
            db.slot_map = seed.shared.slot_map.clone();
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
                conns: HashMap::new(),
                inbox: seed.inbox,
                parked: seed.parked,
                shared: seed.shared,
                out: Outgoing::new(seed.id.0, shards),
                replies: (0..shards).map(|_| Vec::new()).collect(),
                touched: Vec::new(),
                kill_epoch: 0,
                blocked_ids: HashSet::new(),
                limits,
                config_epoch: 0,
                last_cron: Instant::now(),
                last_peak_rotate: Instant::now(),
                last_mem_sample: Instant::now(),
                db,
                aof,
                next_expire_ms: now_ms() + EXPIRE_PERIOD_MS,
                panic_after: debug_panic_after_ops(),
                stopping: false,
            };
            t.run();
            t.aof.shutdown(&mut t.db);
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
    let manifest = Manifest::read(&seed.dir, seed.id.0)?;
    let mut aof = ShardAof::new(
        seed.id.0,
        seed.shards,
        seed.dir.clone(),
        seed.shared.tunables.clone(),
        manifest.clone(),
    );
    let mut stats = load::LoadStats::default();
    if seed.shared.tunables.aof.is_enabled() {
        if let Some(m) = &manifest {
            stats = load::load_shard(db, &seed.dir, m)?;
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
    conns: HashMap<u64, Conn>,
    inbox: Receiver<ShardMsg>,
    parked: Arc<AtomicBool>,
    shared: Arc<Shared>,
    /// Requests collected this iteration, per destination shard.
    out: Outgoing,
    /// Replies produced this iteration, per shard thread owning the connection.
    replies: Vec<Vec<(ReplyTo, Reply)>>,
    /// Connections with something to write or to close.
    touched: Vec<u64>,
    kill_epoch: u64,
    /// Connections parked in a blocking read (their deadlines are checked every iteration).
    blocked_ids: HashSet<u64>,
    limits: Limits,
    /// `Shared::config_epoch` when `limits` was read.
    config_epoch: u64,
    last_cron: Instant,
    last_peak_rotate: Instant,
    last_mem_sample: Instant,
    db: ShardDb,
    aof: crate::aof::writer::ShardAof,
    next_expire_ms: u64,
    panic_after: Option<u64>,
    /// A [`ShardMsg::Shutdown`] arrived.
    stopping: bool,
}

impl ShardThread {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            if self.stopping || self.shared.shutdown.load(Ordering::SeqCst) {
                self.close_all();
                return;
            }
            let timeout = self.poll_timeout();
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    eprintln!("shard-{}: poll failed: {e}", self.me);
                    return;
                }
            }
            self.parked.store(false, Ordering::SeqCst);
            let epoch = self.shared.config_epoch.load(Ordering::Relaxed);
            if epoch != self.config_epoch {
                self.config_epoch = epoch;
                self.limits = Limits::read(&self.shared, Some(self.limits));
            }
            self.sample_memory();
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {}
                    Token(t) => {
                        let id = t as u64;
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read(id);
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

    /// How long `poll` may sleep: not at all with work queued; otherwise until
    /// the next BLOCK deadline or timer, at most [`TICK`]. Sets `parked` first
    /// and re-checks the inbox, so a sender either sees the flag and wakes us
    /// or its message is seen here.
    fn poll_timeout(&self) -> Duration {
        let me = usize::from(self.me);
        if !self.inbox.is_empty()
            || !self.out.batches[me].is_empty()
            || self.db.blocking.has_ready()
        {
            return Duration::ZERO;
        }
        self.parked.store(true, Ordering::SeqCst);
        if !self.inbox.is_empty() {
            return Duration::ZERO;
        }
        let timer = Duration::from_millis(self.next_expire_ms.saturating_sub(now_ms()));
        self.next_deadline().unwrap_or(TICK).min(TICK).min(timer)
    }

    /// Everything after the sockets were read (see the module doc).
    fn turn(&mut self) {
        let now = now_ms();
        self.drain_inbox(now);
        let me = usize::from(self.me);
        let local = std::mem::take(&mut self.out.batches[me]);
        if !local.is_empty() {
            self.run_jobs(local, now);
        }
        let timer = now >= self.next_expire_ms;
        if timer {
            if self.db.active_expire_enabled {
                self.db.active_expire(now, EXPIRE_BUDGET);
            }
            self.db.blocking.sweep();
            // Expired streams and CLAIM readers waiting for entries to idle
            // are served on the timer too.
            self.db.blocking.mark_polling_ready();
            self.next_expire_ms = now + EXPIRE_PERIOD_MS;
        }
        if self.db.blocking.has_ready() {
            self.serve_waiters(now);
        }
        self.send_batches();
        commit_round(&mut self.db, &mut self.aof);
        if timer || self.db.aof.rewrite_requested {
            // BGREWRITEAOF starts (files switched, data copied) before its
            // reply leaves, so INFO shows it in progress.
            self.aof.tick(&mut self.db, now);
        }
        self.release_replies();
        self.expire_blocked();
        self.flush_touched();
        self.send_batches();
        self.publish_stats();
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
    fn read(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let total = io::read_conn(&self.shared, conn, self.limits.query_buffer_bytes);
        let stats = &self.shared.stats;
        stats
            .total_net_input_bytes
            .fetch_add(total, Ordering::Relaxed);
        stats.recent_max_input_bytes.observe(conn.rbuf.len() as u64);
        conn.session
            .shared
            .last_interaction_ms
            .store(self.shared.uptime_ms(), Ordering::Relaxed);
        io::process_input(&self.shared, &mut self.out, conn, self.limits.decode());
        if conn.blocked.is_some() {
            self.blocked_ids.insert(id);
        }
        self.touched.push(id);
    }

    /// Take every message waiting in the inbox.
    fn drain_inbox(&mut self, now: u64) {
        while let Ok(msg) = self.inbox.try_recv() {
            match msg {
                ShardMsg::Batch(jobs) => self.run_jobs(jobs, now),
                ShardMsg::Replies(replies) => {
                    for (to, reply) in replies {
                        self.deliver(to, reply);
                    }
                }
                ShardMsg::Accept(sock, addr) => self.accept(sock, addr),
                ShardMsg::Adopt(conn) => self.adopt(*conn),
                ShardMsg::Shutdown => self.stopping = true,
            }
        }
    }

    /// Run requests on this shard's data, in order, queueing each reply for
    /// the thread that owns its connection; then serve readers parked on keys
    /// the requests made ready.
    fn run_jobs(&mut self, jobs: Vec<Job>, now: u64) {
        // One clock read per command: each command's end is the next one's start.
        let mut started = std::time::Instant::now();
        for job in jobs {
            let cx = msg::ExecCtx {
                db: usize::from(job.db),
                now_ms: now,
                reply_to: job.reply_to,
            };
            let reply = job.req.apply(&mut self.db, &cx);
            let ended = std::time::Instant::now();
            let ns = ended.duration_since(started).as_nanos() as u64;
            self.shared
                .cmdstats
                .count_exec(job.cmd, ns, reply.error_text());
            if self.shared.slowlog.is_slow(ns) {
                if let Some(argv) = &job.argv {
                    self.log_slow(argv, ns / 1000, job.reply_to.conn);
                }
            }
            started = ended;
            self.db.stats.ops += 1;
            if self.panic_after.is_some_and(|n| self.db.stats.ops >= n) {
                panic!(
                    "SHARDSTREAM_DEBUG_PANIC_AFTER_OPS reached on shard {}",
                    self.db.id.0
                );
            }
            if matches!(reply, Reply::NoReply) {
                continue;
            }
            self.queue_reply(job.reply_to, reply);
        }
        if self.db.blocking.has_ready() {
            self.serve_waiters(now);
        }
    }

    /// Record a slow command in SLOWLOG with its client's address and name.
    fn log_slow(&self, argv: &[bytes::Bytes], duration_us: u64, conn: u64) {
        let client = self
            .shared
            .clients
            .lock()
            .ok()
            .and_then(|c| c.get(&conn).cloned());
        let (addr, name) = client.map_or((String::new(), String::new()), |c| {
            let name = c
                .name
                .lock()
                .ok()
                .and_then(|n| n.clone())
                .unwrap_or_default();
            (c.addr.to_string(), name)
        });
        self.shared.slowlog.push(argv, duration_us, addr, name);
    }

    /// Queue a reply for the thread that owns its connection; it leaves
    /// after this iteration's group commit.
    fn queue_reply(&mut self, to: ReplyTo, reply: Reply) {
        if let Some(o) = self.replies.get_mut(usize::from(to.io)) {
            o.push((to, reply));
        }
    }

    /// Serve the waiters of ready keys (Redis: `handleClientsBlockedOnKeys`).
    fn serve_waiters(&mut self, now: u64) {
        let mut served = Vec::new();
        blocking::serve_ready(&mut self.db, now, &mut served);
        for (to, reply) in served {
            // An unblocked reader's error (NOGROUP, UNBLOCKED...) is an
            // error reply like any other (INFO errorstats).
            if let Some(e) = reply.error_text() {
                self.shared.cmdstats.count_error(e);
            }
            self.queue_reply(to, reply);
        }
    }

    /// Send this iteration's requests for other shards, one message each.
    fn send_batches(&mut self) {
        let me = usize::from(self.me);
        for (i, batch) in self.out.batches.iter_mut().enumerate() {
            if i != me && !batch.is_empty() {
                self.shared.threads[i].send(ShardMsg::Batch(std::mem::take(batch)));
            }
        }
    }

    /// After the group commit: replies for other threads' connections go out
    /// as one message per thread; this thread's own are delivered in place.
    fn release_replies(&mut self) {
        let me = usize::from(self.me);
        for i in 0..self.replies.len() {
            if i != me && !self.replies[i].is_empty() {
                let batch = std::mem::take(&mut self.replies[i]);
                self.shared.threads[i].send(ShardMsg::Replies(batch));
            }
        }
        let mine = std::mem::take(&mut self.replies[me]);
        for (to, reply) in mine {
            self.deliver(to, reply);
        }
    }

    /// Put a reply (or one part of a fan-out's reply) into its connection's
    /// queue; a finished fan-out may start its next step (park the read, or
    /// run the second pass).
    fn deliver(&mut self, to: ReplyTo, reply: Reply) {
        let Some(conn) = self.conns.get_mut(&to.conn) else {
            return;
        };
        match conn.fill(to.seq, to.part, reply) {
            Some(Then::Block(plan)) => {
                start_block(
                    self.me,
                    &self.shared,
                    &mut self.out.batches,
                    conn,
                    to.seq,
                    plan,
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
            ),
            None => {}
        }
        self.touched.push(to.conn);
    }

    /// Serve a connection from the acceptor (or refuse it: `maxclients`).
    fn accept(&mut self, sock: mio::net::TcpStream, addr: std::net::SocketAddr) {
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
            .register(
                &mut conn.sock,
                Token(id as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            if let Ok(mut c) = self.shared.clients.lock() {
                c.remove(&id);
            }
            self.shared.thread_conns[usize::from(self.me)].fetch_sub(1, Ordering::Relaxed);
            return;
        }
        self.conns.insert(id, conn);
        // Input may have arrived while the socket was between threads.
        self.read(id);
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
        self.shared
            .stats
            .used_memory_cached_bytes
            .store(crate::cmd::info::used_memory_bytes(), Ordering::Relaxed);
    }

    /// Publish this iteration's local/remote command counts for INFO.
    fn publish_stats(&mut self) {
        let st = &self.shared.thread_stats[usize::from(self.me)];
        let local = std::mem::take(&mut self.out.local_commands);
        let remote = std::mem::take(&mut self.out.remote_commands);
        if local > 0 {
            st.local_commands.fetch_add(local, Ordering::Relaxed);
        }
        if remote > 0 {
            st.remote_commands.fetch_add(remote, Ordering::Relaxed);
        }
    }

    /// Once a second: close clients idle longer than `timeout` (never blocked
    /// ones, as Redis), and turn the INFO peak windows over.
    ///
    /// # Source
    /// `clientsCronHandleTimeout`, redis/src/timeout.c.
    fn cron(&mut self) {
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
    /// unless a shard claimed the ticket first (its reply is on the way).
    fn expire_blocked(&mut self) {
        if self.blocked_ids.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut done = Vec::new();
        for id in &self.blocked_ids {
            let Some(conn) = self.conns.get_mut(id) else {
                done.push(*id);
                continue;
            };
            let Some(b) = &conn.blocked else {
                done.push(*id);
                continue;
            };
            if b.deadline.is_some_and(|d| d <= now) {
                let seq = b.seq;
                if b.ticket.claim() {
                    conn.fill(seq, 0, Reply::NullArray);
                }
                self.touched.push(*id);
            }
        }
        for id in done {
            self.blocked_ids.remove(&id);
        }
    }

    fn flush_touched(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
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
            if was_held && conn.hold_until.is_none() && !conn.rbuf.is_empty() {
                // A blocking command finished: go on with the pipeline.
                io::process_input(&self.shared, &mut self.out, conn, limits.decode());
                conn.encode_ready(Some(&limits.output));
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
                eprintln!(
                    "Client id={} addr={} closed for overcoming of output buffer limits ({pending} bytes pending).",
                    conn.session.id, conn.session.shared.addr
                );
            }
            self.shared
                .stats
                .recent_max_output_bytes
                .observe(conn.wbuf.len() as u64);
            let written = io::write_conn(conn);
            if written > 0 {
                conn.session
                    .shared
                    .last_interaction_ms
                    .store(now_ms, Ordering::Relaxed);
            }
            self.shared
                .stats
                .total_net_output_bytes
                .fetch_add(written, Ordering::Relaxed);
            conn.session
                .shared
                .omem_bytes
                .store(conn.wbuf.len(), Ordering::Relaxed);
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
            }
            self.blocked_ids.remove(&id);
            // Its watches go with it (the replies find no connection and are dropped).
            for shard in std::mem::take(&mut conn.session.watching) {
                let req = crate::cmd::tx::unwatch_req();
                self.out.batches[usize::from(shard.0)].push(msg::Job {
                    req,
                    cmd: msg::NO_CMD,
                    argv: None,
                    db: 0,
                    reply_to: msg::ReplyTo {
                        io: self.me,
                        conn: id,
                        seq: 0,
                        part: 0,
                    },
                });
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
