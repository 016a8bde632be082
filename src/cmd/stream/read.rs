//! XREAD (with BLOCK), and what XREAD and XREADGROUP share: option parsing,
//! the STREAMS key finder, the MAXCOUNT / MAXSIZE budget (8.10).
//!
//! # Source
//! redis/src/t_stream.c: `xreadCommand`; db.c `xreadGetKeys`; redis.io XREAD.

use crate::cmd::args::{int_arg, is};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::blocking::{Attempt, Ticket, Waiter};
use crate::shard::db::ShardDb;
use crate::stream::id::parse_id;
use crate::stream::{Entry, StreamId};
use bytes::Bytes;
use std::sync::Arc;

use super::*;

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
/// parses both: `[COUNT n] [MAXCOUNT n] [MAXSIZE bytes] [BLOCK ms] [GROUP g c]
/// [NOACK] [CLAIM ms] STREAMS key... id...`, options in any order before
/// STREAMS.
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
    /// `MAXCOUNT` / `MAXSIZE` (Redis 8.10).
    pub caps: ReadCaps,
    pub keys: Vec<Bytes>,
    /// The ID arguments, one per key, unparsed.
    pub ids: Vec<Bytes>,
}

/// The cumulative caps of one XREAD / XREADGROUP reply (Redis 8.10), over
/// all its streams in key order (unlike COUNT, which is per stream).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCaps {
    /// `MAXCOUNT n`: at most n entries in the whole reply.
    pub max_count: Option<u64>,
    /// `MAXSIZE n`: at most n bytes of entries in the reply, except that the
    /// first entry is always sent.
    pub max_size_bytes: Option<u64>,
}

/// Error for `MAXCOUNT` below `COUNT`. The redis.io pages state the rule
/// but not the text; this wording is ours.
pub const ERR_MAXCOUNT_BELOW_COUNT: &str = "ERR MAXCOUNT must be greater than or equal to COUNT";

/// Error for a `MAXCOUNT` / `MAXSIZE` of 0 or less (Redis's text for
/// positive-only integer options, as CLAIM's).
pub const ERR_NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

/// The running budget of one reply under [`ReadCaps`]: entries and bytes
/// emitted so far, across streams.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadBudget {
    caps: ReadCaps,
    emitted: u64,
    used_bytes: u64,
    /// A cap turned an entry away: the reply is complete.
    stopped: bool,
}

impl ReadBudget {
    /// A fresh budget for one reply.
    pub fn new(caps: ReadCaps) -> Self {
        ReadBudget {
            caps,
            ..Default::default()
        }
    }

    /// Whether the reply is complete: MAXCOUNT reached, or MAXSIZE turned
    /// an entry away. Later streams are then left out of the reply.
    pub fn is_done(&self) -> bool {
        self.stopped || self.caps.max_count.is_some_and(|m| self.emitted >= m)
    }

    /// Counts an entry of `size_bytes` (see [`entry_reply_bytes`]) into the
    /// reply if it fits: under MAXCOUNT, and either the first entry of the
    /// reply or within MAXSIZE with what was already sent. Checked before
    /// the entry is delivered, so an entry turned away is neither sent nor
    /// added to a PEL.
    ///
    /// # Source
    /// redis.io XREAD / XREADGROUP, "The MAXCOUNT and MAXSIZE options" (8.10):
    /// the byte budget is not enforced until one entry was emitted.
    pub fn admit(&mut self, size_bytes: u64) -> bool {
        if self.is_done() {
            return false;
        }
        let used = self.used_bytes.saturating_add(size_bytes);
        if self.emitted > 0 && self.caps.max_size_bytes.is_some_and(|m| used > m) {
            self.stopped = true;
            return false;
        }
        self.emitted += 1;
        self.used_bytes = used;
        true
    }
}

/// Bytes an entry takes in the reply (RESP2): `*2`, its ID as a bulk
/// string, and the array of field and value bulk strings. MAXSIZE counts
/// these; the per-stream headers are not counted.
pub fn entry_reply_bytes(e: &Entry) -> u64 {
    reply_bytes(e.id, e.fields.iter().map(|(f, v)| (f.len(), v.len())))
}

/// [`entry_reply_bytes`] of an entry still in its node.
pub fn view_reply_bytes(e: &crate::stream::EntryView<'_>) -> u64 {
    reply_bytes(e.id, e.fields().map(|(f, v)| (f.len(), v.len())))
}

/// Bytes of `[id, [field, value, ...]]` given the field and value lengths.
fn reply_bytes(id: StreamId, fields: impl ExactSizeIterator<Item = (usize, usize)>) -> u64 {
    fn bulk(len: usize) -> u64 {
        // $<len>\r\n<bytes>\r\n
        (1 + decimal_len(len as u64) + 2 + len + 2) as u64
    }
    fn decimal_len(n: u64) -> usize {
        n.checked_ilog10().map_or(1, |d| d as usize + 1)
    }
    let id_len = decimal_len(id.ms) + 1 + decimal_len(id.seq);
    let items = 2 * fields.len() as u64;
    let head = 4 + (1 + decimal_len(items) + 2) as u64;
    fields.fold(head + bulk(id_len), |n, (f, v)| n + bulk(f) + bulk(v))
}

/// Index in `argv` of the STREAMS keyword of XREAD / XREADGROUP, found by
/// walking the options as [`parse_read_args`] reads them (each option
/// skipping its arguments), so a group or consumer named `STREAMS`, `COUNT`
/// or `BLOCK` is an argument, not a keyword. `None` when an unknown token
/// comes first (the parser then reports the error).
///
/// # Source
/// `xreadGetKeys`, redis/src/db.c.
pub fn streams_keyword_at(argv: &[Bytes]) -> Option<usize> {
    let mut i = 1;
    while i < argv.len() {
        let o = &argv[i];
        if is(o, "STREAMS") {
            return Some(i);
        }
        i += if is(o, "GROUP") {
            3
        } else if is(o, "NOACK") {
            1
        } else if ["BLOCK", "COUNT", "CLAIM", "MAXCOUNT", "MAXSIZE"]
            .iter()
            .any(|k| is(o, k))
        {
            2
        } else {
            return None;
        };
    }
    None
}

/// Parse XREAD (`group_cmd` false) or XREADGROUP options.
///
/// # Errors
/// In Redis's order, per option as it is met: `ERR timeout is not an integer
/// or out of range`, `ERR timeout is negative`, `ERR timeout is out of range`
/// (see [`crate::cmd::args::parse_timeout_ms`]), `ERR value is not an integer
/// or out of range` (COUNT, CLAIM, MAXCOUNT, MAXSIZE), `ERR value is out of
/// range, must be positive` (CLAIM below 0; MAXCOUNT, MAXSIZE below 1), the
/// unbalanced-streams error (Redis 7.4's text:
/// `ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+',
/// or '$' must be specified.` / `... 'xreadgroup' ... an ID or '>' ...`), the
/// GROUP / NOACK misuse errors of XREAD, `ERR syntax error`; then
/// [`ERR_MAXCOUNT_BELOW_COUNT`] when MAXCOUNT is below a non-zero COUNT.
/// redis.io gives the MAXCOUNT / MAXSIZE rules (8.10) but no error texts:
/// these are Redis's texts for the same checks elsewhere, and ours for the
/// COUNT comparison.
/// # Source
/// `xreadCommand`, redis/src/t_stream.c (7.4); redis.io XREAD (8.10).
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
            out.block_ms = Some(crate::cmd::args::parse_timeout_ms(&argv[i])?);
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
        } else if (is(o, "MAXCOUNT") || is(o, "MAXSIZE")) && moreargs > 0 {
            i += 1;
            let n = int_arg(&argv[i])?;
            let n = u64::try_from(n)
                .ok()
                .filter(|n| *n > 0)
                .ok_or(CmdError::msg(ERR_NOT_POSITIVE))?;
            if is(o, "MAXCOUNT") {
                out.caps.max_count = Some(n);
            } else {
                out.caps.max_size_bytes = Some(n);
            }
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
    if out
        .caps
        .max_count
        .is_some_and(|m| out.count > 0 && m < out.count)
    {
        return Err(CmdError::msg(ERR_MAXCOUNT_BELOW_COUNT));
    }
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
    /// `MAXCOUNT` / `MAXSIZE` (Redis 8.10).
    pub caps: ReadCaps,
    pub keys: Vec<Bytes>,
    pub from: Vec<ReadFrom>,
    /// The running budget shared with the other parts of the same read
    /// when its streams span shards (see [`cumulative_read`]).
    pub budget: Option<BudgetCell>,
}

/// A [`ReadBudget`] one read's parts on several shards take turns with
/// (equal only to itself).
#[derive(Clone, Debug, Default)]
pub struct BudgetCell(std::sync::Arc<std::sync::Mutex<ReadBudget>>);

impl BudgetCell {
    /// A fresh shared budget for one reply under `caps`.
    pub fn new(caps: ReadCaps) -> Self {
        BudgetCell(std::sync::Arc::new(std::sync::Mutex::new(ReadBudget::new(
            caps,
        ))))
    }

    /// The budget as the last part left it.
    pub fn get(&self) -> ReadBudget {
        self.0.lock().map(|b| *b).unwrap_or_default()
    }

    fn set(&self, budget: ReadBudget) {
        if let Ok(mut b) = self.0.lock() {
            *b = budget;
        }
    }
}

impl PartialEq for BudgetCell {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for BudgetCell {}

/// `XREAD [COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize] [BLOCK
/// milliseconds] STREAMS key [key ...] id [id ...]` (MAXCOUNT, MAXSIZE:
/// Redis 8.10, see [`ReadCaps`]).
///
/// # Errors
/// Those of [`parse_read_args`]. ID errors are deferred (see [`ReadFrom::Invalid`]).
/// # Source
/// `xreadCommand`.
pub fn parse_xread_req(argv: &[Bytes]) -> Result<XreadReq, CmdError> {
    let ReadArgs {
        count,
        block_ms,
        caps,
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
        caps,
        keys,
        from,
        budget: None,
    })
}

pub(super) fn parse_xread(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xread_req(argv)?;
    Ok(on_shard(move |db, cx| {
        apply_xread(db, cx, &req).map(|(reply, _)| reply).into()
    }))
}

/// `Some(timeout_ms)` when the argv is a valid XREAD with `BLOCK`.
pub(super) fn xread_block_ms(argv: &[Bytes]) -> Option<u64> {
    parse_xread_req(argv).ok()?.block_ms
}

/// XREAD BLOCK on one shard: serve now if any stream has data (claiming the
/// ticket first), else park a waiter with `$`/`+` resolved at this moment.
pub(super) fn park_xread(argv: &[Bytes], ticket: Arc<Ticket>) -> Result<ShardReq, CmdError> {
    let req = parse_xread_req(argv)?;
    Ok(on_shard(move |db, cx| {
        park_xread_apply(db, cx, req, ticket)
    }))
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
    let reply = read_after(
        db,
        cx,
        &req.keys,
        &after,
        req.count,
        req.caps,
        req.budget.as_ref(),
    );
    Ok((reply, after))
}

/// Resolve `$`, `+` and explicit IDs against the current data.
///
/// # Errors
/// Those of [`resolve_read_ids_at`], without the key's index.
pub(super) fn resolve_read_ids(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadReq,
) -> Result<Vec<StreamId>, CmdError> {
    resolve_read_ids_at(db, cx, req).map_err(|(_, e)| e)
}

/// The validation step of a multi-shard XREAD (see [`Handler::Blocking`]):
/// `+OK`, or `[local key index, error]` for the first key of this part
/// whose type or ID is refused, so the error of the first failing key of
/// the whole command answers. No side effects.
///
/// [`Handler::Blocking`]: crate::cmd::table::Handler::Blocking
pub(super) fn check_xread(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xread_req(argv)?;
    Ok(on_shard(move |db, cx| {
        match resolve_read_ids_at(db, cx, &req) {
            Ok(_) => Reply::Ok,
            Err((n, e)) => Reply::Array(vec![Reply::Int(n as i64), Reply::Error(e)]),
        }
    }))
}

/// [`resolve_read_ids`], each key checked in order: its type, then its ID.
///
/// # Errors
/// `(index in req.keys, error)` of the first failing key: `WrongType`, the
/// ID's error, `ERR the stream last element ID is 0-0` (`+` on a stream
/// that never had an entry).
fn resolve_read_ids_at(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: &XreadReq,
) -> Result<Vec<StreamId>, (usize, CmdError)> {
    let mut out = Vec::with_capacity(req.keys.len());
    for (n, (key, from)) in req.keys.iter().zip(&req.from).enumerate() {
        let s = db.get_stream(cx.db, key, cx.now_ms).map_err(|e| (n, e))?;
        let id = match from {
            ReadFrom::Invalid(e) => return Err((n, e.clone())),
            ReadFrom::After(id) => *id,
            ReadFrom::Last => s.map_or(StreamId::MIN, |s| s.last_id()),
            ReadFrom::LastEntry => match s {
                None => StreamId::MIN,
                Some(s) => match s.last_entry() {
                    Some(e) => e.id.prev().unwrap_or(StreamId::MIN),
                    // A stream that never had an entry (XGROUP CREATE
                    // MKSTREAM): Redis cannot step back from 0-0.
                    None if s.last_id() == StreamId::MIN => {
                        return Err((n, CmdError::msg("ERR the stream last element ID is 0-0")))
                    }
                    None => s.last_id(),
                },
            },
        };
        out.push(id);
    }
    Ok(out)
}

/// Entries after `after[i]` of each stream `keys[i]` (up to `count` each, 0 =
/// all; at most what `caps` allow over the whole reply, in key order); keys
/// that are missing, of another type, or without newer entries are left
/// out. Null array when nothing was found.
pub(super) fn read_after(
    db: &mut ShardDb,
    cx: &ExecCtx,
    keys: &[Bytes],
    after: &[StreamId],
    count: u64,
    caps: ReadCaps,
    cell: Option<&BudgetCell>,
) -> Reply {
    let take = if count == 0 {
        usize::MAX
    } else {
        usize::try_from(count).unwrap_or(usize::MAX)
    };
    let mut budget = budget_from(cell, caps);
    let mut pairs = Vec::new();
    for (key, gt) in keys.iter().zip(after) {
        if budget.is_done() {
            break;
        }
        let Ok(Some(s)) = db.get_stream(cx.db, key, cx.now_ms) else {
            continue;
        };
        let Some(start) = gt.next() else {
            continue;
        };
        let mut out = EntriesOut::default();
        for e in s.iter_views(start, StreamId::MAX, false).take(take) {
            if !out.push_if(&e, |n| budget.admit(n)) {
                break;
            }
        }
        if !out.is_empty() {
            pairs.push((Reply::Bulk(key.clone()), out.finish()));
        }
    }
    budget_back(cell, budget);
    if pairs.is_empty() {
        Reply::NullArray
    } else {
        Reply::PairMap(pairs)
    }
}

/// The budget a read part starts from: the shared one, or a fresh one.
pub(super) fn budget_from(cell: Option<&BudgetCell>, caps: ReadCaps) -> ReadBudget {
    cell.map_or_else(|| ReadBudget::new(caps), BudgetCell::get)
}

/// Hand what a read part used back to the shared budget, if any.
pub(super) fn budget_back(cell: Option<&BudgetCell>, budget: ReadBudget) {
    if let Some(c) = cell {
        c.set(budget);
    }
}

/// The shard side of XREAD BLOCK (see [`park_xread`]).
pub(super) fn park_xread_apply(
    db: &mut ShardDb,
    cx: &ExecCtx,
    req: XreadReq,
    ticket: Arc<Ticket>,
) -> Reply {
    if ticket.is_fired() {
        return Reply::NoReply;
    }
    // Over several shards a shard never answers alone: it has the read run
    // again over all of them (see `Ticket::reruns`).
    let rerun = ticket.reruns();
    let answer = |r: Reply| match ticket.claim() {
        true if rerun => Reply::Rerun,
        true => r,
        false => Reply::NoReply,
    };
    let (reply, after) = match apply_xread(db, cx, &req) {
        Ok(x) => x,
        Err(e) => return answer(Reply::Error(e)),
    };
    if !matches!(reply, Reply::NullArray) {
        return answer(reply);
    }
    if rerun {
        for ((key, from), id) in req.keys.iter().zip(&req.from).zip(&after) {
            if matches!(from, ReadFrom::Last) {
                ticket.note_resolved(key.clone(), id.to_bytes());
            }
        }
    }
    let dbi = cx.db;
    let keys = req.keys;
    let count = req.count;
    let caps = req.caps;
    let watched = keys.iter().map(|k| (dbi, k.clone())).collect();
    db.blocking.park(Waiter {
        no_touch: db.no_touch,
        ticket: ticket.clone(),
        reply_to: cx.reply_to,
        keys: watched,
        poll: false,
        nokey: false,
        attempt: Box::new(move |db, cx, ready, ticket| {
            // The read runs again over all its streams (Redis 7.2+
            // re-executes an unblocked command), so every stream with data
            // is served, not only the one that woke the reader.
            // Woken only by a key that is (still) a stream, as Redis checks
            // the ready key's type before unblocking an XREAD.
            if !keys.iter().any(|k| k[..] == *ready)
                || !matches!(db.get_stream(cx.db, ready, cx.now_ms), Ok(Some(_)))
            {
                return Attempt::NotReady;
            }
            // Run again, the type checks come first: another of its keys
            // now holding another type fails the whole read.
            let serve = |reply: Reply| match ticket.claim() {
                true if ticket.reruns() => Attempt::Served(Reply::Rerun),
                true => Attempt::Served(reply),
                false => Attempt::Lost,
            };
            if let Some(e) = keys
                .iter()
                .find_map(|k| db.get_stream(cx.db, k, cx.now_ms).err())
            {
                return serve(Reply::Error(e));
            }
            match read_after(db, cx, &keys, &after, count, caps, None) {
                Reply::NullArray => Attempt::NotReady,
                reply => serve(reply),
            }
        }),
    });
    Reply::NoReply
}

/// XREAD / XREADGROUP over streams of several shards with MAXCOUNT or
/// MAXSIZE: the body of an atomic read (every shard held, see
/// [`crate::shard::hold`]) that goes through `runs` — consecutive keys of
/// one shard, each with its part of the command line, in key order — with
/// one budget, so the caps hold over the whole reply as on one server.
/// Every key is checked first, in key order, so the first failing key's
/// error is the answer and nothing is delivered before it. `None` when the
/// command has neither cap (a plain fan-out then does).
///
/// # Source
/// redis.io XREAD / XREADGROUP, "The MAXCOUNT and MAXSIZE options" (8.10).
pub fn cumulative_read(
    name: &str,
    argv: &[Bytes],
    runs: Vec<(crate::route::slot::ShardId, Vec<Bytes>)>,
) -> Option<crate::shard::hold::TxBody> {
    let group = name == "XREADGROUP";
    let caps = if group {
        super::group_read::parse_xreadgroup_req(argv).ok()?.caps
    } else {
        parse_xread_req(argv).ok()?.caps
    };
    if caps.max_count.is_none() && caps.max_size_bytes.is_none() {
        return None;
    }
    Some(crate::shard::hold::TxBody::Run(Box::new(move |tx, db| {
        let cell = BudgetCell::new(caps);
        // Pass 1: every key's checks, in key order.
        for (shard, part) in &runs {
            let part = part.clone();
            let check = on_shard(move |d, cx| {
                let checked = if group {
                    super::group_read::parse_xreadgroup_req(&part)
                        .and_then(|req| super::group_read::validate_xreadgroup(d, cx, &req))
                } else {
                    parse_xread_req(&part).and_then(|req| resolve_read_ids(d, cx, &req).map(|_| ()))
                };
                checked.map_or_else(Reply::Error, |()| Reply::Ok)
            });
            if let e @ Reply::Error(_) = tx.run(shard.0, db, check) {
                return e;
            }
        }
        // Pass 2: the reads, one budget over all of them.
        let mut pairs = Vec::new();
        for (shard, part) in runs {
            if cell.get().is_done() {
                break;
            }
            let cell = cell.clone();
            let read = on_shard(move |d, cx| {
                let reply = if group {
                    super::group_read::parse_xreadgroup_req(&part).map(|mut req| {
                        req.budget = Some(cell);
                        super::group_read::perform_xreadgroup(d, cx, &req)
                    })
                } else {
                    parse_xread_req(&part).and_then(|mut req| {
                        req.budget = Some(cell);
                        apply_xread(d, cx, &req).map(|(reply, _)| reply)
                    })
                };
                reply.unwrap_or_else(Reply::Error)
            });
            match tx.run(shard.0, db, read) {
                e @ Reply::Error(_) => return e,
                Reply::PairMap(p) => pairs.extend(p),
                _ => {}
            }
        }
        if pairs.is_empty() {
            Reply::NullArray
        } else {
            Reply::PairMap(pairs)
        }
    })))
}
