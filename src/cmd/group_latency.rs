//! XGROUPLATENCY, shardstream's own command: a consumer group's delivery
//! latency (see [`crate::stream::latency`]), and the INFO `streamlatency`
//! section that lists every group's figures for exporters.

use bytes::Bytes;

use crate::cmd::args::is;
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Keys, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::{ShardDb, Value};
use crate::stream::latency::LatencySummary;

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[CommandSpec::keyed(
    "XGROUPLATENCY",
    -3,
    Flags::READONLY,
    Keys::FIRST,
    "stream",
    &["read", "stream", "slow"],
    "Returns (or resets) a consumer group's added-to-delivered and delivered-to-acked latency percentiles. (shardstream)",
    "0.1.0",
    parse_xgrouplatency,
    FanMerge::Refuse,
)];

/// `XGROUPLATENCY key group [RESET]`
///
/// # Errors
/// `ERR syntax error` for anything but RESET after the group.
fn parse_xgrouplatency(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let reset = match argv.get(3) {
        None => false,
        Some(a) if is(a, "RESET") && argv.len() == 4 => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    let (key, group) = (argv[1].clone(), argv[2].clone());
    Ok(on_shard(move |db, cx| {
        apply_xgrouplatency(db, cx, &key, &group, reset).into()
    }))
}

/// `XGROUPLATENCY key group [RESET]` on the owning shard.
///
/// Per consumer group, shardstream keeps two HDR histograms (ms, 1%
/// precision): **delivery**, entry added (its ID's ms) → first delivered
/// to the group by a `>` read; **ack**, last delivery → XACK/XACKDEL.
///
/// # Reply
/// Without RESET, a map (RESP2: flat array):
/// `delivery` → map of `count`, `p50`, `p99`, `p99.9`, `max` (integers, ms;
/// all 0 when nothing was recorded), `ack` → the same. With RESET: `+OK`
/// after forgetting every sample of the group.
/// # Errors
/// `WRONGTYPE`; `ERR no such key`; `NOGROUP No such consumer group '<group>'
/// for key name '<key>'` (the texts of XINFO CONSUMERS).
pub fn apply_xgrouplatency(
    db: &mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
    group: &[u8],
    reset: bool,
) -> Result<Reply, CmdError> {
    let s = db
        .get_stream_mut(cx.db, key, cx.now_ms)?
        .ok_or(CmdError::NoSuchKey)?;
    let g = s
        .group_mut(group)
        .ok_or_else(|| CmdError::no_group_for_key(key, group))?;
    if reset {
        g.latency.reset();
        return Ok(Reply::Ok);
    }
    let (d, a) = g.latency.summaries();
    Ok(Reply::Map(vec![
        (Reply::bulk("delivery"), summary_reply(d)),
        (Reply::bulk("ack"), summary_reply(a)),
    ]))
}

fn summary_reply(s: LatencySummary) -> Reply {
    let n = |v: u64| Reply::Int(i64::try_from(v).unwrap_or(i64::MAX));
    Reply::Map(vec![
        (Reply::bulk("count"), n(s.count)),
        (Reply::bulk("p50"), n(s.p50_ms)),
        (Reply::bulk("p99"), n(s.p99_ms)),
        (Reply::bulk("p99.9"), n(s.p999_ms)),
        (Reply::bulk("max"), n(s.max_ms)),
    ])
}

/// `s` with the bytes INFO's `field=value,...` syntax reserves (and
/// anything outside printable ASCII) written as `%XX`.
fn info_escape(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s {
        if b.is_ascii_graphic() && !matches!(b, b',' | b'=' | b':' | b'%') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// This shard's INFO `streamlatency` lines: one per consumer group with
/// samples, `group_latency_<shard>_<n>:db=..,key=..,group=..,delivered=..,
/// delivery_p50_ms=..,delivery_p99_ms=..,delivery_p999_ms=..,
/// delivery_max_ms=..,acked=..,ack_p50_ms=..,ack_p99_ms=..,ack_p999_ms=..,
/// ack_max_ms=..` (key and group escaped as `%XX` where needed). Walks every
/// key of the shard: only `INFO streamlatency` asks (not `INFO all`).
pub fn info_lines(db: &ShardDb, now_ms: u64) -> Vec<String> {
    let mut out = Vec::new();
    for n in 0..db.databases() {
        db.scan_from(n, (0, 0), now_ms, |_, k, e| {
            if let Value::Stream(s) = &e.value {
                for (name, g) in s.groups() {
                    if g.latency.is_empty() {
                        continue;
                    }
                    let (d, a) = g.latency.summaries();
                    out.push(format!(
                        "group_latency_{}_{}:db={n},key={},group={},delivered={},delivery_p50_ms={},delivery_p99_ms={},delivery_p999_ms={},delivery_max_ms={},acked={},ack_p50_ms={},ack_p99_ms={},ack_p999_ms={},ack_max_ms={}",
                        db.id.0,
                        out.len(),
                        info_escape(k),
                        info_escape(name),
                        d.count, d.p50_ms, d.p99_ms, d.p999_ms, d.max_ms,
                        a.count, a.p50_ms, a.p99_ms, a.p999_ms, a.max_ms,
                    ));
                }
            }
            true
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::testing::exec;
    use crate::route::slot::ShardId;

    #[test]
    fn records_deliveries_and_acks() {
        let mut db = ShardDb::new(ShardId(0), 1, 16);
        // exec runs at 1000 ms; IDs at 400 and 900 ms: delivered after 600 and 100 ms.
        exec(&mut db, "XADD s 400-1 f v");
        exec(&mut db, "XADD s 900-1 f v");
        exec(&mut db, "XGROUP CREATE s g 0");
        let empty = exec(&mut db, "XGROUPLATENCY s g");
        assert_eq!(
            format!("{empty:?}").matches("Int(0)").count(),
            10,
            "{empty:?}"
        );
        exec(&mut db, "XREADGROUP GROUP g c STREAMS s >");
        exec(&mut db, "XACK s g 400-1");
        assert!(matches!(exec(&mut db, "XGROUPLATENCY s g"), Reply::Map(_)));
        let (d, a) = db
            .get_stream(0, b"s", 1000)
            .unwrap()
            .unwrap()
            .group(b"g")
            .unwrap()
            .latency
            .summaries();
        // HDR values are their bucket's upper end: at most 1% above.
        assert_eq!((d.count, d.p50_ms), (2, 100));
        assert!((600..=606).contains(&d.max_ms), "{d:?}");
        assert_eq!((a.count, a.max_ms), (1, 0));
        assert_eq!(info_lines(&db, 1000).len(), 1);
        assert!(info_lines(&db, 1000)[0]
            .starts_with("group_latency_0_0:db=0,key=s,group=g,delivered=2,"));
        assert!(matches!(
            exec(&mut db, "XGROUPLATENCY s g RESET"),
            Reply::Ok
        ));
        assert!(info_lines(&db, 1000).is_empty());
        assert!(matches!(
            exec(&mut db, "XGROUPLATENCY s nog"),
            Reply::Error(CmdError::NoGroupForKey { .. })
        ));
        assert!(matches!(
            exec(&mut db, "XGROUPLATENCY nokey g"),
            Reply::Error(CmdError::NoSuchKey)
        ));
        assert!(matches!(
            exec(&mut db, "XGROUPLATENCY s g RESET x"),
            Reply::Error(CmdError::Syntax)
        ));
        assert_eq!(info_escape(b"a,b=c:d%\xff"), "a%2Cb%3Dc%3Ad%25%FF");
    }
}
