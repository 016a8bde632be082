//! Test harness: an in-process server on `127.0.0.1:0`, a raw RESP client, and
//! a real `redis-server` for differential tests when one is installed.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use shardstream::config::Config;
use shardstream::server::{self, ServerHandle};

/// A shardstream server running in this process; stops on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    handle: Option<ServerHandle>,
}

impl TestServer {
    /// Start with `shards` shards and default settings.
    pub fn start(shards: u16) -> Self {
        Self::with_config(Config {
            shards,
            ..test_config()
        })
    }

    /// Start with an explicit configuration, listening on a free loopback
    /// port (bound here: `port 0` means "no TCP" to the server, as in Redis).
    pub fn with_config(config: Config) -> Self {
        let handle = server::start_on(config, bind_free()).expect("server starts");
        TestServer {
            addr: handle.addr(),
            handle: Some(handle),
        }
    }

    /// Start on an already bound listener (its port is the server's port).
    pub fn on_listener(config: Config, listener: std::net::TcpListener) -> Self {
        let handle = server::start_on(config, listener).expect("server starts");
        TestServer {
            addr: handle.addr(),
            handle: Some(handle),
        }
    }

    /// A raw RESP client.
    pub fn client(&self) -> RespClient {
        RespClient::connect(self.addr)
    }

    /// A `redis` crate connection.
    pub fn redis(&self) -> redis::Connection {
        redis::Client::open(format!("redis://{}/", self.addr))
            .expect("client")
            .get_connection()
            .expect("connect")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}

/// A fresh, empty directory under the system temp dir for one test
/// (`shardstream-<name>-<pid>-<n>`), removed with everything in it when
/// dropped, a failing test's too. Declare it before the server or child
/// process that uses it: locals drop in reverse order, so the server stops
/// first.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Create the directory, emptying a stale one of the same name.
    pub fn new(name: &str) -> ScratchDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "shardstream-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        ScratchDir(dir)
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Defaults for tests: loopback, ephemeral port, no pinning, a scratch data dir.
pub fn test_config() -> Config {
    Config {
        bind: "127.0.0.1".into(),
        port: 0,
        shards: 2,
        pin: false,
        dir: std::env::temp_dir().join(format!("shardstream-test-{}", std::process::id())),
        // Tests that exercise persistence turn it on with their own directory.
        appendonly: false,
        ..Config::default()
    }
}

/// A blocking RESP client that returns each reply as its exact wire text.
pub struct RespClient {
    stream: ClientStream,
    reader: BufReader<Box<dyn Read + Send>>,
}

/// The client's socket: TCP or Unix domain.
enum ClientStream {
    Tcp(TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl ClientStream {
    fn shutdown_write(&self) -> std::io::Result<()> {
        match self {
            ClientStream::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            ClientStream::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            ClientStream::Tcp(s) => s.write_all(bytes),
            ClientStream::Unix(s) => s.write_all(bytes),
        }
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            ClientStream::Tcp(s) => s.set_read_timeout(t),
            ClientStream::Unix(s) => s.set_read_timeout(t),
        }
    }
}

impl RespClient {
    pub fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let reader = BufReader::new(Box::new(stream.try_clone().unwrap()) as Box<dyn Read + Send>);
        RespClient {
            stream: ClientStream::Tcp(stream),
            reader,
        }
    }

    /// Connect to a Unix domain socket (`unixsocket`).
    pub fn connect_unix(path: &Path) -> Self {
        let stream = std::os::unix::net::UnixStream::connect(path).expect("connect unix socket");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let reader = BufReader::new(Box::new(stream.try_clone().unwrap()) as Box<dyn Read + Send>);
        RespClient {
            stream: ClientStream::Unix(stream),
            reader,
        }
    }

    /// Send raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Send one command (RESP multibulk) without reading the reply.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.send_raw(&resp_command(args));
    }

    /// Send a command and return its reply's wire text without the final CRLF,
    /// e.g. `+OK`, `:1`, `$-1`, `*2\r\n$1\r\na\r\n$1\r\nb`.
    pub fn raw<A: AsRef<[u8]>>(&mut self, args: &[A]) -> String {
        self.send(args);
        self.read_reply()
    }

    /// Send a command and return its reply's exact bytes (final CRLF
    /// included): for replies that need not be UTF-8.
    pub fn raw_bytes<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(args);
        let mut out = Vec::new();
        self.read_into(&mut out);
        out
    }

    /// Read one reply (any RESP2/RESP3 type) as wire text without the final CRLF.
    pub fn read_reply(&mut self) -> String {
        let mut out = Vec::new();
        self.read_into(&mut out);
        let mut s = String::from_utf8_lossy(&out).into_owned();
        if s.ends_with("\r\n") {
            s.truncate(s.len() - 2);
        }
        s
    }

    /// Read one bulk-string reply's exact bytes (binary-safe: DUMP payloads).
    pub fn read_bulk_bytes(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.read_into(&mut out);
        let start = out.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
        assert!(out.first() == Some(&b'$'), "not a bulk reply: {out:?}");
        out[start..out.len() - 2].to_vec()
    }

    /// Shut down the sending side (`shutdown(SHUT_WR)`, as `nc -N` does):
    /// the server reads end of file, replies can still be read.
    pub fn shutdown_write(&self) {
        self.stream.shutdown_write().expect("shutdown(SHUT_WR)");
    }

    /// Read replies until the server closes the connection (panics if it
    /// stays open past the read timeout).
    pub fn replies_until_close(&mut self) -> Vec<String> {
        let mut got = Vec::new();
        while !self.reader.fill_buf().expect("read until close").is_empty() {
            got.push(self.read_reply());
        }
        got
    }

    /// Whether the server closed the connection (EOF within a short time).
    pub fn is_closed(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_millis(1000)))
            .unwrap();
        let mut buf = [0u8; 1];
        let closed = matches!(self.reader.read(&mut buf), Ok(0) | Err(_));
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        closed
    }

    fn read_line(&mut self, out: &mut Vec<u8>) -> Vec<u8> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).expect("read");
        assert!(!line.is_empty(), "connection closed while reading a reply");
        out.extend_from_slice(&line);
        line.truncate(line.len().saturating_sub(2));
        line
    }

    /// Read one whole reply into `out`. Iterative (a count of values still
    /// owed), so replies nested thousands deep (scripts') read on a test
    /// thread's stack.
    fn read_into(&mut self, out: &mut Vec<u8>) {
        let mut owed: u64 = 1;
        while owed > 0 {
            owed -= 1;
            let line = self.read_line(out);
            let kind = line[0];
            let n: i64 = std::str::from_utf8(&line[1..])
                .unwrap_or("0")
                .parse()
                .unwrap_or(0);
            match kind {
                b'$' | b'=' | b'!' if n >= 0 => {
                    let mut body = vec![0u8; n as usize + 2];
                    self.reader.read_exact(&mut body).expect("read bulk");
                    out.extend_from_slice(&body);
                }
                b'*' | b'~' | b'>' if n > 0 => owed += n as u64,
                b'%' | b'|' if n > 0 => owed += 2 * n as u64,
                _ => {}
            }
        }
    }
}

/// Find a free loopback port (bind :0, read it, release it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// RESP multibulk encoding of one command.
pub fn resp_command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Poll `f` every 20 ms for up to `secs` seconds; whether it became true.
pub fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether `redis-server` can be run here. With `SHARDSTREAM_REQUIRE_REDIS`
/// set (CI sets it) a missing redis-server is a test failure, not a skip.
pub fn redis_server_installed() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var("SHARDSTREAM_REQUIRE_REDIS").is_err(),
            "redis-server is required (SHARDSTREAM_REQUIRE_REDIS is set) but not installed"
        );
        eprintln!("redis-server not installed: skipping differential comparison");
    }
    found
}

/// The `process_id` INFO reports at `addr`, if something answers there.
fn server_pid(addr: SocketAddr) -> Option<u32> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    let mut text = String::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        text.push_str(&String::from_utf8_lossy(&chunk[..n]));
        if let Some(at) = text.find("process_id:") {
            let rest = &text[at + "process_id:".len()..];
            if let Some(end) = rest.find("\r\n") {
                return rest[..end].trim().parse().ok();
            }
        }
    }
}

/// A real `redis-server` child process for differential tests; killed on drop.
pub struct RedisServer {
    pub addr: SocketAddr,
    child: Child,
}

impl RedisServer {
    /// Start `redis-server` on a free loopback port, or `None` when it is not installed.
    /// Set `SHARDSTREAM_REQUIRE_REDIS=1` (CI does) to make a missing redis-server a failure.
    pub fn start() -> Option<Self> {
        if !redis_server_installed() {
            return None;
        }
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--protected-mode",
                    "yes",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let mut srv = RedisServer { addr, child };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                // The port may have gone to another test's server between
                // `free_port` and redis-server's bind: only this child's
                // own answer counts.
                if let Some(pid) = server_pid(addr) {
                    if pid == srv.child.id() {
                        return Some(srv);
                    }
                    break;
                }
                if let Ok(Some(_)) = srv.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = srv.child.kill();
        }
        panic!("redis-server did not start");
    }

    pub fn client(&self) -> RespClient {
        RespClient::connect(self.addr)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real redis-server in cluster mode owning every slot; killed on drop.
pub struct RedisCluster {
    pub addr: SocketAddr,
    child: Child,
    conf: PathBuf,
}

impl RedisCluster {
    /// Start one, or `None` (skip) when redis-server is not installed and not required.
    pub fn start() -> Option<Self> {
        if !redis_server_installed() {
            return None;
        }
        for _ in 0..5 {
            let port = free_port();
            if port > 55535 {
                continue; // the cluster bus port must fit too
            }
            let conf = std::env::temp_dir().join(format!("shardstream-nodes-{port}.conf"));
            let _ = std::fs::remove_file(&conf);
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(&conf)
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let mut srv = RedisCluster { addr, child, conf };
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut assigned = false;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = srv.child.try_wait() {
                    break;
                }
                if std::net::TcpStream::connect(addr).is_err() {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                let mut c = RespClient::connect(addr);
                if !assigned {
                    assert_eq!(c.raw(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "+OK");
                    assigned = true;
                }
                if c.raw(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                    return Some(srv);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            drop(srv);
        }
        panic!("redis-server in cluster mode did not start");
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.conf);
    }
}

/// Split a script line into arguments (whitespace separated, `"..."` quoting).
pub fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut has = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                has = true;
            }
            c if c.is_whitespace() && !quoted => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => {
                cur.push(c);
                has = true;
            }
        }
    }
    if has {
        out.push(cur);
    }
    out
}

/// Run a script (one command per line; `#` comments) against both servers and
/// assert identical replies. Lines starting with `~` are sent to both but their
/// replies are not compared (timestamps, IDs...).
pub fn assert_same_replies(ours: &mut RespClient, redis: &mut RespClient, script: &str) {
    for (n, line) in script.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (compare, line) = match line.strip_prefix('~') {
            Some(rest) => (false, rest.trim()),
            None => (true, line),
        };
        let args = words(line);
        let a = ours.raw(&args);
        let b = redis.raw(&args);
        if compare {
            assert_eq!(a, b, "line {}: `{line}`\n ours: {a:?}\nredis: {b:?}", n + 1);
        }
    }
}

/// A TCP listener on a free loopback port, for [`server::start_on`].
pub fn bind_free() -> std::net::TcpListener {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0")
}

/// An integer field of INFO `section` (`connected_clients`, ...).
pub fn info_int(c: &mut RespClient, section: &str, field: &str) -> u64 {
    let text = c.raw(&["INFO", section]);
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO {section} lacks {field}: {text}"))
        .trim()
        .parse()
        .expect("an integer field")
}

/// Wait (up to 10 s) until INFO `blocked_clients` is `n`: a reader sent a
/// blocking command and the shard owning its keys has parked it. `cmd=` in
/// CLIENT LIST is not enough: it is set when the command is parsed, and a
/// command for another shard's keys is still on its way there.
pub fn wait_blocked(probe: &mut RespClient, n: u64) {
    assert!(
        eventually(10, || info_int(probe, "clients", "blocked_clients") == n),
        "blocked_clients never became {n}"
    );
}

/// Two keys `{prefix}N` that hash to different shards of a `shards`-shard
/// server.
pub fn keys_on_two_shards(prefix: &str, shards: u16) -> (String, String) {
    use shardstream::route::slot::slot_of;
    let first = format!("{prefix}0");
    let shard = slot_of(first.as_bytes()).shard(shards);
    let other = (1..10_000)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| slot_of(k.as_bytes()).shard(shards) != shard)
        .expect("some key on another shard");
    (first, other)
}

/// The IDs of a stream reply's entries, in order (lines shaped `<ms>-<seq>`).
pub fn entry_ids(reply: &str) -> Vec<&str> {
    reply
        .split("\r\n")
        .filter(|l| {
            l.split_once('-').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.bytes().all(|c| c.is_ascii_digit())
                    && b.bytes().all(|c| c.is_ascii_digit())
            })
        })
        .collect()
}
