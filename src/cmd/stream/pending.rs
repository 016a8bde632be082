//! The pending entries lists: XACK, XACKDEL, XNACK, XPENDING, XCLAIM,
//! XAUTOCLAIM.
//!
//! # Source
//! redis/src/t_stream.c: `xackCommand`, `xpendingCommand`, `xclaimCommand`,
//! `xautoclaimCommand`; redis.io XACKDEL (8.2), XNACK (8.8).

use crate::aof::effects::{log_group_change, GroupChange};
use crate::cmd::args::{c_str, int_arg, is, parse_i64};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::stream::id::{parse_id, parse_range_end, parse_range_start};
use crate::stream::{RefPolicy, StreamId};
use bytes::Bytes;

use super::*;

/// `XACK key group id [id ...]`: IDs are validated on the shard, after the
/// key and group lookups (a missing key or group replies 0 whatever the IDs).
pub(super) fn parse_xack(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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
pub(super) fn parse_xackdel(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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

pub(super) fn parse_xnack(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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

pub(super) fn parse_xpending(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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
            return Err(CmdError::quoting(&[
                b"ERR Unrecognized XCLAIM option '",
                c_str(opt),
                b"'",
            ]));
        }
        j += 1;
    }
    Ok(o)
}

pub(super) fn parse_xclaim(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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

pub(super) fn parse_xautoclaim(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xautoclaim_req(argv)?;
    Ok(on_shard(move |db, cx| {
        apply_xautoclaim(db, cx, &req).into()
    }))
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
    let acked: Vec<StreamId> = ids
        .into_iter()
        .filter(|id| g.ack_recording(*id, cx.now_ms))
        .collect();
    let n = acked.len();
    let change = GroupChange {
        acked,
        ..Default::default()
    };
    log_group_change(db, cx, key, group, &change);
    Ok(Reply::Int(n as i64))
}

/// `XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]`
/// (Redis 8.2): per ID, XACK in `group`; an ID that was pending there is
/// then deleted from the stream under the reference policy (ACKED keeps it
/// while another group still needs it; DELREF also drops every other
/// group's reference, whether or not the entry is still in the stream).
/// An ID not pending in `group` is left alone.
///
/// # Reply
/// Array of one integer per ID, in order: `-1` not pending in the group
/// (every ID when the key is missing), `1` acknowledged (and deleted, if
/// it was still in the stream), `2` acknowledged but kept because another
/// group still needs it (`ACKED`).
/// # Errors
/// `WrongType`; `NOGROUP No such key '<k>' or consumer group '<g>'` when the
/// group does not exist (nothing is changed).
/// # Source
/// redis.io XACKDEL (8.2), and the replies Redis 8.8 gives to the stream
/// tests of redis-rs, node-redis and redis-py (an entry not yet read by the
/// group: `-1`; one pending but already deleted, acked with DELREF: `1`).
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
        return Err(CmdError::no_group(key, group));
    }
    let mut codes = Vec::with_capacity(ids.len());
    // The acknowledged IDs and what their deletion answered, for the AOF.
    let (mut acked, mut deletions) = (Vec::new(), Vec::new());
    for &id in ids {
        let pending = s
            .group_mut(group)
            .is_some_and(|g| g.ack_recording(id, cx.now_ms));
        if !pending {
            codes.push(-1);
            continue;
        }
        let deleted = s.delete_with_refs(id, refs);
        acked.push(id);
        deletions.push(deleted);
        codes.push(if deleted == 2 { 2 } else { 1 });
    }
    if db.aof.is_enabled() && !acked.is_empty() {
        let change = GroupChange {
            acked: acked.clone(),
            ..Default::default()
        };
        log_group_change(db, cx, key, group, &change);
        crate::cmd::stream::log_delete_with_refs(db, cx, key, refs, &acked, &deletions);
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
        .ok_or_else(|| CmdError::no_group(key, group))?;
    let exists: Vec<bool> = if req.force {
        req.ids.iter().map(|id| s.contains(*id)).collect()
    } else {
        vec![false; req.ids.len()]
    };
    let Some(g) = s.group_mut(group) else {
        return Err(CmdError::no_group(key, group));
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
    if n > 0 {
        // Released entries are claimable at once: a reader blocked in
        // XREADGROUP CLAIM is served now, not on the next timer tick.
        db.blocking.mark_ready(cx.db, key);
    }
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
        .ok_or_else(|| CmdError::no_group(key, group))?;
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
        .ok_or_else(|| CmdError::no_group(key, group))?;
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
        return Err(CmdError::no_group(key, group));
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
        .ok_or_else(|| CmdError::no_group(&req.key, &req.group))?;
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
