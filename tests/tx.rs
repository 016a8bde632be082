//! MULTI / EXEC / DISCARD over real sockets: exact replies on a 4-shard
//! server, transactions over several shards, and a differential script
//! against redis-server.
mod common;

use common::{RedisServer, RespClient, TestServer};
use shardstream::route::slot::slot_of;

/// Two keys owned by different shards of a 4-shard server.
#[test]
fn happy_path_on_one_shard() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    for cmd in [
        &["SET", "{t}a", "1"][..],
        &["SET", "{t}b", "2"],
        &["GET", "{t}a"],
        &["EXISTS", "{t}a", "{t}b", "{t}c"],
        &["PING"],
        &["ECHO", "hi"],
        &["DEL", "{t}b"],
        &["GET", "{t}b"],
    ] {
        assert_eq!(c.raw(cmd), "+QUEUED");
    }
    assert_eq!(
        c.raw(&["EXEC"]),
        "*8\r\n+OK\r\n+OK\r\n$1\r\n1\r\n:2\r\n+PONG\r\n$2\r\nhi\r\n:1\r\n$-1"
    );
    // Out of MULTI again, and the writes happened.
    assert_eq!(c.raw(&["EXEC"]), "-ERR EXEC without MULTI");
    assert_eq!(c.raw(&["GET", "{t}a"]), "$1\r\n1");
    // Empty transaction.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["EXEC"]), "*0");
    // Connection commands only: answered on the IO thread.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["PING", "x"]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*1\r\n$1\r\nx");
}

#[test]
fn pipelined_transaction_keeps_reply_order() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let mut out = Vec::new();
    let mut cmd = |args: &[&str]| {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    };
    cmd(&["SET", "before", "0"]);
    cmd(&["MULTI"]);
    cmd(&["SET", "{p}x", "1"]);
    cmd(&["GET", "{p}x"]);
    cmd(&["EXEC"]);
    cmd(&["GET", "{p}x"]);
    c.send_raw(&out);
    assert_eq!(c.read_reply(), "+OK");
    assert_eq!(c.read_reply(), "+OK");
    assert_eq!(c.read_reply(), "+QUEUED");
    assert_eq!(c.read_reply(), "+QUEUED");
    assert_eq!(c.read_reply(), "*2\r\n+OK\r\n$1\r\n1");
    assert_eq!(c.read_reply(), "$1\r\n1");
}

#[test]
fn nesting_and_without_multi() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    assert_eq!(c.raw(&["EXEC"]), "-ERR EXEC without MULTI");
    assert_eq!(c.raw(&["DISCARD"]), "-ERR DISCARD without MULTI");
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["MULTI"]), "-ERR MULTI calls can not be nested");
    assert_eq!(c.raw(&["SET", "{n}a", "1"]), "+QUEUED");
    // Nesting does not doom the transaction.
    assert_eq!(c.raw(&["EXEC"]), "*1\r\n+OK");
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", "{n}a", "2"]), "+QUEUED");
    assert_eq!(c.raw(&["DISCARD"]), "+OK");
    assert_eq!(c.raw(&["DISCARD"]), "-ERR DISCARD without MULTI");
    assert_eq!(c.raw(&["GET", "{n}a"]), "$1\r\n1");
}

#[test]
fn queueing_errors_abort_exec() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    // Unknown command.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", "{e}a", "1"]), "+QUEUED");
    assert_eq!(
        c.raw(&["NOPE", "x"]),
        "-ERR unknown command 'NOPE', with args beginning with: 'x' "
    );
    assert_eq!(
        c.raw(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(c.raw(&["GET", "{e}a"]), "$-1");
    // Wrong arity.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(
        c.raw(&["GET"]),
        "-ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(c.raw(&["SET", "{e}a", "1"]), "+QUEUED");
    assert_eq!(
        c.raw(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(c.raw(&["GET", "{e}a"]), "$-1");
    // Unknown subcommand of a container command.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(
        c.raw(&["CLUSTER", "nope"]),
        "-ERR unknown subcommand 'nope'. Try CLUSTER HELP."
    );
    assert_eq!(
        c.raw(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors."
    );
    // EXEC with arguments inside MULTI discards at once, with the reason.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", "{e}a", "1"]), "+QUEUED");
    assert_eq!(
        c.raw(&["EXEC", "now"]),
        "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"
    );
    assert_eq!(c.raw(&["EXEC"]), "-ERR EXEC without MULTI");
    assert_eq!(c.raw(&["GET", "{e}a"]), "$-1");
    // DISCARD with arguments is an ordinary queueing error.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(
        c.raw(&["DISCARD", "x"]),
        "-ERR wrong number of arguments for 'discard' command"
    );
    assert_eq!(
        c.raw(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors."
    );
}

#[test]
fn runtime_errors_are_elements_and_the_rest_runs() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", "{r}a", "1"]), "+QUEUED");
    assert_eq!(c.raw(&["SET", "{r}b", "2", "BOGUS"]), "+QUEUED");
    assert_eq!(c.raw(&["SELECT", "99"]), "+QUEUED");
    assert_eq!(c.raw(&["GET", "{r}a"]), "+QUEUED");
    assert_eq!(
        c.raw(&["EXEC"]),
        "*4\r\n+OK\r\n-ERR syntax error\r\n-ERR DB index is out of range\r\n$1\r\n1"
    );
    assert_eq!(c.raw(&["GET", "{r}b"]), "$-1");
}

#[test]
fn select_inside_multi_applies_to_later_commands() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", "{s}a", "db0"]), "+QUEUED");
    assert_eq!(c.raw(&["SELECT", "1"]), "+QUEUED");
    assert_eq!(c.raw(&["SET", "{s}a", "db1"]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*3\r\n+OK\r\n+OK\r\n+OK");
    assert_eq!(c.raw(&["GET", "{s}a"]), "$3\r\ndb1");
    assert_eq!(c.raw(&["SELECT", "0"]), "+OK");
    assert_eq!(c.raw(&["GET", "{s}a"]), "$3\r\ndb0");
}

#[test]
fn transactions_spanning_shards_run() {
    // CLUSTER COUNTKEYSINSLOT needs cluster mode (a one-node emulated cluster).
    let srv = TestServer::with_config(shardstream::config::Config {
        shards: 4,
        cluster_emulated: true,
        ..common::test_config()
    });
    let mut c = srv.client();
    let (a, b) = common::keys_on_two_shards("k", 4);
    // Two single-key commands on different shards.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", &a, "1"]), "+QUEUED");
    assert_eq!(c.raw(&["SET", &b, "1"]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*2\r\n+OK\r\n+OK");
    assert_eq!(c.raw(&["EXISTS", &a, &b]), ":2");
    // One multi-key command whose keys span shards.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", &a, "2"]), "+QUEUED");
    assert_eq!(c.raw(&["DEL", &a, &b]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*2\r\n+OK\r\n:2");
    assert_eq!(c.raw(&["EXISTS", &a, &b]), ":0");
    // Shard work of a connection command on another shard, after a SELECT.
    assert_eq!(c.raw(&["SET", &a, "db0"]), "+OK");
    let other_slot = slot_of(b.as_bytes()).0.to_string();
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SELECT", "1"]), "+QUEUED");
    assert_eq!(c.raw(&["SET", &a, "db1"]), "+QUEUED");
    assert_eq!(
        c.raw(&["CLUSTER", "COUNTKEYSINSLOT", &other_slot]),
        "+QUEUED"
    );
    assert_eq!(c.raw(&["EXEC"]), "*3\r\n+OK\r\n+OK\r\n:0");
    assert_eq!(c.raw(&["GET", &a]), "$3\r\ndb1");
    assert_eq!(c.raw(&["SELECT", "0"]), "+OK");
    assert_eq!(c.raw(&["GET", &a]), "$3\r\ndb0");
    // The same on the shard of the keys.
    let own_slot = slot_of(a.as_bytes()).0.to_string();
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["DEL", &a]), "+QUEUED");
    assert_eq!(c.raw(&["CLUSTER", "COUNTKEYSINSLOT", &own_slot]), "+QUEUED");
    assert_eq!(c.raw(&["SET", &a, "x"]), "+QUEUED");
    assert_eq!(c.raw(&["CLUSTER", "COUNTKEYSINSLOT", &own_slot]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*4\r\n:1\r\n:0\r\n+OK\r\n:1");
}

#[test]
fn single_shard_server_runs_any_transaction() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", "a", "1"]), "+QUEUED");
    assert_eq!(c.raw(&["SET", "b", "2"]), "+QUEUED");
    assert_eq!(c.raw(&["DEL", "a", "b", "c"]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*3\r\n+OK\r\n+OK\r\n:2");
}

#[test]
fn redis_rs_atomic_pipeline() {
    let srv = TestServer::start(4);
    let mut con = srv.redis();
    let (v, n): (String, i64) = redis::pipe()
        .atomic()
        .set("{rs}a", "x")
        .ignore()
        .get("{rs}a")
        .exists("{rs}a")
        .query(&mut con)
        .expect("MULTI/EXEC through redis-rs");
    assert_eq!((v.as_str(), n), ("x", 1));
}

/// Everything deterministic, compared reply for reply with redis-server.
#[test]
fn transactions_match_redis_server() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(4);
    let mut ours: RespClient = srv.client();
    let mut theirs = redis.client();
    common::assert_same_replies(
        &mut ours,
        &mut theirs,
        r#"
        DEL {d}a {d}b {d}c
        EXEC
        EXEC now
        DISCARD
        MULTI
        MULTI
        SET {d}a 1
        SET {d}b 2
        GET {d}a
        EXISTS {d}a {d}b {d}c
        PING
        PING hello
        ECHO e
        SET {d}c 3 BOGUS
        SELECT 99
        DEL {d}b
        GET {d}b
        EXEC
        EXEC
        MULTI
        EXEC
        MULTI
        SET {d}a 2
        DISCARD
        GET {d}a
        MULTI
        SET {d}a 3
        NOPE x y
        EXEC
        GET {d}a
        MULTI
        GET
        EXEC
        MULTI
        SET {d}a 4
        EXEC now
        EXEC
        GET {d}a
        MULTI
        DISCARD x
        EXEC
        MULTI
        SELECT 1
        SET {d}a db1
        SELECT 0
        GET {d}a
        EXEC
        SELECT 1
        GET {d}a
        DEL {d}a
        SELECT 0
        DEL {d}a {d}b {d}c
        "#,
    );
}

/// XGROUP and XINFO are containers: inside MULTI each subcommand runs on
/// the shard of its key, as it does outside (they once all ran on shard 0,
/// where `XGROUP CREATE … MKSTREAM` made a second, unreachable key).
#[test]
fn container_subcommands_in_a_transaction_run_on_their_keys_shard() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
    for k in keys {
        assert_eq!(c.raw(&["MULTI"]), "+OK");
        for cmd in [
            &["XGROUP", "CREATE", k, "grp", "$", "MKSTREAM"][..],
            &["XINFO", "GROUPS", k],
            &["XGROUP", "CREATECONSUMER", k, "grp", "alice"],
            &["XADD", k, "1-1", "f", "v"],
            &["XGROUP", "SETID", k, "grp", "0"],
        ] {
            assert_eq!(c.raw(cmd), "+QUEUED");
        }
        assert_eq!(
            c.raw(&["EXEC"]),
            "*5\r\n+OK\r\n*1\r\n*12\r\n$4\r\nname\r\n$3\r\ngrp\r\n$9\r\nconsumers\r\n:0\r\n\
             $7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n\
             $12\r\nentries-read\r\n$-1\r\n$3\r\nlag\r\n:0\r\n:1\r\n$3\r\n1-1\r\n+OK",
            "key {k}"
        );
        assert_eq!(c.raw(&["EXISTS", k]), ":1", "key {k}");
        assert_eq!(
            c.raw(&["XREADGROUP", "GROUP", "grp", "alice", "STREAMS", k, ">"]),
            format!("*1\r\n*2\r\n$1\r\n{k}\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv")
        );
    }
    // One key each, none left behind on another shard.
    assert_eq!(c.raw(&["DBSIZE"]), format!(":{}", keys.len()));
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    for k in keys {
        assert_eq!(c.raw(&["XGROUP", "DESTROY", k, "grp"]), "+QUEUED");
    }
    assert_eq!(c.raw(&["EXEC"]), format!("*8{}", "\r\n:1".repeat(8)));
    for k in keys {
        assert_eq!(c.raw(&["XINFO", "GROUPS", k]), "*0", "key {k}");
    }
    // Counted on the subcommands' rows, as outside MULTI.
    let stats = c.raw(&["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_xgroup|create:calls=8,"), "{stats}");
    assert!(stats.contains("cmdstat_xgroup|destroy:calls=8,"), "{stats}");
}

/// The same transactions, reply for reply, against redis-server.
#[test]
fn container_subcommands_in_a_transaction_match_redis_server() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(4);
    let mut script = String::new();
    for k in ["a", "b", "c", "d"] {
        script.push_str(&format!(
            "XADD {k} 1-1 f v\nMULTI\nXINFO GROUPS {k}\nXGROUP CREATE {k} g 0\nXLEN {k}\nEXEC\n\
             MULTI\nXGROUP CREATE n{k} g $ MKSTREAM\nEXEC\nEXISTS n{k}\nXINFO GROUPS n{k}\n\
             MULTI\nXGROUP DELCONSUMER {k} g nobody\nXGROUP DESTROY {k} g\nXGROUP DESTROY {k} g\nEXEC\n"
        ));
    }
    script.push_str("DBSIZE\n");
    common::assert_same_replies(&mut srv.client(), &mut redis.client(), &script);
}
