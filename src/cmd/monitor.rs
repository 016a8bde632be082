//! MONITOR (see [`crate::monitor`] for the line format, how lines reach the
//! client, and what a monitor's own commands answer).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::{Action, CommandSpec, ConnCtx, Flags};
use crate::error::CmdError;
use crate::reply::Reply;

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[CommandSpec::conn(
    "MONITOR",
    1,
    Flags::ADMIN
        .with(Flags::NOSCRIPT)
        .with(Flags::LOADING)
        .with(Flags::STALE)
        .with(Flags::NO_MULTI),
    "server",
    &["admin", "slow", "dangerous"],
    "Listens for all requests received by the server in real-time.",
    "1.0.0",
    monitor_cmd,
)];

/// `MONITOR`
///
/// Puts the connection in MONITOR mode: it stays a client of its shard
/// thread and gets one line per command any client sends (see
/// [`crate::monitor::format_line`]) until it disconnects, sends QUIT, or
/// leaves the mode with RESET (`cmd::connection`).
///
/// # Reply
/// `+OK`, then the lines. A connection already monitoring gets no reply
/// at all (Redis ignores the command).
/// # Errors
/// `ERR Command not allowed inside a transaction` (MULTI; Redis refuses it
/// at EXEC instead).
/// # Source
/// `monitorCommand`, redis/src/replication.c.
fn monitor_cmd(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    if cx.conn.monitor.is_some() {
        return Ok(Reply::NoReply.into());
    }
    let thread = usize::from(cx.conn.shared.thread.load(Ordering::SeqCst));
    let Some(outbox) = cx.shared.threads.get(thread) else {
        return Err(CmdError::msg("ERR MONITOR is not available here"));
    };
    // Attached before `+OK` leaves: every command a client sends after the
    // monitor saw the reply is shown (lines wait in the channel until the
    // reply is written).
    cx.conn.monitor = Some(cx.shared.monitors.attach(cx.conn.id, outbox.clone()));
    cx.conn.shared.monitor.store(true, Ordering::Relaxed);
    Ok(Reply::Ok.into())
}
