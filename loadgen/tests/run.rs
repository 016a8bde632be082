//! End-to-end: run the `loadgen` binary for 2 s and check the counts (no loss,
//! no duplicates) and that the text output, the JSON, the `.hlog` and the SVG
//! parse; a run saturated on purpose says so; a closed-loop run stays bounded.
//! No assertion depends on how fast this machine is.
//!
//! Targets: the embedded shardstream (no target flags: the README's "run the
//! main job"), and a real `redis-server` when one is installed (skipped
//! otherwise; CI installs it).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A throwaway `redis-server` on a free loopback port; killed on drop.
struct RedisServer {
    port: u16,
    child: Child,
}

impl RedisServer {
    fn start() -> Option<RedisServer> {
        RedisServer::start_with(&[])
    }

    /// Started with extra configuration arguments (`--requirepass x`).
    /// `None` when redis-server is not installed. A port another process
    /// took between our pick and redis-server's bind makes it exit: it is
    /// started again on a new port.
    fn start_with(extra: &[&str]) -> Option<RedisServer> {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .ok()?
                .local_addr()
                .ok()?
                .port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .ok()?;
            let mut server = RedisServer { port, child };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if !matches!(server.child.try_wait(), Ok(None)) {
                    break;
                }
                if let Ok(sock) = TcpStream::connect(("127.0.0.1", port)) {
                    // Listening: ours only if it is our child (another
                    // test's server may have taken the port, and ours
                    // then exits, though maybe not at once).
                    let ours = match server_pid(sock) {
                        Some(Some(pid)) => pid == server.child.id(),
                        // An error (NOAUTH): still alive after a moment.
                        Some(None) => {
                            std::thread::sleep(Duration::from_millis(50));
                            matches!(server.child.try_wait(), Ok(None))
                        }
                        None => false,
                    };
                    if ours {
                        return Some(server);
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }
}

/// The `process_id` INFO reports on this connection if it answers within
/// 5 s: `Some(None)` when it answers with an error (a password is set).
fn server_pid(mut sock: TcpStream) -> Option<Option<u32>> {
    use std::io::{Read, Write};
    sock.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    sock.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = sock.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        text.extend_from_slice(&buf[..n]);
        if text.starts_with(b"-") {
            return Some(None);
        }
        let s = String::from_utf8_lossy(&text);
        if let Some(rest) = s.split("process_id:").nth(1) {
            if let Some(line) = rest.split("\r\n").next().filter(|_| rest.contains("\r\n")) {
                return Some(line.trim().parse().ok());
            }
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The run's standard output, once it is known to have exited with `code`
/// (both outputs are shown otherwise).
fn exited(out: &Output, code: i32) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The `--json` report at `path`: its text (for messages) and its value.
fn report(path: &Path) -> (String, Value) {
    let text = std::fs::read_to_string(path).expect("json written");
    let v = serde_json::from_str(&text).expect("json parses");
    (text, v)
}

/// A path under the system temp dir for one test's output file (or
/// directory), removed when dropped, a failing test's too.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.is_dir() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn scratch(name: &str) -> Scratch {
    Scratch(std::env::temp_dir().join(format!("loadgen-test-{}-{name}", std::process::id())))
}

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("loadgen runs")
}

/// Exit code of a run that kept up (0) or, on a loaded machine, fell behind (3).
fn ok_or_saturated(out: &Output) -> bool {
    matches!(out.status.code(), Some(0) | Some(3))
}

/// A 2 s latency run with `target` flags; asserts exactly-once counts (exit 0,
/// or 3 if this machine was too busy to keep up: that is not what is tested
/// here), a bucket table summing to 100%, a JSON report with the documented
/// keys, one `.hlog` interval per second and an SVG that parses.
fn check_latency_run(target: &[&str], tag: &str) {
    let json = scratch(&format!("{tag}.json"));
    let hdr = scratch(&format!("{tag}.hlog"));
    let svg = scratch(&format!("{tag}.svg"));
    let mut args = target.to_vec();
    let (j, h, s) = (
        json.to_str().unwrap(),
        hdr.to_str().unwrap(),
        svg.to_str().unwrap(),
    );
    args.extend([
        "--duration",
        "2",
        "--warmup",
        "0.2",
        "--rate",
        "2000",
        "--streams",
        "3",
        "--json",
        j,
        "--hdr",
        h,
        "--plot",
        s,
        "--quiet",
    ]);
    let out = loadgen(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        ok_or_saturated(&out),
        "loadgen failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );

    // Text: the docs' table, then the summary lines.
    let mut total_pct = 0.0;
    let mut rows = 0;
    for line in stdout.lines().filter(|l| l.starts_with("Processed ")) {
        let pct = line
            .rsplit("-> ")
            .next()
            .and_then(|p| p.strip_suffix('%'))
            .and_then(|p| p.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("bad table row: {line}"));
        total_pct += pct;
        rows += 1;
    }
    assert!(rows > 0, "no table rows in:\n{stdout}");
    assert!(
        (total_pct - 100.0).abs() < 0.05 * rows as f64,
        "rows sum to {total_pct}"
    );
    assert!(stdout.contains("latency  p50 "), "{stdout}");
    assert!(stdout.contains("rate     target 2000/s  sent "), "{stdout}");
    assert!(
        stdout.contains("verdict  OK: every entry delivered exactly once")
            || stdout.contains("verdict  SATURATED (exit 3)"),
        "{stdout}"
    );

    // JSON: every sent entry received and acked exactly once.
    let text = std::fs::read_to_string(&json).expect("json written");
    let v: Value = serde_json::from_str(&text).expect("json parses");
    let n = |k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("{k} missing in {text}"))
    };
    let sent = n("sent");
    // 2.2 s scheduled at 2000/s.
    assert_eq!(sent + n("unsent"), 4400, "{text}");
    assert!(sent > 0);
    assert_eq!(n("received"), sent, "{text}");
    assert_eq!(n("unique"), sent, "{text}");
    assert_eq!(n("acked"), sent, "{text}");
    assert_eq!(n("lost"), 0);
    assert_eq!(n("backlog_left"), 0);
    assert_eq!(n("duplicates"), 0);
    assert_eq!(n("errors"), 0);
    assert_eq!(v["passed"], true);
    assert_eq!(v["drain"], "drained");
    let lat = &v["latency_us"];
    for k in ["p50", "p90", "p99", "p99.9", "p99.99", "max"] {
        assert!(lat[k].as_u64().is_some(), "latency_us.{k} missing");
    }
    assert!(lat["p50"].as_u64() <= lat["p99"].as_u64());
    assert!(lat["p99"].as_u64() <= lat["max"].as_u64());
    // Entries scheduled in the measured 2 s window are recorded.
    assert_eq!(lat["count"].as_u64(), Some(sent - 400), "{text}");
    assert!(v["server_info"]["redis_version"].is_string(), "{text}");
    assert_eq!(v["config"]["streams"], 3);
    // The timeline: at least the 2 measured seconds, their samples adding up.
    let timeline = v["timeline"].as_array().expect("timeline");
    assert!(timeline.len() >= 2, "{text}");
    assert_eq!(timeline[0]["phase"], "measure");
    let samples: u64 = timeline
        .iter()
        .map(|s| s["samples"].as_u64().unwrap())
        .sum();
    assert_eq!(Some(samples), lat["count"].as_u64());
    let sent_per_s: u64 = timeline.iter().map(|s| s["sent"].as_u64().unwrap()).sum();
    assert!(sent_per_s <= sent, "{text}");

    // One interval per second of the window (and any drain second with samples).
    let log = std::fs::read_to_string(&hdr).expect("hdr log written");
    assert!(log.lines().any(|l| l.starts_with("#[StartTime: ")), "{log}");
    let starts: Vec<&str> = log
        .lines()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .filter_map(|l| l.split(',').next())
        .collect();
    assert!(starts.len() >= 2, "{log}");
    assert_eq!(&starts[..2], ["0.000", "1.000"], "{log}");
    let plot = std::fs::read_to_string(&svg).expect("svg written");
    let doc = roxmltree::Document::parse(&plot).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(
        doc.descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count(),
        1
    );
    assert!(plot.contains("2000 entries/s target"), "{plot}");
}

/// The README's default job, shortened: no target flags → embedded shardstream.
/// Exercises shardstream's XADD, XREADGROUP BLOCK across shards and XACK.
#[test]
fn latency_against_embedded_shardstream() {
    check_latency_run(&["--embedded-shards", "2"], "embedded");
}

/// One slow consumer on purpose (1 ms of simulated work per entry: at most
/// ~1000 entries/s) against a 3000/s target: the run must say SATURATED, exit
/// 3, and still lose nothing: the drain empties the backlog. Only slower
/// machines make it more saturated, so the outcome does not depend on timing.
#[test]
fn saturated_run_says_so_and_loses_nothing() {
    let json = scratch("saturated.json");
    let svg = scratch("saturated.svg");
    let out = loadgen(&[
        "--embedded-shards",
        "1",
        "--rate",
        "3000",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--producers",
        "1",
        "--consumers",
        "1",
        "--count",
        "50",
        "--work-us",
        "1000",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--quiet",
    ]);
    let stdout = exited(&out, 3);
    assert!(
        stdout.contains("verdict  SATURATED (exit 3): nothing lost"),
        "{stdout}"
    );
    assert!(stdout.contains("  - consumers delivered "), "{stdout}");
    assert!(!stdout.contains("FAILED"), "{stdout}");
    let (text, v) = report(&json);
    assert_eq!(v["verdict"], "saturated");
    assert_eq!(v["passed"], true, "{text}");
    assert_eq!(v["lost"], 0, "{text}");
    assert_eq!(v["drain"], "drained", "{text}");
    assert_eq!(v["unique"], v["sent"], "{text}");
    assert!(v["backlog_at_end"].as_u64().unwrap() > 0, "{text}");
    assert!(
        v["rate_delivered"].as_f64().unwrap() < 0.95 * 3000.0,
        "{text}"
    );
    let plot = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&plot).expect("the SVG is well-formed XML");
}

/// The same slow consumer, but the drain is cut short (`--drain-max 0.3`):
/// the entries still in the group (XINFO GROUPS lag) are backlog, not lost.
#[test]
fn drain_cut_short_leaves_backlog_not_loss() {
    let json = scratch("capped.json");
    let out = loadgen(&[
        "--embedded-shards",
        "1",
        "--rate",
        "3000",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--producers",
        "1",
        "--consumers",
        "1",
        "--count",
        "50",
        "--work-us",
        "1000",
        "--drain-max",
        "0.3",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    let stdout = exited(&out, 3);
    let (text, v) = report(&json);
    assert_eq!(v["drain"], "capped", "{text}");
    assert_eq!(v["lost"], 0, "{text}");
    let left = v["backlog_left"].as_u64().unwrap();
    assert!(left > 0, "{text}");
    assert_eq!(
        left,
        v["sent"].as_u64().unwrap() - v["unique"].as_u64().unwrap(),
        "{text}"
    );
    assert!(stdout.contains("hit --drain-max in "), "{stdout}");
    assert!(
        stdout.contains("still undelivered when the drain's time limit passed"),
        "{stdout}"
    );
}

/// `--rate 0`: producers throttle to what the consumers drain, so the backlog
/// stays bounded, nothing is called lost, and the report gives the sustainable
/// rate (the README's old example exited 1 with a "lost" backlog).
#[test]
fn closed_loop_measures_sustainable_throughput() {
    let json = scratch("closed.json");
    let svg = scratch("closed.svg");
    let out = loadgen(&[
        "--embedded-shards",
        "1",
        "--rate",
        "0",
        "--duration",
        "1",
        "--warmup",
        "0.2",
        "--max-backlog",
        "500",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--quiet",
    ]);
    let stdout = exited(&out, 0);
    assert!(stdout.contains("rate     closed loop: "), "{stdout}");
    assert!(stdout.contains("delivered (max sustainable)"), "{stdout}");
    let (text, v) = report(&json);
    assert_eq!(v["verdict"], "ok");
    assert_eq!(v["lost"], 0);
    assert_eq!(v["max_backlog"], 500);
    // Two producers may each overshoot by one pipeline (16).
    assert!(
        v["backlog_at_end"].as_u64().unwrap() <= 500 + 2 * 16,
        "{text}"
    );
    assert!(v["rate_delivered"].as_f64().unwrap() > 0.0);
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.contains("closed loop, ") && !plot.contains(" 0 entries/s"),
        "{plot}"
    );
}

/// `--partition` on a 2-shard server: each consumer reads its own stream
/// (one per shard) and acknowledges each batch with its next read; every
/// entry arrives once and every one is acknowledged.
#[test]
fn partitioned_streams_deliver_and_ack_every_entry() {
    let json = scratch("partition.json");
    let out = loadgen(&[
        "--embedded-shards",
        "2",
        "--rate",
        "0",
        "--streams",
        "2",
        "--partition",
        "--duration",
        "1",
        "--warmup",
        "0.2",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    exited(&out, 0);
    let (text, v) = report(&json);
    assert_eq!(v["verdict"], "ok", "{text}");
    assert_eq!(v["lost"], 0);
    assert_eq!(v["duplicates"], 0);
    assert!(v["sent"].as_u64().unwrap() > 0, "{text}");
    assert_eq!(v["unique"], v["sent"], "{text}");
    assert_eq!(v["acked"], v["sent"], "{text}");
    assert_eq!(v["errors"], 0, "{text}");

    // Hash tags and partitions exclude each other.
    let out = loadgen(&["--partition", "--hash-tag", "--duration", "1"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A password in `--url` never reaches the output, even in errors.
#[test]
fn password_is_redacted_in_errors() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // bound then dropped: nothing listens there
    let url = format!("redis://:hunter2@127.0.0.1:{port}/");
    let out = loadgen(&["--url", &url, "--duration", "0.1", "--quiet"]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains(":***@127.0.0.1"), "{all}");
    assert!(!all.contains("hunter2"), "{all}");
}

#[test]
fn latency_against_redis_server() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let port = redis.port.to_string();
    check_latency_run(&["--port", &port], "redis");
}

/// Consumers read on their own connections (in-place decoding): they must
/// authenticate, select the database and speak RESP3 as the URL asks, as
/// the producers' redis-crate connections do.
#[test]
fn consumers_follow_the_url_auth_database_and_protocol() {
    let Some(redis) = RedisServer::start_with(&["--requirepass", "sesame"]) else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let port = redis.port;
    let mut admin = redis::Client::open(format!("redis://:sesame@127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("lg")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@all")
        .query(&mut admin)
        .unwrap();
    for (tag, url) in [
        ("auth-db3", format!("redis://:sesame@127.0.0.1:{port}/3")),
        (
            "user-resp3",
            format!("redis://lg:pw@127.0.0.1:{port}/5?protocol=resp3"),
        ),
    ] {
        check_latency_run(&["--url", &url], tag);
    }
    // The entries went to the asked databases (and were cleaned up there):
    // nothing was written to database 0.
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut admin)
        .unwrap();
    assert!(info.contains("cmdstat_select:"), "{info}");
    assert!(info.contains("cmdstat_hello:"), "{info}");
}

/// A `unix://` URL reaches the server on its Unix socket, in both modes.
#[test]
fn unix_socket_urls_are_followed() {
    let dir = scratch("unix-socket");
    let _ = std::fs::create_dir_all(&dir);
    let sock = dir.join("redis.sock");
    let _ = std::fs::remove_file(&sock);
    let sock_s = sock.to_str().unwrap().to_string();
    let Some(redis) = RedisServer::start_with(&["--unixsocket", &sock_s]) else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sock.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("unix://{sock_s}");
    check_latency_run(&["--url", &url], "unix");
    let out = loadgen(&["xadd", "--url", &url, "-n", "2000", "-c", "2", "-P", "8"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("XADD: 2000 ops"), "{text}");
    assert!(text.contains(" 0 errors"), "{text}");
    drop(redis);
}

#[test]
fn xadd_throughput_against_redis_server() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let port = redis.port.to_string();
    let json = scratch("xadd.json");
    let out = loadgen(&[
        "xadd",
        "--port",
        &port,
        "-c",
        "2",
        "-P",
        "4",
        "--keys",
        "2",
        "-n",
        "2000",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("XADD: 2000 ops in "), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(v["ops"], 2000);
    assert_eq!(v["errors"], 0);
    assert!(v["latency_us"]["p99.9"].as_u64().is_some());

    // Seven clients on three threads, partitioned over three keys: every
    // XADD lands once, client c on key c % 3 (the keys are kept to count).
    let out = loadgen(&[
        "xadd",
        "--port",
        &port,
        "-c",
        "7",
        "--threads",
        "3",
        "-P",
        "16",
        "--keys",
        "3",
        "--partition",
        "--key-prefix",
        "part",
        "--keep",
        "-n",
        "3000",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["ops"], 3000);
    assert_eq!(v["errors"], 0);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("part:*").query(&mut c).unwrap();
    assert_eq!(keys.len(), 3, "{keys:?}");
    let total: u64 = keys
        .iter()
        .map(|k| redis::cmd("XLEN").arg(k).query::<u64>(&mut c).unwrap())
        .sum();
    assert_eq!(total, 3000);
}

/// `--multi 2`: transactions of two XADDs over streams spread across the
/// slot space, against redis-server and an embedded shardstream (where the
/// two streams live on different shards): every EXEC answers, every entry
/// lands.
#[test]
fn multi_transactions_against_both_servers() {
    let redis = RedisServer::start();
    let redis_port = redis.as_ref().map(|r| r.port.to_string());
    let mut targets: Vec<Vec<&str>> = vec![vec!["--embedded-shards", "2"]];
    if let Some(p) = &redis_port {
        targets.push(vec!["--port", p]);
    }
    for target in targets {
        let json = scratch("multi.json");
        let mut args = vec!["xadd", "--multi", "2", "-c", "2", "-P", "4", "-n", "400"];
        args.extend(target.iter().copied());
        args.extend(["--json", json.to_str().unwrap(), "--quiet"]);
        let out = loadgen(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{target:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.starts_with("MULTI + 2 XADD + EXEC: 400 ops in "),
            "{target:?}: {stdout}"
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["ops"], 400, "{target:?}");
        assert_eq!(v["errors"], 0, "{target:?}");
    }
}

/// A run that cannot measure anything is a setup error (exit 2), named,
/// before any server starts: no producers, no consumers, no time.
#[test]
fn empty_runs_are_setup_errors() {
    for (args, name) in [
        (&["--producers", "0"][..], "--producers"),
        (&["--consumers", "0"][..], "--consumers"),
        (&["--duration", "0"][..], "--duration"),
        (&["--duration=-1"][..], "--duration"),
        // BLOCK 0 would wait forever: consumers could never stop.
        (&["--block-ms", "0"][..], "--block-ms"),
    ] {
        let out = loadgen(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(name), "{args:?}: {err}");
    }
}

/// `--cluster` against a standalone server says that is the problem.
#[test]
fn cluster_flag_on_a_standalone_server_says_so() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let port = redis.port.to_string();
    for args in [
        vec!["--port", &port, "--cluster", "--duration", "1"],
        vec!["xadd", "--port", &port, "--cluster", "-n", "10"],
    ] {
        let out = loadgen(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--cluster needs a Redis Cluster node"),
            "{args:?}: {err}"
        );
    }
}

/// `loadgen xadd` against a server it cannot use is a setup error with the
/// reason, not a run of anonymous errors.
#[test]
fn xadd_setup_errors_say_why() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string(); // bound then dropped: nothing listens there
    let out = loadgen(&["xadd", "--port", &closed, "-n", "100"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("refused"), "{err}");
    let Some(redis) = RedisServer::start_with(&["--requirepass", "right"]) else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let url = format!("redis://:wrong@127.0.0.1:{}/", redis.port);
    let out = loadgen(&["xadd", "--url", &url, "-n", "100"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("WRONGPASS"), "{err}");
    assert!(!err.contains("wrong@"), "{err}");
}

#[test]
fn delayed_mode_delivers_every_entry_once_against_embedded_shardstream() {
    let json = scratch("delayed.json");
    let out = loadgen(&[
        "delayed",
        "--rate",
        "2000",
        "--duration",
        "1",
        "--delay-ms",
        "50",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("lateness (receive - due) us: p50"),
        "{stdout}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["scheduled"], 2000, "{v}");
    assert_eq!(v["received"], 2000, "{v}");
    assert_eq!(v["duplicates"], 0, "{v}");
    assert!(v["lateness_us"]["p99.9"].as_u64().unwrap() > 0, "{v}");
}
