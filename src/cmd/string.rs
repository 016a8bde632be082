//! String commands: GET, SET.

use bytes::Bytes;

use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Handler, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::{ShardDb, Value};

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
        name: "GET",
        arity: 2,
        flags: Flags::READONLY.with(Flags::FAST),
        keys: Keys::Range {
            first: 1,
            last: 1,
            step: 1,
        },
        acl: &["read", "string", "fast"],
        summary: "Returns the string value of a key.",
        since: "1.0.0",
        group: "string",
        subcommands: &[],
        handler: Handler::Keyed {
            parse: parse_get,
            merge: FanMerge::Refuse,
        },
    },
    CommandSpec {
        name: "SET",
        arity: -3,
        flags: Flags::WRITE.with(Flags::DENYOOM),
        keys: Keys::Range {
            first: 1,
            last: 1,
            step: 1,
        },
        acl: &["write", "string", "slow"],
        summary: "Sets the string value of a key, ignoring its type.",
        since: "1.0.0",
        group: "string",
        subcommands: &[],
        handler: Handler::Keyed {
            parse: parse_set,
            merge: FanMerge::Refuse,
        },
    },
];

fn parse_get(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| apply_get(db, cx, &key).into()))
}

/// `GET key` — the string, or a null bulk when missing. `WRONGTYPE` for non-strings.
pub fn apply_get(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Result<Reply, CmdError> {
    let v = db.get_str(cx.db, key, cx.now_ms)?.cloned();
    db.count_lookup(v.is_some());
    Ok(v.map(Reply::Bulk).unwrap_or(Reply::NullBulk))
}

fn parse_set(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    if argv.len() != 3 {
        return Err(CmdError::Syntax);
    }
    let key = argv[1].clone();
    let value = argv[2].clone();
    Ok(on_shard(move |db, cx| {
        db.set(cx.db, key, Value::Str(value), None);
        Reply::Ok
    }))
}
