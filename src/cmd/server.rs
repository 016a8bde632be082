//! Connection and server commands that need no key: PING, ECHO, QUIT, SELECT,
//! CONFIG, COMMAND, SHUTDOWN. They run on the connection's thread (CONFIG RESETSTAT also
//! visits every shard).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::args::{self, is};
use crate::cmd::connection::{help_reply, run_subcommand};
use crate::cmd::table::{all_specs, lookup, lookup_sub, reply_command_docs, reply_command_info};
use crate::cmd::{merge_ok, on_shard, Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::config::ignored::{Fixed, ALIASES as IGNORED_ALIASES};
use crate::config::Config;
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::ShardId;

const fn conn_cmd(
    name: &'static str,
    arity: i16,
    flags: Flags,
    summary: &'static str,
    since: &'static str,
    group: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec::conn(name, arity, flags, group, &[], summary, since, f)
}

/// A row of this family with ACL categories (subcommands and admin commands).
#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    group: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec {
        acl,
        ..conn_cmd(name, arity, flags, summary, since, group, f)
    }
}

const LS: Flags = Flags::LOADING.with(Flags::STALE);
const ADMIN_NLS: Flags = Flags::ADMIN.with(Flags::NOSCRIPT).with(LS);
const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

/// Rows of `CONFIG|<sub>`.
const CONFIG_SUBS: &[CommandSpec] = &[
    row(
        "CONFIG|GET",
        -3,
        ADMIN_NLS,
        ADMIN_ACL,
        "Returns the effective values of configuration parameters.",
        "2.0.0",
        "server",
        config_get,
    ),
    row(
        "CONFIG|SET",
        -4,
        ADMIN_NLS.with(Flags::AFTER_EARLIER),
        ADMIN_ACL,
        "Sets configuration parameters in-flight.",
        "2.0.0",
        "server",
        config_set,
    ),
    row(
        "CONFIG|RESETSTAT",
        2,
        ADMIN_NLS,
        ADMIN_ACL,
        "Resets the server's statistics.",
        "2.0.0",
        "server",
        config_resetstat,
    ),
    row(
        "CONFIG|REWRITE",
        2,
        ADMIN_NLS,
        ADMIN_ACL,
        "Persists the effective configuration to file.",
        "2.8.0",
        "server",
        config_rewrite,
    ),
    row(
        "CONFIG|HELP",
        2,
        LS,
        &["slow"],
        "Returns helpful text about the different subcommands.",
        "5.0.0",
        "server",
        config_help,
    ),
];

/// Rows of `COMMAND|<sub>`.
const COMMAND_SUBS: &[CommandSpec] = &[
    row(
        "COMMAND|COUNT",
        2,
        LS,
        &["slow", "connection"],
        "Returns a count of commands.",
        "2.8.13",
        "server",
        command_count,
    ),
    row(
        "COMMAND|INFO",
        -2,
        LS,
        &["slow", "connection"],
        "Returns information about one, multiple or all commands.",
        "2.8.13",
        "server",
        command_info,
    ),
    row(
        "COMMAND|DOCS",
        -2,
        LS,
        &["slow", "connection"],
        "Returns documentary information about one, multiple or all commands.",
        "7.0.0",
        "server",
        command_docs,
    ),
    row(
        "COMMAND|LIST",
        -2,
        LS,
        &["slow", "connection"],
        "Returns a list of command names.",
        "7.0.0",
        "server",
        command_list,
    ),
    row(
        "COMMAND|GETKEYS",
        -4,
        LS,
        &["slow", "connection"],
        "Extracts the key names from an arbitrary command.",
        "2.8.13",
        "server",
        command_getkeys,
    ),
    row(
        "COMMAND|HELP",
        2,
        LS,
        &["slow", "connection"],
        "Returns helpful text about the different subcommands.",
        "5.0.0",
        "server",
        command_help,
    ),
];

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
        name: "CONFIG",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::None,
        acl: &["slow"],
        summary: "A container for server configuration commands.",
        since: "2.0.0",
        group: "server",
        subcommands: CONFIG_SUBS,
        handler: Handler::Conn(run_subcommand),
    },
    CommandSpec {
        name: "COMMAND",
        arity: -1,
        flags: LS,
        keys: Keys::None,
        acl: &["slow", "connection"],
        summary: "Returns detailed information about all commands.",
        since: "2.8.13",
        group: "server",
        subcommands: COMMAND_SUBS,
        handler: Handler::Conn(command),
    },
    row(
        "SHUTDOWN",
        -1,
        ADMIN_NLS.with(Flags::NO_MULTI).with(Flags::ALLOW_BUSY),
        ADMIN_ACL,
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        "1.0.0",
        "server",
        shutdown,
    ),
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
    row(
        "TIME",
        1,
        Flags::LOADING.with(Flags::STALE).with(Flags::FAST),
        &["fast"],
        "Returns the server time.",
        "2.6.0",
        "server",
        time,
    ),
];

/// `TIME`
///
/// # Reply
/// Array of two bulk strings: Unix time in seconds, and the microseconds
/// already elapsed in the current second.
/// # Source
/// `timeCommand`, redis/src/server.c.
fn time(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(Reply::Array(vec![
        Reply::bulk(now.as_secs().to_string()),
        Reply::bulk(now.subsec_micros().to_string()),
    ])
    .into())
}

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
/// `ERR value is not an integer or out of range` for a non-integer; `ERR
/// value is out of range, value must between -2147483648 and 2147483647`
/// past a 32-bit int (Redis's `getIntFromObjectOrReply`); `ERR DB index is
/// out of range` outside `0..databases`; `ERR SELECT is not
/// allowed in cluster mode` for a database other than 0 on a multi-node
/// cluster node (Redis Cluster has only database 0).
fn select(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let idx = crate::cmd::args::int_arg(&argv[1])?;
    if i32::try_from(idx).is_err() {
        return Err(CmdError::msg(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if cx.shared.cluster.is_some() && idx != 0 {
        return Err(CmdError::msg("ERR SELECT is not allowed in cluster mode"));
    }
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

// ---------------------------------------------------------------------------
// CONFIG

/// Redis settings shardstream does not implement but clients commonly read
/// (redis-benchmark, test suites): `(name, fixed value)`. CONFIG GET reports
/// them; CONFIG SET accepts only their current value.
const COMPAT_SETTINGS: &[(&str, &str)] = &[("save", "")];

/// Settings Redis marks protected (`PROTECTED_CONFIG`): with its default
/// `enable-protected-configs no` CONFIG SET refuses them with `can't set
/// protected config`. shardstream has no `enable-protected-configs`, so they
/// are never settable at run time.
///
/// # Source
/// `configSetCommand` and the `dir` entry of the config table,
/// redis/src/config.c (7.0+).
const PROTECTED: &[&str] = &["dir"];

/// Settings fixed for the life of the process (threads, sockets and data
/// layout are built from them at start). `port` is settable in Redis: its
/// value is checked first, so a bad value gets Redis's error, and only a
/// good one `can't set immutable config`.
const IMMUTABLE: &[&str] = &[
    "bind",
    "port",
    "shards",
    "io-threads",
    "pin-threads",
    "databases",
    "cluster-config",
    "cluster-mode",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-port",
    "tcp-backlog",
    "enable-debug-command",
    "unixsocket",
    "unixsocketperm",
    "pidfile",
    "logfile",
    "daemonize",
    "supervised",
];

/// Every name CONFIG GET knows, each once, in a fixed order.
fn config_names() -> impl Iterator<Item = &'static str> {
    Config::all_names()
        .chain(IGNORED_ALIASES.iter().map(|(alias, _)| *alias))
        .chain(
            COMPAT_SETTINGS
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| !Config::NAMES.contains(n)),
        )
}

/// Current value of a setting, real or compatibility-only.
fn config_value(cfg: &Config, name: &str) -> Option<String> {
    cfg.get(name).or_else(|| {
        COMPAT_SETTINGS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    })
}

/// `CONFIG GET parameter [parameter ...]`
///
/// Each parameter is a glob pattern (`*`, `?`, `[...]`, `\\`), matched without
/// regard to case against the setting names.
///
/// # Reply
/// A map of setting name → value (RESP2: flat array), each setting once.
/// # Source
/// `configGetCommand`, redis/src/config.c.
fn config_get(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let cfg = cx
        .shared
        .config
        .read()
        .map_err(|_| CmdError::msg("ERR configuration unavailable"))?;
    let patterns = &argv[2..];
    let pairs = config_names()
        .filter(|name| {
            patterns
                .iter()
                .any(|p| glob_match(p, name.as_bytes(), true))
        })
        .filter_map(|name| {
            config_value(&cfg, name).map(|v| (Reply::bulk_copy(name), Reply::bulk(v)))
        })
        .collect();
    Ok(Reply::Map(pairs).into())
}

/// `CONFIG SET parameter value [parameter value ...]`
///
/// Applies every pair or none. Changes take effect for new work at once:
/// `requirepass` and `tcp-keepalive` for new connections, `timeout`,
/// `maxclients`, `maxmemory`, `client-output-buffer-limit`,
/// `proto-max-bulk-len`, `client-query-buffer-limit` on the next read,
/// `stream-node-max-*` for new stream nodes.
///
/// # Reply
/// `+OK`.
/// # Errors
/// * `ERR syntax error` for an odd number of arguments
/// * `ERR Unknown option or number of arguments for CONFIG SET - '<name>'`
/// * `ERR CONFIG SET failed (possibly related to argument '<name>') - <reason>`
///   where reason is, checked in this order over all pairs: `can't set
///   immutable config`, `can't set protected config` (`dir`), `duplicate
///   parameter` (these three name the argument as given, `'DIR'`); then,
///   pair by pair, the value error (`argument couldn't be
///   parsed into an integer`, `argument must be a memory value`, `argument
///   must be between <lo> and <hi> inclusive`, ...), with Redis's texts and
///   ranges for the same input. A good `port` value answers `can't set
///   immutable config` (the listener is built at start). Raising
///   `maxclients` past what the open files limit can be raised to answers
///   `The operating system is not able to handle the specified number of
///   clients, try with <n>` (Redis's `updateMaxclients`).
/// # Source
/// `configSetCommand`, redis/src/config.c.
fn config_set(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let pairs = &argv[2..];
    if !pairs.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let failed = |name: &str, why: &str| {
        CmdError::msg(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let mut seen: Vec<String> = Vec::new();
    for pair in pairs.chunks_exact(2) {
        // These three errors name the argument as the client spelled it.
        let given = args::text(&pair[0]);
        let name = given.to_ascii_lowercase();
        if !config_names().any(|n| n == name) {
            return Err(CmdError::quoting(&[
                b"ERR Unknown option or number of arguments for CONFIG SET - '",
                args::c_str(&pair[0]),
                b"'",
            ]));
        }
        let fixed = crate::config::ignored::find(&name).map(|row| row.3);
        if (IMMUTABLE.contains(&name.as_str()) && name != "port") || fixed == Some(Fixed::Immutable)
        {
            return Err(failed(&given, "can't set immutable config"));
        }
        if PROTECTED.contains(&name.as_str()) || fixed == Some(Fixed::Protected) {
            return Err(failed(&given, "can't set protected config"));
        }
        if seen.contains(&name) {
            return Err(failed(&given, "duplicate parameter"));
        }
        seen.push(name);
    }
    let mut cfg = cx
        .shared
        .config
        .write()
        .map_err(|_| CmdError::msg("ERR configuration unavailable"))?;
    let mut next = cfg.clone();
    for pair in pairs.chunks_exact(2) {
        let name = args::text(&pair[0]).to_ascii_lowercase();
        let value = args::text(&pair[1]);
        if cfg.get(&name).is_some() {
            next.set(&name, &value).map_err(|e| failed(&name, &e))?;
            if IMMUTABLE.contains(&name.as_str()) {
                // `port`: a good value, but the listener cannot move.
                return Err(failed(&name, "can't set immutable config"));
            }
        } else if config_value(&cfg, &name).is_some_and(|v| !v.eq_ignore_ascii_case(&value)) {
            // A compatibility-only setting: only its fixed value is accepted.
            return Err(failed(&name, "can't set immutable config"));
        }
    }
    if next.maxclients > cfg.maxclients {
        // As redis-server (`updateMaxclients`): make room under the open
        // files limit, or refuse with how many clients would fit.
        use crate::nofile::Fit;
        let fits = match crate::nofile::fit(next.maxclients, cfg.shards) {
            Fit::Short { maxclients, .. } => Some(maxclients),
            Fit::TooLow { .. } => Some(1),
            Fit::Raised { .. } | Fit::Enough | Fit::Unknown(_) => None,
        };
        if let Some(n) = fits {
            return Err(failed(
                "maxclients",
                &format!("The operating system is not able to handle the specified number of clients, try with {n}"),
            ));
        }
    }
    let aof_turned_on = !cfg.appendonly && next.appendonly;
    *cfg = next;
    cx.shared.tunables.update(&cfg);
    if let Some(c) = &cx.shared.cluster {
        c.apply_config(&cfg);
    }
    cx.shared
        .cmdstats
        .latency_tracking
        .store(cfg.latency_tracking, Ordering::Relaxed);
    cx.shared
        .slowlog
        .slower_than_us
        .store(cfg.slowlog_log_slower_than_us, Ordering::Relaxed);
    cx.shared
        .slowlog
        .max_len
        .store(cfg.slowlog_max_len, Ordering::Relaxed);
    crate::logging::set_level(cfg.loglevel);
    cx.shared.config_epoch.fetch_add(1, Ordering::SeqCst);
    if cfg.maxmemory_bytes > 0 {
        // Sample now, so a pipelined write right after this is judged fairly.
        cx.shared
            .stats
            .used_memory_cached_bytes
            .store(crate::alloc_stats::used_memory_bytes(), Ordering::Relaxed);
    }
    if aof_turned_on {
        // As Redis's startAppendOnly: the rewrite that writes the first
        // base file starts before the reply, so INFO shows it in progress
        // (a client waiting on aof_rewrite_in_progress sees it).
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
        return Ok(Action::FanOut {
            parts,
            merge: Box::new(merge_ok),
        });
    }
    Ok(Reply::Ok.into())
}

/// `CONFIG RESETSTAT` — zero INFO's counters: server stats (with
/// `evicted_keys`, as Redis), commandstats, every shard's counters (ops,
/// expired keys, hits, misses) and INFO shardstream's (local and remote
/// commands, handovers, cross-shard transactions and holds, spins).
///
/// # Reply
/// `+OK`.
/// # Source
/// `resetServerStats` via `configResetStatCommand`, redis/src/config.c.
fn config_resetstat(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let st = &cx.shared.stats;
    for c in [
        &st.total_connections_received,
        &st.rejected_connections,
        &st.total_error_replies,
        &st.client_query_buffer_limit_disconnections,
        &st.client_output_buffer_limit_disconnections,
        &st.evicted_keys,
        &st.conn_handovers,
        &st.cross_shard_txs,
        &st.cross_shard_holds,
    ] {
        c.store(0, Ordering::Relaxed);
    }
    for t in &cx.shared.thread_stats {
        for c in t.reset_counters() {
            c.store(0, Ordering::Relaxed);
        }
    }
    cx.shared.cmdstats.reset();
    let parts = (0..cx.shared.shards)
        .map(|i| {
            (
                ShardId(i),
                on_shard(|db, _cx| {
                    db.stats = Default::default();
                    Reply::Ok
                }),
            )
        })
        .collect();
    Ok(Action::FanOut {
        parts,
        merge: Box::new(merge_ok),
    })
}

/// `CONFIG REWRITE` — write the running configuration into the config file
/// the server was started with (see [`crate::config_rewrite`]).
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR The server is running without a config file`; `ERR Rewriting
/// config file: <os error>` when the file cannot be written.
/// # Source
/// `configRewriteCommand`, redis/src/config.c.
fn config_rewrite(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let cfg = cx
        .shared
        .config
        .read()
        .map_err(|_| CmdError::msg("ERR configuration unavailable"))?
        .clone();
    let Some(path) = cfg.config_file.clone() else {
        return Err(CmdError::msg(
            "ERR The server is running without a config file",
        ));
    };
    crate::config_rewrite::rewrite_file(&path, &cfg)
        .map_err(|e| CmdError::msg(format!("ERR Rewriting config file: {e}")))?;
    log::info!("CONFIG REWRITE executed with success.");
    Ok(Reply::Ok.into())
}

/// `CONFIG HELP` — an array of simple strings.
fn config_help(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(help_reply(&[
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern> [<pattern> ...]",
        "    Return the settings whose names match any glob-style <pattern>, with their values.",
        "SET <directive> <value> [<directive> <value> ...]",
        "    Change settings at run time; all of them or none.",
        "RESETSTAT",
        "    Zero the statistics reported by INFO.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Print this help.",
    ])
    .into())
}

/// Glob match as Redis's `stringmatchlen`: `*`, `?`, `[abc]`, `[^a-z]`, `\x`.
/// Private to CONFIG GET and COMMAND LIST for now.
fn glob_match(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut i) = (0usize, 0usize);
    // Backtrack point: (pattern index after '*', string index it matched up to).
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() {
            let step = match pat[p] {
                b'*' => {
                    star = Some((p + 1, i));
                    p += 1;
                    continue;
                }
                b'?' if i < s.len() => Some(p + 1),
                b'[' if i < s.len() => class_match(pat, p, s[i], nocase),
                b'\\' if p + 1 < pat.len() => {
                    (i < s.len() && eq(pat[p + 1], s[i])).then_some(p + 2)
                }
                c if i < s.len() && eq(c, s[i]) => Some(p + 1),
                _ => None,
            };
            if let Some(np) = step {
                p = np;
                i += 1;
                continue;
            }
        } else if i == s.len() {
            return true;
        }
        match star {
            Some((sp, si)) if si < s.len() => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// Match `c` against the class starting at `pat[start] == b'['`; the pattern
/// index after the class when it matches.
fn class_match(pat: &[u8], start: usize, c: u8, nocase: bool) -> Option<usize> {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let c = fold(c);
    let mut p = start + 1;
    let negate = pat.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    while p < pat.len() && pat[p] != b']' {
        if pat[p] == b'\\' && p + 1 < pat.len() {
            hit |= fold(pat[p + 1]) == c;
            p += 2;
        } else if p + 2 < pat.len() && pat[p + 1] == b'-' && pat[p + 2] != b']' {
            let (a, b) = (fold(pat[p]), fold(pat[p + 2]));
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            hit |= (lo..=hi).contains(&c);
            p += 3;
        } else {
            hit |= fold(pat[p]) == c;
            p += 1;
        }
    }
    // An unterminated class ends the pattern (as Redis treats it).
    (hit != negate).then_some(p + 1)
}

// ---------------------------------------------------------------------------
// COMMAND

/// `COMMAND` — `COMMAND INFO` of every command; with a subcommand, that subcommand.
///
/// # Reply
/// An array of command info arrays (see [`reply_command_info`]).
/// # Source
/// `commandCommand`, redis/src/server.c.
fn command(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    if argv.len() > 1 {
        return run_subcommand(cx, argv);
    }
    Ok(Reply::Array(all_specs().iter().map(|s| reply_command_info(s)).collect()).into())
}

/// `COMMAND COUNT` — the number of top-level commands.
fn command_count(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Int(all_specs().len() as i64).into())
}

/// A command or `container|sub` row by name, any case.
fn find_spec(name: &[u8]) -> Option<&'static CommandSpec> {
    match name.iter().position(|&b| b == b'|') {
        Some(bar) => {
            let container = lookup(name.get(..bar)?)?;
            lookup_sub(container, name.get(bar + 1..)?)
        }
        None => lookup(name),
    }
}

/// `COMMAND INFO [command-name ...]` — info of each named command (all when
/// none named); a null for unknown names.
fn command_info(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    if argv.len() == 2 {
        return Ok(
            Reply::Array(all_specs().iter().map(|s| reply_command_info(s)).collect()).into(),
        );
    }
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|n| find_spec(n).map_or(Reply::NullBulk, reply_command_info))
            .collect(),
    )
    .into())
}

/// `COMMAND DOCS [command-name ...]` — a map of name → docs for each known
/// named command (all when none named); unknown names are left out.
fn command_docs(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let specs: Vec<&'static CommandSpec> = if argv.len() == 2 {
        all_specs().to_vec()
    } else {
        argv[2..].iter().filter_map(|n| find_spec(n)).collect()
    };
    Ok(Reply::Map(
        specs
            .into_iter()
            .map(|s| {
                (
                    Reply::bulk(s.name.to_ascii_lowercase()),
                    reply_command_docs(s),
                )
            })
            .collect(),
    )
    .into())
}

/// `COMMAND LIST [FILTERBY <MODULE module-name | ACLCAT category | PATTERN pattern>]`
///
/// # Reply
/// Array of command names, subcommands included as `container|sub`.
/// # Errors
/// `ERR syntax error` for any other argument shape.
fn command_list(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    enum Filter<'a> {
        All,
        Module,
        AclCat(&'a [u8]),
        Pattern(&'a [u8]),
    }
    let filter = match argv {
        [_, _] => Filter::All,
        [_, _, by, kind, val] if is(by, "FILTERBY") => {
            if is(kind, "MODULE") {
                Filter::Module
            } else if is(kind, "ACLCAT") {
                Filter::AclCat(val)
            } else if is(kind, "PATTERN") {
                Filter::Pattern(val)
            } else {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let keep = |s: &CommandSpec| match &filter {
        Filter::All => true,
        Filter::Module => false,
        Filter::AclCat(c) => s.acl.iter().any(|a| a.as_bytes().eq_ignore_ascii_case(c)),
        Filter::Pattern(p) => glob_match(p, s.name.as_bytes(), true),
    };
    let mut out = Vec::new();
    for s in all_specs() {
        for row in std::iter::once(*s).chain(s.subcommands.iter()) {
            if keep(row) {
                out.push(Reply::bulk(row.name.to_ascii_lowercase()));
            }
        }
    }
    Ok(Reply::Array(out).into())
}

/// Commands whose key list may be empty (Redis's `no_mandatory_keys` flag):
/// `COMMAND GETKEYS` answers an empty array for them instead of an error.
const NO_MANDATORY_KEYS: &[&str] = &[
    "EVAL",
    "EVALSHA",
    "EVAL_RO",
    "EVALSHA_RO",
    "FCALL",
    "FCALL_RO",
];

/// `COMMAND GETKEYS command arg [arg ...]` — the keys of a full command line,
/// from the command table's key positions. Arity -4, as in Redis: at least one
/// argument after the command name (`COMMAND GETKEYS get` is an arity error
/// of `command|getkeys` itself).
///
/// # Reply
/// Array of key names (empty for a command without mandatory keys, e.g.
/// `EVAL s 0`).
/// # Errors
/// In Redis's order:
/// * `ERR Invalid command specified` — unknown command or subcommand
/// * `ERR The command has no key arguments` — checked before the arity
/// * `ERR Invalid number of arguments specified for command` — arity
/// * `ERR Invalid arguments specified for command` — keys cannot be found
///   (e.g. XREAD without a well-formed STREAMS section)
/// # Source
/// `getKeysSubcommandImpl`, redis/src/server.c (7.0; same texts in 8.x).
fn command_getkeys(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let inner = &argv[2..];
    let invalid = || CmdError::msg("ERR Invalid command specified");
    let mut spec = inner.first().and_then(|n| lookup(n)).ok_or_else(invalid)?;
    if !spec.subcommands.is_empty() && inner.len() >= 2 {
        spec = lookup_sub(spec, &inner[1]).ok_or_else(invalid)?;
    }
    if spec.keys == Keys::None {
        return Err(CmdError::msg("ERR The command has no key arguments"));
    }
    if !spec.arity_ok(inner.len()) {
        return Err(CmdError::msg(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let keys = spec.key_indexes(inner);
    if keys.is_empty() && !NO_MANDATORY_KEYS.contains(&spec.name) {
        return Err(CmdError::msg("ERR Invalid arguments specified for command"));
    }
    Ok(Reply::Array(
        keys.into_iter()
            .filter_map(|i| inner.get(i).cloned().map(Reply::Bulk))
            .collect(),
    )
    .into())
}

/// `COMMAND HELP` — an array of simple strings.
fn command_help(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(help_reply(&[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all commands.",
        "COUNT",
        "    Return the number of commands.",
        "DOCS [<command-name> ...]",
        "    Return documentation of the given commands, or of all of them.",
        "GETKEYS <full-command>",
        "    Return the keys of a full command line.",
        "INFO [<command-name> ...]",
        "    Return details about the given commands, or about all of them.",
        "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
        "    Return the names of all commands, optionally filtered.",
        "HELP",
        "    Print this help.",
    ])
    .into())
}

// ---------------------------------------------------------------------------
// SHUTDOWN

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`
///
/// Stops the server: every shard thread closes its connections, flushes its
/// AOF and exits. The calling connection is closed without a reply, as Redis does.
/// NOSAVE/SAVE/NOW/FORCE are accepted (there is nothing to save and no
/// replica to wait for).
///
/// # Errors
/// * `ERR No shutdown in progress.` — ABORT (a shutdown is never pending)
/// * `ERR syntax error` — unknown option, NOSAVE with SAVE, ABORT with others
/// # Source
/// `shutdownCommand`, redis/src/db.c.
fn shutdown(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for a in &argv[1..] {
        if is(a, "NOSAVE") {
            nosave = true;
        } else if is(a, "SAVE") {
            save = true;
        } else if is(a, "ABORT") {
            abort = true;
        } else if !(is(a, "NOW") || is(a, "FORCE")) {
            return Err(CmdError::Syntax);
        }
    }
    if (save && nosave) || (abort && argv.len() > 2) {
        return Err(CmdError::Syntax);
    }
    if abort {
        return Err(CmdError::msg("ERR No shutdown in progress."));
    }
    cx.shared.request_shutdown();
    Ok(Action::Drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_like_redis() {
        let m = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes(), true);
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("max*", "maxclients"));
        assert!(m("MAX*", "maxclients"));
        assert!(!m("max*", "timeout"));
        assert!(m("*-len", "proto-max-bulk-len"));
        assert!(m("t?meout", "timeout"));
        assert!(m("[st]imeout", "timeout"));
        assert!(!m("[^t]imeout", "timeout"));
        assert!(m("[a-z]*", "port"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("*a*b*", "xxaxxbxx"));
        assert!(!m("*a*b", "xxaxxbxx"));
        assert!(!glob_match(b"ABC", b"abc", false));
    }

    #[test]
    fn config_names_are_unique() {
        let names: Vec<_> = config_names().collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert!(names.contains(&"save"));
    }

    #[test]
    fn spec_lookup_by_pipe_name() {
        assert_eq!(find_spec(b"config|get").map(|s| s.name), Some("CONFIG|GET"));
        assert_eq!(find_spec(b"CONFIG").map(|s| s.name), Some("CONFIG"));
        assert!(find_spec(b"config|nope").is_none());
        assert!(find_spec(b"|").is_none());
    }
}
