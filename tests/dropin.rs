//! shardstream as a drop-in for redis-server: the binary started with
//! redis-server's command line, exactly as a published consumer-group lab
//! starts "a Redis server" (private Unix socket, TCP off), passes the same
//! redis-py assertions as redis-server (tests/py/consumer_group_lab.py).
mod common;

use std::process::{Command, Stdio};

use common::ScratchDir;

/// Whether python3 with redis-py is here; with `SHARDSTREAM_REQUIRE_REDIS`
/// set (CI) its absence is a failure.
fn have_redis_py() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import redis"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("SHARDSTREAM_REQUIRE_REDIS").is_none(),
            "redis-py is required (pip install redis)"
        );
        eprintln!("python3 with redis-py not available: skipping");
    }
    ok
}

/// Run the lab against `server` (plus `extra` options); panics with its output on failure.
fn run_lab(server: &str, extra: &[&str]) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/py/consumer_group_lab.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .arg(server)
        .args(extra)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "consumer-group lab failed against {server}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn consumer_group_lab_against_redis_server() {
    if !have_redis_py() || !common::redis_server_installed() {
        return;
    }
    run_lab("redis-server", &[]);
}

#[test]
fn consumer_group_lab_against_shardstream() {
    if !have_redis_py() {
        return;
    }
    // One shard and two: keys of the lab land on different shard threads
    // with two, and the socket's connections are spread over both.
    run_lab(env!("CARGO_BIN_EXE_shardstream"), &["--no-pin"]);
    run_lab(
        env!("CARGO_BIN_EXE_shardstream"),
        &["--shards", "2", "--no-pin"],
    );
}

/// The binary's own command-line handling: help, version, a refused
/// option naming itself, and `--port 0` with no Unix socket (Redis's
/// "Configured to not listen anywhere").
#[test]
fn binary_command_line_errors() {
    let bin = env!("CARGO_BIN_EXE_shardstream");
    let out = Command::new(bin).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--unixsocket"));
    let out = Command::new(bin).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("shardstream v="));

    let out = Command::new(bin).args(["--nosuch", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--nosuch") && err.contains("Bad directive"),
        "{err}"
    );

    let out = Command::new(bin)
        .args(["--port", "0", "--appendonly", "no"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Configured to not listen anywhere"), "{err}");

    // Out-of-range start-up settings get the FATAL CONFIG block like any
    // other bad directive.
    for (opt, value, why) in [
        (
            "--shards",
            "0",
            "argument must be between 1 and 1024 inclusive",
        ),
        (
            "--databases",
            "x",
            "argument couldn't be parsed into an integer",
        ),
    ] {
        let out = Command::new(bin).args([opt, value]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("*** FATAL CONFIG FILE ERROR") && err.contains(why),
            "{err}"
        );
    }
}

/// `logfile`, `loglevel` and `pidfile`: the log is written in Redis's
/// format to the file, the pid file holds the pid while the server runs
/// and is gone after a clean shutdown, and the shutdown line says the AOF
/// was flushed.
#[test]
fn logfile_and_pidfile() {
    let dir = ScratchDir::new("dropin-log");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let sock = dir.join("redis.sock");
    let (log, pid) = (dir.join("server.log"), dir.join("server.pid"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardstream"))
        .args(["--port", "0", "--no-pin", "--shards", "2"])
        .arg("--unixsocket")
        .arg(&sock)
        .arg("--dir")
        .arg(dir.join("data"))
        .arg("--logfile")
        .arg(&log)
        .arg("--pidfile")
        .arg(&pid)
        .args(["--loglevel", "verbose", "--appendonly", "yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shardstream");
    assert!(
        common::eventually(20, || sock.exists() && pid.exists()),
        "server did not start"
    );
    let written = std::fs::read_to_string(&pid).unwrap();
    assert_eq!(written.trim(), child.id().to_string());
    let mut c = common::RespClient::connect_unix(&sock);
    assert_eq!(c.raw(&["XADD", "s", "1-1", "f", "v"]), "$3\r\n1-1");
    c.send(&["SHUTDOWN"]);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!pid.exists(), "pidfile removed at shutdown");
    assert!(!sock.exists(), "socket removed at shutdown");
    let text = std::fs::read_to_string(&log).unwrap();
    let banner = format!("{}:M ", child.id());
    assert!(text.lines().all(|l| l.starts_with(&banner)), "{text}");
    for want in [
        "shards=2",
        "appendonly=yes, appendfsync=everysec",
        "Ready to accept connections unix on",
        "User requested shutdown...",
        "Append only files flushed and fsynced on all 2 shards.",
        "Removing the pid file.",
    ] {
        assert!(text.contains(want), "{want:?} not in {text}");
    }
}

/// SIGINT and SIGTERM shut the server down gracefully, as they do
/// redis-server: exit status 0, Redis's log line naming the signal, the
/// append only file flushed (the entry is there after a restart), the Unix
/// socket removed.
#[test]
fn sigint_and_sigterm_shut_down_gracefully() {
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let dir = ScratchDir::new("dropin-signal");
        let sock = dir.join("redis.sock");
        let log = dir.join("server.log");
        let start = || start_logged(&dir, "2", &["--appendonly", "yes", "--appendfsync", "no"]);
        let mut child = start();
        assert!(common::eventually(20, || sock.exists()), "no socket");
        let mut c = common::RespClient::connect_unix(&sock);
        assert_eq!(c.raw(&["XADD", "s", "1-1", "f", "v"]), "$3\r\n1-1");
        signal(&child, sig);
        let status = child.wait().unwrap();
        assert!(status.success(), "{name}: {status:?}");
        assert!(!sock.exists(), "{name}: socket removed at shutdown");
        let text = std::fs::read_to_string(&log).unwrap();
        for want in [
            format!("Received {name} scheduling shutdown..."),
            "Append only files flushed and fsynced on all 2 shards.".into(),
            "shardstream is now ready to exit, bye bye...".into(),
        ] {
            assert!(text.contains(&want), "{want:?} not in {text}");
        }
        let mut child = start();
        assert!(common::eventually(20, || sock.exists()), "no socket");
        let mut c = common::RespClient::connect_unix(&sock);
        assert_eq!(c.raw(&["XLEN", "s"]), ":1", "{name}");
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Start the binary with `shards` shard threads on a Unix socket in `dir`,
/// logging to `dir/server.log`.
fn start_logged(dir: &ScratchDir, shards: &str, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_shardstream"))
        .args(["--port", "0", "--no-pin", "--shards", shards])
        .arg("--unixsocket")
        .arg(dir.join("redis.sock"))
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(dir.join("server.log"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shardstream")
}

fn signal(child: &std::process::Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

/// The child's exit status, waiting at most `secs` (then it is killed and
/// the test fails).
fn exit_within(child: &mut std::process::Child, secs: u64) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not exit within {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// As redis-server: SIGHUP is ignored, and a SIGINT while a shutdown is
/// under way (here held up by a MIGRATE to a node that never answers)
/// logs "You insist... exiting now." and exits at once with status 1.
#[test]
fn sighup_is_ignored_and_a_second_sigint_exits_at_once() {
    let dir = ScratchDir::new("dropin-insist");
    let sock = dir.join("redis.sock");
    let mut child = start_logged(&dir, "1", &["--appendonly", "no"]);
    assert!(common::eventually(20, || sock.exists()), "no socket");
    let mut c = common::RespClient::connect_unix(&sock);
    signal(&child, libc::SIGHUP);
    assert_eq!(c.raw(&["PING"]), "+PONG", "SIGHUP must not stop the server");
    assert!(child.try_wait().unwrap().is_none());
    // A node that accepts and never answers: MIGRATE holds the shard
    // thread for its 30 s timeout, and with it the shutdown.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    assert_eq!(c.raw(&["XADD", "mk", "1-1", "f", "v"]), "$3\r\n1-1");
    c.send(&["MIGRATE", "127.0.0.1", &port, "mk", "0", "30000"]);
    let (_held, _) = silent.accept().unwrap();
    signal(&child, libc::SIGTERM);
    let log = dir.join("server.log");
    let logged = |want: &str| std::fs::read_to_string(&log).is_ok_and(|t| t.contains(want));
    assert!(common::eventually(20, || logged(
        "Received SIGTERM scheduling shutdown..."
    )));
    signal(&child, libc::SIGINT);
    let status = exit_within(&mut child, 10);
    assert_eq!(status.code(), Some(1), "{status:?}");
    assert!(logged("You insist... exiting now."));
}

/// A signal while the append only file loads stops the server cleanly, as
/// redis-server ("Received shutdown signal during loading, scheduling
/// shutdown.", status 0, the pid file written before loading removed), and
/// the data is intact for the next start.
#[test]
fn signal_during_loading_exits_cleanly() {
    let dir = ScratchDir::new("dropin-loading");
    let sock = dir.join("redis.sock");
    let aof = ["--appendonly", "yes", "--appendfsync", "no"];
    let mut child = start_logged(&dir, "1", &aof);
    assert!(common::eventually(20, || sock.exists()), "no socket");
    let mut c = common::RespClient::connect_unix(&sock);
    // Enough to take a while to load (a debug build loads ~ 20 MB slowly).
    let value = "x".repeat(100);
    for batch in 0..100 {
        let mut cmds = Vec::new();
        for i in 0..2000 {
            let key = format!("s{}", (batch * 2000 + i) % 100);
            cmds.push(vec![
                "XADD".to_string(),
                key,
                "*".into(),
                "f".into(),
                value.clone(),
            ]);
        }
        for cmd in &cmds {
            c.send(cmd);
        }
        for _ in &cmds {
            let r = c.read_reply();
            assert!(r.starts_with('$'), "{r}");
        }
    }
    c.send(&["SHUTDOWN"]);
    assert!(exit_within(&mut child, 30).success());
    std::fs::remove_file(dir.join("server.log")).unwrap();
    let pid = dir.join("server.pid");
    let with_pidfile = [&aof[..], &["--pidfile", pid.to_str().unwrap()]].concat();
    let mut child = start_logged(&dir, "1", &with_pidfile);
    let log = dir.join("server.log");
    let logged = |want: &str| std::fs::read_to_string(&log).is_ok_and(|t| t.contains(want));
    // The line just before the signal watcher starts, then a moment.
    assert!(common::eventually(20, || logged(
        "no config file specified"
    )));
    std::thread::sleep(std::time::Duration::from_millis(20));
    signal(&child, libc::SIGTERM);
    let status = exit_within(&mut child, 30);
    assert!(status.success(), "{status:?}");
    assert!(logged(
        "Received shutdown signal during loading, scheduling shutdown."
    ));
    assert!(!logged("Ready to accept connections"));
    assert!(!sock.exists(), "socket removed");
    assert!(!pid.exists(), "pid file removed");
    let mut child = start_logged(&dir, "1", &aof);
    assert!(common::eventually(60, || sock.exists()), "no socket");
    let mut c = common::RespClient::connect_unix(&sock);
    assert_eq!(c.raw(&["XLEN", "s7"]), ":2000");
    let _ = child.kill();
    let _ = child.wait();
}

/// maxclients and the open files limit, as redis-server at start: the soft
/// `RLIMIT_NOFILE` is raised toward maxclients plus the server's reserve
/// (32, plus 4 per shard thread), and where the system will not go that
/// far, maxclients is lowered to fit, with Redis's log lines; CONFIG SET
/// refuses a maxclients that cannot fit, saying what would.
#[test]
fn maxclients_is_fitted_to_the_open_files_limit() {
    let dir = ScratchDir::new("dropin-nofile");
    let sock = dir.join("redis.sock");
    // Past any default `fs.nr_open` (1048576).
    let mut child = start_logged(
        &dir,
        "1",
        &["--appendonly", "no", "--maxclients", "2000000"],
    );
    assert!(common::eventually(20, || sock.exists()), "no socket");
    let mut c = common::RespClient::connect_unix(&sock);
    let got = c.raw(&["CONFIG", "GET", "maxclients"]);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    // Past `fs.nr_open`'s ceiling: CONFIG SET refuses, saying what fits.
    let refused = c.raw(&["CONFIG", "SET", "maxclients", "2000000000"]);
    let _ = child.kill();
    let _ = child.wait();
    let soft: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .expect("Max open files in /proc/<pid>/limits");
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap();
    let reserve = 32 + 4;
    let fits = soft - reserve;
    assert_eq!(
        refused,
        format!("-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with {fits}")
    );
    if soft >= 2_000_000 + reserve {
        assert!(
            log.contains("Increased maximum number of open files to 2000036"),
            "{log}"
        );
        assert!(got.ends_with("$7\r\n2000000"), "{got}");
    } else {
        let fitted = soft - reserve;
        assert!(
            got.ends_with(&format!("${}\r\n{fitted}", fitted.to_string().len())),
            "{got}"
        );
        for want in [
            "You requested maxclients of 2000000 requiring at least 2000036 max file descriptors.".to_string(),
            format!("Current maximum open files is {soft}. maxclients has been reduced to {fitted} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."),
        ] {
            assert!(log.contains(&want), "{want:?} not in {log}");
        }
    }
}

/// `supervised systemd`: readiness is sent to `$NOTIFY_SOCKET` once the
/// server accepts connections, as Redis does.
#[test]
fn supervised_systemd_notifies_readiness() {
    let dir = ScratchDir::new("dropin-notify");
    let notify = dir.join("notify.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    listener
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let sock = dir.join("redis.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardstream"))
        .args([
            "--port",
            "0",
            "--no-pin",
            "--shards",
            "1",
            "--appendonly",
            "no",
        ])
        .args(["--supervised", "systemd"])
        .arg("--unixsocket")
        .arg(&sock)
        .env("NOTIFY_SOCKET", &notify)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shardstream");
    let mut buf = [0u8; 256];
    let got = listener.recv(&mut buf);
    let ready = got.is_ok_and(|n| String::from_utf8_lossy(&buf[..n]).contains("READY=1"));
    let mut c = common::RespClient::connect_unix(&sock);
    assert_eq!(c.raw(&["PING"]), "+PONG");
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "no READY=1 on NOTIFY_SOCKET");
}

/// A config file plus options: the file's directives (quoted as Redis
/// quotes them) apply, options override them, and INFO names the file.
#[test]
fn config_file_then_options_and_info_config_file() {
    let dir = ScratchDir::new("dropin-conf");
    let sock = dir.join("redis.sock");
    let conf = dir.join("shardstream.conf");
    std::fs::write(
        &conf,
        format!(
            "# a redis.conf\nport 6399\nunixsocket \"{}\"\nappendonly no\nsave \"\"\nhz 10\nrequirepass 'it\\'s'\n",
            sock.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardstream"))
        .arg(&conf)
        .args([
            "--port",
            "0",
            "--no-pin",
            "--shards",
            "1",
            "--requirepass",
            "",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shardstream");
    assert!(common::eventually(20, || sock.exists()), "no socket");
    let mut c = common::RespClient::connect_unix(&sock);
    let info = c.raw(&["INFO", "server"]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(info.contains("tcp_port:0\r\n"), "{info}");
    let want = format!("config_file:{}\r\n", conf.display());
    assert!(info.contains(&want), "{want:?} in {info}");
}
