//! Persistence: restart round trips (incr replay and rewritten base), torn and
//! corrupted files, shard-count checks, CONFIG SET
//! appendonly, and a SIGKILL crash test of a child server under pipelined
//! XADD / XREADGROUP / XACK load with `appendfsync always`.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{entry_ids, test_config, RespClient, ScratchDir, TestServer};
use shardstream::aof::FsyncPolicy;
use shardstream::config::Config;

fn aof_config(dir: &Path, shards: u16, fsync: FsyncPolicy) -> Config {
    Config {
        shards,
        dir: dir.to_path_buf(),
        appendonly: true,
        appendfsync: fsync,
        ..test_config()
    }
}

/// Wait until no shard is rewriting.
fn wait_rewrite_done(c: &mut RespClient) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = c.raw(&["INFO", "persistence"]);
        if info.contains("aof_rewrite_in_progress:0") {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Build a data set exercising every persisted kind of state.
fn populate(c: &mut RespClient) {
    let run = |c: &mut RespClient, args: &[&str]| {
        let r = c.raw(args);
        assert!(!r.starts_with('-'), "{args:?} -> {r}");
        r
    };
    for i in 0..30 {
        run(
            c,
            &[
                "XADD",
                "s1",
                &format!("{}-{}", 1000 + i, i % 3),
                "f",
                &format!("v{i}"),
                "g",
                "x",
            ],
        );
        run(c, &["XADD", "{s1}b", "*", "n", &i.to_string()]);
    }
    run(c, &["XADD", "s2", "MAXLEN", "~", "5", "*", "a", "1"]);
    for i in 0..40 {
        run(
            c,
            &["XADD", "s2", "MAXLEN", "~", "10", "*", "a", &i.to_string()],
        );
    }
    run(c, &["XTRIM", "{s1}b", "MINID", "~", "0-1"]);
    run(c, &["XDEL", "s1", "1003-0", "1004-1"]);
    run(c, &["XGROUP", "CREATE", "s1", "g1", "0"]);
    run(c, &["XGROUP", "CREATE", "s1", "g2", "$"]);
    run(c, &["XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM"]);
    run(c, &["XGROUP", "CREATE", "s2", "g", "0", "ENTRIESREAD", "3"]);
    run(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "5",
            "STREAMS",
            "s1",
            ">",
        ],
    );
    run(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "4",
            "STREAMS",
            "s1",
            ">",
        ],
    );
    run(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "carol",
            "COUNT",
            "3",
            "NOACK",
            "STREAMS",
            "s1",
            ">",
        ],
    );
    std::thread::sleep(Duration::from_millis(3));
    // Redeliveries from history raise delivery counts.
    run(
        c,
        &["XREADGROUP", "GROUP", "g1", "alice", "STREAMS", "s1", "0"],
    );
    run(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "s1",
            "0",
        ],
    );
    run(c, &["XACK", "s1", "g1", "1000-0", "1006-0"]);
    run(
        c,
        &[
            "XCLAIM",
            "s1",
            "g1",
            "dave",
            "0",
            "1001-1",
            "1007-1",
            "RETRYCOUNT",
            "7",
        ],
    );
    run(
        c,
        &["XAUTOCLAIM", "s1", "g1", "erin", "0", "0", "COUNT", "2"],
    );
    run(c, &["XGROUP", "CREATECONSUMER", "s1", "g2", "idle"]);
    run(
        c,
        &["XGROUP", "SETID", "s1", "g2", "1010-1", "ENTRIESREAD", "11"],
    );
    run(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "z",
            "COUNT",
            "2",
            "STREAMS",
            "s2",
            ">",
        ],
    );
    run(c, &["XGROUP", "CREATE", "s2", "gone", "0"]);
    run(c, &["XGROUP", "DESTROY", "s2", "gone"]);
    run(c, &["XGROUP", "CREATECONSUMER", "s1", "g1", "tmp"]);
    run(c, &["XGROUP", "DELCONSUMER", "s1", "g1", "tmp"]);
    run(c, &["XADD", "s3", "5-5", "k", "v"]);
    run(
        c,
        &[
            "XSETID",
            "s3",
            "9-9",
            "ENTRIESADDED",
            "40",
            "MAXDELETEDID",
            "7-0",
        ],
    );
    run(c, &["EXPIRE", "s3", "1000"]);
    run(c, &["SET", "str", "hello", "EX", "500"]);
    run(c, &["SET", "plain", "v"]);
    run(c, &["INCRBY", "counter", "41"]);
    run(c, &["INCR", "counter"]);
    run(c, &["APPEND", "plain", "++"]);
    run(c, &["INCRBYFLOAT", "float", "1.5"]);
    run(c, &["MSET", "m1", "a", "m2", "b"]);
    run(c, &["SET", "doomed", "x"]);
    run(c, &["DEL", "doomed"]);
    run(c, &["SET", "short", "x", "PX", "1"]);
    run(c, &["SELECT", "3"]);
    run(c, &["SET", "db3", "three"]);
    run(c, &["XADD", "s1", "1-1", "in", "db3"]);
    run(c, &["SELECT", "0"]);
    std::thread::sleep(Duration::from_millis(5));
    run(c, &["GET", "short"]); // lazily expired: logged as DEL
}

/// Everything the round trip compares, as wire text.
fn state(c: &mut RespClient) -> Vec<String> {
    let mut out = Vec::new();
    for s in ["s1", "{s1}b", "s2", "s3", "empty"] {
        out.push(c.raw(&["XINFO", "STREAM", s, "FULL"]));
        out.push(c.raw(&["XINFO", "GROUPS", s]));
        out.push(c.raw(&["XRANGE", s, "-", "+"]));
    }
    for k in [
        "s3", "str", "plain", "counter", "float", "m1", "m2", "doomed", "short",
    ] {
        out.push(c.raw(&["PEXPIRETIME", k]));
        out.push(c.raw(&["TYPE", k]));
    }
    for k in ["str", "plain", "counter", "float", "m1", "m2"] {
        out.push(c.raw(&["GET", k]));
    }
    out.push(c.raw(&["DBSIZE"]));
    out.push(c.raw(&["SELECT", "3"]));
    out.push(c.raw(&["GET", "db3"]));
    out.push(c.raw(&["XRANGE", "s1", "-", "+"]));
    out.push(c.raw(&["DBSIZE"]));
    out
}

#[test]
fn restart_round_trip_from_incr_files_and_from_a_rewrite() {
    let dir = ScratchDir::new("aof-roundtrip");
    let cfg = aof_config(&dir, 2, FsyncPolicy::EverySec);
    let before = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        populate(&mut c);
        state(&mut c)
    };
    assert!(before[0].contains("pel-count"), "{}", before[0]);
    // 1: replay of the effect log.
    let after_incr = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        let s = state(&mut c);
        assert_eq!(
            c.raw(&["BGREWRITEAOF"]),
            "+Background append only file rewriting started"
        );
        wait_rewrite_done(&mut c);
        let info = c.raw(&["INFO", "persistence"]);
        assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
        assert!(info.contains("aof_rewrites:1"), "{info}");
        s
    };
    for (i, (a, b)) in before.iter().zip(&after_incr).enumerate() {
        assert_eq!(a, b, "item {i} differs after replaying the incr files");
    }
    // 2: load of the rewritten base file (plus an empty incr).
    let manifest = std::fs::read_to_string(dir.join("shard-0.manifest")).unwrap();
    assert!(manifest.contains("\nbase shard-0.base."), "{manifest}");
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    let after_base = state(&mut c);
    for (i, (a, b)) in before.iter().zip(&after_base).enumerate() {
        assert_eq!(a, b, "item {i} differs after loading the rewritten base");
    }
}

#[test]
fn torn_tail_is_cut_and_later_writes_survive() {
    let dir = ScratchDir::new("aof-torn");
    let cfg = aof_config(&dir, 1, FsyncPolicy::Always);
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        assert_eq!(c.raw(&["XADD", "s", "1-1", "a", "b"]), "$3\r\n1-1");
        assert_eq!(c.raw(&["XADD", "s", "2-1", "a", "b"]), "$3\r\n2-1");
    }
    let incr = dir.join("shard-0.incr.1.aof");
    let full = std::fs::read(&incr).unwrap();
    // A torn write: only the first bytes of the next record made it.
    let mut torn = full.clone();
    torn.extend_from_slice(b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n3-");
    std::fs::write(&incr, &torn).unwrap();
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        assert_eq!(c.raw(&["XLEN", "s"]), ":2");
        assert_eq!(c.raw(&["XADD", "s", "3-1", "a", "b"]), "$3\r\n3-1");
    }
    assert!(std::fs::read(&incr).unwrap().starts_with(&full));
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["XLEN", "s"]),
        ":3",
        "the write after the cut is kept"
    );
}

#[test]
fn corruption_in_the_middle_refuses_to_start_naming_file_and_offset() {
    let dir = ScratchDir::new("aof-corrupt");
    let cfg = aof_config(&dir, 1, FsyncPolicy::No);
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        for i in 1..20 {
            c.raw(&["XADD", "s", &format!("{i}-1"), "a", "b"]);
        }
    }
    let incr = dir.join("shard-0.incr.1.aof");
    let mut bytes = std::fs::read(&incr).unwrap();
    let at = bytes.len() / 2;
    let pos = at + bytes[at..].iter().position(|&b| b == b'$').unwrap();
    bytes[pos] = b'#';
    std::fs::write(&incr, &bytes).unwrap();
    let err = match shardstream::server::start_on(cfg, common::bind_free()) {
        Ok(h) => {
            h.shutdown();
            panic!("a corrupted AOF must not load");
        }
        Err(e) => e.to_string(),
    };
    assert!(err.contains("shard-0.incr.1.aof"), "{err}");
    let record_start = bytes[..pos].windows(2).rposition(|w| w == b"\n*").unwrap() + 1;
    assert!(err.contains(&format!("at offset {record_start}")), "{err}");
}

#[test]
fn a_changed_shard_count_refuses_to_load() {
    let dir = ScratchDir::new("aof-shards");
    {
        let srv = TestServer::with_config(aof_config(&dir, 2, FsyncPolicy::No));
        srv.client().raw(&["SET", "k", "v"]);
    }
    let err = match shardstream::server::start_on(
        aof_config(&dir, 3, FsyncPolicy::No),
        common::bind_free(),
    ) {
        Ok(h) => {
            h.shutdown();
            panic!("must not load 2-shard data into 3 shards");
        }
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("2 shards") && err.contains("--shards 2"),
        "{err}"
    );
    let srv = TestServer::with_config(aof_config(&dir, 2, FsyncPolicy::No));
    assert_eq!(srv.client().raw(&["GET", "k"]), "$1\r\nv");
}

#[test]
fn rewrite_under_load_loses_nothing() {
    let dir = ScratchDir::new("aof-rewrite-load");
    let cfg = Config {
        auto_aof_rewrite_percentage: 0,
        ..aof_config(&dir, 2, FsyncPolicy::EverySec)
    };
    let written = {
        let srv = TestServer::with_config(cfg.clone());
        let addr = srv.addr;
        let writer = std::thread::spawn(move || {
            let mut c = RespClient::connect(addr);
            let mut n = 0u64;
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(1500) {
                for k in 0..4 {
                    c.send(&["XADD", &format!("load{k}"), "*", "n", &n.to_string()]);
                }
                for _ in 0..4 {
                    assert!(c.read_reply().starts_with('$'));
                }
                n += 1;
            }
            n
        });
        let mut c = srv.client();
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(150));
            let r = c.raw(&["BGREWRITEAOF"]);
            assert!(
                r.starts_with("+Background") || r.contains("already in progress"),
                "{r}"
            );
            wait_rewrite_done(&mut c);
        }
        writer.join().unwrap()
    };
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    for k in 0..4 {
        assert_eq!(c.raw(&["XLEN", &format!("load{k}")]), format!(":{written}"));
    }
    let last = c.raw(&["XREVRANGE", "load3", "+", "-", "COUNT", "1"]);
    assert!(last.ends_with(&format!("\r\n{}", written - 1)), "{last}");
}

#[test]
fn config_set_appendonly_creates_the_files_from_the_data() {
    let dir = ScratchDir::new("aof-enable");
    let cfg = Config {
        appendonly: false,
        ..aof_config(&dir, 2, FsyncPolicy::Always)
    };
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        assert_eq!(
            c.raw(&["CONFIG", "GET", "appendonly"]),
            "*2\r\n$10\r\nappendonly\r\n$2\r\nno"
        );
        c.raw(&["XADD", "before", "1-1", "a", "b"]);
        assert_eq!(c.raw(&["CONFIG", "SET", "appendonly", "yes"]), "+OK");
        c.raw(&["XADD", "after", "1-1", "a", "b"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(dir.join("shard-0.manifest"))
            .is_ok_and(|m| m.contains("base"))
        {
            assert!(Instant::now() < deadline, "no base file written");
            std::thread::sleep(Duration::from_millis(20));
        }
        wait_rewrite_done(&mut c);
        c.raw(&["XADD", "later", "1-1", "a", "b"]);
        assert!(c.raw(&["INFO", "persistence"]).contains("aof_enabled:1"));
    }
    let srv = TestServer::with_config(Config {
        appendonly: true,
        ..cfg
    });
    let mut c = srv.client();
    for k in ["before", "after", "later"] {
        assert_eq!(c.raw(&["XLEN", k]), ":1", "{k}");
    }
}

#[test]
fn config_values_and_errors() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["CONFIG", "GET", "appendfsync"]),
        "*2\r\n$11\r\nappendfsync\r\n$8\r\neverysec"
    );
    assert_eq!(c.raw(&["CONFIG", "SET", "appendfsync", "always"]), "+OK");
    assert_eq!(
        c.raw(&["CONFIG", "GET", "appendfsync"]),
        "*2\r\n$11\r\nappendfsync\r\n$6\r\nalways"
    );
    assert_eq!(
        c.raw(&["CONFIG", "GET", "auto-aof-rewrite-min-size"]),
        "*2\r\n$25\r\nauto-aof-rewrite-min-size\r\n$8\r\n67108864"
    );
    let args = ["--appendonly", "no", "--appendfsync", "always"].map(String::from);
    let shardstream::cmdline::Invocation::Run(st) = shardstream::cmdline::parse(&args).unwrap()
    else {
        panic!("a server start");
    };
    assert!(!st.config.appendonly);
    assert_eq!(st.config.appendfsync, FsyncPolicy::Always);
    let bad = ["--appendfsync", "sometimes"].map(String::from);
    assert!(shardstream::cmdline::parse(&bad).is_err());
}

#[test]
fn config_errors_match_redis() {
    let Some(redis) = common::RedisServer::start() else {
        return;
    };
    let srv = TestServer::start(1);
    common::assert_same_replies(
        &mut srv.client(),
        &mut redis.client(),
        "CONFIG SET appendfsync sometimes
         CONFIG SET appendonly maybe
         CONFIG SET auto-aof-rewrite-percentage abc
         CONFIG SET appendfsync no
         CONFIG GET appendfsync
         CONFIG SET auto-aof-rewrite-min-size 1mb
         CONFIG GET auto-aof-rewrite-min-size
         CONFIG SET auto-aof-rewrite-percentage 50
         CONFIG GET auto-aof-rewrite-percentage",
    );
}

// ---------------------------------------------------------------------------
// Crash test

/// A shardstream child process on a free port.
struct Child {
    proc: std::process::Child,
    port: u16,
}

impl Child {
    fn start(dir: &Path) -> Child {
        let port = common::free_port();
        let proc = std::process::Command::new(env!("CARGO_BIN_EXE_shardstream"))
            .args(["--port", &port.to_string(), "--shards", "2", "--no-pin"])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .arg("--dir")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn shardstream");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "child did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Child { proc, port }
    }

    fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    fn kill9(mut self) {
        let _ = self.proc.kill(); // SIGKILL
        let _ = self.proc.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

/// A pipelining client whose every call reports a dead connection as `None`
/// / `false` instead of panicking (the server is killed under it).
struct CrashClient {
    w: std::net::TcpStream,
    r: std::io::BufReader<std::net::TcpStream>,
}

impl CrashClient {
    fn connect(addr: std::net::SocketAddr) -> Option<CrashClient> {
        let w = std::net::TcpStream::connect(addr).ok()?;
        w.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let r = std::io::BufReader::new(w.try_clone().ok()?);
        Some(CrashClient { w, r })
    }

    fn try_send(&mut self, args: &[&str]) -> bool {
        use std::io::Write;
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.w.write_all(out.as_bytes()).is_ok()
    }

    fn try_read(&mut self) -> Option<String> {
        let mut out = String::new();
        self.read_into(&mut out)?;
        Some(out.trim_end_matches("\r\n").to_string())
    }

    fn try_raw(&mut self, args: &[&str]) -> Option<String> {
        if !self.try_send(args) {
            return None;
        }
        self.try_read()
    }

    fn read_into(&mut self, out: &mut String) -> Option<()> {
        use std::io::{BufRead, Read};
        let mut line = String::new();
        if self.r.read_line(&mut line).ok()? == 0 || !line.ends_with("\r\n") {
            return None;
        }
        out.push_str(&line);
        let n: i64 = line[1..line.len() - 2].parse().unwrap_or(0);
        match line.as_bytes()[0] {
            b'$' if n >= 0 => {
                let mut body = vec![0u8; n as usize + 2];
                self.r.read_exact(&mut body).ok()?;
                out.push_str(&String::from_utf8_lossy(&body));
            }
            b'*' if n > 0 => {
                for _ in 0..n {
                    self.read_into(out)?;
                }
            }
            _ => {}
        }
        Some(())
    }
}

/// Tiny deterministic PRNG (xorshift) for the kill moment and the load mix.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What the load clients saw acknowledged, accumulated over every round.
#[derive(Default)]
struct Acked {
    /// IDs whose XADD was acknowledged, per stream.
    added: Vec<Vec<String>>,
    /// IDs sent in XADD (acknowledged or not), per stream.
    sent: Vec<Vec<String>>,
    /// IDs an acknowledged XREADGROUP delivered to the group, per stream.
    delivered: Vec<Vec<String>>,
    /// IDs an XACK was sent for (acknowledged or not), per stream.
    ack_sent: Vec<Vec<String>>,
    /// IDs whose XACK was acknowledged with 1, per stream.
    acked: Vec<Vec<String>>,
    /// Highest sequence number sent so far (IDs are `<seq>-1`).
    seq: u64,
}

const CRASH_STREAMS: [&str; 3] = ["crash-a", "crash-b", "crash-c"];

/// Pipelined XADD (explicit, increasing IDs) + XREADGROUP + XACK until the
/// connection dies, adding what it saw to `a`.
fn crash_load(addr: std::net::SocketAddr, seed: u64, a: &mut Acked) {
    let Some(mut c) = CrashClient::connect(addr) else {
        return;
    };
    for s in CRASH_STREAMS {
        // BUSYGROUP after the first round: fine.
        if c.try_raw(&["XGROUP", "CREATE", s, "g", "0", "MKSTREAM"])
            .is_none()
        {
            return;
        }
    }
    let mut rng = Rng(seed | 1);
    loop {
        // One pipeline: XADDs, a read for the group, then acks of what was read.
        let mut expect = Vec::new();
        for _ in 0..(8 + rng.next() % 24) {
            let k = (rng.next() % 3) as usize;
            a.seq += 1;
            let id = format!("{}-1", a.seq);
            a.sent[k].push(id.clone());
            if !c.try_send(&["XADD", CRASH_STREAMS[k], &id, "n", &a.seq.to_string()]) {
                return;
            }
            expect.push((k, id));
        }
        let k = (rng.next() % 3) as usize;
        let read_ok = c.try_send(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "10",
            "STREAMS",
            CRASH_STREAMS[k],
            ">",
        ]);
        for (k, id) in expect {
            match c.try_read() {
                Some(r) if r == format!("${}\r\n{id}", id.len()) => a.added[k].push(id),
                Some(r) => panic!("unexpected XADD reply {r}"),
                None => return,
            }
        }
        if !read_ok {
            return;
        }
        let Some(read) = c.try_read() else {
            return;
        };
        let ids: Vec<String> = read
            .split("\r\n")
            .filter(|l| l.ends_with("-1") && !l.starts_with('$'))
            .map(str::to_string)
            .collect();
        a.delivered[k].extend(ids.iter().cloned());
        // Ack most of them; leave some pending to check the PEL survives.
        let to_ack: Vec<String> = ids
            .into_iter()
            .filter(|_| !rng.next().is_multiple_of(4))
            .collect();
        for id in &to_ack {
            a.ack_sent[k].push(id.clone());
            if !c.try_send(&["XACK", CRASH_STREAMS[k], "g", id]) {
                return;
            }
        }
        for id in to_ack {
            match c.try_read() {
                Some(r) if r == ":1" => a.acked[k].push(id),
                Some(r) => panic!("unexpected XACK reply {r}"),
                None => return,
            }
        }
    }
}

/// After a restart: every acknowledged entry is there and nothing unsent;
/// every delivered entry not sent an XACK is pending, no acknowledged XACK
/// is pending again; the group's last-delivered-id covers every delivery.
fn check_after_restart(c: &mut RespClient, a: &Acked, round: u64, seed: u64) {
    let ctx = format!("round {round} seed {seed:x}");
    for (k, s) in CRASH_STREAMS.iter().enumerate() {
        let range = c.raw(&["XRANGE", s, "-", "+"]);
        let present: std::collections::HashSet<&str> = range
            .split("\r\n")
            .filter(|l| l.ends_with("-1") && !l.starts_with('$'))
            .collect();
        for id in &a.added[k] {
            assert!(
                present.contains(id.as_str()),
                "{ctx}: acknowledged {s} {id} lost"
            );
        }
        let sent: std::collections::HashSet<&str> = a.sent[k].iter().map(String::as_str).collect();
        for id in &present {
            assert!(sent.contains(id), "{ctx}: {s} {id} never sent");
        }
        let pending = c.raw(&["XPENDING", s, "g", "-", "+", "1000000"]);
        let pending: std::collections::HashSet<&str> = pending
            .split("\r\n")
            .filter(|l| l.ends_with("-1") && !l.starts_with('$'))
            .collect();
        for id in &a.acked[k] {
            assert!(
                !pending.contains(id.as_str()),
                "{ctx}: acked {s} {id} pending again"
            );
        }
        for id in &a.delivered[k] {
            if !a.ack_sent[k].contains(id) {
                assert!(
                    pending.contains(id.as_str()),
                    "{ctx}: delivered {s} {id} not pending"
                );
            }
        }
        if let Some(max) = a.delivered[k]
            .iter()
            .filter_map(|id| id.trim_end_matches("-1").parse::<u64>().ok())
            .max()
        {
            let groups = c.raw(&["XINFO", "GROUPS", s]);
            let last = groups
                .split("\r\n")
                .skip_while(|l| *l != "last-delivered-id")
                .nth(2)
                .and_then(|v| v.split('-').next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            assert!(
                last >= max,
                "{ctx}: {s} last-delivered-id {last} < delivered {max}"
            );
        }
    }
}

/// `kill -9` at a random moment under pipelined load with `appendfsync
/// always`, then restart on the same files and check everything
/// acknowledged, round after round (the files accumulate torn tails cut,
/// rewrites switched or interrupted). `SHARDSTREAM_CRASH_ROUNDS` sets the
/// number of rounds; the default is 4 (CI), or 12 when
/// `SHARDSTREAM_SOAK_SECS` is set (the soak run).
#[test]
fn sigkill_under_pipelined_load_loses_no_acknowledged_write() {
    let rounds: u64 = std::env::var("SHARDSTREAM_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if std::env::var_os("SHARDSTREAM_SOAK_SECS").is_some() {
            12
        } else {
            4
        });
    let seed0: u64 = std::env::var("SHARDSTREAM_CRASH_SEED")
        .ok()
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0x9e37_79b9);
    let dir = ScratchDir::new("aof-crash");
    let mut a = Acked {
        added: vec![Vec::new(); 3],
        sent: vec![Vec::new(); 3],
        delivered: vec![Vec::new(); 3],
        ack_sent: vec![Vec::new(); 3],
        acked: vec![Vec::new(); 3],
        seq: 0,
    };
    let mut rng = Rng(seed0);
    for round in 0..rounds {
        let seed = rng.next();
        let child = Child::start(&dir);
        let addr = child.addr();
        if round > 0 {
            check_after_restart(&mut RespClient::connect(addr), &a, round, seed0);
        }
        let before = a.added.iter().map(Vec::len).sum::<usize>();
        let mut acked = std::mem::take(&mut a);
        let load = std::thread::spawn(move || {
            crash_load(addr, seed, &mut acked);
            acked
        });
        let kill_after = Duration::from_millis(150 + seed % 900);
        if seed.is_multiple_of(3) {
            // Crash in or around a rewrite too.
            std::thread::sleep(kill_after / 2);
            let mut c = RespClient::connect(addr);
            let _ = c.raw(&["BGREWRITEAOF"]);
            std::thread::sleep(kill_after / 2);
        } else {
            std::thread::sleep(kill_after);
        }
        child.kill9();
        a = load.join().unwrap();
        assert!(
            a.added.iter().map(Vec::len).sum::<usize>() > before,
            "round {round} seed {seed0:x}: no load ran"
        );
    }
    let child = Child::start(&dir);
    check_after_restart(&mut RespClient::connect(child.addr()), &a, rounds, seed0);
}

/// The Redis 8 options change PELs and entries too: their effects must survive
/// a restart (replay of the incr files) exactly like the 7.x commands.
#[test]
fn redis8_stream_options_survive_restart() {
    let dir = ScratchDir::new("aof-redis8");
    let cfg = aof_config(&dir, 2, FsyncPolicy::EverySec);
    let script: &[&[&str]] = &[
        &["XADD", "r8", "1-1", "f", "a"],
        &["XADD", "r8", "2-1", "f", "b"],
        &["XADD", "r8", "3-1", "f", "c"],
        &["XADD", "r8", "4-1", "f", "d"],
        &["XADD", "r8", "5-1", "f", "e"],
        &["XADD", "r8", "6-1", "f", "f"],
        &["XGROUP", "CREATE", "r8", "g", "0"],
        &["XGROUP", "CREATE", "r8", "h", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "COUNT",
            "4",
            "STREAMS",
            "r8",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "h",
            "c2",
            "COUNT",
            "2",
            "STREAMS",
            "r8",
            ">",
        ],
        &["XACKDEL", "r8", "g", "KEEPREF", "IDS", "1", "1-1"],
        &["XACKDEL", "r8", "h", "DELREF", "IDS", "1", "2-1"],
        &["XDELEX", "r8", "DELREF", "IDS", "1", "3-1"],
        &["XTRIM", "r8", "MAXLEN", "=", "2", "ACKED"],
        &["XADD", "r8", "MAXLEN", "=", "2", "DELREF", "7-1", "f", "g"],
    ];
    let before = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        for args in script {
            let r = c.raw(args);
            assert!(!r.starts_with('-'), "{args:?} -> {r}");
        }
        std::thread::sleep(Duration::from_millis(20));
        // CLAIM takes over entries idle for at least 10 ms.
        let r = c.raw(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c3",
            "CLAIM",
            "10",
            "STREAMS",
            "r8",
            ">",
        ]);
        assert!(!r.starts_with('-'), "{r}");
        vec![
            c.raw(&["XINFO", "STREAM", "r8", "FULL"]),
            c.raw(&["XRANGE", "r8", "-", "+"]),
            c.raw(&["XPENDING", "r8", "g", "-", "+", "10"]),
            c.raw(&["XPENDING", "r8", "h", "-", "+", "10"]),
        ]
    };
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    let after = vec![
        c.raw(&["XINFO", "STREAM", "r8", "FULL"]),
        c.raw(&["XRANGE", "r8", "-", "+"]),
        c.raw(&["XPENDING", "r8", "g", "-", "+", "10"]),
        c.raw(&["XPENDING", "r8", "h", "-", "+", "10"]),
    ];
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        // XPENDING's idle times move on; compare everything else.
        let strip = |s: &str| {
            s.lines()
                .filter(|l| !l.starts_with(':') || i < 2)
                .collect::<Vec<_>>()
                .join("\n")
        };
        if i < 2 {
            assert_eq!(a, b, "item {i} differs after restart");
        } else {
            assert_eq!(strip(a), strip(b), "item {i} differs after restart");
        }
    }
}

/// XNACK (Redis 8.8) leaves unowned PEL entries (delivery time 0): they must
/// come back unowned after replaying the incr files and after loading a
/// rewritten base, with their counts, and stay out of every consumer's PEL.
#[test]
fn xnack_unowned_entries_survive_restart_and_rewrite() {
    let dir = ScratchDir::new("aof-xnack");
    let cfg = aof_config(&dir, 2, FsyncPolicy::EverySec);
    let script: &[&[&str]] = &[
        &["XADD", "nk", "1-1", "f", "a"],
        &["XADD", "nk", "2-1", "f", "b"],
        &["XADD", "nk", "3-1", "f", "c"],
        &["XADD", "nk", "4-1", "f", "d"],
        &["XADD", "nk", "5-1", "f", "e"],
        &["XGROUP", "CREATE", "nk", "g", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "COUNT",
            "3",
            "STREAMS",
            "nk",
            ">",
        ],
        &["XNACK", "nk", "g", "FAIL", "IDS", "2", "1-1", "2-1"],
        &["XNACK", "nk", "g", "FATAL", "IDS", "1", "3-1"],
        // 5-1 was never delivered: FORCE creates it unowned.
        &[
            "XNACK",
            "nk",
            "g",
            "SILENT",
            "IDS",
            "1",
            "5-1",
            "RETRYCOUNT",
            "7",
            "FORCE",
        ],
    ];
    let probe = |c: &mut RespClient| {
        vec![
            c.raw(&["XINFO", "STREAM", "nk", "FULL"]),
            c.raw(&["XPENDING", "nk", "g", "-", "+", "10"]),
            c.raw(&["XPENDING", "nk", "g"]),
            c.raw(&["XPENDING", "nk", "g", "-", "+", "10", "c1"]),
            c.raw(&["XINFO", "CONSUMERS", "nk", "g"]),
        ]
    };
    // XINFO CONSUMERS has idle times; keep its names and pending counts only.
    let stable = |v: Vec<String>| -> Vec<String> {
        let mut v = v;
        if let Some(last) = v.last_mut() {
            let lines: Vec<&str> = last.split("\r\n").collect();
            *last = lines
                .iter()
                .enumerate()
                .filter(|(i, l)| !l.starts_with(':') || (*i >= 1 && lines[*i - 1] == "pending"))
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\r\n");
        }
        v
    };
    let before = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        for args in script {
            let r = c.raw(args);
            assert!(!r.starts_with('-'), "{args:?} -> {r}");
        }
        stable(probe(&mut c))
    };
    assert!(
        before[1].contains("$0\r\n\r\n:-1\r\n:9223372036854775807"),
        "{}",
        before[1]
    );
    let after_incr = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        let s = stable(probe(&mut c));
        assert_eq!(
            c.raw(&["BGREWRITEAOF"]),
            "+Background append only file rewriting started"
        );
        wait_rewrite_done(&mut c);
        s
    };
    for (i, (a, b)) in before.iter().zip(&after_incr).enumerate() {
        assert_eq!(a, b, "item {i} differs after replaying the incr files");
    }
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    let after_base = stable(probe(&mut c));
    for (i, (a, b)) in before.iter().zip(&after_base).enumerate() {
        assert_eq!(a, b, "item {i} differs after loading the rewritten base");
    }
    // No consumer named "" was invented by the replay.
    assert!(!after_base[4].contains("$0\r\n\r\n"), "{}", after_base[4]);
    assert_eq!(after_base[3], "*0");
}

/// XREADGROUP CLAIM serves XNACKed entries in release order (Redis 8.8's
/// NACK zone): a rewritten AOF must keep that order, not the ID order.
#[test]
fn xnack_release_order_survives_a_rewrite() {
    let dir = ScratchDir::new("aof-xnack-order");
    let cfg = aof_config(&dir, 2, FsyncPolicy::EverySec);
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        for i in 1..=4 {
            c.raw(&["XADD", "no", &format!("{i}-1"), "f", "v"]);
        }
        c.raw(&["XGROUP", "CREATE", "no", "g", "0"]);
        c.raw(&["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "no", ">"]);
        for id in ["3-1", "1-1", "4-1"] {
            assert_eq!(c.raw(&["XNACK", "no", "g", "FAIL", "IDS", "1", id]), ":1");
        }
    }
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        assert_eq!(
            c.raw(&["BGREWRITEAOF"]),
            "+Background append only file rewriting started"
        );
        wait_rewrite_done(&mut c);
    }
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    let args = [
        "XREADGROUP",
        "GROUP",
        "g",
        "c2",
        "COUNT",
        "3",
        "CLAIM",
        "3600000",
        "STREAMS",
        "no",
        ">",
    ];
    let read = c.raw(&args);
    assert_eq!(entry_ids(&read), ["3-1", "1-1", "4-1"], "{read}");
}

#[test]
fn idmp_state_and_xcfgset_survive_restart_and_rewrite() {
    let dir = ScratchDir::new("aof-idmp");
    let cfg = aof_config(&dir, 2, FsyncPolicy::EverySec);
    let script: &[&[&str]] = &[
        &["XADD", "ip", "IDMP", "p1", "m1", "*", "f", "a"],
        &["XADD", "ip", "IDMP", "p1", "m1", "*", "f", "dup"],
        &["XADD", "ip", "IDMPAUTO", "p2", "*", "f", "b"],
        &["XADD", "ip", "IDMPAUTO", "p2", "*", "f", "b"],
        &["XADD", "ic", "*", "f", "x"],
        &["XCFGSET", "ic", "IDMP-DURATION", "300"],
        &["XCFGSET", "ic", "IDMP-DURATION", "300", "IDMP-MAXSIZE", "2"],
        &["XADD", "ic", "IDMP", "p", "1", "*", "f", "1"],
        &["XADD", "ic", "IDMP", "p", "2", "*", "f", "2"],
        &["XADD", "ic", "IDMP", "p", "3", "*", "f", "3"],
    ];
    let probe = |c: &mut RespClient| {
        vec![
            c.raw(&["XINFO", "STREAM", "ip"]),
            c.raw(&["XINFO", "STREAM", "ic"]),
            c.raw(&["XLEN", "ip"]),
        ]
    };
    let (before, ids) = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        let mut ids = Vec::new();
        for args in script {
            let r = c.raw(args);
            assert!(!r.starts_with('-'), "{args:?} -> {r}");
            ids.push(r);
        }
        (probe(&mut c), ids)
    };
    assert!(
        before[0].contains("$15\r\niids-duplicates\r\n:2"),
        "{}",
        before[0]
    );
    assert!(
        before[1].contains(
            "$12\r\nidmp-maxsize\r\n:2\r\n$12\r\npids-tracked\r\n:1\r\n$12\r\niids-tracked\r\n:2"
        ),
        "{}",
        before[1]
    );
    // After a restart and after a rewrite, duplicates are still recognised:
    // the original IDs come back and nothing is added.
    let check = |c: &mut RespClient| {
        assert_eq!(
            c.raw(&["XADD", "ip", "IDMP", "p1", "m1", "*", "f", "again"]),
            ids[0]
        );
        assert_eq!(
            c.raw(&["XADD", "ip", "IDMPAUTO", "p2", "*", "f", "b"]),
            ids[2]
        );
        assert_eq!(
            c.raw(&["XADD", "ic", "IDMP", "p", "3", "*", "f", "3"]),
            ids[9]
        );
        // "1" was evicted by IDMP-MAXSIZE 2: a new entry.
        let fresh = c.raw(&["XADD", "ic", "IDMP", "p", "1", "*", "f", "1"]);
        assert_ne!(fresh, ids[7]);
    };
    let after_incr = {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        let s = probe(&mut c);
        assert_eq!(
            c.raw(&["BGREWRITEAOF"]),
            "+Background append only file rewriting started"
        );
        wait_rewrite_done(&mut c);
        s
    };
    for (i, (a, b)) in before.iter().zip(&after_incr).enumerate() {
        assert_eq!(a, b, "item {i} differs after replaying the incr files");
    }
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    let after_base = probe(&mut c);
    for (i, (a, b)) in before.iter().zip(&after_base).enumerate() {
        assert_eq!(a, b, "item {i} differs after loading the rewritten base");
    }
    check(&mut c);
}
