//! The listening sockets: TCP bound with Redis's `tcp-backlog`, and the Unix
//! domain socket of `unixsocket` / `unixsocketperm`.
//!
//! `std::net::TcpListener::bind` picks the `listen(2)` backlog itself; Redis
//! lets the operator choose it (`tcp-backlog`, default 511) because a burst
//! of connections beyond the queue gets SYNs dropped and multi-second
//! reconnect delays. [`bind_listener`] binds like std does (`SO_REUSEADDR`,
//! close-on-exec) but with the given backlog.

use std::io;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;

/// Bind a listening TCP socket on `host:port` with a `listen(2)` queue of
/// `backlog` connections (the kernel caps it at `net.core.somaxconn`).
/// `host` may be a name; its addresses are tried in order and the first one
/// that binds wins. Port 0 picks a free port.
///
/// # Errors
/// Name resolution, or the last address's socket/bind/listen error.
/// # Source
/// `anetTcpServer` / `anetListen`, redis/src/anet.c (`SO_REUSEADDR`, then
/// `listen(fd, server.tcp_backlog)`).
pub fn bind_listener(host: &str, port: u16, backlog: i32) -> io::Result<TcpListener> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match bind_one(addr, backlog) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}

fn bind_one(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let domain = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: plain syscall; the result is checked before use.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh, valid descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: `one` outlives the call and the length matches its type.
    let rc = unsafe {
        libc::setsockopt(
            owned.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let rc = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_port = a.port().to_be();
            sa.sin_addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            };
            // SAFETY: `sa` is a valid sockaddr_in and the length is its size.
            unsafe {
                libc::bind(
                    owned.as_raw_fd(),
                    (&sa as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            }
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_in6 is plain data; all-zero is a valid value.
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_port = a.port().to_be();
            sa.sin6_flowinfo = a.flowinfo();
            sa.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sa.sin6_scope_id = a.scope_id();
            // SAFETY: `sa` is a valid sockaddr_in6 and the length is its size.
            unsafe {
                libc::bind(
                    owned.as_raw_fd(),
                    (&sa as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                )
            }
        }
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::listen(owned.as_raw_fd(), backlog) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpListener::from(owned))
}

/// Listen on the Unix domain socket `path`, with permissions `perm` (octal
/// `unixsocketperm`; 0 leaves them to the umask). A file already at `path`
/// (a socket left by an earlier run) is removed first, as Redis does.
///
/// # Errors
/// The bind/listen error, or the `chmod` error for `perm`.
/// # Source
/// `anetUnixServer`, redis/src/anet.c (unlink, bind, listen, chmod).
pub fn bind_unix(path: &Path, perm: u32) -> io::Result<UnixListener> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    if perm != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_v4_and_accepts() {
        let l = bind_listener("127.0.0.1", 0, 511).unwrap();
        let addr = l.local_addr().unwrap();
        assert_ne!(addr.port(), 0);
        let _c = std::net::TcpStream::connect(addr).unwrap();
        assert!(l.accept().is_ok());
        // The port is taken now: a second bind fails like std's does.
        assert!(bind_listener("127.0.0.1", addr.port(), 511).is_err());
    }

    #[test]
    fn resolves_names() {
        let l = bind_listener("localhost", 0, 16).unwrap();
        assert!(l.local_addr().unwrap().ip().is_loopback());
    }

    #[test]
    fn unix_socket_with_perm_replaces_a_stale_file() {
        let dir = std::env::temp_dir().join(format!("ss-unix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("redis.sock");
        std::fs::write(&path, b"stale").unwrap();
        let l = bind_unix(&path, 0o700).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let _c = std::os::unix::net::UnixStream::connect(&path).unwrap();
        assert!(l.accept().is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
