//! Everything that crosses into a shard thread: the requests it runs for
//! other shards' connections ([`Job`], [`ShardCommand`]), the replies it gets
//! back for its own connections, connections handed to it, and the context a
//! command runs with ([`ExecCtx`]).
//!
//! Messages carry owned data only (never references into shard data) and say
//! where their reply goes. This module depends on no command family: `cmd`
//! builds these types, the shard thread consumes them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::reply::Reply;
use crate::shard::db::ShardDb;

/// Which shard thread owns the connection, and the request's place in its pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyTo {
    /// Index of the shard thread that owns the connection (and writes its replies).
    pub io: u16,
    /// Connection id (`CLIENT ID`).
    pub conn: u64,
    /// Position of the request in the connection's pipeline.
    pub seq: u64,
    /// Part index when the request was fanned out over several shards.
    pub part: u16,
}

/// Per-request context a shard passes to `apply`: the selected database and
/// the shard's clock snapshot for this loop iteration.
#[derive(Clone, Copy, Debug)]
pub struct ExecCtx {
    /// Selected database index (`SELECT`), `0..databases`.
    pub db: usize,
    /// Wall clock in ms since the Unix epoch, one snapshot per loop iteration.
    pub now_ms: u64,
    /// Where the reply goes (blocking commands park a waiter with it).
    pub reply_to: ReplyTo,
    /// Room left under the client's hard output buffer limit when the
    /// request was sent, bytes (`u64::MAX`: no limit). Commands whose reply
    /// can be huge (XRANGE) stop building it past this and answer
    /// [`Reply::OverOutputLimit`].
    pub reply_budget_bytes: u64,
    /// The client was in `CLIENT NO-TOUCH` mode when it sent the request
    /// (see [`ShardDb::no_touch`]).
    pub no_touch: bool,
}

impl ExecCtx {
    /// A context for unit tests and internal calls: database `db`, time `now_ms`.
    pub fn at(db: usize, now_ms: u64) -> ExecCtx {
        ExecCtx {
            db,
            now_ms,
            reply_budget_bytes: u64::MAX,
            no_touch: false,
            reply_to: ReplyTo {
                io: 0,
                conn: 0,
                seq: 0,
                part: 0,
            },
        }
    }
}

/// Run `req` on `db` as its client's request: its lookups follow the
/// client's `CLIENT NO-TOUCH` mode from `cx` (restored afterwards, so a
/// request run inside another keeps the outer one's mode), and it is a
/// command of its own for LFU counting ([`ShardDb::begin_command`]).
pub fn apply_as_client(req: ShardReq, db: &mut ShardDb, cx: &ExecCtx) -> Reply {
    db.as_client(cx.no_touch, |db| req.apply(db, cx))
}

/// A parsed command that runs on one shard. Built by the connection's thread
/// (owned, typed data only; never references into shard data) and consumed by
/// the shard that owns its keys — the same thread when it owns them.
pub trait ShardCommand: Send {
    /// Execute on the owning shard and produce the reply.
    fn apply(self: Box<Self>, db: &mut ShardDb, cx: &ExecCtx) -> Reply;

    /// Whether this request starts a cross-shard transaction that this
    /// shard coordinates (see [`crate::shard::hold`]): the shard loop runs
    /// consecutive ones together, under one set of holds.
    fn coordinates(&self) -> bool {
        false
    }
}

/// A boxed shard command, as it travels to its shard.
pub type ShardReq = Box<dyn ShardCommand>;

/// Adapter that makes a closure a [`ShardCommand`].
struct ShardFn<F>(F);

impl<F> ShardCommand for ShardFn<F>
where
    F: FnOnce(&mut ShardDb, &ExecCtx) -> Reply + Send,
{
    fn apply(self: Box<Self>, db: &mut ShardDb, cx: &ExecCtx) -> Reply {
        (self.0)(db, cx)
    }
}

/// Wrap a closure over the shard's data as a request. Family parsers use it as
/// `Ok(on_shard(move |db, cx| apply_get(db, cx, key)))`.
pub fn on_shard<F>(f: F) -> ShardReq
where
    F: FnOnce(&mut ShardDb, &ExecCtx) -> Reply + Send + 'static,
{
    Box::new(ShardFn(f))
}

/// One request for a shard.
pub struct Job {
    pub req: ShardReq,
    /// Selected database of the connection when it sent the request.
    pub db: u16,
    pub reply_to: ReplyTo,
    /// Command table row index for INFO commandstats (`usec`, `failed_calls`),
    /// with [`PART`] set when the request is one shard's part of a command
    /// over several (its time counts toward the command's `usec`; an error
    /// counts once, on the merged reply); [`NO_CMD`] when it is not counted.
    pub cmd: u32,
    /// The command line, kept (moved, not copied) for SLOWLOG when it turns
    /// out slow; `None` for parts of larger commands.
    pub argv: Option<Vec<bytes::Bytes>>,
    /// See [`ExecCtx::reply_budget_bytes`].
    pub reply_budget_bytes: u64,
    /// See [`ExecCtx::no_touch`].
    pub no_touch: bool,
}

/// [`Job::cmd`] for requests that are not counted as a command of their own.
pub const NO_CMD: u32 = u32::MAX;

/// Set in [`Job::cmd`] on one shard's part of a command over several.
pub const PART: u32 = 1 << 31;

/// A message to a shard thread's inbox.
pub enum ShardMsg {
    /// Requests for keys this shard owns, collected by another shard thread
    /// from its connections in one loop iteration, in order. Never dropped:
    /// each connection waits on its `reply_to.seq`.
    Batch(Vec<Job>),
    /// Replies to requests this thread's connections sent to another shard,
    /// produced in one loop iteration there. Dropped only with the connection.
    Replies(Vec<(ReplyTo, Reply)>),
    /// A new connection from the acceptor: serve it from now on.
    Accept(crate::io::socket::Socket, crate::io::socket::Endpoint),
    /// A connection handed over by another shard thread because its requests
    /// keep landing here (its socket, buffers and session; no reply is in flight).
    Adopt(Box<crate::io::conn::Conn>),
    /// Client `0`'s blocked read is over (its connection's thread answered
    /// it or the client left): drop its answered waiters now.
    Unblocked(u64),
    /// Exit the loop (the server is shutting down).
    Shutdown,
}

/// The sending side of a shard thread's inbox, with its wake-up path.
///
/// The thread sets `parked` just before it sleeps in `poll`; a sender wakes
/// it (an eventfd write through `mio::Waker`) only when that flag was set, so
/// busy threads never pay for wake-up syscalls.
#[derive(Clone)]
pub struct Outbox {
    pub tx: Sender<ShardMsg>,
    pub waker: Arc<mio::Waker>,
    pub parked: Arc<AtomicBool>,
}

impl Outbox {
    /// Send and wake the thread if it is parked.
    pub fn send(&self, msg: ShardMsg) {
        if self.tx.send(msg).is_ok() && self.parked.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }

    /// Wake the thread if it is parked, for work that did not come through
    /// its inbox (MONITOR lines in a monitor's channel): the thread checks
    /// that work after setting `parked`, as it checks its inbox.
    pub fn nudge(&self) {
        if self.parked.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }

    /// Wake the thread whatever its state (shutdown, CLIENT KILL).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }
}
