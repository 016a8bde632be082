//! The Lua 5.1 engine of one shard thread: a sandboxed state (built by
//! `prelude.lua`), compiled scripts and loaded libraries cached by this
//! thread, and Redis's conversions between Lua values and replies.
//!
//! The engine never touches shard data itself: a run gets an `exec`
//! callback that runs one `redis.call` argv on the shard (the command layer
//! parses it with the command table and applies it inline).
//!
//! # Source
//! "Lua API reference" and "Scripting with Lua" (conversion tables, sandbox,
//! error replies), redis.io/docs/latest/develop/interact/programmability/
//! (7.x/8.x); error texts checked against redis-server.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{
    ffi, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState,
};

use crate::error::{c_str, CmdError};
use crate::reply::Reply;
use crate::script::{FunctionMeta, Library, Registry, ScriptFlags};

/// `redis.REDIS_VERSION`: the Redis version shardstream answers as (INFO `redis_version`).
pub const REDIS_VERSION: &str = "8.10.0";
/// `redis.REDIS_VERSION_NUM`: `0x00MMmmpp`.
pub const REDIS_VERSION_NUM: i64 = 0x00_08_0a_00;

/// Lua VM instructions between two checks of the time limit and SCRIPT KILL.
const HOOK_EVERY_INSTRUCTIONS: u32 = 100_000;
/// How long FUNCTION LOAD lets a library body run (Redis: 500 ms).
const FUNCTION_LOAD_TIMEOUT: Duration = Duration::from_millis(500);
/// Compiled scripts a thread keeps before it drops them all.
const MAX_COMPILED_SCRIPTS: usize = 2 * crate::script::MAX_EVAL_SCRIPTS;

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// Run `f` with this thread's engine, creating it on first use.
///
/// # Errors
/// `ERR` when the engine cannot be built, or when called from inside a
/// running script (cannot happen: commands that run scripts are `noscript`).
pub fn with_engine<R>(f: impl FnOnce(&mut Engine) -> R) -> Result<R, CmdError> {
    ENGINE.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Err(CmdError::msg("ERR scripting engine busy on this thread"));
        };
        if slot.is_none() {
            let engine = Engine::new()
                .map_err(|e| CmdError::msg(format!("ERR cannot start the Lua engine: {e}")))?;
            *slot = Some(engine);
        }
        match slot.as_mut() {
            Some(engine) => Ok(f(engine)),
            None => Err(CmdError::msg("ERR cannot start the Lua engine")),
        }
    })
}

/// Drop this thread's engine (SCRIPT FLUSH rebuilds it on next use, as Redis
/// makes a fresh Lua state).
pub fn reset_engine() {
    ENGINE.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = None;
        }
    });
}

/// Who runs, for the time limit, SCRIPT KILL and FUNCTION STATS.
pub struct RunLimits {
    /// Where the running-script state is published.
    pub registry: Arc<Registry>,
    /// Index of the shard thread running it.
    pub shard: usize,
    /// `busy-reply-threshold`, ms (0 = never busy).
    pub busy_after_ms: u64,
    /// Wall clock at the start, ms since the Unix epoch.
    pub now_ms: u64,
}

/// One script or function call.
pub struct Invocation<'a> {
    /// The SHA1 of a script or the name of a function (error replies, FUNCTION STATS).
    pub name: &'a str,
    /// `KEYS` (EVAL) or the function's first argument.
    pub keys: &'a [Bytes],
    /// `ARGV` (EVAL) or the function's second argument.
    pub args: &'a [Bytes],
    pub limits: RunLimits,
}

/// The running script, as the time-limit hook sees it.
struct HookRun {
    start: Instant,
    busy_after: Duration,
    /// The running-script slot to publish busy state and read SCRIPT KILL
    /// from (`None` while FUNCTION LOAD runs a library body).
    registry: Option<Arc<Registry>>,
    shard: usize,
    /// The hook stopped the script (SCRIPT KILL / FUNCTION KILL).
    killed: bool,
    /// FUNCTION LOAD's limit: the body is stopped past it.
    load_deadline: Option<Instant>,
    timed_out: bool,
}

/// Runs one `redis.call` argv on the shard and answers its reply.
pub type Exec<'a> = dyn FnMut(Vec<Bytes>) -> Reply + 'a;

/// A shard thread's Lua state and its caches.
pub struct Engine {
    lua: Lua,
    /// The globals table scripts read through (`KEYS`/`ARGV` are set here).
    globals: Table,
    /// Private per-run state shared with the prelude (`call`, `resp`, `registered`).
    holder: Table,
    /// `run(f, ...)`: `xpcall` with a handler that records the failing line.
    runner: Function,
    /// `run0(f)`: the same for a function without arguments (EVAL bodies).
    runner0: Function,
    /// What the instruction-count hook checks (time limit, SCRIPT KILL);
    /// `None` between runs.
    hook_state: Rc<RefCell<Option<HookRun>>>,
    load_meta: Table,
    run_meta: Table,
    /// Compiled EVAL bodies by SHA1.
    scripts: HashMap<String, Function>,
    scripts_epoch: u64,
    /// Loaded libraries: name → (version, functions by name).
    libs: HashMap<String, (u64, HashMap<String, Function>)>,
}

impl Engine {
    /// Build the sandboxed state.
    pub fn new() -> mlua::Result<Engine> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS,
            LuaOptions::new(),
        )?;
        let rs = lua.create_table()?;
        rs.set("bit", crate::script::libs::bit(&lua)?)?;
        rs.set("struct", crate::script::libs::structlib(&lua)?)?;
        rs.set("cjson", crate::script::libs::cjson(&lua)?)?;
        rs.set("cmsgpack", crate::script::libs::cmsgpack(&lua)?)?;
        rs.set("version", REDIS_VERSION)?;
        rs.set("version_num", REDIS_VERSION_NUM)?;
        let holder = lua.create_table()?;
        holder.raw_set("resp", 2)?;
        rs.set("holder", holder.clone())?;
        rs.set(
            "sha1hex",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(mlua::Error::runtime("wrong number of arguments"));
                }
                let s = args
                    .into_iter()
                    .next()
                    .and_then(|v| lua.coerce_string(v).ok().flatten());
                let bytes = s.map(|s| s.as_bytes().to_vec()).unwrap_or_default();
                Ok(crate::script::sha1_hex(&bytes))
            })?,
        )?;
        rs.set(
            "log",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() < 2 {
                    return Err(mlua::Error::runtime(
                        "redis.log() requires two arguments or more.",
                    ));
                }
                let mut it = args.into_iter();
                // A number or a numeric string, truncated as Redis's
                // `int level = lua_tonumber(...)` (`luaLogCommand`).
                let Some(level) = it.next().and_then(|v| lua.coerce_number(v).ok().flatten())
                else {
                    return Err(mlua::Error::runtime(
                        "First argument must be a number (log level).",
                    ));
                };
                let level = level.trunc();
                if !(0.0..=3.0).contains(&level) {
                    // 7.4+ text; redis-server 7.0 says "Invalid debug level.".
                    return Err(mlua::Error::runtime("Invalid log level."));
                }
                let level = level as i64;
                let mut parts = Vec::new();
                for v in it {
                    if let Some(s) = lua.coerce_string(v)? {
                        parts.push(s.to_string_lossy());
                    }
                }
                let msg = parts.join(" ");
                match level {
                    0 => log::debug!("{msg}"),
                    1 | 2 => log::info!("{msg}"),
                    _ => log::warn!("{msg}"),
                }
                Ok(())
            })?,
        )?;
        let resp_holder = holder.clone();
        rs.set(
            "setresp",
            lua.create_function(move |lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(mlua::Error::runtime(
                        "redis.setresp() requires one argument.",
                    ));
                }
                // `int resp = lua_tonumber(...)` (`luaSetResp`): a numeric
                // string counts, a fraction is truncated (2.5 is 2), and
                // anything else is 0.
                let n = args
                    .into_iter()
                    .next()
                    .and_then(|v| lua.coerce_number(v).ok().flatten())
                    .map_or(0, |n| if n.abs() < 1e9 { n.trunc() as i64 } else { 0 });
                if n != 2 && n != 3 {
                    return Err(mlua::Error::runtime("RESP version must be 2 or 3."));
                }
                resp_holder.raw_set("resp", n)
            })?,
        )?;
        rs.set(
            "set_repl",
            lua.create_function(|_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(mlua::Error::runtime(
                        "redis.set_repl() requires one argument.",
                    ));
                }
                match args.front() {
                    Some(Value::Integer(n)) if (0..=3).contains(n) => Ok(()),
                    _ => Err(mlua::Error::runtime(
                        "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                    )),
                }
            })?,
        )?;
        rs.set(
            "acl_check",
            lua.create_function(|_, args: MultiValue| {
                let name = match args.front() {
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    None => {
                        return Err(mlua::Error::runtime(
                            "Please specify at least one argument for this redis lib call",
                        ))
                    }
                    _ => Vec::new(),
                };
                if crate::cmd::table::lookup(&name).is_none() {
                    return Err(mlua::Error::runtime(
                        "Invalid command passed to redis.acl_check_cmd()",
                    ));
                }
                Ok(true)
            })?,
        )?;
        rs.set("handler", lua.create_function(error_handler)?)?;
        // SAFETY: both are plain C functions over the Lua stack (see `call_trampoline`).
        unsafe {
            rs.set("call", lua.create_c_function(redis_call_c)?)?;
            rs.set("pcall", lua.create_c_function(redis_pcall_c)?)?;
        }
        let made: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=prelude")
            .call(rs)?;
        let hook_state: Rc<RefCell<Option<HookRun>>> = Rc::new(RefCell::new(None));
        let in_hook = hook_state.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY_INSTRUCTIONS),
            move |_, _| {
                let mut state = in_hook.borrow_mut();
                let Some(run) = state.as_mut() else {
                    return Ok(VmState::Continue);
                };
                if run.load_deadline.is_some_and(|d| Instant::now() >= d) {
                    run.timed_out = true;
                    return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
                }
                let Some(registry) = run.registry.as_ref() else {
                    return Ok(VmState::Continue);
                };
                let Some(r) = registry.running(run.shard) else {
                    return Ok(VmState::Continue);
                };
                if !run.busy_after.is_zero() && run.start.elapsed() >= run.busy_after {
                    registry.set_busy(run.shard, true);
                }
                if r.kill.load(Ordering::SeqCst) {
                    run.killed = true;
                    return Err(mlua::Error::runtime("Script killed by user"));
                }
                if registry.shutting_down.load(Ordering::Relaxed) {
                    return Err(mlua::Error::runtime(
                        "Script stopped: the server is shutting down",
                    ));
                }
                Ok(VmState::Continue)
            },
        )?;
        Ok(Engine {
            runner0: made.get("run0")?,
            hook_state,
            globals: made.get("G")?,
            holder: made.get("holder")?,
            runner: made.get("run")?,
            load_meta: made.get("load_meta")?,
            run_meta: made.get("run_meta")?,
            lua,
            scripts: HashMap::new(),
            scripts_epoch: 0,
            libs: HashMap::new(),
        })
    }

    /// The environment scripts run in.
    fn env(&self) -> mlua::Result<Table> {
        self.globals.raw_get::<Table>("_G")
    }

    /// Compile an EVAL body (shebang line already blanked).
    ///
    /// # Errors
    /// `ERR Error compiling script (new function): <lua message>`.
    pub fn compile_script(&self, body: &[u8]) -> Result<Function, CmdError> {
        let env = self.env().map_err(lua_internal)?;
        self.lua
            .load(body)
            .set_name("@user_script")
            .set_environment(env)
            .into_function()
            .map_err(|e| {
                CmdError::msg(format!(
                    "ERR Error compiling script (new function): {}",
                    lua_message(&e)
                ))
            })
    }

    /// Run an EVAL script: compiled on first use on this thread (or after
    /// SCRIPT FLUSH, `epoch`), with `KEYS`/`ARGV` set.
    pub fn eval(
        &mut self,
        sha: &str,
        body: &[u8],
        epoch: u64,
        inv: Invocation<'_>,
        exec: &mut Exec<'_>,
    ) -> Reply {
        if epoch != self.scripts_epoch {
            self.scripts.clear();
            self.scripts_epoch = epoch;
        }
        let f = match self.scripts.get(sha) {
            Some(f) => f.clone(),
            None => match self.compile_script(body) {
                Ok(f) => {
                    if self.scripts.len() >= MAX_COMPILED_SCRIPTS {
                        // Recompiled on demand: bounds what scripts never run again keep.
                        self.scripts.clear();
                    }
                    self.scripts.insert(sha.to_string(), f.clone());
                    f
                }
                Err(e) => return Reply::Error(e),
            },
        };
        let (keys, args) = match (self.strings(inv.keys), self.strings(inv.args)) {
            (Ok(k), Ok(a)) => (k, a),
            (Err(e), _) | (_, Err(e)) => return Reply::Error(lua_internal(e)),
        };
        if let Err(e) = self
            .globals
            .raw_set("KEYS", keys)
            .and_then(|_| self.globals.raw_set("ARGV", args))
        {
            return Reply::Error(lua_internal(e));
        }
        let reply = self.run(f, None, inv, false, exec);
        let _ = self.globals.raw_set("KEYS", Value::Nil);
        let _ = self.globals.raw_set("ARGV", Value::Nil);
        reply
    }

    /// Run function `name` of `lib` (loading the library on this thread when
    /// its version is new here) with `keys` and `args` as its two arguments.
    pub fn fcall(
        &mut self,
        lib: &Library,
        name: &str,
        inv: Invocation<'_>,
        exec: &mut Exec<'_>,
    ) -> Reply {
        let cached = self
            .libs
            .get(&lib.name)
            .filter(|(v, _)| *v == lib.version)
            .and_then(|(_, fns)| fns.get(name).cloned());
        let f = match cached {
            Some(f) => f,
            None => match self.load_library(&lib.code) {
                Ok((_, _, fns)) => {
                    let f = fns.get(name).cloned();
                    self.libs.insert(lib.name.clone(), (lib.version, fns));
                    match f {
                        Some(f) => f,
                        None => return Reply::Error(CmdError::msg("ERR Function not found")),
                    }
                }
                Err(e) => return Reply::Error(CmdError::msg(e)),
            },
        };
        let (keys, args) = match (self.strings(inv.keys), self.strings(inv.args)) {
            (Ok(k), Ok(a)) => (k, a),
            (Err(e), _) | (_, Err(e)) => return Reply::Error(lua_internal(e)),
        };
        self.run(f, Some((keys, args)), inv, true, exec)
    }

    /// Run a library's body in the load-time sandbox and collect what it
    /// registered. Returns the library name, its functions' metadata and
    /// the callbacks.
    ///
    /// # Errors
    /// The texts `functionsCreateWithLibraryCtx` / `luaEngineCreate` answer
    /// (redis/src/functions.c, function_lua.c): missing or invalid metadata,
    /// `ERR Engine '<e>' not found`, `ERR Error compiling function: ...`,
    /// `ERR Error registering functions: ...`, `ERR No functions registered`.
    #[allow(clippy::type_complexity)]
    pub fn load_library(
        &mut self,
        code: &[u8],
    ) -> Result<(String, Vec<FunctionMeta>, HashMap<String, Function>), String> {
        let (name, body) = parse_library_header(code)?;
        let env = self.lua.create_table().map_err(|e| e.to_string())?;
        env.set_metatable(Some(self.load_meta.clone()))
            .map_err(|e| e.to_string())?;
        let chunk = self
            .lua
            .load(&body[..])
            .set_name("@user_function")
            .set_environment(env.clone())
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", lua_message(&e)))?;
        let registered = self.lua.create_table().map_err(|e| e.to_string())?;
        self.holder
            .raw_set("registered", registered.clone())
            .map_err(|e| e.to_string())?;
        let now = Instant::now();
        *self.hook_state.borrow_mut() = Some(HookRun {
            start: now,
            busy_after: Duration::ZERO,
            registry: None,
            shard: 0,
            killed: false,
            load_deadline: Some(now + FUNCTION_LOAD_TIMEOUT),
            timed_out: false,
        });
        let outcome: mlua::Result<(bool, Value)> = self.runner.call(chunk);
        let timed_out = self
            .hook_state
            .borrow_mut()
            .take()
            .is_some_and(|run| run.timed_out);
        let _ = self.holder.raw_set("registered", Value::Nil);
        if timed_out {
            return Err("ERR Error registering functions: ERR FUNCTION LOAD timeout".into());
        }
        match outcome {
            Ok((true, _)) => {}
            Ok((false, info)) => {
                let (msg, _, _) = error_parts(&info);
                return Err(format!(
                    "ERR Error registering functions: {}",
                    String::from_utf8_lossy(&msg)
                ));
            }
            Err(e) => return Err(format!("ERR Error registering functions: {e}")),
        }
        let mut metas = Vec::new();
        let mut fns = HashMap::new();
        for item in registered.sequence_values::<Table>() {
            let item = item.map_err(|e| e.to_string())?;
            let fname: String = item.get("name").map_err(|e| e.to_string())?;
            let cb: Function = item.get("callback").map_err(|e| e.to_string())?;
            let description: Option<String> = item.get("description").unwrap_or(None);
            let mut flags = ScriptFlags::default();
            if let Ok(list) = item.get::<Table>("flags") {
                for f in list.sequence_values::<String>().flatten() {
                    flags.set(&f);
                }
            }
            metas.push(FunctionMeta {
                name: fname.clone(),
                description,
                flags,
            });
            fns.insert(fname, cb);
        }
        if metas.is_empty() {
            return Err("ERR No functions registered".into());
        }
        env.set_metatable(Some(self.run_meta.clone()))
            .map_err(|e| e.to_string())?;
        Ok((name, metas, fns))
    }

    /// Drop what this thread cached for library `name` (FUNCTION DELETE/FLUSH
    /// need not call it: a missing library is never looked up; it frees memory).
    pub fn forget_library(&mut self, name: &str) {
        self.libs.remove(name);
    }

    fn strings(&self, items: &[Bytes]) -> mlua::Result<Table> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, b) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(&b[..])?)?;
        }
        Ok(t)
    }

    /// Run `f` under the time limit with `redis.call` bound to `exec`.
    fn run(
        &mut self,
        f: Function,
        fn_args: Option<(Table, Table)>,
        inv: Invocation<'_>,
        is_function: bool,
        exec: &mut Exec<'_>,
    ) -> Reply {
        let running = inv.limits.registry.running(inv.limits.shard);
        if let Some(r) = running {
            r.kill.store(false, Ordering::SeqCst);
            inv.limits.registry.set_busy(inv.limits.shard, false);
            r.wrote.store(false, Ordering::SeqCst);
            r.is_function.store(is_function, Ordering::SeqCst);
            if let Ok(mut n) = r.name.lock() {
                n.clear();
                n.push_str(inv.name);
            }
            r.started_ms
                .store(inv.limits.now_ms.max(1), Ordering::SeqCst);
        }
        *self.hook_state.borrow_mut() = Some(HookRun {
            start: Instant::now(),
            busy_after: Duration::from_millis(inv.limits.busy_after_ms),
            registry: Some(inv.limits.registry.clone()),
            shard: inv.limits.shard,
            killed: false,
            load_deadline: None,
            timed_out: false,
        });
        let _ = self.holder.raw_set("resp", 2);
        let exec = RefCell::new(exec);
        let holder = self.holder.clone();
        let outcome: mlua::Result<(bool, Value, Reply)> = {
            self.lua.scope(|scope| {
                let call = scope.create_function(|lua, args: MultiValue| {
                    let argv = match call_argv(args) {
                        Ok(argv) => argv,
                        Err(msg) => return Ok((err_table(lua, msg.as_bytes())?, true)),
                    };
                    let reply = (exec.borrow_mut())(argv);
                    let failed = reply.is_error();
                    let resp3 = holder.raw_get::<i64>("resp").unwrap_or(2) == 3;
                    let value = match reply {
                        Reply::Error(e) => call_err_table(lua, &e.text())?,
                        reply => reply_to_lua(lua, reply, resp3)?,
                    };
                    Ok((value, failed))
                })?;
                self.lua.set_named_registry_value(CALL_IMPL_KEY, call)?;
                let (ok, value): (bool, Value) = match fn_args {
                    Some((k, a)) => self.runner.call((f, k, a))?,
                    None => self.runner0.call(f)?,
                };
                // Convert inside the scope: the value may hold scoped data.
                let reply = if ok {
                    // Lua booleans are RESP3 booleans once the script chose
                    // RESP3 (redis.setresp(3)), whatever the client speaks.
                    let script_resp3 = self.holder.raw_get::<i64>("resp").unwrap_or(2) == 3;
                    lua_to_reply_top(&self.lua, value.clone(), script_resp3)
                } else {
                    Reply::Ok
                };
                Ok((ok, value, reply))
            })
        };
        let killed = self
            .hook_state
            .borrow_mut()
            .take()
            .is_some_and(|run| run.killed);
        let _ = self.lua.unset_named_registry_value(CALL_IMPL_KEY);
        if let Some(r) = running {
            r.started_ms.store(0, Ordering::SeqCst);
            inv.limits.registry.set_busy(inv.limits.shard, false);
            r.kill.store(false, Ordering::SeqCst);
        }
        let kind = if is_function { "FUNCTION" } else { "SCRIPT" };
        match outcome {
            Ok((true, _, reply)) => reply,
            Ok((false, info, _)) => {
                let (msg, src, line) = error_parts(&info);
                let msg = if killed {
                    format!("ERR Script killed by user with {kind} KILL...").into_bytes()
                } else {
                    msg
                };
                let at = format!(" script: {}, on {src}:{line}.", inv.name);
                let text = [msg, at.into_bytes()].concat();
                Reply::Error(script_error(text, !killed && raised_counted(&info)))
            }
            Err(e) => Reply::Error(CmdError::msg(format!(
                "ERR Error running script: {}",
                lua_message(&e)
            ))),
        }
    }
}

/// Registry key of the current run's `redis.call` implementation: a scoped
/// Rust function answering `(value, failed)`.
const CALL_IMPL_KEY: &str = "shardstream.call";

/// Call the current run's implementation with this call's arguments; leave
/// `(value, failed)` on the stack.
///
/// # Safety
/// `state` is a live Lua state running a C function; the implementation is a
/// function value (a missing one raises a Lua error through `lua_call`).
unsafe fn call_trampoline(state: *mut mlua::ffi::lua_State) {
    let nargs = mlua::ffi::lua_gettop(state);
    mlua::ffi::lua_getfield(
        state,
        mlua::ffi::LUA_REGISTRYINDEX,
        c"shardstream.call".as_ptr(),
    );
    mlua::ffi::lua_insert(state, 1);
    mlua::ffi::lua_call(state, nargs, 2);
}

/// `redis.call`: raises the error table of a failed command.
unsafe extern "C-unwind" fn redis_call_c(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: called by Lua as a C function; nothing here owns Rust values
    // that a Lua error (longjmp) could skip.
    unsafe {
        call_trampoline(state);
        let failed = mlua::ffi::lua_toboolean(state, -1) != 0;
        mlua::ffi::lua_pop(state, 1);
        if failed {
            mlua::ffi::lua_error(state);
        }
    }
    1
}

/// `redis.pcall`: answers the error table of a failed command.
unsafe extern "C-unwind" fn redis_pcall_c(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: as in `redis_call_c`.
    unsafe {
        call_trampoline(state);
        mlua::ffi::lua_pop(state, 1);
    }
    1
}

/// Split `#!lua name=<lib>\n...` into the library name and the body with
/// the header line blanked (line numbers stay those of the source).
///
/// The line is split as `sdssplitargs` splits it (blanks, `\r` and quotes
/// separate words); the engine is the first word after `#!`, matched
/// without case, and `name=` is too.
///
/// # Errors
/// In checking order: `ERR Missing library metadata`, `ERR Invalid library
/// metadata` (no newline, unbalanced quotes), `ERR Invalid metadata value,
/// name argument was given multiple times`, `ERR Invalid metadata value
/// given: <v>`, `ERR Library name was not given`, `ERR Library names can
/// only contain ...`, `ERR Engine '<e>' not found`.
/// # Source
/// `functionExtractLibMetaData` and `functionsCreateWithLibraryCtx`,
/// redis/src/functions.c (7.0+); checked against redis-server 7.0.15.
pub fn parse_library_header(code: &[u8]) -> Result<(String, Vec<u8>), String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(nl) = code.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    let parts = match crate::io::codec::split_args(&code[..nl]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err("ERR Invalid library metadata".into()),
    };
    let engine = String::from_utf8_lossy(parts[0].get(2..).unwrap_or_default()).into_owned();
    let mut name = None;
    for p in &parts[1..] {
        let is_name = p.len() >= 5 && p[..5].eq_ignore_ascii_case(b"name=");
        if !is_name {
            return Err(format!(
                "ERR Invalid metadata value given: {}",
                String::from_utf8_lossy(p)
            ));
        }
        if name.is_some() {
            return Err(
                "ERR Invalid metadata value, name argument was given multiple times".into(),
            );
        }
        name = Some(String::from_utf8_lossy(&p[5..]).into_owned());
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut body = Vec::with_capacity(code.len() - nl);
    body.extend_from_slice(&code[nl..]);
    Ok((name, body))
}

/// The xpcall handler: wraps the error value with where it was raised
/// (`{e = value, src = <chunk source>, line = n}`): the function that raised
/// it, or its caller when that is a C function (`error`, `redis.call`), as
/// Redis reports the place of a script error.
fn error_handler(lua: &Lua, e: Value) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let e = match e {
        Value::UserData(_) | Value::Error(_) => {
            Value::String(lua.create_string(lua_message_of(&e))?)
        }
        other => other,
    };
    t.raw_set("e", e)?;
    let frame = |level: usize| {
        lua.inspect_stack(level, |d| {
            let s = d.source();
            (
                s.what,
                s.source.as_deref().unwrap_or("").to_string(),
                d.current_line(),
            )
        })
    };
    // The sandbox's own helpers (prelude.lua) stand where Redis has C
    // functions: skip them too.
    let place = (1..8)
        .map_while(frame)
        .find(|(what, src, _)| *what != "C" && src != "=prelude");
    if let Some((_, src, line)) = place {
        t.raw_set("src", src)?;
        if let Some(line) = line {
            t.raw_set("line", line as i64)?;
        }
    }
    Ok(t)
}

/// Whether a handler's error record holds an error table a called command
/// answered (`redis.call` raising it, or the script raising a `pcall`'s).
fn raised_counted(info: &Value) -> bool {
    let Value::Table(t) = info else {
        return false;
    };
    matches!(t.raw_get::<Value>("e"), Ok(Value::Table(et)) if is_counted(&et))
}

/// `(message, source, line)` of a handler's error record: an error table's
/// `err` field as is (its bytes, up to a NUL, CR and LF as spaces), any
/// other error value as `ERR <text>`.
fn error_parts(info: &Value) -> (Vec<u8>, String, String) {
    let Value::Table(t) = info else {
        return (
            b"ERR unknown error".to_vec(),
            "@user_script".into(),
            "?".into(),
        );
    };
    let e: Value = t.raw_get("e").unwrap_or(Value::Nil);
    // A number is a string here, as Lua's `lua_isstring` / `lua_tostring`
    // take it (`error({err=5})` answers `-5 ...`).
    let msg: Vec<u8> = match &e {
        Value::Table(et) => match et.raw_get::<Value>("err") {
            Ok(Value::String(s)) => s.as_bytes().to_vec(),
            Ok(Value::Integer(n)) => n.to_string().into_bytes(),
            Ok(Value::Number(n)) => lua_number_text(n).into_bytes(),
            _ => b"ERR unknown error".to_vec(),
        },
        Value::String(s) => [&b"ERR "[..], &s.as_bytes()].concat(),
        Value::Integer(n) => format!("ERR {n}").into_bytes(),
        Value::Number(n) => format!("ERR {}", lua_number_text(*n)).into_bytes(),
        Value::Nil => b"ERR nil".to_vec(),
        other => format!("ERR {}", lua_message_of(other)).into_bytes(),
    };
    let src: String = t
        .raw_get::<Option<String>>("src")
        .ok()
        .flatten()
        .unwrap_or_else(|| "@user_script".into());
    let line = t
        .raw_get::<Option<i64>>("line")
        .ok()
        .flatten()
        .map_or_else(|| "?".to_string(), |l| l.to_string());
    (one_line(c_str(&msg)), src, line)
}

fn lua_message_of(v: &Value) -> String {
    match v {
        Value::Error(e) => lua_message(e),
        Value::String(s) => s.to_string_lossy(),
        other => other.to_string().unwrap_or_else(|_| "error".into()),
    }
}

/// A Lua error's own message (without mlua's traceback or wrapping).
fn lua_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_message(cause),
        mlua::Error::WithContext { cause, .. } => lua_message(cause),
        other => other.to_string(),
    }
}

fn lua_internal(e: mlua::Error) -> CmdError {
    CmdError::msg(format!("ERR Lua engine error: {}", lua_message(&e)))
}

/// Field of an error table that a called command answered (or that
/// refused the call): INFO counted it then, so a script answering with it
/// does not count it again (Redis marks its tables the same way).
const COUNTED_FIELD: &str = "ignore_error_stats_update";

/// The error table of a failed `redis.call` / `redis.pcall`, marked as
/// counted ([`COUNTED_FIELD`]).
fn call_err_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Value> {
    let t = err_table(lua, msg)?;
    if let Value::Table(t) = &t {
        t.raw_set(COUNTED_FIELD, true)?;
    }
    Ok(t)
}

/// Whether error table `t` carries [`COUNTED_FIELD`].
fn is_counted(t: &Table) -> bool {
    matches!(t.raw_get::<Value>(COUNTED_FIELD), Ok(Value::Boolean(true)))
}

/// The error reply with `text`: [`CmdError::FromScriptCall`] when INFO
/// counted it already.
fn script_error(text: impl Into<Bytes>, counted: bool) -> CmdError {
    if counted {
        CmdError::FromScriptCall(text.into())
    } else {
        CmdError::Quoting(text.into())
    }
}

/// `{err = msg}`: `msg` is the error's text as a client would get it
/// (bytes of the request it quotes included as sent).
fn err_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(msg)?)?;
    Ok(Value::Table(t))
}

/// The argv of a `redis.call`: strings as they are, numbers as
/// [`call_number_text`] writes them.
///
/// # Errors
/// Redis's texts for no argument and for a non-string, non-number argument.
fn call_argv(args: MultiValue) -> Result<Vec<Bytes>, &'static str> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(args.len());
    for v in args {
        let b = match v {
            Value::String(s) => Bytes::copy_from_slice(&s.as_bytes()),
            Value::Integer(n) => Bytes::from(n.to_string()),
            Value::Number(n) => Bytes::from(call_number_text(n)),
            _ => return Err("ERR Lua redis lib command arguments must be strings or integers"),
        };
        argv.push(b);
    }
    Ok(argv)
}

/// A Lua number given to `redis.call` as an argument: an integral value
/// within ±`i64::MAX / 2` as an integer (`-0` as `0`), anything else as the
/// shortest text that reads back as the same double, laid out as Redis lays
/// out doubles (`3.141592653589793`, `0.3333333333333333`, `1e+20`). Not
/// Lua's own `%.14g`, which loses digits.
///
/// # Source
/// `luaArgsToRedisArgv`, redis/src/script_lua.c (7.2+): `double2ll` then
/// `ll2string`, else `fpconv_dtoa` (7.0 printed `%.17g`).
fn call_number_text(n: f64) -> String {
    if n == 0.0 {
        return "0".into();
    }
    crate::zset::score::format_score(n)
}

/// How Lua 5.1 prints a number (`%.14g`).
pub fn lua_number_text(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n < 0.0 { "-inf" } else { "inf" }.into();
    }
    // %.14g: 14 significant digits; exponent form when the exponent (after
    // rounding to 14 digits) is below -4 or at least 14.
    let sci = format!("{:.13e}", n);
    let (mant, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    if !(-4..14).contains(&e) {
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim_zeros(mant), e.abs());
    }
    let decimals = (13 - e).max(0) as usize;
    trim_zeros(&format!("{:.*}", decimals, n)).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A reply as the script sees it from `redis.call`, under the script's
/// protocol (`redis.setresp`).
///
/// # Source
/// "RESP2 to Lua type conversion" / "RESP3 to Lua type conversion", Redis's Lua API reference.
pub fn reply_to_lua(lua: &Lua, reply: Reply, resp3: bool) -> mlua::Result<Value> {
    let single = |k: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(k, v)?;
        Ok(Value::Table(t))
    };
    let seq = |items: Vec<Reply>| -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, r) in items.into_iter().enumerate() {
            t.raw_set(i + 1, reply_to_lua(lua, r, resp3)?)?;
        }
        Ok(Value::Table(t))
    };
    Ok(match reply {
        Reply::Ok => single("ok", Value::String(lua.create_string("OK")?))?,
        Reply::Simple(s) => single("ok", Value::String(lua.create_string(&*s)?))?,
        Reply::Int(n) => Value::Number(n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(&b[..])?),
        Reply::NullBulk
        | Reply::NullArray
        | Reply::NoReply
        | Reply::Rerun
        | Reply::OverOutputLimit => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Array(items) => seq(items)?,
        Reply::Set(items) if !resp3 => seq(items)?,
        Reply::Set(items) => {
            let t = lua.create_table()?;
            for r in items {
                t.raw_set(reply_to_lua(lua, r, resp3)?, true)?;
            }
            single("set", Value::Table(t))?
        }
        Reply::Map(pairs) if !resp3 => {
            let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            for (i, (k, v)) in pairs.into_iter().enumerate() {
                t.raw_set(2 * i + 1, reply_to_lua(lua, k, resp3)?)?;
                t.raw_set(2 * i + 2, reply_to_lua(lua, v, resp3)?)?;
            }
            Value::Table(t)
        }
        Reply::Pairs(pairs) if !resp3 => {
            let items = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
            seq(items)?
        }
        Reply::Pairs(pairs) => {
            let items = pairs
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![k, v]))
                .collect();
            seq(items)?
        }
        Reply::PairMap(pairs) if !resp3 => {
            let items = pairs
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![k, v]))
                .collect();
            seq(items)?
        }
        Reply::Map(pairs) | Reply::PairMap(pairs) => {
            let t = lua.create_table()?;
            for (k, v) in pairs {
                t.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
            }
            single("map", Value::Table(t))?
        }
        Reply::Double(d) if resp3 => single("double", Value::Number(d))?,
        Reply::Double(d) => Value::String(lua.create_string(crate::io::codec::format_double(d))?),
        Reply::Bool(b) if resp3 => Value::Boolean(b),
        Reply::Bool(b) => Value::Number(if b { 1.0 } else { 0.0 }),
        Reply::Verbatim(b) if resp3 => {
            let t = lua.create_table()?;
            t.raw_set("format", "txt")?;
            t.raw_set("string", lua.create_string(&b[..])?)?;
            single("verbatim_string", Value::Table(t))?
        }
        Reply::Verbatim(b) => Value::String(lua.create_string(&b[..])?),
        Reply::VerbatimAs { format, text } if resp3 => {
            let t = lua.create_table()?;
            t.raw_set("format", lua.create_string(format)?)?;
            t.raw_set("string", lua.create_string(&text[..])?)?;
            single("verbatim_string", Value::Table(t))?
        }
        Reply::VerbatimAs { text, .. } => Value::String(lua.create_string(&text[..])?),
        Reply::BigNumber(b) if resp3 => {
            single("big_number", Value::String(lua.create_string(&b[..])?))?
        }
        Reply::BigNumber(b) => Value::String(lua.create_string(&b[..])?),
        Reply::Error(e) => err_table(lua, &e.text())?,
        raw @ Reply::Raw(_) => reply_to_lua(lua, raw.expanded(), resp3)?,
        // Only a script's own reply is pre-encoded, and scripts cannot call
        // EVAL or FCALL (`noscript`): no command answers one to a script.
        Reply::PreEncoded(_) => Value::Boolean(false),
    })
}

/// A script's return value as the client's reply.
///
/// Nesting is bounded as Redis bounds it: by the Lua stack its conversion
/// uses. Each value is checked before it is converted, and one that would
/// need slots past Lua's C-stack limit is written as the error `ERR
/// reached lua stack limit` in its place, the rest of the reply unchanged
/// (so a cycle answers about 8000 nested arrays ending in that error). The
/// walk runs on the Lua stack, as Redis's does, rather than through
/// `mlua` values: those hold a reference slot each, and Lua 5.1 has fewer
/// than 8000 of them. A reply nested deeper than [`TREE_REPLY_LEVELS`] is
/// pre-encoded here ([`crate::io::codec::pre_encode`]).
///
/// # Source
/// `luaReplyToRedisReply` (its `lua_checkstack(lua, 4)`),
/// redis/src/script_lua.c (7.0+); limits measured on redis-server 7.0.15:
/// 7994 nested arrays convert, 7995 end in the error, for EVAL and FCALL.
pub fn lua_to_reply_top(lua: &Lua, v: Value, resp3: bool) -> Reply {
    let mut conv = ReplyConv { resp3, levels: 0 };
    let mut out = None;
    // SAFETY: `exec_raw` runs the closure as a C function with `v` as its
    // one argument on the stack; the walk only reads tables (raw gets and
    // `lua_next`, no metamethods) and leaves the stack as it found it less
    // `v`, which `value` pops. A Lua error could only come from running
    // out of memory pushing a field name.
    let ran = unsafe {
        lua.exec_raw::<()>(v, |state| {
            out = Some(conv.value(state, REPLY_TOP_SLOTS, 0));
        })
    };
    let reply = match (ran, out) {
        (Ok(()), Some(reply)) => reply,
        (Err(e), _) => return Reply::Error(lua_internal(e)),
        (Ok(()), None) => return Reply::Error(CmdError::msg("ERR reply conversion did not run")),
    };
    if conv.levels > TREE_REPLY_LEVELS {
        crate::io::codec::pre_encode(reply)
    } else {
        reply
    }
}

/// The error written in place of a value nested past the Lua stack limit.
const STACK_LIMIT: &str = "ERR reached lua stack limit";

/// Lua stack slots in use when Redis starts converting a script's return
/// value (measured: the same for EVAL and FCALL).
const REPLY_TOP_SLOTS: usize = 2;

/// The most slots in use at which a value still converts: Lua 5.1's
/// `LUAI_MAXCSTACK` (8000) less the 4 that each step asks
/// `lua_checkstack` for.
const REPLY_MAX_SLOTS: usize = 8000 - 4;

/// Slots a nested value finds in use beyond its parent's, as Redis's
/// conversion pushes them: an array element (the element), a map key (the
/// map, the iteration key and value, a copy of the key), a map value (the
/// same less the copy), a set member (the set, the key, a copy of it).
const ARRAY_ITEM_SLOTS: usize = 1;
const MAP_KEY_SLOTS: usize = 4;
const MAP_VALUE_SLOTS: usize = 3;
const SET_MEMBER_SLOTS: usize = 3;

/// Nesting levels a converted reply may have and still travel as a tree
/// of [`Reply`] values (which other threads walk and drop recursively).
const TREE_REPLY_LEVELS: usize = 64;

/// One conversion of a script's return value.
struct ReplyConv {
    /// Booleans are RESP3 booleans (`redis.setresp(3)`).
    resp3: bool,
    /// The deepest nesting level converted so far.
    levels: usize,
}

impl ReplyConv {
    /// The value on top of `state`'s stack as a reply; pops it. `slots` is
    /// the stack Redis would have in use with it on top (ours uses one
    /// less), `level` its nesting.
    ///
    /// # Source
    /// "Lua to RESP2 type conversion" / "Lua to RESP3 type conversion",
    /// Redis's Lua API reference: numbers truncate to integers, `{ok=}` /
    /// `{err=}` are status and error replies, an array stops at its first
    /// nil, `true` is 1 and `false` a null unless the script called
    /// `redis.setresp(3)` (then booleans; checked against redis-server).
    fn value(&mut self, state: *mut ffi::lua_State, slots: usize, level: usize) -> Reply {
        crate::script::libs::grow(|| self.value_at(state, slots, level))
    }

    fn value_at(&mut self, state: *mut ffi::lua_State, slots: usize, level: usize) -> Reply {
        // SAFETY (every block below): `state` is the live state `exec_raw`
        // runs us on, with the value to convert on top; each push is
        // within the 4 slots `lua_checkstack` granted at this level.
        if slots > REPLY_MAX_SLOTS || unsafe { ffi::lua_checkstack(state, 4) } == 0 {
            unsafe { ffi::lua_pop(state, 1) };
            return Reply::Error(CmdError::msg(STACK_LIMIT));
        }
        self.levels = self.levels.max(level);
        let reply = match unsafe { ffi::lua_type(state, -1) } {
            ffi::LUA_TSTRING => Reply::Bulk(Bytes::copy_from_slice(unsafe { top_bytes(state) })),
            ffi::LUA_TBOOLEAN => {
                let b = unsafe { ffi::lua_toboolean(state, -1) } != 0;
                match (b, self.resp3) {
                    (b, true) => Reply::Bool(b),
                    (true, false) => Reply::Int(1),
                    (false, false) => Reply::NullBulk,
                }
            }
            ffi::LUA_TNUMBER => Reply::Int(lua_number_to_long_long(unsafe {
                ffi::lua_tonumber(state, -1)
            })),
            ffi::LUA_TTABLE => self.table(state, slots, level),
            _ => Reply::NullBulk,
        };
        unsafe { ffi::lua_pop(state, 1) };
        reply
    }
}

/// The bytes of the string on top of `state`'s stack.
///
/// # Safety
/// The top value is a string; the slice lives as long as it stays there.
unsafe fn top_bytes<'a>(state: *mut ffi::lua_State) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: per the contract, a string: Lua returns its buffer and length.
    unsafe {
        let p = ffi::lua_tolstring(state, -1, &mut len);
        if p.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

/// Push field `name` of the table on top of `state` (a raw get) and
/// answer its Lua type.
///
/// # Safety
/// The top value is a table and one stack slot is free.
unsafe fn push_field(state: *mut ffi::lua_State, name: &std::ffi::CStr) -> std::ffi::c_int {
    // SAFETY: per the contract.
    unsafe {
        ffi::lua_pushstring(state, name.as_ptr());
        ffi::lua_rawget(state, -2)
    }
}

/// A Lua number as Redis turns it into an integer reply: the C cast
/// `(long long)lua_tonumber(...)`, which truncates toward zero and which
/// x86-64 (`cvttsd2si`) answers with `i64::MIN` for NaN and for anything
/// outside the i64 range (`1e30`, `1/0`, `2^63`). Rust's `as` saturates
/// and makes NaN 0, so the out-of-range cases are spelled out; the result
/// is the same on every platform we build for.
///
/// # Source
/// `luaReplyToRedisReply`, redis/src/script_lua.c (7.0+); checked against
/// redis-server 7.0.15 on x86-64.
fn lua_number_to_long_long(n: f64) -> i64 {
    // 2^63: the first double past i64::MAX (which a double cannot hold).
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if n.is_nan() || !(-TWO_POW_63..TWO_POW_63).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// `text` with CR and LF as spaces, as Redis sends an error or status
/// text a script gives it (`addReplyErrorFormatEx`, `addReplyStatusLength`
/// callers): one line.
fn one_line(text: &[u8]) -> Vec<u8> {
    text.iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

/// [`one_line`] of an `err` field: CR and LF at its end are dropped
/// first (`addReplyErrorFormatEx` trims them).
fn error_line(text: &[u8]) -> Vec<u8> {
    let end = text
        .iter()
        .rposition(|&b| b != b'\r' && b != b'\n')
        .map_or(0, |i| i + 1);
    one_line(&text[..end])
}

impl ReplyConv {
    /// The table on top of `state`'s stack as a reply (left there), read by
    /// the first of its fields that applies, in Redis's order: `err`, `ok`
    /// (strings), `double` (a number), `big_number` (a string),
    /// `verbatim_string` (a table with string `format` and `string`), `map`,
    /// `set` (tables); else an array. The RESP3 types become bulk strings
    /// (maps and sets arrays) for a RESP2 client.
    ///
    /// # Source
    /// `luaReplyToRedisReply`, redis/src/script_lua.c (7.0+).
    fn table(&mut self, state: *mut ffi::lua_State, slots: usize, level: usize) -> Reply {
        // SAFETY (every block below): the table is on top of `state`, and
        // `value_at` reserved 4 slots; each block pops what it pushed
        // before the next, so at most 3 are in use at once.
        if unsafe { push_field(state, c"err") } == ffi::LUA_TSTRING {
            // Redis formats it as a C string, trims CR/LF off the end and turns
            // the others into spaces (`addReplyErrorFormatEx`).
            let text = error_line(c_str(unsafe { top_bytes(state) }));
            unsafe { ffi::lua_pop(state, 1) };
            let counted = unsafe {
                let is_bool = push_field(state, c"ignore_error_stats_update") == ffi::LUA_TBOOLEAN;
                let counted = is_bool && ffi::lua_toboolean(state, -1) != 0;
                ffi::lua_pop(state, 1);
                counted
            };
            return Reply::Error(script_error(text, counted));
        }
        unsafe { ffi::lua_pop(state, 1) };
        if unsafe { push_field(state, c"ok") } == ffi::LUA_TSTRING {
            let text = one_line(c_str(unsafe { top_bytes(state) }));
            unsafe { ffi::lua_pop(state, 1) };
            return Reply::Simple(text.into());
        }
        unsafe { ffi::lua_pop(state, 1) };
        if unsafe { push_field(state, c"double") } == ffi::LUA_TNUMBER {
            let d = unsafe { ffi::lua_tonumber(state, -1) };
            unsafe { ffi::lua_pop(state, 1) };
            return Reply::Double(d);
        }
        unsafe { ffi::lua_pop(state, 1) };
        if unsafe { push_field(state, c"big_number") } == ffi::LUA_TSTRING {
            let digits: Vec<u8> = unsafe { top_bytes(state) }
                .iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
                .collect();
            unsafe { ffi::lua_pop(state, 1) };
            return Reply::BigNumber(digits.into());
        }
        unsafe { ffi::lua_pop(state, 1) };
        if unsafe { push_field(state, c"verbatim_string") } == ffi::LUA_TTABLE {
            let verbatim = unsafe {
                let mut found = None;
                if push_field(state, c"format") == ffi::LUA_TSTRING {
                    // The format is read as a C string: its first three
                    // bytes before any NUL, padded with spaces.
                    let mut format = [b' '; 3];
                    let given = top_bytes(state).iter().take_while(|&&c| c != 0);
                    for (slot, &c) in format.iter_mut().zip(given) {
                        *slot = c;
                    }
                    ffi::lua_pushstring(state, c"string".as_ptr());
                    if ffi::lua_rawget(state, -3) == ffi::LUA_TSTRING {
                        let text = Bytes::copy_from_slice(top_bytes(state));
                        found = Some(Reply::VerbatimAs { format, text });
                    }
                    ffi::lua_pop(state, 1);
                }
                ffi::lua_pop(state, 2);
                found
            };
            if let Some(reply) = verbatim {
                return reply;
            }
        } else {
            unsafe { ffi::lua_pop(state, 1) };
        }
        if unsafe { push_field(state, c"map") } == ffi::LUA_TTABLE {
            let mut pairs = Vec::new();
            unsafe { ffi::lua_pushnil(state) };
            // Stack: table, map, key, value; a copy of the key is
            // converted (and popped), then the value.
            while unsafe { ffi::lua_next(state, -2) } != 0 {
                unsafe { ffi::lua_pushvalue(state, -2) };
                let key = self.value(state, slots + MAP_KEY_SLOTS, level + 1);
                let value = self.value(state, slots + MAP_VALUE_SLOTS, level + 1);
                pairs.push((key, value));
            }
            unsafe { ffi::lua_pop(state, 1) };
            return Reply::Map(pairs);
        }
        unsafe { ffi::lua_pop(state, 1) };
        if unsafe { push_field(state, c"set") } == ffi::LUA_TTABLE {
            let mut items = Vec::new();
            unsafe { ffi::lua_pushnil(state) };
            // Stack: table, set, key, value: the value is dropped and a
            // copy of the key converted.
            while unsafe { ffi::lua_next(state, -2) } != 0 {
                unsafe {
                    ffi::lua_pop(state, 1);
                    ffi::lua_pushvalue(state, -1);
                }
                items.push(self.value(state, slots + SET_MEMBER_SLOTS, level + 1));
            }
            unsafe { ffi::lua_pop(state, 1) };
            return Reply::Set(items);
        }
        unsafe { ffi::lua_pop(state, 1) };
        let mut items = Vec::new();
        for i in 1.. {
            if unsafe { ffi::lua_rawgeti(state, -1, i) } == ffi::LUA_TNIL {
                unsafe { ffi::lua_pop(state, 1) };
                break;
            }
            items.push(self.value(state, slots + ARRAY_ITEM_SLOTS, level + 1));
        }
        Reply::Array(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_lua_does() {
        assert_eq!(lua_number_text(10.0), "10");
        assert_eq!(lua_number_text(1.5), "1.5");
        assert_eq!(lua_number_text(1e20), "1e+20");
        assert_eq!(lua_number_text(0.1), "0.1");
        assert_eq!(lua_number_text(-3.25), "-3.25");
        assert_eq!(lua_number_text(1.0 / 3.0), "0.33333333333333");
        // redis.call arguments keep every digit (Redis 7.2+).
        for (n, want) in [
            (std::f64::consts::PI, "3.141592653589793"),
            (1.0 / 3.0, "0.3333333333333333"),
            (2f64.powi(63), "9223372036854776000"),
            (1e20, "1e+20"),
            (-0.0, "0"),
            (42.0, "42"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
        ] {
            assert_eq!(call_number_text(n), want, "{n:e}");
        }
    }

    #[test]
    fn numbers_print_as_lua_tostring() {
        let lua = Lua::new();
        let f: Function = lua
            .load("return function(x) return tostring(x) end")
            .eval()
            .unwrap();
        let mut x = 0.000_012_345_678_9_f64;
        for _ in 0..60 {
            for n in [x, -x, x.trunc(), x * 3.0 + 0.5, 1.0 / x] {
                let want: String = f.call(n).unwrap();
                assert_eq!(lua_number_text(n), want, "{n:e}");
            }
            x *= 7.3;
        }
    }

    #[test]
    fn numbers_become_integers_as_a_c_cast_on_x86_64() {
        assert_eq!(lua_number_to_long_long(3.99), 3);
        assert_eq!(lua_number_to_long_long(-3.99), -3);
        assert_eq!(lua_number_to_long_long(-0.5), 0);
        assert_eq!(lua_number_to_long_long(2f64.powi(62)), 1 << 62);
        assert_eq!(lua_number_to_long_long(-(2f64.powi(63))), i64::MIN);
        for n in [
            2f64.powi(63),
            1e30,
            -1e30,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ] {
            assert_eq!(lua_number_to_long_long(n), i64::MIN, "{n}");
        }
    }

    #[test]
    fn library_header() {
        assert_eq!(
            parse_library_header(b"#!lua name=lib\nx").unwrap(),
            ("lib".to_string(), b"\nx".to_vec())
        );
        assert_eq!(
            parse_library_header(b"lua name=x").unwrap_err(),
            "ERR Missing library metadata"
        );
        assert_eq!(
            parse_library_header(b"#!lua name=x").unwrap_err(),
            "ERR Invalid library metadata"
        );
        assert_eq!(
            parse_library_header(b"#!nosuch name=x\n").unwrap_err(),
            "ERR Engine 'nosuch' not found"
        );
        assert_eq!(
            parse_library_header(b"#!lua\n").unwrap_err(),
            "ERR Library name was not given"
        );
        assert_eq!(
            parse_library_header(b"#!nosuch\n").unwrap_err(),
            "ERR Library name was not given"
        );
        assert_eq!(
            parse_library_header(b"#!LUA NAME=x\r\ny").unwrap(),
            ("x".to_string(), b"\ny".to_vec())
        );
        assert_eq!(
            parse_library_header(b"#!lua name=a name=b\n").unwrap_err(),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(
            parse_library_header(b"#!lua name='x\n").unwrap_err(),
            "ERR Invalid library metadata"
        );
    }

    fn limits() -> RunLimits {
        RunLimits {
            registry: Arc::new(Registry::new(1)),
            shard: 0,
            busy_after_ms: 0,
            now_ms: 1,
        }
    }

    fn eval(body: &str, exec: &mut Exec<'_>) -> Reply {
        let mut e = Engine::new().unwrap();
        let sha = crate::script::sha1_hex(body.as_bytes());
        e.eval(
            &sha,
            body.as_bytes(),
            0,
            Invocation {
                name: &sha,
                keys: &[Bytes::from_static(b"k")],
                args: &[Bytes::from_static(b"a")],
                limits: limits(),
            },
            exec,
        )
    }

    #[test]
    fn conversions_and_sandbox() {
        let mut echo = |argv: Vec<Bytes>| Reply::Bulk(argv[argv.len() - 1].clone());
        assert_eq!(eval("return 3.99", &mut echo), Reply::Int(3));
        assert_eq!(
            eval("return {1, 'x', false, nil, 5}", &mut echo),
            Reply::Array(vec![Reply::Int(1), Reply::bulk_copy("x"), Reply::NullBulk])
        );
        assert_eq!(
            eval("return KEYS[1] .. ARGV[1]", &mut echo),
            Reply::bulk_copy("ka")
        );
        assert_eq!(
            eval("return redis.call('echo', 1.5)", &mut echo),
            Reply::bulk_copy("1.5")
        );
        let Reply::Error(e) = eval("x = 1", &mut echo) else {
            panic!("global write must fail")
        };
        assert!(
            e.to_string()
                .starts_with("ERR user_script:1: Attempt to modify a readonly table script: "),
            "{e}"
        );
        let Reply::Error(e) = eval("return io", &mut echo) else {
            panic!("io must not exist")
        };
        assert!(e.to_string().contains("nonexistent global variable 'io'"));
        let Reply::Error(e) = eval("redis.call = nil", &mut echo) else {
            panic!("redis must be read-only")
        };
        assert!(e.to_string().contains("Attempt to modify a readonly table"));
    }

    #[test]
    fn a_busy_script_is_marked_and_can_be_killed() {
        let registry = Arc::new(Registry::new(1));
        let watcher = registry.clone();
        let t = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !watcher.any_busy() {
                assert!(Instant::now() < deadline, "never busy");
                std::thread::sleep(Duration::from_millis(5));
            }
            watcher.running[0].kill.store(true, Ordering::SeqCst);
        });
        let mut e = Engine::new().unwrap();
        let body = "local i = 0 while true do i = i + 1 end";
        let mut exec = |_argv: Vec<Bytes>| Reply::Ok;
        let reply = e.eval(
            "sha",
            body.as_bytes(),
            0,
            Invocation {
                name: "sha",
                keys: &[],
                args: &[],
                limits: RunLimits {
                    registry: registry.clone(),
                    shard: 0,
                    busy_after_ms: 20,
                    now_ms: 1,
                },
            },
            &mut exec,
        );
        t.join().unwrap();
        let Reply::Error(e) = reply else {
            panic!("not an error: {reply:?}");
        };
        assert_eq!(
            e.to_string(),
            "ERR Script killed by user with SCRIPT KILL... script: sha, on @user_script:1."
        );
        assert!(!registry.any_busy());
    }

    #[test]
    fn errors_from_redis_call_carry_the_line() {
        let mut fail = |_argv: Vec<Bytes>| Reply::Error(CmdError::msg("ERR boom"));
        let Reply::Error(e) = eval("\n\nreturn redis.call('x')", &mut fail) else {
            panic!("must fail")
        };
        let sha = crate::script::sha1_hex(b"\n\nreturn redis.call('x')");
        assert_eq!(
            e.to_string(),
            format!("ERR boom script: {sha}, on @user_script:3.")
        );
        assert_eq!(
            eval("return redis.pcall('x')['err']", &mut fail),
            Reply::bulk_copy("ERR boom")
        );
    }

    #[test]
    fn libraries_register_functions() {
        let mut e = Engine::new().unwrap();
        let (name, metas, fns) = e
            .load_library(
                b"#!lua name=mylib\nredis.register_function{function_name='f', callback=function(k, a) return k[1] end, flags={'no-writes'}, description='d'}",
            )
            .unwrap();
        assert_eq!(name, "mylib");
        assert_eq!(metas[0].name, "f");
        assert!(metas[0].flags.no_writes);
        assert_eq!(metas[0].description.as_deref(), Some("d"));
        assert!(fns.contains_key("f"));
        assert_eq!(
            e.load_library(b"#!lua name=x\nreturn 1").unwrap_err(),
            "ERR No functions registered"
        );
        assert_eq!(
            e.load_library(b"#!lua name=x\nredis.call('ping')").unwrap_err(),
            "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"
        );
    }
}

#[cfg(test)]
mod stack_tests {
    use super::*;

    /// Run `code` on a thread with a shard thread's stack (2 MiB).
    fn on_shard_stack(f: impl FnOnce(&Lua) + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let lua = Lua::new();
                lua.globals()
                    .set("cjson", crate::script::libs::cjson(&lua).unwrap())
                    .unwrap();
                lua.globals()
                    .set("cmsgpack", crate::script::libs::cmsgpack(&lua).unwrap())
                    .unwrap();
                f(&lua)
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn a_cyclic_reply_nests_until_the_lua_stack_limit() {
        on_shard_stack(|lua| {
            let cyclic: Value = lua.load("local t = {} t[1] = t return t").eval().unwrap();
            let Reply::PreEncoded(p) = lua_to_reply_top(lua, cyclic, false) else {
                panic!("a deep reply is pre-encoded");
            };
            let mut want = "*1\r\n".repeat(7995);
            want.push_str("-ERR reached lua stack limit\r\n");
            assert_eq!(p.resp2, want.as_bytes());
            assert_eq!(p.resp3, want.as_bytes());
            assert_eq!(p.errors, vec![CmdError::msg("ERR reached lua stack limit")]);
            // Shallow replies stay trees.
            let v: Value = lua.load("return {1, {map={a='b'}}}").eval().unwrap();
            assert_eq!(
                lua_to_reply_top(lua, v, false),
                Reply::Array(vec![
                    Reply::Int(1),
                    Reply::Map(vec![(Reply::bulk_copy("a"), Reply::bulk_copy("b"))])
                ])
            );
        });
    }

    #[test]
    fn a_cyclic_json_is_an_error() {
        on_shard_stack(|lua| {
            let e = lua
                .load("local t = {} t[1] = t return cjson.encode(t)")
                .exec()
                .unwrap_err();
            assert!(e.to_string().contains("excessive nesting"), "{e}");
        });
    }

    #[test]
    fn deep_msgpack_is_an_error() {
        on_shard_stack(|lua| {
            let e = lua
                .load("return cmsgpack.unpack(string.rep(string.char(0x91), 100000) .. string.char(1))")
                .exec()
                .unwrap_err();
            assert!(e.to_string().contains("Bad data format"), "{e}");
        });
    }
}
