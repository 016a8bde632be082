//! Delayed delivery into streams (a shardstream extension, no Redis
//! equivalent): XSCHEDULE, XUNSCHEDULE, XSCHEDULED.
//!
//! `XSCHEDULE key IN ms field value ...` keeps an entry on the key's shard
//! until its due time, then appends it to the stream as `XADD key * field
//! value ...` would, driven by that shard's timer (see
//! [`crate::shard::delayed`]): exactly once, in due-time order, surviving
//! restarts (AOF). Consumers read it with XREAD / XREADGROUP as any entry;
//! blocked readers are served in the same loop turn as the delivery.
//!
//! Data lives in [`crate::delayed`]; the shard-side delivery and AOF
//! records in [`crate::shard::delayed`].

use bytes::Bytes;

use crate::cmd::args::{int_arg, is};
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Keys, ShardReq};
use crate::delayed::Pending;
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::stream::id::parse_id;

#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
) -> CommandSpec {
    CommandSpec::keyed(
        name,
        arity,
        flags,
        Keys::FIRST,
        "stream",
        acl,
        summary,
        "shardstream",
        parse,
        FanMerge::Refuse,
    )
}

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row(
        "XSCHEDULE",
        -6,
        Flags::WRITE.with(Flags::DENYOOM).with(Flags::FAST),
        &["write", "stream", "fast"],
        "Adds an entry to a stream at a due time (IN milliseconds from now, or AT a Unix time in milliseconds).",
        parse_xschedule,
    ),
    row(
        "XUNSCHEDULE",
        -3,
        Flags::WRITE.with(Flags::FAST),
        &["write", "stream", "fast"],
        "Cancels delayed entries of a stream that are not delivered yet.",
        parse_xunschedule,
    ),
    row(
        "XSCHEDULED",
        2,
        Flags::READONLY,
        &["read", "stream", "slow"],
        "Returns the number of delayed entries waiting for a stream.",
        parse_xscheduled,
    ),
];

/// When a scheduled entry is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// `IN ms`: this many ms after the command runs.
    In(u64),
    /// `AT unix-ms`: at this Unix time (in the past: at once).
    At(u64),
}

/// A parsed XSCHEDULE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xschedule {
    /// The stream the entry goes to.
    pub key: Bytes,
    /// When it goes in.
    pub due: Due,
    /// The entry's field-value pairs (copied out of the read buffer).
    pub fields: Vec<(Bytes, Bytes)>,
}

/// Parse `XSCHEDULE key IN|AT time field value [field value ...]`.
///
/// # Errors
/// `ERR syntax error` (neither IN nor AT); `ERR value is not an integer or
/// out of range` / `ERR value is out of range, must be positive` (a
/// negative time); the wrong-arity error for an unpaired field (as XADD).
pub fn parse_xschedule_req(argv: &[Bytes]) -> Result<Xschedule, CmdError> {
    let t = int_arg(&argv[3])?;
    let t = u64::try_from(t)
        .map_err(|_| CmdError::msg("ERR value is out of range, must be positive"))?;
    let due = if is(&argv[2], "IN") {
        Due::In(t)
    } else if is(&argv[2], "AT") {
        Due::At(t)
    } else {
        return Err(CmdError::Syntax);
    };
    let rest = &argv[4..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::arity("xschedule"));
    }
    let fields = rest
        .chunks_exact(2)
        .map(|c| (Bytes::copy_from_slice(&c[0]), Bytes::copy_from_slice(&c[1])))
        .collect();
    Ok(Xschedule {
        key: argv[1].clone(),
        due,
        fields,
    })
}

fn parse_xschedule(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xschedule_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xschedule(db, cx, req).into()))
}

/// `XSCHEDULE key IN|AT time field value [field value ...]`
///
/// Keeps the entry on the key's shard until it is due (`IN ms` from now or
/// `AT` a Unix time in ms), then appends it to the stream at `key` with an
/// auto ID (`*`: its ID's time is the delivery time, never before the due
/// time), creating the stream if missing — once, even across restarts.
/// An entry whose key holds another type at its due time is dropped (and
/// counted in the log).
///
/// # Reply
/// Bulk string: the entry's token `<due-ms>-<n>` (for XUNSCHEDULE; it is not
/// the stream ID the entry will get).
/// # Errors
/// Those of [`parse_xschedule_req`]; `WrongType` when `key` holds another
/// type now; `ERR invalid expire time in 'xschedule' command` when now + `IN`
/// passes 2^63-1 ms (Redis's EXPIRE overflow check).
/// # Source
/// shardstream; README "Delayed delivery".
pub fn apply_xschedule(db: &mut ShardDb, cx: &ExecCtx, req: Xschedule) -> Result<Reply, CmdError> {
    db.get_stream(cx.db, &req.key, cx.now_ms)?;
    // A due time past what a signed 64-bit ms clock holds is refused, as
    // Redis refuses an EXPIRE whose time overflows.
    let due_ms = match req.due {
        Due::In(ms) => cx
            .now_ms
            .checked_add(ms)
            .filter(|&d| d <= i64::MAX as u64)
            .ok_or_else(|| CmdError::InvalidExpire {
                cmd: "xschedule".into(),
            })?,
        Due::At(at) => at,
    };
    let p = Pending {
        db: cx.db,
        key: Bytes::copy_from_slice(&req.key),
        fields: req.fields,
    };
    let token = db.delayed.schedule(due_ms, p.clone());
    crate::shard::delayed::log_schedule(db, cx, token, &p);
    Ok(Reply::Bulk(token.to_bytes()))
}

fn parse_xunschedule(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    let tokens = argv[2..]
        .iter()
        .map(|t| parse_id(t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(on_shard(move |db, cx| {
        let n = tokens
            .iter()
            .filter(|t| db.delayed.cancel(**t, cx.db, &key))
            .count();
        if n > 0 {
            let ts: Vec<Bytes> = tokens.iter().map(|t| t.to_bytes()).collect();
            let mut rec: Vec<&[u8]> = vec![b"XUNSCHEDULE", &key];
            rec.extend(ts.iter().map(|t| &t[..]));
            db.log_effect(cx, &rec);
        }
        Reply::Int(n as i64)
    }))
}

fn parse_xscheduled(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| {
        Reply::Int(db.delayed.count_for(cx.db, &key) as i64)
    }))
}

#[cfg(test)]
mod tests {
    use crate::cmd::testing::{exec, exec_at};
    use crate::reply::Reply;
    use crate::route::slot::ShardId;
    use crate::shard::db::ShardDb;
    use crate::shard::msg::ExecCtx;

    #[test]
    fn schedule_deliver_cancel() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        // exec runs at 1000 ms.
        assert_eq!(
            exec(&mut db, "XSCHEDULE s IN 500 f v"),
            Reply::bulk("1500-0")
        );
        assert_eq!(
            exec(&mut db, "XSCHEDULE s AT 1200 f w"),
            Reply::bulk("1200-1")
        );
        assert_eq!(
            exec(&mut db, "XSCHEDULE s IN 1 f"),
            Reply::Error(crate::error::CmdError::arity("xschedule"))
        );
        assert_eq!(exec(&mut db, "XSCHEDULED s"), Reply::Int(2));
        assert_eq!(crate::shard::delayed::deliver_due(&mut db, 1199, 10), 0);
        assert_eq!(crate::shard::delayed::deliver_due(&mut db, 1300, 10), 1);
        assert_eq!(
            exec_at(&mut db, &ExecCtx::at(0, 1300), "XLEN s"),
            Reply::Int(1)
        );
        assert_eq!(exec(&mut db, "XUNSCHEDULE s 1500-0 9-9"), Reply::Int(1));
        assert_eq!(crate::shard::delayed::deliver_due(&mut db, 2000, 10), 0);
        assert_eq!(exec(&mut db, "SET str v"), Reply::Ok);
        assert!(exec(&mut db, "XSCHEDULE str IN 1 f v").is_error());
        assert_eq!(
            exec(&mut db, "XSCHEDULE s IN 9223372036854775807 f v"),
            Reply::Error(crate::error::CmdError::InvalidExpire {
                cmd: "xschedule".into()
            })
        );
    }
}
