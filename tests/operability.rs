//! Test-suite and admin support (issue 13): FUNCTION, DEBUG behind
//! `enable-debug-command`, `aof-use-rdb-preamble`, RENAME/RENAMENX/COPY and
//! WATCH — exact replies, and differential scripts against redis-server.
mod common;

use common::{assert_same_replies, test_config, RedisServer, ScratchDir, TestServer};
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
fn function_load_loads_a_library() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=x\nredis.register_function('f', function() return 1 end)"
        ]),
        "$1\r\nx"
    );
    assert_eq!(c.raw(&["FCALL", "f", "0"]), ":1");
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

/// Keys `a` (slot 15495) and `b` (slot 3300) live on different shards of a
/// 2-shard server; `{a}x` lives with `a`.
const RENAME_SCRIPT: &str = "
    RENAME nokey b
    RENAMENX nokey b
    SET a 1
    RENAME a a
    RENAMENX a a
    RENAME a b
    GET a
    GET b
    SET a 2
    RENAMENX a b
    GET b
    RENAMENX a {a}x
    GET {a}x
    EXISTS a
    SET a 3 PX 100000
    RENAME a b
    ~PTTL b
    EXISTS a
    TTL a
    XADD s1 1-1 f v
    XGROUP CREATE s1 g 0
    RENAME s1 b
    TYPE b
    XINFO GROUPS b
    XRANGE b - +
    RENAME b s1
    RENAME s1 {s1}y
    XLEN {s1}y
    COPY nokey b
    COPY {s1}y b
    COPY {s1}y b
    COPY {s1}y b REPLACE
    XRANGE b - +
    COPY b b
    COPY b b DB 1
    COPY b c DB 99
    COPY b c DB x
    COPY b c DB 4294967296
    COPY b c BOGUS
    COPY b c DB
    SELECT 1
    XLEN b
    SELECT 0
    SET str v EX 1000
    COPY str a
    ~PTTL a
    TTL a
    GET a
    COPY str str2 DB 2 REPLACE
    SELECT 2
    GET str2
    SELECT 0
    RENAME
    COPY a
";

#[test]
fn rename_and_copy_match_redis_within_and_across_shards() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    for shards in [1, 2] {
        let srv = TestServer::start(shards);
        let mut ours = srv.client();
        let mut theirs = redis.client();
        theirs.raw(&["FLUSHALL"]);
        assert_same_replies(&mut ours, &mut theirs, RENAME_SCRIPT);
    }
}

#[test]
fn cross_shard_rename_inside_multi_runs_atomically() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    c.raw(&["SET", "a", "1"]);
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["RENAME", "a", "b"]), "+QUEUED");
    assert_eq!(c.raw(&["GET", "b"]), "+QUEUED");
    assert_eq!(c.raw(&["EXISTS", "a"]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*3\r\n+OK\r\n$1\r\n1\r\n:0");
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["RENAME", "b", "{b}c"]), "+QUEUED");
    assert_eq!(c.raw(&["GET", "{b}c"]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*2\r\n+OK\r\n$1\r\n1");
}

#[test]
fn cross_shard_rename_survives_aof_restart() {
    let dir = ScratchDir::new("rename-aof");
    let cfg = Config {
        shards: 2,
        appendonly: true,
        dir: dir.to_path_buf(),
        ..test_config()
    };
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        c.raw(&["XADD", "a", "1-1", "f", "v"]);
        c.raw(&["XGROUP", "CREATE", "a", "g", "0"]);
        c.raw(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", ">"]);
        assert_eq!(c.raw(&["RENAME", "a", "b"]), "+OK");
        assert_eq!(c.raw(&["COPY", "b", "a"]), ":1");
        assert_eq!(c.raw(&["RENAME", "a", "{b}z"]), "+OK");
    }
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    assert_eq!(c.raw(&["EXISTS", "a"]), ":0");
    for k in ["b", "{b}z"] {
        assert_eq!(c.raw(&["XLEN", k]), ":1");
        let p = c.raw(&["XPENDING", k, "g"]);
        assert!(p.starts_with("*4\r\n:1\r\n"), "{k}: {p}");
    }
}

/// Run `script` against both servers with two clients each: lines start with
/// `1 ` or `2 ` (which client), or are `sleep <ms>`; replies must match.
fn two_clients_same_replies(ours: &TestServer, redis: &RedisServer, script: &str) {
    let mut o = [ours.client(), ours.client()];
    let mut r = [redis.client(), redis.client()];
    r[0].raw(&["FLUSHALL"]);
    for (n, line) in script.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(ms) = line.strip_prefix("sleep ") {
            std::thread::sleep(std::time::Duration::from_millis(ms.parse().unwrap()));
            continue;
        }
        let (who, cmd) = line.split_at(1);
        let i: usize = who.parse::<usize>().unwrap() - 1;
        let args = common::words(cmd);
        let a = o[i].raw(&args);
        let b = r[i].raw(&args);
        assert_eq!(a, b, "line {}: `{line}`", n + 1);
    }
}

/// `a` and `b` live on different shards of a 2-shard server.
const WATCH_SCRIPT: &str = "
    1 WATCH
    1 SET a 1
    1 WATCH a
    2 SET a 2
    1 MULTI
    1 SET a 3
    1 EXEC
    1 GET a
    1 WATCH a
    1 MULTI
    1 PING
    1 GET a
    1 EXEC
    1 WATCH a b
    2 SET b 1
    1 MULTI
    1 GET a
    1 EXEC
    1 WATCH b
    1 MULTI
    1 WATCH a
    1 SET {a}x 1
    1 EXEC
    1 WATCH a
    1 UNWATCH
    2 SET a 9
    1 MULTI
    1 GET a
    1 EXEC
    1 WATCH a
    1 MULTI
    1 DISCARD
    2 SET a 10
    1 MULTI
    1 GET a
    1 EXEC
    1 WATCH a
    1 MULTI
    1 UNWATCH
    1 EXEC
    2 SET a 11
    1 WATCH a
    1 MULTI
    1 NOSUCHCMD
    1 EXEC
    1 MULTI
    1 GET a
    1 EXEC
    1 WATCH nokey
    2 SET nokey 1
    1 MULTI
    1 EXEC
    1 WATCH nokey2
    2 DEL nokey2
    1 MULTI
    1 EXEC
    1 WATCH a
    2 FLUSHALL
    1 MULTI
    1 EXEC
    1 WATCH nokey3
    2 SET other 1
    2 FLUSHALL
    1 MULTI
    1 EXEC
    1 SET t v PX 100
    1 WATCH t
    sleep 250
    1 MULTI
    1 EXEC
    1 SET s v
    1 WATCH s
    2 EXPIRE s 100
    1 MULTI
    1 EXEC
    1 WATCH st
    2 XADD st 1-1 f v
    1 MULTI
    1 XLEN st
    1 EXEC
    1 XGROUP CREATE st g 0
    1 WATCH st
    2 XREADGROUP GROUP g c STREAMS st >
    1 MULTI
    1 XLEN st
    1 EXEC
    1 SELECT 1
    1 WATCH a
    2 SET a 12
    1 MULTI
    1 GET a
    1 EXEC
";

#[test]
fn watch_matches_redis_within_and_across_shards() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    for shards in [1, 2] {
        let srv = TestServer::start(shards);
        two_clients_same_replies(&srv, &redis, WATCH_SCRIPT);
    }
}

#[test]
fn watches_of_a_closed_connection_are_released() {
    let srv = TestServer::start(2);
    {
        let mut c = srv.client();
        assert_eq!(c.raw(&["WATCH", "a", "b"]), "+OK");
    }
    // A new connection watching the same keys is not disturbed by the old one.
    let mut c = srv.client();
    let mut other = srv.client();
    assert_eq!(c.raw(&["WATCH", "a"]), "+OK");
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", "a", "1"]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*1\r\n+OK");
    assert_eq!(other.raw(&["SET", "b", "1"]), "+OK");
}

/// The INFO lines starting with any of `prefixes`, with `usec` figures blanked.
fn stat_lines(c: &mut common::RespClient, section: &str, prefixes: &[&str]) -> Vec<String> {
    let text = c.raw(&["INFO", section]);
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
        .map(|l| {
            l.split(',')
                .filter(|f| !f.starts_with("usec"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    out.sort();
    out
}

/// Assert both servers show the same INFO commandstats, errorstats and
/// stats lines starting with any of `prefixes` (`usec` figures blanked).
fn assert_same_stats(
    ours: &mut common::RespClient,
    theirs: &mut common::RespClient,
    prefixes: &[&str],
) {
    for section in ["commandstats", "errorstats", "stats"] {
        assert_eq!(
            stat_lines(ours, section, prefixes),
            stat_lines(theirs, section, prefixes),
            "{section}"
        );
    }
}

/// The `cmdstat_<cmd>:` line of an INFO commandstats text.
fn cmdstat_line<'a>(info: &'a str, cmd: &str) -> &'a str {
    info.lines()
        .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
        .unwrap_or_else(|| panic!("no {cmd} in {info}"))
}

/// A numeric field (`usec`, `usec_per_call`) of a commandstats line.
fn stat_field(line: &str, field: &str) -> f64 {
    line.split([':', ','])
        .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {line}"))
}

/// A command over keys of two shards is one call: its parts' time adds up
/// in `usec`, and a failure counts once in `failed_calls` and errorstats,
/// as on redis-server.
#[test]
fn commands_over_two_shards_count_once_and_are_timed() {
    let srv = TestServer::start(2);
    let (a, b) = common::keys_on_two_shards("k", 2);
    let mut ours = srv.client();
    for _ in 0..300 {
        ours.raw(&["MSET", &a, "1", &b, "2"]);
        ours.raw(&["MGET", &a, &b]);
        ours.raw(&["DEL", &a, &b]);
        ours.raw(&["XREAD", "STREAMS", &a, &b, "0", "0"]);
    }
    let info = ours.raw(&["INFO", "commandstats"]);
    for cmd in ["mset", "mget", "del", "xread"] {
        let line = cmdstat_line(&info, cmd);
        assert!(line.contains(":calls=300,"), "{line}");
        assert!(stat_field(line, "usec") > 0.0, "{line}");
    }
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    let script = format!(
        "
        CONFIG RESETSTAT
        SET {b} v
        XADD {a} 1-1 f v
        XREAD STREAMS {a} {b} 0 0
        XREAD STREAMS {a} {b} 0 0
        XGROUP CREATE {a} g 0
        XREADGROUP GROUP nog c STREAMS {a} {b} > >
        XREADGROUP GROUP g c STREAMS {a} {b} > >
        MGET {a} {b}
        DEL {a} {b}
        "
    );
    assert_same_replies(&mut ours, &mut theirs, &script);
    let prefixes = [
        "cmdstat_xread",
        "cmdstat_mget",
        "cmdstat_del",
        "errorstat_",
        "total_error_replies",
    ];
    assert_same_stats(&mut ours, &mut theirs, &prefixes);
}

/// Commands that fail inside EXEC, and a blocked read over two shards that
/// a key deletion ends with NOGROUP, count as failed calls and error
/// replies, as on redis-server.
#[test]
fn failures_inside_exec_and_of_woken_reads_count_like_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (a, b) = common::keys_on_two_shards("s", 2);
    let (m, n) = common::keys_on_two_shards("m", 2);
    for (name, addr) in [("shardstream", srv.addr), ("redis-server", redis.addr)] {
        let _ = name;
        let mut c = common::RespClient::connect(addr);
        for cmd in [
            vec!["XGROUP", "CREATE", &a, "g", "$", "MKSTREAM"],
            vec!["XGROUP", "CREATE", &b, "g", "$", "MKSTREAM"],
            vec!["SET", "str", "1"],
            vec!["XADD", &m, "1-1", "f", "v"],
            vec!["XADD", &n, "1-1", "f", "v"],
            vec!["CONFIG", "RESETSTAT"],
        ] {
            c.raw(&cmd);
        }
    }
    let mut ours = srv.client();
    let mut theirs = redis.client();
    let script = format!(
        "
        MULTI
        INCR {m}
        XADD {m} 0-1 f v
        LPUSH {n} x
        XADD {n} 5-1 f v
        GET str
        EXEC
        MULTI
        GET str
        INCR {m}
        EXEC
        "
    );
    assert_same_replies(&mut ours, &mut theirs, &script);
    let prefixes = [
        "cmdstat_incr",
        "cmdstat_xadd",
        "cmdstat_lpush",
        "cmdstat_get",
        "cmdstat_exec",
        "errorstat_",
        "total_error_replies",
        "unexpected_error_replies",
    ];
    assert_same_stats(&mut ours, &mut theirs, &prefixes);
    // Redis 7.2+ runs a woken read again, so deleting one of its streams
    // answers NOGROUP (7.0 answered UNBLOCKED): one failed XREADGROUP.
    let (ra, rb, addr) = (a.clone(), b.clone(), srv.addr);
    let reader = std::thread::spawn(move || {
        let mut r = common::RespClient::connect(addr);
        r.raw(&common::words(&format!(
            "XREADGROUP GROUP g c BLOCK 0 STREAMS {} {} > >",
            ra, rb
        )))
    });
    common::wait_blocked(&mut ours, 1);
    ours.raw(&["DEL", &b]);
    let got = reader.join().unwrap();
    assert!(got.starts_with("-NOGROUP"), "{got}");
    assert_eq!(
        stat_lines(&mut ours, "commandstats", &["cmdstat_xreadgroup"]),
        ["cmdstat_xreadgroup:calls=1,rejected_calls=0,failed_calls=1"]
    );
    assert_eq!(
        stat_lines(&mut ours, "errorstats", &["errorstat_NOGROUP"]),
        ["errorstat_NOGROUP:count=1"]
    );
}

#[test]
fn failed_rejected_and_error_stats_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let script = "
        CONFIG RESETSTAT
        XADD s 1-1 f v
        XADD s 1-1 f v
        XADD s
        XREADGROUP GROUP nogroup c STREAMS s >
        XACK s nogroup 1-1
        SET str v
        XADD str * f v
        NOSUCHCOMMAND x
        GET
        XGROUP CREATE s g 0
        XGROUP CREATE s g 0
        CLIENT NOSUCH
    ";
    let mut ours = srv.client();
    let mut theirs = redis.client();
    assert_same_replies(&mut ours, &mut theirs, script);
    let prefixes = [
        "cmdstat_xadd",
        "cmdstat_xreadgroup",
        "cmdstat_xack",
        "cmdstat_set",
        "cmdstat_get",
        "cmdstat_xgroup|create",
        "errorstat_",
        "total_error_replies",
    ];
    assert_same_stats(&mut ours, &mut theirs, &prefixes);
}

#[test]
fn commandstats_measure_execution_time() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for i in 0..200 {
        c.raw(&["XADD", &format!("s{}", i % 7), "*", "f", "v"]);
    }
    let info = c.raw(&["INFO", "commandstats"]);
    let line = cmdstat_line(&info, "xadd");
    let usec = stat_field(line, "usec");
    assert!(usec > 0.0, "{line}");
    assert!(line.contains("calls=200,"), "{line}");
    let per_call = stat_field(line, "usec_per_call");
    assert!((per_call - usec / 200.0).abs() < 0.01, "{line}");
}

/// A blocking read served at once is timed like any command (Redis counts
/// the execution of XREAD/XREADGROUP with BLOCK in its `usec`).
#[test]
fn commandstats_time_blocking_reads_served_at_once() {
    for shards in [1, 2] {
        let srv = TestServer::start(shards);
        let mut c = srv.client();
        for _ in 0..300 {
            c.raw(&["XADD", "s", "*", "f", "v"]);
        }
        c.raw(&["XGROUP", "CREATE", "s", "g", "0"]);
        for _ in 0..300 {
            c.raw(&common::words(
                "XREADGROUP GROUP g c COUNT 1 BLOCK 0 STREAMS s >",
            ));
            c.raw(&["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", "0"]);
        }
        let info = c.raw(&["INFO", "commandstats"]);
        for cmd in ["xreadgroup", "xread"] {
            let line = cmdstat_line(&info, cmd);
            assert!(line.contains(":calls=300,"), "{line}");
            assert!(stat_field(line, "usec") > 0.0, "shards {shards}: {line}");
        }
    }
}

/// A blocking read that parks is one call: no latency sample when it parks,
/// one when a write wakes it and it is served (as Redis records an
/// unblocked command's run), with one shard and with two.
#[test]
fn woken_blocking_reads_are_timed_when_served() {
    let (one, two) = (TestServer::start(1), TestServer::start(2));
    let redis = RedisServer::start();
    let mut servers = vec![("1 shard", one.addr), ("2 shards", two.addr)];
    if let Some(r) = &redis {
        servers.push(("redis-server", r.addr));
    }
    for (name, addr) in servers {
        let mut c = common::RespClient::connect(addr);
        c.raw(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        c.raw(&["CONFIG", "RESETSTAT"]);
        let reader = std::thread::spawn(move || {
            let mut r = common::RespClient::connect(addr);
            r.raw(&common::words("XREADGROUP GROUP g c BLOCK 0 STREAMS s >"))
        });
        assert!(
            common::eventually(5, || common::info_int(&mut c, "clients", "blocked_clients")
                == 1),
            "{name}: the reader never blocked"
        );
        let parked = c.raw(&["INFO", "latencystats"]);
        assert!(
            !parked.contains("latency_percentiles_usec_xreadgroup"),
            "{name}: {parked}"
        );
        c.raw(&["XADD", "s", "1-1", "f", "v"]);
        assert!(reader.join().unwrap().contains("1-1"), "{name}");
        let served = c.raw(&["INFO", "latencystats"]);
        assert!(
            served.contains("latency_percentiles_usec_xreadgroup:"),
            "{name}: {served}"
        );
        let stats = c.raw(&["INFO", "commandstats"]);
        assert!(
            stats.contains("cmdstat_xreadgroup:calls=1,"),
            "{name}: {stats}"
        );
    }
}

#[test]
fn latencystats_report_configured_percentiles() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for i in 0..50 {
        c.raw(&["XADD", &format!("s{}", i % 5), "*", "f", "v"]);
    }
    let line = |c: &mut common::RespClient| {
        c.raw(&["INFO", "latencystats"])
            .lines()
            .find(|l| l.starts_with("latency_percentiles_usec_xadd:"))
            .map(str::to_string)
    };
    let l = line(&mut c).expect("xadd latencies");
    let fields: Vec<&str> = l.split(':').nth(1).unwrap().split(',').collect();
    assert_eq!(fields.len(), 3, "{l}");
    for (f, p) in fields.iter().zip(["p50=", "p99=", "p99.9="]) {
        assert!(f.starts_with(p), "{l}");
        let v: f64 = f[p.len()..].parse().unwrap();
        assert!(v > 0.0, "{l}");
        assert_eq!(f[p.len()..].split('.').nth(1).map(str::len), Some(3), "{l}");
        assert!(
            v > 0.0 && f.split('.').nth(1).map(str::len) == Some(3) || p == "p99.9=",
            "{l}"
        );
    }
    assert!(!c.raw(&["INFO"]).contains("# Latencystats"));
    assert_eq!(
        c.raw(&[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 90"
        ]),
        "+OK"
    );
    assert_eq!(
        c.raw(&["CONFIG", "GET", "latency-tracking-info-percentiles"]),
        "*2\r\n$33\r\nlatency-tracking-info-percentiles\r\n$5\r\n50 90"
    );
    let l = line(&mut c).unwrap();
    assert!(
        l.contains(":p50=") && l.contains(",p90=") && !l.contains("p99"),
        "{l}"
    );
    assert_eq!(c.raw(&["CONFIG", "SET", "latency-tracking", "no"]), "+OK");
    assert_eq!(c.raw(&["CONFIG", "RESETSTAT"]), "+OK");
    c.raw(&["XADD", "s", "*", "f", "v"]);
    assert_eq!(line(&mut c), None);
    assert_eq!(c.raw(&["CONFIG", "SET", "latency-tracking", "yes"]), "+OK");
    c.raw(&["XADD", "s", "*", "f", "v"]);
    assert!(line(&mut c).is_some());
}

#[test]
fn latency_and_role_match_redis_without_events() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    assert_same_replies(
        &mut srv.client(),
        &mut redis.client(),
        "ROLE
         LATENCY LATEST
         LATENCY HISTORY command
         LATENCY RESET
         LATENCY RESET command fast-command
         LATENCY HISTOGRAM nosuchcommand
         LATENCY NOPE
         LATENCY",
    );
}

#[test]
fn latency_histogram_reports_calls_and_cumulative_buckets() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for _ in 0..10 {
        c.raw(&["SET", "k", "v"]);
    }
    c.raw(&["XADD", "s", "*", "f", "v"]);
    let r = c.raw(&["LATENCY", "HISTOGRAM", "set", "nosuch"]);
    // One command: *2 (RESP2 map) name, {calls 10, histogram_usec {...}}.
    assert!(
        r.starts_with("*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:10\r\n$14\r\nhistogram_usec\r\n*"),
        "{r}"
    );
    assert!(r.ends_with(":10"), "cumulative count ends at calls: {r}");
    let all = c.raw(&["LATENCY", "HISTOGRAM"]);
    assert!(
        all.contains("$4\r\nxadd\r\n") && all.contains("$3\r\nset\r\n"),
        "{all}"
    );
}

#[test]
fn client_list_shows_real_fd_and_tot_mem() {
    let srv = TestServer::start(2);
    let mut a = srv.client();
    let mut b = srv.client();
    let line = |c: &mut common::RespClient| c.raw(&["CLIENT", "INFO"]);
    let field = |l: &str, f: &str| -> i64 {
        l.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    let (la, lb) = (line(&mut a), line(&mut b));
    let (fa, fb) = (field(&la, "fd"), field(&lb, "fd"));
    assert!(fa > 2 && fb > 2 && fa != fb, "{la}\n{lb}");
    assert!(field(&la, "tot-mem") >= 16 * 1024, "{la}");
}

#[test]
fn slowlog_errors_and_empty_log_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    assert_same_replies(
        &mut srv.client(),
        &mut redis.client(),
        "SLOWLOG RESET
         SLOWLOG LEN
         SLOWLOG GET
         SLOWLOG GET -2
         SLOWLOG GET x
         SLOWLOG GET 1 2
         SLOWLOG NOPE
         CONFIG GET slowlog-log-slower-than
         CONFIG GET slowlog-max-len
         COMMAND INFO EXEC MULTI",
    );
}

#[test]
fn slowlog_records_slow_shard_commands() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["CLIENT", "SETNAME", "slowpoke"]), "+OK");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        "+OK"
    );
    c.raw(&["XADD", "s", "1-1", "f", "v"]);
    let long = "x".repeat(130);
    c.raw(&["SET", "k", &long]);
    let mut many: Vec<String> = vec!["DEL".into()];
    many.extend((0..40).map(|i| format!("{{t}}k{i}")));
    c.raw(&many);
    // The CONFIG SET that turned logging on is logged too (the threshold
    // is read after a command runs, as in Redis).
    assert_eq!(c.raw(&["SLOWLOG", "LEN"]), ":4");
    // Newest first: SLOWLOG LEN itself (id 4), then the DEL (id 3).
    let got = c.raw(&["SLOWLOG", "GET", "2"]);
    assert!(got.starts_with("*2\r\n*6\r\n:4\r\n:"), "{got}");
    assert!(got.contains("\r\n*6\r\n:3\r\n:"), "{got}");
    assert!(got.contains("*32\r\n$3\r\nDEL\r\n"), "{got}");
    assert!(got.contains("$23\r\n... (10 more arguments)\r\n"), "{got}");
    assert!(got.ends_with("$8\r\nslowpoke"), "{got}");
    let all = c.raw(&["SLOWLOG", "GET", "-1"]);
    assert!(all.starts_with("*6\r\n"), "{all}");
    assert!(
        all.contains(&format!("{}... (2 more bytes)", "x".repeat(128))),
        "{all}"
    );
    assert!(
        all.contains("$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n1-1\r\n"),
        "{all}"
    );
    assert_eq!(c.raw(&["CONFIG", "SET", "slowlog-max-len", "1"]), "+OK");
    c.raw(&["GET", "k"]);
    assert_eq!(c.raw(&["SLOWLOG", "LEN"]), ":1");
    assert_eq!(c.raw(&["SLOWLOG", "RESET"]), "+OK");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        "+OK"
    );
    c.raw(&["GET", "k"]);
    // SLOWLOG RESET logged itself after clearing; nothing after it.
    assert_eq!(c.raw(&["SLOWLOG", "LEN"]), ":1");
    let last = c.raw(&["SLOWLOG", "GET"]);
    assert!(last.contains("$7\r\nSLOWLOG\r\n$5\r\nRESET\r\n"), "{last}");
}

/// What SLOWLOG GET -1 shows of each entry, oldest first: the arguments,
/// whether the client is a script's (`?:0`), and the client name.
fn slowlog_entries(c: &mut redis::Connection) -> Vec<(Vec<String>, bool, String)> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(-1).query(c).unwrap();
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    };
    let mut out: Vec<_> = entries
        .iter()
        .map(|e| match e {
            redis::Value::Array(f) => {
                let args = match &f[3] {
                    redis::Value::Array(a) => a.iter().map(text).collect(),
                    other => vec![format!("{other:?}")],
                };
                (args, text(&f[4]) == "?:0", text(&f[5]))
            }
            other => (vec![format!("{other:?}")], false, String::new()),
        })
        .collect();
    out.reverse();
    out
}

/// Every command is in SLOWLOG at `slowlog-log-slower-than 0` wherever it
/// ran: on the connection's thread (PING, CONFIG, CLIENT, AUTH, HELLO,
/// SLOWLOG RESET itself), over several shards (DEL, MGET, KEYS, DBSIZE),
/// and inside a script (as the script's client, `?:0`); credentials
/// redacted as Redis redacts them. Before, only commands run on one
/// shard's data were logged.
#[test]
fn slowlog_records_every_command_as_redis_does() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (k1, k2) = common::keys_on_two_shards("sl", 2);
    let mut logs = Vec::new();
    for mut c in [
        srv.redis(),
        redis::Client::open(format!("redis://{}/", redis.addr))
            .unwrap()
            .get_connection()
            .unwrap(),
    ] {
        let mut run = |args: &[&str]| {
            let _: redis::RedisResult<redis::Value> =
                redis::cmd(args[0]).arg(&args[1..]).query(&mut c);
        };
        run(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        run(&["SLOWLOG", "RESET"]);
        run(&["PING"]);
        run(&["CONFIG", "GET", "maxmemory"]);
        run(&["SET", &k1, "1"]);
        run(&["DEL", &k1, &k2, "other"]);
        run(&["MGET", &k1, &k2]);
        run(&["KEYS", "nothing*"]);
        run(&["DBSIZE"]);
        run(&["CLIENT", "SETNAME", "me"]);
        run(&["ECHO", "hi"]);
        run(&[
            "EVAL",
            "redis.call('set', KEYS[1], 'v'); return redis.call('get', KEYS[1])",
            "1",
            "{t}k",
        ]);
        run(&["AUTH", "secret"]);
        run(&["AUTH", "user", "secret"]);
        run(&["AUTH", "a", "b", "c"]);
        run(&["HELLO", "2", "AUTH", "default", "secret"]);
        run(&["HELLO", "2", "SETNAME", "me", "AUTH", "default", "secret"]);
        run(&["HELLO", "9", "AUTH", "default", "secret"]);
        run(&["CONFIG", "SET", "requirepass", "", "maxmemory", "0"]);
        run(&["CONFIG", "SET", "masterauth", "x"]);
        run(&["CONFIG", "SET", "masterauth"]);
        run(&["MULTI"]);
        run(&["DISCARD"]);
        // EXEC is not logged; the commands it runs are, one by one.
        // (A connection command queued after keyed ones is logged before
        // them: it runs when EXEC plans the queue. Here it comes first.)
        run(&["MULTI"]);
        run(&["PING"]);
        run(&["SET", &k1, "2"]);
        run(&["GET", &k1]);
        run(&["MSET", &k1, "3", &k2, "4"]);
        run(&["DEL", &k1, &k2]);
        run(&["EXEC"]);
        run(&["WATCH", &k2]);
        run(&["MULTI"]);
        run(&["SET", &k2, "5"]);
        run(&["EXEC"]);
        logs.push(slowlog_entries(&mut c));
    }
    let (ours, theirs) = (&logs[0], &logs[1]);
    assert_eq!(ours, theirs);
    // The log is not empty by accident: spot-check some entries.
    let has = |args: &[&str], script: bool| {
        ours.iter().any(|(a, s, _)| {
            a == &args.iter().map(|x| x.to_string()).collect::<Vec<_>>() && *s == script
        })
    };
    assert!(has(&["SLOWLOG", "RESET"], false), "{ours:?}");
    assert!(has(&["set", "{t}k", "v"], true), "{ours:?}");
    assert!(
        has(&["AUTH", "user", "(redacted)"], false)
            || has(&["AUTH", "(redacted)", "(redacted)"], false),
        "{ours:?}"
    );
    assert!(
        has(
            &[
                "CONFIG",
                "SET",
                "requirepass",
                "(redacted)",
                "maxmemory",
                "0"
            ],
            false
        ),
        "{ours:?}"
    );
    assert!(has(&["DEL", &k1, &k2, "other"], false), "{ours:?}");
    assert!(has(&["MSET", &k1, "3", &k2, "4"], false), "{ours:?}");
    assert!(!ours.iter().any(|(a, _, _)| a[0] == "EXEC"), "{ours:?}");
}

/// A blocking command that parks is in SLOWLOG once it is over, not while
/// it waits (Redis 7.2+'s `updateStatsOnUnblock`): when a write serves it,
/// when its timeout passes, when CLIENT UNBLOCK ends it; never when its
/// client goes away. Its time is its runs', without the wait.
#[test]
fn slowlog_records_blocked_commands_when_they_end() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    c.raw(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let blpops = |c: &mut common::RespClient| {
        let all = c.raw(&["SLOWLOG", "GET", "-1"]);
        all.matches("$5\r\nBLPOP\r\n").count() + all.matches("$10\r\nXREADGROUP\r\n").count()
    };
    let blocked_clients =
        |c: &mut common::RespClient| common::info_int(c, "clients", "blocked_clients");
    // Served by a write.
    c.raw(&["SLOWLOG", "RESET"]);
    let mut r = srv.client();
    r.send(&["BLPOP", "bl", "0"]);
    assert!(common::eventually(5, || blocked_clients(&mut c) == 1));
    assert_eq!(blpops(&mut c), 0, "logged while blocked");
    c.raw(&["LPUSH", "bl", "x"]);
    assert_eq!(r.read_reply(), "*2\r\n$2\r\nbl\r\n$1\r\nx");
    assert!(common::eventually(5, || blpops(&mut c) == 1));
    // Timed out.
    c.raw(&["SLOWLOG", "RESET"]);
    assert_eq!(r.raw(&["BLPOP", "bl", "0.05"]), "*-1");
    assert!(common::eventually(5, || blpops(&mut c) == 1));
    // Ended by CLIENT UNBLOCK.
    c.raw(&["SLOWLOG", "RESET"]);
    c.raw(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let mut r2 = srv.client();
    let id2 = r2
        .raw(&["CLIENT", "ID"])
        .trim_start_matches(':')
        .to_string();
    r2.send(&[
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
    assert!(common::eventually(5, || blocked_clients(&mut c) == 1));
    assert_eq!(c.raw(&["CLIENT", "UNBLOCK", &id2]), ":1");
    assert_eq!(r2.read_reply(), "*-1");
    assert!(common::eventually(5, || blpops(&mut c) >= 1));
    // Over keys of two shards: served, timed out, unblocked.
    let (a, b) = common::keys_on_two_shards("bk", 2);
    let count = |c: &mut common::RespClient, what: &str| {
        c.raw(&["SLOWLOG", "GET", "-1"]).matches(what).count()
    };
    c.raw(&["SLOWLOG", "RESET"]);
    r.send(&["BLPOP", &a, &b, "0"]);
    assert!(common::eventually(5, || blocked_clients(&mut c) == 1));
    assert_eq!(count(&mut c, "BLPOP"), 0, "logged while blocked");
    c.raw(&["LPUSH", &b, "x"]);
    assert!(r.read_reply().starts_with("*2\r\n"));
    assert!(common::eventually(5, || count(&mut c, "BLPOP") == 1));
    c.raw(&["SLOWLOG", "RESET"]);
    assert_eq!(
        r.raw(&["XREAD", "BLOCK", "50", "STREAMS", &a, &b, "$", "$"]),
        "*-1"
    );
    assert!(common::eventually(5, || count(&mut c, "XREAD") == 1));
    c.raw(&["SLOWLOG", "RESET"]);
    let rid = r.raw(&["CLIENT", "ID"]).trim_start_matches(':').to_string();
    r.send(&["BZPOPMIN", &a, &b, "0"]);
    assert!(common::eventually(5, || blocked_clients(&mut c) == 1));
    assert_eq!(c.raw(&["CLIENT", "UNBLOCK", &rid]), ":1");
    assert_eq!(r.read_reply(), "*-1");
    assert!(common::eventually(5, || count(&mut c, "BZPOPMIN") == 1));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(count(&mut c, "BZPOPMIN"), 1, "logged twice");
    // A blocked client that goes away is not logged.
    c.raw(&["SLOWLOG", "RESET"]);
    let mut gone = srv.client();
    gone.send(&["BLPOP", "never", "0"]);
    assert!(common::eventually(5, || blocked_clients(&mut c) >= 1));
    drop(gone);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let all = c.raw(&["SLOWLOG", "GET", "-1"]);
    assert!(!all.contains("never"), "{all}");
}

/// The commands a cross-shard transaction ran on a held shard count in INFO
/// when the hold ends, so CONFIG RESETSTAT afterwards clears them (before,
/// they waited for that shard's next request and showed up after a reset).
#[test]
fn held_shard_stats_do_not_outlive_resetstat() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let (a, b) = common::keys_on_two_shards("rs", 2);
    for _ in 0..20 {
        c.raw(&["MULTI"]);
        c.raw(&["SET", &a, "v"]);
        c.raw(&["GET", &b]);
        assert!(c.raw(&["EXEC"]).starts_with("*2\r\n"));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(c.raw(&["CONFIG", "RESETSTAT"]), "+OK");
    let lat = c.raw(&["INFO", "latencystats"]);
    assert!(
        !lat.contains("usec_get:") && !lat.contains("usec_set:"),
        "{lat}"
    );
    let stats = c.raw(&["INFO", "commandstats"]);
    assert!(
        !stats.contains("cmdstat_get:") && !stats.contains("cmdstat_set:"),
        "{stats}"
    );
}

/// `name` has `calls` calls and some time (`usec` > 0) in INFO
/// commandstats, and a line in INFO latencystats.
fn assert_timed(c: &mut common::RespClient, name: &str, calls: u64) {
    let info = c.raw(&["INFO", "commandstats"]);
    let line = info
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
        .unwrap_or_default()
        .to_string();
    let usec: u64 = line
        .split(['=', ','])
        .nth(3)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        line.contains(&format!("calls={calls},")) && usec > 0,
        "{line}"
    );
    let lat = c.raw(&["INFO", "latencystats"]);
    let want = format!("latency_percentiles_usec_{name}:p50=");
    assert!(lat.contains(&want), "{lat}");
}

/// Conn-thread commands now count their time in INFO commandstats and
/// latencystats, as every Redis command does (before: `usec=0`).
#[test]
fn connection_commands_are_timed_in_commandstats() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for _ in 0..20 {
        c.raw(&["CONFIG", "GET", "*"]);
    }
    assert_timed(&mut c, "config|get", 20);
    // So do the commands EXEC runs (before: calls counted, usec=0).
    for i in 0..20 {
        c.raw(&["MULTI"]);
        c.raw(&["SET", &format!("k{i}"), "v"]);
        c.raw(&["EXEC"]);
    }
    assert_timed(&mut c, "set", 20);
}

#[test]
fn unblocked_reader_errors_count_in_errorstats() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let mut reader = srv.client();
    c.raw(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    reader.send(&[
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
    common::wait_blocked(&mut c, 1);
    assert_eq!(c.raw(&["XGROUP", "DESTROY", "s", "g"]), ":1");
    assert!(reader.read_reply().starts_with("-NOGROUP"));
    assert!(c
        .raw(&["INFO", "errorstats"])
        .contains("errorstat_NOGROUP:count=1"));
}

/// Commands a script calls count as Redis counts them (`scriptCall`,
/// redis/src/script.c): calls and failures of each command, a refused
/// call (arity, a write from EVAL_RO) as a rejected call, an unknown one
/// only in errorstats, and a script answering with its command's error
/// does not count that error twice. Over one shard and over two (the
/// script runs with both held), against redis-server.
#[test]
fn commands_called_by_scripts_count_like_redis() {
    let srv = TestServer::start(2);
    let (a, b) = common::keys_on_two_shards("sc", 2);
    let mut ours = srv.client();
    let redis = RedisServer::start();
    let script = format!(
        "
        CONFIG RESETSTAT
        EVAL \"redis.pcall('XGROUP', 'CREATECONSUMER', KEYS[1], 'g', 'c') return 1\" 1 {a}
        EVAL \"redis.call('SET', KEYS[1], 'v') redis.call('GET', KEYS[1]) return redis.call('XADD', KEYS[1], '*', 'f', 'v')\" 1 {a}
        EVAL \"return redis.call('nosuch')\" 0
        EVAL \"return redis.call('get')\" 0
        EVAL \"return redis.call('xgroup')\" 0
        EVAL \"return redis.call('xgroup', 'nosub')\" 0
        EVAL \"return redis.pcall('XADD', KEYS[1], 'bad', 'f', 'v')\" 1 {b}
        EVAL_RO \"return redis.call('SET', KEYS[1], 'y')\" 1 {a}
        EVAL \"local t = redis.pcall('SELECT', 99) return 1\" 0
        EVAL \"return redis.call('SELECT', 99)\" 0
        EVAL \"return redis.error_reply('MY_ERR custom')\" 0
        EVAL \"return redis.call('PING')\" 0
        EVAL \"redis.call('SET', KEYS[1], 'x') redis.call('XLEN', KEYS[2]) return redis.call('INCR', KEYS[1])\" 2 {a} {b}
        EVAL \"redis.call('DEL', KEYS[1]) return redis.call('XADD', KEYS[2], '1-1', 'f', 'v')\" 2 {a} {b}
        "
    );
    if let Some(redis) = &redis {
        let mut theirs = redis.client();
        assert_same_replies(&mut ours, &mut theirs, &script);
        let prefixes = [
            "cmdstat_eval",
            "cmdstat_xgroup",
            "cmdstat_set:",
            "cmdstat_get:",
            "cmdstat_xadd",
            "cmdstat_select",
            "cmdstat_ping",
            "cmdstat_incr",
            "cmdstat_xlen",
            "cmdstat_del",
            "errorstat_",
            "total_error_replies",
            "total_commands_processed",
        ];
        assert_same_stats(&mut ours, &mut theirs, &prefixes);
    } else {
        for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
            ours.raw(&common::words(line));
        }
    }
    let info = ours.raw(&["INFO", "commandstats"]);
    let counts = |cmd: &str| {
        let line = cmdstat_line(&info, cmd);
        ["calls", "rejected_calls", "failed_calls"].map(|f| stat_field(line, f) as u64)
    };
    assert_eq!(counts("eval"), [13, 0, 9]);
    assert_eq!(counts("eval_ro"), [1, 0, 1]);
    assert_eq!(counts("xadd"), [3, 0, 2]);
    assert_eq!(counts("set"), [2, 1, 0]);
    assert_eq!(counts("get"), [1, 1, 0]);
    assert_eq!(counts("xgroup|createconsumer"), [1, 0, 1]);
    assert_eq!(counts("select"), [2, 0, 2]);
    assert_eq!(counts("incr"), [1, 0, 1]);
    let errors = ours.raw(&["INFO", "errorstats"]);
    assert!(errors.contains("errorstat_MY_ERR:count=1\r\n"), "{errors}");
    assert!(
        errors.contains("errorstat_WRONGTYPE:count=1\r\n"),
        "{errors}"
    );
}

/// INFO `total_commands_processed` counts the commands that ran, failed
/// ones included: not those refused before running (unknown command or
/// subcommand, wrong arity, a queued command's `QUEUED`, a doomed EXEC's
/// queue), as redis-server counts them.
#[test]
fn processed_commands_leave_out_refused_ones_like_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let mut theirs = redis.client();
    let script = "
        CONFIG RESETSTAT
        GET
        NOSUCH a b
        XGROUP NOSUCH
        XADD s
        SET k v
        INCR k
        MULTI
        SET a 1
        GET a
        EXEC
        MULTI
        GET
        SET a 2
        EXEC
        EVAL \"return 1\" 0
        EVAL
        ";
    assert_same_replies(&mut ours, &mut theirs, script);
    assert_same_stats(&mut ours, &mut theirs, &["total_commands_processed"]);
}

/// errorstats files an error under its first word when a space comes
/// within the first 32 characters of `-CODE ...`, and under ERR otherwise
/// (no space, or a longer first word), as redis-server does.
#[test]
fn errorstats_names_errors_like_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let mut theirs = redis.client();
    let long = "A".repeat(40);
    let edge = "B".repeat(30);
    let script = format!(
        "
        CONFIG RESETSTAT
        EVAL \"return {{err='x'}}\" 0
        EVAL \"return {{err=''}}\" 0
        EVAL \"return {{err='-'}}\" 0
        EVAL \"return {{err='{long} y'}}\" 0
        EVAL \"return {{err='{edge} y'}}\" 0
        EVAL \"return {{err='{edge}C y'}}\" 0
        EVAL \"return redis.error_reply('{long} y')\" 0
        EVAL \"return {{err='MY_ERR fine'}}\" 0
        "
    );
    assert_same_replies(&mut ours, &mut theirs, &script);
    assert_same_stats(
        &mut ours,
        &mut theirs,
        &["errorstat_", "total_error_replies"],
    );
}

/// Errors nested in a script's array reply count as Redis counts every
/// error reply it writes: each in errorstats, a called command's error
/// passed on as one more failed call of EVAL instead, and any other makes
/// the EVAL call a failed one.
#[test]
fn errors_nested_in_a_script_reply_count_like_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let mut theirs = redis.client();
    let script = r#"
        CONFIG RESETSTAT
        SET {n}s str
        EVAL "return {redis.error_reply('E1 x'), redis.error_reply('E2 y')}" 0
        EVAL "return {redis.pcall('LPUSH', KEYS[1], 'x')}" 1 {n}s
        EVAL "return {redis.pcall('LPUSH', KEYS[1], 'x'), redis.pcall('LPUSH', KEYS[1], 'y')}" 1 {n}s
        EVAL "return {1, {redis.error_reply('E3 z'), {err='E4 deep'}}}" 0
        EVAL "return {redis.pcall('LPUSH', KEYS[1], 'x'), redis.error_reply('E5 w')}" 1 {n}s
        EVAL "return {1, 2}" 0
        "#;
    assert_same_replies(&mut ours, &mut theirs, script);
    assert_same_stats(
        &mut ours,
        &mut theirs,
        &[
            "cmdstat_eval",
            "cmdstat_lpush",
            "errorstat_",
            "total_error_replies",
        ],
    );
}
