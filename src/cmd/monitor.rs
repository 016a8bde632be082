//! MONITOR (see [`crate::monitor`] for the line format and how lines reach
//! the client).

use bytes::Bytes;

use crate::cmd::{Action, CommandSpec, ConnCtx, Flags};
use crate::error::CmdError;

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
/// # Reply
/// `+OK`, then one line per command any client sends (see
/// [`crate::monitor::format_line`]) until the client disconnects or sends
/// QUIT / RESET.
/// # Errors
/// `ERR Command not allowed inside a transaction` (MULTI; Redis refuses it
/// at EXEC instead); `ERR MONITOR failed: <os error>` if the socket cannot be
/// handed to the monitor's writer.
/// # Source
/// `monitorCommand`, redis/src/replication.c.
fn monitor_cmd(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let client = &cx.conn.shared;
    crate::monitor::attach(&cx.shared.monitors, client.fd, &client.addr)
        .map_err(|e| CmdError::msg(format!("ERR MONITOR failed: {e}")))?;
    // The writer thread owns the socket now (its own descriptor); this
    // thread forgets the connection without replying.
    Ok(Action::Drop)
}
