//! MIGRATE's outgoing side: blocking connections from a shard thread to
//! target instances, cached per `host:port` for reuse.
//!
//! MIGRATE blocks the shard that owns its keys while it talks to the target,
//! as Redis blocks its whole server: the shard connects with a timeout,
//! writes one pipeline and reads one reply line per command, each socket
//! operation bounded by the command's timeout. Each shard keeps its own
//! cache ([`SocketCache`], a field of [`ShardDb`](crate::shard::db::ShardDb)),
//! so nothing here is shared between threads.
//!
//! The command itself (what is sent, how replies are judged) lives in
//! [`crate::cmd::migrate`]; this module only knows sockets and lines.
//!
//! # Source
//! `migrateGetSocket`, `migrateCloseSocket`, `migrateCloseTimedoutSockets`,
//! redis/src/cluster.c (7.x; the same in 8.x).

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Most sockets a shard keeps open (Redis's `MIGRATE_SOCKET_CACHE_ITEMS`);
/// opening one more closes the least recently used.
pub const MAX_CACHED_SOCKETS: usize = 64;

/// A cached socket unused this long is closed by the shard's once-a-second
/// cron (Redis's `MIGRATE_SOCKET_CACHE_TTL`, 10 s).
pub const IDLE_CLOSE: Duration = Duration::from_secs(10);

/// Longest reply line accepted from a target, bytes. The replies MIGRATE
/// reads are one-line status or error replies; anything longer is treated
/// as a broken connection rather than buffered without bound.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// [`TargetConn::last_db`] of a socket with no known database (Redis's
/// -1). As in Redis the marker is also a database number: MIGRATE to
/// database -1 sends no SELECT on such a socket.
pub const NO_DB: i64 = -1;

/// One open connection to a target instance.
pub struct TargetConn {
    stream: BufReader<TcpStream>,
    /// The database the last successful MIGRATE selected on this socket
    /// (Redis's `last_dbid`), or [`NO_DB`]: MIGRATE sends SELECT when its
    /// database differs from this.
    pub last_db: i64,
    last_use: Instant,
}

impl TargetConn {
    /// Write all of `bytes`; each write waits at most the socket's timeout.
    ///
    /// # Errors
    /// The socket's error; a timeout reads as [`is_timeout`].
    pub fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.get_mut().write_all(bytes)?;
        self.stream.get_mut().flush()
    }

    /// Read one reply line, without its line end (`\r\n` or `\n`).
    ///
    /// # Errors
    /// The socket's error; `UnexpectedEof` when the target closed the
    /// connection; `InvalidData` for a line over [`MAX_LINE_BYTES`].
    pub fn read_line(&mut self) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        loop {
            let buf = self.stream.fill_buf()?;
            if buf.is_empty() {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            line.extend_from_slice(&buf[..take]);
            self.stream.consume(take);
            if done {
                break;
            }
            if line.len() > MAX_LINE_BYTES {
                return Err(io::ErrorKind::InvalidData.into());
            }
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        Ok(line)
    }
}

/// Why [`SocketCache::get`] has no connection to give.
#[derive(Debug)]
pub enum ConnectError {
    /// No attempt could start: the host did not resolve, the port is
    /// negative, or the kernel refused at once (no route, address not
    /// available). Redis answers `IOERR error or timeout connecting to the
    /// client`.
    NotStarted(io::Error),
    /// The attempt started but did not complete (refused, timed out).
    /// Redis's blocking connect reports success for a started attempt and
    /// only learns of the failure when it writes; see
    /// [`crate::cmd::migrate`].
    Failed(io::Error),
}

/// Whether `e` is a socket timeout (Redis's `errno == ETIMEDOUT`): MIGRATE
/// does not retry after one.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// A shard's open MIGRATE sockets, by `host:port` as the command spelled
/// them (so `localhost` and `127.0.0.1` are two entries, as in Redis).
#[derive(Default)]
pub struct SocketCache {
    conns: HashMap<String, TargetConn>,
}

impl SocketCache {
    /// The cached socket for `name` (`host:port`), or a new one connected to
    /// `host`:`port` within `timeout` (also its read and write timeout).
    /// A reused socket gets `timeout` as its new read and write timeout.
    ///
    /// `port` is read as Redis passes it on: a negative port does not
    /// resolve, others are taken modulo 65536.
    ///
    /// # Errors
    /// See [`ConnectError`].
    pub fn get(
        &mut self,
        name: &str,
        host: &str,
        port: i64,
        timeout: Duration,
    ) -> Result<&mut TargetConn, ConnectError> {
        let now = Instant::now();
        if !self.conns.contains_key(name) {
            let stream = connect(host, port, timeout)?;
            if self.conns.len() >= MAX_CACHED_SOCKETS {
                let oldest = self
                    .conns
                    .iter()
                    .min_by_key(|(_, c)| c.last_use)
                    .map(|(n, _)| n.clone());
                if let Some(oldest) = oldest {
                    self.conns.remove(&oldest);
                }
            }
            self.conns.insert(
                name.to_string(),
                TargetConn {
                    stream: BufReader::new(stream),
                    last_db: NO_DB,
                    last_use: now,
                },
            );
        }
        let conn = self
            .conns
            .get_mut(name)
            .ok_or(ConnectError::NotStarted(io::ErrorKind::NotConnected.into()))?;
        conn.last_use = now;
        let sock = conn.stream.get_ref();
        sock.set_read_timeout(Some(timeout))
            .and_then(|()| sock.set_write_timeout(Some(timeout)))
            .map_err(ConnectError::Failed)?;
        Ok(conn)
    }

    /// Close and forget the socket for `name` (after an I/O error).
    pub fn close(&mut self, name: &str) {
        self.conns.remove(name);
    }

    /// Close the sockets unused for [`IDLE_CLOSE`] or longer; how many.
    pub fn close_idle(&mut self, now: Instant) -> usize {
        let before = self.conns.len();
        self.conns
            .retain(|_, c| now.saturating_duration_since(c.last_use) < IDLE_CLOSE);
        before - self.conns.len()
    }

    /// Number of open sockets.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether no socket is open.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }
}

/// Connect to `host`:`port` within `timeout`, trying each resolved address
/// in turn; the socket gets TCP_NODELAY and `timeout` as its read and write
/// timeout.
fn connect(host: &str, port: i64, timeout: Duration) -> Result<TcpStream, ConnectError> {
    if port < 0 {
        return Err(ConnectError::NotStarted(io::ErrorKind::InvalidInput.into()));
    }
    let port = (port & 0xFFFF) as u16;
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(ConnectError::NotStarted)?;
    let mut last = ConnectError::NotStarted(io::ErrorKind::AddrNotAvailable.into());
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                let set = s
                    .set_nodelay(true)
                    .and_then(|()| s.set_read_timeout(Some(timeout)))
                    .and_then(|()| s.set_write_timeout(Some(timeout)));
                return set.map(|()| s).map_err(ConnectError::Failed);
            }
            Err(e) if started(&e) => last = ConnectError::Failed(e),
            Err(e) => {
                if matches!(last, ConnectError::NotStarted(_)) {
                    last = ConnectError::NotStarted(e);
                }
            }
        }
    }
    Err(last)
}

/// Whether a failed connect had started (the kernel sent a SYN): refused,
/// reset, timed out, or unreachable as learnt from the network. A
/// non-blocking `connect` fails at once only for the other errors.
fn started(e: &io::Error) -> bool {
    if e.kind() == io::ErrorKind::TimedOut {
        return true;
    }
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED | libc::ECONNRESET | libc::ETIMEDOUT | libc::EHOSTUNREACH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn reuses_and_closes_idle_sockets() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = i64::from(l.local_addr().unwrap().port());
        let name = format!("127.0.0.1:{port}");
        let mut cache = SocketCache::default();
        let t = Duration::from_millis(500);
        assert_eq!(
            cache.get(&name, "127.0.0.1", port, t).unwrap().last_db,
            NO_DB
        );
        cache.get(&name, "127.0.0.1", port, t).unwrap().last_db = 3;
        assert_eq!(cache.get(&name, "127.0.0.1", port, t).unwrap().last_db, 3);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.close_idle(Instant::now()), 0);
        assert_eq!(cache.close_idle(Instant::now() + IDLE_CLOSE), 1);
        assert!(cache.is_empty());
    }

    #[test]
    fn reads_lines_and_reports_eof() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = i64::from(l.local_addr().unwrap().port());
        let mut cache = SocketCache::default();
        let conn = cache
            .get("t", "127.0.0.1", port, Duration::from_secs(2))
            .unwrap();
        let (mut peer, _) = l.accept().unwrap();
        peer.write_all(b"+OK\r\n-BUSYKEY x\r\n").unwrap();
        drop(peer);
        assert_eq!(conn.read_line().unwrap(), b"+OK");
        assert_eq!(conn.read_line().unwrap(), b"-BUSYKEY x");
        let e = conn.read_line().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(!is_timeout(&e));
    }

    #[test]
    fn failed_connects_say_whether_they_started() {
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            i64::from(l.local_addr().unwrap().port())
        };
        let t = Duration::from_millis(200);
        // Refused (port 0 too, and ports past 65535 wrap as in Redis).
        for port in [closed, 0, 65536] {
            assert!(matches!(
                connect("127.0.0.1", port, t),
                Err(ConnectError::Failed(_))
            ));
        }
        for (host, port) in [("127.0.0.1", -1), ("", 6379)] {
            assert!(matches!(
                connect(host, port, t),
                Err(ConnectError::NotStarted(_))
            ));
        }
    }
}
