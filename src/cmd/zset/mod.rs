//! The sorted-set family, one file per concern. The data structure lives in
//! [`crate::zset`]; these files parse (connection's thread), apply on the
//! owning shard and shape replies.
//!
//! * `write`: ZADD, ZINCRBY, ZREM, ZREMRANGEBYRANK/SCORE/LEX;
//! * `read`: ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT,
//!   ZRANDMEMBER, ZSCAN;
//! * `range`: ZRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
//!   ZREVRANGEBYLEX, ZREVRANGE, ZRANGESTORE;
//! * `pop`: ZPOPMIN, ZPOPMAX, ZMPOP and the blocking BZPOPMIN, BZPOPMAX,
//!   BZMPOP (served push-style through [`crate::shard::blocking`]);
//! * `cross`: ZMPOP and ZRANGESTORE over keys of several shards, in steps.
//!
//! Argument errors are found on the connection's thread, except where Redis
//! reports them only after the key's type check (ZSCAN's options): those are
//! carried to the shard as `Result`s.
//!
//! Writes record their effect for the append-only file: `ZADD key score
//! member ...` with the final scores, `ZREM key member ...` for whatever a
//! command removed (pops included, so a BZPOPMIN replays as the pop it did),
//! `DEL` + `ZADD` for ZRANGESTORE's destination.
//!
//! # Source
//! redis/src/t_zset.c (Redis 7.4 / 8.x behaviour; replies with scores use
//! `addReplyDouble`: bulk strings in RESP2, doubles in RESP3).

use bytes::Bytes;

use crate::cmd::args::key_at;
use crate::cmd::{CommandSpec, FanMerge, Flags, Handler, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;

mod cross;
mod pop;
mod range;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub use pop::*;
pub use range::*;
pub use read::*;
pub use write::*;

#[allow(clippy::too_many_arguments)]
const fn row(
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
        "sorted-set",
        acl,
        summary,
        since,
        parse,
        FanMerge::Refuse,
    )
}

/// A blocking pop's row: parts on several shards are never merged (one key
/// answers); see [`Handler::Blocking`]. Allowed in scripts and MULTI,
/// where it answers at once (Redis 7.2+ dropped the `noscript` flag of the
/// blocking commands; BZPOPMIN / BZPOPMAX are also `fast`).
#[allow(clippy::too_many_arguments)]
const fn blocking_row(
    name: &'static str,
    arity: i16,
    fast: bool,
    keys: Keys,
    summary: &'static str,
    since: &'static str,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    block_ms: fn(&[Bytes]) -> Option<u64>,
    park: fn(
        &[Bytes],
        std::sync::Arc<crate::shard::blocking::Ticket>,
    ) -> Result<ShardReq, CmdError>,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: if fast {
            Flags::WRITE.with(Flags::FAST).with(Flags::BLOCKING)
        } else {
            Flags::WRITE.with(Flags::BLOCKING)
        },
        keys,
        acl: if fast {
            &["write", "sortedset", "fast", "blocking"]
        } else {
            &["write", "sortedset", "slow", "blocking"]
        },
        summary,
        since,
        group: "sorted-set",
        subcommands: &[],
        handler: Handler::Blocking {
            parse,
            merge: FanMerge::Refuse,
            block_ms,
            park,
            validate: None,
        },
    }
}

const W_OOM_FAST: Flags = Flags::WRITE.with(Flags::DENYOOM).with(Flags::FAST);
const W_FAST: Flags = Flags::WRITE.with(Flags::FAST);
const R_FAST: Flags = Flags::READONLY.with(Flags::FAST);
const ACL_W_FAST: &[&str] = &["write", "sortedset", "fast"];
const ACL_W_SLOW: &[&str] = &["write", "sortedset", "slow"];
const ACL_R_FAST: &[&str] = &["read", "sortedset", "fast"];
const ACL_R_SLOW: &[&str] = &["read", "sortedset", "slow"];
/// Keys at argv[1] and argv[2] (ZRANGESTORE dst src).
const FIRST_TWO: Keys = Keys::Range {
    first: 1,
    last: 2,
    step: 1,
};
/// Every argument but the last (BZPOPMIN key [key ...] timeout).
const ALL_BUT_LAST: Keys = Keys::Range {
    first: 1,
    last: -2,
    step: 1,
};

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row("ZADD", -4, W_OOM_FAST, Keys::FIRST, ACL_W_FAST,
        "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.",
        "1.2.0", parse_zadd),
    row("ZINCRBY", 4, W_OOM_FAST, Keys::FIRST, ACL_W_FAST,
        "Increments the score of a member in a sorted set.", "1.2.0", parse_zincrby),
    row("ZREM", -3, W_FAST, Keys::FIRST, ACL_W_FAST,
        "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.",
        "1.2.0", parse_zrem),
    row("ZREMRANGEBYRANK", 4, Flags::WRITE, Keys::FIRST, ACL_W_SLOW,
        "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.",
        "2.0.0", parse_zremrangebyrank),
    row("ZREMRANGEBYSCORE", 4, Flags::WRITE, Keys::FIRST, ACL_W_SLOW,
        "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.",
        "1.2.0", parse_zremrangebyscore),
    row("ZREMRANGEBYLEX", 4, Flags::WRITE, Keys::FIRST, ACL_W_SLOW,
        "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.",
        "2.8.9", parse_zremrangebylex),
    row("ZCARD", 2, R_FAST, Keys::FIRST, ACL_R_FAST,
        "Returns the number of members in a sorted set.", "1.2.0", parse_zcard),
    row("ZSCORE", 3, R_FAST, Keys::FIRST, ACL_R_FAST,
        "Returns the score of a member in a sorted set.", "1.2.0", parse_zscore),
    row("ZMSCORE", -3, R_FAST, Keys::FIRST, ACL_R_FAST,
        "Returns the score of one or more members in a sorted set.", "6.2.0", parse_zmscore),
    row("ZRANK", -3, R_FAST, Keys::FIRST, ACL_R_FAST,
        "Returns the index of a member in a sorted set ordered by ascending scores.", "2.0.0",
        parse_zrank),
    row("ZREVRANK", -3, R_FAST, Keys::FIRST, ACL_R_FAST,
        "Returns the index of a member in a sorted set ordered by descending scores.", "2.0.0",
        parse_zrevrank),
    row("ZCOUNT", 4, R_FAST, Keys::FIRST, ACL_R_FAST,
        "Returns the count of members in a sorted set that have scores within a range.", "2.0.0",
        parse_zcount),
    row("ZLEXCOUNT", 4, R_FAST, Keys::FIRST, ACL_R_FAST,
        "Returns the number of members in a sorted set within a lexicographical range.", "2.8.9",
        parse_zlexcount),
    row("ZRANGE", -4, Flags::READONLY, Keys::FIRST, ACL_R_SLOW,
        "Returns members in a sorted set within a range of indexes.", "1.2.0", parse_zrange),
    row("ZRANGEBYSCORE", -4, Flags::READONLY, Keys::FIRST, ACL_R_SLOW,
        "Returns members in a sorted set within a range of scores.", "1.0.5", parse_zrangebyscore),
    row("ZREVRANGEBYSCORE", -4, Flags::READONLY, Keys::FIRST, ACL_R_SLOW,
        "Returns members in a sorted set within a range of scores in reverse order.", "2.2.0",
        parse_zrevrangebyscore),
    row("ZRANGEBYLEX", -4, Flags::READONLY, Keys::FIRST, ACL_R_SLOW,
        "Returns members in a sorted set within a lexicographical range.", "2.8.9",
        parse_zrangebylex),
    row("ZREVRANGEBYLEX", -4, Flags::READONLY, Keys::FIRST, ACL_R_SLOW,
        "Returns members in a sorted set within a lexicographical range in reverse order.", "2.8.9",
        parse_zrevrangebylex),
    row("ZREVRANGE", -4, Flags::READONLY, Keys::FIRST, ACL_R_SLOW,
        "Returns members in a sorted set within a range of indexes in reverse order.", "1.2.0",
        parse_zrevrange),
    CommandSpec {
        keys: FIRST_TWO,
        ..CommandSpec::conn("ZRANGESTORE", -5, Flags::WRITE.with(Flags::DENYOOM), "sorted-set",
            ACL_W_SLOW, "Stores a range of members from sorted set in a key.", "6.2.0",
            cross::zrangestore_cmd)
    },
    row("ZPOPMIN", -2, W_FAST, Keys::FIRST, ACL_W_FAST,
        "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
        "5.0.0", parse_zpopmin),
    row("ZPOPMAX", -2, W_FAST, Keys::FIRST, ACL_W_FAST,
        "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
        "5.0.0", parse_zpopmax),
    CommandSpec {
        keys: Keys::NumKeys { at: 1 },
        ..CommandSpec::conn("ZMPOP", -4, Flags::WRITE, "sorted-set", ACL_W_SLOW,
            "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.",
            "7.0.0", cross::zmpop_cmd)
    },
    row("ZRANDMEMBER", -2, Flags::READONLY, Keys::FIRST, ACL_R_SLOW,
        "Returns one or more random members from a sorted set.", "6.2.0", parse_zrandmember),
    row("ZSCAN", -3, Flags::READONLY, Keys::FIRST, ACL_R_SLOW,
        "Iterates over members and scores of a sorted set.", "2.8.0", parse_zscan),
    blocking_row("BZPOPMIN", -3, true, ALL_BUT_LAST,
        "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
        "5.0.0", parse_bzpopmin, bzpop_block_ms, park_bzpopmin),
    blocking_row("BZPOPMAX", -3, true, ALL_BUT_LAST,
        "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.",
        "5.0.0", parse_bzpopmax, bzpop_block_ms, park_bzpopmax),
    blocking_row("BZMPOP", -5, false, Keys::NumKeys { at: 2 },
        "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
        "7.0.0", parse_bzmpop, bzmpop_block_ms, park_bzmpop),
];

/// A score in a reply: bulk string (RESP2) or double (RESP3), Redis's text.
pub fn reply_score(score: f64) -> Reply {
    Reply::Double(score)
}

/// Members (and scores when `withscores`) in the order given: an array of
/// members, or [`Reply::Pairs`] of member and score.
pub fn reply_members<'a>(
    entries: impl Iterator<Item = (f64, &'a [u8])>,
    withscores: bool,
) -> Reply {
    if withscores {
        Reply::Pairs(
            entries
                .map(|(s, m)| (Reply::bulk_copy(m), reply_score(s)))
                .collect(),
        )
    } else {
        Reply::Array(entries.map(|(_, m)| Reply::bulk_copy(m)).collect())
    }
}
