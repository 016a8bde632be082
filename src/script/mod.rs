//! Scripting: the server-wide registry of scripts (`SCRIPT LOAD`, `EVAL`)
//! and function libraries (`FUNCTION LOAD`), and the Lua 5.1 engine each
//! shard thread runs them in ([`lua`]).
//!
//! # Where things live
//! * [`Registry`] (one per server, shared by every thread): script sources
//!   by SHA1, libraries by name, and which shard is running a script now
//!   (for `SCRIPT KILL`, `FUNCTION STATS` and `-BUSY`). Only sources and
//!   metadata are shared; compiled code never crosses a thread.
//! * [`lua::Engine`] (one per shard thread, thread-local, `!Send`): a
//!   sandboxed Lua state that compiles a script or loads a library the
//!   first time that thread runs it.
//!
//! A script runs on the shard that owns its declared keys, as one shard
//! request: each `redis.call` is parsed with the command table and applied
//! inline to that shard's `ShardDb` (see `cmd::scripting`).

pub mod libs;
pub mod lua;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

/// SHA1 of `body` as 40 lower-case hex characters (`redis.sha1hex`,
/// the name EVALSHA and SCRIPT LOAD use).
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Flags of a script (`#!lua flags=...`) or a function (`redis.register_function`).
///
/// # Source
/// "Script flags", redis.io/docs/latest/develop/interact/programmability/lua-api (7.0+).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// `no-writes`: write commands are refused; runs under `*_RO`.
    pub no_writes: bool,
    /// `allow-oom`: runs (and calls `denyoom` commands) over `maxmemory`.
    pub allow_oom: bool,
    /// `allow-stale`: accepted (shardstream has no replicas).
    pub allow_stale: bool,
    /// `no-cluster`: accepted (not enforced).
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`: accepted; keys must still share a shard.
    pub allow_cross_slot_keys: bool,
}

impl ScriptFlags {
    /// Set the flag called `name`; false when there is no such flag.
    pub fn set(&mut self, name: &str) -> bool {
        match name {
            "no-writes" => self.no_writes = true,
            "allow-oom" => self.allow_oom = true,
            "allow-stale" => self.allow_stale = true,
            "no-cluster" => self.no_cluster = true,
            "allow-cross-slot-keys" => self.allow_cross_slot_keys = true,
            _ => return false,
        }
        true
    }

    /// Flag names in Redis's spelling and order (FUNCTION LIST).
    pub fn names(self) -> Vec<&'static str> {
        [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot_keys, "allow-cross-slot-keys"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| n)
        .collect()
    }
}

/// One function of a library, as `redis.register_function` declared it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionMeta {
    /// The name FCALL calls it by.
    pub name: String,
    /// `description` given to `redis.register_function`, if any.
    pub description: Option<String>,
    /// `flags` given to `redis.register_function`.
    pub flags: ScriptFlags,
}

/// A loaded function library: its code and what loading it registered.
#[derive(Debug)]
pub struct Library {
    /// `name=` of the `#!lua` header.
    pub name: String,
    /// The whole source, header included (FUNCTION LIST WITHCODE, DUMP, the AOF).
    pub code: Bytes,
    /// What the body registered, in registration order.
    pub functions: Vec<FunctionMeta>,
    /// Bumped by every load: a shard thread reloads a library whose version
    /// it has not seen.
    pub version: u64,
}

/// What a shard thread is running now (one per shard thread).
#[derive(Default)]
pub struct Running {
    /// When the script started, ms since the Unix epoch; 0 = nothing runs.
    pub started_ms: AtomicU64,
    /// The script ran past `busy-reply-threshold`: other clients get `-BUSY`.
    pub busy: AtomicBool,
    /// SCRIPT KILL / FUNCTION KILL asked it to stop.
    pub kill: AtomicBool,
    /// It already wrote (it cannot be killed).
    pub wrote: AtomicBool,
    /// It is a function (FCALL), not an EVAL script.
    pub is_function: AtomicBool,
    /// Name shown by FUNCTION STATS (`running_script`).
    pub name: Mutex<String>,
}

/// Libraries and the index of their functions.
///
/// Library names are case-sensitive; function names are not: FCALL finds
/// `MyFunc` as `myfunc`, and two libraries may not hold functions whose
/// names differ only in case (Redis 7.0+: `functionDictType` compares names
/// without case, `librariesDictType` with it, redis/src/functions.c).
#[derive(Default)]
pub struct Libraries {
    /// Library name → library.
    pub by_name: BTreeMap<String, Arc<Library>>,
    /// Function name in ASCII lower case → library name.
    pub functions: HashMap<String, String>,
    next_version: u64,
}

impl Libraries {
    /// Add `lib` (replacing a library of the same name when `replace`).
    ///
    /// # Errors
    /// `ERR Library '<name>' already exists`, `ERR Function <f> already exists`
    /// (a function of another library), as `functionsCreateWithLibraryCtx`
    /// (redis/src/functions.c) answers.
    pub fn add(
        &mut self,
        name: String,
        code: Bytes,
        functions: Vec<FunctionMeta>,
        replace: bool,
    ) -> Result<(), String> {
        if self.by_name.contains_key(&name) && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        for f in &functions {
            if let Some(owner) = self.functions.get(&function_key(&f.name)) {
                if *owner != name {
                    return Err(format!("ERR Function {} already exists", f.name));
                }
            }
        }
        self.remove(&name);
        for f in &functions {
            self.functions.insert(function_key(&f.name), name.clone());
        }
        self.next_version += 1;
        let lib = Library {
            name: name.clone(),
            code,
            functions,
            version: self.next_version,
        };
        self.by_name.insert(name, Arc::new(lib));
        Ok(())
    }

    /// Remove a library and its functions; false when there was none.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(lib) = self.by_name.remove(name) else {
            return false;
        };
        for f in &lib.functions {
            self.functions.remove(&function_key(&f.name));
        }
        true
    }

    /// The library holding function `name` (any case), and that function's
    /// metadata (its name as registered).
    pub fn function(&self, name: &str) -> Option<(Arc<Library>, FunctionMeta)> {
        let lib = self.by_name.get(self.functions.get(&function_key(name))?)?;
        let meta = lib
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))?
            .clone();
        Some((lib.clone(), meta))
    }
}

/// The key of function `name` in [`Libraries::functions`]: names are
/// `[A-Za-z0-9_]`, so ASCII lower case is Redis's case-insensitive compare.
fn function_key(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// Scripts cached by EVAL (not SCRIPT LOAD) beyond this many are evicted,
/// oldest first, as Redis 7.4+ evicts EVAL scripts (its limit is 500).
pub const MAX_EVAL_SCRIPTS: usize = 500;

/// Cached scripts: sources by SHA1, and which came from EVAL (evictable).
#[derive(Default)]
struct Scripts {
    by_sha: HashMap<String, Bytes>,
    /// SHA1s added by EVAL and not by SCRIPT LOAD, oldest first.
    from_eval: std::collections::VecDeque<String>,
}

/// The server-wide scripting state (see the module doc).
pub struct Registry {
    scripts: Mutex<Scripts>,
    /// Bumped by SCRIPT FLUSH: shard threads drop their compiled scripts.
    pub scripts_epoch: AtomicU64,
    libraries: Mutex<Libraries>,
    /// Indexed by shard id.
    pub running: Vec<Running>,
    /// How many shards run a script past `busy-reply-threshold` now.
    busy_count: AtomicUsize,
    /// The server is shutting down: running scripts are stopped.
    pub shutting_down: AtomicBool,
}

impl Registry {
    /// An empty registry for `shards` shard threads.
    pub fn new(shards: u16) -> Registry {
        Registry {
            scripts: Mutex::new(Scripts::default()),
            scripts_epoch: AtomicU64::new(0),
            libraries: Mutex::new(Libraries::default()),
            running: (0..shards.max(1)).map(|_| Running::default()).collect(),
            busy_count: AtomicUsize::new(0),
            shutting_down: AtomicBool::new(false),
        }
    }

    /// Remember a script's source under its SHA1 (SCRIPT LOAD); returns the SHA1.
    pub fn add_script(&self, body: Bytes) -> String {
        let sha = sha1_hex(&body);
        let mut s = self.lock_scripts();
        s.from_eval.retain(|x| *x != sha);
        s.by_sha.insert(sha.clone(), body);
        sha
    }

    /// Remember a script EVAL ran. EVAL scripts past [`MAX_EVAL_SCRIPTS`]
    /// are forgotten oldest first; one SCRIPT LOAD loaded is kept.
    pub fn add_eval_script(&self, sha: &str, body: Bytes) {
        let mut s = self.lock_scripts();
        if s.by_sha.contains_key(sha) {
            return;
        }
        s.by_sha.insert(sha.to_string(), body);
        s.from_eval.push_back(sha.to_string());
        while s.from_eval.len() > MAX_EVAL_SCRIPTS {
            if let Some(old) = s.from_eval.pop_front() {
                s.by_sha.remove(&old);
            }
        }
    }

    /// The source of script `sha` (any case), if loaded.
    pub fn script(&self, sha: &[u8]) -> Option<(String, Bytes)> {
        if sha.len() != 40 {
            return None;
        }
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        let body = self.lock_scripts().by_sha.get(&sha).cloned()?;
        Some((sha, body))
    }

    /// Whether script `sha` (any case) is loaded.
    pub fn has_script(&self, sha: &[u8]) -> bool {
        self.script(sha).is_some()
    }

    /// Forget every script (SCRIPT FLUSH).
    pub fn flush_scripts(&self) {
        *self.lock_scripts() = Scripts::default();
        self.scripts_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Number of cached scripts (INFO `number_of_cached_scripts`).
    pub fn scripts_len(&self) -> usize {
        self.lock_scripts().by_sha.len()
    }

    fn lock_scripts(&self) -> MutexGuard<'_, Scripts> {
        self.scripts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The function libraries, locked.
    pub fn libraries(&self) -> MutexGuard<'_, Libraries> {
        self.libraries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shard thread `shard`'s running-script slot.
    pub fn running(&self, shard: usize) -> Option<&Running> {
        self.running.get(shard)
    }

    /// Whether some shard runs a script past `busy-reply-threshold` (one
    /// relaxed load: the gate every command passes).
    pub fn any_busy(&self) -> bool {
        self.busy_count.load(Ordering::Relaxed) > 0
    }

    /// Mark shard `shard`'s script busy (`true`) or not; counted once per change.
    pub fn set_busy(&self, shard: usize, busy: bool) {
        let Some(r) = self.running.get(shard) else {
            return;
        };
        if r.busy.swap(busy, Ordering::SeqCst) != busy {
            if busy {
                self.busy_count.fetch_add(1, Ordering::SeqCst);
            } else {
                self.busy_count.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// The running script of the busy shard, if any: `(shard, running)`.
    pub fn busy_script(&self) -> Option<(usize, &Running)> {
        self.running
            .iter()
            .enumerate()
            .find(|(_, r)| r.busy.load(Ordering::SeqCst))
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_of_empty_matches_redis() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }

    #[test]
    fn eval_scripts_are_evicted_oldest_first_but_loaded_ones_stay() {
        let r = Registry::new(1);
        let loaded = r.add_script(Bytes::from_static(b"return 'loaded'"));
        for i in 0..MAX_EVAL_SCRIPTS + 10 {
            let body = Bytes::from(format!("return {i}"));
            r.add_eval_script(&sha1_hex(&body), body);
        }
        assert_eq!(r.scripts_len(), MAX_EVAL_SCRIPTS + 1);
        assert!(r.has_script(loaded.as_bytes()));
        assert!(!r.has_script(sha1_hex(b"return 0").as_bytes()));
        assert!(r.has_script(sha1_hex(b"return 509").as_bytes()));
    }

    #[test]
    fn libraries_refuse_clashes() {
        let mut libs = Libraries::default();
        let f = |n: &str| FunctionMeta {
            name: n.into(),
            description: None,
            flags: ScriptFlags::default(),
        };
        libs.add("a".into(), Bytes::new(), vec![f("f1")], false)
            .unwrap();
        assert_eq!(
            libs.add("a".into(), Bytes::new(), vec![f("f2")], false),
            Err("ERR Library 'a' already exists".into())
        );
        assert_eq!(
            libs.add("b".into(), Bytes::new(), vec![f("f1")], false),
            Err("ERR Function f1 already exists".into())
        );
        assert_eq!(
            libs.add("b".into(), Bytes::new(), vec![f("F1")], false),
            Err("ERR Function F1 already exists".into())
        );
        libs.add("a".into(), Bytes::new(), vec![f("f2")], true)
            .unwrap();
        assert!(libs.function("f1").is_none());
        assert_eq!(libs.function("f2").unwrap().0.name, "a");
    }

    #[test]
    fn function_names_are_found_in_any_case_library_names_are_not() {
        let mut libs = Libraries::default();
        let f = FunctionMeta {
            name: "MyFunc".into(),
            description: None,
            flags: ScriptFlags::default(),
        };
        libs.add("Lib".into(), Bytes::new(), vec![f], false)
            .unwrap();
        let (lib, meta) = libs.function("MYFUNC").unwrap();
        assert_eq!((lib.name.as_str(), meta.name.as_str()), ("Lib", "MyFunc"));
        assert!(!libs.remove("lib"));
        assert!(libs.remove("Lib"));
        assert!(libs.function("myfunc").is_none());
    }
}
