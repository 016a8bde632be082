//! The thread-per-core engine over real sockets: commands on keys another
//! shard owns hop once and come back in request order; a connection whose
//! commands keep landing on one other shard is handed over to that shard's
//! thread with its session intact; with one shard nothing ever hops.

mod common;

use std::time::Duration;

use common::{eventually, info_int, RespClient, TestServer};

/// A key whose slot a 2-shard server gives to `shard` (slots 0..8191 →
/// shard 0, 8192..16383 → shard 1), with `prefix` in its name.
fn key_on(shard: u16, prefix: &str) -> String {
    for i in 0.. {
        let key = format!("{prefix}:{i}");
        let slot = shardstream::route::slot::slot_of(key.as_bytes()).0;
        if slot / 8192 == shard {
            return key;
        }
    }
    unreachable!()
}

/// A 2-shard server, a client, and a key on each shard (`a:…` on shard 0,
/// `b:…` on shard 1).
fn two_shards() -> (TestServer, RespClient, String, String) {
    let srv = TestServer::start(2);
    let c = srv.client();
    (srv, c, key_on(0, "a"), key_on(1, "b"))
}

/// An INFO shardstream field as an integer.
fn shard_info(c: &mut RespClient, field: &str) -> u64 {
    info_int(c, "shardstream", field)
}

/// The shard thread serving the connection that sends this: the one whose
/// `local_commands` a local command raises.
fn own_thread(c: &mut RespClient, keys: [&str; 2]) -> u16 {
    let text = c.raw(&["INFO", "shardstream"]);
    let before: Vec<u64> = (0..2)
        .map(|n| per_shard(&text, n, "local_commands"))
        .collect();
    for k in keys {
        c.raw(&["EXISTS", k]);
    }
    let text = c.raw(&["INFO", "shardstream"]);
    (0..2)
        .find(|&n| per_shard(&text, n, "local_commands") > before[usize::from(n)])
        .expect("one of the EXISTS ran locally")
}

fn per_shard(text: &str, n: u16, field: &str) -> u64 {
    let line = text
        .split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("shard{n}:")))
        .unwrap();
    line.split(',')
        .find_map(|f| f.strip_prefix(&format!("{field}=")))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn one_shard_never_hops() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    for i in 0..50 {
        assert_eq!(c.raw(&["SET", &format!("k{i}"), "v"]), "+OK");
    }
    assert_eq!(shard_info(&mut c, "remote_commands"), 0);
    assert!(shard_info(&mut c, "local_commands") >= 50);
    assert_eq!(shard_info(&mut c, "handovers"), 0);
}

#[test]
fn pipelined_replies_keep_request_order_across_shards() {
    let (_srv, mut c, a, b) = two_shards();
    // One write carrying 600 commands alternating between the shards.
    let mut wire = Vec::new();
    for i in 0..300 {
        wire.extend(common::resp_command(&["INCR", &a]));
        wire.extend(common::resp_command(&[
            "XADD",
            &b,
            &format!("{}-1", i + 1),
            "n",
            &i.to_string(),
        ]));
    }
    c.send_raw(&wire);
    for i in 0..300 {
        assert_eq!(c.read_reply(), format!(":{}", i + 1));
        let id = format!("{}-1", i + 1);
        assert_eq!(c.read_reply(), format!("${}\r\n{id}", id.len()));
    }
    assert_eq!(c.raw(&["XLEN", &b]), ":300");
}

#[test]
fn connection_moves_to_the_shard_its_commands_go_to() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let k0 = key_on(0, "k");
    let k1 = key_on(1, "k");
    let home = own_thread(&mut c, [&k0, &k1]);
    let other = 1 - home;
    let key = if other == 0 { k0.clone() } else { k1.clone() };
    let id = c.raw(&["CLIENT", "ID"]);
    assert_eq!(c.raw(&["SELECT", "3"]), "+OK");
    assert_eq!(c.raw(&["CLIENT", "SETNAME", "mover"]), "+OK");
    let moved_before = shard_info(&mut c, "handovers");
    for i in 0..100 {
        assert_eq!(c.raw(&["INCR", &key]), format!(":{}", i + 1));
    }
    assert!(shard_info(&mut c, "handovers") > moved_before);
    // The session moved with the socket: same client, database and name.
    assert_eq!(c.raw(&["CLIENT", "ID"]), id);
    assert_eq!(c.raw(&["CLIENT", "GETNAME"]), "$5\r\nmover");
    assert_eq!(c.raw(&["GET", &key]), "$3\r\n100");
    assert_eq!(c.raw(&["SELECT", "0"]), "+OK");
    assert_eq!(c.raw(&["GET", &key]), "$-1");
    // Its commands on that key now run where the connection lives.
    assert_eq!(own_thread(&mut c, [&k0, &k1]), other);
}

#[test]
fn handed_over_connection_blocks_and_can_be_killed() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let k0 = key_on(0, "s");
    let k1 = key_on(1, "s");
    let home = own_thread(&mut c, [&k0, &k1]);
    let key = if home == 0 { k1.clone() } else { k0.clone() };
    for _ in 0..64 {
        c.raw(&["XLEN", &key]);
    }
    assert!(shard_info(&mut c, "handovers") >= 1);
    // A blocking read parked on its new thread is served by an XADD from another client.
    c.send(&["XREAD", "BLOCK", "5000", "STREAMS", &key, "$"]);
    let mut w = srv.client();
    common::wait_blocked(&mut w, 1);
    assert_eq!(w.raw(&["XADD", &key, "1-1", "f", "v"]), "$3\r\n1-1");
    let reply = c.read_reply();
    assert!(reply.contains("1-1"), "{reply}");
    // CLIENT KILL finds it on its new thread.
    let id = c.raw(&["CLIENT", "ID"])[1..].to_string();
    assert_eq!(w.raw(&["CLIENT", "KILL", "ID", &id]), ":1");
    assert!(c.is_closed());
    std::thread::sleep(Duration::from_millis(50));
    assert!(w.raw(&["CLIENT", "LIST"]).lines().count() >= 1);
}

#[test]
fn connections_spread_over_shard_threads() {
    let srv = TestServer::start(2);
    let clients: Vec<RespClient> = (0..10).map(|_| srv.client()).collect();
    let mut c = srv.client();
    assert!(eventually(5, || {
        let text = c.raw(&["INFO", "shardstream"]);
        per_shard(&text, 0, "connections") + per_shard(&text, 1, "connections") == 11
    }));
    let text = c.raw(&["INFO", "shardstream"]);
    let (a, b) = (
        per_shard(&text, 0, "connections"),
        per_shard(&text, 1, "connections"),
    );
    assert!(a.abs_diff(b) <= 1, "unbalanced: {a} vs {b}");
    drop(clients);
}

/// Big values are written from the store without a copy (queued whole behind
/// their header): pipelined with small replies, every reply still arrives
/// byte for byte and in order, in RESP2 and RESP3.
#[test]
fn big_bulk_replies_keep_their_bytes_and_order() {
    let srv = TestServer::start(2);
    for proto in ["2", "3"] {
        let mut c = srv.client();
        assert!(c.raw(&["HELLO", proto]).len() > 10);
        let big1: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let big2 = vec![b'z'; 65_536];
        assert_eq!(c.raw(&[b"SET".as_slice(), b"big1", &big1]), "+OK");
        assert_eq!(c.raw(&[b"SET".as_slice(), b"big2", &big2]), "+OK");
        let mut wire = Vec::new();
        for args in [
            vec!["GET", "big1"],
            vec!["PING"],
            vec!["GET", "big2"],
            vec!["ECHO", "tail"],
            vec!["GET", "big1"],
        ] {
            wire.extend(common::resp_command(&args));
        }
        c.send_raw(&wire);
        let bulk = |b: &[u8]| format!("${}\r\n{}", b.len(), String::from_utf8_lossy(b));
        assert_eq!(c.read_reply(), bulk(&big1));
        assert_eq!(c.read_reply(), "+PONG");
        assert_eq!(c.read_reply(), bulk(&big2));
        assert_eq!(c.read_reply(), "$4\r\ntail");
        assert_eq!(c.read_reply(), bulk(&big1));
    }
}

/// An INFO stats field as an integer.
fn stat(c: &mut RespClient, field: &str) -> u64 {
    info_int(c, "stats", field)
}

/// A pipeline whose first reply is ready on the connection's own thread
/// while the next come back from the other shard leaves in one write (as
/// Redis writes a pipeline's replies once per event-loop turn), not one for
/// the local part and one for the rest. A blocking read behind a hop does
/// not hold back the replies before it.
#[test]
fn pipeline_replies_across_shards_leave_in_one_write() {
    let (srv, mut c, a, b) = two_shards();
    let mut info = srv.client();
    let home = own_thread(&mut c, [&a, &b]);
    let (local, remote) = if home == 0 { (a, b) } else { (b, a) };
    for round in 0..5u64 {
        let before = stat(&mut info, "total_writes_processed");
        let mut wire = common::resp_command(&["PING"]);
        wire.extend(common::resp_command(&["INCR", &remote]));
        wire.extend(common::resp_command(&["INCR", &local]));
        wire.extend(common::resp_command(&["INCR", &remote]));
        c.send_raw(&wire);
        assert_eq!(c.read_reply(), "+PONG");
        assert_eq!(c.read_reply(), format!(":{}", 2 * round + 1));
        assert_eq!(c.read_reply(), format!(":{}", round + 1));
        assert_eq!(c.read_reply(), format!(":{}", 2 * round + 2));
        // Counters are published at the end of each loop iteration.
        std::thread::sleep(Duration::from_millis(50));
        let after = stat(&mut info, "total_writes_processed");
        // The one write of the pipeline's replies, and the first INFO's.
        assert_eq!(after - before, 2, "round {round}");
    }
    assert!(stat(&mut info, "total_reads_processed") > 0);

    let stream = format!("{remote}:s");
    let mut wire = common::resp_command(&["PING"]);
    wire.extend(common::resp_command(&["INCR", &remote]));
    wire.extend(common::resp_command(&[
        "XREAD", "BLOCK", "0", "STREAMS", &stream, "$",
    ]));
    c.send_raw(&wire);
    assert_eq!(c.read_reply(), "+PONG");
    assert_eq!(c.read_reply(), ":11");
    let mut w = srv.client();
    common::wait_blocked(&mut w, 1);
    assert_eq!(w.raw(&["XADD", &stream, "1-1", "f", "v"]), "$3\r\n1-1");
    assert!(c.read_reply().contains("1-1"));
}

/// Each reply is written in the protocol in force when its command ran: a
/// `HELLO` later in the same pipeline does not change the replies still
/// due from another shard (found by a newcomer trial: `GET` on the other
/// shard before `HELLO 3` came back as RESP3's `_`).
#[test]
fn hello_in_a_pipeline_switches_only_the_replies_after_it() {
    let (_srv, mut c, a, b) = two_shards();
    for round in 0..5 {
        let mut wire = Vec::new();
        for args in [
            vec!["GET", a.as_str()],
            vec!["GET", b.as_str()],
            vec!["HELLO", "3"],
            vec!["GET", a.as_str()],
            vec!["GET", b.as_str()],
            vec!["HELLO", "2"],
            vec!["GET", b.as_str()],
            vec!["GET", a.as_str()],
        ] {
            wire.extend(common::resp_command(&args));
        }
        c.send_raw(&wire);
        assert_eq!(c.read_reply(), "$-1", "round {round}");
        assert_eq!(c.read_reply(), "$-1", "round {round}");
        assert!(c.read_reply().starts_with('%'), "HELLO 3 answers a map");
        assert_eq!(c.read_reply(), "_", "round {round}");
        assert_eq!(c.read_reply(), "_", "round {round}");
        assert!(c.read_reply().starts_with('*'), "HELLO 2 answers an array");
        assert_eq!(c.read_reply(), "$-1", "round {round}");
        assert_eq!(c.read_reply(), "$-1", "round {round}");
    }
    // Doubles: RESP3's `,` only for the commands after HELLO 3.
    assert_eq!(c.raw(&["ZADD", &format!("{a}:z"), "1.5", "m"]), ":1");
    assert_eq!(c.raw(&["ZADD", &format!("{b}:z"), "2.5", "m"]), ":1");
    let mut wire = Vec::new();
    for args in [
        vec!["ZSCORE".to_string(), format!("{b}:z"), "m".into()],
        vec!["HELLO".into(), "3".into()],
        vec!["ZSCORE".into(), format!("{a}:z"), "m".into()],
        vec!["ZSCORE".into(), format!("{b}:z"), "m".into()],
        vec!["HELLO".into(), "2".into()],
        vec!["ZSCORE".into(), format!("{a}:z"), "m".into()],
    ] {
        wire.extend(common::resp_command(&args));
    }
    c.send_raw(&wire);
    assert_eq!(c.read_reply(), "$3\r\n2.5");
    assert!(c.read_reply().starts_with('%'));
    assert_eq!(c.read_reply(), ",1.5");
    assert_eq!(c.read_reply(), ",2.5");
    assert!(c.read_reply().starts_with('*'));
    assert_eq!(c.read_reply(), "$3\r\n1.5");
}

/// The byte counters count a command's bytes as they arrive, so an INFO
/// counts itself, as in Redis (a fresh redis-server answers
/// `total_net_input_bytes:25` to its first `INFO stats`), also right after
/// CONFIG RESETSTAT, on either shard thread.
#[test]
fn info_counts_its_own_input_bytes() {
    let srv = TestServer::start(2);
    let info_bytes = common::resp_command(&["INFO", "stats"]).len() as u64;
    let mut c = srv.client();
    assert_eq!(stat(&mut c, "total_net_input_bytes"), info_bytes);
    assert_eq!(c.raw(&["CONFIG", "RESETSTAT"]), "+OK");
    assert_eq!(stat(&mut c, "total_net_input_bytes"), info_bytes);
    assert_eq!(stat(&mut c, "total_reads_processed"), 2);
    let mut d = srv.client();
    assert_eq!(stat(&mut d, "total_net_input_bytes"), 3 * info_bytes);
}

/// A read over keys of both shards answers in the caller's key order, a key
/// named twice at each of its places, in RESP2 and RESP3, as redis-server
/// does.
#[test]
fn read_over_two_shards_keeps_the_key_order_with_repeated_keys() {
    let (_srv, mut ours, a, b) = two_shards();
    let Some(redis) = common::RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    for c in [&mut ours, &mut theirs] {
        c.raw(&["XADD", &a, "1-1", "f", "a1"]);
        c.raw(&["XADD", &a, "2-1", "f", "a2"]);
        c.raw(&["XADD", &b, "1-1", "f", "b1"]);
        c.raw(&["XGROUP", "CREATE", &a, "g", "0"]);
        c.raw(&["XGROUP", "CREATE", &b, "g", "0"]);
    }
    let reads: [&[&str]; 5] = [
        &["XREAD", "STREAMS", &a, &b, &a, "0", "0", "1-1"],
        &["XREAD", "STREAMS", &b, &a, &b, "0", "0", "0"],
        &["XREAD", "COUNT", "1", "STREAMS", &a, &b, &a, "0", "0", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "STREAMS",
            &a,
            &b,
            &a,
            ">",
            ">",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "STREAMS",
            &b,
            &a,
            &b,
            "0",
            "0",
            "0",
        ],
    ];
    for proto in ["2", "3"] {
        ours.raw(&["HELLO", proto]);
        theirs.raw(&["HELLO", proto]);
        for argv in reads {
            assert_eq!(ours.raw(argv), theirs.raw(argv), "RESP{proto} {argv:?}");
        }
    }
}

/// `shard-spin-us`: after sending to another shard thread, a thread polls
/// for the answer that long before it sleeps; INFO counts how its spins
/// ended. 0 turns it off (no spin is counted); CONFIG SET checks the range.
#[test]
fn threads_spin_for_answers_from_other_shards_as_configured() {
    let (_srv, mut c, a, b) = two_shards();
    assert_eq!(
        c.raw(&["CONFIG", "GET", "shard-spin-us"]),
        "*2\r\n$13\r\nshard-spin-us\r\n$2\r\n20"
    );
    for bad in ["10001", "-1"] {
        assert_eq!(
            c.raw(&["CONFIG", "SET", "shard-spin-us", bad]),
            "-ERR CONFIG SET failed (possibly related to argument 'shard-spin-us') - argument must be between 0 and 10000 inclusive"
        );
    }
    let spins = |c: &mut RespClient| shard_info(c, "spin_hits") + shard_info(c, "spin_misses");
    // Alternating keys of both shards: every other command hops, and the
    // connection is never handed over.
    let hop = |c: &mut RespClient, n: usize| {
        for i in 0..n {
            let key = if i % 2 == 0 { &a } else { &b };
            assert!(c.raw(&["XADD", key, "*", "f", "v"]).starts_with('$'));
        }
    };

    assert_eq!(c.raw(&["CONFIG", "SET", "shard-spin-us", "0"]), "+OK");
    let before = spins(&mut c);
    hop(&mut c, 40);
    assert_eq!(spins(&mut c), before, "shard-spin-us 0 never spins");

    // 10 ms: the other thread's reply, and the client's next command, come
    // well within it, so spins end with work.
    assert_eq!(c.raw(&["CONFIG", "SET", "shard-spin-us", "10000"]), "+OK");
    let hits = shard_info(&mut c, "spin_hits");
    hop(&mut c, 40);
    assert!(
        shard_info(&mut c, "spin_hits") >= hits + 10,
        "{}",
        c.raw(&["INFO", "shardstream"])
    );
    let text = c.raw(&["INFO", "shardstream"]);
    let per: u64 = (0..2).map(|n| per_shard(&text, n, "spin_hits")).sum();
    let total = text
        .split("\r\n")
        .find_map(|l| l.strip_prefix("spin_hits:"))
        .unwrap();
    assert_eq!(per.to_string(), total);

    // CONFIG RESETSTAT zeroes INFO shardstream's counters. The two fan-outs
    // (RESETSTAT's own and INFO's) may spin a few times afterwards.
    assert!(shard_info(&mut c, "remote_commands") >= 40);
    let hits = shard_info(&mut c, "spin_hits");
    assert_eq!(c.raw(&["CONFIG", "RESETSTAT"]), "+OK");
    let text = c.raw(&["INFO", "shardstream"]);
    for field in ["local_commands", "remote_commands", "handovers"] {
        assert!(
            text.contains(&format!("\r\n{field}:0\r\n")),
            "{field}: {text}"
        );
    }
    assert!(shard_info(&mut c, "spin_hits") < hits.min(8), "{text}");
}

/// What a client that shuts down its sending side (`nc -N`, a proxy's
/// half-close) gets for `wire`: every reply up to the server's close, as
/// wire text (found by a newcomer trial: replies due from another shard,
/// and commands past the first 1024, were lost).
fn half_closed_replies(mut c: RespClient, wire: &[u8]) -> Vec<String> {
    c.send_raw(wire);
    c.shutdown_write();
    c.replies_until_close()
}

/// A client that sends a pipeline and then shuts down its sending side gets
/// every reply, then the server closes, as redis-server does: commands on
/// both shards, more than a pipeline's worth of them (1024 replies queued
/// stop decoding until they drain), with one shard and two. A blocking read
/// left waiting at end of input is dropped with the client, as Redis frees
/// a client at end of file; what came before it is answered.
#[test]
fn half_closed_client_gets_every_reply_then_the_close() {
    let redis = common::RedisServer::start();
    for shards in [1, 2] {
        let srv = TestServer::start(shards);
        let (a, b) = (key_on(0, "hc"), key_on(shards - 1, "hc"));
        let mut wire = Vec::new();
        for _ in 0..1500 {
            wire.extend(common::resp_command(&["INCR", &a]));
            wire.extend(common::resp_command(&["INCR", &b]));
        }
        wire.extend(common::resp_command(&["GET", &a]));
        let got = half_closed_replies(srv.client(), &wire);
        assert_eq!(got.len(), 3001, "shards {shards}");
        assert_eq!(got[2999], if shards == 1 { ":3000" } else { ":1500" });
        assert_eq!(
            got[3000],
            if shards == 1 {
                "$4\r\n3000"
            } else {
                "$4\r\n1500"
            }
        );
        let mut probe = srv.client();
        assert_eq!(
            probe.raw(&["GET", &b]),
            if shards == 1 {
                "$4\r\n3000"
            } else {
                "$4\r\n1500"
            }
        );

        // A blocking read at end of input: PING is answered, the read is
        // dropped (no reply, the connection closes, nobody stays blocked).
        let s = key_on(shards - 1, "hs");
        let mut wire = common::resp_command(&["PING"]);
        wire.extend(common::resp_command(&[
            "XREAD", "BLOCK", "0", "STREAMS", &s, "$",
        ]));
        wire.extend(common::resp_command(&["PING"]));
        let ours = half_closed_replies(srv.client(), &wire);
        assert_eq!(ours, ["+PONG"], "shards {shards}");
        common::wait_blocked(&mut probe, 0);
        assert_eq!(probe.raw(&["XADD", &s, "1-1", "f", "v"]), "$3\r\n1-1");
        if let Some(redis) = &redis {
            assert_eq!(half_closed_replies(redis.client(), &wire), ours);
        }
    }
    if let Some(redis) = &redis {
        let mut wire = Vec::new();
        for _ in 0..1500 {
            wire.extend(common::resp_command(&["INCR", "hc"]));
        }
        assert_eq!(half_closed_replies(redis.client(), &wire).len(), 1500);
    }
}
