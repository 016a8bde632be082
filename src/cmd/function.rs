//! Redis Functions: `FUNCTION FLUSH|LIST|STATS|LOAD|DELETE|KILL|HELP`.
//!
//! shardstream has no scripting engine yet, so the function library is always
//! empty: FLUSH succeeds, LIST and STATS describe an empty library, and LOAD
//! answers [`NO_ENGINE`]. Redis's test harness sends `FUNCTION FLUSH` before
//! every test block, so these must exist even without scripting.
//!
//! # Where a scripting engine slots in
//! Replies are shaped from [`libraries`] (what LIST walks) and [`ENGINES`]
//! (what STATS counts). A Lua issue replaces `libraries` with a registry
//! (the libraries loaded on this server, replicated to every shard thread the
//! way configuration is) and fills LOAD and DELETE; the parsing and reply
//! shapes here stay as they are.

use bytes::Bytes;

use crate::cmd::args::{self, is};
use crate::cmd::connection::{help_reply, run_subcommand};
use crate::cmd::glob::glob_match;
use crate::cmd::{Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::error::CmdError;
use crate::reply::Reply;

/// FUNCTION LOAD's answer while no scripting engine is built in.
pub const NO_ENGINE: &str =
    "ERR FUNCTION LOAD is not supported: shardstream has no scripting engine yet";

/// Scripting engines a library may name (`#!lua name=...`); STATS lists each.
pub const ENGINES: &[&str] = &["LUA"];

/// One loaded library, as FUNCTION LIST shows it.
pub struct Library {
    pub name: String,
    pub engine: &'static str,
    /// `(name, description, flags)` of each function.
    pub functions: Vec<(String, Option<String>, Vec<&'static str>)>,
    pub code: String,
}

/// The libraries loaded on this server: none until a scripting engine exists.
pub fn libraries() -> Vec<Library> {
    Vec::new()
}

#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec::conn(name, arity, flags, "scripting", acl, summary, "7.0.0", f)
}

const WRITE_NS: Flags = Flags::WRITE.with(Flags::NOSCRIPT);

/// Rows of `FUNCTION|<sub>`.
const SUBS: &[CommandSpec] = &[
    row(
        "FUNCTION|FLUSH",
        -2,
        WRITE_NS,
        &["write", "slow", "scripting"],
        "Deletes all libraries and functions.",
        flush,
    ),
    row(
        "FUNCTION|LIST",
        -2,
        Flags::NOSCRIPT,
        &["slow", "scripting"],
        "Returns information about all libraries.",
        list,
    ),
    row(
        "FUNCTION|STATS",
        2,
        Flags::NOSCRIPT.with(Flags::ALLOW_BUSY),
        &["slow", "scripting"],
        "Returns information about a function during execution.",
        stats,
    ),
    row(
        "FUNCTION|LOAD",
        -3,
        WRITE_NS.with(Flags::DENYOOM),
        &["write", "slow", "scripting"],
        "Creates a library.",
        load,
    ),
    row(
        "FUNCTION|DELETE",
        3,
        WRITE_NS,
        &["write", "slow", "scripting"],
        "Deletes a library and its functions.",
        delete,
    ),
    row(
        "FUNCTION|KILL",
        2,
        Flags::NOSCRIPT.with(Flags::ALLOW_BUSY),
        &["slow", "scripting"],
        "Terminates a function during execution.",
        kill,
    ),
    row(
        "FUNCTION|HELP",
        2,
        Flags::LOADING.with(Flags::STALE),
        &["slow", "scripting"],
        "Returns helpful text about the different subcommands.",
        help,
    ),
];

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[CommandSpec {
    name: "FUNCTION",
    arity: -2,
    flags: Flags::NONE,
    keys: Keys::None,
    acl: &["slow"],
    summary: "A container for function commands.",
    since: "7.0.0",
    group: "scripting",
    subcommands: SUBS,
    handler: Handler::Conn(run_subcommand),
}];

/// `FUNCTION FLUSH [ASYNC | SYNC]`
///
/// Deletes every library (there are none yet).
///
/// # Reply
/// `+OK`.
/// # Errors
/// The subcommand syntax error for more than one option;
/// `ERR FUNCTION FLUSH only supports SYNC|ASYNC option`.
/// # Source
/// `functionFlushCommand`, redis/src/functions.c.
fn flush(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    if argv.len() > 3 {
        return Err(CmdError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            args::text(&argv[1])
        )));
    }
    if argv.len() == 3 && !is(&argv[2], "SYNC") && !is(&argv[2], "ASYNC") {
        return Err(CmdError::msg(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    Ok(Reply::Ok.into())
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`
///
/// # Reply
/// Array of libraries, each a map of `library_name`, `engine`, `functions`
/// (each a map of `name`, `description`, `flags`) and with WITHCODE
/// `library_code`. Empty while no scripting engine exists.
/// # Errors
/// `ERR library name argument was not given`; `ERR Unknown argument <arg>`
/// (also for a repeated option, as Redis).
/// # Source
/// `functionListCommand`, redis/src/functions.c.
fn list(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let mut with_code = false;
    let mut pattern: Option<&Bytes> = None;
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        if !with_code && is(a, "WITHCODE") {
            with_code = true;
        } else if pattern.is_none() && is(a, "LIBRARYNAME") {
            i += 1;
            pattern = Some(
                argv.get(i)
                    .ok_or_else(|| CmdError::msg("ERR library name argument was not given"))?,
            );
        } else {
            return Err(CmdError::msg(format!(
                "ERR Unknown argument {}",
                args::text(a)
            )));
        }
        i += 1;
    }
    let libs = libraries()
        .into_iter()
        .filter(|l| pattern.is_none_or(|p| glob_match(p, l.name.as_bytes(), false)))
        .map(|l| reply_library(l, with_code))
        .collect();
    Ok(Reply::Array(libs).into())
}

/// One library as FUNCTION LIST shows it.
fn reply_library(l: Library, with_code: bool) -> Reply {
    let functions = l
        .functions
        .into_iter()
        .map(|(name, description, flags)| {
            Reply::Map(vec![
                (Reply::bulk_copy("name"), Reply::bulk(name)),
                (
                    Reply::bulk_copy("description"),
                    description.map_or(Reply::NullBulk, Reply::bulk),
                ),
                (
                    Reply::bulk_copy("flags"),
                    Reply::Set(flags.into_iter().map(Reply::simple).collect()),
                ),
            ])
        })
        .collect();
    let mut fields = vec![
        (Reply::bulk_copy("library_name"), Reply::bulk(l.name)),
        (Reply::bulk_copy("engine"), Reply::bulk_copy(l.engine)),
        (Reply::bulk_copy("functions"), Reply::Array(functions)),
    ];
    if with_code {
        fields.push((Reply::bulk_copy("library_code"), Reply::bulk(l.code)));
    }
    Reply::Map(fields)
}

/// `FUNCTION STATS`
///
/// # Reply
/// Map: `running_script` (null: nothing runs) and `engines`, a map of engine
/// name to `libraries_count` / `functions_count`.
/// # Source
/// `functionStatsCommand`, redis/src/functions.c.
fn stats(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let libs = libraries();
    let engines = ENGINES
        .iter()
        .map(|e| {
            let mine = libs.iter().filter(|l| l.engine == *e);
            let (n_libs, n_fns) = mine.fold((0, 0), |(l, f), lib| (l + 1, f + lib.functions.len()));
            (
                Reply::bulk_copy(e),
                Reply::Map(vec![
                    (Reply::bulk_copy("libraries_count"), Reply::Int(n_libs)),
                    (
                        Reply::bulk_copy("functions_count"),
                        Reply::Int(n_fns as i64),
                    ),
                ]),
            )
        })
        .collect();
    Ok(Reply::Map(vec![
        (Reply::bulk_copy("running_script"), Reply::NullBulk),
        (Reply::bulk_copy("engines"), Reply::Map(engines)),
    ])
    .into())
}

/// `FUNCTION LOAD [REPLACE] function-code`
///
/// # Errors
/// `ERR Unknown option given: <opt>`, then [`NO_ENGINE`] (no library can be
/// loaded until a scripting engine exists).
/// # Source
/// `functionLoadCommand`, redis/src/functions.c.
fn load(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    for a in &argv[2..argv.len() - 1] {
        if !is(a, "REPLACE") {
            return Err(CmdError::msg(format!(
                "ERR Unknown option given: {}",
                args::text(a)
            )));
        }
    }
    Err(CmdError::msg(NO_ENGINE))
}

/// `FUNCTION DELETE library-name`
///
/// # Errors
/// `ERR Library not found` (always, while no library can exist).
/// # Source
/// `functionDeleteCommand`, redis/src/functions.c.
fn delete(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Err(CmdError::msg("ERR Library not found"))
}

/// `FUNCTION KILL`
///
/// # Errors
/// `NOTBUSY No scripts in execution right now.` (nothing ever runs).
/// # Source
/// `functionKillCommand` → `scriptKill`, redis/src/script.c.
fn kill(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Err(CmdError::msg("NOTBUSY No scripts in execution right now."))
}

/// `FUNCTION HELP`
fn help(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(help_reply(&[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library (not supported: no scripting engine yet).",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries.",
        "STATS",
        "    Return information about the current function running.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "HELP",
        "    Print this help.",
    ])
    .into())
}
