//! MONITOR over real sockets: Redis's line format, the same lines as a real
//! redis-server for the same commands, admin commands hidden, QUIT ends it.
mod common;

use common::{RedisServer, RespClient, TestServer};

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
