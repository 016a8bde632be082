//! Transactions whose keys live on several shards (MULTI/EXEC, WATCH,
//! MSETNX) over real sockets: the same replies as a real redis-server, and
//! isolation under concurrent clients (a reader never sees half a
//! transaction).
mod common;

use common::{RedisServer, RespClient, ScratchDir, TestServer};
use shardstream::route::slot::slot_of;

const SHARDS: u16 = 4;

/// `n` keys named `<prefix><i>`, one per shard of a `SHARDS`-shard server.
fn keys_on_every_shard(prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    for i in 0.. {
        let k = format!("{prefix}{i}");
        let shard = slot_of(k.as_bytes()).shard(SHARDS);
        if !seen.contains(&shard) {
            seen.push(shard);
            out.push(k);
        }
        if out.len() == usize::from(SHARDS) {
            break;
        }
    }
    out
}

/// Run `script` (one command per line, `{0}`..`{3}` replaced by keys on
/// shards 0..3, lines prefixed by `1 ` or `2 ` for the client) against
/// shardstream and redis-server; every reply must be the same.
fn same_replies_two_clients(script: &str) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(SHARDS);
    let keys = keys_on_every_shard("k");
    let mut ours: [RespClient; 2] = [srv.client(), srv.client()];
    let mut theirs: [RespClient; 2] = [redis.client(), redis.client()];
    theirs[0].raw(&["FLUSHALL"]);
    for (n, line) in script.lines().enumerate() {
        let mut line = line.trim().to_string();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        for (i, k) in keys.iter().enumerate() {
            line = line.replace(&format!("{{{i}}}"), k);
        }
        let (who, cmd) = match line.split_once(' ') {
            Some(("1", rest)) => (0, rest.to_string()),
            Some(("2", rest)) => (1, rest.to_string()),
            _ => (0, line.clone()),
        };
        let args = common::words(&cmd);
        let a = ours[who].raw(&args);
        let b = theirs[who].raw(&args);
        assert_eq!(a, b, "line {}: `{line}`", n + 1);
    }
}

#[test]
fn transactions_across_shards_match_redis() {
    same_replies_two_clients(
        r#"
        MULTI
        SET {0} a
        SET {1} b
        INCR {2}
        APPEND {3} x
        MGET {0} {1} {2} {3} nokey
        EXISTS {0} {1} {2} {3}
        DEL {0} {2}
        MSET {0} 1 {1} 2 {2} 3 {3} 4
        MGET {0} {1} {2} {3}
        PING
        EXEC
        MGET {0} {1} {2} {3}
        # errors inside EXEC are elements; the rest runs
        MULTI
        SET {0} v
        INCR {1}
        XLEN {0}
        XADD {2} 1-1 f v
        XADD {3} 1-1 f v
        XADD {3} 1-1 f v
        XLEN {2}
        EXEC
        # a queueing error aborts everything
        MULTI
        SET {0} nope
        SET {1}
        XADD {2} 2-1 f v
        EXEC
        GET {0}
        XLEN {2}
        # two streams appended in one transaction
        MULTI
        XADD {2} 3-1 order 1
        XADD {3} 3-1 audit 1
        XRANGE {2} - +
        XRANGE {3} - +
        EXEC
        # a SELECT inside applies to what follows, on every shard
        MULTI
        SELECT 1
        SET {0} db1
        SET {1} db1
        SELECT 0
        MGET {0} {1}
        EXEC
        SELECT 1
        MGET {0} {1}
        FLUSHDB
        SELECT 0
        # a cross-shard RENAME inside a transaction
        SET {0} moved
        MULTI
        RENAME {0} {1}
        GET {1}
        EXISTS {0}
        EXEC
        # blocking pops inside MULTI try their keys in order, across shards
        ZADD {1} 1 m 2 n
        RPUSH {3} x
        MULTI
        BZPOPMIN {0} {1} 0
        BZPOPMAX {0} {2} 0
        BLPOP {2} {3} 0
        BLPOP {0} {2} 0
        EXEC
        DEL {1} {3}
        # MSETNX across shards: all or nothing
        DEL {0} {1} {2} {3}
        MSETNX {0} a {1} b
        MSETNX {1} c {2} d {3} e
        MGET {0} {1} {2} {3}
        MSETNX {2} c {3} d
        MGET {0} {1} {2} {3}
        MULTI
        MSETNX {0} z {3} z
        MSETNX {2} y {3} y
        EXEC
        MGET {0} {1} {2} {3}
        FLUSHALL
        "#,
    );
}

#[test]
fn watch_across_shards_matches_redis() {
    same_replies_two_clients(
        r#"
        # a write on another shard than the transaction's keys
        1 WATCH {0} {1}
        2 SET {1} changed
        1 MULTI
        1 SET {2} x
        1 SET {3} x
        1 EXEC
        1 MGET {2} {3}
        # no write: runs
        1 WATCH {0} {1}
        1 MULTI
        1 SET {2} y
        1 SET {3} y
        1 EXEC
        1 MGET {2} {3}
        # the watched key is only on one shard, the transaction on others
        1 WATCH {3}
        1 MULTI
        1 INCR {0}
        1 INCR {1}
        1 EXEC
        2 DEL {3}
        1 MULTI
        1 INCR {0}
        1 EXEC
        1 WATCH {0} {1} {2} {3}
        2 EXPIRE {2} 100
        1 MULTI
        1 GET {0}
        1 EXEC
        # UNWATCH forgets watches on every shard
        1 WATCH {0} {1} {2}
        1 UNWATCH
        2 SET {0} 1
        2 SET {2} 1
        1 MULTI
        1 MGET {0} {2}
        1 EXEC
        # a failed EXEC forgets them too
        1 WATCH {1} {2}
        1 MULTI
        1 SET {1}
        1 EXEC
        2 SET {1} 5
        1 MULTI
        1 GET {1}
        1 EXEC
        1 FLUSHALL
        "#,
    );
}

/// Writers increment one counter on every shard per transaction while
/// readers read all of them in a transaction: every read sees the same
/// value everywhere. Also exercises many transactions holding shards at
/// once (coordinators on every shard thread): none may deadlock.
#[test]
fn readers_never_see_half_a_transaction() {
    let srv = TestServer::start(SHARDS);
    let keys = keys_on_every_shard("iso");
    let rounds = 200;
    let mut threads = Vec::new();
    for _ in 0..3 {
        let mut c = srv.redis();
        let keys = keys.clone();
        threads.push(std::thread::spawn(move || {
            for _ in 0..rounds {
                let mut p = redis::pipe();
                p.atomic();
                for k in &keys {
                    p.incr(k, 1);
                }
                let _: Vec<i64> = p.query(&mut c).expect("writer EXEC");
            }
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..3 {
        let mut c = srv.redis();
        let keys = keys.clone();
        readers.push(std::thread::spawn(move || {
            let mut torn = Vec::new();
            for _ in 0..rounds {
                let mut p = redis::pipe();
                p.atomic();
                for k in &keys {
                    p.get(k);
                }
                let got: Vec<Option<i64>> = p.query(&mut c).expect("reader EXEC");
                if got.iter().any(|v| *v != got[0]) {
                    torn.push(got);
                }
            }
            torn
        }));
    }
    for t in threads {
        t.join().expect("writer thread");
    }
    for r in readers {
        let torn = r.join().expect("reader thread");
        assert!(torn.is_empty(), "torn reads: {torn:?}");
    }
    let mut c = srv.client();
    let all: Vec<&str> = std::iter::once("MGET")
        .chain(keys.iter().map(String::as_str))
        .collect();
    let want = (0..keys.len())
        .map(|_| format!("$3\r\n{}", 3 * rounds))
        .collect::<Vec<_>>()
        .join("\r\n");
    assert_eq!(c.raw(&all), format!("*{}\r\n{want}", keys.len()));
}

/// A client pipelines writes to other shards and then a transaction that
/// reads them: the transaction sees every earlier write of its connection.
#[test]
fn a_transaction_sees_the_connections_earlier_pipelined_writes() {
    let srv = TestServer::start(SHARDS);
    let keys = keys_on_every_shard("pipe");
    let mut c = srv.client();
    let mut batch = Vec::new();
    for k in &keys {
        batch.extend(common::resp_command(&["SET", k, "early"]));
    }
    batch.extend(common::resp_command(&["MULTI"]));
    let mut get = vec!["MGET"];
    get.extend(keys.iter().map(String::as_str));
    batch.extend(common::resp_command(&get));
    batch.extend(common::resp_command(&["EXEC"]));
    c.send_raw(&batch);
    for _ in &keys {
        assert_eq!(c.read_reply(), "+OK");
    }
    assert_eq!(c.read_reply(), "+OK");
    assert_eq!(c.read_reply(), "+QUEUED");
    let early = (0..keys.len())
        .map(|_| "$5\r\nearly")
        .collect::<Vec<_>>()
        .join("\r\n");
    assert_eq!(c.read_reply(), format!("*1\r\n*{}\r\n{early}", keys.len()));
}

/// A shardstream process with AOF on `dir` (4 shards, `appendfsync always`).
struct Child {
    proc: std::process::Child,
    port: u16,
}

impl Child {
    fn start(dir: &std::path::Path) -> Child {
        let port = common::free_port();
        let proc = std::process::Command::new(env!("CARGO_BIN_EXE_shardstream"))
            .args(["--port", &port.to_string(), "--shards", "4", "--no-pin"])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .arg("--dir")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn shardstream");
        assert!(
            common::eventually(20, || std::net::TcpStream::connect(("127.0.0.1", port))
                .is_ok()),
            "child did not start"
        );
        Child { proc, port }
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .and_then(|c| c.get_connection())
            .expect("connect")
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.proc.kill(); // SIGKILL
        let _ = self.proc.wait();
    }
}

/// kill -9 while clients run transactions that increment one counter on
/// every shard: after each restart the counters are all equal (no
/// transaction is half there) and at least the number of acknowledged
/// transactions (none of those is lost).
#[test]
fn sigkill_in_the_middle_of_cross_shard_transactions_keeps_them_whole() {
    let dir = ScratchDir::new("txcrash");
    let keys = keys_on_every_shard("crash");
    let mut acked = 0u64;
    for round in 0..4u64 {
        let child = Child::start(&dir);
        let mut c = child.client();
        let values: Vec<Option<u64>> = redis::cmd("MGET").arg(&keys).query(&mut c).expect("MGET");
        let values: Vec<u64> = values.into_iter().map(Option::unwrap_or_default).collect();
        assert!(
            values.iter().all(|v| *v == values[0]),
            "round {round}: half a transaction survived: {values:?}"
        );
        assert!(
            values[0] >= acked,
            "round {round}: {} acknowledged transactions, {} found",
            acked,
            values[0]
        );
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let mut c = child.client();
                let keys = keys.clone();
                std::thread::spawn(move || {
                    let mut done = 0u64;
                    loop {
                        let mut p = redis::pipe();
                        p.atomic();
                        for k in &keys {
                            p.incr(k, 1);
                        }
                        match p.query::<Vec<i64>>(&mut c) {
                            Ok(_) => done += 1,
                            Err(_) => return done,
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(200 + round * 70));
        drop(child);
        acked += writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .sum::<u64>();
    }
    let child = Child::start(&dir);
    let mut c = child.client();
    let values: Vec<u64> = redis::cmd("MGET").arg(&keys).query(&mut c).expect("MGET");
    assert!(values.iter().all(|v| *v == values[0]), "{values:?}");
    assert!(values[0] >= acked && acked > 0, "{values:?} vs {acked}");
}

/// Requests pipelined after a cross-shard transaction see its effects,
/// whichever shard they go to (the transaction's coordinator is its lowest
/// shard, not necessarily the connection's).
#[test]
fn requests_pipelined_after_a_transaction_see_it() {
    let srv = TestServer::start(SHARDS);
    let keys = keys_on_every_shard("after");
    for _ in 0..20 {
        let mut c = srv.client();
        let mut batch = common::resp_command(&["MULTI"]);
        for k in &keys {
            batch.extend(common::resp_command(&["INCR", k]));
        }
        batch.extend(common::resp_command(&["EXEC"]));
        for k in &keys {
            batch.extend(common::resp_command(&["GET", k]));
        }
        batch.extend(common::resp_command(&[
            "MSET", &keys[0], "x", &keys[3], "y",
        ]));
        batch.extend(common::resp_command(&["MGET", &keys[3], &keys[0]]));
        c.send_raw(&batch);
        assert_eq!(c.read_reply(), "+OK");
        for _ in &keys {
            assert_eq!(c.read_reply(), "+QUEUED");
        }
        let exec = c.read_reply();
        assert!(exec.starts_with(&format!("*{}\r\n:", keys.len())), "{exec}");
        let n: String = exec[exec.len() - 1..].to_string();
        for _ in &keys {
            assert_eq!(c.read_reply(), format!("$1\r\n{n}"));
        }
        assert_eq!(c.read_reply(), "+OK");
        assert_eq!(c.read_reply(), "*2\r\n$1\r\ny\r\n$1\r\nx");
        for k in &keys {
            c.raw(&["SET", k, "0"]);
        }
    }
}

/// A reader blocked over streams of several shards that one transaction
/// makes ready gets every one of them (Redis 7.2+ runs a woken read again
/// as a whole), for XREAD with `$` and for XREADGROUP.
#[test]
fn a_blocked_read_over_shards_gets_every_stream_a_transaction_fed() {
    let srv = TestServer::start(SHARDS);
    let keys = keys_on_every_shard("woken");
    let (a, b) = (&keys[1], &keys[3]);
    let mut w = srv.client();
    for k in [a, b] {
        assert_eq!(w.raw(&["XADD", k, "1-1", "f", "old"]), "$3\r\n1-1");
        assert_eq!(w.raw(&["XGROUP", "CREATE", k, "g", "$"]), "+OK");
    }
    let mut xread = srv.client();
    xread.send(&["XREAD", "BLOCK", "5000", "STREAMS", a, b, "$", "$"]);
    let mut group = srv.client();
    group.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "5000",
        "STREAMS",
        a,
        b,
        ">",
        ">",
    ]);
    assert!(
        common::eventually(5, || {
            w.raw(&["INFO", "clients"]).contains("blocked_clients:2")
        }),
        "both readers block"
    );
    assert_eq!(w.raw(&["MULTI"]), "+OK");
    assert_eq!(w.raw(&["XADD", a, "2-1", "f", "new"]), "+QUEUED");
    assert_eq!(w.raw(&["XADD", b, "2-1", "f", "new"]), "+QUEUED");
    assert_eq!(w.raw(&["EXEC"]), "*2\r\n$3\r\n2-1\r\n$3\r\n2-1");
    let entry = "*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nf\r\n$3\r\nnew";
    let want = format!(
        "*2\r\n*2\r\n${}\r\n{a}\r\n{entry}\r\n*2\r\n${}\r\n{b}\r\n{entry}",
        a.len(),
        b.len()
    );
    assert_eq!(xread.read_reply(), want);
    assert_eq!(group.read_reply(), want);
    // Woken by a write on one shard only, the read still answers at once.
    xread.send(&["XREAD", "BLOCK", "5000", "STREAMS", a, b, "2-1", "2-1"]);
    common::wait_blocked(&mut w, 1);
    assert_eq!(w.raw(&["XADD", b, "3-1", "f", "x"]), "$3\r\n3-1");
    let one = "*1\r\n*2\r\n$3\r\n3-1\r\n*2\r\n$1\r\nf\r\n$1\r\nx";
    assert_eq!(
        xread.read_reply(),
        format!("*1\r\n*2\r\n${}\r\n{b}\r\n{one}", b.len())
    );
}

/// Plain multi-key commands over several shards (MGET, EXISTS, DEL) are one
/// moment's view, as on one Redis: a reader's MGET never mixes values from
/// before and after another client's MSET or MULTI/EXEC, and EXISTS never
/// counts part of an MSET that a DEL then removes.
#[test]
fn multi_key_reads_never_see_half_a_write() {
    let srv = TestServer::start(SHARDS);
    let keys = keys_on_every_shard("snap");
    let rounds = 300;
    let writer = {
        let mut c = srv.redis();
        let keys = keys.clone();
        std::thread::spawn(move || {
            for i in 0..rounds {
                let mut mset = redis::cmd("MSET");
                for k in &keys {
                    mset.arg(k).arg(i);
                }
                let _: () = mset.query(&mut c).expect("MSET");
                let mut p = redis::pipe();
                p.atomic();
                for k in &keys {
                    p.set(k, i + 1000);
                }
                let _: () = p.query(&mut c).expect("EXEC");
                let _: i64 = redis::cmd("DEL").arg(&keys).query(&mut c).expect("DEL");
            }
        })
    };
    let mut c = srv.redis();
    let mut torn = Vec::new();
    for _ in 0..rounds {
        let got: Vec<Option<i64>> = redis::cmd("MGET").arg(&keys).query(&mut c).expect("MGET");
        if got.iter().any(|v| *v != got[0]) {
            torn.push(format!("MGET {got:?}"));
        }
        let n: i64 = redis::cmd("EXISTS")
            .arg(&keys)
            .query(&mut c)
            .expect("EXISTS");
        if n != 0 && n != keys.len() as i64 {
            torn.push(format!("EXISTS {n}"));
        }
    }
    writer.join().expect("writer");
    assert!(torn.is_empty(), "torn reads: {torn:?}");
}

#[test]
fn a_cross_shard_write_runs_before_the_transaction_pipelined_after_it() {
    // DEL over two shards is coordinated by the lower one; on that shard's
    // own thread, a MULTI/EXEC on its keys pipelined behind it (and the GET
    // after it) must still see the DEL done first, as Redis runs a
    // connection's commands in order. Eight connections: every thread gets
    // some, the coordinator's among them.
    let on = |shard: u16| {
        (0..)
            .map(|i| format!("o{i}"))
            .find(|k| slot_of(k.as_bytes()).shard(SHARDS).0 == shard)
            .expect("a key on the shard")
    };
    let (k0, k1) = (on(0), on(1));
    let srv = TestServer::start(SHARDS);
    for i in 0..8 {
        let s = format!("s{i}{{{k0}}}");
        let script = format!(
            "SET {k0} 5\nDEL {k0} {k1}\nMULTI\nINCR {k0}\nEXEC\nGET {k0}\n\
             XADD {s} 1-1 f v\nDEL {s} {k1}\nMULTI\nXADD {s} 2-1 f v\nEXEC\nXLEN {s}"
        );
        let mut wire = Vec::new();
        for line in script.lines() {
            wire.extend(common::resp_command(&common::words(line)));
        }
        let mut c = srv.client();
        c.send_raw(&wire);
        let replies: Vec<String> = script.lines().map(|_| c.read_reply()).collect();
        assert_eq!(
            replies,
            [
                "+OK",
                ":1",
                "+OK",
                "+QUEUED",
                "*1\r\n:1",
                "$1\r\n1",
                "$3\r\n1-1",
                ":1",
                "+OK",
                "+QUEUED",
                "*1\r\n$3\r\n2-1",
                ":1",
            ]
        );
    }
}
