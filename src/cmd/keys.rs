//! Keyspace commands: DEL, EXISTS.

use bytes::Bytes;

use crate::cmd::{on_shard, CommandSpec, FanMerge, Flags, Handler, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
        name: "DEL",
        arity: -2,
        flags: Flags::WRITE,
        keys: Keys::Range {
            first: 1,
            last: -1,
            step: 1,
        },
        acl: &["keyspace", "write", "slow"],
        summary: "Deletes one or more keys.",
        since: "1.0.0",
        group: "generic",
        subcommands: &[],
        handler: Handler::Keyed {
            parse: parse_del,
            merge: FanMerge::SumInt,
        },
    },
    CommandSpec {
        name: "EXISTS",
        arity: -2,
        flags: Flags::READONLY.with(Flags::FAST),
        keys: Keys::Range {
            first: 1,
            last: -1,
            step: 1,
        },
        acl: &["keyspace", "read", "fast"],
        summary: "Determines whether one or more keys exist.",
        since: "1.0.0",
        group: "generic",
        subcommands: &[],
        handler: Handler::Keyed {
            parse: parse_exists,
            merge: FanMerge::SumInt,
        },
    },
];

fn parse_del(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let keys = argv[1..].to_vec();
    Ok(on_shard(move |db, cx| {
        Reply::Int(
            keys.iter()
                .filter(|k| db.remove(cx.db, k, cx.now_ms).is_some())
                .count() as i64,
        )
    }))
}

fn parse_exists(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let keys = argv[1..].to_vec();
    Ok(on_shard(move |db, cx| {
        Reply::Int(
            keys.iter()
                .filter(|k| db.exists(cx.db, k, cx.now_ms))
                .count() as i64,
        )
    }))
}
