//! Redis Functions: `FUNCTION LOAD|LIST|STATS|DELETE|FLUSH|DUMP|RESTORE|KILL|HELP`
//! and `FCALL`/`FCALL_RO`.
//!
//! Libraries live in the server-wide registry ([`crate::script::Registry`]);
//! each shard thread compiles a library the first time it runs one of its
//! functions. FUNCTION LOAD runs the library body on the connection's
//! thread (to learn what it registers, and to report errors), then commits
//! it on shard 0, which also logs it in its append-only file: functions
//! persist as Redis persists them (`FUNCTION LOAD` records, rewritten with
//! the shard's data). LOAD, DELETE, FLUSH and RESTORE all commit on shard 0,
//! so the registry and the AOF see them in one order.

use std::sync::Arc;

use bytes::Bytes;

use crate::cmd::args::{self, is};
use crate::cmd::connection::{help_reply, run_subcommand};
use crate::cmd::glob::glob_match;
use crate::cmd::scripting::{route_script, split_keys, ScriptCall, Target};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::ShardId;
use crate::script::lua::with_engine;
use crate::script::{FunctionMeta, Library, Registry};
use crate::shard::db::ShardDb;

/// Scripting engines a library may name (`#!lua name=...`); STATS lists each.
pub const ENGINES: &[&str] = &["LUA"];

/// The shard that commits library changes and keeps them in its AOF.
const FUNCTIONS_SHARD: ShardId = ShardId(0);

/// The loaded libraries, by name.
pub fn libraries(registry: &Registry) -> Vec<Arc<Library>> {
    registry.libraries().by_name.values().cloned().collect()
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
        WRITE_NS.with(Flags::FUNCTION_REGISTRY),
        &["write", "slow", "scripting"],
        "Deletes all libraries and functions.",
        flush,
    ),
    row(
        "FUNCTION|LIST",
        -2,
        Flags::NOSCRIPT.with(Flags::FUNCTION_REGISTRY),
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
        WRITE_NS.with(Flags::DENYOOM).with(Flags::FUNCTION_REGISTRY),
        &["write", "slow", "scripting"],
        "Creates a library.",
        load,
    ),
    row(
        "FUNCTION|DELETE",
        3,
        WRITE_NS.with(Flags::FUNCTION_REGISTRY),
        &["write", "slow", "scripting"],
        "Deletes a library and its functions.",
        delete,
    ),
    row(
        "FUNCTION|DUMP",
        2,
        Flags::NOSCRIPT.with(Flags::FUNCTION_REGISTRY),
        &["slow", "scripting"],
        "Dumps all libraries into a serialized binary payload.",
        dump,
    ),
    row(
        "FUNCTION|RESTORE",
        -3,
        WRITE_NS.with(Flags::DENYOOM).with(Flags::FUNCTION_REGISTRY),
        &["write", "slow", "scripting"],
        "Restores all libraries from a payload.",
        restore,
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

/// An FCALL row: `FCALL function numkeys [key ...] [arg ...]` (the same
/// shape as EVAL's).
const fn fcall_row(
    name: &'static str,
    flags: Flags,
    summary: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    super::scripting::eval_row(name, flags, summary, "7.0.0", f)
}

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
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
    },
    fcall_row(
        "FCALL",
        Flags::NOSCRIPT
            .with(Flags::FUNCTION_REGISTRY)
            .with(Flags::SKIP_MONITOR)
            .with(Flags::STALE)
            .with(Flags::MAY_REPLICATE),
        "Invokes a function.",
        fcall,
    ),
    fcall_row(
        "FCALL_RO",
        Flags::NOSCRIPT
            .with(Flags::FUNCTION_REGISTRY)
            .with(Flags::SKIP_MONITOR)
            .with(Flags::STALE)
            .with(Flags::READONLY),
        "Invokes a read-only function.",
        fcall_ro,
    ),
];

/// The request that commits a library change on [`FUNCTIONS_SHARD`].
fn on_functions_shard(
    f: impl FnOnce(&mut ShardDb, &crate::cmd::ExecCtx) -> Reply + Send + 'static,
) -> Action {
    Action::Run(FUNCTIONS_SHARD, on_shard(f))
}

/// A library loaded on this thread's engine: its name and functions.
///
/// # Errors
/// The load errors of [`crate::script::lua::Engine::load_library`].
fn inspect_library(code: &[u8]) -> Result<(String, Vec<FunctionMeta>), CmdError> {
    with_engine(|engine| engine.load_library(code))?
        .map(|(name, metas, _)| (name, metas))
        .map_err(CmdError::msg)
}

/// `FUNCTION FLUSH [ASYNC | SYNC]`
///
/// Deletes every library.
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
        return Err(CmdError::subcommand_syntax("FUNCTION", &argv[1]));
    }
    if argv.len() == 3 && !is(&argv[2], "SYNC") && !is(&argv[2], "ASYNC") {
        return Err(CmdError::msg(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    Ok(on_functions_shard(|db, cx| {
        flush_libraries(&db.scripts);
        db.log_effect(cx, &[b"FUNCTION", b"FLUSH"]);
        Reply::Ok
    }))
}

fn flush_libraries(registry: &Registry) {
    let mut libs = registry.libraries();
    let names: Vec<String> = libs.by_name.keys().cloned().collect();
    for n in names {
        libs.remove(&n);
    }
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`
///
/// # Reply
/// Array of libraries, each a map of `library_name`, `engine`, `functions`
/// (each a map of `name`, `description`, `flags`) and with WITHCODE
/// `library_code`.
/// # Errors
/// `ERR library name argument was not given`; `ERR Unknown argument <arg>`
/// (also for a repeated option, as Redis).
/// # Source
/// `functionListCommand`, redis/src/functions.c.
fn list(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
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
            return Err(CmdError::quoting(&[
                b"ERR Unknown argument ",
                args::c_str(a),
            ]));
        }
        i += 1;
    }
    let pattern = pattern.cloned();
    Ok(read_registry(cx, move |registry| {
        let libs = libraries(registry)
            .into_iter()
            .filter(|l| {
                pattern
                    .as_ref()
                    // Without case, as Redis matches LIBRARYNAME (7.0+),
                    // though library names are case-sensitive.
                    .is_none_or(|p| glob_match(p, l.name.as_bytes(), true))
            })
            .map(|l| reply_library(&l, with_code))
            .collect();
        Reply::Array(libs)
    }))
}

/// A reply built from the libraries: now, or inside a transaction that
/// changed them before this command, on [`FUNCTIONS_SHARD`] in its place
/// in the transaction (after the change committed).
fn read_registry(cx: &ConnCtx<'_>, f: impl FnOnce(&Registry) -> Reply + Send + 'static) -> Action {
    if cx.conn.exec_changed_functions {
        on_functions_shard(move |db, _| f(&db.scripts))
    } else {
        f(&cx.shared.scripts).into()
    }
}

/// One library as FUNCTION LIST shows it.
fn reply_library(l: &Library, with_code: bool) -> Reply {
    let functions = l
        .functions
        .iter()
        .map(|f| {
            Reply::Map(vec![
                (Reply::bulk_copy("name"), Reply::bulk(f.name.clone())),
                (
                    Reply::bulk_copy("description"),
                    f.description.clone().map_or(Reply::NullBulk, Reply::bulk),
                ),
                (
                    Reply::bulk_copy("flags"),
                    Reply::Set(f.flags.names().into_iter().map(Reply::simple).collect()),
                ),
            ])
        })
        .collect();
    let mut fields = vec![
        (
            Reply::bulk_copy("library_name"),
            Reply::bulk(l.name.clone()),
        ),
        (Reply::bulk_copy("engine"), Reply::bulk_copy("LUA")),
        (Reply::bulk_copy("functions"), Reply::Array(functions)),
    ];
    if with_code {
        fields.push((
            Reply::bulk_copy("library_code"),
            Reply::Bulk(l.code.clone()),
        ));
    }
    Reply::Map(fields)
}

/// `FUNCTION STATS`
///
/// # Reply
/// Map: `running_script` (null when nothing runs, else a map of `name`,
/// `command`, `duration_ms`) and `engines`, a map of engine name to
/// `libraries_count` / `functions_count`.
/// # Source
/// `functionStatsCommand`, redis/src/functions.c.
fn stats(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    use std::sync::atomic::Ordering;
    let libs = libraries(&cx.shared.scripts);
    let (n_libs, n_fns) = libs
        .iter()
        .fold((0, 0), |(l, f), lib| (l + 1, f + lib.functions.len()));
    let engines = vec![(
        Reply::bulk_copy("LUA"),
        Reply::Map(vec![
            (Reply::bulk_copy("libraries_count"), Reply::Int(n_libs)),
            (
                Reply::bulk_copy("functions_count"),
                Reply::Int(n_fns as i64),
            ),
        ]),
    )];
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let running = cx.shared.scripts.running.iter().find_map(|r| {
        let started = r.started_ms.load(Ordering::SeqCst);
        if started == 0 {
            return None;
        }
        let name = r.name.lock().map(|n| n.clone()).unwrap_or_default();
        let verb = if r.is_function.load(Ordering::SeqCst) {
            "fcall"
        } else {
            "evalsha"
        };
        Some(Reply::Map(vec![
            (Reply::bulk_copy("name"), Reply::bulk(name.clone())),
            (
                Reply::bulk_copy("command"),
                Reply::Array(vec![Reply::bulk_copy(verb), Reply::bulk(name)]),
            ),
            (
                Reply::bulk_copy("duration_ms"),
                Reply::Int(now_ms.saturating_sub(started) as i64),
            ),
        ]))
    });
    Ok(Reply::Map(vec![
        (
            Reply::bulk_copy("running_script"),
            running.unwrap_or(Reply::NullBulk),
        ),
        (Reply::bulk_copy("engines"), Reply::Map(engines)),
    ])
    .into())
}

/// `FUNCTION LOAD [REPLACE] function-code`
///
/// Loads a library (`#!lua name=<library>` then code calling
/// `redis.register_function`), replacing one of the same name with REPLACE.
///
/// # Reply
/// Bulk string: the library name.
/// # Errors
/// `ERR Unknown option given: <opt>`; metadata and load errors
/// ([`crate::script::lua::parse_library_header`], `load_library`);
/// `ERR Library '<name>' already exists`; `ERR Function <f> already exists`.
/// # Source
/// `functionLoadCommand`, redis/src/functions.c.
fn load(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let mut replace = false;
    for a in &argv[2..argv.len() - 1] {
        if !is(a, "REPLACE") {
            return Err(CmdError::quoting(&[
                b"ERR Unknown option given: ",
                args::c_str(a),
            ]));
        }
        replace = true;
    }
    let code = argv[argv.len() - 1].clone();
    // Redis refuses an existing library before running the new code. Inside
    // a transaction that changed the libraries before this LOAD, the
    // commit on shard 0 decides (`Libraries::add` refuses it there too).
    let (name, _) = crate::script::lua::parse_library_header(&code).map_err(CmdError::msg)?;
    if !replace
        && !cx.conn.exec_changed_functions
        && cx.shared.scripts.libraries().by_name.contains_key(&name)
    {
        return Err(CmdError::msg(format!(
            "ERR Library '{name}' already exists"
        )));
    }
    let (name, metas) = inspect_library(&code)?;
    Ok(on_functions_shard(move |db, cx| {
        let added = db
            .scripts
            .libraries()
            .add(name.clone(), code.clone(), metas, replace);
        match added {
            Ok(()) => {
                db.log_effect(cx, &[b"FUNCTION", b"LOAD", b"REPLACE", &code]);
                Reply::bulk(name)
            }
            Err(e) => Reply::Error(CmdError::msg(e)),
        }
    }))
}

/// `FUNCTION DELETE library-name`
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR Library not found`.
/// # Source
/// `functionDeleteCommand`, redis/src/functions.c.
fn delete(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let name = args::text(&argv[2]);
    Ok(on_functions_shard(move |db, cx| {
        if !db.scripts.libraries().remove(&name) {
            return Reply::Error(CmdError::msg("ERR Library not found"));
        }
        db.log_effect(cx, &[b"FUNCTION", b"DELETE", name.as_bytes()]);
        Reply::Ok
    }))
}

/// `FUNCTION DUMP`
///
/// # Reply
/// Bulk string: every library's code in Redis's DUMP payload format
/// (`RDB_OPCODE_FUNCTION2` + string per library, RDB version, CRC64), so
/// `FUNCTION RESTORE` here or on a Redis server reads it.
/// # Source
/// `functionDumpCommand`, redis/src/functions.c; the payload as `DUMP`'s.
fn dump(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(read_registry(cx, |registry| {
        let codes: Vec<Bytes> = libraries(registry).iter().map(|l| l.code.clone()).collect();
        Reply::bulk(payload::encode(&codes))
    }))
}

/// How FUNCTION RESTORE treats libraries already loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RestorePolicy {
    /// Refuse when a library of the payload exists (default).
    Append,
    /// Replace libraries of the same name.
    Replace,
    /// Delete every library first.
    Flush,
}

/// `FUNCTION RESTORE serialized-value [FLUSH | APPEND | REPLACE]`
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR Wrong restore policy given, value should be either FLUSH, APPEND or
/// REPLACE.`; `ERR payload version or checksum are wrong`; library load
/// errors; `ERR Library <name> already exists` (APPEND); function name clashes.
/// Nothing is changed when any library fails.
/// # Source
/// `functionRestoreCommand`, redis/src/functions.c.
fn restore(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    if argv.len() > 4 {
        return Err(CmdError::subcommand_syntax("FUNCTION", &argv[1]));
    }
    let policy =
        match argv.get(3) {
            None => RestorePolicy::Append,
            Some(p) if is(p, "APPEND") => RestorePolicy::Append,
            Some(p) if is(p, "REPLACE") => RestorePolicy::Replace,
            Some(p) if is(p, "FLUSH") => RestorePolicy::Flush,
            Some(_) => return Err(CmdError::msg(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    let payload = argv[2].clone();
    let codes = payload::decode(&payload).map_err(CmdError::msg)?;
    let mut libs = Vec::with_capacity(codes.len());
    for code in codes {
        let (name, metas) = inspect_library(&code)?;
        libs.push((name, code, metas));
    }
    Ok(on_functions_shard(move |db, cx| {
        match apply_restore(&db.scripts, libs, policy) {
            Ok(()) => {
                let p: &[u8] = match policy {
                    RestorePolicy::Append => b"APPEND",
                    RestorePolicy::Replace => b"REPLACE",
                    RestorePolicy::Flush => b"FLUSH",
                };
                db.log_effect(cx, &[b"FUNCTION", b"RESTORE", &payload, p]);
                Reply::Ok
            }
            Err(e) => Reply::Error(CmdError::msg(e)),
        }
    }))
}

/// Apply a restore to the registry, all or nothing.
fn apply_restore(
    registry: &Registry,
    libs: Vec<(String, Bytes, Vec<FunctionMeta>)>,
    policy: RestorePolicy,
) -> Result<(), String> {
    let mut current = registry.libraries();
    // Check on a copy of the index first, so a failure changes nothing.
    let mut trial = crate::script::Libraries::default();
    if policy != RestorePolicy::Flush {
        for lib in current.by_name.values() {
            trial.add(
                lib.name.clone(),
                lib.code.clone(),
                lib.functions.clone(),
                false,
            )?;
        }
    }
    for (name, code, metas) in &libs {
        if policy == RestorePolicy::Append && trial.by_name.contains_key(name) {
            return Err(format!("ERR Library {name} already exists"));
        }
        trial.add(name.clone(), code.clone(), metas.clone(), true)?;
    }
    if policy == RestorePolicy::Flush {
        let names: Vec<String> = current.by_name.keys().cloned().collect();
        for n in names {
            current.remove(&n);
        }
    }
    for (name, code, metas) in libs {
        current.add(name, code, metas, true)?;
    }
    Ok(())
}

/// `FUNCTION KILL`
///
/// # Errors
/// `NOTBUSY No scripts in execution right now.`; `UNKILLABLE ...`.
/// # Source
/// `functionKillCommand` → `scriptKill`, redis/src/script.c.
fn kill(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(crate::cmd::scripting::kill_running(cx.shared, true)?.into())
}

/// `FUNCTION HELP`
fn help(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(help_reply(&[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Print this help.",
    ])
    .into())
}

fn fcall(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    fcall_generic(cx, argv, false)
}

fn fcall_ro(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    fcall_generic(cx, argv, true)
}

/// `FCALL function numkeys [key ...] [arg ...]` (and FCALL_RO)
///
/// Runs a loaded function atomically on the shard owning its keys, with
/// the keys and arguments as its two Lua table arguments.
///
/// # Reply
/// The function's return value, converted as EVAL's.
/// # Errors
/// `ERR Function not found`; numkeys errors; [`crate::cmd::scripting::RO_WITH_WRITE_FLAG`]
/// (FCALL_RO of a function without `no-writes`); a runtime
/// error as `<error> script: <function>, on @user_function:<line>.`.
/// # Source
/// `fcallCommandGeneric`, redis/src/functions.c.
fn fcall_generic(cx: &mut ConnCtx<'_>, argv: &[Bytes], ro: bool) -> Result<Action, CmdError> {
    let name = args::text(&argv[1]);
    if cx.conn.exec_changed_functions {
        // Queued after a library change of the same transaction, which
        // has not committed yet: the function is looked up when it runs.
        let (keys, args) = split_keys(argv, true)?;
        let call = ScriptCall {
            target: Target::FunctionWhenRun { name, ro },
            keys,
            args,
            read_only: ro,
            allow_oom: false,
            command: if ro { "FCALL_RO" } else { "FCALL" },
        };
        return Ok(route_script(cx.shared, cx.conn.db, call));
    }
    let (lib, meta) = cx
        .shared
        .scripts
        .libraries()
        .function(&name)
        .ok_or_else(|| CmdError::msg("ERR Function not found"))?;
    let (keys, args) = split_keys(argv, true)?;
    if ro && !meta.flags.no_writes {
        return Err(CmdError::msg(crate::cmd::scripting::RO_WITH_WRITE_FLAG));
    }
    if crate::cmd::scripting::refused_on_oom(cx.shared, meta.flags) {
        return Err(CmdError::msg(crate::io::gates::OOM_ERROR));
    }
    let call = ScriptCall {
        // The registered name (Redis's `fi->name`): error replies and
        // FUNCTION STATS show it, whatever case FCALL used.
        target: Target::Function {
            lib,
            name: meta.name,
        },
        keys,
        args,
        read_only: ro || meta.flags.no_writes,
        allow_oom: meta.flags.allow_oom,
        command: if ro { "FCALL_RO" } else { "FCALL" },
    };
    Ok(route_script(cx.shared, cx.conn.db, call))
}

/// Replay a `FUNCTION ...` record of the append-only file (shard 0) into
/// the registry: `LOAD REPLACE code`, `DELETE name`, `FLUSH`,
/// `RESTORE payload policy`.
///
/// # Errors
/// A description of a record that does not apply (a library that no longer
/// loads, an unknown subcommand).
pub fn replay_record(db: &mut ShardDb, argv: &[Bytes]) -> Result<(), String> {
    let sub = argv.get(1).map(|s| args::text(s).to_ascii_uppercase());
    let registry = db.scripts.clone();
    match (sub.as_deref(), argv.len()) {
        (Some("LOAD"), 4) => {
            let (name, metas) = inspect_library(&argv[3]).map_err(|e| e.to_string())?;
            registry.libraries().add(name, argv[3].clone(), metas, true)
        }
        (Some("DELETE"), 3) => {
            registry.libraries().remove(&args::text(&argv[2]));
            Ok(())
        }
        (Some("FLUSH"), 2) => {
            flush_libraries(&registry);
            Ok(())
        }
        (Some("RESTORE"), 4) => {
            let policy = match args::text(&argv[3]).as_str() {
                "REPLACE" => RestorePolicy::Replace,
                "FLUSH" => RestorePolicy::Flush,
                _ => RestorePolicy::Append,
            };
            let mut libs = Vec::new();
            for code in payload::decode(&argv[2])? {
                let (name, metas) = inspect_library(&code).map_err(|e| e.to_string())?;
                libs.push((name, code, metas));
            }
            apply_restore(&registry, libs, policy)
        }
        _ => Err("bad FUNCTION record".into()),
    }
}

/// The records an AOF rewrite writes for the libraries (shard 0 only).
pub fn rewrite_records(db: &ShardDb) -> Vec<Bytes> {
    if db.id != FUNCTIONS_SHARD {
        return Vec::new();
    }
    libraries(&db.scripts)
        .iter()
        .map(|l| l.code.clone())
        .collect()
}

/// FUNCTION DUMP's payload: Redis's DUMP format holding one
/// `RDB_OPCODE_FUNCTION2` string per library.
pub mod payload {
    use bytes::Bytes;

    /// `RDB_OPCODE_FUNCTION2`.
    const OPCODE_FUNCTION2: u8 = 245;
    /// RDB version written: 10 (Redis 7.0), which every 7.x/8.x server reads.
    const RDB_VERSION: u16 = 10;

    /// CRC-64/Jones (reflected, as Redis's `crc64`), bitwise.
    pub fn crc64(data: &[u8]) -> u64 {
        const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;
        let mut crc = 0u64;
        for &b in data {
            crc ^= u64::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY_REFLECTED
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    fn put_len(out: &mut Vec<u8>, n: usize) {
        if n < 64 {
            out.push(n as u8);
        } else if n < 16384 {
            out.push(0x40 | (n >> 8) as u8);
            out.push(n as u8);
        } else if n <= u32::MAX as usize {
            out.push(0x80);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0x81);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }

    /// The payload for `codes`.
    pub fn encode(codes: &[Bytes]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in codes {
            out.push(OPCODE_FUNCTION2);
            put_len(&mut out, c.len());
            out.extend_from_slice(c);
        }
        out.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let crc = crc64(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Read an RDB length; `Ok((len, special))` where `special` marks an
    /// encoded string (`11xxxxxx`).
    fn get_len(data: &[u8], pos: &mut usize) -> Result<(usize, bool), String> {
        let bad = || "ERR DUMP payload version or checksum are wrong".to_string();
        let b = *data.get(*pos).ok_or_else(bad)?;
        *pos += 1;
        match b >> 6 {
            0 => Ok((usize::from(b & 0x3f), false)),
            1 => {
                let b2 = *data.get(*pos).ok_or_else(bad)?;
                *pos += 1;
                Ok(((usize::from(b & 0x3f) << 8) | usize::from(b2), false))
            }
            2 => {
                let n = if b == 0x80 { 4 } else { 8 };
                let s = data.get(*pos..*pos + n).ok_or_else(bad)?;
                *pos += n;
                Ok((
                    s.iter().fold(0usize, |a, &x| (a << 8) | usize::from(x)),
                    false,
                ))
            }
            _ => Ok((usize::from(b & 0x3f), true)),
        }
    }

    /// LZF decompression (the `0xC3` string encoding of RDB).
    fn lzf_decompress(src: &[u8], out_len: usize) -> Option<Vec<u8>> {
        let mut out: Vec<u8> = Vec::with_capacity(out_len);
        let mut i = 0;
        while i < src.len() {
            let ctrl = usize::from(src[i]);
            i += 1;
            if ctrl < 32 {
                let n = ctrl + 1;
                out.extend_from_slice(src.get(i..i + n)?);
                i += n;
            } else {
                let mut len = ctrl >> 5;
                if len == 7 {
                    len += usize::from(*src.get(i)?);
                    i += 1;
                }
                let back = ((ctrl & 0x1f) << 8) + usize::from(*src.get(i)?) + 1;
                i += 1;
                let start = out.len().checked_sub(back)?;
                for k in 0..len + 2 {
                    let b = out[start + k];
                    out.push(b);
                }
            }
        }
        (out.len() == out_len).then_some(out)
    }

    fn get_string(data: &[u8], pos: &mut usize) -> Result<Bytes, String> {
        let bad = || "ERR DUMP payload version or checksum are wrong".to_string();
        let (n, special) = get_len(data, pos)?;
        if !special {
            let s = data.get(*pos..*pos + n).ok_or_else(bad)?;
            *pos += n;
            return Ok(Bytes::copy_from_slice(s));
        }
        match n {
            0 => {
                let v = *data.get(*pos).ok_or_else(bad)? as i8;
                *pos += 1;
                Ok(Bytes::from(v.to_string()))
            }
            1 => {
                let s = data.get(*pos..*pos + 2).ok_or_else(bad)?;
                *pos += 2;
                Ok(Bytes::from(i16::from_le_bytes([s[0], s[1]]).to_string()))
            }
            2 => {
                let s = data.get(*pos..*pos + 4).ok_or_else(bad)?;
                *pos += 4;
                Ok(Bytes::from(
                    i32::from_le_bytes([s[0], s[1], s[2], s[3]]).to_string(),
                ))
            }
            3 => {
                let (clen, _) = get_len(data, pos)?;
                let (len, _) = get_len(data, pos)?;
                let src = data.get(*pos..*pos + clen).ok_or_else(bad)?;
                *pos += clen;
                lzf_decompress(src, len).map(Bytes::from).ok_or_else(bad)
            }
            _ => Err(bad()),
        }
    }

    /// The library codes of a payload.
    ///
    /// # Errors
    /// `ERR payload version or checksum are wrong` (short, bad CRC, newer
    /// RDB version); `ERR given type is not a function` for other records.
    pub fn decode(data: &[u8]) -> Result<Vec<Bytes>, String> {
        let bad = || "ERR DUMP payload version or checksum are wrong".to_string();
        if data.len() < 10 {
            return Err(bad());
        }
        let body_end = data.len() - 10;
        let ver = u16::from_le_bytes([data[body_end], data[body_end + 1]]);
        let crc = u64::from_le_bytes(data[data.len() - 8..].try_into().map_err(|_| bad())?);
        if ver > 13 || crc64(&data[..data.len() - 8]) != crc {
            return Err(bad());
        }
        let mut pos = 0;
        let mut codes = Vec::new();
        while pos < body_end {
            if data[pos] != OPCODE_FUNCTION2 {
                return Err("ERR given type is not a function".into());
            }
            pos += 1;
            codes.push(get_string(data, &mut pos)?);
        }
        Ok(codes)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn crc64_check_value() {
            assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        }

        #[test]
        fn round_trip_and_lzf() {
            let codes = vec![
                Bytes::from_static(b"#!lua name=a\nx"),
                Bytes::from(vec![b'y'; 20000]),
            ];
            assert_eq!(decode(&encode(&codes)).unwrap(), codes);
            let mut bad = encode(&codes);
            bad[3] ^= 1;
            assert!(decode(&bad).is_err());
            // "aaaaaaaa": literal 'a', then a back reference of length 7 at distance 1.
            assert_eq!(
                lzf_decompress(&[0x00, b'a', 0xa0, 0x00], 8).unwrap(),
                b"aaaaaaaa"
            );
        }
    }
}
