//! Connection and server commands over real sockets: HELLO, AUTH, CLIENT,
//! CONFIG, COMMAND, INFO, SHUTDOWN — exact replies, plus differential scripts
//! against a real redis-server.
mod common;

use common::{assert_same_replies, test_config, RedisServer, RespClient, TestServer};
use shardstream::config::Config;

/// A commandstats value without its `usec` and `usec_per_call` fields
/// (measured times vary from run to run).
fn without_usec(v: &str) -> String {
    v.split(',')
        .filter(|f| !f.starts_with("usec"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Value of `field:` in INFO text.
fn info_field(text: &str, field: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim_end().to_string())
}

/// Body of a bulk/verbatim reply's wire text (after the `$n\r\n` header).
fn body(wire: &str) -> &str {
    wire.split_once("\r\n").map_or("", |(_, b)| b)
}

/// The id CLIENT ID reports for `c`.
fn client_id(c: &mut RespClient) -> u64 {
    c.raw(&["CLIENT", "ID"])
        .trim_start_matches(':')
        .parse()
        .expect("integer id")
}

#[test]
fn hello_switches_protocol() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let id = client_id(&mut c);
    let hello2 = c.raw(&["HELLO", "2"]);
    assert_eq!(
        hello2,
        format!(
            "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n8.10.0\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0"
        )
    );
    let hello3 = c.raw(&["HELLO", "3"]);
    assert!(hello3.starts_with("%7\r\n$6\r\nserver\r\n"), "{hello3:?}");
    assert!(hello3.contains("$5\r\nproto\r\n:3\r\n"), "{hello3:?}");
    // RESP3 from now on: maps, nulls, verbatim strings.
    assert_eq!(
        c.raw(&["CONFIG", "GET", "maxmemory"]),
        "%1\r\n$9\r\nmaxmemory\r\n$1\r\n0"
    );
    assert_eq!(c.raw(&["CLIENT", "GETNAME"]), "_");
    assert!(c.raw(&["INFO", "server"]).starts_with("="));
    assert!(c.raw(&["CLIENT", "INFO"]).contains("txt:id="));
    assert!(c.raw(&["CLIENT", "INFO"]).contains(" resp=3 "));
    // HELLO without a version keeps the current protocol.
    assert!(c.raw(&["HELLO"]).starts_with("%7\r\n"));
    assert!(c
        .raw(&["HELLO", "2", "SETNAME", "conn-a"])
        .starts_with("*14\r\n"));
    assert_eq!(c.raw(&["CLIENT", "GETNAME"]), "$6\r\nconn-a");
    assert_eq!(
        c.raw(&["HELLO", "4"]),
        "-NOPROTO unsupported protocol version"
    );
    assert_eq!(
        c.raw(&["HELLO", "x"]),
        "-ERR Protocol version is not an integer or out of range"
    );
    assert_eq!(
        c.raw(&["HELLO", "3", "AUTH", "default"]),
        "-ERR Syntax error in HELLO option 'AUTH'"
    );
    assert_eq!(
        c.raw(&["HELLO", "3", "bogus"]),
        "-ERR Syntax error in HELLO option 'bogus'"
    );
    // Failed HELLO changed nothing.
    assert_eq!(c.raw(&["CLIENT", "GETNAME"]), "$6\r\nconn-a");
}

#[test]
fn auth_without_requirepass() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["AUTH", "pw"]),
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    );
    assert_eq!(c.raw(&["AUTH", "default", "anything"]), "+OK");
    assert_eq!(
        c.raw(&["AUTH", "alice", "pw"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(c.raw(&["AUTH", "a", "b", "c"]), "-ERR syntax error");
}

#[test]
fn requirepass_flow() {
    let srv = TestServer::with_config(Config {
        requirepass: Some("s3cret".into()),
        ..test_config()
    });
    let mut c = srv.client();
    assert_eq!(c.raw(&["PING"]), "-NOAUTH Authentication required.");
    assert_eq!(c.raw(&["CLIENT", "ID"]), "-NOAUTH Authentication required.");
    // Unknown command, arity and subcommand errors come before NOAUTH, as in Redis.
    assert_eq!(
        c.raw(&["NOPE"]),
        "-ERR unknown command 'NOPE', with args beginning with: "
    );
    assert_eq!(
        c.raw(&["GET"]),
        "-ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        c.raw(&["CLIENT", "nope"]),
        "-ERR unknown subcommand 'nope'. Try CLIENT HELP."
    );
    assert!(c
        .raw(&["HELLO", "3"])
        .starts_with("-NOAUTH HELLO must be called with the client already authenticated"));
    assert_eq!(
        c.raw(&["AUTH", "wrong"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(
        c.raw(&["AUTH", "nobody", "s3cret"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(c.raw(&["PING"]), "-NOAUTH Authentication required.");
    assert_eq!(c.raw(&["AUTH", "s3cret"]), "+OK");
    assert_eq!(c.raw(&["PING"]), "+PONG");

    let mut d = srv.client();
    assert_eq!(
        d.raw(&["HELLO", "3", "AUTH", "default", "nope"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    let h = d.raw(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "d"]);
    assert!(h.starts_with("%7\r\n"), "{h:?}");
    assert_eq!(d.raw(&["CLIENT", "GETNAME"]), "$1\r\nd");

    let mut e = srv.client();
    assert_eq!(e.raw(&["AUTH", "default", "s3cret"]), "+OK");
    assert_eq!(e.raw(&["SET", "k", "v"]), "+OK");
}

#[test]
fn client_naming_and_info() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let id = client_id(&mut c);
    assert_eq!(c.raw(&["CLIENT", "GETNAME"]), "$-1");
    assert_eq!(c.raw(&["CLIENT", "SETNAME", "worker-1"]), "+OK");
    assert_eq!(c.raw(&["CLIENT", "GETNAME"]), "$8\r\nworker-1");
    assert_eq!(
        c.raw(&["CLIENT", "SETNAME", "a b"]),
        "-ERR Client names cannot contain spaces, newlines or special characters."
    );
    assert_eq!(
        c.raw(&["CLIENT", "SETNAME"]),
        "-ERR wrong number of arguments for 'client|setname' command"
    );
    assert_eq!(c.raw(&["CLIENT", "SETINFO", "LIB-NAME", "redis-rs"]), "+OK");
    assert_eq!(c.raw(&["CLIENT", "SETINFO", "lib-ver", "1.0"]), "+OK");
    assert_eq!(
        c.raw(&["CLIENT", "SETINFO", "LIB-NAME", "a b"]),
        "-ERR LIB-NAME cannot contain spaces, newlines or special characters."
    );
    assert_eq!(
        c.raw(&["CLIENT", "SETINFO", "color", "x"]),
        "-ERR Unrecognized option 'color'"
    );
    assert_eq!(c.raw(&["CLIENT", "NO-EVICT", "on"]), "+OK");
    assert_eq!(c.raw(&["CLIENT", "NO-TOUCH", "off"]), "+OK");
    assert_eq!(c.raw(&["CLIENT", "NO-TOUCH", "maybe"]), "-ERR syntax error");
    assert_eq!(
        c.raw(&["CLIENT", "nope"]),
        "-ERR unknown subcommand 'nope'. Try CLIENT HELP."
    );
    assert_eq!(
        c.raw(&["CLIENT"]),
        "-ERR wrong number of arguments for 'client' command"
    );
    let help = c.raw(&["CLIENT", "HELP"]);
    assert!(help.starts_with("*"), "{help:?}");
    assert!(help.contains("+SETNAME <name>"), "{help:?}");

    let info = c.raw(&["CLIENT", "INFO"]);
    let line = body(&info);
    assert!(line.ends_with('\n'));
    for want in [
        format!("id={id} "),
        "name=worker-1 ".into(),
        "db=0 ".into(),
        "cmd=client|info ".into(),
        "resp=2 ".into(),
        "lib-name=redis-rs ".into(),
        "lib-ver=1.0".into(),
        // NO-EVICT is on (above), as Redis shows it.
        "flags=e ".into(),
        "user=default ".into(),
    ] {
        assert!(line.contains(&want), "{want:?} not in {line:?}");
    }
    assert!(line.contains(&format!("laddr={} ", srv.addr)));
}

#[test]
fn client_list_filters() {
    let srv = TestServer::start(1);
    let mut a = srv.client();
    let mut b = srv.client();
    let (ida, idb) = (client_id(&mut a), client_id(&mut b));
    let all = a.raw(&["CLIENT", "LIST"]);
    let lines: Vec<&str> = body(&all).lines().collect();
    assert_eq!(lines.len(), 2, "{all:?}");
    assert!(lines[0].starts_with(&format!("id={ida} ")));
    assert!(lines[1].starts_with(&format!("id={idb} ")));
    assert!(lines[0].contains("cmd=client|list"));
    let only_b = a.raw(&["CLIENT", "LIST", "ID", &idb.to_string()]);
    assert_eq!(body(&only_b).lines().count(), 1);
    assert!(body(&only_b).starts_with(&format!("id={idb} ")));
    assert_eq!(
        body(&a.raw(&["CLIENT", "LIST", "TYPE", "normal"]))
            .lines()
            .count(),
        2
    );
    assert_eq!(a.raw(&["CLIENT", "LIST", "TYPE", "pubsub"]), "$0\r\n");
    assert_eq!(
        a.raw(&["CLIENT", "LIST", "TYPE", "x"]),
        "-ERR Unknown client type 'x'"
    );
    assert_eq!(
        a.raw(&["CLIENT", "LIST", "ID", "0"]),
        "-ERR Invalid client ID"
    );
    assert_eq!(a.raw(&["CLIENT", "LIST", "x"]), "-ERR syntax error");
}

#[test]
fn client_kill_closes_other_connection() {
    let srv = TestServer::start(2);
    let mut killer = srv.client();
    let mut victim = srv.client();
    let vid = client_id(&mut victim);
    assert_eq!(
        killer.raw(&["CLIENT", "KILL", "ID", &vid.to_string()]),
        ":1"
    );
    assert!(victim.is_closed());
    // Gone from the registry.
    assert_eq!(
        killer.raw(&["CLIENT", "KILL", "ID", &vid.to_string()]),
        ":0"
    );
    assert_eq!(killer.raw(&["PING"]), "+PONG");

    // Old form by address.
    let mut v2 = srv.client();
    let line = v2.raw(&["CLIENT", "INFO"]);
    let addr = body(&line)
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .expect("addr field")
        .to_string();
    assert_eq!(killer.raw(&["CLIENT", "KILL", &addr]), "+OK");
    assert!(v2.is_closed());
    assert_eq!(
        killer.raw(&["CLIENT", "KILL", &addr]),
        "-ERR No such client"
    );

    // SKIPME defaults to yes; SKIPME no kills the caller after its reply.
    let kid = client_id(&mut killer);
    assert_eq!(
        killer.raw(&["CLIENT", "KILL", "ID", &kid.to_string()]),
        ":0"
    );
    assert_eq!(
        killer.raw(&["CLIENT", "KILL", "ID", &kid.to_string(), "SKIPME", "no"]),
        ":1"
    );
    assert!(killer.is_closed());
}

#[test]
fn client_kill_errors() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["CLIENT", "KILL", "ID", "0"]),
        "-ERR client-id should be greater than 0"
    );
    assert_eq!(
        c.raw(&["CLIENT", "KILL", "a", "b", "c"]),
        "-ERR syntax error"
    );
    assert_eq!(
        c.raw(&["CLIENT", "KILL", "FOO", "bar"]),
        "-ERR syntax error"
    );
    assert_eq!(
        c.raw(&["CLIENT", "KILL", "USER", "bob"]),
        "-ERR No such user 'bob'"
    );
    assert_eq!(c.raw(&["CLIENT", "KILL", "TYPE", "master"]), ":0");
    assert_eq!(
        c.raw(&["CLIENT", "KILL", "MAXAGE", "0"]),
        "-ERR maxage should be greater than 0"
    );
    assert_eq!(
        c.raw(&["CLIENT", "KILL", "MAXAGE", "soon"]),
        "-ERR maxage is not an integer or out of range"
    );
    assert_eq!(c.raw(&["PING"]), "+PONG");
}

#[test]
fn client_kill_maxage_closes_only_older_connections() {
    // Redis 7.4's MAXAGE: clients connected for at least that many seconds.
    let srv = TestServer::start(2);
    let mut old = srv.client();
    assert_eq!(old.raw(&["PING"]), "+PONG");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let mut young = srv.client();
    let mut killer = srv.client();
    assert_eq!(killer.raw(&["CLIENT", "KILL", "MAXAGE", "1"]), ":1");
    assert!(old.is_closed());
    assert_eq!(young.raw(&["PING"]), "+PONG");
    assert_eq!(killer.raw(&["CLIENT", "KILL", "MAXAGE", "1000"]), ":0");
}

#[test]
fn config_get_and_set() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["CONFIG", "GET", "timeout"]),
        "*2\r\n$7\r\ntimeout\r\n$1\r\n0"
    );
    assert_eq!(
        c.raw(&["CONFIG", "SET", "timeout", "30", "maxclients", "50"]),
        "+OK"
    );
    assert_eq!(
        c.raw(&["CONFIG", "GET", "timeout", "maxc*"]),
        "*4\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n$7\r\ntimeout\r\n$2\r\n30"
    );
    assert_eq!(
        c.raw(&["CONFIG", "GET", "port"]),
        format!(
            "*2\r\n$4\r\nport\r\n${}\r\n{}",
            srv.addr.port().to_string().len(),
            srv.addr.port()
        )
    );
    assert_eq!(
        c.raw(&["CONFIG", "GET", "SAVE", "appendonly"]),
        // appendonly is a real setting (test servers run with it off).
        "*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$4\r\nsave\r\n$0\r\n"
    );
    // '*' lists every setting once.
    let all = c.raw(&["CONFIG", "GET", "*"]);
    assert!(all.contains("$9\r\nmaxmemory\r\n$1\r\n0"), "{all:?}");
    assert!(all.contains("$6\r\nshards\r\n$1\r\n1"), "{all:?}");
    assert_eq!(c.raw(&["CONFIG", "GET", "nomatch"]), "*0");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "port", "1"]),
        "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"
    );
    assert_eq!(
        c.raw(&["CONFIG", "SET", "shards", "8"]),
        "-ERR CONFIG SET failed (possibly related to argument 'shards') - can't set immutable config"
    );
    assert_eq!(
        c.raw(&["CONFIG", "SET", "nope", "1"]),
        "-ERR Unknown option or number of arguments for CONFIG SET - 'nope'"
    );
    assert_eq!(
        c.raw(&["CONFIG", "SET", "save", "900 1"]),
        "-ERR CONFIG SET failed (possibly related to argument 'save') - snapshots (RDB) are not supported, use appendonly yes (save \"\" turns snapshots off)"
    );
    assert_eq!(c.raw(&["CONFIG", "SET", "save", ""]), "+OK");
    // All or nothing: a bad second value leaves the first unchanged.
    assert_eq!(
        c.raw(&["CONFIG", "SET", "timeout", "7", "maxclients", "x"]),
        "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer"
    );
    assert_eq!(
        c.raw(&["CONFIG", "GET", "timeout"]),
        "*2\r\n$7\r\ntimeout\r\n$2\r\n30"
    );
    assert_eq!(
        c.raw(&["CONFIG", "NOPE"]),
        "-ERR unknown subcommand 'NOPE'. Try CONFIG HELP."
    );
    assert!(c.raw(&["CONFIG", "HELP"]).starts_with("*"));
}

/// Every CONFIG SET error we produce for a bad value is redis-server's for
/// the same input: each directive both servers know, with values that are
/// bad for most of them (not a number, negative, past i64, decimals, hex,
/// units on an integer, empty). Valid values that would rebind or lock out
/// a server (`bind`, `requirepass`, `maxmemory`) are left out, as are
/// directives whose 7.0 texts changed in 7.2+ (`loglevel` gained `nothing`;
/// `set-max-listpack-*` are new) and `save` (RDB is refused on purpose).
#[test]
fn differential_config_set_errors() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(1);
    let (mut ours, mut theirs) = (srv.client(), redis.client());
    const SKIP: &[&str] = &[
        "bind",
        "requirepass",
        "maxmemory",
        "maxclients",
        "loglevel",
        "save",
        "shards",
        "cluster-mode",
        "cluster-config",
        "cluster-allow-local-multislot",
        "dump-payload-version",
        "set-max-listpack-entries",
        "set-max-listpack-value",
    ];
    let values = [
        "x",
        "-1",
        "-2",
        "99999999999999999999",
        "-99999999999999999999",
        "1.5",
        "",
        "1k",
        "0x10",
        "+1",
        "01",
        "65536",
        "2147483648",
        "-2147483649",
    ];
    let mut compared = 0;
    for name in Config::NAMES.iter().filter(|n| !SKIP.contains(n)) {
        for v in values {
            let args = ["CONFIG", "SET", name, v];
            let want = theirs.raw(&args);
            if want.starts_with("-ERR Unknown option") {
                continue; // a shardstream-only name
            }
            assert_eq!(ours.raw(&args), want, "CONFIG SET {name} {v:?}");
            compared += 1;
        }
    }
    assert!(compared > 300, "only {compared} comparisons");
    assert_same_replies(
        &mut ours,
        &mut theirs,
        r#"
        CONFIG SET dir /tmp
        CONFIG SET port abc
        CONFIG SET port 65536
        CONFIG SET timeout 1 port x
        CONFIG SET maxmemory-samples 65
        CONFIG GET maxmemory-samples
        CONFIG SET maxmemory-samples 0
        CONFIG SET hz 0
        CONFIG GET hz
        CONFIG SET hz 501
        CONFIG GET hz
        CONFIG SET hz 20
        CONFIG GET hz
        CONFIG SET latency-monitor-threshold 100
        CONFIG GET latency-monitor-threshold
        CONFIG SET slowlog-max-len 2147483648
        CONFIG GET slowlog-max-len
        CONFIG SET auto-aof-rewrite-min-size ""
        CONFIG GET auto-aof-rewrite-min-size
        CONFIG SET zset-max-ziplist-value ""
        CONFIG GET zset-max-ziplist-value
        CONFIG SET latency-tracking-info-percentiles "0x10 0X1.8p1 -0"
        CONFIG GET latency-tracking-info-percentiles
        CONFIG SET latency-tracking-info-percentiles "1  2"
        CONFIG SET latency-tracking-info-percentiles "1e-400"
        CONFIG SET latency-tracking-info-percentiles "1e400"
        CONFIG SET latency-tracking-info-percentiles nan
        "#,
    );
    // INFO follows hz (both servers report the configured value).
    let info = ours.raw(&["INFO", "server"]);
    assert_eq!(info_field(&info, "hz").as_deref(), Some("20"), "{info}");
    assert_eq!(info_field(&info, "configured_hz").as_deref(), Some("20"));
    let info = theirs.raw(&["INFO", "server"]);
    assert_eq!(info_field(&info, "configured_hz").as_deref(), Some("20"));
}

/// The Redis settings shardstream keeps but does not act on answer CONFIG
/// GET and CONFIG SET as redis-server does: the same defaults, `+OK`, the
/// immutable and protected refusals, and the value errors of their kind.
#[test]
fn differential_config_of_ignored_settings() {
    use shardstream::config::ignored::{Kind, ALIASES, IGNORED};
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut ours, mut theirs) = (srv.client(), redis.client());
    let mut compared = 0;
    let names = IGNORED
        .iter()
        .map(|row| (row.0, row.2))
        .chain(ALIASES.iter().map(|(alias, canonical)| {
            let kind = IGNORED.iter().find(|r| r.0 == *canonical).unwrap().2;
            (*alias, kind)
        }));
    for (name, kind) in names {
        let get = theirs.raw(&["CONFIG", "GET", name]);
        if get == "*0" {
            continue; // added after 7.0
        }
        assert_eq!(ours.raw(&["CONFIG", "GET", name]), get, "CONFIG GET {name}");
        let default = get.split("\r\n").nth(4).unwrap_or("");
        let args = ["CONFIG", "SET", name, default];
        assert_eq!(ours.raw(&args), theirs.raw(&args), "CONFIG SET {name}");
        let bad = match kind {
            Kind::Bool | Kind::Enum(_) => "maybe",
            Kind::Events => "Q",
            Kind::Int => "x",
            Kind::Memory => "lots",
            Kind::Text => continue,
        };
        let args = ["CONFIG", "SET", name, bad];
        assert_eq!(
            ours.raw(&args),
            theirs.raw(&args),
            "CONFIG SET {name} {bad}"
        );
        compared += 1;
    }
    assert!(compared > 60, "only {compared} compared");
    // A value set is kept, under both names of an aliased setting, and a
    // client library's usual start-up call succeeds.
    assert_same_replies(
        &mut ours,
        &mut theirs,
        r#"
        CONFIG SET notify-keyspace-events Ex
        CONFIG GET notify-keyspace-events
        CONFIG SET lazyfree-lazy-user-del yes maxmemory-clients 0
        CONFIG GET lazyfree-lazy-user-del
        CONFIG SET slave-priority 7
        CONFIG GET replica-priority
        CONFIG GET slave-priority
        CONFIG SET repl-backlog-size 2mb
        CONFIG GET repl-backlog-size
        CONFIG SET DIR /tmp
        CONFIG SET Daemonize no
        CONFIG SET maxmemory 0 MAXMEMORY 0
        CONFIG SET MAXMEMORY abc
        CONFIG SET SLAVE-READ-ONLY maybe
        CONFIG SET Slave-Read-Only yes REPLICA-read-only yes
        "#,
    );
}

/// A good `port` value is still refused (the listener is fixed at start),
/// with the same text as before; a bad one gets Redis's value error.
#[test]
fn config_set_port_and_dir() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let failed =
        |why: &str| format!("-ERR CONFIG SET failed (possibly related to argument 'port') - {why}");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "port", "abc"]),
        failed("argument couldn't be parsed into an integer")
    );
    assert_eq!(
        c.raw(&["CONFIG", "SET", "port", "-1"]),
        failed("argument must be between 0 and 65535 inclusive")
    );
    assert_eq!(
        c.raw(&["CONFIG", "SET", "port", "7000"]),
        failed("can't set immutable config")
    );
    assert_eq!(
        c.raw(&["CONFIG", "SET", "dir", "x"]),
        "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
    );
    assert_eq!(c.raw(&["PING"]), "+PONG");
}

#[test]
fn config_set_requirepass_applies_to_new_connections() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(c.raw(&["CONFIG", "SET", "requirepass", "pw"]), "+OK");
    assert_eq!(c.raw(&["PING"]), "+PONG");
    let mut d = srv.client();
    assert_eq!(d.raw(&["PING"]), "-NOAUTH Authentication required.");
    assert_eq!(d.raw(&["AUTH", "pw"]), "+OK");
}

#[test]
fn config_resetstat_zeroes_counters() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for _ in 0..3 {
        c.raw(&["GET", "missing"]);
    }
    let before = c.raw(&["INFO", "stats"]);
    assert_eq!(
        info_field(body(&before), "keyspace_misses").as_deref(),
        Some("3")
    );
    assert_eq!(c.raw(&["CONFIG", "RESETSTAT"]), "+OK");
    let after = c.raw(&["INFO", "stats", "commandstats"]);
    let text = body(&after);
    assert_eq!(info_field(text, "keyspace_misses").as_deref(), Some("0"));
    assert!(!text.contains("cmdstat_get:"), "{text}");
}

#[test]
fn info_sections() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["SET", "a", "1"]), "+OK");
    assert_eq!(c.raw(&["SET", "b", "2"]), "+OK");
    assert_eq!(c.raw(&["GET", "a"]), "$1\r\n1");
    assert_eq!(c.raw(&["GET", "zz"]), "$-1");
    assert_eq!(c.raw(&["SELECT", "3"]), "+OK");
    assert_eq!(c.raw(&["SET", "c", "3"]), "+OK");
    c.raw(&["NOPE"]);

    let all = c.raw(&["INFO"]);
    assert!(all.starts_with('$'));
    let text = body(&all);
    assert!(text.starts_with("# Server\r\n"), "{text}");
    assert!(text.contains("\r\n\r\n# Clients\r\n"), "{text}");
    assert!(text.ends_with("\r\n"));
    assert!(!text.contains("# Commandstats"));
    assert_eq!(info_field(text, "redis_version").as_deref(), Some("8.10.0"));
    assert_eq!(
        info_field(text, "redis_mode").as_deref(),
        Some("standalone")
    );
    assert_eq!(
        info_field(text, "tcp_port"),
        Some(srv.addr.port().to_string())
    );
    assert_eq!(
        info_field(text, "process_id"),
        Some(std::process::id().to_string())
    );
    assert_eq!(info_field(text, "run_id").map(|r| r.len()), Some(40));
    assert_eq!(info_field(text, "connected_clients").as_deref(), Some("1"));
    assert_eq!(info_field(text, "maxclients").as_deref(), Some("10000"));
    let used: u64 = info_field(text, "used_memory").unwrap().parse().unwrap();
    assert!(used > 0);
    let rss: u64 = info_field(text, "used_memory_rss")
        .unwrap()
        .parse()
        .unwrap();
    assert!(rss > 0);
    assert_eq!(
        info_field(text, "mem_allocator").as_deref(),
        Some("jemalloc-5.3.0")
    );
    assert_eq!(info_field(text, "aof_enabled").as_deref(), Some("0"));
    assert_eq!(info_field(text, "loading").as_deref(), Some("0"));
    assert_eq!(info_field(text, "keyspace_hits").as_deref(), Some("1"));
    assert_eq!(info_field(text, "keyspace_misses").as_deref(), Some("1"));
    assert!(
        info_field(text, "total_error_replies")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert!(info_field(text, "used_cpu_user").is_some());
    assert_eq!(info_field(text, "role").as_deref(), Some("master"));
    assert_eq!(
        info_field(text, "db0").as_deref(),
        Some("keys=2,expires=0,avg_ttl=0,subexpiry=0")
    );
    assert_eq!(
        info_field(text, "db3").as_deref(),
        Some("keys=1,expires=0,avg_ttl=0,subexpiry=0")
    );
    assert!(info_field(text, "db1").is_none());
    assert_eq!(info_field(text, "shards").as_deref(), Some("2"));
    assert!(info_field(text, "io_threads").is_none());
    for f in [
        "local_commands",
        "remote_commands",
        "local_hit_rate",
        "handovers",
    ] {
        assert!(info_field(text, f).is_some(), "INFO shardstream lacks {f}");
    }
    let s0 = info_field(text, "shard0").unwrap();
    let s1 = info_field(text, "shard1").unwrap();
    let keys = |s: &str| -> u64 {
        s.split(',')
            .find_map(|f| f.strip_prefix("keys="))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(keys(&s0) + keys(&s1), 3);
    assert!(s0.contains(",inbox_depth=0,"), "{s0}");

    let one = c.raw(&["INFO", "keyspace"]);
    assert_eq!(
        body(&one),
        "# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0,subexpiry=0\r\ndb3:keys=1,expires=0,avg_ttl=0,subexpiry=0\r\n"
    );
    // Sections come in Redis's order whatever the asked order; case-insensitive.
    let two = c.raw(&["INFO", "CPU", "server"]);
    let t = body(&two);
    assert!(t.starts_with("# Server\r\n"));
    assert!(t.contains("\r\n\r\n# CPU\r\n"));
    assert!(!t.contains("# Clients"));

    let cs = c.raw(&["INFO", "commandstats"]);
    let t = body(&cs);
    assert!(t.starts_with("# Commandstats\r\n"));
    assert_eq!(
        info_field(t, "cmdstat_set").as_deref().map(without_usec),
        Some("calls=3,rejected_calls=0,failed_calls=0".to_string())
    );
    assert!(info_field(t, "cmdstat_info").is_some());
    assert!(!t.contains("cmdstat_unknown"));

    let everything = c.raw(&["INFO", "everything"]);
    assert!(body(&everything).contains("# Commandstats\r\n"));
    assert_eq!(c.raw(&["INFO", "nosuchsection"]), "$0\r\n");
}

#[test]
fn commandstats_counts_subcommands_and_rejections() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    c.raw(&["CLIENT", "ID"]);
    c.raw(&["CLIENT", "ID"]);
    c.raw(&["CLIENT", "SETNAME"]);
    assert_eq!(
        c.raw(&["CLIENT", "NOSUB"]),
        "-ERR unknown subcommand 'NOSUB'. Try CLIENT HELP."
    );
    let cs = c.raw(&["INFO", "commandstats"]);
    let t = body(&cs);
    assert_eq!(
        info_field(t, "cmdstat_client|id")
            .as_deref()
            .map(without_usec),
        Some("calls=2,rejected_calls=0,failed_calls=0".to_string())
    );
    // Rejected before running (arity): rejected, not failed, on the
    // subcommand's row; an unknown subcommand counts on no row
    // (redis-server 7.0.15 gives exactly these lines).
    assert_eq!(
        info_field(t, "cmdstat_client|setname").as_deref(),
        Some("calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0")
    );
    assert_eq!(info_field(t, "cmdstat_client"), None);
}

/// A pipeline that repeats a command (looked up once per connection) and
/// switches between commands, letter case and a container's subcommands
/// still counts each under its own row, as Redis does.
#[test]
fn commandstats_in_a_pipeline_of_mixed_commands() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let mut wire = Vec::new();
    for args in [
        &["SET", "k", "1"][..],
        &["set", "k", "2"],
        &["GET", "k"],
        &["CLIENT", "ID"],
        &["client", "GETNAME"],
        &["CLIENT", "ID"],
        &["sEt", "k", "3"],
        &["NOSUCH", "x"],
        &["GET"],
        &["get", "k"],
    ] {
        wire.extend(common::resp_command(args));
    }
    c.send_raw(&wire);
    let replies: Vec<String> = (0..10).map(|_| c.read_reply()).collect();
    assert_eq!(replies[9], "$1\r\n3");
    assert!(
        replies[7].starts_with("-ERR unknown command 'NOSUCH'"),
        "{}",
        replies[7]
    );
    let cs = c.raw(&["INFO", "commandstats"]);
    let t = body(&cs);
    let stat = |name: &str| info_field(t, name).as_deref().map(without_usec);
    let calls = |n: u32, rejected: u32| {
        Some(format!(
            "calls={n},rejected_calls={rejected},failed_calls=0"
        ))
    };
    assert_eq!(stat("cmdstat_set"), calls(3, 0));
    assert_eq!(stat("cmdstat_get"), calls(2, 1));
    assert_eq!(stat("cmdstat_client|id"), calls(2, 0));
    assert_eq!(stat("cmdstat_client|getname"), calls(1, 0));
}

#[test]
fn command_introspection() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let count: usize = c
        .raw(&["COMMAND", "COUNT"])
        .trim_start_matches(':')
        .parse()
        .unwrap();
    assert!(count >= 10);
    let all = c.raw(&["COMMAND"]);
    assert!(all.starts_with(&format!("*{count}\r\n")));
    let get = c.raw(&["COMMAND", "INFO", "get", "nope"]);
    assert!(
        get.starts_with(
            "*2\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
        ),
        "{get:?}"
    );
    assert!(get.ends_with("\r\n$-1"), "{get:?}");
    let sub = c.raw(&["COMMAND", "INFO", "client|kill"]);
    assert!(
        sub.starts_with("*1\r\n*10\r\n$11\r\nclient|kill\r\n:-3\r\n"),
        "{sub:?}"
    );
    let client = c.raw(&["COMMAND", "INFO", "client"]);
    assert!(client.contains("$9\r\nclient|id\r\n:2\r\n"), "{client:?}");
    let hello = c.raw(&["COMMAND", "INFO", "hello"]);
    assert!(hello.contains("+no_auth\r\n"), "{hello:?}");

    let docs = c.raw(&["COMMAND", "DOCS", "config", "nope"]);
    assert!(docs.starts_with("*2\r\n$6\r\nconfig\r\n"), "{docs:?}");
    assert!(docs.contains("$10\r\nconfig|get\r\n"), "{docs:?}");
    assert_eq!(c.raw(&["COMMAND", "DOCS", "nope"]), "*0");

    let list = c.raw(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "client|*"]);
    assert!(list.contains("$11\r\nclient|list\r\n"), "{list:?}");
    assert!(!list.contains("$3\r\nget\r\n"));
    let list = c.raw(&["COMMAND", "LIST"]);
    assert!(list.contains("$3\r\nget\r\n") && list.contains("$10\r\nconfig|set"));
    assert_eq!(c.raw(&["COMMAND", "LIST", "FILTERBY", "MODULE", "m"]), "*0");
    let admin = c.raw(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "admin"]);
    assert!(admin.contains("$8\r\nshutdown\r\n") && !admin.contains("$3\r\nget\r\n"));

    assert_eq!(
        c.raw(&["COMMAND", "GETKEYS", "SET", "k", "v"]),
        "*1\r\n$1\r\nk"
    );
    assert_eq!(
        c.raw(&["COMMAND", "GETKEYS", "DEL", "a", "b", "c"]),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc"
    );
    assert_eq!(
        c.raw(&["COMMAND", "GETKEYS", "PING", "x"]),
        "-ERR The command has no key arguments"
    );
    assert_eq!(
        c.raw(&["COMMAND", "GETKEYS", "nope", "x"]),
        "-ERR Invalid command specified"
    );
    assert_eq!(
        c.raw(&["COMMAND", "GETKEYS", "SET", "k"]),
        "-ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        c.raw(&["COMMAND", "GETKEYS"]),
        "-ERR wrong number of arguments for 'command|getkeys' command"
    );
    assert!(c.raw(&["COMMAND", "HELP"]).starts_with("*"));
}

/// OBJECT HELP and MEMORY HELP are flagged `loading stale`, not `readonly`,
/// as in redis-server (a monitor may ask for them).
#[test]
fn help_subcommands_flags_as_redis() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let ours = c.raw(&["COMMAND", "INFO", "object|help", "memory|help"]);
    assert!(
        ours.starts_with("*2\r\n*10\r\n$11\r\nobject|help\r\n:2\r\n*2\r\n+loading\r\n+stale\r\n"),
        "{ours:?}"
    );
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let theirs = redis
        .client()
        .raw(&["COMMAND", "INFO", "object|help", "memory|help"]);
    assert_eq!(ours, theirs);
}

/// OBJECT REFCOUNT: 1 for a value one key holds, Redis's shared-object
/// count (INT_MAX) for a small integer string (0..=9999) while integers
/// are shared (no maxmemory, or a policy that is neither LRU nor LFU), nil
/// for a missing key; arity errors and OBJECT HELP as Redis's.
#[test]
fn object_refcount_as_redis() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for (cmd, want) in [
        ("OBJECT REFCOUNT nosuch", "$-1"),
        ("SET k 100", "+OK"),
        ("OBJECT REFCOUNT k", ":2147483647"),
        ("SET k 10000", "+OK"),
        ("OBJECT REFCOUNT k", ":1"),
        ("XADD s 1-1 f v", "$3\r\n1-1"),
        ("OBJECT REFCOUNT s", ":1"),
        (
            "OBJECT REFCOUNT",
            "-ERR wrong number of arguments for 'object|refcount' command",
        ),
    ] {
        assert_eq!(c.raw(&common::words(cmd)), want, "{cmd}");
    }
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut ours = srv.client();
    let mut theirs = redis.client();
    assert_same_replies(
        &mut ours,
        &mut theirs,
        r#"
        FLUSHALL
        OBJECT REFCOUNT nosuch
        SET k 100
        OBJECT REFCOUNT k
        SET k 0
        OBJECT REFCOUNT k
        SET k 9999
        object refcount k
        SET k 10000
        OBJECT REFCOUNT k
        SET k -1
        OBJECT REFCOUNT k
        SET k 0100
        OBJECT REFCOUNT k
        SET k abc
        OBJECT REFCOUNT k
        SET c 9998
        INCR c
        OBJECT REFCOUNT c
        INCR c
        OBJECT REFCOUNT c
        SET e 5 EX 100
        OBJECT REFCOUNT e
        MSET {m}1 7 {m}2 x
        OBJECT REFCOUNT {m}1
        OBJECT REFCOUNT {m}2
        EVAL "redis.call('set', KEYS[1], '42') return redis.call('object', 'refcount', KEYS[1])" 1 lk
        XADD s 1-1 f v
        OBJECT REFCOUNT s
        RPUSH l 1
        OBJECT REFCOUNT l
        SADD st 1
        OBJECT REFCOUNT st
        ZADD z 1 m
        OBJECT REFCOUNT z
        OBJECT REFCOUNT
        OBJECT REFCOUNT a b
        CONFIG SET maxmemory 100mb
        CONFIG SET maxmemory-policy allkeys-lru
        SET p 100
        OBJECT REFCOUNT p
        CONFIG SET maxmemory-policy volatile-lfu
        SET p 100
        OBJECT REFCOUNT p
        CONFIG SET maxmemory-policy allkeys-random
        SET p 100
        OBJECT REFCOUNT p
        CONFIG SET maxmemory 0
        CONFIG SET maxmemory-policy allkeys-lru
        SET p 100
        OBJECT REFCOUNT p
        CONFIG SET maxmemory-policy noeviction
        OBJECT HELP
        "#,
    );
}

#[test]
fn redis_crate_client_reads_info() {
    let srv = TestServer::start(2);
    let mut con = srv.redis();
    let info: String = redis::cmd("INFO").query(&mut con).expect("INFO");
    assert!(info.contains("redis_version:8.10.0"), "{info}");
    let name: Option<String> = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query(&mut con)
        .expect("GETNAME");
    assert_eq!(name, None);
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("rs")
        .query(&mut con)
        .expect("SETNAME");
    let cfg: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut con)
        .expect("CONFIG GET");
    assert_eq!(cfg, ["maxmemory", "0"]);
}

#[test]
fn shutdown_closes_without_reply() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let mut other = srv.client();
    assert_eq!(other.raw(&["PING"]), "+PONG");
    assert_eq!(
        c.raw(&["SHUTDOWN", "ABORT"]),
        "-ERR No shutdown in progress."
    );
    assert_eq!(c.raw(&["SHUTDOWN", "SAVE", "NOSAVE"]), "-ERR syntax error");
    assert_eq!(c.raw(&["SHUTDOWN", "LATER"]), "-ERR syntax error");
    c.send(&["SHUTDOWN", "NOSAVE", "NOW"]);
    assert!(c.is_closed());
    assert!(other.is_closed());
}

/// Connection and server commands compared reply for reply with redis-server.
#[test]
fn differential_connection_and_server_commands() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let mut theirs = redis.client();
    assert_same_replies(
        &mut ours,
        &mut theirs,
        r#"
        AUTH x
        AUTH default x
        AUTH foo x
        AUTH a b c
        HELLO 4
        HELLO 1
        HELLO abc
        HELLO 2 foo
        HELLO 2 AUTH x
        HELLO 3 AUTH foo x
        HELLO 2 SETNAME "a b"
        CLIENT foo
        CLIENT
        CLIENT SETNAME
        CLIENT SETNAME "a b"
        CLIENT GETNAME
        CLIENT SETNAME x
        CLIENT GETNAME
        CLIENT SETNAME ""
        CLIENT GETNAME
        CLIENT ID x
        CLIENT KILL 1.2.3.4:5
        CLIENT KILL ID 999999
        CLIENT KILL ID 0
        CLIENT KILL ID x
        CLIENT KILL foo bar
        CLIENT KILL a b c
        CLIENT KILL SKIPME maybe
        CLIENT KILL USER nobody
        CLIENT KILL TYPE master
        CLIENT KILL TYPE bogus
        CLIENT KILL ADDR 1.2.3.4:5 SKIPME yes
        CLIENT NO-EVICT maybe
        CLIENT NO-EVICT on
        CLIENT NO-EVICT off
        CLIENT LIST TYPE foo
        CLIENT LIST TYPE master
        CLIENT LIST ID x
        CLIENT LIST foo
        CONFIG
        CONFIG FOO
        CONFIG GET
        CONFIG GET nomatch
        CONFIG GET maxmemory
        CONFIG GET appendonly
        CONFIG GET save
        CONFIG GET timeout
        CONFIG SET foo 1
        CONFIG SET timeout abc
        CONFIG SET timeout 5
        CONFIG GET timeout
        CONFIG SET timeout
        CONFIG SET timeout 1 foo
        CONFIG SET timeout 1 timeout 2
        CONFIG SET databases 3
        CONFIG SET io-threads 3
        CONFIG SET proto-max-bulk-len 5
        CONFIG SET stream-node-max-entries abc
        CONFIG SET stream-node-max-entries 50
        CONFIG GET stream-node-max-entries
        CONFIG SET appendonly no
        CONFIG SET maxclients 100
        CONFIG GET maxclients
        CONFIG RESETSTAT x
        CONFIG RESETSTAT
        COMMAND FOO
        COMMAND COUNT x
        COMMAND GETKEYS
        COMMAND GETKEYS get
        COMMAND GETKEYS ping
        COMMAND GETKEYS x
        COMMAND GETKEYS time a
        COMMAND GETKEYS eval s 0
        COMMAND GETKEYS eval s 1 k
        COMMAND GETKEYS fcall f 0
        COMMAND GETKEYS config get x
        COMMAND GETKEYS config x y
        COMMAND GETKEYS NOPE a
        COMMAND GETKEYS GET a b
        COMMAND GETKEYS GET k
        COMMAND GETKEYS SET a
        COMMAND GETKEYS SET k v
        COMMAND GETKEYS DEL a b c
        COMMAND GETKEYS EXISTS a a
        COMMAND GETKEYS PING x
        COMMAND GETKEYS client list
        COMMAND GETKEYS client nope
        COMMAND INFO nope
        COMMAND DOCS nope
        COMMAND LIST x
        COMMAND LIST FILTERBY foo x
        COMMAND LIST FILTERBY MODULE x
        INFO foo
        SHUTDOWN foo
        SHUTDOWN ABORT
        SHUTDOWN NOSAVE SAVE
        "#,
    );
}

/// Authentication order of checks compared with redis-server: requirepass set
/// at run time, then a fresh connection on each server.
#[test]
fn differential_requirepass() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let mut theirs = redis.client();
    assert_same_replies(&mut ours, &mut theirs, "CONFIG SET requirepass pw\nPING");
    let mut ours = srv.client();
    let mut theirs = redis.client();
    assert_same_replies(
        &mut ours,
        &mut theirs,
        r#"
        PING
        NOPE a
        GET
        GET k
        CLIENT foo
        CLIENT SETNAME
        CLIENT ID
        HELLO 3
        HELLO 4
        HELLO 3 AUTH default wrong
        AUTH wrong
        AUTH default wrong
        AUTH x y z
        PING
        AUTH pw
        PING
        AUTH default pw
        "#,
    );
}

/// `TIME`: two bulk strings, seconds and microseconds, close to our own clock;
/// the same shape as redis-server's.
#[test]
fn time_replies_seconds_and_microseconds() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let reply = c.raw(&["TIME"]);
    let parts: Vec<&str> = reply.split("\r\n").collect();
    assert_eq!(parts[0], "*2", "{reply}");
    let secs: u64 = parts[2].parse().expect("seconds");
    let micros: u64 = parts[4].parse().expect("microseconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 2, "{secs} vs {now}");
    assert!(micros < 1_000_000);
    assert_eq!(
        c.raw(&["TIME", "x"]),
        "-ERR wrong number of arguments for 'time' command"
    );
    if let Some(redis) = common::RedisServer::start() {
        let theirs = redis.client().raw(&["TIME"]);
        assert_eq!(theirs.split("\r\n").count(), parts.len());
        assert_eq!(
            redis.client().raw(&["TIME", "x"]),
            "-ERR wrong number of arguments for 'time' command"
        );
    }
}

/// INFO memory reports the `maxmemory-policy` in force (it said
/// `noeviction` whatever the setting).
#[test]
fn info_memory_reports_the_eviction_policy() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let policy = |c: &mut RespClient| {
        c.raw(&["INFO", "memory"])
            .lines()
            .find_map(|l| l.strip_prefix("maxmemory_policy:").map(str::to_string))
    };
    assert_eq!(policy(&mut c).as_deref(), Some("noeviction"));
    assert_eq!(
        c.raw(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        "+OK"
    );
    assert_eq!(policy(&mut c).as_deref(), Some("allkeys-lru"));
}

/// RESET gives the connection a fresh one's state: MULTI discarded, database
/// 0, RESP2, no name; the same replies as redis-server.
#[test]
fn reset_clears_connection_state_as_redis() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["CLIENT", "SETNAME", "n"]), "+OK");
    assert_eq!(c.raw(&["SELECT", "2"]), "+OK");
    assert!(c.raw(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(c.raw(&["CLIENT", "NO-EVICT", "on"]), "+OK");
    assert_eq!(c.raw(&["CLIENT", "NO-TOUCH", "on"]), "+OK");
    assert!(c.raw(&["CLIENT", "INFO"]).contains(" flags=eT "));
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["RESET"]), "+RESET");
    let info = c.raw(&["CLIENT", "INFO"]);
    for field in [" name= ", " db=0 ", " flags=N ", " multi=-1 ", " resp=2 "] {
        assert!(info.contains(field), "{field} in {info}");
    }
    let script = "
        CLIENT SETNAME n
        SELECT 2
        SET k v
        ~HELLO 3
        MULTI
        SET x 1
        RESET
        EXEC
        CLIENT GETNAME
        GET k
        GET x
        SELECT 2
        GET k
        RESET
        RESET
        MULTI
        PING
        RESET
        DISCARD
    ";
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    assert_same_replies(&mut srv.client(), &mut redis.client(), script);
}

/// RESET forgets the WATCHed keys (on every shard holding them): a later
/// transaction runs whatever happened to them.
#[test]
fn reset_unwatches_keys() {
    let run = |mut c: RespClient, mut other: RespClient| {
        let mut out = Vec::new();
        for k in ["{a}k", "{b}k"] {
            out.push(c.raw(&["WATCH", k]));
        }
        out.push(other.raw(&["SET", "{a}k", "1"]));
        out.push(c.raw(&["RESET"]));
        out.push(c.raw(&["MULTI"]));
        out.push(c.raw(&["SET", "{b}k", "2"]));
        out.push(c.raw(&["EXEC"]));
        out
    };
    let srv = TestServer::start(2);
    let ours = run(srv.client(), srv.client());
    assert_eq!(
        ours,
        ["+OK", "+OK", "+OK", "+RESET", "+OK", "+QUEUED", "*1\r\n+OK"]
    );
    let Some(redis) = RedisServer::start() else {
        return;
    };
    assert_eq!(ours, run(redis.client(), redis.client()));
}

/// With `requirepass`, RESET makes the connection authenticate again (it
/// runs before AUTH too, like QUIT).
#[test]
fn reset_requires_auth_again() {
    let srv = TestServer::with_config(Config {
        requirepass: Some("pw".into()),
        ..test_config()
    });
    let mut c = srv.client();
    assert_eq!(c.raw(&["RESET"]), "+RESET");
    assert_eq!(c.raw(&["AUTH", "pw"]), "+OK");
    assert_eq!(c.raw(&["GET", "k"]), "$-1");
    assert_eq!(c.raw(&["RESET"]), "+RESET");
    assert_eq!(c.raw(&["GET", "k"]), "-NOAUTH Authentication required.");
}

/// The replies a connection gets for `script` (one command per line) sent
/// as one pipeline, up to the final `ECHO end-of-script`.
fn replies_to_pipeline(c: &mut RespClient, script: &str) -> Vec<String> {
    let mut wire = Vec::new();
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        wire.extend(common::resp_command(&common::words(line)));
    }
    wire.extend(common::resp_command(&["ECHO", "end-of-script"]));
    c.send_raw(&wire);
    let mut out = Vec::new();
    loop {
        let r = c.read_reply();
        if r == "$13\r\nend-of-script" {
            return out;
        }
        out.push(r);
    }
}

#[test]
fn client_reply_off_and_skip_silence_replies_as_redis_does() {
    let script = "
        CLIENT REPLY OFF
        SET a 1
        GET a
        NOSUCHCMD x
        XADD s 1-1 f v
        MSET k1 v k2 v k3 v k4 v
        XREAD BLOCK 10 STREAMS nokey $
        CLIENT REPLY ON
        GET a
        CLIENT REPLY SKIP
        GET a
        XLEN s
        CLIENT REPLY SKIP
        CLIENT REPLY ON
        DEL k1 k2 k3 k4
        CLIENT REPLY OFF
        CLIENT REPLY SKIP
        GET a
        CLIENT REPLY ON
        CLIENT REPLY SKIP
        CLIENT REPLY FOO
        CLIENT REPLY FOO
        CLIENT REPLY
        CLIENT REPLY OFF
        RESET
        PING
        CLIENT REPLY SKIP
        RESET
        PING
    ";
    let srv = TestServer::start(2);
    let ours = replies_to_pipeline(&mut srv.client(), script);
    assert_eq!(
        ours,
        [
            "+OK",
            "$1\r\n1",
            ":1",
            "+OK",
            ":4",
            "+OK",
            "-ERR syntax error",
            "-ERR wrong number of arguments for 'client|reply' command",
            "+RESET",
            "+PONG",
            "+PONG",
        ]
    );
    // QUIT under OFF closes the connection without its +OK.
    let mut quiet = srv.client();
    quiet.send(&["CLIENT", "REPLY", "OFF"]);
    quiet.send(&["QUIT"]);
    assert!(quiet.is_closed());
    if let Some(redis) = RedisServer::start() {
        assert_eq!(ours, replies_to_pipeline(&mut redis.client(), script));
    }
}

/// WAIT on one server: its immediate answers and errors, a timed wait, and
/// waits ended by CLIENT UNBLOCK; what each side saw, in order.
fn wait_transcript(probe: &mut RespClient, waiter: &mut RespClient) -> Vec<String> {
    let mut out = Vec::new();
    for args in [
        vec!["WAIT", "0", "0"],
        vec!["WAIT", "-1", "100"],
        vec!["WAIT", "x", "0"],
        vec!["WAIT", "1", "x"],
        vec!["WAIT", "1", "-1"],
        vec!["WAIT", "1"],
        vec!["EVAL", "return redis.call('wait', 1, 100)", "0"],
    ] {
        let r = probe.raw(&args);
        // Redis adds the script's SHA and line to the script error.
        out.push(r.split(" script: ").next().unwrap_or_default().to_string());
    }
    out.extend(replies_to_pipeline(probe, "MULTI\nWAIT 1 0\nEXEC"));
    // No replica ever acknowledges: the whole timeout passes, then 0; the
    // pipeline behind it waits.
    let started = std::time::Instant::now();
    out.extend(replies_to_pipeline(waiter, "WAIT 1 150\nPING"));
    out.push(format!(
        "waited the timeout: {}",
        started.elapsed().as_millis() >= 140
    ));
    let id = waiter.raw(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':');
    for reason in ["TIMEOUT", "ERROR"] {
        waiter.send(&["WAIT", "2", "0"]);
        common::wait_blocked(probe, 1);
        out.push(probe.raw(&["CLIENT", "UNBLOCK", id, reason]));
        out.push(waiter.read_reply());
    }
    out.push(common::info_int(probe, "clients", "blocked_clients").to_string());
    out
}

#[test]
fn wait_without_replicas_answers_as_a_redis_primary_does() {
    let srv = TestServer::start(2);
    let ours = wait_transcript(&mut srv.client(), &mut srv.client());
    assert_eq!(
        ours,
        [
            ":0",
            ":0",
            "-ERR value is not an integer or out of range",
            "-ERR timeout is not an integer or out of range",
            "-ERR timeout is negative",
            "-ERR wrong number of arguments for 'wait' command",
            "-ERR This Redis command is not allowed from script",
            "+OK",
            "+QUEUED",
            "*1\r\n:0",
            ":0",
            "+PONG",
            "waited the timeout: true",
            ":1",
            ":0",
            ":1",
            "-UNBLOCKED client unblocked via CLIENT UNBLOCK",
            "0",
        ]
    );
    if let Some(redis) = RedisServer::start() {
        assert_eq!(
            ours,
            wait_transcript(&mut redis.client(), &mut redis.client())
        );
    }
}

/// Blocking timeouts as Redis 7.2+ reads them (`getTimeoutFromObjectOrReply`):
/// seconds are any `strtold` number, hexadecimal included, × 1000 rounded
/// up; a timeout whose deadline would not fit in 64 bits is out of range
/// (milliseconds too: XREAD BLOCK, WAIT), which redis-server 7.0 accepts and
/// blocks on, so the replies are checked here rather than against it.
#[test]
fn blocking_timeouts_are_read_as_redis_reads_them() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    // 0x1p-3 s is 125 ms: the read times out with a null array after it.
    let started = std::time::Instant::now();
    assert_eq!(c.raw(&["BLPOP", "list", "0x1p-3"]), "*-1");
    assert!(started.elapsed() >= std::time::Duration::from_millis(120));
    let started = std::time::Instant::now();
    assert_eq!(c.raw(&["BZPOPMIN", "zset", "0X.2"]), "*-1");
    assert!(started.elapsed() >= std::time::Duration::from_millis(120));
    for (args, reply) in [
        (
            vec!["BLPOP", "k", "0x"],
            "-ERR timeout is not a float or out of range",
        ),
        (
            vec!["BLPOP", "k", "1e5000"],
            "-ERR timeout is not a float or out of range",
        ),
        (
            vec!["BLPOP", "k", "1e-5000"],
            "-ERR timeout is not a float or out of range",
        ),
        (
            vec!["BLPOP", "k", "nan"],
            "-ERR timeout is not a float or out of range",
        ),
        (
            vec!["BLPOP", "k", " 1"],
            "-ERR timeout is not a float or out of range",
        ),
        (vec!["BLPOP", "k", "inf"], "-ERR timeout is out of range"),
        (vec!["BLPOP", "k", "1e400"], "-ERR timeout is out of range"),
        (
            vec!["BLPOP", "k", "9223372036854775"],
            "-ERR timeout is out of range",
        ),
        (vec!["BRPOP", "k", "-inf"], "-ERR timeout is negative"),
        (
            vec!["BLMOVE", "k", "l", "LEFT", "LEFT", "-1"],
            "-ERR timeout is negative",
        ),
        (
            vec!["XREAD", "BLOCK", "9223372036854775807", "STREAMS", "s", "$"],
            "-ERR timeout is out of range",
        ),
        (
            vec!["XREAD", "BLOCK", "0x10", "STREAMS", "s", "$"],
            "-ERR timeout is not an integer or out of range",
        ),
        (
            vec![
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "BLOCK",
                "-1",
                "STREAMS",
                "s",
                ">",
            ],
            "-ERR timeout is negative",
        ),
        (
            vec!["WAIT", "1", "9223372036854775807"],
            "-ERR timeout is out of range",
        ),
    ] {
        assert_eq!(c.raw(&args), reply, "{args:?}");
    }
    // A negative timeout that rounds up to 0 ms blocks forever, as 0 does.
    c.send(&["BLPOP", "forever", "-0.0001"]);
    let mut probe = srv.client();
    common::wait_blocked(&mut probe, 1);
    assert_eq!(probe.raw(&["RPUSH", "forever", "x"]), ":1");
    assert_eq!(c.read_reply(), "*2\r\n$7\r\nforever\r\n$1\r\nx");
}

/// INFO keyspace `avg_ttl` is the average time to live, in ms, of the keys
/// with a TTL in every shard (Redis estimates it from its expiry cycle's
/// samples; shardstream's is exact): keys without a TTL and keys past
/// theirs do not count.
#[test]
fn info_keyspace_avg_ttl_averages_the_ttls_of_every_shard() {
    let srv = TestServer::with_config(Config {
        shards: 2,
        enable_debug_command: "yes",
        ..test_config()
    });
    let mut c = srv.client();
    let avg_ttl = |c: &mut common::RespClient| -> u64 {
        let text = c.raw(&["INFO", "keyspace"]);
        let db0 = info_field(&text, "db0").expect("db0");
        db0.split(',')
            .find_map(|f| f.strip_prefix("avg_ttl="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{db0}"))
    };
    // Keys spread over both shards: TTLs of 100 s and 300 s.
    assert_eq!(c.raw(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK");
    let (a, b) = common::keys_on_two_shards("ttl", 2);
    assert_eq!(c.raw(&["SET", &a, "v", "EX", "100"]), "+OK");
    assert_eq!(c.raw(&["SET", &b, "v", "EX", "300"]), "+OK");
    assert_eq!(c.raw(&["SET", "plain", "v"]), "+OK");
    let avg = avg_ttl(&mut c);
    assert!((199_000..=200_000).contains(&avg), "{avg}");
    // A key past its deadline (not collected: active expiry is off).
    assert_eq!(c.raw(&["SET", "short", "v", "PX", "1"]), "+OK");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let avg = avg_ttl(&mut c);
    assert!((199_000..=200_000).contains(&avg), "{avg}");
    // PERSIST and a new TTL move it; no TTL left: 0.
    assert_eq!(c.raw(&["PERSIST", &b]), ":1");
    let avg = avg_ttl(&mut c);
    assert!((99_000..=100_000).contains(&avg), "{avg}");
    assert_eq!(c.raw(&["EXPIRE", &a, "1000"]), ":1");
    let avg = avg_ttl(&mut c);
    assert!((999_000..=1_000_000).contains(&avg), "{avg}");
    // DEL collects the expired key, which it does not count.
    assert_eq!(c.raw(&["DEL", &a, "short"]), ":1");
    assert_eq!(avg_ttl(&mut c), 0);
    let text = c.raw(&["INFO", "keyspace"]);
    assert_eq!(
        info_field(&text, "db0").as_deref(),
        Some("keys=2,expires=0,avg_ttl=0,subexpiry=0")
    );
}

/// Field names of one INFO section (text after the bulk header).
fn info_names(c: &mut RespClient, section: &str) -> Vec<String> {
    let wire = c.raw(&["INFO", section]);
    body(&wire)
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

#[test]
fn info_memory_has_redis_fields_in_redis_order() {
    // The scripting engine's memory (Lua VM, script and function caches)
    // is not measured; every other field redis-server prints is there.
    const NOT_MEASURED: &[&str] = &[
        "used_memory_lua",
        "used_memory_vm_eval",
        "used_memory_lua_human",
        "used_memory_scripts_eval",
        "used_memory_vm_functions",
        "used_memory_vm_total",
        "used_memory_vm_total_human",
        "used_memory_functions",
        "used_memory_scripts",
        "used_memory_scripts_human",
    ];
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut ours, mut theirs) = (srv.client(), redis.client());
    let want: Vec<String> = info_names(&mut theirs, "memory")
        .into_iter()
        .filter(|n| !NOT_MEASURED.contains(&n.as_str()))
        .collect();
    assert_eq!(info_names(&mut ours, "memory"), want);
    for section in ["stats", "server"] {
        let have = info_names(&mut ours, section);
        for name in [
            "instantaneous_ops_per_sec",
            "instantaneous_input_kbps",
            "instantaneous_output_kbps",
            "instantaneous_input_repl_kbps",
            "instantaneous_output_repl_kbps",
            "lru_clock",
            "monotonic_clock",
            "io_threads_active",
        ] {
            if info_names(&mut theirs, section).iter().any(|n| n == name) {
                assert!(have.iter().any(|n| n == name), "{section}: {name}");
            }
        }
    }
}

#[test]
fn info_memory_figures_add_up_and_keep_the_peak() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let num = |c: &mut RespClient, f: &str| -> f64 {
        let wire = c.raw(&["INFO", "memory"]);
        info_field(body(&wire), f)
            .unwrap_or_else(|| panic!("no {f}"))
            .trim_end_matches('%')
            .parse()
            .unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let big = "x".repeat(16 << 20);
    assert_eq!(c.raw(&["SET", "big", &big]), "+OK");
    // Shard 0's timer raises the peak every 100 ms, whoever asks.
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(c.raw(&["DEL", "big"]), ":1");
    let used = num(&mut c, "used_memory");
    let peak = num(&mut c, "used_memory_peak");
    assert!(peak >= used + f64::from(16u32 << 20) * 0.9, "{peak} {used}");
    let perc = num(&mut c, "used_memory_peak_perc");
    assert!(perc > 0.0 && perc < 100.0, "{perc}");
    let overhead = num(&mut c, "used_memory_overhead");
    let dataset = num(&mut c, "used_memory_dataset");
    let used = num(&mut c, "used_memory");
    // Each INFO reads the allocator again: the figures agree within what
    // one INFO allocates.
    assert!(
        (overhead + dataset - used).abs() < 1e6,
        "{overhead} {dataset} {used}"
    );
    assert!(num(&mut c, "used_memory_startup") <= used);
    assert!(num(&mut c, "allocator_active") >= num(&mut c, "allocator_allocated"));
    assert!(num(&mut c, "total_system_memory") > 0.0);
    assert!(num(&mut c, "mem_fragmentation_ratio") > 0.0);
}

#[test]
fn info_instantaneous_rates_follow_the_traffic() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let mut probe = srv.client();
    let rates = |p: &mut RespClient| -> (f64, f64, f64) {
        let wire = p.raw(&["INFO", "stats"]);
        let f = |n: &str| info_field(body(&wire), n).unwrap().parse::<f64>().unwrap();
        (
            f("instantaneous_ops_per_sec"),
            f("instantaneous_input_kbps"),
            f("instantaneous_output_kbps"),
        )
    };
    // A burst of 20,000 PINGs (280 KB in, 140 KB out) in pipelines: the
    // rates, means over the last 1.6 s, go well above the probe's own
    // 10 INFO calls per second.
    let batch = "*1\r\n$4\r\nPING\r\n".repeat(1000);
    for _ in 0..20 {
        c.send_raw(batch.as_bytes());
        for _ in 0..1000 {
            assert_eq!(c.read_reply(), "+PONG");
        }
    }
    let mut peak = (0.0, 0.0, 0.0);
    assert!(
        common::eventually(3, || {
            let r = rates(&mut probe);
            peak = (r.0.max(peak.0), r.1.max(peak.1), r.2.max(peak.2));
            std::thread::sleep(std::time::Duration::from_millis(100));
            peak.0 >= 1000.0 && peak.1 >= 10.0 && peak.2 >= 5.0
        }),
        "rates never rose: {peak:?}"
    );
    // With only the probe left, they fall back within a few seconds.
    assert!(
        common::eventually(10, || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            rates(&mut probe).0 < 100.0
        }),
        "rates never fell"
    );
}
