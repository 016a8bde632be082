//! RENAME, RENAMENX and COPY: commands that move or copy a value between two
//! keys, which may live on different shards.
//!
//! # Same shard
//! When both keys are owned by one shard (always with `--shards 1`, or with
//! a shared `{hash tag}`) the command is one shard request, atomic like any
//! other ([`apply_rename`], [`apply_copy`]).
//!
//! # Across shards
//! Otherwise it runs as steps of one fan-out (`io::conn::Then::Fan`), each
//! on one shard, with the value handed from step to step through a one-shot
//! channel (owned data, never a reference into shard data):
//!
//! * COPY: the source shard clones the value and its TTL (step 1); the
//!   destination shard stores it unless the key exists without REPLACE
//!   (step 2, whose reply is the answer).
//! * RENAME / RENAMENX: the source shard clones (step 1; a missing key ends
//!   the command with `ERR no such key`); the destination shard stores it —
//!   RENAMENX only when the key is absent (step 2); the source shard then
//!   deletes the source key if step 2 stored it (step 3).
//!
//! **Atomicity caveat.** Between the steps other clients' commands may run:
//! during a cross-shard RENAME they can see both keys for a moment, and a
//! write to the source key between steps 1 and 3 is lost with it (Redis
//! runs RENAME atomically). A value is never lost: if the connection goes
//! away between steps, the source key is left in place. Inside MULTI a
//! cross-shard RENAME or COPY is refused like any transaction spanning
//! shards. Each shard's AOF records its own half (`DEL` on the source, the
//! value's records on the destination).

use bytes::Bytes;
use crossbeam_channel::{bounded, Receiver};

use crate::cmd::args::{self, is};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, ExecCtx, Flags, Keys};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::{ShardDb, Value};

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
        keys: TWO_KEYS,
        ..CommandSpec::conn(
            "RENAME",
            3,
            Flags::WRITE,
            "generic",
            &["keyspace", "write", "slow"],
            "Renames a key and overwrites the destination.",
            "1.0.0",
            rename_cmd,
        )
    },
    CommandSpec {
        keys: TWO_KEYS,
        ..CommandSpec::conn(
            "RENAMENX",
            3,
            Flags::WRITE.with(Flags::FAST),
            "generic",
            &["keyspace", "write", "fast"],
            "Renames a key only when the target key name doesn't exist.",
            "1.0.0",
            renamenx_cmd,
        )
    },
    CommandSpec {
        keys: TWO_KEYS,
        ..CommandSpec::conn(
            "COPY",
            -3,
            Flags::WRITE.with(Flags::DENYOOM),
            "generic",
            &["keyspace", "write", "slow"],
            "Copies the value of a key to a new key.",
            "6.2.0",
            copy_cmd,
        )
    },
];

/// Source and destination at argv[1] and argv[2].
const TWO_KEYS: Keys = Keys::Range {
    first: 1,
    last: 2,
    step: 1,
};

/// `ERR no such key`.
fn no_such_key() -> CmdError {
    CmdError::msg("ERR no such key")
}

/// A key's value and absolute expiry (ms), as handed between shards.
type Moved = (Value, Option<u64>);

/// `RENAME key newkey`
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR no such key`.
/// # Source
/// `renameGenericCommand`, redis/src/db.c.
fn rename_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(plan_rename(cx, argv, false))
}

/// `RENAMENX key newkey`
///
/// # Reply
/// Integer: 1 when renamed, 0 when `newkey` exists (or equals `key`).
/// # Errors
/// `ERR no such key`.
/// # Source
/// `renameGenericCommand`, redis/src/db.c.
fn renamenx_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(plan_rename(cx, argv, true))
}

/// The one request (same shard) or the three steps (across shards) of RENAME[NX].
fn plan_rename(cx: &ConnCtx<'_>, argv: &[Bytes], nx: bool) -> Action {
    let (src, dst) = (argv[1].clone(), argv[2].clone());
    let (src_shard, dst_shard) = (cx.shared.shard_of(&src), cx.shared.shard_of(&dst));
    if src_shard == dst_shard {
        let req = on_shard(move |db, cx| apply_rename(db, cx, &src, &dst, nx));
        return one_part(src_shard, req);
    }
    let (value_tx, value_rx) = bounded::<Moved>(1);
    let (stored_tx, stored_rx) = bounded::<bool>(1);
    let src2 = src.clone();
    let step1 = on_shard(move |db, cx| match db.get(cx.db, &src, cx.now_ms) {
        None => Reply::Error(no_such_key()),
        Some(e) => {
            let _ = value_tx.send((e.value.clone(), e.expire_at_ms));
            Reply::Ok
        }
    });
    let step2 = on_shard(move |db, cx| {
        let stored = store(db, cx, &dst, &value_rx, !nx);
        let _ = stored_tx.send(stored);
        Reply::Ok
    });
    let step3 = on_shard(move |db, cx| {
        let stored = stored_rx.try_recv().unwrap_or(false);
        if stored && db.remove(cx.db, &src2, cx.now_ms).is_some() {
            db.log_effect(cx, &[b"DEL", &src2]);
        }
        match (nx, stored) {
            (false, _) => Reply::Ok,
            (true, s) => Reply::Int(i64::from(s)),
        }
    });
    crate::cmd::steps(vec![
        (src_shard, step1),
        (dst_shard, step2),
        (src_shard, step3),
    ])
}

/// `COPY source destination [DB destination-db] [REPLACE]`
///
/// # Reply
/// Integer: 1 when copied; 0 when `source` is missing, or `destination`
/// exists and REPLACE was not given.
/// # Errors
/// In order: `ERR syntax error`; `ERR value is not an integer or out of
/// range` / `ERR value is out of range, value must between ...` for DB; `ERR DB index is out of
/// range`; `ERR Copying to another database is not allowed in cluster mode`
/// (multi-node cluster); `ERR source and destination objects are the same`.
/// # Source
/// `copyCommand`, redis/src/db.c.
fn copy_cmd(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let src_db = cx.conn.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut j = 3;
    while j < argv.len() {
        if is(&argv[j], "REPLACE") {
            replace = true;
        } else if is(&argv[j], "DB") && j + 1 < argv.len() {
            let n = args::int_arg(&argv[j + 1])?;
            let n = i32::try_from(n).map_err(|_| {
                CmdError::msg(
                    "ERR value is out of range, value must between -2147483648 and 2147483647",
                )
            })?;
            if n < 0 || n as usize >= cx.shared.databases {
                return Err(CmdError::DbIndexOutOfRange);
            }
            dst_db = n as usize;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if cx.shared.cluster.is_some() && (src_db != 0 || dst_db != 0) {
        return Err(CmdError::msg(
            "ERR Copying to another database is not allowed in cluster mode",
        ));
    }
    let (src, dst) = (argv[1].clone(), argv[2].clone());
    if src_db == dst_db && src == dst {
        return Err(CmdError::msg(
            "ERR source and destination objects are the same",
        ));
    }
    let (src_shard, dst_shard) = (cx.shared.shard_of(&src), cx.shared.shard_of(&dst));
    if src_shard == dst_shard {
        let req = on_shard(move |db, cx| apply_copy(db, cx, &src, &dst, dst_db, replace));
        return Ok(one_part(src_shard, req));
    }
    let (value_tx, value_rx) = bounded::<Moved>(1);
    let step1 = on_shard(move |db, cx| {
        if let Some(e) = db.get(cx.db, &src, cx.now_ms) {
            let _ = value_tx.send((e.value.clone(), e.expire_at_ms));
        }
        Reply::Ok
    });
    let step2 = on_shard(move |db, cx| {
        let cx = ExecCtx { db: dst_db, ..*cx };
        Reply::Int(i64::from(store(db, &cx, &dst, &value_rx, replace)))
    });
    Ok(crate::cmd::steps(vec![
        (src_shard, step1),
        (dst_shard, step2),
    ]))
}

/// Store the value handed over on `rx` under `key` (database `cx.db`);
/// an existing key is replaced only with `replace`. Returns whether stored.
fn store(db: &mut ShardDb, cx: &ExecCtx, key: &Bytes, rx: &Receiver<Moved>, replace: bool) -> bool {
    let Ok((value, at)) = rx.try_recv() else {
        return false;
    };
    if !replace && db.exists(cx.db, key, cx.now_ms) {
        return false;
    }
    put(db, cx, key.clone(), value, at);
    true
}

/// Set `key` to `value` with expiry `at`, wake its readers, log the effect.
fn put(db: &mut ShardDb, cx: &ExecCtx, key: Bytes, value: Value, at: Option<u64>) {
    db.remove(cx.db, &key, cx.now_ms);
    db.set(cx.db, key.clone(), value, at);
    db.blocking.mark_ready(cx.db, &key);
    db.log_key_state(cx, &key);
}

/// RENAME / RENAMENX when both keys live on this shard.
///
/// # Reply
/// RENAME `+OK`; RENAMENX 1, or 0 when `dst` exists or equals `src`.
/// # Errors
/// `ERR no such key` when `src` is missing (checked first, also for `src == dst`).
/// # Source
/// `renameGenericCommand`, redis/src/db.c.
pub fn apply_rename(db: &mut ShardDb, cx: &ExecCtx, src: &Bytes, dst: &Bytes, nx: bool) -> Reply {
    if !db.exists(cx.db, src, cx.now_ms) {
        return Reply::Error(no_such_key());
    }
    if src == dst {
        return if nx { Reply::Int(0) } else { Reply::Ok };
    }
    if nx && db.exists(cx.db, dst, cx.now_ms) {
        return Reply::Int(0);
    }
    let Some(entry) = db.remove(cx.db, src, cx.now_ms) else {
        return Reply::Error(no_such_key());
    };
    db.log_effect(cx, &[b"DEL", src]);
    put(db, cx, dst.clone(), entry.value, entry.expire_at_ms);
    if nx {
        Reply::Int(1)
    } else {
        Reply::Ok
    }
}

/// COPY when both keys live on this shard (`dst` in database `dst_db`).
///
/// # Reply
/// Integer 1 when copied; 0 when `src` is missing, or `dst` exists without `replace`.
/// # Source
/// `copyCommand`, redis/src/db.c.
pub fn apply_copy(
    db: &mut ShardDb,
    cx: &ExecCtx,
    src: &Bytes,
    dst: &Bytes,
    dst_db: usize,
    replace: bool,
) -> Reply {
    let Some(e) = db.get(cx.db, src, cx.now_ms) else {
        return Reply::Int(0);
    };
    let (value, at) = (e.value.clone(), e.expire_at_ms);
    let dcx = ExecCtx { db: dst_db, ..*cx };
    if !replace && db.exists(dst_db, dst, cx.now_ms) {
        return Reply::Int(0);
    }
    put(db, &dcx, dst.clone(), value, at);
    Reply::Int(1)
}

/// One request on one shard, its reply unchanged.
fn one_part(shard: crate::route::slot::ShardId, req: crate::cmd::ShardReq) -> Action {
    Action::FanOut {
        parts: vec![(shard, req)],
        merge: Box::new(|mut r: Vec<Reply>| r.pop().unwrap_or(Reply::NullBulk)),
    }
}
