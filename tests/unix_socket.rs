//! Unix domain sockets (`unixsocket`, `unixsocketperm`) and `port 0`
//! meaning "no TCP", over real sockets in a temporary directory.
mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{test_config, RespClient, ScratchDir, TestServer};
use shardstream::config::Config;

/// A server with `shards` shards on TCP and on `dir/redis.sock` (mode 700).
fn start(dir: &Path, shards: u16) -> (TestServer, PathBuf) {
    let path = dir.join("redis.sock");
    let srv = TestServer::with_config(Config {
        shards,
        unixsocket: Some(path.clone()),
        unixsocketperm: 0o700,
        ..test_config()
    });
    (srv, path)
}

#[test]
fn exact_replies_and_socket_mode() {
    let dir = ScratchDir::new("unix-replies");
    let (srv, path) = start(&dir, 2);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let mut c = RespClient::connect_unix(&path);
    assert_eq!(c.raw(&["PING"]), "+PONG");
    assert_eq!(c.raw(&["XADD", "s", "1-1", "f", "v"]), "$3\r\n1-1");
    assert_eq!(
        c.raw(&["XRANGE", "s", "-", "+"]),
        "*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv"
    );
    assert_eq!(
        c.raw(&["XADD", "s"]),
        "-ERR wrong number of arguments for 'xadd' command"
    );
    // unixsocketgroup (Redis 8) is kept but changes nothing here.
    assert_eq!(
        c.raw(&["CONFIG", "GET", "unix*"]),
        format!(
            "*6\r\n$10\r\nunixsocket\r\n${}\r\n{}\r\n$14\r\nunixsocketperm\r\n$3\r\n700\r\n\
             $15\r\nunixsocketgroup\r\n$0\r\n",
            path.display().to_string().len(),
            path.display()
        )
    );
    // The same data over TCP: one server, two kinds of listener.
    assert_eq!(srv.client().raw(&["XLEN", "s"]), ":1");
    drop(srv);
    assert!(!path.exists(), "the socket file is removed at shutdown");
}

#[test]
fn pipelined_commands_over_keys_of_every_shard() {
    let dir = ScratchDir::new("unix-pipeline");
    let (_srv, path) = start(&dir, 4);
    let mut c = RespClient::connect_unix(&path);
    let mut batch = Vec::new();
    for i in 0..200 {
        batch.extend(common::resp_command(&[
            "XADD",
            &format!("k{}", i % 17),
            "*",
            "n",
            &i.to_string(),
        ]));
    }
    for i in 0..17 {
        batch.extend(common::resp_command(&["XLEN", &format!("k{i}")]));
    }
    c.send_raw(&batch);
    for _ in 0..200 {
        assert!(c.read_reply().starts_with('$'));
    }
    let total: i64 = (0..17)
        .map(|_| c.read_reply()[1..].parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, 200);
}

#[test]
fn blocked_xreadgroup_woken_by_xadd_from_another_unix_client() {
    let dir = ScratchDir::new("unix-block");
    let (_srv, path) = start(&dir, 2);
    let mut admin = RespClient::connect_unix(&path);
    assert_eq!(
        admin.raw(&["XGROUP", "CREATE", "jobs", "g", "$", "MKSTREAM"]),
        "+OK"
    );
    let mut reader = RespClient::connect_unix(&path);
    reader.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "0",
        "STREAMS",
        "jobs",
        ">",
    ]);
    // Blocked clients show flags=b in CLIENT LIST: wait for it, then write.
    assert!(common::eventually(10, || admin
        .raw(&["CLIENT", "LIST"])
        .contains("flags=b")));
    assert_eq!(admin.raw(&["XADD", "jobs", "5-1", "f", "v"]), "$3\r\n5-1");
    assert_eq!(
        reader.read_reply(),
        "*1\r\n*2\r\n$4\r\njobs\r\n*1\r\n*2\r\n$3\r\n5-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv"
    );
    assert_eq!(admin.raw(&["XACK", "jobs", "g", "5-1"]), ":1");
}

#[test]
fn client_list_shows_the_socket_path_as_redis_does() {
    let dir = ScratchDir::new("unix-clientlist");
    let (srv, path) = start(&dir, 1);
    let mut c = RespClient::connect_unix(&path);
    let list = c.raw(&["CLIENT", "INFO"]);
    let want = format!("addr={p}:0 laddr={p}:0 ", p = path.display());
    assert!(list.contains(&want), "{list:?} lacks {want:?}");
    assert!(list.contains(" flags=U "), "{list:?}");
    // TCP clients keep ip:port, and CLIENT KILL ADDR finds a Unix client.
    let mut tcp = srv.client();
    let all = tcp.raw(&["CLIENT", "LIST"]);
    assert!(
        all.contains(&want) && all.contains("addr=127.0.0.1:"),
        "{all}"
    );
    assert_eq!(
        tcp.raw(&["CLIENT", "KILL", "ADDR", &format!("{}:0", path.display())]),
        ":1"
    );
    assert!(c.is_closed());
}

#[test]
fn port_0_means_unix_socket_only() {
    let dir = ScratchDir::new("unix-port0");
    let path = dir.join("redis.sock");
    let handle = shardstream::server::start(Config {
        port: 0,
        unixsocket: Some(path.clone()),
        ..test_config()
    })
    .expect("starts on the Unix socket alone");
    assert_eq!(handle.addr().port(), 0);
    let mut c = RespClient::connect_unix(&path);
    assert_eq!(
        c.raw(&["CONFIG", "GET", "port"]),
        "*2\r\n$4\r\nport\r\n$1\r\n0"
    );
    let info = c.raw(&["INFO", "server"]);
    assert!(info.contains("tcp_port:0\r\n"), "{info}");
    handle.shutdown();
}

#[test]
fn no_listener_at_all_refuses_to_start() {
    let err = match shardstream::server::start(Config {
        port: 0,
        ..test_config()
    }) {
        Ok(h) => {
            h.shutdown();
            panic!("a server with no listener must not start");
        }
        Err(e) => e.to_string(),
    };
    assert!(err.contains("Configured to not listen anywhere"), "{err}");
}
