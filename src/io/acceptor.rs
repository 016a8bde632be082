//! The acceptor: one thread that accepts connections (TCP, and Unix domain
//! with `unixsocket`) and hands each to
//! the shard thread serving the fewest connections, which then owns it
//! (reads, runs, writes) until it closes or is handed over. It sleeps in
//! `poll` between connections with no timeout (shutdown wakes it through its
//! waker), so an idle acceptor neither costs a core nor preempts one.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};

use crate::io::socket::{Endpoint, Socket};
use crate::server::Shared;
use crate::shard::msg::ShardMsg;

/// Token of the acceptor's waker (shutdown).
pub const WAKER: Token = Token(usize::MAX);
/// Token of the TCP listening socket.
const TCP_LISTENER: Token = Token(0);
/// Token of the Unix domain listening socket.
const UNIX_LISTENER: Token = Token(1);
/// After an `accept` error (EMFILE: out of file descriptors) the acceptor
/// retries at this pace until accepting works again; otherwise it sleeps
/// until a connection or its waker.
const RETRY: Duration = Duration::from_millis(100);

/// The sockets a server listens on: TCP (`port`), a Unix domain socket
/// (`unixsocket`), or both. At least one is present (see [`crate::server::start`]).
#[derive(Default)]
pub struct Listeners {
    pub tcp: Option<std::net::TcpListener>,
    /// The listener and its path (`addr=` of its clients).
    pub unix: Option<(std::os::unix::net::UnixListener, Arc<str>)>,
}

/// Start the acceptor on `poll` (whose waker, registered as [`WAKER`], is
/// `shared.acceptor_waker`).
pub fn spawn_acceptor(
    poll: Poll,
    listeners: Listeners,
    shared: Arc<Shared>,
) -> io::Result<JoinHandle<()>> {
    let mut tcp = listeners.tcp.map(TcpListener::from_std);
    if let Some(l) = tcp.as_mut() {
        poll.registry()
            .register(l, TCP_LISTENER, Interest::READABLE)?;
    }
    let mut unix = match listeners.unix {
        Some((l, path)) => {
            l.set_nonblocking(true)?;
            Some((UnixListener::from_std(l), path))
        }
        None => None,
    };
    if let Some((l, _)) = unix.as_mut() {
        poll.registry()
            .register(l, UNIX_LISTENER, Interest::READABLE)?;
    }
    thread::Builder::new()
        .name("acceptor".into())
        .spawn(move || run(poll, tcp, unix, shared))
}

fn run(
    mut poll: Poll,
    tcp: Option<TcpListener>,
    unix: Option<(UnixListener, Arc<str>)>,
    shared: Arc<Shared>,
) {
    let mut events = Events::with_capacity(16);
    let mut retry = false;
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        if let Err(e) = poll.poll(&mut events, retry.then_some(RETRY)) {
            if e.kind() != io::ErrorKind::Interrupted {
                log::warn!("acceptor: poll failed: {e}");
                return;
            }
        }
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        // Accept on every wake-up, not only on LISTENER events: after EMFILE
        // the edge-triggered listener reports nothing new until the next
        // connection, so the retry timeout tries again.
        retry = false;
        if let Some(l) = &tcp {
            retry |= !accept_all_tcp(l, &shared);
        }
        if let Some((l, path)) = &unix {
            retry |= !accept_all_unix(l, path, &shared);
        }
    }
}

/// Give a new connection to the least loaded shard thread.
fn hand_out(shared: &Shared, sock: Socket, addr: Endpoint) {
    let t = least_loaded(shared);
    shared.thread_conns[t].fetch_add(1, Ordering::Relaxed);
    shared.threads[t].send(ShardMsg::Accept(sock, addr));
}

/// Accept Unix domain connections until the listener has nothing more.
/// Their address is the socket's path (`addr=/path:0`, as Redis shows them).
/// False when `accept` failed (EMFILE and friends): try again later.
fn accept_all_unix(listener: &UnixListener, path: &Arc<str>, shared: &Shared) -> bool {
    loop {
        match listener.accept() {
            Ok((sock, _)) => hand_out(shared, Socket::Unix(sock), Endpoint::Unix(path.clone())),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("Error accepting a client connection: {e} (conn: {path})");
                return false;
            }
        }
    }
}

/// Accept TCP connections until the listener has nothing more, handing each out.
/// False when `accept` failed (EMFILE and friends): try again later.
fn accept_all_tcp(listener: &TcpListener, shared: &Shared) -> bool {
    loop {
        match listener.accept() {
            Ok((sock, addr)) => {
                // Socket options as of accept time, as Redis sets them
                // (`anetEnableTcpNoDelay`, `anetKeepAlive` in acceptCommonHandler).
                let _ = sock.set_nodelay(true);
                let keepalive_s = shared.config.read().map(|c| c.tcp_keepalive_s).unwrap_or(0);
                if keepalive_s > 0 {
                    crate::io::set_keepalive(&sock, keepalive_s);
                }
                hand_out(shared, Socket::Tcp(sock), Endpoint::Tcp(addr));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("Error accepting a client connection: {e}");
                return false;
            }
        }
    }
}

/// The shard thread serving the fewest connections (the lowest index on ties).
fn least_loaded(shared: &Shared) -> usize {
    (0..shared.thread_conns.len())
        .min_by_key(|&i| shared.thread_conns[i].load(Ordering::Relaxed))
        .unwrap_or(0)
}
