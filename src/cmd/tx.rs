//! Transactions: MULTI, EXEC, DISCARD.
//!
//! Queueing happens in the IO layer (`io::dispatch`): inside MULTI every
//! command except MULTI/EXEC/DISCARD/QUIT/RESET is checked (known command,
//! arity, subcommand) and queued with `+QUEUED`; a failed check marks the
//! transaction so EXEC answers EXECABORT.
//!
//! EXEC runs the queue atomically, whatever shards its keys live on, as
//! standalone Redis does:
//! - when every key (and every watched key) lives on one shard, the queue
//!   travels as a single job to that shard, which applies the commands in
//!   order with nothing interleaved (the fast path);
//! - otherwise every involved shard is **held** for the transaction (see
//!   [`crate::shard::hold`]: holds taken in ascending shard order, the body
//!   run by the thread owning the connection) — the WATCH check and every
//!   queued command run with no other command on those shards in between,
//!   and readers blocked on the keys are served after the whole transaction.
//!
//! Connection commands (PING, ECHO, SELECT, ...) run on the connection's
//! thread at EXEC time, in queue order, so a queued SELECT changes the
//! database of the keyed commands after it.
//!
//! WATCH registers each key on the shard that owns it (per-key versions, see
//! [`crate::shard::watch`]); EXEC checks them inside the transaction, on
//! their shards, so nothing can write between the check and the commands.

use std::sync::Arc;

use bytes::Bytes;

use crate::cmd::table::{self, Handler};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, Flags, Merge, ShardReq};
use crate::error::CmdError;
use crate::io::conn::Session;
use crate::io::conn::Then;
use crate::reply::Reply;
use crate::route::held::{chain_shards, run_chain, Body};
use crate::route::router::{route, route_keyed, Routed};
use crate::route::slot::ShardId;
use crate::shard::hold::{ShardGroups, TxBody, TxRun};

/// Error for a command that cannot run inside a transaction (SHUTDOWN).
const NOT_IN_TX: &str = "ERR Command not allowed inside a transaction";

const fn row(
    name: &'static str,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec::conn(name, 1, flags, "transactions", acl, summary, "1.2.0", f)
}

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row(
        "MULTI",
        Flags::NOSCRIPT
            .with(Flags::LOADING)
            .with(Flags::STALE)
            .with(Flags::FAST)
            .with(Flags::ALLOW_BUSY),
        &["fast", "transaction"],
        "Starts a transaction.",
        multi,
    ),
    row(
        "EXEC",
        Flags::NOSCRIPT
            .with(Flags::LOADING)
            .with(Flags::STALE)
            .with(Flags::SKIP_SLOWLOG),
        &["slow", "transaction"],
        "Executes all commands in a transaction.",
        exec,
    ),
    row(
        "DISCARD",
        Flags::NOSCRIPT
            .with(Flags::LOADING)
            .with(Flags::STALE)
            .with(Flags::FAST)
            .with(Flags::ALLOW_BUSY),
        &["fast", "transaction"],
        "Discards a transaction.",
        discard,
    ),
    CommandSpec {
        keys: crate::cmd::Keys::ALL,
        ..CommandSpec::conn(
            "WATCH",
            -2,
            Flags::NOSCRIPT
                .with(Flags::LOADING)
                .with(Flags::STALE)
                .with(Flags::FAST)
                .with(Flags::ALLOW_BUSY),
            "transactions",
            &["fast", "transaction"],
            "Monitors changes to keys to determine the execution of a transaction.",
            "2.2.0",
            watch,
        )
    },
    row(
        "UNWATCH",
        Flags::NOSCRIPT
            .with(Flags::LOADING)
            .with(Flags::STALE)
            .with(Flags::FAST)
            .with(Flags::ALLOW_BUSY),
        &["fast", "transaction"],
        "Forgets about watched keys of a transaction.",
        unwatch,
    ),
];

/// Forget the session's watches on every shard holding some; `reply` is
/// the answer once they are gone (or at once when there are none).
pub fn unwatch_then(session: &mut Session, reply: Reply) -> Action {
    let shards = std::mem::take(&mut session.watching);
    if shards.is_empty() {
        return Action::Reply(reply);
    }
    Action::FanOut {
        parts: shards
            .into_iter()
            .map(|s| (s, crate::shard::watch::unwatch_req()))
            .collect(),
        merge: Box::new(move |_| reply),
    }
}

/// `WATCH key [key ...]`
///
/// Marks the keys for EXEC's check: if any of them is written (or expires)
/// before EXEC, the transaction is not run.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR WATCH inside MULTI is not allowed` (the transaction stays open).
/// # Source
/// `watchCommand`, redis/src/multi.c.
fn watch(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    if cx.conn.multi.is_some() {
        return Err(CmdError::msg("ERR WATCH inside MULTI is not allowed"));
    }
    let mut by_shard: Vec<(ShardId, Vec<Bytes>)> = Vec::new();
    for key in &argv[1..] {
        let shard = cx.shared.shard_of(key);
        match by_shard.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, keys)) => keys.push(key.clone()),
            None => by_shard.push((shard, vec![key.clone()])),
        }
    }
    let parts = by_shard
        .into_iter()
        .map(|(shard, keys)| {
            if !cx.conn.watching.contains(&shard) {
                cx.conn.watching.push(shard);
            }
            let req = on_shard(move |db, cx| {
                for key in &keys {
                    let live = db.is_live(cx.db, key, cx.now_ms);
                    db.watch.watch(cx.reply_to.conn, cx.db, key, live);
                }
                Reply::Ok
            });
            (shard, req)
        })
        .collect();
    Ok(Action::FanOut {
        parts,
        merge: Box::new(crate::cmd::merge_ok),
    })
}

/// `UNWATCH`
///
/// Forgets every watched key of the connection.
///
/// # Reply
/// `+OK`.
/// # Source
/// `unwatchCommand`, redis/src/multi.c.
fn unwatch(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(unwatch_then(cx.conn, Reply::Ok))
}

/// Leave MULTI state: drop the queue and the failure mark (`multi=-1` in CLIENT LIST).
pub fn reset_multi(session: &mut Session) {
    session.multi = None;
    session.multi_bytes = 0;
    session.multi_failed = false;
    session.multi_flags = Flags::NONE;
    session
        .shared
        .multi
        .store(u64::MAX, std::sync::atomic::Ordering::Relaxed);
}

/// `MULTI`
///
/// Starts queueing commands for EXEC.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR MULTI calls can not be nested` (the open transaction is kept, not doomed).
/// # Source
/// `multiCommand`, redis/src/multi.c.
fn multi(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    if cx.conn.multi.is_some() {
        return Err(CmdError::msg("ERR MULTI calls can not be nested"));
    }
    cx.conn.multi = Some(Vec::new());
    cx.conn.multi_bytes = 0;
    cx.conn.multi_failed = false;
    cx.conn.multi_flags = Flags::NONE;
    cx.conn
        .shared
        .multi
        .store(0, std::sync::atomic::Ordering::Relaxed);
    Ok(Reply::Ok.into())
}

/// `DISCARD`
///
/// Drops the queued commands and leaves MULTI state.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR DISCARD without MULTI`.
/// # Source
/// `discardCommand`, redis/src/multi.c.
fn discard(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    if cx.conn.multi.is_none() {
        return Err(CmdError::msg("ERR DISCARD without MULTI"));
    }
    reset_multi(cx.conn);
    Ok(unwatch_then(cx.conn, Reply::Ok))
}

/// One queued command's place in EXEC's reply.
enum Out {
    /// Answered on the connection's thread (connection command, or an error found before running).
    Ready(Reply),
    /// The reply of step `n`.
    Step(usize),
}

/// A queued command after the routing pass, before connection commands run.
enum Planned {
    Ready(Reply),
    Keyed(Work),
    Conn,
}

/// Times one queued command as EXEC runs it: its `usec` and latency in
/// INFO, and SLOWLOG when it is slow, as Redis's `call()` counts and logs
/// each command of a transaction (never EXEC itself: `skip_slowlog`).
#[derive(Clone)]
struct StepTimer {
    /// The command's table row name (its statistics row).
    name: &'static str,
    /// Where a slow run is logged, when SLOWLOG is on.
    slow: Option<Arc<SlowTarget>>,
}

struct SlowTarget {
    log: Arc<crate::slowlog::SlowLog>,
    client: Arc<crate::io::conn::ClientShared>,
    argv: Vec<Bytes>,
}

impl StepTimer {
    fn new(spec: &CommandSpec, argv: &[Bytes], cx: &ConnCtx<'_>) -> StepTimer {
        let slow = cx.shared.slowlog.is_on().then(|| {
            Arc::new(SlowTarget {
                log: cx.shared.slowlog.clone(),
                client: cx.conn.shared.clone(),
                argv: argv.to_vec(),
            })
        });
        StepTimer {
            name: spec.name,
            slow,
        }
    }

    /// The command ran for `ns`.
    fn done(&self, ns: u64) {
        crate::server::note_exec_step(self.name, ns);
        if let Some(s) = &self.slow {
            if s.log.is_slow(ns) {
                s.log.push_for(&s.argv, ns / 1000, &s.client);
            }
        }
    }

    /// `req`, timed where it runs (steps on several shards run at once, so
    /// each is timed on its own shard).
    fn wrap(self, req: ShardReq) -> ShardReq {
        on_shard(move |db, cx| {
            let started = quanta::Instant::now();
            let reply = req.apply(db, cx);
            self.done(started.elapsed().as_nanos() as u64);
            reply
        })
    }
}

/// A queued command to run: its database, its work, and the timer of a
/// command over several shards (a single-shard request carries its timer
/// inside, see [`timed`]).
type Step = (usize, Work, Option<StepTimer>);

/// `work` for the queued command `argv`, timed: a request on one shard is
/// wrapped to time itself where it runs; other work is timed by
/// [`run_steps`] (returned timer).
fn timed(work: Work, argv: &[Bytes], cx: &ConnCtx<'_>) -> (Work, Option<StepTimer>) {
    let Some(spec) = table::row_of(argv) else {
        return (work, None);
    };
    let timer = StepTimer::new(spec, argv, cx);
    match work {
        Work::One(shard, req) => (Work::One(shard, timer.wrap(req)), None),
        other => (other, Some(timer)),
    }
}

/// What one queued command runs on shards.
enum Work {
    /// One request on one shard.
    One(ShardId, ShardReq),
    /// Parts on several shards, merged, possibly followed by more steps
    /// (a multi-shard DEL or MGET; XREADGROUP's checks then reads; a
    /// cross-shard RENAME).
    Chain(Vec<(ShardId, ShardReq)>, Merge, Option<Then>),
    /// An atomic multi-shard command (MSET, MSETNX): its body runs inside
    /// this transaction's holds.
    Atomic(Vec<ShardId>, Body, Merge),
}

impl Work {
    /// Every shard this work touches.
    fn shards(&self) -> Vec<ShardId> {
        match self {
            Work::One(s, _) => vec![*s],
            Work::Chain(parts, _, then) => chain_shards(parts, then.as_ref()),
            Work::Atomic(shards, _, _) => shards.clone(),
        }
    }
}

/// `EXEC`
///
/// Runs the queued commands atomically and leaves MULTI state.
///
/// A transaction whose keys (and watched keys) live on one shard runs as a
/// single job there. One that spans shards runs under holds (see
/// [`crate::shard::hold`]): every involved shard runs nothing else from the
/// WATCH check to the last queued command, so no client ever sees part of
/// it, and readers blocked on its keys are served after all of it.
///
/// # Reply
/// Array with one reply per queued command, in order (an empty array for an
/// empty transaction); a null array when a watched key changed. Errors
/// raised while running a command — including syntax errors, which
/// shardstream detects when the command is parsed at EXEC time, as Redis
/// does inside its command procs — are error elements; the other commands
/// still run.
/// # Errors
/// `ERR EXEC without MULTI`; `EXECABORT Transaction discarded because of
/// previous errors.` when a command failed to queue.
/// # Source
/// `execCommand`, redis/src/multi.c.
fn exec(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    if cx.conn.multi.is_none() {
        return Err(CmdError::msg("ERR EXEC without MULTI"));
    }
    let watching = std::mem::take(&mut cx.conn.watching);
    match exec_queue(cx, argv, &watching) {
        Err(e) if !watching.is_empty() => {
            // The transaction did not run: its watches still go.
            cx.conn.watching = watching;
            Ok(unwatch_then(cx.conn, Reply::Error(e)))
        }
        other => other,
    }
}

/// EXEC once the session left MULTI state; `watching` are the shards
/// holding the connection's watches (taken out of the session).
fn exec_queue(
    cx: &mut ConnCtx<'_>,
    _argv: &[Bytes],
    watching: &[ShardId],
) -> Result<Action, CmdError> {
    let Some(queue) = cx.conn.multi.take() else {
        return Err(CmdError::msg("ERR EXEC without MULTI"));
    };
    let failed = cx.conn.multi_failed;
    reset_multi(cx.conn);
    if failed {
        return Err(CmdError::msg(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    let shared = cx.shared;

    // Pass 1: route keyed commands (pure: parse + shard).
    let mut planned = Vec::with_capacity(queue.len());
    for argv in &queue {
        let Some(spec) = table::row_of(argv) else {
            planned.push(Planned::Ready(not_a_command(argv)));
            continue;
        };
        // Inside a transaction a blocking read runs in its non-blocking form, as in Redis.
        let (parse, merge, validate) = match spec.handler {
            Handler::Keyed { parse, merge } => (parse, merge, None),
            Handler::Blocking {
                parse,
                merge,
                validate,
                ..
            } => {
                // A pop over keys of several shards: its keys in order.
                if let Some(work) = pop_in_key_order(spec, parse, merge, argv, shared) {
                    planned.push(work);
                    continue;
                }
                (parse, merge, validate)
            }
            Handler::Conn(_) => {
                planned.push(Planned::Conn);
                continue;
            }
        };
        planned.push(
            match route_keyed(spec, parse, merge, validate, argv, shared) {
                Routed::One(shard, req) => Planned::Keyed(Work::One(shard, req)),
                Routed::Fan(parts, merge, then) => Planned::Keyed(Work::Chain(parts, merge, then)),
                Routed::Atomic(shards, body, merge, _) => {
                    Planned::Keyed(Work::Atomic(shards, body, merge))
                }
                Routed::Block(_) => Planned::Ready(Reply::Error(CmdError::msg(NOT_IN_TX))),
                Routed::Reply(r) | Routed::Close(r) => Planned::Ready(r),
                Routed::Drop => Planned::Ready(Reply::Error(CmdError::msg(NOT_IN_TX))),
                // A transaction does not block (Redis's CLIENT_DENY_BLOCKING).
                Routed::Wait(_, r) => Planned::Ready(r),
            },
        );
    }

    // Pass 2: in queue order, run connection commands here and record each
    // keyed command's database (a queued SELECT changes it for what follows).
    let mut steps: Vec<Step> = Vec::new();
    let mut outs = Vec::with_capacity(queue.len());
    for (argv, plan) in queue.iter().zip(planned) {
        match plan {
            Planned::Ready(r) => outs.push(Out::Ready(r)),
            Planned::Keyed(work) => {
                outs.push(Out::Step(steps.len()));
                let (work, timer) = timed(work, argv, cx);
                steps.push((cx.conn.db, work, timer));
            }
            Planned::Conn => {
                let Some(spec) = table::row_of(argv) else {
                    outs.push(Out::Ready(not_a_command(argv)));
                    continue;
                };
                let started = quanta::Instant::now();
                let routed = route(spec, argv, cx.conn, shared);
                if spec.flags.has(Flags::FUNCTION_REGISTRY) && spec.flags.has(Flags::WRITE) {
                    cx.conn.exec_changed_functions = true;
                }
                let work = match routed {
                    Routed::Reply(r) | Routed::Close(r) | Routed::Wait(_, r) => {
                        // Answered here, now: timed and logged now, so
                        // before the keyed commands queued ahead of it.
                        let row = shared.cmdstats.index_of(spec.name);
                        let client = &cx.conn.shared;
                        crate::io::time_answered_here(
                            shared,
                            spec,
                            row,
                            Some(started),
                            argv,
                            client,
                        );
                        outs.push(Out::Ready(r));
                        continue;
                    }
                    Routed::Drop | Routed::Block(_) => {
                        outs.push(Out::Ready(Reply::Error(CmdError::msg(NOT_IN_TX))));
                        continue;
                    }
                    // The libraries are shared by every shard: a step that
                    // changes or reads them runs alone, after the steps
                    // before it (others on different shards run together).
                    Routed::One(shard, req) if spec.flags.has(Flags::FUNCTION_REGISTRY) => {
                        Work::Chain(
                            vec![(shard, req)],
                            Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk)),
                            None,
                        )
                    }
                    Routed::One(shard, req) => Work::One(shard, req),
                    Routed::Fan(parts, merge, then) => Work::Chain(parts, merge, then),
                    Routed::Atomic(shards, body, merge, _) => Work::Atomic(shards, body, merge),
                };
                outs.push(Out::Step(steps.len()));
                let (work, timer) = timed(work, argv, cx);
                steps.push((cx.conn.db, work, timer));
            }
        }
    }
    cx.conn.exec_changed_functions = false;
    // Each queued command is a call; one that answers an error is a failed
    // one (counted when EXEC's reply is put together, see `count_failed`).
    let mut rows = Vec::with_capacity(queue.len());
    for argv in &queue {
        let spec = table::row_of(argv);
        let row = spec.and_then(|s| shared.cmdstats.index_of(s.name));
        if spec.is_some() {
            shared.count_call_at(row, false, false);
        }
        rows.push(row);
    }

    if steps.is_empty() && watching.is_empty() {
        let reply = reply_exec(outs, Vec::new());
        count_failed(&rows, &reply);
        shared.cmdstats.flush_failed();
        return Ok(reply.into());
    }
    let mut shards: Vec<ShardId> = watching.to_vec();
    for (_, work, _) in &steps {
        shards.extend(work.shards());
    }
    shards.sort_unstable_by_key(|s| s.0);
    shards.dedup();
    let merge: Merge = Box::new(move |parts: Vec<Reply>| match parts.into_iter().next() {
        Some(Reply::Array(replies)) => {
            let reply = reply_exec(outs, replies);
            count_failed(&rows, &reply);
            reply
        }
        Some(other) => other,
        None => Reply::NullArray,
    });
    let watch_shards = watching.to_vec();
    if let [shard] = shards[..] {
        // Everything on one shard: one job there, WATCH check included.
        let req = on_shard(move |db, cx| {
            if db.take_watch_dirty(cx.reply_to.conn, cx.now_ms) {
                return Reply::NullArray;
            }
            let mut tx = TxRun::new(db, *cx, Vec::new());
            Reply::Array(run_steps(&mut tx, steps))
        });
        return Ok(Action::FanOut {
            parts: vec![(shard, req)],
            merge,
        });
    }
    if watch_shards.is_empty() && steps.iter().all(|(_, w, _)| matches!(w, Work::One(..))) {
        return Ok(Action::Atomic {
            shards,
            body: independent_steps(steps),
            merge,
        });
    }
    let body: Body = TxBody::Run(Box::new(move |tx: &mut TxRun<'_>, _db| {
        let checks = watch_shards
            .into_iter()
            .map(|s| {
                let check = on_shard(|db, cx| {
                    Reply::Int(i64::from(db.take_watch_dirty(cx.reply_to.conn, cx.now_ms)))
                });
                (s.0, vec![(0, check)])
            })
            .collect();
        let dirty = tx
            .run_each(checks)
            .iter()
            .flatten()
            .any(|r| *r == Reply::Int(1));
        if dirty {
            return Reply::NullArray;
        }
        Reply::Array(run_steps(tx, steps))
    }));
    Ok(Action::Atomic {
        shards,
        body,
        merge,
    })
}

/// The body of a transaction made only of single-shard steps and no WATCH:
/// each shard's steps as one group (see [`TxBody::Groups`]), the reply an
/// array of the steps' replies in queue order.
fn independent_steps(steps: Vec<Step>) -> Body {
    let mut requests = ShardGroups::default();
    for (db, work, _) in steps {
        if let Work::One(shard, req) = work {
            requests.push(shard.0, (Some(db), req));
        }
    }
    let (groups, order) = requests.split();
    TxBody::Groups(
        groups,
        Box::new(move |replies: Vec<Vec<Reply>>| Reply::Array(order.scatter(replies))),
    )
}

/// Run a transaction's steps in order, each in its own database, all at the
/// job's clock snapshot, with nothing interleaved; one reply per step.
///
/// Consecutive single-shard steps run as one batch: each shard gets its
/// steps in one operation and the shards run them at the same time (steps
/// on different shards touch different data, so only each shard's own
/// order matters). A multi-shard step runs alone, after everything before it.
fn run_steps(tx: &mut TxRun<'_>, steps: Vec<Step>) -> Vec<Reply> {
    let mut out = Vec::with_capacity(steps.len());
    let mut batch = ShardGroups::default();
    let flush = |tx: &mut TxRun<'_>, batch: &mut ShardGroups<_>, out: &mut Vec<Reply>| {
        if batch.is_empty() {
            return;
        }
        let (groups, order) = std::mem::take(batch).split();
        out.extend(order.scatter(tx.run_each(groups)));
    };
    for (db, work, timer) in steps {
        // A command over several shards runs alone: timed as a whole.
        match work {
            Work::One(shard, req) => batch.push(shard.0, (db, req)),
            Work::Chain(parts, merge, then) => {
                flush(tx, &mut batch, &mut out);
                let started = quanta::Instant::now();
                out.push(run_chain(tx, db, parts, merge, then));
                if let Some(t) = timer {
                    t.done(started.elapsed().as_nanos() as u64);
                }
            }
            Work::Atomic(_, body, merge) => {
                flush(tx, &mut batch, &mut out);
                let started = quanta::Instant::now();
                out.push(merge(vec![body.run(tx, db)]));
                if let Some(t) = timer {
                    t.done(started.elapsed().as_nanos() as u64);
                }
            }
        }
    }
    flush(tx, &mut batch, &mut out);
    out
}

/// A blocking pop (BZPOPMIN, BLPOP, ...) queued in MULTI whose keys span
/// shards: it runs in its non-blocking form, trying its keys in order
/// ([`crate::route::router::in_key_order`]). `None` for anything else.
fn pop_in_key_order(
    spec: &CommandSpec,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    merge: crate::cmd::FanMerge,
    argv: &[Bytes],
    shared: &crate::server::Shared,
) -> Option<Planned> {
    if merge != crate::cmd::FanMerge::Refuse {
        return None;
    }
    let keys = spec.key_indexes(argv);
    let first = shared.shard_of(argv.get(*keys.first()?)?);
    if keys.iter().all(|&k| shared.shard_of(&argv[k]) == first) {
        return None;
    }
    if let Err(e) = parse(argv) {
        return Some(Planned::Ready(Reply::Error(e)));
    }
    let (shards, body) = crate::route::router::in_key_order(spec, parse, argv, &keys, shared)?;
    let single: Merge = Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullArray));
    Some(Planned::Keyed(Work::Atomic(shards, body, single)))
}

/// The element for a queued argv that names no command (cannot happen: the
/// IO layer queues only known, non-empty commands; kept panic-free anyway).
fn not_a_command(argv: &[Bytes]) -> Reply {
    if argv.is_empty() {
        return Reply::Error(CmdError::msg("ERR empty command"));
    }
    Reply::Error(table::unknown_command(argv))
}

/// EXEC's array: each queued command's reply in queue order, step replies
/// (`step_replies`, in step order) slotted in where they belong.
/// Note each error in EXEC's `reply` as a failed call of its command (`rows`,
/// in queue order), as Redis counts the commands a transaction runs.
fn count_failed(rows: &[Option<usize>], reply: &Reply) {
    if let Reply::Array(items) = reply {
        for (row, item) in rows.iter().zip(items) {
            if let (Some(row), Some(e)) = (row, item.error_text()) {
                crate::server::note_failed(*row as u32, e.clone());
            }
        }
    }
}

fn reply_exec(outs: Vec<Out>, step_replies: Vec<Reply>) -> Reply {
    let mut step_replies: Vec<Option<Reply>> = step_replies.into_iter().map(Some).collect();
    Reply::Array(
        outs.into_iter()
            .map(|o| match o {
                Out::Ready(r) => r,
                Out::Step(i) => step_replies
                    .get_mut(i)
                    .and_then(Option::take)
                    .unwrap_or(Reply::NullBulk),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_exec_places_step_replies_in_queue_order() {
        let outs = vec![
            Out::Ready(Reply::simple("PONG")),
            Out::Step(0),
            Out::Step(1),
            Out::Ready(Reply::Int(7)),
            Out::Step(2),
        ];
        let got = reply_exec(outs, vec![Reply::Ok, Reply::Int(5), Reply::NullBulk]);
        assert_eq!(
            got,
            Reply::Array(vec![
                Reply::simple("PONG"),
                Reply::Ok,
                Reply::Int(5),
                Reply::Int(7),
                Reply::NullBulk
            ])
        );
    }
}
