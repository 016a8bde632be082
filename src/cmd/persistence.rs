//! Persistence commands: BGREWRITEAOF. The machinery lives in [`crate::aof`];
//! INFO's `persistence` section is rendered by [`super::info`].

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::ShardId;

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[CommandSpec {
    name: "BGREWRITEAOF",
    arity: 1,
    flags: Flags::ADMIN.with(Flags::NOSCRIPT),
    keys: Keys::None,
    acl: &["admin", "slow", "dangerous"],
    summary: "Asynchronously rewrites the append-only file to disk.",
    since: "1.0.0",
    group: "server",
    subcommands: &[],
    handler: Handler::Conn(bgrewriteaof),
}];

/// `BGREWRITEAOF`
///
/// Asks every shard to rewrite its append-only file from a copy of its data
/// (see [`crate::aof`]); new writes go to a fresh incr file meanwhile and the
/// manifest switches atomically when the base file is on disk. Works with
/// `appendonly no` too (it then writes a snapshot only).
///
/// # Reply
/// `+Background append only file rewriting started`.
/// # Errors
/// `ERR Background append only file rewriting already in progress` while any
/// shard is still rewriting; `ERR Can't rewrite append only file in
/// background: <strerror>` while a shard cannot write its AOF (a shard would
/// refuse to switch files with records still waiting for the old one, see
/// [`crate::aof::writer::ShardAof::start_rewrite`]).
/// # Source
/// `bgrewriteaofCommand`, redis/src/aof.c.
pub fn bgrewriteaof(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    if cx
        .shared
        .tunables
        .aof
        .rewrites_in_progress
        .load(Ordering::SeqCst)
        > 0
    {
        return Err(CmdError::msg(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    if cx.shared.tunables.aof.write_refusal().is_some() {
        let why = cx
            .shared
            .tunables
            .aof
            .last_error
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        return Err(CmdError::msg(format!(
            "ERR Can't rewrite append only file in background: {why}"
        )));
    }
    let parts = (0..cx.shared.shards.max(1))
        .map(|s| {
            (
                ShardId(s),
                on_shard(|db, _cx| {
                    db.aof.rewrite_requested = true;
                    Reply::Ok
                }),
            )
        })
        .collect();
    Ok(Action::FanOut {
        parts,
        merge: Box::new(|parts: Vec<Reply>| {
            crate::cmd::first_error(&parts).unwrap_or(Reply::simple(
                "Background append only file rewriting started",
            ))
        }),
    })
}
