//! Stream commands without consumer groups: XADD, XLEN, XRANGE, XREVRANGE,
//! XDEL, XTRIM, XSETID, XREAD (with BLOCK).
//!
//! Argument errors are found on the IO thread, except where Redis reports
//! them only after looking the key up (XDEL's IDs, XREAD's per-stream IDs):
//! those are carried to the shard and reported in Redis's order.
//!
//! # Source
//! redis/src/t_stream.c (7.x): `xaddCommand`, `xrangeGenericCommand`,
//! `xlenCommand`, `xdelCommand`, `xtrimCommand`, `xsetidCommand`,
//! `xreadCommand`, `streamParseAddOrTrimArgsOrReply`.

use std::sync::Arc;

use bytes::Bytes;

use crate::aof::effects::{log_ids, log_trim, UNREF_RECORD};
use crate::cmd::args::{int_arg, is};
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Handler, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::blocking::{Attempt, Ticket, Waiter};
use crate::shard::db::ShardDb;
use crate::stream::id::{parse_id, parse_range_end, parse_range_start, parse_xadd_id};
use crate::stream::{Entry, IdSpec, RefPolicy, StreamId, TrimSpec, TrimStrategy};

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

/// Table rows of this family.
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
            validate: None,
        },
    },
];

// ---------------------------------------------------------------------------
// Parsing (IO thread)
// ---------------------------------------------------------------------------

/// `arg` as a C string equals `token` (Redis compares `ptr[0]`/`ptr[1]`, so
/// anything after a NUL byte is invisible).
fn c_str_is(arg: &[u8], token: u8) -> bool {
    arg.first() == Some(&token) && (arg.len() == 1 || arg[1] == 0)
}

/// `KEEPREF` / `DELREF` / `ACKED` (any case), if `arg` is one of them.
pub fn ref_policy(arg: &[u8]) -> Option<RefPolicy> {
    if is(arg, "KEEPREF") {
        Some(RefPolicy::KeepRef)
    } else if is(arg, "DELREF") {
        Some(RefPolicy::DelRef)
    } else if is(arg, "ACKED") {
        Some(RefPolicy::Acked)
    } else {
        None
    }
}

/// `[KEEPREF | DELREF | ACKED] IDS numids id [id ...]` of XDELEX and XACKDEL
/// (Redis 8.2), starting at `argv[from]`. The policy and the IDS block may
/// come in either order.
///
/// # Errors
/// `ERR syntax error` (unknown token, policy given twice, no IDS block),
/// `ERR Number of IDs must be a positive integer` (numids not an integer or
/// < 1), `ERR The `numids` parameter must match the number of arguments`
/// (fewer IDs than numids), `ERR Invalid stream ID specified as stream command
/// argument`.
pub fn parse_ids_block(
    argv: &[Bytes],
    from: usize,
) -> Result<(RefPolicy, Vec<StreamId>), CmdError> {
    let mut refs = None;
    let mut ids = None;
    let mut i = from;
    while i < argv.len() {
        let a = &argv[i];
        if let Some(p) = ref_policy(a) {
            if refs.is_some() {
                return Err(CmdError::Syntax);
            }
            refs = Some(p);
            i += 1;
        } else if is(a, "IDS") && ids.is_none() {
            let n = argv
                .get(i + 1)
                .and_then(|b| crate::cmd::args::parse_i64(b))
                .filter(|n| *n > 0)
                .ok_or(CmdError::msg(
                    "ERR Number of IDs must be a positive integer",
                ))?;
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            let start = i + 2;
            if argv.len() - start < n {
                return Err(CmdError::msg(
                    "ERR The `numids` parameter must match the number of arguments",
                ));
            }
            let parsed: Result<Vec<StreamId>, CmdError> =
                argv[start..start + n].iter().map(|b| parse_id(b)).collect();
            ids = Some(parsed?);
            i = start + n;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let ids = ids.ok_or(CmdError::Syntax)?;
    Ok((refs.unwrap_or_default(), ids))
}

/// The trim clause and XADD prefix options as parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct AddTrimArgs {
    trim: Option<TrimSpec>,
    nomkstream: bool,
    /// XADD only: index of the ID argument (`argv.len()` when none was found).
    id_pos: usize,
}

/// `[NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] [KEEPREF |
/// DELREF | ACKED]` of XADD (stopping at the ID) or the options of XTRIM
/// (all remaining arguments). The reference policy (Redis 8.2) may appear
/// anywhere among the options; the last one given wins.
///
/// # Errors
/// In Redis's order: `ERR syntax error, MAXLEN and MINID options at the same
/// time are not compatible`, `ERR value is not an integer or out of range`,
/// `ERR The MAXLEN argument must be >= 0.`, invalid MINID / XADD ID,
/// `ERR The LIMIT argument must be >= 0.`, `ERR syntax error` (XTRIM only),
/// then `ERR syntax error, LIMIT cannot be used without specifying a trimming
/// strategy`, `ERR syntax error, XTRIM must be called with a trimming
/// strategy`, `ERR syntax error, LIMIT cannot be used without the special ~ option`.
/// # Source
/// `streamParseAddOrTrimArgsOrReply`.
fn parse_add_trim(argv: &[Bytes], xadd: bool) -> Result<AddTrimArgs, CmdError> {
    let argc = argv.len();
    let mut out = AddTrimArgs {
        id_pos: argc,
        ..Default::default()
    };
    let mut strategy: Option<TrimStrategy> = None;
    let mut approx = false;
    let mut limit: i64 = 0;
    let mut limit_given = false;
    let mut refs = RefPolicy::KeepRef;
    let mut i = 2;
    while i < argc {
        let moreargs = argc - 1 - i;
        let opt = &argv[i];
        if xadd && c_str_is(opt, b'*') {
            out.id_pos = i;
            break;
        } else if (is(opt, "MAXLEN") || is(opt, "MINID")) && moreargs > 0 {
            if strategy.is_some() {
                return Err(CmdError::msg(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            approx = false;
            let next = &argv[i + 1];
            if moreargs >= 2 && c_str_is(next, b'~') {
                approx = true;
                i += 1;
            } else if moreargs >= 2 && c_str_is(next, b'=') {
                i += 1;
            }
            let threshold = &argv[i + 1];
            strategy = Some(if is(opt, "MAXLEN") {
                let n = int_arg(threshold)?;
                let n = u64::try_from(n)
                    .map_err(|_| CmdError::msg("ERR The MAXLEN argument must be >= 0."))?;
                TrimStrategy::MaxLen(n)
            } else {
                TrimStrategy::MinId(parse_id(threshold)?)
            });
            i += 1;
        } else if is(opt, "LIMIT") && moreargs > 0 {
            limit = int_arg(&argv[i + 1])?;
            if limit < 0 {
                return Err(CmdError::msg("ERR The LIMIT argument must be >= 0."));
            }
            limit_given = true;
            i += 1;
        } else if let Some(p) = ref_policy(opt) {
            refs = p;
        } else if xadd && is(opt, "NOMKSTREAM") {
            out.nomkstream = true;
        } else if xadd {
            out.id_pos = i;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if limit != 0 && strategy.is_none() {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && strategy.is_none() {
        return Err(CmdError::msg(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given && !approx {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    out.trim = strategy.map(|strategy| TrimSpec {
        strategy,
        approx,
        limit: limit_given.then_some(limit as u64),
        refs,
    });
    Ok(out)
}

/// A parsed `XADD`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XaddReq {
    pub key: Bytes,
    /// `NOMKSTREAM`: do not create a missing key (reply null instead).
    pub nomkstream: bool,
    /// Trim applied after the append.
    pub trim: Option<TrimSpec>,
    /// `*`, `ms-*` or an explicit ID.
    pub id: IdSpec,
    pub fields: Vec<(Bytes, Bytes)>,
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id
/// field value [field value ...]`.
///
/// # Errors
/// Option errors of [`parse_add_trim`]; `InvalidStreamId`; `ERR wrong number
/// of arguments for 'xadd' command` when the field/value list is empty or odd;
/// `StreamIdZero` for `0-0` (before the key is looked up, as Redis does).
/// # Source
/// `xaddCommand`.
pub fn parse_xadd_req(argv: &[Bytes]) -> Result<XaddReq, CmdError> {
    let opts = parse_add_trim(argv, true)?;
    let id = match argv.get(opts.id_pos) {
        Some(a) => parse_xadd_id(a)?,
        None => IdSpec::Auto,
    };
    let field_pos = opts.id_pos + 1;
    let nfields = argv.len().saturating_sub(field_pos);
    if field_pos > argv.len() || nfields < 2 || nfields % 2 == 1 {
        return Err(CmdError::arity("xadd"));
    }
    if id == IdSpec::Explicit(StreamId::MIN) {
        return Err(CmdError::StreamIdZero);
    }
    let fields = argv[field_pos..]
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    Ok(XaddReq {
        key: argv[1].clone(),
        nomkstream: opts.nomkstream,
        trim: opts.trim,
        id,
        fields,
    })
}

fn parse_xadd(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xadd_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xadd(db, cx, req).into()))
}

fn parse_xlen(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| apply_xlen(db, cx, &key).into()))
}

/// A parsed `XRANGE` / `XREVRANGE`, bounds resolved to inclusive IDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XrangeReq {
    pub key: Bytes,
    /// Smallest ID included.
    pub start: StreamId,
    /// Greatest ID included.
    pub end: StreamId,
    /// `COUNT n` (negative counts become 0). `None` = no limit.
    pub count: Option<u64>,
    /// XREVRANGE: newest first.
    pub rev: bool,
}

/// `XRANGE key start end [COUNT n]` / `XREVRANGE key end start [COUNT n]`.
///
/// # Errors
/// In Redis's order: start parse, `ERR invalid start ID for the interval`,
/// end parse, `ERR invalid end ID for the interval`, COUNT not an integer,
/// `ERR syntax error` for anything else after the bounds.
/// # Source
/// `xrangeGenericCommand`.
pub fn parse_xrange_req(argv: &[Bytes], rev: bool) -> Result<XrangeReq, CmdError> {
    let (start_arg, end_arg) = if rev {
        (&argv[3], &argv[2])
    } else {
        (&argv[2], &argv[3])
    };
    let start = parse_range_start(start_arg)?.first_included()?;
    let end = parse_range_end(end_arg)?.last_included()?;
    let mut count = None;
    let mut j = 4;
    while j < argv.len() {
        if is(&argv[j], "COUNT") && j + 1 < argv.len() {
            count = Some(u64::try_from(int_arg(&argv[j + 1])?).unwrap_or(0));
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(XrangeReq {
        key: argv[1].clone(),
        start,
        end,
        count,
        rev,
    })
}

fn parse_xrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xrange_req(argv, false)?;
    Ok(on_shard(move |db, cx| apply_xrange(db, cx, &req).into()))
}

fn parse_xrevrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xrange_req(argv, true)?;
    Ok(on_shard(move |db, cx| apply_xrange(db, cx, &req).into()))
}

fn parse_xdel(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    // Redis looks the key up before parsing the IDs: keep the verdict for the shard.
    let ids: Result<Vec<StreamId>, CmdError> = argv[2..].iter().map(|a| parse_id(a)).collect();
    Ok(on_shard(move |db, cx| apply_xdel(db, cx, &key, ids).into()))
}

/// `XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]` (Redis
/// 8.2). Arguments are checked before the key is looked up.
///
/// # Errors
/// See [`parse_ids_block`].
fn parse_xdelex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let (refs, ids) = parse_ids_block(argv, 2)?;
    Ok(on_shard(move |db, cx| {
        apply_xdelex(db, cx, &key, refs, &ids).into()
    }))
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`.
///
/// # Errors
/// As [`parse_add_trim`]; `NOMKSTREAM` and unknown tokens are `ERR syntax error`.
pub fn parse_xtrim_req(argv: &[Bytes]) -> Result<(Bytes, TrimSpec), CmdError> {
    let opts = parse_add_trim(argv, false)?;
    let trim = opts.trim.ok_or(CmdError::Syntax)?;
    Ok((argv[1].clone(), trim))
}

fn parse_xtrim(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let (key, trim) = parse_xtrim_req(argv)?;
    Ok(on_shard(move |db, cx| {
        apply_xtrim(db, cx, &key, trim).into()
    }))
}

/// A parsed `XSETID`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XsetidReq {
    pub key: Bytes,
    pub last_id: StreamId,
    pub entries_added: Option<u64>,
    pub max_deleted: Option<StreamId>,
}

/// `XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]`.
///
/// # Errors
/// `InvalidStreamId`; `ERR value is not an integer or out of range`;
/// `ERR entries_added must be positive` (negative); `ERR The ID specified in
/// XSETID is smaller than the provided max_deleted_entry_id` (checked here,
/// before the key lookup, as Redis does); `ERR syntax error`.
/// # Source
/// `xsetidCommand`.
pub fn parse_xsetid_req(argv: &[Bytes]) -> Result<XsetidReq, CmdError> {
    let last_id = parse_id(&argv[2])?;
    let mut entries_added = None;
    let mut max_deleted = None;
    let mut i = 3;
    while i < argv.len() {
        let more = i + 1 < argv.len();
        if is(&argv[i], "ENTRIESADDED") && more {
            let n = int_arg(&argv[i + 1])?;
            let n = u64::try_from(n)
                .map_err(|_| CmdError::msg("ERR entries_added must be positive"))?;
            entries_added = Some(n);
        } else if is(&argv[i], "MAXDELETEDID") && more {
            let m = parse_id(&argv[i + 1])?;
            if last_id < m {
                return Err(CmdError::msg(
                    crate::stream::ERR_XSETID_SMALLER_THAN_MAX_DELETED,
                ));
            }
            max_deleted = Some(m);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(XsetidReq {
        key: argv[1].clone(),
        last_id,
        entries_added,
        max_deleted,
    })
}

fn parse_xsetid(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xsetid_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xsetid(db, cx, &req).into()))
}

/// One stream's ID argument of XREAD, resolved on the shard (Redis reports
/// ID errors only after the key's type check).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// `$`: the stream's last ID when the command runs (0-0 if missing).
    Last,
    /// `+`: the last entry itself (Redis 7.4).
    LastEntry,
    /// Entries with IDs greater than this.
    After(StreamId),
    /// An invalid ID argument, reported in key order.
    Invalid(CmdError),
}

/// The options of XREAD and XREADGROUP, parsed as Redis's `xreadCommand`
/// parses both: `[COUNT n] [BLOCK ms] [GROUP g c] [NOACK] [CLAIM ms] STREAMS
/// key... id...`, options in any order before STREAMS.
#[derive(Clone, Debug, Default)]
pub struct ReadArgs {
    /// `COUNT n` (negative counts as 0 = no limit).
    pub count: u64,
    /// `BLOCK ms`.
    pub block_ms: Option<u64>,
    /// `GROUP group consumer` (XREADGROUP).
    pub group: Option<(Bytes, Bytes)>,
    /// `NOACK` (XREADGROUP).
    pub noack: bool,
    /// `CLAIM min-idle-time` in ms (XREADGROUP, Redis 8.4).
    pub claim_min_idle_ms: Option<u64>,
    pub keys: Vec<Bytes>,
    /// The ID arguments, one per key, unparsed.
    pub ids: Vec<Bytes>,
}

/// Parse XREAD (`group_cmd` false) or XREADGROUP options.
///
/// # Errors
/// In Redis's order, per option as it is met: `ERR timeout is not an integer
/// or out of range`, `ERR timeout is negative`, `ERR value is not an integer
/// or out of range` (COUNT, CLAIM), `ERR value is out of range, must be
/// positive` (CLAIM), the unbalanced-streams error (Redis 7.4's text:
/// `ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+',
/// or '$' must be specified.` / `... 'xreadgroup' ... an ID or '>' ...`), the
/// GROUP / NOACK misuse errors of XREAD, `ERR syntax error`.
/// # Source
/// `xreadCommand`, redis/src/t_stream.c (7.4).
pub fn parse_read_args(argv: &[Bytes], group_cmd: bool) -> Result<ReadArgs, CmdError> {
    let argc = argv.len();
    let mut out = ReadArgs::default();
    let mut streams_at = None;
    let mut i = 1;
    while i < argc {
        let moreargs = argc - 1 - i;
        let o = &argv[i];
        if is(o, "BLOCK") && moreargs > 0 {
            i += 1;
            let t = crate::cmd::args::parse_i64(&argv[i]).ok_or(CmdError::msg(
                "ERR timeout is not an integer or out of range",
            ))?;
            if t < 0 {
                return Err(CmdError::msg("ERR timeout is negative"));
            }
            out.block_ms = Some(t as u64);
        } else if is(o, "COUNT") && moreargs > 0 {
            i += 1;
            out.count = u64::try_from(int_arg(&argv[i])?).unwrap_or(0);
        } else if is(o, "STREAMS") && moreargs > 0 {
            let first = i + 1;
            if !(argc - first).is_multiple_of(2) {
                return Err(CmdError::msg(if group_cmd {
                    "ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."
                } else {
                    "ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified."
                }));
            }
            streams_at = Some(first);
            break;
        } else if is(o, "GROUP") && moreargs >= 2 {
            if !group_cmd {
                return Err(CmdError::msg(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            out.group = Some((argv[i + 1].clone(), argv[i + 2].clone()));
            i += 2;
        } else if is(o, "NOACK") {
            if !group_cmd {
                return Err(CmdError::msg(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            out.noack = true;
        } else if group_cmd && is(o, "CLAIM") && moreargs > 0 {
            i += 1;
            let t = int_arg(&argv[i])?;
            if t < 0 {
                return Err(CmdError::msg("ERR value is out of range, must be positive"));
            }
            out.claim_min_idle_ms = Some(t as u64);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let first = streams_at.ok_or(CmdError::Syntax)?;
    let n = (argc - first) / 2;
    out.keys = argv[first..first + n].to_vec();
    out.ids = argv[first + n..].to_vec();
    Ok(out)
}

/// A parsed `XREAD`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XreadReq {
    /// `COUNT n`: at most n entries per stream; `0` (or negative) = no limit.
    pub count: u64,
    /// `BLOCK ms` (0 = forever); `None` without BLOCK.
    pub block_ms: Option<u64>,
    pub keys: Vec<Bytes>,
    pub from: Vec<ReadFrom>,
}

/// `XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]`.
///
/// # Errors
/// Those of [`parse_read_args`]. ID errors are deferred (see [`ReadFrom::Invalid`]).
/// # Source
/// `xreadCommand`.
pub fn parse_xread_req(argv: &[Bytes]) -> Result<XreadReq, CmdError> {
    let ReadArgs {
        count,
        block_ms,
        keys,
        ids,
        ..
    } = parse_read_args(argv, false)?;
    let from = ids
        .iter()
        .map(|a| match &a[..] {
            b"$" => ReadFrom::Last,
            b"+" => ReadFrom::LastEntry,
            b">" => ReadFrom::Invalid(CmdError::msg(
                "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
            )),
            _ => parse_id(a).map_or_else(ReadFrom::Invalid, ReadFrom::After),
        })
        .collect();
    Ok(XreadReq {
        count,
        block_ms,
        keys,
        from,
    })
}

fn parse_xread(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xread_req(argv)?;
    Ok(on_shard(move |db, cx| {
        apply_xread(db, cx, &req).map(|(reply, _)| reply).into()
    }))
}

/// `Some(timeout_ms)` when the argv is a valid XREAD with `BLOCK`.
fn xread_block_ms(argv: &[Bytes]) -> Option<u64> {
    parse_xread_req(argv).ok()?.block_ms
}

/// XREAD BLOCK on one shard: serve now if any stream has data (claiming the
/// ticket first), else park a waiter with `$`/`+` resolved at this moment.
fn park_xread(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_xread_req(argv)?;
    Ok(on_shard(move |db, cx| {
        park_xread_apply(db, cx, req, ticket)
    }))
}

// ---------------------------------------------------------------------------
// Execution (shard thread)
// ---------------------------------------------------------------------------

/// `XADD`: validate the ID, create the stream unless NOMKSTREAM, append,
/// trim, and wake blocked readers of the key.
///
/// # Reply
/// The new entry's ID (bulk string); null bulk when NOMKSTREAM and the key is missing.
/// # Errors
/// `WrongType`; `StreamExhausted`, `StreamIdTooSmall` (no key is created).
/// # Source
/// `xaddCommand`.
pub fn apply_xadd(db: &mut ShardDb, cx: &ExecCtx, req: XaddReq) -> Result<Reply, CmdError> {
    let limits = db.node_limits();
    let exists = match db.get_stream(cx.db, &req.key, cx.now_ms)? {
        Some(s) => {
            s.next_id(req.id, cx.now_ms)?;
            true
        }
        None => false,
    };
    if !exists && req.nomkstream {
        return Ok(Reply::NullBulk);
    }
    let Some(stream) = db.stream_for_write(cx.db, &req.key, true, cx.now_ms)? else {
        return Ok(Reply::NullBulk);
    };
    let id = stream.append(req.id, &req.fields, cx.now_ms, limits)?;
    let (trimmed, trim_effect) = match req.trim {
        Some(trim) => stream.trim_reporting(trim, limits),
        None => (0, crate::stream::TrimEffect::Prefix),
    };
    let len_after = stream.len();
    let id_bytes = id.to_bytes();
    if db.aof.is_enabled() {
        // Effects: the entry with its concrete ID, then the trim as an exact length.
        let mut rec: Vec<&[u8]> = Vec::with_capacity(3 + 2 * req.fields.len());
        rec.extend([&b"XADD"[..], &req.key[..], &id_bytes[..]]);
        for (f, v) in &req.fields {
            rec.push(f);
            rec.push(v);
        }
        db.log_effect(cx, &rec);
        log_trim(db, cx, &req.key, trimmed, len_after, &trim_effect);
    }
    db.blocking.mark_ready(cx.db, &req.key);
    db.watch.touch(cx.db, &req.key);
    Ok(Reply::Bulk(id_bytes))
}

/// `XLEN key`.
///
/// # Reply
/// Number of entries; 0 for a missing key.
/// # Errors
/// `WrongType`.
pub fn apply_xlen(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Result<Reply, CmdError> {
    let n = db.get_stream(cx.db, key, cx.now_ms)?.map_or(0, |s| s.len());
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// `XRANGE` / `XREVRANGE`.
///
/// # Reply
/// Array of `[id, [field, value, ...]]`; empty array for a missing key; null
/// array when `COUNT` is 0 or negative on an existing key (as Redis).
/// # Errors
/// `WrongType`.
pub fn apply_xrange(db: &mut ShardDb, cx: &ExecCtx, req: &XrangeReq) -> Result<Reply, CmdError> {
    let Some(s) = db.get_stream(cx.db, &req.key, cx.now_ms)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if req.count == Some(0) {
        return Ok(Reply::NullArray);
    }
    let count = req.count.map(|c| usize::try_from(c).unwrap_or(usize::MAX));
    Ok(entries_reply(s.range(req.start, req.end, count, req.rev)))
}

/// `XDEL key id [id ...]`: the key is looked up before the IDs are checked.
///
/// # Reply
/// Number of entries deleted; 0 for a missing key (even with invalid IDs).
/// # Errors
/// `WrongType`, then `InvalidStreamId` (nothing is deleted).
pub fn apply_xdel(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    ids: Result<Vec<StreamId>, CmdError>,
) -> Result<Reply, CmdError> {
    let Some(s) = db.get_stream_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Int(0));
    };
    let ids = ids?;
    let deleted: Vec<StreamId> = ids.into_iter().filter(|id| s.delete(*id)).collect();
    if !deleted.is_empty() {
        db.watch.touch(cx.db, key);
    }
    if !deleted.is_empty() && db.aof.is_enabled() {
        let texts: Vec<Bytes> = deleted.iter().map(|id| id.to_bytes()).collect();
        let mut rec: Vec<&[u8]> = vec![b"XDEL", key];
        rec.extend(texts.iter().map(|t| &t[..]));
        db.log_effect(cx, &rec);
    }
    Ok(Reply::Int(deleted.len() as i64))
}

/// `XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]` (Redis
/// 8.2): deletes entries with control over consumer-group references.
///
/// # Reply
/// Array of one integer per ID, in order: `-1` no such entry (every ID when
/// the key is missing), `1` deleted, `2` kept because a group still needs it
/// (`ACKED`). `KEEPREF` (default) leaves PEL references; `DELREF` removes
/// them from every group, even for an ID no longer in the stream.
/// # Errors
/// `WrongType`.
/// # Source
/// redis.io XDELEX (8.2); `Stream::delete_with_refs`.
pub fn apply_xdelex(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    refs: RefPolicy,
    ids: &[StreamId],
) -> Result<Reply, CmdError> {
    let Some(s) = db.get_stream_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Array(ids.iter().map(|_| Reply::Int(-1)).collect()));
    };
    let codes: Vec<i64> = ids.iter().map(|id| s.delete_with_refs(*id, refs)).collect();
    if codes.contains(&1) {
        db.watch.touch(cx.db, key);
    }
    log_delete_with_refs(db, cx, key, refs, ids, &codes);
    Ok(Reply::Array(codes.into_iter().map(Reply::Int).collect()))
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count] [KEEPREF | DELREF |
/// ACKED]`; the reference policy is Redis 8.2's (see [`Stream::trim`](crate::stream::Stream::trim)).
///
/// # Reply
/// Number of entries removed; 0 for a missing key.
/// # Errors
/// `WrongType`.
pub fn apply_xtrim(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    trim: TrimSpec,
) -> Result<Reply, CmdError> {
    let limits = db.node_limits();
    let Some(s) = db.get_stream_mut(cx.db, key, cx.now_ms)? else {
        return Ok(Reply::Int(0));
    };
    let (removed, effect) = s.trim_reporting(trim, limits);
    let len_after = s.len();
    if removed > 0 {
        db.watch.touch(cx.db, key);
    }
    log_trim(db, cx, key, removed, len_after, &effect);
    Ok(Reply::Int(removed as i64))
}

/// Log the effects of XDELEX / XACKDEL's deletions: DELREF's dropped
/// references (every requested ID) as `SS.UNREF`, the deleted entries as XDEL.
pub fn log_delete_with_refs(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    refs: RefPolicy,
    ids: &[StreamId],
    codes: &[i64],
) {
    if refs == RefPolicy::DelRef {
        log_ids(db, cx, UNREF_RECORD, key, ids);
    }
    let deleted: Vec<StreamId> = ids
        .iter()
        .zip(codes)
        .filter(|(_, &c)| c == 1)
        .map(|(id, _)| *id)
        .collect();
    log_ids(db, cx, b"XDEL", key, &deleted);
}

/// `XSETID`.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR no such key`, `WrongType`, then the checks of
/// [`Stream::set_last_id`](crate::stream::Stream::set_last_id).
pub fn apply_xsetid(db: &mut ShardDb, cx: &ExecCtx, req: &XsetidReq) -> Result<Reply, CmdError> {
    let Some(s) = db.stream_for_write(cx.db, &req.key, false, cx.now_ms)? else {
        return Err(CmdError::msg("ERR no such key"));
    };
    s.set_last_id(req.last_id, req.entries_added, req.max_deleted)?;
    let (last, added, maxdel) = (s.last_id(), s.entries_added(), s.max_deleted_entry_id());
    log_xsetid(db, cx, &req.key, last, added, maxdel);
    Ok(Reply::Ok)
}

/// Log a stream's metadata as `XSETID key last ENTRIESADDED n MAXDELETEDID id`
/// (XSETID's effect, and how an AOF rewrite restores it).
pub fn log_xsetid(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    last: StreamId,
    entries_added: u64,
    max_deleted: StreamId,
) {
    if !db.aof.is_enabled() {
        return;
    }
    let mut n = itoa::Buffer::new();
    let (last, maxdel) = (last.to_bytes(), max_deleted.to_bytes());
    db.log_effect(
        cx,
        &[
            b"XSETID",
            key,
            &last,
            b"ENTRIESADDED",
            n.format(entries_added).as_bytes(),
            b"MAXDELETEDID",
            &maxdel,
        ],
    );
}

/// `XREAD` without blocking: resolves each stream's ID (type check first, in
/// key order), then reads entries after it.
///
/// # Reply
/// `PairMap[(key, entries)]` for streams with data, in key order; null array
/// when none has any. Also returns the resolved "after" IDs (for parking).
/// # Errors
/// `WrongType` or the stream's ID error, whichever comes first in key order.
pub fn apply_xread(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadReq,
) -> Result<(Reply, Vec<StreamId>), CmdError> {
    let after = resolve_read_ids(db, cx, req)?;
    let reply = read_after(db, cx.db, cx.now_ms, &req.keys, &after, req.count);
    Ok((reply, after))
}

/// Resolve `$`, `+` and explicit IDs against the current data.
fn resolve_read_ids(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadReq,
) -> Result<Vec<StreamId>, CmdError> {
    let mut out = Vec::with_capacity(req.keys.len());
    for (key, from) in req.keys.iter().zip(&req.from) {
        let s = db.get_stream(cx.db, key, cx.now_ms)?;
        let id = match from {
            ReadFrom::Invalid(e) => return Err(e.clone()),
            ReadFrom::After(id) => *id,
            ReadFrom::Last => s.map_or(StreamId::MIN, |s| s.last_id()),
            ReadFrom::LastEntry => match s {
                None => StreamId::MIN,
                Some(s) => match s.last_entry() {
                    Some(e) => e.id.prev().unwrap_or(StreamId::MIN),
                    None => s.last_id(),
                },
            },
        };
        out.push(id);
    }
    Ok(out)
}

/// Entries after `after[i]` of each stream `keys[i]` (up to `count` each, 0 =
/// all); keys that are missing, of another type, or without newer entries
/// are left out. Null array when nothing was found.
fn read_after(
    db: &mut ShardDb,
    dbi: usize,
    now_ms: u64,
    keys: &[Bytes],
    after: &[StreamId],
    count: u64,
) -> Reply {
    let take = if count == 0 {
        None
    } else {
        Some(usize::try_from(count).unwrap_or(usize::MAX))
    };
    let mut pairs = Vec::new();
    for (key, gt) in keys.iter().zip(after) {
        let Ok(Some(s)) = db.get_stream(dbi, key, now_ms) else {
            continue;
        };
        let Some(start) = gt.next() else {
            continue;
        };
        let entries = s.range(start, StreamId::MAX, take, false);
        if !entries.is_empty() {
            pairs.push((Reply::Bulk(key.clone()), entries_reply(entries)));
        }
    }
    if pairs.is_empty() {
        Reply::NullArray
    } else {
        Reply::PairMap(pairs)
    }
}

/// The shard side of XREAD BLOCK (see [`park_xread`]).
fn park_xread_apply(db: &mut ShardDb, cx: &ExecCtx, req: XreadReq, ticket: Arc<Ticket>) -> Reply {
    if ticket.is_fired() {
        return Reply::NoReply;
    }
    let answer = |r: Reply| if ticket.claim() { r } else { Reply::NoReply };
    let (reply, after) = match apply_xread(db, cx, &req) {
        Ok(x) => x,
        Err(e) => return answer(Reply::Error(e)),
    };
    if !matches!(reply, Reply::NullArray) {
        return answer(reply);
    }
    let dbi = cx.db;
    let keys = req.keys;
    let count = req.count;
    let watched = keys.iter().map(|k| (dbi, k.clone())).collect();
    db.blocking.park(Waiter {
        ticket: ticket.clone(),
        reply_to: cx.reply_to,
        keys: watched,
        poll: false,
        attempt: Box::new(move |db, cx, ready, ticket| {
            // Only the stream that woke the reader is served (Redis 7.0).
            let Some(i) = keys.iter().position(|k| k[..] == *ready) else {
                return Attempt::NotReady;
            };
            let (k, a) = (&keys[i..=i], after.get(i..=i).unwrap_or(&[]));
            match read_after(db, dbi, cx.now_ms, k, a, count) {
                Reply::NullArray => Attempt::NotReady,
                reply if ticket.claim() => Attempt::Served(reply),
                _ => Attempt::Lost,
            }
        }),
    });
    Reply::NoReply
}

// ---------------------------------------------------------------------------
// Reply helpers
// ---------------------------------------------------------------------------

/// One entry as Redis sends it: `[id, [field, value, ...]]`.
pub fn entry_reply(e: Entry) -> Reply {
    let mut fv = Vec::with_capacity(e.fields.len() * 2);
    for (f, v) in e.fields {
        fv.push(Reply::Bulk(f));
        fv.push(Reply::Bulk(v));
    }
    Reply::Array(vec![Reply::Bulk(e.id.to_bytes()), Reply::Array(fv)])
}

/// A list of entries as an array of [`entry_reply`]s.
pub fn entries_reply(entries: Vec<Entry>) -> Reply {
    Reply::Array(entries.into_iter().map(entry_reply).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::slot::ShardId;
    use crate::shard::db::Value;

    fn argv(s: &str) -> Vec<Bytes> {
        s.split_whitespace()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn fresh() -> (ShardDb, ExecCtx) {
        (ShardDb::new(ShardId(0), 1, 16), ExecCtx::at(0, 1000))
    }

    fn xadd(db: &mut ShardDb, cx: &ExecCtx, line: &str) -> Result<Reply, CmdError> {
        apply_xadd(db, cx, parse_xadd_req(&argv(line))?)
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn entry(id: &str, fv: &[&str]) -> Reply {
        Reply::Array(vec![
            bulk(id),
            Reply::Array(fv.iter().map(|s| bulk(s)).collect()),
        ])
    }

    #[test]
    fn xadd_ids_and_errors() {
        let (mut db, cx) = fresh();
        assert_eq!(xadd(&mut db, &cx, "XADD s 5-1 a 1"), Ok(bulk("5-1")));
        assert_eq!(xadd(&mut db, &cx, "XADD s 5-* a 2"), Ok(bulk("5-2")));
        assert_eq!(xadd(&mut db, &cx, "XADD s * a 3"), Ok(bulk("1000-0")));
        assert_eq!(xadd(&mut db, &cx, "XADD s * a 3"), Ok(bulk("1000-1")));
        assert_eq!(
            xadd(&mut db, &cx, "XADD s 5-3 a 1"),
            Err(CmdError::StreamIdTooSmall)
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD s 7 a"),
            Err(CmdError::arity("xadd"))
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD s MAXLEN 5"),
            Err(CmdError::arity("xadd"))
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD s MAXLEN -1 * a 1"),
            Err(CmdError::msg("ERR The MAXLEN argument must be >= 0."))
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD s MAXLEN 1 LIMIT 5 * a 1"),
            Err(CmdError::msg(
                "ERR syntax error, LIMIT cannot be used without the special ~ option"
            ))
        );
        // Invalid or 0-0 IDs leave no key behind.
        assert_eq!(
            xadd(&mut db, &cx, "XADD t 0-0 a 1"),
            Err(CmdError::StreamIdZero)
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD t bad a 1"),
            Err(CmdError::InvalidStreamId)
        );
        assert!(!db.exists(0, b"t", 1000));
        assert_eq!(
            xadd(&mut db, &cx, "XADD t NOMKSTREAM * a 1"),
            Ok(Reply::NullBulk)
        );
        assert!(!db.exists(0, b"t", 1000));
        db.set(
            0,
            Bytes::from_static(b"str"),
            Value::Str(Bytes::new()),
            None,
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD str * a 1"),
            Err(CmdError::WrongType)
        );
        assert_eq!(apply_xlen(&mut db, &cx, b"s"), Ok(Reply::Int(4)));
        assert_eq!(apply_xlen(&mut db, &cx, b"none"), Ok(Reply::Int(0)));
        assert_eq!(apply_xlen(&mut db, &cx, b"str"), Err(CmdError::WrongType));
    }

    #[test]
    fn xadd_trims() {
        let (mut db, cx) = fresh();
        for i in 1..=10 {
            xadd(&mut db, &cx, &format!("XADD s MAXLEN 3 {i} f v")).unwrap();
        }
        assert_eq!(apply_xlen(&mut db, &cx, b"s"), Ok(Reply::Int(3)));
        xadd(&mut db, &cx, "XADD s MINID = 10 11 f v").unwrap();
        assert_eq!(apply_xlen(&mut db, &cx, b"s"), Ok(Reply::Int(2)));
    }

    #[test]
    fn xrange_and_xrevrange() {
        let (mut db, cx) = fresh();
        for id in ["1-1", "1-2", "2-0", "3-5"] {
            xadd(&mut db, &cx, &format!("XADD s {id} k {id}")).unwrap();
        }
        let run = |db: &mut ShardDb, line: &str, rev: bool| {
            apply_xrange(db, &cx, &parse_xrange_req(&argv(line), rev)?)
        };
        assert_eq!(
            run(&mut db, "XRANGE s (1-1 2", false),
            Ok(Reply::Array(vec![
                entry("1-2", &["k", "1-2"]),
                entry("2-0", &["k", "2-0"])
            ]))
        );
        assert_eq!(
            run(&mut db, "XREVRANGE s + - COUNT 1", true),
            Ok(Reply::Array(vec![entry("3-5", &["k", "3-5"])]))
        );
        assert_eq!(
            run(&mut db, "XRANGE s - + COUNT 0", false),
            Ok(Reply::NullArray)
        );
        assert_eq!(
            run(&mut db, "XRANGE s - + COUNT -3", false),
            Ok(Reply::NullArray)
        );
        assert_eq!(
            run(&mut db, "XRANGE none - + COUNT 0", false),
            Ok(Reply::Array(vec![]))
        );
        assert_eq!(
            run(&mut db, "XRANGE s - + FOO", false),
            Err(CmdError::Syntax)
        );
        assert_eq!(
            run(
                &mut db,
                "XRANGE s (18446744073709551615-18446744073709551615 x",
                false
            ),
            Err(CmdError::msg("ERR invalid start ID for the interval"))
        );
    }

    #[test]
    fn xdel_xtrim_xsetid() {
        let (mut db, cx) = fresh();
        for i in 1..=5 {
            xadd(&mut db, &cx, &format!("XADD s {i} f v")).unwrap();
        }
        let ids = |s: &str| -> Result<Vec<StreamId>, CmdError> {
            argv(s).iter().map(|a| parse_id(a)).collect()
        };
        assert_eq!(
            apply_xdel(&mut db, &cx, b"none", ids("bad")),
            Ok(Reply::Int(0))
        );
        assert_eq!(
            apply_xdel(&mut db, &cx, b"s", ids("1 bad")),
            Err(CmdError::InvalidStreamId)
        );
        assert_eq!(
            apply_xdel(&mut db, &cx, b"s", ids("1 1 9")),
            Ok(Reply::Int(1))
        );
        let (key, trim) = parse_xtrim_req(&argv("XTRIM s MAXLEN = 2")).unwrap();
        assert_eq!(apply_xtrim(&mut db, &cx, &key, trim), Ok(Reply::Int(2)));
        assert_eq!(
            parse_xtrim_req(&argv("XTRIM s MAXLEN 1 NOMKSTREAM")),
            Err(CmdError::Syntax)
        );
        let setid =
            |db: &mut ShardDb, line: &str| apply_xsetid(db, &cx, &parse_xsetid_req(&argv(line))?);
        assert_eq!(
            setid(&mut db, "XSETID none 1"),
            Err(CmdError::msg("ERR no such key"))
        );
        assert_eq!(
            setid(&mut db, "XSETID s 4"),
            Err(CmdError::msg(crate::stream::ERR_XSETID_SMALLER_THAN_TOP))
        );
        assert_eq!(setid(&mut db, "XSETID s 9 ENTRIESADDED 20"), Ok(Reply::Ok));
        assert_eq!(
            xadd(&mut db, &cx, "XADD s 9 f v"),
            Err(CmdError::StreamIdTooSmall)
        );
        assert_eq!(
            setid(&mut db, "XSETID none 1 MAXDELETEDID 2"),
            Err(CmdError::msg(
                crate::stream::ERR_XSETID_SMALLER_THAN_MAX_DELETED
            ))
        );
    }

    #[test]
    fn xread_resolves_ids_in_key_order() {
        let (mut db, cx) = fresh();
        xadd(&mut db, &cx, "XADD a 1 f 1").unwrap();
        xadd(&mut db, &cx, "XADD a 2 f 2").unwrap();
        db.set(
            0,
            Bytes::from_static(b"str"),
            Value::Str(Bytes::new()),
            None,
        );
        let read = |db: &mut ShardDb, line: &str| {
            apply_xread(db, &cx, &parse_xread_req(&argv(line))?).map(|(r, _)| r)
        };
        assert_eq!(
            read(&mut db, "XREAD COUNT 1 STREAMS a none 0 0"),
            Ok(Reply::PairMap(vec![(
                bulk("a"),
                Reply::Array(vec![entry("1-0", &["f", "1"])])
            )]))
        );
        assert_eq!(read(&mut db, "XREAD STREAMS a $"), Ok(Reply::NullArray));
        assert_eq!(
            read(&mut db, "XREAD STREAMS a +"),
            Ok(Reply::PairMap(vec![(
                bulk("a"),
                Reply::Array(vec![entry("2-0", &["f", "2"])])
            )]))
        );
        assert_eq!(
            read(&mut db, "XREAD STREAMS str a bad 0"),
            Err(CmdError::WrongType)
        );
        assert_eq!(
            read(&mut db, "XREAD STREAMS a str bad 0"),
            Err(CmdError::InvalidStreamId)
        );
        assert_eq!(
            parse_xread_req(&argv("XREAD BLOCK -1 STREAMS a 0")),
            Err(CmdError::msg("ERR timeout is negative"))
        );
        assert_eq!(
            xread_block_ms(&argv("XREAD BLOCK 10 STREAMS a 0")),
            Some(10)
        );
        assert_eq!(xread_block_ms(&argv("XREAD STREAMS a 0")), None);
    }

    #[test]
    fn parked_xread_is_served_by_xadd() {
        let (mut db, cx) = fresh();
        let ticket = Ticket::new();
        let req = parse_xread_req(&argv("XREAD BLOCK 0 STREAMS a $")).unwrap();
        assert_eq!(
            park_xread_apply(&mut db, &cx, req, ticket.clone()),
            Reply::NoReply
        );
        assert_eq!(db.blocking.len(), 1);
        let mut out = Vec::new();
        xadd(&mut db, &cx, "XADD a 3 f v").unwrap();
        crate::shard::blocking::serve_ready(&mut db, 1000, &mut out);
        assert_eq!(out.len(), 1);
        assert!(ticket.is_fired());
        assert_eq!(db.blocking.len(), 0);
    }
}
