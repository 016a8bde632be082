//! [`ShardAof`]: a shard's open append-only file, owned by its shard loop.
//!
//! Writes each round's records (group commit), fsyncs per `appendfsync`,
//! tracks write failures (MISCONF), runs rewrites and switches files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use crate::config::Tunables;
use crate::shard::db::ShardDb;

use super::manifest::{base_name, incr_name, sync_dir, Manifest};
use super::{strerror, AofLog, FsyncPolicy};

/// Which step of a group commit failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitFailure {
    /// `write` failed or wrote nothing (the unwritten bytes are kept).
    Write,
    /// `fdatasync` failed (the bytes are written but maybe not on disk).
    Fsync,
}

/// A failed [`ShardAof::commit`]: what failed, why, and the `appendfsync`
/// policy it failed under (which decides what [`CommitError::act`] does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitError {
    pub shard: u16,
    pub failure: CommitFailure,
    /// `strerror` text.
    pub why: String,
    pub policy: FsyncPolicy,
}

impl std::fmt::Display for CommitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.failure {
            CommitFailure::Write => "writing",
            CommitFailure::Fsync => "fsyncing",
        };
        write!(
            f,
            "shard {}: error {what} the append only file: {} (appendfsync {})",
            self.shard,
            self.why,
            self.policy.name()
        )
    }
}

impl CommitError {
    /// Whether the server must stop rather than keep running: under
    /// `appendfsync always` every reply promises that its write is on disk,
    /// and the round's effects are already applied in memory, so neither an
    /// OK (not on disk) nor an error (yet applied) would be true. Under
    /// `everysec` and `no` an OK only promised the write was applied.
    pub fn is_fatal(&self) -> bool {
        self.policy == FsyncPolicy::Always
    }

    /// Take Redis's action for this failure, before any reply of the round
    /// is released:
    /// * `always`: log and exit the process with status 1. No reply of the
    ///   round is sent; the clients see their connection close, so a write
    ///   is either acknowledged and on disk, or unacknowledged.
    /// * `everysec` / `no`: keep running. The round's commands were applied
    ///   and their replies stand (as in Redis, where they are already sent);
    ///   the unwritten bytes are retried every tick, and until a retry
    ///   succeeds write commands are refused with `-MISCONF` before they run
    ///   ([`super::AofShared::write_refusal`]), so an error reply always
    ///   means the write did not happen.
    ///
    /// # Source
    /// `flushAppendOnlyFile`, redis/src/aof.c (7.x): exit(1) on a write or
    /// fsync error under `always`; `aof_last_write_status` = error (MISCONF
    /// for writes) under the other policies.
    pub fn act(&self) {
        if self.is_fatal() {
            log::error!(
                "fatal: {self}. A write cannot be acknowledged without being \
                 on disk under appendfsync always, and it is already applied in memory: \
                 exiting (status 1) so that no client gets an answer for it. Fix the disk, \
                 then restart: every acknowledged write is in the files."
            );
            std::process::exit(1);
        }
    }
}

/// Debug builds only: `SHARDSTREAM_DEBUG_AOF_FAIL_IF_EXISTS=<path>` makes
/// every AOF group commit fail while `<path>` exists, with `EIO`: its
/// `write` when the file holds `write` (or nothing), its `fdatasync` when it
/// holds `fsync`. Tests use it to break and heal the disk of a running
/// server. Never read in release builds.
fn debug_fail_switch() -> Option<PathBuf> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var_os("SHARDSTREAM_DEBUG_AOF_FAIL_IF_EXISTS").map(PathBuf::from)
}

/// The failure the debug switch asks for now, if any.
fn debug_injected_failure(switch: Option<&PathBuf>) -> Option<CommitFailure> {
    let text = fs::read_to_string(switch?).ok()?;
    Some(if text.trim() == "fsync" {
        CommitFailure::Fsync
    } else {
        CommitFailure::Write
    })
}

/// A rewrite in flight.
struct Rewrite {
    done: Receiver<io::Result<u64>>,
    base: String,
    /// The incr file opened when the rewrite started (None when AOF was off).
    new_incr: Option<String>,
    started: Instant,
}

/// The everysec fsync helper thread.
struct Syncer {
    tx: Sender<File>,
    busy: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
}

impl Syncer {
    fn spawn(shard: u16) -> io::Result<Syncer> {
        let (tx, rx) = crossbeam_channel::unbounded::<File>();
        let busy = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let (b, e) = (busy.clone(), error.clone());
        std::thread::Builder::new()
            .name(format!("aof-sync-{shard}"))
            .spawn(move || {
                for f in rx {
                    let r = f.sync_data();
                    if let Ok(mut slot) = e.lock() {
                        *slot = r.err().map(|e| strerror(&e));
                    }
                    b.store(false, Ordering::Release);
                }
            })?;
        Ok(Syncer { tx, busy, error })
    }
}

/// One shard's AOF writer. Lives on the shard thread.
pub struct ShardAof {
    shard: u16,
    shards: u16,
    dir: PathBuf,
    tunables: Arc<Tunables>,
    /// The manifest on disk (or the last one read).
    manifest: Option<Manifest>,
    /// The incr file being appended to, when logging.
    file: Option<File>,
    /// Records not yet written (after a failed or partial write).
    pending: Vec<u8>,
    /// An fsync is owed (always: after a failed fsync; everysec: written since the last).
    unsynced: bool,
    last_sync: Instant,
    syncer: Option<Syncer>,
    /// Why the last write or fsync failed, while it keeps failing.
    failing: Option<String>,
    size_bytes: u64,
    base_size_bytes: u64,
    rewrite: Option<Rewrite>,
    /// Retry a failed rewrite that AOF needs (turning appendonly on).
    rewrite_scheduled: bool,
    last_rewrite_attempt: Instant,
    /// Highest file sequence number used by this process.
    last_seq: u64,
    /// See [`debug_fail_switch`].
    fail_switch: Option<PathBuf>,
}

impl ShardAof {
    /// A writer for shard `shard`, with logging off until [`open`](Self::open)
    /// or a rewrite turns it on. `manifest` is what is on disk.
    pub fn new(
        shard: u16,
        shards: u16,
        dir: PathBuf,
        tunables: Arc<Tunables>,
        manifest: Option<Manifest>,
    ) -> ShardAof {
        ShardAof {
            shard,
            shards,
            dir,
            tunables,
            manifest,
            file: None,
            pending: Vec::new(),
            unsynced: false,
            last_sync: Instant::now(),
            syncer: None,
            failing: None,
            size_bytes: 0,
            base_size_bytes: 0,
            rewrite: None,
            rewrite_scheduled: false,
            last_rewrite_attempt: Instant::now(),
            last_seq: 0,
            fail_switch: debug_fail_switch(),
        }
    }

    /// Start logging into the manifest's last incr file (after loading it),
    /// creating the first files when there are none, then remove the
    /// leftovers of interrupted rewrites
    /// ([`remove_leftovers`](super::manifest::remove_leftovers)).
    ///
    /// Never truncates or replaces an existing file: new files get a
    /// sequence number above every file of the shard on disk.
    ///
    /// # Errors
    /// IO errors; and, without a manifest, when the shard has data files
    /// (the message names them and the repair, see
    /// [`missing_manifest_error`](super::manifest::missing_manifest_error)).
    pub fn open(&mut self, log: &mut AofLog) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        if self.manifest.is_none() {
            let mine: Vec<_> = super::manifest::data_files(&self.dir)
                .into_iter()
                .filter(|f| f.shard == self.shard)
                .collect();
            if mine.iter().any(|f| f.len_bytes > 0) {
                return Err(io::Error::other(super::manifest::missing_manifest_error(
                    &self.dir,
                    self.shard,
                    &mine,
                    self.shards,
                )));
            }
        }
        let mut m = self.manifest.clone().unwrap_or(Manifest {
            shards: self.shards,
            shard: self.shard,
            base: None,
            incrs: Vec::new(),
        });
        if m.incrs.is_empty() {
            let name = incr_name(self.shard, self.next_seq());
            create_file(&self.dir.join(&name))?;
            m.incrs.push(name);
            sync_dir(&self.dir)?;
            m.write(&self.dir)?;
        }
        super::manifest::remove_leftovers(&self.dir, &m);
        let last = m.incrs.last().cloned().unwrap_or_default();
        self.file = Some(open_append(&self.dir.join(&last))?);
        let size: u64 = m
            .files()
            .map(|f| {
                fs::metadata(self.dir.join(f))
                    .map(|md| md.len())
                    .unwrap_or(0)
            })
            .sum();
        self.manifest = Some(m);
        self.set_size(size);
        self.set_base_size(size);
        log.new_file();
        log.set_enabled(true);
        Ok(())
    }

    /// Whether effects are being appended to a file.
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    fn set_size(&mut self, size: u64) {
        let total = &self.tunables.aof.current_size_bytes;
        if size >= self.size_bytes {
            total.fetch_add(size - self.size_bytes, Ordering::Relaxed);
        } else {
            total.fetch_sub(self.size_bytes - size, Ordering::Relaxed);
        }
        self.size_bytes = size;
    }

    fn set_base_size(&mut self, size: u64) {
        let total = &self.tunables.aof.base_size_bytes;
        if size >= self.base_size_bytes {
            total.fetch_add(size - self.base_size_bytes, Ordering::Relaxed);
        } else {
            total.fetch_sub(self.base_size_bytes - size, Ordering::Relaxed);
        }
        self.base_size_bytes = size;
    }

    fn fail_commit(&mut self, failure: CommitFailure, e: &io::Error) -> CommitError {
        CommitError {
            shard: self.shard,
            failure,
            why: self.fail(e),
            policy: self.tunables.aof.fsync_policy(),
        }
    }

    fn fail(&mut self, e: &io::Error) -> String {
        let why = strerror(e);
        if self.failing.is_none() {
            self.tunables
                .aof
                .failing_shards
                .fetch_add(1, Ordering::SeqCst);
            log::warn!(
                "shard {}: error writing the append only file: {why}",
                self.shard
            );
        }
        if let Ok(mut slot) = self.tunables.aof.last_error.lock() {
            slot.clone_from(&why);
        }
        self.tunables
            .aof
            .delayed_fsync
            .fetch_add(1, Ordering::Relaxed);
        self.failing = Some(why.clone());
        why
    }

    fn recovered(&mut self) {
        if self.failing.take().is_some() {
            self.tunables
                .aof
                .failing_shards
                .fetch_sub(1, Ordering::SeqCst);
            log::warn!("shard {}: append only file writes work again", self.shard);
        }
    }

    /// Group commit: write everything `log` recorded this round (plus any
    /// bytes a failed write left), and under `always` fdatasync once. The
    /// round's replies may be released only after `Ok`; on `Err` the caller
    /// must call [`CommitError::act`] first (it exits under `always`).
    ///
    /// # Errors
    /// What failed (write or fsync), its `strerror` text and the policy; the
    /// unwritten bytes are kept and retried by the next commit, and write
    /// commands are refused with `-MISCONF` until one succeeds.
    pub fn commit(&mut self, log: &mut AofLog) -> Result<(), CommitError> {
        if !log.is_empty() {
            let bytes = log.take();
            if self.pending.is_empty() {
                self.pending = bytes;
            } else {
                self.pending.extend_from_slice(&bytes);
            }
        }
        let Some(file) = self.file.as_mut() else {
            self.pending.clear();
            return Ok(());
        };
        if self.pending.is_empty() && !(self.failing.is_some() || self.unsynced) {
            return Ok(());
        }
        let injected = debug_injected_failure(self.fail_switch.as_ref());
        let mut written = 0;
        let mut result = Ok(());
        if injected == Some(CommitFailure::Write) && !self.pending.is_empty() {
            result = Err(io::Error::from_raw_os_error(libc::EIO));
        }
        while result.is_ok() && written < self.pending.len() {
            match file.write(&self.pending[written..]) {
                Ok(0) => {
                    result = Err(io::Error::from(io::ErrorKind::WriteZero));
                    break;
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.pending.drain(..written);
        let size = self.size_bytes + written as u64;
        self.set_size(size);
        if let Err(e) = result {
            return Err(self.fail_commit(CommitFailure::Write, &e));
        }
        let policy = self.tunables.aof.fsync_policy();
        if written > 0 {
            self.unsynced = true;
        }
        match policy {
            FsyncPolicy::Always if self.unsynced => {
                if let Some(file) = self.file.as_ref() {
                    let synced = match injected {
                        Some(CommitFailure::Fsync) => Err(io::Error::from_raw_os_error(libc::EIO)),
                        _ => file.sync_data(),
                    };
                    if let Err(e) = synced {
                        return Err(self.fail_commit(CommitFailure::Fsync, &e));
                    }
                }
                self.unsynced = false;
                self.last_sync = Instant::now();
            }
            FsyncPolicy::EverySec => self.maybe_sync_everysec(),
            _ => {}
        }
        if policy != FsyncPolicy::EverySec || self.syncer_error().is_none() {
            self.recovered();
        }
        Ok(())
    }

    fn syncer_error(&self) -> Option<String> {
        self.syncer
            .as_ref()
            .and_then(|s| s.error.lock().ok().and_then(|e| e.clone()))
    }

    /// everysec: hand an fsync to the helper thread at most once a second.
    fn maybe_sync_everysec(&mut self) {
        if !self.unsynced || self.last_sync.elapsed() < Duration::from_secs(1) {
            return;
        }
        if self.syncer.is_none() {
            match Syncer::spawn(self.shard) {
                Ok(s) => self.syncer = Some(s),
                Err(e) => {
                    self.fail(&e);
                    return;
                }
            }
        }
        let (Some(s), Some(f)) = (self.syncer.as_ref(), self.file.as_ref()) else {
            return;
        };
        if s.busy.swap(true, Ordering::AcqRel) {
            return; // the previous fsync is still running
        }
        match f.try_clone() {
            Ok(dup) => {
                let _ = s.tx.send(dup);
                self.unsynced = false;
                self.last_sync = Instant::now();
            }
            Err(e) => {
                s.busy.store(false, Ordering::Release);
                self.fail(&e);
            }
        }
    }

    /// Periodic work (the shard's ~100 ms timer and after each round):
    /// everysec fsync, retrying failed writes, finishing a rewrite, following
    /// CONFIG SET appendonly, automatic and requested rewrites.
    pub fn tick(&mut self, db: &mut ShardDb, now_ms: u64) {
        let aof = &self.tunables.aof;
        let want = aof.is_enabled();
        if want && !self.is_open() && self.rewrite.is_none() && !self.rewrite_scheduled {
            // CONFIG SET appendonly yes: a rewrite creates the files from the data.
            self.rewrite_scheduled = true;
        }
        if !want && self.is_open() {
            if let Err(e) = self.commit(&mut db.aof) {
                e.act();
            }
            if let Some(f) = self.file.take() {
                let _ = f.sync_data();
            }
            db.aof.set_enabled(false);
            self.pending.clear();
            self.recovered();
        }
        if self.is_open() {
            if let Some(why) = self.syncer_error() {
                if self.failing.is_none() {
                    self.fail(&io::Error::other(why));
                }
                self.unsynced = true;
            }
            if self.failing.is_some() || !self.pending.is_empty() {
                if let Err(e) = self.commit(&mut db.aof) {
                    e.act();
                }
            } else if self.tunables.aof.fsync_policy() == FsyncPolicy::EverySec {
                self.maybe_sync_everysec();
            }
        }
        self.poll_rewrite(db);
        if db.aof.rewrite_requested {
            db.aof.rewrite_requested = false;
            if self.rewrite.is_none() {
                let _ = self.start_rewrite(db, now_ms);
            }
        }
        if self.rewrite_scheduled
            && self.rewrite.is_none()
            && self.last_rewrite_attempt.elapsed() >= Duration::from_millis(100)
        {
            let _ = self.start_rewrite(db, now_ms);
        }
        let pct = self
            .tunables
            .aof
            .auto_rewrite_percentage
            .load(Ordering::Relaxed);
        let min = self
            .tunables
            .aof
            .auto_rewrite_min_size_bytes
            .load(Ordering::Relaxed);
        if self.is_open()
            && self.rewrite.is_none()
            && self.failing.is_none()
            && pct > 0
            && self.size_bytes > min
            && self.size_bytes.saturating_mul(100)
                >= self.base_size_bytes.max(1).saturating_mul(100 + pct)
        {
            let _ = self.start_rewrite(db, now_ms);
        }
    }

    /// Whether a rewrite is running on this shard.
    pub fn rewrite_in_progress(&self) -> bool {
        self.rewrite.is_some()
    }

    /// Start a background rewrite: new effects go to a fresh incr file from
    /// now on; a helper thread writes a copy of the data as the new base.
    ///
    /// # Errors
    /// When a rewrite is already running, the new files cannot be created,
    /// or records waiting for the current file cannot be written to it (the
    /// files are not switched then).
    pub fn start_rewrite(&mut self, db: &mut ShardDb, now_ms: u64) -> Result<(), String> {
        if self.rewrite.is_some() {
            return Err("ERR Background append only file rewriting already in progress".into());
        }
        self.last_rewrite_attempt = Instant::now();
        self.rewrite_scheduled = false;
        // Everything recorded so far belongs to the old files. If it cannot
        // be written there, do not switch: the unwritten records were
        // encoded for the old file (its SELECT and clock context, maybe the
        // rest of a partly written record) and would corrupt the new one.
        if let Err(e) = self.commit(&mut db.aof) {
            e.act();
            if self.is_open() {
                return Err(self.rewrite_failed_to_start(&io::Error::other(e.why)));
            }
        }
        if let Err(e) = fs::create_dir_all(&self.dir) {
            return Err(self.rewrite_failed_to_start(&e));
        }
        let enabled = self.tunables.aof.is_enabled();
        let seq = self.next_seq();
        if enabled {
            let name = incr_name(self.shard, seq);
            let opened = create_file(&self.dir.join(&name)).and_then(|f| {
                sync_dir(&self.dir)?;
                Ok(f)
            });
            let file = match opened {
                Ok(f) => f,
                Err(e) => return Err(self.rewrite_failed_to_start(&e)),
            };
            if self.is_open() {
                // Live: the manifest lists the new incr now, so a crash
                // mid-rewrite still finds every effect.
                let mut m = self.manifest.clone().unwrap_or(Manifest {
                    shards: self.shards,
                    shard: self.shard,
                    base: None,
                    incrs: Vec::new(),
                });
                m.incrs.push(name.clone());
                if let Err(e) = m.write(&self.dir) {
                    let _ = fs::remove_file(self.dir.join(&name));
                    return Err(self.rewrite_failed_to_start(&e));
                }
                self.manifest = Some(m);
            }
            if let Some(old) = self.file.replace(file) {
                let _ = old.sync_data();
            }
            self.unsynced = false;
            db.aof.new_file();
            db.aof.set_enabled(true);
        }
        let snap = super::rewrite::snapshot(db, now_ms);
        let base = base_name(self.shard, seq);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let (dir, name) = (self.dir.clone(), base.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("aof-rewrite-{}", self.shard))
            .spawn(move || {
                let _ = tx.send(super::rewrite::write_base(&snap, &dir, &name));
            });
        if let Err(e) = spawned {
            return Err(self.rewrite_failed_to_start(&e));
        }
        self.tunables
            .aof
            .rewrites_in_progress
            .fetch_add(1, Ordering::SeqCst);
        self.rewrite = Some(Rewrite {
            done: rx,
            base,
            new_incr: enabled.then(|| incr_name(self.shard, seq)),
            started: Instant::now(),
        });
        Ok(())
    }

    /// A sequence number no file of this shard has used: above the
    /// manifest's, this process's and every file name on disk.
    fn next_seq(&mut self) -> u64 {
        let seq = self
            .manifest
            .as_ref()
            .map_or(0, |m| m.max_seq())
            .max(self.last_seq)
            .max(super::manifest::max_seq_on_disk(&self.dir, self.shard))
            + 1;
        self.last_seq = seq;
        seq
    }

    fn rewrite_failed_to_start(&mut self, e: &io::Error) -> String {
        log::warn!("shard {}: cannot start an AOF rewrite: {e}", self.shard);
        self.tunables
            .aof
            .last_rewrite_ok
            .store(false, Ordering::Relaxed);
        if self.tunables.aof.is_enabled() && !self.is_open() {
            self.rewrite_scheduled = true;
        }
        format!("ERR Can't rewrite append only file in background: {e}")
    }

    /// Finish a rewrite whose base file is written: switch the manifest to
    /// `[new base, incr files since the switch]` and delete the old files.
    fn poll_rewrite(&mut self, db: &mut ShardDb) {
        let Some(rw) = self.rewrite.as_ref() else {
            return;
        };
        let result = match rw.done.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => Err(io::Error::other("rewrite thread died")),
        };
        self.finish_rewrite(db, result);
    }

    fn finish_rewrite(&mut self, db: &mut ShardDb, result: io::Result<u64>) {
        let Some(rw) = self.rewrite.take() else {
            return;
        };
        let st = &self.tunables.aof;
        st.last_rewrite_time_ms
            .store(rw.started.elapsed().as_millis() as i64, Ordering::Relaxed);
        let base_size = match result {
            Ok(size) => size,
            Err(e) => {
                log::warn!("shard {}: background AOF rewrite failed: {e}", self.shard);
                st.last_rewrite_ok.store(false, Ordering::Relaxed);
                let _ = fs::remove_file(self.dir.join(&rw.base));
                if self.tunables.aof.is_enabled()
                    && rw.new_incr.is_some()
                    && self.manifest_lacks(&rw)
                {
                    self.rewrite_scheduled = true;
                }
                self.rewrite_done(false);
                return;
            }
        };
        let new = Manifest {
            shards: self.shards,
            shard: self.shard,
            base: Some(rw.base.clone()),
            incrs: rw.new_incr.iter().cloned().collect(),
        };
        if let Err(e) = new.write(&self.dir) {
            log::warn!(
                "shard {}: cannot switch to the rewritten AOF: {e}",
                self.shard
            );
            st.last_rewrite_ok.store(false, Ordering::Relaxed);
            let _ = fs::remove_file(self.dir.join(&rw.base));
            self.rewrite_done(false);
            return;
        }
        let old = self.manifest.replace(new.clone());
        if let Some(old) = old {
            for f in old.files() {
                if !new.files().any(|n| n == f) {
                    let _ = fs::remove_file(self.dir.join(f));
                }
            }
        }
        st.last_rewrite_ok.store(true, Ordering::Relaxed);
        let incr_size = rw
            .new_incr
            .as_ref()
            .and_then(|n| fs::metadata(self.dir.join(n)).ok())
            .map_or(0, |m| m.len());
        self.set_size(base_size + incr_size + self.pending.len() as u64);
        self.set_base_size(base_size + incr_size);
        if rw.new_incr.is_none() {
            // appendonly no: nothing is logged into the new files.
            db.aof.set_enabled(false);
        }
        self.rewrite_done(true);
    }

    /// Publish the end of this shard's rewrite, last of all (INFO must not
    /// show "not in progress" before the switch is complete). The
    /// server-wide rewrite counts once, when its last shard finishes.
    fn rewrite_done(&self, ok: bool) {
        let st = &self.tunables.aof;
        let last_shard = st.rewrites_in_progress.fetch_sub(1, Ordering::SeqCst) == 1;
        if ok && last_shard {
            st.rewrites.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the manifest on disk does not list the rewrite's incr file
    /// (the rewrite was creating the AOF, so it must be retried).
    fn manifest_lacks(&self, rw: &Rewrite) -> bool {
        match (&self.manifest, &rw.new_incr) {
            (Some(m), Some(n)) => !m.incrs.contains(n),
            _ => true,
        }
    }

    /// Flush and fsync everything before the shard exits. Returns whether
    /// every effect reached the disk (true as well with no AOF at all).
    pub fn shutdown(&mut self, db: &mut ShardDb) -> bool {
        let mut flushed = true;
        if let Err(e) = self.commit(&mut db.aof) {
            log::warn!("{e}; shutting down with unwritten effects");
            flushed = false;
        }
        if let Some(f) = self.file.as_ref() {
            if let Err(e) = f.sync_data() {
                log::warn!("shard {}: fsync at shutdown failed: {e}", self.shard);
                flushed = false;
            }
        }
        // Let a running rewrite finish and switch, so the next start loads
        // the compact files.
        if let Some(rw) = self.rewrite.as_ref() {
            let result = rw
                .done
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| Err(io::Error::other("rewrite did not finish")));
            self.finish_rewrite(db, result);
        }
        flushed
    }
}

/// Create a new file for sequential writing; fails if it exists (an
/// existing file may hold data and is never truncated).
fn create_file(path: &std::path::Path) -> io::Result<File> {
    OpenOptions::new().create_new(true).write(true).open(path)
}

fn open_append(path: &std::path::Path) -> io::Result<File> {
    OpenOptions::new().append(true).open(path)
}
