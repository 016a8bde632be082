//! Everything that crosses into or out of a shard thread.
//!
//! Messages carry owned data only (never references into shard data) and say
//! where their reply goes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::cmd::ShardReq;
use crate::reply::Reply;

/// Which IO thread owns the connection, and the request's place in its pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyTo {
    /// Index of the owning IO thread.
    pub io: u16,
    /// Connection id (`CLIENT ID`).
    pub conn: u64,
    /// Position of the request in the connection's pipeline.
    pub seq: u64,
    /// Part index when the request was fanned out over several shards.
    pub part: u16,
}

/// One request for a shard.
pub struct Job {
    pub req: ShardReq,
    /// Selected database of the connection when it sent the request.
    pub db: u16,
    pub reply_to: ReplyTo,
}

/// A message to a shard's inbox.
pub enum ShardMsg {
    /// Requests collected by one IO thread in one poll iteration, in order.
    /// Never dropped: each connection waits on its `reply_to.seq`.
    Batch(Vec<Job>),
    /// Drain nothing more; exit the shard loop.
    Shutdown,
}

/// A message to an IO thread.
pub enum IoMsg {
    /// Replies produced by one shard batch. Never dropped while the connection lives.
    Replies(Vec<(ReplyTo, Reply)>),
}

/// The sending side of an IO thread's reply channel, with its wake-up path.
///
/// The IO thread sets `parked` just before it sleeps in `poll`; a sender wakes
/// it (an eventfd write) only when that flag was set, so busy IO threads never
/// pay for wake-up syscalls.
#[derive(Clone)]
pub struct IoOutbox {
    pub tx: Sender<IoMsg>,
    pub waker: Arc<mio::Waker>,
    pub parked: Arc<AtomicBool>,
}

impl IoOutbox {
    /// Send and wake the IO thread if it is parked.
    pub fn send(&self, msg: IoMsg) {
        if self.tx.send(msg).is_ok() && self.parked.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }
}
