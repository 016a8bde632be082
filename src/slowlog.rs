//! The slow log every thread records into: commands that ran for at least
//! `slowlog-log-slower-than` µs (negative: never; 0: every command), with
//! their arguments (trimmed, credentials redacted), client address and
//! name, newest first, at most `slowlog-max-len` of them. Data only, so
//! the shard threads that record into it do not depend on the commands:
//! SLOWLOG itself, when and where commands are timed, and which arguments
//! are redacted are in `cmd::slowlog`.
//!
//! Recording takes a lock, but only for slow commands; the per-command cost
//! is one relaxed atomic load of the threshold.
//!
//! # Source
//! `slowlogCreateEntry`, `slowlogPushEntryIfNeeded`, redis/src/slowlog.c.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

use crate::io::conn::ClientShared;

/// Which arguments of a command (positions in `argv`) the log shows as
/// `(redacted)`.
pub type Redact = fn(&[Bytes]) -> Vec<usize>;

/// Redis keeps at most this many arguments of a slow command.
const MAX_ARGC: usize = 32;
/// ... and at most this many bytes of each.
const MAX_STRING: usize = 128;

/// One slow command.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Unique, increasing from 0.
    pub id: u64,
    /// Unix time, seconds.
    pub time_s: i64,
    /// Execution time, µs.
    pub duration_us: u64,
    /// Arguments, trimmed and redacted.
    pub argv: Vec<Bytes>,
    /// Client address (`ip:port`).
    pub addr: String,
    /// Client name (empty when unset).
    pub name: String,
}

/// The slow log shared by every shard thread.
pub struct SlowLog {
    /// `slowlog-log-slower-than`, µs.
    pub slower_than_us: AtomicI64,
    /// `slowlog-max-len`.
    pub max_len: AtomicUsize,
    next_id: AtomicU64,
    entries: Mutex<VecDeque<Entry>>,
    /// Positions of `argv` shown as `(redacted)` (see [`Redact`]).
    redact: Redact,
}

impl Default for SlowLog {
    /// Redis's defaults: 10000 µs, 128 entries; redacts nothing (a server
    /// builds its log with the command table's redaction, see
    /// [`SlowLog::new`]).
    fn default() -> Self {
        SlowLog::new(10_000, 128, |_| Vec::new())
    }
}

impl SlowLog {
    /// An empty log with the given settings; `redact` names the arguments
    /// of a command that are recorded as `(redacted)` (the server passes
    /// `cmd::slowlog::redacted_args`).
    pub fn new(slower_than_us: i64, max_len: usize, redact: Redact) -> SlowLog {
        SlowLog {
            slower_than_us: AtomicI64::new(slower_than_us),
            max_len: AtomicUsize::new(max_len),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
            redact,
        }
    }

    /// Whether commands are recorded at all (`slowlog-log-slower-than` is
    /// not negative).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.slower_than_us.load(Ordering::Relaxed) >= 0
    }

    /// Whether a command that ran `ns` nanoseconds is slow enough to record.
    #[inline]
    pub fn is_slow(&self, ns: u64) -> bool {
        let t = self.slower_than_us.load(Ordering::Relaxed);
        t >= 0 && ns / 1000 >= t as u64
    }

    /// Record a slow command (arguments trimmed as Redis does; credentials
    /// shown as `(redacted)`, see [`SlowLog::new`]).
    ///
    /// # Source
    /// `slowlogCreateEntry`, redis/src/slowlog.c.
    pub fn push(&self, argv: &[Bytes], duration_us: u64, addr: String, name: String) {
        let mut kept: Vec<Bytes> = Vec::with_capacity(argv.len().min(MAX_ARGC));
        let secrets = (self.redact)(argv);
        for (i, a) in argv.iter().enumerate() {
            if i == MAX_ARGC - 1 && argv.len() > MAX_ARGC {
                kept.push(Bytes::from(format!(
                    "... ({} more arguments)",
                    argv.len() - MAX_ARGC + 1
                )));
                break;
            }
            if secrets.contains(&i) {
                kept.push(Bytes::from_static(b"(redacted)"));
                continue;
            }
            if a.len() > MAX_STRING {
                let mut s = a[..MAX_STRING].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes(),
                );
                kept.push(Bytes::from(s));
            } else {
                kept.push(Bytes::copy_from_slice(a));
            }
        }
        let time_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            time_s,
            duration_us,
            argv: kept,
            addr,
            name,
        };
        let max = self.max_len.load(Ordering::Relaxed);
        if let Ok(mut e) = self.entries.lock() {
            e.push_front(entry);
            e.truncate(max);
        }
    }

    /// [`push`](Self::push) with the address and name of `client`.
    pub fn push_for(&self, argv: &[Bytes], duration_us: u64, client: &ClientShared) {
        let name = client
            .name
            .lock()
            .ok()
            .and_then(|n| n.clone())
            .unwrap_or_default();
        self.push(argv, duration_us, client.addr.to_string(), name);
    }

    /// Entries held (SLOWLOG LEN).
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    /// Whether the log holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The newest `count` entries, newest first (SLOWLOG GET).
    pub fn newest(&self, count: usize) -> Vec<Entry> {
        self.entries
            .lock()
            .map_or_else(|_| Vec::new(), |e| e.iter().take(count).cloned().collect())
    }

    /// Drop every entry (SLOWLOG RESET).
    pub fn reset(&self) {
        if let Ok(mut e) = self.entries.lock() {
            e.clear();
        }
    }
}
