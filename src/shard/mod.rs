//! Shard threads: each owns one [`ShardDb`](db::ShardDb) and serves its inbox.
//!
//! A shard thread is pinned to a CPU (core_affinity), creates its `ShardDb` on
//! that thread (the type is `!Send`), and loops: take a batch from the inbox,
//! snapshot the clock once, apply every request in order, and send the
//! replies back to each IO thread as one message. The inbox is a crossbeam
//! channel: a send only costs a futex wake when the shard is actually parked
//! in `recv`, so a busy shard is never woken by syscalls.

pub mod blocking;
pub mod db;
pub mod msg;

use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::cmd::ExecCtx;
use crate::route::slot::ShardId;
use db::ShardDb;
use msg::{IoMsg, IoOutbox, Job, ShardMsg};

/// Wall clock in ms since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How often the shard runs active expiry when idle, ms (Redis: `hz` 10).
const EXPIRE_PERIOD_MS: u64 = 100;
/// Most keys one active-expiry pass removes before returning to the inbox.
const EXPIRE_BUDGET: usize = 1000;

/// The `Send` seed of a shard: everything needed to start it on its own thread.
pub struct ShardSeed {
    pub id: ShardId,
    pub shards: u16,
    pub databases: usize,
    pub core: Option<core_affinity::CoreId>,
    pub inbox: Receiver<ShardMsg>,
    pub outboxes: Vec<IoOutbox>,
    pub tunables: std::sync::Arc<crate::config::Tunables>,
    pub slot_map: std::sync::Arc<crate::route::slot::SlotMap>,
}

/// Start a shard thread; it runs until [`ShardMsg::Shutdown`] or until every sender is gone.
pub fn spawn_shard(seed: ShardSeed) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name(format!("shard-{}", seed.id.0))
        .spawn(move || {
            if let Some(core) = seed.core {
                core_affinity::set_for_current(core);
            }
            let mut db = ShardDb::new(seed.id, seed.shards, seed.databases);
            db.tunables = seed.tunables;
            db.slot_map = seed.slot_map;
            run_shard(&mut db, &seed.inbox, &seed.outboxes);
        })
}

/// The shard loop.
fn run_shard(db: &mut ShardDb, inbox: &Receiver<ShardMsg>, outboxes: &[IoOutbox]) {
    let mut out: Vec<Vec<_>> = outboxes.iter().map(|_| Vec::new()).collect();
    let mut next_expire_ms = now_ms() + EXPIRE_PERIOD_MS;
    loop {
        let msg = match inbox.try_recv() {
            Ok(m) => Some(m),
            Err(_) => {
                let now = now_ms();
                let wait = next_expire_ms.saturating_sub(now);
                match inbox.recv_timeout(Duration::from_millis(wait.max(1))) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        };
        match msg {
            Some(ShardMsg::Batch(jobs)) => {
                run_batch(db, jobs, &mut out);
                // Take whatever else is already queued before replying, so one
                // reply message covers as much work as possible.
                let mut stop = false;
                for _ in 0..16 {
                    match inbox.try_recv() {
                        Ok(ShardMsg::Batch(jobs)) => run_batch(db, jobs, &mut out),
                        Ok(ShardMsg::Shutdown) => {
                            stop = true;
                            break;
                        }
                        Err(_) => break,
                    }
                }
                flush(&mut out, outboxes);
                if stop {
                    return;
                }
            }
            Some(ShardMsg::Shutdown) => return,
            None => {}
        }
        let now = now_ms();
        if now >= next_expire_ms {
            db.active_expire(now, EXPIRE_BUDGET);
            db.blocking.mark_polling_ready();
            if db.blocking.has_ready() {
                serve_and_queue(db, now, &mut out);
                flush(&mut out, outboxes);
            }
            db.blocking.sweep();
            next_expire_ms = now + EXPIRE_PERIOD_MS;
        }
    }
}

fn run_batch(
    db: &mut ShardDb,
    jobs: Vec<Job>,
    out: &mut [Vec<(msg::ReplyTo, crate::reply::Reply)>],
) {
    let now = now_ms();
    for job in jobs {
        let cx = ExecCtx {
            db: usize::from(job.db),
            now_ms: now,
            reply_to: job.reply_to,
        };
        let reply = job.req.apply(db, &cx);
        db.stats.ops += 1;
        if matches!(reply, crate::reply::Reply::NoReply) {
            continue;
        }
        if let Some(o) = out.get_mut(usize::from(job.reply_to.io)) {
            o.push((job.reply_to, reply));
        }
    }
    if db.blocking.has_ready() {
        serve_and_queue(db, now, out);
    }
}

/// Serve the waiters of ready keys and queue their replies per IO thread.
fn serve_and_queue(
    db: &mut ShardDb,
    now: u64,
    out: &mut [Vec<(msg::ReplyTo, crate::reply::Reply)>],
) {
    let mut served = Vec::new();
    blocking::serve_ready(db, now, &mut served);
    for (to, reply) in served {
        if let Some(o) = out.get_mut(usize::from(to.io)) {
            o.push((to, reply));
        }
    }
}

fn flush(out: &mut [Vec<(msg::ReplyTo, crate::reply::Reply)>], outboxes: &[IoOutbox]) {
    for (i, replies) in out.iter_mut().enumerate() {
        if !replies.is_empty() {
            outboxes[i].send(IoMsg::Replies(std::mem::take(replies)));
        }
    }
}
