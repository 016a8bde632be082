//! XREAD BLOCK with two or more clients over real sockets (4 shards).
//!
//! Before writing, a test waits until INFO `blocked_clients` shows the
//! reader parked ([`common::wait_blocked`]): the reader's connection may be
//! on another thread than its keys' shard, so no number of round trips by
//! the writer proves the read got there. `settle` gives a wrong answer (a
//! second reply, a wake-up that should not happen) time to arrive.
mod common;

use std::time::Duration;

use common::{resp_command, RespClient, TestServer};

const SHARDS: u16 = 4;

fn keys_on_two_shards(prefix: &str) -> (String, String) {
    common::keys_on_two_shards(prefix, SHARDS)
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// Wire text of an XREAD reply with one stream and one entry `id` holding `f v`.
fn one_entry(key: &str, id: &str, f: &str, v: &str) -> String {
    let s = format!(
        "*1\r\n*2\r\n{}*1\r\n*2\r\n{}*2\r\n{}{}",
        bulk(key),
        bulk(id),
        bulk(f),
        bulk(v)
    );
    s.strip_suffix("\r\n").unwrap_or(&s).to_string()
}

/// Round trips on keys spread over every shard, then a short pause: time
/// for a reply that must not come to arrive before the test looks.
fn settle(probe: &mut RespClient) {
    for _ in 0..3 {
        for k in ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"] {
            probe.raw(&["XLEN", k]);
        }
    }
    std::thread::sleep(Duration::from_millis(50));
}

#[test]
fn xread_block_0_woken_by_xadd_on_another_connection() {
    let srv = TestServer::start(SHARDS);
    let mut reader = srv.client();
    let mut writer = srv.client();
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    common::wait_blocked(&mut writer, 1);
    assert_eq!(writer.raw(&["XADD", "s", "7-1", "f", "v"]), "$3\r\n7-1");
    assert_eq!(reader.read_reply(), one_entry("s", "7-1", "f", "v"));
    assert_eq!(reader.raw(&["PING"]), "+PONG");
}

#[test]
fn dollar_means_entries_after_the_last_id_at_block_time() {
    let srv = TestServer::start(SHARDS);
    let mut reader = srv.client();
    let mut writer = srv.client();
    writer.raw(&["XADD", "s", "1", "old", "x"]);
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    common::wait_blocked(&mut writer, 1);
    writer.raw(&["XADD", "s", "2", "new", "y"]);
    assert_eq!(reader.read_reply(), one_entry("s", "2-0", "new", "y"));
    // With data after the given ID, XREAD BLOCK answers at once.
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "1"]);
    assert_eq!(reader.read_reply(), one_entry("s", "2-0", "new", "y"));
}

#[test]
fn timeout_replies_null_array() {
    let srv = TestServer::start(SHARDS);
    let mut c = srv.client();
    assert_eq!(
        c.raw(&["XREAD", "BLOCK", "100", "STREAMS", "s", "$"]),
        "*-1"
    );
    let (a, b) = keys_on_two_shards("t");
    assert_eq!(
        c.raw(&["XREAD", "BLOCK", "100", "STREAMS", &a, &b, "$", "$"]),
        "*-1"
    );
    assert_eq!(c.raw(&["PING"]), "+PONG");
}

#[test]
fn multi_shard_block_is_answered_once() {
    let srv = TestServer::start(SHARDS);
    let (a, b) = keys_on_two_shards("m");
    for first in [&a, &b] {
        let mut reader = srv.client();
        let mut writer = srv.client();
        reader.send(&["XREAD", "BLOCK", "0", "STREAMS", &a, &b, "$", "$"]);
        common::wait_blocked(&mut writer, 1);
        writer.raw(&["XADD", first, "*", "f", "1"]);
        let r = reader.read_reply();
        assert!(
            r.starts_with(&format!("*1\r\n*2\r\n{}", bulk(first))),
            "{r}"
        );
        // The other shard's waiter must not answer a second time.
        let other = if first == &a { &b } else { &a };
        writer.raw(&["XADD", other, "*", "f", "2"]);
        writer.raw(&["XADD", first, "*", "f", "3"]);
        settle(&mut writer);
        assert_eq!(reader.raw(&["PING"]), "+PONG");
    }
}

/// A parked reader is served right after the write that readies it, before
/// the writer's next pipelined command runs, as Redis serves blocked clients
/// after each command (`handleClientsBlockedOnKeys`): an XDEL or another
/// consumer's XREADGROUP right behind the XADD cannot take the entry away.
/// Over several rounds the connections and keys land on different threads
/// and shards, so the pipeline also reaches the key's shard as one batch.
#[test]
fn reader_is_served_before_the_next_pipelined_command() {
    let srv = TestServer::start(SHARDS);
    for round in 0..8 {
        let key = format!("pipe{round}");
        let mut reader = srv.client();
        let mut writer = srv.client();
        reader.send(&["XREAD", "BLOCK", "0", "STREAMS", &key, "$"]);
        common::wait_blocked(&mut writer, 1);
        let mut wire = resp_command(&["XADD", &key, "5-1", "f", "v"]);
        wire.extend(resp_command(&["XDEL", &key, "5-1"]));
        writer.send_raw(&wire);
        assert_eq!(writer.read_reply(), "$3\r\n5-1");
        assert_eq!(writer.read_reply(), ":1");
        assert_eq!(
            reader.read_reply(),
            one_entry(&key, "5-1", "f", "v"),
            "round {round}"
        );

        // A consumer group: the parked consumer gets the entry, the one
        // whose read was pipelined behind the XADD finds nothing new.
        let group_key = format!("gpipe{round}");
        writer.raw(&["XGROUP", "CREATE", &group_key, "g", "$", "MKSTREAM"]);
        reader.send(&common::words(&format!(
            "XREADGROUP GROUP g c1 BLOCK 0 STREAMS {group_key} >"
        )));
        common::wait_blocked(&mut writer, 1);
        let mut wire = resp_command(&["XADD", &group_key, "6-1", "f", "v"]);
        wire.extend(resp_command(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c2",
            "STREAMS",
            &group_key,
            ">",
        ]));
        writer.send_raw(&wire);
        assert_eq!(writer.read_reply(), "$3\r\n6-1");
        assert_eq!(writer.read_reply(), "*-1", "round {round}");
        assert_eq!(
            reader.read_reply(),
            one_entry(&group_key, "6-1", "f", "v"),
            "round {round}"
        );
    }
}

#[test]
fn pipeline_after_blocked_xread_waits_for_it() {
    let srv = TestServer::start(SHARDS);
    let mut reader = srv.client();
    let mut writer = srv.client();
    let mut out = Vec::new();
    for cmd in [
        &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"][..],
        &["XLEN", "s"][..],
        &["PING"][..],
    ] {
        out.extend_from_slice(format!("*{}\r\n", cmd.len()).as_bytes());
        for a in cmd {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    reader.send_raw(&out);
    common::wait_blocked(&mut writer, 1);
    writer.raw(&["XADD", "s", "3", "f", "v"]);
    assert_eq!(reader.read_reply(), one_entry("s", "3-0", "f", "v"));
    // XLEN ran after the XREAD was served, so it sees the entry.
    assert_eq!(reader.read_reply(), ":1");
    assert_eq!(reader.read_reply(), "+PONG");
}

#[test]
fn disconnected_blocked_client_does_not_break_the_server() {
    let srv = TestServer::start(SHARDS);
    let mut writer = srv.client();
    {
        let mut gone = srv.client();
        gone.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        common::wait_blocked(&mut writer, 1);
    }
    common::wait_blocked(&mut writer, 0);
    let mut reader = srv.client();
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    common::wait_blocked(&mut writer, 1);
    assert_eq!(writer.raw(&["XADD", "s", "1", "f", "v"]), "$3\r\n1-0");
    assert_eq!(reader.read_reply(), one_entry("s", "1-0", "f", "v"));
    assert_eq!(writer.raw(&["XADD", "s", "2", "f", "v"]), "$3\r\n2-0");
}

#[test]
fn del_of_watched_key_does_not_wake_xread() {
    let srv = TestServer::start(SHARDS);
    let mut reader = srv.client();
    let mut writer = srv.client();
    writer.raw(&["XADD", "s", "5", "f", "v"]);
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    common::wait_blocked(&mut writer, 1);
    assert_eq!(writer.raw(&["DEL", "s"]), ":1");
    // Re-created with IDs at or below the resolved `$` (5-0): still nothing.
    writer.raw(&["XADD", "s", "4", "f", "old"]);
    settle(&mut writer);
    writer.raw(&["XADD", "s", "6", "f", "new"]);
    // A wrong wake-up by DEL or by 4-0 would have answered with null or 4-0.
    assert_eq!(reader.read_reply(), one_entry("s", "6-0", "f", "new"));
    assert_eq!(reader.raw(&["PING"]), "+PONG");
}

#[test]
fn several_blocked_clients_on_one_key_are_all_served() {
    let srv = TestServer::start(SHARDS);
    let mut writer = srv.client();
    let mut readers: Vec<RespClient> = (0..3).map(|_| srv.client()).collect();
    for (n, r) in (1..).zip(&mut readers) {
        r.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        common::wait_blocked(&mut writer, n);
    }
    writer.raw(&["XADD", "s", "9", "f", "v"]);
    for r in &mut readers {
        assert_eq!(r.read_reply(), one_entry("s", "9-0", "f", "v"));
    }
    // COUNT limits what each waiter gets; all are served by one XADD batch.
    let mut r1 = srv.client();
    let mut r2 = srv.client();
    r1.send(&["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", "$"]);
    common::wait_blocked(&mut writer, 1);
    r2.send(&["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", "$"]);
    common::wait_blocked(&mut writer, 2);
    writer.raw(&["XADD", "s", "10", "f", "w"]);
    assert_eq!(r1.read_reply(), one_entry("s", "10-0", "f", "w"));
    assert_eq!(r2.read_reply(), one_entry("s", "10-0", "f", "w"));
}

/// A parked reader shows in INFO `blocked_clients` and as `flags=b` in
/// CLIENT LIST, and leaves both once served.
#[test]
fn blocked_readers_show_in_info_and_client_list() {
    let srv = TestServer::start(SHARDS);
    let mut reader = srv.client();
    let mut probe = srv.client();
    reader.send(&["CLIENT", "SETNAME", "waiter"]);
    assert_eq!(reader.read_reply(), "+OK");
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "bk", "$"]);
    common::wait_blocked(&mut probe, 1);
    let info = probe.raw(&["INFO", "clients"]);
    assert!(info.contains("blocked_clients:1\r\n"), "{info}");
    let list = probe.raw(&["CLIENT", "LIST"]);
    let line = list
        .lines()
        .find(|l| l.contains("name=waiter"))
        .expect("waiter listed");
    assert!(line.contains(" flags=b "), "{line}");
    probe.raw(&["XADD", "bk", "1-1", "f", "v"]);
    assert_eq!(reader.read_reply(), one_entry("bk", "1-1", "f", "v"));
    let info = probe.raw(&["INFO", "clients"]);
    assert!(info.contains("blocked_clients:0\r\n"), "{info}");
    let list = probe.raw(&["CLIENT", "LIST"]);
    let line = list.lines().find(|l| l.contains("name=waiter")).unwrap();
    assert!(line.contains(" flags=N "), "{line}");
}

/// INFO clients counts the keys clients are blocked on, and those where a
/// deletion unblocks one (XREADGROUP): Redis 7.2's `total_blocking_keys` and
/// `total_blocking_keys_on_nokey` (the stream-cgroups Tcl suite's "Blocking
/// XREADGROUP for stream key that has clients blocked on list").
#[test]
fn info_counts_blocking_keys_and_nokey_ones() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let counts = |c: &mut RespClient| -> (String, String) {
        let info = c.raw(&["INFO", "clients"]);
        let get = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .unwrap_or("missing")
                .to_string()
        };
        (
            get("total_blocking_keys"),
            get("total_blocking_keys_on_nokey"),
        )
    };
    assert_eq!(counts(&mut c), ("0".into(), "0".into()));
    let mut list = srv.client();
    list.send(&["BLPOP", "mystream", "0"]);
    assert!(common::eventually(5, || counts(&mut c) == ("1".into(), "0".into())));
    c.raw(&["XADD", "mystream", "666", "key", "value"]);
    c.raw(&["XGROUP", "CREATE", "mystream", "g", "$"]);
    let mut group = srv.client();
    group.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "mystream",
        ">",
    ]);
    assert!(common::eventually(5, || counts(&mut c) == ("1".into(), "1".into())));
    assert_eq!(c.raw(&["DEL", "mystream"]), ":1");
    assert!(group.read_reply().starts_with("-NOGROUP"));
    assert!(common::eventually(5, || counts(&mut c) == ("1".into(), "0".into())));
    drop(list);
    // As soon as the client no longer counts as blocked, its key no longer
    // counts either (the Tcl suite checks right after; no sweep needed).
    common::wait_blocked(&mut c, 0);
    assert!(promptly(|| counts(&mut c) == ("0".into(), "0".into())));
}

/// Whether `f` holds within 50 ms: quicker than the periodic sweep of
/// answered waiters (`hz 1` in these tests: once a second).
fn promptly(mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_millis(50);
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Wait until the server counts `n` blocked clients.
fn wait_blocked(probe: &mut RespClient, n: u64) {
    assert!(
        common::eventually(5, || common::info_int(probe, "clients", "blocked_clients")
            == n),
        "never {n} blocked clients"
    );
}

/// Block `reader` (CLIENT ID `id`) with `cmd`, end it with `CLIENT UNBLOCK
/// id [reason]` from `probe`, and return what each side saw: the UNBLOCK
/// reply, the reader's reply, then `blocked_clients`.
fn unblock_round(
    probe: &mut RespClient,
    reader: &mut RespClient,
    id: &str,
    cmd: &[impl AsRef<[u8]> + std::fmt::Debug],
    reason: Option<&str>,
) -> String {
    reader.send(cmd);
    wait_blocked(probe, 1);
    let mut unblock = vec!["CLIENT", "UNBLOCK", id];
    unblock.extend(reason);
    let answer = probe.raw(&unblock);
    let got = reader.read_reply();
    wait_blocked(probe, 0);
    format!("{cmd:?} {reason:?}: {answer} / {got}")
}

/// The blocking commands and reasons `CLIENT UNBLOCK` is tried with; `a`
/// and `b` are keys on two shards.
fn unblock_cases(a: &str, b: &str) -> Vec<(Vec<String>, Option<&'static str>)> {
    let xread = common::words(&format!("XREAD BLOCK 0 STREAMS {a} $"));
    let group = common::words(&format!("XREADGROUP GROUP g c BLOCK 0 STREAMS {a} >"));
    let both = common::words(&format!("XREAD BLOCK 0 STREAMS {a} {b} $ $"));
    vec![
        (xread.clone(), None),
        (xread.clone(), Some("TIMEOUT")),
        (xread, Some("error")),
        (group.clone(), Some("ERROR")),
        (group, Some("timeout")),
        (both.clone(), None),
        (both, Some("ERROR")),
        (common::words("BLPOP list 0"), Some("TIMEOUT")),
        (common::words("BZPOPMIN zset 0"), Some("ERROR")),
    ]
}

/// `CLIENT UNBLOCK` over one server: every case of [`unblock_cases`], the
/// argument errors, and a client that is not blocked.
fn unblock_transcript(
    probe: &mut RespClient,
    reader: &mut RespClient,
    a: &str,
    b: &str,
) -> Vec<String> {
    probe.raw(&["XGROUP", "CREATE", a, "g", "$", "MKSTREAM"]);
    let id = reader.raw(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').to_string();
    let mut out: Vec<String> = unblock_cases(a, b)
        .iter()
        .map(|(cmd, reason)| unblock_round(probe, reader, &id, cmd, *reason))
        .collect();
    for args in [
        vec!["CLIENT", "UNBLOCK", &id],
        vec!["CLIENT", "UNBLOCK", "999999", "ERROR"],
        vec!["CLIENT", "UNBLOCK", "-1"],
        vec!["CLIENT", "UNBLOCK"],
        vec!["CLIENT", "UNBLOCK", "abc"],
        vec!["CLIENT", "UNBLOCK", &id, "later"],
        vec!["CLIENT", "UNBLOCK", "abc", "later"],
        vec!["CLIENT", "UNBLOCK", &id, "TIMEOUT", "x"],
    ] {
        // The reader's id differs between servers: shown as `<id>`.
        let shown: Vec<&str> = args
            .iter()
            .map(|a| if *a == id { "<id>" } else { a })
            .collect();
        out.push(format!("{shown:?}: {}", probe.raw(&args)));
    }
    // The reader is usable after all that.
    out.push(reader.raw(&["PING"]));
    out
}

#[test]
fn client_unblock_ends_blocked_reads_as_redis_does() {
    let srv = TestServer::start(SHARDS);
    let (a, b) = keys_on_two_shards("u");
    let ours = unblock_transcript(&mut srv.client(), &mut srv.client(), &a, &b);
    let timeout = "*-1";
    let error = "-UNBLOCKED client unblocked via CLIENT UNBLOCK";
    for (line, want) in ours.iter().zip([
        timeout, timeout, error, error, timeout, timeout, error, timeout, error,
    ]) {
        assert!(line.ends_with(&format!(": :1 / {want}")), "{line}");
    }
    assert_eq!(
        ours[9..],
        [
            r#"["CLIENT", "UNBLOCK", "<id>"]: :0"#,
            r#"["CLIENT", "UNBLOCK", "999999", "ERROR"]: :0"#,
            r#"["CLIENT", "UNBLOCK", "-1"]: :0"#,
            r#"["CLIENT", "UNBLOCK"]: -ERR wrong number of arguments for 'client|unblock' command"#,
            r#"["CLIENT", "UNBLOCK", "abc"]: -ERR value is not an integer or out of range"#,
            r#"["CLIENT", "UNBLOCK", "<id>", "later"]: -ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"#,
            r#"["CLIENT", "UNBLOCK", "abc", "later"]: -ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"#,
            r#"["CLIENT", "UNBLOCK", "<id>", "TIMEOUT", "x"]: -ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP."#,
            "+PONG",
        ]
    );
    if let Some(redis) = common::RedisServer::start() {
        let theirs = unblock_transcript(&mut redis.client(), &mut redis.client(), &a, &b);
        assert_eq!(ours, theirs);
    }
}

#[test]
fn client_unblock_error_counts_a_failed_call_and_a_timeout_does_not() {
    // Redis 7.2+: `-UNBLOCKED` is the blocked command's failed call and an
    // UNBLOCKED error; a timeout (by CLIENT UNBLOCK or BLOCK's own) is neither.
    let srv = TestServer::start(SHARDS);
    let (a, b) = keys_on_two_shards("f");
    let mut probe = srv.client();
    let mut reader = srv.client();
    let id = reader.raw(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':');
    probe.raw(&["CONFIG", "RESETSTAT"]);
    for (cmd, reason) in [
        (vec!["BLPOP", "l", "0"], "ERROR"),
        (vec!["BLPOP", "l", "0"], "TIMEOUT"),
        (
            vec!["XREAD", "BLOCK", "0", "STREAMS", &a, &b, "$", "$"],
            "ERROR",
        ),
    ] {
        unblock_round(&mut probe, &mut reader, id, &cmd, Some(reason));
    }
    let stats = probe.raw(&["INFO", "commandstats"]);
    let row = |name: &str| {
        stats
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
            .map(|l| {
                l.split(',')
                    .filter(|f| f.contains("calls="))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    assert!(row("blpop").starts_with("cmdstat_blpop:calls=2"), "{stats}");
    assert!(
        row("blpop").ends_with("rejected_calls=0,failed_calls=1"),
        "{stats}"
    );
    assert!(
        row("xread").ends_with("rejected_calls=0,failed_calls=1"),
        "{stats}"
    );
    let errors = probe.raw(&["INFO", "errorstats"]);
    assert!(errors.contains("errorstat_UNBLOCKED:count=2"), "{errors}");
    assert_eq!(
        common::info_int(&mut probe, "stats", "total_error_replies"),
        2
    );
}

#[test]
fn ended_waits_leave_no_blocking_keys_behind() {
    // A read over two shards ended by its client leaving, by CLIENT UNBLOCK
    // or by its timeout: both shards stop counting its keys at once.
    let srv = TestServer::start(SHARDS);
    let (a, b) = keys_on_two_shards("e");
    let mut probe = srv.client();
    probe.raw(&["CONFIG", "SET", "hz", "1"]);
    let keys = |p: &mut RespClient| common::info_int(p, "clients", "total_blocking_keys");
    let read = |block: &'static str| {
        vec![
            "XREAD".to_string(),
            "BLOCK".into(),
            block.into(),
            "STREAMS".into(),
            a.clone(),
            b.clone(),
            "$".into(),
            "$".into(),
        ]
    };
    // The client goes away.
    let mut gone = srv.client();
    gone.send(&read("0"));
    wait_blocked(&mut probe, 1);
    assert_eq!(keys(&mut probe), 2);
    drop(gone);
    wait_blocked(&mut probe, 0);
    assert!(promptly(|| keys(&mut probe) == 0));
    // CLIENT UNBLOCK.
    let mut reader = srv.client();
    let id = reader.raw(&["CLIENT", "ID"]);
    reader.send(&read("0"));
    wait_blocked(&mut probe, 1);
    assert_eq!(keys(&mut probe), 2);
    assert_eq!(
        probe.raw(&["CLIENT", "UNBLOCK", id.trim_start_matches(':')]),
        ":1"
    );
    assert_eq!(reader.read_reply(), "*-1");
    assert!(promptly(|| keys(&mut probe) == 0));
    // BLOCK's own timeout.
    reader.send(&read("100"));
    wait_blocked(&mut probe, 1);
    assert_eq!(reader.read_reply(), "*-1");
    assert!(promptly(|| keys(&mut probe) == 0));
    // Every shard still serves the next reader.
    reader.send(&read("0"));
    wait_blocked(&mut probe, 1);
    probe.raw(&["XADD", &b, "5-1", "f", "v"]);
    assert_eq!(reader.read_reply(), one_entry(&b, "5-1", "f", "v"));
}

#[test]
fn client_unblock_pipelined_after_a_write_waits_for_it() {
    // XADD then CLIENT UNBLOCK in one pipeline: the XADD serves the reader
    // first and UNBLOCK finds nobody blocked, as in Redis, even when the
    // XADD hops to another shard's thread and UNBLOCK runs on the writer's.
    let srv = TestServer::start(SHARDS);
    for round in 0..8 {
        let key = format!("pu{round}");
        let mut reader = srv.client();
        let mut writer = srv.client();
        let id = reader.raw(&["CLIENT", "ID"]);
        writer.raw(&["XGROUP", "CREATE", &key, "g", "$", "MKSTREAM"]);
        reader.send(&common::words(&format!(
            "XREADGROUP GROUP g c BLOCK 0 STREAMS {key} >"
        )));
        wait_blocked(&mut writer, 1);
        let mut wire = resp_command(&["XADD", &key, "1-1", "f", "v"]);
        wire.extend(resp_command(&[
            "CLIENT",
            "UNBLOCK",
            id.trim_start_matches(':'),
            "ERROR",
        ]));
        writer.send_raw(&wire);
        assert_eq!(writer.read_reply(), "$3\r\n1-1");
        assert_eq!(writer.read_reply(), ":0");
        assert_eq!(reader.read_reply(), one_entry(&key, "1-1", "f", "v"));
    }
}

/// CLIENT KILL of a blocked reader, then writes in the same pipeline: the
/// killed client is gone at once, as Redis frees it: the entry stays for
/// the group (nothing pending for the dead consumer), the list keeps its
/// element, and CLIENT LIST / UNBLOCK / KILL no longer see it. Compared
/// with redis-server when installed.
fn kill_then_write_transcript(
    connect: &dyn Fn() -> RespClient,
    key: &str,
    list: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut writer = connect();
    writer.raw(&["DEL", key, list]);
    writer.raw(&["XGROUP", "CREATE", key, "g", "$", "MKSTREAM"]);
    for (read, write, check) in [
        (
            format!("XREADGROUP GROUP g c BLOCK 0 STREAMS {key} >"),
            format!("XADD {key} 1-1 f v"),
            format!("XPENDING {key} g"),
        ),
        (
            format!("BLPOP {list} 0"),
            format!("RPUSH {list} v"),
            format!("LLEN {list}"),
        ),
    ] {
        let mut reader = connect();
        let id = reader.raw(&["CLIENT", "ID"]);
        let id = id.trim_start_matches(':').to_string();
        reader.send(&common::words(&read));
        wait_blocked(&mut writer, 1);
        let mut wire = resp_command(&["CLIENT", "KILL", "ID", &id]);
        wire.extend(resp_command(&common::words(&write)));
        wire.extend(resp_command(&common::words(&check)));
        wire.extend(resp_command(&["CLIENT", "LIST", "ID", &id]));
        wire.extend(resp_command(&["CLIENT", "UNBLOCK", &id]));
        wire.extend(resp_command(&["CLIENT", "KILL", "ID", &id]));
        writer.send_raw(&wire);
        for _ in 0..6 {
            out.push(writer.read_reply());
        }
        wait_blocked(&mut writer, 0);
    }
    out
}

#[test]
fn a_killed_blocked_client_takes_nothing_written_after_the_kill() {
    let srv = TestServer::start(SHARDS);
    let redis = common::RedisServer::start();
    for round in 0..10 {
        let (key, list) = (format!("kw{round}"), format!("kl{round}"));
        let ours = kill_then_write_transcript(&|| srv.client(), &key, &list);
        assert_eq!(ours[0], ":1");
        assert_eq!(ours[2], "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1", "round {round}");
        assert_eq!(ours[4], ":0");
        assert_eq!(ours[5], ":0");
        assert_eq!(ours[8], ":1", "round {round}: the list keeps its element");
        if let Some(r) = &redis {
            assert_eq!(
                ours,
                kill_then_write_transcript(&|| r.client(), &key, &list)
            );
        }
    }
}

/// Consumers blocked on streams of several shards are served in the order
/// they blocked, one entry each, as Redis serves a key's blocked clients
/// one by one: before, every waiter on the written key was woken to run
/// its read again, and whichever rerun reached the key's shard first took
/// the entry (a reader on that shard's own thread, most often).
#[test]
fn blocked_group_readers_over_two_shards_are_served_in_arrival_order() {
    let srv = TestServer::start(SHARDS);
    let (a, b) = keys_on_two_shards("fifo");
    let mut writer = srv.client();
    for k in [&a, &b] {
        assert_eq!(
            writer.raw(&["XGROUP", "CREATE", k, "g", "$", "MKSTREAM"]),
            "+OK"
        );
    }
    // Enough readers that they live on every shard thread.
    const READERS: usize = 8;
    let mut readers: Vec<RespClient> = (0..READERS).map(|_| srv.client()).collect();
    for (i, r) in readers.iter_mut().enumerate() {
        let name = format!("c{i}");
        r.send(&[
            "XREADGROUP",
            "GROUP",
            "g",
            &name,
            "COUNT",
            "1",
            "BLOCK",
            "0",
            "STREAMS",
            &a,
            &b,
            ">",
            ">",
        ]);
        wait_blocked(&mut writer, i as u64 + 1);
    }
    for (i, r) in readers.iter_mut().enumerate() {
        let id = format!("{}-1", i + 1);
        assert_eq!(
            writer.raw(&["XADD", &b, &id, "f", "v"]),
            bulk(&id).trim_end()
        );
        assert_eq!(r.read_reply(), one_entry(&b, &id, "f", "v"), "reader c{i}");
        // The readers after it are still blocked, and nobody else took it.
        wait_blocked(&mut writer, (READERS - i - 1) as u64);
        let pending = writer.raw(&["XPENDING", &b, "g", "-", "+", "10"]);
        for j in 0..=i {
            let (id, owner) = (format!("{}-1", j + 1), format!("c{j}"));
            assert!(
                pending.contains(&format!("{}{}", bulk(&id), bulk(&owner))),
                "{id} should be pending for {owner}: {pending}"
            );
        }
    }
}
