//! The failed-write contract, on a real child process whose AOF writes are
//! broken and healed with the debug-build switch
//! `SHARDSTREAM_DEBUG_AOF_FAIL_IF_EXISTS` (see `aof::writer`), or for real
//! with a file size limit (`prlimit`, EFBIG, short writes):
//! * `appendfsync always`: the server exits (status 1) before answering the
//!   round whose write or fsync failed; nothing is acknowledged that is not
//!   on disk, and no error is ever answered for a write that happened.
//! * `everysec`: the round already applied keeps its replies and is
//!   written when the disk heals; later writes get `-MISCONF` and do not
//!   happen.
//!
//! Before: under `always` the failed round answered `-MISCONF` but stayed
//! applied and was written later (an error for a write that happened).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::ScratchDir;

/// A scratch directory for one test with an empty `data` subdirectory
/// (the server's `--dir`), beside which the `fail` switch file goes.
fn scratch_dir(name: &str) -> ScratchDir {
    let dir = ScratchDir::new(&format!("aoferr-{name}"));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    dir
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// The shardstream binary on a free port, AOF in `dir/data`, its AOF
    /// failing while `dir/fail` exists.
    fn start(dir: &Path, fsync: &str) -> Server {
        Server::start_shards(dir, fsync, 2)
    }

    /// As [`Server::start`] with `shards` shards. SIGXFSZ is ignored in the
    /// child, so a file size limit ([`Server::limit_file_size`]) makes its
    /// writes fail with EFBIG instead of killing it.
    fn start_shards(dir: &Path, fsync: &str, shards: u16) -> Server {
        use std::os::unix::process::CommandExt;
        let port = common::free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_shardstream"));
        cmd.args(["--port", &port.to_string(), "--no-pin"])
            .args(["--shards", &shards.to_string()])
            .args(["--appendonly", "yes", "--appendfsync", fsync])
            .arg("--dir")
            .arg(dir.join("data"))
            .env("SHARDSTREAM_DEBUG_AOF_FAIL_IF_EXISTS", dir.join("fail"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: only signal(2), which is async-signal-safe, runs between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn shardstream");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "child did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Server { child, port }
    }

    fn client(&self) -> Client {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    /// A real disk failure: the kernel refuses (EFBIG) writes past `bytes`
    /// in any file of the child (`None`: no limit again). The hard limit
    /// stays unlimited, so the limit can be lifted.
    fn limit_file_size(&self, bytes: Option<u64>) {
        let lim = libc::rlimit {
            rlim_cur: bytes.unwrap_or(libc::RLIM_INFINITY),
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: `lim` is a valid rlimit; the old value is not asked for.
        let rc = unsafe {
            libc::prlimit(
                self.child.id() as libc::pid_t,
                libc::RLIMIT_FSIZE,
                &lim,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    }

    /// Wait for the process to exit on its own: (status code, stderr).
    fn wait_exit(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return (st.code(), err);
            }
            assert!(Instant::now() < deadline, "server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM (clean shutdown: everything written and fsynced) and wait.
    fn stop(self) -> (Option<i32>, String) {
        // SAFETY: plain syscall on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        self.wait_exit()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    /// One command; `None` when the connection closed without a reply.
    fn call(&mut self, args: &[&str]) -> Option<String> {
        self.w.write_all(&common::resp_command(args)).ok()?;
        let mut out = String::new();
        self.read_into(&mut out)?;
        Some(out.trim_end().to_string())
    }

    fn read_into(&mut self, out: &mut String) -> Option<()> {
        let mut line = String::new();
        if self.r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        out.push_str(&line);
        let n: i64 = line[1..].trim_end().parse().unwrap_or(0);
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

fn ids(xrange: &str) -> Vec<&str> {
    xrange
        .split("\r\n")
        .filter(|l| l.ends_with("-1") && !l.starts_with('$'))
        .collect()
}

fn always_failure_exits_unacknowledged(kind: &str) {
    let dir = scratch_dir(kind);
    let srv = Server::start(&dir, "always");
    let mut c = srv.client();
    assert_eq!(
        c.call(&["XADD", "s", "1-1", "f", "v"]).as_deref(),
        Some("$3\r\n1-1")
    );
    std::fs::write(dir.join("fail"), kind).unwrap();
    assert_eq!(
        c.call(&["XADD", "s", "2-1", "f", "v"]),
        None,
        "no reply at all for the round whose {kind} failed"
    );
    let (code, stderr) = srv.wait_exit();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("fatal: shard") && stderr.contains("under appendfsync always"),
        "{stderr}"
    );
    std::fs::remove_file(dir.join("fail")).unwrap();

    let srv = Server::start(&dir, "always");
    let mut c = srv.client();
    let range = c.call(&["XRANGE", "s", "-", "+"]).unwrap();
    assert!(
        ids(&range).contains(&"1-1"),
        "acknowledged write kept: {range}"
    );
    if kind == "write" {
        // Nothing reached the file: a retry adds it exactly once.
        assert_eq!(ids(&range), ["1-1"], "{range}");
        assert_eq!(
            c.call(&["XADD", "s", "2-1", "f", "v"]).as_deref(),
            Some("$3\r\n2-1")
        );
    }
}

#[test]
fn always_write_error_exits_before_answering() {
    if cfg!(debug_assertions) {
        always_failure_exits_unacknowledged("write");
    }
}

#[test]
fn always_fsync_error_exits_before_answering() {
    if cfg!(debug_assertions) {
        always_failure_exits_unacknowledged("fsync");
    }
}

#[test]
fn everysec_write_error_refuses_later_writes_until_the_disk_heals() {
    if !cfg!(debug_assertions) {
        return;
    }
    let dir = scratch_dir("everysec");
    let srv = Server::start(&dir, "everysec");
    let mut c = srv.client();
    assert_eq!(
        c.call(&["XADD", "s", "1-1", "f", "v"]).as_deref(),
        Some("$3\r\n1-1")
    );
    std::fs::write(dir.join("fail"), "write").unwrap();
    // Applied in memory before its write failed: acknowledged, written later.
    assert_eq!(
        c.call(&["XADD", "s", "2-1", "f", "v"]).as_deref(),
        Some("$3\r\n2-1")
    );
    let misconf = "-MISCONF Errors writing to the AOF file: Input/output error";
    assert_eq!(
        c.call(&["XADD", "s", "3-1", "f", "v"]).as_deref(),
        Some(misconf)
    );
    assert_eq!(
        c.call(&["XLEN", "s"]).as_deref(),
        Some(":2"),
        "3-1 did not happen"
    );
    let info = c.call(&["INFO", "persistence"]).unwrap();
    assert!(info.contains("aof_last_write_status:err"), "{info}");
    // A rewrite must not switch files while records wait for the old one.
    assert_eq!(
        c.call(&["BGREWRITEAOF"]).as_deref(),
        Some("-ERR Can't rewrite append only file in background: Input/output error")
    );

    std::fs::remove_file(dir.join("fail")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.call(&["XADD", "s", "4-1", "f", "v"]).as_deref() {
            Some("$3\r\n4-1") => break,
            Some(r) if r == misconf => {}
            other => panic!("unexpected {other:?}"),
        }
        assert!(Instant::now() < deadline, "writes never accepted again");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, stderr) = srv.stop();
    assert_eq!(code, Some(0), "{stderr}");

    let srv = Server::start(&dir, "everysec");
    let mut c = srv.client();
    let range = c.call(&["XRANGE", "s", "-", "+"]).unwrap();
    assert_eq!(ids(&range), ["1-1", "2-1", "4-1"], "{range}");
}

/// A real short write (the kernel's file size limit cuts the record after
/// 10 bytes, then EFBIG) under `always`: exit before answering; the torn
/// record is cut at the next start and the acknowledged entries are there.
#[test]
fn always_real_short_write_exits_before_answering() {
    let dir = scratch_dir("efbig");
    let srv = Server::start_shards(&dir, "always", 1);
    let mut c = srv.client();
    for i in 1..=20 {
        let id = format!("{i}-1");
        let want = format!("${}\r\n{id}", id.len());
        assert_eq!(
            c.call(&["XADD", "s", &id, "f", "v"]).as_deref(),
            Some(want.as_str())
        );
    }
    let incr = dir.join("data/shard-0.incr.1.aof");
    let size = std::fs::metadata(&incr).unwrap().len();
    srv.limit_file_size(Some(size + 10));
    assert_eq!(
        c.call(&["XADD", "s", "21-1", "f", "v"]),
        None,
        "not answered"
    );
    let (code, stderr) = srv.wait_exit();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    assert_eq!(
        std::fs::metadata(&incr).unwrap().len(),
        size + 10,
        "torn record"
    );

    let srv = Server::start_shards(&dir, "always", 1);
    let mut c = srv.client();
    assert_eq!(c.call(&["XLEN", "s"]).as_deref(), Some(":20"));
    assert_eq!(
        std::fs::metadata(&incr).unwrap().len(),
        size,
        "torn tail cut"
    );
    assert_eq!(
        c.call(&["XADD", "s", "21-1", "f", "v"]).as_deref(),
        Some("$4\r\n21-1"),
        "a retry adds it once"
    );
}

/// A real short write under `everysec`: the round keeps its reply and is
/// completed once the limit is lifted; writes in between get MISCONF.
#[test]
fn everysec_real_short_write_completes_when_the_disk_heals() {
    let dir = scratch_dir("efbig-everysec");
    let srv = Server::start_shards(&dir, "everysec", 1);
    let mut c = srv.client();
    assert_eq!(
        c.call(&["XADD", "s", "1-1", "f", "v"]).as_deref(),
        Some("$3\r\n1-1")
    );
    let incr = dir.join("data/shard-0.incr.1.aof");
    let size = std::fs::metadata(&incr).unwrap().len();
    srv.limit_file_size(Some(size + 10));
    assert_eq!(
        c.call(&["XADD", "s", "2-1", "f", "v"]).as_deref(),
        Some("$3\r\n2-1")
    );
    let misconf = "-MISCONF Errors writing to the AOF file: File too large";
    assert_eq!(
        c.call(&["XADD", "s", "3-1", "f", "v"]).as_deref(),
        Some(misconf)
    );
    srv.limit_file_size(None);
    assert!(
        common::eventually(10, || c.call(&["XADD", "s", "4-1", "f", "v"]).as_deref()
            == Some("$3\r\n4-1")),
        "writes never accepted again"
    );
    let (code, stderr) = srv.stop();
    assert_eq!(code, Some(0), "{stderr}");
    let srv = Server::start_shards(&dir, "everysec", 1);
    let mut c = srv.client();
    let range = c.call(&["XRANGE", "s", "-", "+"]).unwrap();
    assert_eq!(ids(&range), ["1-1", "2-1", "4-1"], "{range}");
}
