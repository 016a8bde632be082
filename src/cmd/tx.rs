//! Transactions: MULTI, EXEC, DISCARD.
//!
//! Queueing happens in the IO layer (`io::dispatch`): inside MULTI every
//! command except MULTI/EXEC/DISCARD/QUIT/RESET is checked (known command,
//! arity, subcommand) and queued with `+QUEUED`; a failed check marks the
//! transaction so EXEC answers EXECABORT.
//!
//! EXEC runs the queue atomically on **one** shard: every keyed command, and
//! the shard work of connection commands (e.g. `CLUSTER COUNTKEYSINSLOT`), must
//! land on the same shard; they then travel as a single shard request that
//! applies them in order, with nothing interleaved. Connection commands
//! (PING, ECHO, SELECT, ...) run on the connection's thread at EXEC time, in queue order,
//! so a queued SELECT changes the database of the keyed commands after it.
//!
//! A transaction whose work spans shards is refused as a whole, before anything
//! runs, with [`CROSS_SHARD`]; the MULTI state is reset either way.
//!
//! WATCH registers each key on the shard that owns it (per-key versions, see
//! [`crate::shard::watch`]); EXEC checks them on the transaction's shard in
//! the same request that runs the queue, so nothing can write in between.
//! Watches on other shards are checked by a step just before (the
//! transaction's shard is told the result over a channel): a write there
//! between the two steps is not seen — the window the cross-shard
//! transaction design closes.

use bytes::Bytes;

use crate::cmd::table::{self, Handler};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, ExecCtx, Flags, Merge, ShardReq};
use crate::error::CmdError;
use crate::io::conn::Session;
use crate::reply::Reply;
use crate::route::router::{route, route_keyed, Routed};
use crate::route::slot::ShardId;

/// EXEC's error when the queued commands need more than one shard.
pub const CROSS_SHARD: &str = "ERR MULTI/EXEC spanning more than one shard is not supported: keep the keys of a transaction on one shard with a {hash tag}";

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
        Flags::NOSCRIPT.with(Flags::LOADING).with(Flags::STALE),
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

/// A request that forgets every watch of the connection it runs for.
pub fn unwatch_req() -> ShardReq {
    on_shard(|db, cx| {
        db.watch.unwatch_all(cx.reply_to.conn);
        Reply::Ok
    })
}

/// Forget the session's watches on every shard holding some; `reply` is
/// the answer once they are gone (or at once when there are none).
fn unwatch_then(session: &mut Session, reply: Reply) -> Action {
    let shards = std::mem::take(&mut session.watching);
    if shards.is_empty() {
        return Action::Reply(reply);
    }
    Action::FanOut {
        parts: shards.into_iter().map(|s| (s, unwatch_req())).collect(),
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
    session.multi_failed = false;
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
    cx.conn.multi_failed = false;
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
    /// The reply of shard step `n`.
    Step(usize),
    /// Shard steps `first..first + n` merged by a connection command's merge.
    Fan {
        first: usize,
        n: usize,
        merge: Merge,
    },
}

/// A queued command after the routing pass, before connection commands run.
enum Planned {
    Ready(Reply),
    Keyed(ShardReq),
    Conn,
}

/// `EXEC`
///
/// Runs the queued commands atomically and leaves MULTI state.
///
/// # Reply
/// Array with one reply per queued command, in order (an empty array for an
/// empty transaction). Errors raised while running a command — including
/// syntax errors, which shardstream detects when the command is parsed at
/// EXEC time, as Redis does inside its command procs — are error elements;
/// the other commands still run.
/// # Errors
/// `ERR EXEC without MULTI`; `EXECABORT Transaction discarded because of
/// previous errors.` when a command failed to queue; [`CROSS_SHARD`] when the
/// commands need more than one shard (nothing runs).
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

    // Pass 1: route keyed commands (pure: parse + shard), find the shard.
    let mut tx_shard: Option<ShardId> = None;
    let mut planned = Vec::with_capacity(queue.len());
    for argv in &queue {
        let Some(spec) = argv.first().and_then(|name| table::lookup(name)) else {
            planned.push(Planned::Ready(not_a_command(argv)));
            continue;
        };
        // Inside a transaction a blocking read runs in its non-blocking form, as in Redis.
        let (parse, merge) = match spec.handler {
            Handler::Keyed { parse, merge } | Handler::Blocking { parse, merge, .. } => {
                (parse, merge)
            }
            Handler::Conn(_) => {
                planned.push(Planned::Conn);
                continue;
            }
        };
        let keyless = spec.key_indexes(argv).is_empty();
        match route_keyed(spec, parse, merge, None, argv, shared) {
            Routed::One(shard, req) => {
                if !keyless && !claim(&mut tx_shard, shard) {
                    return Err(CmdError::msg(CROSS_SHARD));
                }
                planned.push(Planned::Keyed(req));
            }
            Routed::Fan(..) | Routed::Block(_) => return Err(CmdError::msg(CROSS_SHARD)),
            Routed::Reply(r) | Routed::Close(r) => planned.push(Planned::Ready(r)),
            Routed::Drop => planned.push(Planned::Ready(Reply::Error(CmdError::msg(NOT_IN_TX)))),
        }
    }

    // Pass 2: in queue order, run connection commands here and record each
    // keyed command's database (a queued SELECT changes it for what follows).
    let saved = (cx.conn.db, cx.conn.resp3, cx.conn.readonly);
    let mut steps: Vec<(usize, ShardReq)> = Vec::new();
    let mut outs = Vec::with_capacity(queue.len());
    for (argv, plan) in queue.iter().zip(planned) {
        match plan {
            Planned::Ready(r) => outs.push(Out::Ready(r)),
            Planned::Keyed(req) => {
                outs.push(Out::Step(steps.len()));
                steps.push((cx.conn.db, req));
            }
            Planned::Conn => {
                let Some(spec) = argv.first().and_then(|name| table::lookup(name)) else {
                    outs.push(Out::Ready(not_a_command(argv)));
                    continue;
                };
                match route(spec, argv, cx.conn, shared) {
                    Routed::Reply(r) | Routed::Close(r) => outs.push(Out::Ready(r)),
                    Routed::Drop => outs.push(Out::Ready(Reply::Error(CmdError::msg(NOT_IN_TX)))),
                    Routed::One(shard, req) => {
                        if !claim(&mut tx_shard, shard) {
                            restore(cx.conn, saved);
                            return Err(CmdError::msg(CROSS_SHARD));
                        }
                        outs.push(Out::Step(steps.len()));
                        steps.push((cx.conn.db, req));
                    }
                    // Steps that follow one another (a cross-shard RENAME)
                    // cannot run inside one shard's EXEC.
                    Routed::Block(_) | Routed::Fan(_, _, Some(_)) => {
                        restore(cx.conn, saved);
                        return Err(CmdError::msg(CROSS_SHARD));
                    }
                    Routed::Fan(parts, merge, _) => {
                        if !parts.iter().all(|(s, _)| claim(&mut tx_shard, *s)) {
                            restore(cx.conn, saved);
                            return Err(CmdError::msg(CROSS_SHARD));
                        }
                        let first = steps.len();
                        let n = parts.len();
                        let db = cx.conn.db;
                        steps.extend(parts.into_iter().map(|(_, req)| (db, req)));
                        outs.push(Out::Fan { first, n, merge });
                    }
                }
            }
        }
    }
    for argv in &queue {
        if let Some(spec) = argv.first().and_then(|name| table::lookup(name)) {
            shared.count_call(spec.name, false, false);
        }
    }

    if steps.is_empty() && watching.is_empty() {
        return Ok(reply_exec(outs, Vec::new()).into());
    }
    let shard = tx_shard.or(watching.first().copied()).unwrap_or(ShardId(0));
    // Watches on other shards are checked first; their verdicts reach the
    // transaction's shard over this channel.
    let others: Vec<ShardId> = watching.iter().copied().filter(|s| *s != shard).collect();
    let (dirty_tx, dirty_rx) = crossbeam_channel::unbounded::<bool>();
    let pre: Vec<(ShardId, ShardReq)> = others
        .iter()
        .map(|&s| {
            let dirty_tx = dirty_tx.clone();
            let req = on_shard(move |db, cx| {
                let _ = dirty_tx.send(db.take_watch_dirty(cx.reply_to.conn, cx.now_ms));
                Reply::Ok
            });
            (s, req)
        })
        .collect();
    drop(dirty_tx);
    let req = on_shard(move |db, cx| {
        let mine = db.take_watch_dirty(cx.reply_to.conn, cx.now_ms);
        let theirs = dirty_rx.try_iter().any(|d| d);
        if mine || theirs {
            return Reply::NullArray;
        }
        Reply::Array(apply_exec(db, cx, steps))
    });
    let merge: Merge = Box::new(move |parts: Vec<Reply>| match parts.into_iter().next() {
        Some(Reply::Array(replies)) => reply_exec(outs, replies),
        Some(other) => other,
        None => Reply::NullArray,
    });
    if pre.is_empty() {
        return Ok(Action::FanOut {
            parts: vec![(shard, req)],
            merge,
        });
    }
    Ok(Action::FanOutThen {
        parts: pre,
        merge: Box::new(crate::cmd::merge_ok),
        then: crate::io::conn::Then::Fan {
            parts: vec![(shard, req)],
            merge,
            then: None,
        },
    })
}

/// The element for a queued argv that names no command (cannot happen: the
/// IO layer queues only known, non-empty commands; kept panic-free anyway).
fn not_a_command(argv: &[Bytes]) -> Reply {
    if argv.is_empty() {
        return Reply::Error(CmdError::msg("ERR empty command"));
    }
    Reply::Error(table::unknown_command(argv))
}

/// Pin the transaction to `shard`; false when it is already pinned elsewhere.
fn claim(tx_shard: &mut Option<ShardId>, shard: ShardId) -> bool {
    match tx_shard {
        Some(s) => *s == shard,
        None => {
            *tx_shard = Some(shard);
            true
        }
    }
}

/// Undo what queued connection commands changed in the session (SELECT,
/// HELLO's protocol, READONLY) when EXEC is refused after they ran.
fn restore(session: &mut Session, (db, resp3, readonly): (usize, bool, bool)) {
    use std::sync::atomic::Ordering;
    session.db = db;
    session.resp3 = resp3;
    session.readonly = readonly;
    session.shared.db.store(db, Ordering::Relaxed);
    session
        .shared
        .resp
        .store(if resp3 { 3 } else { 2 }, Ordering::Relaxed);
}

/// Shard side of EXEC: apply every step in order, each in its own database,
/// all at the batch's clock snapshot, with nothing interleaved.
fn apply_exec(
    db: &mut crate::shard::db::ShardDb,
    cx: &ExecCtx,
    steps: Vec<(usize, ShardReq)>,
) -> Vec<Reply> {
    steps
        .into_iter()
        .map(|(index, req)| {
            let step_cx = ExecCtx { db: index, ..*cx };
            req.apply(db, &step_cx)
        })
        .collect()
}

/// EXEC's array: each queued command's reply in queue order, shard replies
/// (`step_replies`, in step order) slotted in where they belong.
fn reply_exec(outs: Vec<Out>, step_replies: Vec<Reply>) -> Reply {
    let mut step_replies: Vec<Option<Reply>> = step_replies.into_iter().map(Some).collect();
    let mut take = |i: usize| {
        step_replies
            .get_mut(i)
            .and_then(Option::take)
            .unwrap_or(Reply::NullBulk)
    };
    Reply::Array(
        outs.into_iter()
            .map(|o| match o {
                Out::Ready(r) => r,
                Out::Step(i) => take(i),
                Out::Fan { first, n, merge } => merge((first..first + n).map(&mut take).collect()),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_exec_places_shard_replies_in_queue_order() {
        let outs = vec![
            Out::Ready(Reply::simple("PONG")),
            Out::Step(0),
            Out::Fan {
                first: 1,
                n: 2,
                merge: Box::new(crate::cmd::merge_sum),
            },
            Out::Step(3),
        ];
        let got = reply_exec(
            outs,
            vec![Reply::Ok, Reply::Int(2), Reply::Int(3), Reply::NullBulk],
        );
        assert_eq!(
            got,
            Reply::Array(vec![
                Reply::simple("PONG"),
                Reply::Ok,
                Reply::Int(5),
                Reply::NullBulk
            ])
        );
    }

    #[test]
    fn claim_pins_one_shard() {
        let mut s = None;
        assert!(claim(&mut s, ShardId(2)));
        assert!(claim(&mut s, ShardId(2)));
        assert!(!claim(&mut s, ShardId(1)));
    }
}
