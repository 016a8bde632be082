//! Connection and server commands that need no key: PING, ECHO, QUIT, SELECT.
//! They run on the IO thread.

use bytes::Bytes;

use crate::cmd::{Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::error::CmdError;
use crate::reply::Reply;

const fn conn_cmd(
    name: &'static str,
    arity: i16,
    flags: Flags,
    summary: &'static str,
    since: &'static str,
    group: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys: Keys::None,
        acl: &[],
        summary,
        since,
        group,
        subcommands: &[],
        handler: Handler::Conn(f),
    }
}

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    conn_cmd(
        "PING",
        -1,
        Flags::FAST,
        "Returns the server's liveliness response.",
        "1.0.0",
        "connection",
        ping,
    ),
    conn_cmd(
        "ECHO",
        2,
        Flags::FAST,
        "Returns the given string.",
        "1.0.0",
        "connection",
        echo,
    ),
    conn_cmd(
        "QUIT",
        -1,
        Flags::FAST.with(Flags::NO_AUTH).with(Flags::ALLOW_BUSY),
        "Closes the connection.",
        "1.0.0",
        "connection",
        quit,
    ),
    conn_cmd(
        "SELECT",
        2,
        Flags::FAST,
        "Changes the selected database.",
        "1.0.0",
        "connection",
        select,
    ),
];

/// `PING [message]`
///
/// # Reply
/// `+PONG`, or the message as a bulk string.
/// # Errors
/// `WrongArity` with more than one argument.
/// # Source
/// `pingCommand`, redis/src/server.c.
fn ping(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    match argv.len() {
        1 => Ok(Reply::simple("PONG").into()),
        2 => Ok(Reply::Bulk(argv[1].clone()).into()),
        _ => Err(CmdError::arity("ping")),
    }
}

/// `ECHO message` — replies with `message` as a bulk string.
fn echo(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Bulk(argv[1].clone()).into())
}

/// `QUIT` — replies `+OK` and closes the connection once the reply is written.
fn quit(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Action::Close(Reply::Ok))
}

/// `SELECT index`
///
/// # Errors
/// `ERR value is not an integer or out of range` for a non-integer;
/// `ERR DB index is out of range` outside `0..databases`.
fn select(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let idx = crate::cmd::args::int_arg(&argv[1])?;
    if idx < 0 || idx as usize >= cx.shared.databases {
        return Err(CmdError::DbIndexOutOfRange);
    }
    cx.conn.db = idx as usize;
    cx.conn
        .shared
        .db
        .store(idx as usize, std::sync::atomic::Ordering::Relaxed);
    Ok(Reply::Ok.into())
}
