//! Panic containment: a panicking shard must end the process with a non-zero
//! status so its clients see EOF, never a half-dead server that hangs them.
//!
//! Runs the real binary with `SHARDSTREAM_DEBUG_PANIC_AFTER_OPS=1` (honoured by
//! debug builds only), which makes the shard panic after its first command.
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::ScratchDir;

#[test]
fn panicking_shard_exits_nonzero_and_clients_see_eof() {
    if !cfg!(debug_assertions) {
        eprintln!("skipped: the debug panic switch exists only in debug builds");
        return;
    }
    let dir = ScratchDir::new("panic");
    // A free port (`--port 0` would mean "no TCP", as in Redis).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
        .to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardstream"))
        .args([
            "--port",
            &port,
            "--shards",
            "1",
            "--no-pin",
            "--bind",
            "127.0.0.1",
        ])
        .arg("--dir")
        .arg(dir.path())
        .env("SHARDSTREAM_DEBUG_PANIC_AFTER_OPS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shardstream");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    let addr = loop {
        line.clear();
        if stderr.read_line(&mut line).expect("read stderr") == 0 {
            panic!("server exited before it was ready");
        }
        if let Some(rest) = line.split("Ready to accept connections tcp on ").nth(1) {
            break rest.split_whitespace().next().expect("address").to_string();
        }
    };
    // An idle client, connected before the panic, must be released too.
    let mut idle = TcpStream::connect(&addr).expect("connect idle");
    idle.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut c = TcpStream::connect(&addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(b"PING\r\n").unwrap();
    let mut pong = [0u8; 7];
    c.read_exact(&mut pong).expect("PONG before the panic");
    assert_eq!(&pong, b"+PONG\r\n");
    // GET runs on the shard: its first command, which panics it.
    c.write_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap();
    for (name, sock) in [("client", &mut c), ("idle client", &mut idle)] {
        let mut buf = [0u8; 64];
        match sock.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Ok(n) => panic!(
                "{name}: expected EOF, got {:?}",
                String::from_utf8_lossy(&buf[..n])
            ),
            Err(e) => panic!("{name}: expected EOF, got {e} (server hung?)"),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("server still running after its shard panicked");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(shardstream::server::PANIC_EXIT_CODE));
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    assert!(
        rest.contains("SHARDSTREAM_DEBUG_PANIC_AFTER_OPS reached"),
        "stderr: {rest}"
    );
}
