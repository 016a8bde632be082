//! DUMP, RESTORE and RESTORE-ASKING: a key's value in Redis's serialization
//! format (see [`crate::rdb`]), so values move between shardstream and Redis
//! (MIGRATE, which serializes with [`dump_key`]; `redis-cli --cluster
//! import`-style tools, backups of one key).
//!
//! RESTORE decodes the payload on the connection's thread (it is pure and can
//! be large); the owning shard only checks the key and stores the value.

use bytes::Bytes;

use crate::cmd::args::{self, is};
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Keys, ShardReq};
use crate::error::CmdError;
use crate::rdb::{self, RdbError};
use crate::reply::Reply;
use crate::shard::db::{ShardDb, Value};

/// Table rows of this family (group `generic`).
pub const SPECS: &[CommandSpec] = &[
    CommandSpec::keyed(
        "DUMP",
        2,
        Flags::READONLY,
        Keys::FIRST,
        "generic",
        &["keyspace", "read", "slow"],
        "Returns a serialized representation of the value stored at a key.",
        "2.6.0",
        parse_dump,
        FanMerge::Refuse,
    ),
    CommandSpec::keyed(
        "RESTORE",
        -4,
        Flags::WRITE.with(Flags::DENYOOM),
        Keys::FIRST,
        "generic",
        &["keyspace", "write", "slow", "dangerous"],
        "Creates a key from the serialized representation of a value.",
        "2.6.0",
        parse_restore,
        FanMerge::Refuse,
    ),
    // RESTORE for a slot being imported, without ASKING first: what MIGRATE
    // sends in cluster mode (`restoreCommand` serves both).
    CommandSpec::keyed(
        "RESTORE-ASKING",
        -4,
        Flags::WRITE.with(Flags::DENYOOM).with(Flags::ASKING),
        Keys::FIRST,
        "server",
        &["keyspace", "write", "slow", "dangerous"],
        "An internal command for migrating keys in a cluster.",
        "3.0.0",
        parse_restore,
        FanMerge::Refuse,
    ),
];

/// `BUSYKEY Target key name already exists.`
pub const ERR_BUSYKEY: &str = "BUSYKEY Target key name already exists.";
/// `ERR Invalid TTL value, must be >= 0`.
pub const ERR_INVALID_TTL: &str = "ERR Invalid TTL value, must be >= 0";
/// `ERR Invalid IDLETIME value, must be >= 0`.
pub const ERR_INVALID_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
/// `ERR Invalid FREQ value, must be >= 0 and <= 255`.
pub const ERR_INVALID_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";

/// A parsed RESTORE. Errors Redis reports after the BUSYKEY check are kept
/// as results, so the shard reports them in Redis's order.
pub struct Restore {
    pub key: Bytes,
    /// The TTL argument: ms, relative (or absolute with `absttl`); 0 = none.
    pub ttl_ms: Result<i64, CmdError>,
    /// The decoded payload.
    pub value: Result<Value, RdbError>,
    pub replace: bool,
    pub absttl: bool,
    /// `IDLETIME seconds`.
    pub idle_s: Option<u64>,
    /// `FREQ frequency`.
    pub freq: Option<u8>,
}

/// `DUMP key`.
fn parse_dump(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| apply_dump(db, cx, &key)))
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`
///
/// Also `RESTORE-ASKING`, which takes the same arguments.
///
/// # Errors
/// Option errors come first, as in Redis: `ERR syntax error` (unknown
/// option, a missing argument, or both IDLETIME and FREQ), `ERR value is not
/// an integer or out of range`, [`ERR_INVALID_IDLETIME`], [`ERR_INVALID_FREQ`].
/// The rest are decided on the shard (see [`apply_restore`]).
/// # Source
/// `restoreCommand`, redis/src/cluster.c.
pub fn parse_restore(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let mut req = Restore {
        key: argv[1].clone(),
        ttl_ms: args::int_arg(&argv[2]),
        value: Err(RdbError::BadFormat),
        replace: false,
        absttl: false,
        idle_s: None,
        freq: None,
    };
    let mut j = 4;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        if is(&argv[j], "REPLACE") {
            req.replace = true;
        } else if is(&argv[j], "ABSTTL") {
            req.absttl = true;
        } else if is(&argv[j], "IDLETIME") && more && req.freq.is_none() {
            j += 1;
            let v = args::int_arg(&argv[j])?;
            req.idle_s = Some(u64::try_from(v).map_err(|_| CmdError::msg(ERR_INVALID_IDLETIME))?);
        } else if is(&argv[j], "FREQ") && more && req.idle_s.is_none() {
            j += 1;
            let v = args::int_arg(&argv[j])?;
            req.freq = Some(u8::try_from(v).map_err(|_| CmdError::msg(ERR_INVALID_FREQ))?);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    req.value = rdb::restore_payload(&argv[3]);
    Ok(on_shard(move |db, cx| apply_restore(db, cx, req)))
}

/// A live key serialized as DUMP serializes it, with its time to live.
pub struct Dumped {
    /// The DUMP payload (RDB version from `dump-payload-version`).
    pub payload: Vec<u8>,
    /// Time to live left, ms: at least 1 for a key with a TTL; 0 for none
    /// (RESTORE's `ttl` argument).
    pub ttl_ms: u64,
}

/// Look `key` up as a read (a keyspace hit or miss is counted) and
/// serialize it: DUMP's payload and what MIGRATE sends. `None` for a
/// missing or expired key.
/// # Source
/// `createDumpPayload` and the TTL computation of `migrateCommand`,
/// redis/src/cluster.c.
pub fn dump_key(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Option<Dumped> {
    let version = db
        .tunables
        .dump_payload_version
        .load(std::sync::atomic::Ordering::Relaxed);
    let hit = db.get(cx.db, key, cx.now_ms).map(|e| Dumped {
        payload: rdb::dump_payload(&e.value, version),
        ttl_ms: e
            .expire_at_ms
            .map_or(0, |at| at.saturating_sub(cx.now_ms).max(1)),
    });
    db.count_lookup(hit.is_some());
    hit
}

/// `DUMP key` on the owning shard.
///
/// # Reply
/// Bulk: the payload (RDB version from `dump-payload-version`); null bulk
/// for a missing key.
/// # Source
/// `dumpCommand` / `createDumpPayload`.
pub fn apply_dump(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Reply {
    match dump_key(db, cx, key) {
        Some(d) => Reply::Bulk(d.payload.into()),
        None => Reply::NullBulk,
    }
}

/// RESTORE on the owning shard.
///
/// # Reply
/// `+OK` (also when the TTL is already in the past: the key is then not
/// created, and with REPLACE the old one is deleted).
/// # Errors
/// In Redis's order: [`ERR_BUSYKEY`] when the key exists without REPLACE;
/// `ERR value is not an integer or out of range` / [`ERR_INVALID_TTL`] for
/// the TTL; `ERR DUMP payload version or checksum are wrong`; `ERR Bad data
/// format`.
/// # Source
/// `restoreCommand`.
pub fn apply_restore(db: &mut ShardDb, cx: &ExecCtx, req: Restore) -> Reply {
    if !req.replace && db.exists(cx.db, &req.key, cx.now_ms) {
        return Reply::Error(CmdError::msg(ERR_BUSYKEY));
    }
    let ttl = match req.ttl_ms {
        Err(e) => return Reply::Error(e),
        Ok(t) if t < 0 => return Reply::Error(CmdError::msg(ERR_INVALID_TTL)),
        Ok(t) => t as u64,
    };
    let value = match req.value {
        Ok(v) => v,
        Err(e) => return Reply::Error(CmdError::msg(e.text())),
    };
    let deleted = req.replace && db.remove(cx.db, &req.key, cx.now_ms).is_some();
    let at = match ttl {
        0 => None,
        t if req.absttl => Some(t),
        t => Some(t.saturating_add(cx.now_ms)),
    };
    if at.is_some_and(|at| at <= cx.now_ms) {
        if deleted {
            db.log_effect(cx, &[b"DEL", &req.key]);
        }
        return Reply::Ok;
    }
    db.set(cx.db, req.key.clone(), value, at);
    db.set_restored_access(cx.db, &req.key, req.idle_s, req.freq, cx.now_ms);
    // Readers blocked on the key re-check it (a restored stream may serve them).
    db.blocking.mark_ready(cx.db, &req.key);
    db.log_key_state(cx, &req.key);
    Reply::Ok
}
