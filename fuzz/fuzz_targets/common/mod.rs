#![allow(dead_code)] // each target uses a different part
//! Shared by the `commands` and `streams` targets: run one argv the way the
//! IO thread and a shard would (table lookup → arity → subcommand row →
//! parse → apply on a `ShardDb`), without sockets or threads.

use bytes::{Bytes, BytesMut};
use shardstream::cmd::table::{self, Handler};
use shardstream::cmd::ExecCtx;
use shardstream::io::codec;
use shardstream::reply::Reply;
use shardstream::shard::blocking::{self, Ticket};
use shardstream::shard::db::ShardDb;

/// Every command and subcommand name in the table (`XGROUP|CREATE` becomes
/// `["XGROUP", "CREATE"]`), so a fuzz input can pick one with a byte.
pub fn command_names() -> Vec<Vec<&'static str>> {
    let mut out = Vec::new();
    for spec in table::all_specs() {
        out.push(vec![spec.name]);
        for sub in spec.subcommands {
            out.push(sub.name.split('|').collect());
        }
    }
    out
}

/// Run `argv` against `db` at `now_ms` and return the reply, or `None` when
/// the command runs on the IO thread (a `Conn` handler: not driven here).
/// Blocking commands are parked (a waiter is registered) when their argv asks
/// to block; waiters made ready by a write are served after each command.
/// Every reply is also encoded as RESP2 and RESP3, to exercise the encoder.
pub fn run(db: &mut ShardDb, now_ms: u64, argv: &[Bytes]) -> Option<Reply> {
    let first = argv.first()?;
    let spec = table::lookup(first)?;
    if !spec.arity_ok(argv.len()) {
        return None;
    }
    let spec = if spec.subcommands.is_empty() || argv.len() < 2 {
        spec
    } else {
        shardstream::cmd::connection::resolve_subcommand(spec, argv).ok()?
    };
    // Key positions must never index out of argv (route uses them directly).
    for i in spec.key_indexes(argv) {
        assert!(i < argv.len(), "{}: key index {i} out of argv", spec.name);
    }
    let cx = ExecCtx::at(0, now_ms);
    let reply = match spec.handler {
        Handler::Keyed { parse, .. } => match parse(argv) {
            Ok(req) => req.apply(db, &cx),
            Err(e) => Reply::Error(e),
        },
        Handler::Blocking {
            parse,
            block_ms,
            park,
            ..
        } => match block_ms(argv) {
            None => match parse(argv) {
                Ok(req) => req.apply(db, &cx),
                Err(e) => Reply::Error(e),
            },
            Some(_) => match park(argv, Ticket::new()) {
                Ok(req) => req.apply(db, &cx),
                Err(e) => Reply::Error(e),
            },
        },
        Handler::Conn(_) => return None,
    };
    let mut served = Vec::new();
    if db.blocking.has_ready() {
        blocking::serve_ready(db, now_ms, &mut served);
    }
    let mut out = BytesMut::new();
    for r in std::iter::once(&reply).chain(served.iter().map(|(_, r)| r)) {
        if !matches!(r, Reply::NoReply) {
            codec::encode(r, false, &mut out);
            codec::encode(r, true, &mut out);
        }
    }
    Some(reply)
}
