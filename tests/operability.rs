//! Test-suite and admin support (issue 13): FUNCTION, DEBUG behind
//! `enable-debug-command`, `aof-use-rdb-preamble`, RENAME/RENAMENX/COPY and
//! WATCH — exact replies, and differential scripts against redis-server.
mod common;

use common::{assert_same_replies, test_config, RedisServer, TestServer};
use shardstream::config::Config;

fn debug_server(shards: u16) -> TestServer {
    TestServer::with_config(Config {
        shards,
        enable_debug_command: "yes",
        ..test_config()
    })
}

#[test]
fn function_commands_match_redis_with_no_libraries() {
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    assert_same_replies(
        &mut ours,
        &mut theirs,
        "FUNCTION FLUSH
         FUNCTION FLUSH ASYNC
         FUNCTION FLUSH sync
         FUNCTION FLUSH LATER
         FUNCTION FLUSH SYNC ASYNC
         FUNCTION LIST
         FUNCTION LIST WITHCODE
         FUNCTION LIST LIBRARYNAME x* WITHCODE
         FUNCTION LIST LIBRARYNAME
         FUNCTION LIST BOGUS
         FUNCTION STATS
         FUNCTION DELETE nolib
         FUNCTION KILL
         FUNCTION LOAD BOGUS code
         FUNCTION NOPE",
    );
}

#[test]
fn function_load_says_there_is_no_engine() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=x\nredis.register_function('f', function() return 1 end)"
        ]),
        format!("-{}", shardstream::cmd::function::NO_ENGINE)
    );
    assert_eq!(
        c.raw(&["FUNCTION", "LOAD"]),
        "-ERR wrong number of arguments for 'function|load' command"
    );
}

#[test]
fn debug_is_refused_by_default_as_redis() {
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    assert_same_replies(
        &mut ours,
        &mut theirs,
        "DEBUG SLEEP 0
         DEBUG OBJECT k
         DEBUG
         CONFIG GET enable-debug-command
         CONFIG SET enable-debug-command yes",
    );
    let info = ours.raw(&["INFO", "commandstats"]);
    assert!(info.contains("cmdstat_debug:calls=0,"), "{info}");
    assert!(info.contains("rejected_calls=3"), "{info}");
}

#[test]
fn debug_subcommands_when_enabled() {
    let srv = debug_server(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["DEBUG", "OBJECT", "nokey"]), "-ERR no such key");
    assert_eq!(c.raw(&["SET", "k", "12"]), "+OK");
    let obj = c.raw(&["DEBUG", "OBJECT", "k"]);
    assert!(obj.starts_with("+Value at:0x"), "{obj}");
    assert!(
        obj.contains(" refcount:1 encoding:int serializedlength:2 lru:"),
        "{obj}"
    );
    assert!(obj.ends_with(" lru_seconds_idle:0"), "{obj}");
    assert_eq!(
        c.raw(&["DEBUG", "NOPE"]),
        "-ERR unknown subcommand or wrong number of arguments for 'NOPE'. Try DEBUG HELP."
    );
    assert_eq!(
        c.raw(&["DEBUG", "SLEEP"]),
        "-ERR unknown subcommand or wrong number of arguments for 'SLEEP'. Try DEBUG HELP."
    );
    assert_eq!(
        c.raw(&["DEBUG", "RELOAD", "BAD"]),
        "-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."
    );
    assert_eq!(c.raw(&["DEBUG", "CHANGE-REPL-ID"]), "+OK");
    let t = std::time::Instant::now();
    assert_eq!(c.raw(&["DEBUG", "SLEEP", "0.2"]), "+OK");
    assert!(t.elapsed() >= std::time::Duration::from_millis(190));
    assert_eq!(c.raw(&["DEBUG", "SLEEP", "0"]), "+OK");
}

#[test]
fn debug_set_active_expire_stops_active_expiry() {
    let srv = debug_server(1);
    let mut c = srv.client();
    assert_eq!(c.raw(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK");
    assert_eq!(c.raw(&["SET", "k", "v", "PX", "20"]), "+OK");
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Not collected actively: still counted by DBSIZE, gone for reads.
    assert_eq!(c.raw(&["DBSIZE"]), ":1");
    assert_eq!(c.raw(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), "+OK");
    assert!(common::eventually(3, || c.raw(&["DBSIZE"]) == ":0"));
}

#[test]
fn debug_loadaof_and_reload_keep_streams() {
    let srv = debug_server(2);
    let mut c = srv.client();
    for k in ["s1", "{s1}x", "s2", "s3"] {
        c.raw(&["XADD", k, "1-1", "a", "1"]);
        c.raw(&["XADD", k, "2-2", "b", "2"]);
        c.raw(&["XDEL", k, "2-2"]);
        c.raw(&["XGROUP", "CREATE", k, "g", "0"]);
        c.raw(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", k, ">"]);
    }
    c.raw(&["SET", "str", "v"]);
    let before: Vec<String> = ["s1", "{s1}x", "s2", "s3"]
        .iter()
        .map(|k| c.raw(&["XINFO", "STREAM", k]))
        .collect();
    for sub in ["LOADAOF", "RELOAD"] {
        assert_eq!(c.raw(&["DEBUG", sub]), "+OK");
        let after: Vec<String> = ["s1", "{s1}x", "s2", "s3"]
            .iter()
            .map(|k| c.raw(&["XINFO", "STREAM", k]))
            .collect();
        assert_eq!(before, after);
        assert_eq!(c.raw(&["GET", "str"]), "$1\r\nv");
        assert_eq!(c.raw(&["DBSIZE"]), ":5");
    }
}

#[test]
fn aof_use_rdb_preamble_is_accepted() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["CONFIG", "SET", "aof-use-rdb-preamble", "no"]),
        "+OK"
    );
    assert_eq!(
        c.raw(&["CONFIG", "GET", "aof-use-rdb-preamble"]),
        "*2\r\n$20\r\naof-use-rdb-preamble\r\n$2\r\nno"
    );
    assert_eq!(
        c.raw(&["CONFIG", "SET", "aof-use-rdb-preamble", "maybe"]),
        "-ERR CONFIG SET failed (possibly related to argument 'aof-use-rdb-preamble') - argument must be 'yes' or 'no'"
    );
}
