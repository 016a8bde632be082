//! Holding shards for a cross-shard transaction (MULTI/EXEC, MSETNX, and
//! anything else that must be atomic over keys of several shards).
//!
//! # The scheme
//! A transaction that touches several shards runs under **holds**: each
//! involved shard thread stops serving anything else and runs only the
//! transaction's operations until it is released. Its coordinator is the
//! shard thread that owns the client connection. Holds are taken in
//! ascending shard order, which is what keeps two transactions from waiting
//! on each other:
//!
//! 1. Shards below the coordinator are held one by one, **asynchronously**:
//!    a [`hold_req`] job travels in the normal batch to the shard, which acks
//!    through the coordinator's inbox and then blocks in its held loop. The
//!    coordinator keeps serving its own connections meanwhile (and may itself
//!    be held by another transaction, which then only needs shards above it).
//! 2. When those are held, the coordinator runs the transaction body as one
//!    job on its own shard — from then on its thread is held by the
//!    transaction — and holds the shards above it **synchronously**, in
//!    order. Nothing waits on a shard below one it holds, so no cycle forms.
//! 3. The body runs each operation on its shard ([`TxRun::run`]): inline on
//!    the coordinator's own data, or over the held shard's operation channel,
//!    one after the other, with nothing interleaved on any involved shard.
//! 4. Release: every held shard writes (and under `appendfsync always`
//!    fsyncs) the transaction's AOF effects before it acks the release, so
//!    the reply, which leaves the coordinator after its own group commit, is
//!    never ahead of the data on any shard. Each shard then serves the readers
//!    parked on keys the transaction made ready.
//!
//! A coordinator that goes away before the body runs (its client closed)
//! drops the operation channels; held shards see the channel close and go
//! back to work with nothing changed.
//!
//! Single-shard transactions never come here: they run as one job on their
//! shard, as before.

use crossbeam_channel::{Receiver, Sender};

use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::shard::msg::{on_shard, ExecCtx, Outbox, ReplyTo, ShardReq};

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

/// A transaction body: runs on the coordinator with every involved shard
/// held, in the given database (the client's selected one), and returns the
/// command's reply.
pub type TxBody = Box<dyn FnOnce(&mut TxRun<'_>, usize) -> Reply + Send>;

/// The coordinator's part, left on its shard by the transaction's job and
/// run by the shard loop (it needs the AOF writer, which jobs do not see).
pub struct Coordinate {
    /// Context of the job: the client's connection and pipeline slot, the clock.
    pub cx: ExecCtx,
    /// Shards above the coordinator, to hold now, ascending.
    pub uppers: Vec<u16>,
    /// Every shard thread's inbox.
    pub outboxes: Vec<Outbox>,
    /// Shards below the coordinator, already held, with their channels.
    pub lowers: Vec<(u16, Sender<TxOp>)>,
    pub body: TxBody,
}

/// Error when a shard cannot be held (the server is shutting down).
const NOT_HELD: &str = "ERR cross-shard transaction aborted: the server is shutting down";

impl Coordinate {
    /// Hold the upper shards, run the body, then commit in two phases:
    /// every participant writes its closed block (prepare), then this shard
    /// writes its own block and the commit record through `commit` (the
    /// shard loop's AOF commit), then the participants are released. A
    /// crash before the commit record is written leaves blocks that start-up
    /// discards (see `aof::load`), so the transaction is all or nothing.
    pub fn run(self, db: &mut ShardDb, commit: &mut dyn FnMut(&mut ShardDb)) -> Reply {
        let Some(mut held) = hold_uppers(&self.uppers, &self.outboxes, self.cx.reply_to) else {
            return Reply::Error(crate::error::CmdError::msg(NOT_HELD));
        };
        held.extend(self.lowers);
        db.tx_seq += 1;
        let (me, seq) = (db.id.0, db.tx_seq);
        for (_, ops) in &held {
            let _ = ops.send(TxOp::Begin(me, seq));
        }
        db.aof.begin_tx(me, seq);
        let mut tx = TxRun::new(db, self.cx, held);
        let reply = (self.body)(&mut tx, self.cx.db);
        tx.finish(commit);
        reply
    }
}

/// How a shard tells the coordinator it is held.
pub enum HoldAck {
    /// As the reply of the hold job, through the coordinator's inbox (the
    /// asynchronous phase: the coordinator is in its event loop).
    Reply(Outbox),
    /// On a channel the coordinator blocks on (the synchronous phase).
    Chan(Sender<()>),
}

/// A shard's pending hold: set by [`hold_req`], taken by the shard loop
/// right after the job that set it.
pub struct Hold {
    pub ops: Receiver<TxOp>,
    pub ack: HoldAck,
    pub reply_to: ReplyTo,
}

impl Hold {
    /// Tell the coordinator this shard is held.
    pub fn ack(&self) {
        match &self.ack {
            HoldAck::Reply(outbox) => outbox.send(crate::shard::msg::ShardMsg::Replies(vec![(
                self.reply_to,
                Reply::Ok,
            )])),
            HoldAck::Chan(tx) => {
                let _ = tx.send(());
            }
        }
    }
}

/// A job that makes its shard enter the held loop once it returns (the job
/// itself answers nothing; the ack goes as `ack` says).
pub fn hold_req(ops: Receiver<TxOp>, ack: HoldAck) -> ShardReq {
    on_shard(move |db, cx| {
        db.hold = Some(Hold {
            ops,
            ack,
            reply_to: cx.reply_to,
        });
        Reply::NoReply
    })
}

/// The coordinator's view of a running cross-shard transaction: its own
/// shard's data, and the operation channel of every other held shard.
pub struct TxRun<'a> {
    db: &'a mut ShardDb,
    cx: ExecCtx,
    held: Vec<(u16, Sender<TxOp>)>,
}

/// What a held shard answers when the coordinator's channel broke (cannot
/// happen while the coordinator runs: held shards leave only on release).
const HOLD_LOST: &str = "ERR cross-shard transaction lost a shard";

impl<'a> TxRun<'a> {
    /// The body's runner on shard `db`; `held` are the operation channels
    /// of the other shards, already held (none for a one-shard transaction).
    pub fn new(db: &'a mut ShardDb, cx: ExecCtx, held: Vec<(u16, Sender<TxOp>)>) -> Self {
        TxRun { db, cx, held }
    }

    /// The context of the job running the transaction (client, clock).
    pub fn cx(&self) -> &ExecCtx {
        &self.cx
    }

    /// Run `req` on shard `shard` in database `db` and wait for its reply.
    pub fn run(&mut self, shard: u16, db: usize, req: ShardReq) -> Reply {
        let cx = ExecCtx { db, ..self.cx };
        if shard == self.db.id.0 {
            return req.apply(self.db, &cx);
        }
        let Some((_, ops)) = self.held.iter().find(|(s, _)| *s == shard) else {
            return Reply::Error(crate::error::CmdError::msg(HOLD_LOST));
        };
        let (tx, rx) = crossbeam_channel::bounded(1);
        let op = TxOp::Apply(Box::new(move |data: &mut ShardDb| {
            let _ = tx.send(req.apply(data, &cx));
        }));
        if ops.send(op).is_err() {
            return Reply::Error(crate::error::CmdError::msg(HOLD_LOST));
        }
        rx.recv()
            .unwrap_or_else(|_| Reply::Error(crate::error::CmdError::msg(HOLD_LOST)))
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
            others_wrote |= rx.recv().unwrap_or(false);
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

/// Hold `uppers` (shards above the coordinator, ascending) synchronously
/// from the coordinator's transaction job: send each a hold job and wait for
/// its ack before the next. Returns their operation channels, or `None` when
/// a shard cannot be reached (shutting down); those already held are released.
pub fn hold_uppers(
    uppers: &[u16],
    outboxes: &[Outbox],
    reply_to: ReplyTo,
) -> Option<Vec<(u16, Sender<TxOp>)>> {
    let mut held = Vec::with_capacity(uppers.len());
    for &u in uppers {
        let (ops_tx, ops_rx) = crossbeam_channel::unbounded();
        let (ack_tx, ack_rx) = crossbeam_channel::bounded(1);
        let job = crate::shard::msg::Job {
            req: hold_req(ops_rx, HoldAck::Chan(ack_tx)),
            db: 0,
            reply_to,
            cmd: crate::shard::msg::NO_CMD,
            argv: None,
            reply_budget_bytes: u64::MAX,
        };
        let sent = outboxes
            .get(usize::from(u))
            .map(|o| o.send(crate::shard::msg::ShardMsg::Batch(vec![job])));
        if sent.is_none() || ack_rx.recv().is_err() {
            // Dropping the channels releases those held so far.
            return None;
        }
        held.push((u, ops_tx));
    }
    Some(held)
}
