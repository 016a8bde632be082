//! `SLOWLOG GET|LEN|RESET|HELP`, and which arguments the log redacts (the
//! log itself is [`crate::slowlog`]).
//!
//! A command whose execution takes at least `slowlog-log-slower-than` µs
//! (negative: never; 0: every command; read after the command ran, so the
//! CONFIG SET that lowers it is logged) is recorded with its arguments,
//! client address and name; the log keeps the newest `slowlog-max-len`
//! entries. The time is the one INFO commandstats counts: measured on the
//! shard that ran the command, or on the connection's thread for the
//! commands answered there (CONFIG, CLIENT, SLOWLOG, ...). A command over
//! several shards is timed from dispatch until its merged reply
//! (`io::finish_slow_timer`). A script's calls are logged as its client's
//! (`?:0`, no name). EXEC is never logged (`Flags::SKIP_SLOWLOG`); the
//! commands it runs are, each timed where it ran (`cmd::tx::StepTimer`). A
//! blocking command that parks is logged once it is over
//! (`Waiters::note_parked`).

use bytes::Bytes;

use crate::cmd::args;
use crate::cmd::connection::{help_reply, run_subcommand};
use crate::cmd::{Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::error::CmdError;
use crate::reply::Reply;

/// The configuration parameters whose value `CONFIG SET` hides from
/// SLOWLOG (Redis's `SENSITIVE_CONFIG`), whether or not shardstream has them.
const SENSITIVE_CONFIGS: &[&str] = &[
    "masteruser",
    "masterauth",
    "requirepass",
    "tls-key-file-pass",
    "tls-client-key-file-pass",
];

/// Positions in `argv` that SLOWLOG shows as `(redacted)`, as the Redis
/// commands redact their own arguments while they run:
/// - `AUTH password` / `AUTH username password`: both (a longer AUTH is a
///   syntax error before anything is redacted);
/// - `HELLO ... AUTH username password`: the two after AUTH (none after an
///   option HELLO refuses, nor with a bad protocol version);
/// - `CONFIG SET name value ...`: the value of each sensitive parameter
///   (nothing when the pairs are incomplete: a syntax error first);
/// - `MIGRATE ... AUTH password | AUTH2 username password`.
///
/// # Source
/// `redactClientCommandArgument` callers: `authCommand` (redis/src/acl.c),
/// `helloCommand` (networking.c), `configSetCommand` (config.c),
/// `migrateCommand` (cluster.c), Redis 7.x/8.x.
pub fn redacted_args(argv: &[Bytes]) -> Vec<usize> {
    let Some(name) = argv.first() else {
        return Vec::new();
    };
    let is = |a: &Bytes, w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    if is(name, "MIGRATE") {
        crate::cmd::migrate::redacted_args(argv)
    } else if is(name, "AUTH") {
        match argv.len() {
            2 => vec![1],
            3 => vec![1, 2],
            _ => Vec::new(),
        }
    } else if is(name, "HELLO") {
        let mut out = Vec::new();
        // A bad protocol version is refused before the options are read.
        let version = argv.get(1).and_then(|v| crate::cmd::args::parse_i64(v));
        if argv.len() >= 2 && !matches!(version, Some(2 | 3)) {
            return out;
        }
        // Options left to right, up to the first that HELLO refuses.
        let mut j = 2;
        while j < argv.len() {
            let more = argv.len() - 1 - j;
            if is(&argv[j], "AUTH") && more >= 2 {
                out.extend([j + 1, j + 2]);
                j += 3;
            } else if is(&argv[j], "SETNAME")
                && more >= 1
                && argv[j + 1].iter().all(|b| (b'!'..=b'~').contains(b))
            {
                j += 2;
            } else {
                break;
            }
        }
        out
    } else if is(name, "CONFIG")
        && argv.get(1).is_some_and(|a| is(a, "SET"))
        && argv.len().is_multiple_of(2)
    {
        (2..argv.len())
            .step_by(2)
            .filter(|&i| i + 1 < argv.len())
            .filter(|&i| SENSITIVE_CONFIGS.iter().any(|c| is(&argv[i], c)))
            .map(|i| i + 1)
            .collect()
    } else {
        Vec::new()
    }
}

const ADMIN: Flags = Flags::ADMIN
    .with(Flags::NOSCRIPT)
    .with(Flags::LOADING)
    .with(Flags::STALE);

const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec::conn(name, arity, flags, "server", acl, summary, "2.2.12", f)
}

/// Rows of `SLOWLOG|<sub>`.
const SUBS: &[CommandSpec] = &[
    row(
        "SLOWLOG|GET",
        -2,
        ADMIN,
        &["admin", "slow", "dangerous"],
        "Returns the slow log's entries.",
        get,
    ),
    row(
        "SLOWLOG|LEN",
        2,
        ADMIN,
        &["admin", "slow", "dangerous"],
        "Returns the number of entries in the slow log.",
        len,
    ),
    row(
        "SLOWLOG|RESET",
        2,
        ADMIN,
        &["admin", "slow", "dangerous"],
        "Clears all entries from the slow log.",
        reset,
    ),
    CommandSpec {
        since: "6.2.0",
        ..row(
            "SLOWLOG|HELP",
            2,
            Flags::LOADING.with(Flags::STALE),
            &["slow"],
            "Show helpful text about the different subcommands",
            help,
        )
    },
];

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[CommandSpec {
    name: "SLOWLOG",
    arity: -2,
    flags: Flags::NONE,
    keys: Keys::None,
    acl: &["slow"],
    summary: "A container for slow log commands.",
    since: "2.2.12",
    group: "server",
    subcommands: SUBS,
    handler: Handler::Conn(run_subcommand),
}];

/// `SLOWLOG GET [count]`
///
/// # Reply
/// The newest `count` entries (default 10, -1 for all), newest first, each
/// `[id, unix time, duration µs, [args...], client addr, client name]`.
/// # Errors
/// `ERR count should be greater than or equal to -1` (also for a non-integer).
/// # Source
/// `slowlogCommand`, redis/src/slowlog.c.
fn get(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    if argv.len() > 3 {
        return Err(CmdError::subcommand_syntax("SLOWLOG", &argv[1]));
    }
    let bad = || CmdError::msg("ERR count should be greater than or equal to -1");
    let count = match argv.get(2) {
        None => 10,
        Some(a) => {
            let n = args::int_arg(a).map_err(|_| bad())?;
            if n < -1 {
                return Err(bad());
            }
            if n == -1 {
                usize::MAX
            } else {
                n as usize
            }
        }
    };
    let out = cx
        .shared
        .slowlog
        .newest(count)
        .iter()
        .map(|e| {
            Reply::Array(vec![
                Reply::Int(e.id as i64),
                Reply::Int(e.time_s),
                Reply::Int(e.duration_us as i64),
                Reply::Array(e.argv.iter().map(|a| Reply::Bulk(a.clone())).collect()),
                Reply::bulk(e.addr.clone()),
                Reply::bulk(e.name.clone()),
            ])
        })
        .collect();
    Ok(Reply::Array(out).into())
}

/// `SLOWLOG LEN` — the number of entries.
fn len(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Int(cx.shared.slowlog.len() as i64).into())
}

/// `SLOWLOG RESET` — drop every entry (`+OK`).
fn reset(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cx.shared.slowlog.reset();
    Ok(Reply::Ok.into())
}

/// `SLOWLOG HELP`
fn help(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(help_reply(&[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Print this help.",
    ])
    .into())
}
