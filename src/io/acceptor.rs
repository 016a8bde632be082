//! The acceptor: one thread that accepts TCP connections and hands each to
//! the shard thread serving the fewest connections, which then owns it
//! (reads, runs, writes) until it closes or is handed over. It sleeps in
//! `poll` between connections, so it costs no core.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};

use crate::server::Shared;
use crate::shard::msg::ShardMsg;

/// Token of the acceptor's waker (shutdown).
pub const WAKER: Token = Token(usize::MAX);
/// Token of the listening socket.
const LISTENER: Token = Token(0);
/// Longest the acceptor sleeps: it retries `accept` after transient errors
/// (EMFILE) at this pace and notices shutdown even without a wake-up.
const TICK: Duration = Duration::from_millis(100);

/// Start the acceptor on `poll` (whose waker, registered as [`WAKER`], is
/// `shared.acceptor_waker`).
pub fn spawn_acceptor(
    poll: Poll,
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
) -> io::Result<JoinHandle<()>> {
    let mut listener = TcpListener::from_std(listener);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    thread::Builder::new()
        .name("acceptor".into())
        .spawn(move || run(poll, listener, shared))
}

fn run(mut poll: Poll, listener: TcpListener, shared: Arc<Shared>) {
    let mut events = Events::with_capacity(16);
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        if let Err(e) = poll.poll(&mut events, Some(TICK)) {
            if e.kind() != io::ErrorKind::Interrupted {
                eprintln!("acceptor: poll failed: {e}");
                return;
            }
        }
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        // Accept on every wake-up, not only on LISTENER events: after EMFILE
        // the edge-triggered listener reports nothing new until the next
        // connection, so the tick retries.
        accept_all(&listener, &shared);
    }
}

/// Accept until the listener has nothing more, handing each connection out.
fn accept_all(listener: &TcpListener, shared: &Shared) {
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
                let t = least_loaded(shared);
                shared.thread_conns[t].fetch_add(1, Ordering::Relaxed);
                shared.threads[t].send(ShardMsg::Accept(sock, addr));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // EMFILE and friends: try again on the next tick.
                eprintln!("acceptor: accept failed: {e}");
                return;
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
