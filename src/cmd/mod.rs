//! Commands: parsing (on the connection's thread), execution (on the shard
//! owning the keys) and reply shaping.
//!
//! Each family file (`keys.rs`, `string.rs`, `stream.rs`, ...) reads top to
//! bottom: `SPECS` (its rows of the command table) → request parsing
//! (`parse_*`, on the connection's shard thread) → `apply_*` (on the owning
//! shard, time passed in) → reply helpers → tests.
//!
//! A parsed keyed command is a [`ShardReq`]: a boxed [`ShardCommand`] that the
//! router runs inline or sends to the shard owning its keys. Commands without
//! keys run on the connection's thread as
//! [`Handler::Conn`](table::Handler::Conn) functions returning an [`Action`].

pub mod args;
pub mod cluster;
pub mod connection;
pub mod debug;
pub mod delayed;
pub mod docs;
pub mod dump;
pub mod expire;
pub mod function;
pub mod glob;
pub mod group_latency;
pub mod info;
pub mod keys;
pub mod latency;
pub mod list;
pub mod memory;
pub mod migrate;
pub mod monitor;
pub mod object;
pub mod persistence;
pub mod rename;
pub mod scripting;
pub mod server;
pub mod set;
pub mod slowlog;
pub mod stream;
pub mod string;
pub mod table;
#[cfg(test)]
pub mod testing;
pub mod tx;
pub mod zset;

use crate::reply::Reply;
pub use crate::route::router::{
    first_error, merge_concat, merge_ok, merge_sum, split_by_shard, Merge,
};
use crate::route::slot::ShardId;
pub use crate::shard::msg::{on_shard, ExecCtx, ShardCommand, ShardReq};

pub use table::{CommandSpec, FanMerge, Flags, Handler, Keys};

/// All command families' table rows; the command table is their union.
pub const FAMILIES: &[&[CommandSpec]] = &[
    server::SPECS,
    connection::SPECS,
    info::SPECS,
    keys::SPECS,
    expire::SPECS,
    string::SPECS,
    stream::SPECS,
    stream::GROUP_SPECS,
    zset::SPECS,
    object::SPECS,
    cluster::SPECS,
    tx::SPECS,
    persistence::SPECS,
    function::SPECS,
    scripting::SPECS,
    rename::SPECS,
    latency::SPECS,
    slowlog::SPECS,
    debug::SPECS,
    dump::SPECS,
    migrate::SPECS,
    monitor::SPECS,
    group_latency::SPECS,
    list::SPECS,
    set::SPECS,
    delayed::SPECS,
];

/// What a connection-level handler asks the connection's thread to do.
pub enum Action {
    /// Answer now.
    Reply(Reply),
    /// Run `parts` on their shards and merge the replies, in part order.
    FanOut {
        parts: Vec<(ShardId, ShardReq)>,
        merge: Merge,
    },
    /// Like `FanOut`, then continue with `then` (a next step, or parking a
    /// blocking read) unless the merged reply is an error.
    FanOutThen {
        parts: Vec<(ShardId, ShardReq)>,
        merge: Merge,
        then: crate::io::conn::Then,
    },
    /// Run one request on one shard, as a keyed command does (inline when
    /// the shard is the connection's own; counts toward handover). EVAL/FCALL.
    Run(ShardId, ShardReq),
    /// Run `body` atomically with every shard of the list held (a
    /// transaction over several shards, see [`crate::route::held`]); `merge`
    /// shapes its reply.
    Atomic {
        shards: Vec<ShardId>,
        body: crate::route::held::Body,
        merge: Merge,
    },
    /// Answer, then close the connection once the reply is written (QUIT).
    Close(Reply),
    /// Close the connection now without replying (SHUTDOWN, as Redis does).
    Drop,
    /// Block the client on no key (WAIT) for `timeout_ms` (0: until
    /// `CLIENT UNBLOCK` or it leaves), then answer `reply`; inside a
    /// transaction, answer `reply` at once.
    Wait { timeout_ms: u64, reply: Reply },
}

impl From<Reply> for Action {
    fn from(r: Reply) -> Action {
        Action::Reply(r)
    }
}

/// What a connection-level handler sees: the connection's own state and the
/// server-wide shared state.
pub struct ConnCtx<'a> {
    pub conn: &'a mut crate::io::conn::Session,
    pub shared: &'a crate::server::Shared,
}

/// Single-part steps run one after the other (a command that works across
/// shards in steps: cross-shard RENAME/COPY, LMOVE, SMOVE); an error reply
/// ends them, the last step's reply is the answer.
pub fn steps(mut list: Vec<(ShardId, ShardReq)>) -> Action {
    let last_merge =
        || -> Merge { Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk)) };
    let mut then: Option<Box<crate::io::conn::Then>> = None;
    while list.len() > 1 {
        let Some(part) = list.pop() else { break };
        then = Some(Box::new(crate::io::conn::Then::Fan {
            parts: vec![part],
            merge: last_merge(),
            then,
        }));
    }
    let first = list.pop().map(|p| vec![p]).unwrap_or_default();
    match then {
        Some(then) => Action::FanOutThen {
            parts: first,
            merge: last_merge(),
            then: *then,
        },
        None => Action::FanOut {
            parts: first,
            merge: last_merge(),
        },
    }
}
