//! Lists and sets over real sockets: differential scripts against a real
//! redis-server (RESP2 and RESP3), cross-shard multi-key commands, blocking
//! pops served exactly once across shards, OBJECT ENCODING thresholds, and
//! AOF round trips (replay and rewrite).
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{test_config, RedisServer, RespClient, ScratchDir, TestServer};
use shardstream::aof::FsyncPolicy;
use shardstream::config::Config;

/// Commands whose replies are deterministic and agree between Redis 7.0 and
/// 8.x (no set encodings: 7.0 has no listpack sets; hash-table member order
/// is compared only through single-member or sorted-by-construction sets).
const LIST_SCRIPT: &str = r#"
FLUSHALL
RPUSH l a b c
LPUSH l z y
LPUSHX nope a
RPUSHX nope a
RPUSHX l q
LLEN l
LLEN nope
LRANGE l 0 -1
LRANGE l -100 100
LRANGE l 3 1
LRANGE l x 1
LRANGE nope 0 -1
LINDEX l 0
LINDEX l -1
LINDEX l 100
LINDEX l x
LINDEX nope x
LSET l 1 Y
LSET l 100 v
LSET l x v
LSET nope 0 v
LINSERT l BEFORE a A
LINSERT l AFTER q Q
LINSERT l AFTER missing v
LINSERT l MIDDLE a v
LINSERT nope BEFORE a v
LRANGE l 0 -1
RPUSH m a b c a b c a
LPOS m a
LPOS m a RANK 2
LPOS m a RANK -1
LPOS m a RANK -2 COUNT 2
LPOS m a COUNT 0
LPOS m a COUNT 0 MAXLEN 4
LPOS m x
LPOS m x COUNT 2
LPOS nope x
LPOS nope x COUNT 1
LPOS m a RANK 0
LPOS m a COUNT -1
LPOS m a MAXLEN -1
LPOS m a RANK x
LPOS m a FOO
LPOS m a COUNT
LREM m 2 a
LRANGE m 0 -1
LREM m -1 c
LRANGE m 0 -1
LREM m 0 b
LRANGE m 0 -1
LREM m x a
LREM nope 1 a
LTRIM m 0 0
LRANGE m 0 -1
LTRIM m 5 10
EXISTS m
LTRIM nope 0 1
LTRIM m x 1
RPUSH p 1 2 3 4 5
LPOP p
RPOP p
LPOP p 2
RPOP p 0
LPOP p -1
LPOP p x
LPOP p 1 2
LPOP nope
LPOP nope 2
RPOP p 10
EXISTS p
RPUSH src a b c
LMOVE src dst LEFT RIGHT
LMOVE src dst RIGHT LEFT
LMOVE src dst UP LEFT
LRANGE dst 0 -1
RPOPLPUSH src dst
LRANGE dst 0 -1
EXISTS src
LMOVE src dst LEFT LEFT
RPOPLPUSH nope dst
RPUSH rot 1 2 3
LMOVE rot rot LEFT RIGHT
LRANGE rot 0 -1
SET str v
LPUSH str a
RPUSH str a
LPUSHX str a
LPOP str
LLEN str
LRANGE str 0 1
LINDEX str 0
LSET str 0 a
LINSERT str BEFORE a b
LPOS str a
LREM str 0 a
LTRIM str 0 1
LMOVE str dst LEFT LEFT
LMOVE dst str LEFT LEFT
LMOVE nope str LEFT LEFT
LRANGE dst 0 -1
RPUSH a1 x
RPUSH a2 y z
LMPOP 2 nope a2 LEFT
LMPOP 2 nope a2 RIGHT COUNT 5
LMPOP 2 nope a2 LEFT
LMPOP 1 a1 LEFT COUNT 1 COUNT 1
LMPOP 0 a1 LEFT
LMPOP x a1 LEFT
LMPOP 3 a1 LEFT
LMPOP 1 a1 MIDDLE
LMPOP 1 a1 LEFT COUNT 0
LMPOP 1 a1 LEFT COUNT x
LMPOP 2 str a1 LEFT
LMPOP 2 a1 str LEFT
LPUSH
RPUSH a1 q
BLPOP a1 0
BLPOP a1 x
BLPOP a1 -1
BLPOP nope 0.01
BRPOP nope 0.01
BLMPOP 0.01 1 nope LEFT
BLMOVE nope dst LEFT LEFT 0.01
BRPOPLPUSH nope dst 0.01
BLMOVE nope dst LEFT MIDDLE 0.01
BLMPOP x 1 nope LEFT
BLMPOP 0 0 nope LEFT
BLPOP str 0
RPUSH b1 v
BLPOP nope b1 0
BRPOP b1 0.01
RPUSH b1 v1 v2
BLMPOP 0 2 nope b1 RIGHT COUNT 5
TYPE b1
RPUSH b2 v
BLMOVE b2 b3 RIGHT LEFT 0
BRPOPLPUSH b3 b2 0
LRANGE b2 0 -1
"#;

const SET_SCRIPT: &str = r#"
FLUSHALL
SADD s a
SADD s a b c
SADD s a
SREM s a x
SREM s
SREM nope a
SCARD s
SCARD nope
SISMEMBER s b
SISMEMBER s a
SISMEMBER nope a
SMISMEMBER s a b c x
SMISMEMBER nope a
SMEMBERS nope
SADD i 5 3 1 3
SMEMBERS i
SADD one x
SMEMBERS one
SRANDMEMBER one
SRANDMEMBER one 0
SRANDMEMBER one 3
SRANDMEMBER one -3
SRANDMEMBER nope
SRANDMEMBER nope 5
SRANDMEMBER nope -5
SRANDMEMBER one x
SRANDMEMBER one 1 2
SPOP nope
SPOP nope 2
SPOP one 0
SPOP one -1
SPOP one x
SPOP one 1 2
SPOP one
EXISTS one
SADD one x
SPOP one 5
EXISTS one
SADD a 1 2 3 4
SADD b 3 4 5
SADD c 4 9
SINTER a b c
SINTER a nope
SINTERCARD 2 a b
SINTERCARD 2 a b LIMIT 1
SINTERCARD 2 a b LIMIT 0
SINTERCARD 0 a
SINTERCARD x a
SINTERCARD 3 a b
SINTERCARD 1 a LIMIT -1
SINTERCARD 1 a FOO
SINTERSTORE d a b
SMEMBERS d
SINTERSTORE d a nope
EXISTS d
SDIFF a b
SDIFF a b c
SDIFF nope a
SDIFFSTORE d a b c
SMEMBERS d
SUNION c
SUNIONSTORE d c nope
SMEMBERS d
SMOVE a b 1
SMOVE a b 1
SMOVE nope b 1
SISMEMBER b 1
SMOVE b b 5
SMOVE b b 6
SSCAN i 0
SSCAN i 0 MATCH 1*
SSCAN i x
SSCAN nope 0
SSCAN i 0 COUNT 0
SSCAN i 0 FOO bar
SET str v
SADD str a
SREM str a
SMEMBERS str
SISMEMBER str a
SMISMEMBER str a
SCARD str
SPOP str
SRANDMEMBER str
SINTER a str
SINTER nope str
SUNION a str
SDIFF nope str
SINTERCARD 2 a str
SINTERSTORE d a str
SMOVE str a x
SMOVE a str 2
SMOVE nope str 2
SSCAN str 0
TYPE a
SADD l x
RPUSH s x
"#;

fn differential(script: &str, shards: u16, resp3: bool) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(shards);
    let (mut ours, mut theirs) = (srv.client(), redis.client());
    if resp3 {
        ours.raw(&["HELLO", "3"]);
        theirs.raw(&["HELLO", "3"]);
    }
    common::assert_same_replies(&mut ours, &mut theirs, script);
}

#[test]
fn lists_match_redis_resp2_and_resp3() {
    differential(LIST_SCRIPT, 4, false);
    differential(LIST_SCRIPT, 1, true);
}

#[test]
fn sets_match_redis_resp2_and_resp3() {
    differential(SET_SCRIPT, 4, false);
    differential(SET_SCRIPT, 1, true);
}

#[test]
fn wrongtype_across_types() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["XADD", "st", "1-1", "f", "v"]), "$3\r\n1-1");
    assert_eq!(c.raw(&["RPUSH", "l", "a"]), ":1");
    assert_eq!(c.raw(&["SADD", "s", "a"]), ":1");
    let wt = "-WRONGTYPE Operation against a key holding the wrong kind of value";
    for k in ["st", "s"] {
        assert_eq!(c.raw(&["LPUSH", k, "a"]), wt);
        assert_eq!(c.raw(&["BLPOP", k, "0"]), wt);
    }
    for k in ["st", "l"] {
        assert_eq!(c.raw(&["SADD", k, "a"]), wt);
    }
    for k in ["l", "s"] {
        assert_eq!(c.raw(&["XADD", k, "*", "f", "v"]), wt);
        assert_eq!(c.raw(&["GET", k]), wt);
        assert_eq!(c.raw(&["XLEN", k]), wt);
    }
    assert_eq!(c.raw(&["TYPE", "l"]), "+list");
    assert_eq!(c.raw(&["TYPE", "s"]), "+set");
}

/// Keys on different shards of a 4-shard server (hash tags keep these apart).
#[test]
fn multi_key_commands_work_across_shards() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let (a, b) = common::keys_on_two_shards("k", 4);
    // LMOVE / RPOPLPUSH across shards.
    assert_eq!(c.raw(&["RPUSH", &a, "1", "2"]), ":2");
    assert_eq!(c.raw(&["LMOVE", &a, &b, "LEFT", "RIGHT"]), "$1\r\n1");
    assert_eq!(c.raw(&["RPOPLPUSH", &a, &b]), "$1\r\n2");
    assert_eq!(c.raw(&["EXISTS", &a]), ":0");
    assert_eq!(
        c.raw(&["LRANGE", &b, "0", "-1"]),
        "*2\r\n$1\r\n2\r\n$1\r\n1"
    );
    assert_eq!(c.raw(&["LMOVE", &a, &b, "LEFT", "RIGHT"]), "$-1");
    // Destination of another type: nothing moves.
    assert_eq!(c.raw(&["SET", &a, "x"]), "+OK");
    assert!(c
        .raw(&["LMOVE", &b, &a, "LEFT", "RIGHT"])
        .starts_with("-WRONGTYPE"));
    assert_eq!(c.raw(&["LLEN", &b]), ":2");
    // LMPOP across shards: the first key with data, in key order.
    assert_eq!(c.raw(&["DEL", &a]), ":1");
    assert_eq!(
        c.raw(&["LMPOP", "2", &a, &b, "LEFT", "COUNT", "5"]),
        format!("*2\r\n${}\r\n{b}\r\n*2\r\n$1\r\n2\r\n$1\r\n1", b.len())
    );
    assert_eq!(c.raw(&["LMPOP", "2", &a, &b, "LEFT"]), "*-1");
    // Set algebra across shards.
    assert_eq!(c.raw(&["SADD", &a, "x", "y"]), ":2");
    assert_eq!(c.raw(&["SADD", &b, "y", "z"]), ":2");
    assert_eq!(c.raw(&["SINTER", &a, &b]), "*1\r\n$1\r\ny");
    assert_eq!(c.raw(&["SINTERCARD", "2", &a, &b]), ":1");
    assert_eq!(c.raw(&["SDIFF", &a, &b]), "*1\r\n$1\r\nx");
    assert_eq!(c.raw(&["SUNIONSTORE", "dst", &a, &b]), ":3");
    assert_eq!(c.raw(&["SCARD", "dst"]), ":3");
    assert_eq!(c.raw(&["SMOVE", &a, &b, "x"]), ":1");
    assert_eq!(c.raw(&["SISMEMBER", &b, "x"]), ":1");
    assert_eq!(c.raw(&["SMOVE", &a, &b, "nope"]), ":0");
    assert_eq!(c.raw(&["SET", "str", "v"]), "+OK");
    assert!(c.raw(&["SINTER", &a, "str"]).starts_with("-WRONGTYPE"));
}

#[test]
fn blocking_pops_across_shards_are_served_exactly_once() {
    let srv = TestServer::start(4);
    let (a, b) = common::keys_on_two_shards("k", 4);
    for round in 0..20 {
        let mut waiter = srv.client();
        waiter.send(&["BLPOP", &a, &b, "5"]);
        let mut w = srv.client();
        // Wait until the client is parked, then push to both keys at once.
        common::wait_blocked(&mut w, 1);
        w.send(&["RPUSH", &a, "va"]);
        w.send(&["RPUSH", &b, "vb"]);
        assert_eq!(w.read_reply(), ":1");
        assert_eq!(w.read_reply(), ":1");
        let got = waiter.read_reply();
        assert!(
            got.contains("va") || got.contains("vb"),
            "round {round}: {got}"
        );
        // Exactly one element was taken.
        let left = |c: &mut RespClient, k: &str| c.raw(&["LLEN", k]);
        let total = [left(&mut w, &a), left(&mut w, &b)]
            .iter()
            .filter(|r| *r == ":1")
            .count();
        assert_eq!(total, 1, "round {round}: {got}");
        w.raw(&["DEL", &a, &b]);
    }
}

#[test]
fn blocking_variants_wake_time_out_and_answer_in_multi() {
    let srv = TestServer::start(4);
    let (a, b) = common::keys_on_two_shards("k", 4);
    let mut c = srv.client();
    let mut w = srv.client();
    // Data on both shards: the first key in argument order is popped.
    assert_eq!(w.raw(&["RPUSH", &b, "vb"]), ":1");
    assert_eq!(w.raw(&["RPUSH", &a, "va"]), ":1");
    assert_eq!(
        c.raw(&["BLPOP", &a, &b, "1"]),
        format!("*2\r\n${}\r\n{a}\r\n$2\r\nva", a.len())
    );
    assert_eq!(
        c.raw(&["BLPOP", &a, &b, "1"]),
        format!("*2\r\n${}\r\n{b}\r\n$2\r\nvb", b.len())
    );
    assert_eq!(w.raw(&["RPUSH", &b, "1", "2"]), ":2");
    assert_eq!(w.raw(&["SET", &a, "str"]), "+OK");
    assert!(c.raw(&["BLPOP", &a, &b, "1"]).starts_with("-WRONGTYPE"));
    assert_eq!(
        c.raw(&["BLMPOP", "1", "2", &b, &a, "LEFT", "COUNT", "5"]),
        format!("*2\r\n${}\r\n{b}\r\n*2\r\n$1\r\n1\r\n$1\r\n2", b.len())
    );
    assert_eq!(w.raw(&["DEL", &a]), ":1");
    // Timeout: null array.
    let t = Instant::now();
    assert_eq!(c.raw(&["BRPOP", &a, "0.2"]), "*-1");
    assert!(t.elapsed() >= Duration::from_millis(190));
    // BLMOVE across shards, woken by a push.
    c.send(&["BLMOVE", &a, &b, "LEFT", "RIGHT", "5"]);
    common::wait_blocked(&mut w, 1);
    assert_eq!(w.raw(&["LPUSH", &a, "m"]), ":1");
    assert_eq!(c.read_reply(), "$1\r\nm");
    assert_eq!(w.raw(&["LRANGE", &b, "0", "-1"]), "*1\r\n$1\r\nm");
    assert_eq!(w.raw(&["EXISTS", &a]), ":0");
    // BLMPOP woken by a push.
    c.send(&["BLMPOP", "0", "2", &a, "x{ka}", "RIGHT", "COUNT", "2"]);
    common::wait_blocked(&mut w, 1);
    assert_eq!(w.raw(&["RPUSH", "x{ka}", "1", "2", "3"]), ":3");
    assert_eq!(
        c.read_reply(),
        "*2\r\n$5\r\nx{ka}\r\n*2\r\n$1\r\n3\r\n$1\r\n2"
    );
    // Inside MULTI a blocking pop answers at once.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["BLPOP", "empty", "0"]), "+QUEUED");
    assert_eq!(c.raw(&["BLPOP", "x{ka}", "0"]), "+QUEUED");
    assert_eq!(
        c.raw(&["EXEC"]),
        "*2\r\n*-1\r\n*2\r\n$5\r\nx{ka}\r\n$1\r\n1"
    );
}

#[test]
fn encodings_follow_the_thresholds() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(c.raw(&["RPUSH", "l", "a"]), ":1");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "l"]), "$8\r\nlistpack");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "list-max-listpack-size", "4"]),
        "+OK"
    );
    assert_eq!(c.raw(&["RPUSH", "l", "b", "c", "d", "e"]), ":5");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "l"]), "$9\r\nquicklist");
    assert_eq!(c.raw(&["RPOP", "l", "4"]).matches('$').count(), 4);
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "l"]), "$8\r\nlistpack");
    assert_eq!(
        c.raw(&["CONFIG", "GET", "list-max-listpack-size"]),
        "*2\r\n$22\r\nlist-max-listpack-size\r\n$1\r\n4"
    );
    let big = "x".repeat(9000);
    assert_eq!(
        c.raw(&["CONFIG", "SET", "list-max-listpack-size", "-2"]),
        "+OK"
    );
    assert_eq!(c.raw(&["RPUSH", "big", &big]), ":1");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "big"]), "$9\r\nquicklist");

    assert_eq!(c.raw(&["SADD", "s", "1", "2"]), ":2");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "s"]), "$6\r\nintset");
    assert_eq!(c.raw(&["SADD", "s", "a"]), ":1");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "s"]), "$8\r\nlistpack");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "set-max-listpack-entries", "3"]),
        "+OK"
    );
    assert_eq!(c.raw(&["SADD", "s", "b"]), ":1");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "s"]), "$9\r\nhashtable");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "set-max-intset-entries", "2"]),
        "+OK"
    );
    assert_eq!(c.raw(&["SADD", "i", "1", "2"]), ":2");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "i"]), "$6\r\nintset");
    assert_eq!(c.raw(&["SADD", "i", "3"]), ":1");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "i"]), "$9\r\nhashtable");
    assert!(c.raw(&["MEMORY", "USAGE", "s"]).starts_with(':'));
    assert!(c.raw(&["MEMORY", "USAGE", "l"]).starts_with(':'));
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

fn dump(c: &mut RespClient) -> Vec<String> {
    let mut out = Vec::new();
    for k in ["l", "l2", "dst{l}", "bl"] {
        out.push(c.raw(&["LRANGE", k, "0", "-1"]));
    }
    for k in ["s", "s2", "inter"] {
        let mut m = c.raw(&["SMEMBERS", k]);
        // Member order of a hash-table set is not part of the state.
        let mut lines: Vec<&str> = m.split("\r\n").collect();
        lines.sort_unstable();
        m = lines.join("|");
        out.push(m);
    }
    out.push(c.raw(&["PEXPIRETIME", "l"]));
    out.push(c.raw(&["SCARD", "s"]));
    out
}

#[test]
fn aof_round_trip_by_replay_and_by_rewrite() {
    let dir = ScratchDir::new("listset-roundtrip");
    let cfg = aof_config(&dir);
    let before = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        let run = |c: &mut RespClient, args: &[&str]| {
            let r = c.raw(args);
            assert!(!r.starts_with('-'), "{args:?}: {r}");
        };
        run(&mut c, &["RPUSH", "l", "a", "b", "c", "d", "e", "f"]);
        run(&mut c, &["LPUSH", "l", "z"]);
        run(&mut c, &["LPOP", "l", "2"]);
        run(&mut c, &["LSET", "l", "0", "B"]);
        run(&mut c, &["LINSERT", "l", "AFTER", "B", "B2"]);
        run(&mut c, &["LREM", "l", "1", "c"]);
        run(&mut c, &["LTRIM", "l", "0", "3"]);
        run(&mut c, &["LMOVE", "l", "dst{l}", "RIGHT", "LEFT"]);
        run(&mut c, &["RPUSH", "l2", "x", "y"]);
        run(&mut c, &["LMOVE", "l2", "dst{l}", "LEFT", "LEFT"]);
        run(&mut c, &["PEXPIRE", "l", "100000000"]);
        run(&mut c, &["SADD", "s", "1", "2", "3", "a", "b", "c", "d"]);
        run(&mut c, &["SREM", "s", "1"]);
        run(&mut c, &["SPOP", "s", "2"]);
        run(&mut c, &["SADD", "s2", "a", "b", "c", "d", "q"]);
        run(&mut c, &["SINTERSTORE", "inter", "s", "s2"]);
        run(&mut c, &["SMOVE", "s2", "s", "q"]);
        // A blocking pop served later is persisted as the pop it did.
        run(&mut c, &["RPUSH", "bl", "1", "2"]);
        let mut b = srv.client();
        assert_eq!(b.raw(&["BLPOP", "bl", "0"]), "*2\r\n$2\r\nbl\r\n$1\r\n1");
        dump(&mut c)
    };
    let after_replay = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        let s = dump(&mut c);
        assert_eq!(
            c.raw(&["BGREWRITEAOF"]),
            "+Background append only file rewriting started"
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !c
            .raw(&["INFO", "persistence"])
            .contains("aof_rewrite_in_progress:0")
        {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    };
    assert_eq!(before, after_replay);
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    assert_eq!(before, dump(&mut c));
}

#[test]
fn sscan_walks_a_hashtable_set_whole() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let members: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "big"];
    args.extend(members.iter().map(String::as_str));
    assert_eq!(c.raw(&args), ":1000");
    assert_eq!(c.raw(&["OBJECT", "ENCODING", "big"]), "$9\r\nhashtable");
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        calls += 1;
        let r = c.raw(&["SSCAN", "big", &cursor, "COUNT", "100"]);
        let lines: Vec<&str> = r.split("\r\n").collect();
        cursor = lines[2].to_string();
        for l in &lines[4..] {
            if !l.starts_with('$') {
                seen.insert(l.to_string());
            }
        }
        if cursor == "0" {
            break;
        }
        assert!(calls < 100, "the scan does not end");
    }
    assert!(calls >= 10, "COUNT 100 over 1000 members: {calls} calls");
    assert_eq!(seen.len(), 1000);
    // MATCH filters the page.
    let r = c.raw(&["SSCAN", "big", "0", "MATCH", "m99*", "COUNT", "10000"]);
    assert_eq!(r.matches("\r\nm99").count(), 11, "{r}");
    // Members present for the whole scan are returned even when others are
    // removed and added meanwhile.
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let r = c.raw(&["SSCAN", "big", &cursor, "COUNT", "37"]);
        let lines: Vec<&str> = r.split("\r\n").collect();
        cursor = lines[2].to_string();
        for l in &lines[4..] {
            if !l.starts_with('$') {
                seen.insert(l.to_string());
            }
        }
        // Remove members 0..10 of this round's block, add new ones.
        for i in 0..10 {
            c.raw(&["SREM", "big", &format!("m{}", round * 10 + i)]);
            c.raw(&["SADD", "big", &format!("new{round}-{i}")]);
        }
        round += 1;
        if cursor == "0" {
            break;
        }
        assert!(round < 1000, "the scan does not end");
    }
    let removed = round * 10;
    for i in removed..1000 {
        assert!(seen.contains(&format!("m{i}")), "m{i} missed");
    }
}
