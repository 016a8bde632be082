//! The allocator's figures, shared by INFO `used_memory*`, MEMORY STATS /
//! DOCTOR, the `maxmemory` check every shard samples, and scripts' OOM
//! check: jemalloc's `stats.allocated` / `active` / `resident` (refreshed
//! with an `epoch` advance) and the RSS from `/proc/self/statm`, plus the
//! highest allocated figure seen (`used_memory_peak`). Data only: the
//! commands that print these are `cmd::info` and `cmd::memory`.
//!
//! # Source
//! INFO memory (`used_memory`, `used_memory_peak`, `used_memory_rss`) of
//! redis.io "INFO"; Redis counts its own allocations, we read jemalloc's.

use std::sync::atomic::{AtomicU64, Ordering};

/// Highest `total.allocated` seen by MEMORY STATS / DOCTOR, bytes.
static PEAK_ALLOCATED: AtomicU64 = AtomicU64::new(0);

/// Raise the peak (INFO `used_memory_peak`, MEMORY STATS `peak.allocated`)
/// to what the allocator holds now.
pub fn raise_peak() {
    AllocStats::read_allocated();
}

/// Highest allocator figure seen so far, bytes.
pub fn peak_allocated() -> u64 {
    PEAK_ALLOCATED.load(Ordering::Relaxed)
}

/// Allocator figures, bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocStats {
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub rss: u64,
}

impl AllocStats {
    /// jemalloc's allocated bytes (refreshed), else the RSS: INFO's
    /// `used_memory`. Raises the peak.
    pub fn read_allocated() -> u64 {
        let je = (|| {
            if !cfg!(feature = "jemalloc") {
                return None;
            }
            tikv_jemalloc_ctl::epoch::advance().ok()?;
            let n = tikv_jemalloc_ctl::stats::allocated::read().ok()? as u64;
            (n > 0).then_some(n)
        })();
        let allocated = je.unwrap_or_else(rss_bytes);
        PEAK_ALLOCATED.fetch_max(allocated, Ordering::Relaxed);
        allocated
    }

    /// Read jemalloc's counters (refreshed) and the RSS. Without jemalloc
    /// every allocator figure is the RSS.
    pub fn read() -> AllocStats {
        let rss = rss_bytes();
        let je = (|| {
            if !cfg!(feature = "jemalloc") {
                return None;
            }
            tikv_jemalloc_ctl::epoch::advance().ok()?;
            let allocated = tikv_jemalloc_ctl::stats::allocated::read().ok()? as u64;
            let active = tikv_jemalloc_ctl::stats::active::read().ok()? as u64;
            let resident = tikv_jemalloc_ctl::stats::resident::read().ok()? as u64;
            (allocated > 0).then_some((allocated, active, resident))
        })();
        let (allocated, active, resident) = je.unwrap_or((rss, rss, rss));
        PEAK_ALLOCATED.fetch_max(allocated, Ordering::Relaxed);
        AllocStats {
            allocated,
            active,
            resident,
            rss,
        }
    }
}

/// Resident set size from `/proc/self/statm` (0 where unavailable).
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// INFO's `used_memory`, bytes: jemalloc's allocated bytes (refreshed),
/// else the RSS. Raises the peak. What `maxmemory` is compared with.
pub fn used_memory_bytes() -> u64 {
    AllocStats::read_allocated()
}
