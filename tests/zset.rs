//! Sorted sets over real sockets: differential scripts against a real
//! redis-server (RESP2 and RESP3), exact replies for what Redis 7.2+/8.x
//! changed (score text, ZRANK WITHSCORE, timeouts), encodings and CONFIG,
//! blocking pops across shards (exactly one pop), and the redis crate.
mod common;

use std::time::Duration;

use common::{assert_same_replies, RedisServer, RespClient, TestServer};

/// Commands whose replies Redis 7.0 (the local redis-server) and 8.x share.
const SCRIPT: &str = r#"
ZADD z 1 a 2 b 3 c
ZADD z 1.5 a 2.25 d -3 e
ZADD z CH 1 a 2.5 b 10 f
ZADD z NX 100 a 7 g
ZADD z XX 8 g 9 nope
ZADD z GT 0 a
ZADD z GT CH 20 a
ZADD z LT CH 30 a
ZADD z LT CH 0 a
ZADD z XX GT CH 50 c
ZADD z INCR 5 a
ZADD z NX INCR 5 a
ZADD z GT INCR -1 a
ZADD z INCR 5 newmember
ZINCRBY z 2.5 newmember
ZINCRBY z -100 newmember
ZINCRBY z abc newmember
ZINCRBY {z}nokey 3 m
ZADD z NX XX 1 a
ZADD z GT LT 1 a
ZADD z GT NX 1 a
ZADD z INCR 1 a 2 b
ZADD z 1 a 2
ZADD z NX
ZADD z abc a
ZADD z nan a
ZADD z 1e5 big +inf top -inf bottom
ZADD z INCR -inf top
ZSCORE z a
ZSCORE z top
ZSCORE z bottom
ZSCORE z missing
ZSCORE {z}nokey a
ZMSCORE z a missing top
ZMSCORE {z}nokey a b
ZCARD z
ZCARD {z}nokey
ZRANK z a
ZRANK z missing
ZREVRANK z a
ZRANK {z}nokey a
ZRANGE z 0 -1
ZRANGE z 0 -1 WITHSCORES
ZRANGE z 2 4 WITHSCORES
ZRANGE z -3 -1
ZRANGE z 5 2
ZRANGE z 100 200
ZRANGE z 0 1 REV
ZRANGE z 0 -1 REV WITHSCORES
ZRANGE z -inf +inf BYSCORE
ZRANGE z (1 (10 BYSCORE WITHSCORES
ZRANGE z 10 1 BYSCORE REV WITHSCORES
ZRANGE z -inf +inf BYSCORE LIMIT 2 3
ZRANGE z -inf +inf BYSCORE LIMIT 2 -1
ZRANGE z -inf +inf BYSCORE LIMIT -1 3
ZRANGE z -inf +inf BYSCORE LIMIT 100 3
ZRANGE z +inf -inf BYSCORE REV LIMIT 1 2 WITHSCORES
ZRANGE z 5 1 BYSCORE
ZRANGE z (1 1 BYSCORE
ZRANGE z 0 -1 LIMIT 0 1
ZRANGE z 0 -1 BYSCORE BYLEX
ZRANGE z 0 -1 REV REV
ZRANGE z 0 -1 FOO
ZRANGE z 0 -1 LIMIT 1
ZRANGE z 0 -1 LIMIT a b
ZRANGE z a b
ZRANGE z a b BYSCORE
ZRANGE z [a [b BYSCORE
ZRANGE z - + BYLEX WITHSCORES
ZRANGE {z}nokey 0 -1
ZRANGEBYSCORE z 1 3
ZRANGEBYSCORE z (1 +inf WITHSCORES LIMIT 0 2
ZRANGEBYSCORE z 1 3 BYSCORE
ZRANGEBYSCORE z 1 3 REV
ZREVRANGEBYSCORE z +inf (2 WITHSCORES
ZREVRANGEBYSCORE z 3 1 LIMIT 1 1
ZREVRANGE z 0 2 WITHSCORES
ZREVRANGE z 0 2 BYSCORE
ZCOUNT z -inf +inf
ZCOUNT z (1 3
ZCOUNT z 3 1
ZCOUNT z x 1
ZCOUNT {z}nokey 1 2
ZADD edge -0 negzero 3.0e2 threehundred 0.5 half
ZSCORE edge negzero
ZSCORE edge threehundred
ZRANGEBYSCORE edge ( 1
ZRANGEBYSCORE edge -inf (
ZRANGEBYSCORE edge "" 1
ZCOUNT edge (0 (0
ZCOUNT edge 0 0
ZADD edge GT 5 newgt
ZADD edge LT CH 6 newlt
ZADD edge XX INCR 1 missing
ZADD edge XX INCR 1 half
ZRANGE edge 0 -1 WITHSCORES
ZADD lexedge 0 same1 0 same2 0 same3 0 "" 0 a
ZRANGEBYLEX lexedge [same1 [same2
ZRANGE lexedge [same3 [same1 BYLEX REV LIMIT 0 5
ZRANGE lexedge (same1 + BYLEX LIMIT 1 1
ZRANGEBYLEX lexedge [ (b
ZRANGEBYLEX lexedge ( +
ZLEXCOUNT lexedge - -
ZLEXCOUNT lexedge + +
ZLEXCOUNT lexedge + -
ZLEXCOUNT lexedge [a [a
ZLEXCOUNT lexedge (a [a
ZRANGEBYLEX lexedge - + LIMIT 0 0
ZREVRANGEBYSCORE edge +inf -inf LIMIT 0 0
ZRANGESTORE edge edge 0 1
ZRANGE edge 0 -1 WITHSCORES
MULTI
ZADD tx 1 a 2 b
ZPOPMIN tx
BZPOPMAX tx 0
BZPOPMAX tx 0
ZCARD tx
EXEC
MULTI
ZADD {z}tx 1 a 2 b 3 c
ZMPOP 2 {z}nokey {z}tx MAX COUNT 2
ZRANGESTORE {z}txdst {z}tx 0 -1
ZRANGE {z}txdst 0 -1 WITHSCORES
EXEC
ZADD delayed 100 job1 50 job2 200 job3
MULTI
ZRANGE delayed 0 0 WITHSCORES
ZREMRANGEBYRANK delayed 0 0
EXEC
ZRANGE delayed -inf 150 BYSCORE LIMIT 0 1 WITHSCORES
ZREM delayed job1
WATCH delayed
MULTI
ZPOPMIN delayed
EXEC
ZADD {z}lex 0 a 0 b 0 c 0 d 0 e 0 f 0 g
ZRANGEBYLEX {z}lex - +
ZRANGEBYLEX {z}lex [b (e
ZRANGEBYLEX {z}lex (b [e LIMIT 1 2
ZRANGEBYLEX {z}lex + -
ZRANGEBYLEX {z}lex a b
ZRANGEBYLEX {z}lex [a +x
ZRANGEBYLEX {z}lex - + WITHSCORES
ZREVRANGEBYLEX {z}lex + -
ZREVRANGEBYLEX {z}lex [e (b
ZREVRANGEBYLEX {z}lex + - LIMIT 2 2
ZRANGE {z}lex [c [a BYLEX REV
ZRANGE {z}lex (a [c BYLEX
ZLEXCOUNT {z}lex - +
ZLEXCOUNT {z}lex [b [d
ZLEXCOUNT {z}lex (b (b
ZLEXCOUNT {z}lex x y
ZLEXCOUNT {z}nokey - +
ZRANGESTORE {z}dst {z}lex [b [d BYLEX
ZRANGE {z}dst 0 -1 WITHSCORES
TYPE {z}dst
ZRANGESTORE {z}dst z 0 2
ZRANGE {z}dst 0 -1 WITHSCORES
ZRANGESTORE {z}dst z 1 +inf BYSCORE REV LIMIT 0 2
ZRANGE {z}dst 0 -1 WITHSCORES
ZRANGESTORE {z}dst z 100 200
EXISTS {z}dst
ZRANGESTORE {z}dst {z}nokey 0 -1
ZRANGESTORE {z}dst z 0 -1 WITHSCORES
SET {z}str v
ZRANGESTORE {z}str {z}lex 0 1
TYPE {z}str
ZREMRANGEBYLEX {z}lex [a [b
ZREMRANGEBYLEX {z}lex (a x
ZREMRANGEBYRANK {z}lex 0 0
ZREMRANGEBYRANK {z}lex -1 -1
ZREMRANGEBYRANK {z}lex 5 10
ZREMRANGEBYRANK {z}lex a 1
ZRANGE {z}lex 0 -1
ZREMRANGEBYSCORE z -inf (0
ZREMRANGEBYSCORE z x 1
ZREMRANGEBYSCORE {z}nokey 0 1
ZRANGE z 0 -1 WITHSCORES
ZREM z a b nope
ZREM z nope
ZREM {z}nokey a
ZREMRANGEBYRANK {z}lex 0 -1
EXISTS {z}lex
ZADD {z}p 1 a 2 b 3 c 4 d 5 e
ZPOPMIN {z}p
ZPOPMAX {z}p
ZPOPMIN {z}p 2
ZPOPMAX {z}p 0
ZPOPMIN {z}p -1
ZPOPMIN {z}p x
ZPOPMIN {z}p 1 2
ZPOPMAX {z}p 10
EXISTS {z}p
ZPOPMIN {z}nokey
ZPOPMIN {z}nokey 3
ZADD {z}p 1 a 2 b 3 c
ZMPOP 2 {z}nokey {z}p MIN
ZMPOP 2 {z}nokey {z}p MAX COUNT 10
ZMPOP 1 {z}p MIN
ZMPOP 0 {z}p MIN
ZMPOP -1 {z}p MIN
ZMPOP x {z}p MIN
ZMPOP 1 {z}p FOO
ZMPOP 2 {z}p MIN
ZMPOP 1 {z}p MIN COUNT 0
ZMPOP 1 {z}p MIN COUNT x
ZMPOP 1 {z}p MIN COUNT 1 COUNT 2
ZMPOP 1 {z}p MIN BAR
ZADD {z}q 1 a
BZPOPMIN {z}nokey {z}q 0
BZPOPMIN {z}q 0.01
BZPOPMAX {z}q 0.01
BZPOPMIN {z}q -1
BZPOPMIN {z}q abc
BZMPOP 0.01 1 {z}q MIN
ZADD {z}q 1 a 2 b
BZMPOP 0 2 {z}nokey {z}q MAX COUNT 5
BZMPOP 0 0 {z}q MIN
BZMPOP x 1 {z}q MIN
BZMPOP -1 1 {z}q MIN
BZMPOP 0 1 {z}q FOO
ZRANDMEMBER {z}nokey
ZRANDMEMBER {z}nokey 5
ZRANDMEMBER {z}nokey 5 WITHSCORES
ZADD one 7 only
ZRANDMEMBER one
ZRANDMEMBER one 3
ZRANDMEMBER one -2 WITHSCORES
ZRANDMEMBER one 0
ZRANDMEMBER one x
ZRANDMEMBER one 1 FOO
ZRANDMEMBER one 1 WITHSCORES x
ZRANDMEMBER one -9223372036854775808
ZRANDMEMBER one 9223372036854775807 WITHSCORES
ZSCAN one 0
ZSCAN one 0 MATCH o* COUNT 5
ZSCAN one 0 MATCH x*
ZSCAN one abc
ZSCAN one 0 COUNT 0
ZSCAN one 0 COUNT x
ZSCAN one 0 FOO bar
ZSCAN one 0 MATCH
ZSCAN {z}nokey 0
SET {z}str v
ZSCAN {z}str 0
ZSCAN {z}str abc
ZADD {z}str 1 a
ZINCRBY {z}str 1 a
ZREM {z}str a
ZCARD {z}str
ZSCORE {z}str a
ZMSCORE {z}str a
ZRANK {z}str a
ZCOUNT {z}str 0 1
ZCOUNT {z}str x 1
ZLEXCOUNT {z}str - +
ZRANGE {z}str 0 -1
ZRANGESTORE {z}dst {z}str 0 -1
ZREMRANGEBYRANK {z}str 0 1
ZREMRANGEBYSCORE {z}str 0 1
ZREMRANGEBYLEX {z}str - +
ZPOPMIN {z}str
ZMPOP 1 {z}str MIN
ZMPOP 2 {z}nokey {z}str MIN
BZPOPMIN {z}nokey {z}str 0
ZRANDMEMBER {z}str
ZRANDMEMBER {z}str 1
~XADD stream * f v
~XADD stream * f v
ZADD stream 1 a
ZRANGE stream 0 -1
ZADD zs 1 a
GET zs
XADD zs * f v
INCR zs
OBJECT ENCODING zs
TYPE zs
ZADD
ZADD z
ZADD z 1
ZCARD
ZSCORE z
ZRANGE z 0
ZRANGESTORE {z}dst z 0
ZPOPMIN
BZPOPMIN z
ZMPOP 1 z
BZMPOP 0 1 z
ZRANDMEMBER
ZSCAN z
ZREM z
ZCOUNT z 0
"#;

fn run_both(script: &str, resp3: bool) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let mut theirs = redis.client();
    if resp3 {
        ours.raw(&["HELLO", "3"]);
        theirs.raw(&["HELLO", "3"]);
    }
    assert_same_replies(&mut ours, &mut theirs, script);
}

#[test]
fn same_replies_as_redis_resp2() {
    run_both(SCRIPT, false);
}

#[test]
fn same_replies_as_redis_resp3() {
    run_both(SCRIPT, true);
}

#[test]
fn large_sets_match_redis() {
    // Past 128 members: the skiplist encoding on both sides.
    let mut script = String::new();
    for i in 0..300 {
        script.push_str(&format!("ZADD big {} m{:03}\n", i % 37, i));
    }
    script.push_str(
        "OBJECT ENCODING big\nZCARD big\nZRANGE big 0 -1 WITHSCORES\nZRANGE big 100 120 REV\n\
         ZRANK big m150\nZREVRANK big m150\nZCOUNT big (3 20\n\
         ZRANGE big 5 10 BYSCORE LIMIT 7 9 WITHSCORES\nZRANGE big 20 5 BYSCORE REV LIMIT 3 30\n\
         ZREMRANGEBYSCORE big 30 33\nZREMRANGEBYRANK big 10 50\nZRANGE big 0 -1 WITHSCORES\n\
         ZPOPMIN big 7\nZPOPMAX big 3\nZRANGESTORE {big}small big 0 9\nOBJECT ENCODING {big}small\n\
         ZRANGESTORE {big}large big 0 -1\nOBJECT ENCODING {big}large\nZCARD {big}large\n",
    );
    run_both(&script, false);
    run_both(&script, true);
}

#[test]
fn long_member_and_config_thresholds_match_redis() {
    let long = "x".repeat(65);
    let script = format!(
        "ZADD a 1 {long}\nOBJECT ENCODING a\nZADD b 1 {}\nOBJECT ENCODING b\n\
         CONFIG SET zset-max-ziplist-entries 2\nCONFIG GET zset-max-listpack-entries\n\
         ZADD c 1 a 2 b\nOBJECT ENCODING c\nZADD c 3 c\nOBJECT ENCODING c\n\
         ZADD d 1 a 2 b 3 c\nOBJECT ENCODING d\n\
         CONFIG SET zset-max-listpack-value 3\nCONFIG GET zset-max-ziplist-value\n\
         CONFIG SET zset-max-listpack-entries 128\nZADD e 1 abcd\nOBJECT ENCODING e\n\
         CONFIG SET zset-max-listpack-value 1kb\nCONFIG GET zset-max-listpack-value\n\
         CONFIG SET zset-max-listpack-entries abc\nCONFIG SET zset-max-listpack-entries -1\n\
         CONFIG SET zset-max-listpack-value -1\n",
        "y".repeat(64)
    );
    run_both(&script, false);
}

/// What Redis 7.2+ changed and the local redis-server (7.0) predates.
#[test]
fn newest_redis_replies() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["ZADD", "z", "0.1", "a", "1e-7", "b", "1e20", "c"]),
        ":3"
    );
    // d2string: shortest round trip, integers as integers (Redis 7.2+).
    assert_eq!(c.raw(&["ZSCORE", "z", "a"]), "$3\r\n0.1");
    assert_eq!(c.raw(&["ZSCORE", "z", "b"]), "$4\r\n1e-7");
    assert_eq!(c.raw(&["ZSCORE", "z", "c"]), "$5\r\n1e+20");
    assert_eq!(
        c.raw(&["ZINCRBY", "z", "0.2", "a"]),
        "$19\r\n0.30000000000000004"
    );
    assert_eq!(c.raw(&["ZADD", "z", "1e18", "d"]), ":1");
    assert_eq!(c.raw(&["ZSCORE", "z", "d"]), "$19\r\n1000000000000000000");
    // fast_float (Redis 7.2+): out-of-range scores saturate instead of failing.
    assert_eq!(c.raw(&["ZADD", "z", "1e400", "e"]), ":1");
    assert_eq!(c.raw(&["ZSCORE", "z", "e"]), "$3\r\ninf");
    // ZRANK / ZREVRANK WITHSCORE (Redis 7.2).
    assert_eq!(
        c.raw(&["ZRANK", "z", "a", "WITHSCORE"]),
        "*2\r\n:1\r\n$19\r\n0.30000000000000004"
    );
    assert_eq!(
        c.raw(&["ZREVRANK", "z", "b", "WITHSCORE"]),
        "*2\r\n:4\r\n$4\r\n1e-7"
    );
    assert_eq!(c.raw(&["ZRANK", "z", "nope", "WITHSCORE"]), "*-1");
    assert_eq!(c.raw(&["ZRANK", "nokey", "a", "WITHSCORE"]), "*-1");
    assert_eq!(
        c.raw(&["ZRANK", "z", "a", "WITHSCORES"]),
        "-ERR syntax error"
    );
    assert_eq!(
        c.raw(&["ZSCAN", "z", "0", "NOVALUES"]),
        "-ERR NOVALUES option can only be used in HSCAN"
    );
    assert_eq!(
        c.raw(&["ZRANK", "z", "a", "WITHSCORE", "x"]),
        "-ERR wrong number of arguments for 'zrank' command"
    );
    // Timeouts that overflow (Redis 7.2, #11338).
    assert_eq!(
        c.raw(&["BZPOPMIN", "q", "inf"]),
        "-ERR timeout is out of range"
    );
    assert_eq!(
        c.raw(&["BZPOPMIN", "q", "1e300"]),
        "-ERR timeout is out of range"
    );
    assert_eq!(
        c.raw(&["BZPOPMIN", "q", "-inf"]),
        "-ERR timeout is negative"
    );
    // RESP3: doubles and nested pairs.
    c.raw(&["HELLO", "3"]);
    assert_eq!(c.raw(&["ZSCORE", "z", "a"]), ",0.30000000000000004");
    assert_eq!(c.raw(&["ZSCORE", "z", "e"]), ",inf");
    assert_eq!(c.raw(&["ZSCORE", "z", "nope"]), "_");
    assert_eq!(
        c.raw(&["ZRANK", "z", "b", "WITHSCORE"]),
        "*2\r\n:0\r\n,1e-7"
    );
    assert_eq!(
        c.raw(&["ZRANGE", "z", "0", "1", "WITHSCORES"]),
        "*2\r\n*2\r\n$1\r\nb\r\n,1e-7\r\n*2\r\n$1\r\na\r\n,0.30000000000000004"
    );
    assert_eq!(
        c.raw(&["ZRANDMEMBER", "z", "-1", "WITHSCORES"])
            .lines()
            .next(),
        Some("*1")
    );
}

#[test]
fn memory_usage_and_randmember_shapes() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    for i in 0..200 {
        c.raw(&["ZADD", "z", &i.to_string(), &format!("member:{i}")]);
    }
    let usage: i64 = c.raw(&["MEMORY", "USAGE", "z"])[1..].parse().unwrap();
    assert!(usage > 200 * 20 && usage < 200 * 400, "{usage}");
    // Distinct members for a positive count, repetitions for a negative one.
    let r = c.raw(&["ZRANDMEMBER", "z", "50"]);
    let members: Vec<&str> = r.lines().filter(|l| l.starts_with("member:")).collect();
    let distinct: std::collections::HashSet<_> = members.iter().collect();
    assert_eq!((members.len(), distinct.len()), (50, 50));
    let r = c.raw(&["ZRANDMEMBER", "z", "-500"]);
    assert_eq!(r.lines().next(), Some("*500"));
    let r = c.raw(&["ZRANDMEMBER", "z", "1000", "WITHSCORES"]);
    assert_eq!(r.lines().next(), Some("*400"));
    // ZSCAN over a large set visits every member exactly once.
    let mut cursor = "0".to_string();
    let mut seen = std::collections::HashSet::new();
    loop {
        let r = c.raw(&["ZSCAN", "z", &cursor, "COUNT", "17"]);
        let lines: Vec<&str> = r.lines().collect();
        cursor = lines[2].to_string();
        for l in &lines {
            if l.starts_with("member:") {
                assert!(seen.insert(l.to_string()), "{l} twice");
            }
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 200);
}

/// Two keys owned by different shards of a 2-shard server.
#[test]
fn bzpopmin_across_shards_pops_exactly_once() {
    let srv = TestServer::start(2);
    let (a, b) = common::keys_on_two_shards("z", 2);
    for round in 0..5 {
        let mut blocked = srv.client();
        blocked.send(&["BZPOPMIN", &a, &b, "5"]);
        let mut w = srv.client();
        common::wait_blocked(&mut w, 1);
        // One write per shard in one pipeline: both keys become ready at once.
        w.send(&["ZADD", &a, "1", &format!("x{round}")]);
        w.send(&["ZADD", &b, "2", &format!("y{round}")]);
        assert_eq!(w.read_reply(), ":1");
        assert_eq!(w.read_reply(), ":1");
        let got = blocked.read_reply();
        assert!(got.starts_with("*3\r\n"), "{got}");
        // Exactly one member left between the two keys.
        let left: i64 = [&a, &b]
            .iter()
            .map(|k| w.raw(&["ZCARD", k])[1..].parse::<i64>().unwrap())
            .sum();
        assert_eq!(left, 1, "round {round}: {got}");
        w.raw(&["DEL", &a, &b]);
    }
}

#[test]
fn blocking_pops_wake_time_out_and_fail_like_redis() {
    let srv = TestServer::start(2);
    let (a, b) = common::keys_on_two_shards("z", 2);
    // Served by a write on the other shard's key.
    let mut blocked = srv.client();
    blocked.send(&["BZMPOP", "0", "2", &a, &b, "MAX", "COUNT", "2"]);
    let mut w = srv.client();
    common::wait_blocked(&mut w, 1);
    w.raw(&["ZADD", &b, "1", "m1", "2", "m2", "3", "m3"]);
    assert_eq!(
        blocked.read_reply(),
        format!(
            "*2\r\n${}\r\n{b}\r\n*2\r\n*2\r\n$2\r\nm3\r\n$1\r\n3\r\n*2\r\n$2\r\nm2\r\n$1\r\n2",
            b.len()
        )
    );
    // A timeout answers a null array (RESP2) / null (RESP3).
    let t0 = std::time::Instant::now();
    assert_eq!(blocked.raw(&["BZPOPMAX", &a, "0.2"]), "*-1");
    assert!(t0.elapsed() >= Duration::from_millis(150));
    blocked.raw(&["HELLO", "3"]);
    assert_eq!(blocked.raw(&["BZPOPMAX", &a, "0.05"]), "_");
    // A string written to the key does not wake it; a sorted set does.
    blocked.send(&["BZPOPMIN", &a, "5"]);
    common::wait_blocked(&mut w, 1);
    w.raw(&["SET", &a, "str"]);
    w.raw(&["DEL", &a]);
    w.raw(&["ZADD", &a, "4", "late"]);
    assert_eq!(
        blocked.read_reply(),
        format!("*3\r\n${}\r\n{a}\r\n$4\r\nlate\r\n,4", a.len())
    );
    // Inside MULTI a blocking pop answers at once.
    assert_eq!(w.raw(&["MULTI"]), "+OK");
    assert_eq!(w.raw(&["BZPOPMIN", &a, "0"]), "+QUEUED");
    assert_eq!(w.raw(&["EXEC"]), "*1\r\n*-1");
    // ZRANGESTORE into a key a client waits on wakes it.
    w.raw(&["ZADD", "{t}src", "1", "s"]);
    blocked.send(&["BZPOPMIN", "{t}dst", "5"]);
    common::wait_blocked(&mut w, 1);
    assert_eq!(w.raw(&["ZRANGESTORE", "{t}dst", "{t}src", "0", "-1"]), ":1");
    assert_eq!(blocked.read_reply(), "*3\r\n$6\r\n{t}dst\r\n$1\r\ns\r\n,1");
}

#[test]
fn redis_crate_round_trip() {
    let srv = TestServer::start(2);
    let mut con = srv.redis();
    let added: i64 = redis::cmd("ZADD")
        .arg("jobs")
        .arg(1700000000000u64)
        .arg("job-1")
        .arg(1700000000500u64)
        .arg("job-2")
        .query(&mut con)
        .unwrap();
    assert_eq!(added, 2);
    // The delayed-message pattern: the earliest due job, atomically.
    let due: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg("jobs")
        .arg("-inf")
        .arg(1700000000100u64)
        .arg("BYSCORE")
        .arg("LIMIT")
        .arg(0)
        .arg(10)
        .arg("WITHSCORES")
        .query(&mut con)
        .unwrap();
    assert_eq!(due, vec![("job-1".to_string(), 1700000000000.0)]);
    let popped: Vec<(String, f64)> = redis::cmd("ZPOPMIN").arg("jobs").query(&mut con).unwrap();
    assert_eq!(popped, vec![("job-1".to_string(), 1700000000000.0)]);
    let left: Option<(String, String, f64)> = redis::cmd("BZPOPMIN")
        .arg("jobs")
        .arg(1)
        .query(&mut con)
        .unwrap();
    assert_eq!(left, Some(("jobs".into(), "job-2".into(), 1700000000500.0)));
}

#[test]
fn zscan_cursor_is_checked_before_the_key() {
    let srv = TestServer::start(1);
    let mut c: RespClient = srv.client();
    assert_eq!(c.raw(&["ZSCAN", "nokey", "x"]), "-ERR invalid cursor");
}

#[test]
fn cross_shard_zmpop_and_zrangestore_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (a, b) = common::keys_on_two_shards("z", 2);
    let script = format!(
        "ZADD {b} 1 x 2 y 3 z\n\
         ZMPOP 2 {a} {b} MIN\n\
         ZMPOP 2 {a} {b} MAX COUNT 5\n\
         ZMPOP 2 {a} {b} MIN\n\
         ZADD {a} 5 p\nZADD {b} 6 q\n\
         ZMPOP 2 {b} {a} MIN COUNT 2\n\
         ZMPOP 2 {b} {a} MIN COUNT 2\n\
         SET {a} str\nZADD {b} 1 x\n\
         ZMPOP 2 {a} {b} MIN\n\
         ZMPOP 2 {b} {a} MIN\n\
         ZMPOP 2 {b} {a} MIN\n\
         DEL {a}\n\
         ZADD {a} 1 m1 2 m2 3 m3\n\
         ZRANGESTORE {b} {a} 1 -1\n\
         ZRANGE {b} 0 -1 WITHSCORES\n\
         ZRANGESTORE {b} {a} (1 +inf BYSCORE REV LIMIT 0 1\n\
         ZRANGE {b} 0 -1 WITHSCORES\n\
         ZRANGESTORE {b} {a} 10 20\n\
         EXISTS {b}\n\
         SET {b} s\nZRANGESTORE {b} {a} 0 0\nTYPE {b}\n\
         SET {a} s\nZRANGESTORE {b} {a} 0 0\nZRANGE {b} 0 -1\n\
         ZRANGESTORE {b} {a} 0 0 LIMIT 0 1\n"
    );
    let (mut ours, mut theirs) = (srv.client(), redis.client());
    assert_same_replies(&mut ours, &mut theirs, &script);
}

/// redis-py drives the delayed-job pattern (tests/py/zset_delayed_jobs.py)
/// against redis-server and shardstream, in RESP2 and RESP3. Skipped
/// without redis-py, unless SHARDSTREAM_REQUIRE_REDIS is set (CI).
#[test]
fn redis_py_delayed_jobs_like_redis() {
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
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/zset_delayed_jobs.py");
    let srv = TestServer::start(2);
    let redis = RedisServer::start();
    let mut ports = vec![("shardstream", srv.addr.port())];
    if let Some(r) = &redis {
        ports.push(("redis-server", r.addr.port()));
    }
    for (name, port) in ports {
        for protocol in ["2", "3"] {
            let out = Command::new("python3")
                .arg(script)
                .arg(port.to_string())
                .arg(protocol)
                .output()
                .expect("run python3");
            assert!(
                out.status.success(),
                "{name} RESP{protocol}: redis-py script failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
