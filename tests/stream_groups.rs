//! Consumer-group commands over real sockets (4 shards): differential scripts
//! against a real redis-server, the two-group scenario, crash-and-recover
//! consumers, and blocking XREADGROUP exactly-once across shards.
mod common;

use std::collections::HashSet;
use std::thread;

use common::{assert_same_replies, RedisServer, TestServer};
use shardstream::route::slot::slot_of;

const SHARDS: u16 = 4;

/// Keys with prefix `p` on `n` distinct shards.
fn keys_on_distinct_shards(p: &str, n: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for i in 0..10_000 {
        let k = format!("{p}{i}");
        if seen.insert(slot_of(k.as_bytes()).shard(SHARDS)) {
            out.push(k);
            if out.len() == n {
                return out;
            }
        }
    }
    panic!("not enough shards");
}

fn diff(script: &str) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(SHARDS);
    assert_same_replies(&mut srv.client(), &mut redis.client(), script);
}

#[test]
fn differential_xgroup() {
    diff(
        r#"
        XGROUP CREATE s g $
        XGROUP CREATE s g $ MKSTREAM
        XGROUP CREATE s g $ MKSTREAM
        XGROUP CREATE s g2 $ ENTRIESREAD -2
        XGROUP CREATE s g2 $ ENTRIESREAD abc
        XGROUP CREATE s g2 $ foo
        XGROUP CREATE s g2 bad
        XGROUP CREATE s g2 0 ENTRIESREAD 5
        XGROUP CREATE s g3 0 ENTRIESREAD -1 MKSTREAM
        XGROUP SETID s nog 0
        XGROUP SETID s g $ ENTRIESREAD 3
        XGROUP SETID s g bad
        XGROUP SETID s g 0 FOO 1
        XGROUP SETID nokey g 0
        XGROUP CREATECONSUMER s g c1
        XGROUP CREATECONSUMER s g c1
        XGROUP CREATECONSUMER s nog c1
        XGROUP CREATECONSUMER nokey g c1
        XGROUP DELCONSUMER s g c1
        XGROUP DELCONSUMER s g c9
        XGROUP DELCONSUMER s nog c1
        XGROUP DESTROY s nog
        XGROUP DESTROY nokey g
        XGROUP DESTROY s g3
        XGROUP foo s g
        XGROUP HELP
        XGROUP
        XGROUP CREATE s
        XGROUP DESTROY s g x
        SET str x
        XGROUP CREATE str g $
        XGROUP CREATE str g $ MKSTREAM
        # Redis 8.2.2 clamps ENTRIESREAD to entries-added (0 here): pinned by
        # tests/stream_newest.rs.
        ~XINFO GROUPS s
        "#,
    );
}

#[test]
fn differential_xreadgroup_xack_xpending() {
    diff(
        r#"
        XREADGROUP GROUP g c STREAMS s >
        XGROUP CREATE s g 0 MKSTREAM
        XREADGROUP GROUP g c STREAMS s >
        XREADGROUP GROUP nog c STREAMS s >
        XREADGROUP GROUP g c STREAMS nokey >
        XREADGROUP GROUP g c STREAMS s $
        XREADGROUP STREAMS s >
        XREADGROUP GROUP g c COUNT x STREAMS s >
        XREADGROUP GROUP g c BLOCK x STREAMS s >
        XREADGROUP GROUP g c BLOCK -1 STREAMS s >
        # Redis 7.4 names the command in this error; the installed 7.0 does not
        ~XREADGROUP GROUP g c STREAMS s > 0
        XREADGROUP GROUP g c STREAMS s bad
        XREADGROUP GROUP g c FOO STREAMS s >
        XREADGROUP GROUP g c STREAMS s 0
        SET str x
        XREADGROUP GROUP g c STREAMS str >
        XADD s 1-0 a 1
        XADD s 2-0 b 2
        XADD s 3-0 c 3
        XADD s 4-0 d 4
        XREADGROUP GROUP g c COUNT 2 STREAMS s >
        XREADGROUP GROUP g c COUNT 0 STREAMS s 0
        XREADGROUP GROUP g c STREAMS s 1-0
        XREADGROUP GROUP g c2 NOACK COUNT 1 STREAMS s >
        XREADGROUP GROUP g c2 STREAMS s 0
        XPENDING s g
        XPENDING s nog
        XPENDING nokey g
        XPENDING str g
        XPENDING s g - +
        XPENDING s g - + x
        XPENDING s g IDLE x - + 10
        XPENDING s g IDLE 0 - +
        XPENDING s g bad + 10
        ~XPENDING s g - + 10
        ~XPENDING s g (1-0 + 10
        ~XPENDING s g - + 10 c
        XPENDING s g - + 10 nobody
        XPENDING s g - + 0
        XPENDING s g - + -1
        XPENDING s g IDLE 100000 - + 10
        XINFO GROUPS s
        XACK s g 1-0 bad
        XACK nokey g bad
        XACK s nog bad
        XACK str g 1
        XACK s g 1-0 1-0 2-0 9-0
        XACK s g 1
        XPENDING s g
        XREADGROUP GROUP g c STREAMS s >
        XINFO GROUPS s
        XDEL s 4-0
        XREADGROUP GROUP g c STREAMS s 0
        XINFO GROUPS s
        XPENDING s g
        XREADGROUP GROUP g c STREAMS s 18446744073709551615-18446744073709551615
        XADD s 10-0 f v
        XREADGROUP GROUP g c STREAMS s 18446744073709551615-18446744073709551615
        XPENDING s g
        XINFO GROUPS s
        XREADGROUP GROUP g c STREAMS s 18446744073709551615
        "#,
    );
}

#[test]
fn differential_lag_and_entries_read() {
    // Redis 8.x computes entries-read and lag differently after deletions
    // and trims: the XINFO GROUPS replies are pinned by
    // `lag_through_deletes_trims_and_setid` in tests/stream_newest.rs.
    diff(
        r#"
        XADD s 1-0 f v
        XADD s 2-0 f v
        XADD s 3-0 f v
        XADD s 4-0 f v
        XADD s 5-0 f v
        XGROUP CREATE s a 0
        XGROUP CREATE s b 0 ENTRIESREAD 0
        XGROUP CREATE s c $
        XGROUP CREATE s d 3-0
        ~XINFO GROUPS s
        XREADGROUP GROUP a x COUNT 1 STREAMS s >
        XREADGROUP GROUP b x COUNT 2 STREAMS s >
        ~XINFO GROUPS s
        XDEL s 3-0
        ~XINFO GROUPS s
        XREADGROUP GROUP b x STREAMS s >
        ~XINFO GROUPS s
        XGROUP SETID s b 2-0
        ~XINFO GROUPS s
        XGROUP SETID s b 0 ENTRIESREAD 0
        ~XINFO GROUPS s
        XTRIM s MAXLEN 2
        ~XINFO GROUPS s
        XGROUP SETID s c $
        ~XINFO GROUPS s
        XADD s 6-0 f v
        ~XINFO GROUPS s
        XREADGROUP GROUP a x STREAMS s >
        ~XINFO GROUPS s
        XDEL s 4-0
        XDEL s 5-0
        XDEL s 6-0
        ~XINFO GROUPS s
        XLEN s
        XGROUP SETID s a 0
        ~XINFO GROUPS s
        XSETID s 10-0
        ~XINFO GROUPS s
        "#,
    );
}

#[test]
fn differential_xclaim_xautoclaim() {
    diff(
        r#"
        XCLAIM nokey g c 10 1-0
        XAUTOCLAIM nokey g c 10 0
        XADD s 1-0 a 1
        XADD s 2-0 b 2
        XADD s 3-0 c 3
        XADD s 4-0 d 4
        XADD s 5-0 e 5
        XGROUP CREATE s g 0
        XCLAIM s nog c 10 1-0
        XCLAIM s g c x 1-0
        XCLAIM s g c 10 bad
        XCLAIM s g c 10 1-0 IDLE x
        XCLAIM s g c 10 1-0 TIME x
        XCLAIM s g c 10 1-0 RETRYCOUNT x
        XCLAIM s g c 10 1-0 LASTID bad
        XCLAIM s g c 10 1-0 FOO
        XAUTOCLAIM s g c x 0
        XAUTOCLAIM s g c 10 bad
        XAUTOCLAIM s g c 10 0 COUNT 0
        XAUTOCLAIM s g c 10 0 COUNT x
        XAUTOCLAIM s g c 10 0 FOO
        XAUTOCLAIM s nog c 10 0
        XREADGROUP GROUP g a STREAMS s >
        XCLAIM s g b 0 1-0 2-0 9-0
        XCLAIM s g b 0 1-0 JUSTID
        XCLAIM s g b 0 3-0 RETRYCOUNT 7 IDLE 0
        ~XPENDING s g - + 10
        XCLAIM s g b 100000 4-0
        XDEL s 2-0
        XCLAIM s g b 0 2-0
        XPENDING s g
        XCLAIM s g b 0 5-0 FORCE JUSTID
        XCLAIM s g b 0 9-0 FORCE
        XCLAIM s g b 0 1-0 LASTID 20-0 JUSTID
        XINFO GROUPS s
        XGROUP CREATE s h 0
        XCLAIM s h z 0 1-0 3-0 FORCE JUSTID
        XPENDING s h
        XDEL s 4-0
        XAUTOCLAIM s g c 0 0 COUNT 2
        XAUTOCLAIM s g c 0 0 COUNT 1 JUSTID
        XAUTOCLAIM s g c 0 (1-0 JUSTID
        XAUTOCLAIM s g c 100000 0
        XPENDING s g
        XGROUP DELCONSUMER s g c
        XPENDING s g
        "#,
    );
}

#[test]
fn differential_xinfo() {
    diff(
        r#"
        XINFO GROUPS nokey
        XINFO CONSUMERS nokey g
        XINFO STREAM nokey
        XADD s 1-0 a 1
        XADD s 2-0 b 2
        XGROUP CREATE s g 0
        XINFO CONSUMERS s nog
        XINFO STREAM s FULL COUNT x
        XINFO STREAM s foo
        XINFO STREAM s FULL COUNT
        XINFO HELP
        XINFO foo
        XINFO GROUPS s
        SET str x
        XINFO GROUPS str
        XINFO STREAM str
        XINFO STREAM str x
        XINFO STREAM nokey x
        XINFO STREAM nokey FULL COUNT x
        XINFO STREAM str FULL COUNT
        "#,
    );
}

/// Fields of one group in `XINFO GROUPS` raw output, as "name:value" lines.
fn group_fields(raw: &str, group: &str) -> String {
    let lines: Vec<&str> = raw.split("\r\n").collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] == "$4" && lines.get(i + 1) == Some(&"name") && lines.get(i + 3) == Some(&group)
        {
            // name, consumers, pending, last-delivered-id, entries-read, lag
            let mut j = i;
            for _ in 0..6 {
                let k = lines[j + 1];
                let v = if lines[j + 2].starts_with('$') && lines[j + 2] != "$-1" {
                    lines[j + 3].to_string()
                } else {
                    lines[j + 2].to_string()
                };
                out.push_str(&format!("{k}={v} "));
                j += if lines[j + 2].starts_with('$') && lines[j + 2] != "$-1" {
                    4
                } else {
                    3
                };
            }
            return out;
        }
        i += 1;
    }
    panic!("group {group} not in {raw}");
}

#[test]
fn two_groups_scenario() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    for i in 1..=4 {
        c.raw(&["XADD", "orders", &format!("{i}-0"), "n", &i.to_string()]);
    }
    assert_eq!(
        c.raw(&["XGROUP", "CREATE", "orders", "billing", "0"]),
        "+OK"
    );
    assert_eq!(
        c.raw(&["XGROUP", "CREATE", "orders", "analytics", "0"]),
        "+OK"
    );
    c.raw(&[
        "XREADGROUP",
        "GROUP",
        "billing",
        "b1",
        "COUNT",
        "2",
        "STREAMS",
        "orders",
        ">",
    ]);
    c.raw(&[
        "XREADGROUP",
        "GROUP",
        "analytics",
        "a1",
        "COUNT",
        "1",
        "STREAMS",
        "orders",
        ">",
    ]);
    let info = c.raw(&["XINFO", "GROUPS", "orders"]);
    assert_eq!(
        group_fields(&info, "billing"),
        "name=billing consumers=:1 pending=:2 last-delivered-id=2-0 entries-read=:2 lag=:2 "
    );
    assert_eq!(
        group_fields(&info, "analytics"),
        "name=analytics consumers=:1 pending=:1 last-delivered-id=1-0 entries-read=:1 lag=:3 "
    );
    // XACK on billing touches billing's PEL only.
    assert_eq!(c.raw(&["XACK", "orders", "billing", "1-0"]), ":1");
    let info = c.raw(&["XINFO", "GROUPS", "orders"]);
    assert!(group_fields(&info, "billing").contains("pending=:1 "));
    assert!(group_fields(&info, "analytics").contains("pending=:1 "));
    // A new consumer name sees none of b1's pending history.
    assert_eq!(
        c.raw(&[
            "XREADGROUP",
            "GROUP",
            "billing",
            "b2",
            "STREAMS",
            "orders",
            "0"
        ]),
        "*1\r\n*2\r\n$6\r\norders\r\n*0"
    );
    // SETID backwards replays acknowledged entries.
    assert_eq!(c.raw(&["XGROUP", "SETID", "orders", "billing", "0"]), "+OK");
    let r = c.raw(&[
        "XREADGROUP",
        "GROUP",
        "billing",
        "b1",
        "COUNT",
        "1",
        "STREAMS",
        "orders",
        ">",
    ]);
    assert!(r.contains("$3\r\n1-0"), "{r}");
    let info = c.raw(&["XINFO", "GROUPS", "orders"]);
    assert!(
        group_fields(&info, "billing").contains("pending=:2 last-delivered-id=1-0 "),
        "{info}"
    );
    // SETID to $ skips unread entries yet keeps the PEL.
    assert_eq!(c.raw(&["XGROUP", "SETID", "orders", "billing", "$"]), "+OK");
    let info = c.raw(&["XINFO", "GROUPS", "orders"]);
    let f = group_fields(&info, "billing");
    assert!(f.contains("pending=:2 last-delivered-id=4-0 "), "{f}");
    assert!(f.ends_with("lag=:0 "), "{f}");
    assert_eq!(
        c.raw(&[
            "XREADGROUP",
            "GROUP",
            "billing",
            "b1",
            "STREAMS",
            "orders",
            ">"
        ]),
        "*-1"
    );
}

#[test]
fn crash_and_recover_consumer() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    c.raw(&["XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM"]);
    c.raw(&["XADD", "jobs", "1-0", "job", "a"]);
    c.raw(&["XADD", "jobs", "2-0", "job", "b"]);
    let r = c.raw(&[
        "XREADGROUP",
        "GROUP",
        "workers",
        "w1",
        "STREAMS",
        "jobs",
        ">",
    ]);
    assert!(r.contains("1-0") && r.contains("2-0"));
    drop(c);
    // Reconnect under the same name: history with 0 gives both entries back.
    let mut c = srv.client();
    let hist = c.raw(&[
        "XREADGROUP",
        "GROUP",
        "workers",
        "w1",
        "STREAMS",
        "jobs",
        "0",
    ]);
    assert_eq!(
        hist,
        "*1\r\n*2\r\n$4\r\njobs\r\n*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$3\r\njob\r\n$1\r\na\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$3\r\njob\r\n$1\r\nb"
    );
    assert_eq!(c.raw(&["XACK", "jobs", "workers", "1-0", "2-0"]), ":2");
    assert_eq!(
        c.raw(&[
            "XREADGROUP",
            "GROUP",
            "workers",
            "w1",
            "STREAMS",
            "jobs",
            "0"
        ]),
        "*1\r\n*2\r\n$4\r\njobs\r\n*0"
    );
    c.raw(&["XADD", "jobs", "3-0", "job", "c"]);
    let r = c.raw(&[
        "XREADGROUP",
        "GROUP",
        "workers",
        "w1",
        "STREAMS",
        "jobs",
        ">",
    ]);
    assert!(r.contains("3-0") && !r.contains("2-0"), "{r}");
}

#[test]
fn blocked_reader_gets_redis_errors_on_delete_and_destroy() {
    let srv = TestServer::start(SHARDS);
    let mut admin = srv.client();
    admin.raw(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let mut r = srv.client();
    r.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    // flags=b shows once the shard has parked the read.
    while !admin.raw(&["CLIENT", "LIST"]).contains(" flags=b ") {
        thread::yield_now();
    }
    // Redis 7.2+ runs the unblocked command again: it answers its own error.
    let nogroup = "-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option";
    assert_eq!(admin.raw(&["XGROUP", "DESTROY", "s", "g"]), ":1");
    assert_eq!(r.read_reply(), nogroup);
    admin.raw(&["XGROUP", "CREATE", "s", "g", "$"]);
    r.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    while !admin.raw(&["CLIENT", "LIST"]).contains(" flags=b ") {
        thread::yield_now();
    }
    assert_eq!(admin.raw(&["DEL", "s"]), ":1");
    assert_eq!(r.read_reply(), nogroup);
    // The key changes type under the reader.
    admin.raw(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    r.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    while admin.raw(&["CLIENT", "LIST"]).matches("xreadgroup").count() == 0 {
        thread::yield_now();
    }
    assert_eq!(admin.raw(&["SET", "s", "x"]), "+OK");
    assert_eq!(
        r.read_reply(),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn blocked_consumers_across_shards_get_each_entry_exactly_once() {
    const N: usize = 400;
    let srv = TestServer::start(SHARDS);
    let keys = keys_on_distinct_shards("q", 4);
    let mut admin = srv.client();
    for k in &keys {
        assert_eq!(
            admin.raw(&["XGROUP", "CREATE", k, "g", "$", "MKSTREAM"]),
            "+OK"
        );
    }
    let addr = srv.addr;
    let consumers: Vec<_> = (0..4)
        .map(|n| {
            let keys = keys.clone();
            thread::spawn(move || {
                let mut c = common::RespClient::connect(addr);
                let mut got = Vec::new();
                loop {
                    let mut args = vec![
                        "XREADGROUP".to_string(),
                        "GROUP".into(),
                        "g".into(),
                        format!("c{n}"),
                        "COUNT".into(),
                        "7".into(),
                        "BLOCK".into(),
                        "300".into(),
                        "STREAMS".into(),
                    ];
                    args.extend(keys.iter().cloned());
                    args.extend(keys.iter().map(|_| ">".to_string()));
                    let r = c.raw(&args);
                    if r == "*-1" {
                        if got.len() >= N * 4 {
                            break;
                        }
                        // Stop once the producers are done and nothing is left.
                        let mut probe = common::RespClient::connect(addr);
                        if probe.raw(&["GET", "done"]) == "$1\r\n1" {
                            break;
                        }
                        continue;
                    }
                    for line in r.split("\r\n") {
                        if line.contains('-')
                            && line.chars().next().is_some_and(|ch| ch.is_ascii_digit())
                        {
                            got.push(line.to_string());
                        }
                    }
                }
                got
            })
        })
        .collect();
    let producers: Vec<_> = keys
        .iter()
        .cloned()
        .map(|k| {
            thread::spawn(move || {
                let mut p = common::RespClient::connect(addr);
                for i in 1..=N {
                    p.raw(&["XADD", &k, &format!("{i}-0"), "f", "v"]);
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    admin.raw(&["SET", "done", "1"]);
    let mut all = Vec::new();
    let mut per_consumer = Vec::new();
    for c in consumers {
        let got = c.join().unwrap();
        per_consumer.push(got.len());
        all.extend(got);
    }
    // IDs repeat across keys, so count per (id) multiplicity == number of keys.
    assert_eq!(all.len(), N * 4, "per consumer: {per_consumer:?}");
    let mut counts = std::collections::HashMap::new();
    for id in &all {
        *counts.entry(id.clone()).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), N);
    assert!(counts.values().all(|&n| n == 4));
    for k in &keys {
        let p = admin.raw(&["XPENDING", k, "g"]);
        assert!(p.starts_with(&format!("*4\r\n:{N}\r\n")), "{k}: {p}");
    }
}

/// Split a command line into arguments (no quoting needed in these tests).
fn args(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn multi_shard_xreadgroup_checks_every_key_before_any_delivery() {
    let srv = TestServer::start(SHARDS);
    let keys = keys_on_distinct_shards("v", 2);
    let (a, b) = (&keys[0], &keys[1]);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&args(&format!("XGROUP CREATE {a} g 0 MKSTREAM"))),
        "+OK"
    );
    assert_eq!(c.raw(&args(&format!("XADD {a} 1-1 f v"))), "$3\r\n1-1");
    assert_eq!(c.raw(&args(&format!("XADD {b} 1-1 f v"))), "$3\r\n1-1");
    let nogroup_b =
        format!("-NOGROUP No such key '{b}' or consumer group 'g' in XREADGROUP with GROUP option");
    // b has no group: nothing is delivered from a (its PEL stays empty).
    for line in [
        format!("XREADGROUP GROUP g c STREAMS {a} {b} > >"),
        format!("XREADGROUP GROUP g c COUNT 5 NOACK STREAMS {a} {b} > >"),
        format!("XREADGROUP GROUP g c BLOCK 0 STREAMS {a} {b} > >"),
    ] {
        assert_eq!(c.raw(&args(&line)), nogroup_b, "{line}");
    }
    assert_eq!(
        c.raw(&args(&format!("XPENDING {a} g"))),
        "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1"
    );
    // The first failing key in the caller's order decides the error.
    assert_eq!(
        c.raw(&args(&format!(
            "XREADGROUP GROUP g c STREAMS {b} {a} > bad"
        ))),
        nogroup_b
    );
    assert_eq!(
        c.raw(&args(&format!(
            "XREADGROUP GROUP g c STREAMS {a} {b} bad >"
        ))),
        "-ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        c.raw(&args(&format!("XREADGROUP GROUP g c STREAMS {a} {b} $ >"))),
        "-ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."
    );
    // Wrong type on the second shard, pipelined behind a read that must wait.
    assert_eq!(c.raw(&args(&format!("DEL {b}"))), ":1");
    assert_eq!(c.raw(&args(&format!("SET {b} x"))), "+OK");
    c.send(&args(&format!("XREADGROUP GROUP g c STREAMS {a} {b} > >")));
    c.send(&args(&format!("XPENDING {a} g")));
    assert_eq!(
        c.read_reply(),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(c.read_reply(), "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1");
    // Once every key is valid, both shards deliver.
    assert_eq!(c.raw(&args(&format!("DEL {b}"))), ":1");
    assert_eq!(
        c.raw(&args(&format!("XGROUP CREATE {b} g 0 MKSTREAM"))),
        "+OK"
    );
    assert_eq!(c.raw(&args(&format!("XADD {b} 2-1 f w"))), "$3\r\n2-1");
    assert_eq!(
        c.raw(&args(&format!("XREADGROUP GROUP g c STREAMS {a} {b} > >"))),
        format!(
            "*2\r\n*2\r\n${}\r\n{a}\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n\
             *2\r\n${}\r\n{b}\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nf\r\n$1\r\nw",
            a.len(),
            b.len()
        )
    );
}

#[test]
fn differential_multi_key_xreadgroup_errors() {
    let keys = keys_on_distinct_shards("w", 2);
    let (a, b) = (&keys[0], &keys[1]);
    diff(&format!(
        r#"
        XGROUP CREATE {a} g 0 MKSTREAM
        XADD {a} 1-1 f v
        XADD {b} 1-1 f v
        XREADGROUP GROUP g c STREAMS {a} {b} > >
        XPENDING {a} g
        XREADGROUP GROUP g c STREAMS {b} {a} > bad
        XREADGROUP GROUP g c STREAMS {a} {b} bad >
        XGROUP CREATE {b} g 0
        XREADGROUP GROUP g c STREAMS {a} {b} > >
        XPENDING {a} g
        "#
    ));
}

/// Park `XREADGROUP GROUP g c BLOCK 0 STREAMS <keys> > ...` on `r` and wait
/// until `admin` sees it blocked.
fn park_group_reader(admin: &mut common::RespClient, r: &mut common::RespClient, keys: &[&str]) {
    let mut line = String::from("XREADGROUP GROUP g c BLOCK 0 STREAMS");
    for k in keys {
        line.push(' ');
        line.push_str(k);
    }
    for _ in keys {
        line.push_str(" >");
    }
    r.send(&args(&line));
    common::wait_blocked(admin, 1);
}

/// The greatest ID written out is `>`, blocking included: Redis stands for
/// `>` with that ID (`xreadCommand`), so the read parks and the next XADD
/// serves it (checked against redis-server 7.0.15).
#[test]
fn greatest_id_blocks_like_new_entries_only() {
    let srv = TestServer::start(SHARDS);
    let (mut admin, mut r) = (srv.client(), srv.client());
    assert_eq!(admin.raw(&args("XGROUP CREATE s g $ MKSTREAM")), "+OK");
    r.send(&args(
        "XREADGROUP GROUP g c BLOCK 0 STREAMS s 18446744073709551615-18446744073709551615",
    ));
    common::wait_blocked(&mut admin, 1);
    assert_eq!(admin.raw(&args("XADD s 5-0 f v")), "$3\r\n5-0");
    assert_eq!(
        r.read_reply(),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n5-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv"
    );
    // Pending for c, delivered once (the idle time is left out: it may
    // tick between reads).
    let pending = admin.raw(&args("XPENDING s g - + 10 c"));
    assert!(
        pending.starts_with("*1\r\n*4\r\n$3\r\n5-0\r\n$1\r\nc\r\n:") && pending.ends_with("\r\n:1"),
        "{pending}"
    );
    assert!(admin.raw(&args("XPENDING s g")).starts_with("*4\r\n:1\r\n"));
}

#[test]
fn active_expiry_wakes_blocked_group_reader() {
    let srv = TestServer::start(SHARDS);
    let mut admin = srv.client();
    assert_eq!(admin.raw(&args("XGROUP CREATE s g $ MKSTREAM")), "+OK");
    let mut r = srv.client();
    park_group_reader(&mut admin, &mut r, &["s"]);
    // Nobody touches the key again: only active expiry can remove it.
    assert_eq!(admin.raw(&args("PEXPIRE s 30")), ":1");
    assert_eq!(
        r.read_reply(),
        "-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"
    );
    assert_eq!(admin.raw(&args("EXISTS s")), ":0");
}

/// Two streams on one shard both get data in one transaction while a reader
/// is blocked on both: as Redis 7.2+ re-executes the unblocked command, the
/// reader gets both streams (Redis 7.0 gave only the stream that woke it).
#[test]
fn blocked_group_reader_gets_every_ready_stream() {
    let srv = TestServer::start(SHARDS);
    let (mut admin, mut r) = (srv.client(), srv.client());
    for line in [
        "XGROUP CREATE {t}a g $ MKSTREAM",
        "XGROUP CREATE {t}b g $ MKSTREAM",
    ] {
        assert_eq!(admin.raw(&args(line)), "+OK");
    }
    park_group_reader(&mut admin, &mut r, &["{t}a", "{t}b"]);
    for line in ["MULTI", "XADD {t}b 1-1 f b", "XADD {t}a 1-1 f a", "EXEC"] {
        admin.raw(&args(line));
    }
    assert_eq!(
        r.read_reply(),
        "*2\r\n*2\r\n$4\r\n{t}a\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\na\r\n\
         *2\r\n$4\r\n{t}b\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nb"
    );
    assert_eq!(
        admin.raw(&args("XREADGROUP GROUP g c STREAMS {t}a {t}b > >")),
        "*-1"
    );
    // XREAD too: a pipeline feeding both streams.
    r.send(&args("XREAD BLOCK 0 STREAMS {t}a {t}b $ $"));
    common::wait_blocked(&mut admin, 1);
    let mut batch = common::resp_command(&args("XADD {t}a 2-1 f a"));
    batch.extend(common::resp_command(&args("XADD {t}b 2-1 f b")));
    admin.send_raw(&batch);
    assert_eq!(admin.read_reply(), "$3\r\n2-1");
    assert_eq!(admin.read_reply(), "$3\r\n2-1");
    let got = r.read_reply();
    // The first XADD may wake the reader before the second runs; whatever
    // it gets, every stream ready when it is served is in the reply.
    assert!(got.contains("{t}a"), "{got}");
    if !got.contains("{t}b") {
        assert_eq!(
            admin
                .raw(&args("XREAD STREAMS {t}b 1-1"))
                .matches("2-1")
                .count(),
            1
        );
    }
}

/// Redis 7.4's texts for an unbalanced STREAMS list name the command and the
/// special IDs it accepts (the installed 7.0 predates them, so they are pinned here).
#[test]
fn unbalanced_streams_errors_use_redis_7_4_text() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">", "0"]),
        "-ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."
    );
    assert_eq!(
        c.raw(&["XREAD", "COUNT", "1", "STREAMS", "a", "b", "0"]),
        "-ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified."
    );
    // Options before STREAMS are parsed in order: a bad COUNT wins.
    assert_eq!(
        c.raw(&[
            "XREADGROUP",
            "COUNT",
            "x",
            "GROUP",
            "g",
            "c",
            "STREAMS",
            "s",
            ">",
            "0"
        ]),
        "-ERR value is not an integer or out of range"
    );
    assert_eq!(
        c.raw(&["XREAD", "CLAIM", "5", "STREAMS", "s", "0"]),
        "-ERR syntax error"
    );
}
