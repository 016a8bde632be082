//! Persistence: one append-only file set per shard, holding *effects*.
//!
//! # What is written
//! Every `apply_*` function that changes data records what it did through
//! [`ShardDb::log_effect`](crate::shard::db::ShardDb::log_effect), as a RESP
//! command that redoes exactly that change: `XADD key <concrete id> ...`,
//! trims as `XTRIM key MAXLEN = <length after>`, TTLs as absolute
//! `PEXPIREAT` (or `SET ... PXAT`), expiries as `DEL`, string results as
//! `SET`, stream metadata as `XSETID ... ENTRIESADDED ... MAXDELETEDID ...`,
//! consumer-group deliveries as `XCLAIM ... TIME ... RETRYCOUNT ... FORCE
//! JUSTID LASTID ...`. Two internal records frame them: `SELECT db` when the
//! database changes and `SS.CLOCK ms` when the shard's clock snapshot changes,
//! so replay runs every record at the time the live command saw. Replay is
//! therefore just the normal command table (`lookup` → `parse` → `apply`) on a
//! fresh [`ShardDb`](crate::shard::db::ShardDb) with logging off.
//!
//! # Files and the manifest
//! In `dir`, shard `i` owns `shard-<i>.manifest` and the files it lists: at
//! most one *base* file (a snapshot written by a rewrite) followed by *incr*
//! files (effects appended since), `shard-<i>.base.<seq>.aof` and
//! `shard-<i>.incr.<seq>.aof`. The manifest also records the shard count; a
//! server started with a different `shards` refuses to load (keys would belong
//! to other shards) and says which count the data needs.
//!
//! # Group commit (`appendfsync always`)
//! The shard loop ([`crate::shard`]) runs a round of batches, then hands the
//! round's records to [`writer::ShardAof::commit`], which writes them with
//! one `write` and, under `always`, one `fdatasync`; only then are the round's
//! replies released to the connections' threads. Under `everysec` a helper thread
//! fsyncs at most once a second; under `no` the kernel decides.
//!
//! # When a write or fsync fails
//! An error reply always means the write did not happen
//! ([`writer::CommitError::act`], as Redis 7 does):
//! * `always`: the process exits (status 1) before the round's replies are
//!   released. Acknowledged writes are on disk; the round's writes were never
//!   answered (their clients see the connection close) and may or may not be
//!   in the files.
//! * `everysec` / `no`: the round's commands were applied and keep their
//!   replies; their bytes are retried every tick. Until a retry succeeds the
//!   shard threads refuse write commands (and PING) with
//!   `-MISCONF Errors writing to the AOF file: <strerror>` before they run.
//!
//! # Rewrite
//! BGREWRITEAOF (or growth past `auto-aof-rewrite-percentage` over the last
//! rewrite's size, once above `auto-aof-rewrite-min-size`) makes the shard
//! open a new incr file — new effects go there from that moment — and copy
//! its data (values are `Clone + Send`; stream nodes are flat buffers, so
//! this is a memcpy-speed pass). A helper thread serializes the copy into a
//! new base file, fsyncs it and renames it into place; the shard then writes
//! a manifest naming `[new base, incr files since the switch]` (write to a
//! temporary name, fsync, rename, fsync the directory) and deletes the old
//! files. A crash at any point leaves a manifest that names a complete state.
//!
//! # Loading
//! Each shard thread loads its own files before serving, so shards load in
//! parallel and [`crate::server::start`] returns only once all are loaded. A
//! torn last record of the last file (a crash mid-write) is cut off with a
//! warning (Redis's `aof-load-truncated yes`; with `no` start-up stops
//! instead); anything malformed elsewhere, and any record that parses but
//! fails when replayed, refuses to start with a message naming the file, the
//! byte offset and the repair. Nothing else in the directory is ever
//! truncated or overwritten: a shard whose manifest is missing while its data
//! files exist refuses to start ([`manifest::check_dir`]), new files always
//! get a fresh sequence number, and the leftovers of interrupted rewrites
//! that the manifest does not list are removed when the shard opens its files
//! ([`manifest::remove_leftovers`]).

pub mod effects;
pub mod load;
pub mod log;
pub mod manifest;
pub mod rewrite;
pub mod writer;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

pub use log::AofLog;

/// `appendfsync`: when written records are forced to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// fdatasync after every round of batches, before its replies (group commit).
    Always,
    /// fdatasync at most once a second, on a helper thread.
    EverySec,
    /// Never fsync; the kernel writes back when it likes.
    No,
}

impl FsyncPolicy {
    /// Parse a config value (`always`, `everysec`, `no`; any case).
    pub fn parse(s: &str) -> Option<FsyncPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::EverySec),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }

    /// The config spelling.
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySec => "everysec",
            FsyncPolicy::No => "no",
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            FsyncPolicy::Always => 0,
            FsyncPolicy::EverySec => 1,
            FsyncPolicy::No => 2,
        }
    }

    fn from_u8(v: u8) -> FsyncPolicy {
        match v {
            0 => FsyncPolicy::Always,
            1 => FsyncPolicy::EverySec,
            _ => FsyncPolicy::No,
        }
    }
}

/// AOF settings and status shared by a server's shards and shard threads
/// (configuration and counters, never data). Lives in
/// [`Tunables`](crate::config::Tunables).
#[derive(Debug)]
pub struct AofShared {
    /// `appendonly`.
    pub enabled: AtomicBool,
    fsync: AtomicU8,
    /// `auto-aof-rewrite-percentage` (0 = no automatic rewrite).
    pub auto_rewrite_percentage: AtomicU64,
    /// `auto-aof-rewrite-min-size`, bytes.
    pub auto_rewrite_min_size_bytes: AtomicU64,
    /// Shards whose last write or fsync failed (writes are refused while > 0).
    pub failing_shards: AtomicU64,
    /// Shards with a rewrite running.
    pub rewrites_in_progress: AtomicU64,
    /// Whether the last finished rewrite (any shard) succeeded.
    pub last_rewrite_ok: AtomicBool,
    /// Rewrites finished since start.
    pub rewrites: AtomicU64,
    /// Duration of the last finished rewrite, ms (-1 when none).
    pub last_rewrite_time_ms: std::sync::atomic::AtomicI64,
    /// Sum over shards of the current AOF size (base + incr files), bytes.
    pub current_size_bytes: AtomicU64,
    /// Sum over shards of the size right after the last rewrite (or load), bytes.
    pub base_size_bytes: AtomicU64,
    /// Write or fsync errors since start.
    pub delayed_fsync: AtomicU64,
    /// The reason of the latest write failure (`strerror` text).
    pub last_error: Mutex<String>,
    /// `aof-load-truncated`: cut a torn last record at start-up (yes) or refuse to start (no).
    load_truncated: AtomicBool,
}

impl AofShared {
    /// Settings from `cfg`; status all clear.
    pub fn new(cfg: &crate::config::Config) -> AofShared {
        AofShared {
            enabled: AtomicBool::new(cfg.appendonly),
            fsync: AtomicU8::new(cfg.appendfsync.to_u8()),
            auto_rewrite_percentage: AtomicU64::new(cfg.auto_aof_rewrite_percentage),
            auto_rewrite_min_size_bytes: AtomicU64::new(cfg.auto_aof_rewrite_min_size_bytes),
            failing_shards: AtomicU64::new(0),
            rewrites_in_progress: AtomicU64::new(0),
            last_rewrite_ok: AtomicBool::new(true),
            rewrites: AtomicU64::new(0),
            last_rewrite_time_ms: std::sync::atomic::AtomicI64::new(-1),
            current_size_bytes: AtomicU64::new(0),
            base_size_bytes: AtomicU64::new(0),
            delayed_fsync: AtomicU64::new(0),
            last_error: Mutex::new(String::new()),
            load_truncated: AtomicBool::new(cfg.aof_load_truncated),
        }
    }

    /// Publish `cfg`'s AOF settings (CONFIG SET).
    pub fn update(&self, cfg: &crate::config::Config) {
        self.enabled.store(cfg.appendonly, Ordering::Relaxed);
        self.fsync.store(cfg.appendfsync.to_u8(), Ordering::Relaxed);
        self.auto_rewrite_percentage
            .store(cfg.auto_aof_rewrite_percentage, Ordering::Relaxed);
        self.auto_rewrite_min_size_bytes
            .store(cfg.auto_aof_rewrite_min_size_bytes, Ordering::Relaxed);
        self.load_truncated
            .store(cfg.aof_load_truncated, Ordering::Relaxed);
    }

    /// `aof-load-truncated`.
    pub fn load_truncated(&self) -> bool {
        self.load_truncated.load(Ordering::Relaxed)
    }

    /// Current `appendfsync`.
    pub fn fsync_policy(&self) -> FsyncPolicy {
        FsyncPolicy::from_u8(self.fsync.load(Ordering::Relaxed))
    }

    /// Whether `appendonly` is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// The `-MISCONF` error write commands get while a shard cannot write its
    /// AOF, or `None` when every shard is healthy.
    ///
    /// # Source
    /// `writeCommandsGetDiskErrorMessage`, redis/src/server.c (AOF case).
    pub fn write_refusal(&self) -> Option<crate::error::CmdError> {
        if self.failing_shards.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let why = self
            .last_error
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        Some(misconf(&why))
    }
}

/// `-MISCONF Errors writing to the AOF file: <reason>`.
pub fn misconf(reason: &str) -> crate::error::CmdError {
    crate::error::CmdError::msg(format!("MISCONF Errors writing to the AOF file: {reason}"))
}

/// `strerror`-style text of an IO error (without Rust's " (os error N)" suffix).
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}
