//! Writes to a stream's entries and metadata: XADD (with IDMP / IDMPAUTO),
//! XDEL, XDELEX, XTRIM, XSETID, XCFGSET.
//!
//! # Source
//! redis/src/t_stream.c: `xaddCommand`, `xdelCommand`, `xtrimCommand`,
//! `xsetidCommand`, `streamParseAddOrTrimArgsOrReply`; redis.io XADD, XDELEX,
//! XCFGSET (8.2, 8.6).

use crate::aof::effects::{log_ids, log_trim, IDMPSTATS_RECORD, IDMP_RECORD, UNREF_RECORD};
use crate::cmd::args::{int_arg, is};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::stream::id::{parse_id, parse_xadd_id};
use crate::stream::idmp::{auto_iid, IdmpConfig, MAX_DURATION_S, MAX_MAXSIZE};
use crate::stream::{IdSpec, RefPolicy, Stream, StreamId, TrimSpec, TrimStrategy};
use bytes::Bytes;

/// `arg` as a C string equals `token` (Redis compares `ptr[0]`/`ptr[1]`, so
/// anything after a NUL byte is invisible).
pub(super) fn c_str_is(arg: &[u8], token: u8) -> bool {
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
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(super) struct AddTrimArgs {
    trim: Option<TrimSpec>,
    nomkstream: bool,
    /// XADD only: `IDMPAUTO pid` (iid `None`) or `IDMP pid iid` (Redis 8.6).
    idmp: Option<(Bytes, Option<Bytes>)>,
    /// XADD only: index of the ID argument (`argv.len()` when none was found).
    id_pos: usize,
    /// XADD only: the ID, parsed where it is met (`*` when none was found).
    id: Option<IdSpec>,
}

/// `[NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] [KEEPREF |
/// DELREF | ACKED]` of XADD (stopping at the ID) or the options of XTRIM
/// (all remaining arguments). The reference policy (Redis 8.2) may appear
/// anywhere among the options; the last one given wins.
///
/// # Errors
/// In Redis's order: `ERR syntax error, MAXLEN and MINID options at the same
/// time are not compatible`, `ERR value is not an integer or out of range`,
/// `ERR The MAXLEN argument must be >= 0.`, invalid MINID, `ERR The LIMIT
/// argument must be >= 0.`, each where its option is met; then the XADD ID
/// where it is met, or `ERR syntax error` (XTRIM only); then `ERR syntax
/// error, LIMIT cannot be used without specifying a trimming
/// strategy`, `ERR syntax error, XTRIM must be called with a trimming
/// strategy`, `ERR syntax error, LIMIT cannot be used without the special ~ option`.
/// # Source
/// `streamParseAddOrTrimArgsOrReply`.
pub(super) fn parse_add_trim(argv: &[Bytes], xadd: bool) -> Result<AddTrimArgs, CmdError> {
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
            out.id = Some(IdSpec::Auto);
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
        } else if xadd && is(opt, "IDMPAUTO") && moreargs > 0 {
            if out.idmp.is_some() {
                return Err(CmdError::Syntax);
            }
            out.idmp = Some((argv[i + 1].clone(), None));
            i += 1;
        } else if xadd && is(opt, "IDMP") && moreargs > 1 {
            if out.idmp.is_some() {
                return Err(CmdError::Syntax);
            }
            out.idmp = Some((argv[i + 1].clone(), Some(argv[i + 2].clone())));
            i += 2;
        } else if xadd {
            // Anything else is the ID, checked here: before the LIMIT
            // checks below, as Redis does.
            out.id_pos = i;
            out.id = Some(parse_xadd_id(opt)?);
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
    /// `IDMP pid iid` / `IDMPAUTO pid` (Redis 8.6), `id` is then `*`.
    pub idmp: Option<IdmpArg>,
    pub fields: Vec<(Bytes, Bytes)>,
}

/// The producer and idempotent ID of an idempotent XADD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdmpArg {
    /// Producer ID.
    pub pid: Bytes,
    /// Idempotent ID: given (`IDMP`) or derived from the fields and values
    /// (`IDMPAUTO`, see [`auto_iid`]).
    pub iid: Bytes,
}

/// Error for IDMP / IDMPAUTO with an ID other than `*`. redis.io states the
/// rule ("Both modes can only be specified when the entry ID is `*`") but
/// not the text; this wording is ours.
pub const ERR_IDMP_NEEDS_AUTO_ID: &str =
    "ERR IDMP and IDMPAUTO can only be used with the * entry ID";

/// `XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [IDMPAUTO producer-id |
/// IDMP producer-id idempotent-id] [MAXLEN|MINID [=|~] threshold [LIMIT
/// count]] *|id field value [field value ...]` (IDMP, IDMPAUTO: Redis 8.6,
/// only with `*`).
///
/// # Errors
/// Option errors of [`parse_add_trim`] (`ERR syntax error` for IDMP /
/// IDMPAUTO given twice); `InvalidStreamId`; [`ERR_IDMP_NEEDS_AUTO_ID`];
/// `ERR wrong number
/// of arguments for 'xadd' command` when the field/value list is empty or odd;
/// `StreamIdZero` for `0-0` (before the key is looked up, as Redis does).
/// # Source
/// `xaddCommand`.
pub fn parse_xadd_req(argv: &[Bytes]) -> Result<XaddReq, CmdError> {
    let opts = parse_add_trim(argv, true)?;
    let id = opts.id.unwrap_or(IdSpec::Auto);
    if opts.idmp.is_some() && id != IdSpec::Auto {
        return Err(CmdError::msg(ERR_IDMP_NEEDS_AUTO_ID));
    }
    let field_pos = opts.id_pos + 1;
    let nfields = argv.len().saturating_sub(field_pos);
    if field_pos > argv.len() || nfields < 2 || nfields % 2 == 1 {
        return Err(CmdError::arity("xadd"));
    }
    if id == IdSpec::Explicit(StreamId::MIN) {
        return Err(CmdError::StreamIdZero);
    }
    let fields: Vec<(Bytes, Bytes)> = argv[field_pos..]
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    let idmp = opts.idmp.map(|(pid, iid)| IdmpArg {
        pid,
        iid: iid.unwrap_or_else(|| auto_iid(&fields)),
    });
    Ok(XaddReq {
        key: argv[1].clone(),
        nomkstream: opts.nomkstream,
        trim: opts.trim,
        id,
        idmp,
        fields,
    })
}

pub(super) fn parse_xadd(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xadd_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xadd(db, cx, req).into()))
}

pub(super) fn parse_xdel(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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
pub(super) fn parse_xdelex(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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

pub(super) fn parse_xtrim(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
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

pub(super) fn parse_xsetid(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xsetid_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xsetid(db, cx, &req).into()))
}

/// A parsed `XCFGSET`: the settings to change (at least one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XcfgsetReq {
    pub key: Bytes,
    /// `IDMP-DURATION seconds`.
    pub duration_s: Option<u64>,
    /// `IDMP-MAXSIZE count`.
    pub maxsize: Option<u64>,
}

/// `XCFGSET key [IDMP-DURATION idmp-duration] [IDMP-MAXSIZE idmp-maxsize]`
/// (Redis 8.6).
///
/// # Errors
/// Before the key is looked up (a choice: the page lists the errors, not
/// their order): `ERR syntax error` (no option, unknown option, missing
/// value), `ERR invalid duration` (not an integer in 1..=86400), `ERR invalid
/// maxsize` (not an integer in 1..=10000).
/// # Source
/// redis.io XCFGSET, "Error conditions".
pub fn parse_xcfgset_req(argv: &[Bytes]) -> Result<XcfgsetReq, CmdError> {
    let mut req = XcfgsetReq {
        key: argv[1].clone(),
        duration_s: None,
        maxsize: None,
    };
    let ranged = |a: &[u8], max: u64, err: &'static str| {
        crate::cmd::args::parse_i64(a)
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| (1..=max).contains(n))
            .ok_or(CmdError::msg(err))
    };
    let mut i = 2;
    while i < argv.len() {
        let value = argv.get(i + 1).ok_or(CmdError::Syntax)?;
        if is(&argv[i], "IDMP-DURATION") {
            req.duration_s = Some(ranged(value, MAX_DURATION_S, "ERR invalid duration")?);
        } else if is(&argv[i], "IDMP-MAXSIZE") {
            req.maxsize = Some(ranged(value, MAX_MAXSIZE, "ERR invalid maxsize")?);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    if req.duration_s.is_none() && req.maxsize.is_none() {
        return Err(CmdError::Syntax);
    }
    Ok(req)
}

pub(super) fn parse_xcfgset(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xcfgset_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xcfgset(db, cx, &req).into()))
}

/// `XADD`: validate the ID, create the stream unless NOMKSTREAM, append,
/// trim, and wake blocked readers of the key. With IDMP / IDMPAUTO (Redis
/// 8.6), a `(producer, iid)` pair the stream still remembers is a
/// duplicate: nothing is added or trimmed, `iids-duplicates` grows and the
/// reply is the original entry's ID (even if that entry was deleted since);
/// otherwise the pair is recorded for the new entry (see
/// [`crate::stream::idmp`]).
///
/// # Reply
/// The new entry's ID (bulk string); null bulk when NOMKSTREAM and the key is missing.
/// # Errors
/// `WrongType`; `StreamExhausted`, `StreamIdTooSmall` (no key is created).
/// # Source
/// `xaddCommand`.
pub fn apply_xadd(db: &mut ShardDb, cx: &ExecCtx, req: XaddReq) -> Result<Reply, CmdError> {
    let limits = db.node_limits();
    if let Some(m) = &req.idmp {
        // A pair still remembered: answer the original ID, add nothing.
        let original = db
            .get_stream_mut(cx.db, &req.key, cx.now_ms)?
            .and_then(|s| {
                let id = s.idmp()?.lookup(&m.pid, &m.iid, cx.now_ms)?;
                s.idmp_mut().iids_duplicates += 1;
                Some(id)
            });
        if let Some(id) = original {
            log_idmp_stats(db, cx, &req.key);
            return Ok(Reply::Bulk(id.to_bytes()));
        }
    }
    // Append, record the IDMP pair, trim: (id, trimmed, how, length after).
    let add = |stream: &mut Stream| -> Result<_, CmdError> {
        let id = stream.append(req.id, &req.fields, cx.now_ms, limits)?;
        if let Some(m) = &req.idmp {
            stream.idmp_mut().record(&m.pid, &m.iid, id, cx.now_ms);
        }
        let (trimmed, effect) = match req.trim {
            Some(trim) => stream.trim_reporting(trim, limits),
            None => (0, crate::stream::TrimEffect::Prefix),
        };
        Ok((id, trimmed, effect, stream.len()))
    };
    // The common case, a stream that exists, takes one key lookup.
    let added = match db.get_stream_mut(cx.db, &req.key, cx.now_ms)? {
        Some(stream) => Some(add(stream)?),
        None => None,
    };
    let (id, trimmed, trim_effect, len_after) = match added {
        Some(added) => added,
        None if req.nomkstream => return Ok(Reply::NullBulk),
        None => {
            // A bad ID creates nothing (Redis checks it before creating the key).
            Stream::default().next_id(req.id, cx.now_ms)?;
            let Some(stream) = db.stream_for_write(cx.db, &req.key, true, cx.now_ms)? else {
                return Ok(Reply::NullBulk);
            };
            add(stream)?
        }
    };
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
        if let Some(m) = &req.idmp {
            let ms = itoa::Buffer::new().format(cx.now_ms).to_owned();
            db.log_effect(
                cx,
                &[
                    IDMP_RECORD,
                    &req.key,
                    &m.pid,
                    &m.iid,
                    &id_bytes,
                    ms.as_bytes(),
                ],
            );
        }
        log_trim(db, cx, &req.key, trimmed, len_after, &trim_effect);
    }
    db.blocking.mark_ready(cx.db, &req.key);
    db.touch_key(cx.db, &req.key);
    Ok(Reply::Bulk(id_bytes))
}

/// Log a stream's IDMP lifetime counters as `SS.IDMPSTATS key iids-added
/// iids-duplicates` (after a duplicate XADD, and in an AOF rewrite).
pub fn log_idmp_stats(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) {
    if !db.aof.is_enabled() {
        return;
    }
    let Ok(Some(m)) = db
        .get_stream(cx.db, key, cx.now_ms)
        .map(|s| s.and_then(|s| s.idmp()))
    else {
        return;
    };
    let (added, dups) = (m.iids_added.to_string(), m.iids_duplicates.to_string());
    db.log_effect(
        cx,
        &[IDMPSTATS_RECORD, key, added.as_bytes(), dups.as_bytes()],
    );
}

/// Error of XIDMPRECORD for an empty producer or idempotent ID. The page
/// lists the case, not the text; this wording is ours.
pub const ERR_IDMP_EMPTY: &str = "ERR pid and iid must not be empty";
/// Error of XIDMPRECORD for an entry not in the stream (ours, as above).
pub const ERR_IDMP_NO_ENTRY: &str = "ERR The stream ID does not exist in the stream";
/// Error of XIDMPRECORD when the pair maps to another entry (ours, as above).
pub const ERR_IDMP_OTHER_ID: &str = "ERR The pid/iid pair already maps to a different stream ID";

/// A parsed `XIDMPRECORD`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XidmprecordReq {
    pub key: Bytes,
    pub pid: Bytes,
    pub iid: Bytes,
    pub id: StreamId,
}

pub(super) fn parse_xidmprecord(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = XidmprecordReq {
        key: argv[1].clone(),
        pid: argv[2].clone(),
        iid: argv[3].clone(),
        id: parse_id(&argv[4])?,
    };
    Ok(on_shard(move |db, cx| {
        apply_xidmprecord(db, cx, &req).into()
    }))
}

/// `XIDMPRECORD key pid iid stream-id` (Redis 8.8, internal): records that
/// `(pid, iid)` produced the existing entry `stream-id`, as an idempotent
/// XADD would have (recorded now; counted in `iids-added`).
///
/// # Reply
/// `+OK`, also when the pair already maps to that entry (nothing changes).
/// # Errors
/// `InvalidStreamId` (before the key lookup); `ERR no such key`; `WrongType`;
/// [`ERR_IDMP_EMPTY`]; [`ERR_IDMP_NO_ENTRY`]; [`ERR_IDMP_OTHER_ID`].
/// # Source
/// redis.io XIDMPRECORD, "Return information" (8.8).
pub fn apply_xidmprecord(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XidmprecordReq,
) -> Result<Reply, CmdError> {
    let s = db
        .get_stream_mut(cx.db, &req.key, cx.now_ms)?
        .ok_or(CmdError::NoSuchKey)?;
    if req.pid.is_empty() || req.iid.is_empty() {
        return Err(CmdError::msg(ERR_IDMP_EMPTY));
    }
    if !s.contains(req.id) {
        return Err(CmdError::msg(ERR_IDMP_NO_ENTRY));
    }
    match s
        .idmp()
        .and_then(|m| m.lookup(&req.pid, &req.iid, cx.now_ms))
    {
        Some(id) if id == req.id => return Ok(Reply::Ok),
        Some(_) => return Err(CmdError::msg(ERR_IDMP_OTHER_ID)),
        None => {}
    }
    s.idmp_mut().record(&req.pid, &req.iid, req.id, cx.now_ms);
    if db.aof.is_enabled() {
        let (id, ms) = (req.id.to_bytes(), cx.now_ms.to_string());
        db.log_effect(
            cx,
            &[
                IDMP_RECORD,
                &req.key,
                &req.pid,
                &req.iid,
                &id,
                ms.as_bytes(),
            ],
        );
    }
    Ok(Reply::Ok)
}

/// `XCFGSET` (Redis 8.6): sets the stream's IDMP settings; a setting not
/// given keeps its current value. Changing a value empties the IDMP map (its
/// lifetime counters stay); setting the current values changes nothing.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `WrongType`; `ERR no such key`.
/// # Source
/// redis.io XCFGSET; "Idempotent message processing", Persistence (the
/// map is cleared when the values differ from the current ones).
pub fn apply_xcfgset(db: &mut ShardDb, cx: &ExecCtx, req: &XcfgsetReq) -> Result<Reply, CmdError> {
    let s = db
        .get_stream_mut(cx.db, &req.key, cx.now_ms)?
        .ok_or(CmdError::NoSuchKey)?;
    let m = s.idmp_mut();
    let old = m.config();
    let config = IdmpConfig {
        duration_s: req.duration_s.unwrap_or(old.duration_s),
        maxsize: req.maxsize.unwrap_or(old.maxsize),
    };
    m.configure(config);
    if db.aof.is_enabled() {
        let (d, n) = (config.duration_s.to_string(), config.maxsize.to_string());
        db.log_effect(
            cx,
            &[
                b"XCFGSET",
                &req.key,
                b"IDMP-DURATION",
                d.as_bytes(),
                b"IDMP-MAXSIZE",
                n.as_bytes(),
            ],
        );
    }
    Ok(Reply::Ok)
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
        db.touch_key(cx.db, key);
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
        db.touch_key(cx.db, key);
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
        db.touch_key(cx.db, key);
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
        return Err(CmdError::NoSuchKey);
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
