//! `LATENCY HISTOGRAM|LATEST|HISTORY|RESET|DOCTOR|HELP`, and the
//! replication commands of a server without replicas: `ROLE`, `WAIT`.
//!
//! Command latencies come from the per-thread histograms of
//! [`CmdStats`](crate::server::CmdStats) (execution time on the shard that
//! ran the command, `latency-tracking`). shardstream has no latency
//! *monitor*: `latency-monitor-threshold` can be set and read back (CONFIG
//! SET/GET, as tools expect) but no events are sampled, so LATEST and
//! HISTORY have nothing to report.

use bytes::Bytes;

use crate::cmd::connection::{help_reply, run_subcommand};
use crate::cmd::table::{lookup, lookup_sub};
use crate::cmd::{Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::server::LatencyHistogram;

const ADMIN: Flags = Flags::ADMIN
    .with(Flags::NOSCRIPT)
    .with(Flags::LOADING)
    .with(Flags::STALE);
const ACL: &[&str] = &["admin", "slow", "dangerous"];

const fn row(
    name: &'static str,
    arity: i16,
    summary: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec::conn(name, arity, ADMIN, "server", ACL, summary, "2.8.13", f)
}

/// Rows of `LATENCY|<sub>`.
const SUBS: &[CommandSpec] = &[
    CommandSpec {
        since: "7.0.0",
        ..row(
            "LATENCY|HISTOGRAM",
            -2,
            "Returns the cumulative distribution of latencies of a subset or all commands.",
            histogram,
        )
    },
    row(
        "LATENCY|LATEST",
        2,
        "Returns the latest latency samples for all events.",
        latest,
    ),
    row(
        "LATENCY|HISTORY",
        3,
        "Returns timestamp-latency samples for an event.",
        history,
    ),
    row(
        "LATENCY|RESET",
        -2,
        "Resets the latency data for one or more events.",
        reset,
    ),
    row(
        "LATENCY|DOCTOR",
        2,
        "Returns a human-readable latency analysis report.",
        doctor,
    ),
    CommandSpec {
        flags: Flags::LOADING.with(Flags::STALE),
        acl: &["slow"],
        ..row(
            "LATENCY|HELP",
            2,
            "Returns helpful text about the different subcommands.",
            help,
        )
    },
];

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
        name: "LATENCY",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::None,
        acl: &["slow"],
        summary: "A container for latency diagnostics commands.",
        since: "2.8.13",
        group: "server",
        subcommands: SUBS,
        handler: Handler::Conn(run_subcommand),
    },
    CommandSpec::conn(
        "ROLE",
        1,
        Flags::NOSCRIPT
            .with(Flags::LOADING)
            .with(Flags::STALE)
            .with(Flags::FAST),
        "server",
        &["admin", "fast", "dangerous"],
        "Returns the replication role.",
        "2.8.12",
        role,
    ),
    CommandSpec::conn(
        "WAIT",
        3,
        Flags::NOSCRIPT,
        "generic",
        &["slow", "connection"],
        "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
        "3.0.0",
        wait,
    ),
];

/// `ROLE`
///
/// # Reply
/// `["master", 0, []]`: a primary with replication offset 0 and no
/// replicas (shardstream does not replicate).
/// # Source
/// `roleCommand`, redis/src/replication.c.
fn role(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Array(vec![
        Reply::bulk_copy("master"),
        Reply::Int(0),
        Reply::Array(Vec::new()),
    ])
    .into())
}

/// `WAIT numreplicas timeout` — wait until `numreplicas` replicas
/// acknowledged this connection's writes, for at most `timeout` ms (0:
/// for ever). shardstream has no replicas, so the count is always 0: with
/// `numreplicas` ≤ 0 WAIT answers at once; otherwise the client blocks
/// for the whole timeout (INFO `blocked_clients` counts it; `CLIENT
/// UNBLOCK` ends it), as a Redis primary without replicas does. Inside
/// MULTI it answers at once.
///
/// # Reply
/// Integer: the number of replicas that acknowledged (0).
///
/// # Errors
/// `ERR value is not an integer or out of range` (numreplicas); `ERR
/// timeout is not an integer or out of range`, `ERR timeout is negative`,
/// `ERR timeout is out of range` (see [`crate::cmd::args::parse_timeout_ms`]).
///
/// # Source
/// `waitCommand`, redis/src/replication.c; the timeout as
/// `getTimeoutFromObjectOrReply` with `UNIT_MILLISECONDS` (redis/src/timeout.c).
fn wait(_cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let replicas = crate::cmd::args::int_arg(&argv[1])?;
    let timeout_ms = crate::cmd::args::parse_timeout_ms(&argv[2])?;
    let acked = Reply::Int(0);
    if replicas <= 0 {
        return Ok(acked.into());
    }
    Ok(Action::Wait {
        timeout_ms,
        reply: acked,
    })
}

/// `LATENCY HISTOGRAM [command ...]`
///
/// # Reply
/// Map of command name (`xadd`, `config|set`) to a map of `calls` and
/// `histogram_usec` (bucket upper bound in µs → cumulative count, power-of-two
/// buckets from 1024 ns). With names, only those commands (and a container's
/// subcommands) that have data; unknown names are skipped.
/// # Source
/// `latencyCommand`, `fillCommandCDF`, redis/src/latency.c.
fn histogram(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let all = cx.shared.cmdstats.latency_snapshot();
    let wanted: Option<Vec<String>> = (argv.len() > 2).then(|| {
        let mut names = Vec::new();
        for a in &argv[2..] {
            let Some(spec) = lookup(a).or_else(|| find_sub(a)) else {
                continue;
            };
            names.push(spec.name.to_ascii_lowercase());
            names.extend(spec.subcommands.iter().map(|s| s.name.to_ascii_lowercase()));
        }
        names
    });
    let entries = all
        .iter()
        .filter(|(name, _)| wanted.as_ref().is_none_or(|w| w.contains(name)))
        .map(|(name, h)| (Reply::bulk(name.clone()), reply_cdf(h)))
        .collect();
    Ok(Reply::Map(entries).into())
}

/// A `container|sub` name given to LATENCY HISTOGRAM.
fn find_sub(name: &[u8]) -> Option<&'static CommandSpec> {
    let text = String::from_utf8_lossy(name);
    let (container, sub) = text.split_once('|')?;
    lookup_sub(lookup(container.as_bytes())?, sub.as_bytes())
}

/// `{calls, histogram_usec}` of one command's histogram (ns values).
fn reply_cdf(h: &LatencyHistogram) -> Reply {
    let mut buckets = Vec::new();
    let mut cumulative = 0u64;
    for v in h.iter_log(1024, 2.0) {
        let step = v.count_since_last_iteration();
        if step == 0 {
            continue;
        }
        cumulative += step;
        let micros = h.highest_equivalent(v.value_iterated_to()) / 1000;
        buckets.push((Reply::Int(micros as i64), Reply::Int(cumulative as i64)));
    }
    Reply::Map(vec![
        (Reply::bulk_copy("calls"), Reply::Int(h.len() as i64)),
        (Reply::bulk_copy("histogram_usec"), Reply::Map(buckets)),
    ])
}

/// `LATENCY LATEST` — no events are ever recorded: an empty array.
fn latest(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Array(Vec::new()).into())
}

/// `LATENCY HISTORY event` — an empty array (no samples for any event).
fn history(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Array(Vec::new()).into())
}

/// `LATENCY RESET [event ...]` — the number of event series reset: 0.
fn reset(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Int(0).into())
}

/// `LATENCY DOCTOR` — a short report saying the monitor is off.
fn doctor(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Verbatim(
        "The latency monitor records no events in shardstream. Per-command \
         latencies are in INFO latencystats and LATENCY HISTOGRAM.\n"
            .into(),
    )
    .into())
}

/// `LATENCY HELP`
fn help(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(help_reply(&[
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
        "    If no commands are specified then all histograms are replied.",
        "HELP",
        "    Prints this help.",
    ])
    .into())
}
