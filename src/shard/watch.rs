//! WATCH on one shard: per-key versions kept by the shard that owns the key,
//! checked when EXEC runs.
//!
//! # Design
//! * Only watched keys are tracked. [`WatchTable::touch`] is called by every
//!   [`ShardDb`](super::db::ShardDb) write path (set, remove, mutable
//!   access, TTL change, flush); with nothing watched on the shard it is one
//!   `is_empty` check, so unwatched traffic pays nothing else.
//! * A watched key has a version: 0 when first watched, then a fresh number
//!   from the shard-wide counter at every touch. WATCH records, per
//!   connection (by id), the version it saw and whether the key was live.
//! * EXEC, on the shard that runs the transaction, first asks
//!   [`WatchTable::take_dirty`]: a version that moved, or a key that was live
//!   at WATCH and has since expired (Redis's `isWatchedKeyExpired`), aborts
//!   the transaction (`*-1`). A key deleted by expiry does not move its
//!   version, so a key that was already expired when watched does not abort
//!   (Redis: "WATCH stale keys should not fail EXEC"). Checking forgets the
//!   connection's watches, as EXEC does in Redis.
//! * Watches on other shards than the transaction's are checked by a step
//!   that runs just before the EXEC step (`cmd::tx`); between the two,
//!   another client may still write there (the cross-shard transaction
//!   issue closes that window by holding the shards). The per-shard table
//!   and its check are what that design reuses.
//! * UNWATCH, DISCARD, RESET and a closing connection send
//!   [`WatchTable::unwatch_all`] to every shard the connection watched on.
//!
//! # Source
//! `watchCommand`, `touchWatchedKey`, `isWatchedKeyExpired`, redis/src/multi.c.

use std::collections::HashMap;

use bytes::Bytes;

/// One watched key in one database.
struct Watched {
    db: usize,
    version: u64,
    /// Connections watching it.
    watchers: u32,
}

/// What one connection saw when it watched a key.
struct Seen {
    db: usize,
    key: Bytes,
    version: u64,
    live: bool,
}

/// A shard's watched keys and who watches them.
#[derive(Default)]
pub struct WatchTable {
    keys: HashMap<Bytes, Vec<Watched>>,
    by_conn: HashMap<u64, Vec<Seen>>,
    /// Last version handed out (shard-wide, only grows).
    last_version: u64,
}

impl WatchTable {
    /// Whether no key is watched on this shard.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// A write changed `key` in database `db`: watchers' EXEC will abort.
    #[inline]
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if self.keys.is_empty() {
            return;
        }
        self.touch_slow(db, key);
    }

    fn touch_slow(&mut self, db: usize, key: &[u8]) {
        if let Some(list) = self.keys.get_mut(key) {
            for w in list.iter_mut().filter(|w| w.db == db) {
                self.last_version += 1;
                w.version = self.last_version;
            }
        }
    }

    /// Touch every watched key of database `db` for which `existed` is true
    /// (FLUSHDB / FLUSHALL touch only keys that were there).
    pub fn touch_db(&mut self, db: usize, mut existed: impl FnMut(&[u8]) -> bool) {
        if self.keys.is_empty() {
            return;
        }
        for (key, list) in self.keys.iter_mut() {
            if !existed(key) {
                continue;
            }
            for w in list.iter_mut().filter(|w| w.db == db) {
                self.last_version += 1;
                w.version = self.last_version;
            }
        }
    }

    /// Connection `conn` watches `key` in `db`; `live` says whether the key
    /// exists and has not expired now. Watching a key twice is a no-op.
    pub fn watch(&mut self, conn: u64, db: usize, key: &Bytes, live: bool) {
        let seen = self.by_conn.entry(conn).or_default();
        if seen.iter().any(|s| s.db == db && s.key == *key) {
            return;
        }
        let list = self.keys.entry(key.clone()).or_default();
        let w = match list.iter_mut().position(|w| w.db == db) {
            Some(i) => &mut list[i],
            None => {
                list.push(Watched {
                    db,
                    version: 0,
                    watchers: 0,
                });
                let n = list.len() - 1;
                &mut list[n]
            }
        };
        w.watchers += 1;
        seen.push(Seen {
            db,
            key: key.clone(),
            version: w.version,
            live,
        });
    }

    /// Forget every watch of `conn` on this shard.
    pub fn unwatch_all(&mut self, conn: u64) {
        let Some(seen) = self.by_conn.remove(&conn) else {
            return;
        };
        for s in seen {
            let Some(list) = self.keys.get_mut(&s.key) else {
                continue;
            };
            if let Some(i) = list.iter().position(|w| w.db == s.db) {
                list[i].watchers = list[i].watchers.saturating_sub(1);
                if list[i].watchers == 0 {
                    list.swap_remove(i);
                }
            }
            if list.is_empty() {
                self.keys.remove(&s.key);
            }
        }
    }

    /// Whether any key `conn` watches here was touched, or was live when
    /// watched and is no longer (`is_live(db, key)`); then forget its watches.
    pub fn take_dirty(&mut self, conn: u64, mut is_live: impl FnMut(usize, &[u8]) -> bool) -> bool {
        let dirty = self.by_conn.get(&conn).is_some_and(|seen| {
            seen.iter().any(|s| {
                let now = self
                    .keys
                    .get(&s.key)
                    .and_then(|l| l.iter().find(|w| w.db == s.db))
                    .map_or(u64::MAX, |w| w.version);
                now != s.version || (s.live && !is_live(s.db, &s.key))
            })
        });
        self.unwatch_all(conn);
        dirty
    }
}

/// A request that forgets every watch of the connection it runs for (sent
/// by UNWATCH, EXEC and DISCARD to each shard the session watched keys on,
/// and by a closing connection's thread); replies `+OK`.
pub fn unwatch_req() -> crate::shard::msg::ShardReq {
    crate::shard::msg::on_shard(|db, cx| {
        db.watch.unwatch_all(cx.reply_to.conn);
        crate::reply::Reply::Ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn touch_makes_watchers_dirty_and_check_forgets() {
        let mut t = WatchTable::default();
        t.touch(0, b"a"); // nothing watched: no-op
        t.watch(1, 0, &k("a"), true);
        t.watch(2, 0, &k("a"), true);
        t.watch(2, 1, &k("b"), false);
        t.touch(1, b"a"); // other database
        assert!(!t.take_dirty(1, |_, _| true));
        t.touch(0, b"a");
        assert!(t.take_dirty(2, |_, _| true));
        assert!(t.is_empty());
    }

    #[test]
    fn expiry_after_watch_is_dirty_stale_key_is_not() {
        let mut t = WatchTable::default();
        t.watch(1, 0, &k("live"), true);
        t.watch(2, 0, &k("stale"), false);
        assert!(t.take_dirty(1, |_, _| false));
        assert!(!t.take_dirty(2, |_, _| false));
    }

    #[test]
    fn unwatch_releases_keys() {
        let mut t = WatchTable::default();
        t.watch(1, 0, &k("a"), true);
        t.watch(1, 0, &k("a"), true);
        t.unwatch_all(1);
        assert!(t.is_empty());
        t.watch(3, 0, &k("a"), true);
        t.touch_db(0, |key| key == b"x");
        assert!(!t.take_dirty(3, |_, _| true));
    }
}
