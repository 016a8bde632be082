//! Delayed delivery (XSCHEDULE) end to end with real clients: a consumer
//! blocked in XREADGROUP gets the entry at its due time, exactly once;
//! pending entries survive a restart (AOF replay and rewrite); cancel and
//! errors.
mod common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{test_config, RespClient, ScratchDir, TestServer};
use shardstream::aof::FsyncPolicy;
use shardstream::config::Config;

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_blocked_consumer_gets_the_entry_at_its_due_time() {
    let srv = TestServer::start(2);
    let mut con = srv.redis();
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "jobs", "g", "$", "MKSTREAM"])
        .query(&mut con)
        .unwrap();
    let scheduled_at = Instant::now();
    let token: String = redis::cmd("XSCHEDULE")
        .arg(&["jobs", "IN", "300", "task", "t1"])
        .query(&mut con)
        .unwrap();
    assert!(token.contains('-'), "{token}");
    let pending: i64 = redis::cmd("XSCHEDULED")
        .arg("jobs")
        .query(&mut con)
        .unwrap();
    assert_eq!(pending, 1);
    let len: i64 = redis::cmd("XLEN").arg("jobs").query(&mut con).unwrap();
    assert_eq!(len, 0, "not readable before its due time");
    // A consumer blocked in XREADGROUP is woken by the delivery.
    let mut reader = srv.client();
    let got = reader.raw(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "5000",
        "STREAMS",
        "jobs",
        ">",
    ]);
    let waited = scheduled_at.elapsed();
    assert!(got.contains("task") && got.contains("t1"), "{got}");
    assert!(waited >= Duration::from_millis(295), "{waited:?}");
    assert!(waited < Duration::from_millis(2000), "{waited:?}");
    // The entry's ID is its delivery time, at or after the due time.
    let due: u64 = token.split('-').next().unwrap().parse().unwrap();
    let id_ms: u64 = got
        .split("\r\n")
        .find(|l| l.contains('-') && l.chars().next().unwrap().is_ascii_digit())
        .unwrap()
        .split('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(id_ms >= due, "id {id_ms} before due {due}");
    // Once: nothing more arrives, nothing is left pending.
    std::thread::sleep(Duration::from_millis(200));
    let len: i64 = redis::cmd("XLEN").arg("jobs").query(&mut con).unwrap();
    assert_eq!(len, 1);
    let pending: i64 = redis::cmd("XSCHEDULED")
        .arg("jobs")
        .query(&mut con)
        .unwrap();
    assert_eq!(pending, 0);
}

#[test]
fn due_order_cancel_absolute_times_and_errors() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let now = unix_ms();
    // Scheduled in reverse; delivered in due order, across several streams.
    for (i, k) in ["a", "b", "c"].iter().enumerate() {
        let at = (now + 400 - 100 * i as u64).to_string();
        for key in ["s1", "s2"] {
            assert!(c
                .raw(&["XSCHEDULE", key, "AT", &at, "n", k])
                .starts_with('$'));
        }
    }
    // In the past: due at once.
    assert!(c
        .raw(&["XSCHEDULE", "s3", "AT", "1", "n", "past"])
        .starts_with('$'));
    let tok = c.raw(&["XSCHEDULE", "s3", "IN", "100000", "n", "never"]);
    let tok = tok.split("\r\n").nth(1).unwrap().to_string();
    assert_eq!(
        c.raw(&["XUNSCHEDULE", "other", &tok]),
        ":0",
        "another key's token"
    );
    assert_eq!(c.raw(&["XUNSCHEDULE", "s3", &tok, &tok]), ":1");
    assert!(common::eventually(5, || c.raw(&["XLEN", "s1"]) == ":3"
        && c.raw(&["XLEN", "s2"]) == ":3"));
    let order = c.raw(&["XRANGE", "s1", "-", "+"]);
    let lines: Vec<&str> = order.split("\r\n").collect();
    let pos = |v: &str| lines.iter().position(|l| *l == v).unwrap();
    let (pa, pb, pc) = (pos("a"), pos("b"), pos("c"));
    assert!(pc < pb && pb < pa, "{order}");
    assert_eq!(c.raw(&["XLEN", "s3"]), ":1");
    assert_eq!(c.raw(&["XSCHEDULED", "s3"]), ":0");
    // Errors.
    assert_eq!(
        c.raw(&["XSCHEDULE", "s", "IN", "1", "f"]),
        "-ERR wrong number of arguments for 'xschedule' command"
    );
    assert_eq!(
        c.raw(&["XSCHEDULE", "s", "SOON", "1", "f", "v"]),
        "-ERR syntax error"
    );
    assert_eq!(
        c.raw(&["XSCHEDULE", "s", "IN", "x", "f", "v"]),
        "-ERR value is not an integer or out of range"
    );
    assert_eq!(
        c.raw(&["XSCHEDULE", "s", "IN", "-1", "f", "v"]),
        "-ERR value is out of range, must be positive"
    );
    assert_eq!(c.raw(&["SET", "str", "v"]), "+OK");
    assert!(c
        .raw(&["XSCHEDULE", "str", "IN", "1", "f", "v"])
        .starts_with("-WRONGTYPE"));
    assert_eq!(
        c.raw(&["XUNSCHEDULE", "s", "bad"]),
        "-ERR Invalid stream ID specified as stream command argument"
    );
    // FLUSHALL drops pending entries with the data.
    c.raw(&["XSCHEDULE", "gone", "IN", "200", "f", "v"]);
    assert_eq!(c.raw(&["FLUSHALL"]), "+OK");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(c.raw(&["EXISTS", "gone"]), ":0");
}

fn aof_config(dir: &Path) -> Config {
    Config {
        shards: 2,
        dir: dir.to_path_buf(),
        appendonly: true,
        appendfsync: FsyncPolicy::Always,
        ..test_config()
    }
}

fn wait_rewrite_done(c: &mut RespClient) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !c
        .raw(&["INFO", "persistence"])
        .contains("aof_rewrite_in_progress:0")
    {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Entries pending at shutdown are delivered after the restart, once;
/// entries delivered before it are not delivered again — after a replay
/// of the incr files and after a rewrite.
#[test]
fn pending_entries_survive_restarts_and_are_delivered_once() {
    for rewrite in [false, true] {
        let dir = ScratchDir::new(if rewrite {
            "delayed-rewrite"
        } else {
            "delayed-replay"
        });
        let cfg = aof_config(&dir);
        {
            let srv = TestServer::with_config(cfg.clone());
            let mut c = srv.client();
            for i in 0..10 {
                let key = format!("q{}", i % 3);
                let n = i.to_string();
                // Half due now, half after the restart.
                let delay = if i % 2 == 0 { "0" } else { "1500" };
                assert!(c
                    .raw(&["XSCHEDULE", &key, "IN", delay, "n", &n])
                    .starts_with('$'));
            }
            let cancel = c.raw(&["XSCHEDULE", "q0", "IN", "1500", "n", "cancelled"]);
            let cancel = cancel.split("\r\n").nth(1).unwrap().to_string();
            assert_eq!(c.raw(&["XUNSCHEDULE", "q0", &cancel]), ":1");
            assert!(common::eventually(5, || {
                let total: i64 = (0..3)
                    .map(|k| {
                        c.raw(&["XLEN", &format!("q{k}")])[1..]
                            .parse::<i64>()
                            .unwrap()
                    })
                    .sum();
                total == 5
            }));
            if rewrite {
                assert_eq!(
                    c.raw(&["BGREWRITEAOF"]),
                    "+Background append only file rewriting started"
                );
                wait_rewrite_done(&mut c);
            }
        }
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        let pending: i64 = (0..3)
            .map(|k| {
                c.raw(&["XSCHEDULED", &format!("q{k}")])[1..]
                    .parse::<i64>()
                    .unwrap()
            })
            .sum();
        assert_eq!(pending, 5, "rewrite={rewrite}");
        assert!(common::eventually(5, || {
            (0..3)
                .map(|k| c.raw(&["XSCHEDULED", &format!("q{k}")]))
                .all(|r| r == ":0")
        }));
        let mut seen: Vec<i64> = Vec::new();
        for k in 0..3 {
            let all = c.raw(&["XRANGE", &format!("q{k}"), "-", "+"]);
            let lines: Vec<&str> = all.split("\r\n").collect();
            for w in lines.windows(3) {
                if w[0] == "n" {
                    seen.push(w[2].parse().unwrap());
                }
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>(), "rewrite={rewrite}");
        drop(c);
        drop(srv);
        // A second restart delivers nothing again.
        let srv = TestServer::with_config(cfg);
        let mut c = srv.client();
        std::thread::sleep(Duration::from_millis(100));
        let total: i64 = (0..3)
            .map(|k| {
                c.raw(&["XLEN", &format!("q{k}")])[1..]
                    .parse::<i64>()
                    .unwrap()
            })
            .sum();
        assert_eq!(total, 10);
    }
}
