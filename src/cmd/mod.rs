//! Commands: parsing (IO thread), execution (shard thread) and reply shaping.
//!
//! Each family file (`keys.rs`, `string.rs`, `stream.rs`, ...) reads top to
//! bottom: `SPECS` (its rows of the command table) → request parsing
//! (`parse_*`, on the IO thread) → `apply_*` (on the owning shard, time passed
//! in) → reply helpers → tests.
//!
//! A parsed keyed command is a [`ShardReq`]: a boxed [`ShardCommand`] that the
//! router sends to the shard owning its keys. Commands without keys run on the
//! IO thread as [`Handler::Conn`](table::Handler::Conn) functions returning an
//! [`Action`].

pub mod args;
pub mod cluster;
pub mod connection;
pub mod expire;
pub mod glob;
pub mod info;
pub mod keys;
pub mod object;
pub mod persistence;
pub mod server;
pub mod stream;
pub mod string;
pub mod table;
pub mod tx;

use bytes::Bytes;

use crate::reply::Reply;
use crate::route::slot::ShardId;
use crate::shard::db::ShardDb;
use crate::shard::msg::ReplyTo;

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
    object::SPECS,
    cluster::SPECS,
    tx::SPECS,
    persistence::SPECS,
];

/// Per-request context a shard passes to `apply`: the selected database and
/// the shard's clock snapshot for this batch.
#[derive(Clone, Copy, Debug)]
pub struct ExecCtx {
    /// Selected database index (`SELECT`), `0..databases`.
    pub db: usize,
    /// Wall clock in ms since the Unix epoch, one snapshot per batch.
    pub now_ms: u64,
    /// Where the reply goes (blocking commands park a waiter with it).
    pub reply_to: ReplyTo,
}

impl ExecCtx {
    /// A context for unit tests and internal calls: database `db`, time `now_ms`.
    pub fn at(db: usize, now_ms: u64) -> ExecCtx {
        ExecCtx {
            db,
            now_ms,
            reply_to: ReplyTo {
                io: 0,
                conn: 0,
                seq: 0,
                part: 0,
            },
        }
    }
}

/// A parsed command that runs on one shard. Built on the IO thread (owned,
/// typed data only; never references into shard data) and consumed by the shard.
pub trait ShardCommand: Send {
    /// Execute on the owning shard and produce the reply.
    fn apply(self: Box<Self>, db: &mut ShardDb, cx: &ExecCtx) -> Reply;
}

/// A boxed shard command, as it travels through the shard inbox.
pub type ShardReq = Box<dyn ShardCommand>;

/// Adapter that makes a closure a [`ShardCommand`].
struct ShardFn<F>(F);

impl<F> ShardCommand for ShardFn<F>
where
    F: FnOnce(&mut ShardDb, &ExecCtx) -> Reply + Send,
{
    fn apply(self: Box<Self>, db: &mut ShardDb, cx: &ExecCtx) -> Reply {
        (self.0)(db, cx)
    }
}

/// Wrap a closure over the shard's data as a request. Family parsers use it as
/// `Ok(on_shard(move |db, cx| apply_get(db, cx, key)))`.
pub fn on_shard<F>(f: F) -> ShardReq
where
    F: FnOnce(&mut ShardDb, &ExecCtx) -> Reply + Send + 'static,
{
    Box::new(ShardFn(f))
}

/// Combines the replies of a fan-out (in part order) into the client's reply.
pub type Merge = Box<dyn FnOnce(Vec<Reply>) -> Reply + Send>;

/// What a connection-level handler asks the IO thread to do.
pub enum Action {
    /// Answer now.
    Reply(Reply),
    /// Run `parts` on their shards and merge the replies, in part order.
    FanOut {
        parts: Vec<(ShardId, ShardReq)>,
        merge: Merge,
    },
    /// Answer, then close the connection once the reply is written (QUIT).
    Close(Reply),
    /// Close the connection now without replying (SHUTDOWN, as Redis does).
    Drop,
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

/// Merge helper: the first error among `parts`, if any.
pub fn first_error(parts: &[Reply]) -> Option<Reply> {
    parts.iter().find(|r| r.is_error()).cloned()
}

/// Fan-out merge: sum of integer replies (DBSIZE, DEL across shards).
pub fn merge_sum(parts: Vec<Reply>) -> Reply {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    Reply::Int(
        parts
            .iter()
            .map(|r| if let Reply::Int(n) = r { *n } else { 0 })
            .sum(),
    )
}

/// Fan-out merge: `+OK` if every part answered OK, else the first error.
pub fn merge_ok(parts: Vec<Reply>) -> Reply {
    first_error(&parts).unwrap_or(Reply::Ok)
}

/// Fan-out merge: concatenate array replies (KEYS).
pub fn merge_concat(parts: Vec<Reply>) -> Reply {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    let mut out = Vec::new();
    for p in parts {
        if let Reply::Array(items) = p {
            out.extend(items);
        }
    }
    Reply::Array(out)
}

/// Split argv of a multi-key command into one argv per shard, keeping each key's
/// associated arguments (MSET's value, XREAD's ID). Returns `(shard, argv,
/// original key positions)` per part, in first-appearance order of shards.
pub fn split_by_shard(
    spec: &CommandSpec,
    argv: &[Bytes],
    key_idx: &[usize],
    shard_of: impl Fn(&[u8]) -> ShardId,
) -> Vec<(ShardId, Vec<Bytes>, Vec<usize>)> {
    let mut parts: Vec<(ShardId, Vec<Bytes>, Vec<usize>)> = Vec::new();
    let (Some(&first), Some(&last)) = (key_idx.first(), key_idx.last()) else {
        return parts;
    };
    let prefix = &argv[..first];
    let (step, tail_start, paired) = match spec.keys {
        Keys::Range { step, .. } => (
            usize::from(step.max(1)),
            last + usize::from(step.max(1)),
            None,
        ),
        Keys::AfterStreamsToken => (1, argv.len(), Some(key_idx.len())),
        Keys::None => (1, argv.len(), None),
    };
    let suffix = argv.get(tail_start.min(argv.len())..).unwrap_or(&[]);
    let mut keyed: Vec<(ShardId, Vec<Bytes>, Vec<usize>)> = Vec::new();
    for (n, &ki) in key_idx.iter().enumerate() {
        let shard = shard_of(&argv[ki]);
        let slot = match keyed.iter().position(|(s, _, _)| *s == shard) {
            Some(p) => p,
            None => {
                keyed.push((shard, Vec::new(), Vec::new()));
                keyed.len() - 1
            }
        };
        let (_, args, positions) = &mut keyed[slot];
        positions.push(n);
        match paired {
            // XREAD: keys first, IDs collected separately below
            Some(_) => args.push(argv[ki].clone()),
            None => args.extend(argv[ki..(ki + step).min(argv.len())].iter().cloned()),
        }
    }
    for (shard, args, positions) in keyed {
        let mut full: Vec<Bytes> = prefix.to_vec();
        full.extend(args);
        if let Some(nkeys) = paired {
            for &n in &positions {
                full.push(argv[first + nkeys + n].clone());
            }
        } else {
            full.extend(suffix.iter().cloned());
        }
        parts.push((shard, full, positions));
    }
    parts
}
