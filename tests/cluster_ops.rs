//! Cluster operations with the standard tools, as against redis-server:
//! four shardstream processes started with redis-server's cluster command
//! line (`--cluster-enabled yes --cluster-config-file nodes.conf ...`),
//! `redis-cli --cluster create` of three, `add-node` of the fourth, then
//! `reshard` and `rebalance` while a redis-py writer (XADD) and group reader
//! (XREADGROUP + XACK) run, and a `reshard` back. Afterwards every
//! acknowledged entry is in its stream exactly once, every consumer group's
//! PEL, consumers and last-delivered-id are what the clients did, each key
//! is on the node owning its slot only, and `redis-cli --cluster check` is
//! clean. The scenario and its checks are tests/py/cluster_reshard.py, which
//! passes against redis-server the same way:
//!
//! ```text
//! python3 tests/py/cluster_reshard.py redis-server /tmp/reshard
//! ```
mod common;

use std::process::{Command, Stdio};

use common::ScratchDir;

/// Whether `program args` runs and succeeds.
fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether redis-cli and python3 with redis-py are here. With
/// `SHARDSTREAM_REQUIRE_REDIS` set (CI sets it) their absence is a failure,
/// not a skip.
fn have_tools() -> bool {
    let missing: Vec<&str> = [
        ("redis-cli", runs("redis-cli", &["--version"])),
        (
            "python3 with redis-py",
            runs("python3", &["-c", "import redis.cluster"]),
        ),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(name, _)| name)
    .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("SHARDSTREAM_REQUIRE_REDIS").is_none(),
        "{} required (apt-get install redis-tools; pip install redis)",
        missing.join(" and ")
    );
    eprintln!("{} not available: skipping", missing.join(" and "));
    false
}

#[test]
fn redis_cli_reshard_and_rebalance_under_stream_traffic() {
    if !have_tools() {
        return;
    }
    let dir = ScratchDir::new("cluster-ops");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/cluster_reshard.py");
    // Two shards per node, so keys of one node also live on different shard
    // threads; no CPU pinning with four nodes on one machine.
    let out = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_shardstream"))
        .arg(dir.path())
        .args(["--", "--shards", "2", "--no-pin"])
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cluster reshard scenario failed (node log tails in its output):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("\nPASS: "), "{stdout}");
}
