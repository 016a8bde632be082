//! MEMORY STATS, MEMORY DOCTOR, MEMORY MALLOC-STATS (MEMORY USAGE and HELP
//! are in `object.rs`, with the rest of the per-key introspection).
//!
//! Figures come from jemalloc (`stats.allocated`, `stats.active`,
//! `stats.resident`) and `/proc/self/statm`, plus our own accounting: keys
//! and keys with a TTL per database (from every shard), client buffers
//! (`tot-mem` of CLIENT LIST). What shardstream does not have is reported as
//! 0: replication backlog, replica clients, cluster links, Lua and function
//! caches. `startup.allocated` is what the allocator held once the server
//! had started (before loading its data, like Redis's figure); in a
//! process that embeds several servers (tests) it includes the others.
//!
//! # Source
//! `memoryCommand`, `getMemoryOverheadData`, `getMemoryDoctorReport`,
//! redis/src/object.c (7.0 field names and order).

use bytes::Bytes;

use crate::alloc_stats::{peak_allocated, AllocStats};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, Flags};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::ShardId;

/// Rows of `MEMORY|<sub>` served here.
pub const SUBS: [CommandSpec; 3] = [
    CommandSpec::conn(
        "MEMORY|STATS",
        2,
        Flags::NONE,
        "server",
        &["slow"],
        "Returns details about memory usage.",
        "4.0.0",
        memory_stats,
    ),
    CommandSpec::conn(
        "MEMORY|DOCTOR",
        2,
        Flags::NONE,
        "server",
        &["slow"],
        "Outputs a memory problems report.",
        "4.0.0",
        memory_doctor,
    ),
    CommandSpec::conn(
        "MEMORY|MALLOC-STATS",
        2,
        Flags::NONE,
        "server",
        &["slow"],
        "Returns the allocator statistics.",
        "4.0.0",
        memory_malloc_stats,
    ),
];

/// Bytes a key costs in a database's main table beyond its name and value
/// (entry, bucket pointer, object header), for `overhead.hashtable.main`.
const KEY_OVERHEAD_BYTES: u64 = 56;
/// Bytes a TTL costs (expiry index entry), for `overhead.hashtable.expires`.
const EXPIRE_OVERHEAD_BYTES: u64 = 40;

pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// How the allocated bytes split, as Redis reports them (MEMORY STATS,
/// INFO memory): what the server held at start, client buffers and the
/// per-key table costs are overhead; the rest is the dataset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overhead {
    /// `startup.allocated` / `used_memory_startup` (at most `allocated`).
    pub startup: u64,
    /// `clients.normal` / `mem_clients_normal`: client buffers.
    pub clients: u64,
    /// Per database with keys: `(db, main table bytes, expires table bytes)`.
    pub dbs: Vec<(usize, u64, u64)>,
    /// `overhead.total` / `used_memory_overhead`.
    pub total: u64,
    /// Keys in every database.
    pub keys: u64,
    /// `dataset.bytes` / `used_memory_dataset`: allocated minus overhead.
    pub dataset: u64,
    /// Allocated minus startup (what `dataset.percentage` is a share of).
    pub net: u64,
}

impl Overhead {
    /// Split `allocated` given the startup figure, client buffer bytes and
    /// `(keys, expires)` per database.
    ///
    /// # Source
    /// `getMemoryOverheadData`, redis/src/object.c (7.0).
    pub fn of(allocated: u64, startup: u64, clients: u64, per_db: &[(u64, u64)]) -> Overhead {
        let startup = startup.min(allocated);
        let mut o = Overhead {
            startup,
            clients,
            total: startup + clients,
            ..Overhead::default()
        };
        for (n, (k, e)) in per_db.iter().enumerate() {
            if *k == 0 {
                continue;
            }
            let (main, exp) = (k * KEY_OVERHEAD_BYTES, e * EXPIRE_OVERHEAD_BYTES);
            o.total += main + exp;
            o.keys += k;
            o.dbs.push((n, main, exp));
        }
        o.net = allocated.saturating_sub(startup);
        o.dataset = allocated.saturating_sub(o.total);
        o
    }

    /// `dataset.percentage` / `used_memory_dataset_perc`: the dataset's
    /// share of what was allocated since start, percent.
    pub fn dataset_percent(&self) -> f64 {
        ratio(self.dataset * 100, self.net)
    }
}

/// Bytes held by every client's buffers (`tot-mem` of CLIENT LIST summed).
pub fn client_buffer_bytes(shared: &crate::server::Shared) -> u64 {
    shared
        .clients
        .lock()
        .map(|m| m.values().map(|c| c.tot_mem_bytes() as u64).sum())
        .unwrap_or(0)
}

/// Every shard's `[keys, expires]` per database, as one flat integer array.
fn key_counts(cx: &ConnCtx<'_>) -> Vec<(ShardId, crate::cmd::ShardReq)> {
    (0..cx.shared.shards.max(1))
        .map(|s| {
            (
                ShardId(s),
                on_shard(|db, _| {
                    let mut out = Vec::with_capacity(2 * db.databases());
                    for n in 0..db.databases() {
                        let ks = db.keyspace(n);
                        out.push(Reply::Int(ks.len() as i64));
                        out.push(Reply::Int(ks.expires_len() as i64));
                    }
                    Reply::Array(out)
                }),
            )
        })
        .collect()
}

/// Sum the per-shard arrays of [`key_counts`] into `(keys, expires)` per database.
fn sum_counts(replies: Vec<Reply>, databases: usize) -> Vec<(u64, u64)> {
    let mut per_db = vec![(0u64, 0u64); databases];
    for r in replies {
        let Reply::Array(v) = r else { continue };
        for (i, pair) in v.chunks(2).enumerate() {
            if let (Some(slot), [Reply::Int(k), Reply::Int(e)]) = (per_db.get_mut(i), pair) {
                slot.0 += *k as u64;
                slot.1 += *e as u64;
            }
        }
    }
    per_db
}

/// `MEMORY STATS`
///
/// # Reply
/// A map (RESP2: flat array) with Redis 7.0's fields in its order:
/// `peak.allocated`, `total.allocated`, `startup.allocated`,
/// `replication.backlog`, `clients.slaves`, `clients.normal`,
/// `cluster.links`, `aof.buffer`, `lua.caches`, `functions.caches`, one
/// `db.<n>` map (`overhead.hashtable.main`, `overhead.hashtable.expires`)
/// per database holding keys, `overhead.total`, `keys.count`,
/// `keys.bytes-per-key`, `dataset.bytes`, `dataset.percentage`,
/// `peak.percentage`, `allocator.allocated`, `allocator.active`,
/// `allocator.resident`, `allocator-fragmentation.ratio`,
/// `allocator-fragmentation.bytes`, `allocator-rss.ratio`,
/// `allocator-rss.bytes`, `rss-overhead.ratio`, `rss-overhead.bytes`,
/// `fragmentation`, `fragmentation.bytes`. Sizes are integers (bytes),
/// ratios and percentages doubles.
/// # Source
/// `memoryCommand` "stats", `getMemoryOverheadData`.
fn memory_stats(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let a = AllocStats::read();
    let clients = client_buffer_bytes(cx.shared);
    let databases = cx.shared.databases;
    let startup = cx.shared.startup_allocated_bytes;
    let parts = key_counts(cx);
    let merge = move |replies: Vec<Reply>| {
        let per_db = sum_counts(replies, databases);
        let peak = peak_allocated().max(a.allocated);
        let o = Overhead::of(a.allocated, startup, clients, &per_db);
        let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
        let key = |s: &str| Reply::bulk_copy(s);
        let mut m: Vec<(Reply, Reply)> = Vec::new();
        for (k, v) in [
            ("peak.allocated", peak),
            ("total.allocated", a.allocated),
            ("startup.allocated", o.startup),
            ("replication.backlog", 0),
            ("clients.slaves", 0),
            ("clients.normal", clients),
            ("cluster.links", 0),
            ("aof.buffer", 0),
            ("lua.caches", 0),
            ("functions.caches", 0),
        ] {
            m.push((key(k), int(v)));
        }
        for &(n, main, exp) in &o.dbs {
            m.push((
                key(&format!("db.{n}")),
                Reply::Map(vec![
                    (key("overhead.hashtable.main"), int(main)),
                    (key("overhead.hashtable.expires"), int(exp)),
                ]),
            ));
        }
        m.push((key("overhead.total"), int(o.total)));
        m.push((key("keys.count"), int(o.keys)));
        m.push((
            key("keys.bytes-per-key"),
            int(o.net.checked_div(o.keys).unwrap_or(0)),
        ));
        m.push((key("dataset.bytes"), int(o.dataset)));
        m.push((
            key("dataset.percentage"),
            Reply::Double(o.dataset_percent()),
        ));
        m.push((
            key("peak.percentage"),
            Reply::Double(ratio(a.allocated * 100, peak)),
        ));
        m.push((key("allocator.allocated"), int(a.allocated)));
        m.push((key("allocator.active"), int(a.active)));
        m.push((key("allocator.resident"), int(a.resident)));
        let signed = |x: u64, y: u64| Reply::Int(x as i64 - y as i64);
        m.push((
            key("allocator-fragmentation.ratio"),
            Reply::Double(ratio(a.active, a.allocated)),
        ));
        m.push((
            key("allocator-fragmentation.bytes"),
            signed(a.active, a.allocated),
        ));
        m.push((
            key("allocator-rss.ratio"),
            Reply::Double(ratio(a.resident, a.active)),
        ));
        m.push((key("allocator-rss.bytes"), signed(a.resident, a.active)));
        m.push((
            key("rss-overhead.ratio"),
            Reply::Double(ratio(a.rss, a.resident)),
        ));
        m.push((key("rss-overhead.bytes"), signed(a.rss, a.resident)));
        m.push((
            key("fragmentation"),
            Reply::Double(ratio(a.rss, a.allocated)),
        ));
        m.push((key("fragmentation.bytes"), signed(a.rss, a.allocated)));
        Reply::Map(m)
    };
    Ok(Action::FanOut {
        parts,
        merge: Box::new(merge),
    })
}

/// `MEMORY DOCTOR`
///
/// # Reply
/// Verbatim string (RESP2: bulk): Redis's "Sam" report. Below 5 MB
/// allocated, the "empty instance" text; otherwise one paragraph per issue
/// found among Redis's checks that apply here (high allocator or RSS
/// fragmentation, peak far above current use, big client buffers), or the
/// "no issue" text.
/// # Source
/// `getMemoryDoctorReport`, redis/src/object.c.
fn memory_doctor(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let a = AllocStats::read();
    let clients = client_buffer_bytes(cx.shared);
    Ok(Reply::Verbatim(doctor_report(a, peak_allocated(), clients).into()).into())
}

/// The report text for these figures (see [`memory_doctor`]).
pub fn doctor_report(a: AllocStats, peak: u64, clients_bytes: u64) -> String {
    if a.allocated < 1024 * 1024 * 5 {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.".into();
    }
    let mut issues = Vec::new();
    if peak as f64 / a.allocated as f64 > 1.5 {
        issues.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    if ratio(a.active, a.allocated) > 1.1 && a.active - a.allocated > 10 << 20 {
        issues.push(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n");
    }
    if ratio(a.rss, a.resident) > 1.1 && a.rss.saturating_sub(a.resident) > 10 << 20 {
        issues.push(" * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the Redis process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts or Modules.\n\n");
    }
    if clients_bytes > 200 << 20 {
        issues.push(" * Big client buffers: The clients output buffers are in general a lot bigger than the average client output buffer. This may result from a few clients with huge output buffers, clients blocked on a slow network, or big pipelines.\n\n");
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.".into();
    }
    let mut s =
        String::from("Sam, I detected a few issues in this Redis instance memory implants:\n\n");
    for i in issues {
        s.push_str(i);
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}

/// `MEMORY MALLOC-STATS`
///
/// # Reply
/// Verbatim string (RESP2: bulk): jemalloc's `malloc_stats_print` report;
/// `Stats not supported for the current allocator` without jemalloc.
/// # Source
/// `memoryCommand` "malloc-stats".
fn memory_malloc_stats(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Verbatim(malloc_stats().into()).into())
}

#[cfg(feature = "jemalloc")]
fn malloc_stats() -> Vec<u8> {
    extern "C" fn write_cb(opaque: *mut std::ffi::c_void, msg: *const std::ffi::c_char) {
        if opaque.is_null() || msg.is_null() {
            return;
        }
        // SAFETY: `opaque` is the `Vec<u8>` passed below, alive for the
        // whole `malloc_stats_print` call; `msg` is a NUL-terminated string
        // jemalloc owns for the duration of this callback.
        unsafe {
            let out = &mut *(opaque as *mut Vec<u8>);
            out.extend_from_slice(std::ffi::CStr::from_ptr(msg).to_bytes());
        }
    }
    let mut out: Vec<u8> = Vec::new();
    // SAFETY: the callback only appends to `out`, which outlives the call;
    // a null options string asks for the default report.
    unsafe {
        tikv_jemalloc_sys::malloc_stats_print(
            Some(write_cb),
            &mut out as *mut Vec<u8> as *mut std::ffi::c_void,
            std::ptr::null(),
        );
    }
    out
}

#[cfg(not(feature = "jemalloc"))]
fn malloc_stats() -> Vec<u8> {
    b"Stats not supported for the current allocator".to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doctor_texts() {
        let small = AllocStats {
            allocated: 1 << 20,
            ..Default::default()
        };
        assert!(doctor_report(small, 0, 0).starts_with("Hi Sam, this instance is empty"));
        let fine = AllocStats {
            allocated: 100 << 20,
            active: 101 << 20,
            resident: 102 << 20,
            rss: 103 << 20,
        };
        assert!(
            doctor_report(fine, 100 << 20, 0).starts_with("Hi Sam, I can't find any memory issue")
        );
        let report = doctor_report(fine, 400 << 20, 0);
        assert!(report.contains("Peak memory"), "{report}");
    }
}
