//! IO threads: accept connections, read and decode RESP, parse commands, route
//! them to shards in per-shard batches, and write replies in request order.
//!
//! One iteration of the loop: `poll` → read every readable socket and decode
//! its commands (connection-level commands are answered on the spot; keyed
//! commands are parsed here, so syntax errors never cost a hop, and queued per
//! shard) → send one batch message per shard → collect reply messages from
//! shards → write each touched socket once.
//!
//! The IO thread parks in `poll` only after setting its `parked` flag and
//! re-checking its reply channel; shards wake it (an eventfd write through
//! `mio::Waker`) only when that flag is set.

pub mod codec;
pub mod conn;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use crossbeam_channel::Receiver;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::cmd::table::{self, CommandSpec, FanMerge, Handler};
use crate::cmd::{self, Action, ConnCtx, Merge, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::{slot_of, ShardId, Slot};
use crate::server::Shared;
use crate::shard::blocking::Ticket;
use crate::shard::msg::{IoMsg, Job, ReplyTo, ShardMsg};
use codec::{DecodeLimits, Decoded};
use conn::{BlockPlan, Blocked, ClientShared, Conn, Pending, Session, Then};

/// Token of the IO thread's waker.
pub const WAKER: Token = Token(usize::MAX);
/// Token of the listening socket.
const LISTENER: Token = Token(usize::MAX - 1);
/// Longest the IO thread sleeps, so kills, timeouts and shutdown are noticed.
const TICK: Duration = Duration::from_millis(100);

/// How often the IO thread's housekeeping runs (idle `timeout`, peak windows).
const CRON: Duration = Duration::from_secs(1);
/// Length of one period of INFO's `client_recent_max_*_buffer` windows.
const PEAK_PERIOD: Duration = Duration::from_secs(4);
/// Shortest interval between two `used_memory` samples while `maxmemory` is set.
const MEM_SAMPLE: Duration = Duration::from_millis(1);
/// Redis's reply to a DENYOOM command while over `maxmemory`.
pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Client limits from the configuration, re-read once per loop iteration so
/// CONFIG SET applies at once without a lock per read or write.
#[derive(Clone, Copy)]
struct Limits {
    query_buffer_bytes: usize,
    max_bulk_bytes: i64,
    output: crate::config::OutputBufferLimit,
    timeout_s: u64,
    tcp_keepalive_s: u64,
    maxmemory_bytes: u64,
}

impl Limits {
    fn read(shared: &Shared) -> Limits {
        let d = crate::config::Config::default();
        let c = shared.config.read();
        let c = c.as_deref().unwrap_or(&d);
        Limits {
            query_buffer_bytes: c.client_query_buffer_limit,
            max_bulk_bytes: c.proto_max_bulk_len,
            output: c.client_output_buffer_limit[0],
            timeout_s: c.timeout_s,
            tcp_keepalive_s: c.tcp_keepalive_s,
            maxmemory_bytes: c.maxmemory_bytes,
        }
    }

    fn decode(&self) -> DecodeLimits {
        DecodeLimits {
            max_bulk_bytes: self.max_bulk_bytes,
            max_multibulk: codec::MULTIBULK_MAX,
            unauthenticated: false,
        }
    }
}

/// Incremented by CLIENT KILL; IO threads then look for connections marked killed.
pub static KILL_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Start IO thread `idx`.
pub fn spawn_io(
    idx: u16,
    poll: Poll,
    listener: std::net::TcpListener,
    inbox: Receiver<IoMsg>,
    parked: Arc<AtomicBool>,
    shared: Arc<Shared>,
) -> io::Result<JoinHandle<()>> {
    let mut listener = TcpListener::from_std(listener);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    thread::Builder::new()
        .name(format!("io-{idx}"))
        .spawn(move || {
            let shards = usize::from(shared.shards);
            let limits = Limits::read(&shared);
            let mut io = IoThread {
                idx,
                poll,
                listener,
                conns: HashMap::new(),
                inbox,
                parked,
                shared,
                batches: (0..shards).map(|_| Vec::new()).collect(),
                touched: Vec::new(),
                kill_epoch: 0,
                blocked_ids: Default::default(),
                limits,
                last_cron: Instant::now(),
                last_peak_rotate: Instant::now(),
                last_mem_sample: Instant::now(),
            };
            io.run();
        })
}

struct IoThread {
    idx: u16,
    poll: Poll,
    listener: TcpListener,
    conns: HashMap<u64, Conn>,
    inbox: Receiver<IoMsg>,
    parked: Arc<AtomicBool>,
    shared: Arc<Shared>,
    /// Jobs collected this iteration, per shard.
    batches: Vec<Vec<Job>>,
    /// Connections with something to write or to close.
    touched: Vec<u64>,
    kill_epoch: u64,
    /// Connections parked in a blocking read (their deadlines are checked every iteration).
    blocked_ids: std::collections::HashSet<u64>,
    limits: Limits,
    last_cron: Instant,
    last_peak_rotate: Instant,
    last_mem_sample: Instant,
}

impl IoThread {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            if self.shared.shutdown.load(Ordering::SeqCst) {
                self.close_all();
                return;
            }
            let timeout = if self.inbox.is_empty() {
                self.parked.store(true, Ordering::SeqCst);
                if self.inbox.is_empty() {
                    Some(self.next_deadline().unwrap_or(TICK).min(TICK))
                } else {
                    Some(Duration::ZERO)
                }
            } else {
                Some(Duration::ZERO)
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    eprintln!("io-{}: poll failed: {e}", self.idx);
                    return;
                }
            }
            self.parked.store(false, Ordering::SeqCst);
            self.limits = Limits::read(&self.shared);
            self.sample_memory();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    Token(t) => {
                        let id = t as u64;
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read_conn(id);
                        }
                        if ev.is_writable() {
                            self.touched.push(id);
                        }
                    }
                }
            }
            self.send_batches();
            self.drain_inbox();
            self.expire_blocked();
            self.flush_touched();
            self.send_batches();
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

    /// Once a second: close clients idle longer than `timeout` (never blocked
    /// ones, as Redis), and turn the INFO peak windows over.
    ///
    /// # Source
    /// `clientsCronHandleTimeout`, redis/src/timeout.c.
    fn cron(&mut self) {
        if self.idx == 0 && self.last_peak_rotate.elapsed() >= PEAK_PERIOD {
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

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((sock, addr)) => self.add_conn(sock, addr),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: try again on the next readiness event.
                    eprintln!("io-{}: accept failed: {e}", self.idx);
                    return;
                }
            }
        }
    }

    fn add_conn(&mut self, mut sock: TcpStream, addr: std::net::SocketAddr) {
        let shared = &self.shared;
        shared
            .stats
            .total_connections_received
            .fetch_add(1, Ordering::Relaxed);
        let (maxclients, needs_auth) = shared
            .config
            .read()
            .map(|c| (c.maxclients, c.requirepass.is_some()))
            .unwrap_or((10000, false));
        let connected = shared.clients.lock().map(|c| c.len()).unwrap_or(0);
        if connected >= maxclients {
            shared
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            let _ = sock.write(format!("-{}\r\n", CmdError::MaxClients).as_bytes());
            return;
        }
        let _ = sock.set_nodelay(true);
        if self.limits.tcp_keepalive_s > 0 {
            set_keepalive(&sock, self.limits.tcp_keepalive_s);
        }
        let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        if self
            .poll
            .registry()
            .register(
                &mut sock,
                Token(id as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            return;
        }
        let laddr = sock.local_addr().unwrap_or(shared.addr);
        let client = Arc::new(ClientShared {
            id,
            addr,
            laddr,
            io: self.idx,
            created: Instant::now(),
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            last_cmd: AtomicUsize::new(usize::MAX),
            last_interaction_ms: AtomicU64::new(shared.uptime_ms()),
            db: AtomicUsize::new(0),
            resp: AtomicUsize::new(2),
            qbuf_bytes: AtomicUsize::new(0),
            omem_bytes: AtomicUsize::new(0),
            killed: AtomicBool::new(false),
            multi: AtomicU64::new(u64::MAX),
        });
        if let Ok(mut c) = shared.clients.lock() {
            c.insert(id, client.clone());
        }
        self.conns.insert(
            id,
            Conn {
                sock,
                session: Session {
                    id,
                    db: 0,
                    resp3: false,
                    authenticated: !needs_auth,
                    multi: None,
                    multi_failed: false,
                    readonly: false,
                    shared: client,
                },
                rbuf: BytesMut::with_capacity(16 * 1024),
                need_bytes: 0,
                wbuf: BytesMut::new(),
                base_seq: 0,
                slots: Default::default(),
                close_after: None,
                hold_until: None,
                dead: false,
                want_write: false,
                blocked: None,
                output_soft_since: None,
                output_limit_hit: None,
            },
        );
    }

    fn read_conn(&mut self, id: u64) {
        let qlimit = self.limits.query_buffer_bytes;
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let mut chunk = [0u8; 16 * 1024];
        let mut total = 0u64;
        loop {
            match conn.sock.read(&mut chunk) {
                Ok(0) => {
                    conn.dead = true;
                    break;
                }
                Ok(n) => {
                    total += n as u64;
                    conn.rbuf.extend_from_slice(&chunk[..n]);
                    if conn.rbuf.len() > qlimit {
                        // Redis closes without a reply and counts it
                        // (`client_query_buffer_limit_disconnections`).
                        eprintln!(
                            "Closing client that reached max query buffer length: id={} addr={} (qbuf initial bytes: {:?})",
                            conn.session.id,
                            conn.session.shared.addr,
                            String::from_utf8_lossy(&conn.rbuf[..conn.rbuf.len().min(64)]),
                        );
                        self.shared
                            .stats
                            .client_query_buffer_limit_disconnections
                            .fetch_add(1, Ordering::Relaxed);
                        self.shared
                            .stats
                            .recent_max_input_bytes
                            .observe(conn.rbuf.len() as u64);
                        conn.dead = true;
                        conn.rbuf = BytesMut::new();
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    conn.dead = true;
                    break;
                }
            }
        }
        self.shared
            .stats
            .total_net_input_bytes
            .fetch_add(total, Ordering::Relaxed);
        self.shared
            .stats
            .recent_max_input_bytes
            .observe(conn.rbuf.len() as u64);
        let limits = self.limits.decode();
        conn.session
            .shared
            .last_interaction_ms
            .store(self.shared.uptime_ms(), Ordering::Relaxed);
        process_input(self.idx, &self.shared, &mut self.batches, conn, limits);
        if conn.blocked.is_some() {
            self.blocked_ids.insert(id);
        }
        self.touched.push(id);
    }

    fn send_batches(&mut self) {
        for (i, batch) in self.batches.iter_mut().enumerate() {
            if !batch.is_empty() {
                let _ = self.shared.shard_tx[i].send(ShardMsg::Batch(std::mem::take(batch)));
            }
        }
    }

    fn drain_inbox(&mut self) {
        while let Ok(msg) = self.inbox.try_recv() {
            match msg {
                IoMsg::Replies(replies) => {
                    for (to, reply) in replies {
                        if let Some(conn) = self.conns.get_mut(&to.conn) {
                            match conn.fill(to.seq, to.part, reply) {
                                Some(Then::Block(plan)) => {
                                    start_block(
                                        self.idx,
                                        &self.shared,
                                        &mut self.batches,
                                        conn,
                                        to.seq,
                                        plan,
                                    );
                                    if conn.blocked.is_some() {
                                        self.blocked_ids.insert(to.conn);
                                    }
                                }
                                Some(Then::Fan {
                                    parts,
                                    merge,
                                    then_block,
                                }) => start_fan(
                                    self.idx,
                                    &mut self.batches,
                                    conn,
                                    to.seq,
                                    parts,
                                    merge,
                                    then_block.map(Then::Block),
                                ),
                                None => {}
                            }
                            self.touched.push(to.conn);
                        }
                    }
                }
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
                conn.blocked = None;
                self.shared.blocked_clients.fetch_sub(1, Ordering::Relaxed);
            }
            if was_held && conn.hold_until.is_none() && !conn.rbuf.is_empty() {
                // A blocking command finished: go on with the pipeline.
                process_input(
                    self.idx,
                    &self.shared,
                    &mut self.batches,
                    conn,
                    limits.decode(),
                );
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
            let written = write_conn(conn);
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
                self.shared.blocked_clients.fetch_sub(1, Ordering::Relaxed);
            }
            self.blocked_ids.remove(&id);
            if let Ok(mut c) = self.shared.clients.lock() {
                c.remove(&id);
            }
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
                write_conn(conn);
            }
            self.remove_conn(id);
        }
    }
}

/// Turn on TCP keepalive: first probe after `idle_s` seconds of silence, then
/// every `idle_s / 3` seconds, 3 probes before the peer counts as dead.
///
/// # Source
/// `anetKeepAlive`, redis/src/anet.c.
fn set_keepalive(sock: &TcpStream, idle_s: u64) {
    use std::os::fd::AsRawFd;
    let fd = sock.as_raw_fd();
    let idle = i32::try_from(idle_s).unwrap_or(i32::MAX);
    let opts = [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, (idle / 3).max(1)),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3),
    ];
    for (level, name, value) in opts {
        // SAFETY: `fd` is an open socket owned by `sock` for the duration of
        // the call; the option value is a valid c_int of the size passed.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
        }
    }
}

/// Write as much of `wbuf` as the socket takes; returns bytes written.
fn write_conn(conn: &mut Conn) -> u64 {
    let mut written = 0u64;
    while !conn.wbuf.is_empty() && !conn.dead {
        match conn.sock.write(&conn.wbuf) {
            Ok(0) => {
                conn.dead = true;
            }
            Ok(n) => {
                let _ = conn.wbuf.split_to(n);
                written += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => conn.dead = true,
        }
    }
    if conn.wbuf.is_empty() && conn.wbuf.capacity() > 1 << 20 {
        conn.wbuf = BytesMut::new();
    }
    written
}

/// Decode and dispatch every complete command in the connection's buffer.
fn process_input(
    io: u16,
    shared: &Arc<Shared>,
    batches: &mut [Vec<Job>],
    conn: &mut Conn,
    mut limits: DecodeLimits,
) {
    loop {
        if conn.dead || conn.close_after.is_some() || conn.hold_until.is_some() {
            return;
        }
        if conn.rbuf.is_empty() || conn.rbuf.len() < conn.need_bytes {
            return;
        }
        limits.unauthenticated = !conn.session.authenticated;
        match codec::decode(&mut conn.rbuf, limits) {
            Ok(Decoded::Command(argv)) => {
                conn.need_bytes = 0;
                if !argv.is_empty() {
                    dispatch(io, shared, batches, conn, argv);
                }
            }
            Ok(Decoded::Incomplete { min_total }) => {
                conn.need_bytes = min_total;
                return;
            }
            Err(e) => {
                let seq =
                    conn.push_slot(Pending::Ready(Reply::Error(CmdError::msg(e.to_string()))));
                conn.close_after = Some(seq);
                conn.rbuf.clear();
                return;
            }
        }
    }
}

/// Commands that run even inside MULTI instead of being queued.
fn runs_inside_multi(name: &str) -> bool {
    matches!(
        name,
        "EXEC" | "DISCARD" | "MULTI" | "WATCH" | "UNWATCH" | "QUIT" | "RESET"
    )
}

/// Route one decoded command: answer it here, or queue it for its shard(s).
fn dispatch(
    io: u16,
    shared: &Arc<Shared>,
    batches: &mut [Vec<Job>],
    conn: &mut Conn,
    argv: Vec<Bytes>,
) {
    let client = &conn.session.shared;
    let Some(spec) = table::lookup(&argv[0]) else {
        let err = table::unknown_command(&argv);
        shared.count_call("unknown", true, true);
        reject(shared, conn, err);
        return;
    };
    if !spec.arity_ok(argv.len()) {
        shared.count_call(spec.name, true, true);
        reject_cmd(shared, conn, spec, CmdError::arity(spec.name));
        return;
    }
    // Container commands (CLIENT, CONFIG, COMMAND, CLUSTER): the subcommand row
    // decides arity, flags and statistics, checked before NOAUTH and before
    // queueing in MULTI, as Redis's processCommand does.
    let spec = if spec.subcommands.is_empty() || argv.len() < 2 {
        spec
    } else {
        match cmd::connection::resolve_subcommand(spec, &argv) {
            Ok(sub) => sub,
            Err(e) => {
                shared.count_call(spec.name, true, true);
                reject(shared, conn, e);
                return;
            }
        }
    };
    if let Some(i) = shared.cmdstats.index_of(spec.name) {
        conn.session.shared.last_cmd.store(i, Ordering::Relaxed);
    }
    if !conn.session.authenticated && !spec.flags.has(crate::cmd::Flags::NO_AUTH) {
        shared.count_call(spec.name, true, true);
        reject_cmd(shared, conn, spec, CmdError::NoAuth);
        return;
    }
    // Cluster redirection comes before queueing, as in Redis's processCommand:
    // a redirected command inside MULTI dooms the transaction; a refused EXEC
    // discards it and answers the redirection itself.
    if let Err(e) = cluster_check(shared, spec, &argv, &conn.session) {
        shared.count_call(spec.name, false, true);
        if spec.name == "EXEC" {
            cmd::tx::reset_multi(&mut conn.session);
        }
        reject(shared, conn, e);
        return;
    }
    // A shard that cannot write its AOF refuses writes (and PING), as Redis
    // does after a failed AOF write or fsync.
    if spec.flags.has(crate::cmd::Flags::WRITE) || spec.name == "PING" {
        if let Some(err) = shared.tunables.aof.write_refusal() {
            shared.count_call(spec.name, true, true);
            reject_cmd(shared, conn, spec, err);
            return;
        }
    }
    if shared.over_maxmemory() && refused_on_oom(spec, &conn.session) {
        shared.count_call(spec.name, true, true);
        reject_cmd(shared, conn, spec, CmdError::msg(OOM_ERROR));
        return;
    }
    if let Some(queue) = conn.session.multi.as_mut() {
        if !runs_inside_multi(spec.name) {
            if spec.flags.has(crate::cmd::Flags::NO_MULTI) {
                let err = CmdError::msg("ERR Command not allowed inside a transaction");
                reject(shared, conn, err);
                return;
            }
            queue.push(argv);
            client.multi.store(queue.len() as u64, Ordering::Relaxed);
            conn.push_slot(Pending::Ready(Reply::simple("QUEUED")));
            return;
        }
    }
    let name = spec.name;
    let reply_failed = |r: &Reply| r.is_error();
    match route(spec, &argv, &mut conn.session, shared) {
        Routed::Reply(r) => {
            shared.count_call(name, reply_failed(&r), false);
            if r.is_error() {
                shared
                    .stats
                    .total_error_replies
                    .fetch_add(1, Ordering::Relaxed);
            }
            conn.push_slot(Pending::Ready(r));
        }
        Routed::Close(r) => {
            shared.count_call(name, false, false);
            let seq = conn.push_slot(Pending::Ready(r));
            conn.close_after = Some(seq);
        }
        Routed::Drop => {
            shared.count_call(name, false, false);
            conn.dead = true;
        }
        Routed::One(shard, req) => {
            shared.count_call(name, false, false);
            let seq = conn.push_slot(Pending::Waiting);
            batches[usize::from(shard.0)].push(Job {
                req,
                db: conn.session.db as u16,
                reply_to: ReplyTo {
                    io,
                    conn: conn.session.id,
                    seq,
                    part: 0,
                },
            });
        }
        Routed::Block(plan) => {
            shared.count_call(name, false, false);
            let seq = conn.push_slot(Pending::Waiting);
            start_block(io, shared, batches, conn, seq, plan);
        }
        Routed::Fan(parts, merge, then) => {
            shared.count_call(name, false, false);
            let seq = conn.push_slot(Pending::Waiting);
            start_fan(io, batches, conn, seq, parts, merge, then);
        }
    }
}

/// Whether a command is refused while used memory is over `maxmemory`:
/// DENYOOM commands, EXEC of a transaction holding one, and anything queued
/// inside MULTI except EXEC, DISCARD, QUIT and RESET (queueing costs memory).
///
/// # Source
/// `processCommand` (the `reject_cmd_on_oom` rule), redis/src/server.c (7.x).
fn refused_on_oom(spec: &CommandSpec, session: &Session) -> bool {
    use crate::cmd::Flags;
    if spec.flags.has(Flags::DENYOOM) {
        return true;
    }
    let Some(queue) = &session.multi else {
        return false;
    };
    match spec.name {
        "EXEC" => queue.iter().any(|argv| {
            argv.first()
                .and_then(|name| table::lookup(name))
                .is_some_and(|s| s.flags.has(Flags::DENYOOM))
        }),
        "DISCARD" | "QUIT" | "RESET" => false,
        _ => true,
    }
}

/// Send the parts of a fan-out to their shards, collecting their replies in
/// slot `seq` (a new slot, or one whose validation step just passed).
fn start_fan(
    io: u16,
    batches: &mut [Vec<Job>],
    conn: &mut Conn,
    seq: u64,
    parts: Vec<(ShardId, ShardReq)>,
    merge: Merge,
    then: Option<Then>,
) {
    let holds = then.as_ref().is_some_and(Then::holds);
    let n = parts.len();
    let Some(slot) = conn.slot_mut(seq) else {
        return;
    };
    *slot = Pending::Fan {
        parts: (0..n).map(|_| None).collect(),
        left: n,
        merge,
        then,
    };
    if holds {
        conn.hold_until = Some(seq);
    }
    for (part, (shard, req)) in parts.into_iter().enumerate() {
        batches[usize::from(shard.0)].push(Job {
            req,
            db: conn.session.db as u16,
            reply_to: ReplyTo {
                io,
                conn: conn.session.id,
                seq,
                part: part as u16,
            },
        });
    }
}

/// The table row that decides a command's keys (a container's subcommand row).
fn row_of(argv: &[Bytes]) -> Option<&'static CommandSpec> {
    let spec = table::lookup(argv.first()?)?;
    if spec.subcommands.is_empty() || argv.len() < 2 {
        return Some(spec);
    }
    cmd::connection::resolve_subcommand(spec, argv).ok()
}

/// Redis Cluster's redirection check (`getNodeByQuery`): with a multi-node
/// topology, a command's keys must share one slot (else `CROSSSLOT`, unless
/// `cluster-allow-local-multislot` and this node serves every slot) served by
/// this node (else `MOVED <slot> <host>:<port>`). EXEC checks the keys of
/// every queued command together. Keyless commands and one-node servers pass.
///
/// # Errors
/// [`CmdError::CrossSlot`], [`CmdError::Moved`].
fn cluster_check(
    shared: &Shared,
    spec: &CommandSpec,
    argv: &[Bytes],
    session: &Session,
) -> Result<(), CmdError> {
    let Some(topo) = &shared.cluster else {
        return Ok(());
    };
    let allow = shared
        .tunables
        .cluster_allow_local_multislot
        .load(Ordering::Relaxed);
    let slots_of = |spec: &CommandSpec, argv: &[Bytes]| -> Vec<Slot> {
        spec.key_indexes(argv)
            .into_iter()
            .filter_map(|i| argv.get(i).map(|k| slot_of(k)))
            .collect()
    };
    if spec.name == "EXEC" {
        let Some(queue) = &session.multi else {
            return Ok(());
        };
        let slots = queue
            .iter()
            .filter_map(|a| row_of(a).map(|s| slots_of(s, a)))
            .flatten();
        return topo.check(slots, allow);
    }
    topo.check(slots_of(spec, argv), allow)
}

/// Answer a command that was refused before running; inside MULTI this also
/// dooms the transaction (EXECABORT), as Redis does.
fn reject(shared: &Shared, conn: &mut Conn, err: CmdError) {
    shared
        .stats
        .total_error_replies
        .fetch_add(1, Ordering::Relaxed);
    if conn.session.multi.is_some() {
        conn.session.multi_failed = true;
    }
    conn.push_slot(Pending::Ready(Reply::Error(err)));
}

/// [`reject`], except that a refused EXEC inside MULTI discards the
/// transaction with `EXECABORT Transaction discarded because of: <reason>`,
/// as Redis's `execCommandAbort` does.
fn reject_cmd(shared: &Shared, conn: &mut Conn, spec: &CommandSpec, err: CmdError) {
    if spec.name == "EXEC" && conn.session.multi.is_some() {
        crate::cmd::tx::reset_multi(&mut conn.session);
        let text = err.to_string();
        let reason = text.strip_prefix("ERR ").unwrap_or(&text);
        let err = CmdError::msg(format!(
            "EXECABORT Transaction discarded because of: {reason}"
        ));
        conn.push_slot(Pending::Ready(Reply::Error(err)));
        return;
    }
    reject(shared, conn, err);
}

/// Where a command goes once parsed.
pub enum Routed {
    Reply(Reply),
    Close(Reply),
    /// Close the connection at once, without a reply (SHUTDOWN).
    Drop,
    One(ShardId, ShardReq),
    /// Parts run on their shards, replies merged; then, optionally, park the
    /// read or run a second step (see [`Then`]).
    Fan(Vec<(ShardId, ShardReq)>, Merge, Option<Then>),
    /// A blocking read whose keys live on one shard: park it there directly.
    Block(BlockPlan),
}

/// Parse `argv` with its table row and decide where it runs.
pub fn route(
    spec: &'static CommandSpec,
    argv: &[Bytes],
    session: &mut Session,
    shared: &Shared,
) -> Routed {
    match spec.handler {
        Handler::Keyed { parse, merge } => route_keyed(spec, parse, merge, None, argv, shared),
        Handler::Blocking {
            parse,
            merge,
            block_ms,
            park,
            validate,
        } => match block_ms(argv) {
            None => route_keyed(spec, parse, merge, validate, argv, shared),
            Some(timeout_ms) => {
                route_blocking(spec, parse, merge, validate, park, timeout_ms, argv, shared)
            }
        },
        Handler::Conn(f) => {
            let mut cx = ConnCtx {
                conn: session,
                shared,
            };
            match f(&mut cx, argv) {
                Ok(Action::Reply(r)) => Routed::Reply(r),
                Ok(Action::Close(r)) => Routed::Close(r),
                Ok(Action::Drop) => Routed::Drop,
                Ok(Action::FanOut { parts, merge }) => Routed::Fan(parts, merge, None),
                Err(e) => Routed::Reply(Reply::Error(e)),
            }
        }
    }
}

/// Route a keyed command: to the one shard owning its keys, or split by shard and merged.
///
/// With `validate` (XREADGROUP) a split command runs in two steps: every
/// shard first checks its keys without side effects, and only when all pass
/// do the reads run, so one shard's `NOGROUP`/`WRONGTYPE`/ID error is never
/// answered after another shard already delivered (and added to its PEL).
/// The error is the one of the first failing key in the caller's order, as
/// Redis checks keys in order. Another client may still change a key between
/// the steps; the second step re-checks and answers that error.
pub fn route_keyed(
    spec: &'static CommandSpec,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    merge: FanMerge,
    validate: Option<table::ParseFn>,
    argv: &[Bytes],
    shared: &Shared,
) -> Routed {
    let keys = spec.key_indexes(argv);
    let first_shard = keys
        .first()
        .map(|&i| shared.shard_of(&argv[i]))
        .unwrap_or(ShardId(0));
    let single = keys
        .iter()
        .skip(1)
        .all(|&i| shared.shard_of(&argv[i]) == first_shard);
    if single {
        return match parse(argv) {
            Ok(req) => Routed::One(first_shard, req),
            Err(e) => Routed::Reply(Reply::Error(e)),
        };
    }
    if merge == FanMerge::Refuse {
        return Routed::Reply(Reply::Error(CmdError::CrossSlot));
    }
    // Validate the whole command once, so syntax errors read as Redis's.
    if let Err(e) = parse(argv) {
        return Routed::Reply(Reply::Error(e));
    }
    let nkeys = keys.len();
    let split = cmd::split_by_shard(spec, argv, &keys, |k| shared.shard_of(k));
    let mut parts = Vec::with_capacity(split.len());
    let mut checks = Vec::new();
    let mut positions = Vec::with_capacity(split.len());
    for (shard, part_argv, pos) in split {
        match parse(&part_argv) {
            Ok(req) => parts.push((shard, req)),
            Err(e) => return Routed::Reply(Reply::Error(e)),
        }
        if let Some(validate) = validate {
            match validate(&part_argv) {
                Ok(req) => checks.push((shard, req)),
                Err(e) => return Routed::Reply(Reply::Error(e)),
            }
        }
        positions.push(pos);
    }
    let check_positions = positions.clone();
    let merge: Merge = match merge {
        FanMerge::SumInt => Box::new(cmd::merge_sum),
        FanMerge::AllOk => Box::new(cmd::merge_ok),
        FanMerge::KeyOrder => Box::new(move |replies: Vec<Reply>| {
            if let Some(e) = cmd::first_error(&replies) {
                return e;
            }
            let mut out: Vec<Reply> = (0..nkeys).map(|_| Reply::NullBulk).collect();
            for (reply, pos) in replies.into_iter().zip(positions) {
                if let Reply::Array(items) = reply {
                    for (item, n) in items.into_iter().zip(pos) {
                        out[n] = item;
                    }
                }
            }
            Reply::Array(out)
        }),
        FanMerge::Streams => {
            let key_pos: Vec<Vec<(Bytes, usize)>> = positions
                .iter()
                .map(|pos| pos.iter().map(|&n| (argv[keys[n]].clone(), n)).collect())
                .collect();
            Box::new(move |replies: Vec<Reply>| merge_streams(replies, key_pos))
        }
        FanMerge::Refuse => Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk)),
    };
    if validate.is_none() {
        return Routed::Fan(parts, merge, None);
    }
    let check_merge: Merge =
        Box::new(move |replies: Vec<Reply>| merge_checks(replies, &check_positions));
    Routed::Fan(
        checks,
        check_merge,
        Some(Then::Fan {
            parts,
            merge,
            then_block: None,
        }),
    )
}

/// Merge a validation step: each part answers `+OK` or `[local key index,
/// error]`; the answer is the error of the first failing key in the caller's
/// key order, else `+OK`.
fn merge_checks(replies: Vec<Reply>, positions: &[Vec<usize>]) -> Reply {
    let mut first: Option<(usize, Reply)> = None;
    for (reply, pos) in replies.into_iter().zip(positions) {
        let (n, err) = match reply {
            Reply::Array(mut v) if v.len() == 2 => {
                let err = v.pop().unwrap_or(Reply::Ok);
                let local = match v.pop() {
                    Some(Reply::Int(i)) => usize::try_from(i).unwrap_or(0),
                    _ => 0,
                };
                (pos.get(local).copied().unwrap_or(usize::MAX), err)
            }
            e @ Reply::Error(_) => (usize::MAX, e),
            _ => continue,
        };
        if first.as_ref().is_none_or(|(m, _)| n < *m) {
            first = Some((n, err));
        }
    }
    first.map_or(Reply::Ok, |(_, e)| e)
}

/// Route a read that asks to block: park it directly when its keys live on
/// one shard; otherwise first run the non-blocking form over every shard and
/// park only if that found nothing (DESIGN.md "Blocking reads", step 1 and 2).
#[allow(clippy::too_many_arguments)]
fn route_blocking(
    spec: &'static CommandSpec,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    merge: FanMerge,
    validate: Option<table::ParseFn>,
    park: fn(&[Bytes], Arc<Ticket>) -> Result<ShardReq, CmdError>,
    timeout_ms: u64,
    argv: &[Bytes],
    shared: &Shared,
) -> Routed {
    if let Err(e) = parse(argv) {
        return Routed::Reply(Reply::Error(e));
    }
    let keys = spec.key_indexes(argv);
    let split = cmd::split_by_shard(spec, argv, &keys, |k| shared.shard_of(k));
    let plan_parts: Vec<(ShardId, Vec<Bytes>)> =
        split.iter().map(|(s, a, _)| (*s, a.clone())).collect();
    let plan = BlockPlan {
        parts: plan_parts,
        park,
        timeout_ms,
    };
    if split.len() <= 1 {
        return Routed::Block(plan);
    }
    match route_keyed(spec, parse, merge, validate, argv, shared) {
        Routed::Fan(parts, merge, None) => Routed::Fan(parts, merge, Some(Then::Block(plan))),
        Routed::Fan(
            checks,
            check_merge,
            Some(Then::Fan {
                parts,
                merge,
                then_block: None,
            }),
        ) => Routed::Fan(
            checks,
            check_merge,
            Some(Then::Fan {
                parts,
                merge,
                then_block: Some(plan),
            }),
        ),
        other => other,
    }
}

/// Park a blocking read on its shards under one ticket; the slot `seq` is filled
/// by whichever shard serves it, or by the IO thread on timeout.
fn start_block(
    io: u16,
    shared: &Shared,
    batches: &mut [Vec<Job>],
    conn: &mut Conn,
    seq: u64,
    plan: BlockPlan,
) {
    let ticket = Ticket::new();
    for (shard, part_argv) in &plan.parts {
        match (plan.park)(part_argv, ticket.clone()) {
            Ok(req) => batches[usize::from(shard.0)].push(Job {
                req,
                db: conn.session.db as u16,
                reply_to: ReplyTo {
                    io,
                    conn: conn.session.id,
                    seq,
                    part: 0,
                },
            }),
            Err(e) => {
                if ticket.claim() {
                    conn.fill(seq, 0, Reply::Error(e));
                }
                return;
            }
        }
    }
    let deadline =
        (plan.timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(plan.timeout_ms));
    conn.blocked = Some(Blocked {
        seq,
        ticket,
        deadline,
    });
    conn.hold_until = Some(seq);
    shared.blocked_clients.fetch_add(1, Ordering::Relaxed);
}

/// Merge XREAD-style replies from several shards: `[key, entries]` pairs in the
/// caller's key order; a null reply when no shard returned anything.
fn merge_streams(replies: Vec<Reply>, key_pos: Vec<Vec<(Bytes, usize)>>) -> Reply {
    if let Some(e) = cmd::first_error(&replies) {
        return e;
    }
    let mut items: Vec<(usize, (Reply, Reply))> = Vec::new();
    for (reply, keys) in replies.into_iter().zip(key_pos) {
        let pairs = match reply {
            Reply::PairMap(p) => p,
            _ => continue,
        };
        for (k, v) in pairs {
            let n = match &k {
                Reply::Bulk(b) => keys.iter().find(|(kb, _)| kb == b).map(|(_, n)| *n),
                _ => None,
            }
            .unwrap_or(usize::MAX);
            items.push((n, (k, v)));
        }
    }
    if items.is_empty() {
        return Reply::NullArray;
    }
    items.sort_by_key(|(n, _)| *n);
    Reply::PairMap(items.into_iter().map(|(_, p)| p).collect())
}
