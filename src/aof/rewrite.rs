//! AOF rewrite: copy a shard's data on its thread ([`snapshot`]), then
//! serialize the copy into a base file on a helper thread ([`write_base`]).
//!
//! The base file holds the same kind of effect records as incr files, so one
//! loader reads both: per database `SELECT`, then per key `SET key value
//! [PXAT t]` for strings, `ZADD key score member ...` (64 pairs per
//! record, then `PEXPIREAT`) for sorted sets, `RPUSH` / `SADD` records of
//! up to 64 items for lists and sets, or for streams one `XADD key id
//! field value ...` per
//! entry, `XSETID key last ENTRIESADDED n MAXDELETEDID id` for the metadata
//! (an empty stream is created by `SS.MKSTREAM key` first), its consumer
//! groups as `SS.GROUP` / `SS.CONSUMER` / `SS.PEL` records (see
//! [`super::effects`]), and `PEXPIREAT` for a stream's TTL.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;

use bytes::Bytes;

use crate::shard::db::{ShardDb, Value};

use super::log::{encode, CLOCK_RECORD, TX_FLOOR_RECORD};

/// Internal record: create an empty stream under `key` if the key is missing.
pub const MKSTREAM_RECORD: &[u8] = b"SS.MKSTREAM";

/// One key of a snapshot: name, value copy, absolute expiry (ms).
pub type KeyCopy = (Bytes, Value, Option<u64>);

/// A copy of a shard's live data at one moment. `Send`: it travels to the
/// rewrite thread.
pub struct Snapshot {
    /// Shard clock when taken, ms since the Unix epoch.
    pub taken_ms: u64,
    /// `(database, [(key, value, expire_at_ms)])` for non-empty databases.
    pub dbs: Vec<(usize, Vec<KeyCopy>)>,
    /// Pending delayed stream entries as `(database, SS.XSCHEDULE record)`.
    pub delayed: Vec<(usize, Vec<Bytes>)>,
    /// Function library codes (shard 0 keeps them), written as
    /// `FUNCTION LOAD REPLACE code` records.
    pub functions: Vec<Bytes>,
    /// The last cross-shard transaction the shard coordinated (all of them
    /// committed): written as `SS.TXFLOOR`, so blocks other shards still
    /// hold for them stay judged committed once this shard's old files,
    /// with their `SS.TXCOMMIT` records, are gone.
    pub tx_floor: u64,
}

/// Copy every live key of `db` (expired keys are left out).
pub fn snapshot(db: &ShardDb, now_ms: u64) -> Snapshot {
    let mut dbs = Vec::new();
    for n in 0..db.databases() {
        let mut keys = Vec::with_capacity(db.keyspace(n).len());
        db.scan_from(n, (0, 0), now_ms, |_, k, e| {
            keys.push((k.clone(), e.value.clone(), e.expire_at_ms));
            true
        });
        if !keys.is_empty() {
            dbs.push((n, keys));
        }
    }
    Snapshot {
        taken_ms: now_ms,
        dbs,
        delayed: crate::shard::delayed::rewrite_records(db),
        functions: crate::cmd::function::rewrite_records(db),
        tx_floor: db.tx_seq,
    }
}

/// Serialize `snap` as effect records into `out`.
pub fn serialize(snap: &Snapshot, out: &mut impl Write) -> std::io::Result<()> {
    let mut rec = Vec::with_capacity(4096);
    let mut n = itoa::Buffer::new();
    encode(
        &mut rec,
        &[CLOCK_RECORD, n.format(snap.taken_ms).as_bytes()],
    );
    for code in &snap.functions {
        encode(&mut rec, &[b"FUNCTION", b"LOAD", b"REPLACE", code]);
    }
    if snap.tx_floor > 0 {
        encode(
            &mut rec,
            &[TX_FLOOR_RECORD, n.format(snap.tx_floor).as_bytes()],
        );
    }
    for (dbi, keys) in &snap.dbs {
        encode(&mut rec, &[b"SELECT", n.format(*dbi).as_bytes()]);
        for (key, value, at) in keys {
            encode_key(&mut rec, out, key, value, *at, snap.taken_ms)?;
        }
    }
    for (dbi, record) in &snap.delayed {
        encode(&mut rec, &[b"SELECT", n.format(*dbi).as_bytes()]);
        let args: Vec<&[u8]> = record.iter().map(|b| &b[..]).collect();
        encode(&mut rec, &args);
        if rec.len() >= 1 << 16 {
            out.write_all(&rec)?;
            rec.clear();
        }
    }
    out.write_all(&rec)
}

/// Append the records that recreate `key` (its value and TTL) to `rec`,
/// writing `rec` out to `out` whenever it passes 64 KiB (large streams);
/// `now_ms` is the time the copy was taken (IDMP records' ages).
pub fn encode_key(
    rec: &mut Vec<u8>,
    out: &mut impl Write,
    key: &[u8],
    value: &Value,
    at: Option<u64>,
    now_ms: u64,
) -> std::io::Result<()> {
    let mut n = itoa::Buffer::new();
    match value {
        Value::Str(v) => match at {
            Some(at) => encode(rec, &[b"SET", key, v, b"PXAT", n.format(at).as_bytes()]),
            None => encode(rec, &[b"SET", key, v]),
        },
        Value::Zset(z) => {
            // `ZADD key score member ...`, at most 64 pairs per record.
            let entries: Vec<(String, &[u8])> = z
                .iter()
                .map(|(s, m)| (crate::zset::score::format_score(s), m))
                .collect();
            for batch in entries.chunks(64) {
                let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 2 * batch.len());
                args.extend([&b"ZADD"[..], key]);
                for (s, m) in batch {
                    args.push(s.as_bytes());
                    args.push(m);
                }
                encode(rec, &args);
                if rec.len() >= 1 << 16 {
                    out.write_all(rec)?;
                    rec.clear();
                }
            }
            if let Some(at) = at {
                encode(rec, &[b"PEXPIREAT", key, n.format(at).as_bytes()]);
            }
        }
        Value::Stream(s) => {
            if s.is_empty() {
                encode(rec, &[MKSTREAM_RECORD, key]);
            }
            for e in s.iter_range(
                crate::stream::StreamId::MIN,
                crate::stream::StreamId::MAX,
                false,
            ) {
                let id = e.id.to_bytes();
                let mut args: Vec<&[u8]> = Vec::with_capacity(3 + 2 * e.fields.len());
                args.extend([&b"XADD"[..], key, &id[..]]);
                for (f, v) in &e.fields {
                    args.push(f);
                    args.push(v);
                }
                encode(rec, &args);
                if rec.len() >= 1 << 16 {
                    out.write_all(rec)?;
                    rec.clear();
                }
            }
            let (last, maxdel) = (s.last_id().to_bytes(), s.max_deleted_entry_id().to_bytes());
            let mut m = itoa::Buffer::new();
            encode(
                rec,
                &[
                    b"XSETID",
                    key,
                    &last,
                    b"ENTRIESADDED",
                    m.format(s.entries_added()).as_bytes(),
                    b"MAXDELETEDID",
                    &maxdel,
                ],
            );
            let idmp = super::effects::rewrite_idmp(s, key, now_ms);
            for g in super::effects::rewrite_groups(s, key)
                .into_iter()
                .chain(idmp)
            {
                let args: Vec<&[u8]> = g.iter().map(|b| &b[..]).collect();
                encode(rec, &args);
                if rec.len() >= 1 << 16 {
                    out.write_all(rec)?;
                    rec.clear();
                }
            }
            if let Some(at) = at {
                encode(rec, &[b"PEXPIREAT", key, n.format(at).as_bytes()]);
            }
        }
        Value::List(l) => {
            let items: Vec<&[u8]> = l.iter().collect();
            encode_batched(rec, out, b"RPUSH", key, &items)?;
            if let Some(at) = at {
                encode(rec, &[b"PEXPIREAT", key, n.format(at).as_bytes()]);
            }
        }
        Value::Set(s) => {
            let members: Vec<Bytes> = s.iter().collect();
            let members: Vec<&[u8]> = members.iter().map(|v| &v[..]).collect();
            encode_batched(rec, out, b"SADD", key, &members)?;
            if let Some(at) = at {
                encode(rec, &[b"PEXPIREAT", key, n.format(at).as_bytes()]);
            }
        }
    }
    if rec.len() >= 1 << 16 {
        out.write_all(rec)?;
        rec.clear();
    }
    Ok(())
}

/// Append `cmd key item...` records for `items`, at most 64 items per record
/// (as Redis's rewrite batches `AOF_REWRITE_ITEMS_PER_CMD`), flushing `rec`
/// to `out` past 64 KiB.
fn encode_batched(
    rec: &mut Vec<u8>,
    out: &mut impl Write,
    cmd: &[u8],
    key: &[u8],
    items: &[&[u8]],
) -> std::io::Result<()> {
    for chunk in items.chunks(64) {
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + chunk.len());
        args.extend([cmd, key]);
        args.extend_from_slice(chunk);
        encode(rec, &args);
        if rec.len() >= 1 << 16 {
            out.write_all(rec)?;
            rec.clear();
        }
    }
    Ok(())
}

/// Write `snap` to `dir/name` durably: a temporary file, fsync, rename,
/// directory fsync. Returns the file's size in bytes.
pub fn write_base(snap: &Snapshot, dir: &Path, name: &str) -> std::io::Result<u64> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let result = (|| {
        let f = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        serialize(snap, &mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        let size = f.metadata()?.len();
        fs::rename(&tmp, &path)?;
        super::manifest::sync_dir(dir)?;
        Ok(size)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
