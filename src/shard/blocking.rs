//! Parked blocking reads (XREAD BLOCK, XREADGROUP BLOCK) on one shard.
//!
//! A blocked client registers one [`Waiter`] on every shard that owns one of
//! its keys, all sharing one [`Ticket`]. A write that can satisfy a waiter
//! (XADD, and for consumer groups DEL / XGROUP DESTROY) marks its key ready;
//! after each batch the shard serves the waiters of ready keys in FIFO order
//! (Redis fairness), before going back to its inbox. Whoever serves a waiter
//! — a shard with data, or the connection's thread on timeout or disconnect — first
//! claims the ticket with an atomic swap, *before* any side effect (PEL insert,
//! last-delivered advance), so a multi-shard read is answered exactly once.
//! Waiters whose ticket was claimed elsewhere are dropped when next seen and
//! swept periodically.
//!
//! # Source
//! `signalKeyAsReady` / `handleClientsBlockedOnKeys`, redis/src/blocked.c.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::shard::msg::ExecCtx;
use crate::shard::msg::ReplyTo;

/// Shared by the connection's thread and every shard a blocked client waits
/// on: whoever flips `fired` first answers the client.
///
/// A ticket also keeps the client's "blocked" state honest: the client counts
/// as blocked (INFO `blocked_clients`, CLIENT LIST `flags=b`) from the moment
/// a shard really parks it — not when the command is sent — until
/// [`Ticket::finish`], as in Redis, where a client shows as blocked only once
/// it is (test suites wait on that before writing to the key).
#[derive(Debug, Default)]
pub struct Ticket {
    fired: AtomicBool,
    /// 0: not parked yet; 1: parked and counted; 2: finished.
    state: AtomicU8,
    watch: Option<BlockedWatch>,
    /// The read spans shards: a shard that finds data (or an error) claims
    /// the ticket and answers [`Reply::Rerun`] instead of serving its own
    /// streams, so the read runs again over all of them.
    rerun: bool,
    /// `(key, ID)` for each `$` a shard resolved when it parked (XREAD), so
    /// the read runs again from the same place.
    resolved: std::sync::Mutex<Vec<(Bytes, Bytes)>>,
    /// The command statistics row of a read on one shard: the run that
    /// serves it when woken adds its time to the command's `usec`, as Redis
    /// adds the re-execution of an unblocked command.
    row: Option<u32>,
    /// Set by `CLIENT UNBLOCK` after it claimed the ticket: [`UNBLOCK_TIMEOUT`]
    /// or [`UNBLOCK_ERROR`]; the connection's thread answers and clears it.
    unblocked: AtomicU8,
    /// The connection's thread answered the wait: its timeout, or `CLIENT
    /// UNBLOCK` (not a disconnect, not another shard's reply). The command
    /// then goes to SLOWLOG like a served one (see [`Waiters::slow_done`]).
    answered_by_timeout: AtomicBool,
}

/// [`Ticket::unblock`] with `TIMEOUT`: the client gets its command's timeout reply.
const UNBLOCK_TIMEOUT: u8 = 1;
/// [`Ticket::unblock`] with `ERROR`: the client gets `-UNBLOCKED`.
const UNBLOCK_ERROR: u8 = 2;

/// How `CLIENT UNBLOCK` ended a blocked command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unblocked {
    /// `TIMEOUT` (the default): the reply of a timed-out wait (a null array).
    Timeout,
    /// `ERROR`: `-UNBLOCKED client unblocked via CLIENT UNBLOCK`.
    Error,
}

/// Where a ticket reports its client's blocked state.
#[derive(Debug)]
pub struct BlockedWatch {
    /// The client's `flags=b`.
    pub flag: Arc<AtomicBool>,
    /// The server's `blocked_clients`.
    pub count: Arc<AtomicU64>,
}

impl Ticket {
    /// A fresh, unclaimed ticket that reports no blocked state.
    pub fn new() -> Arc<Ticket> {
        Arc::new(Ticket::default())
    }

    /// A fresh, unclaimed ticket that reports its client's blocked state to
    /// `watch`; `row`: the command statistics row its serving run counts in.
    pub fn watched(watch: BlockedWatch, row: Option<u32>) -> Arc<Ticket> {
        Arc::new(Ticket {
            watch: Some(watch),
            row,
            ..Ticket::default()
        })
    }

    /// Like [`watched`](Self::watched), for a read over several shards that
    /// runs again as a whole when woken (see [`Ticket::reruns`]).
    pub fn watched_rerun(watch: BlockedWatch) -> Arc<Ticket> {
        Arc::new(Ticket {
            watch: Some(watch),
            rerun: true,
            ..Ticket::default()
        })
    }

    /// Whether a woken shard answers [`Reply::Rerun`] instead of serving.
    pub fn reruns(&self) -> bool {
        self.rerun
    }

    /// Remember the ID a shard resolved `$` to for `key` when it parked.
    pub fn note_resolved(&self, key: Bytes, id: Bytes) {
        if let Ok(mut r) = self.resolved.lock() {
            r.push((key, id));
        }
    }

    /// The IDs shards resolved `$` to (see [`note_resolved`](Self::note_resolved)).
    pub fn resolved(&self) -> Vec<(Bytes, Bytes)> {
        self.resolved.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Claim the right to answer. True for exactly one caller.
    pub fn claim(&self) -> bool {
        !self.fired.swap(true, Ordering::SeqCst)
    }

    /// Whether someone already answered.
    pub fn is_fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// A shard parked a waiter under this ticket: the client counts as
    /// blocked (once, however many shards park it; never after [`finish`](Self::finish)).
    pub fn mark_parked(&self) {
        if self
            .state
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            if let Some(w) = &self.watch {
                w.flag.store(true, Ordering::SeqCst);
                w.count.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// `CLIENT UNBLOCK <id> [TIMEOUT|ERROR]` from any thread: if the client
    /// is parked (counted as blocked) and nobody answered it yet, claim the
    /// ticket and leave `how` for the connection's thread, which answers the
    /// client the next time it looks (wake it). True when this call
    /// unblocked the client (CLIENT UNBLOCK answers 1).
    ///
    /// # Source
    /// `CLIENT UNBLOCK`, redis/src/networking.c: only a client blocked on keys
    /// is unblocked; a timeout answers the command's timeout reply, an error
    /// `-UNBLOCKED client unblocked via CLIENT UNBLOCK`.
    pub fn unblock(&self, how: Unblocked) -> bool {
        if self.state.load(Ordering::SeqCst) != 1 {
            return false;
        }
        // Before the claim, as on a timeout (see `note_answered_by_timeout`).
        self.note_answered_by_timeout();
        if !self.claim() {
            return false;
        }
        let code = match how {
            Unblocked::Timeout => UNBLOCK_TIMEOUT,
            Unblocked::Error => UNBLOCK_ERROR,
        };
        self.unblocked.store(code, Ordering::SeqCst);
        true
    }

    /// The connection's thread answers the wait itself: its timeout passed,
    /// or `CLIENT UNBLOCK` ended it.
    pub fn note_answered_by_timeout(&self) {
        self.answered_by_timeout.store(true, Ordering::Relaxed);
    }

    /// Take what [`unblock`](Self::unblock) left: `Some` once per unblock.
    pub fn take_unblocked(&self) -> Option<Unblocked> {
        // Checked for every blocked client on every loop turn: a plain load
        // first, the swap only when CLIENT UNBLOCK left something.
        if self.unblocked.load(Ordering::Relaxed) == 0 {
            return None;
        }
        match self.unblocked.swap(0, Ordering::SeqCst) {
            UNBLOCK_TIMEOUT => Some(Unblocked::Timeout),
            UNBLOCK_ERROR => Some(Unblocked::Error),
            _ => None,
        }
    }

    /// The blocking command is over (answered, timed out, client gone): the
    /// client no longer counts as blocked.
    pub fn finish(&self) {
        if self.state.swap(2, Ordering::SeqCst) == 1 {
            if let Some(w) = &self.watch {
                w.flag.store(false, Ordering::SeqCst);
                w.count.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// Outcome of trying to serve a waiter.
pub enum Attempt {
    /// No data yet: keep waiting.
    NotReady,
    /// The ticket was claimed by this attempt; send this reply.
    Served(Reply),
    /// The ticket of a read over several shards that consumes what it
    /// reads (XREADGROUP `>`) was claimed by this attempt: its client runs
    /// the read again over all its shards ([`Reply::Rerun`]), and the key's
    /// later waiters wait for that run (see [`serve_ready`]).
    RerunConsuming,
    /// Someone else claimed the ticket: drop the waiter.
    Lost,
}

/// How long a key's later waiters wait for the rerun of a woken read over
/// several shards before they are served anyway (its client left before
/// the rerun reached this shard), ms; checked on the periodic tick.
const RERUN_HOLD_MS: u64 = 50;

/// Re-runs a blocked read against the shard's data for the one key that
/// became ready (third argument): like Redis 7.0's
/// `serveClientsBlockedOnStreamKey`, a woken reader is answered with that
/// stream only, even if other watched keys also have data. It must check for
/// data first, then call `ticket.claim()` before any side effect.
pub type AttemptFn = Box<dyn FnMut(&mut ShardDb, &ExecCtx, &[u8], &Ticket) -> Attempt>;

/// One blocked client's registration on this shard.
pub struct Waiter {
    pub ticket: Arc<Ticket>,
    pub reply_to: ReplyTo,
    /// `(db, key)` pairs this waiter watches on this shard.
    pub keys: Vec<(usize, Bytes)>,
    pub attempt: AttemptFn,
    /// Re-attempt on every periodic shard tick (100 ms), not only when a key
    /// is signalled: XREADGROUP CLAIM waits for pending entries to age.
    pub poll: bool,
    /// Deleting the key unblocks the client (XREADGROUP answers an error;
    /// Redis 7.2's "blocked on nokey" condition, INFO
    /// `total_blocking_keys_on_nokey`).
    pub nokey: bool,
    /// The client is in `CLIENT NO-TOUCH` mode: its read, when served,
    /// records no access (Redis re-runs the command as that client).
    pub no_touch: bool,
}

/// The shard's registry of parked readers.
#[derive(Default)]
pub struct Waiters {
    waiters: HashMap<u64, Waiter>,
    /// FIFO of waiter ids per watched key.
    by_key: HashMap<(usize, Bytes), VecDeque<u64>>,
    /// Each client's latest waiter (`reply_to.conn` → waiter id): the one
    /// [`forget_client`](Self::forget_client) drops when its wait is over
    /// (an older answered one is left to [`sweep`](Self::sweep)).
    by_client: crate::io::conn::ConnMap<u64>,
    /// Keys written since the last service pass.
    ready: Vec<(usize, Bytes)>,
    /// `(row, ns)` of the runs that served woken readers since
    /// [`take_timings`](Self::take_timings) (INFO commandstats).
    timings: Vec<(u32, u64)>,
    /// Parked waiters' arguments and the time of the attempt that parked
    /// them, ns, by waiter id (see [`note_parked`](Self::note_parked)).
    slow: HashMap<u64, (Vec<Bytes>, u64)>,
    /// Blocking commands over since [`take_slow`](Self::take_slow): `(conn,
    /// argv, ns)` to offer SLOWLOG.
    slow_done: Vec<(u64, Vec<Bytes>, u64)>,
    next_id: u64,
    /// Waiters came or went since [`take_changed`](Self::take_changed).
    changed: bool,
    /// Keys whose waiters wait for a woken consuming read's rerun:
    /// `(db, key)` → `(conn, until_ms)` (see [`serve_ready`]).
    rerun_holds: HashMap<(usize, Bytes), (u64, u64)>,
    /// Connections of this shard's own thread whose parked read was served
    /// since the thread last wrote its sockets: it writes them first (see
    /// `write_order` in `shard/mod.rs`).
    pub served_here: Vec<u64>,
}

impl Waiters {
    /// The `(row, ns)` of the runs that served woken readers (see
    /// [`Ticket::watched`]) since the last call.
    pub fn take_timings(&mut self) -> Vec<(u32, u64)> {
        std::mem::take(&mut self.timings)
    }

    /// The request of client `conn` that just parked took `ns` on its
    /// first attempt: kept with its waiter, so SLOWLOG records the command
    /// when it is over (served, timed out or `CLIENT UNBLOCK`ed), with the
    /// time of its runs, not while it waits.
    ///
    /// # Source
    /// Redis 7.2+: `call()` skips SLOWLOG for a client it blocked;
    /// `updateStatsOnUnblock` (redis/src/blocked.c) logs the command when it
    /// is served or times out, its duration the runs without the wait.
    pub fn note_parked(&mut self, conn: u64, argv: Vec<Bytes>, ns: u64) {
        if let Some(&id) = self.by_client.get(&conn) {
            if self.waiters.get(&id).is_some_and(|w| !w.ticket.is_fired()) {
                self.slow.insert(id, (argv, ns));
            }
        }
    }

    /// Whether [`take_slow`](Self::take_slow) has anything.
    pub fn has_slow(&self) -> bool {
        !self.slow_done.is_empty()
    }

    /// The blocking commands over since the last call: `(conn, argv, ns)`.
    pub fn take_slow(&mut self) -> Vec<(u64, Vec<Bytes>, u64)> {
        std::mem::take(&mut self.slow_done)
    }

    /// Number of parked waiters (stale ones included until swept).
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Whether no waiter is parked.
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Park a waiter on its keys; its client now counts as blocked.
    pub fn park(&mut self, w: Waiter) {
        w.ticket.mark_parked();
        self.changed = true;
        let id = self.next_id;
        self.next_id += 1;
        for k in &w.keys {
            self.by_key.entry(k.clone()).or_default().push_back(id);
        }
        self.by_client.insert(w.reply_to.conn, id);
        self.waiters.insert(id, w);
    }

    /// Note that `key` in `db` changed in a way that may satisfy waiters.
    /// Cheap when nobody waits on it.
    pub fn mark_ready(&mut self, db: usize, key: &[u8]) {
        if self.waiters.is_empty() {
            return;
        }
        let k = (db, Bytes::copy_from_slice(key));
        if self.by_key.contains_key(&k) && !self.ready.contains(&k) {
            self.ready.push(k);
        }
    }

    /// Note that every watched key of `db` may have changed (FLUSHDB/FLUSHALL).
    pub fn mark_db_ready(&mut self, db: usize) {
        for k in self.by_key.keys() {
            if k.0 == db && !self.ready.contains(k) {
                self.ready.push(k.clone());
            }
        }
    }

    /// Mark the keys of polling waiters ready (see [`Waiter::poll`]).
    pub fn mark_polling_ready(&mut self) {
        let keys: Vec<(usize, Bytes)> = self
            .waiters
            .values()
            .filter(|w| w.poll && !w.ticket.is_fired())
            .flat_map(|w| w.keys.iter().cloned())
            .collect();
        for k in keys {
            if !self.ready.contains(&k) {
                self.ready.push(k);
            }
        }
    }

    /// Whether waiters came or went since the last call (INFO's blocking-key
    /// counts need recounting).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// `(keys with a live blocked client, those of them with a client a
    /// deletion unblocks)`: INFO clients `total_blocking_keys` and
    /// `total_blocking_keys_on_nokey` (Redis 7.2+) for this shard.
    pub fn key_counts(&self) -> (u64, u64) {
        let (mut keys, mut nokey) = (0, 0);
        for ids in self.by_key.values() {
            let live = ids
                .iter()
                .filter_map(|id| self.waiters.get(id))
                .filter(|w| !w.ticket.is_fired());
            let (mut any, mut any_nokey) = (false, false);
            for w in live {
                any = true;
                any_nokey |= w.nokey;
            }
            keys += u64::from(any);
            nokey += u64::from(any_nokey);
        }
        (keys, nokey)
    }

    /// Whether any key is ready to be served.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Drop the waiters of client `conn` that someone already answered
    /// (its connection's thread on timeout, CLIENT UNBLOCK or disconnect;
    /// another shard), now rather than at the next sweep, so INFO's
    /// blocking-key counts drop at once, as Redis's do.
    pub fn forget_client(&mut self, conn: u64) {
        let Some(&id) = self.by_client.get(&conn) else {
            return;
        };
        if self.waiters.get(&id).is_some_and(|w| w.ticket.is_fired()) {
            self.unregister(id);
        }
    }

    fn unregister(&mut self, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        self.changed = true;
        if let Some((argv, ns)) = self.slow.remove(&id) {
            if w.ticket.answered_by_timeout.load(Ordering::Relaxed) {
                self.slow_done.push((w.reply_to.conn, argv, ns));
            }
        }
        if self.by_client.get(&w.reply_to.conn) == Some(&id) {
            self.by_client.remove(&w.reply_to.conn);
        }
        for k in &w.keys {
            if let Some(q) = self.by_key.get_mut(k) {
                q.retain(|x| *x != id);
                if q.is_empty() {
                    self.by_key.remove(k);
                }
            }
        }
        Some(w)
    }

    /// Drop waiters whose ticket was claimed elsewhere (timeout, disconnect,
    /// another shard). Returns how many were dropped.
    pub fn sweep(&mut self) -> usize {
        let stale: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.ticket.is_fired())
            .map(|(id, _)| *id)
            .collect();
        for id in &stale {
            self.unregister(*id);
        }
        stale.len()
    }
}

/// A cluster node's say on a blocked client's key: `Some(error)` answers
/// the client with it instead of serving (MOVED, ASK, CLUSTERDOWN). Given the
/// key and whether it exists here.
pub type Redirect<'a> = &'a dyn Fn(&[u8], bool) -> Option<crate::error::CmdError>;

/// No redirection (a node that is not in a cluster).
pub fn no_redirect(_key: &[u8], _exists: bool) -> Option<crate::error::CmdError> {
    None
}

impl Waiters {
    /// Answer every live waiter whose first key `redirect` refuses with that
    /// error (its ticket claimed first), and drop it. Returns the replies.
    ///
    /// # Source
    /// `clusterRedirectBlockedClientIfNeeded`, redis/src/cluster.c (7.x): a
    /// client blocked on a key whose slot went to another node gets MOVED.
    pub fn redirect(
        &mut self,
        redirect: &dyn Fn(&[u8]) -> Option<crate::error::CmdError>,
    ) -> Vec<(ReplyTo, Reply)> {
        let refused: Vec<(u64, crate::error::CmdError)> = self
            .waiters
            .iter()
            .filter(|(_, w)| !w.ticket.is_fired())
            .filter_map(|(id, w)| Some((*id, redirect(&w.keys.first()?.1)?)))
            .collect();
        let mut out = Vec::new();
        for (id, err) in refused {
            self.refuse(id, err, &mut out);
        }
        out
    }

    /// Drop waiter `id` and, if its ticket is still unclaimed, answer it `err`.
    fn refuse(&mut self, id: u64, err: crate::error::CmdError, out: &mut Vec<(ReplyTo, Reply)>) {
        if let Some(w) = self.unregister(id) {
            if w.ticket.claim() {
                out.push((w.reply_to, Reply::Error(err)));
            }
        }
    }

    /// Client `conn`'s read ran on this shard (or its rerun failed its
    /// checks here): if it is the rerun of a read woken here, the keys held
    /// for it (see [`serve_ready`]) are served again after it. Cheap when
    /// nothing is held.
    pub fn rerun_arrived(&mut self, conn: u64) {
        if !self.rerun_holds.is_empty() {
            self.end_rerun_holds(|c, _| c == conn);
        }
    }

    /// Whether one of `keys` of database `db` is held for a woken read's
    /// rerun (see [`serve_ready`]): a blocking read arriving now waits in
    /// line behind the key's waiters instead of taking what the woken
    /// reader is about to read.
    pub fn holds_any(&self, db: usize, keys: &[Bytes]) -> bool {
        !self.rerun_holds.is_empty()
            && keys
                .iter()
                .any(|k| self.rerun_holds.contains_key(&(db, k.clone())))
    }

    /// Holds whose rerun did not come by `now_ms` end: the key's waiters
    /// are served again.
    pub fn end_stale_rerun_holds(&mut self, now_ms: u64) {
        if !self.rerun_holds.is_empty() {
            self.end_rerun_holds(|_, until| until <= now_ms);
        }
    }

    /// End the rerun holds `(conn, until_ms)` that `ends` selects and mark
    /// their keys ready.
    fn end_rerun_holds(&mut self, ends: impl Fn(u64, u64) -> bool) {
        let mut ended = Vec::new();
        self.rerun_holds.retain(|k, &mut (conn, until)| {
            let end = ends(conn, until);
            if end {
                ended.push(k.clone());
            }
            !end
        });
        for k in ended {
            if self.by_key.contains_key(&k) && !self.ready.contains(&k) {
                self.ready.push(k);
            }
        }
    }

    /// The waiter ids on `key`, in arrival order.
    fn ids_on(&self, key: &(usize, Bytes)) -> Vec<u64> {
        self.by_key
            .get(key)
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// Serve the waiters of every ready key, FIFO per key, pushing replies to
/// `out`. A key `redirect` refuses answers its waiters with that error
/// instead (a cluster node: the key left with a migration, ASK).
pub fn serve_ready(
    db: &mut ShardDb,
    now_ms: u64,
    out: &mut Vec<(ReplyTo, Reply)>,
    redirect: Redirect<'_>,
) {
    // Serving may ready more keys (e.g. a read that changes state): loop until calm.
    let mut rounds = 0;
    while db.blocking.has_ready() && rounds < 64 {
        rounds += 1;
        let ready = std::mem::take(&mut db.blocking.ready);
        for key in ready {
            let exists = db.is_live(key.0, &key.1, now_ms);
            if let Some(err) = redirect(&key.1, exists) {
                for id in db.blocking.ids_on(&key) {
                    db.blocking.refuse(id, err.clone(), out);
                }
                continue;
            }
            // A woken consuming read over several shards runs again from its
            // connection's thread: the key's later waiters wait for that run
            // to reach this shard, so they are served in arrival order after
            // it, as Redis serves a key's blocked clients one by one (else
            // every later waiter would be woken too, and whichever rerun came
            // first would take the entries).
            if db.blocking.rerun_holds.contains_key(&key) {
                continue;
            }
            for id in db.blocking.ids_on(&key) {
                let Some(mut w) = db.blocking.waiters.remove(&id) else {
                    continue;
                };
                if w.ticket.is_fired() {
                    db.blocking.waiters.insert(id, w);
                    db.blocking.unregister(id);
                    continue;
                }
                let cx = ExecCtx {
                    db: key.0,
                    now_ms,
                    reply_budget_bytes: u64::MAX,
                    no_touch: w.no_touch,
                    reply_to: w.reply_to,
                };
                let timed = w.ticket.row.is_some() || db.blocking.slow.contains_key(&id);
                let started = timed.then(quanta::Instant::now);
                let outcome =
                    db.as_client(w.no_touch, |db| (w.attempt)(db, &cx, &key.1, &w.ticket));
                let reply_to = w.reply_to;
                let row = w.ticket.row;
                db.blocking.waiters.insert(id, w);
                let (reply, hold) = match outcome {
                    Attempt::NotReady => continue,
                    Attempt::Lost => {
                        db.blocking.unregister(id);
                        continue;
                    }
                    Attempt::Served(reply) => (reply, false),
                    Attempt::RerunConsuming => (Reply::Rerun, true),
                };
                let ns = started.map_or(0, |t| t.elapsed().as_nanos() as u64);
                if let Some((argv, first_ns)) = db.blocking.slow.remove(&id) {
                    let done = (reply_to.conn, argv, first_ns + ns);
                    db.blocking.slow_done.push(done);
                }
                db.blocking.unregister(id);
                if let Some(row) = row {
                    db.blocking.timings.push((row, ns));
                }
                out.push((reply_to, reply));
                if hold {
                    let until = now_ms + RERUN_HOLD_MS;
                    db.blocking
                        .rerun_holds
                        .insert(key.clone(), (reply_to.conn, until));
                    break;
                }
            }
        }
    }
}
