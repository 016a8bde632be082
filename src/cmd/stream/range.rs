//! Range reads: XLEN, XRANGE, XREVRANGE, and the entry reply shape every
//! stream read shares.
//!
//! # Source
//! redis/src/t_stream.c: `xlenCommand`, `xrangeGenericCommand`.

use crate::cmd::args::{int_arg, is};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::stream::id::{parse_range_end, parse_range_start};
use crate::stream::{Entry, StreamId};
use bytes::Bytes;

pub(super) fn parse_xlen(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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

pub(super) fn parse_xrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xrange_req(argv, false)?;
    Ok(on_shard(move |db, cx| apply_xrange(db, cx, &req).into()))
}

pub(super) fn parse_xrevrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xrange_req(argv, true)?;
    Ok(on_shard(move |db, cx| apply_xrange(db, cx, &req).into()))
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
    let count = req
        .count
        .map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
    if cx.reply_budget_bytes == u64::MAX {
        return Ok(entries_reply(s.range(
            req.start,
            req.end,
            Some(count),
            req.rev,
        )));
    }
    // Measure the reply before building it: past the client's hard output
    // limit Redis closes the client, so a reply that would not fit is never
    // built (its reply tree is several times its encoded size).
    let mut bytes = 0u64;
    for e in s.iter_range(req.start, req.end, req.rev).take(count) {
        bytes += super::read::entry_reply_bytes(&e);
        if bytes > cx.reply_budget_bytes {
            return Ok(Reply::OverOutputLimit);
        }
    }
    Ok(entries_reply(s.range(
        req.start,
        req.end,
        Some(count),
        req.rev,
    )))
}

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
