//! One client connection on its shard thread: socket, buffers, the in-order reply
//! queue, and the session state commands see (`Session`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::config::OutputBufferLimit;
use crate::error::CmdError;
use crate::io::socket::{Endpoint, Socket};
use crate::reply::Reply;
use crate::route::router::Merge;
use crate::route::slot::ShardId;
use crate::shard::blocking::Ticket;
use crate::shard::msg::{Job, ReplyTo, ShardReq};

/// Bulk replies this large are written from the stored value without a copy, bytes.
pub const BIG_BULK_BYTES: usize = 64 * 1024;

/// Hasher for connection ids (`CLIENT ID`s, small unique integers): one
/// multiply instead of SipHash, for the maps a shard thread consults per reply.
#[derive(Default, Clone, Copy)]
pub struct ConnIdHasher(u64);

impl std::hash::Hasher for ConnIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by connection id.
pub type ConnMap<V> =
    std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<ConnIdHasher>>;

/// A blocking read to park on shards if the first, non-blocking pass over
/// several shards found nothing.
pub struct BlockPlan {
    /// Each shard's part of the argv.
    pub parts: Vec<(ShardId, Vec<Bytes>)>,
    pub park: fn(&[Bytes], Arc<Ticket>) -> Result<ShardReq, CmdError>,
    /// BLOCK timeout in ms, 0 = forever.
    pub timeout_ms: u64,
    /// A read over streams of several shards (XREAD / XREADGROUP): woken, it
    /// runs again as a whole from this command line (see [`Rerun`]).
    pub rerun: Option<Rerun>,
    /// A read on a slot in transit: the key check its shard makes in the
    /// same step that serves or parks it (see [`crate::route::transit`]).
    pub transit: Option<crate::cluster::TransitCheck>,
    /// The command statistics row and command line of a read on one shard,
    /// so its shard times it (INFO commandstats `usec`) and SLOWLOG sees it,
    /// as for any single-shard command; `None` for parts of larger commands.
    pub counted: Option<(u32, Vec<Bytes>)>,
}

/// What a blocked read over several shards needs to run again when a
/// shard wakes it (Redis 7.2+ re-executes an unblocked command, so the
/// client gets every stream with data, not only the waking shard's).
pub struct Rerun {
    pub spec: &'static crate::cmd::CommandSpec,
    pub argv: Vec<Bytes>,
}

/// What a fan-out does once every part has answered, instead of answering.
pub enum Then {
    /// A null-array merged reply parks the read on its shards (blocking
    /// XREAD / XREADGROUP over several shards, DESIGN.md "Blocking reads").
    Block(BlockPlan),
    /// The fan-out was one step of several: an error merged reply is the
    /// answer; anything else starts this next fan-out in the same reply slot,
    /// which may itself be followed by `then` (multi-shard XREADGROUP checks
    /// every key's type and group on every shard before any shard delivers;
    /// a cross-shard RENAME copies, writes, then deletes).
    Fan {
        parts: Vec<(ShardId, ShardReq)>,
        merge: Merge,
        then: Option<Box<Then>>,
    },
    /// A shard woke the connection's blocked read over several shards: run
    /// it again ([`Blocked::rerun`]) in the same reply slot.
    Rerun,
}

impl Then {
    /// Whether the command must hold the connection's pipeline until it is
    /// answered: it may block, or it runs in two steps (later pipelined
    /// commands must not overtake its second step).
    pub fn holds(&self) -> bool {
        matches!(self, Then::Block(_) | Then::Fan { .. })
    }
}

/// A connection waiting in a blocking read.
pub struct Blocked {
    pub seq: u64,
    pub ticket: Arc<Ticket>,
    /// None = BLOCK 0 (forever).
    pub deadline: Option<Instant>,
    /// How to run the read again when a shard wakes it (reads over several shards).
    pub rerun: Option<Rerun>,
    /// The shards the read is parked on (bit per shard id, modulo 64), told
    /// to drop their waiters when the connection's thread ends the wait.
    pub shards: u64,
    /// Command-table row of the blocked command (`CLIENT UNBLOCK ... ERROR`
    /// counts it failed), [`crate::shard::msg::NO_CMD`] when not counted.
    pub row: u32,
    /// The answer when the wait times out (or `CLIENT UNBLOCK ... TIMEOUT`
    /// ends it): a null array for reads and pops, the acknowledgement count
    /// for WAIT.
    pub timeout_reply: Reply,
}

/// What other threads may read about a client (CLIENT LIST / INFO / KILL),
/// shared between its connection's thread and the server-wide registry.
pub struct ClientShared {
    pub id: u64,
    /// The client's end (`addr=`).
    pub addr: Endpoint,
    /// The server's end (`laddr=`).
    pub laddr: Endpoint,
    /// The socket's file descriptor (`fd=`; it stays the same across handovers).
    pub fd: i32,
    /// Shard thread owning the connection (changes when it is handed over).
    pub thread: AtomicU16,
    pub created: Instant,
    pub name: Mutex<Option<String>>,
    pub lib_name: Mutex<Option<String>>,
    pub lib_ver: Mutex<Option<String>>,
    /// Command-table row of the last command (`CLIENT LIST cmd=`; see
    /// `CmdStats::name`), `usize::MAX` before the first one.
    pub last_cmd: AtomicUsize,
    /// Milliseconds since server start at the last command (for `idle=`).
    pub last_interaction_ms: AtomicU64,
    pub db: AtomicUsize,
    pub resp: AtomicUsize,
    /// Bytes buffered in the query buffer (`qbuf=`).
    pub qbuf_bytes: AtomicUsize,
    /// Bytes waiting in the output buffer (`omem=`).
    pub omem_bytes: AtomicUsize,
    /// Set by CLIENT KILL; the owning shard thread closes the connection.
    pub killed: AtomicBool,
    /// Commands in MULTI queue, -1 when not in MULTI (`multi=`).
    pub multi: AtomicU64,
    /// Parked in a blocking read (`flags=b`); set by the shard that parks it
    /// (see [`crate::shard::blocking::Ticket`]).
    pub blocked: Arc<AtomicBool>,
    /// The ticket of the client's latest blocking command, for `CLIENT
    /// UNBLOCK` from other connections (dangling once it is over).
    pub ticket: Mutex<std::sync::Weak<crate::shard::blocking::Ticket>>,
    /// In MONITOR mode (`flags=O`).
    pub monitor: AtomicBool,
    /// `CLIENT NO-EVICT on` (`flags=e`).
    pub no_evict: AtomicBool,
    /// `CLIENT NO-TOUCH on` (`flags=T`, Redis 7.2+).
    pub no_touch: AtomicBool,
}

impl ClientShared {
    /// Memory the client holds (`tot-mem=`): the connection state, its read
    /// buffer (16 KiB, `rbs=`), and its query and output buffers' contents.
    pub fn tot_mem_bytes(&self) -> usize {
        std::mem::size_of::<Conn>()
            + std::mem::size_of::<ClientShared>()
            + 16 * 1024
            + self.qbuf_bytes.load(Ordering::Relaxed)
            + self.omem_bytes.load(Ordering::Relaxed)
    }

    /// The `flags=` field: `O` monitor, `x` in MULTI, `b` blocked, `U`
    /// Unix socket, `e` no-evict, `T` no-touch, in Redis's order, or `N`
    /// for none.
    ///
    /// # Source
    /// `catClientInfoString`, redis/src/networking.c (7.2+).
    fn flags(&self, in_multi: bool) -> String {
        let mut f = String::new();
        let set = [
            (self.monitor.load(Ordering::Relaxed), 'O'),
            (in_multi, 'x'),
            (self.blocked.load(Ordering::Relaxed), 'b'),
            (matches!(self.addr, Endpoint::Unix(_)), 'U'),
            (self.no_evict.load(Ordering::Relaxed), 'e'),
            (self.no_touch.load(Ordering::Relaxed), 'T'),
        ];
        f.extend(set.iter().filter(|(on, _)| *on).map(|(_, c)| *c));
        if f.is_empty() {
            f.push('N');
        }
        f
    }

    /// One `CLIENT LIST` / `CLIENT INFO` line (Redis 7 field order, the fields we track).
    /// `stats` names the last command (`cmd=`).
    pub fn info_line(&self, now_ms_since_start: u64, stats: &crate::server::CmdStats) -> String {
        let name = self
            .name
            .lock()
            .map(|n| n.clone().unwrap_or_default())
            .unwrap_or_default();
        let lib_name = self
            .lib_name
            .lock()
            .map(|n| n.clone().unwrap_or_default())
            .unwrap_or_default();
        let lib_ver = self
            .lib_ver
            .lock()
            .map(|n| n.clone().unwrap_or_default())
            .unwrap_or_default();
        let cmd = stats.name(self.last_cmd.load(Ordering::Relaxed));
        let idle_s = now_ms_since_start
            .saturating_sub(self.last_interaction_ms.load(Ordering::Relaxed))
            / 1000;
        let multi = self.multi.load(Ordering::Relaxed);
        let multi = if multi == u64::MAX { -1 } else { multi as i64 };
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi={} watch=0 qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            name,
            self.created.elapsed().as_secs(),
            idle_s,
            self.flags(multi >= 0),
            self.db.load(Ordering::Relaxed),
            multi,
            self.qbuf_bytes.load(Ordering::Relaxed),
            self.omem_bytes.load(Ordering::Relaxed),
            self.tot_mem_bytes(),
            cmd,
            self.resp.load(Ordering::Relaxed),
            lib_name,
            lib_ver,
        )
    }
}

/// Connection state that commands read and change (SELECT, HELLO, AUTH, MULTI...).
pub struct Session {
    pub id: u64,
    /// Selected database.
    pub db: usize,
    /// RESP3 negotiated with `HELLO 3`.
    pub resp3: bool,
    /// False until AUTH succeeds when `requirepass` is set.
    pub authenticated: bool,
    /// Queued commands while in MULTI.
    pub multi: Option<Vec<Vec<Bytes>>>,
    /// Bytes the queued commands hold (each argument's length plus 8):
    /// counted against `client-query-buffer-limit` with the query buffer,
    /// as Redis 7.4+ counts its transaction state (`mstate.argv_len_sums`).
    pub multi_bytes: usize,
    /// A command failed to queue: EXEC must answer EXECABORT.
    pub multi_failed: bool,
    /// The union of the queued commands' table flags (their subcommand
    /// rows): what EXEC's gates ask of the queue without reading it again.
    pub multi_flags: crate::cmd::Flags,
    /// Set while EXEC plans its queue once a queued FUNCTION LOAD / DELETE
    /// / FLUSH / RESTORE was planned: the registry the later commands of
    /// the transaction see is the one that change leaves, so they look it
    /// up when they run, not when they are planned.
    pub exec_changed_functions: bool,
    /// READONLY (cluster replica reads) was sent.
    pub readonly: bool,
    /// ASKING was sent: the next command may run on a slot this node is
    /// importing (cleared after it, or after EXEC inside MULTI).
    pub asking: bool,
    /// The command being dispatched is on a slot in transit: its keys
    /// decide on the shard whether it runs here (set by the cluster gate,
    /// taken by dispatch).
    pub transit: Option<crate::cluster::TransitCheck>,
    /// Shards holding this connection's WATCHed keys (each once).
    pub watching: Vec<crate::route::slot::ShardId>,
    /// MONITOR mode: the lines waiting for this client (see [`crate::monitor`]).
    pub monitor: Option<crate::monitor::Feed>,
    /// `CLIENT REPLY OFF`: no command's reply is written until `CLIENT REPLY ON`.
    pub reply_off: bool,
    /// `CLIENT REPLY SKIP`: the replies of this many more commands (the
    /// SKIP itself, then the next) are not written.
    pub reply_skip: u8,
    pub shared: Arc<ClientShared>,
}

/// Most encoded output [`Conn::defer_write`] keeps back, bytes (Redis's
/// `NET_MAX_WRITES_PER_EVENT`, the most it writes to one client per event).
pub const DEFER_WRITE_BYTES: usize = 64 * 1024;

/// A monitor takes MONITOR lines from its channel into its output buffer
/// while less than this is waiting to be written, bytes; the rest wait in
/// the channel (bounded by [`crate::monitor::QUEUE_LINES`]).
pub const MONITOR_OUTPUT_BYTES: usize = 64 * 1024;

/// A reply slot in the connection's in-order queue.
pub enum Pending {
    /// Sent to a shard; the reply has not arrived yet.
    Waiting,
    /// One request sent to another shard thread, not a blocking one: its
    /// reply comes back in that thread's next reply message, so the ready
    /// replies before it may wait for it and leave in one write
    /// ([`Conn::defer_write`]).
    Hop,
    /// Ready to be written.
    Ready(Reply),
    /// Fanned out over several shards: parts collected so far, then merged.
    Fan {
        parts: Vec<Option<Reply>>,
        left: usize,
        merge: Merge,
        /// What follows the merge instead of answering, if anything (see [`Then`]).
        then: Option<Then>,
        /// The command's statistics row, for the parts of its later steps
        /// ([`crate::shard::msg::Job::cmd`]).
        row: u32,
    },
}

/// A command over several shards, timed for SLOWLOG: its time is the wall
/// time from dispatch until its merged reply is ready, since its parts run
/// on different threads (waiting behind other work there included); for a
/// blocking read that parked, until it parked (Redis leaves the wait out).
pub struct SlowTimer {
    /// The reply slot the command fills.
    pub seq: u64,
    pub started: quanta::Instant,
    /// Set when the command parked: its time so far, ns.
    pub parked_ns: Option<u64>,
    pub argv: Vec<Bytes>,
}

/// A connection owned by a shard thread.
pub struct Conn {
    pub sock: Socket,
    pub session: Session,
    /// Bytes read and not yet decoded.
    pub rbuf: BytesMut,
    /// How far decoding got into an incomplete command at the front of `rbuf`.
    pub scan: crate::io::codec::FrameScan,
    /// Do not try to decode until `rbuf` holds this many bytes.
    pub need_bytes: usize,
    /// Encoded replies not yet written to the socket.
    pub wbuf: BytesMut,
    /// Big bulk payloads queued whole, without copying, with the encoded
    /// bytes that came before them; everything here goes out before `wbuf`.
    pub wchain: VecDeque<Bytes>,
    /// Bytes in `wchain`.
    pub wchain_bytes: usize,
    /// Sequence number of the first slot in `slots`.
    pub base_seq: u64,
    pub slots: VecDeque<Pending>,
    /// Close once every reply up to and including this sequence number is written.
    pub close_after: Option<u64>,
    /// Stop decoding input until the reply with this sequence number is written
    /// (a blocking command is in flight, as Redis blocks the client).
    pub hold_until: Option<u64>,
    /// Commands over several shards still collecting their parts, timed
    /// for SLOWLOG from dispatch to merged reply (see [`SlowTimer`]).
    pub slow_timers: Vec<SlowTimer>,
    /// A command held back by the ordering gate (`io::gates::gate_order`:
    /// CLIENT KILL / UNBLOCK, CONFIG SET, function registry commands)
    /// until the earlier reply it waits for is written (`hold_until`); it
    /// then runs through every gate again.
    pub deferred: Option<Vec<Bytes>>,
    /// Sequence number of this connection's latest function registry
    /// change (`Flags::FUNCTION_REGISTRY` with `WRITE`): registry commands
    /// after it wait until it is answered.
    pub function_change: Option<u64>,
    /// Peer went away or a fatal error happened: drop as soon as possible.
    pub dead: bool,
    /// A read returned end of file: the peer will send nothing more (it
    /// closed, or only shut down its sending side). The commands it sent
    /// before still run and their replies are still written; then the
    /// connection closes ([`Conn::finished`]).
    pub input_closed: bool,
    /// WRITABLE interest is registered (a previous write was partial).
    pub want_write: bool,
    /// Set while a blocking read is parked on shards.
    pub blocked: Option<Blocked>,
    /// Since when the output buffer has been at or above the soft
    /// `client-output-buffer-limit` (None = below it).
    pub output_soft_since: Option<Instant>,
    /// The output buffer limit closed this connection, with this many bytes
    /// pending (for the connection's thread to count and log once).
    pub output_limit_hit: Option<usize>,
    /// An event said the peer closed its side (or the socket failed): read
    /// until EOF, since no further event will announce it.
    pub peer_closed: bool,
    /// The hard `client-output-buffer-limit` in force (0 = none), bytes: the
    /// room left under it goes with each request ([`Job::reply_budget_bytes`]).
    pub hard_limit_bytes: u64,
    /// Decoding stopped with [`crate::io::MAX_PENDING_REPLIES`] replies
    /// queued; resume once they drain.
    pub paused: bool,
    /// The shard the latest single-shard commands went to, and how many in a
    /// row ([`Conn::note_shard`]); drives connection handover.
    pub streak_shard: ShardId,
    /// Shards (bit `shard % 64`) this connection sent requests to since it
    /// last had nothing in flight (see [`Conn::must_flush`]).
    pub sent_to: u64,
    pub streak: u32,
    /// A reply message from another shard thread filled one of this
    /// connection's slots since its output was last considered (see
    /// [`Conn::defer_write`]).
    pub answered: bool,
    /// The protocol the next reply to encode is written in: the one in force
    /// when its command ran, which a `HELLO` later in the same
    /// pipeline does not change (`session.resp3` is the protocol of the
    /// commands being dispatched now).
    pub out_resp3: bool,
    /// Protocol changes waiting for their reply to be encoded: from the
    /// reply with this sequence number on (the `HELLO`'s own), this protocol.
    pub proto_switches: VecDeque<(u64, bool)>,
    /// Sequence numbers, ascending, of replies not to write (`CLIENT REPLY
    /// OFF` / `SKIP` when their command was dispatched); their command's
    /// other effects (QUIT closing, a blocking read ending) still happen.
    pub silent: VecDeque<u64>,
    /// The command row this connection named last, with its command
    /// statistics row: a pipeline of one command is looked up once.
    pub cmd_cache: Option<(&'static crate::cmd::CommandSpec, Option<usize>)>,
}

impl Conn {
    /// The request `req` of this connection, for reply slot `seq` (part
    /// `part` of a fan-out), on the connection's shard thread `thread`: the
    /// one way a request is addressed, whichever shard runs it.
    pub fn job(&self, thread: u16, seq: u64, part: u16, req: ShardReq) -> Job {
        let reply_budget_bytes = match self.hard_limit_bytes {
            0 => u64::MAX,
            hard => hard.saturating_sub(self.output_bytes() as u64),
        };
        Job {
            req,
            reply_budget_bytes,
            no_touch: self.session.shared.no_touch.load(Ordering::Relaxed),
            cmd: crate::shard::msg::NO_CMD,
            argv: None,
            db: self.session.db as u16,
            reply_to: ReplyTo {
                io: thread,
                conn: self.session.id,
                seq,
                part,
            },
        }
    }

    /// Count a single-shard command for `shard` on a connection owned by
    /// shard thread `me`: consecutive commands for one other shard build a
    /// streak; anything else resets it.
    pub fn note_shard(&mut self, shard: ShardId, me: ShardId) {
        if shard == me {
            self.streak = 0;
        } else if shard == self.streak_shard {
            self.streak = self.streak.saturating_add(1);
        } else {
            self.streak_shard = shard;
            self.streak = 1;
        }
    }

    /// Whether the connection can move to another shard thread now: nothing
    /// in flight (no reply slot, no parked read), nothing left to write, not
    /// closing, not a monitor (feeders wake the thread it attached on). Its
    /// session, MULTI queue and unread input move with it.
    pub fn can_hand_over(&self) -> bool {
        self.slots.is_empty()
            && !self.input_closed
            && self.session.monitor.is_none()
            && self.blocked.is_none()
            && self.hold_until.is_none()
            && self.output_bytes() == 0
            && !self.dead
            && self.close_after.is_none()
            && !self.want_write
    }

    /// Whether the request with sequence number `seq` is still being
    /// answered by some shard (not yet written, and not ready).
    pub fn is_pending(&self, seq: u64) -> bool {
        seq.checked_sub(self.base_seq)
            .and_then(|i| self.slots.get(usize::try_from(i).ok()?))
            .is_some_and(|p| !matches!(p, Pending::Ready(_)))
    }

    /// Whether an earlier request is still being answered by some shard.
    pub fn has_in_flight(&self) -> bool {
        self.slots.iter().any(|p| !matches!(p, Pending::Ready(_)))
    }

    /// Note a request sent to `shard`.
    pub fn note_sent(&mut self, shard: ShardId) {
        self.sent_to |= 1 << (shard.0 % 64);
    }

    /// Whether a request sent now by another thread to one of `shards`
    /// (bit `shard % 64`) could overtake one this connection sent there
    /// earlier and that is still in flight.
    pub fn must_flush(&mut self, shards: u64) -> bool {
        if !self.has_in_flight() {
            self.sent_to = 0;
            return false;
        }
        self.sent_to & shards != 0
    }

    /// Next sequence number to assign.
    pub fn next_seq(&self) -> u64 {
        self.base_seq + self.slots.len() as u64
    }

    /// Reserve a slot for a reply, returning its sequence number.
    pub fn push_slot(&mut self, p: Pending) -> u64 {
        let seq = self.next_seq();
        self.slots.push_back(p);
        seq
    }

    /// The reply slot with sequence number `seq`, if still queued.
    fn slot(&self, seq: u64) -> Option<&Pending> {
        let idx = seq.checked_sub(self.base_seq)?;
        self.slots.get(usize::try_from(idx).ok()?)
    }

    /// The reply slot with sequence number `seq`, if still queued.
    pub fn slot_mut(&mut self, seq: u64) -> Option<&mut Pending> {
        let idx = seq.checked_sub(self.base_seq)?;
        self.slots.get_mut(usize::try_from(idx).ok()?)
    }

    /// The statistics row of the fan-out collecting in slot `seq`
    /// ([`crate::shard::msg::NO_CMD`] if it is not one).
    pub fn fan_row(&self, seq: u64) -> u32 {
        match self.slot(seq) {
            Some(Pending::Fan { row, .. }) => *row,
            _ => crate::shard::msg::NO_CMD,
        }
    }

    /// Whether slot `seq` holds its reply (ready to be written, or written).
    pub fn is_answered(&self, seq: u64) -> bool {
        seq < self.base_seq || matches!(self.slot(seq), Some(Pending::Ready(_)))
    }

    /// The error reply ready in slot `seq`, if that is what it holds.
    pub fn ready_error(&self, seq: u64) -> Option<&crate::error::CmdError> {
        match self.slot(seq) {
            Some(Pending::Ready(r)) => r.error_text(),
            _ => None,
        }
    }

    /// Deliver a (part of a) reply to slot `seq`. Returns what to do next when
    /// a fan-out's merge does not answer the client: park the read on its
    /// shards ([`Then::Block`]) or run the second step ([`Then::Fan`]); the
    /// slot then stays `Waiting`.
    pub fn fill(&mut self, seq: u64, part: u16, reply: Reply) -> Option<Then> {
        let idx = seq.checked_sub(self.base_seq)?;
        let slot = self.slots.get_mut(idx as usize)?;
        match slot {
            Pending::Waiting if matches!(reply, Reply::Rerun) => return Some(Then::Rerun),
            Pending::Waiting | Pending::Hop => *slot = Pending::Ready(reply),
            Pending::Fan { parts, left, .. } => {
                if let Some(p) = parts.get_mut(usize::from(part)) {
                    if p.is_none() {
                        *p = Some(reply);
                        *left -= 1;
                    }
                }
                if *left == 0 {
                    if let Pending::Fan {
                        parts, merge, then, ..
                    } = std::mem::replace(slot, Pending::Waiting)
                    {
                        let parts = parts
                            .into_iter()
                            .map(|p| p.unwrap_or(Reply::NullBulk))
                            .collect();
                        let merged = merge(parts);
                        match then {
                            Some(Then::Block(plan)) if matches!(merged, Reply::NullArray) => {
                                // Stays Waiting: the parked read fills it later.
                                return Some(Then::Block(plan));
                            }
                            Some(next @ Then::Fan { .. }) if !merged.is_error() => {
                                // Stays Waiting: the second step fills it later.
                                return Some(next);
                            }
                            _ => {}
                        }
                        *slot = Pending::Ready(merged);
                    }
                }
            }
            Pending::Ready(_) => {}
        }
        None
    }

    /// Whether anything is ready to be written: an answered reply at the
    /// front of the queue, or encoded bytes not yet written.
    pub fn has_output(&self) -> bool {
        matches!(self.slots.front(), Some(Pending::Ready(_))) || self.output_bytes() > 0
    }

    /// Bytes waiting to be written (`omem`): the chain and the buffer.
    pub fn output_bytes(&self) -> usize {
        self.wchain_bytes + self.wbuf.len()
    }

    /// Note the session's protocol after a command whose reply slot is
    /// `seq` (`HELLO 3`): replies from `seq` on are encoded in it,
    /// earlier ones still in the protocol their commands ran under.
    pub fn note_protocol(&mut self, seq: u64) {
        let now = self.session.resp3;
        let last = self
            .proto_switches
            .back()
            .map_or(self.out_resp3, |&(_, r)| r);
        if now != last {
            self.proto_switches.push_back((seq, now));
        }
    }

    /// Close now, dropping queued replies and output (over an output limit).
    fn drop_output(&mut self) {
        self.dead = true;
        self.slots.clear();
        self.wbuf = BytesMut::new();
        self.wchain.clear();
        self.wchain_bytes = 0;
    }

    /// Encode one reply. A top-level bulk of [`BIG_BULK_BYTES`] or more (GET
    /// of a big value) is queued as it is, behind its header, instead of
    /// being copied into the output buffer.
    fn encode(&mut self, r: Reply) {
        match r {
            Reply::Bulk(b) if b.len() >= BIG_BULK_BYTES => {
                self.wbuf.extend_from_slice(b"$");
                self.wbuf
                    .extend_from_slice(itoa::Buffer::new().format(b.len()).as_bytes());
                self.wbuf.extend_from_slice(b"\r\n");
                let head = self.wbuf.split().freeze();
                self.wchain_bytes += head.len() + b.len();
                self.wchain.push_back(head);
                self.wchain.push_back(b);
                self.wbuf.extend_from_slice(b"\r\n");
            }
            r => crate::io::codec::encode(&r, self.out_resp3, &mut self.wbuf),
        }
    }

    /// Encode every ready reply at the front of the queue into `wbuf`.
    /// Returns true if anything was encoded.
    ///
    /// With `limit`, the output buffer is checked after every reply: a client
    /// over the limit is marked dead, its queued replies and buffer are
    /// dropped at once (so memory stays bounded) and nothing more is encoded.
    pub fn encode_ready(&mut self, limit: Option<&OutputBufferLimit>) -> bool {
        // "normal 0 0 0" (the default) checks nothing.
        let limit = limit.filter(|l| l.hard_bytes > 0 || l.soft_bytes > 0);
        let mut any = false;
        while let Some(Pending::Ready(_)) = self.slots.front() {
            if self.dead {
                break;
            }
            while let Some(&(from, resp3)) = self.proto_switches.front() {
                if from > self.base_seq {
                    break;
                }
                self.out_resp3 = resp3;
                self.proto_switches.pop_front();
            }
            if let Some(Pending::Ready(r)) = self.slots.pop_front() {
                if self.silent.front() == Some(&self.base_seq) {
                    // CLIENT REPLY OFF / SKIP: not written.
                    self.silent.pop_front();
                } else {
                    if matches!(r, Reply::OverOutputLimit) {
                        self.output_limit_hit = Some(self.output_bytes());
                        self.drop_output();
                        break;
                    }
                    self.encode(r);
                }
            }
            if let Some(limit) = limit {
                if self.over_output_limit(limit, Instant::now) {
                    self.output_limit_hit = Some(self.output_bytes());
                    self.drop_output();
                    break;
                }
            }
            let seq = self.base_seq;
            self.base_seq += 1;
            any = true;
            if self.hold_until == Some(seq) {
                self.hold_until = None;
            }
            if self.close_after == Some(seq) {
                self.slots.clear();
                break;
            }
        }
        any
    }

    /// Whether this monitor can take MONITOR lines into its output buffer
    /// now: none of its own replies is still due (each reply comes before
    /// its command's own line, as in Redis), it is not closing (QUIT), and
    /// less than [`MONITOR_OUTPUT_BYTES`] wait to be written. False for a
    /// connection that does not monitor.
    pub fn takes_lines(&self) -> bool {
        self.session.monitor.is_some()
            && self.slots.is_empty()
            && !self.dead
            && self.close_after.is_none()
            && self.output_bytes() < MONITOR_OUTPUT_BYTES
    }

    /// Whether this monitor has something for its thread to do: lines it
    /// can take now, or it fell too far behind and must be closed.
    pub fn monitor_work(&self) -> bool {
        match &self.session.monitor {
            Some(feed) => feed.is_cut() || (feed.has_lines() && self.takes_lines()),
            None => false,
        }
    }

    /// Move waiting MONITOR lines into the output buffer while
    /// [`Conn::takes_lines`]; returns whether any moved. A monitor cut off
    /// by its feeders (its channel filled up) is closed as a client over its
    /// output buffer limit, and so is one whose buffered output breaks
    /// `limit` (the normal clients' limit, a monitor's class in Redis).
    ///
    /// # Source
    /// `replicationFeedMonitors` (redis/src/replication.c) adds each line
    /// to the monitor's output buffer; `checkClientOutputBufferLimits`,
    /// redis/src/networking.c.
    pub fn take_lines(&mut self, limit: Option<&OutputBufferLimit>) -> bool {
        let Some(feed) = &self.session.monitor else {
            return false;
        };
        if feed.is_cut() {
            if !self.dead {
                self.output_limit_hit = Some(self.output_bytes());
                self.drop_output();
            }
            return false;
        }
        let mut any = false;
        while self.takes_lines() {
            let Some(line) = self.session.monitor.as_ref().and_then(|f| f.next_line()) else {
                break;
            };
            self.wbuf.extend_from_slice(&line);
            any = true;
        }
        let limit = limit.filter(|l| l.hard_bytes > 0 || l.soft_bytes > 0);
        if let Some(limit) = limit {
            if any && self.over_output_limit(limit, Instant::now) {
                self.output_limit_hit = Some(self.output_bytes());
                self.drop_output();
            }
        }
        any
    }

    /// The periodic check of a client whose output waits unsent: once it has
    /// stayed at or above the soft limit for longer than the soft seconds it
    /// is marked dead and its output dropped, though no new reply came to
    /// trigger the check. Returns whether it was.
    ///
    /// # Source
    /// `clientsCron` calls `closeClientOnOutputBufferLimitReached` for every
    /// client, redis/src/server.c.
    pub fn close_if_over_soft_limit(&mut self, limit: &OutputBufferLimit) -> bool {
        if self.dead || self.output_soft_since.is_none() {
            return false;
        }
        if !self.over_output_limit(limit, Instant::now) {
            return false;
        }
        self.output_limit_hit = Some(self.output_bytes());
        self.drop_output();
        true
    }

    /// Whether pending output breaks `limit`: at or above the hard limit, or at
    /// or above the soft limit continuously for the soft seconds (the first
    /// time over the soft limit starts that clock, and only more than the
    /// soft seconds later does it count).
    ///
    /// # Source
    /// `checkClientOutputBufferLimits`, redis/src/networking.c.
    /// `now` is asked only when the soft limit matters (reading the clock per
    /// reply costs more than encoding a small one).
    pub fn over_output_limit(
        &mut self,
        limit: &OutputBufferLimit,
        now: impl FnOnce() -> Instant,
    ) -> bool {
        let used = self.output_bytes() as u64;
        if limit.hard_bytes > 0 && used >= limit.hard_bytes {
            return true;
        }
        if limit.soft_bytes > 0 && used >= limit.soft_bytes {
            let now = now();
            let Some(since) = self.output_soft_since else {
                self.output_soft_since = Some(now);
                return false;
            };
            return now.duration_since(since) > std::time::Duration::from_secs(limit.soft_s);
        }
        self.output_soft_since = None;
        false
    }

    /// Whether to keep the encoded replies unwritten for now: the next reply
    /// due is a [`Pending::Hop`] still out, and no reply message answered this
    /// connection since the last write. The ready prefix then leaves with
    /// that hop's reply, in one write, as Redis writes a pipeline's replies
    /// once per event-loop turn — instead of one write (and one read by the
    /// client) for the local part and another for the rest. A reply message
    /// always ends the wait, so a client that keeps requests in flight is
    /// never held for more than one hop, and at most [`DEFER_WRITE_BYTES`]
    /// wait.
    pub fn defer_write(&mut self) -> bool {
        let answered = std::mem::take(&mut self.answered);
        !answered
            && matches!(self.slots.front(), Some(Pending::Hop))
            && self.output_bytes() < DEFER_WRITE_BYTES
            && !self.dead
            && self.close_after.is_none()
    }

    /// Whether the connection should be closed now: it is dead, QUIT's
    /// reply was written, or the peer's input ended and all it sent is
    /// answered ([`Conn::input_done`]).
    pub fn finished(&self) -> bool {
        self.dead
            || (self.close_after.is_some_and(|s| self.base_seq > s) && self.output_bytes() == 0)
            || self.input_done()
    }

    /// After end of input: every command read before it has been answered
    /// and the replies written, or all that is left is a blocking read
    /// still waiting (with what the client pipelined behind it), or the
    /// connection is a monitor. A client that shuts down only its sending
    /// side (`shutdown(SHUT_WR)`: `nc -N`, a proxy's half-close) so gets
    /// every reply, as from Redis, which runs and answers what it read
    /// before it sees end of file, and then frees the client, dropping a
    /// blocked command and a monitor's stream.
    fn input_done(&self) -> bool {
        if !self.input_closed {
            return false;
        }
        if self.session.monitor.is_some() {
            return true;
        }
        let waiting_only = match self.slots.front() {
            None => self.deferred.is_none(),
            Some(_) => self
                .blocked
                .as_ref()
                .is_some_and(|b| b.seq == self.base_seq),
        };
        waiting_only && self.output_bytes() == 0
    }
}
