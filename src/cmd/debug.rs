//! `DEBUG`: the subcommands Redis's test suites use, behind
//! `enable-debug-command` (default `no`, as Redis; see [`gate_debug`]).
//!
//! * `SLEEP seconds`: every shard thread sleeps that long at once, so the
//!   whole server is unresponsive, as Redis's single thread is;
//! * `SET-ACTIVE-EXPIRE 0|1`: stop or resume every shard's active expiry;
//! * `OBJECT key`: Redis's one-line description of the value;
//! * `RELOAD` and `LOADAOF`: every shard writes its data out in the
//!   append-only file's rewrite format, empties itself and loads that back
//!   (see [`apply_reload`]); what Redis's suites check with them — that
//!   stream IDs, lengths, groups, PELs and metadata survive persistence —
//!   is what that round trip checks;
//! * `CHANGE-REPL-ID`, `LOG message`: accepted (`+OK`).

use bytes::Bytes;

use crate::cmd::args::{self, is};
use crate::cmd::connection::help_reply;
use crate::cmd::{merge_ok, on_shard, Action, CommandSpec, ConnCtx, Flags, Merge};
use crate::error::CmdError;
use crate::io::socket::Endpoint;
use crate::reply::Reply;
use crate::route::slot::ShardId;
use crate::shard::db::{ShardDb, Value};
use crate::shard::msg::ExecCtx;

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[CommandSpec::conn(
    "DEBUG",
    -2,
    Flags::ADMIN
        .with(Flags::NOSCRIPT)
        .with(Flags::LOADING)
        .with(Flags::STALE),
    "server",
    &["admin", "slow", "dangerous"],
    "A container for debugging commands.",
    "1.0.0",
    debug,
)];

/// Whether `enable-debug-command` lets this client run DEBUG: `yes` for
/// everyone, `local` for loopback and Unix socket clients, `no` never.
///
/// # Errors
/// `ERR DEBUG command not allowed. If the enable-debug-command option is set
/// to "local", you can run it from a local connection, otherwise you need to
/// set this option in the configuration file, and then restart the server.`
/// # Source
/// `processCommand` (`CMD_PROTECTED`) and `allowProtectedAction`, redis/src/server.c.
pub fn gate_debug(setting: &str, peer: &Endpoint) -> Result<(), CmdError> {
    let allowed = match setting {
        "yes" => true,
        "local" => peer.ip().is_none_or(|ip| ip.is_loopback()),
        _ => false,
    };
    if allowed {
        return Ok(());
    }
    Err(CmdError::msg(
        "ERR DEBUG command not allowed. If the enable-debug-command option is set to \
         \"local\", you can run it from a local connection, otherwise you need to set this \
         option in the configuration file, and then restart the server.",
    ))
}

/// `DEBUG subcommand [argument ...]`
///
/// # Reply
/// `+OK` for SLEEP, SET-ACTIVE-EXPIRE, RELOAD, LOADAOF, CHANGE-REPL-ID, LOG;
/// a status line for OBJECT; an array of lines for HELP.
/// # Errors
/// `ERR no such key` (OBJECT); `ERR DEBUG RELOAD only supports the MERGE,
/// NOFLUSH and NOSAVE options.`; `ERR Error trying to load the AOF files,
/// check server logs.` when a shard's data does not load back;
/// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try DEBUG HELP.`
/// # Source
/// `debugCommand`, redis/src/debug.c.
fn debug(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let sub = &argv[1];
    let n = argv.len();
    let every_shard = |f: fn(f64) -> crate::cmd::ShardReq, x: f64| -> Action {
        Action::FanOut {
            parts: (0..cx.shared.shards).map(|i| (ShardId(i), f(x))).collect(),
            merge: Box::new(merge_ok),
        }
    };
    if is(sub, "HELP") && n == 2 {
        return Ok(help().into());
    }
    if is(sub, "SLEEP") && n == 3 {
        // Redis parses with strtod and ignores trailing junk; non-numbers sleep 0.
        let secs = args::text(&argv[2]).trim().parse::<f64>().unwrap_or(0.0);
        let secs = if secs.is_finite() { secs.max(0.0) } else { 0.0 };
        return Ok(every_shard(
            |s| {
                on_shard(move |_db, _cx| {
                    std::thread::sleep(std::time::Duration::from_secs_f64(s.min(1e9)));
                    Reply::Ok
                })
            },
            secs,
        ));
    }
    if is(sub, "SET-ACTIVE-EXPIRE") && n == 3 {
        // Redis uses atoi: anything non-numeric is 0 (off).
        let on = args::text(&argv[2]).trim().parse::<i64>().unwrap_or(0) != 0;
        return Ok(every_shard(
            |on| {
                on_shard(move |db, _cx| {
                    db.active_expire_enabled = on != 0.0;
                    Reply::Ok
                })
            },
            if on { 1.0 } else { 0.0 },
        ));
    }
    if is(sub, "OBJECT") && n == 3 {
        let key = argv[2].clone();
        let shard = cx.shared.shard_of(&key);
        let req = on_shard(move |db, cx| apply_debug_object(db, cx, &key));
        return Ok(Action::FanOut {
            parts: vec![(shard, req)],
            merge: Box::new(first_part),
        });
    }
    if is(sub, "RELOAD") {
        for opt in &argv[2..] {
            if !(is(opt, "MERGE") || is(opt, "NOFLUSH") || is(opt, "NOSAVE")) {
                return Err(CmdError::msg(
                    "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
                ));
            }
        }
        return Ok(reload_everywhere(cx));
    }
    if is(sub, "LOADAOF") && n == 2 {
        return Ok(reload_everywhere(cx));
    }
    if (is(sub, "CHANGE-REPL-ID") && n == 2) || (is(sub, "LOG") && n == 3) {
        return Ok(Reply::Ok.into());
    }
    Err(CmdError::subcommand_syntax("DEBUG", sub))
}

/// The single part's reply, unchanged.
fn first_part(parts: Vec<Reply>) -> Reply {
    parts.into_iter().next().unwrap_or(Reply::NullBulk)
}

/// RELOAD / LOADAOF on every shard; the first failure is the reply.
fn reload_everywhere(cx: &ConnCtx<'_>) -> Action {
    let parts = (0..cx.shared.shards)
        .map(|i| {
            (
                ShardId(i),
                on_shard(|db, cx| match apply_reload(db, cx.now_ms) {
                    Ok(()) => Reply::Ok,
                    Err(e) => {
                        eprintln!("DEBUG RELOAD on shard {}: {e}", db.id.0);
                        Reply::Error(CmdError::msg(
                            "ERR Error trying to load the AOF files, check server logs.",
                        ))
                    }
                }),
            )
        })
        .collect();
    let merge: Merge = Box::new(|parts: Vec<Reply>| {
        parts
            .into_iter()
            .find(|r| matches!(r, Reply::Error(_)))
            .unwrap_or(Reply::Ok)
    });
    Action::FanOut { parts, merge }
}

/// Write this shard's data out as an AOF rewrite would (the base-file
/// format: one record set per key), load it into an empty shard with the
/// same settings, and take that shard's keyspaces. Blocked readers, the
/// AOF log and statistics stay; nothing is written to the AOF (the data is
/// the same).
///
/// # Errors
/// The loader's message when a record does not replay (a persistence bug:
/// the data is left as it was).
/// # Source
/// Redis's `DEBUG RELOAD` (save + `emptyData` + load) and `DEBUG LOADAOF`.
pub fn apply_reload(db: &mut ShardDb, now_ms: u64) -> Result<(), String> {
    let snap = crate::aof::rewrite::snapshot(db, now_ms);
    let mut bytes = Vec::new();
    crate::aof::rewrite::serialize(&snap, &mut bytes).map_err(|e| e.to_string())?;
    let mut fresh = ShardDb::new(db.id, db.shards, db.databases());
    fresh.tunables = db.tunables.clone();
    fresh.slot_map = db.slot_map.clone();
    crate::aof::load::load_bytes(&mut fresh, &bytes)?;
    db.take_keyspaces(fresh);
    Ok(())
}

/// `DEBUG OBJECT key` on the owning shard.
///
/// # Reply
/// Status: `Value at:0x... refcount:1 encoding:<enc> serializedlength:<n>
/// lru:<clock> lru_seconds_idle:<s>`: the key's last access on Redis's
/// 24-bit seconds clock, and seconds since. Not an access itself.
/// # Errors
/// `ERR no such key`.
pub fn apply_debug_object(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Reply {
    let Some(entry) = db.peek(cx.db, key, cx.now_ms) else {
        return Reply::Error(CmdError::msg("ERR no such key"));
    };
    let (encoding, len) = match &entry.value {
        Value::Stream(s) => ("stream", s.memory_usage_bytes()),
        Value::Str(s) => (crate::cmd::object::string_encoding(s), s.len()),
        Value::List(l) => (l.encoding(), l.memory_usage_bytes()),
        Value::Set(s) => (s.encoding(), s.memory_usage_bytes()),
        Value::Zset(z) => (crate::cmd::object::zset_encoding(z), z.memory_usage_bytes()),
    };
    let addr = &entry.value as *const Value as usize;
    let last = entry.access.last_access_ms;
    let lru = (last / 1000) & ((1 << 24) - 1);
    let idle_s = cx.now_ms.saturating_sub(last) / 1000;
    Reply::Simple(
        format!(
            "Value at:{addr:#x} refcount:1 encoding:{encoding} serializedlength:{len} \
             lru:{lru} lru_seconds_idle:{idle_s}"
        )
        .into_bytes()
        .into(),
    )
}

/// `DEBUG HELP`
fn help() -> Reply {
    help_reply(&[
        "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANGE-REPL-ID",
        "    Accepted; there is no replication.",
        "LOADAOF",
        "    Write every shard's data in the append only file format, empty it and load it back.",
        "LOG <message>",
        "    Accepted.",
        "OBJECT <key>",
        "    Show low level info about the value stored at <key>.",
        "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
        "    Same as LOADAOF (options are accepted and ignored).",
        "SET-ACTIVE-EXPIRE <0|1>",
        "    Stop or resume the active expiry of keys with a TTL.",
        "SLEEP <seconds>",
        "    Stop every shard thread for <seconds> (decimals allowed).",
        "HELP",
        "    Print this help.",
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::testing::exec;

    #[test]
    fn gate_follows_the_setting() {
        let local = Endpoint::Tcp("127.0.0.1:1".parse().unwrap());
        let unix = Endpoint::Unix("/tmp/s.sock".into());
        let remote = Endpoint::Tcp("10.0.0.1:1".parse().unwrap());
        assert!(gate_debug("yes", &remote).is_ok());
        assert!(gate_debug("local", &local).is_ok());
        assert!(gate_debug("local", &unix).is_ok());
        assert!(gate_debug("local", &remote).is_err());
        assert!(gate_debug("no", &local).is_err());
    }

    #[test]
    fn reload_keeps_streams_and_groups() {
        let mut db = ShardDb::new(ShardId(0), 1, 16);
        exec(&mut db, "XADD s 1-1 a 1");
        exec(&mut db, "XADD s 2-1 b 2");
        exec(&mut db, "XDEL s 2-1");
        exec(&mut db, "XGROUP CREATE s g 0");
        exec(&mut db, "XREADGROUP GROUP g c COUNT 1 STREAMS s >");
        let before = format!("{:?}", exec(&mut db, "XINFO STREAM s FULL"));
        apply_reload(&mut db, 10).unwrap();
        assert_eq!(
            format!("{:?}", exec(&mut db, "XINFO STREAM s FULL")),
            before
        );
    }
}
