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
    /// Data directory (append-only files).
    pub dir: std::path::PathBuf,
    /// Told once the shard has loaded its AOF and serves, or why it cannot.
    pub ready: crossbeam_channel::Sender<Result<crate::aof::load::LoadStats, String>>,
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
            db.tunables = seed.tunables.clone();
            db.slot_map = seed.slot_map.clone();
            let mut aof = match load_aof(&mut db, &seed) {
                Ok((aof, stats)) => {
                    let _ = seed.ready.send(Ok(stats));
                    aof
                }
                Err(e) => {
                    let _ = seed.ready.send(Err(e));
                    return;
                }
            };
            run_shard(&mut db, &mut aof, &seed.inbox, &seed.outboxes);
            aof.shutdown(&mut db);
        })
}

/// Debug builds only: `SHARDSTREAM_DEBUG_PANIC_AFTER_OPS=<n>` makes a shard
/// panic when it has applied `n` commands, so tests can prove that a
/// panicking shard ends the process (exit 70, clients see EOF) instead of
/// hanging its clients. Like Redis's `DEBUG PANIC`; always off in release
/// builds (the variable is not even read there).
fn debug_panic_after_ops() -> Option<u64> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var("SHARDSTREAM_DEBUG_PANIC_AFTER_OPS")
        .ok()?
        .parse()
        .ok()
}

/// Load this shard's append-only files (when `appendonly yes`) and open its
/// writer. Runs on the shard thread, so shards load in parallel.
fn load_aof(
    db: &mut ShardDb,
    seed: &ShardSeed,
) -> Result<(crate::aof::writer::ShardAof, crate::aof::load::LoadStats), String> {
    use crate::aof::{load, manifest::Manifest, writer::ShardAof};
    let manifest = Manifest::read(&seed.dir, seed.id.0)?;
    let mut aof = ShardAof::new(
        seed.id.0,
        seed.shards,
        seed.dir.clone(),
        seed.tunables.clone(),
        manifest.clone(),
    );
    let mut stats = load::LoadStats::default();
    if seed.tunables.aof.is_enabled() {
        if let Some(m) = &manifest {
            stats = load::load_shard(db, &seed.dir, m)?;
            db.stats = Default::default();
        }
        aof.open(&mut db.aof).map_err(|e| {
            format!(
                "cannot open the append only file in {}: {e}",
                seed.dir.display()
            )
        })?;
    }
    Ok((aof, stats))
}

/// The shard loop.
///
/// Group commit: the effects of every batch run in one round are written
/// (and under `appendfsync always` fdatasynced) once, before the round's
/// replies are released; if that fails, the replies of the commands that
/// wrote are replaced by `-MISCONF` errors.
fn run_shard(
    db: &mut ShardDb,
    aof: &mut crate::aof::writer::ShardAof,
    inbox: &Receiver<ShardMsg>,
    outboxes: &[IoOutbox],
) {
    let mut out: Vec<Vec<_>> = outboxes.iter().map(|_| Vec::new()).collect();
    // Replies (io thread, index in `out`) whose commands recorded AOF effects this round.
    let mut logged: Vec<(usize, usize)> = Vec::new();
    let mut next_expire_ms = now_ms() + EXPIRE_PERIOD_MS;
    let panic_after = debug_panic_after_ops();
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
                run_batch(db, jobs, &mut out, &mut logged, panic_after);
                // Take whatever else is already queued before replying, so one
                // reply message covers as much work as possible.
                let mut stop = false;
                for _ in 0..16 {
                    match inbox.try_recv() {
                        Ok(ShardMsg::Batch(jobs)) => {
                            run_batch(db, jobs, &mut out, &mut logged, panic_after)
                        }
                        Ok(ShardMsg::Shutdown) => {
                            stop = true;
                            break;
                        }
                        Err(_) => break,
                    }
                }
                commit_round(db, aof, &mut out, &mut logged);
                if db.aof.rewrite_requested {
                    // BGREWRITEAOF: started (files switched, data copied)
                    // before its reply, so INFO shows it in progress.
                    aof.tick(db, now_ms());
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
            db.blocking.sweep();
            // Expired streams and CLAIM readers waiting for entries to idle
            // are served on the timer too.
            db.blocking.mark_polling_ready();
            if db.blocking.has_ready() {
                serve_and_queue(db, now, &mut out, &mut logged);
            }
            commit_round(db, aof, &mut out, &mut logged);
            flush(&mut out, outboxes);
            aof.tick(db, now);
            next_expire_ms = now + EXPIRE_PERIOD_MS;
        }
    }
}

fn run_batch(
    db: &mut ShardDb,
    jobs: Vec<Job>,
    out: &mut [Vec<(msg::ReplyTo, crate::reply::Reply)>],
    logged: &mut Vec<(usize, usize)>,
    panic_after: Option<u64>,
) {
    let now = now_ms();
    for job in jobs {
        let cx = ExecCtx {
            db: usize::from(job.db),
            now_ms: now,
            reply_to: job.reply_to,
        };
        let before = db.aof.len();
        let reply = job.req.apply(db, &cx);
        db.stats.ops += 1;
        if panic_after.is_some_and(|n| db.stats.ops >= n) {
            panic!(
                "SHARDSTREAM_DEBUG_PANIC_AFTER_OPS reached on shard {}",
                db.id.0
            );
        }
        if matches!(reply, crate::reply::Reply::NoReply) {
            continue;
        }
        let io = usize::from(job.reply_to.io);
        if let Some(o) = out.get_mut(io) {
            if db.aof.len() != before {
                logged.push((io, o.len()));
            }
            o.push((job.reply_to, reply));
        }
    }
    if db.blocking.has_ready() {
        serve_and_queue(db, now, out, logged);
    }
}

/// Serve the waiters of ready keys and queue their replies per IO thread,
/// noting which of them recorded AOF effects.
fn serve_and_queue(
    db: &mut ShardDb,
    now: u64,
    out: &mut [Vec<(msg::ReplyTo, crate::reply::Reply)>],
    logged: &mut Vec<(usize, usize)>,
) {
    let mut served = Vec::new();
    let before = db.aof.len();
    blocking::serve_ready(db, now, &mut served);
    let wrote = db.aof.len() != before;
    for (to, reply) in served {
        let io = usize::from(to.io);
        if let Some(o) = out.get_mut(io) {
            if wrote {
                logged.push((io, o.len()));
            }
            o.push((to, reply));
        }
    }
}

/// Write (and under `always`, fdatasync) this round's AOF effects; if that
/// fails, the replies of the commands that wrote become `-MISCONF` errors.
fn commit_round(
    db: &mut ShardDb,
    aof: &mut crate::aof::writer::ShardAof,
    out: &mut [Vec<(msg::ReplyTo, crate::reply::Reply)>],
    logged: &mut Vec<(usize, usize)>,
) {
    // The failed-write contract (see `CommitError::act`): under `always` the
    // process exits here, before any reply of the round is released; under
    // `everysec`/`no` the round's commands are applied, their replies stand
    // and their bytes are retried, while later writes get -MISCONF before
    // they run. Never "error, but applied".
    if let Err(e) = aof.commit(&mut db.aof) {
        e.act();
    }
    let _ = out;
    logged.clear();
}

fn flush(out: &mut [Vec<(msg::ReplyTo, crate::reply::Reply)>], outboxes: &[IoOutbox]) {
    for (i, replies) in out.iter_mut().enumerate() {
        if !replies.is_empty() {
            outboxes[i].send(IoMsg::Replies(std::mem::take(replies)));
        }
    }
}
