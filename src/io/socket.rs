//! A client's socket, TCP or Unix domain, and the addresses CLIENT LIST shows.
//!
//! Shard threads serve both kinds the same way: the acceptor hands each
//! accepted socket over as a [`Socket`], and a connection reads, writes and
//! registers it with `poll` without knowing which kind it is.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};

/// A connected client socket.
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl std::os::fd::AsRawFd for Socket {
    /// The descriptor CLIENT LIST shows as `fd=`.
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            Socket::Tcp(s) => s.as_raw_fd(),
            Socket::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// One end of a client connection as Redis prints it in CLIENT LIST
/// (`addr=` and `laddr=`): `ip:port` for TCP, `path:0` for a Unix socket.
///
/// # Source
/// `genClientAddrString` / `connFormatAddr`, redis/src/networking.c (7.x):
/// a Unix client's `addr` and `laddr` are both the server's socket path with
/// port 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(SocketAddr),
    Unix(Arc<str>),
}

impl Endpoint {
    /// The IP of a TCP endpoint; `None` for a Unix socket.
    pub fn ip(&self) -> Option<std::net::IpAddr> {
        match self {
            Endpoint::Tcp(a) => Some(a.ip()),
            Endpoint::Unix(_) => None,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(a) => write!(f, "{a}"),
            Endpoint::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

impl Socket {
    /// The server's end of the connection (`laddr=`); `fallback` when the
    /// kernel cannot say (a TCP socket already reset).
    pub fn local_endpoint(&self, fallback: &Endpoint) -> Endpoint {
        match self {
            Socket::Tcp(s) => s
                .local_addr()
                .map(Endpoint::Tcp)
                .unwrap_or_else(|_| fallback.clone()),
            Socket::Unix(_) => fallback.clone(),
        }
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.flush(),
            Socket::Unix(s) => s.flush(),
        }
    }
}

impl Source for Socket {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.register(registry, token, interests),
            Socket::Unix(s) => s.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.reregister(registry, token, interests),
            Socket::Unix(s) => s.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.deregister(registry),
            Socket::Unix(s) => s.deregister(registry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_print_as_redis_does() {
        let tcp = Endpoint::Tcp("127.0.0.1:6379".parse().unwrap());
        assert_eq!(tcp.to_string(), "127.0.0.1:6379");
        let unix = Endpoint::Unix("/tmp/redis.sock".into());
        assert_eq!(unix.to_string(), "/tmp/redis.sock:0");
        assert_eq!(unix.ip(), None);
    }
}
