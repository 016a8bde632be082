//! [`ShardDb`]: one shard's keyspace for every database, with its expiry and
//! scan indexes. Typed lookups live here, so `WRONGTYPE` is decided in one place.
//!
//! `ShardDb` is `!Send`: it is created on its shard thread and never leaves it.
//!
//! ```compile_fail
//! fn must_be_send<T: Send>() {}
//! must_be_send::<shardstream::shard::db::ShardDb>();
//! ```

use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use bytes::Bytes;

use crate::config::EvictionPolicy;
use crate::error::CmdError;
use crate::route::slot::{slot_of, ShardId};
use crate::stream::Stream;

/// `b` as a string value to store: a copy in an allocation of its own.
/// An argument is a slice of the connection's read buffer, which holds the
/// commands around it too; kept as it is, a stored value would keep that
/// whole buffer alive, and deleting (or evicting) the key would free nothing
/// while another key still shared it — `maxmemory` eviction then ran on and
/// emptied the keyspace. Large values are copied too: the copy costs less
/// than the read that brought them.
pub fn own_small(b: &Bytes) -> Bytes {
    Bytes::copy_from_slice(b)
}

/// A value stored under a key. `Clone` + `Send` so an AOF rewrite can copy a
/// shard's data and serialize it on another thread.
#[derive(Clone)]
pub enum Value {
    /// A string (GET/SET/INCR/APPEND).
    Str(Bytes),
    /// A stream (XADD/XRANGE/XREAD/...). Boxed: the struct is much larger than a string.
    Stream(Box<Stream>),
    /// A sorted set (ZADD/ZRANGE/ZPOPMIN/...). Boxed, as streams.
    Zset(Box<crate::zset::SortedSet>),
    /// A list (LPUSH/LRANGE/BLPOP/...).
    List(Box<crate::list::List>),
    /// A set (SADD/SMEMBERS/SINTER/...).
    Set(Box<crate::set::Set>),
}

impl Value {
    /// The name `TYPE` reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Stream(_) => "stream",
            Value::Zset(_) => "zset",
            Value::List(_) => "list",
            Value::Set(_) => "set",
        }
    }

    /// Approximate heap footprint in bytes (MEMORY USAGE).
    pub fn memory_usage_bytes(&self) -> usize {
        match self {
            Value::Str(b) => b.len(),
            Value::Stream(s) => s.memory_usage_bytes(),
            Value::Zset(z) => z.memory_usage_bytes(),
            Value::List(l) => l.memory_usage_bytes(),
            Value::Set(s) => s.memory_usage_bytes(),
        }
    }
}

/// A key's value and its expiry.
pub struct Entry {
    pub value: Value,
    /// Absolute expiry, ms since the Unix epoch; `None` = persistent.
    pub expire_at_ms: Option<u64>,
    /// When and how often the key was used (eviction under `maxmemory`).
    pub access: Access,
}

/// A key's use, for `maxmemory-policy`'s approximate LRU and LFU (Redis
/// keeps the same in `robj.lru`: 24 bits of either a clock or an 8-bit
/// logarithmic counter plus a minutes clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Last access, ms since the Unix epoch (LRU).
    pub last_access_ms: u64,
    /// Logarithmic access counter (LFU), 5 for a new key as in Redis.
    pub lfu_counter: u8,
}

/// Most keys [`ShardDb::lfu_draw`] remembers for one command.
const LFU_SEEN_MAX: usize = 64;

/// Redis's `LFU_INIT_VAL`: a new key's counter, so it is not evicted at once.
const LFU_INIT_VAL: u8 = 5;

/// The LFU settings: `lfu-log-factor` and `lfu-decay-time` (CONFIG SET).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LfuParams {
    /// `lfu-log-factor` (default 10): how slowly the counter grows.
    pub log_factor: f64,
    /// `lfu-decay-time` in ms (default 1 minute): the counter drops by one
    /// per period without access; 0: it never drops.
    pub decay_ms: u64,
}

impl Default for LfuParams {
    /// Redis's defaults.
    fn default() -> Self {
        LfuParams {
            log_factor: 10.0,
            decay_ms: 60_000,
        }
    }
}

impl Access {
    /// A key created at `now_ms`.
    pub fn new(now_ms: u64) -> Access {
        Access {
            last_access_ms: now_ms,
            lfu_counter: LFU_INIT_VAL,
        }
    }

    /// The LFU counter after decay for the time since the last access.
    ///
    /// # Source
    /// `LFUDecrAndReturn`, redis/src/evict.c.
    pub fn lfu_decayed(&self, now_ms: u64, lfu: LfuParams) -> u8 {
        let periods = now_ms
            .saturating_sub(self.last_access_ms)
            .checked_div(lfu.decay_ms)
            .unwrap_or(0);
        self.lfu_counter
            .saturating_sub(u8::try_from(periods).unwrap_or(u8::MAX))
    }

    /// Record one access at `now_ms`; `rand01` is a uniform sample in [0, 1).
    ///
    /// # Source
    /// `updateLFU` / `LFULogIncr`, redis/src/evict.c: the counter grows with
    /// probability `1 / ((counter - LFU_INIT_VAL) * lfu-log-factor + 1)`.
    pub fn touch(&mut self, now_ms: u64, rand01: f64, lfu: LfuParams) {
        let mut counter = self.lfu_decayed(now_ms, lfu);
        if counter < u8::MAX {
            let base = f64::from(counter.saturating_sub(LFU_INIT_VAL));
            if rand01 < 1.0 / (base * lfu.log_factor + 1.0) {
                counter += 1;
            }
        }
        self.lfu_counter = counter;
        self.last_access_ms = now_ms;
    }
}

/// Position of a key in SCAN order: (hash slot, 48-bit key hash).
///
/// SCAN cursors encode this position (`slot << 48 | hash48`), so a cursor
/// names a shard (shards own contiguous slot ranges) and a place inside it that
/// stays valid however the keyspace changes between calls.
pub type ScanPos = (u16, u64);

/// Stable 48-bit hash of a key for SCAN ordering.
pub fn scan_hash(key: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish() >> 16
}

/// One database (`SELECT n`) inside one shard.
#[derive(Default)]
pub struct Keyspace {
    /// Keyed by aHash with a per-map random seed: every command hashes its
    /// key here at least once, and SipHash-1-3 (std's default) cost ~300
    /// instructions of the ~4,000 a pipelined GET takes; aHash keeps a
    /// random key, so client-chosen keys still cannot force collisions.
    map: HashMap<Bytes, Entry, ahash::RandomState>,
    /// Keys with a TTL, ordered by deadline: active expiry pops from the front.
    /// Changed only through [`add_expire`](Self::add_expire) and
    /// [`remove_expire`](Self::remove_expire).
    expires: BTreeSet<(u64, Bytes)>,
    /// Sum of the deadlines in `expires`, ms since the epoch (INFO `avg_ttl`).
    expires_sum_ms: u128,
    /// Every key in SCAN order: (slot, hash48, key).
    scan_index: BTreeSet<(u16, u64, Bytes)>,
}

impl Keyspace {
    fn index_key(key: &Bytes) -> (u16, u64, Bytes) {
        (slot_of(key).0, scan_hash(key), key.clone())
    }

    /// Number of keys (expired-but-not-yet-collected keys included, as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    fn add_expire(&mut self, at: u64, key: &Bytes) {
        if self.expires.insert((at, key.clone())) {
            self.expires_sum_ms += u128::from(at);
        }
    }

    fn remove_expire(&mut self, at: u64, key: &Bytes) {
        if self.expires.remove(&(at, key.clone())) {
            self.expires_sum_ms -= u128::from(at);
        }
    }

    /// The keys with a TTL that has not run out at `now_ms`, and their
    /// average time to live, ms (INFO keyspace `avg_ttl`: exact, where Redis
    /// estimates it from its expiry cycle's samples). Keys past their
    /// deadline but not collected yet (at the front of `expires`) are left
    /// out, as Redis's samples leave them.
    pub fn ttl_stats(&self, now_ms: u64) -> (u64, u64) {
        let (mut gone, mut gone_sum) = (0u64, 0u128);
        for (at, _) in self.expires.iter().take_while(|(at, _)| *at <= now_ms) {
            gone += 1;
            gone_sum += u128::from(*at);
        }
        let live = self.expires.len() as u64 - gone;
        if live == 0 {
            return (0, 0);
        }
        let remaining = self.expires_sum_ms - gone_sum - u128::from(live) * u128::from(now_ms);
        (live, (remaining / u128::from(live)) as u64)
    }

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (key, entry) = self.map.remove_entry(key)?;
        if let Some(at) = entry.expire_at_ms {
            self.remove_expire(at, &key);
        }
        self.scan_index.remove(&Self::index_key(&key));
        Some(entry)
    }

    fn is_expired(&self, key: &[u8], now_ms: u64) -> bool {
        // No key of this database has a TTL (the common case): no lookup.
        if self.expires.is_empty() {
            return false;
        }
        matches!(self.map.get(key), Some(Entry { expire_at_ms: Some(at), .. }) if *at <= now_ms)
    }
}

/// Counters a shard keeps for INFO.
#[derive(Default, Clone, Debug)]
pub struct ShardStats {
    /// Commands executed on this shard.
    pub ops: u64,
    /// Keys removed by lazy or active expiry.
    pub expired_keys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// Changes made (INFO `rdb_changes_since_last_save`, Redis's `dirty`):
    /// one per key modification WATCH sees, one per consumer-group change
    /// Redis propagates (see [`ShardDb::touch_key`]).
    pub dirty: u64,
    /// Delayed entries (XSCHEDULE) moved into their streams.
    pub delayed_delivered: u64,
    /// Delayed entries dropped at their due time (the key held another type).
    pub delayed_dropped: u64,
}

/// One shard's data: a [`Keyspace`] per database. Lives and dies on its shard thread.
pub struct ShardDb {
    pub id: ShardId,
    /// Total number of shards in this server.
    pub shards: u16,
    dbs: Vec<Keyspace>,
    pub stats: ShardStats,
    /// Parked XREAD / XREADGROUP waiters on this shard's keys.
    pub blocking: crate::shard::blocking::Waiters,
    /// Which shard owns each slot on this server (SCAN ranges).
    pub slot_map: std::sync::Arc<crate::route::slot::SlotMap>,
    /// Run-time settings shared with CONFIG SET (stream node caps).
    pub tunables: std::sync::Arc<crate::config::Tunables>,
    /// Effect records for the append-only file (see [`crate::aof`]).
    pub aof: crate::aof::AofLog,
    /// Scripts and function libraries shared by every shard (see [`crate::script`]).
    pub scripts: std::sync::Arc<crate::script::Registry>,
    /// The server's MONITOR clients (a script's calls are shown to them).
    pub monitors: std::sync::Arc<crate::monitor::Monitors>,
    /// The server's slow log (a script's slow calls are recorded there).
    pub slowlog: std::sync::Arc<crate::slowlog::SlowLog>,
    /// Watched keys and their versions (WATCH; see [`crate::shard::watch`]).
    pub watch: crate::shard::watch::WatchTable,
    /// Active expiry runs on the shard's timer (`DEBUG SET-ACTIVE-EXPIRE 0` stops it).
    pub active_expire_enabled: bool,
    /// Requests that work done here hands on to another shard, with the
    /// database and the reply address (a cross-shard BLMOVE served here
    /// forwards the push of its element to the destination's shard, which
    /// answers the client). The shard loop sends them each iteration.
    pub forward: Vec<(
        ShardId,
        usize,
        crate::shard::msg::ReplyTo,
        crate::shard::msg::ShardReq,
    )>,
    /// Stream entries waiting for their due time (XSCHEDULE; see
    /// [`crate::shard::delayed`]).
    pub delayed: crate::delayed::Delayed,
    /// A cross-shard transaction asked to hold this shard (set by the job
    /// that asked; the shard loop enters its held loop right after it).
    pub hold: Option<crate::shard::hold::Hold>,
    /// Cross-shard transactions this shard coordinates, left by their jobs
    /// for the shard loop to run (see [`crate::shard::hold::Coordinate`]).
    pub coordinate: Vec<crate::shard::hold::Coordinate>,
    /// The client whose command runs now is in `CLIENT NO-TOUCH` mode
    /// (Redis 7.2+): lookups leave access times and LFU counters alone,
    /// except TOUCH's ([`touch`](Self::touch)). Set around each request by
    /// [`crate::shard::msg::apply_as_client`].
    pub no_touch: bool,
    /// Keys whose LFU counter the running command moved (LFU policies only).
    lfu_seen: Vec<(usize, Bytes)>,
    /// Sequence number of the last cross-shard transaction this shard
    /// coordinated (its AOF blocks are tagged with it); resumed after a restart.
    pub tx_seq: u64,
    /// MIGRATE's open sockets to target instances (see [`crate::migrate`]).
    pub migrate_sockets: crate::migrate::SocketCache,
    /// The latest time a command passed in, ms (creation time of new keys).
    clock_ms: u64,
    /// xorshift64 state for LFU increments and eviction sampling.
    rng: u64,
    _not_send: PhantomData<*const ()>,
}

impl ShardDb {
    /// An empty shard with `databases` databases.
    pub fn new(id: ShardId, shards: u16, databases: usize) -> Self {
        ShardDb {
            id,
            shards,
            dbs: (0..databases.max(1)).map(|_| Keyspace::default()).collect(),
            stats: ShardStats::default(),
            blocking: Default::default(),
            tunables: Default::default(),
            slot_map: std::sync::Arc::new(crate::route::slot::SlotMap::uniform(shards)),
            aof: Default::default(),
            scripts: Default::default(),
            monitors: Default::default(),
            slowlog: Default::default(),
            active_expire_enabled: true,
            forward: Vec::new(),
            delayed: Default::default(),
            watch: Default::default(),
            hold: None,
            coordinate: Vec::new(),
            no_touch: false,
            lfu_seen: Vec::new(),
            tx_seq: 0,
            migrate_sockets: Default::default(),
            clock_ms: 0,
            rng: 0x9E37_79B9_7F4A_7C15 ^ u64::from(id.0),
            _not_send: PhantomData,
        }
    }

    /// Record an effect for the append-only file: `args` is a command that,
    /// replayed on database `cx.db` at time `cx.now_ms`, redoes exactly what
    /// the command being applied just did. A no-op when AOF is off.
    pub fn log_effect(&mut self, cx: &crate::shard::msg::ExecCtx, args: &[&[u8]]) {
        self.aof.record(cx.db, cx.now_ms, args);
    }

    /// Record the whole current state of string key `key` as an effect:
    /// `SET key value [PXAT deadline]`, or `DEL key` when it is gone. Used by
    /// string commands whose effect is simplest stated as the result (INCR,
    /// APPEND, INCRBYFLOAT, SET with relative TTLs...).
    pub fn log_string_state(&mut self, cx: &crate::shard::msg::ExecCtx, key: &[u8]) {
        if !self.aof.is_enabled() {
            return;
        }
        let (value, at) = match self.ks(cx.db).map.get(key) {
            Some(Entry {
                value: Value::Str(v),
                expire_at_ms,
                ..
            }) => (v.clone(), *expire_at_ms),
            Some(_) => return,
            None => {
                self.log_effect(cx, &[b"DEL", key]);
                return;
            }
        };
        match at {
            Some(at) => {
                let mut n = itoa::Buffer::new();
                self.log_effect(cx, &[b"SET", key, &value, b"PXAT", n.format(at).as_bytes()])
            }
            None => self.log_effect(cx, &[b"SET", key, &value]),
        }
    }

    /// Record the whole current state of `key` (any type, with its TTL) as
    /// effects: `DEL key`, then the records an AOF rewrite writes for it.
    /// Used where the simplest statement of the effect is the result (a
    /// value moved in by RENAME or COPY).
    pub fn log_key_state(&mut self, cx: &crate::shard::msg::ExecCtx, key: &[u8]) {
        if !self.aof.is_enabled() {
            return;
        }
        self.log_effect(cx, &[b"DEL", key]);
        let mut rec = Vec::new();
        if let Some(e) = self.ks(cx.db).map.get(key) {
            let mut out = Vec::new();
            let _ = crate::aof::rewrite::encode_key(
                &mut rec,
                &mut out,
                key,
                &e.value,
                e.expire_at_ms,
                cx.now_ms,
            );
            out.extend_from_slice(&rec);
            rec = out;
        }
        self.aof.append_encoded(&rec);
    }

    /// Record the TTL state of `key` as an effect: `PEXPIREAT key deadline`,
    /// `PERSIST key`, or `DEL key` when it is gone.
    pub fn log_ttl_state(&mut self, cx: &crate::shard::msg::ExecCtx, key: &[u8]) {
        if !self.aof.is_enabled() {
            return;
        }
        match self.ks(cx.db).map.get(key).map(|e| e.expire_at_ms) {
            None => self.log_effect(cx, &[b"DEL", key]),
            Some(None) => self.log_effect(cx, &[b"PERSIST", key]),
            Some(Some(at)) => {
                let mut n = itoa::Buffer::new();
                self.log_effect(cx, &[b"PEXPIREAT", key, n.format(at).as_bytes()])
            }
        }
    }

    /// Stream node caps currently configured (`stream-node-max-entries/bytes`).
    pub fn node_limits(&self) -> crate::stream::NodeLimits {
        self.tunables.node_limits()
    }

    /// Replace every database's keys with `other`'s (DEBUG RELOAD), waking
    /// readers blocked on this shard so they re-check what they wait for.
    pub fn take_keyspaces(&mut self, other: ShardDb) {
        for (db, ks) in self.dbs.iter().enumerate() {
            self.watch.touch_db(db, |k| ks.map.contains_key(k));
        }
        self.dbs = other.dbs;
        for db in 0..self.dbs.len() {
            self.blocking.mark_db_ready(db);
        }
    }

    /// Number of databases.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// The keyspace of database `db` (read-only: no lazy expiry).
    pub fn keyspace(&self, db: usize) -> &Keyspace {
        &self.dbs[db.min(self.dbs.len() - 1)]
    }

    fn ks(&mut self, db: usize) -> &mut Keyspace {
        let n = self.dbs.len() - 1;
        &mut self.dbs[db.min(n)]
    }

    /// A command runs at `now_ms`: the time new keys are created at and
    /// writes count as accesses at (commands that look a key up set it
    /// through the lookup).
    pub fn set_clock(&mut self, now_ms: u64) {
        self.clock_ms = now_ms;
    }

    /// Drop `key` if its TTL has passed (lazy expiry). Returns whether it was removed.
    pub fn expire_if_needed(&mut self, db: usize, key: &[u8], now_ms: u64) -> bool {
        let ks = self.ks(db);
        if ks.is_expired(key, now_ms) {
            ks.remove(key);
            self.stats.expired_keys += 1;
            // Readers blocked on an expired stream are woken as for DEL.
            self.blocking.mark_ready(db, key);
            // Redis propagates an expiry as DEL; replay then never depends on
            // when the key would have expired.
            self.aof.record(db, now_ms, &[b"DEL", key]);
            true
        } else {
            false
        }
    }

    /// The live entry under `key`, after lazy expiry.
    pub fn get(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&Entry> {
        // A read: access time and LFU move, WATCH is not told.
        self.expire_if_needed(db, key, now_ms);
        self.get_mut_untracked(db, key, now_ms).map(|e| &*e)
    }

    /// Record a modification of `key`: WATCH sees it and the change count
    /// (INFO `rdb_changes_since_last_save`) goes up, as Redis's
    /// `signalModifiedKey` + `server.dirty++`.
    pub fn touch_key(&mut self, db: usize, key: &[u8]) {
        self.watch.touch(db, key);
        self.stats.dirty += 1;
    }

    /// The live entry under `key` for modification, after lazy expiry.
    /// Changing `expire_at_ms` through this reference is not allowed: use [`set_expire`](Self::set_expire).
    pub fn get_mut(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.expire_if_needed(db, key, now_ms);
        // Mutable access is how commands write: watchers see a change.
        self.touch_key(db, key);
        self.get_mut_untracked(db, key, now_ms)
    }

    /// [`get_mut`](Self::get_mut) without telling WATCH (consumer-group
    /// commands: Redis does not count them as changes of the key).
    fn get_mut_untracked(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.clock_ms = now_ms;
        if self.no_touch {
            return self.ks(db).map.get_mut(key);
        }
        self.touch_access(db, key, now_ms)
    }

    /// Record an access of `key` (Redis's `lookupKey` without
    /// `LOOKUP_NOTOUCH`), whatever the client's CLIENT NO-TOUCH mode: what
    /// TOUCH does. The LFU counter moves only under an LFU policy (it costs
    /// a random draw); otherwise only the access time.
    fn touch_access(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let lfu = self.tunables.eviction_policy().is_lfu();
        let draw = self.lfu_draw(lfu, db, key);
        let e = self.ks(db).map.get_mut(key)?;
        match draw {
            Some((r, params)) => e.access.touch(now_ms, r, params),
            None => e.access.last_access_ms = now_ms,
        }
        Some(e)
    }

    /// Under an LFU policy (`lfu`), the random draw and settings for the
    /// access of `key` that moves its counter: once per command (Redis looks
    /// a key up once or twice per command; ours may look it up more often).
    /// Notes the key when it exists. See [`begin_command`](Self::begin_command).
    fn lfu_draw(&mut self, lfu: bool, db: usize, key: &[u8]) -> Option<(f64, LfuParams)> {
        if !lfu || self.lfu_seen.iter().any(|(d, k)| *d == db && k[..] == *key) {
            return None;
        }
        if self.keyspace(db).map.contains_key(key) {
            // Bounded whoever forgets `begin_command`: a command's repeated
            // lookups of a key come close together.
            if self.lfu_seen.len() >= LFU_SEEN_MAX {
                self.lfu_seen.clear();
            }
            self.lfu_seen.push((db, Bytes::copy_from_slice(key)));
        }
        Some((self.rand01(), self.tunables.lfu()))
    }

    /// Run `f` as a request of a client in CLIENT NO-TOUCH mode `no_touch`
    /// (restored afterwards, so a request run inside another keeps the
    /// outer one's mode), as a command of its own for LFU counting.
    pub fn as_client<R>(&mut self, no_touch: bool, f: impl FnOnce(&mut Self) -> R) -> R {
        let outer = std::mem::replace(&mut self.no_touch, no_touch);
        self.begin_command();
        let r = f(self);
        self.no_touch = outer;
        r
    }

    /// A command starts: its first access of each key moves the key's LFU
    /// counter again (see [`lfu_draw`](Self::lfu_draw)).
    pub fn begin_command(&mut self) {
        if !self.lfu_seen.is_empty() {
            self.lfu_seen.clear();
        }
    }

    /// Count a keyspace hit or miss (INFO stats `keyspace_hits` / `keyspace_misses`).
    pub fn count_lookup(&mut self, hit: bool) {
        if hit {
            self.stats.keyspace_hits += 1;
        } else {
            self.stats.keyspace_misses += 1;
        }
    }

    /// EXEC's WATCH check for connection `conn` on this shard (see
    /// [`crate::shard::watch`]): whether a watched key changed; forgets the
    /// connection's watches here either way.
    pub fn take_watch_dirty(&mut self, conn: u64, now_ms: u64) -> bool {
        let dbs = &self.dbs;
        self.watch.take_dirty(conn, |db, key| {
            let ks = &dbs[db.min(dbs.len() - 1)];
            ks.map.contains_key(key) && !ks.is_expired(key, now_ms)
        })
    }

    /// Whether `key` exists and has not expired, without lazy expiry (no side effects).
    pub fn is_live(&self, db: usize, key: &[u8], now_ms: u64) -> bool {
        let ks = self.keyspace(db);
        ks.map.contains_key(key) && !ks.is_expired(key, now_ms)
    }

    /// The live entry under `key` after lazy expiry, without recording an
    /// access (Redis's `LOOKUP_NOTOUCH`: OBJECT IDLETIME / FREQ).
    pub fn peek(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.expire_if_needed(db, key, now_ms);
        self.keyspace(db).map.get(key)
    }

    /// RESTORE's `IDLETIME seconds` / `FREQ count` for the new `key`, as
    /// the eviction policy reads them: under an LFU policy FREQ sets the
    /// counter (IDLETIME is ignored), otherwise IDLETIME sets the last
    /// access (FREQ is ignored). Not an access itself.
    /// # Source
    /// `objectSetLRUOrLFU`, redis/src/object.c.
    pub fn set_restored_access(
        &mut self,
        db: usize,
        key: &[u8],
        idle_s: Option<u64>,
        freq: Option<u8>,
        now_ms: u64,
    ) {
        let lfu = self.tunables.eviction_policy().is_lfu();
        let Some(e) = self.ks(db).map.get_mut(key) else {
            return;
        };
        match (lfu, idle_s, freq) {
            (true, _, Some(freq)) => {
                e.access.lfu_counter = freq;
                e.access.last_access_ms = now_ms;
            }
            (false, Some(idle), _) => {
                e.access.last_access_ms = now_ms.saturating_sub(idle.saturating_mul(1000));
            }
            _ => {}
        }
    }

    /// `TOUCH`'s lookup: whether a live key exists, recording an access
    /// even for a client in CLIENT NO-TOUCH mode (Redis exempts TOUCH).
    pub fn touch(&mut self, db: usize, key: &[u8], now_ms: u64) -> bool {
        self.expire_if_needed(db, key, now_ms);
        self.clock_ms = now_ms;
        self.touch_access(db, key, now_ms).is_some()
    }

    /// Whether a live key exists.
    pub fn exists(&mut self, db: usize, key: &[u8], now_ms: u64) -> bool {
        self.get(db, key, now_ms).is_some()
    }

    /// The value under `key` (after lazy expiry) as `pick` sees it:
    /// `Ok(None)` when missing, `WrongType` when `pick` refuses its type
    /// (Redis's `lookupKeyRead` + `checkType`). The typed getters below.
    fn typed<T: ?Sized>(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
        pick: fn(&Value) -> Option<&T>,
    ) -> Result<Option<&T>, CmdError> {
        match self.get(db, key, now_ms) {
            None => Ok(None),
            // A match, not `ok_or`: an eagerly built error is dropped on
            // every hit, and this runs on every typed read (GET, XRANGE, ...).
            Some(e) => match pick(&e.value) {
                Some(v) => Ok(Some(v)),
                None => Err(CmdError::WrongType),
            },
        }
    }

    /// [`typed`](Self::typed) for writing: the type is checked first (`is`),
    /// so a key of another type is not touched (WATCH sees no change), then
    /// the key is taken as a write.
    fn typed_mut<T: ?Sized>(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
        is: fn(&Value) -> bool,
        pick: fn(&mut Value) -> Option<&mut T>,
    ) -> Result<Option<&mut T>, CmdError> {
        match self.get(db, key, now_ms) {
            None => return Ok(None),
            Some(e) if !is(&e.value) => return Err(CmdError::WrongType),
            Some(_) => {}
        }
        Ok(self
            .get_mut(db, key, now_ms)
            .and_then(|e| pick(&mut e.value)))
    }

    /// The string under `key`: `Ok(None)` when missing, `WrongType` when not a string.
    pub fn get_str(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&Bytes>, CmdError> {
        self.typed(db, key, now_ms, |v| match v {
            Value::Str(s) => Some(s),
            _ => None,
        })
    }

    /// The stream under `key` (after lazy expiry): `Ok(None)` when missing,
    /// `WrongType` when the key holds another type.
    ///
    /// # Source
    /// `lookupKeyRead` + `checkType(c, o, OBJ_STREAM)`.
    pub fn get_stream(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&Stream>, CmdError> {
        self.typed(db, key, now_ms, |v| match v {
            Value::Stream(s) => Some(&**s),
            _ => None,
        })
    }

    /// The sorted set under `key` (after lazy expiry): `Ok(None)` when
    /// missing, `WrongType` when the key holds another type.
    ///
    /// # Source
    /// `lookupKeyRead` + `checkType(c, o, OBJ_ZSET)`.
    pub fn get_zset(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&crate::zset::SortedSet>, CmdError> {
        self.typed(db, key, now_ms, |v| match v {
            Value::Zset(z) => Some(&**z),
            _ => None,
        })
    }

    /// The sorted set under `key` for writing (counts as a change for
    /// WATCH); never creates the key.
    ///
    /// # Errors
    /// `WrongType` when the key holds another type.
    pub fn get_zset_mut(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&mut crate::zset::SortedSet>, CmdError> {
        self.typed_mut(
            db,
            key,
            now_ms,
            |v| matches!(v, Value::Zset(_)),
            |v| match v {
                Value::Zset(z) => Some(&mut **z),
                _ => None,
            },
        )
    }

    /// Type check of `key` for a sorted-set command without touching it:
    /// `Ok(true)` when it holds a sorted set, `Ok(false)` when missing.
    ///
    /// # Errors
    /// `WrongType` when the key holds another type.
    pub fn check_zset(&mut self, db: usize, key: &[u8], now_ms: u64) -> Result<bool, CmdError> {
        self.get_zset(db, key, now_ms).map(|z| z.is_some())
    }

    /// The list under `key` (after lazy expiry): `Ok(None)` when missing,
    /// `WrongType` when the key holds another type.
    ///
    /// # Source
    /// `lookupKeyRead` + `checkType(c, o, OBJ_LIST)`.
    pub fn get_list(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&crate::list::List>, CmdError> {
        self.typed(db, key, now_ms, |v| match v {
            Value::List(l) => Some(&**l),
            _ => None,
        })
    }

    /// Mutable form of [`get_list`](Self::get_list) (a write: WATCH sees it);
    /// never creates the key.
    pub fn get_list_mut(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&mut crate::list::List>, CmdError> {
        self.typed_mut(
            db,
            key,
            now_ms,
            |v| matches!(v, Value::List(_)),
            |v| match v {
                Value::List(l) => Some(&mut **l),
                _ => None,
            },
        )
    }

    /// The set under `key` (after lazy expiry): `Ok(None)` when missing,
    /// `WrongType` when the key holds another type.
    ///
    /// # Source
    /// `lookupKeyRead` + `checkType(c, o, OBJ_SET)`.
    pub fn get_set(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&crate::set::Set>, CmdError> {
        self.typed(db, key, now_ms, |v| match v {
            Value::Set(s) => Some(&**s),
            _ => None,
        })
    }

    /// Mutable form of [`get_set`](Self::get_set) (a write: WATCH sees it);
    /// never creates the key.
    pub fn get_set_mut(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&mut crate::set::Set>, CmdError> {
        self.typed_mut(
            db,
            key,
            now_ms,
            |v| matches!(v, Value::Set(_)),
            |v| match v {
                Value::Set(s) => Some(&mut **s),
                _ => None,
            },
        )
    }

    /// The set under `key` as it is: no lazy expiry, no access tracking, so
    /// several can be borrowed at once (set algebra). Callers run a typed
    /// lookup ([`get_set`](Self::get_set)) of each key first.
    pub fn peek_set(&self, db: usize, key: &[u8]) -> Option<&crate::set::Set> {
        match self.keyspace(db).map.get(key) {
            Some(Entry {
                value: Value::Set(s),
                ..
            }) => Some(s),
            _ => None,
        }
    }

    /// Mutable form of [`get_stream`](Self::get_stream); never creates the key.
    /// Does not count as a write for WATCH: as in Redis, only XADD, XDEL,
    /// XTRIM (and creating or deleting the key) touch a watched stream;
    /// consumer-group commands do not. Those call `watch.touch` themselves.
    ///
    /// # Errors
    /// `WrongType` when the key holds another type.
    pub fn get_stream_mut(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&mut Stream>, CmdError> {
        self.expire_if_needed(db, key, now_ms);
        match self.get_mut_untracked(db, key, now_ms) {
            None => Ok(None),
            Some(Entry {
                value: Value::Stream(s),
                ..
            }) => Ok(Some(s)),
            Some(_) => Err(CmdError::WrongType),
        }
    }

    /// The stream under `key` for writing; when the key is missing and
    /// `create` is true, an empty persistent stream is stored first (XADD
    /// without NOMKSTREAM), else `Ok(None)`.
    ///
    /// # Errors
    /// `WrongType` when the key holds another type (nothing is created).
    /// # Source
    /// `streamTypeLookupWriteOrCreate`.
    pub fn stream_for_write(
        &mut self,
        db: usize,
        key: &[u8],
        create: bool,
        now_ms: u64,
    ) -> Result<Option<&mut Stream>, CmdError> {
        let exists = match self.get(db, key, now_ms) {
            None => false,
            Some(Entry {
                value: Value::Stream(_),
                ..
            }) => true,
            Some(_) => return Err(CmdError::WrongType),
        };
        if !exists {
            if !create {
                return Ok(None);
            }
            self.set(
                db,
                Bytes::copy_from_slice(key),
                Value::Stream(Box::default()),
                None,
            );
        }
        self.get_stream_mut(db, key, now_ms)
    }

    /// Store `value` under `key` with the given expiry, replacing any old value
    /// (and its TTL). Returns the old entry.
    ///
    /// Arguments arrive as zero-copy slices of a connection's read buffer; a
    /// stored key or string is copied into an allocation of its own, as
    /// Redis copies into an sds, so that it neither pins the read buffer
    /// (shared with the commands around it, whatever the value's size) nor
    /// shares its reference count with the thread that read it (see
    /// [`own_small`]).
    pub fn set(
        &mut self,
        db: usize,
        key: Bytes,
        value: Value,
        expire_at_ms: Option<u64>,
    ) -> Option<Entry> {
        let value = match value {
            Value::Str(s) => Value::Str(own_small(&s)),
            v => v,
        };
        self.set_owned(db, key, value, expire_at_ms)
    }

    /// [`set`](Self::set) for a value that is already an allocation of its
    /// own (a string made by [`own_small`]): stored as it is.
    pub fn set_owned(
        &mut self,
        db: usize,
        key: Bytes,
        value: Value,
        expire_at_ms: Option<u64>,
    ) -> Option<Entry> {
        self.touch_key(db, &key);
        let created_ms = self.clock_ms;
        // A write is an access (Redis's lookupKeyWrite), as in `get_mut`.
        let lfu = self.tunables.eviction_policy().is_lfu();
        let draw = self.lfu_draw(lfu, db, &key);
        let no_touch = self.no_touch;
        let ks = self.ks(db);
        if let Some(e) = ks.map.get_mut(&key) {
            // Overwrite in place: the key keeps its place in the scan index.
            let old_at = std::mem::replace(&mut e.expire_at_ms, expire_at_ms);
            let old_value = std::mem::replace(&mut e.value, value);
            let access = e.access;
            // The new value is a new object: under LRU its access time is
            // now; under LFU it keeps the counter, which the write's lookup
            // moves unless the client is in CLIENT NO-TOUCH mode (Redis's
            // `dbSetValue` copying `old->lru`).
            match draw {
                Some(_) if no_touch => {}
                Some((r, params)) => e.access.touch(created_ms, r, params),
                // Under LFU, counted already by this command's lookup.
                None if lfu => {}
                None => e.access.last_access_ms = created_ms,
            }
            if old_at != expire_at_ms {
                if let Some(at) = old_at {
                    ks.remove_expire(at, &key);
                }
                if let Some(at) = expire_at_ms {
                    ks.add_expire(at, &key);
                }
            }
            // A replaced stream wakes its blocked XREADGROUP readers (with an error).
            self.blocking.mark_ready(db, &key);
            return Some(Entry {
                value: old_value,
                expire_at_ms: old_at,
                access,
            });
        }
        let key = Bytes::copy_from_slice(&key);
        if let Some(at) = expire_at_ms {
            ks.add_expire(at, &key);
        }
        ks.scan_index.insert(Keyspace::index_key(&key));
        ks.map.insert(
            key,
            Entry {
                value,
                expire_at_ms,
                access: Access::new(created_ms),
            },
        );
        None
    }

    /// Delete `key`; returns the removed entry (expired keys count as missing).
    pub fn remove(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<Entry> {
        if self.expire_if_needed(db, key, now_ms) {
            return None;
        }
        let old = self.ks(db).remove(key);
        if old.is_some() {
            self.touch_key(db, key);
            // Blocked XREADGROUP readers of a deleted stream get an error.
            self.blocking.mark_ready(db, key);
        }
        old
    }

    /// Set or clear the TTL of an existing key. Returns false when the key is missing.
    pub fn set_expire(&mut self, db: usize, key: &[u8], expire_at_ms: Option<u64>) -> bool {
        if self.ks(db).map.contains_key(key) {
            self.touch_key(db, key);
        }
        let ks = self.ks(db);
        let Some((k, entry)) = ks.map.get_key_value(key) else {
            return false;
        };
        let k = k.clone();
        let old = entry.expire_at_ms;
        if let Some(at) = old {
            ks.remove_expire(at, &k);
        }
        if let Some(at) = expire_at_ms {
            ks.add_expire(at, &k);
        }
        if let Some(e) = ks.map.get_mut(&k) {
            e.expire_at_ms = expire_at_ms;
        }
        true
    }

    /// Next xorshift64 value.
    fn next_rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// A pseudo-random number (ZRANDMEMBER's picks; not for security).
    pub fn rand_u64(&mut self) -> u64 {
        self.next_rand()
    }

    /// A uniform sample in [0, 1).
    fn rand01(&mut self) -> f64 {
        (self.next_rand() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One randomly placed key of database `db` that `policy` may evict
    /// (any key, or only keys with a TTL for `volatile-*`): the first key at
    /// or after a random position of the scan (or expiry) index.
    ///
    /// Keys hash uniformly over the index, so a random position picks keys
    /// about uniformly. `volatile-*` draws from the same index and keeps a
    /// key with a TTL (deadlines are far from uniform, so drawing a random
    /// deadline would pick the key after the widest gap again and again);
    /// only when a few draws find none does it take a random position in
    /// the expiry index.
    fn sample_key(&mut self, db: usize, policy: EvictionPolicy) -> Option<Bytes> {
        for _ in 0..8 {
            let r = self.next_rand();
            let ks = &self.dbs[db];
            if policy.volatile_only() && ks.expires.is_empty() {
                return None;
            }
            let (lo, hi) = (ks.scan_index.first()?, ks.scan_index.last()?);
            let slot = lo.0 + (r % u64::from(hi.0 - lo.0 + 1)) as u16;
            let pos = (slot, (r >> 16) & ((1 << 48) - 1), Bytes::new());
            let hit = ks.scan_index.range(pos..).next();
            let key = hit.or(ks.scan_index.first()).map(|(_, _, k)| k)?;
            if !policy.volatile_only() || ks.map.get(key).is_some_and(|e| e.expire_at_ms.is_some())
            {
                return Some(key.clone());
            }
        }
        let r = self.next_rand();
        let ks = &self.dbs[db];
        let (lo, hi) = (ks.expires.first()?.0, ks.expires.last()?.0);
        let at = lo + r % (hi - lo).saturating_add(1).max(1);
        let hit = ks.expires.range((at, Bytes::new())..).next();
        hit.or(ks.expires.first()).map(|(_, k)| k.clone())
    }

    /// Evict up to `max_keys` keys as `policy` says, each chosen as the best
    /// of `samples` sampled keys per database (the least recently used, the
    /// least frequently used, the nearest expiry, or any for `*-random`).
    /// Each eviction is a deletion: logged to the AOF as `DEL` and waking
    /// blocked readers. Returns how many keys were evicted (0: nothing the
    /// policy may evict).
    ///
    /// # Source
    /// `performEvictions` / `evictionPoolPopulate`, redis/src/evict.c: the
    /// same sampled approximation, without the pool kept between calls.
    pub fn evict(
        &mut self,
        policy: EvictionPolicy,
        samples: usize,
        now_ms: u64,
        max_keys: usize,
    ) -> usize {
        self.evict_bytes(policy, samples, now_ms, max_keys, usize::MAX)
            .0
    }

    /// [`evict`](Self::evict), stopping also once the evicted keys' values
    /// add up to `max_bytes` (their MEMORY USAGE estimate). Returns (keys,
    /// bytes) evicted.
    ///
    /// # Source
    /// `performEvictions`, redis/src/evict.c: it evicts until what it freed
    /// covers what was over the limit, then measures again.
    pub fn evict_bytes(
        &mut self,
        policy: EvictionPolicy,
        samples: usize,
        now_ms: u64,
        max_keys: usize,
        max_bytes: usize,
    ) -> (usize, usize) {
        if policy == EvictionPolicy::NoEviction {
            return (0, 0);
        }
        let mut evicted = 0;
        let mut freed = 0usize;
        let lfu = self.tunables.lfu();
        while evicted < max_keys && freed < max_bytes {
            // (score: lower is evicted first, db, key)
            let mut best: Option<(u64, usize, Bytes)> = None;
            for db in 0..self.dbs.len() {
                let n = if matches!(
                    policy,
                    EvictionPolicy::AllkeysRandom | EvictionPolicy::VolatileRandom
                ) {
                    1
                } else {
                    // `maxmemory-samples` goes up to i32::MAX as in Redis;
                    // more draws than keys find nothing new.
                    samples.clamp(1, self.dbs[db].map.len().max(1))
                };
                for _ in 0..n {
                    let Some(key) = self.sample_key(db, policy) else {
                        break;
                    };
                    let Some(e) = self.dbs[db].map.get(&key) else {
                        continue;
                    };
                    let score = match policy {
                        EvictionPolicy::AllkeysLru | EvictionPolicy::VolatileLru => {
                            e.access.last_access_ms
                        }
                        EvictionPolicy::AllkeysLfu | EvictionPolicy::VolatileLfu => {
                            u64::from(e.access.lfu_decayed(now_ms, lfu))
                        }
                        EvictionPolicy::VolatileTtl => e.expire_at_ms.unwrap_or(u64::MAX),
                        _ => 0,
                    };
                    if best.as_ref().is_none_or(|(s, _, _)| score < *s) {
                        best = Some((score, db, key));
                    }
                }
            }
            let Some((_, db, key)) = best else {
                break;
            };
            if let Some(e) = self.ks(db).remove(&key) {
                freed = freed.saturating_add(e.value.memory_usage_bytes() + key.len());
            }
            self.blocking.mark_ready(db, &key);
            self.aof.record(db, now_ms, &[b"DEL", &key]);
            evicted += 1;
        }
        (evicted, freed)
    }

    /// Remove every key of database `db`. Returns how many were removed.
    pub fn flush(&mut self, db: usize) -> usize {
        let map = &self.dbs[db.min(self.dbs.len() - 1)].map;
        self.watch.touch_db(db, |k| map.contains_key(k));
        // Entries scheduled into this database go with it.
        self.delayed.clear_db(db);
        let ks = self.ks(db);
        let n = ks.map.len();
        *ks = Keyspace::default();
        self.stats.dirty += n as u64;
        self.blocking.mark_db_ready(db);
        n
    }

    /// Active expiry: remove keys whose deadline is at or before `now_ms`, at
    /// most `budget` keys per call. Returns how many were removed.
    ///
    /// # Source
    /// Redis's `activeExpireCycle` samples keys; here deadlines are ordered, so
    /// the cycle removes exactly the expired keys, oldest deadline first.
    /// Like every deletion, it marks the keys ready so that readers blocked
    /// on them are woken (XREADGROUP runs again and answers its NOGROUP
    /// error, as Redis 7.2+ after `signalDeletedKeyAsReady` on expiry).
    pub fn active_expire(&mut self, now_ms: u64, budget: usize) -> usize {
        let mut removed = 0;
        for (dbi, ks) in self.dbs.iter_mut().enumerate() {
            while removed < budget {
                let Some((at, key)) = ks.expires.first().cloned() else {
                    break;
                };
                if at > now_ms {
                    break;
                }
                ks.remove(&key);
                self.blocking.mark_ready(dbi, &key);
                self.aof.record(dbi, now_ms, &[b"DEL", &key]);
                removed += 1;
            }
        }
        self.stats.expired_keys += removed as u64;
        removed
    }

    /// Live keys of database `db` in SCAN order starting at `from`, calling
    /// `visit` for each until it returns false. Expired keys are skipped.
    pub fn scan_from(
        &self,
        db: usize,
        from: ScanPos,
        now_ms: u64,
        mut visit: impl FnMut(ScanPos, &Bytes, &Entry) -> bool,
    ) {
        let ks = self.keyspace(db);
        let start = (from.0, from.1, Bytes::new());
        for (slot, hash, key) in ks.scan_index.range(start..) {
            let Some(entry) = ks.map.get(key) else {
                continue;
            };
            if matches!(entry.expire_at_ms, Some(at) if at <= now_ms) {
                continue;
            }
            if !visit((*slot, *hash), key, entry) {
                break;
            }
        }
    }

    /// Keys in hash slot `slot` of database `db` (CLUSTER GETKEYSINSLOT / COUNTKEYSINSLOT).
    pub fn keys_in_slot(&self, db: usize, slot: u16) -> impl Iterator<Item = &Bytes> {
        self.keyspace(db)
            .scan_index
            .range((slot, 0, Bytes::new())..)
            .take_while(move |(s, _, _)| *s == slot)
            .map(|(_, _, k)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_and_active_expiry() {
        let mut db = ShardDb::new(ShardId(0), 1, 16);
        db.set(
            0,
            Bytes::from_static(b"a"),
            Value::Str(Bytes::from_static(b"1")),
            Some(100),
        );
        db.set(
            0,
            Bytes::from_static(b"b"),
            Value::Str(Bytes::from_static(b"2")),
            Some(200),
        );
        db.set(
            0,
            Bytes::from_static(b"c"),
            Value::Str(Bytes::from_static(b"3")),
            None,
        );
        assert!(db.exists(0, b"a", 99));
        assert!(!db.exists(0, b"a", 100));
        assert_eq!(db.keyspace(0).len(), 2);
        assert_eq!(db.active_expire(250, 10), 1);
        assert_eq!(db.keyspace(0).len(), 1);
        assert_eq!(db.keyspace(0).expires_len(), 0);
    }

    #[test]
    fn overwrite_clears_ttl_and_index() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        let k = Bytes::from_static(b"k");
        db.set(0, k.clone(), Value::Str(Bytes::new()), Some(100));
        db.set(0, k.clone(), Value::Str(Bytes::new()), None);
        assert_eq!(db.keyspace(0).expires_len(), 0);
        let mut seen = 0;
        db.scan_from(0, (0, 0), 0, |_, _, _| {
            seen += 1;
            true
        });
        assert_eq!(seen, 1);
    }

    fn str_key(db: &mut ShardDb, k: &str, ttl: Option<u64>, now_ms: u64) {
        db.get(0, b"", now_ms); // sets the creation clock
        db.set(0, Bytes::from(k.to_string()), Value::Str(Bytes::new()), ttl);
    }

    #[test]
    fn lru_evicts_the_least_recently_used_of_the_sample() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        for i in 0..50u64 {
            str_key(&mut db, &format!("k{i}"), None, 1_000 + i);
        }
        // k0 is read last: it becomes the most recently used.
        db.get(0, b"k0", 10_000);
        // 64 samples over 50 keys see most keys: the oldest go first, and
        // the most recently used survives half the keys being evicted.
        assert_eq!(db.evict(EvictionPolicy::AllkeysLru, 64, 10_000, 25), 25);
        assert!(db.keyspace(0).map.contains_key(&b"k0"[..]));
        let oldest_left = (1..=10)
            .filter(|i| db.keyspace(0).map.contains_key(format!("k{i}").as_bytes()))
            .count();
        assert!(oldest_left <= 3, "{oldest_left} of the 10 oldest keys left");
        assert_eq!(db.evict(EvictionPolicy::NoEviction, 64, 10_000, 10), 0);
    }

    #[test]
    fn volatile_policies_evict_only_keys_with_a_ttl() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        for i in 0..20 {
            str_key(&mut db, &format!("p{i}"), None, 1_000);
        }
        str_key(&mut db, "t1", Some(50_000), 1_000);
        str_key(&mut db, "t2", Some(40_000), 1_000);
        assert_eq!(db.evict(EvictionPolicy::VolatileTtl, 5, 2_000, 1), 1);
        assert!(
            !db.keyspace(0).map.contains_key(&b"t2"[..]),
            "nearest expiry first"
        );
        assert_eq!(db.evict(EvictionPolicy::VolatileRandom, 5, 2_000, 10), 1);
        // Nothing volatile left: nothing to evict.
        assert_eq!(db.evict(EvictionPolicy::VolatileLru, 5, 2_000, 10), 0);
        assert_eq!(db.keyspace(0).len(), 20);
        assert_eq!(db.evict(EvictionPolicy::AllkeysRandom, 5, 2_000, 5), 5);
        assert_eq!(db.keyspace(0).len(), 15);
    }

    #[test]
    fn lfu_counts_each_key_once_per_command_and_stays_bounded() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        db.tunables.maxmemory_policy.store(
            EvictionPolicy::AllkeysLfu as u8,
            std::sync::atomic::Ordering::Relaxed,
        );
        let k = Bytes::from_static(b"k");
        db.set(0, k.clone(), Value::Str(Bytes::new()), None);
        let counter = |db: &ShardDb| db.keyspace(0).map.get(&k).map(|e| e.access.lfu_counter);
        // From 0 every counted access adds one (p = 1 below LFU_INIT_VAL).
        db.ks(0).map.get_mut(&k).unwrap().access.lfu_counter = 0;
        for _ in 0..3 {
            db.get(0, &k, 0);
        }
        assert_eq!(counter(&db), Some(1));
        db.begin_command();
        db.get(0, &k, 0);
        assert_eq!(counter(&db), Some(2));
        // Keys accessed with no command boundary (a caller that never
        // begins one) are remembered up to a bound.
        for i in 0..1000 {
            let key = Bytes::from(format!("f{i}"));
            db.set(0, key.clone(), Value::Str(Bytes::new()), None);
            db.get(0, &key, 0);
        }
        assert!(db.lfu_seen.len() <= LFU_SEEN_MAX, "{}", db.lfu_seen.len());
    }

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays() {
        let mut a = Access::new(0);
        assert_eq!(a.lfu_counter, LFU_INIT_VAL);
        let lfu = LfuParams::default();
        for _ in 0..1000 {
            a.touch(0, 0.05, lfu);
        }
        // p = 1 / ((c - 5) * 10 + 1): with rand 0.05 it grows while p > 0.05.
        assert!(a.lfu_counter > LFU_INIT_VAL && a.lfu_counter < 10, "{a:?}");
        let c = a.lfu_counter;
        assert_eq!(a.lfu_decayed(2 * lfu.decay_ms, lfu), c - 2);
        assert_eq!(a.lfu_decayed(u64::MAX, lfu), 0);
        let never = LfuParams { decay_ms: 0, ..lfu };
        assert_eq!(a.lfu_decayed(u64::MAX, never), c);
    }
}
