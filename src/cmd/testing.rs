//! Unit-test helper: run a command line through the command table (lookup →
//! subcommand → parse) and apply it on a shard, with no threads involved.

use bytes::Bytes;

use crate::cmd::table::{self, Handler};
use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::shard::msg::ExecCtx;

/// Split a command line on whitespace into argv.
pub fn argv(line: &str) -> Vec<Bytes> {
    line.split_whitespace()
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect()
}

/// Run `line` (a keyed command) on `db`, database 0, at time 1000 ms.
/// Parse errors come back as error replies, as a client would see them.
pub fn exec(db: &mut ShardDb, line: &str) -> Reply {
    exec_at(db, &ExecCtx::at(0, 1000), line)
}

/// [`exec`] with an explicit context.
pub fn exec_at(db: &mut ShardDb, cx: &ExecCtx, line: &str) -> Reply {
    let a = argv(line);
    let Some(mut spec) = table::lookup(&a[0]) else {
        return Reply::Error(table::unknown_command(&a));
    };
    if !spec.subcommands.is_empty() {
        match crate::cmd::connection::resolve_subcommand(spec, &a) {
            Ok(s) => spec = s,
            Err(e) => return Reply::Error(e),
        }
    }
    match spec.handler {
        Handler::Keyed { parse, .. } | Handler::Blocking { parse, .. } => match parse(&a) {
            Ok(req) => crate::shard::msg::apply_as_client(req, db, cx),
            Err(e) => Reply::Error(e),
        },
        Handler::Conn(_) => panic!("{} runs on the connection, not on a shard", spec.name),
    }
}
