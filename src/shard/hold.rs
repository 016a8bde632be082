//! Holding shards for a cross-shard transaction (MULTI/EXEC, MSET, MSETNX:
//! anything that must be atomic over keys of several shards).
//!
//! # The scheme
//! A transaction that touches several shards runs under **holds**: each
//! involved shard thread stops serving anything else and runs only the
//! transaction's operations until it is released. Its coordinator is the
//! **lowest** involved shard; holds are taken in ascending shard order,
//! which is what keeps two transactions from waiting on each other:
//!
//! 1. The transaction travels as one job to the lowest shard, in the
//!    connection's normal batch (so it runs after the connection's earlier
//!    requests there). The job leaves a [`Coordinate`] for the shard loop,
//!    which runs it: from then on that thread belongs to the transaction.
//! 2. The coordinator holds every other involved shard, one after the other
//!    in ascending order: a [`hold_req`] job goes to the shard's inbox; the
//!    shard acks and blocks on the transaction's operation channel. A thread
//!    only ever waits for a shard above every shard it holds, so no cycle of
//!    waits can form.
//! 3. The body runs ([`TxRun`]): operations on the coordinator's own data
//!    inline, on a held shard over its channel — several at once when they
//!    are independent ([`TxRun::run_each`]) — with nothing else interleaved
//!    on any involved shard.
//! 4. Commit in two phases: every held shard closes its AOF block and writes
//!    it (fsync under `appendfsync always`); then the coordinator writes its
//!    own block and the commit record; then the shards are released and
//!    serve the readers the transaction made ready. The reply leaves the
//!    coordinator after that, so it is never ahead of the data on any shard.
//!
//! A coordinator that cannot hold a shard (shutdown) drops the channels;
//! held shards see them close and go back to work with nothing changed.
//!
//! Single-shard transactions never come here: they run as one job on their
//! shard.

use crossbeam_channel::{Receiver, Sender};

use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::shard::msg::{
    apply_as_client, on_shard, ExecCtx, Job, Outbox, ReplyTo, ShardMsg, ShardReq, NO_CMD,
};

/// One operation a held shard runs for its transaction.
pub enum TxOp {
    /// The transaction's id, before its first operation: `(coordinator, seq)`
    /// (the shard's AOF block is tagged with it).
    Begin(u16, u64),
    /// Run this on the shard's data (it sends its own result back).
    Apply(Box<dyn FnOnce(&mut ShardDb) + Send>),
    /// Every operation ran: close the shard's AOF block, write it (fsync
    /// under `appendfsync always`), then answer whether it wrote one.
    Prepare(Sender<bool>),
    /// The transaction committed: go back to the event loop.
    Release,
}

/// Requests for one shard, each in its database (`None`: the transaction's,
/// the client's selected one).
pub type ShardGroup = (u16, Vec<(Option<usize>, ShardReq)>);

/// Any logic over the runner, in the given database (the client's selected
/// one); returns the command's reply.
pub type RunFn = Box<dyn FnOnce(&mut TxRun<'_>, usize) -> Reply + Send>;

/// Turns the replies of a [`TxBody::Groups`] body, group by group, into the
/// command's reply.
pub type Assemble = Box<dyn FnOnce(Vec<Vec<Reply>>) -> Reply + Send>;

/// What a transaction runs once every involved shard is held.
pub enum TxBody {
    /// Any logic over the runner.
    Run(RunFn),
    /// Independent groups of requests, one per shard (no request depends on
    /// another shard's reply), and how their replies make the command's
    /// reply. Such transactions arriving together share one round trip per
    /// shard (see [`run_group`]).
    Groups(Vec<ShardGroup>, Assemble),
}

impl TxBody {
    /// Run the body alone with `tx`, in database `db`.
    pub fn run(self, tx: &mut TxRun<'_>, db: usize) -> Reply {
        match self {
            TxBody::Run(f) => f(tx, db),
            TxBody::Groups(groups, assemble) => assemble(tx.run_each(in_db(groups, db))),
        }
    }
}

/// `groups` with every request's database decided (`None` → `db`).
fn in_db(groups: Vec<ShardGroup>, db: usize) -> Vec<(u16, Vec<(usize, ShardReq)>)> {
    groups
        .into_iter()
        .map(|(s, reqs)| {
            (
                s,
                reqs.into_iter()
                    .map(|(d, r)| (d.unwrap_or(db), r))
                    .collect(),
            )
        })
        .collect()
}

/// The coordinator's part, left on its shard by the transaction's job and
/// run by the shard loop (it needs the AOF writer, which jobs do not see).
pub struct Coordinate {
    /// Context of the job: the client's connection and pipeline slot, the clock.
    pub cx: ExecCtx,
    /// The other involved shards, to hold, ascending (all above this one).
    pub others: Vec<u16>,
    /// Every shard thread's inbox.
    pub outboxes: Vec<Outbox>,
    pub body: TxBody,
}

/// Error when a shard cannot be held (the server is shutting down).
const NOT_HELD: &str = "ERR cross-shard transaction aborted: the server is shutting down";

/// The job that carries a transaction to its coordinator: applying it only
/// leaves the [`Coordinate`] for the shard loop.
pub struct CoordinateJob(pub Coordinate);

impl crate::shard::msg::ShardCommand for CoordinateJob {
    fn apply(self: Box<Self>, db: &mut ShardDb, cx: &ExecCtx) -> Reply {
        let mut c = self.0;
        c.cx = *cx;
        db.coordinate.push(c);
        Reply::NoReply
    }

    fn coordinates(&self) -> bool {
        true
    }
}

/// Run the transactions `group` on their coordinator `db`, one after the
/// other under one set of holds (the union of their shards), then commit in
/// two phases: every participant writes its closed block (prepare), then
/// this shard writes its own block and the commit record through `commit`
/// (the shard loop's AOF commit), then the participants are released. A
/// crash before the commit record is written leaves blocks that start-up
/// discards (see `aof::load`), so each transaction is all or nothing.
/// Returns each transaction's reply and where it goes.
pub fn run_group(
    group: Vec<Coordinate>,
    db: &mut ShardDb,
    commit: &mut dyn FnMut(&mut ShardDb),
    stopping: Stopping<'_>,
) -> Vec<(ReplyTo, Reply)> {
    let mut others: Vec<u16> = group
        .iter()
        .flat_map(|c| c.others.iter().copied())
        .collect();
    others.sort_unstable();
    others.dedup();
    let Some(first) = group.first() else {
        return Vec::new();
    };
    let (outboxes, reply_to) = (first.outboxes.clone(), first.cx.reply_to);
    let Some(held) = hold_all(&others, &outboxes, reply_to, stopping) else {
        return group
            .into_iter()
            .map(|c| {
                (
                    c.cx.reply_to,
                    Reply::Error(crate::error::CmdError::msg(NOT_HELD)),
                )
            })
            .collect();
    };
    db.tx_seq += 1;
    let (me, seq) = (db.id.0, db.tx_seq);
    for (_, ops) in &held {
        let _ = ops.send(TxOp::Begin(me, seq));
    }
    db.aof.begin_tx(me, seq);
    let mut tx = TxRun {
        db,
        cx: first.cx,
        held,
        stopping,
    };
    let mut out = Vec::with_capacity(group.len());
    // Consecutive `Groups` bodies run as one batch: each shard gets all
    // their requests, in transaction order, as one operation.
    let mut batch = GroupBatch::default();
    for c in group {
        match c.body {
            TxBody::Groups(groups, assemble) => batch.add(c.cx, in_db(groups, c.cx.db), assemble),
            body @ TxBody::Run(_) => {
                batch.flush(&mut tx, &mut out);
                tx.cx = c.cx;
                let reply = body.run(&mut tx, c.cx.db);
                out.push((c.cx.reply_to, reply));
            }
        }
    }
    batch.flush(&mut tx, &mut out);
    tx.finish(commit);
    out
}

/// Requests grouped by shard (one operation per shard, see
/// [`TxRun::run_each`]), each request's place remembered so that the
/// replies come back in the order the requests were added.
pub struct ShardGroups<T> {
    groups: Vec<(u16, Vec<T>)>,
    /// `(group, index in group)` per request, in the order added.
    order: Vec<(usize, usize)>,
}

impl<T> Default for ShardGroups<T> {
    fn default() -> Self {
        ShardGroups {
            groups: Vec::new(),
            order: Vec::new(),
        }
    }
}

impl<T> ShardGroups<T> {
    /// Add a request for `shard`.
    pub fn push(&mut self, shard: u16, item: T) {
        let g = match self.groups.iter().position(|(s, _)| *s == shard) {
            Some(g) => g,
            None => {
                self.groups.push((shard, Vec::new()));
                self.groups.len() - 1
            }
        };
        self.order.push((g, self.groups[g].1.len()));
        self.groups[g].1.push(item);
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The groups to run, and how to put their replies back in order.
    pub fn split(self) -> (Vec<(u16, Vec<T>)>, ReplyOrder) {
        (self.groups, ReplyOrder(self.order))
    }
}

/// Where each request of a [`ShardGroups`] went.
pub struct ReplyOrder(Vec<(usize, usize)>);

impl ReplyOrder {
    /// The groups' replies (group by group) as one reply per request, in
    /// the order the requests were added.
    pub fn scatter(self, replies: Vec<Vec<Reply>>) -> Vec<Reply> {
        let mut replies: Vec<Vec<Option<Reply>>> = replies
            .into_iter()
            .map(|v| v.into_iter().map(Some).collect())
            .collect();
        self.0
            .into_iter()
            .map(|(g, i)| {
                replies
                    .get_mut(g)
                    .and_then(|v| v.get_mut(i))
                    .and_then(Option::take)
                    .unwrap_or_else(hold_lost)
            })
            .collect()
    }
}

/// A transaction in a [`GroupBatch`]: its context, how many requests each
/// of its groups has, and its assembler.
type BatchedTx = (ExecCtx, Vec<usize>, Assemble);

/// Transactions of independent per-shard groups, merged so each shard runs
/// all of theirs at once (in transaction order: the same as one after the
/// other, since each shard only sees its own requests).
#[derive(Default)]
struct GroupBatch {
    requests: ShardGroups<(usize, ShardReq)>,
    txs: Vec<BatchedTx>,
}

impl GroupBatch {
    fn add(&mut self, cx: ExecCtx, groups: Vec<(u16, Vec<(usize, ShardReq)>)>, assemble: Assemble) {
        let sizes = groups.iter().map(|(_, reqs)| reqs.len()).collect();
        for (shard, reqs) in groups {
            for r in reqs {
                self.requests.push(shard, r);
            }
        }
        self.txs.push((cx, sizes, assemble));
    }

    /// Run what was added and push each transaction's reply, in order.
    fn flush(&mut self, tx: &mut TxRun<'_>, out: &mut Vec<(ReplyTo, Reply)>) {
        if self.txs.is_empty() {
            return;
        }
        let (groups, order) = std::mem::take(&mut self.requests).split();
        let mut replies = order.scatter(tx.run_each(groups)).into_iter();
        for (cx, sizes, assemble) in self.txs.drain(..) {
            let groups = sizes
                .into_iter()
                .map(|n| replies.by_ref().take(n).collect())
                .collect();
            out.push((cx.reply_to, assemble(groups)));
        }
    }
}

/// A shard's pending hold: set by [`hold_req`], taken by the shard loop
/// right after the job that set it.
pub struct Hold {
    pub ops: Receiver<TxOp>,
    /// Told once the shard is held.
    pub ack: Sender<()>,
}

/// A job that makes its shard enter the held loop once it returns (the job
/// itself answers nothing; the shard acks on `ack`).
pub fn hold_req(ops: Receiver<TxOp>, ack: Sender<()>) -> ShardReq {
    on_shard(move |db, _cx| {
        db.hold = Some(Hold { ops, ack });
        Reply::NoReply
    })
}

/// Hold `others` (ascending), each after the previous one acked — except
/// the last: nothing is requested after it, and the first operation sent to
/// it waits for it anyway. Returns their operation channels, or `None` when
/// a shard cannot be reached (shutting down); those already held are
/// released by the dropped channels.
fn hold_all(
    others: &[u16],
    outboxes: &[Outbox],
    reply_to: ReplyTo,
    stopping: Stopping<'_>,
) -> Option<Vec<(u16, Sender<TxOp>)>> {
    let mut held = Vec::with_capacity(others.len());
    for &s in others {
        let (ops_tx, ops_rx) = crossbeam_channel::unbounded();
        let (ack_tx, ack_rx) = crossbeam_channel::bounded(1);
        let job = Job {
            req: hold_req(ops_rx, ack_tx),
            db: 0,
            reply_to,
            cmd: NO_CMD,
            argv: None,
            reply_budget_bytes: u64::MAX,
            no_touch: false,
        };
        outboxes
            .get(usize::from(s))?
            .send(ShardMsg::Batch(vec![job]));
        wait(&ack_rx, stopping)?;
        held.push((s, ops_tx));
    }
    Some(held)
}

/// Whether the server is stopping (checked while the coordinator waits on a
/// shard, so a shard that left its loop cannot hang it).
pub type Stopping<'a> = &'a (dyn Fn() -> bool + 'a);

/// Wait for `rx`, giving up when the channel closes or the server stops.
fn wait<T>(rx: &Receiver<T>, stopping: Stopping<'_>) -> Option<T> {
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(v) => return Some(v),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return None,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) if stopping() => return None,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
    }
}

/// The coordinator's view of a running transaction: its own shard's data,
/// and the operation channel of every other held shard.
pub struct TxRun<'a> {
    db: &'a mut ShardDb,
    cx: ExecCtx,
    held: Vec<(u16, Sender<TxOp>)>,
    stopping: Stopping<'a>,
}

/// What an operation answers when its held shard's channel broke (cannot
/// happen while the coordinator runs: held shards leave only on release).
const HOLD_LOST: &str = "ERR cross-shard transaction lost a shard";

fn hold_lost() -> Reply {
    Reply::Error(crate::error::CmdError::msg(HOLD_LOST))
}

impl<'a> TxRun<'a> {
    /// The body's runner on shard `db`; `held` are the operation channels
    /// of the other shards, already held (none for a one-shard transaction).
    pub fn new(db: &'a mut ShardDb, cx: ExecCtx, held: Vec<(u16, Sender<TxOp>)>) -> Self {
        TxRun {
            db,
            cx,
            held,
            stopping: &|| false,
        }
    }

    /// Run `req` on shard `shard` in database `db` and wait for its reply.
    pub fn run(&mut self, shard: u16, db: usize, req: ShardReq) -> Reply {
        self.run_each(vec![(shard, vec![(db, req)])])
            .pop()
            .and_then(|mut r| r.pop())
            .unwrap_or_else(hold_lost)
    }

    /// Run independent groups of requests, one group per shard: every held
    /// shard gets its whole group as one operation and they run at the same
    /// time, the coordinator's own group inline meanwhile; each group runs
    /// in order on its shard. Returns the replies group by group. Only for
    /// requests that do not depend on each other across shards (each shard's
    /// data is its own, so their effects commute).
    pub fn run_each(&mut self, groups: Vec<(u16, Vec<(usize, ShardReq)>)>) -> Vec<Vec<Reply>> {
        let me = self.db.id.0;
        let mut out: Vec<Option<Vec<Reply>>> = (0..groups.len()).map(|_| None).collect();
        let mut waiting = Vec::new();
        let mut mine = Vec::new();
        for (i, (shard, reqs)) in groups.into_iter().enumerate() {
            if shard == me {
                mine.push((i, reqs));
                continue;
            }
            let Some((_, ops)) = self.held.iter().find(|(s, _)| *s == shard) else {
                out[i] = Some(reqs.iter().map(|_| hold_lost()).collect());
                continue;
            };
            let (tx, rx) = crossbeam_channel::bounded(1);
            let cx = self.cx;
            let op = TxOp::Apply(Box::new(move |data: &mut ShardDb| {
                let replies = reqs
                    .into_iter()
                    .map(|(db, req)| apply_as_client(req, data, &ExecCtx { db, ..cx }))
                    .collect::<Vec<_>>();
                let _ = tx.send(replies);
            }));
            if ops.send(op).is_ok() {
                waiting.push((i, rx));
            } else {
                out[i] = Some(vec![hold_lost()]);
            }
        }
        for (i, reqs) in mine {
            let cx = self.cx;
            out[i] = Some(
                reqs.into_iter()
                    .map(|(db, req)| apply_as_client(req, self.db, &ExecCtx { db, ..cx }))
                    .collect(),
            );
        }
        for (i, rx) in waiting {
            out[i] = Some(wait(&rx, self.stopping).unwrap_or_else(|| vec![hold_lost()]));
        }
        out.into_iter().map(Option::unwrap_or_default).collect()
    }

    /// Commit and release (see [`Coordinate::run`]): prepare every held
    /// shard and wait for each, write this shard's block and the commit
    /// record with `commit`, release them.
    fn finish(self, commit: &mut dyn FnMut(&mut ShardDb)) {
        let mut prepared = Vec::with_capacity(self.held.len());
        for (_, ops) in &self.held {
            let (tx, rx) = crossbeam_channel::bounded(1);
            if ops.send(TxOp::Prepare(tx)).is_ok() {
                prepared.push(rx);
            }
        }
        let mut others_wrote = false;
        for rx in prepared {
            others_wrote |= wait(&rx, self.stopping).unwrap_or(false);
        }
        let wrote = self.db.aof.end_tx(true, others_wrote);
        if wrote || others_wrote {
            commit(self.db);
        }
        for (_, ops) in &self.held {
            let _ = ops.send(TxOp::Release);
        }
    }
}
