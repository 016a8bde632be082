//! MONITOR: every command the server receives, streamed to the clients that
//! asked, one line each in Redis's format:
//!
//! ```text
//! +1339518083.107412 [0 127.0.0.1:60866] "keys" "*"
//! ```
//!
//! (`[<db> unix:<socket path>]` for Unix-socket clients). Arguments are
//! quoted as Redis's `sdscatrepr` does: `\\`, `\"`, `\n`, `\r`, `\t`,
//! `\a`, `\b`, printable ASCII as is, any other byte as `\xhh`.
//!
//! # Cost when nobody monitors
//! The connection's dispatch calls [`Monitors::is_active`], one relaxed
//! atomic load, before anything else; only with a monitor attached is a line
//! built (once) and handed to every monitor's channel.
//!
//! # How lines reach the monitor
//! A monitoring connection leaves its shard thread: MONITOR duplicates the
//! socket's descriptor for a small writer thread of its own (which writes
//! `+OK` and then each line, and notices the client leaving or sending
//! QUIT or RESET; see [`attach`]) and the shard thread drops its side of the
//! connection. So a slow monitor never holds up a shard thread (lines wait in
//! its channel, at most [`QUEUE_LINES`]; past that it is disconnected, as
//! Redis disconnects a monitor over its output buffer limit).
//!
//! # Differences from Redis
//! Lines are produced when a command is admitted (Redis: after it ran), so
//! commands queued in MULTI appear when queued, and lines from different
//! shard threads may interleave in a slightly different order than the
//! commands ran. A monitoring client is not listed by CLIENT LIST.
//!
//! # Source
//! `monitorCommand`, `replicationFeedMonitors` (redis/src/replication.c),
//! `sdscatrepr` (redis/src/sds.c), 7.x.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};

use crate::io::socket::Endpoint;

/// Lines a monitor may have waiting before it is disconnected.
pub const QUEUE_LINES: usize = 100_000;

/// The monitors of one server.
#[derive(Default)]
pub struct Monitors {
    /// Number of attached monitors; read on every command.
    active: AtomicUsize,
    list: Mutex<Vec<Sender<Bytes>>>,
}

impl Monitors {
    /// Whether any client monitors (one relaxed load: the hot-path check).
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed) != 0
    }

    /// Number of attached monitors.
    pub fn count(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    fn add(&self, tx: Sender<Bytes>) {
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.push(tx);
        self.active.store(l.len(), Ordering::Relaxed);
    }

    /// Send the line for command `argv` run by the client at `addr` on
    /// database `db` to every monitor; monitors gone or too far behind are
    /// dropped. `now_us` is the wall clock in µs since the Unix epoch.
    pub fn feed(&self, now_us: u64, db: usize, addr: &Endpoint, argv: &[Bytes]) {
        let line = Bytes::from(format_line(now_us, db, addr, argv));
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|tx| match tx.try_send(line.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
        });
        self.active.store(l.len(), Ordering::Relaxed);
    }
}

/// Wall clock now, µs since the Unix epoch.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One MONITOR line, CRLF included. AUTH's arguments (and HELLO's after
/// AUTH, and MIGRATE's AUTH/AUTH2 credentials) are shown as `(redacted)`,
/// as Redis 7 shows them.
pub fn format_line(now_us: u64, db: usize, addr: &Endpoint, argv: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + argv.iter().map(|a| a.len() + 3).sum::<usize>());
    let peer = match addr {
        Endpoint::Tcp(a) => a.to_string(),
        Endpoint::Unix(path) => format!("unix:{path}"),
    };
    let _ = write!(
        out,
        "+{}.{:06} [{db} {peer}] ",
        now_us / 1_000_000,
        now_us % 1_000_000
    );
    let redact_from = match argv.first() {
        Some(a) if a.eq_ignore_ascii_case(b"AUTH") => 1,
        Some(a) if a.eq_ignore_ascii_case(b"HELLO") => argv
            .iter()
            .position(|x| x.eq_ignore_ascii_case(b"AUTH"))
            .map_or(usize::MAX, |i| i + 1),
        _ => usize::MAX,
    };
    let secrets = match argv.first() {
        Some(a) if a.eq_ignore_ascii_case(b"MIGRATE") => crate::cmd::migrate::redacted_args(argv),
        _ => Vec::new(),
    };
    for (j, a) in argv.iter().enumerate() {
        if j > 0 {
            out.push(b' ');
        }
        if secrets.contains(&j)
            || j >= redact_from && (argv[0].eq_ignore_ascii_case(b"AUTH") || j < redact_from + 2)
        {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            repr(&mut out, a);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `s` quoted as `sdscatrepr` quotes it.
pub fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(b'"');
}

/// A blocking duplicate of a client socket.
enum Stream {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Stream {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(b),
            Stream::Unix(s) => s.write_all(b),
        }
    }

    /// Bytes the client sent, without waiting: `Ok(None)` when none,
    /// `Ok(Some(empty))` at EOF.
    fn poll_input(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        let r = match self {
            Stream::Tcp(s) => {
                s.set_nonblocking(true)?;
                let r = s.read(buf);
                s.set_nonblocking(false)?;
                r
            }
            Stream::Unix(s) => {
                s.set_nonblocking(true)?;
                let r = s.read(buf);
                s.set_nonblocking(false)?;
                r
            }
        };
        match r {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Make the client whose socket is `fd` (a TCP or Unix client, as
/// `addr` says) a monitor: duplicate the descriptor, start its writer
/// thread (which answers `+OK` first) and register it. The caller then
/// drops its own side of the connection without replying.
///
/// # Errors
/// The OS error of `dup` or of starting the thread.
pub fn attach(monitors: &Monitors, fd: i32, addr: &Endpoint) -> std::io::Result<()> {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` is the caller's open socket; `dup` returns a new
    // descriptor for the same socket that we then own exclusively.
    let dup = unsafe { libc::dup(fd) };
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `dup` is a fresh descriptor owned by nobody else.
    let mut stream = unsafe {
        match addr {
            Endpoint::Tcp(_) => Stream::Tcp(std::net::TcpStream::from_raw_fd(dup)),
            Endpoint::Unix(_) => Stream::Unix(std::os::unix::net::UnixStream::from_raw_fd(dup)),
        }
    };
    match &stream {
        Stream::Tcp(s) => s.set_nonblocking(false)?,
        Stream::Unix(s) => s.set_nonblocking(false)?,
    }
    let (tx, rx) = bounded::<Bytes>(QUEUE_LINES);
    // Registered before `+OK` leaves: every command the client can send
    // after seeing the reply is shown (lines wait in the channel meanwhile).
    monitors.add(tx);
    stream.write_all(b"+OK\r\n")?;
    std::thread::Builder::new()
        .name("monitor".into())
        .spawn(move || write_lines(stream, rx))?;
    Ok(())
}

/// The writer thread: lines out; every 100 ms without lines, look at the
/// input: EOF or an error ends the monitor, QUIT / RESET end it with `+OK`
/// / `+RESET` (other input is ignored, as Redis ignores a monitor's commands).
fn write_lines(mut s: Stream, rx: Receiver<Bytes>) {
    let mut buf = [0u8; 4096];
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                let mut batch = line.to_vec();
                while let Ok(l) = rx.try_recv() {
                    batch.extend_from_slice(&l);
                    if batch.len() > 1 << 16 {
                        break;
                    }
                }
                if s.write_all(&batch).is_err() {
                    return;
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        match s.poll_input(&mut buf) {
            Ok(None) => {}
            Ok(Some(0)) | Err(_) => return,
            Ok(Some(n)) => {
                let text = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
                if text.contains("quit") {
                    let _ = s.write_all(b"+OK\r\n");
                    return;
                }
                if text.contains("reset") {
                    let _ = s.write_all(b"+RESET\r\n");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quote_as_redis() {
        let addr = Endpoint::Tcp("127.0.0.1:60866".parse().unwrap());
        let argv: Vec<Bytes> = vec![
            "set".into(),
            "k\"\\".into(),
            Bytes::from(&b"a\r\n\t\x07\x08\x00\xff~ "[..]),
        ];
        let line = format_line(1_339_518_083_107_412, 3, &addr, &argv);
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "+1339518083.107412 [3 127.0.0.1:60866] \"set\" \"k\\\"\\\\\" \"a\\r\\n\\t\\a\\b\\x00\\xff~ \"\r\n"
        );
        let unix = Endpoint::Unix("/tmp/s.sock".into());
        let line = format_line(5, 0, &unix, &["ping".into()]);
        assert_eq!(line, b"+0.000005 [0 unix:/tmp/s.sock] \"ping\"\r\n");
    }

    #[test]
    fn auth_is_redacted() {
        let addr = Endpoint::Tcp("127.0.0.1:1".parse().unwrap());
        let l = format_line(0, 0, &addr, &["AUTH".into(), "user".into(), "pw".into()]);
        assert!(String::from_utf8(l)
            .unwrap()
            .ends_with("\"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"));
        let l = format_line(
            0,
            0,
            &addr,
            &[
                "hello".into(),
                "3".into(),
                "auth".into(),
                "u".into(),
                "p".into(),
                "setname".into(),
                "n".into(),
            ],
        );
        assert!(String::from_utf8(l).unwrap().ends_with(
            "\"hello\" \"3\" \"auth\" \"(redacted)\" \"(redacted)\" \"setname\" \"n\"\r\n"
        ));
    }
}
