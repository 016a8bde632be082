//! Delivery of delayed stream entries (`XSCHEDULE`) on the owning shard's
//! timer, and their AOF records.
//!
//! The shard loop sleeps no longer than the earliest due time (see
//! `ShardThread::poll_timeout`) and, each iteration, moves every due entry
//! into its stream ([`deliver_due`]) before it serves blocked readers, so a
//! consumer blocked in XREADGROUP gets the entry in the same loop turn.
//!
//! # Exactly once, across restarts
//! Scheduling is logged as `SS.XSCHEDULE key token field value ...`; a
//! delivery as one record `SS.XDELIVER token id` (the entry's concrete
//! stream ID; without `id` when the entry was dropped because the key held
//! another type). One record per delivery means a torn AOF tail either
//! keeps the delivery or leaves the entry pending — never both, never
//! neither. An AOF rewrite writes each pending entry as `SS.XSCHEDULE`.

use bytes::Bytes;

use crate::delayed::Pending;
use crate::shard::db::ShardDb;
use crate::shard::msg::ExecCtx;
use crate::stream::id::parse_id;
use crate::stream::{IdSpec, StreamId};

/// `SS.XSCHEDULE key token field value [field value ...]`.
pub const SCHEDULE_RECORD: &[u8] = b"SS.XSCHEDULE";
/// `SS.XDELIVER token [id]`.
pub const DELIVER_RECORD: &[u8] = b"SS.XDELIVER";

/// Log `p`, scheduled as `token`, as an `SS.XSCHEDULE` record.
pub fn log_schedule(db: &mut ShardDb, cx: &ExecCtx, token: StreamId, p: &Pending) {
    if !db.aof.is_enabled() {
        return;
    }
    let t = token.to_bytes();
    let mut rec: Vec<&[u8]> = Vec::with_capacity(3 + 2 * p.fields.len());
    rec.extend([SCHEDULE_RECORD, &p.key[..], &t[..]]);
    for (f, v) in &p.fields {
        rec.push(f);
        rec.push(v);
    }
    db.log_effect(cx, &rec);
}

/// The records an AOF rewrite writes for a shard's pending entries:
/// `(database, record argv)`.
pub fn rewrite_records(db: &ShardDb) -> Vec<(usize, Vec<Bytes>)> {
    db.delayed
        .iter()
        .map(|(token, p)| {
            let mut rec = vec![
                Bytes::from_static(SCHEDULE_RECORD),
                p.key.clone(),
                token.to_bytes(),
            ];
            for (f, v) in &p.fields {
                rec.push(f.clone());
                rec.push(v.clone());
            }
            (p.db, rec)
        })
        .collect()
}

/// Move up to `budget` entries due at `now_ms` into their streams: each gets
/// an auto ID (`*`, so at or after its due time), the key is marked ready
/// (blocked XREAD / XREADGROUP readers are served this turn) and the delivery
/// is logged. An entry whose key now holds another type (or whose stream
/// has exhausted its IDs) is dropped, and logged as dropped. Returns how many entries were delivered or dropped.
pub fn deliver_due(db: &mut ShardDb, now_ms: u64, budget: usize) -> usize {
    let mut n = 0;
    while n < budget {
        let Some((token, p)) = db.delayed.pop_due(now_ms) else {
            break;
        };
        n += 1;
        let cx = ExecCtx::at(p.db, now_ms);
        let limits = db.node_limits();
        let added = match db.stream_for_write(p.db, &p.key, true, now_ms) {
            Ok(Some(s)) => s.append(IdSpec::Auto, &p.fields, now_ms, limits).ok(),
            _ => None,
        };
        let t = token.to_bytes();
        match added {
            Some(id) => {
                let id = id.to_bytes();
                db.log_effect(&cx, &[DELIVER_RECORD, &t, &id]);
                db.blocking.mark_ready(p.db, &p.key);
                db.watch.touch(p.db, &p.key);
                db.stats.delayed_delivered += 1;
            }
            None => {
                log::warn!(
                    "delayed entry {} for key '{}' dropped: the key holds another type \
                     or the stream cannot take more entries",
                    String::from_utf8_lossy(&t),
                    String::from_utf8_lossy(&p.key)
                );
                db.log_effect(&cx, &[DELIVER_RECORD, &t]);
                db.stats.delayed_dropped += 1;
            }
        }
    }
    n
}

/// Replay an `SS.XSCHEDULE` / `SS.XDELIVER` record; `None` for other records.
pub fn replay(
    db: &mut ShardDb,
    dbi: usize,
    clock_ms: u64,
    argv: &[Bytes],
) -> Option<Result<(), String>> {
    let name = argv.first()?;
    if name.eq_ignore_ascii_case(SCHEDULE_RECORD) {
        return Some((|| {
            let (Some(key), Some(token)) = (argv.get(1), argv.get(2)) else {
                return Err("missing key or token".to_string());
            };
            let token = parse_id(token).map_err(|e| e.to_string())?;
            let rest = &argv[3..];
            if rest.is_empty() || !rest.len().is_multiple_of(2) {
                return Err("fields and values must pair up".to_string());
            }
            let fields = rest
                .chunks_exact(2)
                .map(|c| (c[0].clone(), c[1].clone()))
                .collect();
            db.delayed.restore(
                token,
                Pending {
                    db: dbi,
                    key: key.clone(),
                    fields,
                },
            );
            Ok(())
        })());
    }
    if name.eq_ignore_ascii_case(DELIVER_RECORD) {
        return Some((|| {
            let token = parse_id(argv.get(1).ok_or("missing token")?).map_err(|e| e.to_string())?;
            let p = db
                .delayed
                .take(token)
                .ok_or_else(|| "no such delayed entry".to_string())?;
            let Some(id) = argv.get(2) else {
                return Ok(()); // dropped
            };
            let id = parse_id(id).map_err(|e| e.to_string())?;
            let limits = db.node_limits();
            let s = db
                .stream_for_write(p.db, &p.key, true, clock_ms)
                .map_err(|e| e.to_string())?
                .ok_or("no stream")?;
            s.append(IdSpec::Explicit(id), &p.fields, clock_ms, limits)
                .map_err(|e| e.to_string())?;
            Ok(())
        })());
    }
    None
}
