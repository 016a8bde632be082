//! MONITOR: every command the server receives, streamed to the clients that
//! asked, one line each in Redis's format:
//!
//! ```text
//! +1339518083.107412 [0 127.0.0.1:60866] "keys" "*"
//! ```
//!
//! (`[<db> unix:<socket path>]` for Unix-socket clients; `[<db> lua]` for
//! the commands a script calls, after its EVAL or FCALL line, each when it
//! has run, in the database it leaves selected). Arguments are
//! quoted as Redis's `sdscatrepr` does: `\\`, `\"`, `\n`, `\r`, `\t`,
//! `\a`, `\b`, printable ASCII as is, any other byte as `\xhh`.
//!
//! # Cost when nobody monitors
//! The connection's dispatch calls [`Monitors::is_active`], one relaxed
//! atomic load, before anything else; only with a monitor attached is a line
//! built (once) and handed to every monitor's channel.
//!
//! # A monitor is a client like the others
//! A monitoring connection stays on its shard thread, flagged as a monitor
//! (`Session::monitor` holds its [`Feed`]); it counts in `connected_clients`
//! and against `maxclients`, and CLIENT LIST shows it with `flags=O`. Its
//! own commands keep being read (pipelined after MONITOR or sent later) and
//! answered the way Redis 7.0 answers a monitor, which Redis flags like a
//! replica: commands that touch the keyspace (flagged `write` or
//! `readonly`, or that may replicate: GET, SET, XADD, EVAL, FCALL, ...) get
//! `ERR Replica can't interact with the keyspace` (see
//! `io::gates::gate_monitor`), the others (PING, ECHO, CLIENT, INFO, SELECT,
//! MULTI, WATCH, ...) run; QUIT, inline or RESP, ends the connection and
//! RESET leaves monitor mode (`cmd::connection`). The idle `timeout` spares
//! it, as Redis spares replicas. A second MONITOR gets no reply at all, as
//! in Redis.
//!
//! # How lines reach the monitor
//! Every shard thread feeds the line of each command it admits into each
//! monitor's bounded channel ([`QUEUE_LINES`] lines) and wakes the monitor's
//! shard thread if it sleeps in `poll` (no polling). That thread moves the
//! lines into the connection's output buffer (at most
//! [`crate::io::conn::MONITOR_OUTPUT_BYTES`] at a time, and only when no
//! reply of the monitor's own is still due, so each of its replies comes
//! before its own command's line, as in Redis) and writes them with its
//! other output. A monitor that reads too slowly makes its channel fill up:
//! it is then disconnected, counted and logged as a client over its output
//! buffer limit (INFO `client_output_buffer_limit_disconnections`). The
//! normal clients' `client-output-buffer-limit`, a monitor's class in Redis,
//! also applies to what is buffered.
//!
//! # Differences from Redis
//! Lines are produced when a command is admitted (Redis: after it ran), so
//! lines from different shard threads may interleave in a slightly
//! different order than the commands ran. The commands of a transaction are
//! shown when EXEC is admitted, so also when a WATCHed key makes EXEC run
//! none of them (Redis then shows EXEC only). A script's `[<db> lua]` lines
//! are produced when its calls run: after every line of its transaction
//! when EXEC runs it, and after the lines of the connection's later
//! commands admitted meanwhile when it runs on another shard thread (Redis
//! shows them right after the script's line). Lines not yet moved to the
//! output buffer when the monitor sends QUIT or RESET are not written.
//! MONITOR inside MULTI is refused when queued (Redis refuses it at EXEC).
//!
//! # Source
//! `monitorCommand`, `replicationFeedMonitors` (redis/src/replication.c),
//! `sdscatrepr` (redis/src/sds.c), the replica check of `processCommand`
//! (redis/src/server.c), 7.0.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use crate::io::socket::Endpoint;
use crate::shard::msg::Outbox;

/// Lines a monitor may have waiting before it is disconnected.
pub const QUEUE_LINES: usize = 100_000;

/// One attached monitor, as the feeders see it.
struct Entry {
    /// The monitor's client id.
    id: u64,
    tx: Sender<Bytes>,
    cut: Arc<AtomicBool>,
    /// The monitor's shard thread, woken when lines arrive.
    thread: Outbox,
}

/// The monitors of one server.
#[derive(Default)]
pub struct Monitors {
    /// Number of attached monitors; read on every command.
    active: AtomicUsize,
    list: Mutex<Vec<Entry>>,
}

/// A monitor's end of its channel, kept in its connection's session and
/// read by its shard thread.
pub struct Feed {
    rx: Receiver<Bytes>,
    /// Set by a feeder that found the channel full: the monitor fell
    /// [`QUEUE_LINES`] behind and must be disconnected.
    cut: Arc<AtomicBool>,
}

impl Feed {
    /// The next waiting line, if any.
    pub fn next_line(&self) -> Option<Bytes> {
        self.rx.try_recv().ok()
    }

    /// Whether lines are waiting.
    pub fn has_lines(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Whether the monitor fell too far behind and must be disconnected.
    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }
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

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Make client `id`, served by the shard thread `thread`, a monitor:
    /// every command admitted from now on is fed to the returned [`Feed`].
    pub fn attach(&self, id: u64, thread: Outbox) -> Feed {
        let (tx, rx) = bounded::<Bytes>(QUEUE_LINES);
        let cut = Arc::new(AtomicBool::new(false));
        let mut l = self.list();
        l.push(Entry {
            id,
            tx,
            cut: cut.clone(),
            thread,
        });
        self.active.store(l.len(), Ordering::Relaxed);
        Feed { rx, cut }
    }

    /// Client `id` stops monitoring (RESET) or went away.
    pub fn detach(&self, id: u64) {
        let mut l = self.list();
        l.retain(|e| e.id != id);
        self.active.store(l.len(), Ordering::Relaxed);
    }

    /// Send the line for command `argv` run by `addr` (a client, or a script) on
    /// database `db` to every monitor, waking each monitor's thread if it
    /// sleeps. A monitor whose channel is full is cut off (its thread
    /// closes it); one whose connection is gone is dropped. `now_us` is the
    /// wall clock in µs since the Unix epoch.
    pub fn feed(&self, now_us: u64, db: usize, addr: Peer<'_>, argv: &[Bytes]) {
        let line = Bytes::from(format_line(now_us, db, addr, argv));
        let mut l = self.list();
        l.retain(|e| match e.tx.try_send(line.clone()) {
            Ok(()) => {
                e.thread.nudge();
                true
            }
            Err(TrySendError::Full(_)) => {
                e.cut.store(true, Ordering::Relaxed);
                e.thread.wake();
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
        self.active.store(l.len(), Ordering::Relaxed);
    }
}

/// Commands MONITOR does not show (Redis: `CMD_ADMIN`, `CMD_SKIP_MONITOR`).
/// The script commands are flagged `skip_monitor` but shown: Redis feeds
/// them itself as they start, so that the commands they call come after
/// them (`evalCommand`, `fcallCommandGeneric`).
pub fn skips(spec: &crate::cmd::CommandSpec) -> bool {
    use crate::cmd::Flags;
    let script = matches!(
        spec.name,
        "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "FCALL" | "FCALL_RO"
    );
    spec.flags.has(Flags::ADMIN) || spec.flags.has(Flags::SKIP_MONITOR) && !script
}

/// Wall clock now, µs since the Unix epoch.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Who ran a command a MONITOR line shows.
#[derive(Clone, Copy)]
pub enum Peer<'a> {
    /// A client at this address: `[<db> 127.0.0.1:60866]`, `[<db> unix:<path>]`.
    Client(&'a Endpoint),
    /// A script (`redis.call` in EVAL, FCALL): `[<db> lua]`.
    Script,
}

/// One MONITOR line, CRLF included. AUTH's arguments (and HELLO's after
/// AUTH, and MIGRATE's AUTH/AUTH2 credentials) are shown as `(redacted)`,
/// as Redis 7 shows them.
pub fn format_line(now_us: u64, db: usize, addr: Peer<'_>, argv: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + argv.iter().map(|a| a.len() + 3).sum::<usize>());
    let peer = match addr {
        Peer::Client(Endpoint::Tcp(a)) => a.to_string(),
        Peer::Client(Endpoint::Unix(path)) => format!("unix:{path}"),
        Peer::Script => "lua".to_string(),
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
        let line = format_line(1_339_518_083_107_412, 3, Peer::Client(&addr), &argv);
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "+1339518083.107412 [3 127.0.0.1:60866] \"set\" \"k\\\"\\\\\" \"a\\r\\n\\t\\a\\b\\x00\\xff~ \"\r\n"
        );
        let unix = Endpoint::Unix("/tmp/s.sock".into());
        let line = format_line(5, 0, Peer::Client(&unix), &["ping".into()]);
        assert_eq!(line, b"+0.000005 [0 unix:/tmp/s.sock] \"ping\"\r\n");
        let line = format_line(5, 2, Peer::Script, &["get".into(), "k".into()]);
        assert_eq!(line, b"+0.000005 [2 lua] \"get\" \"k\"\r\n");
    }

    #[test]
    fn auth_is_redacted() {
        let addr = Endpoint::Tcp("127.0.0.1:1".parse().unwrap());
        let l = format_line(
            0,
            0,
            Peer::Client(&addr),
            &["AUTH".into(), "user".into(), "pw".into()],
        );
        assert!(String::from_utf8(l)
            .unwrap()
            .ends_with("\"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"));
        let l = format_line(
            0,
            0,
            Peer::Client(&addr),
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
