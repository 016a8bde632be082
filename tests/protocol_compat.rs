//! Framing and settings that must answer exactly as redis-server 7.0 does,
//! compared byte for byte with a real redis-server when one is installed
//! (the expected bytes below are what 7.0.15 answers):
//! a bulk's two trailing bytes are skipped unchecked, a header ends at its
//! first CR, `POST`/`Host:` lines close the connection silently, a long inline line
//! whose newline is buffered is accepted, `maxmemory` takes any size, and
//! `tcp-backlog` exists, is immutable and reaches `listen(2)`.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{RedisServer, TestServer};

/// Send `input` on a fresh connection and collect everything answered
/// until the server has been quiet for 300 ms (or closed: `<EOF>`).
fn exchange(addr: SocketAddr, input: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(input).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => {
                out.extend_from_slice(b"<EOF>");
                break;
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    out
}

fn inline_echo(len: usize, newline: bool) -> Vec<u8> {
    let mut v = b"ECHO ".to_vec();
    v.extend(std::iter::repeat_n(b'a', len));
    if newline {
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// (input, what redis-server 7.0.15 answers).
fn cases() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut big_reply = b"$70000\r\n".to_vec();
    big_reply.extend(std::iter::repeat_n(b'a', 70_000));
    big_reply.extend_from_slice(b"\r\n");
    let cfg =
        |v: &str| format!("CONFIG SET maxmemory {v}\r\nCONFIG GET maxmemory\r\n").into_bytes();
    let got =
        |v: &str| format!("+OK\r\n*2\r\n$9\r\nmaxmemory\r\n${}\r\n{v}\r\n", v.len()).into_bytes();
    vec![
        (b"*1\r\n$4\r\nPINGxx\r\n".to_vec(), b"+PONG\r\n".to_vec()),
        (
            b"*1\r\n$4\r\nPINGxxPING\r\n".to_vec(),
            b"+PONG\r\n+PONG\r\n".to_vec(),
        ),
        (
            b"*2\r\n$4\r\nECHOxx$1\r\na\r\n".to_vec(),
            b"$1\r\na\r\n".to_vec(),
        ),
        (b"*1\r\n$4\r\nPINGx".to_vec(), b"".to_vec()),
        (
            b"*-0\r\nPING\r\n".to_vec(),
            b"-ERR Protocol error: invalid multibulk length\r\n<EOF>".to_vec(),
        ),
        (
            b"*1\r\n$-0\r\n\r\n".to_vec(),
            b"-ERR Protocol error: invalid bulk length\r\n<EOF>".to_vec(),
        ),
        // A bare CR ends a header; the byte after it is skipped unseen.
        (
            b"*1\r$4\r\nPING\r\n".to_vec(),
            b"-ERR Protocol error: expected '$', got '4'\r\n<EOF>".to_vec(),
        ),
        // The byte is quoted as it came, UTF-8 or not.
        (
            b"*1\r\n\xae4\r\nPING\r\n".to_vec(),
            b"-ERR Protocol error: expected '$', got '\xae'\r\n<EOF>".to_vec(),
        ),
        (
            b"*1\n$4\r\nPING\r\n".to_vec(),
            b"-ERR Protocol error: invalid multibulk length\r\n<EOF>".to_vec(),
        ),
        (
            b"*1\r\n$4\nPING\r\n".to_vec(),
            b"-ERR Protocol error: invalid bulk length\r\n<EOF>".to_vec(),
        ),
        (b"*1\r".to_vec(), b"".to_vec()),
        // Redis finds a header's end with strchr: a NUL before the CR hides
        // it, so the frame waits for more (up to the inline size limit).
        (b"*1\r\n$\x00\r\nPING\r\n".to_vec(), b"".to_vec()),
        (b"*1\r\n$4\x00\r\nPING\r\n".to_vec(), b"".to_vec()),
        (b"*\x001\r\n$4\r\nPING\r\n".to_vec(), b"".to_vec()),
        (b"*1\x00\r\n$4\r\nPING\r\n".to_vec(), b"".to_vec()),
        (b"*1\r\n\x00$4\r\nPING\r\n".to_vec(), b"".to_vec()),
        (
            [b"*1\x00\r\n".as_slice(), &[b'a'; 70_000]].concat(),
            b"-ERR Protocol error: too big mbulk count string\r\n<EOF>".to_vec(),
        ),
        (
            [b"*1\r\n$4\x00".as_slice(), &[b'a'; 70_000]].concat(),
            b"-ERR Protocol error: too big bulk count string\r\n<EOF>".to_vec(),
        ),
        // Cross-protocol guard: POST or Host: as a command closes the
        // connection with no reply, not even to commands before it.
        (b"POST / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), b"<EOF>".to_vec()),
        (b"PING\r\nPOST / HTTP/1.1\r\n".to_vec(), b"<EOF>".to_vec()),
        (b"PING\r\nhOsT: example.com\r\n".to_vec(), b"<EOF>".to_vec()),
        (b"*2\r\n$4\r\npost\r\n$1\r\na\r\n".to_vec(), b"<EOF>".to_vec()),
        // `GET /` is an ordinary inline GET.
        (
            b"GET / HTTP/1.1\r\n".to_vec(),
            b"-ERR wrong number of arguments for 'get' command\r\n".to_vec(),
        ),
        (inline_echo(70_000, true), big_reply),
        (
            inline_echo(70_000, false),
            b"-ERR Protocol error: too big inline request\r\n<EOF>".to_vec(),
        ),
        (cfg("18446744073709551615"), got("18446744073709551615")),
        (cfg("18446744073709551616"), got("18446744073709551615")),
        (cfg("1000000000000000000000"), got("18446744073709551615")),
        (cfg("9223372036854775808"), got("9223372036854775808")),
        (cfg("100gb"), got("107374182400")),
        (
            b"CONFIG SET maxmemory -1\r\nCONFIG SET maxmemory 0\r\n".to_vec(),
            b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\r\n+OK\r\n".to_vec(),
        ),
        (
            b"CONFIG GET tcp-backlog\r\nCONFIG SET tcp-backlog 100\r\n".to_vec(),
            b"*2\r\n$11\r\ntcp-backlog\r\n$3\r\n511\r\n-ERR CONFIG SET failed (possibly related to argument 'tcp-backlog') - can't set immutable config\r\n".to_vec(),
        ),
    ]
}

#[test]
fn framing_and_settings_answer_like_redis() {
    let srv = TestServer::start(2);
    let redis = RedisServer::start();
    for (input, want) in cases() {
        let shown = input[..input.len().min(60)].escape_ascii().to_string();
        if let Some(r) = &redis {
            let theirs = exchange(r.addr, &input);
            assert!(
                theirs == want,
                "redis-server's answer to {shown:?} (update the expectation): {}",
                theirs.escape_ascii()
            );
        }
        let ours = exchange(srv.addr, &input);
        assert!(
            ours == want,
            "answer to {shown:?}: {}, want {}",
            ours.escape_ascii(),
            want.escape_ascii()
        );
    }
}

/// `bind_listener` passes the backlog to listen(2): `ss` shows a listening
/// socket's backlog as its Send-Q (capped by net.core.somaxconn).
#[test]
fn tcp_backlog_reaches_listen() {
    let somaxconn: i32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096);
    for backlog in [511, 37] {
        let l = shardstream::listener::bind_listener("127.0.0.1", 0, backlog).unwrap();
        let port = l.local_addr().unwrap().port();
        let Ok(out) = std::process::Command::new("ss")
            .args(["-Hltn", &format!("sport = :{port}")])
            .output()
        else {
            eprintln!("ss not installed: skipping");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let send_q: i32 = text
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("ss output {text:?}"));
        assert_eq!(send_q, backlog.min(somaxconn), "{text}");
    }
}
