//! Keyspace and expiry commands over real sockets: DEL/UNLINK/EXISTS/TOUCH/TYPE,
//! KEYS and SCAN across shards, DBSIZE/FLUSHDB/FLUSHALL, EXPIRE family and TTLs.
mod common;

use std::collections::{BTreeSet, HashMap};

use common::{RedisServer, RespClient, TestServer};

/// Run `SCAN cursor args...` and return (next cursor, keys).
fn scan(c: &mut redis::Connection, cursor: u64, extra: &[&str]) -> (u64, Vec<String>) {
    redis::cmd("SCAN")
        .arg(cursor)
        .arg(extra)
        .query(c)
        .expect("scan")
}

fn set(c: &mut RespClient, k: &str) {
    assert_eq!(c.raw(&["SET", k, "v"]), "+OK");
}

/// KEYS reply (any order) as a sorted set of names.
fn keys(c: &mut redis::Connection, pattern: &str) -> BTreeSet<String> {
    let v: Vec<String> = redis::cmd("KEYS").arg(pattern).query(c).expect("keys");
    let n = v.len();
    let set: BTreeSet<String> = v.into_iter().collect();
    assert_eq!(set.len(), n, "KEYS returned a duplicate");
    set
}

#[test]
fn del_exists_touch_type_unlink() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    for k in ["a", "b", "c", "d"] {
        set(&mut c, k);
    }
    assert_eq!(c.raw(&["EXISTS", "a", "a", "b", "nope"]), ":3");
    assert_eq!(c.raw(&["TOUCH", "a", "b", "c", "nope"]), ":3");
    assert_eq!(c.raw(&["TYPE", "a"]), "+string");
    assert_eq!(c.raw(&["TYPE", "nope"]), "+none");
    assert_eq!(c.raw(&["DEL", "a", "a", "nope"]), ":1");
    assert_eq!(c.raw(&["UNLINK", "b", "c", "d", "a"]), ":3");
    assert_eq!(c.raw(&["DBSIZE"]), ":0");
    assert_eq!(
        c.raw(&["DEL"]),
        "-ERR wrong number of arguments for 'del' command"
    );
    assert_eq!(
        c.raw(&["TYPE", "a", "b"]),
        "-ERR wrong number of arguments for 'type' command"
    );
}

#[test]
fn dbsize_flushdb_flushall_across_shards_and_databases() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    for i in 0..100 {
        set(&mut c, &format!("k{i}"));
    }
    assert_eq!(c.raw(&["DBSIZE"]), ":100");
    assert_eq!(c.raw(&["SELECT", "1"]), "+OK");
    set(&mut c, "other");
    assert_eq!(c.raw(&["DBSIZE"]), ":1");
    assert_eq!(c.raw(&["FLUSHDB", "foo"]), "-ERR syntax error");
    assert_eq!(c.raw(&["FLUSHDB", "SYNC", "ASYNC"]), "-ERR syntax error");
    assert_eq!(c.raw(&["FLUSHDB", "async"]), "+OK");
    assert_eq!(c.raw(&["DBSIZE"]), ":0");
    assert_eq!(c.raw(&["SELECT", "0"]), "+OK");
    assert_eq!(c.raw(&["DBSIZE"]), ":100");
    assert_eq!(c.raw(&["SELECT", "2"]), "+OK");
    set(&mut c, "x");
    assert_eq!(c.raw(&["FLUSHALL", "x"]), "-ERR syntax error");
    assert_eq!(c.raw(&["FLUSHALL"]), "+OK");
    assert_eq!(c.raw(&["DBSIZE"]), ":0");
    assert_eq!(c.raw(&["SELECT", "0"]), "+OK");
    assert_eq!(c.raw(&["DBSIZE"]), ":0");
    assert_eq!(
        c.raw(&["DBSIZE", "x"]),
        "-ERR wrong number of arguments for 'dbsize' command"
    );
}

#[test]
fn keys_patterns_across_shards() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let mut r = srv.redis();
    let names = [
        "user:1", "user:2", "user:10", "user:abc", "order:1", "order:22", "hello", "hallo",
        "hxllo", "hllo", "heeeello", "a*b", "a\\b", "",
    ];
    for k in names {
        set(&mut c, k);
    }
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(keys(&mut r, "*"), s(&names));
    assert_eq!(
        keys(&mut r, "user:*"),
        s(&["user:1", "user:2", "user:10", "user:abc"])
    );
    assert_eq!(keys(&mut r, "user:?"), s(&["user:1", "user:2"]));
    assert_eq!(
        keys(&mut r, "user:[0-9]*"),
        s(&["user:1", "user:2", "user:10"])
    );
    assert_eq!(keys(&mut r, "user:[^0-9]*"), s(&["user:abc"]));
    assert_eq!(keys(&mut r, "h[ae]llo"), s(&["hello", "hallo"]));
    assert_eq!(keys(&mut r, "h[^e]llo"), s(&["hallo", "hxllo"]));
    assert_eq!(
        keys(&mut r, "h*llo"),
        s(&["hello", "hallo", "hxllo", "hllo", "heeeello"])
    );
    assert_eq!(keys(&mut r, "a\\*b"), s(&["a*b"]));
    assert_eq!(keys(&mut r, "a\\\\b"), s(&["a\\b"]));
    assert_eq!(keys(&mut r, "nomatch*"), s(&[]));
    assert_eq!(c.raw(&["KEYS", "order:2?"]), "*1\r\n$8\r\norder:22");
    assert_eq!(
        c.raw(&["KEYS"]),
        "-ERR wrong number of arguments for 'keys' command"
    );
}

#[test]
fn scan_visits_every_key_exactly_once_when_stable() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let mut r = srv.redis();
    let all: BTreeSet<String> = (0..2000).map(|i| format!("key:{i}")).collect();
    for k in &all {
        set(&mut c, k);
    }
    for count in [1u64, 7, 100, 5000] {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut cursor = 0;
        let mut calls = 0;
        loop {
            let (next, ks) = scan(&mut r, cursor, &["COUNT", &count.to_string()]);
            for k in ks {
                *seen.entry(k).or_default() += 1;
            }
            calls += 1;
            assert!(calls < 10_000, "scan does not terminate");
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert_eq!(seen.len(), all.len(), "COUNT {count}");
        assert!(
            seen.iter().all(|(k, n)| *n == 1 && all.contains(k)),
            "a key was returned twice or is unknown (COUNT {count})"
        );
    }
}

#[test]
fn scan_returns_stable_keys_while_others_change() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let mut r = srv.redis();
    let stable: BTreeSet<String> = (0..2000).map(|i| format!("stable:{i}")).collect();
    for k in &stable {
        set(&mut c, k);
    }
    for i in 0..500 {
        set(&mut c, &format!("churn:{i}"));
    }
    let mut seen = BTreeSet::new();
    let mut cursor = 0;
    let mut step = 0;
    loop {
        let (next, ks) = scan(&mut r, cursor, &["COUNT", "37"]);
        seen.extend(ks);
        // Between calls: delete some churn keys and add new ones.
        for j in 0..10 {
            let n = step * 10 + j;
            c.raw(&["DEL", &format!("churn:{n}")]);
            set(&mut c, &format!("new:{n}"));
        }
        step += 1;
        assert!(step < 10_000, "scan does not terminate");
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let missing: Vec<_> = stable.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "stable keys never returned: {missing:?}"
    );
}

#[test]
fn scan_match_type_and_errors() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let mut r = srv.redis();
    for i in 0..300 {
        set(&mut c, &format!("a:{i}"));
        set(&mut c, &format!("b:{i}"));
    }
    let collect = |r: &mut redis::Connection, extra: &[&str]| {
        let mut out = BTreeSet::new();
        let mut cursor = 0;
        loop {
            let (next, ks) = scan(r, cursor, extra);
            out.extend(ks);
            if next == 0 {
                return out;
            }
            cursor = next;
        }
    };
    let a: BTreeSet<String> = (0..300).map(|i| format!("a:{i}")).collect();
    assert_eq!(collect(&mut r, &["MATCH", "a:*", "COUNT", "50"]), a);
    assert_eq!(collect(&mut r, &["TYPE", "string"]).len(), 600);
    assert_eq!(
        collect(&mut r, &["TYPE", "STRING", "MATCH", "*"]).len(),
        600
    );
    assert!(collect(&mut r, &["TYPE", "stream"]).is_empty());
    assert_eq!(c.raw(&["SCAN", "abc"]), "-ERR invalid cursor");
    assert_eq!(c.raw(&["SCAN", " 1"]), "-ERR invalid cursor");
    assert_eq!(
        c.raw(&["SCAN", "18446744073709551616"]),
        "-ERR invalid cursor"
    );
    assert_eq!(c.raw(&["SCAN", "0", "COUNT", "0"]), "-ERR syntax error");
    assert_eq!(
        c.raw(&["SCAN", "0", "COUNT", "x"]),
        "-ERR value is not an integer or out of range"
    );
    assert_eq!(c.raw(&["SCAN", "0", "MATCH"]), "-ERR syntax error");
    assert_eq!(c.raw(&["SCAN", "0", "FOO", "bar"]), "-ERR syntax error");
    // Redis 7.2+: a TYPE naming no type is an error, not an empty page.
    assert_eq!(
        c.raw(&["SCAN", "0", "TYPE", "bogus"]),
        "-ERR unknown type name 'bogus'"
    );
    assert_eq!(
        c.raw(&["SCAN", "0", "COUNT", "100000", "TYPE", "Hash"]),
        "*2\r\n$1\r\n0\r\n*0"
    );
    // A cursor past the last slot ends the iteration.
    assert_eq!(
        c.raw(&["SCAN", "18446744073709551615"]),
        "*2\r\n$1\r\n0\r\n*0"
    );
}

#[test]
fn expire_ttl_persist_and_lazy_expiry() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["TTL", "k"]), ":-2");
    assert_eq!(c.raw(&["PTTL", "k"]), ":-2");
    assert_eq!(c.raw(&["EXPIRE", "k", "10"]), ":0");
    set(&mut c, "k");
    assert_eq!(c.raw(&["TTL", "k"]), ":-1");
    assert_eq!(c.raw(&["EXPIRETIME", "k"]), ":-1");
    assert_eq!(c.raw(&["EXPIRE", "k", "100", "XX"]), ":0");
    assert_eq!(c.raw(&["EXPIRE", "k", "100", "GT"]), ":0");
    assert_eq!(c.raw(&["EXPIRE", "k", "100", "NX"]), ":1");
    assert_eq!(c.raw(&["EXPIRE", "k", "50", "NX"]), ":0");
    assert_eq!(c.raw(&["EXPIRE", "k", "50", "GT"]), ":0");
    assert_eq!(c.raw(&["EXPIRE", "k", "200", "GT"]), ":1");
    assert_eq!(c.raw(&["EXPIRE", "k", "300", "LT"]), ":0");
    assert_eq!(c.raw(&["TTL", "k"]), ":200");
    assert_eq!(c.raw(&["PEXPIREAT", "k", "4000000000500"]), ":1");
    assert_eq!(c.raw(&["EXPIRETIME", "k"]), ":4000000001");
    assert_eq!(c.raw(&["PEXPIRETIME", "k"]), ":4000000000500");
    assert_eq!(c.raw(&["EXPIREAT", "k", "4000000000"]), ":1");
    assert_eq!(c.raw(&["PEXPIRETIME", "k"]), ":4000000000000");
    assert_eq!(c.raw(&["PERSIST", "k"]), ":1");
    assert_eq!(c.raw(&["PERSIST", "k"]), ":0");
    assert_eq!(c.raw(&["TTL", "k"]), ":-1");
    // Past deadlines delete the key and reply 1.
    assert_eq!(c.raw(&["EXPIRE", "k", "-1"]), ":1");
    assert_eq!(c.raw(&["EXISTS", "k"]), ":0");
    set(&mut c, "k");
    assert_eq!(c.raw(&["EXPIREAT", "k", "1"]), ":1");
    assert_eq!(c.raw(&["EXISTS", "k"]), ":0");
    // Short TTL: the key is gone after it passes.
    assert_eq!(c.raw(&["SET", "short", "v", "PX", "100"]), "+OK");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(c.raw(&["TTL", "short"]), ":-2");
    assert_eq!(c.raw(&["GET", "short"]), "$-1");
    set(&mut c, "short2");
    assert_eq!(c.raw(&["PEXPIRE", "short2", "100"]), ":1");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(c.raw(&["GET", "short2"]), "$-1");
    assert_eq!(c.raw(&["PTTL", "short2"]), ":-2");
}

#[test]
fn active_expiry_removes_keys_nobody_reads() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for i in 0..50 {
        assert_eq!(c.raw(&["SET", &format!("t{i}"), "v", "PX", "50"]), "+OK");
    }
    set(&mut c, "keep");
    // DBSIZE counts keys not yet collected; active expiry (every 100 ms) brings it down.
    let mut size = String::new();
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        size = c.raw(&["DBSIZE"]);
        if size == ":1" {
            break;
        }
    }
    assert_eq!(size, ":1");
}

#[test]
fn differential_keys_against_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(4);
    common::assert_same_replies(
        &mut srv.client(),
        &mut redis.client(),
        r#"
        FLUSHALL
        SET a 1
        SET b 2
        SET c 3
        SET user:1 x
        SET user:22 y
        EXISTS a b c nope a
        TOUCH a b nope
        TYPE a
        TYPE nope
        TYPE
        DEL a nope a
        UNLINK b c
        DBSIZE
        DBSIZE x
        KEYS user:2?
        KEYS user:[2]*
        KEYS user:[^2]
        KEYS nothing*
        KEYS
        SCAN abc
        SCAN " 1"
        SCAN 18446744073709551616
        SCAN 0 COUNT 0
        SCAN 0 COUNT -1
        SCAN 0 COUNT x
        SCAN 0 MATCH
        SCAN 0 TYPE
        SCAN 0 FOO bar
        SCAN 0 MATCH user:22 COUNT 1000
        SCAN 0 MATCH nothing* COUNT 1000 TYPE string
        ~SCAN 0
        FLUSHDB foo
        FLUSHDB SYNC ASYNC
        FLUSHALL x
        # expiry
        TTL nope
        PTTL nope
        EXPIRETIME nope
        PEXPIRETIME nope
        PERSIST nope
        EXPIRE nope 10
        SET k v
        TTL k
        PTTL k
        EXPIRETIME k
        PERSIST k
        EXPIRE k 10 foo
        EXPIRE k x foo
        EXPIRE k x
        EXPIRE k 10 NX XX
        EXPIRE k 10 nx gt
        EXPIRE k 10 NX LT
        EXPIRE k 10 GT LT
        EXPIRE k 10 NX XX foo
        EXPIRE k 10 GT GT
        EXPIRE k 100 XX
        EXPIRE k 100 GT
        EXPIRE k 100 LT
        TTL k
        EXPIRE k 50 NX
        EXPIRE k 200 GT
        EXPIRE k 300 LT
        EXPIRE k 100 LT
        TTL k
        PEXPIRE k 100000 XX
        TTL k
        PERSIST k
        PERSIST k
        EXPIRE k 9223372036854775807
        EXPIRE k -9223372036854775808
        PEXPIRE k 9223372036854775807
        EXPIREAT k 9223372036854775807
        PEXPIREAT k 4000000000500
        EXPIRETIME k
        PEXPIRETIME k
        PEXPIREAT k 4000000000499
        EXPIRETIME k
        EXPIREAT k 4000000000
        PEXPIRETIME k
        PEXPIREAT k 9223372036854775807
        PEXPIRETIME k
        EXPIRE k -1
        EXISTS k
        SET k v
        PEXPIRE k -9223372036854775808
        EXISTS k
        SET k v
        EXPIREAT k 1
        EXISTS k
        SET k v
        PEXPIREAT k 0 GT
        PEXPIREAT k 0 LT
        EXISTS k
        EXPIRE
        EXPIRE k
        TTL
        PERSIST a b
        "#,
    );
}

#[test]
fn differential_glob_patterns_against_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(4);
    let mut ours = srv.redis();
    let mut theirs = redis::Client::open(format!("redis://{}/", redis.addr))
        .expect("client")
        .get_connection()
        .expect("connect");
    let names = [
        "", "a", "ab", "abc", "abcd", "aXc", "a*c", "a?c", "a[c", "a]c", "a\\c", "a-c", "b", "B",
        "hello", "Hello", "hallo", "h]llo", "h^llo", "h-llo", "hxllo", "x", "xyz", "zzz",
    ];
    for n in names {
        let _: () = redis::cmd("SET").arg(n).arg("v").query(&mut ours).unwrap();
        let _: () = redis::cmd("SET")
            .arg(n)
            .arg("v")
            .query(&mut theirs)
            .unwrap();
    }
    let patterns = [
        "*",
        "**",
        "?",
        "??",
        "a*",
        "*c",
        "a*c",
        "a?c",
        "a\\*c",
        "a\\?c",
        "a[*]c",
        "a[?]c",
        "a[]]c",
        "a[\\]]c",
        "a[\\\\]c",
        "a[-]c",
        "a[a-c]*",
        "a[c-a]*",
        "[^a]*",
        "[^]*",
        "h[^e]llo",
        "h[]-^]llo",
        "h[e",
        "h[",
        "a\\",
        "a[bc",
        "[a-z]",
        "[A-Z]",
        "*[",
        "\\",
        "a**c",
        "*?*",
        "h[a-z]llo",
        "h\\[a]llo",
        "",
        "x*y*z",
        "*x*",
    ];
    for p in patterns {
        let get = |c: &mut redis::Connection| {
            let mut v: Vec<Vec<u8>> = redis::cmd("KEYS").arg(p).query(c).unwrap();
            v.sort();
            v
        };
        assert_eq!(get(&mut ours), get(&mut theirs), "KEYS {p:?}");
    }
}
