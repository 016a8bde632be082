//! Stream behaviours where the newest Redis (8.x) differs from the 7.0
//! redis-server installed here, pinned by exact replies over real sockets
//! (4 shards): entries-read clamping (8.2.2), entries-read / lag after
//! deletions and trims (redis/redis#13338, #13473, #13958), XINFO STREAM FULL
//! field names, groups and consumers named like keywords, `inactive` after a
//! NOACK read, XGROUP SETID with `-` / `+`, the newest error texts.
mod common;

use std::time::{Duration, Instant};

use common::{RespClient, TestServer};

const SHARDS: u16 = 4;

fn run(c: &mut RespClient, line: &str) -> String {
    c.raw(&line.split_whitespace().collect::<Vec<_>>())
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}", s.len())
}

/// Wire text of an optional integer (`$-1` for nil).
fn opt(n: Option<i64>) -> String {
    n.map_or("$-1".to_string(), |n| format!(":{n}"))
}

/// One group of `XINFO GROUPS` (RESP2).
fn group_info(
    name: &str,
    consumers: i64,
    pending: i64,
    last: &str,
    entries_read: Option<i64>,
    lag: Option<i64>,
) -> String {
    format!(
        "*12\r\n$4\r\nname\r\n{}\r\n$9\r\nconsumers\r\n:{consumers}\r\n$7\r\npending\r\n:{pending}\r\n$17\r\nlast-delivered-id\r\n{}\r\n$12\r\nentries-read\r\n{}\r\n$3\r\nlag\r\n{}",
        bulk(name),
        bulk(last),
        opt(entries_read),
        opt(lag)
    )
}

/// `(entries-read, lag)` of every group in an `XINFO GROUPS` reply, in order.
fn counters(raw: &str) -> Vec<(Option<i64>, Option<i64>)> {
    let lines: Vec<&str> = raw.split("\r\n").collect();
    let value = |i: usize| -> Option<i64> {
        lines
            .get(i)
            .and_then(|v| v.strip_prefix(':'))
            .and_then(|v| v.parse().ok())
    };
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if *l == "entries-read" {
            out.push((value(i + 1), value(i + 4)));
        }
    }
    out
}

#[test]
fn entries_read_above_entries_added_is_clamped() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    // redis-py 8.1.0 test_xgroup_create_entriesread (Redis >= 8.2.2).
    for i in 1..=3 {
        run(&mut c, &format!("XADD s {i}-0 f v"));
    }
    assert_eq!(run(&mut c, "XGROUP CREATE s g 0 ENTRIESREAD 7"), "+OK");
    assert_eq!(
        run(&mut c, "XINFO GROUPS s"),
        format!("*1\r\n{}", group_info("g", 0, 0, "0-0", Some(3), Some(3)))
    );
    // redis-py 8.1.0 test_xgroup_setid (Redis >= 8.2.2).
    for i in 1..=2 {
        run(&mut c, &format!("XADD t {i}-0 f v"));
    }
    assert_eq!(run(&mut c, "XGROUP CREATE t g 0"), "+OK");
    assert_eq!(run(&mut c, "XGROUP SETID t g 1-0 ENTRIESREAD 5"), "+OK");
    assert_eq!(
        run(&mut c, "XINFO GROUPS t"),
        format!("*1\r\n{}", group_info("g", 0, 0, "1-0", Some(2), Some(0)))
    );
    // An empty stream clamps to 0; -1 still means "unknown".
    assert_eq!(
        run(&mut c, "XGROUP CREATE e g $ MKSTREAM ENTRIESREAD 9"),
        "+OK"
    );
    assert_eq!(
        run(&mut c, "XINFO GROUPS e"),
        format!("*1\r\n{}", group_info("g", 0, 0, "0-0", Some(0), Some(0)))
    );
    assert_eq!(run(&mut c, "XGROUP SETID t g 2-0 ENTRIESREAD -1"), "+OK");
    assert_eq!(
        run(&mut c, "XINFO GROUPS t"),
        format!("*1\r\n{}", group_info("g", 0, 0, "2-0", None, Some(0)))
    );
}

#[test]
fn entries_read_and_lag_after_deletions() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for line in [
        "XGROUP CREATE s g $ MKSTREAM",
        "XADD s 1-0 f v",
        "XADD s 2-0 f v",
        "XDEL s 1-0 2-0",
        "XADD s 3-0 f v",
        "XADD s 4-0 f v",
    ] {
        run(&mut c, line);
    }
    assert_eq!(
        run(&mut c, "XREADGROUP GROUP g a COUNT 1 STREAMS s >"),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv"
    );
    assert_eq!(
        run(&mut c, "XINFO GROUPS s"),
        format!("*1\r\n{}", group_info("g", 1, 1, "3-0", Some(3), Some(1)))
    );
    // XINFO STREAM FULL computes them the same way.
    let full = run(&mut c, "XINFO STREAM s FULL");
    assert_eq!(counters(&full), vec![(Some(3), Some(1))], "{full}");
}

/// Redis 7.0's lag rules gave other values at several of these steps (see
/// `differential_lag_and_entries_read` in tests/stream_groups.rs, which runs
/// the same script against redis-server 7.0 without comparing XINFO GROUPS).
#[test]
fn lag_through_deletes_trims_and_setid() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    let step = |c: &mut RespClient, lines: &str, want: &[(Option<i64>, Option<i64>)]| {
        for l in lines.lines().map(str::trim).filter(|l| !l.is_empty()) {
            run(c, l);
        }
        let got = run(c, "XINFO GROUPS s");
        assert_eq!(counters(&got), want, "after {lines}\n{got}");
    };
    let (n, z) = (None, Some(0));
    let s = Some;
    step(
        &mut c,
        "XADD s 1-0 f v\nXADD s 2-0 f v\nXADD s 3-0 f v\nXADD s 4-0 f v\nXADD s 5-0 f v
         XGROUP CREATE s a 0\nXGROUP CREATE s b 0 ENTRIESREAD 0\nXGROUP CREATE s c $
         XGROUP CREATE s d 3-0",
        &[(n, s(5)), (z, s(5)), (n, z), (n, n)],
    );
    step(
        &mut c,
        "XREADGROUP GROUP a x COUNT 1 STREAMS s >\nXREADGROUP GROUP b x COUNT 2 STREAMS s >",
        &[(s(1), s(4)), (s(2), s(3)), (n, z), (n, n)],
    );
    // A tombstone ahead of a and b: their counters no longer tell the lag.
    step(
        &mut c,
        "XDEL s 3-0",
        &[(s(1), n), (s(2), n), (n, z), (n, n)],
    );
    // Reading past the tombstone re-estimates at the last entry (7.0: 4 / 1).
    step(
        &mut c,
        "XREADGROUP GROUP b x STREAMS s >",
        &[(s(1), n), (s(5), z), (n, z), (n, n)],
    );
    step(
        &mut c,
        "XGROUP SETID s b 2-0",
        &[(s(1), n), (n, n), (n, z), (n, n)],
    );
    step(
        &mut c,
        "XGROUP SETID s b 0 ENTRIESREAD 0",
        &[(s(1), n), (z, n), (n, z), (n, n)],
    );
    // Trimmed past a, b and d (and past the tombstone): every live entry is
    // ahead of them.
    step(
        &mut c,
        "XTRIM s MAXLEN 2",
        &[(s(1), s(2)), (z, s(2)), (n, z), (n, s(2))],
    );
    step(
        &mut c,
        "XGROUP SETID s c $",
        &[(s(1), s(2)), (z, s(2)), (n, z), (n, s(2))],
    );
    step(
        &mut c,
        "XADD s 6-0 f v",
        &[(s(1), s(3)), (z, s(3)), (n, n), (n, s(3))],
    );
    // a was behind the first entry: its counter is re-estimated (#13958).
    step(
        &mut c,
        "XREADGROUP GROUP a x STREAMS s >",
        &[(s(6), z), (z, s(3)), (n, n), (n, s(3))],
    );
    step(
        &mut c,
        "XDEL s 4-0\nXDEL s 5-0\nXDEL s 6-0",
        &[(s(6), z), (z, z), (n, z), (n, z)],
    );
    step(
        &mut c,
        "XGROUP SETID s a 0",
        &[(n, z), (z, z), (n, z), (n, z)],
    );
    step(&mut c, "XSETID s 10-0", &[(n, z), (z, z), (n, z), (n, z)]);
}

#[test]
fn xinfo_stream_full_names_pel_lists_pending() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    run(&mut c, "XADD s 1-0 f v");
    run(&mut c, "XGROUP CREATE s g 0");
    run(&mut c, "XREADGROUP GROUP g alice STREAMS s >");
    let full = run(&mut c, "XINFO STREAM s FULL");
    // Group level: pel-count then pending; consumer level the same.
    assert!(
        full.contains(
            "$9\r\npel-count\r\n:1\r\n$7\r\npending\r\n*1\r\n*4\r\n$3\r\n1-0\r\n$5\r\nalice"
        ),
        "{full}"
    );
    assert!(
        full.contains("$9\r\npel-count\r\n:1\r\n$7\r\npending\r\n*1\r\n*3\r\n$3\r\n1-0"),
        "{full}"
    );
    assert!(!full.contains("\r\npel\r\n"), "{full}");
}

#[test]
fn groups_and_consumers_named_like_keywords() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    let entry = "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv";
    assert_eq!(run(&mut c, "XGROUP CREATE s STREAMS $ MKSTREAM"), "+OK");
    run(&mut c, "XADD s 1-0 f v");
    assert_eq!(
        run(&mut c, "XREADGROUP GROUP STREAMS STREAMS STREAMS s >"),
        entry
    );
    assert_eq!(
        run(
            &mut c,
            "XREADGROUP GROUP STREAMS STREAMS COUNT 1 STREAMS s 0"
        ),
        entry
    );
    let t = Instant::now();
    assert_eq!(
        run(
            &mut c,
            "XREADGROUP GROUP STREAMS BLOCK BLOCK 10 STREAMS s >"
        ),
        "*-1"
    );
    assert!(t.elapsed() >= Duration::from_millis(10));
    assert_eq!(
        run(&mut c, "XPENDING s STREAMS"),
        format!(
            "*4\r\n:1\r\n{}\r\n{}\r\n*1\r\n*2\r\n{}\r\n$1\r\n1",
            bulk("1-0"),
            bulk("1-0"),
            bulk("STREAMS")
        )
    );
    // Other option words as names, and two streams on (likely) other shards.
    for k in ["k1", "k2", "k3"] {
        assert_eq!(
            run(&mut c, &format!("XGROUP CREATE {k} COUNT 0 MKSTREAM")),
            "+OK"
        );
        run(&mut c, &format!("XADD {k} 1-0 f v"));
    }
    let r = run(
        &mut c,
        "XREADGROUP GROUP COUNT NOACK COUNT 5 NOACK STREAMS k1 k2 k3 > > >",
    );
    for k in ["k1", "k2", "k3"] {
        assert!(r.contains(&bulk(k)), "{r}");
    }
    assert_eq!(run(&mut c, "XPENDING k1 COUNT - + 10 NOACK"), "*0");
    assert_eq!(run(&mut c, "XGROUP CREATECONSUMER k1 COUNT BLOCK"), ":1");
    assert_eq!(
        run(&mut c, "XINFO CONSUMERS k1 COUNT")
            .matches("$5\r\nBLOCK")
            .count(),
        1
    );
    assert_eq!(run(&mut c, "XGROUP DELCONSUMER k1 COUNT BLOCK"), ":0");
    assert_eq!(run(&mut c, "XGROUP DESTROY k1 COUNT"), ":1");
}

#[test]
fn noack_read_leaves_consumer_inactive() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    run(&mut c, "XGROUP CREATE s g $ MKSTREAM");
    run(&mut c, "XADD s 1-0 f v");
    run(&mut c, "XREADGROUP GROUP g a NOACK STREAMS s >");
    let r = run(&mut c, "XINFO CONSUMERS s g");
    assert!(
        r.contains("$7\r\npending\r\n:0\r\n") && r.ends_with("$8\r\ninactive\r\n:-1"),
        "{r}"
    );
    // A read that creates pending entries makes it active.
    run(&mut c, "XADD s 2-0 f v");
    run(&mut c, "XREADGROUP GROUP g a STREAMS s >");
    let r = run(&mut c, "XINFO CONSUMERS s g");
    assert!(!r.ends_with("$8\r\ninactive\r\n:-1"), "{r}");
}

#[test]
fn xgroup_setid_takes_minus_and_plus() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    run(&mut c, "XADD s 1-0 f v");
    run(&mut c, "XADD s 2-0 f v");
    assert_eq!(run(&mut c, "XGROUP CREATE s g $"), "+OK");
    assert_eq!(run(&mut c, "XGROUP SETID s g -"), "+OK");
    assert_eq!(
        run(&mut c, "XINFO GROUPS s"),
        format!("*1\r\n{}", group_info("g", 0, 0, "0-0", None, Some(2)))
    );
    assert_eq!(run(&mut c, "XGROUP SETID s g +"), "+OK");
    assert_eq!(
        run(&mut c, "XINFO GROUPS s"),
        format!(
            "*1\r\n{}",
            group_info(
                "g",
                0,
                0,
                "18446744073709551615-18446744073709551615",
                None,
                None
            )
        )
    );
    // CREATE keeps the strict parse.
    assert_eq!(
        run(&mut c, "XGROUP CREATE s h -"),
        "-ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        run(&mut c, "XGROUP CREATE s h +"),
        "-ERR Invalid stream ID specified as stream command argument"
    );
}

#[test]
fn newest_error_texts() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    run(&mut c, "XGROUP CREATE s g $ MKSTREAM");
    assert_eq!(
        run(&mut c, "XREADGROUP GROUP g a STREAMS s +"),
        "-ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set."
    );
    // XREAD `+` on a stream that never had an entry.
    assert_eq!(
        run(&mut c, "XREAD STREAMS s +"),
        "-ERR the stream last element ID is 0-0"
    );
    assert_eq!(run(&mut c, "XREAD STREAMS nokey +"), "*-1");
}

/// Entries in an XREAD / XREADGROUP reply (RESP2): one `*2` header per entry
/// whose next line is an ID bulk string.
fn entry_count(raw: &str) -> usize {
    let lines: Vec<&str> = raw.split("\r\n").collect();
    lines
        .windows(3)
        .filter(|w| w[0] == "*2" && w[1].starts_with('$') && w[2].contains('-'))
        .count()
}

#[test]
fn maxcount_and_maxsize_cap_the_whole_reply() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    // Three streams on one slot (MAXCOUNT is exact on one shard).
    for k in ["{m}1", "{m}2", "{m}3"] {
        for i in 1..=100 {
            run(&mut c, &format!("XADD {k} {i}-1 f v"));
        }
    }
    let read = |c: &mut RespClient, opts: &str| {
        entry_count(&run(
            c,
            &format!("XREAD {opts} STREAMS {{m}}1 {{m}}2 {{m}}3 0 0 0"),
        ))
    };
    // The redis.io examples (XREAD, "The MAXCOUNT and MAXSIZE options").
    assert_eq!(read(&mut c, "COUNT 50"), 150);
    assert_eq!(read(&mut c, "COUNT 50 MAXCOUNT 80"), 80);
    assert_eq!(read(&mut c, "MAXCOUNT 5 MAXSIZE 100000"), 5);
    let r = run(&mut c, "XREAD MAXCOUNT 7 STREAMS {m}1 {m}2 {m}3 0 0 0");
    assert_eq!(entry_count(&r), 7);
    assert!(!r.contains("{m}2") && !r.contains("{m}3"), "{r}");
    // Later streams are left out once the budget is spent.
    let r = run(&mut c, "XREAD COUNT 100 MAXCOUNT 100 STREAMS {m}1 {m}2 0 0");
    assert!(r.starts_with("*1\r\n"), "{r}");
    // One entry `[1-1, [f, v]]` is 31 bytes of reply.
    assert_eq!(read(&mut c, "MAXSIZE 62"), 2);
    assert_eq!(read(&mut c, "MAXSIZE 61"), 1);
    // The first entry is sent however large.
    let big = "x".repeat(5000);
    c.raw(&["XADD", "big", "1-1", "f", &big]);
    assert_eq!(
        run(&mut c, "XREAD MAXSIZE 50 STREAMS big 0"),
        format!(
            "*1\r\n*2\r\n$3\r\nbig\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$5000\r\n{big}"
        )
    );
    // `MAXCOUNT 1` on a single stream (the example).
    assert_eq!(
        run(&mut c, "XREAD MAXCOUNT 1 STREAMS {m}1 0"),
        "*1\r\n*2\r\n$4\r\n{m}1\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv"
    );
}

/// Three streams whose keys land on three different shards of a
/// `SHARDS`-shard server, in key order.
fn streams_on_three_shards() -> Vec<String> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for i in 0.. {
        let k = format!("cap{i}");
        let shard = shardstream::route::slot::slot_of(k.as_bytes()).shard(SHARDS);
        if !seen.contains(&shard) {
            seen.push(shard);
            out.push(k);
        }
        if out.len() == 3 {
            return out;
        }
    }
    out
}

/// MAXCOUNT / MAXSIZE hold over the whole reply even when the streams live
/// on different shards (the read runs on every shard in key order with one
/// budget), for XREAD and XREADGROUP, blocking or not.
#[test]
fn maxcount_and_maxsize_are_cumulative_across_shards() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    let keys = streams_on_three_shards();
    for k in &keys {
        for i in 1..=10 {
            run(&mut c, &format!("XADD {k} {i}-1 f v"));
        }
        assert_eq!(run(&mut c, &format!("XGROUP CREATE {k} g 0")), "+OK");
    }
    let (k1, k2, k3) = (&keys[0], &keys[1], &keys[2]);
    let r = run(
        &mut c,
        &format!("XREAD MAXCOUNT 13 STREAMS {k1} {k2} {k3} 0 0 0"),
    );
    assert_eq!(entry_count(&r), 13, "{r}");
    assert!(
        r.contains(k1.as_str()) && r.contains(k2.as_str()) && !r.contains(k3.as_str()),
        "{r}"
    );
    let r = run(
        &mut c,
        &format!("XREAD COUNT 4 MAXCOUNT 9 STREAMS {k3} {k1} {k2} 0 0 0"),
    );
    assert_eq!(entry_count(&r), 9, "{r}");
    // One entry `[1-1, [f, v]]` is 31 bytes of reply (`10-1`: 32), so a
    // stream of ten is 311 bytes.
    let r = run(&mut c, &format!("XREAD MAXSIZE 341 STREAMS {k1} {k2} 0 0"));
    assert_eq!(entry_count(&r), 10, "{r}");
    let r = run(&mut c, &format!("XREAD MAXSIZE 342 STREAMS {k1} {k2} 0 0"));
    assert_eq!(entry_count(&r), 11, "{r}");
    // XREADGROUP: what the cap turns away is not delivered (not in a PEL).
    let r = run(
        &mut c,
        &format!("XREADGROUP GROUP g a MAXCOUNT 12 STREAMS {k1} {k2} {k3} > > >"),
    );
    assert_eq!(entry_count(&r), 12, "{r}");
    assert_eq!(
        run(&mut c, &format!("XPENDING {k1} g"))
            .split("\r\n")
            .nth(1),
        Some(":10")
    );
    assert_eq!(
        run(&mut c, &format!("XPENDING {k2} g"))
            .split("\r\n")
            .nth(1),
        Some(":2")
    );
    assert_eq!(
        run(&mut c, &format!("XPENDING {k3} g"))
            .split("\r\n")
            .nth(1),
        Some(":0")
    );
    let r = run(
        &mut c,
        &format!("XREADGROUP GROUP g a MAXCOUNT 12 BLOCK 100 STREAMS {k1} {k2} {k3} > > >"),
    );
    assert_eq!(entry_count(&r), 12, "{r}");
    // k2's last 8, then 4 of k3. The first failing key in key order
    // answers, before anything is read.
    assert_eq!(run(&mut c, &format!("XADD {k1} 11-1 f v")), "$4\r\n11-1");
    assert_eq!(
        run(
            &mut c,
            &format!("XREADGROUP GROUP g a MAXCOUNT 5 STREAMS {k1} nogroup {k3} > > >")
        ),
        format!(
            "-NOGROUP No such key 'nogroup' or consumer group 'g' in XREADGROUP with GROUP option"
        )
    );
    assert_eq!(
        run(&mut c, &format!("XPENDING {k3} g"))
            .split("\r\n")
            .nth(1),
        Some(":4")
    );
    assert_eq!(
        run(&mut c, &format!("XPENDING {k1} g"))
            .split("\r\n")
            .nth(1),
        Some(":10")
    );
}

#[test]
fn maxcount_and_maxsize_errors() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for (line, want) in [
        (
            "XREAD MAXCOUNT 0 STREAMS s 0",
            "-ERR value is out of range, must be positive",
        ),
        (
            "XREAD MAXCOUNT -1 STREAMS s 0",
            "-ERR value is out of range, must be positive",
        ),
        (
            "XREAD MAXSIZE 0 STREAMS s 0",
            "-ERR value is out of range, must be positive",
        ),
        (
            "XREAD MAXCOUNT x STREAMS s 0",
            "-ERR value is not an integer or out of range",
        ),
        (
            "XREAD MAXSIZE 1.5 STREAMS s 0",
            "-ERR value is not an integer or out of range",
        ),
        (
            "XREAD COUNT 5 MAXCOUNT 3 STREAMS s 0",
            "-ERR MAXCOUNT must be greater than or equal to COUNT",
        ),
        (
            "XREADGROUP GROUP g c COUNT 5 MAXCOUNT 3 STREAMS s >",
            "-ERR MAXCOUNT must be greater than or equal to COUNT",
        ),
        (
            "XREADGROUP GROUP g c MAXCOUNT 0 STREAMS s >",
            "-ERR value is out of range, must be positive",
        ),
    ] {
        assert_eq!(run(&mut c, line), want, "{line}");
    }
    // COUNT equal to MAXCOUNT is fine; so is COUNT 0 (no per-stream limit).
    assert_eq!(run(&mut c, "XREAD COUNT 3 MAXCOUNT 3 STREAMS s 0"), "*-1");
    assert_eq!(run(&mut c, "XREAD COUNT 0 MAXCOUNT 3 STREAMS s 0"), "*-1");
}

#[test]
fn xreadgroup_maxcount_delivers_only_what_it_sends() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for k in ["{g}1", "{g}2"] {
        for i in 1..=3 {
            run(&mut c, &format!("XADD {k} {i}-1 f v"));
        }
        run(&mut c, &format!("XGROUP CREATE {k} g 0"));
    }
    // redis-py 8.1.0 test_xreadgroup_max_count_cumulative_across_streams.
    let r = run(
        &mut c,
        "XREADGROUP GROUP g a COUNT 3 MAXCOUNT 4 STREAMS {g}1 {g}2 > >",
    );
    assert_eq!(entry_count(&r), 4, "{r}");
    // Only the entry sent from {g}2 is pending; the rest stay undelivered.
    assert_eq!(run(&mut c, "XPENDING {g}2 g").lines().nth(1), Some(":1"));
    assert!(run(&mut c, "XINFO GROUPS {g}2").contains("$3\r\n1-1\r\n$12\r\nentries-read\r\n"));
    let r = run(&mut c, "XREADGROUP GROUP g a STREAMS {g}2 >");
    assert_eq!(entry_count(&r), 2, "{r}");
    // History reads are capped too, MAXSIZE first entry included.
    let r = run(&mut c, "XREADGROUP GROUP g a MAXSIZE 1 STREAMS {g}1 0");
    assert_eq!(entry_count(&r), 1, "{r}");
    let r = run(
        &mut c,
        "XREADGROUP GROUP g a MAXCOUNT 2 STREAMS {g}1 {g}2 0 0",
    );
    assert_eq!(entry_count(&r), 2, "{r}");
    assert!(!r.contains("{g}2"), "{r}");
}

/// `field` of an XINFO STREAM reply (RESP2) as an integer.
fn info_int(raw: &str, field: &str) -> Option<i64> {
    let lines: Vec<&str> = raw.split("\r\n").collect();
    let i = lines.iter().position(|l| *l == field)?;
    lines.get(i + 1)?.strip_prefix(':')?.parse().ok()
}

#[test]
fn idmp_answers_duplicates_with_the_original_id() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    // The redis.io XADD example.
    let id1 = run(&mut c, "XADD s IDMP producer1 msg1 * field value");
    assert!(id1.starts_with('$'), "{id1}");
    assert_eq!(
        run(&mut c, "XADD s IDMP producer1 msg1 * field different_value"),
        id1
    );
    let id2 = run(&mut c, "XADD s IDMPAUTO producer2 * field value");
    assert_ne!(id2, id1);
    assert_eq!(run(&mut c, "XADD s IDMPAUTO producer2 * field value"), id2);
    // Other content, other producer, other iid: new entries.
    assert_ne!(run(&mut c, "XADD s IDMPAUTO producer2 * field other"), id2);
    assert_ne!(run(&mut c, "XADD s IDMPAUTO producer3 * field value"), id2);
    assert_ne!(run(&mut c, "XADD s IDMP producer1 msg2 * field value"), id1);
    assert_ne!(run(&mut c, "XADD s IDMP producer2 msg1 * field value"), id1);
    assert_eq!(run(&mut c, "XLEN s"), ":6");
    // The original ID comes back even after its entry was deleted.
    let id = id1.split("\r\n").nth(1).unwrap().to_string();
    assert_eq!(run(&mut c, &format!("XDEL s {id}")), ":1");
    assert_eq!(run(&mut c, "XADD s IDMP producer1 msg1 * field v"), id1);
    assert_eq!(run(&mut c, "XLEN s"), ":5");
    let info = run(&mut c, "XINFO STREAM s");
    for (f, want) in [
        ("idmp-duration", 100),
        ("idmp-maxsize", 100),
        ("pids-tracked", 3),
        ("iids-tracked", 6),
        ("iids-added", 6),
        ("iids-duplicates", 3),
    ] {
        assert_eq!(info_int(&info, f), Some(want), "{f}: {info}");
    }
    // Field order: after recorded-first-entry-id, before groups.
    assert!(
        info.contains("recorded-first-entry-id\r\n$")
            && info.contains("$15\r\niids-duplicates\r\n:3\r\n$6\r\ngroups\r\n:0"),
        "{info}"
    );
    // NOMKSTREAM on a missing key: nil, nothing recorded.
    assert_eq!(run(&mut c, "XADD nokey NOMKSTREAM IDMP p i * f v"), "$-1");
    // Trimming options combine with IDMP.
    assert!(run(&mut c, "XADD t MAXLEN 1 IDMP p i * f v").starts_with('$'));
}

#[test]
fn xinfo_stream_reports_idmp_defaults() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    run(&mut c, "XADD s 1-1 foo bar");
    let info = run(&mut c, "XINFO STREAM s");
    assert!(
        info.contains(
            "$13\r\nidmp-duration\r\n:100\r\n$12\r\nidmp-maxsize\r\n:100\r\n$12\r\npids-tracked\r\n:0\r\n$12\r\niids-tracked\r\n:0\r\n$10\r\niids-added\r\n:0\r\n$15\r\niids-duplicates\r\n:0\r\n"
        ),
        "{info}"
    );
    let full = run(&mut c, "XINFO STREAM s FULL");
    assert!(
        full.contains("$15\r\niids-duplicates\r\n:0\r\n$7\r\nentries"),
        "{full}"
    );
}

#[test]
fn xadd_idmp_argument_errors() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for (line, want) in [
        (
            "XADD s IDMP p i 1-1 f v",
            "-ERR IDMP and IDMPAUTO can only be used with the * entry ID",
        ),
        (
            "XADD s IDMPAUTO p 5-* f v",
            "-ERR IDMP and IDMPAUTO can only be used with the * entry ID",
        ),
        ("XADD s IDMP p i IDMPAUTO p * f v", "-ERR syntax error"),
        ("XADD s IDMPAUTO p IDMPAUTO p * f v", "-ERR syntax error"),
        (
            "XADD s IDMP p * f v",
            "-ERR Invalid stream ID specified as stream command argument",
        ),
        (
            "XADD s IDMP p i *",
            "-ERR wrong number of arguments for 'xadd' command",
        ),
    ] {
        assert_eq!(run(&mut c, line), want, "{line}");
    }
    assert_eq!(run(&mut c, "EXISTS s"), ":0");
}

#[test]
fn xcfgset_sets_idmp_and_checks_its_arguments() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for (line, want) in [
        (
            "XCFGSET",
            "-ERR wrong number of arguments for 'xcfgset' command",
        ),
        ("XCFGSET s", "-ERR syntax error"),
        ("XCFGSET s IDMP-DURATION", "-ERR syntax error"),
        ("XCFGSET s FOO 1", "-ERR syntax error"),
        ("XCFGSET s IDMP-DURATION 0", "-ERR invalid duration"),
        ("XCFGSET s IDMP-DURATION 86401", "-ERR invalid duration"),
        ("XCFGSET s IDMP-DURATION x", "-ERR invalid duration"),
        ("XCFGSET s IDMP-MAXSIZE 0", "-ERR invalid maxsize"),
        ("XCFGSET s IDMP-MAXSIZE 10001", "-ERR invalid maxsize"),
        ("XCFGSET s IDMP-MAXSIZE -5", "-ERR invalid maxsize"),
        ("XCFGSET s IDMP-DURATION 10", "-ERR no such key"),
    ] {
        assert_eq!(run(&mut c, line), want, "{line}");
    }
    run(&mut c, "SET str x");
    assert_eq!(
        run(&mut c, "XCFGSET str IDMP-DURATION 10"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // The redis.io XCFGSET examples.
    run(&mut c, "XADD mystream * field value");
    assert_eq!(run(&mut c, "XCFGSET mystream IDMP-DURATION 300"), "+OK");
    assert_eq!(run(&mut c, "XCFGSET mystream IDMP-MAXSIZE 1000"), "+OK");
    assert_eq!(
        run(
            &mut c,
            "XCFGSET mystream IDMP-DURATION 600 IDMP-MAXSIZE 500"
        ),
        "+OK"
    );
    let info = run(&mut c, "XINFO STREAM mystream");
    assert_eq!(info_int(&info, "idmp-duration"), Some(600));
    assert_eq!(info_int(&info, "idmp-maxsize"), Some(500));
    // Same values: the map stays; new values: it is emptied.
    let id = run(&mut c, "XADD mystream IDMP p i * f v");
    assert_eq!(run(&mut c, "XCFGSET mystream IDMP-MAXSIZE 500"), "+OK");
    assert_eq!(run(&mut c, "XADD mystream IDMP p i * f v"), id);
    assert_eq!(run(&mut c, "XCFGSET mystream IDMP-MAXSIZE 1"), "+OK");
    let info = run(&mut c, "XINFO STREAM mystream");
    assert_eq!(info_int(&info, "iids-tracked"), Some(0));
    assert_eq!(info_int(&info, "iids-added"), Some(1));
    assert_ne!(run(&mut c, "XADD mystream IDMP p i * f v"), id);
    // IDMP-MAXSIZE 1: the older iid of a producer is forgotten.
    let a = run(&mut c, "XADD mystream IDMP q a * f v");
    run(&mut c, "XADD mystream IDMP q b * f v");
    assert_ne!(run(&mut c, "XADD mystream IDMP q a * f v"), a);
}

#[test]
fn idmp_duration_forgets_old_iids() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    run(&mut c, "XADD s * f v");
    assert_eq!(run(&mut c, "XCFGSET s IDMP-DURATION 1"), "+OK");
    let id = run(&mut c, "XADD s IDMP p i * f v");
    assert_eq!(run(&mut c, "XADD s IDMP p i * f v"), id);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        info_int(&run(&mut c, "XINFO STREAM s"), "iids-tracked"),
        Some(0)
    );
    assert_ne!(run(&mut c, "XADD s IDMP p i * f v"), id);
}

/// redis-py 8.1's stream API (IDMP, XCFGSET, MAXCOUNT / MAXSIZE) drives the
/// server through tests/py/streams_8x.py. Skipped without redis-py, unless
/// SHARDSTREAM_REQUIRE_REDIS is set (CI).
#[test]
fn redis_py_drives_the_8x_stream_api() {
    use std::process::{Command, Stdio};
    let has_redis_py = Command::new("python3")
        .args(["-c", "import redis"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_redis_py {
        assert!(
            std::env::var_os("SHARDSTREAM_REQUIRE_REDIS").is_none(),
            "redis-py is required (pip install redis)"
        );
        eprintln!("python3 with redis-py not available: skipping");
        return;
    }
    let srv = TestServer::start(SHARDS);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/streams_8x.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(srv.addr.port().to_string())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "redis-py script failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Redis 7.2+ re-executes a woken XREAD: a key of it that now holds another
/// type fails the read with WRONGTYPE, while a write that turns a key into
/// another type does not wake it.
#[test]
fn woken_xread_checks_every_key_type_again() {
    let srv = TestServer::start(SHARDS);
    let (mut admin, mut r) = (srv.client(), srv.client());
    run(&mut admin, "XADD {w}a 1-1 f v");
    run(&mut admin, "XADD {w}b 1-1 f v");
    r.send(&["XREAD", "BLOCK", "0", "STREAMS", "{w}a", "{w}b", "$", "$"]);
    common::wait_blocked(&mut admin, 1);
    // {w}a becomes a string: no wake-up.
    assert_eq!(run(&mut admin, "DEL {w}a"), ":1");
    assert_eq!(run(&mut admin, "SET {w}a x"), "+OK");
    assert_eq!(
        common::info_int(&mut admin, "clients", "blocked_clients"),
        1
    );
    // A write to {w}b wakes it; running again meets the string first.
    run(&mut admin, "XADD {w}b 2-1 f v");
    assert_eq!(
        r.read_reply(),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn xidmprecord_records_a_pair_for_an_existing_entry() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for (line, want) in [
        ("XIDMPRECORD s p i 1-1", "-ERR no such key"),
        (
            "XIDMPRECORD s p i x",
            "-ERR Invalid stream ID specified as stream command argument",
        ),
        ("XADD s 1-1 f v", "$3\r\n1-1"),
        ("XADD s 2-1 f v", "$3\r\n2-1"),
        (
            "XIDMPRECORD s p i 9-9",
            "-ERR The stream ID does not exist in the stream",
        ),
        ("XIDMPRECORD s p i 1-1", "+OK"),
        ("XIDMPRECORD s p i 1-1", "+OK"),
        (
            "XIDMPRECORD s p i 2-1",
            "-ERR The pid/iid pair already maps to a different stream ID",
        ),
        // The recorded pair now answers an idempotent XADD.
        ("XADD s IDMP p i * f w", "$3\r\n1-1"),
        ("XLEN s", ":2"),
        (
            "XIDMPRECORD s",
            "-ERR wrong number of arguments for 'xidmprecord' command",
        ),
    ] {
        assert_eq!(run(&mut c, line), want, "{line}");
    }
    assert_eq!(
        c.raw(&["XIDMPRECORD", "s", "", "i", "1-1"]),
        "-ERR pid and iid must not be empty"
    );
    run(&mut c, "SET str x");
    assert_eq!(
        run(&mut c, "XIDMPRECORD str p i 1-1"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}
