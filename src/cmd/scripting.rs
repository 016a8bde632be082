//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT
//! (LOAD, EXISTS, FLUSH, KILL, HELP); the shard side every script and
//! function shares: running one `redis.call` inline on the owning shard.
//!
//! A script runs on the shard that owns its declared keys, as one shard
//! request ([`apply_script`]): atomic like EXEC, with no hop per
//! `redis.call`. Each call is looked up in the command table, checked as
//! Redis checks script calls, parsed with the command's own parser and
//! applied to the same `ShardDb`; its effects reach the AOF as the command
//! logs them, and readers blocked on keys it wrote are served after the
//! script, when the shard serves ready keys.
//!
//! A script whose declared keys span shards runs as a cross-shard
//! transaction ([`route_script`], [`held_script`]): the lowest involved
//! shard runs it with every involved shard held, each call applied on its
//! key's shard. A `redis.call` on an undeclared key of a shard the script
//! does not hold cannot be reached and fails ([`NOT_LOCAL_KEY`]).

use bytes::Bytes;

use crate::cmd::args::{self, is};
use crate::cmd::connection::{help_reply, run_subcommand};
use crate::cmd::table::{self, Handler};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, ExecCtx, Flags, Keys};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::{slot_of, ShardId};
use crate::script::lua::{with_engine, Invocation, RunLimits};
use std::sync::Arc;

use crate::config::Tunables;
use crate::route::slot::SlotMap;
use crate::script::{Library, Registry, ScriptFlags};
use crate::server::{note_script_call, ScriptCallStat, Shared};
use crate::shard::db::ShardDb;
use crate::shard::msg::ShardReq;

/// A `redis.call` on an undeclared key of a shard the script does not hold.
pub const NOT_LOCAL_KEY: &str = "ERR Script attempted to access a key of a shard it does not hold: shardstream runs a script on the shards of its declared keys and cannot reach others from inside it; declare every key the script touches";

/// One `redis.call` whose own keys live on several shards (each call must
/// stay on one shard, even when the script holds several).
pub const CALL_SPANS_SHARDS: &str = "ERR A command called from a script has keys on more than one shard: shardstream applies each call on one shard; keep its keys in one slot with a {hash tag}";

/// EVALSHA of an unknown script.
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// A `*_RO` call of a script or function that may write.
pub const RO_WITH_WRITE_FLAG: &str =
    "ERR Can not execute a script with write flag using *_ro command.";

const EVAL_FLAGS: Flags = Flags::NOSCRIPT.with(Flags::SKIP_MONITOR).with(Flags::STALE);

/// An EVAL-family row: `EVAL script numkeys [key ...] [arg ...]`.
pub(super) const fn eval_row(
    name: &'static str,
    flags: Flags,
    summary: &'static str,
    since: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec {
        keys: Keys::NumKeys { at: 2 },
        ..CommandSpec::conn(
            name,
            -3,
            flags,
            "scripting",
            &["slow", "scripting"],
            summary,
            since,
            f,
        )
    }
}

const fn script_row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    summary: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec::conn(
        name,
        arity,
        flags,
        "scripting",
        &["slow", "scripting"],
        summary,
        "2.6.0",
        f,
    )
}

const SCRIPT_SUBS: &[CommandSpec] = &[
    script_row(
        "SCRIPT|LOAD",
        3,
        Flags::NOSCRIPT.with(Flags::STALE),
        "Loads a server-side Lua script to the script cache.",
        script_load,
    ),
    script_row(
        "SCRIPT|EXISTS",
        -3,
        Flags::NOSCRIPT.with(Flags::STALE),
        "Determines whether server-side Lua scripts exist in the script cache.",
        script_exists,
    ),
    script_row(
        "SCRIPT|FLUSH",
        -2,
        Flags::NOSCRIPT.with(Flags::STALE),
        "Removes all server-side Lua scripts from the script cache.",
        script_flush,
    ),
    script_row(
        "SCRIPT|KILL",
        2,
        Flags::NOSCRIPT.with(Flags::ALLOW_BUSY),
        "Terminates a server-side Lua script during execution.",
        script_kill,
    ),
    script_row(
        "SCRIPT|HELP",
        2,
        Flags::LOADING.with(Flags::STALE),
        "Returns helpful text about the different subcommands.",
        script_help,
    ),
];

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    eval_row(
        "EVAL",
        EVAL_FLAGS.with(Flags::MAY_REPLICATE),
        "Executes a server-side Lua script.",
        "2.6.0",
        eval,
    ),
    eval_row(
        "EVALSHA",
        EVAL_FLAGS.with(Flags::MAY_REPLICATE),
        "Executes a server-side Lua script by SHA1 digest.",
        "2.6.0",
        evalsha,
    ),
    eval_row(
        "EVAL_RO",
        EVAL_FLAGS.with(Flags::READONLY),
        "Executes a read-only server-side Lua script.",
        "7.0.0",
        eval_ro,
    ),
    eval_row(
        "EVALSHA_RO",
        EVAL_FLAGS.with(Flags::READONLY),
        "Executes a read-only server-side Lua script by SHA1 digest.",
        "7.0.0",
        evalsha_ro,
    ),
    CommandSpec {
        name: "SCRIPT",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::None,
        acl: &["slow"],
        summary: "A container for Lua scripts management commands.",
        since: "2.6.0",
        group: "scripting",
        subcommands: SCRIPT_SUBS,
        handler: Handler::Conn(run_subcommand),
    },
];

/// `numkeys` of EVAL/FCALL: the keys and the arguments after it.
///
/// # Errors
/// `ERR value is not an integer or out of range` (EVAL) or `ERR Bad number
/// of keys provided` (FCALL) for a non-integer, `ERR Number of keys can't be
/// negative`, `ERR Number of keys can't be greater than number of args`.
/// # Source
/// `evalGenericCommand` / `fcallCommandGeneric`, redis/src/eval.c, functions.c.
pub fn split_keys(argv: &[Bytes], fcall: bool) -> Result<(Vec<Bytes>, Vec<Bytes>), CmdError> {
    let n: i64 = match args::text(&argv[2]).parse() {
        Ok(n) => n,
        Err(_) if fcall => return Err(CmdError::msg("ERR Bad number of keys provided")),
        Err(_) => return Err(CmdError::NotInteger),
    };
    if n < 0 {
        return Err(CmdError::msg("ERR Number of keys can't be negative"));
    }
    let n = n as usize;
    if n > argv.len() - 3 {
        return Err(CmdError::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok((argv[3..3 + n].to_vec(), argv[3 + n..].to_vec()))
}

/// Send a script or function call where it runs: as one request to the
/// shard owning its declared keys (or the connection's own shard thread for
/// a script without keys); when its keys span shards, as a cross-shard
/// transaction ([`crate::shard::hold`]): the lowest involved shard runs the
/// script with every involved shard held, each call applied on its key's
/// shard, all or nothing.
pub fn route_script(shared: &Shared, db: usize, call: ScriptCall) -> Action {
    let mut shards: Vec<ShardId> = Vec::new();
    for k in &call.keys {
        let s = shared.shard_of(k);
        if !shards.contains(&s) {
            shards.push(s);
        }
    }
    if shards.len() <= 1 {
        let shard = shards.first().copied().unwrap_or_else(|| {
            let me = crate::server::current_shard_thread().unwrap_or(0);
            ShardId(me.min(usize::from(shared.shards.max(1)) - 1) as u16)
        });
        return Action::Run(shard, on_shard(move |db, cx| apply_script(db, cx, call)));
    }
    let home = shards
        .iter()
        .copied()
        .min_by_key(|s| s.0)
        .unwrap_or(ShardId(0));
    let env = ScriptEnv {
        registry: shared.scripts.clone(),
        slot_map: shared.slot_map.clone(),
        tunables: shared.tunables.clone(),
        shards: shared.shards,
        databases: shared.databases,
        home,
        reachable: shards.clone(),
        db,
        monitors: shared.monitors.clone(),
        slowlog: shared.slowlog.clone(),
    };
    Action::Atomic {
        shards,
        body: held_script(env, call),
        merge: Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk)),
    }
}

/// The flags of an EVAL body's `#!lua` shebang line, and the body with that
/// line blanked (line numbers unchanged). `None` flags: no shebang (a
/// script that may write, with Redis's pre-7.0 defaults).
///
/// The line is split as `sdssplitargs` splits it (blanks, `\r` and quotes
/// separate words), so `#!lua\r\n` is a shebang; `flags=` takes a comma list
/// whose every item must be a flag (`flags=` alone declares none).
///
/// # Errors
/// In checking order: `ERR Invalid script shebang` (no newline ends the
/// line), `ERR Invalid engine in script shebang` (unbalanced quotes),
/// `ERR Unexpected engine in script shebang: <word>`, `ERR Unknown lua
/// shebang option: <opt>`, `ERR Unexpected flag in script shebang: <flag>`.
/// # Source
/// `evalExtractShebangFlags`, redis/src/eval.c (7.0+); checked against
/// redis-server 7.0.15.
pub fn parse_shebang(body: &Bytes) -> Result<(Option<ScriptFlags>, Bytes), CmdError> {
    if !body.starts_with(b"#!") {
        return Ok((None, body.clone()));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err(CmdError::msg("ERR Invalid script shebang"));
    };
    let parts = match crate::io::codec::split_args(&body[..end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err(CmdError::msg("ERR Invalid engine in script shebang")),
    };
    if &parts[0][..] != b"#!lua" {
        return Err(CmdError::msg(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(&parts[0])
        )));
    }
    let mut flags = ScriptFlags::default();
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix(b"flags=") else {
            return Err(CmdError::msg(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(p)
            )));
        };
        if list.is_empty() {
            continue;
        }
        for f in list.split(|&b| b == b',') {
            let f = String::from_utf8_lossy(f);
            if !flags.set(&f) {
                return Err(CmdError::msg(format!(
                    "ERR Unexpected flag in script shebang: {f}"
                )));
            }
        }
    }
    Ok((Some(flags), Bytes::copy_from_slice(&body[end..])))
}

/// What a script or function call runs on its shard.
pub enum Target {
    /// An EVAL body (shebang line blanked) and its SHA1; `register` caches
    /// the script once it compiled (EVAL does, EVALSHA has it already).
    Script {
        /// SHA1 of `original`.
        sha: String,
        /// The script as sent (cached for EVALSHA).
        original: Bytes,
        /// What is compiled: `original` with a shebang line blanked.
        body: Bytes,
        /// Cache it once it compiled (EVAL).
        register: bool,
    },
    /// Function `name` of a library.
    Function {
        /// The library as FCALL found it (its version decides a reload).
        lib: std::sync::Arc<Library>,
        /// The function's name.
        name: String,
    },
    /// Function `name`, looked up in the registry when it runs: an FCALL
    /// queued in a transaction after a FUNCTION LOAD / DELETE / FLUSH /
    /// RESTORE of that transaction sees the libraries the change left.
    FunctionWhenRun {
        /// The function's name.
        name: String,
        /// FCALL_RO: a function without `no-writes` is refused.
        ro: bool,
    },
}

/// A script or function call, ready to run on its shard.
pub struct ScriptCall {
    /// The script or function to run.
    pub target: Target,
    /// Declared keys (`KEYS` / the function's first argument).
    pub keys: Vec<Bytes>,
    /// Arguments (`ARGV` / the function's second argument).
    pub args: Vec<Bytes>,
    /// Write commands are refused (`*_RO`, `no-writes`).
    pub read_only: bool,
    /// `allow-oom`: `denyoom` commands run even over `maxmemory`.
    pub allow_oom: bool,
    /// The command's table row (`EVAL`, `EVALSHA_RO`, `FCALL`, ...), for
    /// INFO's count of errors nested in the script's reply.
    pub command: &'static str,
}

fn eval(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    eval_generic(cx, argv, false, false)
}

fn evalsha(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    eval_generic(cx, argv, true, false)
}

fn eval_ro(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    eval_generic(cx, argv, false, true)
}

fn evalsha_ro(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    eval_generic(cx, argv, true, true)
}

/// `EVAL script numkeys [key ...] [arg ...]` (and EVALSHA, EVAL_RO, EVALSHA_RO)
///
/// Runs the Lua script atomically on the shard owning its keys, with `KEYS`
/// and `ARGV` set; EVAL caches the script for EVALSHA.
///
/// # Reply
/// The script's return value converted by Redis's Lua → RESP rules
/// (see [`crate::script::lua::lua_to_reply_top`]).
/// # Errors
/// numkeys errors ([`split_keys`]); [`NOSCRIPT`]; shebang errors;
/// [`RO_WITH_WRITE_FLAG`]; `ERR Error compiling
/// script (new function): ...`; a runtime error as
/// `<error> script: <sha>, on @user_script:<line>.`.
/// # Source
/// `evalGenericCommand`, redis/src/eval.c (7.x/8.x).
fn eval_generic(
    cx: &mut ConnCtx<'_>,
    argv: &[Bytes],
    by_sha: bool,
    ro: bool,
) -> Result<Action, CmdError> {
    // No script has a SHA that is not 40 characters long: NOSCRIPT before
    // numkeys is read (Redis's `evalShaCommand`).
    if by_sha && argv[1].len() != 40 {
        return Err(CmdError::msg(NOSCRIPT));
    }
    let (keys, args) = split_keys(argv, false)?;
    let (sha, original) = if by_sha {
        cx.shared
            .scripts
            .script(&argv[1])
            .ok_or_else(|| CmdError::msg(NOSCRIPT))?
    } else {
        (crate::script::sha1_hex(&argv[1]), argv[1].clone())
    };
    let (flags, body) = parse_shebang(&original)?;
    if ro && flags.is_some_and(|f| !f.no_writes) {
        return Err(CmdError::msg(RO_WITH_WRITE_FLAG));
    }
    if flags.is_some_and(|f| refused_on_oom(cx.shared, f)) {
        return Err(CmdError::msg(crate::io::gates::OOM_ERROR));
    }
    let call = ScriptCall {
        target: Target::Script {
            sha,
            original,
            body,
            register: !by_sha,
        },
        keys,
        args,
        read_only: ro || flags.is_some_and(|f| f.no_writes),
        allow_oom: flags.is_some_and(|f| f.allow_oom),
        command: match (by_sha, ro) {
            (false, false) => "EVAL",
            (true, false) => "EVALSHA",
            (false, true) => "EVAL_RO",
            (true, true) => "EVALSHA_RO",
        },
    };
    Ok(route_script(cx.shared, cx.conn.db, call))
}

/// What a running script may reach: its home shard (where keyless calls
/// run), the shards it may touch, and the server settings its calls check.
pub struct ScriptEnv {
    pub registry: Arc<Registry>,
    pub slot_map: Arc<SlotMap>,
    pub tunables: Arc<Tunables>,
    /// Shards of this server.
    pub shards: u16,
    pub databases: usize,
    /// The shard whose thread runs the script (the coordinator when held).
    pub home: ShardId,
    /// Shards the script's calls may touch: its home, or every held shard.
    pub reachable: Vec<ShardId>,
    /// The database the script starts in (the client's).
    pub db: usize,
    /// MONITOR clients, shown each call as `[<db> lua]`.
    pub monitors: Arc<crate::monitor::Monitors>,
    /// The slow log: a slow call is recorded as the script's own client's
    /// (address `?:0`, no name), as Redis records its script client's calls.
    pub slowlog: Arc<crate::slowlog::SlowLog>,
}

/// The address SLOWLOG shows for a script's calls: Redis's script client
/// has no socket, and its peer id reads `?:0` (redis-server 7.0.15).
const SCRIPT_CLIENT_ADDR: &str = "?:0";

/// Runs one parsed call on a reachable shard, in a database.
pub type Apply<'a> = dyn FnMut(ShardId, usize, ShardReq) -> Reply + 'a;

/// Shard side of EVAL and FCALL whose keys one shard owns: run the script
/// with `redis.call` applied inline to this shard's data.
pub fn apply_script(db: &mut ShardDb, cx: &ExecCtx, call: ScriptCall) -> Reply {
    let env = ScriptEnv {
        registry: db.scripts.clone(),
        slot_map: db.slot_map.clone(),
        tunables: db.tunables.clone(),
        shards: db.shards,
        databases: db.databases(),
        home: db.id,
        reachable: vec![db.id],
        db: cx.db,
        monitors: db.monitors.clone(),
        slowlog: db.slowlog.clone(),
    };
    let mut apply = |_shard: ShardId, dbi: usize, req: ShardReq| -> Reply {
        // Each call is a command of its own (one LFU access per key).
        db.begin_command();
        req.apply(db, &ExecCtx { db: dbi, ..*cx })
    };
    run_script(&env, call, &mut apply)
}

/// The body of a script whose declared keys span shards: it runs on the
/// coordinator with every involved shard held (the cross-shard transaction
/// scheme of [`crate::shard::hold`]), each call applied on its key's shard.
pub fn held_script(env: ScriptEnv, call: ScriptCall) -> crate::shard::hold::TxBody {
    crate::shard::hold::TxBody::Run(Box::new(move |tx, db| {
        let env = ScriptEnv { db, ..env };
        let mut apply =
            |shard: ShardId, dbi: usize, req: ShardReq| -> Reply { tx.run(shard.0, dbi, req) };
        run_script(&env, call, &mut apply)
    }))
}

/// [`Target::FunctionWhenRun`] looked up now, with FCALL's checks: the
/// call as FCALL would have built it, or its error reply.
fn resolve_function(env: &ScriptEnv, mut call: ScriptCall) -> Result<ScriptCall, Reply> {
    if let Target::FunctionWhenRun { name, ro } = call.target {
        let Some((lib, meta)) = env.registry.libraries().function(&name) else {
            return Err(Reply::Error(CmdError::msg("ERR Function not found")));
        };
        if ro && !meta.flags.no_writes {
            return Err(Reply::Error(CmdError::msg(RO_WITH_WRITE_FLAG)));
        }
        call.read_only = ro || meta.flags.no_writes;
        call.allow_oom = meta.flags.allow_oom;
        call.target = Target::Function {
            lib,
            name: meta.name,
        };
    }
    Ok(call)
}

/// Run a script or function with `redis.call` bound to `apply`.
fn run_script(env: &ScriptEnv, call: ScriptCall, apply: &mut Apply<'_>) -> Reply {
    let call = match resolve_function(env, call) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let limits = RunLimits {
        registry: env.registry.clone(),
        shard: usize::from(env.home.0),
        busy_after_ms: env
            .tunables
            .busy_reply_threshold_ms
            .load(std::sync::atomic::Ordering::Relaxed),
        now_ms: now.as_millis() as u64,
    };
    let mut state = CallState {
        selected: env.db,
        read_only: call.read_only,
        allow_oom: call.allow_oom,
        // TIME inside a script answers the script's start time (Redis 7.0+).
        started_us: now.as_micros(),
    };
    let mut exec = |argv: Vec<Bytes>| -> Reply { run_call(env, &mut state, apply, &argv) };
    let epoch = env
        .registry
        .scripts_epoch
        .load(std::sync::atomic::Ordering::SeqCst);
    let ScriptCall {
        target,
        keys,
        args,
        command,
        ..
    } = call;
    let outcome = match target {
        Target::Script {
            sha,
            original,
            body,
            register,
        } => with_engine(|engine| {
            let reply = engine.eval(
                &sha,
                &body,
                epoch,
                Invocation {
                    name: &sha,
                    keys: &keys,
                    args: &args,
                    limits,
                },
                &mut exec,
            );
            let compile_failed = reply
                .error_text()
                .is_some_and(|e| e.to_string().starts_with("ERR Error compiling script"));
            if register && !compile_failed {
                env.registry.add_eval_script(&sha, original);
            }
            reply
        }),
        Target::Function { lib, name } => with_engine(|engine| {
            engine.fcall(
                &lib,
                &name,
                Invocation {
                    name: &name,
                    keys: &keys,
                    args: &args,
                    limits,
                },
                &mut exec,
            )
        }),
        // Resolved by `resolve_function` before this point.
        Target::FunctionWhenRun { .. } => Err(CmdError::msg("ERR Function not found")),
    };
    let reply = outcome.unwrap_or_else(Reply::Error);
    crate::server::note_script_reply_errors(command, &reply);
    reply
}

/// A running script's per-call state.
struct CallState {
    /// The database calls run in (SELECT inside the script changes it).
    selected: usize,
    read_only: bool,
    allow_oom: bool,
    /// The script's start time, µs since the Unix epoch (TIME).
    started_us: u128,
}

/// Run one `redis.call` argv, as Redis checks and runs a script's call
/// (`scriptCall`, redis/src/script.c): [`admit_call`]'s checks, then the
/// command on its shard; INFO counts it as Redis does (a refused call as a
/// rejected call of its command, one that ran as a call, with its time
/// and a failure when it answered an error).
fn run_call(
    env: &ScriptEnv,
    state: &mut CallState,
    apply: &mut Apply<'_>,
    argv: &[Bytes],
) -> Reply {
    let refused = |name, e: CmdError| {
        note_script_call(ScriptCallStat {
            name,
            ns: 0,
            err: Some(e.clone()),
            rejected: true,
        });
        Reply::Error(e)
    };
    let (spec, target) = match admit_call(env, state, argv) {
        Ok(admitted) => admitted,
        Err((name, e)) => return refused(name, e),
    };
    let started = quanta::Instant::now();
    let reply = match execute_call(env, state, apply, spec, target, argv) {
        Ok(reply) => reply,
        Err(e) => return refused(Some(spec.name), e),
    };
    let ns = started.elapsed().as_nanos() as u64;
    note_script_call(ScriptCallStat {
        name: Some(spec.name),
        ns,
        err: reply.error_text().cloned(),
        rejected: false,
    });
    if env.slowlog.is_slow(ns) {
        let (addr, name) = (String::from(SCRIPT_CLIENT_ADDR), String::new());
        env.slowlog.push(argv, ns / 1000, addr, name);
    }
    // After the call, in the database it leaves selected (Redis's `call`).
    if env.monitors.is_active() && !crate::monitor::skips(spec) {
        let now_us = crate::monitor::now_us();
        let peer = crate::monitor::Peer::Script;
        env.monitors.feed(now_us, state.selected, peer, argv);
    }
    reply
}

/// The checks before a script's call runs, in Redis's order: known
/// command, arity, allowed in scripts, no writes from a read-only script,
/// `-OOM` for `denyoom` commands over `maxmemory` (unless `allow-oom`),
/// keys on one shard the script can reach. The command's row and that
/// shard, or the refusal with the row's name when the command is known.
fn admit_call(
    env: &ScriptEnv,
    state: &CallState,
    argv: &[Bytes],
) -> Result<(&'static CommandSpec, ShardId), (Option<&'static str>, CmdError)> {
    let Some(mut spec) = table::lookup(&argv[0]) else {
        return Err((
            None,
            CmdError::msg("ERR Unknown Redis command called from script"),
        ));
    };
    let refuse =
        |spec: &'static CommandSpec, m: &'static str| Err((Some(spec.name), CmdError::msg(m)));
    if !spec.arity_ok(argv.len()) {
        return refuse(
            spec,
            "ERR Wrong number of args calling Redis command from script",
        );
    }
    if !spec.subcommands.is_empty() {
        let Some(sub) = argv.get(1).and_then(|name| table::lookup_sub(spec, name)) else {
            if argv.len() < 2 {
                // The container alone: its own arity fails.
                return refuse(
                    spec,
                    "ERR Wrong number of args calling Redis command from script",
                );
            }
            return Err((
                None,
                CmdError::msg("ERR Unknown Redis command called from script"),
            ));
        };
        if !sub.arity_ok(argv.len()) {
            return refuse(
                sub,
                "ERR Wrong number of args calling Redis command from script",
            );
        }
        spec = sub;
    }
    if spec.flags.has(Flags::NOSCRIPT) {
        return refuse(spec, "ERR This Redis command is not allowed from script");
    }
    if spec.flags.has(Flags::WRITE) && state.read_only {
        return refuse(
            spec,
            "ERR Write commands are not allowed from read-only scripts.",
        );
    }
    if spec.flags.has(Flags::DENYOOM) && !state.allow_oom && over_maxmemory(&env.tunables) {
        return refuse(spec, crate::io::gates::OOM_ERROR);
    }
    let mut target = env.home;
    if env.shards > 1 {
        let mut first = true;
        for i in spec.key_indexes(argv) {
            let shard = env.slot_map.shard(slot_of(&argv[i]));
            if !env.reachable.contains(&shard) {
                return refuse(spec, NOT_LOCAL_KEY);
            }
            if first {
                target = shard;
                first = false;
            } else if shard != target {
                return refuse(spec, CALL_SPANS_SHARDS);
            }
        }
    }
    Ok((spec, target))
}

/// Run an admitted call: the command's own parser, applied on `target`.
/// Commands that run on the connection's thread elsewhere are limited here
/// to RENAME, RENAMENX and COPY (keys on one shard), PING, ECHO, TIME (the
/// script's start time, frozen as in Redis 7.0+) and SELECT (which changes
/// the script's database); the others are refused with the error.
fn execute_call(
    env: &ScriptEnv,
    state: &mut CallState,
    apply: &mut Apply<'_>,
    spec: &'static CommandSpec,
    target: ShardId,
    argv: &[Bytes],
) -> Result<Reply, CmdError> {
    let writes = spec.flags.has(Flags::WRITE);
    let req = match spec.handler {
        Handler::Keyed { parse, .. } => parse(argv),
        Handler::Blocking {
            parse, block_ms, ..
        } => {
            if block_ms(argv).is_some() && matches!(spec.name, "XREAD" | "XREADGROUP") {
                // The name as the script spelled it (Redis prints argv[0]).
                return Ok(Reply::Error(CmdError::msg(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&argv[0])
                ))));
            }
            // Other blocking commands answer at once, as in MULTI.
            parse(argv)
        }
        Handler::Conn(_) => match same_shard_request(spec.name, argv, env.databases) {
            Some(req) => req,
            None => {
                return connection_command(spec.name, argv, state, env.databases).ok_or_else(
                    || {
                        CmdError::msg(format!(
                            "ERR This Redis command is not supported from scripts by shardstream: '{}' does not run on a key's shard",
                            spec.name.to_ascii_lowercase()
                        ))
                    },
                )
            }
        },
    };
    let reply = match req {
        Ok(req) => apply(target, state.selected, req),
        Err(e) => Reply::Error(e),
    };
    if writes && !reply.is_error() {
        if let Some(r) = env.registry.running(usize::from(env.home.0)) {
            r.wrote.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    Ok(reply)
}

/// A script with flags (a shebang, or a function) that may write and lacks
/// `allow-oom` is refused as a whole while over `maxmemory`, as Redis does.
pub fn refused_on_oom(shared: &Shared, flags: ScriptFlags) -> bool {
    !flags.allow_oom && !flags.no_writes && shared.over_maxmemory()
}

/// Whether `denyoom` commands are refused now: `maxmemory` is set, the
/// policy cannot evict, and used memory is over it (as the gate before a
/// command decides, sampled here at the call).
fn over_maxmemory(tunables: &Tunables) -> bool {
    use std::sync::atomic::Ordering;
    let max = tunables.maxmemory_bytes.load(Ordering::Relaxed);
    max > 0
        && tunables.eviction_policy() == crate::config::EvictionPolicy::NoEviction
        && crate::alloc_stats::used_memory_bytes() > max
}

/// Commands that run on the connection's thread because their keys may
/// span shards, as one request when a script calls them (the call's keys
/// are already known to share a shard): RENAME, RENAMENX, COPY.
fn same_shard_request(
    name: &str,
    argv: &[Bytes],
    databases: usize,
) -> Option<Result<ShardReq, CmdError>> {
    if !matches!(name, "RENAME" | "RENAMENX" | "COPY") {
        return None;
    }
    // The table's arity (3 or more) was checked before.
    let (src, dst) = (argv.get(1)?.clone(), argv.get(2)?.clone());
    let req = match name {
        "RENAME" | "RENAMENX" => {
            let nx = name == "RENAMENX";
            Ok(on_shard(move |db, cx| {
                crate::cmd::rename::apply_rename(db, cx, &src, &dst, nx)
            }))
        }
        "COPY" => copy_options(argv, databases).map(|(dst_db, replace)| {
            on_shard(move |db, cx| {
                let dst_db = dst_db.unwrap_or(cx.db);
                crate::cmd::rename::apply_copy(db, cx, &src, &dst, dst_db, replace)
            })
        }),
        _ => return None,
    };
    Some(req)
}

/// COPY's `[DB destination-db] [REPLACE]`.
fn copy_options(argv: &[Bytes], databases: usize) -> Result<(Option<usize>, bool), CmdError> {
    let (mut dst_db, mut replace) = (None, false);
    let mut j = 3;
    while j < argv.len() {
        if is(&argv[j], "REPLACE") {
            replace = true;
        } else if is(&argv[j], "DB") && j + 1 < argv.len() {
            let n = args::int_arg(&argv[j + 1])?;
            if n < 0 || n as u64 >= databases as u64 {
                return Err(CmdError::DbIndexOutOfRange);
            }
            dst_db = Some(n as usize);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok((dst_db, replace))
}

/// The connection-thread commands a script may call on its shard; `None`
/// for the others.
fn connection_command(
    name: &str,
    argv: &[Bytes],
    state: &mut CallState,
    databases: usize,
) -> Option<Reply> {
    let started_us = state.started_us;
    Some(match name {
        "PING" => match argv.len() {
            1 => Reply::simple("PONG"),
            2 => Reply::Bulk(argv[1].clone()),
            _ => Reply::Error(CmdError::arity("PING")),
        },
        "ECHO" => Reply::Bulk(argv[1].clone()),
        "TIME" => Reply::Array(vec![
            Reply::bulk((started_us / 1_000_000).to_string()),
            Reply::bulk((started_us % 1_000_000).to_string()),
        ]),
        "SELECT" => match args::text(&argv[1]).parse::<usize>() {
            Ok(n) if n < databases => {
                state.selected = n;
                Reply::Ok
            }
            Ok(_) => Reply::Error(CmdError::msg("ERR DB index is out of range")),
            Err(_) => Reply::Error(CmdError::NotInteger),
        },
        _ => return None,
    })
}

/// `SCRIPT LOAD script`
///
/// Compiles the script (on this thread's engine, to report errors now) and
/// caches it for EVALSHA on every shard.
///
/// # Reply
/// Bulk string: the script's SHA1.
/// # Errors
/// Shebang errors; `ERR Error compiling script (new function): ...`.
/// # Source
/// `scriptCommand` (LOAD), redis/src/eval.c.
fn script_load(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let original = argv[2].clone();
    let (_, body) = parse_shebang(&original)?;
    with_engine(|engine| engine.compile_script(&body).map(|_| ()))??;
    Ok(Reply::bulk(cx.shared.scripts.add_script(original)).into())
}

/// `SCRIPT EXISTS sha1 [sha1 ...]`
///
/// # Reply
/// Array of integers: 1 for each cached script, else 0.
fn script_exists(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let scripts = &cx.shared.scripts;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|sha| Reply::Int(i64::from(scripts.has_script(sha))))
            .collect(),
    )
    .into())
}

/// `SCRIPT FLUSH [ASYNC | SYNC]`
///
/// Forgets every cached script; each shard thread drops its compiled copies
/// before its next script.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR SCRIPT FLUSH only support SYNC|ASYNC option`.
fn script_flush(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    if argv.len() > 3 || (argv.len() == 3 && !is(&argv[2], "SYNC") && !is(&argv[2], "ASYNC")) {
        return Err(CmdError::msg(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    cx.shared.scripts.flush_scripts();
    Ok(Reply::Ok.into())
}

/// `SCRIPT KILL` / `FUNCTION KILL`: stop the script that made the server
/// busy. `functions` says which command asked.
///
/// # Errors
/// `NOTBUSY No scripts in execution right now.`; `UNKILLABLE ...` when the
/// script already wrote; a busy function asked to stop by SCRIPT KILL (or a
/// script by FUNCTION KILL) answers Redis's pointer to the other command.
/// # Source
/// `scriptKill`, redis/src/script.c.
pub fn kill_running(shared: &Shared, functions: bool) -> Result<Reply, CmdError> {
    use std::sync::atomic::Ordering;
    let Some((_, running)) = shared.scripts.busy_script() else {
        return Err(CmdError::msg("NOTBUSY No scripts in execution right now."));
    };
    let is_function = running.is_function.load(Ordering::SeqCst);
    if is_function && !functions {
        return Err(CmdError::msg(
            "BUSY Redis is busy running a function. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.",
        ));
    }
    if !is_function && functions {
        return Err(CmdError::msg(
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        ));
    }
    if running.wrote.load(Ordering::SeqCst) {
        return Err(CmdError::msg("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."));
    }
    running.kill.store(true, Ordering::SeqCst);
    Ok(Reply::Ok)
}

/// `SCRIPT KILL`
fn script_kill(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(kill_running(cx.shared, false)?.into())
}

/// `SCRIPT HELP`
fn script_help(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(help_reply(&[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the scripts cache.",
        "    * SYNC: Synchronously flush the scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Print this help.",
    ])
    .into())
}

/// The `-BUSY` reply for commands that arrive while a script runs past
/// `busy-reply-threshold` (Redis answers it to all but `allow-busy` commands).
pub fn busy_error(shared: &Shared) -> Option<CmdError> {
    let (_, running) = shared.scripts.busy_script()?;
    let is_function = running
        .is_function
        .load(std::sync::atomic::Ordering::SeqCst);
    Some(CmdError::msg(if is_function {
        "BUSY Redis is busy running a function. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    } else {
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::testing::argv;

    #[test]
    fn numkeys_errors() {
        assert_eq!(
            split_keys(&argv("EVAL s x"), false).unwrap_err(),
            CmdError::NotInteger
        );
        assert_eq!(
            split_keys(&argv("FCALL f x"), true)
                .unwrap_err()
                .to_string(),
            "ERR Bad number of keys provided"
        );
        assert_eq!(
            split_keys(&argv("EVAL s -1"), false)
                .unwrap_err()
                .to_string(),
            "ERR Number of keys can't be negative"
        );
        assert_eq!(
            split_keys(&argv("EVAL s 2 a"), false)
                .unwrap_err()
                .to_string(),
            "ERR Number of keys can't be greater than number of args"
        );
        let (k, a) = split_keys(&argv("EVAL s 1 k a b"), false).unwrap();
        assert_eq!((k.len(), a.len()), (1, 2));
    }

    #[test]
    fn shebang_flags() {
        let (f, body) =
            parse_shebang(&Bytes::from_static(b"#!lua flags=no-writes\nreturn 1")).unwrap();
        assert!(f.unwrap().no_writes);
        assert_eq!(&body[..], b"\nreturn 1");
        assert_eq!(
            parse_shebang(&Bytes::from_static(b"#!lua flags=bad\n"))
                .unwrap_err()
                .to_string(),
            "ERR Unexpected flag in script shebang: bad"
        );
        assert_eq!(
            parse_shebang(&Bytes::from_static(b"#!lu\n"))
                .unwrap_err()
                .to_string(),
            "ERR Unexpected engine in script shebang: #!lu"
        );
        assert_eq!(
            parse_shebang(&Bytes::from_static(b"#!lua name=x\n"))
                .unwrap_err()
                .to_string(),
            "ERR Unknown lua shebang option: name=x"
        );
        let err = |b: &'static [u8]| {
            parse_shebang(&Bytes::from_static(b))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(err(b"#!lua"), "ERR Invalid script shebang");
        assert_eq!(err(b"#!notlua"), "ERR Invalid script shebang");
        assert_eq!(err(b"#!\"lua\n"), "ERR Invalid engine in script shebang");
        assert_eq!(
            err(b"#!lua flags=no-writes,\n"),
            "ERR Unexpected flag in script shebang: "
        );
        let (f, body) = parse_shebang(&Bytes::from_static(b"#!lua flags=\r\nreturn 1")).unwrap();
        assert_eq!(
            (f, &body[..]),
            (Some(ScriptFlags::default()), &b"\nreturn 1"[..])
        );
    }

    fn run(db: &mut ShardDb, body: &str, keys: &[&str]) -> Reply {
        let original = Bytes::copy_from_slice(body.as_bytes());
        let (flags, body) = parse_shebang(&original).unwrap();
        let call = ScriptCall {
            target: Target::Script {
                sha: crate::script::sha1_hex(&original),
                original,
                body,
                register: true,
            },
            keys: keys
                .iter()
                .map(|k| Bytes::copy_from_slice(k.as_bytes()))
                .collect(),
            args: Vec::new(),
            read_only: flags.is_some_and(|f| f.no_writes),
            allow_oom: false,
            command: "EVAL",
        };
        apply_script(db, &ExecCtx::at(0, 1000), call)
    }

    #[test]
    fn scripts_call_commands_on_the_shard() {
        let mut db = ShardDb::new(ShardId(0), 1, 16);
        assert_eq!(
            run(
                &mut db,
                "redis.call('set', KEYS[1], 'v') return redis.call('get', KEYS[1])",
                &["k"]
            ),
            Reply::bulk_copy("v")
        );
        assert_eq!(
            run(
                &mut db,
                "return redis.call('xadd', 's', '1-1', 'f', 'v')",
                &["s"]
            ),
            Reply::bulk_copy("1-1")
        );
        let Reply::Error(e) = run(
            &mut db,
            "#!lua flags=no-writes\nreturn redis.call('set','k','x')",
            &["k"],
        ) else {
            panic!("read-only script wrote")
        };
        assert!(e
            .to_string()
            .starts_with("ERR Write commands are not allowed from read-only scripts. script: "));
        assert_eq!(
            run(&mut db, "return redis.pcall('multi')['err']", &[]),
            Reply::bulk_copy("ERR This Redis command is not allowed from script")
        );
        assert_eq!(db.scripts.scripts_len(), 4);
    }
}
