//! Sorted sets survive a restart: replay of the effect log (ZADD with final
//! scores, ZREM for removals and pops, a served BZPOPMIN included) and the
//! load of a rewritten base file.
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{test_config, RespClient, ScratchDir, TestServer};
use shardstream::aof::FsyncPolicy;
use shardstream::config::Config;

fn aof_config(dir: &Path) -> Config {
    Config {
        shards: 2,
        dir: dir.to_path_buf(),
        appendonly: true,
        appendfsync: FsyncPolicy::Always,
        ..test_config()
    }
}

fn run(c: &mut RespClient, args: &[&str]) -> String {
    let r = c.raw(args);
    assert!(!r.starts_with('-'), "{args:?} -> {r}");
    r
}

/// Keys the state compares.
const KEYS: &[&str] = &[
    "plain", "floats", "big", "shrunk", "long", "popped", "{d}dst", "ttl", "gone", "woken",
];

fn populate(srv: &TestServer) {
    let mut c = srv.client();
    run(
        &mut c,
        &[
            "ZADD", "plain", "1", "a", "2", "b", "-inf", "lo", "+inf", "hi",
        ],
    );
    run(
        &mut c,
        &["ZADD", "plain", "XX", "CH", "5", "a", "9", "nope"],
    );
    run(&mut c, &["ZADD", "plain", "GT", "1", "b"]);
    // Scores that only survive if written with every digit.
    run(
        &mut c,
        &[
            "ZADD",
            "floats",
            "0.1",
            "x",
            "1e-7",
            "y",
            "123456789.123",
            "z",
        ],
    );
    for _ in 0..3 {
        run(&mut c, &["ZINCRBY", "floats", "0.1", "x"]);
    }
    run(&mut c, &["ZADD", "floats", "INCR", "0.2", "y"]);
    for i in 0..300 {
        let (s, m) = (format!("{}", i % 17), format!("m{i}"));
        run(&mut c, &["ZADD", "big", &s, &m]);
        run(&mut c, &["ZADD", "shrunk", &s, &m]);
    }
    run(&mut c, &["ZREM", "big", "m1", "m2", "m3"]);
    run(&mut c, &["ZREMRANGEBYSCORE", "big", "3", "(5"]);
    run(&mut c, &["ZREMRANGEBYRANK", "shrunk", "0", "249"]);
    run(&mut c, &["ZREMRANGEBYLEX", "shrunk", "-", "[m5"]);
    run(&mut c, &["ZADD", "long", "1", &"x".repeat(100)]);
    run(
        &mut c,
        &[
            "ZADD", "popped", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    run(&mut c, &["ZPOPMIN", "popped"]);
    run(&mut c, &["ZPOPMAX", "popped", "2"]);
    run(&mut c, &["ZMPOP", "1", "popped", "MIN"]);
    run(&mut c, &["ZADD", "{d}src", "1", "a", "2", "b", "3", "c"]);
    run(
        &mut c,
        &["ZRANGESTORE", "{d}dst", "{d}src", "(1", "+inf", "BYSCORE"],
    );
    run(&mut c, &["ZADD", "ttl", "1", "a"]);
    run(&mut c, &["EXPIRE", "ttl", "1000"]);
    run(&mut c, &["ZADD", "gone", "1", "a"]);
    run(&mut c, &["ZPOPMIN", "gone"]);
    // A pop served to a blocked client is logged as the pop it did.
    let mut blocked = srv.client();
    blocked.send(&["BZPOPMIN", "woken", "10"]);
    common::wait_blocked(&mut c, 1);
    run(&mut c, &["ZADD", "woken", "1", "first", "2", "second"]);
    assert!(blocked.read_reply().contains("first"));
}

fn state(c: &mut RespClient) -> Vec<String> {
    let mut out = Vec::new();
    for k in KEYS {
        out.push(c.raw(&["ZRANGE", k, "0", "-1", "WITHSCORES"]));
        out.push(c.raw(&["TYPE", k]));
        out.push(c.raw(&["PEXPIRETIME", k]));
    }
    for k in ["plain", "big", "long"] {
        out.push(c.raw(&["OBJECT", "ENCODING", k]));
    }
    out.push(c.raw(&["DBSIZE"]));
    out
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

#[test]
fn sorted_sets_survive_replay_and_rewrite() {
    let dir = ScratchDir::new("zset-aof-roundtrip");
    let cfg = aof_config(&dir);
    let before = {
        let srv = TestServer::with_config(cfg.clone());
        populate(&srv);
        state(&mut srv.client())
    };
    assert!(before[0].contains("lo"), "{}", before[0]);
    assert!(before.iter().any(|s| s.contains("0.4")), "{before:?}");
    let after_replay = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        let s = state(&mut c);
        assert_eq!(
            c.raw(&["BGREWRITEAOF"]),
            "+Background append only file rewriting started"
        );
        wait_rewrite_done(&mut c);
        s
    };
    assert_eq!(before, after_replay, "after replaying the effect log");
    let srv = TestServer::with_config(cfg);
    let after_base = state(&mut srv.client());
    assert_eq!(before, after_base, "after loading the rewritten base");
}
