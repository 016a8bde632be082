//! Starting and stopping a server: spawn the shard threads (each with its own
//! event loop) and the acceptor, and the state they share (configuration,
//! client registry, counters).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::config::Config;
use crate::io::acceptor::Listeners;
use crate::io::conn::ClientShared;
use crate::route::slot::{slot_of, ShardId};
use crate::shard::msg::Outbox;

/// Server-wide counters (INFO stats).
#[derive(Default)]
pub struct ServerStats {
    pub total_connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_error_replies: AtomicU64,
    /// Clients closed for exceeding `client-query-buffer-limit`.
    pub client_query_buffer_limit_disconnections: AtomicU64,
    /// Clients closed for exceeding `client-output-buffer-limit`.
    pub client_output_buffer_limit_disconnections: AtomicU64,
    /// Largest query buffer seen in the last 4 to 8 seconds, bytes
    /// (INFO `client_recent_max_input_buffer`).
    pub recent_max_input_bytes: PeakWindow,
    /// Largest output buffer seen in the last 4 to 8 seconds, bytes
    /// (INFO `client_recent_max_output_buffer`).
    pub recent_max_output_bytes: PeakWindow,
    /// Connections moved to the shard thread their commands kept going to
    /// (INFO shardstream `handovers`).
    pub conn_handovers: AtomicU64,
    /// Transactions (EXEC, MSET, MSETNX) that ran over several shards under
    /// holds (INFO shardstream `cross_shard_transactions`).
    pub cross_shard_txs: AtomicU64,
    /// Times shards were held for them: transactions arriving together at
    /// their coordinator share one (INFO shardstream `cross_shard_holds`).
    pub cross_shard_holds: AtomicU64,
    /// `used_memory` as last sampled by a shard thread (refreshed at most every
    /// millisecond while `maxmemory` is set), bytes.
    pub used_memory_cached_bytes: AtomicU64,
    /// Shards whose append-only file could not be fully written and fsynced
    /// when they stopped (the shutdown log line reports it).
    pub aof_unflushed_at_shutdown: AtomicU64,
    /// Keys evicted under `maxmemory` (INFO `evicted_keys`).
    pub evicted_keys: AtomicU64,
    /// Shards whose last eviction found nothing the policy may evict.
    pub shards_with_nothing_to_evict: AtomicUsize,
}

/// A maximum over a sliding window of two periods: `observe` raises the
/// current period's peak, `rotate` (called once a period) starts a new one.
#[derive(Default)]
pub struct PeakWindow {
    current: AtomicU64,
    previous: AtomicU64,
}

impl PeakWindow {
    /// Record a value seen now.
    pub fn observe(&self, v: u64) {
        if v > self.current.load(Ordering::Relaxed) {
            self.current.fetch_max(v, Ordering::Relaxed);
        }
    }

    /// Start a new period; the peak of the one just ended stays visible for one more.
    pub fn rotate(&self) {
        let cur = self.current.swap(0, Ordering::Relaxed);
        self.previous.store(cur, Ordering::Relaxed);
    }

    /// Largest value observed in this period and the previous one.
    pub fn get(&self) -> u64 {
        self.current
            .load(Ordering::Relaxed)
            .max(self.previous.load(Ordering::Relaxed))
    }
}

/// Per-command counters for INFO commandstats: one row of atomics per command
/// table row (subcommands included), found by the row's static name, so
/// counting a call takes no lock and allocates nothing. Each shard thread
/// counts into its own block (threads never write one cache line, which would
/// cost a cache-line transfer per command); readers sum the blocks.
pub struct CmdStats {
    /// Lowercase names (`get`, `client|list`), by row index.
    names: Vec<String>,
    /// `latency-tracking`: record per-command latency histograms.
    pub latency_tracking: std::sync::atomic::AtomicBool,
    index: HashMap<&'static str, usize, BuildHasherDefault<crate::cmd::table::NameHasher>>,
    /// One block per shard thread, then one for every other thread.
    blocks: Vec<CounterBlock>,
}

/// One thread's counters (see [`CmdStats`]); aligned so that two blocks never
/// share a cache line.
#[repr(align(128))]
struct CounterBlock {
    /// Commands processed (INFO `total_commands_processed`).
    processed: AtomicU64,
    calls: Vec<AtomicU64>,
    failed: Vec<AtomicU64>,
    rejected: Vec<AtomicU64>,
    /// Execution time on the shard, nanoseconds (INFO reports µs).
    exec_ns: Vec<AtomicU64>,
    /// Error replies by their first word (`ERR`, `NOGROUP`...), INFO errorstats.
    /// Only error paths take this (uncontended: one per thread) lock.
    errors: std::sync::Mutex<HashMap<String, u64>>,
    /// Execution-time histograms (ns) by command row, created on first use
    /// (INFO latencystats). Written by this block's thread only; the lock is
    /// uncontended except while INFO reads.
    latency: std::sync::Mutex<Vec<Option<LatencyHistogram>>>,
}

/// One command's execution times in ns, 1 ns..1 s at 2 significant digits
/// (Redis's `LATENCY_HISTOGRAM_MIN/MAX_VALUE` and precision).
pub type LatencyHistogram = hdrhistogram::Histogram<u64>;

thread_local! {
    /// Execution times `(command row, ns)` recorded on this thread and not
    /// yet published (see [`CmdStats::flush_latency`]): a push per command,
    /// recorded into the histograms once per loop iteration under one lock.
    static PENDING_LATENCY: std::cell::RefCell<Vec<(u32, u64)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// Commands of a transaction that answered an error, `(command row,
    /// error)`, noted where EXEC's reply is put together (a merge, with no
    /// server at hand; see [`note_failed`]) and counted by
    /// [`CmdStats::flush_failed`].
    static PENDING_FAILED: std::cell::RefCell<Vec<(u32, crate::error::CmdError)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Note that a command of row `row` inside a transaction answered `err`: one
/// failed call and one error reply (INFO commandstats `failed_calls`,
/// errorstats, `total_error_replies`), as Redis counts the commands EXEC
/// runs. Counted at this thread's next [`CmdStats::flush_failed`].
pub fn note_failed(row: u32, err: crate::error::CmdError) {
    PENDING_FAILED.with(|p| p.borrow_mut().push((row, err)));
}

/// A command a script called, as INFO counts it: its table row's name
/// (`None` for an unknown command), its time, its error reply, and whether
/// it was refused before running (arity, `noscript`, a write from a
/// read-only script, OOM, a key the script cannot reach).
pub struct ScriptCallStat {
    pub name: Option<&'static str>,
    pub ns: u64,
    pub err: Option<crate::error::CmdError>,
    pub rejected: bool,
}

/// What a script's run leaves for INFO, counted at
/// [`CmdStats::flush_script_calls`].
enum ScriptStat {
    /// A command the script called.
    Call(ScriptCallStat),
    /// An error reply nested in the script's own reply (an array holding
    /// errors): one error in errorstats, unless its command counted it.
    ReplyError(crate::error::CmdError),
    /// One more failed call of the script command with this row name.
    Failed(&'static str),
    /// The time (ns) of a command EXEC ran, by row name (its call and
    /// failure are counted when EXEC plans and answers it).
    Time(&'static str, u64),
}

thread_local! {
    /// What scripts left on this thread since the last
    /// [`CmdStats::flush_script_calls`].
    static PENDING_SCRIPT_CALLS: std::cell::RefCell<Vec<ScriptStat>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Note the errors nested in the reply of script command `name` (EVAL,
/// FCALL, ...): Redis counts every error reply it writes. Each one counts
/// in errorstats, unless it is a called command's error passed on
/// ([`CmdError::FromScriptCall`](crate::error::CmdError::FromScriptCall)),
/// which counts as one more failed call of the script command instead; any
/// of the others make the script command's call a failed one, once. A
/// top-level error is the shard loop's to count.
pub fn note_script_reply_errors(name: &'static str, reply: &crate::reply::Reply) {
    use crate::reply::Reply;
    fn walk(r: &Reply, out: &mut Vec<ScriptStat>, plain: &mut bool, name: &'static str) {
        let mut each = |r: &Reply| match r {
            Reply::Error(crate::error::CmdError::FromScriptCall(_)) => {
                out.push(ScriptStat::Failed(name));
            }
            Reply::Error(e) => {
                out.push(ScriptStat::ReplyError(e.clone()));
                *plain = true;
            }
            nested => walk(nested, out, plain, name),
        };
        match r {
            Reply::Array(items) | Reply::Set(items) => items.iter().for_each(&mut each),
            Reply::Map(pairs) | Reply::PairMap(pairs) | Reply::Pairs(pairs) => {
                for (k, v) in pairs {
                    each(k);
                    each(v);
                }
            }
            // A deep reply keeps its nested errors beside its bytes.
            Reply::PreEncoded(p) => {
                for e in &p.errors {
                    each(&Reply::Error(e.clone()));
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    let mut plain = false;
    walk(reply, &mut found, &mut plain, name);
    if found.is_empty() {
        return;
    }
    if plain {
        found.push(ScriptStat::Failed(name));
    }
    PENDING_SCRIPT_CALLS.with(|p| p.borrow_mut().extend(found));
}

/// Note a command a script called (Redis counts them in commandstats,
/// errorstats, latencystats and `total_commands_processed` as any other).
/// Counted at this thread's next [`CmdStats::flush_script_calls`], which
/// the shard loop runs before the script's reply goes out.
pub fn note_script_call(call: ScriptCallStat) {
    PENDING_SCRIPT_CALLS.with(|p| p.borrow_mut().push(ScriptStat::Call(call)));
}

/// A command EXEC ran took `ns` on its shard: its time in INFO
/// commandstats and latencystats, counted at this thread's next
/// [`CmdStats::flush_script_calls`].
pub fn note_exec_step(name: &'static str, ns: u64) {
    PENDING_SCRIPT_CALLS.with(|p| p.borrow_mut().push(ScriptStat::Time(name, ns)));
}

/// An empty latency histogram with Redis's bounds and precision.
fn new_latency_histogram() -> LatencyHistogram {
    LatencyHistogram::new_with_bounds(1, LATENCY_MAX_NS, 2).expect("valid histogram bounds")
}

/// Highest execution time recorded in a latency histogram (1 s, in ns); longer
/// ones are recorded as this, as Redis clamps them.
const LATENCY_MAX_NS: u64 = 1_000_000_000;

/// Redis stops adding new error names to errorstats past this many.
const MAX_ERROR_NAMES: usize = 128;

/// The calling thread's [`CounterBlock`], and whether it is the only thread
/// that writes it (a shard thread's own block).
struct Counters<'a> {
    block: &'a CounterBlock,
    exclusive: bool,
}

impl std::ops::Deref for Counters<'_> {
    type Target = CounterBlock;
    fn deref(&self) -> &CounterBlock {
        self.block
    }
}

impl Counters<'_> {
    /// Add `n` to counter `c` of this block. Its only writer adds without a
    /// locked read-modify-write (a plain load and store: readers on other
    /// threads see the value a moment late, never torn); the block shared by
    /// other threads adds atomically.
    fn add(&self, c: &AtomicU64, n: u64) {
        if self.exclusive {
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        } else {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
}

thread_local! {
    /// Which [`CounterBlock`] this thread counts into; shard threads set it
    /// with [`count_on_block`], every other thread uses the last block.
    static COUNTER_BLOCK: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// The shard thread the caller runs on (`None` off shard threads).
pub fn current_shard_thread() -> Option<usize> {
    COUNTER_BLOCK.with(|b| Some(b.get()).filter(|&i| i != usize::MAX))
}

/// Make the calling thread count commands into block `i` (shard thread `i`).
pub fn count_on_block(i: usize) {
    COUNTER_BLOCK.with(|b| b.set(i));
}

impl CmdStats {
    fn new(threads: usize) -> CmdStats {
        let mut rows: Vec<&'static str> = Vec::new();
        for spec in crate::cmd::table::all_specs() {
            rows.push(spec.name);
            rows.extend(spec.subcommands.iter().map(|s| s.name));
        }
        let zeros = || rows.iter().map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        CmdStats {
            latency_tracking: std::sync::atomic::AtomicBool::new(true),
            names: rows.iter().map(|n| n.to_ascii_lowercase()).collect(),
            index: rows.iter().enumerate().map(|(i, n)| (*n, i)).collect(),
            blocks: (0..=threads)
                .map(|_| CounterBlock {
                    processed: AtomicU64::new(0),
                    calls: zeros(),
                    failed: zeros(),
                    rejected: zeros(),
                    exec_ns: zeros(),
                    errors: Default::default(),
                    latency: std::sync::Mutex::new((0..rows.len()).map(|_| None).collect()),
                })
                .collect(),
        }
    }

    /// The calling thread's block.
    fn block(&self) -> Counters<'_> {
        let i = COUNTER_BLOCK.with(|b| b.get());
        let last = self.blocks.len() - 1;
        Counters {
            block: &self.blocks[i.min(last)],
            exclusive: i < last,
        }
    }

    /// Row index of a table row's name (`"GET"`, `"CLIENT|LIST"`).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Lowercase name of row `i` (`CLIENT LIST cmd=`).
    pub fn name(&self, i: usize) -> &str {
        self.names.get(i).map(String::as_str).unwrap_or("NULL")
    }

    /// Sum of one counter over every thread's block.
    fn sum(&self, f: impl Fn(&CounterBlock) -> &AtomicU64) -> u64 {
        self.blocks
            .iter()
            .map(|b| f(b).load(Ordering::Relaxed))
            .sum()
    }

    /// Commands processed since start or CONFIG RESETSTAT (INFO `total_commands_processed`).
    pub fn total_processed(&self) -> u64 {
        self.sum(|b| &b.processed)
    }

    /// `(name, calls, failed_calls, rejected_calls, usec)` of every command
    /// used so far, by name.
    pub fn snapshot(&self) -> Vec<(String, u64, u64, u64, u64)> {
        let mut out: Vec<_> = (0..self.names.len())
            .map(|i| {
                (
                    self.names[i].clone(),
                    self.sum(|b| &b.calls[i]),
                    self.sum(|b| &b.failed[i]),
                    self.sum(|b| &b.rejected[i]),
                    self.sum(|b| &b.exec_ns[i]) / 1000,
                )
            })
            .filter(|(_, c, f, r, _)| c + f + r > 0)
            .collect();
        out.sort();
        out
    }

    /// `ns` nanoseconds more of row `cmd`'s `usec`, with no call, latency
    /// sample or error: a part of a command over several shards, or the
    /// attempt of a blocking read that parked (Redis records one latency
    /// sample per call, when the woken read is served).
    pub fn count_time(&self, cmd: u32, ns: u64) {
        use crate::shard::msg::{NO_CMD, PART};
        if cmd == NO_CMD {
            return;
        }
        let st = self.block();
        if let Some(c) = st.exec_ns.get((cmd & !PART) as usize) {
            st.add(c, ns);
        }
    }

    /// A command (row `cmd`, or [`NO_CMD`](crate::shard::msg::NO_CMD) for a
    /// request not counted as one) ran on this thread's shard for `ns`
    /// nanoseconds and answered `err` if it failed: its time, and
    /// `failed_calls` and errorstats for an error reply (Redis counts an
    /// error the command itself answers as failed, not rejected). With
    /// [`PART`](crate::shard::msg::PART) set, `cmd` is one shard's part of a
    /// command over several: its time adds to the command's `usec` (Redis
    /// times the whole command); an error is counted once, on the merged
    /// reply, by the connection's thread.
    pub fn count_exec(&self, cmd: u32, ns: u64, err: Option<&crate::error::CmdError>) {
        let st = self.block();
        use crate::shard::msg::{NO_CMD, PART};
        if cmd != NO_CMD && cmd & PART != 0 {
            self.count_time(cmd, ns);
            return;
        }
        let i = cmd as usize;
        if let Some(c) = st.exec_ns.get(i) {
            st.add(c, ns);
            // ns == 0: not a timed execution (an unblocked reader's error).
            // Recorded without a lock into this thread's pending histograms;
            // `flush_latency` publishes them (once per loop iteration).
            if ns > 0 && self.latency_tracking.load(Ordering::Relaxed) {
                PENDING_LATENCY.with(|p| p.borrow_mut().push((cmd, ns)));
            }
        }
        if let Some(e) = err {
            if let Some(c) = st.failed.get(i) {
                c.fetch_add(1, Ordering::Relaxed);
            }
            self.count_error(e);
        }
    }

    /// One error reply, under its first word (INFO errorstats); not for a
    /// script passing on its command's error, counted when the command
    /// answered it ([`CmdError::FromScriptCall`](crate::error::CmdError::FromScriptCall)).
    pub fn count_error(&self, err: &crate::error::CmdError) {
        if matches!(err, crate::error::CmdError::FromScriptCall(_)) {
            return;
        }
        let text = err.text();
        // The code is the first word when a space comes within Redis's 32
        // characters of `-CODE`, otherwise `ERR` (`afterErrorReply`).
        let name = match text.iter().take(31).position(|&b| b == b' ') {
            Some(end) => String::from_utf8_lossy(&text[..end]),
            None => "ERR".into(),
        };
        let name = &*name;
        if let Ok(mut m) = self.block().errors.lock() {
            if let Some(n) = m.get_mut(name) {
                *n += 1;
            } else if m.len() < MAX_ERROR_NAMES {
                m.insert(name.to_string(), 1);
            }
        }
    }

    /// `(error name, count)` summed over threads, by name (INFO errorstats).
    pub fn error_snapshot(&self) -> Vec<(String, u64)> {
        let mut all: HashMap<String, u64> = HashMap::new();
        for b in &self.blocks {
            if let Ok(m) = b.errors.lock() {
                for (k, v) in m.iter() {
                    *all.entry(k.clone()).or_default() += v;
                }
            }
        }
        let mut out: Vec<_> = all.into_iter().collect();
        out.sort();
        out
    }

    /// Count the failures [`note_failed`] noted on this thread.
    pub fn flush_failed(&self) {
        let failed = PENDING_FAILED.with(|p| std::mem::take(&mut *p.borrow_mut()));
        for (row, e) in failed {
            self.count_exec(row, 0, Some(&e));
        }
    }

    /// Count the commands scripts called on this thread since the last
    /// flush (see [`note_script_call`]): a refused one is a rejected call of
    /// its row; one that ran is a processed command and a call of its row
    /// with its time, latency sample, and failure when it answered an error
    /// (`scriptCall`, redis/src/script.c).
    pub fn flush_script_calls(&self) {
        let calls = PENDING_SCRIPT_CALLS.with(|p| {
            let mut p = p.borrow_mut();
            if p.is_empty() {
                Vec::new()
            } else {
                std::mem::take(&mut *p)
            }
        });
        for stat in calls {
            let call = match stat {
                ScriptStat::Call(call) => call,
                ScriptStat::ReplyError(e) => {
                    self.count_error(&e);
                    continue;
                }
                ScriptStat::Failed(name) => {
                    let st = self.block();
                    if let Some(i) = self.index_of(name) {
                        st.add(&st.failed[i], 1);
                    }
                    continue;
                }
                ScriptStat::Time(name, ns) => {
                    let row = self.index_of(name);
                    let row = row.map_or(crate::shard::msg::NO_CMD, |i| i as u32);
                    self.count_exec(row, ns, None);
                    continue;
                }
            };
            let row = call.name.and_then(|n| self.index_of(n));
            let st = self.block();
            if call.rejected {
                if let Some(i) = row {
                    st.add(&st.rejected[i], 1);
                }
                if let Some(e) = &call.err {
                    self.count_error(e);
                }
                continue;
            }
            st.add(&st.processed, 1);
            if let Some(i) = row {
                st.add(&st.calls[i], 1);
            }
            let row = row.map_or(crate::shard::msg::NO_CMD, |i| i as u32);
            self.count_exec(row, call.ns, call.err.as_ref());
        }
    }

    /// Publish the latencies this thread recorded since the last flush into
    /// its block (one lock per loop iteration, not per command), and count
    /// the failures noted since (see [`flush_failed`](Self::flush_failed)).
    pub fn flush_latency(&self) {
        self.flush_failed();
        PENDING_LATENCY.with(|p| {
            let mut p = p.borrow_mut();
            if p.is_empty() {
                return;
            }
            let block = self.block();
            let Ok(mut hists) = block.latency.lock() else {
                p.clear();
                return;
            };
            for &(i, ns) in p.iter() {
                if let Some(slot) = hists.get_mut(i as usize) {
                    slot.get_or_insert_with(new_latency_histogram)
                        .saturating_record(ns.clamp(1, LATENCY_MAX_NS));
                }
            }
            p.clear();
        });
    }

    /// `(name, merged histogram)` of every command with recorded latencies,
    /// by name (INFO latencystats).
    pub fn latency_snapshot(&self) -> Vec<(String, LatencyHistogram)> {
        // The calling thread's own commands of this iteration count too.
        self.flush_latency();
        let mut merged: Vec<Option<LatencyHistogram>> =
            (0..self.names.len()).map(|_| None).collect();
        for b in &self.blocks {
            let Ok(hists) = b.latency.lock() else {
                continue;
            };
            for (i, h) in hists.iter().enumerate() {
                let Some(h) = h else { continue };
                match &mut merged[i] {
                    Some(m) => {
                        let _ = m.add(h);
                    }
                    slot @ None => *slot = Some(h.clone()),
                }
            }
        }
        let mut out: Vec<_> = merged
            .into_iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|h| (self.names[i].clone(), h)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Error replies counted in errorstats (INFO `total_error_replies`).
    pub fn total_errors(&self) -> u64 {
        self.blocks
            .iter()
            .filter_map(|b| b.errors.lock().ok().map(|m| m.values().sum::<u64>()))
            .sum()
    }

    /// Zero every counter (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for b in &self.blocks {
            b.processed.store(0, Ordering::Relaxed);
            for v in [&b.calls, &b.failed, &b.rejected, &b.exec_ns] {
                for c in v {
                    c.store(0, Ordering::Relaxed);
                }
            }
            if let Ok(mut m) = b.errors.lock() {
                m.clear();
            }
            if let Ok(mut h) = b.latency.lock() {
                h.iter_mut().for_each(|s| *s = None);
            }
        }
    }
}

/// Per shard thread, written only by that thread and summed by INFO:
/// single-shard commands its connections ran on their own thread (no hop)
/// and on another shard (INFO shardstream), and its socket traffic (INFO
/// stats). Aligned so that two threads' counters never share a cache line
/// (one shared counter bumped by every thread per read and write moved
/// that line between cores each time).
#[derive(Default)]
#[repr(align(128))]
pub struct ThreadStats {
    pub local_commands: AtomicU64,
    pub remote_commands: AtomicU64,
    /// Bytes read from clients (INFO `total_net_input_bytes`).
    pub net_input_bytes: AtomicU64,
    /// Bytes written to clients (INFO `total_net_output_bytes`).
    pub net_output_bytes: AtomicU64,
    /// Reads of readable connections (INFO `total_reads_processed`).
    pub reads_processed: AtomicU64,
    /// Writes of pending output (INFO `total_writes_processed`).
    pub writes_processed: AtomicU64,
    /// Keys of this shard with clients blocked on them (INFO clients
    /// `total_blocking_keys`, summed over shards).
    pub blocking_keys: AtomicU64,
    /// Of those, keys with a client that a deletion unblocks (XREADGROUP;
    /// INFO clients `total_blocking_keys_on_nokey`).
    pub blocking_keys_nokey: AtomicU64,
    /// Spins after a send to another shard thread (`shard-spin-us`) that
    /// work ended before the deadline (INFO shardstream `spin_hits`).
    pub spin_hits: AtomicU64,
    /// Spins that ran out, so the thread slept (INFO shardstream `spin_misses`).
    pub spin_misses: AtomicU64,
}

impl ThreadStats {
    /// The counters CONFIG RESETSTAT zeroes (all but the blocking-key gauges).
    pub fn reset_counters(&self) -> [&AtomicU64; 8] {
        [
            &self.local_commands,
            &self.remote_commands,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.reads_processed,
            &self.writes_processed,
            &self.spin_hits,
            &self.spin_misses,
        ]
    }
}

/// State shared by every thread (never shards' data).
pub struct Shared {
    /// Effective configuration; `CONFIG SET` changes it.
    pub config: RwLock<Config>,
    /// Bumped by every CONFIG SET, so threads re-read the settings they
    /// cache (client limits) only when they changed.
    pub config_epoch: AtomicU64,
    /// Number of shards (fixed for the server's life).
    pub shards: u16,
    /// Which shard owns each slot (a cluster node splits only its own slots).
    pub slot_map: Arc<crate::route::slot::SlotMap>,
    /// Number of databases (fixed for the server's life).
    pub databases: usize,
    /// Shard threads' inboxes and wakers, indexed by shard id.
    pub threads: Vec<Outbox>,
    /// Connections each shard thread serves (the acceptor picks the least loaded).
    pub thread_conns: Vec<AtomicUsize>,
    /// Local/remote command counts per shard thread.
    pub thread_stats: Vec<ThreadStats>,
    /// Wakes the acceptor (shutdown).
    pub acceptor_waker: Arc<mio::Waker>,
    /// Connected clients by id.
    pub clients: Mutex<HashMap<u64, Arc<ClientShared>>>,
    pub next_client_id: AtomicU64,
    pub stats: ServerStats,
    /// Calls per command table row (INFO commandstats).
    pub cmdstats: CmdStats,
    pub started: Instant,
    /// TCP address actually bound (port resolved when 0 was asked);
    /// `0.0.0.0:0` when the server listens on no TCP port (`port 0`).
    pub addr: SocketAddr,
    /// The Unix domain socket listened on (`unixsocket`), if any.
    pub unixsocket: Option<std::path::PathBuf>,
    /// 40 hex characters, fixed for the process life (INFO `run_id`, CLUSTER MYID).
    pub run_id: String,
    pub shutdown: AtomicBool,
    /// Wakes [`Shared::wait_shutdown_request`] (the binary's main thread)
    /// when [`Shared::request_shutdown`] sets `shutdown`.
    shutdown_requested: (Mutex<()>, Condvar),
    /// Settings shards read at run time; CONFIG SET updates them.
    pub tunables: Arc<crate::config::Tunables>,
    /// Clients parked in XREAD/XREADGROUP BLOCK (INFO clients `blocked_clients`).
    pub blocked_clients: Arc<AtomicU64>,
    /// The Redis Cluster this node belongs to (`cluster-enabled yes`, or a
    /// static `cluster-config` topology); `None`: standalone or emulated,
    /// serving every slot with no redirections.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
    /// SLOWLOG entries and settings.
    pub slowlog: Arc<crate::slowlog::SlowLog>,
    /// Clients in MONITOR mode.
    pub monitors: Arc<crate::monitor::Monitors>,
    /// Allocator bytes in use when the server had started (MEMORY STATS
    /// `startup.allocated`).
    pub startup_allocated_bytes: u64,
    /// INFO stats' instantaneous rates, sampled by shard 0's timer.
    pub instant: crate::metrics::InstantMetrics,
    /// Scripts and function libraries known to every shard (EVAL, FUNCTION).
    pub scripts: Arc<crate::script::Registry>,
}

impl Shared {
    /// The shard owning `key`.
    pub fn shard_of(&self, key: &[u8]) -> ShardId {
        if self.shards == 1 {
            // One shard owns every slot: no need to hash the key.
            return ShardId(0);
        }
        self.slot_map.shard(slot_of(key))
    }

    /// One per-thread counter summed over the shard threads.
    pub fn thread_sum(&self, f: impl Fn(&ThreadStats) -> &AtomicU64) -> u64 {
        self.thread_stats
            .iter()
            .map(|t| f(t).load(Ordering::Relaxed))
            .sum()
    }

    /// Sample the totals behind INFO's instantaneous rates and raise the
    /// used-memory peak, at most every 100 ms (shard 0's timer calls it).
    pub fn sample_metrics(&self) {
        let totals = [
            self.cmdstats.total_processed(),
            self.thread_sum(|t| &t.net_input_bytes),
            self.thread_sum(|t| &t.net_output_bytes),
        ];
        if self.instant.sample(self.uptime_ms(), totals) {
            crate::alloc_stats::raise_peak();
        }
    }

    /// Milliseconds since the server started.
    pub fn uptime_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Ask every thread to stop.
    pub fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        // A running script stops at its next check (it may hold the thread
        // that would otherwise see the flag).
        self.scripts.shutting_down.store(true, Ordering::SeqCst);
        for t in &self.threads {
            t.wake();
        }
        let _ = self.acceptor_waker.wake();
        // Notify under the lock: a waiter checks the flag under it, so the
        // wake-up cannot fall between its check and its wait.
        let (lock, cv) = &self.shutdown_requested;
        let _guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        cv.notify_all();
    }

    /// Block until [`Shared::request_shutdown`] has been called (SHUTDOWN,
    /// a signal, a failed start), with no periodic wake-up: the binary's
    /// main thread sleeps here for the life of the server.
    pub fn wait_shutdown_request(&self) {
        let (lock, cv) = &self.shutdown_requested;
        let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.shutdown.load(Ordering::SeqCst) {
            guard = cv.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Whether DENYOOM commands are refused: `maxmemory` is set, the last
    /// sampled `used_memory` exceeds it, and eviction cannot help (policy
    /// `noeviction`, or no shard has a key the policy may evict). With an
    /// evicting policy, shard threads evict between commands, so memory
    /// may pass the limit by what one loop iteration writes.
    pub fn over_maxmemory(&self) -> bool {
        let max = self.tunables.maxmemory_bytes.load(Ordering::Relaxed);
        if max == 0 || self.stats.used_memory_cached_bytes.load(Ordering::Relaxed) <= max {
            return false;
        }
        self.tunables.eviction_policy() == crate::config::EvictionPolicy::NoEviction
            || self
                .stats
                .shards_with_nothing_to_evict
                .load(Ordering::Relaxed)
                >= usize::from(self.shards)
    }

    /// Count one call of the table row named `name` (`"GET"`, `"CLIENT|LIST"`;
    /// unknown names only count as processed), and whether it failed or was
    /// rejected before running. A rejected command is not a processed one
    /// (INFO `total_commands_processed` counts what ran, as Redis's `call`).
    pub fn count_call(&self, name: &str, failed: bool, rejected: bool) {
        self.count_call_at(self.cmdstats.index_of(name), failed, rejected);
    }

    /// [`count_call`](Self::count_call) by command statistics row (from
    /// [`CmdStats::index_of`]).
    pub fn count_call_at(&self, stat: Option<usize>, failed: bool, rejected: bool) {
        let st = self.cmdstats.block();
        if !rejected {
            st.add(&st.processed, 1);
        }
        if let Some(i) = stat {
            if !rejected {
                st.add(&st.calls[i], 1);
            }
            if failed {
                st.add(&st.failed[i], 1);
            }
            if rejected {
                st.add(&st.rejected[i], 1);
            }
        }
    }
}

/// A running server. Dropping it does not stop it: call [`ServerHandle::shutdown`].
pub struct ServerHandle {
    pub shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    shard_threads: Vec<JoinHandle<()>>,
    /// The cluster bus thread (cluster mode only).
    bus: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound TCP address (`0.0.0.0:0` when TCP is off: `port 0`).
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The Unix domain socket the server listens on, if any.
    pub fn unixsocket(&self) -> Option<&std::path::Path> {
        self.shared.unixsocket.as_deref()
    }

    /// Stop every thread and wait for them.
    pub fn shutdown(mut self) {
        self.shared.request_shutdown();
        self.join_all();
    }

    /// Wait until the server stops (SHUTDOWN command or [`Shared::request_shutdown`]).
    pub fn wait(mut self) {
        self.join_all();
    }

    /// The acceptor stops first (no new clients) and the Unix socket file
    /// is removed (as Redis does); each shard thread then closes its
    /// connections, writes its AOF and exits.
    fn join_all(&mut self) {
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
            if let Some(path) = &self.shared.unixsocket {
                log::info!("Removing the unix socket file.");
                let _ = std::fs::remove_file(path);
            }
        }
        if let Some(t) = self.bus.take() {
            let _ = t.join();
        }
        for t in self.shard_threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// 40 random lowercase hex characters (run ids, cluster node ids).
pub fn random_hex40() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// Turn on jemalloc's background purging threads (as Redis does with its
/// default `jemalloc-bg-thread yes`). Without them, memory a shard thread
/// freed (a slow reader's output buffer, a big reply built on another
/// shard) goes back to the OS only when that thread allocates again, so an
/// idle server could hold gigabytes of RSS long after the client left.
/// The purging threads sleep unless there are dirty pages to return.
fn enable_allocator_background_purge() {
    #[cfg(feature = "jemalloc")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
                log::warn!("cannot start the allocator's background purge: {e}");
            }
        });
    }
}

/// Exit status of a process whose shard thread or acceptor panicked (EX_SOFTWARE).
pub const PANIC_EXIT_CODE: i32 = 70;

/// Whether a thread name is one of the server's own (`shard-N`, `acceptor`).
fn is_server_thread(name: Option<&str>) -> bool {
    name.is_some_and(|n| n.starts_with("shard-") || n == "acceptor")
}

/// Install (once per process) a panic hook that, after the previous hook has
/// printed the panic, exits the process with [`PANIC_EXIT_CODE`] when the
/// panicking thread is a shard thread or the acceptor. A shard that died would leave
/// its clients waiting forever for replies and the rest of the server
/// running half-dead; exiting closes every socket, so clients see EOF and
/// supervisors see a failure.
///
/// [`start`] and [`start_on`] call it, so the binary and programs embedding the server
/// (tests, loadgen) get the same behaviour. Panics on other threads (a test's
/// failed assertion, the embedding program's own threads) are left to the
/// previous hook. The binary additionally exits on a panic of any thread.
pub fn exit_on_server_thread_panic() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            if is_server_thread(std::thread::current().name()) {
                log::error!("fatal: a server thread panicked; exiting");
                std::process::exit(PANIC_EXIT_CODE);
            }
        }));
    });
}

/// Bind, spawn the shard threads and the acceptor, and return once the server accepts connections.
///
/// Listens as redis-server does: on TCP `bind:port` unless `port` is 0, and on
/// the Unix domain socket `unixsocket` (mode `unixsocketperm`) if set. An
/// embedding program that wants TCP on a free port binds `127.0.0.1:0`
/// itself and calls [`start_on`].
///
/// With `appendonly yes`, every shard first loads its append-only files (in
/// parallel, each on its own thread); connections are served only after all
/// have loaded.
///
/// Installs [`exit_on_server_thread_panic`]: a panic in any shard or IO
/// thread ends the process (status 70) rather than leaving hung clients.
///
/// # Errors
/// Neither a TCP port nor a Unix socket is configured (`InvalidInput`,
/// Redis's "Configured to not listen anywhere"); binding fails; a
/// `cluster-config` file is unreadable or invalid (`InvalidInput`, with a
/// message naming the file and line); or loading the AOF fails
/// (`InvalidData`, with a message naming the file and offset, or the
/// shard-count mismatch).
pub fn start(config: Config) -> io::Result<ServerHandle> {
    if config.port == 0 && config.unixsocket.is_none() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, NOT_LISTENING));
    }
    // A bad topology is reported before binding, so the message is about the file.
    let cluster = open_cluster(&config, config.port)?;
    let tcp = if config.port == 0 {
        None
    } else {
        Some(
            crate::listener::bind_listener(&config.bind, config.port, config.tcp_backlog).map_err(
                |e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot listen on {}:{}: {e}", config.bind, config.port),
                    )
                },
            )?,
        )
    };
    let listeners = Listeners {
        tcp,
        unix: bind_unixsocket(&config)?,
    };
    start_with(config, listeners, cluster)
}

/// Redis's message when neither TCP nor a Unix socket is configured.
pub const NOT_LISTENING: &str = "Configured to not listen anywhere (port 0 and no unixsocket)";

/// [`start`] on an already bound TCP listener (its port overrides
/// `config.port`; a cluster node finds its topology line by it), plus the
/// Unix socket of `config.unixsocket` if set. Lets a caller learn every
/// node's port before any node starts, and tests listen on a free port.
pub fn start_on(config: Config, listener: std::net::TcpListener) -> io::Result<ServerHandle> {
    let cluster = open_cluster(&config, listener.local_addr()?.port())?;
    let listeners = Listeners {
        tcp: Some(listener),
        unix: bind_unixsocket(&config)?,
    };
    start_with(config, listeners, cluster)
}

/// Bind `config.unixsocket`, if set.
fn bind_unixsocket(
    config: &Config,
) -> io::Result<Option<(std::os::unix::net::UnixListener, Arc<str>)>> {
    let Some(path) = &config.unixsocket else {
        return Ok(None);
    };
    let l = crate::listener::bind_unix(path, config.unixsocketperm).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot listen on unix socket {}: {e}", path.display()),
        )
    })?;
    Ok(Some((l, Arc::from(path.display().to_string()))))
}

/// The cluster a node listening on `port` belongs to: the `cluster-config`
/// topology, or (`cluster-enabled yes`) the state in `cluster-config-file`.
///
/// # Errors
/// `InvalidInput` with a message naming the file and line.
fn open_cluster(config: &Config, port: u16) -> io::Result<Option<Arc<crate::cluster::Cluster>>> {
    if config.cluster_config.is_none() && !config.cluster_enabled {
        return Ok(None);
    }
    if port == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a cluster node needs a TCP port (not 0)",
        ));
    }
    crate::cluster::Cluster::open(config, port, crate::shard::now_ms())
        .map(|c| Some(Arc::new(c)))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

fn start_with(
    config: Config,
    listeners: Listeners,
    cluster: Option<Arc<crate::cluster::Cluster>>,
) -> io::Result<ServerHandle> {
    exit_on_server_thread_panic();
    enable_allocator_background_purge();
    if config.appendonly {
        crate::aof::manifest::check_dir(&config.dir, config.shards.max(1))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    }
    let addr = match &listeners.tcp {
        Some(l) => {
            l.set_nonblocking(true)?;
            l.local_addr()?
        }
        None => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let unixsocket = listeners
        .unix
        .as_ref()
        .map(|(_, p)| std::path::PathBuf::from(&**p));
    let shards = config.shards.max(1);
    let databases = config.databases.max(1);

    // Pinning is opt-in (`pin-threads yes`), and even then only when every
    // shard thread can have a core of its own. On a host whose cores the
    // clients share, a pinned thread woken on a core the client keeps busy
    // waits for it instead of running on the idle one; measured on 2 cores
    // with redis-benchmark beside a 2-shard server, XADD over 1000 keys
    // without pipelining: 55–61k/s pinned, 88–90k/s unpinned.
    let cores = if config.pin {
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        if cores.len() >= usize::from(shards) {
            cores
        } else {
            log::warn!(
                "pin-threads yes: {shards} shard threads but {} cores, so no thread is pinned",
                cores.len()
            );
            Vec::new()
        }
    } else {
        Vec::new()
    };

    let mut parts = Vec::new();
    let mut threads = Vec::new();
    for _ in 0..shards {
        let poll = mio::Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), crate::shard::WAKER)?);
        let (tx, rx) = crossbeam_channel::unbounded();
        let parked = Arc::new(AtomicBool::new(false));
        threads.push(Outbox {
            tx,
            waker,
            parked: parked.clone(),
        });
        parts.push((poll, rx, parked));
    }
    let acceptor_poll = mio::Poll::new()?;
    let acceptor_waker = Arc::new(mio::Waker::new(
        acceptor_poll.registry(),
        crate::io::acceptor::WAKER,
    )?);

    let tunables = Arc::new(crate::config::Tunables::from_config(&config));
    // A cluster node splits the slots it serves at start over its shards
    // (all slots when it serves none yet, as a fresh node).
    let slot_map = Arc::new(match &cluster {
        Some(c) => {
            let view = c.view();
            crate::route::slot::SlotMap::balanced(shards, |s| view.is_mine(s))
        }
        None => crate::route::slot::SlotMap::uniform(shards),
    });
    let shared = Arc::new(Shared {
        slot_map: slot_map.clone(),
        tunables: tunables.clone(),
        config_epoch: AtomicU64::new(0),
        config: RwLock::new(Config {
            port: addr.port(),
            ..config
        }),
        shards,
        databases,
        threads,
        thread_conns: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
        thread_stats: (0..shards).map(|_| ThreadStats::default()).collect(),
        acceptor_waker,
        clients: Mutex::new(HashMap::new()),
        next_client_id: AtomicU64::new(1),
        stats: ServerStats::default(),
        cmdstats: {
            let c = CmdStats::new(usize::from(shards));
            c.latency_tracking
                .store(config.latency_tracking, Ordering::Relaxed);
            c
        },
        started: Instant::now(),
        addr,
        unixsocket,
        run_id: random_hex40(),
        shutdown: AtomicBool::new(false),
        shutdown_requested: (Mutex::new(()), Condvar::new()),
        blocked_clients: Arc::new(AtomicU64::new(0)),
        monitors: Default::default(),
        startup_allocated_bytes: crate::alloc_stats::AllocStats::read().allocated,
        instant: crate::metrics::InstantMetrics::from_start(),
        slowlog: Arc::new(crate::slowlog::SlowLog::new(
            config.slowlog_log_slower_than_us,
            config.slowlog_max_len,
            crate::cmd::slowlog::redacted_args,
        )),
        cluster,
        scripts: Arc::new(crate::script::Registry::new(shards)),
    });
    // Shards see the cluster mode through their tunables (MIGRATE).
    shared.tunables.cluster_enabled.store(
        crate::cmd::cluster::is_cluster_mode(&shared),
        Ordering::Relaxed,
    );

    let mut shard_threads = Vec::new();
    let (ready_tx, ready_rx) = crossbeam_channel::unbounded();
    let tx_sync = Arc::new(crate::aof::load::TxSync::default());
    let dir = shared
        .config
        .read()
        .map(|c| c.dir.clone())
        .unwrap_or_default();
    for (i, (poll, rx, parked)) in parts.into_iter().enumerate() {
        let seed = crate::shard::ShardSeed {
            id: ShardId(i as u16),
            shards,
            databases,
            core: (!cores.is_empty()).then(|| cores[i % cores.len()]),
            poll,
            inbox: rx,
            parked,
            shared: shared.clone(),
            dir: dir.clone(),
            ready: ready_tx.clone(),
            tx_sync: tx_sync.clone(),
        };
        shard_threads.push(crate::shard::spawn_shard(seed)?);
    }
    drop(ready_tx);
    let loading = Instant::now();
    let mut load_error = None;
    let mut loaded = crate::aof::load::LoadStats::default();
    for _ in 0..shards {
        match ready_rx.recv() {
            Ok(Ok(st)) => {
                loaded.records += st.records;
                loaded.bytes += st.bytes;
            }
            Ok(Err(e)) => {
                load_error.get_or_insert(e);
            }
            Err(_) => {
                load_error.get_or_insert("a shard thread exited while loading".into());
            }
        }
    }
    if let Some(e) = load_error {
        shared.request_shutdown();
        for t in shard_threads {
            let _ = t.join();
        }
        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
    }
    if loaded.records > 0 {
        log::info!(
            "DB loaded from append only file: {} records ({} bytes) in {:.3} seconds",
            loaded.records,
            loaded.bytes,
            loading.elapsed().as_secs_f64()
        );
    }
    let bus = match &shared.cluster {
        Some(c) => {
            let cport = c.lock().me().cport;
            let ip = match addr.ip() {
                std::net::IpAddr::V4(ip) if ip.is_unspecified() => addr.ip(),
                ip => ip,
            };
            let bus_addr = SocketAddr::new(ip, cport);
            match crate::cluster::bus::spawn(shared.clone(), bus_addr) {
                Ok(t) => Some(t),
                // A static topology works without the bus (the nodes all
                // know each other from the file); they just do not learn
                // of slot moves.
                Err(e) if c.is_static() => {
                    log::warn!("cluster bus off: cannot listen on {bus_addr}: {e}");
                    None
                }
                Err(e) => {
                    shared.request_shutdown();
                    for t in shard_threads {
                        let _ = t.join();
                    }
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot listen on the cluster bus port {bus_addr}: {e}"),
                    ));
                }
            }
        }
        None => None,
    };
    let acceptor = crate::io::acceptor::spawn_acceptor(acceptor_poll, listeners, shared.clone())?;
    Ok(ServerHandle {
        shared,
        acceptor: Some(acceptor),
        shard_threads,
        bus,
    })
}
