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

use crate::error::CmdError;
use crate::route::slot::{slot_of, ShardId};
use crate::stream::Stream;

/// A value stored under a key. `Clone` + `Send` so an AOF rewrite can copy a
/// shard's data and serialize it on another thread.
#[derive(Clone)]
pub enum Value {
    /// A string (GET/SET/INCR/APPEND).
    Str(Bytes),
    /// A stream (XADD/XRANGE/XREAD/...). Boxed: the struct is much larger than a string.
    Stream(Box<Stream>),
}

impl Value {
    /// The name `TYPE` reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Stream(_) => "stream",
        }
    }

    /// Approximate heap footprint in bytes (MEMORY USAGE).
    pub fn memory_usage_bytes(&self) -> usize {
        match self {
            Value::Str(b) => b.len(),
            Value::Stream(s) => s.memory_usage_bytes(),
        }
    }
}

/// A key's value and its expiry.
pub struct Entry {
    pub value: Value,
    /// Absolute expiry, ms since the Unix epoch; `None` = persistent.
    pub expire_at_ms: Option<u64>,
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
    map: HashMap<Bytes, Entry>,
    /// Keys with a TTL, ordered by deadline: active expiry pops from the front.
    expires: BTreeSet<(u64, Bytes)>,
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

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (key, entry) = self.map.remove_entry(key)?;
        if let Some(at) = entry.expire_at_ms {
            self.expires.remove(&(at, key.clone()));
        }
        self.scan_index.remove(&Self::index_key(&key));
        Some(entry)
    }

    fn is_expired(&self, key: &[u8], now_ms: u64) -> bool {
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
    /// Watched keys and their versions (WATCH; see [`crate::shard::watch`]).
    pub watch: crate::shard::watch::WatchTable,
    /// Active expiry runs on the shard's timer (`DEBUG SET-ACTIVE-EXPIRE 0` stops it).
    pub active_expire_enabled: bool,
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
            active_expire_enabled: true,
            watch: Default::default(),
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
            let _ =
                crate::aof::rewrite::encode_key(&mut rec, &mut out, key, &e.value, e.expire_at_ms);
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
        self.expire_if_needed(db, key, now_ms);
        self.ks(db).map.get(key)
    }

    /// The live entry under `key` for modification, after lazy expiry.
    /// Changing `expire_at_ms` through this reference is not allowed: use [`set_expire`](Self::set_expire).
    pub fn get_mut(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.expire_if_needed(db, key, now_ms);
        // Mutable access is how commands write: watchers see a change.
        self.watch.touch(db, key);
        self.ks(db).map.get_mut(key)
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

    /// Whether a live key exists.
    pub fn exists(&mut self, db: usize, key: &[u8], now_ms: u64) -> bool {
        self.get(db, key, now_ms).is_some()
    }

    /// The string under `key`: `Ok(None)` when missing, `WrongType` when not a string.
    pub fn get_str(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: u64,
    ) -> Result<Option<&Bytes>, CmdError> {
        match self.get(db, key, now_ms) {
            None => Ok(None),
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => Ok(Some(s)),
            Some(_) => Err(CmdError::WrongType),
        }
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
        match self.get(db, key, now_ms) {
            None => Ok(None),
            Some(Entry {
                value: Value::Stream(s),
                ..
            }) => Ok(Some(s)),
            Some(_) => Err(CmdError::WrongType),
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
        match self.ks(db).map.get_mut(key) {
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
    pub fn set(
        &mut self,
        db: usize,
        key: Bytes,
        value: Value,
        expire_at_ms: Option<u64>,
    ) -> Option<Entry> {
        self.watch.touch(db, &key);
        let ks = self.ks(db);
        if let Some(e) = ks.map.get_mut(&key) {
            // Overwrite in place: the key keeps its place in the scan index.
            let old_at = std::mem::replace(&mut e.expire_at_ms, expire_at_ms);
            let old_value = std::mem::replace(&mut e.value, value);
            if old_at != expire_at_ms {
                if let Some(at) = old_at {
                    ks.expires.remove(&(at, key.clone()));
                }
                if let Some(at) = expire_at_ms {
                    ks.expires.insert((at, key.clone()));
                }
            }
            // A replaced stream wakes its blocked XREADGROUP readers (with an error).
            self.blocking.mark_ready(db, &key);
            return Some(Entry {
                value: old_value,
                expire_at_ms: old_at,
            });
        }
        if let Some(at) = expire_at_ms {
            ks.expires.insert((at, key.clone()));
        }
        ks.scan_index.insert(Keyspace::index_key(&key));
        ks.map.insert(
            key,
            Entry {
                value,
                expire_at_ms,
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
            self.watch.touch(db, key);
            // Blocked XREADGROUP readers of a deleted stream get an error.
            self.blocking.mark_ready(db, key);
        }
        old
    }

    /// Set or clear the TTL of an existing key. Returns false when the key is missing.
    pub fn set_expire(&mut self, db: usize, key: &[u8], expire_at_ms: Option<u64>) -> bool {
        if self.ks(db).map.contains_key(key) {
            self.watch.touch(db, key);
        }
        let ks = self.ks(db);
        let Some((k, entry)) = ks.map.get_key_value(key) else {
            return false;
        };
        let k = k.clone();
        let old = entry.expire_at_ms;
        if let Some(at) = old {
            ks.expires.remove(&(at, k.clone()));
        }
        if let Some(at) = expire_at_ms {
            ks.expires.insert((at, k.clone()));
        }
        if let Some(e) = ks.map.get_mut(&k) {
            e.expire_at_ms = expire_at_ms;
        }
        true
    }

    /// Remove every key of database `db`. Returns how many were removed.
    pub fn flush(&mut self, db: usize) -> usize {
        let map = &self.dbs[db.min(self.dbs.len() - 1)].map;
        self.watch.touch_db(db, |k| map.contains_key(k));
        let ks = self.ks(db);
        let n = ks.map.len();
        *ks = Keyspace::default();
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
    /// on them are woken (XREADGROUP answers `UNBLOCKED the stream key no
    /// longer exists`, as Redis 7's `signalDeletedKeyAsReady` on expiry).
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
}
