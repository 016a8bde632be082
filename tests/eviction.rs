//! `maxmemory-policy`: each of Redis's eviction policies over a real
//! server. One test in its own process, so no other test's allocations move
//! `used_memory` while it measures.
mod common;

use common::{info_int, RespClient, TestServer};

const VALUE_BYTES: usize = 64 * 1024;
const WRITES: usize = 400; // 25 MB written under a limit of used + 4 MB

fn exists(c: &mut RespClient, key: &str) -> bool {
    c.raw(&["EXISTS", key]) == ":1"
}

/// Fill the server past `maxmemory` under `policy`; `volatile` writes every
/// filler key with a TTL. `hot` keys are read after every write. Returns
/// how many keys were evicted.
fn fill(c: &mut RespClient, policy: &str, volatile: bool, hot: &[&str]) -> u64 {
    assert_eq!(c.raw(&["FLUSHALL"]), "+OK");
    assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory", "0"]), "+OK");
    assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory-policy", policy]), "+OK");
    assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory-samples", "64"]), "+OK");
    let value = "v".repeat(VALUE_BYTES);
    // Persistent keys (never evicted by volatile-*) and a soon-expiring one.
    for k in ["keep:a", "keep:b"] {
        assert_eq!(c.raw(&["SET", k, "x"]), "+OK");
    }
    assert_eq!(c.raw(&["SET", "soon", &value, "EX", "60"]), "+OK");
    for k in hot {
        assert_eq!(c.raw(&["SET", k, &value, "EX", "100000"]), "+OK");
    }
    let evicted_before = info_int(c, "stats", "evicted_keys");
    let used = info_int(c, "memory", "used_memory");
    let max = used + 4 * 1024 * 1024;
    assert_eq!(
        c.raw(&["CONFIG", "SET", "maxmemory", &max.to_string()]),
        "+OK"
    );
    for i in 0..WRITES {
        let key = format!("fill:{i}");
        let reply = if volatile {
            c.raw(&["SET", &key, &value, "EX", &(1000 + i).to_string()])
        } else {
            c.raw(&["SET", &key, &value])
        };
        assert_eq!(reply, "+OK", "{policy}: write {i}");
        for _ in 0..3 {
            for k in hot {
                c.raw(&["GET", k]);
            }
        }
    }
    let evicted = info_int(c, "stats", "evicted_keys") - evicted_before;
    assert!(evicted > 0, "{policy}: nothing evicted");
    let dbsize: usize = c.raw(&["DBSIZE"])[1..].parse().unwrap();
    assert!(dbsize < WRITES, "{policy}: {dbsize} keys kept");
    // Memory went back under (or near) the limit.
    assert!(
        common::eventually(5, || info_int(c, "memory", "used_memory")
            < max + 2 * 1024 * 1024),
        "{policy}: used_memory stays over maxmemory"
    );
    evicted
}

#[test]
fn every_policy_evicts_as_redis_does() {
    let srv = TestServer::start(1);
    let mut c = srv.client();

    // noeviction: writes are refused with -OOM.
    assert_eq!(
        c.raw(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        "+OK"
    );
    let used = info_int(&mut c, "memory", "used_memory");
    assert_eq!(
        c.raw(&[
            "CONFIG",
            "SET",
            "maxmemory",
            &(used + 1024 * 1024).to_string()
        ]),
        "+OK"
    );
    let value = "v".repeat(VALUE_BYTES);
    let refused = (0..100).any(|i| {
        c.raw(&["SET", &format!("n:{i}"), &value])
            .starts_with("-OOM command not allowed when used memory > 'maxmemory'")
    });
    assert!(refused, "noeviction must refuse writes over maxmemory");
    assert_eq!(info_int(&mut c, "stats", "evicted_keys"), 0);

    // allkeys-lru / allkeys-lfu: keys read all along outlive the rest, and
    // persistent keys may go too. Under LRU the oldest filler goes; under
    // LFU the fillers, never read, all have the initial counter, and which
    // of those equals goes first is the sampling's choice (as in Redis).
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        fill(&mut c, policy, false, &["hot:1", "hot:2"]);
        assert!(
            exists(&mut c, "hot:1") && exists(&mut c, "hot:2"),
            "{policy}"
        );
        if policy == "allkeys-lru" {
            assert!(
                !exists(&mut c, "fill:0"),
                "{policy}: the oldest filler stays"
            );
        }
    }
    fill(&mut c, "allkeys-random", false, &[]);

    // volatile-*: only keys with a TTL are evicted.
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        fill(&mut c, policy, true, &["hot:1"]);
        assert!(
            exists(&mut c, "keep:a") && exists(&mut c, "keep:b"),
            "{policy} evicted a key without a TTL"
        );
        if policy == "volatile-ttl" {
            // The nearest expiry goes first.
            assert!(
                !exists(&mut c, "soon"),
                "volatile-ttl kept the nearest expiry"
            );
        }
        if policy != "volatile-random" && policy != "volatile-ttl" {
            assert!(exists(&mut c, "hot:1"), "{policy} evicted the hot key");
        }
    }

    // volatile-* with nothing volatile left: writes are refused like noeviction.
    assert_eq!(c.raw(&["FLUSHALL"]), "+OK");
    assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory", "0"]), "+OK");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]),
        "+OK"
    );
    let used = info_int(&mut c, "memory", "used_memory");
    assert_eq!(
        c.raw(&[
            "CONFIG",
            "SET",
            "maxmemory",
            &(used + 1024 * 1024).to_string()
        ]),
        "+OK"
    );
    let refused = common::eventually(10, || {
        c.raw(&["SET", &format!("p:{used}:{}", rand_suffix()), &value])
            .starts_with("-OOM")
    });
    assert!(
        refused,
        "volatile-lru with no volatile keys must refuse writes"
    );
    assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory", "0"]), "+OK");

    // CONFIG RESETSTAT zeroes evicted_keys, as Redis's resetServerStats does.
    assert!(info_int(&mut c, "stats", "evicted_keys") > 0);
    assert_eq!(c.raw(&["CONFIG", "RESETSTAT"]), "+OK");
    assert_eq!(info_int(&mut c, "stats", "evicted_keys"), 0);
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
