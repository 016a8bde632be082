//! Redis 8.x stream options over real sockets (4 shards), exact replies as
//! documented on redis.io (the installed redis-server is 7.0 and knows none
//! of them): KEEPREF / DELREF / ACKED on XADD and XTRIM (8.2), XDELEX and
//! XACKDEL (8.2), XREADGROUP CLAIM (8.4), XNACK (8.8).
mod common;

use common::{entry_ids, RespClient, TestServer};

const SHARDS: u16 = 4;

fn run(c: &mut RespClient, line: &str) -> String {
    c.raw(&line.split_whitespace().collect::<Vec<_>>())
}

/// Wire text of an integer array.
fn ints(v: &[i64]) -> String {
    let mut s = format!("*{}", v.len());
    for n in v {
        s.push_str(&format!("\r\n:{n}"));
    }
    s
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}", s.len())
}

/// `XPENDING key group` summary with one consumer.
fn summary(n: i64, first: &str, last: &str, consumer: &str, count: i64) -> String {
    format!(
        "*4\r\n:{n}\r\n{}\r\n{}\r\n*1\r\n*2\r\n{}\r\n{}",
        bulk(first),
        bulk(last),
        bulk(consumer),
        bulk(&count.to_string())
    )
}

const EMPTY_PEL: &str = "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1";

/// A stream `s` with entries 1-1 .. n-1 (`f` = `v<i>`) and group `g` at 0.
fn setup(c: &mut RespClient, key: &str, n: u64, groups: &[&str]) {
    run(c, &format!("DEL {key}"));
    for i in 1..=n {
        assert_eq!(
            run(c, &format!("XADD {key} {i}-1 f v{i}")),
            bulk(&format!("{i}-1"))
        );
    }
    for g in groups {
        assert_eq!(run(c, &format!("XGROUP CREATE {key} {g} 0")), "+OK");
    }
}

#[test]
fn xdelex_argument_errors() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for (line, want) in [
        (
            "XDELEX s IDS 1",
            "-ERR wrong number of arguments for 'xdelex' command",
        ),
        (
            "XDELEX s IDS 0 1-1",
            "-ERR Number of IDs must be a positive integer",
        ),
        (
            "XDELEX s IDS x 1-1",
            "-ERR Number of IDs must be a positive integer",
        ),
        (
            "XDELEX s IDS -1 1-1",
            "-ERR Number of IDs must be a positive integer",
        ),
        (
            "XDELEX s IDS 3 1-1 2-1",
            "-ERR The `numids` parameter must match the number of arguments",
        ),
        ("XDELEX s IDS 1 1-1 2-1", "-ERR syntax error"),
        ("XDELEX s FOO IDS 1 1-1", "-ERR syntax error"),
        ("XDELEX s KEEPREF ACKED IDS 1 1-1", "-ERR syntax error"),
        ("XDELEX s KEEPREF 1 1-1 2-1", "-ERR syntax error"),
        (
            "XDELEX s IDS 1 bad",
            "-ERR Invalid stream ID specified as stream command argument",
        ),
        (
            "XACKDEL s g IDS 2 1-1",
            "-ERR The `numids` parameter must match the number of arguments",
        ),
        ("XACKDEL s g DELREF DELREF IDS 1 1-1", "-ERR syntax error"),
    ] {
        assert_eq!(run(&mut c, line), want, "{line}");
    }
    // Missing key: -1 per ID; the IDS block may come before the policy.
    assert_eq!(
        run(&mut c, "XDELEX nokey IDS 2 1-1 2-1 ACKED"),
        ints(&[-1, -1])
    );
    assert_eq!(run(&mut c, "XACKDEL nokey g IDS 1 1-1"), ints(&[-1]));
    run(&mut c, "SET str x");
    assert_eq!(
        run(&mut c, "XDELEX str IDS 1 1-1"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn xdelex_policies() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 5, &["g"]);
    run(&mut c, "XREADGROUP GROUP g c COUNT 2 STREAMS s >");
    // 1-1 pending, 3-1 never delivered, 9-9 absent but past the group's
    // last-delivered ID: ACKED asks whether a group needs the ID before it
    // looks for the entry (Redis 8.2 `xdelexCommand`), so all three are 2.
    assert_eq!(
        run(&mut c, "XDELEX s ACKED IDS 3 1-1 3-1 9-9"),
        ints(&[2, 2, 2])
    );
    // An absent ID no group needs: -1.
    assert_eq!(run(&mut c, "XDELEX s ACKED IDS 1 0-9"), ints(&[-1]));
    assert_eq!(run(&mut c, "XLEN s"), ":5");
    assert_eq!(run(&mut c, "XACK s g 1-1"), ":1");
    assert_eq!(run(&mut c, "XDELEX s ACKED IDS 1 1-1"), ints(&[1]));
    // KEEPREF (default) deletes and keeps the PEL reference.
    assert_eq!(run(&mut c, "XDELEX s IDS 1 2-1"), ints(&[1]));
    assert_eq!(
        run(&mut c, "XPENDING s g"),
        summary(1, "2-1", "2-1", "c", 1)
    );
    assert_eq!(
        run(&mut c, "XREADGROUP GROUP g c STREAMS s 0"),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*-1"
    );
    // DELREF drops dangling references even though the entry is gone (-1).
    assert_eq!(run(&mut c, "XDELEX s DELREF IDS 1 2-1"), ints(&[-1]));
    assert_eq!(run(&mut c, "XPENDING s g"), EMPTY_PEL);
    // DELREF on a live pending entry.
    run(&mut c, "XREADGROUP GROUP g c COUNT 1 STREAMS s >");
    assert_eq!(
        run(&mut c, "XPENDING s g"),
        summary(1, "3-1", "3-1", "c", 1)
    );
    assert_eq!(run(&mut c, "XDELEX s DELREF IDS 2 3-1 4-1"), ints(&[1, 1]));
    assert_eq!(run(&mut c, "XPENDING s g"), EMPTY_PEL);
    assert_eq!(run(&mut c, "XLEN s"), ":1");
    // Without groups, ACKED deletes (no group needs anything).
    setup(&mut c, "t", 2, &[]);
    assert_eq!(run(&mut c, "XDELEX t ACKED IDS 2 1-1 1-1"), ints(&[1, -1]));
}

#[test]
fn xackdel_policies() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 4, &["g1", "g2"]);
    assert_eq!(
        run(&mut c, "XACKDEL s nog IDS 1 1-1"),
        "-NOGROUP No such key 's' or consumer group 'nog'"
    );
    run(&mut c, "XREADGROUP GROUP g1 a STREAMS s >");
    run(&mut c, "XREADGROUP GROUP g2 b COUNT 3 STREAMS s >");
    // g2 still has 1-1 pending: acknowledged in g1, kept in the stream.
    assert_eq!(run(&mut c, "XACKDEL s g1 ACKED IDS 1 1-1"), ints(&[2]));
    assert_eq!(
        run(&mut c, "XPENDING s g1"),
        summary(3, "2-1", "4-1", "a", 3)
    );
    assert_eq!(
        run(&mut c, "XACKDEL s g2 ACKED IDS 2 1-1 9-9"),
        ints(&[1, -1])
    );
    assert_eq!(run(&mut c, "XLEN s"), ":3");
    // 4-1 never delivered to g2: ACKED keeps it.
    assert_eq!(run(&mut c, "XACKDEL s g1 ACKED IDS 1 4-1"), ints(&[2]));
    // KEEPREF: g2's reference to 2-1 stays.
    assert_eq!(run(&mut c, "XACKDEL s g1 IDS 1 2-1"), ints(&[1]));
    assert_eq!(
        run(&mut c, "XPENDING s g2"),
        summary(2, "2-1", "3-1", "b", 2)
    );
    // DELREF: 3-1 leaves g2's PEL too.
    assert_eq!(run(&mut c, "XACKDEL s g1 DELREF IDS 1 3-1"), ints(&[1]));
    assert_eq!(
        run(&mut c, "XPENDING s g2"),
        summary(1, "2-1", "2-1", "b", 1)
    );
    assert_eq!(run(&mut c, "XPENDING s g1"), EMPTY_PEL);
    assert_eq!(run(&mut c, "XLEN s"), ":1");
}

/// XACKDEL answers from the acknowledgement: an ID the group has not got
/// pending is `-1` and left alone, even when it is in the stream; one it
/// had pending is acknowledged (`1`), also when its entry is already gone
/// (DELREF then drops the other groups' references too). XDELEX ACKED keeps
/// an ID that a group still has pending even when its entry is gone. These
/// are the replies Redis 8.8 gives redis-rs's stream tests.
#[test]
fn xackdel_answers_from_the_pel() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 2, &["g1", "g2"]);
    // Neither group has read 1-1: -1, nothing deleted.
    assert_eq!(run(&mut c, "XACKDEL s g1 ACKED IDS 1 1-1"), ints(&[-1]));
    assert_eq!(run(&mut c, "XACKDEL s g1 DELREF IDS 1 1-1"), ints(&[-1]));
    assert_eq!(run(&mut c, "XLEN s"), ":2");
    run(&mut c, "XREADGROUP GROUP g1 a COUNT 1 STREAMS s >");
    run(&mut c, "XREADGROUP GROUP g2 b COUNT 1 STREAMS s >");
    // g1 acknowledges and deletes 1-1; g2 keeps its reference (KEEPREF).
    assert_eq!(run(&mut c, "XACKDEL s g1 KEEPREF IDS 1 1-1"), ints(&[1]));
    assert_eq!(run(&mut c, "XLEN s"), ":1");
    assert_eq!(
        run(&mut c, "XPENDING s g2"),
        summary(1, "1-1", "1-1", "b", 1)
    );
    // XDELEX ACKED: g2 still has 1-1 pending, so 2 though the entry is gone.
    assert_eq!(run(&mut c, "XDELEX s ACKED IDS 1 1-1"), ints(&[2]));
    // g2 acknowledges the dangling 1-1 with DELREF: 1.
    assert_eq!(run(&mut c, "XACKDEL s g2 DELREF IDS 1 1-1"), ints(&[1]));
    assert_eq!(run(&mut c, "XPENDING s g2"), EMPTY_PEL);
    assert_eq!(run(&mut c, "XACKDEL s g2 DELREF IDS 1 1-1"), ints(&[-1]));
    assert_eq!(run(&mut c, "XDELEX s ACKED IDS 1 1-1"), ints(&[-1]));
    // A KEEPREF acknowledgement of a dangling reference: 1 by the same rule
    // (the clients' tests pin only the DELREF case).
    run(&mut c, "XREADGROUP GROUP g1 a COUNT 1 STREAMS s >");
    assert_eq!(run(&mut c, "XDEL s 2-1"), ":1");
    assert_eq!(run(&mut c, "XACKDEL s g1 IDS 1 2-1"), ints(&[1]));
    assert_eq!(run(&mut c, "XPENDING s g1"), EMPTY_PEL);
}

#[test]
fn trim_reference_policies() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 5, &["g"]);
    run(&mut c, "XREADGROUP GROUP g c COUNT 3 STREAMS s >");
    assert_eq!(run(&mut c, "XACK s g 1-1"), ":1");
    // ACKED: only 1-1 is read and acknowledged by every group.
    assert_eq!(run(&mut c, "XTRIM s MAXLEN 0 ACKED"), ":1");
    assert_eq!(run(&mut c, "XLEN s"), ":4");
    assert_eq!(run(&mut c, "XACK s g 3-1"), ":1");
    // Skips pending 2-1, removes acked 3-1, stops at undelivered 4-1.
    assert_eq!(run(&mut c, "XTRIM s MINID 5 ACKED"), ":1");
    assert_eq!(run(&mut c, "XLEN s"), ":3");
    // KEEPREF (explicit or default) keeps 2-1 pending after trimming it.
    assert_eq!(run(&mut c, "XTRIM s MINID 3 KEEPREF"), ":1");
    assert_eq!(
        run(&mut c, "XPENDING s g"),
        summary(1, "2-1", "2-1", "c", 1)
    );
    // DELREF removes the references of what it trims (4-1 after a read).
    run(&mut c, "XREADGROUP GROUP g c COUNT 1 STREAMS s >");
    assert_eq!(
        run(&mut c, "XPENDING s g"),
        summary(2, "2-1", "4-1", "c", 2)
    );
    assert_eq!(run(&mut c, "XTRIM s MAXLEN = 1 DELREF"), ":1");
    // 2-1 was already gone from the stream: its dangling reference stays.
    assert_eq!(
        run(&mut c, "XPENDING s g"),
        summary(1, "2-1", "2-1", "c", 1)
    );
    // XADD's trim clause takes the policy too, before the ID.
    assert_eq!(run(&mut c, "XADD s MAXLEN 0 ACKED 6-1 f v6"), bulk("6-1"));
    assert_eq!(run(&mut c, "XLEN s"), ":2");
    assert_eq!(run(&mut c, "XADD s ACKED MAXLEN 0 7-1 f v7"), bulk("7-1"));
    assert_eq!(run(&mut c, "XLEN s"), ":3");
    assert_eq!(run(&mut c, "XADD s DELREF MAXLEN 0 8-1 f v8"), bulk("8-1"));
    assert_eq!(run(&mut c, "XLEN s"), ":0");
    assert_eq!(run(&mut c, "XTRIM s MAXLEN 0 FOO"), "-ERR syntax error");
    // No groups: ACKED has no effect.
    setup(&mut c, "t", 3, &[]);
    assert_eq!(run(&mut c, "XTRIM t MAXLEN 1 ACKED"), ":2");
}

/// Replace idle times of about an hour (`XCLAIM ... IDLE 3600000`) by `:IDLE`.
fn mask_idle(s: &str) -> String {
    s.split("\r\n")
        .map(|l| {
            if l.len() == 8 && l.starts_with(":36") {
                ":IDLE".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

fn claimed(id: &str, v: &str, idle: &str, count: i64) -> String {
    format!(
        "*4\r\n{}\r\n*2\r\n$1\r\nf\r\n{}\r\n{idle}\r\n:{count}",
        bulk(id),
        bulk(v)
    )
}

#[test]
fn xreadgroup_claim() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 4, &["g"]);
    for (line, want) in [
        (
            "XREADGROUP GROUP g c CLAIM -1 STREAMS s >",
            "-ERR value is out of range, must be positive",
        ),
        (
            "XREADGROUP GROUP g c CLAIM x STREAMS s >",
            "-ERR value is not an integer or out of range",
        ),
    ] {
        assert_eq!(run(&mut c, line), want, "{line}");
    }
    run(&mut c, "XREADGROUP GROUP g c1 COUNT 3 STREAMS s >");
    // 2-1 idle an hour (XCLAIM counts a delivery: 2), 1-1 a bit longer
    // (claimed first), 3-1 just delivered.
    run(&mut c, "XCLAIM s g c1 0 2-1 IDLE 3600000");
    run(&mut c, "XCLAIM s g c1 0 1-1 IDLE 3600500 RETRYCOUNT 4");
    let r = run(
        &mut c,
        "XREADGROUP GROUP g c2 COUNT 3 CLAIM 3000000 STREAMS s >",
    );
    assert_eq!(
        mask_idle(&r),
        format!(
            "*1\r\n*2\r\n$1\r\ns\r\n*3\r\n{}\r\n{}\r\n{}",
            claimed("1-1", "v1", ":IDLE", 4),
            claimed("2-1", "v2", ":IDLE", 2),
            claimed("4-1", "v4", ":0", 0)
        )
    );
    // Claimed: owner c2, count + 1; the new entry is pending for c2 too.
    let p = run(&mut c, "XPENDING s g - + 10 c2");
    let ids: Vec<&str> = p.split("\r\n").filter(|l| l.contains('-')).collect();
    assert_eq!(ids, ["1-1", "2-1", "4-1"], "{p}");
    assert_eq!(
        run(&mut c, "XPENDING s g - 1-1 1").rsplit("\r\n").next(),
        Some(":5")
    );
    // COUNT is shared: nothing idle enough and nothing new left.
    assert_eq!(
        run(&mut c, "XREADGROUP GROUP g c2 CLAIM 3000000 STREAMS s >"),
        "*-1"
    );
    assert_eq!(run(&mut c, "XADD s 5-1 f v5"), bulk("5-1"));
    // Only new entries: plain format plus 0, 0.
    assert_eq!(
        run(
            &mut c,
            "XREADGROUP GROUP g c2 COUNT 10 CLAIM 3000000 NOACK STREAMS s >"
        ),
        format!(
            "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n{}",
            claimed("5-1", "v5", ":0", 0)
        )
    );
    // An explicit ID ignores CLAIM: the consumer's history, standard format.
    assert_eq!(
        run(&mut c, "XREADGROUP GROUP g c1 CLAIM 0 STREAMS s 0"),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n3-1\r\n*2\r\n$1\r\nf\r\n$2\r\nv3"
    );
    // The budget caps claimed entries first: COUNT 1 claims the oldest only.
    run(&mut c, "XCLAIM s g c1 0 3-1 IDLE 3600000");
    run(&mut c, "XCLAIM s g c1 0 4-1 IDLE 3700000");
    let r = run(
        &mut c,
        "XREADGROUP GROUP g c3 COUNT 1 CLAIM 3000000 STREAMS s >",
    );
    assert!(
        r.starts_with("*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n4-1\r\n"),
        "{r}"
    );
}

#[test]
fn blocked_claim_reader_wakes_when_an_entry_gets_idle() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 1, &["g"]);
    run(&mut c, "XREADGROUP GROUP g c1 STREAMS s >");
    // Nothing is idle for 200 ms yet and nothing is new: the reader parks,
    // and is served once 1-1 has been pending long enough.
    let r = run(
        &mut c,
        "XREADGROUP GROUP g c2 BLOCK 0 CLAIM 200 STREAMS s >",
    );
    assert!(
        r.starts_with(
            "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$2\r\nv1\r\n:"
        ),
        "{r}"
    );
    assert!(r.ends_with("\r\n:1"), "{r}");
    assert_eq!(
        run(&mut c, "XPENDING s g"),
        summary(1, "1-1", "1-1", "c2", 1)
    );
}

/// XNACK makes entries claimable at once, so it serves a reader blocked in
/// XREADGROUP CLAIM right away, as XADD serves a blocked `>` reader: with
/// `hz 1` the timer that re-checks CLAIM readers runs once a second, and
/// the reader is answered well before that.
#[test]
fn xnack_serves_a_blocked_claim_reader_at_once() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    let mut reader = srv.client();
    assert_eq!(run(&mut c, "CONFIG SET hz 1"), "+OK");
    // The tick already scheduled comes within 100 ms; the next is 1 s later.
    std::thread::sleep(std::time::Duration::from_millis(150));
    setup(&mut c, "s", 1, &["g"]);
    run(&mut c, "XREADGROUP GROUP g c1 STREAMS s >");
    reader.send(
        &"XREADGROUP GROUP g c2 BLOCK 0 CLAIM 3600000 STREAMS s >"
            .split(' ')
            .collect::<Vec<_>>(),
    );
    // Parked: the reader shows as blocked.
    let t0 = std::time::Instant::now();
    while !run(&mut c, "INFO clients").contains("blocked_clients:1") {
        assert!(t0.elapsed().as_secs() < 10, "the reader never blocked");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let sent = std::time::Instant::now();
    assert_eq!(run(&mut c, "XNACK s g FAIL IDS 1 1-1"), ":1");
    let r = reader.read_reply();
    let waited = sent.elapsed();
    assert!(
        r.starts_with("*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n1-1\r\n"),
        "{r}"
    );
    assert!(r.ends_with("\r\n:-1\r\n:1"), "{r}");
    assert!(
        waited < std::time::Duration::from_millis(200),
        "served after {waited:?}: by the 1 s timer, not by XNACK"
    );
}

/// One XPENDING extended row.
fn pending_row(id: &str, consumer: &str, idle: i64, count: i64) -> String {
    format!(
        "*4\r\n{}\r\n{}\r\n:{idle}\r\n:{count}",
        bulk(id),
        bulk(consumer)
    )
}

/// XPENDING rows with every non-negative idle time (the line after the
/// consumer name) replaced by 0: owned entries' idle times vary by a few ms.
fn idle_as_zero(r: &str) -> String {
    let lines: Vec<&str> = r.split("\r\n").collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        // Row layout: *4, $len, id, $len, consumer, :idle, :count.
        let is_idle = i >= 5 && lines[i - 5] == "*4" && !l.starts_with(":-");
        out.push(if is_idle { ":0" } else { l });
    }
    out.join("\r\n")
}

fn rows(r: &[String]) -> String {
    format!("*{}\r\n{}", r.len(), r.join("\r\n"))
}

#[test]
fn xnack_argument_errors() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 3, &["g"]);
    for (line, want) in [
        (
            "XNACK s g FAIL IDS 1",
            "-ERR wrong number of arguments for 'xnack' command",
        ),
        ("XNACK s g MAYBE IDS 1 1-1", "-ERR syntax error"),
        ("XNACK s g FAIL ID 1 1-1", "-ERR syntax error"),
        (
            "XNACK s g FAIL IDS 0 1-1",
            "-ERR Number of IDs must be a positive integer",
        ),
        (
            "XNACK s g FAIL IDS 3 1-1 2-1",
            "-ERR The `numids` parameter must match the number of arguments",
        ),
        (
            "XNACK s g FAIL IDS 1 x",
            "-ERR Invalid stream ID specified as stream command argument",
        ),
        ("XNACK s g FAIL IDS 1 1-1 2-1", "-ERR syntax error"),
        (
            "XNACK s g FAIL IDS 1 1-1 RETRYCOUNT -1",
            "-ERR Invalid RETRYCOUNT option argument for XNACK",
        ),
        (
            "XNACK s nog FAIL IDS 1 1-1",
            "-NOGROUP No such key 's' or consumer group 'nog'",
        ),
        (
            "XNACK nokey g FAIL IDS 1 1-1",
            "-NOGROUP No such key 'nokey' or consumer group 'g'",
        ),
    ] {
        assert_eq!(run(&mut c, line), want, "{line}");
    }
    // Not pending: ignored, not counted.
    assert_eq!(run(&mut c, "XNACK s g FAIL IDS 1 1-1"), ":0");
}

/// XREADGROUP CLAIM serves released entries first, in the order they were
/// released (an entry released again moves to the end), then the idle
/// owned ones, then new entries: the order Redis 8.8 gives redis-rs's
/// XNACK tests ("NACK FIFO", "three-tier delivery order").
#[test]
fn xnack_release_order_is_the_claim_order() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 6, &["g"]);
    run(&mut c, "XREADGROUP GROUP g c1 COUNT 5 STREAMS s >");
    for id in ["3-1", "1-1", "4-1"] {
        assert_eq!(run(&mut c, &format!("XNACK s g FAIL IDS 1 {id}")), ":1");
    }
    // Released again: 3-1 goes to the end.
    assert_eq!(run(&mut c, "XNACK s g FAIL IDS 2 3-1 2-1"), ":2");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let read = run(&mut c, "XREADGROUP GROUP g c2 COUNT 10 CLAIM 2 STREAMS s >");
    assert_eq!(
        entry_ids(&read),
        ["1-1", "4-1", "3-1", "2-1", "5-1", "6-1"],
        "{read}"
    );
    // Claimed entries left the release order: nothing is released now.
    assert_eq!(run(&mut c, "XNACK s g FAIL IDS 1 5-1"), ":1");
    let read = run(
        &mut c,
        "XREADGROUP GROUP g c3 COUNT 1 CLAIM 3600000 STREAMS s >",
    );
    assert_eq!(entry_ids(&read), ["5-1"], "{read}");
}

#[test]
fn xnack_modes_and_how_other_commands_see_released_entries() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    setup(&mut c, "s", 6, &["g"]);
    run(&mut c, "XREADGROUP GROUP g c1 COUNT 5 STREAMS s >");
    // 2-1 delivered twice (history read), 3-1 and 4-1 once.
    run(&mut c, "XREADGROUP GROUP g c1 COUNT 1 STREAMS s 1-1");
    // The documented example: FAIL keeps the count; 9-9 is not pending.
    assert_eq!(run(&mut c, "XNACK s g FAIL IDS 3 1-1 2-1 9-9"), ":2");
    assert_eq!(run(&mut c, "XNACK s g SILENT IDS 1 3-1"), ":1");
    assert_eq!(run(&mut c, "XNACK s g fatal IDS 1 4-1"), ":1");
    // The released rows, exactly (5-1, still owned, follows).
    assert_eq!(
        run(&mut c, "XPENDING s g - 4-1 10"),
        rows(&[
            pending_row("1-1", "", -1, 1),
            pending_row("2-1", "", -1, 2),
            pending_row("3-1", "", -1, 0),
            pending_row("4-1", "", -1, i64::MAX),
        ])
    );
    // RETRYCOUNT overrides the mode.
    assert_eq!(run(&mut c, "XNACK s g FATAL IDS 1 3-1 RETRYCOUNT 5"), ":1");
    assert_eq!(
        run(&mut c, "XPENDING s g 3-1 3-1 1"),
        rows(&[pending_row("3-1", "", -1, 5)])
    );
    // Summary: all counted; released entries belong to no consumer.
    assert_eq!(
        run(&mut c, "XPENDING s g"),
        summary(5, "1-1", "5-1", "c1", 1)
    );
    // The consumer's history no longer has them; XPENDING's filter neither.
    assert_eq!(
        run(&mut c, "XREADGROUP GROUP g c1 STREAMS s 0"),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n5-1\r\n*2\r\n$1\r\nf\r\n$2\r\nv5"
    );
    assert_eq!(run(&mut c, "XPENDING s g - 4-1 10 c1"), "*0");
    // A plain > read does not redeliver them: only the new 6-1.
    assert_eq!(
        run(&mut c, "XREADGROUP GROUP g c2 STREAMS s >"),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n6-1\r\n*2\r\n$1\r\nf\r\n$2\r\nv6"
    );
    // XCLAIM takes a released entry whatever the min-idle-time (JUSTID:
    // count unchanged).
    assert_eq!(
        run(&mut c, "XCLAIM s g c3 3600000 1-1 JUSTID"),
        "*1\r\n$3\r\n1-1"
    );
    // XAUTOCLAIM too: 2-1 (released) yes, 5-1 and 6-1 (owned, fresh) no.
    assert_eq!(
        run(&mut c, "XAUTOCLAIM s g c3 3600000 2-1 COUNT 1 JUSTID"),
        "*3\r\n$3\r\n3-1\r\n*1\r\n$3\r\n2-1\r\n*0"
    );
    // XREADGROUP CLAIM serves released entries first, idle -1, their count:
    // 4-1 before 3-1, released again (RETRYCOUNT) after it.
    assert_eq!(
        run(
            &mut c,
            "XREADGROUP GROUP g c4 COUNT 1 CLAIM 3600000 STREAMS s >"
        ),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n4-1\r\n*2\r\n$1\r\nf\r\n$2\r\nv4\r\n:-1\r\n:9223372036854775807"
    );
    assert_eq!(
        run(
            &mut c,
            "XREADGROUP GROUP g c4 COUNT 1 CLAIM 3600000 STREAMS s >"
        ),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n3-1\r\n*2\r\n$1\r\nf\r\n$2\r\nv3\r\n:-1\r\n:5"
    );
    assert_eq!(
        idle_as_zero(&run(&mut c, "XPENDING s g - 3-1 10")),
        rows(&[
            pending_row("1-1", "c3", 0, 1),
            pending_row("2-1", "c3", 0, 2),
            pending_row("3-1", "c4", 0, 6),
        ])
    );
    // XACK removes a released entry like any other.
    assert_eq!(run(&mut c, "XNACK s g FAIL IDS 1 1-1"), ":1");
    assert_eq!(run(&mut c, "XACK s g 1-1"), ":1");
    // FORCE: creates unowned entries for stream entries not pending (count
    // 0), skips IDs not in the stream.
    assert_eq!(run(&mut c, "XACK s g 6-1"), ":1");
    assert_eq!(run(&mut c, "XNACK s g FAIL IDS 2 6-1 9-9 FORCE"), ":1");
    assert_eq!(
        run(&mut c, "XPENDING s g 6-1 + 10"),
        rows(&[pending_row("6-1", "", -1, 0)])
    );
    run(&mut c, "SET str x");
    assert_eq!(
        run(&mut c, "XNACK str g FAIL IDS 1 1-1"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

/// Redis 8.0 refuses to move a stream's last ID behind its
/// max-deleted-entry-id (the Tcl suite's "XSETID cannot set smaller ID than
/// current MAXDELETEDID"); 7.0 accepted it.
#[test]
fn xsetid_cannot_go_below_the_current_max_deleted_id() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for id in ["1-1", "1-2", "1-3"] {
        assert_eq!(run(&mut c, &format!("XADD x {id} f v")), bulk(id));
    }
    assert_eq!(run(&mut c, "XDEL x 1-2 1-3"), ":2");
    assert_eq!(
        run(&mut c, "XSETID x 1-2"),
        "-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
    );
    // Checked against the stream's own max deleted ID even when the call
    // gives one (t_stream.c xsetidCommand, Redis 8.0).
    assert_eq!(
        run(&mut c, "XSETID x 1-2 MAXDELETEDID 1-2"),
        "-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
    );
    assert_eq!(run(&mut c, "XSETID x 1-3"), "+OK");
    assert_eq!(
        run(&mut c, "XSETID x 1-1"),
        "-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
    );
}
