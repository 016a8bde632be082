//! End-to-end: run the `loadgen` binary for 2 s and check the counts (no loss,
//! no duplicates) and that both the text output and the JSON parse.
//!
//! Targets: the embedded shardstream (no target flags: the README's "run the
//! main job"), and a real `redis-server` when one is installed (skipped
//! otherwise; CI installs it).

use std::net::TcpStream;
use std::path::PathBuf;
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
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let server = RedisServer { port, child };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("loadgen-test-{}-{name}", std::process::id()))
}

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("loadgen runs")
}

/// A 2 s latency run with `target` flags; asserts exit 0, exactly-once counts,
/// a bucket table summing to 100% and a JSON report with the documented keys.
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
        out.status.success(),
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
    assert!(stdout.contains("check: OK"), "{stdout}");
    assert!(stdout.contains("latency us: p50 "), "{stdout}");

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
    assert_eq!(n("duplicates"), 0);
    assert_eq!(n("errors"), 0);
    assert_eq!(v["passed"], true);
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

    let log = std::fs::read_to_string(&hdr).expect("hdr log written");
    assert!(log.lines().any(|l| l.starts_with("#[StartTime: ")), "{log}");
    assert_eq!(
        log.lines().filter(|l| l.starts_with("0.000,")).count(),
        1,
        "{log}"
    );
    let plot = std::fs::read_to_string(&svg).expect("svg written");
    assert!(plot.starts_with("<svg") && plot.contains("<polyline"));
    for p in [json, hdr, svg] {
        let _ = std::fs::remove_file(p);
    }
}

/// The README's default job, shortened: no target flags → embedded shardstream.
/// Exercises shardstream's XADD, XREADGROUP BLOCK across shards and XACK.
#[test]
fn latency_against_embedded_shardstream() {
    check_latency_run(&["--embedded-shards", "2"], "embedded");
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
}
