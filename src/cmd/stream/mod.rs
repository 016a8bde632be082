//! The stream family, one file per concern. Data structures live in
//! `crate::stream`; these files parse (connection's thread), apply on the owning shard
//! and shape replies.
//!
//! * `add_trim`: XADD (IDMP), XDEL, XDELEX, XTRIM, XSETID, XCFGSET;
//! * `range`: XLEN, XRANGE, XREVRANGE and the entry reply shape;
//! * `read`: XREAD and what XREAD and XREADGROUP share;
//! * `group_read`: XREADGROUP;
//! * `pending`: XACK, XACKDEL, XNACK, XPENDING, XCLAIM, XAUTOCLAIM;
//! * `group_admin`: XGROUP, XINFO.
//!
//! Argument errors are found on the connection's thread, except where Redis reports
//! them only after looking the key (and group) up (XDEL's IDs, XREAD's and
//! XREADGROUP's per-stream IDs, XCLAIM's options, XGROUP's ID): those are
//! carried to the shard as `Result`s and reported in Redis's order.
//!
//! # Source
//! redis/src/t_stream.c, with the newest Redis release's behaviour where it
//! changed (each item says which release and page it follows).

use bytes::Bytes;

use crate::cmd::args::parse_i64;
use crate::cmd::{CommandSpec, FanMerge, Flags, Handler, Keys, ShardReq};
use crate::error::CmdError;

mod add_trim;
mod group_admin;
mod group_read;
mod pending;
mod range;
mod read;
#[cfg(test)]
mod tests;

pub use add_trim::*;
pub use group_admin::*;
pub use group_read::*;
pub use pending::*;
pub use range::*;
pub use read::*;

const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
) -> CommandSpec {
    CommandSpec::keyed(
        name,
        arity,
        flags,
        Keys::FIRST,
        "stream",
        acl,
        summary,
        since,
        parse,
        FanMerge::Refuse,
    )
}

/// Table rows of the stream commands without groups.
pub const SPECS: &[CommandSpec] = &[
    row(
        "XADD",
        -5,
        Flags::WRITE.with(Flags::DENYOOM).with(Flags::FAST),
        &["write", "stream", "fast"],
        "Appends a new message to a stream. Creates the key if it doesn't exist.",
        "5.0.0",
        parse_xadd,
    ),
    row(
        "XLEN",
        2,
        Flags::READONLY.with(Flags::FAST),
        &["read", "stream", "fast"],
        "Return the number of messages in a stream.",
        "5.0.0",
        parse_xlen,
    ),
    row(
        "XRANGE",
        -4,
        Flags::READONLY,
        &["read", "stream", "slow"],
        "Returns the messages from a stream within a range of IDs.",
        "5.0.0",
        parse_xrange,
    ),
    row(
        "XREVRANGE",
        -4,
        Flags::READONLY,
        &["read", "stream", "slow"],
        "Returns the messages from a stream within a range of IDs in reverse order.",
        "5.0.0",
        parse_xrevrange,
    ),
    row(
        "XDEL",
        -3,
        Flags::WRITE.with(Flags::FAST),
        &["write", "stream", "fast"],
        "Returns the number of messages after removing them from a stream.",
        "5.0.0",
        parse_xdel,
    ),
    // Redis 8.2: XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
    row(
        "XDELEX",
        -5,
        Flags::WRITE.with(Flags::FAST),
        &["write", "stream", "fast"],
        "Deletes one or multiple entries from the stream.",
        "8.2.0",
        parse_xdelex,
    ),
    row(
        "XTRIM",
        -4,
        Flags::WRITE,
        &["write", "stream", "slow"],
        "Deletes messages from the beginning of a stream.",
        "5.0.0",
        parse_xtrim,
    ),
    row(
        "XSETID",
        -3,
        Flags::WRITE.with(Flags::DENYOOM).with(Flags::FAST),
        &["write", "stream", "fast"],
        "An internal command for replicating stream values.",
        "5.0.0",
        parse_xsetid,
    ),
    // Redis 8.6: XCFGSET key [IDMP-DURATION seconds] [IDMP-MAXSIZE count]
    row(
        "XCFGSET",
        -2,
        Flags::WRITE.with(Flags::FAST),
        &["write", "stream", "fast"],
        "Sets the IDMP configuration parameters for a stream.",
        "8.6.0",
        parse_xcfgset,
    ),
    // Redis 8.8 (internal, AOF): XIDMPRECORD key pid iid stream-id
    row(
        "XIDMPRECORD",
        5,
        Flags::WRITE.with(Flags::DENYOOM).with(Flags::FAST),
        &["write", "stream", "fast"],
        "An internal command for replicating IDMP metadata.",
        "8.8.0",
        parse_xidmprecord,
    ),
    CommandSpec {
        name: "XREAD",
        arity: -4,
        flags: Flags::READONLY.with(Flags::BLOCKING),
        keys: Keys::AfterStreamsToken,
        acl: &["read", "stream", "slow", "blocking"],
        summary: "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.",
        since: "5.0.0",
        group: "stream",
        subcommands: &[],
        handler: Handler::Blocking {
            parse: parse_xread,
            merge: FanMerge::Streams,
            block_ms: xread_block_ms,
            park: park_xread,
            validate: Some(read::check_xread),
        },
    },
];

#[allow(clippy::too_many_arguments)]
const fn keyed(
    name: &'static str,
    arity: i16,
    flags: Flags,
    keys: Keys,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
) -> CommandSpec {
    CommandSpec::keyed(
        name,
        arity,
        flags,
        keys,
        "stream",
        acl,
        summary,
        since,
        parse,
        FanMerge::Refuse,
    )
}

const W: Flags = Flags::WRITE;

const R: Flags = Flags::READONLY;

/// Table rows of the consumer-group commands.
pub const GROUP_SPECS: &[CommandSpec] = &[
    CommandSpec {
        name: "XGROUP",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::None,
        acl: &["slow"],
        summary: "A container for consumer groups commands.",
        since: "5.0.0",
        group: "stream",
        subcommands: &[
            keyed("XGROUP|CREATE", -5, W.with(Flags::DENYOOM), Keys::SECOND, &["write", "stream", "slow"],
                "Creates a consumer group.", "5.0.0", parse_xgroup),
            keyed("XGROUP|SETID", -5, W, Keys::SECOND, &["write", "stream", "slow"],
                "Sets the last-delivered ID of a consumer group.", "5.0.0", parse_xgroup),
            keyed("XGROUP|DESTROY", 4, W, Keys::SECOND, &["write", "stream", "slow"],
                "Destroys a consumer group.", "5.0.0", parse_xgroup),
            keyed("XGROUP|CREATECONSUMER", 5, W.with(Flags::DENYOOM), Keys::SECOND,
                &["write", "stream", "slow"], "Creates a consumer in a consumer group.", "6.2.0",
                parse_xgroup),
            keyed("XGROUP|DELCONSUMER", 5, W, Keys::SECOND, &["write", "stream", "slow"],
                "Deletes a consumer from a consumer group.", "5.0.0", parse_xgroup),
            keyed("XGROUP|HELP", 2, Flags::LOADING.with(Flags::STALE), Keys::None,
                &["stream", "slow"], "Returns helpful text about the different subcommands.",
                "5.0.0", parse_xgroup),
        ],
        handler: Handler::Keyed {
            parse: parse_xgroup,
            merge: FanMerge::Refuse,
        },
    },
    CommandSpec {
        name: "XREADGROUP",
        arity: -7,
        flags: Flags::WRITE.with(Flags::BLOCKING),
        keys: Keys::AfterStreamsToken,
        acl: &["write", "stream", "slow", "blocking"],
        summary: "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.",
        since: "5.0.0",
        group: "stream",
        subcommands: &[],
        handler: Handler::Blocking {
            parse: parse_xreadgroup,
            merge: FanMerge::Streams,
            block_ms: xreadgroup_block_ms,
            park: park_xreadgroup,
            validate: Some(check_xreadgroup),
        },
    },
    keyed("XACK", -4, W.with(Flags::FAST), Keys::FIRST, &["write", "stream", "fast"],
        "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.",
        "5.0.0", parse_xack),
    // Redis 8.2: XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
    keyed("XACKDEL", -6, W.with(Flags::FAST), Keys::FIRST, &["write", "stream", "fast"],
        "Acknowledges and conditionally deletes one or multiple entries for a stream consumer group.",
        "8.2.0", parse_xackdel),
    // Redis 8.8: XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...]
    //   [RETRYCOUNT count] [FORCE]
    keyed("XNACK", -7, W.with(Flags::FAST), Keys::FIRST, &["stream"],
        "Releases pending messages back to the group's PEL without acknowledging them, making them available for re-delivery.",
        "8.8.0", parse_xnack),
    keyed("XPENDING", -3, R, Keys::FIRST, &["read", "stream", "slow"],
        "Returns the information and entries from a stream consumer group's pending entries list.",
        "5.0.0", parse_xpending),
    keyed("XCLAIM", -6, W.with(Flags::FAST), Keys::FIRST, &["write", "stream", "fast"],
        "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.",
        "5.0.0", parse_xclaim),
    keyed("XAUTOCLAIM", -6, W.with(Flags::FAST), Keys::FIRST, &["write", "stream", "fast"],
        "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.",
        "6.2.0", parse_xautoclaim),
    CommandSpec {
        name: "XINFO",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::None,
        acl: &["slow"],
        summary: "A container for stream introspection commands.",
        since: "5.0.0",
        group: "stream",
        subcommands: &[
            keyed("XINFO|STREAM", -3, R, Keys::SECOND, &["read", "stream", "slow"],
                "Returns information about a stream.", "5.0.0", parse_xinfo),
            keyed("XINFO|GROUPS", 3, R, Keys::SECOND, &["read", "stream", "slow"],
                "Returns a list of the consumer groups of a stream.", "5.0.0", parse_xinfo),
            keyed("XINFO|CONSUMERS", 4, R, Keys::SECOND, &["read", "stream", "slow"],
                "Returns a list of the consumers in a consumer group.", "5.0.0", parse_xinfo),
            keyed("XINFO|HELP", 2, Flags::LOADING.with(Flags::STALE), Keys::None,
                &["stream", "slow"], "Returns helpful text about the different subcommands.",
                "5.0.0", parse_xinfo),
        ],
        handler: Handler::Keyed {
            parse: parse_xinfo,
            merge: FanMerge::Refuse,
        },
    },
];

fn int_arg_msg(b: &[u8], msg: &'static str) -> Result<i64, CmdError> {
    parse_i64(b).ok_or(CmdError::msg(msg))
}

fn clamp_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
