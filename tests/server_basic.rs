//! Core server behaviour over real sockets: pipelining, routing, protocol errors.
mod common;

use common::{RedisServer, TestServer};

#[test]
fn ping_echo_and_unknown_command() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["PING"]), "+PONG");
    assert_eq!(c.raw(&["ping", "hello"]), "$5\r\nhello");
    assert_eq!(c.raw(&["ECHO", "x"]), "$1\r\nx");
    assert_eq!(
        c.raw(&["NOPE", "a", "b"]),
        "-ERR unknown command 'NOPE', with args beginning with: 'a' 'b' "
    );
    assert_eq!(
        c.raw(&["GET"]),
        "-ERR wrong number of arguments for 'get' command"
    );
}

#[test]
fn pipeline_of_1000_across_shards_keeps_order() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let mut out = Vec::new();
    for i in 0..1000 {
        let cmd = format!(
            "*3\r\n$3\r\nSET\r\n${}\r\nkey:{i}\r\n${}\r\n{i}\r\n",
            format!("key:{i}").len(),
            i.to_string().len()
        );
        out.extend_from_slice(cmd.as_bytes());
        let get = format!(
            "*2\r\n$3\r\nGET\r\n${}\r\nkey:{i}\r\n",
            format!("key:{i}").len()
        );
        out.extend_from_slice(get.as_bytes());
    }
    c.send_raw(&out);
    for i in 0..1000 {
        assert_eq!(c.read_reply(), "+OK");
        assert_eq!(c.read_reply(), format!("${}\r\n{i}", i.to_string().len()));
    }
}

#[test]
fn multi_key_del_fans_out_over_shards() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    for k in ["a", "b", "c", "d", "e", "f"] {
        assert_eq!(c.raw(&["SET", k, "1"]), "+OK");
    }
    assert_eq!(c.raw(&["EXISTS", "a", "b", "zz", "a"]), ":3");
    assert_eq!(c.raw(&["DEL", "a", "b", "c", "d", "e", "f", "g"]), ":6");
}

#[test]
fn inline_commands() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    c.send_raw(b"PING\r\nECHO \"hi there\"\r\n\r\nSET k 'v 1'\nGET k\r\n");
    assert_eq!(c.read_reply(), "+PONG");
    assert_eq!(c.read_reply(), "$8\r\nhi there");
    assert_eq!(c.read_reply(), "+OK");
    assert_eq!(c.read_reply(), "$3\r\nv 1");
}

#[test]
fn protocol_error_closes_only_that_connection() {
    let srv = TestServer::start(2);
    let mut good = srv.client();
    let mut bad = srv.client();
    bad.send_raw(b"*1\r\n$4\r\nPING\r\n*1\r\n:1\r\n");
    assert_eq!(bad.read_reply(), "+PONG");
    assert_eq!(
        bad.read_reply(),
        "-ERR Protocol error: expected '$', got ':'"
    );
    assert!(bad.is_closed());
    assert_eq!(good.raw(&["PING"]), "+PONG");
    let mut huge = srv.client();
    huge.send_raw(b"*1\r\n$99999999999\r\n");
    assert_eq!(
        huge.read_reply(),
        "-ERR Protocol error: invalid bulk length"
    );
    assert!(huge.is_closed());
}

#[test]
fn differential_basics_against_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    common::assert_same_replies(
        &mut srv.client(),
        &mut redis.client(),
        r#"
        PING
        PING hello
        ECHO "a b"
        SET foo bar
        GET foo
        GET missing
        DEL foo missing
        EXISTS foo
        GET
        NOSUCH a b
        SELECT 99
        SELECT x
        SELECT 3
        "#,
    );
}

/// Redis reads an inline request in 16 KB pieces and gives up once 64 KB
/// arrived without a newline, so a longer line is refused even when its
/// newline comes in the same write.
#[test]
fn too_big_inline_line_is_refused_even_with_its_newline() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let mut line = vec![b'a'; 1024 * 1024];
    line.extend_from_slice(b"\r\n");
    c.send_raw(&line);
    assert_eq!(
        c.read_reply(),
        "-ERR Protocol error: too big inline request"
    );
    assert!(c.is_closed());
    assert_eq!(srv.client().raw(&["PING"]), "+PONG");
}

/// Argument errors come before the cross-shard refusal.
#[test]
fn arity_errors_before_crossslot() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["MSETNX", "a", "1", "b"]),
        "-ERR wrong number of arguments for 'msetnx' command"
    );
}
