//! Consumer-group effect records: emitted after a group command changes
//! state, replayed by the loader.
//!
//! Group commands are logged as the *state* they leave, read back after the
//! change, so replay needs no clock, idle computation or ID resolution:
//!
//! * `SS.GROUP key group last-id entries-read|-1` — the group's
//!   last-delivered ID and read counter (creates the group if missing: XGROUP
//!   CREATE, SETID, and every `>` delivery that advances the group).
//! * `SS.CONSUMER key group consumer seen-ms active-ms|-1` — a consumer's
//!   existence and times (XGROUP CREATECONSUMER, reads and claims).
//! * `SS.PEL key group consumer delivery-ms delivery-count id [id ...]` —
//!   pending entries with their owner, last delivery time and count
//!   (XREADGROUP deliveries and redeliveries, XCLAIM, XAUTOCLAIM): the
//!   equivalent of `XCLAIM ... TIME ms RETRYCOUNT n FORCE JUSTID`.
//! * `SS.NACK key group delivery-count id [id ...]` — pending entries with no
//!   owner and delivery time 0 (released by XNACK, Redis 8.8), created if
//!   missing.
//! * `XACK key group id ...`, `XGROUP DESTROY key group`, `XGROUP
//!   DELCONSUMER key group consumer` — as the client sent them (they are
//!   exact already); PEL entries dropped because their stream entry was
//!   deleted (XCLAIM, XAUTOCLAIM) are logged as XACK.
//!
//! A consumer's seen-time is logged with each change above; an XREADGROUP
//! that finds nothing for an existing consumer only bumps its seen-time in
//! memory (as Redis, which does not propagate that either), so after a
//! restart `seen-time` may be older than it was.

use bytes::Bytes;

use crate::cmd::ExecCtx;
use crate::shard::db::ShardDb;
use crate::stream::group::{ConsumerGroup, NO_CONSUMER};
use crate::stream::StreamId;

/// `SS.GROUP`.
pub const GROUP_RECORD: &[u8] = b"SS.GROUP";
/// `SS.UNREF key id [id ...]`: drop these IDs from every group's PEL (DELREF).
pub const UNREF_RECORD: &[u8] = b"SS.UNREF";
/// `SS.TRIMIDS key id [id ...]`: remove these entries as a trim does (an
/// `ACKED` trim, which is not a prefix cut; `max-deleted-entry-id` stays).
pub const TRIMIDS_RECORD: &[u8] = b"SS.TRIMIDS";
/// `SS.CONSUMER`.
pub const CONSUMER_RECORD: &[u8] = b"SS.CONSUMER";
/// `SS.PEL`.
pub const PEL_RECORD: &[u8] = b"SS.PEL";
/// `SS.NACK`.
pub const NACK_RECORD: &[u8] = b"SS.NACK";
/// `SS.IDMP key pid iid entry-id added-ms`: an idempotent XADD's pair
/// (Redis 8.6), recorded in the stream's IDMP map (counts in `iids-added`).
pub const IDMP_RECORD: &[u8] = b"SS.IDMP";
/// `SS.IDMPSTATS key iids-added iids-duplicates`: the IDMP lifetime counters.
pub const IDMPSTATS_RECORD: &[u8] = b"SS.IDMPSTATS";

/// What one group command changed in one group.
#[derive(Debug, Default)]
pub struct GroupChange<'a> {
    /// The stream may have been created by this command (XGROUP CREATE MKSTREAM).
    pub mkstream: bool,
    /// `last_id` / `entries_read` changed (or the group was created).
    pub meta: bool,
    /// This consumer was created or its times changed.
    pub consumer: Option<&'a [u8]>,
    /// PEL entries removed (acked, or dropped because the entry is gone).
    pub acked: Vec<StreamId>,
    /// PEL entries inserted or updated.
    pub pel: Vec<StreamId>,
}

impl GroupChange<'_> {
    /// Whether there is nothing to log.
    pub fn is_empty(&self) -> bool {
        !self.mkstream
            && !self.meta
            && self.consumer.is_none()
            && self.acked.is_empty()
            && self.pel.is_empty()
    }
}

fn num(n: u64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

fn opt_num(n: Option<u64>) -> Bytes {
    n.map_or(Bytes::from_static(b"-1"), num)
}

/// The records describing `ch` for group `group` of stream `key`, read from
/// the current state.
fn group_records(g: &ConsumerGroup, key: &[u8], group: &[u8], ch: &GroupChange) -> Vec<Vec<Bytes>> {
    let k = Bytes::copy_from_slice(key);
    let gn = Bytes::copy_from_slice(group);
    let mut out = Vec::new();
    if ch.mkstream {
        out.push(vec![
            Bytes::from_static(super::rewrite::MKSTREAM_RECORD),
            k.clone(),
        ]);
    }
    if ch.meta {
        out.push(vec![
            Bytes::from_static(GROUP_RECORD),
            k.clone(),
            gn.clone(),
            g.last_id.to_bytes(),
            opt_num(g.entries_read),
        ]);
    }
    if let Some(c) = ch.consumer.and_then(|name| g.consumer_by_name(name)) {
        out.push(vec![
            Bytes::from_static(CONSUMER_RECORD),
            k.clone(),
            gn.clone(),
            c.name.clone(),
            num(c.seen_time_ms),
            opt_num(c.active_time_ms),
        ]);
    }
    if !ch.acked.is_empty() {
        let mut rec = vec![Bytes::from_static(b"XACK"), k.clone(), gn.clone()];
        rec.extend(ch.acked.iter().map(|id| id.to_bytes()));
        out.push(rec);
    }
    // Consecutive entries with the same owner, time and count share a record.
    let mut cur: Option<(u32, u64, u64, Vec<Bytes>)> = None;
    let flush = |cur: &mut Option<(u32, u64, u64, Vec<Bytes>)>, out: &mut Vec<Vec<Bytes>>| {
        if let Some((c, t, n, ids)) = cur.take() {
            if c == NO_CONSUMER {
                let mut rec = vec![
                    Bytes::from_static(NACK_RECORD),
                    k.clone(),
                    gn.clone(),
                    num(n),
                ];
                rec.extend(ids);
                out.push(rec);
                return;
            }
            let mut rec = vec![
                Bytes::from_static(PEL_RECORD),
                k.clone(),
                gn.clone(),
                g.consumer_name(c),
                num(t),
                num(n),
            ];
            rec.extend(ids);
            out.push(rec);
        }
    };
    for id in &ch.pel {
        let Some(p) = g.pending(*id) else {
            continue;
        };
        match &mut cur {
            Some((c, t, n, ids))
                if *c == p.consumer && *t == p.delivery_time_ms && *n == p.delivery_count =>
            {
                ids.push(id.to_bytes())
            }
            _ => {
                flush(&mut cur, &mut out);
                cur = Some((
                    p.consumer,
                    p.delivery_time_ms,
                    p.delivery_count,
                    vec![id.to_bytes()],
                ));
            }
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// Log what a group command changed (see the module docs for the records).
/// A no-op when AOF is off or the group is gone.
pub fn log_group_change(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    group: &[u8],
    ch: &GroupChange,
) {
    // Changes Redis propagates count as changes (INFO
    // rdb_changes_since_last_save); a redelivery from a consumer's own PEL
    // (pending entries only) does not, as in Redis.
    if ch.meta || ch.mkstream || !ch.acked.is_empty() {
        db.stats.dirty += 1;
    }
    if !db.aof.is_enabled() || ch.is_empty() {
        return;
    }
    let records = match db.get_stream(cx.db, key, cx.now_ms) {
        Ok(Some(s)) => match s.group(group) {
            Some(g) => group_records(g, key, group, ch),
            None => return,
        },
        _ => return,
    };
    for rec in records {
        let args: Vec<&[u8]> = rec.iter().map(|b| &b[..]).collect();
        db.log_effect(cx, &args);
    }
}

/// Log `record key id...` (SS.UNREF, SS.TRIMIDS, XDEL) for a non-empty `ids`.
pub fn log_ids(db: &mut ShardDb, cx: &ExecCtx, record: &[u8], key: &[u8], ids: &[StreamId]) {
    if ids.is_empty() || !db.aof.is_enabled() {
        return;
    }
    let texts: Vec<Bytes> = ids.iter().map(|id| id.to_bytes()).collect();
    let mut args: Vec<&[u8]> = Vec::with_capacity(2 + texts.len());
    args.push(record);
    args.push(key);
    args.extend(texts.iter().map(|t| &t[..]));
    db.log_effect(cx, &args);
}

/// Log what a trim removed (see [`TrimEffect`](crate::stream::TrimEffect)):
/// a prefix as `XTRIM key MAXLEN = <length after>`, DELREF's dropped
/// references as `SS.UNREF`, an ACKED trim's entries as `SS.TRIMIDS`.
pub fn log_trim(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    removed: u64,
    len_after: u64,
    effect: &crate::stream::TrimEffect,
) {
    use crate::stream::TrimEffect;
    if !db.aof.is_enabled() {
        return;
    }
    match effect {
        TrimEffect::Ids(ids) => log_ids(db, cx, TRIMIDS_RECORD, key, ids),
        TrimEffect::Prefix | TrimEffect::PrefixUnref(_) => {
            if removed > 0 {
                let mut n = itoa::Buffer::new();
                db.log_effect(
                    cx,
                    &[
                        b"XTRIM",
                        key,
                        b"MAXLEN",
                        b"=",
                        n.format(len_after).as_bytes(),
                    ],
                );
            }
            if let TrimEffect::PrefixUnref(ids) = effect {
                log_ids(db, cx, UNREF_RECORD, key, ids);
            }
        }
    }
}

/// Records that recreate every group of a stream (AOF rewrite): per group its
/// meta, every consumer, and its whole PEL.
pub fn rewrite_groups(s: &crate::stream::Stream, key: &[u8]) -> Vec<Vec<Bytes>> {
    let mut out = Vec::new();
    for (name, g) in s.groups() {
        let names: Vec<Bytes> = g.consumers().map(|c| c.name.clone()).collect();
        // Owned entries by ID, then the released ones in release order (a
        // replay releases them in that order, which XREADGROUP CLAIM keeps).
        let pel: Vec<StreamId> = g
            .pel()
            .iter()
            .filter(|(_, p)| !p.is_nacked())
            .map(|(id, _)| *id)
            .chain(g.nacked_in_order())
            .collect();
        out.extend(group_records(
            g,
            key,
            name,
            &GroupChange {
                mkstream: false,
                meta: true,
                consumer: None,
                acked: Vec::new(),
                pel: Vec::new(),
            },
        ));
        for c in &names {
            out.extend(group_records(
                g,
                key,
                name,
                &GroupChange {
                    consumer: Some(c),
                    ..Default::default()
                },
            ));
        }
        out.extend(group_records(
            g,
            key,
            name,
            &GroupChange {
                pel,
                ..Default::default()
            },
        ));
    }
    out
}

fn parse_u64(a: Option<&Bytes>) -> Result<u64, String> {
    a.and_then(|a| std::str::from_utf8(a).ok())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "bad number".to_string())
}

fn parse_opt(a: Option<&Bytes>) -> Result<Option<u64>, String> {
    if a.is_some_and(|a| &a[..] == b"-1") {
        return Ok(None);
    }
    parse_u64(a).map(Some)
}

fn parse_sid(a: Option<&Bytes>) -> Result<StreamId, String> {
    a.and_then(|a| crate::stream::id::parse_id(a).ok())
        .ok_or_else(|| "bad stream ID".to_string())
}

/// Replay an internal group record; `None` when `argv` is not one.
/// `Some(Err)` for a malformed record or a missing stream.
pub fn replay(
    db: &mut ShardDb,
    dbi: usize,
    clock_ms: u64,
    argv: &[Bytes],
) -> Option<Result<(), String>> {
    let name = argv.first()?;
    let per_id = [UNREF_RECORD, TRIMIDS_RECORD]
        .into_iter()
        .position(|r| name.eq_ignore_ascii_case(r));
    if let Some(which) = per_id {
        return Some((|| {
            let key = argv.get(1).ok_or("missing key")?;
            let s = db
                .get_stream_mut(dbi, key, clock_ms)
                .ok()
                .flatten()
                .ok_or_else(|| "no such stream".to_string())?;
            for a in argv.get(2..).unwrap_or_default() {
                let id = parse_sid(Some(a))?;
                if which == 0 {
                    s.drop_refs(id);
                } else {
                    s.remove_as_trim(id);
                }
            }
            Ok(())
        })());
    }
    if name.eq_ignore_ascii_case(IDMP_RECORD) || name.eq_ignore_ascii_case(IDMPSTATS_RECORD) {
        return Some(replay_idmp(db, dbi, clock_ms, argv));
    }
    let which = [GROUP_RECORD, CONSUMER_RECORD, PEL_RECORD, NACK_RECORD]
        .into_iter()
        .position(|r| name.eq_ignore_ascii_case(r))?;
    Some((|| {
        let (key, group) = match (argv.get(1), argv.get(2)) {
            (Some(k), Some(g)) => (k, g),
            _ => return Err("missing key or group".to_string()),
        };
        let s = db
            .get_stream_mut(dbi, key, clock_ms)
            .ok()
            .flatten()
            .ok_or_else(|| "no such stream".to_string())?;
        if which == 0 {
            let last = parse_sid(argv.get(3))?;
            let read = parse_opt(argv.get(4))?;
            // The record is the group's state: stored as is, no clamping.
            let g = s
                .groups_mut()
                .entry(group.clone())
                .or_insert_with(|| ConsumerGroup::new(last, read));
            g.last_id = last;
            g.entries_read = read;
            return Ok(());
        }
        let g = s
            .group_mut(group)
            .ok_or_else(|| "no such group".to_string())?;
        if which == 3 {
            let count = parse_u64(argv.get(3))?;
            for a in argv.get(4..).unwrap_or_default() {
                let id = parse_sid(Some(a))?;
                g.nack(id, true, |_| count);
            }
            return Ok(());
        }
        let consumer = argv.get(3).ok_or("missing consumer")?;
        if which == 1 {
            let seen = parse_u64(argv.get(4))?;
            let active = parse_opt(argv.get(5))?;
            let (c, _) = g.get_or_create_consumer(consumer, seen);
            if let Some(a) = active {
                g.touch_active(c, a);
            }
            g.touch_seen(c, seen);
            return Ok(());
        }
        let time = parse_u64(argv.get(4))?;
        let count = parse_u64(argv.get(5))?;
        let (c, _) = g.get_or_create_consumer(consumer, clock_ms);
        for a in argv.get(6..).unwrap_or_default() {
            let id = parse_sid(Some(a))?;
            g.claim(id, c, time, count);
        }
        Ok(())
    })())
}

/// Replay `SS.IDMP` / `SS.IDMPSTATS` (see their constants).
fn replay_idmp(db: &mut ShardDb, dbi: usize, clock_ms: u64, argv: &[Bytes]) -> Result<(), String> {
    let key = argv.get(1).ok_or("missing key")?;
    let s = db
        .get_stream_mut(dbi, key, clock_ms)
        .ok()
        .flatten()
        .ok_or_else(|| "no such stream".to_string())?;
    let m = s.idmp_mut();
    if argv
        .first()
        .is_some_and(|n| n.eq_ignore_ascii_case(IDMPSTATS_RECORD))
    {
        m.iids_added = parse_u64(argv.get(2))?;
        m.iids_duplicates = parse_u64(argv.get(3))?;
        return Ok(());
    }
    let (pid, iid) = match (argv.get(2), argv.get(3)) {
        (Some(p), Some(i)) => (p, i),
        _ => return Err("missing producer or iid".to_string()),
    };
    let id = parse_sid(argv.get(4))?;
    let added_ms = parse_u64(argv.get(5))?;
    m.record(pid, iid, id, added_ms);
    Ok(())
}

/// Records that recreate a stream's IDMP state (AOF rewrite): its settings
/// as `XCFGSET`, every pair remembered at `now_ms` as `SS.IDMP`, then the
/// counters as `SS.IDMPSTATS`. Nothing for a stream that never used IDMP.
pub fn rewrite_idmp(s: &crate::stream::Stream, key: &[u8], now_ms: u64) -> Vec<Vec<Bytes>> {
    let Some(m) = s.idmp() else {
        return Vec::new();
    };
    let k = Bytes::copy_from_slice(key);
    let cfg = m.config();
    let mut out = vec![vec![
        Bytes::from_static(b"XCFGSET"),
        k.clone(),
        Bytes::from_static(b"IDMP-DURATION"),
        num(cfg.duration_s),
        Bytes::from_static(b"IDMP-MAXSIZE"),
        num(cfg.maxsize),
    ]];
    for r in m.records(now_ms) {
        out.push(vec![
            Bytes::from_static(IDMP_RECORD),
            k.clone(),
            r.pid,
            r.iid,
            r.id.to_bytes(),
            num(r.added_ms),
        ]);
    }
    out.push(vec![
        Bytes::from_static(IDMPSTATS_RECORD),
        k,
        num(m.iids_added),
        num(m.iids_duplicates),
    ]);
    out
}
