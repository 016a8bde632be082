//! Start-up never destroys data: a missing manifest, a record that fails on
//! replay and a torn tail under `aof-load-truncated no` stop start-up with a
//! message naming the file, offset and repair, leaving every file as it was;
//! leftovers of interrupted rewrites are removed, and only those.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{test_config, ScratchDir, TestServer};
use shardstream::aof::FsyncPolicy;
use shardstream::config::Config;

fn aof_config(dir: &Path, shards: u16) -> Config {
    Config {
        shards,
        dir: dir.to_path_buf(),
        appendonly: true,
        appendfsync: FsyncPolicy::Always,
        ..test_config()
    }
}

/// Every file in `dir`: name → contents.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Start must fail; returns its message.
fn start_error(cfg: Config) -> String {
    match shardstream::server::start_on(cfg, common::bind_free()) {
        Ok(h) => {
            h.shutdown();
            panic!("the server must refuse to start");
        }
        Err(e) => e.to_string(),
    }
}

/// The case: `--shards 2 --appendonly yes`, 1000 XADDs, stop, remove
/// `shard-0.manifest`, restart. Before the fix the server started with half
/// the entries and truncated `shard-0.incr.1.aof` to 0 bytes.
#[test]
fn a_missing_manifest_refuses_to_start_and_touches_no_file() {
    let dir = ScratchDir::new("aofstart-nomanifest");
    let cfg = aof_config(&dir, 2);
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        for i in 0..1000 {
            let r = c.raw(&["XADD", &format!("s{}", i % 10), "*", "f", "v"]);
            assert!(r.starts_with('$'), "{r}");
        }
    }
    std::fs::remove_file(dir.join("shard-0.manifest")).unwrap();
    let before = files(&dir);
    let incr0 = before["shard-0.incr.1.aof"].len();
    assert!(incr0 > 10_000, "shard 0 holds data ({incr0} bytes)");

    let err = start_error(cfg.clone());
    assert!(err.contains("shard-0.manifest is missing"), "{err}");
    assert!(
        err.contains(&format!("shard-0.incr.1.aof ({incr0} bytes)")),
        "{err}"
    );
    assert!(err.contains("To repair, restore"), "{err}");
    assert!(err.contains("incr shard-0.incr.1.aof"), "{err}");
    assert_eq!(files(&dir), before, "nothing in the directory changed");

    // Turning AOF on at run time must not reuse the orphan's name either.
    {
        let srv = TestServer::with_config(Config {
            appendonly: false,
            ..cfg.clone()
        });
        let mut c = srv.client();
        assert_eq!(c.raw(&["CONFIG", "SET", "appendonly", "yes"]), "+OK");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !dir.join("shard-0.manifest").exists() {
            assert!(std::time::Instant::now() < deadline, "no manifest written");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read(dir.join("shard-0.incr.1.aof")).unwrap(),
        before["shard-0.incr.1.aof"],
        "the orphaned file is never overwritten"
    );
}

/// The repair the message suggests works: writing the manifest it prints
/// brings every entry back.
#[test]
fn the_suggested_manifest_restores_the_shard() {
    let dir = ScratchDir::new("aofstart-repair");
    let cfg = aof_config(&dir, 2);
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        for i in 0..200 {
            c.raw(&["XADD", &format!("s{}", i % 10), "*", "f", "v"]);
        }
    }
    std::fs::remove_file(dir.join("shard-0.manifest")).unwrap();
    let err = start_error(cfg.clone());
    let text = &err[err.find("shardstream-aof-manifest").unwrap()..];
    std::fs::write(dir.join("shard-0.manifest"), text).unwrap();
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    let total: i64 = (0..10)
        .map(|i| {
            c.raw(&["XLEN", &format!("s{i}")])[1..]
                .parse::<i64>()
                .unwrap()
        })
        .sum();
    assert_eq!(total, 200);
}

/// Before: a record that parsed but failed on replay was skipped with a
/// warning and the server started with a silently different state.
#[test]
fn a_record_failing_on_replay_refuses_to_start_naming_file_offset_and_repair() {
    let dir = ScratchDir::new("aofstart-replayfail");
    let cfg = aof_config(&dir, 1);
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        for i in 1..10 {
            c.raw(&["XADD", "s", &format!("{i}-1"), "a", "b"]);
        }
    }
    let incr = dir.join("shard-0.incr.1.aof");
    let bytes = std::fs::read(&incr).unwrap();
    // Put a well-formed XADD with an ID below the stream's top in the middle.
    let mid = bytes.len() / 2;
    let at = mid + bytes[mid..].windows(3).position(|w| w == b"\n*5").unwrap() + 1;
    let bad = b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n1-1\r\n$1\r\na\r\n$1\r\nb\r\n";
    let mut damaged = bytes[..at].to_vec();
    damaged.extend_from_slice(bad);
    damaged.extend_from_slice(&bytes[at..]);
    std::fs::write(&incr, &damaged).unwrap();

    let err = start_error(cfg.clone());
    assert!(
        err.contains(&format!(
            "cannot replay the record at offset {at} of the append only file {}",
            incr.display()
        )),
        "{err}"
    );
    assert!(err.contains("XADD"), "{err}");
    assert!(
        err.contains(&format!("truncate -s {at} {}", incr.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&incr).unwrap(), damaged, "file untouched");

    // The repair step works: cut at the offset, the records before it load.
    let f = std::fs::OpenOptions::new().write(true).open(&incr).unwrap();
    f.set_len(at as u64).unwrap();
    let srv = TestServer::with_config(cfg);
    let n: i64 = srv.client().raw(&["XLEN", "s"])[1..].parse().unwrap();
    assert!((1..9).contains(&n), "{n}");
}

/// `aof-load-truncated no` refuses a torn tail instead of cutting it; `yes`
/// (the default) cuts it.
#[test]
fn aof_load_truncated_no_refuses_a_torn_tail() {
    let dir = ScratchDir::new("aofstart-loadtrunc");
    let cfg = aof_config(&dir, 1);
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        assert_eq!(
            c.raw(&["CONFIG", "GET", "aof-load-truncated"]),
            "*2\r\n$18\r\naof-load-truncated\r\n$3\r\nyes"
        );
        c.raw(&["XADD", "s", "1-1", "a", "b"]);
    }
    let incr = dir.join("shard-0.incr.1.aof");
    let mut torn = std::fs::read(&incr).unwrap();
    let good = torn.len();
    torn.extend_from_slice(b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n2-");
    std::fs::write(&incr, &torn).unwrap();

    let mut no = cfg.clone();
    no.set("aof-load-truncated", "no").unwrap();
    let err = start_error(no);
    assert!(
        err.contains(&format!(
            "the append only file {} ends with an incomplete record ({} bytes at offset {good}",
            incr.display(),
            torn.len() - good
        )),
        "{err}"
    );
    assert!(err.contains("aof-load-truncated is no"), "{err}");
    assert_eq!(std::fs::read(&incr).unwrap(), torn, "file untouched");

    let srv = TestServer::with_config(cfg);
    assert_eq!(srv.client().raw(&["XLEN", "s"]), ":1");
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), good as u64);
}

/// Files an interrupted rewrite leaves (a base the manifest never listed, a
/// superseded generation, temporary files, an empty incr created just
/// before a crash) are removed on start; listed files, other shards'
/// files, unknown files and an unlisted non-empty file newer than the
/// manifest are kept.
#[test]
fn leftovers_of_interrupted_rewrites_are_removed_on_start() {
    let dir = ScratchDir::new("aofstart-leftovers");
    let cfg = aof_config(&dir, 2);
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        for i in 0..50 {
            c.raw(&["XADD", &format!("s{}", i % 10), "*", "f", "v"]);
        }
        // A rewrite: the manifests now list base.2 + incr.2.
        assert_eq!(
            c.raw(&["BGREWRITEAOF"]),
            "+Background append only file rewriting started"
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !c
            .raw(&["INFO", "persistence"])
            .contains("aof_rewrite_in_progress:0")
        {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        c.raw(&["XADD", "s1", "*", "f", "after"]);
    }
    let manifest = std::fs::read_to_string(dir.join("shard-0.manifest")).unwrap();
    assert!(manifest.contains("base shard-0.base.2.aof"), "{manifest}");
    let junk: &[(&str, &[u8])] = &[
        ("shard-0.incr.1.aof", b"*1\r\n$4\r\nPING\r\n"), // superseded generation
        ("shard-0.base.1.aof", b"*1\r\n$4\r\nPING\r\n"), // superseded base
        ("shard-0.base.3.aof.tmp", b"partial"),          // rewrite cut short
        ("shard-0.manifest.tmp", b"half a manifest"),    // switch cut short
        ("shard-0.incr.4.aof", b""),                     // created, never listed
    ];
    let keep: &[(&str, &[u8])] = &[
        ("shard-0.incr.7.aof", b"*1\r\n$4\r\nPING\r\n"), // newer than the manifest
        ("notes.txt", b"operator notes"),
    ];
    for (name, body) in junk.iter().chain(keep) {
        std::fs::write(dir.join(name), body).unwrap();
    }
    let listed = files(&dir);
    {
        let srv = TestServer::with_config(cfg.clone());
        assert_eq!(srv.client().raw(&["XLEN", "s1"]), ":6");
    }
    let after = files(&dir);
    for (name, _) in junk {
        assert!(!after.contains_key(*name), "{name} should be removed");
    }
    for (name, body) in keep {
        assert_eq!(after.get(*name).map(Vec::as_slice), Some(*body), "{name}");
    }
    for name in [
        "shard-0.base.2.aof",
        "shard-1.base.2.aof",
        "shard-0.manifest",
    ] {
        assert_eq!(after.get(name), listed.get(name), "{name} kept as it was");
    }
    assert!(after.contains_key("shard-0.incr.2.aof"));
}
