//! DUMP / RESTORE in Redis's serialization format, over real sockets:
//! payloads from a real redis-server restore into shardstream with the same
//! stream state (entries, metadata, groups, PELs, consumers), ours restore
//! into redis-server, and errors match Redis's texts.
mod common;

use common::{assert_same_replies, RedisServer, RespClient, ScratchDir, TestServer};
use redis::Value as V;

fn conn(addr: std::net::SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}/"))
        .expect("client")
        .get_connection()
        .expect("connect")
}

fn run(c: &mut redis::Connection, line: &str) -> V {
    let args = common::words(line);
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn dump(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).expect("dump")
}

fn restore(c: &mut redis::Connection, key: &str, payload: &[u8]) -> redis::RedisResult<V> {
    redis::cmd("RESTORE").arg(key).arg(0).arg(payload).query(c)
}

/// A RESP2 flat map reply as (key, value) pairs.
fn pairs(v: &V) -> Vec<(String, V)> {
    let V::Array(items) = v else {
        panic!("not a map: {v:?}")
    };
    items
        .chunks(2)
        .map(|kv| match &kv[0] {
            V::BulkString(k) => (String::from_utf8_lossy(k).into_owned(), kv[1].clone()),
            V::SimpleString(k) => (k.clone(), kv[1].clone()),
            other => panic!("bad key {other:?}"),
        })
        .collect()
}

fn field(v: &V, name: &str) -> V {
    pairs(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no field {name} in {v:?}"))
}

fn list(v: &V) -> Vec<V> {
    match v {
        V::Array(a) => a.clone(),
        other => panic!("not an array: {other:?}"),
    }
}

/// The parts of `XINFO STREAM key FULL` that Redis 7.0 and 8.x report the
/// same way (8.x adds consumers' `active-time`; node counts depend on how
/// nodes were cut), with absolute times so two servers agree exactly.
fn full_state(c: &mut redis::Connection, key: &str) -> Vec<(String, V)> {
    let full = run(c, &format!("XINFO STREAM {key} FULL"));
    let mut out = Vec::new();
    for f in [
        "length",
        "last-generated-id",
        "max-deleted-entry-id",
        "entries-added",
        "recorded-first-entry-id",
        "entries",
    ] {
        out.push((f.to_string(), field(&full, f)));
    }
    for (i, g) in list(&field(&full, "groups")).iter().enumerate() {
        for f in [
            "name",
            "last-delivered-id",
            "entries-read",
            "lag",
            "pel-count",
            "pending",
        ] {
            out.push((format!("group{i}.{f}"), field(g, f)));
        }
        for (j, cons) in list(&field(g, "consumers")).iter().enumerate() {
            for f in ["name", "seen-time", "pel-count", "pending"] {
                out.push((format!("group{i}.consumer{j}.{f}"), field(cons, f)));
            }
        }
    }
    for line in [
        format!("XRANGE {key} - +"),
        format!("XREVRANGE {key} + - COUNT 3"),
        format!("XLEN {key}"),
        format!("XINFO GROUPS {key}"),
        format!("TYPE {key}"),
    ] {
        out.push((line.clone(), run(c, &line)));
    }
    for g in list(&run(c, &format!("XINFO GROUPS {key}"))) {
        let name = match field(&g, "name") {
            V::BulkString(b) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        };
        let line = format!("XPENDING {key} {name}");
        out.push((line.clone(), run(c, &line)));
    }
    out
}

/// Build streams and strings covering every encoding path: integer and
/// text values, SAMEFIELDS and different field sets, big values (LZF in
/// Redis's payloads), tombstones, trimmed prefixes, several nodes, groups
/// with pending entries, claimed entries, idle consumers, an unknown
/// entries-read, an empty stream with a group.
const SETUP: &str = "
XADD s1 1-1 n 1 s hello
XADD s1 1-2 n 2 s world
XADD s1 2-0 other x
XADD s1 3-0 n -5000 s 123456789012
XADD s1 3-1 n 70000 s -9000000000
XDEL s1 1-2
XGROUP CREATE s1 g1 0
XGROUP CREATE s1 g2 $
XGROUP CREATECONSUMER s1 g1 idle-one
XREADGROUP GROUP g1 alice COUNT 2 STREAMS s1 >
XREADGROUP GROUP g1 bob COUNT 1 STREAMS s1 >
XCLAIM s1 g1 bob 0 1-1 RETRYCOUNT 7
XACK s1 g1 2-0
XREADGROUP GROUP g1 alice STREAMS s1 >
XGROUP CREATE s1 g3 2-0 ENTRIESREAD 1
XADD empty 5-5 f v
XDEL empty 5-5
XGROUP CREATE empty eg $
SET str hello
SET int 1000
SET neg -17
SET max 9223372036854775807
SET long aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
";

fn setup(c: &mut redis::Connection) {
    for line in SETUP.lines().map(str::trim).filter(|l| !l.is_empty()) {
        run(c, line);
    }
    // Many entries: several nodes, compressible listpacks.
    for i in 0..450 {
        let mut cmd = redis::cmd("XADD");
        cmd.arg("big").arg(format!("{}-{}", 1000 + i / 10, i % 10));
        if i % 11 == 0 {
            cmd.arg("odd").arg("x".repeat(i));
        } else {
            cmd.arg("i").arg(i).arg("text").arg(format!("value-{i}"));
        }
        let _: String = cmd.query(c).unwrap();
    }
    run(c, "XTRIM big MAXLEN 400");
    run(c, "XDEL big 1020-3 1030-0");
    run(c, "XGROUP CREATE big cg 0");
    run(c, "XREADGROUP GROUP cg c1 COUNT 150 STREAMS big >");
    run(c, "XREADGROUP GROUP cg c2 COUNT 20 STREAMS big >");
    run(c, "XACK big cg 1006-1 1006-2");
}

const KEYS: &[&str] = &["s1", "empty", "big"];
const STRINGS: &[&str] = &["str", "int", "neg", "max", "long"];

#[test]
fn redis_payloads_restore_into_shardstream() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut r, mut o) = (conn(redis.addr), srv.redis());
    setup(&mut r);
    for key in KEYS {
        let p = dump(&mut r, key);
        assert_eq!(restore(&mut o, key, &p), Ok(V::Okay), "{key}");
        assert_eq!(full_state(&mut o, key), full_state(&mut r, key), "{key}");
        // A payload older than 7.2 carries no active time: Redis 7.2+
        // takes the seen time, and so do we.
        let full = run(&mut o, &format!("XINFO STREAM {key} FULL"));
        for g in list(&field(&full, "groups")) {
            for cons in list(&field(&g, "consumers")) {
                assert_eq!(field(&cons, "active-time"), field(&cons, "seen-time"));
            }
        }
    }
    for key in STRINGS {
        let p = dump(&mut r, key);
        assert_eq!(restore(&mut o, key, &p), Ok(V::Okay), "{key}");
        let get = format!("GET {key}");
        assert_eq!(run(&mut o, &get), run(&mut r, &get));
    }
    // The restored stream is live: groups keep delivering, new entries follow.
    let (mut rc, mut oc) = (redis.client(), srv.client());
    assert_same_replies(
        &mut oc,
        &mut rc,
        "
        XADD s1 9-0 late entry
        ~XREADGROUP GROUP g1 carol STREAMS s1 >
        XINFO GROUPS s1
        XPENDING s1 g1
        ",
    );
}

#[test]
fn our_payloads_restore_into_redis_with_an_older_version() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut r, mut o) = (conn(redis.addr), srv.redis());
    setup(&mut o);
    // The default payload is Redis 8.x's (RDB 12): Redis 7.0 refuses it.
    let p = dump(&mut o, "s1");
    assert_eq!(u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]]), 12);
    assert_eq!(p[0], 21, "STREAM_LISTPACKS_3");
    let err = restore(&mut r, "s1", &p).unwrap_err();
    assert!(
        err.to_string()
            .contains("DUMP payload version or checksum are wrong"),
        "{err}"
    );
    // With dump-payload-version 10 the payload is Redis 7.0's own.
    run(&mut o, "CONFIG SET dump-payload-version 10");
    assert_eq!(
        run(&mut o, "CONFIG GET dump-payload-version"),
        V::Array(vec![
            V::BulkString(b"dump-payload-version".to_vec()),
            V::BulkString(b"10".to_vec())
        ])
    );
    for key in KEYS.iter().chain(STRINGS) {
        let p = dump(&mut o, key);
        assert_eq!(restore(&mut r, key, &p), Ok(V::Okay), "{key}");
    }
    for key in KEYS {
        assert_eq!(full_state(&mut o, key), full_state(&mut r, key), "{key}");
    }
    for key in STRINGS {
        let get = format!("GET {key}");
        assert_eq!(run(&mut o, &get), run(&mut r, &get));
    }
    // Version 12 payloads round-trip through shardstream itself, active
    // times included.
    run(&mut o, "CONFIG SET dump-payload-version 12");
    for key in KEYS {
        let p = dump(&mut o, key);
        let copy = format!("{key}-copy");
        assert_eq!(restore(&mut o, &copy, &p), Ok(V::Okay));
        let a = run(&mut o, &format!("XINFO STREAM {key} FULL"));
        let b = run(&mut o, &format!("XINFO STREAM {copy} FULL"));
        let strip = |v: V| {
            pairs(&v)
                .into_iter()
                .filter(|(k, _)| k != "radix-tree-keys" && k != "radix-tree-nodes")
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(a), strip(b), "{key}");
    }
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("dump-payload-version")
        .arg(13)
        .query::<V>(&mut o)
        .unwrap_err();
    assert!(err.to_string().contains("between 9 and 12"), "{err}");
}

#[test]
fn restore_errors_and_options_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut r, mut o) = (conn(redis.addr), srv.redis());
    run(&mut r, "SET src hello");
    let p = dump(&mut r, "src");
    // Same payload with an unknown type byte and a correct CRC.
    let mut unknown = p[..p.len() - 8].to_vec();
    unknown[0] = 200;
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(&unknown);
    unknown.extend_from_slice(&crc.to_le_bytes());
    let mut flipped = p.clone();
    flipped[2] ^= 1;
    let mut results = Vec::new();
    for c in [&mut r, &mut o] {
        let mut got = Vec::new();
        let mut q = |args: &[&[u8]]| {
            let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
            for a in &args[1..] {
                cmd.arg(*a);
            }
            let v: redis::RedisResult<V> = cmd.query(c);
            got.push(format!("{args:?} -> {v:?}"));
        };
        q(&[b"SET", b"busy", b"x"]);
        q(&[b"RESTORE", b"busy", b"0", &p]);
        q(&[b"RESTORE", b"new", b"-1", &p]);
        q(&[b"RESTORE", b"new", b"abc", &p]);
        q(&[b"RESTORE", b"new", b"0", b"0123456789"]);
        q(&[b"RESTORE", b"new", b"0", b"short"]);
        q(&[b"RESTORE", b"new", b"0", &flipped]);
        q(&[b"RESTORE", b"new", b"0", &unknown]);
        q(&[b"RESTORE", b"new", b"0", &p, b"BOGUS"]);
        q(&[b"RESTORE", b"new", b"0", &p, b"IDLETIME"]);
        q(&[b"RESTORE", b"new", b"0", &p, b"IDLETIME", b"-1"]);
        q(&[b"RESTORE", b"new", b"0", &p, b"IDLETIME", b"x"]);
        q(&[b"RESTORE", b"new", b"0", &p, b"FREQ", b"256"]);
        q(&[b"RESTORE", b"new", b"0", &p, b"FREQ", b"-1"]);
        q(&[
            b"RESTORE",
            b"new",
            b"0",
            &p,
            b"IDLETIME",
            b"1",
            b"FREQ",
            b"1",
        ]);
        q(&[b"EXISTS", b"new"]);
        q(&[b"RESTORE", b"busy", b"0", &p, b"REPLACE"]);
        q(&[b"GET", b"busy"]);
        // An absolute TTL in the past: OK, and the key is gone (REPLACE deleted it).
        q(&[b"RESTORE", b"busy", b"1000", &p, b"REPLACE", b"ABSTTL"]);
        q(&[b"EXISTS", b"busy"]);
        q(&[b"RESTORE", b"ttl", b"100000", &p]);
        q(&[b"RESTORE", b"idle", b"0", &p, b"IDLETIME", b"1000"]);
        q(&[b"OBJECT", b"IDLETIME", b"idle"]);
        q(&[b"DUMP", b"missing"]);
        q(&[b"DUMP"]);
        q(&[b"RESTORE", b"k", b"0"]);
        results.push(got);
    }
    assert_eq!(results[0], results[1]);
    let pttl: i64 = redis::cmd("PTTL").arg("ttl").query(&mut o).unwrap();
    assert!((90_000..=100_000).contains(&pttl), "{pttl}");
}

#[test]
fn restore_wakes_blocked_readers() {
    let srv = TestServer::start(1);
    let mut o = srv.redis();
    run(&mut o, "XADD src 1-1 f v");
    let p = dump(&mut o, "src");
    let mut blocked = srv.client();
    blocked.send(&["XREAD", "BLOCK", "5000", "STREAMS", "dst", "0"]);
    assert!(common::eventually(5, || {
        let info: String = redis::cmd("INFO").arg("clients").query(&mut o).unwrap();
        info.contains("blocked_clients:1")
    }));
    assert_eq!(restore(&mut o, "dst", &p), Ok(V::Okay));
    let reply = blocked.read_reply();
    assert!(reply.contains("1-1"), "{reply}");
    let _: RespClient = blocked;
}

#[test]
fn restored_keys_survive_a_restart() {
    let dir = ScratchDir::new("restore-aof");
    let cfg = shardstream::config::Config {
        shards: 2,
        dir: dir.to_path_buf(),
        appendonly: true,
        ..common::test_config()
    };
    let before = {
        let srv = TestServer::with_config(cfg.clone());
        let mut o = srv.redis();
        setup(&mut o);
        let mut out = Vec::new();
        for key in KEYS {
            let p = dump(&mut o, key);
            let copy = format!("{key}:restored");
            let r: V = redis::cmd("RESTORE")
                .arg(&copy)
                .arg(0)
                .arg(&p)
                .arg("REPLACE")
                .query(&mut o)
                .unwrap();
            assert_eq!(r, V::Okay);
            out.push(run(&mut o, &format!("XINFO STREAM {copy} FULL")));
        }
        let p = dump(&mut o, "long");
        let r: V = redis::cmd("RESTORE")
            .arg("long:restored")
            .arg(100_000)
            .arg(&p)
            .query(&mut o)
            .unwrap();
        assert_eq!(r, V::Okay);
        out
    };
    let srv = TestServer::with_config(cfg);
    let mut o = srv.redis();
    for (key, want) in KEYS.iter().zip(&before) {
        assert_eq!(
            &run(&mut o, &format!("XINFO STREAM {key}:restored FULL")),
            want,
            "{key}"
        );
    }
    let ttl: i64 = redis::cmd("PTTL")
        .arg("long:restored")
        .query(&mut o)
        .unwrap();
    assert!(ttl > 0 && ttl <= 100_000, "{ttl}");
}

/// Sorted sets both ways: small (listpack) and large sets DUMPed by
/// redis-server restore here with every member and score, and ours (RDB
/// version 10, which 7.0 accepts) restore into redis-server.
#[test]
fn sorted_sets_dump_and_restore_both_ways() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut ours, mut theirs) = (srv.redis(), conn(redis.addr));
    run(&mut theirs, "FLUSHALL");
    run(&mut theirs, "ZADD small 1 a 2.5 b -inf c");
    for i in 0..300 {
        run(&mut theirs, &format!("ZADD big {i}.25 m{i}"));
    }
    for key in ["small", "big"] {
        let payload = dump(&mut theirs, key);
        assert_eq!(
            restore(&mut ours, key, &payload).ok(),
            Some(V::Okay),
            "{key}"
        );
        let want = run(&mut theirs, &format!("ZRANGE {key} 0 -1 WITHSCORES"));
        assert_eq!(
            run(&mut ours, &format!("ZRANGE {key} 0 -1 WITHSCORES")),
            want,
            "{key}"
        );
    }
    run(&mut ours, "CONFIG SET dump-payload-version 10");
    for key in ["small", "big"] {
        let payload = dump(&mut ours, key);
        run(&mut theirs, &format!("DEL {key}"));
        assert_eq!(
            restore(&mut theirs, key, &payload).ok(),
            Some(V::Okay),
            "{key}"
        );
        let want = run(&mut ours, &format!("ZRANGE {key} 0 -1 WITHSCORES"));
        assert_eq!(
            run(&mut theirs, &format!("ZRANGE {key} 0 -1 WITHSCORES")),
            want,
            "{key}"
        );
    }
}

/// Lists and sets both ways: what redis-server 7.0 DUMPs (quicklist,
/// intset, listpack and hashtable encodings) restores here with the same
/// contents, and ours restore into redis-server.
#[test]
fn lists_and_sets_dump_and_restore_both_ways() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut ours, mut theirs) = (srv.redis(), conn(redis.addr));
    run(&mut theirs, "FLUSHALL");
    run(&mut theirs, "RPUSH l1 a b 3 c");
    run(&mut theirs, "SADD ints 5 -3 300");
    run(&mut theirs, "SADD words x yy z");
    for i in 0..600 {
        run(&mut theirs, &format!("RPUSH l2 element-{i}"));
        run(&mut theirs, &format!("SADD big m{i}"));
    }
    let read = |c: &mut redis::Connection, key: &str| -> V {
        match run(c, &format!("TYPE {key}")) {
            V::SimpleString(t) if t == "list" => run(c, &format!("LRANGE {key} 0 -1")),
            _ => run(c, &format!("SORT {key} ALPHA")),
        }
    };
    let keys = ["l1", "l2", "ints", "words", "big"];
    for key in keys {
        let payload = dump(&mut theirs, key);
        assert_eq!(
            restore(&mut ours, key, &payload).ok(),
            Some(V::Okay),
            "{key}"
        );
        let want = read(&mut theirs, key);
        let got = match run(&mut ours, &format!("TYPE {key}")) {
            V::SimpleString(t) if t == "list" => run(&mut ours, &format!("LRANGE {key} 0 -1")),
            _ => {
                let mut m: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(key).query(&mut ours).unwrap();
                m.sort();
                V::Array(m.into_iter().map(V::BulkString).collect())
            }
        };
        assert_eq!(got, want, "{key}");
    }
    run(&mut ours, "CONFIG SET dump-payload-version 10");
    for key in keys {
        let payload = dump(&mut ours, key);
        run(&mut theirs, &format!("DEL {key}"));
        assert_eq!(
            restore(&mut theirs, key, &payload).ok(),
            Some(V::Okay),
            "{key}"
        );
    }
    assert_eq!(
        run(&mut theirs, "LRANGE l1 0 -1"),
        run(&mut ours, "LRANGE l1 0 -1")
    );
    assert_eq!(run(&mut theirs, "SCARD big"), V::Int(600));
    assert_eq!(run(&mut theirs, "SISMEMBER ints -3"), V::Int(1));
}

/// TYPE, EXISTS, the TTL family, OBJECT ENCODING and MEMORY USAGE do not
/// count as an access (Redis's `LOOKUP_NOTOUCH`):
/// a key restored with IDLETIME 1000 keeps it through them, and a GET
/// resets it. Same on redis-server.
#[test]
fn type_and_exists_leave_the_idle_time_alone() {
    let srv = TestServer::start(2);
    let redis = RedisServer::start();
    let mut servers = connections(&srv, redis.as_ref());
    for c in &mut servers {
        run(c, "SET src v");
        let p = dump(c, "src");
        restore_idle(c, "idle", &p);
        assert_eq!(run(c, "TYPE idle"), V::SimpleString("string".into()));
        assert_eq!(run(c, "EXISTS idle src nope"), V::Int(2));
        // Nor are the TTL family, OBJECT ENCODING and MEMORY USAGE.
        for line in [
            "TTL idle",
            "PTTL idle",
            "EXPIRETIME idle",
            "PEXPIRETIME idle",
            "OBJECT ENCODING idle",
            "MEMORY USAGE idle",
        ] {
            run(c, line);
        }
        assert_eq!(run(c, "OBJECT IDLETIME idle"), V::Int(1000));
        run(c, "GET idle");
        assert_eq!(run(c, "OBJECT IDLETIME idle"), V::Int(0));
        // TOUCH is an access (it shared EXISTS's lookup once, and stopped
        // moving the idle time with it).
        restore_idle(c, "idle2", &p);
        assert_eq!(run(c, "TOUCH idle2 nope"), V::Int(1));
        assert_eq!(run(c, "OBJECT IDLETIME idle2"), V::Int(0));
    }
}

/// A connection to `srv`, and one to `redis` when it runs: each test's
/// steps go to both and must give the same answers.
fn connections(srv: &TestServer, redis: Option<&RedisServer>) -> Vec<redis::Connection> {
    let mut servers = vec![srv.redis()];
    if let Some(r) = redis {
        servers.push(conn(r.addr));
    }
    servers
}

/// Restore `key` from `payload` with an idle time of 1000 s.
fn restore_idle(c: &mut redis::Connection, key: &str, payload: &[u8]) {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .arg("IDLETIME")
        .arg(1000)
        .query::<()>(c)
        .expect("restore");
}

/// `OBJECT IDLETIME key`, seconds.
fn idle_s(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg(key)
        .query(c)
        .expect("idletime")
}

/// `CLIENT NO-TOUCH ON` (Redis 7.2+): the client's reads and writes,
/// pipelined or not, on its thread's shard or another, in a transaction, a
/// script or a blocked read served later, leave idle times and LFU counters
/// alone; TOUCH still counts, even from a script; `OFF` restores lookups.
/// redis-server 7.0 has no NO-TOUCH, so this one is not differential.
#[test]
fn client_no_touch_keeps_idle_times_except_for_touch() {
    let srv = TestServer::start(2);
    let mut c = srv.redis();
    let mut reader = srv.client();
    run(&mut c, "SET src v");
    let str_payload = dump(&mut c, "src");
    run(&mut c, "XADD xsrc 1-1 f v");
    let stream_payload = dump(&mut c, "xsrc");
    // Eight of each: over two shards, some live on the other shard thread.
    let strings: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    let streams: Vec<String> = (0..8).map(|i| format!("x{i}")).collect();
    for k in &strings {
        restore_idle(&mut c, k, &str_payload);
    }
    for k in &streams {
        restore_idle(&mut c, k, &stream_payload);
    }

    assert_eq!(run(&mut c, "CLIENT NO-TOUCH ON"), V::Okay);
    assert_eq!(reader.raw(&["CLIENT", "NO-TOUCH", "ON"]), "+OK");
    let info = run(&mut c, "CLIENT INFO");
    let V::BulkString(info) = info else {
        panic!("CLIENT INFO: {info:?}")
    };
    assert!(
        String::from_utf8_lossy(&info).contains(" flags=T "),
        "{}",
        String::from_utf8_lossy(&info)
    );

    // A blocked read, served after a write of the no-touch client.
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "x7", "$"]);
    assert!(common::eventually(5, || {
        let info: String = redis::cmd("INFO").arg("clients").query(&mut c).unwrap();
        info.contains("blocked_clients:1")
    }));
    run(&mut c, "XADD x7 2-1 f v");
    let served = reader.read_reply();
    assert!(served.contains("2-1"), "{served}");
    let mut pipe = redis::pipe();
    pipe.cmd("GET").arg("s0");
    pipe.cmd("MGET").arg(&strings[1..]);
    pipe.cmd("XADD").arg("x0").arg("*").arg("f").arg("v");
    pipe.cmd("XRANGE").arg("x1").arg("-").arg("+");
    pipe.cmd("XREAD")
        .arg("STREAMS")
        .arg(&streams[2..5])
        .arg("0")
        .arg("0")
        .arg("0");
    pipe.cmd("STRLEN").arg("s2");
    pipe.query::<Vec<V>>(&mut c).expect("pipeline");
    // A transaction over both shards.
    redis::pipe()
        .atomic()
        .cmd("GET")
        .arg("s3")
        .cmd("XLEN")
        .arg("x5")
        .cmd("MGET")
        .arg(&strings)
        .cmd("XADD")
        .arg("x6")
        .arg("*")
        .arg("f")
        .arg("v")
        .query::<Vec<V>>(&mut c)
        .expect("exec");
    run(&mut c, "EVAL \"return redis.call('GET', KEYS[1])\" 1 s4");
    for k in strings.iter().chain(&streams) {
        let idle = idle_s(&mut c, k);
        assert!((1000..=1002).contains(&idle), "{k}: idle {idle}");
    }

    // TOUCH counts, directly and from a script.
    assert_eq!(run(&mut c, "TOUCH s0 nope s1"), V::Int(2));
    run(&mut c, "EVAL \"return redis.call('TOUCH', KEYS[1])\" 1 s2");
    for k in ["s0", "s1", "s2"] {
        assert_eq!(idle_s(&mut c, k), 0, "{k}");
    }
    // OFF: lookups are accesses again.
    assert_eq!(run(&mut c, "CLIENT NO-TOUCH OFF"), V::Okay);
    run(&mut c, "GET s5");
    assert_eq!(idle_s(&mut c, "s5"), 0);
    assert!(idle_s(&mut c, "s6") >= 1000);

    // Under an LFU policy the counter stays where it is, except for TOUCH.
    run(&mut c, "CONFIG SET maxmemory-policy allkeys-lfu");
    run(&mut c, "SET lfu v");
    assert_eq!(run(&mut c, "OBJECT FREQ lfu"), V::Int(5));
    assert_eq!(run(&mut c, "CLIENT NO-TOUCH ON"), V::Okay);
    for _ in 0..20 {
        run(&mut c, "GET lfu");
    }
    run(&mut c, "SET lfu w");
    assert_eq!(run(&mut c, "OBJECT FREQ lfu"), V::Int(5));
    // At the initial counter (5) one access always counts.
    run(&mut c, "TOUCH lfu");
    assert_eq!(run(&mut c, "OBJECT FREQ lfu"), V::Int(6));
    assert_eq!(
        reader.raw(&["CLIENT", "NO-TOUCH", "maybe"]),
        "-ERR syntax error"
    );
}

/// RESTORE's IDLETIME and FREQ follow the eviction policy: under an LFU
/// policy FREQ sets the counter and IDLETIME is ignored, otherwise
/// IDLETIME sets the idle time and FREQ is ignored; a plain RESTORE leaves
/// a new key's counter at its initial 5 (it is not also an access). Same
/// on redis-server.
#[test]
fn restore_idletime_and_freq_follow_the_policy() {
    let srv = TestServer::start(2);
    let redis = RedisServer::start();
    let mut servers = connections(&srv, redis.as_ref());
    let mut seen = Vec::new();
    for c in &mut servers {
        run(c, "SET src v");
        let p = dump(c, "src");
        let restore_with = |c: &mut redis::Connection, key: &str, opt: &[&str]| {
            let mut cmd = redis::cmd("RESTORE");
            cmd.arg(key).arg(0).arg(&p);
            for o in opt {
                cmd.arg(*o);
            }
            cmd.query::<V>(c).expect("restore")
        };
        run(c, "CONFIG SET maxmemory-policy allkeys-lfu");
        restore_with(c, "plain", &[]);
        restore_with(c, "idle", &["IDLETIME", "50000"]);
        restore_with(c, "freq", &["FREQ", "100"]);
        let lfu: Vec<V> = ["plain", "idle", "freq"]
            .iter()
            .map(|k| run(c, &format!("OBJECT FREQ {k}")))
            .collect();
        assert_eq!(lfu, [V::Int(5), V::Int(5), V::Int(100)]);
        run(c, "CONFIG SET maxmemory-policy allkeys-lru");
        restore_with(c, "lru-freq", &["FREQ", "100"]);
        restore_with(c, "lru-idle", &["IDLETIME", "1000"]);
        let lru = (idle_s(c, "lru-freq"), idle_s(c, "lru-idle"));
        assert_eq!(lru, (0, 1000));
        run(c, "CONFIG SET maxmemory-policy noeviction");
        seen.push((lfu, lru));
    }
    if seen.len() == 2 {
        assert_eq!(seen[0], seen[1]);
    }
}

/// `lfu-log-factor` 0 makes every access count (from the initial 5, ten
/// GETs give 15); `lfu-decay-time` is read back as set. Same on
/// redis-server.
#[test]
fn lfu_log_factor_sets_how_counters_grow() {
    let srv = TestServer::start(2);
    let redis = RedisServer::start();
    let mut servers = connections(&srv, redis.as_ref());
    for c in &mut servers {
        run(c, "CONFIG SET maxmemory-policy allkeys-lfu");
        run(c, "CONFIG SET lfu-log-factor 0 lfu-decay-time 0");
        run(c, "SET k v");
        for _ in 0..10 {
            run(c, "GET k");
        }
        assert_eq!(run(c, "OBJECT FREQ k"), V::Int(15));
        let got = run(c, "CONFIG GET lfu-*");
        let V::Array(items) = got else {
            panic!("{got:?}")
        };
        let mut pairs: Vec<String> = items
            .iter()
            .map(|v| match v {
                V::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|p| p.join("="))
            .collect();
        pairs.sort();
        assert_eq!(pairs, ["lfu-decay-time=0", "lfu-log-factor=0"]);
        run(c, "CONFIG SET maxmemory-policy noeviction");
    }
}

/// Under an LFU policy a command moves a key's counter once, however often
/// it looks the key up (from FREQ 0 every counted access adds one), as on
/// redis-server. XREADGROUP and LMOVE, which Redis looks up twice (+2), are
/// left out: shardstream counts them once.
#[test]
fn a_write_moves_the_lfu_counter_once() {
    let srv = TestServer::start(2);
    let redis = RedisServer::start();
    let mut servers = connections(&srv, redis.as_ref());
    let cases: &[(&str, &[&str], &str)] = &[
        ("stream", &["XADD {k} 1-1 f v"], "XGROUP CREATE {k} g 0"),
        (
            "stream",
            &["XADD {k} 1-1 f v", "XGROUP CREATE {k} g 0"],
            "XGROUP SETID {k} g 0",
        ),
        (
            "stream",
            &["XADD {k} 1-1 f v", "XGROUP CREATE {k} g 0"],
            "XGROUP CREATECONSUMER {k} g c",
        ),
        (
            "stream",
            &["XADD {k} 1-1 f v", "XGROUP CREATE {k} g 0"],
            "XGROUP DESTROY {k} g",
        ),
        ("stream", &["XADD {k} 1-1 f v"], "XSETID {k} 5-5"),
        ("stream", &["XADD {k} 1-1 f v"], "XADD {k} 2-1 f v"),
        ("stream", &["XADD {k} 1-1 f v"], "XDEL {k} 1-1"),
        ("stream", &["XADD {k} 1-1 f v"], "XTRIM {k} MAXLEN 0"),
        ("list", &["RPUSH {k} a b"], "LPUSH {k} x"),
        ("list", &["RPUSH {k} a b"], "LPOP {k}"),
        ("set", &["SADD {k} a b"], "SADD {k} c"),
        ("set", &["SADD {k} a b"], "SPOP {k}"),
        ("zset", &["ZADD {k} 1 a 2 b"], "ZADD {k} 3 c"),
        ("zset", &["ZADD {k} 1 a 2 b"], "ZPOPMIN {k}"),
        ("string", &["SET {k} v"], "APPEND {k} w"),
        ("string", &["SET {k} v"], "SET {k} w KEEPTTL"),
        ("string", &["SET {k} 1"], "INCR {k}"),
        ("string", &["SET {k} v"], "GET {k}"),
    ];
    let mut seen = Vec::new();
    for c in &mut servers {
        run(c, "CONFIG SET maxmemory-policy allkeys-lfu");
        let mut freqs = Vec::new();
        for (i, (_, setup, cmd)) in cases.iter().enumerate() {
            let k = format!("lfu{i}");
            for line in *setup {
                run(c, &line.replace("{k}", &k));
            }
            let p = dump(c, &k);
            run(c, &format!("DEL {k}"));
            redis::cmd("RESTORE")
                .arg(&k)
                .arg(0)
                .arg(&p)
                .arg("FREQ")
                .arg(0)
                .query::<()>(c)
                .expect("restore");
            run(c, &cmd.replace("{k}", &k));
            freqs.push((cmd.to_string(), run(c, &format!("OBJECT FREQ {k}"))));
        }
        for (cmd, f) in &freqs {
            assert_eq!(*f, V::Int(1), "{cmd}");
        }
        run(c, "CONFIG SET maxmemory-policy noeviction");
        seen.push(freqs);
    }
    if seen.len() == 2 {
        assert_eq!(seen[0], seen[1]);
    }
}
