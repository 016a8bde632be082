//! Routing: where a parsed command runs, and how the replies of a command
//! split over several shards are merged back into one.
//!
//! A command whose keys one shard owns goes to that shard whole ([`Routed::One`]):
//! run inline when the connection's own thread owns them, sent over the
//! owner's inbox otherwise. A command over keys of several shards is split
//! into one typed request per shard ([`split_by_shard`]) and its replies merged
//! in the caller's key order ([`Routed::Fan`]). Blocking reads park on every
//! involved shard under one ticket ([`start_block`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::cmd::table::{self, CommandSpec, FanMerge, Handler};
use crate::cmd::{Action, ConnCtx, Keys};
use crate::error::CmdError;
use crate::io::conn::{BlockPlan, Blocked, Conn, Pending, Session, Then};
use crate::reply::Reply;
use crate::route::slot::ShardId;
use crate::server::Shared;
use crate::shard::blocking::{BlockedWatch, Ticket};
use crate::shard::hold::TxBody;
use crate::shard::msg::{Job, ShardReq, NO_CMD, PART};

/// Combines the replies of a fan-out (in part order) into the client's reply.
pub type Merge = Box<dyn FnOnce(Vec<Reply>) -> Reply + Send>;

/// Where a command goes once parsed.
pub enum Routed {
    Reply(Reply),
    Close(Reply),
    /// Close the connection at once, without a reply (SHUTDOWN).
    Drop,
    /// Block the client on no key for this long (ms, 0 = forever), then
    /// answer this ([`crate::cmd::Action::Wait`]).
    Wait(u64, Reply),
    One(ShardId, ShardReq),
    /// Parts run on their shards, replies merged; then, optionally, park the
    /// read or run a second step (see [`Then`]).
    Fan(Vec<(ShardId, ShardReq)>, Merge, Option<Then>),
    /// A blocking read whose keys live on one shard: park it there directly.
    Block(BlockPlan),
    /// Atomic work over several shards: `body` runs with every shard of
    /// the list held ([`crate::route::held`]); `merge` shapes its reply,
    /// which may then park a blocking read ([`Then::Block`]).
    Atomic(Vec<ShardId>, crate::route::held::Body, Merge, Option<Then>),
}

/// Parse `argv` with its table row and decide where it runs.
pub fn route(
    spec: &'static CommandSpec,
    argv: &[Bytes],
    session: &mut Session,
    shared: &Shared,
) -> Routed {
    match spec.handler {
        Handler::Keyed { parse, merge } => route_keyed(spec, parse, merge, None, argv, shared),
        Handler::Blocking {
            parse,
            merge,
            block_ms,
            park,
            validate,
        } => match block_ms(argv) {
            None => route_keyed(spec, parse, merge, validate, argv, shared),
            Some(timeout_ms) => {
                route_blocking(spec, parse, merge, validate, park, timeout_ms, argv, shared)
            }
        },
        Handler::Conn(f) => {
            let mut cx = ConnCtx {
                conn: session,
                shared,
            };
            match f(&mut cx, argv) {
                Ok(Action::Reply(r)) => Routed::Reply(r),
                Ok(Action::Close(r)) => Routed::Close(r),
                Ok(Action::Drop) => Routed::Drop,
                Ok(Action::Wait { timeout_ms, reply }) => Routed::Wait(timeout_ms, reply),
                Ok(Action::Run(shard, req)) => Routed::One(shard, req),
                Ok(Action::FanOut { parts, merge }) => Routed::Fan(parts, merge, None),
                Ok(Action::FanOutThen { parts, merge, then }) => {
                    Routed::Fan(parts, merge, Some(then))
                }
                Ok(Action::Atomic {
                    shards,
                    body,
                    merge,
                }) => Routed::Atomic(shards, body, merge, None),
                Err(e) => Routed::Reply(Reply::Error(e)),
            }
        }
    }
}

/// Route a keyed command: to the one shard owning its keys, or — keys on
/// several shards — split by shard and run atomically with those shards
/// held ([`Routed::Atomic`], see [`crate::route::held`]), the parts' replies
/// merged as `merge` says (`Refuse`: CROSSSLOT).
///
/// With `validate` (XREADGROUP) the split command checks every shard's keys
/// without side effects first, and reads only when all pass, so one
/// shard's `NOGROUP`/`WRONGTYPE`/ID error is never answered after another
/// shard already delivered (and added to its PEL); the error is the one of
/// the first failing key in the caller's order, as Redis checks keys in
/// order. Nothing changes between the two steps: the shards are held.
pub fn route_keyed(
    spec: &'static CommandSpec,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    merge: FanMerge,
    validate: Option<table::ParseFn>,
    argv: &[Bytes],
    shared: &Shared,
) -> Routed {
    // One key at a fixed place (most commands): no index list to build.
    if let Keys::Range { first, last, .. } = spec.keys {
        if i16::from(first) == i16::from(last) {
            let shard = argv
                .get(usize::from(first))
                .map_or(ShardId(0), |k| shared.shard_of(k));
            return match parse(argv) {
                Ok(req) => Routed::One(shard, req),
                Err(e) => Routed::Reply(Reply::Error(e)),
            };
        }
    }
    let keys = spec.key_indexes(argv);
    let first_shard = keys
        .first()
        .map(|&i| shared.shard_of(&argv[i]))
        .unwrap_or(ShardId(0));
    let single = keys
        .iter()
        .skip(1)
        .all(|&i| shared.shard_of(&argv[i]) == first_shard);
    if single {
        return match parse(argv) {
            Ok(req) => Routed::One(first_shard, req),
            Err(e) => Routed::Reply(Reply::Error(e)),
        };
    }
    // Validate the whole command once, so syntax and arity errors read as
    // Redis's before any cross-shard refusal.
    if let Err(e) = parse(argv) {
        return Routed::Reply(Reply::Error(e));
    }
    if merge == FanMerge::Refuse {
        return Routed::Reply(Reply::Error(CmdError::CrossSlot));
    }
    let nkeys = keys.len();
    let split = split_by_shard(spec, argv, &keys, |k| shared.shard_of(k));
    let mut parts = Vec::with_capacity(split.len());
    let mut checks = Vec::new();
    let mut positions = Vec::with_capacity(split.len());
    for (shard, part_argv, pos) in split {
        match parse(&part_argv) {
            Ok(req) => parts.push((shard, req)),
            Err(e) => return Routed::Reply(Reply::Error(e)),
        }
        if let Some(validate) = validate {
            match validate(&part_argv) {
                Ok(req) => checks.push((shard, req)),
                Err(e) => return Routed::Reply(Reply::Error(e)),
            }
        }
        positions.push(pos);
    }
    if merge == FanMerge::AtomicIfNoneExist {
        let shards = parts.iter().map(|(s, _)| *s).collect();
        let key_sets: Vec<(ShardId, Vec<Bytes>)> = parts
            .iter()
            .zip(&positions)
            .map(|((s, _), pos)| (*s, pos.iter().map(|&n| argv[keys[n]].clone()).collect()))
            .collect();
        let body = TxBody::Run(Box::new(move |tx, db| {
            msetnx_parts(tx, db, parts, key_sets)
        }));
        return Routed::Atomic(
            shards,
            body,
            Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk)),
            None,
        );
    }
    if merge == FanMerge::Streams && spec.keys == crate::cmd::Keys::AfterStreamsToken {
        let runs = key_runs(argv, &keys, |k| shared.shard_of(k));
        if let Some(body) = crate::cmd::stream::cumulative_read(spec.name, argv, runs) {
            let shards = parts.iter().map(|(s, _)| *s).collect();
            return Routed::Atomic(
                shards,
                body,
                Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullArray)),
                None,
            );
        }
    }
    let check_positions = positions.clone();
    let merge: Merge = match merge {
        FanMerge::SumInt => Box::new(merge_sum),
        FanMerge::AllOk => Box::new(merge_ok),
        FanMerge::NoKeyOrOk => Box::new(merge_nokey_or_ok),
        FanMerge::KeyOrder => Box::new(move |replies: Vec<Reply>| {
            if let Some(e) = first_error(&replies) {
                return e;
            }
            let mut out: Vec<Reply> = (0..nkeys).map(|_| Reply::NullBulk).collect();
            for (reply, pos) in replies.into_iter().zip(positions) {
                if let Reply::Array(items) = reply {
                    for (item, n) in items.into_iter().zip(pos) {
                        out[n] = item;
                    }
                }
            }
            Reply::Array(out)
        }),
        FanMerge::Streams => {
            let key_pos: Vec<Vec<(Bytes, usize)>> = positions
                .iter()
                .map(|pos| pos.iter().map(|&n| (argv[keys[n]].clone(), n)).collect())
                .collect();
            Box::new(move |replies: Vec<Reply>| merge_streams(replies, key_pos))
        }
        FanMerge::Refuse | FanMerge::AtomicIfNoneExist => {
            Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk))
        }
    };
    // Over several shards the parts run under holds (see `route::held`), so
    // the reply is one moment's view of every key, as on one Redis: no
    // client sees part of a transaction or of an MSET, and a read is never
    // half before and half after one.
    let shards: Vec<ShardId> = parts.iter().map(|(s, _)| *s).collect();
    let single = |mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk);
    if validate.is_none() {
        let groups = parts
            .into_iter()
            .map(|(shard, req)| (shard.0, vec![(None, req)]))
            .collect();
        let body = TxBody::Groups(
            groups,
            Box::new(move |replies: Vec<Vec<Reply>>| {
                merge(replies.into_iter().flatten().collect())
            }),
        );
        return Routed::Atomic(shards, body, Box::new(single), None);
    }
    // Checks first, in key order, then the reads: nothing is delivered
    // when a key fails, and nothing can change in between.
    let body = TxBody::Run(Box::new(move |tx, db| {
        let in_db = |v: Vec<(ShardId, ShardReq)>| -> Vec<(u16, Vec<(usize, ShardReq)>)> {
            v.into_iter().map(|(s, r)| (s.0, vec![(db, r)])).collect()
        };
        let checked = merge_checks(
            tx.run_each(in_db(checks)).into_iter().flatten().collect(),
            &check_positions,
        );
        if checked.is_error() {
            return checked;
        }
        merge(tx.run_each(in_db(parts)).into_iter().flatten().collect())
    }));
    Routed::Atomic(shards, body, Box::new(single), None)
}

/// Body of MSETNX over several shards ([`FanMerge::AtomicIfNoneExist`]),
/// run with every shard held: `:0` when any key exists (`key_sets`: each
/// shard's keys), else every part runs: the first error, else `:1`.
fn msetnx_parts(
    tx: &mut crate::shard::hold::TxRun<'_>,
    db: usize,
    parts: Vec<(ShardId, ShardReq)>,
    key_sets: Vec<(ShardId, Vec<Bytes>)>,
) -> Reply {
    let checks = key_sets
        .into_iter()
        .map(|(shard, keys)| {
            let any = crate::shard::msg::on_shard(move |d, cx| {
                Reply::Int(i64::from(
                    keys.iter().any(|k| d.exists(cx.db, k, cx.now_ms)),
                ))
            });
            (shard.0, vec![(db, any)])
        })
        .collect();
    if tx
        .run_each(checks)
        .iter()
        .flatten()
        .any(|r| *r == Reply::Int(1))
    {
        return Reply::Int(0);
    }
    let groups = parts
        .into_iter()
        .map(|(shard, req)| (shard.0, vec![(db, req)]))
        .collect();
    let replies: Vec<Reply> = tx.run_each(groups).into_iter().flatten().collect();
    first_error(&replies).unwrap_or(Reply::Int(1))
}

/// The keys of an XREAD / XREADGROUP command line (`keys`: their argv
/// indexes, after `STREAMS`) cut into runs of consecutive keys on one
/// shard, each with its own command line: the options, `STREAMS`, the
/// run's keys and their IDs. In key order.
fn key_runs(
    argv: &[Bytes],
    keys: &[usize],
    shard_of: impl Fn(&[u8]) -> ShardId,
) -> Vec<(ShardId, Vec<Bytes>)> {
    let n = keys.len();
    let Some(&first) = keys.first() else {
        return Vec::new();
    };
    let head = &argv[..first];
    let mut runs: Vec<(ShardId, Vec<usize>)> = Vec::new();
    for &k in keys {
        let shard = shard_of(&argv[k]);
        match runs.last_mut() {
            Some((s, ks)) if *s == shard => ks.push(k),
            _ => runs.push((shard, vec![k])),
        }
    }
    runs.into_iter()
        .map(|(shard, ks)| {
            let mut part = head.to_vec();
            part.extend(ks.iter().map(|&k| argv[k].clone()));
            part.extend(ks.iter().filter_map(|&k| argv.get(k + n).cloned()));
            (shard, part)
        })
        .collect()
}

/// Merge a validation step: each part answers `+OK` or `[local key index,
/// error]`; the answer is the error of the first failing key in the caller's
/// key order, else `+OK`.
fn merge_checks(replies: Vec<Reply>, positions: &[Vec<usize>]) -> Reply {
    let mut first: Option<(usize, Reply)> = None;
    for (reply, pos) in replies.into_iter().zip(positions) {
        let (n, err) = match reply {
            Reply::Array(mut v) if v.len() == 2 => {
                let err = v.pop().unwrap_or(Reply::Ok);
                let local = match v.pop() {
                    Some(Reply::Int(i)) => usize::try_from(i).unwrap_or(0),
                    _ => 0,
                };
                (pos.get(local).copied().unwrap_or(usize::MAX), err)
            }
            e @ Reply::Error(_) => (usize::MAX, e),
            _ => continue,
        };
        if first.as_ref().is_none_or(|(m, _)| n < *m) {
            first = Some((n, err));
        }
    }
    first.map_or(Reply::Ok, |(_, e)| e)
}

/// Route a read that asks to block: park it directly when its keys live on
/// one shard; otherwise first run the non-blocking form over every shard and
/// park only if that found nothing (DESIGN.md "Blocking reads", step 1 and 2).
#[allow(clippy::too_many_arguments)]
fn route_blocking(
    spec: &'static CommandSpec,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    merge: FanMerge,
    validate: Option<table::ParseFn>,
    park: fn(&[Bytes], Arc<Ticket>) -> Result<ShardReq, CmdError>,
    timeout_ms: u64,
    argv: &[Bytes],
    shared: &Shared,
) -> Routed {
    if let Err(e) = parse(argv) {
        return Routed::Reply(Reply::Error(e));
    }
    let keys = spec.key_indexes(argv);
    let split = split_by_shard(spec, argv, &keys, |k| shared.shard_of(k));
    // List pops over several shards park the whole command on every shard
    // of its keys (each shard serves only its own keys; BLMOVE's keys play
    // different roles, so its argv cannot be split).
    let whole = merge == FanMerge::Refuse && spec.group == "list";
    let plan_parts: Vec<(ShardId, Vec<Bytes>)> = split
        .iter()
        .map(|(s, a, _)| (*s, if whole { argv.to_vec() } else { a.clone() }))
        .collect();
    let rerun = (merge == FanMerge::Streams && split.len() > 1).then(|| crate::io::conn::Rerun {
        spec,
        argv: argv.to_vec(),
    });
    let plan = BlockPlan {
        parts: plan_parts,
        park,
        timeout_ms,
        rerun,
        transit: None,
        counted: None,
    };
    // A blocking pop over keys of several shards (BLPOP, BZPOPMIN, BLMPOP,
    // BZMPOP: the reply comes from one key) first tries its keys in order
    // with every shard held, as Redis does on one server, and parks only
    // when none had anything.
    if split.len() > 1 && merge == FanMerge::Refuse {
        if let Some((shards, body)) = in_key_order(spec, parse, argv, &keys, shared) {
            let single = |mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullArray);
            return Routed::Atomic(shards, body, Box::new(single), Some(Then::Block(plan)));
        }
    }
    if split.len() <= 1 || merge == FanMerge::Refuse {
        return Routed::Block(plan);
    }
    match route_keyed(spec, parse, merge, validate, argv, shared) {
        Routed::Fan(parts, merge, None) => Routed::Fan(parts, merge, Some(Then::Block(plan))),
        Routed::Atomic(shards, body, merge, None) => {
            Routed::Atomic(shards, body, merge, Some(Then::Block(plan)))
        }
        Routed::Fan(
            checks,
            check_merge,
            Some(Then::Fan {
                parts,
                merge,
                then: None,
            }),
        ) => Routed::Fan(
            checks,
            check_merge,
            Some(Then::Fan {
                parts,
                merge,
                then: Some(Box::new(Then::Block(plan))),
            }),
        ),
        other => other,
    }
}

/// The non-blocking form of a pop over keys of several shards (BZPOPMIN,
/// BLPOP, BZMPOP, BLMPOP; also what they run inside MULTI), as the body of
/// an atomic command: each run of consecutive keys of one shard in key
/// order, stopping at the first that answers (an element or an error), as
/// Redis tries the keys in order. `None` when the keys do not split into
/// such runs (see [`split_runs`]).
pub fn in_key_order(
    spec: &CommandSpec,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
    argv: &[Bytes],
    keys: &[usize],
    shared: &Shared,
) -> Option<(Vec<ShardId>, TxBody)> {
    let runs = split_runs(spec, argv, keys, |k| shared.shard_of(k))?;
    let mut reqs = Vec::with_capacity(runs.len());
    for (shard, part) in runs {
        reqs.push((shard, parse(&part).ok()?));
    }
    let shards = reqs.iter().map(|(s, _)| *s).collect();
    let body = TxBody::Run(Box::new(move |tx, db| {
        let mut last = Reply::NullArray;
        for (shard, req) in reqs {
            last = tx.run(shard.0, db, req);
            if !matches!(last, Reply::NullArray | Reply::NullBulk) {
                break;
            }
        }
        last
    }));
    Some((shards, body))
}

/// Split `argv` into one argv per run of consecutive keys owned by one
/// shard, in key order, for commands whose keys are one list before their
/// other arguments: `Keys::Range` up to the last-but-n argument with step 1
/// (BLPOP) or `Keys::NumKeys` (BLMPOP, with numkeys rewritten per run).
/// `None` for other key layouts.
pub fn split_runs(
    spec: &CommandSpec,
    argv: &[Bytes],
    key_idx: &[usize],
    shard_of: impl Fn(&[u8]) -> ShardId,
) -> Option<Vec<(ShardId, Vec<Bytes>)>> {
    let numkeys_at = match spec.keys {
        Keys::Range { last, step: 1, .. } if last < 0 => None,
        Keys::NumKeys { at } => Some(usize::from(at)),
        _ => return None,
    };
    let (&first, &last) = (key_idx.first()?, key_idx.last()?);
    let (prefix, suffix) = (&argv[..first], &argv[last + 1..]);
    let mut runs: Vec<(ShardId, Vec<Bytes>)> = Vec::new();
    for &ki in key_idx {
        let shard = shard_of(&argv[ki]);
        match runs.last_mut() {
            Some((s, keys)) if *s == shard => keys.push(argv[ki].clone()),
            _ => runs.push((shard, vec![argv[ki].clone()])),
        }
    }
    Some(
        runs.into_iter()
            .map(|(shard, keys)| {
                let mut full = prefix.to_vec();
                if let Some(at) = numkeys_at {
                    if let Some(n) = full.get_mut(at) {
                        *n = Bytes::from(keys.len().to_string());
                    }
                }
                full.extend(keys);
                full.extend(suffix.iter().cloned());
                (shard, full)
            })
            .collect(),
    )
}

/// Send the parts of a fan-out to their shards, collecting their replies in
/// slot `seq` (a new slot, or one whose validation step just passed). `row`
/// is the command's statistics row (or [`NO_CMD`]): each shard adds its
/// part's time to the command's `usec`.
#[allow(clippy::too_many_arguments)]
pub fn start_fan(
    io: u16,
    batches: &mut [Vec<Job>],
    conn: &mut Conn,
    seq: u64,
    parts: Vec<(ShardId, ShardReq)>,
    merge: Merge,
    then: Option<Then>,
    row: u32,
) {
    let holds = then.as_ref().is_some_and(Then::holds);
    let n = parts.len();
    let Some(slot) = conn.slot_mut(seq) else {
        return;
    };
    *slot = Pending::Fan {
        parts: (0..n).map(|_| None).collect(),
        left: n,
        merge,
        then,
        row,
    };
    if holds {
        conn.hold_until = Some(seq);
    }
    for (part, (shard, req)) in parts.into_iter().enumerate() {
        conn.note_sent(shard);
        let mut job = conn.job(io, seq, part as u16, req);
        if row != NO_CMD {
            job.cmd = row | PART;
        }
        batches[usize::from(shard.0)].push(job);
    }
}

/// Park a blocking read on its shards under one ticket; the slot `seq` is filled
/// by whichever shard serves it, or by the connection's thread on timeout.
/// `row`: the command's statistics row ([`NO_CMD`] when not counted), which
/// a CLIENT UNBLOCK error and a rerun count toward.
pub fn start_block(
    io: u16,
    shared: &Shared,
    batches: &mut [Vec<Job>],
    conn: &mut Conn,
    seq: u64,
    mut plan: BlockPlan,
    row: u32,
) {
    let shards = plan
        .parts
        .iter()
        .fold(0u64, |m, (s, _)| m | 1 << (s.0 % 64));
    let mut counted = plan.counted.take().filter(|_| plan.parts.len() == 1);
    let watch = blocked_watch(shared, conn);
    let ticket = if plan.rerun.is_some() {
        Ticket::watched_rerun(watch)
    } else {
        Ticket::watched(watch, counted.as_ref().map(|(row, _)| *row))
    };
    for (shard, part_argv) in &plan.parts {
        let parked = (plan.park)(part_argv, ticket.clone());
        let parked = match &plan.transit {
            Some(check) => parked.map(|req| crate::route::transit::checked(check.clone(), req)),
            None => parked,
        };
        match parked {
            Ok(req) => {
                conn.note_sent(*shard);
                let mut job = conn.job(io, seq, 0, req);
                if let Some((cmd, argv)) = counted.take() {
                    job.cmd = cmd;
                    job.argv = Some(argv);
                }
                batches[usize::from(shard.0)].push(job)
            }
            Err(e) => {
                if ticket.claim() {
                    conn.fill(seq, 0, Reply::Error(e));
                }
                return;
            }
        }
    }
    let deadline =
        (plan.timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(plan.timeout_ms));
    hold_blocked(
        conn,
        Blocked {
            seq,
            ticket,
            deadline,
            rerun: plan.rerun,
            shards,
            row,
            timeout_reply: Reply::NullArray,
        },
    );
}

/// Where a blocked client's ticket reports its state: the client's
/// `flags=b` and the server's `blocked_clients`.
fn blocked_watch(shared: &Shared, conn: &Conn) -> BlockedWatch {
    BlockedWatch {
        flag: conn.session.shared.blocked.clone(),
        count: shared.blocked_clients.clone(),
    }
}

/// The connection is blocked in `b`: its pipeline holds until `b`'s reply
/// is written, and CLIENT UNBLOCK from other connections finds its ticket.
fn hold_blocked(conn: &mut Conn, b: Blocked) {
    if let Ok(mut t) = conn.session.shared.ticket.lock() {
        *t = Arc::downgrade(&b.ticket);
    }
    conn.hold_until = Some(b.seq);
    conn.blocked = Some(b);
}

/// The command line of a woken read over several shards, to run it again
/// ([`crate::io::conn::Rerun`]): its BLOCK timeout becomes what is left of
/// it (at least 1 ms; 0 stays "forever"), and each `$` a shard resolved
/// when it parked becomes that ID, so the read continues from where it
/// blocked.
pub fn rerun_argv(
    rerun: &crate::io::conn::Rerun,
    deadline: Option<std::time::Instant>,
    ticket: &Ticket,
) -> Vec<Bytes> {
    let mut argv = rerun.argv.clone();
    // Options start after `XREADGROUP GROUP group consumer` / `XREAD`.
    let mut i = if rerun.spec.name == "XREADGROUP" {
        4
    } else {
        1
    };
    let mut streams = None;
    while i < argv.len() {
        let tok = argv[i].to_ascii_uppercase();
        match &tok[..] {
            b"STREAMS" => {
                streams = Some(i);
                break;
            }
            b"BLOCK" => {
                if let (Some(d), Some(v)) = (deadline, argv.get_mut(i + 1)) {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
                    *v = Bytes::from(ms.to_string());
                }
                i += 2;
            }
            b"NOACK" => i += 1,
            _ => i += 2,
        }
    }
    if let Some(s) = streams {
        let n = (argv.len() - s - 1) / 2;
        let resolved = ticket.resolved();
        for k in 0..n {
            let (key, id) = (s + 1 + k, s + 1 + n + k);
            if argv[id][..] == b"$"[..] {
                if let Some((_, v)) = resolved.iter().find(|(rk, _)| *rk == argv[key]) {
                    argv[id] = v.clone();
                }
            }
        }
    }
    argv
}

/// Start a command routed for slot `seq` of `conn` (already reserved and
/// waiting): answer it, send its parts, or park it. It is a woken read
/// running again (its call was counted when it was first dispatched);
/// `row` is its statistics row, so its time and failure count as the
/// command's.
pub fn start_routed(
    io: u16,
    shared: &Shared,
    batches: &mut [Vec<Job>],
    conn: &mut Conn,
    seq: u64,
    routed: Routed,
    row: u32,
) {
    match routed {
        Routed::Reply(r) | Routed::Close(r) => {
            if let (Some(e), true) = (r.error_text(), row != NO_CMD) {
                shared.cmdstats.count_exec(row, 0, Some(e));
            }
            conn.fill(seq, 0, r);
        }
        Routed::One(shard, req) => {
            conn.note_sent(shard);
            let mut job = conn.job(io, seq, 0, req);
            job.cmd = row;
            batches[usize::from(shard.0)].push(job);
        }
        Routed::Fan(parts, merge, then) => {
            start_fan(io, batches, conn, seq, parts, merge, then, row)
        }
        Routed::Block(plan) => start_block(io, shared, batches, conn, seq, plan, row),
        Routed::Atomic(shards, body, merge, then) => {
            let flush = conn.must_flush(shards.iter().fold(0u64, |m, s| m | 1 << (s.0 % 64)));
            let (parts, merge, then) =
                crate::route::held::held_steps(shared, &shards, body, merge, flush, then);
            start_fan(io, batches, conn, seq, parts, merge, then, row);
        }
        Routed::Drop => {
            conn.fill(seq, 0, Reply::NullArray);
        }
        Routed::Wait(_, reply) => {
            conn.fill(seq, 0, reply);
        }
    }
}

/// Block the client on no key (WAIT) until `timeout_ms` passes (0: until
/// `CLIENT UNBLOCK` or it leaves), then answer `reply` in slot `seq`. It
/// counts as blocked (INFO `blocked_clients`, `flags=b`) meanwhile.
pub fn start_wait(
    shared: &Shared,
    conn: &mut Conn,
    seq: u64,
    timeout_ms: u64,
    reply: Reply,
    row: u32,
) {
    let ticket = Ticket::watched(blocked_watch(shared, conn), None);
    ticket.mark_parked();
    let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
    hold_blocked(
        conn,
        Blocked {
            seq,
            ticket,
            deadline,
            rerun: None,
            shards: 0,
            row,
            timeout_reply: reply,
        },
    );
}

/// Merge XREAD-style replies from several shards: `[key, entries]` pairs in the
/// caller's key order; a null reply when no shard returned anything. A key
/// named twice is answered twice, at each of its places (a shard's pairs
/// come in its keys' order, so each takes the first place not yet taken).
fn merge_streams(replies: Vec<Reply>, key_pos: Vec<Vec<(Bytes, usize)>>) -> Reply {
    if let Some(e) = first_error(&replies) {
        return e;
    }
    let mut items: Vec<(usize, (Reply, Reply))> = Vec::new();
    for (reply, keys) in replies.into_iter().zip(key_pos) {
        let pairs = match reply {
            Reply::PairMap(p) => p,
            _ => continue,
        };
        let mut taken = vec![false; keys.len()];
        for (k, v) in pairs {
            let at = match &k {
                Reply::Bulk(b) => (0..keys.len()).find(|&i| !taken[i] && keys[i].0 == b),
                _ => None,
            };
            let n = at.map_or(usize::MAX, |i| {
                taken[i] = true;
                keys[i].1
            });
            items.push((n, (k, v)));
        }
    }
    if items.is_empty() {
        return Reply::NullArray;
    }
    items.sort_by_key(|(n, _)| *n);
    Reply::PairMap(items.into_iter().map(|(_, p)| p).collect())
}

/// Merge helper: the first error among `parts`, if any.
pub fn first_error(parts: &[Reply]) -> Option<Reply> {
    parts.iter().find(|r| r.is_error()).cloned()
}

/// Fan-out merge: sum of integer replies (DBSIZE, DEL across shards).
pub fn merge_sum(parts: Vec<Reply>) -> Reply {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    Reply::Int(
        parts
            .iter()
            .map(|r| if let Reply::Int(n) = r { *n } else { 0 })
            .sum(),
    )
}

/// Fan-out merge: `+OK` if every part answered OK, else the first error.
pub fn merge_ok(parts: Vec<Reply>) -> Reply {
    first_error(&parts).unwrap_or(Reply::Ok)
}

/// Fan-out merge for MIGRATE over several shards ([`FanMerge::NoKeyOrOk`]):
/// the first error (in part order), else `+NOKEY` when no part found any of
/// its keys, else `+OK`.
pub fn merge_nokey_or_ok(parts: Vec<Reply>) -> Reply {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    if parts
        .iter()
        .all(|r| *r == Reply::simple(crate::cmd::migrate::NOKEY))
    {
        return Reply::simple(crate::cmd::migrate::NOKEY);
    }
    Reply::Ok
}

/// Fan-out merge: concatenate array replies (KEYS).
pub fn merge_concat(parts: Vec<Reply>) -> Reply {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    let mut out = Vec::new();
    for p in parts {
        if let Reply::Array(items) = p {
            out.extend(items);
        }
    }
    Reply::Array(out)
}

/// Split argv of a multi-key command into one argv per shard, keeping each key's
/// associated arguments (MSET's value, XREAD's ID). Returns `(shard, argv,
/// original key positions)` per part, in first-appearance order of shards.
pub fn split_by_shard(
    spec: &CommandSpec,
    argv: &[Bytes],
    key_idx: &[usize],
    shard_of: impl Fn(&[u8]) -> ShardId,
) -> Vec<(ShardId, Vec<Bytes>, Vec<usize>)> {
    let mut parts: Vec<(ShardId, Vec<Bytes>, Vec<usize>)> = Vec::new();
    let (Some(&first), Some(&last)) = (key_idx.first(), key_idx.last()) else {
        return parts;
    };
    let prefix = &argv[..first];
    let (step, tail_start, paired) = match spec.keys {
        Keys::Range { step, .. } => (
            usize::from(step.max(1)),
            last + usize::from(step.max(1)),
            None,
        ),
        Keys::AfterStreamsToken => (1, argv.len(), Some(key_idx.len())),
        Keys::None => (1, argv.len(), None),
        // MIGRATE splits only in its KEYS form, where the keys end argv.
        Keys::NumKeys { .. } | Keys::Migrate => (1, last + 1, None),
    };
    // NumKeys: each part's key count replaces the count before the keys.
    let numkeys_at = matches!(spec.keys, Keys::NumKeys { .. }).then(|| first - 1);
    let prefix = match numkeys_at {
        Some(at) => &argv[..at],
        None => prefix,
    };
    let suffix = argv.get(tail_start.min(argv.len())..).unwrap_or(&[]);
    let mut keyed: Vec<(ShardId, Vec<Bytes>, Vec<usize>)> = Vec::new();
    for (n, &ki) in key_idx.iter().enumerate() {
        let shard = shard_of(&argv[ki]);
        let slot = match keyed.iter().position(|(s, _, _)| *s == shard) {
            Some(p) => p,
            None => {
                keyed.push((shard, Vec::new(), Vec::new()));
                keyed.len() - 1
            }
        };
        let (_, args, positions) = &mut keyed[slot];
        positions.push(n);
        match paired {
            // XREAD: keys first, IDs collected separately below
            Some(_) => args.push(argv[ki].clone()),
            None => args.extend(argv[ki..(ki + step).min(argv.len())].iter().cloned()),
        }
    }
    for (shard, args, positions) in keyed {
        let mut full: Vec<Bytes> = prefix.to_vec();
        if numkeys_at.is_some() {
            full.push(Bytes::from(positions.len().to_string()));
        }
        full.extend(args);
        if let Some(nkeys) = paired {
            for &n in &positions {
                full.push(argv[first + nkeys + n].clone());
            }
        } else {
            full.extend(suffix.iter().cloned());
        }
        parts.push((shard, full, positions));
    }
    parts
}
