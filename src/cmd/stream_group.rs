//! Consumer-group commands: XGROUP, XREADGROUP (with BLOCK), XACK, XPENDING,
//! XCLAIM, XAUTOCLAIM, XINFO. Data structures live in `crate::stream::group`;
//! this file parses, applies on the owning shard and shapes replies.
//!
//! Redis reports some argument errors only after looking the key and group up
//! (XCLAIM's options, XGROUP's ID, XREADGROUP's per-stream IDs): those are
//! parsed on the IO thread and carried to the shard as `Result`s, reported in
//! Redis's order.
//!
//! Blocking XREADGROUP: the shard-side attempt first checks (without side
//! effects) whether anything can be delivered, then claims the shared ticket,
//! and only then inserts into the PEL and advances last-delivered, so a read
//! parked on several shards is delivered exactly once. Deleting the key or
//! destroying the group under a parked reader wakes it with Redis's error.
//!
//! # Source
//! redis/src/t_stream.c (7.x): `xgroupCommand`, `xreadCommand`, `xackCommand`,
//! `xpendingCommand`, `xclaimCommand`, `xautoclaimCommand`, `xinfoCommand`;
//! blocked.c `serveClientsBlockedOnStreamKey`.

use crate::aof::effects::{log_group_change, GroupChange};
use std::sync::Arc;

use bytes::Bytes;

use crate::cmd::args::{int_arg, is, parse_i64, text};
use crate::cmd::connection::help_reply;
use crate::cmd::stream::{
    entries_reply, entry_reply, entry_reply_bytes, parse_ids_block, parse_read_args, ReadArgs,
    ReadBudget, ReadCaps,
};
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Handler, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::blocking::{Attempt, Ticket, Waiter};
use crate::shard::db::ShardDb;
use crate::stream::group::ConsumerGroup;
use crate::stream::id::{parse_id, parse_loose_id, parse_range_end, parse_range_start};
use crate::stream::{RefPolicy, Stream, StreamId};

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

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
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

// ---------------------------------------------------------------------------
// Error texts
// ---------------------------------------------------------------------------

const ERR_XGROUP_NO_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";
const ERR_BUSYGROUP: &str = "BUSYGROUP Consumer Group name already exists";
const ERR_ENTRIESREAD: &str = "ERR value for ENTRIESREAD must be positive or -1";
const ERR_DOLLAR_IN_XREADGROUP: &str = "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.";
const ERR_PLUS_IN_XREADGROUP: &str = "ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set.";

fn nogroup_for_key(group: &[u8], key: &[u8]) -> CmdError {
    CmdError::msg(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        text(group),
        text(key)
    ))
}

fn nogroup_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::msg(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        text(key),
        text(group)
    ))
}

fn subcommand_syntax(cmd: &str, sub: &[u8]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        text(sub)
    ))
}

fn int_arg_msg(b: &[u8], msg: &'static str) -> Result<i64, CmdError> {
    parse_i64(b).ok_or(CmdError::msg(msg))
}

fn clamp_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Parsing (IO thread)
// ---------------------------------------------------------------------------

/// The ID argument of XGROUP CREATE / SETID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupIdArg {
    /// `$`: the stream's last ID.
    Last,
    /// An explicit ID.
    Id(StreamId),
}

/// A parsed `XGROUP` subcommand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XgroupReq {
    /// `CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]`
    Create {
        key: Bytes,
        group: Bytes,
        /// ID parse result, reported after the key checks.
        id: Result<GroupIdArg, CmdError>,
        mkstream: bool,
        entries_read: Option<u64>,
    },
    /// `SETID key group id|$ [ENTRIESREAD n]`
    SetId {
        key: Bytes,
        group: Bytes,
        id: Result<GroupIdArg, CmdError>,
        entries_read: Option<u64>,
    },
    /// `DESTROY key group`
    Destroy { key: Bytes, group: Bytes },
    /// `CREATECONSUMER key group consumer`
    CreateConsumer {
        key: Bytes,
        group: Bytes,
        consumer: Bytes,
    },
    /// `DELCONSUMER key group consumer`
    DelConsumer {
        key: Bytes,
        group: Bytes,
        consumer: Bytes,
    },
    /// `HELP`
    Help,
}

/// `XGROUP CREATE | SETID | DESTROY | CREATECONSUMER | DELCONSUMER | HELP`.
///
/// # Errors
/// Option errors, before any key lookup, as Redis: `ERR value is not an
/// integer or out of range`, `ERR value for ENTRIESREAD must be positive or
/// -1`, `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try
/// XGROUP HELP.`; `ERR unknown subcommand '<sub>'. Try XGROUP HELP.`
/// # Source
/// `xgroupCommand`.
pub fn parse_xgroup_req(argv: &[Bytes]) -> Result<XgroupReq, CmdError> {
    let sub = &argv[1];
    let argc = argv.len();
    let syntax = || subcommand_syntax("XGROUP", sub);
    let mut mkstream = false;
    let mut entries_read: Option<u64> = None;
    let create = is(sub, "CREATE");
    let setid = is(sub, "SETID");
    if (create || setid) && argc >= 5 {
        let mut i = 5;
        while i < argc {
            if create && is(&argv[i], "MKSTREAM") {
                mkstream = true;
                i += 1;
            } else if is(&argv[i], "ENTRIESREAD") && i + 1 < argc {
                let n = int_arg(&argv[i + 1])?;
                if n < 0 && n != -1 {
                    return Err(CmdError::msg(ERR_ENTRIESREAD));
                }
                entries_read = u64::try_from(n).ok();
                i += 2;
            } else {
                return Err(syntax());
            }
        }
    }
    // CREATE takes a strict ID; SETID also takes `-` (0-0) and `+` (the
    // greatest ID), as Redis parses it (`streamParseIDOrReply`).
    let id_arg = |a: &Bytes| -> Result<GroupIdArg, CmdError> {
        if &a[..] == b"$" {
            Ok(GroupIdArg::Last)
        } else if setid {
            parse_loose_id(a, 0).map(GroupIdArg::Id)
        } else {
            parse_id(a).map(GroupIdArg::Id)
        }
    };
    let key = || argv[2].clone();
    let group = || argv[3].clone();
    if create && (5..=8).contains(&argc) {
        return Ok(XgroupReq::Create {
            key: key(),
            group: group(),
            id: id_arg(&argv[4]),
            mkstream,
            entries_read,
        });
    }
    if setid && (argc == 5 || argc == 7) {
        return Ok(XgroupReq::SetId {
            key: key(),
            group: group(),
            id: id_arg(&argv[4]),
            entries_read,
        });
    }
    if is(sub, "DESTROY") && argc == 4 {
        return Ok(XgroupReq::Destroy {
            key: key(),
            group: group(),
        });
    }
    if is(sub, "CREATECONSUMER") && argc == 5 {
        return Ok(XgroupReq::CreateConsumer {
            key: key(),
            group: group(),
            consumer: argv[4].clone(),
        });
    }
    if is(sub, "DELCONSUMER") && argc == 5 {
        return Ok(XgroupReq::DelConsumer {
            key: key(),
            group: group(),
            consumer: argv[4].clone(),
        });
    }
    if is(sub, "HELP") && argc == 2 {
        return Ok(XgroupReq::Help);
    }
    if [
        "CREATE",
        "SETID",
        "DESTROY",
        "CREATECONSUMER",
        "DELCONSUMER",
        "HELP",
    ]
    .iter()
    .any(|s| is(sub, s))
    {
        return Err(syntax());
    }
    Err(CmdError::UnknownSubcommand {
        cmd: "XGROUP".into(),
        sub: text(sub),
    })
}

fn parse_xgroup(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xgroup_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xgroup(db, cx, req).into()))
}

/// One stream's ID argument of XREADGROUP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupFrom {
    /// `>`: entries never delivered to the group.
    New,
    /// The consumer's own pending entries with IDs greater than this.
    History(StreamId),
    /// An invalid ID argument, reported in key order after the type/group checks.
    Invalid(CmdError),
}

/// A parsed `XREADGROUP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XreadgroupReq {
    pub group: Bytes,
    pub consumer: Bytes,
    /// `COUNT n`: at most n entries per stream; 0 = no limit.
    pub count: u64,
    /// `BLOCK ms` (0 = forever); `None` without BLOCK.
    pub block_ms: Option<u64>,
    /// `NOACK`: delivered entries are not added to the PEL.
    pub noack: bool,
    /// `CLAIM min-idle-time` (Redis 8.4), ms: `>` reads first claim the
    /// group's pending entries idle at least this long.
    pub claim_min_idle_ms: Option<u64>,
    /// `MAXCOUNT` / `MAXSIZE` (Redis 8.10): caps over the whole reply.
    pub caps: ReadCaps,
    pub keys: Vec<Bytes>,
    pub from: Vec<GroupFrom>,
}

/// `XREADGROUP GROUP group consumer [COUNT count] [MAXCOUNT maxcount]
/// [MAXSIZE maxsize] [BLOCK ms] [CLAIM min-idle-time] [NOACK] STREAMS key
/// [key ...] id [id ...]` (CLAIM: Redis 8.4; a negative min-idle-time is `ERR
/// value is out of range, must be positive`. MAXCOUNT, MAXSIZE: Redis 8.10,
/// capping new and history reads alike; an entry they turn away is neither
/// sent nor added to the PEL).
///
/// # Errors
/// Those of [`parse_read_args`], then `ERR Missing GROUP option for
/// XREADGROUP`. ID errors are deferred.
/// # Source
/// `xreadCommand`.
pub fn parse_xreadgroup_req(argv: &[Bytes]) -> Result<XreadgroupReq, CmdError> {
    let ReadArgs {
        count,
        block_ms,
        group,
        noack,
        claim_min_idle_ms,
        caps,
        keys,
        ids,
    } = parse_read_args(argv, true)?;
    let (group, consumer) =
        group.ok_or(CmdError::msg("ERR Missing GROUP option for XREADGROUP"))?;
    let from = ids
        .iter()
        .map(|a| match &a[..] {
            b">" => GroupFrom::New,
            b"$" => GroupFrom::Invalid(CmdError::msg(ERR_DOLLAR_IN_XREADGROUP)),
            b"+" => GroupFrom::Invalid(CmdError::msg(ERR_PLUS_IN_XREADGROUP)),
            _ => parse_id(a).map_or_else(GroupFrom::Invalid, GroupFrom::History),
        })
        .collect();
    Ok(XreadgroupReq {
        group,
        consumer,
        count,
        block_ms,
        noack,
        claim_min_idle_ms,
        caps,
        keys,
        from,
    })
}

fn parse_xreadgroup(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xreadgroup_req(argv)?;
    Ok(on_shard(move |db, cx| {
        apply_xreadgroup(db, cx, &req).into()
    }))
}

/// `Some(timeout_ms)` when the argv is a valid XREADGROUP with `BLOCK`.
fn xreadgroup_block_ms(argv: &[Bytes]) -> Option<u64> {
    parse_xreadgroup_req(argv).ok()?.block_ms
}

/// XREADGROUP BLOCK on one shard: serve now when there is something to
/// deliver (claiming the ticket first), else park a waiter.
fn park_xreadgroup(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_xreadgroup_req(argv)?;
    Ok(on_shard(move |db, cx| {
        park_xreadgroup_apply(db, cx, req, ticket)
    }))
}

/// The validation step of a multi-shard XREADGROUP (see
/// [`Handler::Blocking`]): `+OK`, or `[local key index, error]` for the first
/// key of this part that fails [`validate_xreadgroup`]. No side effects.
fn check_xreadgroup(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xreadgroup_req(argv)?;
    Ok(on_shard(move |db, cx| {
        match first_invalid_key(db, cx, &req) {
            None => Reply::Ok,
            Some((n, e)) => Reply::Array(vec![Reply::Int(n as i64), Reply::Error(e)]),
        }
    }))
}

/// `XACK key group id [id ...]`: IDs are validated on the shard, after the
/// key and group lookups (a missing key or group replies 0 whatever the IDs).
fn parse_xack(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let group = argv[2].clone();
    let ids: Result<Vec<StreamId>, CmdError> = argv[3..].iter().map(|a| parse_id(a)).collect();
    Ok(on_shard(move |db, cx| {
        apply_xack(db, cx, &key, &group, ids).into()
    }))
}

/// `XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]`
/// (Redis 8.2). Arguments are checked before the key is looked up.
///
/// # Errors
/// See [`parse_ids_block`].
fn parse_xackdel(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let group = argv[2].clone();
    let (refs, ids) = parse_ids_block(argv, 3)?;
    Ok(on_shard(move |db, cx| {
        apply_xackdel(db, cx, &key, &group, refs, &ids).into()
    }))
}

/// XNACK's mode: how the delivery counter changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NackMode {
    /// Counter minus one (the delivery "did not count").
    Silent,
    /// Counter unchanged.
    Fail,
    /// Counter set to `LLONG_MAX` (permanently failed).
    Fatal,
}

/// A parsed XNACK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XnackReq {
    /// The mode.
    pub mode: NackMode,
    /// The IDs, in order.
    pub ids: Vec<StreamId>,
    /// `RETRYCOUNT count`: the counter to set, overriding the mode.
    pub retry_count: Option<u64>,
    /// `FORCE`: create unowned entries for IDs not pending (existing in the
    /// stream).
    pub force: bool,
}

/// `XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...]
/// [RETRYCOUNT count] [FORCE]` (Redis 8.8), from `argv[3]`.
///
/// # Errors
/// `ERR syntax error` (unknown mode or option, no `IDS` after the mode),
/// the IDS block errors of XACKDEL (`ERR Number of IDs must be a positive
/// integer`, `` ERR The `numids` parameter must match the number of
/// arguments ``, invalid ID), `ERR Invalid RETRYCOUNT option argument for
/// XNACK` (not an integer or negative). The redis.io page gives no error
/// texts; these follow XACKDEL's IDS block and XCLAIM's RETRYCOUNT.
pub fn parse_xnack_req(argv: &[Bytes]) -> Result<XnackReq, CmdError> {
    let is = |a: &Bytes, t: &str| a.eq_ignore_ascii_case(t.as_bytes());
    let mode = match argv.get(3) {
        Some(a) if is(a, "SILENT") => NackMode::Silent,
        Some(a) if is(a, "FAIL") => NackMode::Fail,
        Some(a) if is(a, "FATAL") => NackMode::Fatal,
        _ => return Err(CmdError::Syntax),
    };
    if !argv.get(4).is_some_and(|a| is(a, "IDS")) {
        return Err(CmdError::Syntax);
    }
    let n = argv
        .get(5)
        .and_then(|b| crate::cmd::args::parse_i64(b))
        .filter(|n| *n > 0)
        .ok_or(CmdError::msg(
            "ERR Number of IDs must be a positive integer",
        ))?;
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let ids_at = 6;
    if argv.len().saturating_sub(ids_at) < n {
        return Err(CmdError::msg(
            "ERR The `numids` parameter must match the number of arguments",
        ));
    }
    let ids = argv
        .get(ids_at..ids_at + n)
        .unwrap_or_default()
        .iter()
        .map(|b| parse_id(b))
        .collect::<Result<Vec<_>, _>>()?;
    let mut req = XnackReq {
        mode,
        ids,
        retry_count: None,
        force: false,
    };
    let mut j = ids_at + n;
    while let Some(a) = argv.get(j) {
        if is(a, "RETRYCOUNT") {
            let v = argv
                .get(j + 1)
                .and_then(|b| crate::cmd::args::parse_i64(b))
                .and_then(|v| u64::try_from(v).ok())
                .ok_or(CmdError::msg(
                    "ERR Invalid RETRYCOUNT option argument for XNACK",
                ))?;
            req.retry_count = Some(v);
            j += 2;
        } else if is(a, "FORCE") {
            req.force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(req)
}

fn parse_xnack(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let group = argv[2].clone();
    let req = parse_xnack_req(argv)?;
    Ok(on_shard(move |db, cx| {
        apply_xnack(db, cx, &key, &group, &req).into()
    }))
}

/// The extended form of XPENDING.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingRange {
    /// `IDLE min-idle-time` in ms (0 = any).
    pub min_idle_ms: u64,
    /// Smallest ID included.
    pub start: StreamId,
    /// Greatest ID included.
    pub end: StreamId,
    pub count: u64,
    pub consumer: Option<Bytes>,
}

/// `XPENDING key group [[IDLE min-idle-time] start end count [consumer]]`.
///
/// # Errors
/// Before the key lookup, as Redis: `ERR syntax error` (wrong argument
/// count), integer errors (IDLE, count), interval ID errors.
/// # Source
/// `xpendingCommand`.
pub fn parse_xpending_req(argv: &[Bytes]) -> Result<Option<PendingRange>, CmdError> {
    let argc = argv.len();
    if argc == 3 {
        return Ok(None);
    }
    if !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut at = 3;
    let mut min_idle = 0i64;
    if is(&argv[3], "IDLE") {
        min_idle = int_arg(&argv[4])?;
        if argc < 8 {
            return Err(CmdError::Syntax);
        }
        at += 2;
    }
    let count = clamp_u64(int_arg(&argv[at + 2])?);
    let start = parse_range_start(&argv[at])?.first_included()?;
    let end = parse_range_end(&argv[at + 1])?.last_included()?;
    Ok(Some(PendingRange {
        min_idle_ms: clamp_u64(min_idle),
        start,
        end,
        count,
        consumer: argv.get(at + 3).cloned(),
    }))
}

fn parse_xpending(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let range = parse_xpending_req(argv)?;
    let key = argv[1].clone();
    let group = argv[2].clone();
    Ok(on_shard(move |db, cx| {
        apply_xpending(db, cx, &key, &group, range.as_ref()).into()
    }))
}

/// Options of XCLAIM after the IDs.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct XclaimOpts {
    /// `min-idle-time` in ms (negative given as 0).
    pub min_idle_ms: u64,
    pub ids: Vec<StreamId>,
    /// `IDLE ms` (as `Idle`) or `TIME ms` (as `Time`); `None` = now.
    pub delivery: Option<Delivery>,
    /// `RETRYCOUNT n` (negative = not given).
    pub retry_count: Option<u64>,
    pub force: bool,
    pub justid: bool,
    /// `LASTID id`: raise the group's last-delivered ID to this.
    pub last_id: Option<StreamId>,
}

/// XCLAIM's `IDLE` / `TIME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Idle time in ms: delivery time = now - idle.
    Idle(i64),
    /// Absolute delivery time, ms since the Unix epoch.
    Time(i64),
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]`.
///
/// # Errors
/// Reported after the key and group checks, in order: `ERR Invalid
/// min-idle-time argument for XCLAIM`, `ERR Invalid IDLE option argument for
/// XCLAIM` (and TIME, RETRYCOUNT), LASTID ID errors, `ERR Unrecognized XCLAIM
/// option '<opt>'`.
/// # Source
/// `xclaimCommand`.
pub fn parse_xclaim_opts(argv: &[Bytes]) -> Result<XclaimOpts, CmdError> {
    let argc = argv.len();
    let min_idle = int_arg_msg(&argv[4], "ERR Invalid min-idle-time argument for XCLAIM")?;
    let mut o = XclaimOpts {
        min_idle_ms: clamp_u64(min_idle),
        ..Default::default()
    };
    let mut j = 5;
    while j < argc {
        match parse_id(&argv[j]) {
            Ok(id) => o.ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    while j < argc {
        let moreargs = argc - 1 - j;
        let opt = &argv[j];
        if is(opt, "FORCE") {
            o.force = true;
        } else if is(opt, "JUSTID") {
            o.justid = true;
        } else if is(opt, "IDLE") && moreargs > 0 {
            j += 1;
            let n = int_arg_msg(&argv[j], "ERR Invalid IDLE option argument for XCLAIM")?;
            o.delivery = Some(Delivery::Idle(n));
        } else if is(opt, "TIME") && moreargs > 0 {
            j += 1;
            let n = int_arg_msg(&argv[j], "ERR Invalid TIME option argument for XCLAIM")?;
            o.delivery = Some(Delivery::Time(n));
        } else if is(opt, "RETRYCOUNT") && moreargs > 0 {
            j += 1;
            let n = int_arg_msg(
                &argv[j],
                "ERR Invalid RETRYCOUNT option argument for XCLAIM",
            )?;
            o.retry_count = u64::try_from(n).ok();
        } else if is(opt, "LASTID") && moreargs > 0 {
            j += 1;
            o.last_id = Some(parse_id(&argv[j])?);
        } else {
            return Err(CmdError::msg(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                text(opt)
            )));
        }
        j += 1;
    }
    Ok(o)
}

fn parse_xclaim(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let group = argv[2].clone();
    let consumer = argv[3].clone();
    let opts = parse_xclaim_opts(argv);
    Ok(on_shard(move |db, cx| {
        apply_xclaim(db, cx, &key, &group, &consumer, opts).into()
    }))
}

/// A parsed `XAUTOCLAIM`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XautoclaimReq {
    pub key: Bytes,
    pub group: Bytes,
    pub consumer: Bytes,
    /// In ms; negative given as 0.
    pub min_idle_ms: u64,
    /// First PEL ID examined (inclusive).
    pub start: StreamId,
    /// `COUNT n` (default 100), at least 1.
    pub count: u64,
    pub justid: bool,
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]`.
///
/// # Errors
/// Before the key lookup: `ERR Invalid min-idle-time argument for
/// XAUTOCLAIM`, start ID errors, `ERR COUNT must be > 0`, `ERR syntax error`.
/// # Source
/// `xautoclaimCommand`.
pub fn parse_xautoclaim_req(argv: &[Bytes]) -> Result<XautoclaimReq, CmdError> {
    let min_idle = int_arg_msg(
        &argv[4],
        "ERR Invalid min-idle-time argument for XAUTOCLAIM",
    )?;
    let start = parse_range_start(&argv[5])?.first_included()?;
    let mut count = 100u64;
    let mut justid = false;
    let max_count = (i64::MAX / 16) as u64;
    let mut j = 6;
    while j < argv.len() {
        let moreargs = argv.len() - 1 - j;
        if is(&argv[j], "COUNT") && moreargs > 0 {
            let n = parse_i64(&argv[j + 1])
                .and_then(|n| u64::try_from(n).ok())
                .filter(|n| (1..=max_count).contains(n))
                .ok_or(CmdError::msg("ERR COUNT must be > 0"))?;
            count = n;
            j += 1;
        } else if is(&argv[j], "JUSTID") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(XautoclaimReq {
        key: argv[1].clone(),
        group: argv[2].clone(),
        consumer: argv[3].clone(),
        min_idle_ms: clamp_u64(min_idle),
        start,
        count,
        justid,
    })
}

fn parse_xautoclaim(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xautoclaim_req(argv)?;
    Ok(on_shard(move |db, cx| {
        apply_xautoclaim(db, cx, &req).into()
    }))
}

/// A parsed `XINFO` subcommand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XinfoReq {
    /// `STREAM key [FULL [COUNT n]]`: `full` holds the COUNT (0 = all).
    Stream { key: Bytes, full: Option<u64> },
    /// `GROUPS key`
    Groups { key: Bytes },
    /// `CONSUMERS key group`
    Consumers { key: Bytes, group: Bytes },
    /// `HELP`
    Help,
}

/// `XINFO STREAM | GROUPS | CONSUMERS | HELP`.
///
/// # Errors
/// `ERR unknown subcommand or wrong number of arguments for 'stream'. Try
/// XINFO HELP.` (bad STREAM options), `ERR value is not an integer or out of
/// range` (COUNT), `ERR unknown subcommand '<sub>'. Try XINFO HELP.`
/// # Source
/// `xinfoCommand`, `xinfoReplyWithStreamInfo`.
pub fn parse_xinfo_req(argv: &[Bytes]) -> Result<XinfoReq, CmdError> {
    let sub = &argv[1];
    if is(sub, "HELP") {
        return Ok(XinfoReq::Help);
    }
    if is(sub, "GROUPS") {
        return Ok(XinfoReq::Groups {
            key: argv[2].clone(),
        });
    }
    if is(sub, "CONSUMERS") {
        return Ok(XinfoReq::Consumers {
            key: argv[2].clone(),
            group: argv[3].clone(),
        });
    }
    if is(sub, "STREAM") {
        let argc = argv.len();
        let mut full = None;
        if argc > 3 {
            if !is(&argv[3], "FULL") || (argc != 4 && argc != 6) {
                return Err(subcommand_syntax("XINFO", sub));
            }
            let mut count = 10u64;
            if argc == 6 {
                if !is(&argv[4], "COUNT") {
                    return Err(subcommand_syntax("XINFO", sub));
                }
                count = clamp_u64(int_arg(&argv[5])?);
            }
            full = Some(count);
        }
        return Ok(XinfoReq::Stream {
            key: argv[2].clone(),
            full,
        });
    }
    Err(CmdError::UnknownSubcommand {
        cmd: "XINFO".into(),
        sub: text(sub),
    })
}

fn parse_xinfo(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xinfo_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xinfo(db, cx, &req).into()))
}

// ---------------------------------------------------------------------------
// Execution (shard thread)
// ---------------------------------------------------------------------------

/// `XGROUP` on the owning shard.
///
/// # Reply
/// CREATE / SETID: `+OK`; DESTROY: 1 or 0; CREATECONSUMER: 1 (created) or 0;
/// DELCONSUMER: how many entries the consumer had pending; HELP: lines.
/// # Errors
/// In Redis's order: `WrongType`; `ERR The XGROUP subcommand requires the key
/// to exist...` (missing key, unless CREATE MKSTREAM); `NOGROUP No such
/// consumer group '<g>' for key name '<k>'` (SETID, CREATECONSUMER,
/// DELCONSUMER); the ID error; `BUSYGROUP Consumer Group name already exists`.
/// DESTROY wakes readers blocked on the group (they get a NOGROUP error).
///
/// CREATE / SETID store an ENTRIESREAD above the stream's entries-added as
/// entries-added (Redis 8.2.2); SETID takes `-` and `+` as IDs, CREATE does not.
/// # Source
/// `xgroupCommand`; Redis 8.2.2 release notes (redis/redis#14257).
pub fn apply_xgroup(db: &mut ShardDb, cx: &ExecCtx, req: XgroupReq) -> Result<Reply, CmdError> {
    let (key, group) = match &req {
        XgroupReq::Help => return Ok(xgroup_help()),
        XgroupReq::Create { key, group, .. }
        | XgroupReq::SetId { key, group, .. }
        | XgroupReq::Destroy { key, group }
        | XgroupReq::CreateConsumer { key, group, .. }
        | XgroupReq::DelConsumer { key, group, .. } => (key.clone(), group.clone()),
    };
    let mkstream = matches!(req, XgroupReq::Create { mkstream: true, .. });
    let exists = db.get_stream(cx.db, &key, cx.now_ms)?.is_some();
    if !exists && !mkstream {
        return Err(CmdError::msg(ERR_XGROUP_NO_KEY));
    }
    let has_group = exists
        && db
            .get_stream(cx.db, &key, cx.now_ms)?
            .is_some_and(|s| s.group(&group).is_some());
    let needs_group = matches!(
        req,
        XgroupReq::SetId { .. } | XgroupReq::CreateConsumer { .. } | XgroupReq::DelConsumer { .. }
    );
    if needs_group && !has_group {
        return Err(nogroup_for_key(&group, &key));
    }
    match req {
        XgroupReq::Create {
            id, entries_read, ..
        } => {
            let id = id?;
            let s = db
                .stream_for_write(cx.db, &key, true, cx.now_ms)?
                .ok_or(CmdError::msg(ERR_XGROUP_NO_KEY))?;
            if s.group(&group).is_some() {
                return Err(CmdError::msg(ERR_BUSYGROUP));
            }
            let last = match id {
                GroupIdArg::Last => s.last_id(),
                GroupIdArg::Id(id) => id,
            };
            let mut g = ConsumerGroup::new(last, None);
            g.set_last_id(last, entries_read, s.entries_added());
            s.groups_mut().insert(group.clone(), g);
            let change = GroupChange {
                mkstream: true,
                meta: true,
                ..Default::default()
            };
            log_group_change(db, cx, &key, &group, &change);
            Ok(Reply::Ok)
        }
        XgroupReq::SetId {
            id, entries_read, ..
        } => {
            let id = id?;
            let s = stream_mut(db, cx, &key)?;
            let last = match id {
                GroupIdArg::Last => s.last_id(),
                GroupIdArg::Id(id) => id,
            };
            let entries_added = s.entries_added();
            if let Some(g) = s.group_mut(&group) {
                g.set_last_id(last, entries_read, entries_added);
            }
            let change = GroupChange {
                meta: true,
                ..Default::default()
            };
            log_group_change(db, cx, &key, &group, &change);
            Ok(Reply::Ok)
        }
        XgroupReq::Destroy { .. } => {
            if !has_group {
                return Ok(Reply::Int(0));
            }
            stream_mut(db, cx, &key)?.groups_mut().remove(&group);
            db.log_effect(cx, &[b"XGROUP", b"DESTROY", &key, &group]);
            db.blocking.mark_ready(cx.db, &key);
            Ok(Reply::Int(1))
        }
        XgroupReq::CreateConsumer { consumer, .. } => {
            let s = stream_mut(db, cx, &key)?;
            let created = s
                .group_mut(&group)
                .map(|g| g.get_or_create_consumer(&consumer, cx.now_ms).1);
            if created == Some(true) {
                let change = GroupChange {
                    consumer: Some(&consumer),
                    ..Default::default()
                };
                log_group_change(db, cx, &key, &group, &change);
            }
            Ok(Reply::Int(i64::from(created == Some(true))))
        }
        XgroupReq::DelConsumer { consumer, .. } => {
            let s = stream_mut(db, cx, &key)?;
            let deleted = s
                .group_mut(&group)
                .and_then(|g| g.delete_consumer(&consumer));
            if deleted.is_some() {
                db.log_effect(cx, &[b"XGROUP", b"DELCONSUMER", &key, &group, &consumer]);
            }
            let n = deleted.unwrap_or(0);
            Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
        }
        XgroupReq::Help => Ok(xgroup_help()),
    }
}

/// The stream under `key`, known to exist.
fn stream_mut<'a>(
    db: &'a mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
) -> Result<&'a mut Stream, CmdError> {
    db.get_stream_mut(cx.db, key, cx.now_ms)?
        .ok_or(CmdError::msg("ERR no such key"))
}

/// Checks XREADGROUP's keys in order: type, group, ID.
///
/// # Errors
/// `WrongType`; `NOGROUP No such key '<k>' or consumer group '<g>' in
/// XREADGROUP with GROUP option`; the key's ID error.
fn validate_xreadgroup(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
) -> Result<(), CmdError> {
    match first_invalid_key(db, cx, req) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// The index (in `req.keys`) and error of the first key failing
/// [`validate_xreadgroup`]'s checks.
fn first_invalid_key(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
) -> Option<(usize, CmdError)> {
    for (n, (key, from)) in req.keys.iter().zip(&req.from).enumerate() {
        let s = match db.get_stream(cx.db, key, cx.now_ms) {
            Ok(s) => s,
            Err(e) => return Some((n, e)),
        };
        if s.and_then(|s| s.group(&req.group)).is_none() {
            return Some((
                n,
                CmdError::msg(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    text(key),
                    text(&req.group)
                )),
            ));
        }
        if let GroupFrom::Invalid(e) = from {
            return Some((n, e.clone()));
        }
    }
    None
}

/// Whether the read would return something now: any history read, or a `>`
/// read on a stream with entries after the group's last-delivered ID. No
/// side effects (called before the ticket is claimed).
fn xreadgroup_has_data(db: &mut ShardDb, cx: &ExecCtx, req: &XreadgroupReq) -> bool {
    req.keys
        .iter()
        .zip(&req.from)
        .any(|(key, from)| match from {
            GroupFrom::History(_) => true,
            GroupFrom::Invalid(_) => false,
            GroupFrom::New => {
                let Ok(Some(s)) = db.get_stream(cx.db, key, cx.now_ms) else {
                    return false;
                };
                let Some(g) = s.group(&req.group) else {
                    return false;
                };
                let idle = req
                    .claim_min_idle_ms
                    .is_some_and(|min| g.pel().values().any(|p| p.idle_ms(cx.now_ms) >= min));
                idle || g
                    .last_id
                    .next()
                    .is_some_and(|start| s.iter_range(start, StreamId::MAX, false).next().is_some())
            }
        })
}

/// Performs a validated XREADGROUP: creates the consumer where missing,
/// delivers new entries (PEL insert unless NOACK, last-delivered and
/// entries-read advance) or replays the consumer's history.
fn perform_xreadgroup(db: &mut ShardDb, cx: &ExecCtx, req: &XreadgroupReq) -> Reply {
    let take = if req.count == 0 {
        usize::MAX
    } else {
        usize::try_from(req.count).unwrap_or(usize::MAX)
    };
    let mut pairs = Vec::new();
    // MAXCOUNT / MAXSIZE: one budget over all streams, in key order.
    let mut budget = ReadBudget::new(req.caps);
    // Per key: what changed, logged once the stream borrow ends.
    let mut changes: Vec<(&Bytes, GroupChange)> = Vec::new();
    for (key, from) in req.keys.iter().zip(&req.from) {
        if budget.is_done() {
            break;
        }
        let Ok(Some(s)) = db.get_stream_mut(cx.db, key, cx.now_ms) else {
            continue;
        };
        let counters = s.counters();
        match from {
            GroupFrom::Invalid(_) => continue,
            GroupFrom::New if req.claim_min_idle_ms.is_some() => {
                let (reply, claim) = read_claiming(s, cx, req, take, &mut budget);
                if let Some(r) = reply {
                    pairs.push((Reply::Bulk(key.clone()), r));
                }
                if claim.created || claim.meta || !claim.pel.is_empty() || !claim.acked.is_empty() {
                    let change = GroupChange {
                        consumer: Some(&req.consumer),
                        meta: claim.meta,
                        pel: claim.pel,
                        acked: claim.acked,
                        ..Default::default()
                    };
                    changes.push((key, change));
                }
            }
            GroupFrom::New => {
                let Some(last) = s.group(&req.group).map(|g| g.last_id) else {
                    continue;
                };
                let entries: Vec<_> = match last.next() {
                    Some(start) => s
                        .iter_range(start, StreamId::MAX, false)
                        .take(take)
                        .take_while(|e| budget.admit(entry_reply_bytes(e)))
                        .collect(),
                    None => Vec::new(),
                };
                let Some(g) = s.group_mut(&req.group) else {
                    continue;
                };
                let (cid, created) = g.get_or_create_consumer(&req.consumer, cx.now_ms);
                g.touch_seen(cid, cx.now_ms);
                if entries.is_empty() {
                    if created {
                        let change = GroupChange {
                            consumer: Some(&req.consumer),
                            ..Default::default()
                        };
                        changes.push((key, change));
                    }
                    continue;
                }
                // Only an entry that enters the PEL makes the consumer active:
                // a NOACK read leaves `inactive` where it was (Redis sets the
                // active time where it creates the pending entry).
                if !req.noack {
                    g.touch_active(cid, cx.now_ms);
                }
                for e in &entries {
                    g.advance_last_delivered(e.id, &counters);
                    if !req.noack {
                        g.deliver(e.id, cid, cx.now_ms);
                    }
                }
                let change = GroupChange {
                    meta: true,
                    consumer: Some(&req.consumer),
                    pel: if req.noack {
                        Vec::new()
                    } else {
                        entries.iter().map(|e| e.id).collect()
                    },
                    ..Default::default()
                };
                changes.push((key, change));
                pairs.push((Reply::Bulk(key.clone()), entries_reply(entries)));
            }
            GroupFrom::History(after) => {
                // Nothing can follow MAX-MAX: Redis leaves the stream out.
                let Some(start) = after.next() else {
                    continue;
                };
                let Some(g) = s.group_mut(&req.group) else {
                    continue;
                };
                let (cid, created) = g.get_or_create_consumer(&req.consumer, cx.now_ms);
                g.touch_seen(cid, cx.now_ms);
                let ids: Vec<StreamId> = g.consumer_pel_from(cid, start).take(take).collect();
                let mut out = Vec::with_capacity(ids.len());
                let mut found = Vec::with_capacity(ids.len());
                for id in ids {
                    match s.get(id) {
                        Some(e) => {
                            if !budget.admit(entry_reply_bytes(&e)) {
                                break;
                            }
                            found.push(id);
                            out.push(entry_reply(e));
                        }
                        None => {
                            // `[id, nil]`: the ID's bulk plus `*2` and `*-1`.
                            let id_bytes = id.to_bytes();
                            if !budget.admit(id_bytes.len() as u64 + 15) {
                                break;
                            }
                            out.push(Reply::Array(vec![Reply::Bulk(id_bytes), Reply::NullArray]))
                        }
                    }
                }
                if let Some(g) = s.group_mut(&req.group) {
                    for &id in &found {
                        g.redeliver(id, cx.now_ms);
                    }
                }
                if created || !found.is_empty() {
                    let change = GroupChange {
                        consumer: Some(&req.consumer),
                        pel: found,
                        ..Default::default()
                    };
                    changes.push((key, change));
                }
                pairs.push((Reply::Bulk(key.clone()), Reply::Array(out)));
            }
        }
    }
    for (key, change) in &changes {
        log_group_change(db, cx, key, &req.group, change);
    }
    if pairs.is_empty() {
        Reply::NullArray
    } else {
        Reply::PairMap(pairs)
    }
}

/// A `>` read with `CLAIM min-idle-time` on one stream (Redis 8.4): first
/// the group's pending entries idle at least min-idle-time, longest idle
/// first (ties by ID), claimed for the consumer (delivery time now, count +1,
/// kept pending even with NOACK); then new entries, as a plain `>` read, with
/// what is left of the `take` budget (COUNT per stream, shared by both kinds).
/// Pending entries whose stream entry was deleted are dropped from the PEL,
/// as XAUTOCLAIM does.
///
/// # Reply
/// The stream's entries, each `[id, [field, value, ...], idle-ms,
/// delivery-count]`: for a claimed entry its idle time and delivery count
/// before this claim; `0`, `0` for a new entry. `None` when nothing is read.
/// # Source
/// redis.io XREADGROUP "The CLAIM option" and "Reply extension for claimed
/// entries" (8.4).
fn read_claiming(
    s: &mut Stream,
    cx: &ExecCtx,
    req: &XreadgroupReq,
    take: usize,
    budget: &mut ReadBudget,
) -> (Option<Reply>, ClaimChange) {
    let mut change = ClaimChange::default();
    let reply = read_claiming_into(s, cx, req, take, budget, &mut change);
    (reply, change)
}

/// What a CLAIM read changed in the group, for the AOF.
#[derive(Default)]
struct ClaimChange {
    /// The consumer was created.
    created: bool,
    /// Last-delivered ID / entries-read advanced.
    meta: bool,
    /// PEL entries claimed or delivered.
    pel: Vec<StreamId>,
    /// PEL entries dropped because their stream entry is gone.
    acked: Vec<StreamId>,
}

fn read_claiming_into(
    s: &mut Stream,
    cx: &ExecCtx,
    req: &XreadgroupReq,
    take: usize,
    budget: &mut ReadBudget,
    change: &mut ClaimChange,
) -> Option<Reply> {
    let min = req.claim_min_idle_ms.unwrap_or(0);
    let now = cx.now_ms;
    let counters = s.counters();
    let g = s.group(&req.group)?;
    let mut idle: Vec<(u64, StreamId, u64, bool)> = g
        .pel()
        .iter()
        .filter(|(_, p)| p.idle_ms(now) >= min)
        .map(|(id, p)| (p.delivery_time_ms, *id, p.delivery_count, p.is_nacked()))
        .collect();
    // XNACKed entries (delivery time 0) come first.
    idle.sort_unstable_by_key(|(t, id, _, _)| (*t, *id));
    let last = g.last_id;
    let mut out = Vec::new();
    let mut claimed = Vec::new();
    let mut dangling = Vec::new();
    for (t, id, count, nacked) in idle {
        if claimed.len() >= take {
            break;
        }
        match s.get(id) {
            Some(e) => {
                if !budget.admit(entry_reply_bytes(&e)) {
                    break;
                }
                claimed.push((id, count));
                let idle_ms = if nacked {
                    -1
                } else {
                    i64::try_from(now.saturating_sub(t)).unwrap_or(i64::MAX)
                };
                out.push(claimed_entry_reply(e, idle_ms, count));
            }
            None => dangling.push(id),
        }
    }
    let left = take.saturating_sub(claimed.len());
    let fresh: Vec<_> = match last.next() {
        Some(start) if left > 0 => s
            .iter_range(start, StreamId::MAX, false)
            .take(left)
            .take_while(|e| budget.admit(entry_reply_bytes(e)))
            .collect(),
        _ => Vec::new(),
    };
    let g = s.group_mut(&req.group)?;
    let (cid, created) = g.get_or_create_consumer(&req.consumer, now);
    change.created = created;
    g.touch_seen(cid, now);
    for id in dangling {
        g.ack(id);
        change.acked.push(id);
    }
    if claimed.is_empty() && fresh.is_empty() {
        return None;
    }
    if !claimed.is_empty() || !req.noack {
        g.touch_active(cid, now);
    }
    for (id, count) in claimed {
        g.claim(id, cid, now, count.saturating_add(1));
        change.pel.push(id);
    }
    for e in fresh {
        g.advance_last_delivered(e.id, &counters);
        change.meta = true;
        if !req.noack {
            g.deliver(e.id, cid, now);
            change.pel.push(e.id);
        }
        out.push(claimed_entry_reply(e, 0, 0));
    }
    Some(Reply::Array(out))
}

/// One entry of a CLAIM read: `[id, [field, value, ...], idle-ms, delivery-count]`
/// (idle `-1` for an entry released by XNACK, as XPENDING shows it).
fn claimed_entry_reply(e: crate::stream::Entry, idle_ms: i64, count: u64) -> Reply {
    let Reply::Array(mut items) = entry_reply(e) else {
        return Reply::NullArray;
    };
    items.push(Reply::Int(idle_ms));
    items.push(Reply::Int(i64::try_from(count).unwrap_or(i64::MAX)));
    Reply::Array(items)
}

/// `XREADGROUP` without blocking.
///
/// # Reply
/// `PairMap[(key, entries)]`: for `>`, streams with new entries only; for an
/// explicit ID, always the stream (history entries whose stream entry was
/// deleted are `[id, nil]`). Null array when nothing at all.
/// # Errors
/// See [`validate_xreadgroup`]; nothing changes on error.
/// # Source
/// `xreadCommand`, `streamReplyWithRange`, `streamReplyWithRangeFromConsumerPEL`.
pub fn apply_xreadgroup(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
) -> Result<Reply, CmdError> {
    validate_xreadgroup(db, cx, req)?;
    Ok(perform_xreadgroup(db, cx, req))
}

/// The shard side of XREADGROUP BLOCK (see [`park_xreadgroup`]).
fn park_xreadgroup_apply(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: XreadgroupReq,
    ticket: Arc<Ticket>,
) -> Reply {
    if ticket.is_fired() {
        return Reply::NoReply;
    }
    let answer = |r: Reply| if ticket.claim() { r } else { Reply::NoReply };
    if let Err(e) = validate_xreadgroup(db, cx, &req) {
        return answer(Reply::Error(e));
    }
    if xreadgroup_has_data(db, cx, &req) {
        if !ticket.claim() {
            return Reply::NoReply;
        }
        return perform_xreadgroup(db, cx, &req);
    }
    // Nothing yet: the consumer exists from now on (as Redis creates it
    // before blocking), then wait.
    let _ = perform_xreadgroup(db, cx, &req);
    let dbi = cx.db;
    let watched = req.keys.iter().map(|k| (dbi, k.clone())).collect();
    db.blocking.park(Waiter {
        ticket: ticket.clone(),
        reply_to: cx.reply_to,
        keys: watched,
        poll: req.claim_min_idle_ms.is_some(),
        attempt: Box::new(move |db, cx, ready, ticket| {
            attempt_xreadgroup(db, cx, &req, ready, ticket)
        }),
    });
    Reply::NoReply
}

/// One service attempt of a parked XREADGROUP after a write to one of its
/// keys (`ready`): the read runs again as a whole, as Redis 7.2+ re-executes
/// an unblocked command. A key now missing (deleted, expired) or of another
/// type, or a destroyed group, ends the wait with the error the command
/// itself gives (first failing key in order: `NOGROUP No such key ... in
/// XREADGROUP with GROUP option`, `WRONGTYPE ...`); otherwise, if any of its
/// streams has data, it is served from every such stream (so one MULTI/EXEC
/// or pipeline that feeds several streams is read at once), claiming the
/// ticket before any side effect.
///
/// # Source
/// blocked.c `handleClientsBlockedOnKey` (7.2+: unblock on key deletion or
/// type change for XREADGROUP, then reprocess the command).
fn attempt_xreadgroup(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadgroupReq,
    ready: &[u8],
    ticket: &Ticket,
) -> Attempt {
    if !req.keys.iter().any(|k| k[..] == *ready) {
        return Attempt::NotReady;
    }
    let reply = match first_invalid_key(db, cx, req) {
        Some((_, e)) => Reply::Error(e),
        None if !xreadgroup_has_data(db, cx, req) => return Attempt::NotReady,
        None => {
            if !ticket.claim() {
                return Attempt::Lost;
            }
            return Attempt::Served(perform_xreadgroup(db, cx, req));
        }
    };
    if ticket.claim() {
        Attempt::Served(reply)
    } else {
        Attempt::Lost
    }
}

/// `XACK key group id [id ...]`.
///
/// # Reply
/// Integer: how many of the IDs were pending (each counted once).
/// # Errors
/// `WrongType`. A missing key or group replies 0 before IDs are validated;
/// otherwise an invalid ID fails the whole call, acking nothing.
/// # Source
/// `xackCommand`.
pub fn apply_xack(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    group: &[u8],
    ids: Result<Vec<StreamId>, CmdError>,
) -> Result<Reply, CmdError> {
    let Some(g) = db
        .get_stream_mut(cx.db, key, cx.now_ms)?
        .and_then(|s| s.group_mut(group))
    else {
        return Ok(Reply::Int(0));
    };
    let ids = ids?;
    let acked: Vec<StreamId> = ids.into_iter().filter(|id| g.ack(*id)).collect();
    let n = acked.len();
    let change = GroupChange {
        acked,
        ..Default::default()
    };
    log_group_change(db, cx, key, group, &change);
    Ok(Reply::Int(n as i64))
}

/// `XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]`
/// (Redis 8.2): XACK in `group`, then delete each entry from the stream
/// under the reference policy.
///
/// # Reply
/// Array of one integer per ID, in order: `-1` no such entry in the stream
/// (every ID when the key is missing), `1` acknowledged and deleted, `2`
/// acknowledged but kept because another group still needs it (`ACKED`).
/// # Errors
/// `WrongType`; `NOGROUP No such key '<k>' or consumer group '<g>'` when the
/// group does not exist (nothing is changed).
/// # Source
/// redis.io XACKDEL (8.2).
pub fn apply_xackdel(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    group: &[u8],
    refs: RefPolicy,
    ids: &[StreamId],
) -> Result<Reply, CmdError> {
    let Some(s) = db.get_stream_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Array(ids.iter().map(|_| Reply::Int(-1)).collect()));
    };
    if s.group(group).is_none() {
        return Err(nogroup_key_or_group(key, group));
    }
    let mut codes = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(g) = s.group_mut(group) {
            g.ack(*id);
        }
        codes.push(s.delete_with_refs(*id, refs));
    }
    if db.aof.is_enabled() {
        let change = GroupChange {
            acked: ids.to_vec(),
            ..Default::default()
        };
        log_group_change(db, cx, key, group, &change);
        crate::cmd::stream::log_delete_with_refs(db, cx, key, refs, ids, &codes);
    }
    Ok(Reply::Array(codes.into_iter().map(Reply::Int).collect()))
}

/// `XNACK` (Redis 8.8): releases pending entries of `group` back to the
/// group without acknowledging them: each loses its owner (XPENDING shows
/// consumer `""`, idle `-1`), gets delivery time 0 (claimable at once by
/// XCLAIM, XAUTOCLAIM and XREADGROUP CLAIM whatever their min-idle-time;
/// XREADGROUP CLAIM serves them first) and a delivery count per the mode:
/// SILENT minus one (not below 0), FAIL unchanged, FATAL `LLONG_MAX`;
/// `RETRYCOUNT` sets it instead. A plain `>` read does not redeliver them.
/// IDs not pending are skipped, unless `FORCE` and the entry exists in the
/// stream: then an unowned entry is created with count 0 (RETRYCOUNT, or
/// `LLONG_MAX` for FATAL).
///
/// # Reply
/// Integer: how many entries were released (created ones included).
/// # Errors
/// `WrongType`; `NOGROUP No such key '<k>' or consumer group '<g>'` (a
/// choice: the page documents no error; XCLAIM's and XACKDEL's behaviour).
/// # Source
/// redis.io XNACK (8.8), "Behavior" and "Notes".
pub fn apply_xnack(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    group: &[u8],
    req: &XnackReq,
) -> Result<Reply, CmdError> {
    let s = db
        .get_stream_mut(cx.db, key, cx.now_ms)?
        .filter(|s| s.group(group).is_some())
        .ok_or_else(|| nogroup_key_or_group(key, group))?;
    let exists: Vec<bool> = if req.force {
        req.ids.iter().map(|id| s.contains(*id)).collect()
    } else {
        vec![false; req.ids.len()]
    };
    let Some(g) = s.group_mut(group) else {
        return Err(nogroup_key_or_group(key, group));
    };
    const LLONG_MAX: u64 = i64::MAX as u64;
    let mut released = Vec::new();
    for (&id, &present) in req.ids.iter().zip(&exists) {
        let count = |old: u64| match (req.retry_count, req.mode) {
            (Some(n), _) => n,
            (None, NackMode::Fatal) => LLONG_MAX,
            (None, NackMode::Silent) => old.saturating_sub(1),
            (None, NackMode::Fail) => old,
        };
        let created_count = |_: u64| match (req.retry_count, req.mode) {
            (Some(n), _) => n,
            (None, NackMode::Fatal) => LLONG_MAX,
            (None, _) => 0,
        };
        let done = if g.pending(id).is_some() {
            g.nack(id, false, count)
        } else {
            present && g.nack(id, true, created_count)
        };
        if done {
            released.push(id);
        }
    }
    let n = released.len();
    let change = GroupChange {
        pel: released,
        ..Default::default()
    };
    log_group_change(db, cx, key, group, &change);
    Ok(Reply::Int(n as i64))
}

/// `XPENDING key group` (summary) or the extended form.
///
/// # Reply
/// Summary: `[count, first-id, last-id, [[consumer, count-as-bulk], ...]]`
/// (nulls when the PEL is empty). Extended: `[[id, consumer, idle-ms,
/// delivery-count], ...]`.
/// # Errors
/// `WrongType`; `NOGROUP No such key '<k>' or consumer group '<g>'`.
/// # Source
/// `xpendingCommand`.
pub fn apply_xpending(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    group: &[u8],
    range: Option<&PendingRange>,
) -> Result<Reply, CmdError> {
    let g = db
        .get_stream(cx.db, key, cx.now_ms)?
        .and_then(|s| s.group(group))
        .ok_or_else(|| nogroup_key_or_group(key, group))?;
    let pel = g.pel();
    let Some(r) = range else {
        let (Some((first, _)), Some((last, _))) = (pel.first_key_value(), pel.last_key_value())
        else {
            return Ok(Reply::Array(vec![
                Reply::Int(0),
                Reply::NullBulk,
                Reply::NullBulk,
                Reply::NullArray,
            ]));
        };
        let per_consumer = g
            .consumers()
            .filter(|c| !c.pel.is_empty())
            .map(|c| {
                Reply::Array(vec![
                    Reply::Bulk(c.name.clone()),
                    Reply::bulk(c.pel.len().to_string()),
                ])
            })
            .collect();
        return Ok(Reply::Array(vec![
            Reply::Int(pel.len() as i64),
            Reply::Bulk(first.to_bytes()),
            Reply::Bulk(last.to_bytes()),
            Reply::Array(per_consumer),
        ]));
    };
    let take = usize::try_from(r.count).unwrap_or(usize::MAX);
    let ids: Box<dyn Iterator<Item = StreamId>> = match &r.consumer {
        Some(name) => match g.consumer_by_name(name) {
            Some(c) if r.start <= r.end => {
                Box::new(c.pel.range(r.start..=r.end).map(|(id, _)| *id))
            }
            _ => Box::new(std::iter::empty()),
        },
        None if r.start <= r.end => Box::new(pel.range(r.start..=r.end).map(|(id, _)| *id)),
        None => Box::new(std::iter::empty()),
    };
    let mut out = Vec::new();
    for id in ids {
        if out.len() >= take {
            break;
        }
        let Some(p) = g.pending(id) else { continue };
        let idle = p.idle_ms(cx.now_ms);
        if r.min_idle_ms > 0 && idle < r.min_idle_ms {
            continue;
        }
        // An XNACKed entry: no owner (""), idle -1.
        let idle = if p.is_nacked() {
            -1
        } else {
            i64::try_from(idle).unwrap_or(i64::MAX)
        };
        out.push(Reply::Array(vec![
            Reply::Bulk(id.to_bytes()),
            Reply::Bulk(g.consumer_name(p.consumer)),
            Reply::Int(idle),
            Reply::Int(i64::try_from(p.delivery_count).unwrap_or(i64::MAX)),
        ]));
    }
    Ok(Reply::Array(out))
}

/// `XCLAIM`: gives pending entries idle for at least min-idle-time to
/// `consumer`. Entries no longer in the stream leave the PEL and are not
/// returned; FORCE creates PEL entries for IDs present in the stream.
///
/// # Reply
/// Array of claimed entries (`[id, fields]`), or of IDs with JUSTID.
/// # Errors
/// `WrongType`; `NOGROUP No such key '<k>' or consumer group '<g>'`; then the
/// option errors of [`parse_xclaim_opts`].
/// # Source
/// `xclaimCommand`.
pub fn apply_xclaim(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    group: &[u8],
    consumer: &Bytes,
    opts: Result<XclaimOpts, CmdError>,
) -> Result<Reply, CmdError> {
    let s = db
        .get_stream_mut(cx.db, key, cx.now_ms)?
        .filter(|s| s.group(group).is_some())
        .ok_or_else(|| nogroup_key_or_group(key, group))?;
    let o = opts?;
    let now = cx.now_ms;
    let now_i = i64::try_from(now).unwrap_or(i64::MAX);
    let delivery_time = match o.delivery {
        None => now,
        Some(d) => {
            let t = match d {
                Delivery::Idle(idle) => now_i.saturating_sub(idle),
                Delivery::Time(t) => t,
            };
            if t < 0 || t > now_i {
                now
            } else {
                t as u64
            }
        }
    };
    // Which IDs exist in the stream, looked up before borrowing the group.
    let exists: Vec<bool> = o.ids.iter().map(|id| s.contains(*id)).collect();
    let Some(g) = s.group_mut(group) else {
        return Err(nogroup_key_or_group(key, group));
    };
    let mut meta = false;
    if let Some(last) = o.last_id {
        if last > g.last_id {
            g.last_id = last;
            meta = true;
        }
    }
    let mut claimed = Vec::new();
    let mut dropped = Vec::new();
    let mut cid = None;
    for (&id, &present) in o.ids.iter().zip(&exists) {
        let pending = g.pending(id).copied();
        if !present {
            if pending.is_some() {
                g.ack(id);
                dropped.push(id);
            }
            continue;
        }
        let (count, check_idle) = match pending {
            Some(p) => (p.delivery_count, true),
            None if o.force => (1, false),
            None => continue,
        };
        // An XNACKed entry is claimable whatever the min-idle-time.
        let nacked = pending.is_some_and(|p| p.is_nacked());
        if check_idle && o.min_idle_ms > 0 && !nacked {
            let delivered = pending.map_or(now, |p| p.delivery_time_ms);
            if (now_i - i64::try_from(delivered).unwrap_or(0)) < o.min_idle_ms as i64 {
                continue;
            }
        }
        let c = match cid {
            Some(c) => c,
            None => {
                let (c, _) = g.get_or_create_consumer(consumer, now);
                g.touch_seen(c, now);
                cid = Some(c);
                c
            }
        };
        let new_count = match o.retry_count {
            Some(n) => n,
            None if o.justid => count,
            None => count.saturating_add(1),
        };
        g.claim(id, c, delivery_time, new_count);
        g.touch_active(c, now);
        claimed.push(id);
    }
    let out = claimed
        .iter()
        .map(|&id| {
            if o.justid {
                Reply::Bulk(id.to_bytes())
            } else {
                s.get(id).map_or(Reply::NullArray, entry_reply)
            }
        })
        .collect();
    let change = GroupChange {
        meta,
        consumer: cid.map(|_| &consumer[..]),
        acked: dropped,
        pel: claimed,
        ..Default::default()
    };
    log_group_change(db, cx, key, group, &change);
    Ok(Reply::Array(out))
}

/// `XAUTOCLAIM`: scans the group PEL from `start` (at most `count * 10`
/// entries), claiming for `consumer` those idle at least min-idle-time;
/// entries whose stream entry was deleted leave the PEL and are reported.
///
/// # Reply
/// `[next-cursor, claimed, deleted-ids]`: the cursor is the next PEL ID to
/// examine, or `0-0` when the scan reached the end.
/// # Errors
/// `WrongType`; `NOGROUP No such key '<k>' or consumer group '<g>'`.
/// # Source
/// `xautoclaimCommand`.
pub fn apply_xautoclaim(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XautoclaimReq,
) -> Result<Reply, CmdError> {
    let s = db
        .get_stream_mut(cx.db, &req.key, cx.now_ms)?
        .filter(|s| s.group(&req.group).is_some())
        .ok_or_else(|| nogroup_key_or_group(&req.key, &req.group))?;
    let now = cx.now_ms;
    let mut attempts = req.count.saturating_mul(10);
    let mut count = req.count;
    let mut from = Some(req.start);
    let mut eof = false;
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let mut cid = None;
    while attempts > 0 && count > 0 {
        attempts -= 1;
        let Some(start) = from else {
            eof = true;
            break;
        };
        let next = s
            .group(&req.group)
            .and_then(|g| g.pel().range(start..).next().map(|(id, p)| (*id, *p)));
        let Some((id, p)) = next else {
            eof = true;
            break;
        };
        from = id.next();
        let present = s.contains(id);
        let Some(g) = s.group_mut(&req.group) else {
            break;
        };
        if !present {
            g.ack(id);
            deleted.push(id);
            count -= 1;
            continue;
        }
        if req.min_idle_ms > 0 && p.idle_ms(now) < req.min_idle_ms {
            continue;
        }
        let c = match cid {
            Some(c) => c,
            None => {
                let (c, _) = g.get_or_create_consumer(&req.consumer, now);
                g.touch_seen(c, now);
                cid = Some(c);
                c
            }
        };
        let n = if req.justid {
            p.delivery_count
        } else {
            p.delivery_count.saturating_add(1)
        };
        g.claim(id, c, now, n);
        g.touch_active(c, now);
        claimed.push(id);
        count -= 1;
    }
    let cursor = if eof {
        StreamId::MIN
    } else {
        from.and_then(|f| {
            s.group(&req.group)
                .and_then(|g| g.pel().range(f..).next().map(|(id, _)| *id))
        })
        .unwrap_or(StreamId::MIN)
    };
    let claimed_reply = claimed
        .iter()
        .map(|&id| {
            if req.justid {
                Reply::Bulk(id.to_bytes())
            } else {
                s.get(id).map_or(Reply::NullArray, entry_reply)
            }
        })
        .collect();
    let deleted_reply = deleted
        .iter()
        .map(|id| Reply::Bulk(id.to_bytes()))
        .collect();
    let change = GroupChange {
        consumer: cid.map(|_| &req.consumer[..]),
        acked: deleted,
        pel: claimed,
        ..Default::default()
    };
    log_group_change(db, cx, &req.key, &req.group, &change);
    Ok(Reply::Array(vec![
        Reply::Bulk(cursor.to_bytes()),
        Reply::Array(claimed_reply),
        Reply::Array(deleted_reply),
    ]))
}

/// `XINFO STREAM | GROUPS | CONSUMERS | HELP`.
///
/// # Reply
/// Maps (flat arrays in RESP2) with Redis's field names and order.
/// # Errors
/// `WrongType`; `ERR no such key`; `NOGROUP No such consumer group '<g>' for
/// key name '<k>'` (CONSUMERS).
/// # Source
/// `xinfoCommand`, `xinfoReplyWithStreamInfo`, `streamReplyWithCGLag`.
pub fn apply_xinfo(db: &mut ShardDb, cx: &ExecCtx, req: &XinfoReq) -> Result<Reply, CmdError> {
    let key = match req {
        XinfoReq::Help => return Ok(xinfo_help()),
        XinfoReq::Stream { key, .. }
        | XinfoReq::Groups { key }
        | XinfoReq::Consumers { key, .. } => key,
    };
    let now = cx.now_ms;
    let s = db
        .get_stream(cx.db, key, now)?
        .ok_or(CmdError::msg("ERR no such key"))?;
    match req {
        XinfoReq::Groups { .. } => Ok(Reply::Array(
            s.groups()
                .iter()
                .map(|(name, g)| reply_group_info(s, name, g))
                .collect(),
        )),
        XinfoReq::Consumers { group, .. } => {
            let g = s.group(group).ok_or_else(|| nogroup_for_key(group, key))?;
            Ok(Reply::Array(
                g.consumers()
                    .map(|c| {
                        let idle = now.saturating_sub(c.seen_time_ms);
                        let inactive = c.active_time_ms.map_or(-1, |t| {
                            i64::try_from(now.saturating_sub(t)).unwrap_or(i64::MAX)
                        });
                        Reply::Map(vec![
                            (Reply::bulk_copy("name"), Reply::Bulk(c.name.clone())),
                            (Reply::bulk_copy("pending"), Reply::Int(c.pel.len() as i64)),
                            (Reply::bulk_copy("idle"), Reply::Int(idle as i64)),
                            (Reply::bulk_copy("inactive"), Reply::Int(inactive)),
                        ])
                    })
                    .collect(),
            ))
        }
        XinfoReq::Stream { full, .. } => Ok(reply_stream_info(s, *full, now)),
        XinfoReq::Help => Ok(xinfo_help()),
    }
}

// ---------------------------------------------------------------------------
// Reply helpers
// ---------------------------------------------------------------------------

fn field(name: &'static str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk_copy(name), v)
}

fn int_u64(n: u64) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn opt_int(n: Option<u64>) -> Reply {
    n.map_or(Reply::NullBulk, int_u64)
}

fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

/// One group of XINFO GROUPS.
fn reply_group_info(s: &Stream, name: &Bytes, g: &ConsumerGroup) -> Reply {
    let counters = s.counters();
    Reply::Map(vec![
        field("name", Reply::Bulk(name.clone())),
        field("consumers", int_u64(g.consumer_count() as u64)),
        field("pending", int_u64(g.pel().len() as u64)),
        field("last-delivered-id", id_reply(g.last_id)),
        field("entries-read", opt_int(g.entries_read)),
        field("lag", opt_int(g.lag(&counters))),
    ])
}

/// XINFO STREAM, and with `full = Some(count)` the FULL form (count 0 = all).
fn reply_stream_info(s: &Stream, full: Option<u64>, now_ms: u64) -> Reply {
    let mut m = vec![
        field("length", int_u64(s.len())),
        field("radix-tree-keys", int_u64(s.node_count() as u64)),
        field(
            "radix-tree-nodes",
            int_u64(radix_nodes_estimate(s.node_count())),
        ),
        field("last-generated-id", id_reply(s.last_id())),
        field("max-deleted-entry-id", id_reply(s.max_deleted_entry_id())),
        field("entries-added", int_u64(s.entries_added())),
        field("recorded-first-entry-id", id_reply(s.first_id())),
    ];
    // IDMP (Redis 8.6): always reported, defaults for a stream without a map.
    let cfg = s.idmp().map(|m| m.config()).unwrap_or_default();
    let (pids, iids, added, dups) = s.idmp().map_or((0, 0, 0, 0), |m| {
        (
            m.pids_tracked(now_ms),
            m.iids_tracked(now_ms),
            m.iids_added,
            m.iids_duplicates,
        )
    });
    m.extend([
        field("idmp-duration", int_u64(cfg.duration_s)),
        field("idmp-maxsize", int_u64(cfg.maxsize)),
        field("pids-tracked", int_u64(pids)),
        field("iids-tracked", int_u64(iids)),
        field("iids-added", int_u64(added)),
        field("iids-duplicates", int_u64(dups)),
    ]);
    let Some(count) = full else {
        m.push(field("groups", int_u64(s.groups().len() as u64)));
        m.push(field(
            "first-entry",
            s.first_entry().map_or(Reply::NullBulk, entry_reply),
        ));
        m.push(field(
            "last-entry",
            s.last_entry().map_or(Reply::NullBulk, entry_reply),
        ));
        return Reply::Map(m);
    };
    let take = if count == 0 {
        usize::MAX
    } else {
        usize::try_from(count).unwrap_or(usize::MAX)
    };
    let entries: Vec<_> = s
        .iter_range(StreamId::MIN, StreamId::MAX, false)
        .take(take)
        .collect();
    m.push(field("entries", entries_reply(entries)));
    let counters = s.counters();
    let groups = s
        .groups()
        .iter()
        .map(|(name, g)| {
            let pel = g
                .pel()
                .iter()
                .take(take)
                .map(|(id, p)| {
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::Bulk(g.consumer_name(p.consumer)),
                        int_u64(p.delivery_time_ms),
                        int_u64(p.delivery_count),
                    ])
                })
                .collect();
            let consumers = g
                .consumers()
                .map(|c| {
                    let pel = c
                        .pel
                        .keys()
                        .take(take)
                        .filter_map(|id| {
                            let p = g.pending(*id)?;
                            Some(Reply::Array(vec![
                                id_reply(*id),
                                int_u64(p.delivery_time_ms),
                                int_u64(p.delivery_count),
                            ]))
                        })
                        .collect();
                    Reply::Map(vec![
                        field("name", Reply::Bulk(c.name.clone())),
                        field("seen-time", int_u64(c.seen_time_ms)),
                        field(
                            "active-time",
                            Reply::Int(c.active_time_ms.map_or(-1, |t| t as i64)),
                        ),
                        field("pel-count", int_u64(c.pel.len() as u64)),
                        field("pending", Reply::Array(pel)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                field("name", Reply::Bulk(name.clone())),
                field("last-delivered-id", id_reply(g.last_id)),
                field("entries-read", opt_int(g.entries_read)),
                field("lag", opt_int(g.lag(&counters))),
                field("pel-count", int_u64(g.pel().len() as u64)),
                field("pending", Reply::Array(pel)),
                field("consumers", Reply::Array(consumers)),
                // Redis 8.8: entries released by XNACK (no owner).
                field(
                    "nacked-count",
                    int_u64(g.pel().values().filter(|p| p.is_nacked()).count() as u64),
                ),
            ])
        })
        .collect();
    m.push(field("groups", Reply::Array(groups)));
    Reply::Map(m)
}

/// `radix-tree-nodes`: Redis counts its rax's internal nodes, which we do not
/// have; report a plausible figure (one per key plus the root), 0 when empty
/// never happens in Redis (an empty rax has its root node), so at least 1.
fn radix_nodes_estimate(keys: usize) -> u64 {
    (keys as u64).saturating_mul(2).max(1)
}

fn xgroup_help() -> Reply {
    help_reply(&[
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
        "HELP",
        "    Prints this help.",
    ])
}

fn xinfo_help() -> Reply {
    help_reply(&[
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
        "HELP",
        "    Prints this help.",
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::stream::{apply_xadd, apply_xdel, parse_xadd_req};
    use crate::route::slot::ShardId;

    fn argv(s: &str) -> Vec<Bytes> {
        s.split_whitespace()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn fresh() -> (ShardDb, ExecCtx) {
        (ShardDb::new(ShardId(0), 1, 16), ExecCtx::at(0, 1000))
    }

    fn run(db: &mut ShardDb, cx: &ExecCtx, line: &str) -> Result<Reply, CmdError> {
        let a = argv(line);
        let name = a[0].to_ascii_uppercase();
        match &name[..] {
            b"XADD" => apply_xadd(db, cx, parse_xadd_req(&a)?),
            b"XDEL" => apply_xdel(db, cx, &a[1], a[2..].iter().map(|x| parse_id(x)).collect()),
            b"XGROUP" => apply_xgroup(db, cx, parse_xgroup_req(&a)?),
            b"XREADGROUP" => apply_xreadgroup(db, cx, &parse_xreadgroup_req(&a)?),
            b"XACK" => apply_xack(
                db,
                cx,
                &a[1],
                &a[2],
                a[3..].iter().map(|x| parse_id(x)).collect(),
            ),
            b"XPENDING" => apply_xpending(db, cx, &a[1], &a[2], parse_xpending_req(&a)?.as_ref()),
            b"XCLAIM" => apply_xclaim(db, cx, &a[1], &a[2], &a[3], parse_xclaim_opts(&a)),
            b"XAUTOCLAIM" => apply_xautoclaim(db, cx, &parse_xautoclaim_req(&a)?),
            b"XINFO" => apply_xinfo(db, cx, &parse_xinfo_req(&a)?),
            _ => panic!("unknown {line}"),
        }
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn ids_of(r: &Reply) -> Vec<String> {
        let Reply::PairMap(p) = r else { return vec![] };
        p.iter()
            .flat_map(|(_, v)| match v {
                Reply::Array(es) => es
                    .iter()
                    .filter_map(|e| match e {
                        Reply::Array(x) => match x.first() {
                            Some(Reply::Bulk(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
                _ => vec![],
            })
            .collect()
    }

    #[test]
    fn create_read_ack_pending() {
        let (mut db, cx) = fresh();
        assert_eq!(
            run(&mut db, &cx, "XGROUP CREATE s g $"),
            Err(CmdError::msg(ERR_XGROUP_NO_KEY))
        );
        assert_eq!(
            run(&mut db, &cx, "XGROUP CREATE s g $ MKSTREAM"),
            Ok(Reply::Ok)
        );
        assert_eq!(
            run(&mut db, &cx, "XGROUP CREATE s g $"),
            Err(CmdError::msg(ERR_BUSYGROUP))
        );
        for i in 1..=3 {
            run(&mut db, &cx, &format!("XADD s {i} f v")).unwrap();
        }
        let r = run(&mut db, &cx, "XREADGROUP GROUP g c COUNT 2 STREAMS s >").unwrap();
        assert_eq!(ids_of(&r), vec!["1-0", "2-0"]);
        assert_eq!(
            run(&mut db, &cx, "XPENDING s g"),
            Ok(Reply::Array(vec![
                Reply::Int(2),
                bulk("1-0"),
                bulk("2-0"),
                Reply::Array(vec![Reply::Array(vec![bulk("c"), bulk("2")])]),
            ]))
        );
        assert_eq!(run(&mut db, &cx, "XACK s g 1 1 9"), Ok(Reply::Int(1)));
        assert_eq!(run(&mut db, &cx, "XACK s nog bad"), Ok(Reply::Int(0)));
        assert_eq!(
            run(&mut db, &cx, "XACK s g bad"),
            Err(CmdError::InvalidStreamId)
        );
        // History: only c's own pending entries; another consumer sees none.
        let r = run(&mut db, &cx, "XREADGROUP GROUP g c STREAMS s 0").unwrap();
        assert_eq!(ids_of(&r), vec!["2-0"]);
        let r = run(&mut db, &cx, "XREADGROUP GROUP g other STREAMS s 0").unwrap();
        assert_eq!(r, Reply::PairMap(vec![(bulk("s"), Reply::Array(vec![]))]));
        // Deleted entry in history comes back as [id, nil].
        run(&mut db, &cx, "XDEL s 2").unwrap();
        let r = run(&mut db, &cx, "XREADGROUP GROUP g c STREAMS s 0").unwrap();
        assert_eq!(
            r,
            Reply::PairMap(vec![(
                bulk("s"),
                Reply::Array(vec![Reply::Array(vec![bulk("2-0"), Reply::NullArray])])
            )])
        );
    }

    #[test]
    fn xclaim_and_xautoclaim() {
        let (mut db, cx) = fresh();
        run(&mut db, &cx, "XGROUP CREATE s g 0 MKSTREAM").unwrap();
        for i in 1..=4 {
            run(&mut db, &cx, &format!("XADD s {i} f v")).unwrap();
        }
        run(&mut db, &cx, "XREADGROUP GROUP g a STREAMS s >").unwrap();
        let later = ExecCtx::at(0, 5000);
        assert_eq!(
            run(&mut db, &later, "XCLAIM s g b 3000 1 JUSTID"),
            Ok(Reply::Array(vec![bulk("1-0")]))
        );
        // Too recent now.
        assert_eq!(
            run(&mut db, &later, "XCLAIM s g b 3000 1"),
            Ok(Reply::Array(vec![]))
        );
        run(&mut db, &cx, "XDEL s 3").unwrap();
        let r = run(&mut db, &later, "XAUTOCLAIM s g b 10 0 COUNT 2 JUSTID").unwrap();
        assert_eq!(
            r,
            Reply::Array(vec![
                bulk("4-0"),
                Reply::Array(vec![bulk("2-0")]),
                Reply::Array(vec![bulk("3-0")]),
            ])
        );
        assert_eq!(
            run(&mut db, &later, "XCLAIM s nog b 1 1"),
            Err(nogroup_key_or_group(b"s", b"nog"))
        );
        assert_eq!(
            run(&mut db, &later, "XCLAIM s g b x 1"),
            Err(CmdError::msg(
                "ERR Invalid min-idle-time argument for XCLAIM"
            ))
        );
    }

    #[test]
    fn parked_reader_is_served_once_and_woken_by_destroy() {
        let (mut db, cx) = fresh();
        run(&mut db, &cx, "XGROUP CREATE s g $ MKSTREAM").unwrap();
        let req = parse_xreadgroup_req(&argv("XREADGROUP GROUP g c BLOCK 0 STREAMS s >")).unwrap();
        let t1 = Ticket::new();
        assert_eq!(
            park_xreadgroup_apply(&mut db, &cx, req.clone(), t1.clone()),
            Reply::NoReply
        );
        let t2 = Ticket::new();
        assert_eq!(
            park_xreadgroup_apply(&mut db, &cx, req, t2.clone()),
            Reply::NoReply
        );
        // t2 already answered elsewhere (timeout): it must not take the entry.
        assert!(t2.claim());
        run(&mut db, &cx, "XADD s 1 f v").unwrap();
        let mut out = Vec::new();
        crate::shard::blocking::serve_ready(&mut db, 1000, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(ids_of(&out[0].1), vec!["1-0"]);
        // Second parked reader, then the group goes away.
        let req = parse_xreadgroup_req(&argv("XREADGROUP GROUP g c BLOCK 0 STREAMS s >")).unwrap();
        let t3 = Ticket::new();
        park_xreadgroup_apply(&mut db, &cx, req, t3);
        run(&mut db, &cx, "XGROUP DESTROY s g").unwrap();
        let mut out = Vec::new();
        crate::shard::blocking::serve_ready(&mut db, 1000, &mut out);
        assert_eq!(
            out.first().map(|o| o.1.clone()),
            Some(Reply::Error(CmdError::msg(
                "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"
            )))
        );
    }
}
