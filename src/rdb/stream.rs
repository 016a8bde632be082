//! The stream value in RDB: nodes as listpacks keyed by their master ID,
//! then the stream's metadata, then its consumer groups with their PELs and
//! consumers.
//!
//! Three generations are read: `RDB_TYPE_STREAM_LISTPACKS` (15, Redis 5/6:
//! no first ID, max-deleted ID, entries-added or group entries-read),
//! `_2` (19, Redis 7.0: those added) and `_3` (21, Redis 7.2 to 8.x:
//! consumers' active time added). We write `_3`, or `_2` / `_1` when asked
//! for a payload an older server can load.
//!
//! Not carried: the IDMP map of Redis 8.6 (`RDB_TYPE_STREAM_LISTPACKS_4`)
//! and pending entries released by XNACK (8.8, `_5`), whose encodings we do
//! not write; entries deleted by XDEL (tombstones) are left out of the
//! written nodes, which changes no reply (lag uses the max-deleted ID, not
//! tombstones). Reading, PEL entries no consumer lists are kept unowned.
//!
//! # Source
//! redis/src/rdb.c `rdbSaveObject` / `rdbLoadObject` (stream branches),
//! `rdbSaveStreamPEL`, `rdbSaveStreamConsumers`; redis/src/t_stream.c
//! (`streamAppendItem`: the node layout, `lp-count`, `SAMEFIELDS`).

use std::collections::HashMap;

use bytes::Bytes;

use super::listpack::{self, Builder};
use super::wire::{encode_id, Reader, Writer};
use super::RdbError;
use crate::stream::group::ConsumerGroup;
use crate::stream::{Entry, IdSpec, NodeLimits, Stream, StreamId};

/// Which stream encoding: 1, 2 or 3 (types 15, 19, 21).
pub type Generation = u8;

/// Entry flag: deleted (a tombstone).
const FLAG_DELETED: i64 = 1;
/// Entry flag: same field names as the node's master entry (values only).
const FLAG_SAMEFIELDS: i64 = 2;

/// Write `s` in stream encoding `generation`.
pub fn encode(w: &mut Writer, s: &Stream, generation: Generation) {
    // Nodes: the stream's own, with their live entries, as Redis writes
    // the listpacks it holds (a loader keeps them).
    let mut nodes: Vec<(StreamId, Vec<u8>)> = Vec::new();
    let mut chunk: Vec<Entry> = Vec::new();
    let mut next_keys = s.node_keys().skip(1).peekable();
    for e in s.iter_range(StreamId::MIN, StreamId::MAX, false) {
        let mut boundary = false;
        while next_keys.next_if(|k| e.id >= *k).is_some() {
            boundary = true;
        }
        if boundary && !chunk.is_empty() {
            nodes.push(encode_node(&chunk));
            chunk.clear();
        }
        chunk.push(e);
    }
    if !chunk.is_empty() {
        nodes.push(encode_node(&chunk));
    }
    w.len(nodes.len() as u64);
    for (master, lp) in &nodes {
        w.string(&encode_id(*master));
        w.string(lp);
    }
    w.len(s.len());
    w.len(s.last_id().ms);
    w.len(s.last_id().seq);
    if generation >= 2 {
        w.len(s.first_id().ms);
        w.len(s.first_id().seq);
        w.len(s.max_deleted_entry_id().ms);
        w.len(s.max_deleted_entry_id().seq);
        w.len(s.entries_added());
    }
    w.len(s.groups().len() as u64);
    for (name, g) in s.groups() {
        w.string(name);
        w.len(g.last_id.ms);
        w.len(g.last_id.seq);
        if generation >= 2 {
            // Redis's -1 ("unknown") is written as a length of u64::MAX.
            w.len(g.entries_read.unwrap_or(u64::MAX));
        }
        // Entries released by XNACK (Redis 8.8) have no owner; these
        // encodings cannot say so (a loader expects every PEL entry in some
        // consumer's PEL), so they are left out.
        let owned = g.pel().values().filter(|p| p.owner().is_some()).count();
        w.len(owned as u64);
        for (id, p) in g.pel().iter().filter(|(_, p)| p.owner().is_some()) {
            w.raw_id(*id);
            w.ms_time(p.delivery_time_ms as i64);
            w.len(p.delivery_count);
        }
        w.len(g.consumer_count() as u64);
        for c in g.consumers() {
            w.string(&c.name);
            w.ms_time(c.seen_time_ms as i64);
            if generation >= 3 {
                w.ms_time(c.active_time_ms.map_or(-1, |t| t as i64));
            }
            w.len(c.pel.len() as u64);
            for id in c.pel.keys() {
                w.raw_id(*id);
            }
        }
    }
}

/// One node: the master entry (the first entry's field names), then every
/// entry as deltas from the master ID.
fn encode_node(entries: &[Entry]) -> (StreamId, Vec<u8>) {
    let master = &entries[0];
    let mut lp = Builder::new();
    lp.int(entries.len() as i64); // live entries
    lp.int(0); // deleted entries
    lp.int(master.fields.len() as i64);
    for (f, _) in &master.fields {
        lp.string(f);
    }
    lp.int(0); // master entry terminator
    for e in entries {
        let same = e.fields.len() == master.fields.len()
            && e.fields.iter().zip(&master.fields).all(|(a, b)| a.0 == b.0);
        lp.int(if same { FLAG_SAMEFIELDS } else { 0 });
        lp.int(e.id.ms.wrapping_sub(master.id.ms) as i64);
        lp.int(e.id.seq.wrapping_sub(master.id.seq) as i64);
        let n = e.fields.len() as i64;
        if same {
            for (_, v) in &e.fields {
                lp.string(v);
            }
            lp.int(n + 3);
        } else {
            lp.int(n);
            for (f, v) in &e.fields {
                lp.string(f);
                lp.string(v);
            }
            lp.int(2 * n + 4);
        }
    }
    (master.id, lp.finish())
}

/// Read a stream in encoding `generation`. Each of the payload's nodes
/// becomes one node, without its deleted entries.
///
/// # Errors
/// [`RdbError::BadFormat`] for anything malformed or inconsistent: bad
/// listpacks or node keys, entries out of order, a last ID below the last
/// entry, a duplicate group or consumer, a consumer PEL entry missing from
/// its group's PEL.
pub fn decode(r: &mut Reader<'_>, generation: Generation) -> Result<Stream, RdbError> {
    let bad = || RdbError::BadFormat;
    // No caps inside one of the payload's nodes (Redis's hard cap aside).
    let limits = NodeLimits {
        max_entries: 0,
        max_bytes: 0,
    };
    let mut s = Stream::new();
    let nodes = r.count()?;
    for _ in 0..nodes {
        let key = r.string()?;
        let master = super::wire::decode_id(&key)?;
        let lp = r.string()?;
        decode_node(&mut s, master, &lp, limits)?;
    }
    let length = r.length()?;
    let last_id = StreamId::new(r.length()?, r.length()?);
    let (max_deleted, entries_added) = if generation >= 2 {
        let _first_id = StreamId::new(r.length()?, r.length()?); // recomputed from the entries
        let max_deleted = StreamId::new(r.length()?, r.length()?);
        (max_deleted, r.length()?)
    } else {
        (StreamId::MIN, s.len())
    };
    if length != s.len() {
        return Err(bad());
    }
    // Also checks last_id >= the last entry and entries_added >= length.
    s.set_last_id(last_id, Some(entries_added), Some(max_deleted))
        .map_err(|_| bad())?;
    let groups = r.count()?;
    for _ in 0..groups {
        let name = Bytes::from(r.string()?);
        let last = StreamId::new(r.length()?, r.length()?);
        let entries_read = if generation >= 2 {
            match r.length()? {
                u64::MAX => None,
                n => Some(n),
            }
        } else {
            s.counters().estimate_distance_from_first_ever_entry(last)
        };
        let mut g = ConsumerGroup::new(last, entries_read);
        let mut pel: HashMap<StreamId, (u64, u64)> = HashMap::new();
        let mut pel_order: Vec<StreamId> = Vec::new();
        for _ in 0..r.count()? {
            let id = r.raw_id()?;
            let time = r.ms_time()?;
            let count = r.length()?;
            if pel.insert(id, (time.max(0) as u64, count)).is_some() {
                return Err(bad());
            }
            pel_order.push(id);
        }
        let mut owned = 0usize;
        for _ in 0..r.count()? {
            let cname = Bytes::from(r.string()?);
            let seen = r.ms_time()?.max(0) as u64;
            let active = if generation >= 3 {
                let t = r.ms_time()?;
                (t >= 0).then_some(t as u64)
            } else {
                // What Redis 7.2 assumes for older payloads.
                Some(seen)
            };
            if g.consumer_id(&cname).is_some() {
                return Err(bad());
            }
            let (cid, _) = g.get_or_create_consumer(&cname, seen);
            if let Some(a) = active {
                g.touch_active(cid, a);
            }
            g.touch_seen(cid, seen);
            for _ in 0..r.count()? {
                let id = r.raw_id()?;
                let (time, count) = *pel.get(&id).ok_or_else(bad)?;
                if g.pending(id).is_some() {
                    return Err(bad());
                }
                g.claim(id, cid, time, count);
                owned += 1;
            }
        }
        if owned != pel.len() {
            // Entries no consumer owns (Redis 8.8 XNACK releases them).
            for id in pel_order {
                if g.pending(id).is_none() {
                    let (_, count) = pel[&id];
                    g.nack(id, true, |_| count);
                }
            }
        }
        if s.groups_mut().insert(name, g).is_some() {
            return Err(bad());
        }
    }
    Ok(s)
}

/// Append the live entries of one node to `s`.
fn decode_node(
    s: &mut Stream,
    master: StreamId,
    lp: &[u8],
    limits: NodeLimits,
) -> Result<(), RdbError> {
    let bad = || RdbError::BadFormat;
    let elems = listpack::decode(lp)?;
    let mut it = elems.into_iter();
    let mut next = || it.next().ok_or_else(bad);
    let _live = next()?.as_int()?;
    let _deleted = next()?.as_int()?;
    let nfields = usize::try_from(next()?.as_int()?).map_err(|_| bad())?;
    let mut master_fields = Vec::with_capacity(nfields.min(1024));
    for _ in 0..nfields {
        master_fields.push(Bytes::from(next()?.into_bytes()));
    }
    if next()?.as_int()? != 0 {
        return Err(bad());
    }
    let mut any = false;
    let mut first_live = true;
    loop {
        let flags = match it.next() {
            None => break,
            Some(e) => e.as_int()?,
        };
        any = true;
        let mut next = || it.next().ok_or_else(bad);
        let ms = master.ms.wrapping_add(next()?.as_int()? as u64);
        let seq = master.seq.wrapping_add(next()?.as_int()? as u64);
        let mut fields: Vec<(Bytes, Bytes)>;
        let lp_count;
        if flags & FLAG_SAMEFIELDS != 0 {
            fields = Vec::with_capacity(nfields);
            for f in &master_fields {
                fields.push((f.clone(), Bytes::from(next()?.into_bytes())));
            }
            lp_count = nfields as i64 + 3;
        } else {
            let n = usize::try_from(next()?.as_int()?).map_err(|_| bad())?;
            fields = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let f = Bytes::from(next()?.into_bytes());
                let v = Bytes::from(next()?.into_bytes());
                fields.push((f, v));
            }
            lp_count = 2 * n as i64 + 4;
        }
        if next()?.as_int()? != lp_count {
            return Err(bad());
        }
        if flags & FLAG_DELETED == 0 {
            let id = IdSpec::Explicit(StreamId::new(ms, seq));
            // The node's first live entry opens a node of ours: the
            // payload's nodes are kept as they are.
            if first_live {
                s.append_to_new_node(id, &fields, 0)
            } else {
                s.append(id, &fields, 0, limits)
            }
            .map_err(|_| bad())?;
            first_live = false;
        }
    }
    if !any {
        return Err(bad());
    }
    Ok(())
}
