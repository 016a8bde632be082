//! MIGRATE over real sockets: between two shardstream servers, from
//! shardstream into a real redis-server, and compared with a real
//! redis-server migrating to another one (argument errors, NOKEY, BUSYKEY,
//! key positions).
mod common;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use common::{test_config, RedisServer, RespClient, ScratchDir, TestServer};
use shardstream::config::Config;
use shardstream::route::slot::slot_of;

/// MIGRATE's argv to `to`, with `rest` after the host and port.
fn migrate(to: SocketAddr, rest: &[&str]) -> Vec<String> {
    let mut argv = vec![
        "MIGRATE".to_string(),
        to.ip().to_string(),
        to.port().to_string(),
    ];
    argv.extend(rest.iter().map(|s| s.to_string()));
    argv
}

fn busykey() -> String {
    "-ERR Target instance replied with error: BUSYKEY Target key name already exists.".into()
}

/// A stream with two groups, consumers, a PEL with redeliveries, deleted
/// entries and acknowledged ones: every part XINFO STREAM FULL shows.
fn build_stream(c: &mut RespClient, key: &str) {
    for i in 1..=12 {
        c.raw(&[
            "XADD",
            key,
            &format!("{i}-1"),
            "f",
            &i.to_string(),
            "g",
            "x",
        ]);
    }
    c.raw(&["XDEL", key, "3-1", "7-1"]);
    assert_eq!(c.raw(&["XGROUP", "CREATE", key, "g1", "0"]), "+OK");
    assert_eq!(c.raw(&["XGROUP", "CREATE", key, "g2", "5-1"]), "+OK");
    c.raw(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "alice",
        "COUNT",
        "4",
        "STREAMS",
        key,
        ">",
    ]);
    c.raw(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "bob",
        "COUNT",
        "3",
        "STREAMS",
        key,
        ">",
    ]);
    c.raw(&["XREADGROUP", "GROUP", "g2", "carol", "STREAMS", key, ">"]);
    c.raw(&["XACK", key, "g1", "1-1", "5-1"]);
    c.raw(&["XCLAIM", key, "g1", "bob", "0", "2-1", "RETRYCOUNT", "5"]);
    assert_eq!(
        c.raw(&["XGROUP", "CREATECONSUMER", key, "g2", "dave"]),
        ":1"
    );
}

#[test]
fn a_stream_moves_with_its_groups_pel_and_consumers() {
    let src = TestServer::start(2);
    let dst = TestServer::start(2);
    let mut s = src.client();
    let mut d = dst.client();
    build_stream(&mut s, "orders");
    let before = s.raw(&["XINFO", "STREAM", "orders", "FULL"]);
    let groups = s.raw(&["XINFO", "GROUPS", "orders"]);
    assert!(
        before.contains("alice") && before.contains("dave"),
        "{before}"
    );
    assert_eq!(s.raw(&migrate(dst.addr, &["orders", "0", "5000"])), "+OK");
    assert_eq!(s.raw(&["EXISTS", "orders"]), ":0");
    assert_eq!(d.raw(&["XINFO", "STREAM", "orders", "FULL"]), before);
    assert_eq!(d.raw(&["XINFO", "GROUPS", "orders"]), groups);
    // The moved stream keeps working on the target.
    let next = d.raw(&[
        "XREADGROUP",
        "GROUP",
        "g2",
        "dave",
        "STREAMS",
        "orders",
        "0",
    ]);
    assert!(next.starts_with("*1"), "{next}");
}

/// Keys of `prefix` that fall on at least two of `shards` shards.
fn keys_on_several_shards(prefix: &str, n: usize, shards: u16) -> Vec<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    let mut owners: Vec<u16> = keys
        .iter()
        .map(|k| slot_of(k.as_bytes()).shard(shards).0)
        .collect();
    owners.sort_unstable();
    owners.dedup();
    assert!(owners.len() >= 2, "{keys:?} all on one shard");
    keys
}

#[test]
fn keys_option_moves_the_keys_that_exist_across_shards() {
    let src = TestServer::start(4);
    let dst = TestServer::start(3);
    let mut s = src.client();
    let mut d = dst.client();
    let keys = keys_on_several_shards("k", 8, 4);
    // Every other key exists, of several types.
    for (i, k) in keys.iter().enumerate().step_by(2) {
        match i % 8 {
            0 => s.raw(&["SET", k, "v0"]),
            2 => s.raw(&["RPUSH", k, "a", "b"]),
            4 => s.raw(&["SADD", k, "m"]),
            _ => s.raw(&["ZADD", k, "1.5", "z"]),
        };
    }
    let mut argv = migrate(dst.addr, &["", "0", "5000", "KEYS"]);
    argv.extend(keys.iter().cloned());
    assert_eq!(s.raw(&argv), "+OK");
    assert_eq!(s.raw(&["DBSIZE"]), ":0");
    assert_eq!(d.raw(&["DBSIZE"]), ":4");
    assert_eq!(d.raw(&["GET", &keys[0]]), "$2\r\nv0");
    assert_eq!(
        d.raw(&["LRANGE", &keys[2], "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb"
    );
    assert_eq!(d.raw(&["SMEMBERS", &keys[4]]), "*1\r\n$1\r\nm");
    assert_eq!(d.raw(&["ZSCORE", &keys[6], "z"]), "$3\r\n1.5");
    // Nothing left here: NOKEY, from every shard.
    assert_eq!(s.raw(&argv), "+NOKEY");
}

#[test]
fn copy_replace_and_busykey() {
    let src = TestServer::start(2);
    let dst = TestServer::start(2);
    let mut s = src.client();
    let mut d = dst.client();
    s.raw(&["SET", "a", "new"]);
    d.raw(&["SET", "a", "old"]);
    // BUSYKEY: nothing changes on either side.
    assert_eq!(s.raw(&migrate(dst.addr, &["a", "0", "5000"])), busykey());
    assert_eq!(s.raw(&["GET", "a"]), "$3\r\nnew");
    assert_eq!(d.raw(&["GET", "a"]), "$3\r\nold");
    // COPY REPLACE: replaced there, kept here.
    assert_eq!(
        s.raw(&migrate(dst.addr, &["a", "0", "5000", "COPY", "REPLACE"])),
        "+OK"
    );
    assert_eq!(s.raw(&["GET", "a"]), "$3\r\nnew");
    assert_eq!(d.raw(&["GET", "a"]), "$3\r\nnew");
    // COPY of a key the target has: BUSYKEY again.
    assert_eq!(
        s.raw(&migrate(dst.addr, &["a", "0", "5000", "COPY"])),
        busykey()
    );
    // REPLACE alone: moved.
    s.raw(&["SET", "a", "newer"]);
    assert_eq!(
        s.raw(&migrate(dst.addr, &["a", "0", "5000", "REPLACE"])),
        "+OK"
    );
    assert_eq!(s.raw(&["EXISTS", "a"]), ":0");
    assert_eq!(d.raw(&["GET", "a"]), "$5\r\nnewer");
}

#[test]
fn a_busy_key_fails_alone_and_the_others_still_move() {
    let src = TestServer::start(4);
    let dst = TestServer::start(2);
    let mut s = src.client();
    let mut d = dst.client();
    let keys = keys_on_several_shards("b", 6, 4);
    for k in &keys {
        s.raw(&["SET", k, "here"]);
    }
    d.raw(&["SET", &keys[3], "there"]);
    let mut argv = migrate(dst.addr, &["", "0", "5000", "KEYS"]);
    argv.extend(keys.iter().cloned());
    assert_eq!(s.raw(&argv), busykey());
    for (i, k) in keys.iter().enumerate() {
        let (here, there) = if i == 3 {
            (":1", "$5\r\nthere")
        } else {
            (":0", "$4\r\nhere")
        };
        assert_eq!(s.raw(&["EXISTS", k]), here, "{k}");
        assert_eq!(d.raw(&["GET", k]), there, "{k}");
    }
}

#[test]
fn nokey_when_nothing_exists_even_for_an_unreachable_target() {
    let src = TestServer::start(2);
    let mut s = src.client();
    let closed = closed_port();
    let to: SocketAddr = format!("127.0.0.1:{closed}").parse().unwrap();
    assert_eq!(s.raw(&migrate(to, &["nope", "0", "100"])), "+NOKEY");
    assert_eq!(
        s.raw(&migrate(to, &["", "0", "100", "KEYS", "x", "y", "z"])),
        "+NOKEY"
    );
    assert_eq!(s.raw(&migrate(to, &["", "0", "100", "KEYS"])), "+NOKEY");
    // An expired key is a missing key.
    s.raw(&["SET", "gone", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(s.raw(&migrate(to, &["gone", "0", "100"])), "+NOKEY");
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn io_errors_leave_the_key_here() {
    let src = TestServer::start(2);
    let mut s = src.client();
    s.raw(&["SET", "k", "v"]);
    // Refused: Redis's blocking connect reports a started connection as
    // made, so the failure shows when writing.
    let closed = closed_port().to_string();
    let argv = ["MIGRATE", "127.0.0.1", &closed, "k", "0", "200"];
    assert_eq!(
        s.raw(&argv),
        "-IOERR error or timeout writing to target instance"
    );
    // A host that does not resolve: no connection starts.
    assert_eq!(
        s.raw(&["MIGRATE", "", "6379", "k", "0", "200"]),
        "-IOERR error or timeout connecting to the client"
    );
    assert_eq!(
        s.raw(&["MIGRATE", "127.0.0.1", "-1", "k", "0", "200"]),
        "-IOERR error or timeout connecting to the client"
    );
    // A target that accepts and never answers: a read timeout, no retry.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let t0 = Instant::now();
    assert_eq!(
        s.raw(&["MIGRATE", "127.0.0.1", &port, "k", "0", "300"]),
        "-IOERR error or timeout reading to target instance"
    );
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(3000),
        "{took:?}"
    );
    assert_eq!(s.raw(&["GET", "k"]), "$1\r\nv");
    // The server kept serving.
    assert_eq!(s.raw(&["PING"]), "+PONG");
}

#[test]
fn auth_and_auth2_to_a_target_with_requirepass() {
    let src = TestServer::start(2);
    let dst = TestServer::with_config(Config {
        shards: 2,
        requirepass: Some("s3cret".into()),
        ..test_config()
    });
    let mut s = src.client();
    s.raw(&["SET", "a", "1"]);
    s.raw(&["SET", "b", "2"]);
    assert_eq!(
        s.raw(&migrate(dst.addr, &["a", "0", "5000"])),
        "-ERR Target instance replied with error: NOAUTH Authentication required."
    );
    let wrongpass = "-ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled.";
    assert_eq!(
        s.raw(&migrate(dst.addr, &["a", "0", "5000", "AUTH", "nope"])),
        wrongpass
    );
    assert_eq!(
        s.raw(&migrate(
            dst.addr,
            &["a", "0", "5000", "AUTH2", "default", "nope"]
        )),
        wrongpass
    );
    assert_eq!(s.raw(&["EXISTS", "a"]), ":1");
    assert_eq!(
        s.raw(&migrate(dst.addr, &["a", "0", "5000", "AUTH", "s3cret"])),
        "+OK"
    );
    assert_eq!(
        s.raw(&migrate(
            dst.addr,
            &["b", "0", "5000", "AUTH2", "default", "s3cret"]
        )),
        "+OK"
    );
    assert_eq!(s.raw(&["DBSIZE"]), ":0");
    let mut d = dst.client();
    assert_eq!(d.raw(&["AUTH", "s3cret"]), "+OK");
    assert_eq!(d.raw(&["MGET", "a", "b"]), "*2\r\n$1\r\n1\r\n$1\r\n2");
}

#[test]
fn ttl_and_destination_db_are_kept() {
    let src = TestServer::start(2);
    let dst = TestServer::start(2);
    let mut s = src.client();
    let mut d = dst.client();
    s.raw(&["SET", "t", "v", "PX", "100000"]);
    s.raw(&["SET", "p", "v"]);
    assert_eq!(
        s.raw(&migrate(dst.addr, &["", "3", "5000", "KEYS", "t", "p"])),
        "+OK"
    );
    assert_eq!(d.raw(&["DBSIZE"]), ":0");
    d.raw(&["SELECT", "3"]);
    let pttl: i64 = d.raw(&["PTTL", "t"])[1..].parse().unwrap();
    assert!((90_000..=100_000).contains(&pttl), "{pttl}");
    assert_eq!(d.raw(&["PTTL", "p"]), ":-1");
    // A database the target does not have: its SELECT error.
    s.raw(&["SET", "x", "v"]);
    assert_eq!(
        s.raw(&migrate(dst.addr, &["x", "99", "5000"])),
        "-ERR Target instance replied with error: ERR DB index is out of range"
    );
    assert_eq!(s.raw(&["EXISTS", "x"]), ":1");
}

/// The value of `name` in an INFO section reply.
fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
}

/// Calls of `cmd` in the target's INFO commandstats.
fn calls(c: &mut RespClient, cmd: &str) -> u64 {
    let info = c.raw(&["INFO", "commandstats"]);
    info_field(&info, &format!("cmdstat_{cmd}"))
        .and_then(|v| {
            v.split(',')
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn sockets_are_cached_selects_skipped_and_a_dropped_socket_retried() {
    // One shard: every key is on it, so one cached socket.
    let src = TestServer::start(1);
    let dst = TestServer::start(2);
    let mut s = src.client();
    let mut d = dst.client();
    let conns = |d: &mut RespClient| {
        info_field(&d.raw(&["INFO", "stats"]), "total_connections_received")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap()
    };
    let before = conns(&mut d);
    for k in ["a", "b", "c"] {
        s.raw(&["SET", k, "v"]);
        assert_eq!(s.raw(&migrate(dst.addr, &[k, "2", "5000"])), "+OK");
    }
    assert_eq!(
        conns(&mut d) - before,
        1,
        "one connection for three MIGRATEs"
    );
    assert_eq!(calls(&mut d, "select"), 1, "SELECT sent once");
    assert_eq!(calls(&mut d, "restore"), 3);
    // The target drops the connection: the next MIGRATE retries on a new one.
    let list = d.raw(&["CLIENT", "LIST"]);
    let id = list
        .lines()
        .find(|l| l.contains("cmd=restore"))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .expect("the MIGRATE connection")
        .to_string();
    assert_eq!(d.raw(&["CLIENT", "KILL", "ID", &id]), ":1");
    s.raw(&["SET", "d", "v"]);
    assert_eq!(s.raw(&migrate(dst.addr, &["d", "2", "5000"])), "+OK");
    assert_eq!(conns(&mut d) - before, 2);
    assert_eq!(calls(&mut d, "select"), 2, "a new socket selects again");
    d.raw(&["SELECT", "2"]);
    assert_eq!(d.raw(&["DBSIZE"]), ":4");
}

#[test]
fn deleting_a_migrated_key_is_a_delete() {
    let src = TestServer::start(2);
    let dst = TestServer::start(2);
    let mut s = src.client();
    let mut w = src.client();
    s.raw(&["SET", "k", "v"]);
    assert_eq!(w.raw(&["WATCH", "k"]), "+OK");
    assert_eq!(w.raw(&["MULTI"]), "+OK");
    assert_eq!(w.raw(&["GET", "k"]), "+QUEUED");
    assert_eq!(s.raw(&migrate(dst.addr, &["k", "0", "5000"])), "+OK");
    // WATCH saw the key go.
    assert_eq!(w.raw(&["EXEC"]), "*-1");
    // COPY changes nothing here: a watcher's EXEC runs.
    s.raw(&["SET", "c", "v"]);
    assert_eq!(w.raw(&["WATCH", "c"]), "+OK");
    assert_eq!(w.raw(&["MULTI"]), "+OK");
    assert_eq!(w.raw(&["GET", "c"]), "+QUEUED");
    assert_eq!(
        s.raw(&migrate(dst.addr, &["c", "0", "5000", "COPY"])),
        "+OK"
    );
    assert_eq!(w.raw(&["EXEC"]), "*1\r\n$1\r\nv");
    // Inside MULTI, MIGRATE runs at EXEC.
    s.raw(&["SET", "m", "v"]);
    assert_eq!(s.raw(&["MULTI"]), "+OK");
    assert_eq!(s.raw(&migrate(dst.addr, &["m", "0", "5000"])), "+QUEUED");
    assert_eq!(s.raw(&["EXEC"]), "*1\r\n+OK");
    assert_eq!(s.raw(&["EXISTS", "m"]), ":0");
}

#[test]
fn cluster_mode_sends_restore_asking() {
    let src = TestServer::with_config(Config {
        shards: 2,
        cluster_emulated: true,
        ..test_config()
    });
    let dst = TestServer::start(2);
    let mut s = src.client();
    let mut d = dst.client();
    s.raw(&["SET", "k", "v"]);
    assert_eq!(s.raw(&migrate(dst.addr, &["k", "0", "5000"])), "+OK");
    assert_eq!(calls(&mut d, "restore-asking"), 1);
    assert_eq!(calls(&mut d, "restore"), 0);
    assert_eq!(d.raw(&["GET", "k"]), "$1\r\nv");
    // RESTORE-ASKING is RESTORE.
    assert_eq!(
        d.raw(&["RESTORE-ASKING", "k", "0", "x"]),
        "-BUSYKEY Target key name already exists."
    );
}

#[test]
fn argument_errors() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let cases: &[(&[&str], &str)] = &[
        (
            &["MIGRATE", "h", "1", "k", "0"],
            "-ERR wrong number of arguments for 'migrate' command",
        ),
        (
            &["MIGRATE", "h", "1", "k", "0", "5", "bogus"],
            "-ERR syntax error",
        ),
        (
            &["MIGRATE", "h", "1", "k", "0", "5", "AUTH"],
            "-ERR syntax error",
        ),
        (
            &["MIGRATE", "h", "1", "k", "0", "5", "AUTH2", "u"],
            "-ERR syntax error",
        ),
        (
            &["MIGRATE", "h", "1", "k", "0", "5", "KEYS", "a"],
            "-ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
        ),
        (
            &["MIGRATE", "h", "1", "k", "x", "y"],
            "-ERR value is not an integer or out of range",
        ),
        (
            &["MIGRATE", "h", "1", "k", "0", "1.5"],
            "-ERR value is not an integer or out of range",
        ),
    ];
    for (argv, want) in cases {
        assert_eq!(c.raw(argv), *want, "{argv:?}");
    }
}

/// The MIGRATE script run by both pairs, with `{port}` the target's port
/// and `{closed}` a port nothing listens on. The source has `k1` and `k2`;
/// the target has `k2`.
const SCRIPT: &[&str] = &[
    "MIGRATE 127.0.0.1 {port} k1 0 5000 bogus",
    "MIGRATE 127.0.0.1 {port} k1 0 5000 COPY AUTH",
    "MIGRATE 127.0.0.1 {port} k1 0 5000 AUTH2 u",
    "MIGRATE 127.0.0.1 {port} k1 0 5000 KEYS k2",
    "MIGRATE 127.0.0.1 {port} k1 0 5000 keys",
    "MIGRATE 127.0.0.1 {port} k1 zero 5000",
    "MIGRATE 127.0.0.1 {port} k1 0 five",
    "MIGRATE 127.0.0.1 {port} k1 0 5000 bogus KEYS k2",
    "MIGRATE 127.0.0.1 {port} nope 0 5000",
    "MIGRATE 127.0.0.1 {port} \"\" 0 5000 KEYS nope1 nope2",
    "MIGRATE 127.0.0.1 {port} \"\" 0 5000 KEYS",
    "MIGRATE 127.0.0.1 {port} k2 0 5000",
    "MIGRATE 127.0.0.1 {port} k2 0 5000 COPY",
    "MIGRATE 127.0.0.1 {port} \"\" 0 5000 COPY KEYS nope k2",
    "MIGRATE 127.0.0.1 {port} k1 0 5000 COPY AUTH pw",
    "MIGRATE 127.0.0.1 {port} k1 0 5000 COPY AUTH2 bob pw",
    "MIGRATE 127.0.0.1 {closed} k1 0 300 COPY",
    "MIGRATE 127.0.0.1 {closed} \"\" 0 300 KEYS nope",
    "MIGRATE \"\" {port} k1 0 300 COPY",
    "MIGRATE 127.0.0.1 -1 k1 0 300 COPY",
    "MIGRATE 127.0.0.1 {port} k1 99 5000 COPY",
    "MIGRATE 127.0.0.1 {port} k1 -1 5000 COPY",
    "EXISTS k1 k2",
    "MIGRATE 127.0.0.1 {port} \"\" 0 0 KEYS k1 k2",
    "EXISTS k1 k2",
    "MIGRATE 127.0.0.1 {port} k2 0 -5 REPLACE",
    "EXISTS k1 k2",
    "COMMAND GETKEYS MIGRATE h 1 k 0 5",
    "COMMAND GETKEYS MIGRATE h 1 \"\" 0 5 KEYS a b",
    "COMMAND GETKEYS MIGRATE h 1 \"\" 0 5 AUTH2 u p KEYS a b",
    "COMMAND GETKEYS MIGRATE h 1 \"\" 0 5 AUTH KEYS a b",
    "COMMAND GETKEYS MIGRATE h 1 k 0 5 KEYS a b",
    "COMMAND GETKEYS MIGRATE h 1 k 0 5 KEYS",
    "COMMAND GETKEYS RESTORE-ASKING k 0 x",
];

/// Run [`SCRIPT`] from `src` to a target on `port` (prepared as the
/// script says); the replies, one per line.
fn run_script(src: &mut RespClient, dst: &mut RespClient, port: u16) -> Vec<String> {
    let closed = closed_port();
    src.raw(&["SET", "k1", "one"]);
    src.raw(&["SET", "k2", "two"]);
    dst.raw(&["SET", "k2", "theirs"]);
    SCRIPT
        .iter()
        .map(|line| {
            let line = line
                .replace("{port}", &port.to_string())
                .replace("{closed}", &closed.to_string());
            src.raw(&common::words(&line))
        })
        .collect()
}

#[test]
fn replies_match_redis_migrating_to_redis() {
    let (Some(rsrc), Some(rdst)) = (RedisServer::start(), RedisServer::start()) else {
        return;
    };
    let src = TestServer::start(2);
    let dst = TestServer::start(2);
    let theirs = run_script(&mut rsrc.client(), &mut rdst.client(), rdst.addr.port());
    let ours = run_script(&mut src.client(), &mut dst.client(), dst.addr.port());
    for ((line, a), b) in SCRIPT.iter().zip(&ours).zip(&theirs) {
        assert_eq!(a, b, "`{line}`\n ours: {a:?}\nredis: {b:?}");
    }
    // Both targets end with the same keys.
    let mut rd = rdst.client();
    let mut od = dst.client();
    for k in ["k1", "k2"] {
        assert_eq!(od.raw(&["GET", k]), rd.raw(&["GET", k]), "{k}");
    }
}

#[test]
fn command_info_matches_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let mut o = srv.client();
    let mut r = redis.client();
    for cmd in ["migrate", "restore-asking"] {
        let ours = o.raw(&["COMMAND", "INFO", cmd]);
        let theirs = r.raw(&["COMMAND", "INFO", cmd]);
        // Name, arity, flags, key triple and ACL categories; Redis goes on
        // with tips and key specs, which this server does not report.
        let head = |s: &str| s.lines().take(20).collect::<Vec<_>>().join("\n");
        let cut = |s: &str| {
            let h = head(s);
            h[..h
                .find("@dangerous")
                .map_or(h.len(), |i| i + "@dangerous".len())]
                .to_string()
        };
        assert_eq!(cut(&ours), cut(&theirs), "{cmd}");
    }
    assert_eq!(
        o.raw(&["COMMAND", "INFO", "restore-asking"])
            .lines()
            .filter(|l| *l == "+asking")
            .count(),
        1
    );
}

#[test]
fn strings_and_streams_migrate_into_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let src = TestServer::start(2);
    let mut s = src.client();
    let mut r = redis.client();
    // redis-server 7.0 reads payloads of RDB version 10 at most.
    assert_eq!(
        s.raw(&["CONFIG", "SET", "dump-payload-version", "10"]),
        "+OK"
    );
    s.raw(&["SET", "str", "hello", "EX", "1000"]);
    build_stream(&mut s, "st");
    let range = s.raw(&["XRANGE", "st", "-", "+"]);
    let pending = s.raw(&["XPENDING", "st", "g1"]);
    assert_eq!(
        s.raw(&migrate(
            redis.addr,
            &["", "0", "5000", "KEYS", "str", "st"]
        )),
        "+OK"
    );
    assert_eq!(s.raw(&["DBSIZE"]), ":0");
    assert_eq!(r.raw(&["GET", "str"]), "$5\r\nhello");
    let ttl: i64 = r.raw(&["TTL", "str"])[1..].parse().unwrap();
    assert!((990..=1000).contains(&ttl), "{ttl}");
    assert_eq!(r.raw(&["XRANGE", "st", "-", "+"]), range);
    assert_eq!(r.raw(&["XPENDING", "st", "g1"]), pending);
}

#[test]
fn credentials_are_redacted_in_monitor_and_slowlog() {
    let src = TestServer::start(2);
    let mut m = src.client();
    let mut c = src.client();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    assert_eq!(
        c.raw(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        "+OK"
    );
    c.raw(&[
        "MIGRATE",
        "127.0.0.1",
        "1",
        "",
        "0",
        "100",
        "COPY",
        "AUTH2",
        "bob",
        "pw",
        "KEYS",
        "nope",
    ]);
    let line = m.read_reply();
    assert!(
        line.ends_with(r#""COPY" "AUTH2" "(redacted)" "(redacted)" "KEYS" "nope""#),
        "{line}"
    );
    let slow = c.raw(&["SLOWLOG", "GET", "1"]);
    assert!(
        slow.contains("AUTH2\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n$4\r\nKEYS"),
        "{slow}"
    );
    assert!(
        !slow.contains("bob") && !slow.contains("$2\r\npw"),
        "{slow}"
    );
}

#[test]
fn command_docs_give_the_8x_arguments() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let docs = c.raw(&["COMMAND", "DOCS", "migrate"]);
    for want in [
        "key-selector",
        "empty-string",
        "destination-db",
        "authentication",
        "$5\r\nauth2",
        "$5\r\nAUTH2",
        "$4\r\nkeys",
        "3.0.6",
    ] {
        assert!(docs.contains(want), "{want} not in {docs}");
    }
    let docs = c.raw(&["COMMAND", "DOCS", "restore-asking"]);
    assert!(docs.contains("An internal command for migrating keys in a cluster."));
    assert!(docs.contains("IDLETIME"), "{docs}");
}

#[test]
fn migrated_keys_stay_gone_after_a_restart() {
    let dir = ScratchDir::new("migrate-aof");
    let cfg = Config {
        shards: 2,
        dir: dir.to_path_buf(),
        appendonly: true,
        ..test_config()
    };
    let dst = TestServer::start(2);
    {
        let src = TestServer::with_config(cfg.clone());
        let mut s = src.client();
        for k in ["a", "b", "c"] {
            s.raw(&["SET", k, "v"]);
        }
        assert_eq!(
            s.raw(&migrate(dst.addr, &["", "0", "5000", "KEYS", "a", "b"])),
            "+OK"
        );
        assert_eq!(
            s.raw(&migrate(dst.addr, &["c", "0", "5000", "COPY"])),
            "+OK"
        );
    }
    let src = TestServer::with_config(cfg);
    let mut s = src.client();
    assert_eq!(s.raw(&["EXISTS", "a", "b", "c"]), ":1");
    assert_eq!(s.raw(&["GET", "c"]), "$1\r\nv");
}

/// A fake target on a loopback port: for each connection it accepts, reads
/// the request until the client pauses, then sends the next canned answer
/// (`None`: closes without answering). Returns its address and a handle
/// yielding how many connections it accepted.
fn fake_target(answers: Vec<Option<&'static str>>) -> (SocketAddr, std::thread::JoinHandle<usize>) {
    use std::io::{Read, Write};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let mut accepted = 0;
        for answer in answers {
            let (mut sock, _) = l.accept().unwrap();
            accepted += 1;
            sock.set_read_timeout(Some(Duration::from_millis(150)))
                .unwrap();
            let mut buf = [0u8; 4096];
            while matches!(sock.read(&mut buf), Ok(n) if n > 0) {}
            if let Some(a) = answer {
                sock.write_all(a.as_bytes()).unwrap();
            }
            let _ = sock.shutdown(std::net::Shutdown::Write);
            std::thread::sleep(Duration::from_millis(50));
        }
        accepted
    });
    (addr, handle)
}

#[test]
fn a_socket_closed_before_any_reply_is_retried_once() {
    let (to, fake) = fake_target(vec![None, Some("+OK\r\n+OK\r\n")]);
    let src = TestServer::start(1);
    let mut s = src.client();
    s.raw(&["SET", "k", "v"]);
    assert_eq!(s.raw(&migrate(to, &["k", "0", "2000"])), "+OK");
    assert_eq!(fake.join().unwrap(), 2);
    assert_eq!(s.raw(&["EXISTS", "k"]), ":0");
}

#[test]
fn keys_restored_before_a_lost_reply_are_still_moved() {
    // SELECT and the first RESTORE answered, then the target goes away:
    // no retry once a RESTORE reply was read.
    let (to, fake) = fake_target(vec![Some("+OK\r\n+OK\r\n")]);
    let src = TestServer::start(1);
    let mut s = src.client();
    s.raw(&["SET", "a", "1"]);
    s.raw(&["SET", "b", "2"]);
    assert_eq!(
        s.raw(&migrate(to, &["", "0", "2000", "KEYS", "a", "b"])),
        "-IOERR error or timeout reading to target instance"
    );
    assert_eq!(fake.join().unwrap(), 1);
    assert_eq!(s.raw(&["EXISTS", "a"]), ":0");
    assert_eq!(s.raw(&["EXISTS", "b"]), ":1");
}
