//! Cluster flag consistency: a default (standalone) node answers CLUSTER,
//! READONLY, READWRITE and ASKING as Redis standalone does and reports
//! `cluster_enabled:0`; `--cluster-mode emulated` presents a one-node cluster
//! with `cluster_enabled:1` that `redis-cli --cluster check` and redis-py's
//! `RedisCluster` accept.
mod common;

use std::process::{Command, Stdio};

use common::{assert_same_replies, RedisServer, TestServer};

fn emulated(shards: u16) -> TestServer {
    TestServer::with_config(shardstream::config::Config {
        shards,
        cluster_emulated: true,
        ..common::test_config()
    })
}

#[test]
fn standalone_answers_as_redis_standalone() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let disabled = "-ERR This instance has cluster support disabled";
    for cmd in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "KEYSLOT", "a"],
        &["CLUSTER", "HELP"],
        &["READONLY"],
        &["READWRITE"],
        &["ASKING"],
    ] {
        assert_eq!(c.raw(cmd), disabled, "{cmd:?}");
    }
    assert!(c.raw(&["INFO", "cluster"]).contains("cluster_enabled:0"));
    assert_eq!(
        c.raw(&["CONFIG", "GET", "cluster-mode"]),
        "*2\r\n$12\r\ncluster-mode\r\n$10\r\nstandalone"
    );
    let Some(redis) = RedisServer::start() else {
        return;
    };
    assert_same_replies(
        &mut c,
        &mut redis.client(),
        "
        CLUSTER INFO
        CLUSTER NODES
        CLUSTER KEYSLOT foo
        CLUSTER nope
        CLUSTER KEYSLOT
        READONLY
        ASKING
        INFO cluster
        CONFIG GET cluster-enabled
        ",
    );
}

#[test]
fn emulated_cluster_agrees_in_info_and_cluster() {
    let srv = emulated(2);
    let mut c = srv.client();
    assert!(c.raw(&["INFO", "cluster"]).contains("cluster_enabled:1"));
    assert!(c.raw(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
    assert_eq!(c.raw(&["CLUSTER", "KEYSLOT", "foo"]), ":12182");
    assert_eq!(c.raw(&["READONLY"]), "+OK");
    assert_eq!(
        c.raw(&["CONFIG", "GET", "cluster-enabled"]),
        "*2\r\n$15\r\ncluster-enabled\r\n$3\r\nyes"
    );
    // `cluster-enabled yes` in a config is a real cluster node, as in Redis;
    // `cluster-mode cluster` says the same in shardstream's own words.
    let mut cfg = common::test_config();
    cfg.apply_file_text("cluster-enabled yes\n").unwrap();
    assert!(cfg.cluster_enabled && !cfg.cluster_emulated);
    cfg.apply_file_text("cluster-mode emulated\n").unwrap();
    assert!(cfg.cluster_emulated && !cfg.cluster_enabled);
    cfg.apply_file_text("cluster-mode cluster\n").unwrap();
    assert!(cfg.cluster_enabled && !cfg.cluster_emulated);
    cfg.apply_file_text("cluster-mode standalone\n").unwrap();
    assert!(!cfg.cluster_emulated && !cfg.cluster_enabled);
    assert!(cfg.apply_file_text("cluster-mode sharded\n").is_err());
    assert_eq!(
        c.raw(&["CONFIG", "SET", "cluster-mode", "standalone"]),
        "-ERR CONFIG SET failed (possibly related to argument 'cluster-mode') - can't set immutable config"
    );
}

#[test]
fn redis_cli_cluster_check_accepts_emulated_and_refuses_standalone() {
    let installed = Command::new("redis-cli")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if !installed {
        eprintln!("redis-cli not installed: skipping");
        return;
    }
    let check = |srv: &TestServer| {
        Command::new("redis-cli")
            .args(["--cluster", "check", &srv.addr.to_string()])
            .output()
            .expect("run redis-cli")
    };
    let srv = emulated(2);
    let out = check(&srv);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("[OK] All 16384 slots covered."), "{text}");
    let plain = TestServer::start(2);
    let out = check(&plain);
    assert!(!out.status.success(), "{out:?}");
}

#[test]
fn redis_py_cluster_client_uses_emulated_node() {
    let has_py = Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_py {
        eprintln!("redis-py not installed: skipping");
        return;
    }
    let srv = emulated(2);
    let script = r#"
import sys
from redis.cluster import RedisCluster
rc = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]), decode_responses=True)
for i in range(50):
    rc.xadd(f"s{i}", {"n": i}, id="1-1")
assert all(rc.xlen(f"s{i}") == 1 for i in range(50))
rc.xgroup_create("s7", "g", id="0")
got = rc.xreadgroup("g", "c", {"s7": ">"})
assert got[0][1][0][1] == {"n": "7"}, got
print("ok", len(rc.get_nodes()))
"#;
    let out = Command::new("python3")
        .args(["-c", script, &srv.addr.port().to_string()])
        .output()
        .expect("run python3");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok 1");
    // Against a standalone node RedisCluster refuses to start.
    let plain = TestServer::start(2);
    let out = Command::new("python3")
        .args(["-c", script, &plain.addr.port().to_string()])
        .output()
        .expect("run python3");
    assert!(!out.status.success(), "{out:?}");
}
