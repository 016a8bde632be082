//! MONITOR over real sockets: Redis's line format, the same lines as a real
//! redis-server for the same commands, admin commands hidden, QUIT ends it;
//! a monitor is a client like the others (answered, listed, counted).
mod common;

use std::time::Duration;

use common::{eventually, info_int, test_config, RedisServer, RespClient, TestServer};
use shardstream::config::Config;

/// Commands a client sends while another monitors (one per line).
const SCRIPT: &[&[&str]] = &[
    &["SET", "k", "v"],
    &["get", "k"],
    &["SET", "odd", "a\"b\\c\r\n\t\x07\x08\x01\u{7f} ~"],
    &["XADD", "s", "1-1", "f", "v"],
    &["CONFIG", "GET", "maxmemory"],
    &["SELECT", "3"],
    &["PING"],
    &["AUTH", "nobody", "secret"],
    &["EXISTS", "k"],
    // A transaction's commands are shown when EXEC runs them (admin ones
    // not), each in the database it leaves selected, before EXEC's line.
    &["MULTI"],
    &["SET", "t", "1"],
    &["SELECT", "5"],
    &["CONFIG", "GET", "maxmemory"],
    &["GET", "t"],
    &["EXEC"],
    // A doomed one shows MULTI and EXEC only.
    &["MULTI"],
    &["NOSUCH"],
    &["GET", "t"],
    &["EXEC"],
];

/// Start monitoring on a fresh connection to `connect()`, run SCRIPT from
/// another connection, and return the lines the monitor got, each without
/// its `+<time> ` prefix, checking the prefix's shape.
fn monitor_lines(mut connect: impl FnMut() -> RespClient) -> Vec<String> {
    let mut m = connect();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    let mut c = connect();
    for cmd in SCRIPT {
        let _ = c.raw(cmd);
    }
    // A last marker command so we know where the script ends.
    let _ = c.raw(&["ECHO", "end"]);
    let mut lines = Vec::new();
    loop {
        let line = m.read_reply();
        let (stamp, rest) = line.split_once(' ').expect("space after the time");
        let (secs, micros) = stamp
            .strip_prefix('+')
            .and_then(|s| s.split_once('.'))
            .unwrap_or_else(|| panic!("bad stamp in {line:?}"));
        assert!(secs.parse::<u64>().unwrap() > 1_600_000_000, "{line}");
        assert_eq!(micros.len(), 6, "{line}");
        // `[db 127.0.0.1:port] "cmd" ...`: keep the db and the command.
        let (who, args) = rest.split_once("] ").expect("client part");
        let (db, addr) = who.trim_start_matches('[').split_once(' ').unwrap();
        assert!(addr.starts_with("127.0.0.1:"), "{line}");
        let done = args == "\"ECHO\" \"end\"";
        lines.push(format!("{db} {args}"));
        if done {
            break;
        }
    }
    assert_eq!(c.raw(&["PING"]), "+PONG");
    lines
}

#[test]
fn monitor_lines_match_redis() {
    let srv = TestServer::start(2);
    let ours = monitor_lines(|| srv.client());
    assert!(
        ours.contains(&"0 \"SET\" \"k\" \"v\"".to_string()),
        "{ours:?}"
    );
    assert!(
        ours.contains(&"0 \"SET\" \"odd\" \"a\\\"b\\\\c\\r\\n\\t\\a\\b\\x01\\x7f ~\"".to_string()),
        "{ours:?}"
    );
    assert!(
        !ours.iter().any(|l| l.contains("CONFIG")),
        "admin commands are not shown"
    );
    assert!(ours.contains(&"3 \"EXISTS\" \"k\"".to_string()), "{ours:?}");
    for line in [
        "3 \"SET\" \"t\" \"1\"",
        "5 \"SELECT\" \"5\"",
        "5 \"GET\" \"t\"",
        "5 \"EXEC\"",
    ] {
        assert!(ours.contains(&line.to_string()), "{line} in {ours:?}");
    }
    assert!(
        ours.contains(&"3 \"AUTH\" \"(redacted)\" \"(redacted)\"".to_string()),
        "{ours:?}"
    );
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let theirs = monitor_lines(|| redis.client());
    assert_eq!(ours, theirs);
}

#[test]
fn quit_ends_monitoring_and_the_server_carries_on() {
    let srv = TestServer::start(1);
    let mut m = srv.client();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    assert_eq!(m.raw(&["QUIT"]), "+OK");
    assert!(m.is_closed());
    // A monitor that just goes away is dropped on the next line.
    let mut m2 = srv.client();
    assert_eq!(m2.raw(&["MONITOR"]), "+OK");
    drop(m2);
    let mut c = srv.client();
    for _ in 0..3 {
        assert_eq!(c.raw(&["SET", "a", "b"]), "+OK");
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(
        c.raw(&["MONITOR"]),
        "-ERR Command not allowed inside a transaction"
    );
}

/// A reply as the tests compare it: a MONITOR line becomes `LINE <db>
/// <args>` (no time, no client address); anything else stays as it is.
fn norm(reply: &str) -> String {
    let is_line = reply
        .strip_prefix('+')
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()) && r.contains(" ["));
    if !is_line {
        return reply.to_string();
    }
    let (_, rest) = reply.split_once(" [").expect("client part");
    let (who, args) = rest.split_once("] ").expect("end of client part");
    let db = who.split(' ').next().expect("db");
    format!("LINE {db} {args}")
}

/// Read replies (and lines) until the line of `ECHO <mark>`, normalized.
fn read_until_mark(m: &mut RespClient, mark: &str) -> Vec<String> {
    let end = format!("\"ECHO\" \"{mark}\"");
    let mut out = Vec::new();
    loop {
        let r = norm(&m.read_reply());
        let done = r.starts_with("LINE ") && r.ends_with(&end);
        out.push(r);
        if done {
            return out;
        }
    }
}

/// Commands pipelined after MONITOR in the same write are answered, each
/// reply before its own line, as redis-server answers them.
#[test]
fn commands_pipelined_after_monitor_are_answered() {
    let run = |mut m: RespClient| {
        let mut bytes = common::resp_command(&["MONITOR"]);
        bytes.extend(common::resp_command(&["PING"]));
        bytes.extend(common::resp_command(&["ECHO", "a"]));
        bytes.extend_from_slice(b"PING\r\n");
        bytes.extend(common::resp_command(&["ECHO", "end"]));
        m.send_raw(&bytes);
        read_until_mark(&mut m, "end")
    };
    let srv = TestServer::start(2);
    let ours = run(srv.client());
    assert_eq!(
        ours,
        [
            "+OK",
            "+PONG",
            "LINE 0 \"PING\"",
            "$1\r\na",
            "LINE 0 \"ECHO\" \"a\"",
            "+PONG",
            "LINE 0 \"PING\"",
            "$3\r\nend",
            "LINE 0 \"ECHO\" \"end\"",
        ]
    );
    let Some(redis) = RedisServer::start() else {
        return;
    };
    assert_eq!(ours, run(redis.client()));
}

/// Steps a monitor sends (commands separated by `;`), each followed by an
/// `ECHO` mark; replies compared with redis-server's.
const MONITOR_STEPS: &[&str] = &[
    "PING",
    "PING hello",
    "ECHO hi",
    "GET k",
    "SET k v",
    "XADD s * f v",
    "XLEN s",
    "DBSIZE",
    "KEYS *",
    "EXISTS k",
    "DEL k",
    "EVAL return 1 0",
    "EVAL_RO return 1 0",
    "FCALL f 0",
    "GET",
    "NOSUCH x",
    "CLIENT SETNAME mon",
    "CLIENT GETNAME",
    "SELECT 1",
    "AUTH nobody",
    "WATCH k",
    "UNWATCH",
    "MULTI;GET k;PING;EXEC",
    "MULTI;PING;EXEC",
    "MONITOR",
    "SCRIPT EXISTS abc",
    "CONFIG GET maxmemory",
];

/// Run [`MONITOR_STEPS`] on a monitor; what it got for each.
fn monitor_answers(mut m: RespClient) -> Vec<Vec<String>> {
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    let mut all = Vec::new();
    for (i, step) in MONITOR_STEPS.iter().enumerate() {
        for cmd in step.split(';') {
            m.send(&common::words(cmd));
        }
        let mark = format!("mark{i}");
        m.send(&["ECHO", mark.as_str()]);
        let mut got = read_until_mark(&mut m, &mark);
        got.insert(0, step.to_string());
        all.push(got);
    }
    all
}

/// A monitor's own commands are answered as redis-server 7.0 answers a
/// monitor: keyspace commands refused as a replica's, the others run (and
/// are shown to it after their reply), a second MONITOR not answered.
#[test]
fn a_monitor_answers_its_commands_as_redis() {
    let srv = TestServer::start(2);
    let ours = monitor_answers(srv.client());
    let refused = "-ERR Replica can't interact with the keyspace";
    let step = |name: &str| ours.iter().find(|s| s[0] == name).unwrap().clone();
    assert_eq!(
        step("PING"),
        [
            "PING",
            "+PONG",
            "LINE 0 \"PING\"",
            "$5\r\nmark0",
            "LINE 0 \"ECHO\" \"mark0\""
        ]
    );
    assert_eq!(step("GET k")[1], refused);
    assert_eq!(step("SET k v")[1], refused);
    assert_eq!(step("EVAL return 1 0")[1], refused);
    assert_eq!(step("FCALL f 0")[1], refused);
    // MONITOR again: no reply, only the mark's.
    assert_eq!(step("MONITOR")[1], "$6\r\nmark24");
    // Help is not reading keys (the text is redis-server's, REFCOUNT included).
    let mut m = srv.client();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    assert!(m
        .raw(&["OBJECT", "HELP"])
        .starts_with("*15\r\n+OBJECT <subcommand>"));
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let theirs = monitor_answers(redis.client());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b);
    }
}

/// QUIT and RESET are commands, not words: a value that contains them does
/// not end the monitor; a real QUIT, inline or RESP, does.
#[test]
fn only_a_real_quit_ends_a_monitor() {
    let srv = TestServer::start(2);
    let mut m = srv.client();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    assert_eq!(
        m.raw(&["ECHO", "quit reset QUIT"]),
        "$15\r\nquit reset QUIT"
    );
    assert_eq!(norm(&m.read_reply()), "LINE 0 \"ECHO\" \"quit reset QUIT\"");
    let mut c = srv.client();
    assert_eq!(c.raw(&["SET", "k", "please quit"]), "+OK");
    assert_eq!(
        norm(&m.read_reply()),
        "LINE 0 \"SET\" \"k\" \"please quit\""
    );
    assert_eq!(m.raw(&["PING"]), "+PONG");
    assert_eq!(norm(&m.read_reply()), "LINE 0 \"PING\"");
    m.send_raw(b"quit\r\n");
    assert_eq!(m.read_reply(), "+OK");
    assert!(m.is_closed());
    // Its lines stop: the next command is fed to nobody.
    assert!(eventually(5, || info_int(
        &mut c,
        "clients",
        "connected_clients"
    ) == 1));
}

/// A monitor is listed by CLIENT LIST with `flags=O` (`Ox` in MULTI), counts
/// in `connected_clients`, and counts against `maxclients`.
#[test]
fn a_monitor_is_a_listed_and_counted_client() {
    let srv = TestServer::with_config(Config {
        shards: 2,
        maxclients: 2,
        ..test_config()
    });
    let mut m = srv.client();
    let id = m.raw(&["CLIENT", "ID"]);
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    let mut c = srv.client();
    let list = c.raw(&["CLIENT", "LIST"]);
    let line = list
        .lines()
        .find(|l| l.contains(&format!("id={} ", &id[1..])))
        .expect("the monitor is listed");
    assert!(line.contains(" flags=O "), "{line}");
    assert_eq!(info_int(&mut c, "clients", "connected_clients"), 2);
    // A third client is over maxclients 2.
    let mut third = srv.client();
    assert_eq!(third.read_reply(), "-ERR max number of clients reached");
    assert!(third.is_closed());
    // CLIENT LIST is an admin command (not shown); INFO is.
    assert_eq!(norm(&m.read_reply()), "LINE 0 \"INFO\" \"clients\"");
    assert_eq!(m.raw(&["MULTI"]), "+OK");
    assert_eq!(norm(&m.read_reply()), "LINE 0 \"MULTI\"");
    let list = c.raw(&["CLIENT", "LIST"]);
    assert!(list.contains(" flags=Ox "), "{list}");
    if let Some(redis) = RedisServer::start() {
        let mut m = redis.client();
        assert_eq!(m.raw(&["MONITOR"]), "+OK");
        let mut c = redis.client();
        assert!(c.raw(&["CLIENT", "LIST"]).contains(" flags=O "));
        assert_eq!(info_int(&mut c, "clients", "connected_clients"), 2);
    }
}

/// The idle `timeout` spares monitors, as Redis spares replicas.
#[test]
fn idle_timeout_spares_monitors() {
    let srv = TestServer::start(1);
    let mut m = srv.client();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    let mut c = srv.client();
    assert_eq!(c.raw(&["CONFIG", "SET", "timeout", "1"]), "+OK");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(m.raw(&["PING"]), "+PONG");
    assert_eq!(norm(&m.read_reply()), "LINE 0 \"PING\"");
}

/// A monitor that stops reading is disconnected once its channel holds
/// `QUEUE_LINES` lines, counted as a client over its output buffer limit;
/// the server carries on.
#[test]
fn a_monitor_too_far_behind_is_disconnected() {
    let srv = TestServer::start(1);
    let mut m = srv.client();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    let mut c = srv.client();
    let batch: Vec<u8> = (0..20_000).flat_map(|_| b"PING\r\n".to_vec()).collect();
    let mut sent = 0;
    while info_int(&mut c, "stats", "client_output_buffer_limit_disconnections") == 0 {
        assert!(sent < 3_000_000, "the monitor was never disconnected");
        c.send_raw(&batch);
        for _ in 0..20_000 {
            assert_eq!(c.read_reply(), "+PONG");
        }
        sent += 20_000;
    }
    assert!(sent > shardstream::monitor::QUEUE_LINES);
    assert!(eventually(5, || info_int(
        &mut c,
        "clients",
        "connected_clients"
    ) == 1));
    assert_eq!(c.raw(&["PING"]), "+PONG");
}

/// RESET leaves MONITOR mode (also from inside MULTI): no more lines, keys
/// readable again, `flags=N`; other monitors see the RESET. As redis-server.
#[test]
fn reset_leaves_monitor_mode() {
    let run = |mut m: RespClient, mut other: RespClient, mut watcher: RespClient| {
        assert_eq!(watcher.raw(&["MONITOR"]), "+OK");
        let mut out = vec![m.raw(&["MONITOR"])];
        out.push(m.raw(&["RESET"]));
        out.push(m.raw(&["GET", "k"]));
        out.push(m.raw(&["PING"]));
        out.push(other.raw(&["SET", "k", "v"]));
        out.push(m.raw(&["GET", "k"]));
        let list = other.raw(&["CLIENT", "LIST"]);
        out.push(format!(
            "flags=O listed: {}",
            list.matches(" flags=O ").count()
        ));
        out.push(m.raw(&["MONITOR"]));
        out.push(m.raw(&["MULTI"]));
        out.push(norm(&m.read_reply()));
        out.push(m.raw(&["RESET"]));
        out.push(m.raw(&["PING"]));
        for _ in 0..7 {
            out.push(norm(&watcher.read_reply()));
        }
        out
    };
    let srv = TestServer::start(2);
    let ours = run(srv.client(), srv.client(), srv.client());
    assert_eq!(
        ours,
        [
            "+OK",
            "+RESET",
            "$-1",
            "+PONG",
            "+OK",
            "$1\r\nv",
            "flags=O listed: 1",
            "+OK",
            "+OK",
            "LINE 0 \"MULTI\"",
            "+RESET",
            "+PONG",
            "LINE 0 \"RESET\"",
            "LINE 0 \"GET\" \"k\"",
            "LINE 0 \"PING\"",
            "LINE 0 \"SET\" \"k\" \"v\"",
            "LINE 0 \"GET\" \"k\"",
            "LINE 0 \"MULTI\"",
            "LINE 0 \"RESET\"",
        ]
    );
    let Some(redis) = RedisServer::start() else {
        return;
    };
    assert_eq!(ours, run(redis.client(), redis.client(), redis.client()));
}

/// CLIENT KILL closes a monitor like any client; its lines stop.
#[test]
fn client_kill_closes_a_monitor() {
    let srv = TestServer::start(2);
    let mut m = srv.client();
    let id = m.raw(&["CLIENT", "ID"]);
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    let mut c = srv.client();
    assert_eq!(c.raw(&["CLIENT", "KILL", "ID", &id[1..]]), ":1");
    assert!(m.is_closed());
    assert!(eventually(5, || info_int(
        &mut c,
        "clients",
        "connected_clients"
    ) == 1));
    assert_eq!(c.raw(&["SET", "k", "v"]), "+OK");
}

/// EVAL and FCALL are shown (they are flagged `skip_monitor`, but Redis
/// shows them itself), then the commands the script calls as `[<db> lua]`
/// lines, each in the database it leaves selected; a call the script may
/// not make (CONFIG) is not shown. Same lines, in the same order, as
/// redis-server.
#[test]
fn script_calls_are_shown_as_lua() {
    const BODY: &str = "redis.call('SET', KEYS[1], 'v') redis.call('SELECT', 4) \
                        redis.pcall('CONFIG', 'GET', 'maxmemory') return redis.call('GET', KEYS[1])";
    let run = |mut connect: Box<dyn FnMut() -> RespClient + '_>| -> Vec<String> {
        let mut m = connect();
        assert_eq!(m.raw(&["MONITOR"]), "+OK");
        let mut c = connect();
        assert_eq!(c.raw(&["EVAL", BODY, "1", "sk"]), "$-1");
        assert_eq!(c.raw(&["FUNCTION", "LOAD", "REPLACE", FLIB]), "$3\r\nmon");
        assert_eq!(c.raw(&["FCALL", "getit", "1", "sk"]), "$1\r\nv");
        let _ = c.raw(&["ECHO", "end"]);
        let mut lines = Vec::new();
        loop {
            let line = m.read_reply();
            let (_, rest) = line.split_once(' ').expect("space after the time");
            let (who, args) = rest.split_once("] ").expect("client part");
            let (db, addr) = who.trim_start_matches('[').split_once(' ').unwrap();
            let addr = if addr == "lua" { "lua" } else { "client" };
            if args == "\"ECHO\" \"end\"" {
                break;
            }
            lines.push(format!("{db} {addr} {args}"));
        }
        lines
    };
    const FLIB: &str = "#!lua name=mon\nredis.register_function('getit', \
                        function(keys) return redis.call('GET', keys[1]) end)";
    let srv = TestServer::start(2);
    let ours = run(Box::new(|| srv.client()));
    let want = [
        "0 client \"FCALL\" \"getit\" \"1\" \"sk\"",
        "0 lua \"GET\" \"sk\"",
        "0 lua \"GET\" \"sk\"",
        "0 lua \"SET\" \"sk\" \"v\"",
        "4 lua \"GET\" \"sk\"",
        "4 lua \"SELECT\" \"4\"",
    ];
    for w in want {
        assert!(ours.iter().any(|l| l == w), "{w} in {ours:?}");
    }
    assert!(
        !ours.iter().any(|l| l.contains("lua \"CONFIG\"")),
        "{ours:?}"
    );
    assert!(ours[0].starts_with("0 client \"EVAL\""), "{ours:?}");
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let theirs = run(Box::new(|| redis.client()));
    assert_eq!(ours, theirs);
}
