//! Client and memory limits over real sockets: client-output-buffer-limit,
//! client-query-buffer-limit, proto-max-bulk-len, multibulk length,
//! maxclients, idle timeout, tcp-keepalive, maxmemory (noeviction), and the
//! INFO counters and CLIENT LIST fields that report them. Exact texts are
//! compared with a real redis-server where it has the same behaviour.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{assert_same_replies, RedisServer, RespClient, TestServer};

/// Body of a bulk reply's wire text (`$n\r\n<body>`).
fn body(reply: &str) -> &str {
    reply.split_once("\r\n").map(|(_, b)| b).unwrap_or("")
}

/// One `field:value` of INFO `section`.
fn info_field(c: &mut RespClient, section: &str, field: &str) -> String {
    let text = c.raw(&["INFO", section]);
    body(&text)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .trim()
        .to_string()
}

fn info_num(c: &mut RespClient, section: &str, field: &str) -> u64 {
    info_field(c, section, field).parse().expect("number")
}

/// Poll until `f` holds (up to 10 s); false if it never did.
/// Read everything until the peer closes (or 10 s pass); returns (bytes, closed).
fn drain_until_closed(sock: &mut TcpStream) -> (u64, bool) {
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    while Instant::now() < deadline {
        match sock.read(&mut buf) {
            Ok(0) => return (total, true),
            Ok(n) => total += n as u64,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                continue
            }
            Err(_) => return (total, true),
        }
    }
    (total, false)
}

/// The `field=` value of a CLIENT LIST line for client `id`.
fn client_list_field(c: &mut RespClient, id: u64, field: &str) -> String {
    let list = c.raw(&["CLIENT", "LIST", "ID", &id.to_string()]);
    body(&list)
        .split(' ')
        .find_map(|f| f.strip_prefix(&format!("{field}=")))
        .unwrap_or_else(|| panic!("no {field}= in {list:?}"))
        .trim()
        .to_string()
}

fn client_id(c: &mut RespClient) -> u64 {
    c.raw(&["CLIENT", "ID"])
        .trim_start_matches(':')
        .parse()
        .expect("id")
}

/// RESP encoding of one command (byte-string literals of any length).
fn resp(args: &[&[u8]]) -> Vec<u8> {
    common::resp_command(args)
}

#[test]
fn config_shapes_match_redis() {
    let srv = TestServer::start(2);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    assert_same_replies(
        &mut srv.client(),
        &mut redis.client(),
        r#"
        CONFIG GET client-output-buffer-limit
        CONFIG SET client-output-buffer-limit "normal 1mb 512kb 10"
        CONFIG GET client-output-buffer-limit
        CONFIG SET client-output-buffer-limit "normal 1 2"
        CONFIG SET client-output-buffer-limit "foo 1 2 3"
        CONFIG SET client-output-buffer-limit "normal x 2 3"
        CONFIG SET client-output-buffer-limit "normal -1 0 0"
        CONFIG SET client-output-buffer-limit "normal 1 2 -3"
        CONFIG SET client-output-buffer-limit ""
        CONFIG SET client-output-buffer-limit "NORMAL 0 0 0 pubsub 1 2 3"
        CONFIG GET client-output-buffer-limit
        CONFIG GET maxmemory
        CONFIG SET maxmemory 1x
        CONFIG SET maxmemory -1
        CONFIG SET maxmemory 10mb
        CONFIG GET maxmemory
        CONFIG SET maxmemory 0
        CONFIG GET maxmemory-policy
        CONFIG SET maxmemory-policy foo
        CONFIG SET maxmemory-policy noeviction
        CONFIG GET tcp-keepalive
        CONFIG SET tcp-keepalive -1
        CONFIG SET tcp-keepalive x
        CONFIG SET tcp-keepalive 60
        CONFIG GET tcp-keepalive
        CONFIG GET timeout
        CONFIG SET timeout -1
        CONFIG SET timeout 2147483648
        CONFIG SET timeout 0
        CONFIG SET maxclients 0
        CONFIG SET client-query-buffer-limit 10
        CONFIG SET proto-max-bulk-len 10
        CONFIG GET proto-max-bulk-len
        CONFIG GET client-query-buffer-limit
        "#,
    );
}

#[test]
fn maxmemory_policies_round_trip() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    for p in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "noeviction",
    ] {
        assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory-policy", p]), "+OK");
        assert_eq!(
            c.raw(&["CONFIG", "GET", "maxmemory-policy"]),
            format!("*2\r\n$16\r\nmaxmemory-policy\r\n${}\r\n{p}", p.len())
        );
    }
    assert_eq!(
        c.raw(&["CONFIG", "SET", "maxmemory-samples", "0"]),
        "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-samples') - argument must be between 1 and 2147483647 inclusive"
    );
    // Redis 7.x takes any int (redis-server 7.0.15 accepts 65).
    assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory-samples", "65"]), "+OK");
}

/// A reader that never reads: over the hard limit it is closed without a
/// reply, the counter moves, and the server's memory goes back down.
#[test]
fn output_buffer_hard_limit_closes_a_reader_that_never_reads() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let big = vec![b'x'; 1 << 20];
    assert_eq!(c.raw(&[b"SET".as_slice(), b"big", &big]), "+OK");
    for i in 0..50 {
        c.raw(&[
            "XADD",
            "s",
            "*",
            "f",
            &"v".repeat(10_000),
            "n",
            &i.to_string(),
        ]);
    }
    let baseline = info_num(&mut c, "memory", "used_memory");
    assert_eq!(
        c.raw(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 4mb 0 0"
        ]),
        "+OK"
    );

    let mut victim = TcpStream::connect(srv.addr).unwrap();
    let mut pipeline = Vec::new();
    for _ in 0..100 {
        pipeline.extend(resp(&[b"GET", b"big"]));
        pipeline.extend(resp(&[b"XRANGE", b"s", b"-", b"+"]));
    }
    // About 150 MB of replies asked for; the client never reads them.
    victim.write_all(&pipeline).unwrap();
    assert!(
        common::eventually(10, || info_num(
            &mut c,
            "stats",
            "client_output_buffer_limit_disconnections"
        ) == 1),
        "the stalled client was never disconnected"
    );
    assert!(common::eventually(10, || info_num(
        &mut c,
        "clients",
        "connected_clients"
    ) == 1));
    let (received, closed) = drain_until_closed(&mut victim);
    assert!(closed, "connection left open");
    assert!(
        received < 100 << 20,
        "received {received} bytes: most replies should never have been sent"
    );
    assert!(info_num(&mut c, "clients", "client_recent_max_output_buffer") >= 4 << 20);
    // Memory goes back near where it was (allocator noise aside).
    assert!(
        common::eventually(10, || info_num(&mut c, "memory", "used_memory")
            < baseline + (8 << 20)),
        "used_memory stayed high"
    );
    assert_eq!(c.raw(&["PING"]), "+PONG");
}

/// Without a limit (Redis's default `normal 0 0 0`) the same client is served in full.
#[test]
fn output_buffer_without_limit_keeps_a_slow_reader() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let big = vec![b'x'; 1 << 20];
    assert_eq!(c.raw(&[b"SET".as_slice(), b"big", &big]), "+OK");
    let mut slow = srv.client();
    let slow_id = client_id(&mut slow);
    for _ in 0..20 {
        slow.send(&["GET", "big"]);
    }
    assert!(
        common::eventually(10, || client_list_field(&mut c, slow_id, "omem")
            .parse::<u64>()
            .unwrap()
            > 0),
        "CLIENT LIST omem= never showed the pending output"
    );
    assert_eq!(client_list_field(&mut c, slow_id, "cmd"), "get");
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        assert_eq!(slow.read_reply().len(), (1 << 20) + "$1048576\r\n".len());
    }
    assert_eq!(
        info_num(&mut c, "stats", "client_output_buffer_limit_disconnections"),
        0
    );
}

/// A server with `normal 0 2mb 1` and a client that asked for 40 MB of
/// replies and reads none: over the soft limit, not yet for long enough.
fn reader_over_the_soft_limit(shards: u16) -> (TestServer, RespClient, TcpStream) {
    let srv = TestServer::start(shards);
    let mut c = srv.client();
    let big = vec![b'x'; 1 << 20];
    assert_eq!(c.raw(&[b"SET".as_slice(), b"big", &big]), "+OK");
    assert_eq!(
        c.raw(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 2mb 1"
        ]),
        "+OK"
    );
    let mut victim = TcpStream::connect(srv.addr).unwrap();
    let mut all = Vec::new();
    for _ in 0..40 {
        all.extend(resp(&[b"GET", b"big"]));
    }
    victim.write_all(&all).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info_num(&mut c, "clients", "connected_clients"), 2);
    (srv, c, victim)
}

/// Over the soft limit for longer than the soft seconds: closed (at the
/// latest on the next reply).
#[test]
fn output_buffer_soft_limit_closes_after_soft_seconds() {
    let (_srv, mut c, mut victim) = reader_over_the_soft_limit(1);
    std::thread::sleep(Duration::from_millis(1500));
    let _ = victim.write_all(&resp(&[b"GET", b"big"]));
    assert!(common::eventually(10, || info_num(
        &mut c,
        "stats",
        "client_output_buffer_limit_disconnections"
    ) == 1));
    assert!(drain_until_closed(&mut victim).1);
}

/// A client that stops reading and sends nothing more is still closed once
/// it has been over the soft limit for the soft seconds: the once-a-second
/// check catches it, as Redis's `clientsCron` does.
#[test]
fn output_buffer_soft_limit_closes_a_silent_reader() {
    let (_srv, mut c, mut victim) = reader_over_the_soft_limit(2);
    assert!(
        common::eventually(10, || info_num(
            &mut c,
            "stats",
            "client_output_buffer_limit_disconnections"
        ) == 1),
        "a reader over the soft limit was never closed"
    );
    assert_eq!(info_num(&mut c, "clients", "connected_clients"), 1);
    assert!(drain_until_closed(&mut victim).1);
}

/// A server whose `client-query-buffer-limit` is 1 MB, and a client.
fn with_query_limit_1mb(shards: u16) -> (TestServer, RespClient) {
    let srv = TestServer::start(shards);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["CONFIG", "SET", "client-query-buffer-limit", "1mb"]),
        "+OK"
    );
    (srv, c)
}

#[test]
fn query_buffer_limit_closes_and_counts() {
    let (srv, mut c) = with_query_limit_1mb(1);
    // A client blocked in XREAD keeps buffering what it pipelines behind it.
    let mut blocked = TcpStream::connect(srv.addr).unwrap();
    blocked
        .write_all(&resp(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]))
        .unwrap();
    assert!(common::eventually(10, || info_num(
        &mut c,
        "clients",
        "blocked_clients"
    ) == 1));
    let mut pings = Vec::new();
    while pings.len() < 2 << 20 {
        pings.extend(resp(&[b"PING"]));
    }
    let _ = blocked.write_all(&pings);
    assert!(drain_until_closed(&mut blocked).1);
    assert_eq!(
        info_num(&mut c, "stats", "client_query_buffer_limit_disconnections"),
        1
    );
    assert_eq!(info_num(&mut c, "clients", "blocked_clients"), 0);
    assert!(info_num(&mut c, "clients", "client_recent_max_input_buffer") > 1 << 20);
    assert_eq!(info_num(&mut c, "clients", "connected_clients"), 1);
}

/// The limit bounds what is pending in the query buffer, not a whole
/// command: arguments already read whole do not count (Redis has moved them
/// out of its query buffer), so a command whose arguments together pass the
/// limit runs, while one argument past it closes the client.
#[test]
fn query_buffer_limit_counts_what_is_pending_not_the_whole_command() {
    let (srv, mut c) = with_query_limit_1mb(2);
    let field = vec![b'v'; 400_000];
    let mut big = TcpStream::connect(srv.addr).unwrap();
    big.write_all(&resp(&[
        b"XADD", b"qb", b"1-1", b"f1", &field, b"f2", &field, b"f3", &field,
    ]))
    .unwrap();
    let mut reply = [0u8; 64];
    let n = big.read(&mut reply).unwrap();
    assert_eq!(&reply[..n], b"$3\r\n1-1\r\n");
    assert_eq!(c.raw(&["XLEN", "qb"]), ":1");
    assert_eq!(
        info_num(&mut c, "stats", "client_query_buffer_limit_disconnections"),
        0
    );
    // One argument of 1.5 MB is past the limit while it is being read.
    let huge = vec![b'v'; 1_500_000];
    let mut over = TcpStream::connect(srv.addr).unwrap();
    let _ = over.write_all(&resp(&[b"XADD", b"qb2", b"*", b"f", &huge]));
    assert!(drain_until_closed(&mut over).1);
    assert_eq!(c.raw(&["EXISTS", "qb2"]), ":0");
    assert_eq!(
        info_num(&mut c, "stats", "client_query_buffer_limit_disconnections"),
        1
    );
}

/// What MULTI queues counts against the limit too (Redis 7.4+): a
/// transaction that queues past it closes the client and never runs, while
/// one under it runs.
#[test]
fn query_buffer_limit_counts_the_multi_queue() {
    let (srv, mut c) = with_query_limit_1mb(2);
    let field = "v".repeat(400_000);
    let mut under = srv.client();
    assert_eq!(under.raw(&["MULTI"]), "+OK");
    for _ in 0..2 {
        assert_eq!(under.raw(&["XADD", "mq", "*", "f", &field]), "+QUEUED");
    }
    assert!(under.raw(&["EXEC"]).starts_with("*2\r\n"));
    assert_eq!(c.raw(&["XLEN", "mq"]), ":2");
    let mut over = TcpStream::connect(srv.addr).unwrap();
    let mut tx = resp(&[b"MULTI"]);
    for _ in 0..4 {
        tx.extend(resp(&[b"XADD", b"mq2", b"*", b"f", field.as_bytes()]));
    }
    tx.extend(resp(&[b"EXEC"]));
    let _ = over.write_all(&tx);
    assert!(drain_until_closed(&mut over).1);
    assert_eq!(c.raw(&["EXISTS", "mq2"]), ":0");
    assert_eq!(
        info_num(&mut c, "stats", "client_query_buffer_limit_disconnections"),
        1
    );
    assert_eq!(c.raw(&["XLEN", "mq"]), ":2");
}

/// Send raw bytes; return everything the server sends before closing.
fn raw_until_close(addr: SocketAddr, bytes: &[u8]) -> (String, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(bytes);
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&out).into_owned(), true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                continue
            }
            Err(_) => return (String::from_utf8_lossy(&out).into_owned(), true),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), false)
}

/// proto-max-bulk-len and the multibulk length cap: error, then close, as Redis.
#[test]
fn protocol_limits_match_redis() {
    let srv = TestServer::start(1);
    let redis = RedisServer::start();
    let mut addrs = vec![srv.addr];
    if let Some(r) = &redis {
        addrs.push(r.addr);
    }
    let mut seen = Vec::new();
    for addr in addrs {
        let mut c = RespClient::connect(addr);
        assert_eq!(
            c.raw(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]),
            "+OK"
        );
        let too_big = raw_until_close(addr, b"*2\r\n$4\r\nECHO\r\n$1048577\r\n");
        let fits = {
            let mut c = RespClient::connect(addr);
            let arg = vec![b'a'; 1 << 20];
            c.raw(&[b"ECHO".as_slice(), &arg]).len()
        };
        let mbulk = raw_until_close(addr, b"*2147483648\r\n");
        let neg = raw_until_close(addr, b"*1\r\n$-2\r\n");
        seen.push((too_big, fits, mbulk, neg));
    }
    let ours = &seen[0];
    assert_eq!(
        ours.0,
        (
            "-ERR Protocol error: invalid bulk length\r\n".to_string(),
            true
        )
    );
    assert_eq!(ours.1, (1 << 20) + "$1048576\r\n".len());
    assert_eq!(
        ours.2,
        (
            "-ERR Protocol error: invalid multibulk length\r\n".to_string(),
            true
        )
    );
    assert!(ours.3 .1, "negative bulk length must close");
    if let Some(theirs) = seen.get(1) {
        assert_eq!(ours, theirs);
    }
}

#[test]
fn maxclients_refuses_with_redis_text_and_counts() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(c.raw(&["CONFIG", "SET", "maxclients", "3"]), "+OK");
    let mut b = srv.client();
    let mut d = srv.client();
    assert_eq!(b.raw(&["PING"]), "+PONG");
    assert_eq!(d.raw(&["PING"]), "+PONG");
    let (text, closed) = raw_until_close(srv.addr, b"PING\r\n");
    assert_eq!(text, "-ERR max number of clients reached\r\n");
    assert!(closed);
    assert_eq!(info_num(&mut c, "stats", "rejected_connections"), 1);
    drop(d);
    assert!(common::eventually(10, || info_num(
        &mut c,
        "clients",
        "connected_clients"
    ) == 2));
    let mut e = srv.client();
    assert_eq!(e.raw(&["PING"]), "+PONG");
}

/// maxclients holds when connections arrive at once and two shard threads
/// admit them concurrently: of 8 simultaneous clients exactly as many as
/// there are free places are served, the others get Redis's error.
#[test]
fn maxclients_holds_under_concurrent_connects() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["CONFIG", "SET", "maxclients", "3"]), "+OK");
    for round in 0..40 {
        let socks: Vec<TcpStream> = (0..8)
            .map(|_| TcpStream::connect(srv.addr).unwrap())
            .collect();
        let mut served = 0;
        for mut s in &socks {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(b"PING\r\n").unwrap();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap_or(0);
            match &buf[..n] {
                b"+PONG\r\n" => served += 1,
                b"-ERR max number of clients reached\r\n" => {}
                other => panic!("round {round}: {:?}", String::from_utf8_lossy(other)),
            }
        }
        assert_eq!(
            served, 2,
            "round {round}: clients served beyond maxclients 3"
        );
        drop(socks);
        assert!(common::eventually(10, || info_num(
            &mut c,
            "clients",
            "connected_clients"
        ) == 1));
    }
}

/// `timeout`: idle clients are closed without a reply; blocked readers and
/// busy clients are not.
#[test]
fn idle_timeout_closes_idle_clients_only() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let mut idle = srv.client();
    assert_eq!(idle.raw(&["PING"]), "+PONG");
    let mut blocked = srv.client();
    blocked.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert!(common::eventually(10, || info_num(
        &mut c,
        "clients",
        "blocked_clients"
    ) == 1));
    assert_eq!(c.raw(&["CONFIG", "SET", "timeout", "1"]), "+OK");
    // `c` stays busy; the idle one goes within a couple of cron ticks.
    let deadline = Instant::now() + Duration::from_millis(3500);
    while Instant::now() < deadline {
        assert_eq!(c.raw(&["PING"]), "+PONG");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(idle.is_closed());
    assert_eq!(info_num(&mut c, "clients", "connected_clients"), 2);
    assert_eq!(info_num(&mut c, "clients", "blocked_clients"), 1);
    let id = body(&c.raw(&["XADD", "s", "*", "f", "v"])).to_string();
    let got = blocked.read_reply();
    assert!(got.contains(&id), "{got}");
    assert_eq!(c.raw(&["CONFIG", "SET", "timeout", "0"]), "+OK");
}

/// The server-side socket's timer column in /proc/net/tcp (`02` = keepalive
/// armed), for the connection from `client`.
fn server_side_timer(server: SocketAddr, client: &TcpStream) -> Option<String> {
    let peer = client.local_addr().ok()?;
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let local = format!(":{:04X}", server.port());
    let remote = format!(":{:04X}", peer.port());
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1)?.ends_with(&local) && f.get(2)?.ends_with(&remote))
            .then(|| f.get(5).map(|t| t[..2].to_string()))?
    })
}

#[test]
fn tcp_keepalive_is_armed_on_accepted_sockets() {
    if !std::path::Path::new("/proc/net/tcp").exists() {
        eprintln!("no /proc/net/tcp: skipping");
        return;
    }
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let with = TcpStream::connect(srv.addr).unwrap();
    // Keepalive is set when the server accepts: wait until it has.
    assert!(common::eventually(10, || info_num(
        &mut c,
        "clients",
        "connected_clients"
    ) == 2));
    assert_eq!(c.raw(&["CONFIG", "SET", "tcp-keepalive", "0"]), "+OK");
    let without = TcpStream::connect(srv.addr).unwrap();
    assert!(common::eventually(10, || info_num(
        &mut c,
        "clients",
        "connected_clients"
    ) == 3));
    assert_eq!(
        server_side_timer(srv.addr, &with).as_deref(),
        Some("02"),
        "keepalive timer not armed with tcp-keepalive 300"
    );
    assert_eq!(server_side_timer(srv.addr, &without).as_deref(), Some("00"));
}

/// maxmemory with noeviction: writes that grow memory get Redis's OOM error,
/// reads and deletes keep working, transactions are refused; same replies as
/// redis-server.
#[test]
fn maxmemory_noeviction_matches_redis() {
    let srv = TestServer::start(2);
    let script = r#"
        SET k v
        XADD s 1-1 f v
        CONFIG SET maxmemory 1
        SET k2 v
        XADD s * f v
        XGROUP CREATE s g $
        XGROUP CREATE s g2 $ MKSTREAM
        INCR n
        APPEND k x
        GET k
        XRANGE s - +
        XLEN s
        EXISTS k
        MULTI
        SET a b
        GET k
        EXEC
        MULTI
        DEL k
        EXEC
        XDEL s 1-1
        XTRIM s MAXLEN 0
        PING
        CONFIG SET maxmemory 0
        SET k2 v
        GET k2
    "#;
    let mut ours = srv.client();
    if let Some(redis) = RedisServer::start() {
        assert_same_replies(&mut ours, &mut redis.client(), script);
        return;
    }
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        ours.raw(&common::words(line));
    }
}

#[test]
fn maxmemory_refuses_writes_with_exact_text_and_reports_in_info() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["SET", "k", "v"]), "+OK");
    assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory", "1"]), "+OK");
    let oom = "-OOM command not allowed when used memory > 'maxmemory'.";
    assert_eq!(c.raw(&["SET", "k", "w"]), oom);
    assert_eq!(c.raw(&["XADD", "s", "*", "f", "v"]), oom);
    assert_eq!(c.raw(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]), oom);
    assert_eq!(c.raw(&["GET", "k"]), "$1\r\nv");
    assert_eq!(c.raw(&["DEL", "k"]), ":1");
    assert_eq!(info_num(&mut c, "memory", "maxmemory"), 1);
    assert_eq!(
        info_field(&mut c, "memory", "maxmemory_policy"),
        "noeviction"
    );
    let stats = c.raw(&["INFO", "commandstats"]);
    assert!(
        stats.contains("cmdstat_set:calls=1,") && stats.contains("rejected_calls=1,failed_calls=0"),
        "{stats}"
    );
    assert_eq!(c.raw(&["CONFIG", "SET", "maxmemory", "0"]), "+OK");
    assert_eq!(c.raw(&["SET", "k", "w"]), "+OK");
}

#[test]
fn info_has_redis_client_limit_fields() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    for (section, field) in [
        ("clients", "client_recent_max_input_buffer"),
        ("clients", "client_recent_max_output_buffer"),
        ("clients", "blocked_clients"),
        ("stats", "evicted_clients"),
        ("stats", "client_query_buffer_limit_disconnections"),
        ("stats", "client_output_buffer_limit_disconnections"),
        ("memory", "maxmemory_human"),
    ] {
        info_field(&mut c, section, field);
    }
}

/// A client that passes its hard output limit is closed before its later
/// pipelined commands run, as Redis stops processing a client flagged
/// CLOSE_ASAP: the SET after the big replies never happens, on shardstream
/// (one shard: every command runs inline as it is decoded) and on
/// redis-server.
#[test]
fn commands_after_the_hard_output_limit_do_not_run() {
    fn run(addr: SocketAddr) -> String {
        let mut c = RespClient::connect(addr);
        let big = vec![b'x'; 1 << 20];
        assert_eq!(c.raw(&[b"SET".as_slice(), b"big", &big]), "+OK");
        assert_eq!(
            c.raw(&[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "normal 4mb 0 0"
            ]),
            "+OK"
        );
        let mut victim = TcpStream::connect(addr).unwrap();
        let mut pipeline = Vec::new();
        for _ in 0..20 {
            pipeline.extend(resp(&[b"GET", b"big"]));
        }
        pipeline.extend(resp(&[b"SET", b"marker", b"ran"]));
        victim.write_all(&pipeline).unwrap();
        let (_, closed) = drain_until_closed(&mut victim);
        assert!(closed, "connection left open");
        c.raw(&["GET", "marker"])
    }
    let srv = TestServer::start(1);
    assert_eq!(run(srv.addr), "$-1");
    if let Some(redis) = common::RedisServer::start() {
        assert_eq!(run(redis.addr), "$-1");
    }
}
