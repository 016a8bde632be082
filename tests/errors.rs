//! Every `CmdError` variant's exact text, produced by a real command over a
//! real socket, and the same texts from a real redis-server where it has them.
mod common;

use common::{test_config, RedisServer, RespClient, TestServer};
use shardstream::config::Config;

/// `(command, exact reply)` pairs that redis-server 7 answers identically.
const SHARED: &[(&str, &str)] = &[
    // WrongArity
    ("GET", "-ERR wrong number of arguments for 'get' command"),
    ("XADD s", "-ERR wrong number of arguments for 'xadd' command"),
    ("CLIENT SETNAME", "-ERR wrong number of arguments for 'client|setname' command"),
    // UnknownCommand
    ("FOO a b", "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' "),
    // UnknownSubcommand
    ("CLIENT nope", "-ERR unknown subcommand 'nope'. Try CLIENT HELP."),
    // Syntax
    ("SET k v NX XX", "-ERR syntax error"),
    // NotInteger
    ("INCRBY k x", "-ERR value is not an integer or out of range"),
    // NotFloat
    ("INCRBYFLOAT k x", "-ERR value is not a valid float"),
    // InvalidExpire
    ("SET k v EX 0", "-ERR invalid expire time in 'set' command"),
    // DbIndexOutOfRange
    ("SELECT 16", "-ERR DB index is out of range"),
    // InvalidStreamId
    ("XADD s 1-x f v", "-ERR Invalid stream ID specified as stream command argument"),
    // StreamIdZero
    ("XADD s 0-0 f v", "-ERR The ID specified in XADD must be greater than 0-0"),
    // StreamIdTooSmall (after the setup line below)
    ("XADD s2 5-0 f v", "$3\r\n5-0"),
    ("XADD s2 5-0 f v", "-ERR The ID specified in XADD is equal or smaller than the target stream top item"),
    // StreamExhausted
    ("XADD s3 18446744073709551615-18446744073709551615 f v", "$41\r\n18446744073709551615-18446744073709551615"),
    ("XADD s3 * f v", "-ERR The stream has exhausted the last possible ID, unable to add more items"),
    // WrongType
    ("SET str v", "+OK"),
    ("XLEN str", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
    // XgroupNoKey
    ("XGROUP CREATE nokey g $", "-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."),
    // BusyGroup
    ("XGROUP CREATE s2 g $", "+OK"),
    ("XGROUP CREATE s2 g $", "-BUSYGROUP Consumer Group name already exists"),
    // NoGroupForKey
    ("XGROUP SETID s2 nog 0", "-NOGROUP No such consumer group 'nog' for key name 's2'"),
    // NoGroup
    ("XPENDING s2 nog", "-NOGROUP No such key 's2' or consumer group 'nog'"),
    // NoGroupInXreadgroup
    ("XREADGROUP GROUP nog c STREAMS s2 >", "-NOGROUP No such key 's2' or consumer group 'nog' in XREADGROUP with GROUP option"),
    // NoSuchKey
    ("XINFO STREAM nokey", "-ERR no such key"),
    // Msg (free text)
    ("INCR str", "-ERR value is not an integer or out of range"),
];

fn run(c: &mut RespClient, line: &str) -> String {
    let args: Vec<&str> = line.split_whitespace().collect();
    c.raw(&args)
}

#[test]
fn error_texts_are_exact() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for (cmd, want) in SHARED {
        assert_eq!(run(&mut c, cmd), *want, "command `{cmd}`");
    }
    // Overflow
    assert_eq!(c.raw(&["SET", "n", "9223372036854775807"]), "+OK");
    assert_eq!(
        c.raw(&["INCR", "n"]),
        "-ERR increment or decrement would overflow"
    );
    // FromScriptCall: the called command's text, then where the script raised it.
    let body = "return redis.call('INCR', KEYS[1])";
    assert_eq!(
        c.raw(&["EVAL", body, "1", "str"]),
        "-ERR value is not an integer or out of range script: \
         61636018f4e6b5817b89791bbed242f93fa089e3, on @user_script:1."
    );
}

#[test]
fn same_texts_as_redis_server() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut ours, mut theirs) = (srv.client(), redis.client());
    for (cmd, _) in SHARED {
        assert_eq!(
            run(&mut ours, cmd),
            run(&mut theirs, cmd),
            "command `{cmd}`"
        );
    }
}

#[test]
fn auth_errors() {
    let srv = TestServer::with_config(Config {
        requirepass: Some("secret".into()),
        ..test_config()
    });
    let mut c = srv.client();
    // NoAuth
    assert_eq!(c.raw(&["GET", "k"]), "-NOAUTH Authentication required.");
    // A refused EXEC is a discarded transaction, MULTI or not (redis-server
    // 7.0.15 answers the same).
    assert_eq!(
        c.raw(&["EXEC"]),
        "-EXECABORT Transaction discarded because of: NOAUTH Authentication required."
    );
    // WrongPass
    assert_eq!(
        c.raw(&["AUTH", "nope"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(c.raw(&["AUTH", "secret"]), "+OK");
    assert_eq!(c.raw(&["GET", "k"]), "$-1");
}

#[test]
fn max_clients_error() {
    let srv = TestServer::with_config(Config {
        maxclients: 1,
        ..test_config()
    });
    let mut first = srv.client();
    assert_eq!(first.raw(&["PING"]), "+PONG");
    // MaxClients: the second connection gets the error and is closed.
    let mut second = srv.client();
    assert_eq!(second.read_reply(), "-ERR max number of clients reached");
    assert!(second.is_closed());
    assert_eq!(first.raw(&["PING"]), "+PONG");
}

/// ReplicaKeyspace: a monitor (flagged like a replica) reading keys, as
/// redis-server 7.0 refuses it.
#[test]
fn replica_keyspace_error_on_a_monitor() {
    let want = "-ERR Replica can't interact with the keyspace";
    let srv = TestServer::start(2);
    let mut m = srv.client();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    assert_eq!(m.raw(&["GET", "k"]), want);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut m = redis.client();
    assert_eq!(m.raw(&["MONITOR"]), "+OK");
    assert_eq!(m.raw(&["GET", "k"]), want);
}

/// A standalone server never answers CROSSSLOT: MSETNX whose keys live on
/// different shards runs all or nothing, as on a standalone Redis (CROSSSLOT
/// is Redis Cluster's rule: see tests/cluster_nodes.rs).
#[test]
fn no_cross_slot_error_when_standalone() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    let reply = c.raw(&["MSETNX", "a", "1", "b", "2", "c", "3", "d", "4"]);
    assert_eq!(reply, ":1");
    let reply = c.raw(&["MSETNX", "e", "5", "b", "6"]);
    assert_eq!(reply, ":0");
    assert_eq!(c.raw(&["EXISTS", "e"]), ":0");
}

/// Redis cuts the unknown-command argument list at 128 bytes, quotes and
/// spaces included, prints the name and arguments as C strings (up to a
/// NUL byte, the name cut to 128 bytes), and SELECT reads a 32-bit int
/// first.
#[test]
fn unknown_command_arguments_and_select_range_as_redis_server() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut ours, mut theirs) = (srv.client(), redis.client());
    let long = "x".repeat(50);
    let many: Vec<String> = (0..40).map(|i| (i % 10).to_string()).collect();
    let mut cases: Vec<Vec<String>> = vec![
        vec!["FOO".into(), long.clone(), long.clone(), long.clone(), long],
        std::iter::once("FOO".to_string()).chain(many).collect(),
        vec!["FOO".into(), "y".repeat(200)],
        vec!["fo\0oo".into(), "a".into()],
        vec!["FOO".into(), "a\0b".into(), "\0".into(), "c\nd".into()],
        vec!["\0".into()],
        // 200 bytes of two-byte characters: cut at 128 bytes, not characters.
        vec!["é".repeat(100), "x".into()],
        vec!["CLIENT".into(), "no\0pe".into()],
        vec!["OBJECT".into(), "\0x".into()],
        vec!["XGROUP".into(), "n\0pe".into(), "s".into()],
        // Arguments quoted in stream errors are cut at a NUL too.
        "XGROUP CREATE s g $ MKSTREAM"
            .split(' ')
            .map(String::from)
            .collect(),
        ["XCLAIM", "s", "g", "c", "0", "1-1", "a\0b"]
            .map(String::from)
            .to_vec(),
        ["XREADGROUP", "GROUP", "a\0b", "c", "STREAMS", "s", ">"]
            .map(String::from)
            .to_vec(),
        ["XINFO", "CONSUMERS", "s", "n\0x"]
            .map(String::from)
            .to_vec(),
        ["XGROUP", "SETID", "s", "n\0x", "$"]
            .map(String::from)
            .to_vec(),
        ["XGROUP", "CREATECONSUMER", "s", "n\0x", "c"]
            .map(String::from)
            .to_vec(),
    ];
    for arg in ["99999999999", "-99999999999", "2147483648", "-1", "16"] {
        cases.push(vec!["SELECT".into(), arg.into()]);
    }
    for case in cases {
        assert_eq!(ours.raw(&case), theirs.raw(&case), "{case:?}");
    }
}

/// Bytes that are not UTF-8 in the names and arguments an error quotes go
/// back as they were sent (Redis formats them with `%s`), cut at a NUL and
/// at 128 bytes where Redis cuts; so do those of a script's error and
/// status replies.
#[test]
fn quoted_bytes_that_are_not_utf8_as_redis_server() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(2);
    let (mut ours, mut theirs) = (srv.client(), redis.client());
    let bad: &[u8] = b"\xff\xfe\xc3(";
    let mut long = b"z".repeat(127);
    long.extend_from_slice("é".as_bytes());
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"XADD", b"s", b"1-1", b"f", b"v"],
        vec![b"XGROUP", b"CREATE", b"s", b"g", b"$"],
        vec![bad, bad, b"x"],
        vec![b"FOO", bad, b"a\xff\0b"],
        vec![b"CLIENT", bad],
        // The 128-byte cut falls inside the two-byte character.
        vec![b"CLIENT", &long],
        vec![b"OBJECT", bad, b"k"],
        vec![b"XGROUP", bad, b"s"],
        vec![b"XINFO", bad, b"s", b"x", b"y"],
        vec![b"CLIENT", b"SETNAME", bad, b"extra"],
        vec![b"XCLAIM", b"s", b"g", b"c", b"0", b"1-1", bad],
        vec![b"XREADGROUP", b"GROUP", bad, b"c", b"STREAMS", b"s", b">"],
        vec![b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", bad, b">"],
        vec![b"XPENDING", bad, b"g"],
        vec![b"XINFO", b"CONSUMERS", b"s", bad],
        vec![b"XGROUP", b"SETID", b"s", bad, b"$"],
        vec![b"XGROUP", b"CREATECONSUMER", b"s", bad, b"c"],
        vec![b"XAUTOCLAIM", b"s", bad, b"c", b"0", b"0"],
        // A script passing on a command's error, and its own error text.
        vec![
            b"EVAL",
            b"return redis.call('xpending', 's', ARGV[1])",
            b"0",
            bad,
        ],
        vec![b"EVAL", b"return redis.error_reply(ARGV[1])", b"0", bad],
        vec![b"EVAL", b"return {err = ARGV[1]}", b"0", bad],
        // Options quoted with %s elsewhere (a NUL ends them).
        vec![b"CONFIG", b"SET", bad, b"1"],
        vec![b"CONFIG", b"SET", b"ab\0cd", b"1"],
        vec![b"EXPIRE", b"s", b"10", bad],
        vec![b"HELLO", b"2", bad],
        vec![b"CLIENT", b"LIST", b"TYPE", bad],
        vec![b"CLIENT", b"KILL", b"USER", bad],
        vec![b"FUNCTION", b"LIST", bad],
        vec![b"FUNCTION", b"LOAD", bad, b"x"],
        // A script's status reply carries any bytes too.
        vec![b"EVAL", b"return {ok = ARGV[1]}", b"0", bad],
        vec![b"EVAL", b"return redis.status_reply(ARGV[1])", b"0", bad],
    ];
    for case in cases {
        let (a, b) = (ours.raw_bytes(&case), theirs.raw_bytes(&case));
        assert!(
            a == b,
            "{:?}: ours {}, redis-server {}",
            case.iter()
                .map(|a| a.escape_ascii().to_string())
                .collect::<Vec<_>>(),
            a.escape_ascii(),
            b.escape_ascii()
        );
    }
}
