//! Connections: reading and decoding RESP, admitting and routing each command,
//! and writing replies in request order. These functions run on the shard
//! thread that owns the connection (see [`crate::shard`] for the loop).
//!
//! Life of a command here: [`read_conn`] fills the query buffer →
//! [`process_input`] decodes every complete command → [`gates::admit`] runs
//! Redis's pre-execution checks → [`router::route`] parses it into a typed
//! request and decides where it runs → the request joins this iteration's
//! batch for its shard ([`Outgoing`]); the loop runs its own shard's batch
//! inline and sends the others once per iteration.

pub mod acceptor;
pub mod codec;
pub mod conn;
pub mod gates;
pub mod socket;

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use mio::net::TcpStream;
use socket::{Endpoint, Socket};

use crate::cmd::{CommandSpec, Flags, Handler};
use crate::error::CmdError;
use crate::monitor::Peer;
use crate::reply::Reply;
use crate::route::router::{self, start_block, start_fan, Routed};
use crate::route::slot::ShardId;
use crate::server::Shared;
use crate::shard::msg::Job;
use codec::{DecodeLimits, Decoded};
use conn::{ClientShared, Conn, Pending, Session};

pub use gates::OOM_ERROR;

/// Incremented by CLIENT KILL; shard threads then look for connections marked killed.
pub static KILL_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Consecutive single-shard commands a connection sends to one other shard
/// before it is handed over to that shard's thread.
pub const HANDOVER_STREAK: u32 = 32;

/// Client limits from the configuration, re-read once per loop iteration so
/// CONFIG SET applies at once without a lock per read or write.
#[derive(Clone, Copy)]
pub struct Limits {
    pub query_buffer_bytes: usize,
    pub max_bulk_bytes: i64,
    pub output: crate::config::OutputBufferLimit,
    pub timeout_s: u64,
    pub maxmemory_bytes: u64,
}

impl Limits {
    /// The limits in force now (`previous` if the configuration lock is poisoned).
    pub fn read(shared: &Shared, previous: Option<Limits>) -> Limits {
        match shared.config.read() {
            Ok(c) => Limits::of(&c),
            Err(_) => previous.unwrap_or_else(|| Limits::of(&crate::config::Config::default())),
        }
    }

    fn of(c: &crate::config::Config) -> Limits {
        Limits {
            query_buffer_bytes: c.client_query_buffer_limit,
            max_bulk_bytes: c.proto_max_bulk_len,
            output: c.client_output_buffer_limit[0],
            timeout_s: c.timeout_s,
            maxmemory_bytes: c.maxmemory_bytes,
        }
    }

    /// The decoder's share of the limits.
    pub fn decode(&self) -> DecodeLimits {
        DecodeLimits {
            max_bulk_bytes: self.max_bulk_bytes,
            max_multibulk: codec::MULTIBULK_MAX,
            unauthenticated: false,
        }
    }
}

/// What one loop iteration of a shard thread sends out: requests per
/// destination shard (its own included: those run inline, with no hop), and
/// how many single-shard commands ran here vs elsewhere (INFO
/// `local_commands` / `remote_commands`).
pub struct Outgoing {
    /// Index of this shard thread.
    pub me: u16,
    /// Requests collected this iteration, per destination shard.
    pub batches: Vec<Vec<Job>>,
    pub local_commands: u64,
    pub remote_commands: u64,
}

impl Outgoing {
    /// Count a single-shard command of `conn` for `shard`: local or remote,
    /// and toward the connection's handover streak.
    pub fn count(&mut self, conn: &mut Conn, shard: ShardId) {
        conn.note_shard(shard, ShardId(self.me));
        if shard.0 == self.me {
            self.local_commands += 1;
        } else {
            self.remote_commands += 1;
        }
    }

    /// Empty batches for `shards` shards, on shard thread `me`.
    pub fn new(me: u16, shards: usize) -> Outgoing {
        Outgoing {
            me,
            batches: (0..shards).map(|_| Vec::new()).collect(),
            local_commands: 0,
            remote_commands: 0,
        }
    }
}

/// Runs a request on the calling shard thread's own data, right away (the
/// shard thread implements it over its `ShardDb`). Requests for the thread's
/// own keys run as they are decoded, as in Redis's event loop, so a pipeline's
/// replies reach the output buffer (and its limits) one by one.
pub trait RunLocal {
    /// Run `job` (addressed to `conn`, which is borrowed here) after any
    /// request still queued for this shard in `out`, and put its reply in the
    /// connection's queue.
    fn run_local(&mut self, out: &mut Outgoing, conn: &mut Conn, job: Job);
}

/// Admit a freshly accepted socket (or refuse it: `maxclients`), register it in
/// the server-wide client registry, and build its connection state for shard
/// thread `thread`.
pub fn new_conn(shared: &Shared, mut sock: Socket, addr: Endpoint, thread: u16) -> Option<Conn> {
    shared
        .stats
        .total_connections_received
        .fetch_add(1, Ordering::Relaxed);
    let (maxclients, needs_auth) = shared
        .config
        .read()
        .map(|c| (c.maxclients, c.requirepass.is_some()))
        .unwrap_or((10000, false));
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let laddr = match &addr {
        // A Unix client's `laddr` is the socket path, like its `addr`.
        Endpoint::Unix(_) => addr.clone(),
        Endpoint::Tcp(_) => sock.local_endpoint(&Endpoint::Tcp(shared.addr)),
    };
    let client = Arc::new(ClientShared {
        id,
        addr,
        laddr,
        fd: std::os::fd::AsRawFd::as_raw_fd(&sock),
        thread: AtomicU16::new(thread),
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
        blocked: Arc::new(AtomicBool::new(false)),
        ticket: Mutex::new(std::sync::Weak::new()),
        monitor: AtomicBool::new(false),
        no_evict: AtomicBool::new(false),
        no_touch: AtomicBool::new(false),
    });
    // Count and register under one lock: shard threads admit their new
    // connections concurrently, and a check apart from the insert let two
    // of them both take the last place.
    let admitted = match shared.clients.lock() {
        Ok(c) if c.len() >= maxclients => false,
        Ok(mut c) => {
            c.insert(id, client.clone());
            true
        }
        Err(_) => true,
    };
    if !admitted {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = sock.write(format!("-{}\r\n", CmdError::MaxClients).as_bytes());
        return None;
    }
    Some(Conn {
        sock,
        session: Session {
            id,
            db: 0,
            resp3: false,
            authenticated: !needs_auth,
            multi: None,
            multi_bytes: 0,
            multi_failed: false,
            multi_flags: crate::cmd::Flags::NONE,
            exec_changed_functions: false,
            readonly: false,
            asking: false,
            transit: None,
            watching: Vec::new(),
            monitor: None,
            reply_off: false,
            reply_skip: 0,
            shared: client,
        },
        rbuf: BytesMut::with_capacity(16 * 1024),
        scan: Default::default(),
        need_bytes: 0,
        wbuf: BytesMut::new(),
        wchain: Default::default(),
        wchain_bytes: 0,
        base_seq: 0,
        slots: Default::default(),
        close_after: None,
        hold_until: None,
        slow_timers: Vec::new(),
        deferred: None,
        function_change: None,
        dead: false,
        input_closed: false,
        want_write: false,
        blocked: None,
        output_soft_since: None,
        output_limit_hit: None,
        paused: false,
        peer_closed: false,
        hard_limit_bytes: 0,
        streak_shard: ShardId(thread),
        sent_to: 0,
        streak: 0,
        answered: false,
        out_resp3: false,
        proto_switches: Default::default(),
        silent: Default::default(),
        cmd_cache: None,
    })
}

/// How much one `read` takes from a socket at most, bytes (Redis: PROTO_IOBUF_LEN).
pub const READ_CHUNK_BYTES: usize = 16 * 1024;
/// How much a connection may read per loop iteration, bytes: a client that
/// pipelines megabytes is served in slices, between which everyone else is
/// (Redis reads one PROTO_IOBUF_LEN per event loop turn).
pub const READ_BUDGET_BYTES: usize = 64 * 1024;
/// Most of one big argument read per loop iteration, bytes (Redis reads a
/// big bulk's remainder in one call; this keeps a 100 MB value from stalling
/// other clients while it arrives).
pub const BIG_READ_BYTES: usize = 1 << 20;

/// Most reply slots a connection may have queued (in flight on other shards,
/// or ready behind one that is) before its thread stops decoding its input:
/// a client pipelining thousands of commands on other shards' keys cannot
/// make the server hold thousands of unencoded replies at once.
pub const MAX_PENDING_REPLIES: usize = 1024;

/// What [`read_conn`] did.
pub struct ReadOutcome {
    /// Bytes read.
    pub bytes: u64,
    /// The budget ran out before the socket did: read again next iteration
    /// (sockets are edge-triggered, so no new event will say so).
    pub more: bool,
}

/// Read what the socket has into the query buffer, through `scratch`, up to
/// this iteration's budget ([`READ_BUDGET_BYTES`], or the rest of a big
/// argument up to [`BIG_READ_BYTES`]). On end of file marks the input
/// closed (what was read still runs and is answered first); marks the
/// connection dead on a socket error, or when the query buffer passes
/// `client-query-buffer-limit` (Redis closes such a client without a reply
/// and counts it). The whole arguments of a command still being read do
/// not count, as Redis has taken them out of its query buffer: the limit
/// bounds what is pending, so one command may carry several arguments
/// that together pass it.
///
/// A frame whose size is known (a bulk header was read) gets its whole
/// buffer reserved at once, so a big argument is not copied again each time
/// the buffer would double.
pub fn read_conn(
    shared: &Shared,
    conn: &mut Conn,
    query_buffer_bytes: usize,
    scratch: &mut [u8],
) -> ReadOutcome {
    let missing = conn.need_bytes.saturating_sub(conn.rbuf.len());
    if missing > READ_CHUNK_BYTES && conn.need_bytes <= query_buffer_bytes {
        conn.rbuf.reserve(missing);
    }
    let budget = READ_BUDGET_BYTES.max(missing.min(BIG_READ_BYTES));
    let mut total = 0u64;
    let mut more = false;
    loop {
        if total as usize >= budget {
            more = true;
            break;
        }
        match conn.sock.read(scratch) {
            Ok(0) => {
                // What came before still runs and is answered (see
                // `Conn::input_done`).
                conn.input_closed = true;
                break;
            }
            Ok(n) => {
                conn.rbuf.extend_from_slice(&scratch[..n]);
                total += n as u64;
                // A short read drained the stream socket's receive queue:
                // skip the read that would only say EAGAIN (data arriving
                // later raises a new edge-triggered event). Not when the
                // event already said the peer closed: its EOF raises no
                // new event, so read on until it shows.
                let drained = n < scratch.len() && !conn.peer_closed;
                if query_buffer_used(conn) > query_buffer_bytes {
                    close_over_query_limit(shared, conn);
                    break;
                }
                if drained {
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
    ReadOutcome { bytes: total, more }
}

/// What counts against `client-query-buffer-limit`: the query buffer less
/// the whole arguments of the command still being read (Redis has moved
/// those out of its query buffer), plus what MULTI has queued (Redis 7.4+).
///
/// # Source
/// `processMultibulkBuffer`, redis/src/networking.c; redis PR #12961 (7.4):
/// the transaction's queued arguments count toward the limit.
fn query_buffer_used(conn: &Conn) -> usize {
    let pending = conn.rbuf.len() - conn.scan.parsed_bytes().min(conn.rbuf.len());
    pending + conn.session.multi_bytes
}

/// Close a client past `client-query-buffer-limit`, without a reply, as
/// Redis does: logged, counted in INFO, its buffer and queue dropped.
fn close_over_query_limit(shared: &Shared, conn: &mut Conn) {
    log::warn!(
        "Closing client that reached max query buffer length: id={} addr={} (qbuf initial bytes: {:?})",
        conn.session.id,
        conn.session.shared.addr,
        String::from_utf8_lossy(&conn.rbuf[..conn.rbuf.len().min(64)]),
    );
    shared
        .stats
        .client_query_buffer_limit_disconnections
        .fetch_add(1, Ordering::Relaxed);
    shared
        .stats
        .recent_max_input_bytes
        .observe(conn.rbuf.len() as u64);
    conn.dead = true;
    conn.rbuf = BytesMut::new();
    conn.scan = Default::default();
    crate::cmd::tx::reset_multi(&mut conn.session);
}

/// Turn on TCP keepalive: first probe after `idle_s` seconds of silence, then
/// every `idle_s / 3` seconds, 3 probes before the peer counts as dead.
///
/// # Source
/// `anetKeepAlive`, redis/src/anet.c.
pub fn set_keepalive(sock: &TcpStream, idle_s: u64) {
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

/// Write as much of the connection's output (the chain of big payloads,
/// then `wbuf`) as the socket takes; returns bytes written.
pub fn write_conn(conn: &mut Conn) -> u64 {
    let mut written = 0u64;
    while !conn.dead {
        let chunk: &[u8] = match conn.wchain.front() {
            Some(b) => b,
            None if !conn.wbuf.is_empty() => &conn.wbuf,
            None => break,
        };
        match conn.sock.write(chunk) {
            Ok(0) => {
                conn.dead = true;
            }
            Ok(n) => {
                written += n as u64;
                match conn.wchain.front_mut() {
                    Some(b) => {
                        bytes::Buf::advance(b, n);
                        conn.wchain_bytes -= n;
                        if b.is_empty() {
                            conn.wchain.pop_front();
                        }
                    }
                    None => {
                        let _ = conn.wbuf.split_to(n);
                    }
                }
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

/// Decode, admit and route every complete command in the connection's
/// buffer, until it is empty or a command holds the pipeline (a blocking
/// read, a two-step fan-out) or the connection is closing. Commands on this
/// thread's own keys run at once (`local`); after each command the ready
/// replies are encoded and the output buffer limit is checked, so a client
/// over its limit is closed before more of its commands run (Redis:
/// `closeClientOnOutputBufferLimitReached` stops `processInputBuffer`).
pub fn process_input(
    shared: &Arc<Shared>,
    out: &mut Outgoing,
    conn: &mut Conn,
    limits: &Limits,
    local: &mut dyn RunLocal,
) {
    let mut decode_limits = limits.decode();
    conn.hard_limit_bytes = limits.output.hard_bytes;
    loop {
        if conn.dead || conn.close_after.is_some() || conn.hold_until.is_some() {
            return;
        }
        if let Some(argv) = conn.deferred.take() {
            run_command(shared, out, conn, argv, limits, local);
            continue;
        }
        if conn.rbuf.is_empty() || conn.rbuf.len() < conn.need_bytes {
            return;
        }
        if conn.session.shared.killed.load(Ordering::Relaxed) {
            // CLIENT KILL answered for it: none of its later commands runs
            // (Redis stops reading a client it closes asynchronously).
            conn.dead = true;
            return;
        }
        if conn.slots.len() >= MAX_PENDING_REPLIES {
            // Resumed once replies drain (see `Conn::paused`).
            conn.paused = true;
            return;
        }
        decode_limits.unauthenticated = !conn.session.authenticated;
        match codec::decode_resuming(&mut conn.rbuf, decode_limits, &mut conn.scan) {
            Ok(Decoded::Command(argv)) => {
                conn.need_bytes = 0;
                if argv.is_empty() {
                    continue;
                }
                run_command(shared, out, conn, argv, limits, local);
                // A queued command may take the transaction past the limit.
                if conn.session.multi_bytes > 0
                    && query_buffer_used(conn) > limits.query_buffer_bytes
                {
                    close_over_query_limit(shared, conn);
                    return;
                }
            }
            Ok(Decoded::Incomplete { min_total }) => {
                conn.need_bytes = min_total;
                return;
            }
            Err(e) => {
                let seq = conn.push_slot(Pending::Ready(Reply::Error(e.reply())));
                conn.close_after = Some(seq);
                conn.rbuf.clear();
                return;
            }
        }
    }
}

/// Dispatch one command and write what is ready of the replies.
fn run_command(
    shared: &Arc<Shared>,
    out: &mut Outgoing,
    conn: &mut Conn,
    argv: Vec<Bytes>,
    limits: &Limits,
    local: &mut dyn RunLocal,
) {
    dispatch(shared, out, conn, argv, local);
    conn.encode_ready(Some(&limits.output));
    if conn.session.monitor.is_some() {
        // The lines so far (its own command's included) follow its reply,
        // before the next command's.
        conn.take_lines(Some(&limits.output));
    }
}

/// A command answered on the connection's thread (`started` when its
/// handler was called): its time in INFO commandstats and latencystats
/// (its call and any error are counted by the caller), and SLOWLOG if it
/// was slow. `None` for commands run elsewhere, which are timed there.
/// Also for the connection commands EXEC runs.
pub fn time_answered_here(
    shared: &Shared,
    spec: &CommandSpec,
    stat: Option<usize>,
    started: Option<quanta::Instant>,
    argv: &[Bytes],
    client: &ClientShared,
) {
    let Some(started) = started else {
        return;
    };
    let ns = started.elapsed().as_nanos() as u64;
    let row = stat.map_or(crate::shard::msg::NO_CMD, |i| i as u32);
    shared.cmdstats.count_exec(row, ns, None);
    if !spec.flags.has(Flags::SKIP_SLOWLOG) && shared.slowlog.is_slow(ns) {
        shared.slowlog.push_for(argv, ns / 1000, client);
    }
}

/// Time a command over several shards (reply slot `seq`) for SLOWLOG,
/// from `started` (its handler's call, for a connection command) or now;
/// [`finish_slow_timer`] logs it when its merged reply is ready. `parked`:
/// a blocking read parked at once on its shards. Nothing when SLOWLOG is
/// off or the command is never logged (EXEC).
fn start_slow_timer(
    shared: &Shared,
    spec: &CommandSpec,
    conn: &mut Conn,
    seq: u64,
    started: Option<quanta::Instant>,
    argv: Vec<Bytes>,
    parked: bool,
) {
    if spec.flags.has(Flags::SKIP_SLOWLOG) || !shared.slowlog.is_on() {
        return;
    }
    // Timers of replies answered some other way (a shutdown, a dropped
    // hold) go once their slot is written.
    let written = conn.base_seq;
    conn.slow_timers.retain(|t| t.seq >= written);
    let started = started.unwrap_or_else(quanta::Instant::now);
    conn.slow_timers.push(conn::SlowTimer {
        seq,
        started,
        parked_ns: parked.then(|| started.elapsed().as_nanos() as u64),
        argv,
    });
}

/// After (a part of) reply `seq` arrived: if it completed a command timed
/// by [`start_slow_timer`], log it in SLOWLOG if it was slow. A command that
/// went on to park (`parked`: a read over several shards that found
/// nothing) or to run again is logged once it is answered (served, timed
/// out, unblocked), with its time until it first parked: Redis leaves the
/// wait out.
pub fn finish_slow_timer(shared: &Shared, conn: &mut Conn, seq: u64, parked: bool) {
    let Some(i) = conn.slow_timers.iter().position(|t| t.seq == seq) else {
        return;
    };
    if parked {
        let t = &mut conn.slow_timers[i];
        t.parked_ns = t
            .parked_ns
            .or_else(|| Some(t.started.elapsed().as_nanos() as u64));
        return;
    }
    if !conn.is_answered(seq) {
        return;
    }
    let timer = conn.slow_timers.swap_remove(i);
    let ns = timer
        .parked_ns
        .unwrap_or_else(|| timer.started.elapsed().as_nanos() as u64);
    if shared.slowlog.is_slow(ns) {
        shared
            .slowlog
            .push_for(&timer.argv, ns / 1000, &conn.session.shared);
    }
}

/// Feed monitors the commands EXEC is about to run, each with the database
/// it leaves selected (a queued SELECT changes it for itself and the
/// commands after it, as Redis feeds a command after it ran), before
/// EXEC's own line, as Redis shows each command when EXEC runs it. Nothing
/// when the transaction is doomed (EXEC answers EXECABORT and runs none).
///
/// # Source
/// `execCommand` (redis/src/multi.c) runs each queued command through
/// `call`, which feeds monitors (redis/src/server.c).
fn feed_transaction(shared: &Shared, session: &Session) {
    let Some(queue) = session.multi.as_ref().filter(|_| !session.multi_failed) else {
        return;
    };
    let now_us = crate::monitor::now_us();
    let mut db = session.db;
    for argv in queue {
        let Some(spec) = crate::cmd::table::row_of(argv) else {
            continue;
        };
        if crate::monitor::skips(spec) {
            continue;
        }
        if spec.name == "SELECT" {
            // Fed after it ran, as any command: in its new database.
            let index = argv.get(1).and_then(|a| crate::cmd::args::parse_i64(a));
            if let Some(i) = index.and_then(|i| usize::try_from(i).ok()) {
                if i < shared.databases {
                    db = i;
                }
            }
        }
        shared
            .monitors
            .feed(now_us, db, Peer::Client(&session.shared.addr), argv);
    }
}

/// Admit one decoded command, then answer it here or queue it for its
/// shard(s); under `CLIENT REPLY OFF` or `SKIP` its reply (an error
/// included) is not written.
fn dispatch(
    shared: &Arc<Shared>,
    out: &mut Outgoing,
    conn: &mut Conn,
    argv: Vec<Bytes>,
    local: &mut dyn RunLocal,
) {
    let first = conn.next_seq();
    dispatch_one(shared, out, conn, argv, local);
    if conn.deferred.is_some() {
        // Held back by `gates::gate_order`: counted when it runs.
        return;
    }
    let s = &mut conn.session;
    if s.reply_off || s.reply_skip > 0 {
        s.reply_skip = s.reply_skip.saturating_sub(1);
        let end = conn.next_seq();
        conn.silent.extend(first..end);
    }
}

fn dispatch_one(
    shared: &Arc<Shared>,
    out: &mut Outgoing,
    conn: &mut Conn,
    argv: Vec<Bytes>,
    local: &mut dyn RunLocal,
) {
    let mut argv = Some(argv);
    let Some(gates::Admitted { spec, stat }) = gates::admit(shared, conn, &mut argv) else {
        return;
    };
    let Some(argv) = argv else {
        return;
    };
    let transit = conn.session.transit.take();
    let proto_before = conn.session.resp3;
    if shared.monitors.is_active() && spec.name == "EXEC" {
        feed_transaction(shared, &conn.session);
    }
    // A command answered on this thread is timed here, as a shard times
    // the ones it runs (INFO commandstats and latencystats, SLOWLOG).
    let started = matches!(spec.handler, Handler::Conn(_)).then(quanta::Instant::now);
    let mut routed = router::route(spec, &argv, &mut conn.session, shared);
    if let Some(check) = transit {
        routed = crate::route::transit::guard(routed, check);
    }
    // MONITOR: one relaxed load when nobody monitors. After routing, so a
    // SELECT shows its new database, as Redis feeds monitors after a call.
    if shared.monitors.is_active() && !crate::monitor::skips(spec) {
        let now_us = crate::monitor::now_us();
        let s = &conn.session;
        shared
            .monitors
            .feed(now_us, s.db, Peer::Client(&s.shared.addr), &argv);
    }
    match routed {
        Routed::Reply(r) => {
            shared.count_call_at(stat, r.is_error(), false);
            if let Some(e) = r.error_text() {
                shared.cmdstats.count_error(e);
            }
            time_answered_here(shared, spec, stat, started, &argv, &conn.session.shared);
            conn.push_slot(Pending::Ready(r));
        }
        Routed::Close(r) => {
            shared.count_call_at(stat, false, false);
            time_answered_here(shared, spec, stat, started, &argv, &conn.session.shared);
            let seq = conn.push_slot(Pending::Ready(r));
            conn.close_after = Some(seq);
        }
        Routed::Drop => {
            shared.count_call_at(stat, false, false);
            time_answered_here(shared, spec, stat, started, &argv, &conn.session.shared);
            conn.dead = true;
        }
        Routed::Wait(timeout_ms, reply) => {
            shared.count_call_at(stat, false, false);
            time_answered_here(shared, spec, stat, started, &argv, &conn.session.shared);
            let seq = conn.push_slot(Pending::Waiting);
            let row = stat.map_or(crate::shard::msg::NO_CMD, |i| i as u32);
            router::start_wait(shared, conn, seq, timeout_ms, reply, row);
        }
        Routed::One(shard, req) => {
            shared.count_call_at(stat, false, false);
            out.count(conn, shard);
            let seq = conn.push_slot(if shard.0 == out.me {
                Pending::Waiting
            } else {
                Pending::Hop
            });
            let mut job = conn.job(out.me, seq, 0, req);
            job.cmd = stat.map_or(crate::shard::msg::NO_CMD, |i| i as u32);
            job.argv = Some(argv);
            if shard.0 == out.me {
                local.run_local(out, conn, job);
            } else {
                conn.note_sent(shard);
                out.batches[usize::from(shard.0)].push(job);
            }
        }
        Routed::Block(mut plan) => {
            shared.count_call_at(stat, false, false);
            let seq = conn.push_slot(Pending::Waiting);
            if plan.parts.len() > 1 {
                // Parked on several shards: timed here (one shard's own
                // parked read is timed by that shard, with its argv).
                start_slow_timer(shared, spec, conn, seq, started, argv.clone(), true);
            }
            plan.counted = stat.map(|i| (i as u32, argv));
            if let [(shard, _)] = plan.parts.as_slice() {
                // A blocking read on one shard's keys counts toward
                // handover like any single-shard command (consumers).
                out.count(conn, *shard);
            }
            let row = stat.map_or(crate::shard::msg::NO_CMD, |i| i as u32);
            start_block(out.me, shared, &mut out.batches, conn, seq, plan, row);
        }
        Routed::Fan(parts, merge, then) => {
            shared.count_call_at(stat, false, false);
            let seq = conn.push_slot(Pending::Waiting);
            start_slow_timer(shared, spec, conn, seq, started, argv, false);
            let row = stat.map_or(crate::shard::msg::NO_CMD, |i| i as u32);
            start_fan(out.me, &mut out.batches, conn, seq, parts, merge, then, row);
        }
        Routed::Atomic(shards, body, merge, then) => {
            shared.count_call_at(stat, false, false);
            let coordinator = shards.iter().copied().min_by_key(|s| s.0);
            let coordinator = coordinator.unwrap_or(ShardId(out.me));
            let others = shards
                .iter()
                .filter(|s| **s != coordinator)
                .fold(0u64, |m, s| m | 1 << (s.0 % 64));
            let flush = conn.must_flush(others);
            let seq = conn.push_slot(Pending::Waiting);
            start_slow_timer(shared, spec, conn, seq, started, argv, false);
            // Connections that keep running transactions move to their
            // coordinator's thread (handover), where they need not wait.
            out.count(conn, coordinator);
            let (parts, merge, then) =
                crate::route::held::held_steps(shared, &shards, body, merge, flush, then);
            let row = stat.map_or(crate::shard::msg::NO_CMD, |i| i as u32);
            start_fan(out.me, &mut out.batches, conn, seq, parts, merge, then, row);
            if coordinator.0 != out.me {
                // Later requests wait for it: sent now, one for a shard the
                // transaction holds could reach it before the coordinator's
                // hold does. On the coordinator's own thread the transaction
                // runs before this iteration's requests leave.
                conn.hold_until = Some(seq);
            }
        }
    }
    if conn.session.resp3 != proto_before {
        // HELLO switched protocols: its reply and later ones use
        // the new one, replies still due from other shards the old one.
        let seq = conn.next_seq().saturating_sub(1);
        conn.note_protocol(seq);
    }
}
