//! Redis Cluster: which node serves which hash slot, and how nodes agree on it.
//!
//! A node started with `cluster-enabled yes` is a Redis Cluster node:
//! * it keeps its configuration ([`state::ClusterState`]) in
//!   `cluster-config-file` (default `nodes.conf` in `dir`), saved on every
//!   change (fsynced when an epoch changed) and read back at start;
//! * it talks to the other nodes over the cluster bus ([`bus`], port
//!   `port + 10000` or `cluster-port`): PING/PONG carry each node's claimed
//!   slots and config epoch, and news of other nodes, so every node converges
//!   on the same slot map;
//! * the CLUSTER commands `redis-cli --cluster` drives (ADDSLOTS, MEET,
//!   SETSLOT, ...) change it ([`crate::cmd::cluster`]), and MIGRATE moves keys;
//! * every command with keys is checked against the slot map before it runs
//!   (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: [`SlotView`]).
//!
//! A static topology file (`cluster-config`, [`topology`]) is a shortcut
//! that seeds the same state at start: every node listed, its slots, its
//! epoch.
//!
//! The slot map read on the hot path is an immutable [`SlotView`], replaced
//! whole (an `ArcSwap`) when the configuration changes, so shard threads read
//! it without locks; the full state sits behind a mutex taken only by CLUSTER
//! commands and the bus thread.

pub mod bus;
pub mod state;
pub mod topology;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use arc_swap::ArcSwap;
use bytes::Bytes;

use crate::error::CmdError;
use crate::route::slot::SLOTS;
pub use state::{Changed, ClusterState, Node, NodeId};
pub use topology::{node_id, parse_nodes, ClusterNode, Topology};

/// A new random node id (40 hex characters).
pub fn random_id() -> NodeId {
    Arc::from(crate::server::random_hex40())
}

/// SHA-1 of `s`, 40 lowercase hex characters.
pub fn sha1_hex(s: &str) -> String {
    sha1_smol::Sha1::from(s.as_bytes()).digest().to_string()
}

const NONE: u16 = u16::MAX;
const MIGRATING: u8 = 1;
const IMPORTING: u8 = 2;

/// The slot map as commands see it: an immutable snapshot of the state.
#[derive(Debug)]
pub struct SlotView {
    /// Per slot: index into `endpoints`, or `NONE`.
    owner: Vec<u16>,
    /// `ip:port` of every node, as MOVED/ASK print it.
    endpoints: Vec<String>,
    /// Index of this node in `endpoints`.
    myself: u16,
    /// Per slot: `MIGRATING`, `IMPORTING` or 0.
    transit: Vec<u8>,
    /// Per migrating slot: index of the node it is moving to.
    migrating_to: HashMap<u16, u16>,
    /// `cluster_state:ok`.
    pub ok: bool,
}

/// Where a command on one slot goes (Redis's `getNodeByQuery`).
#[derive(Debug, PartialEq, Eq)]
pub enum SlotRoute<'a> {
    /// Served here.
    Here,
    /// Served here, but moving to the node at this address: keys missing
    /// here are asked for there (ASK).
    Migrating(&'a str),
    /// Served by another node, which is handing it to this one: served here
    /// after ASKING.
    Importing(&'a str),
    /// Served by the node at this address (MOVED).
    Moved(&'a str),
    /// No node serves it.
    Unserved,
}

impl SlotView {
    /// Build the snapshot of `s`.
    pub fn of(s: &ClusterState) -> SlotView {
        let ids: Vec<&NodeId> = s.nodes.keys().collect();
        let index: HashMap<&str, u16> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (&***id, i as u16))
            .collect();
        let endpoints = s.nodes.values().map(|n| n.endpoint()).collect();
        let at = |id: &str| index.get(id).copied().unwrap_or(NONE);
        // Runs of slots share an owner (one Arc): look each run up once.
        let mut last: Option<(&NodeId, u16)> = None;
        let owner = (0..SLOTS)
            .map(|slot| match s.owner(slot) {
                None => NONE,
                Some(id) => match last {
                    Some((l, i)) if Arc::ptr_eq(l, id) => i,
                    _ => {
                        let i = at(id);
                        last = Some((id, i));
                        i
                    }
                },
            })
            .collect();
        let mut transit = vec![0u8; usize::from(SLOTS)];
        let mut migrating_to = HashMap::new();
        for (slot, to) in &s.migrating {
            transit[usize::from(*slot)] = MIGRATING;
            migrating_to.insert(*slot, at(to));
        }
        for slot in s.importing.keys() {
            transit[usize::from(*slot)] = IMPORTING;
        }
        SlotView {
            owner,
            endpoints,
            myself: at(&s.myself),
            transit,
            migrating_to,
            ok: s.is_ok(),
        }
    }

    fn endpoint(&self, i: u16) -> &str {
        self.endpoints
            .get(usize::from(i))
            .map_or("", |s| s.as_str())
    }

    /// Where commands on `slot` go.
    pub fn route(&self, slot: u16) -> SlotRoute<'_> {
        let i = usize::from(slot);
        let Some(&owner) = self.owner.get(i) else {
            return SlotRoute::Unserved;
        };
        let transit = self.transit[i];
        if owner == self.myself {
            if transit == MIGRATING {
                let to = self.migrating_to.get(&slot).copied().unwrap_or(NONE);
                return SlotRoute::Migrating(self.endpoint(to));
            }
            return SlotRoute::Here;
        }
        if owner == NONE {
            return if transit == IMPORTING {
                SlotRoute::Importing("")
            } else {
                SlotRoute::Unserved
            };
        }
        if transit == IMPORTING {
            return SlotRoute::Importing(self.endpoint(owner));
        }
        SlotRoute::Moved(self.endpoint(owner))
    }

    /// Whether this node serves `slot`.
    pub fn is_mine(&self, slot: u16) -> bool {
        self.owner.get(usize::from(slot)) == Some(&self.myself)
    }

    /// The error a command whose keys hash to `slot` gets here, if any,
    /// decided without looking at the keys (Redis's `getNodeByQuery`):
    /// `CLUSTERDOWN` while the cluster is down or the slot unserved, `MOVED`
    /// to its owner unless this node is importing it and the client said
    /// ASKING. `Ok(Some(check))` when the keys decide (a migrating slot, or
    /// an importing one with several keys): run `check` on the shard first.
    ///
    /// # Errors
    /// `CLUSTERDOWN The cluster is down`, `CLUSTERDOWN Hash slot not
    /// served`, `MOVED <slot> <ip>:<port>`.
    pub fn admit(
        &self,
        slot: u16,
        keys: &[&Bytes],
        asking: bool,
        migrate: bool,
    ) -> Result<Option<TransitCheck>, CmdError> {
        let owned = || keys.iter().map(|k| (*k).clone()).collect::<Vec<Bytes>>();
        let route = self.route(slot);
        if route == SlotRoute::Unserved {
            return Err(CmdError::msg("CLUSTERDOWN Hash slot not served"));
        }
        if !self.ok {
            return Err(CmdError::msg("CLUSTERDOWN The cluster is down"));
        }
        match route {
            SlotRoute::Here => Ok(None),
            SlotRoute::Migrating(_) | SlotRoute::Importing(_) if migrate => Ok(None),
            SlotRoute::Migrating(to) => Ok(Some(TransitCheck {
                slot,
                keys: owned(),
                ask: Some(to.to_string()),
            })),
            SlotRoute::Importing(_) if asking => {
                let keys = owned();
                Ok((distinct(&keys) > 1).then_some(TransitCheck {
                    slot,
                    keys,
                    ask: None,
                }))
            }
            SlotRoute::Importing(owner) | SlotRoute::Moved(owner) if !owner.is_empty() => {
                Err(CmdError::Moved {
                    slot,
                    addr: owner.to_string(),
                })
            }
            _ => Err(CmdError::msg("CLUSTERDOWN Hash slot not served")),
        }
    }
}

/// How many different keys.
fn distinct(keys: &[Bytes]) -> usize {
    let mut k: Vec<&Bytes> = keys.iter().collect();
    k.sort_unstable();
    k.dedup();
    k.len()
}

/// The key check a command on a slot in transit makes on its shard before
/// it runs (Redis's `getNodeByQuery`, the missing-keys part).
#[derive(Debug, Clone)]
pub struct TransitCheck {
    pub slot: u16,
    pub keys: Vec<Bytes>,
    /// Migrating: the address of the node keys missing here are asked for.
    /// `None`: importing, after ASKING.
    pub ask: Option<String>,
}

/// `TRYAGAIN`: a multi-key command over a slot in transit whose keys are
/// partly here.
pub const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";

impl TransitCheck {
    /// `Err` with the redirection when the command may not run here, given
    /// which of its keys exist here (`exists`).
    ///
    /// # Errors
    /// Migrating: `ASK <slot> <ip>:<port>` when every key is missing here,
    /// `TRYAGAIN ...` when only some are. Importing: `TRYAGAIN` when several
    /// keys are given and some are missing.
    pub fn decide(&self, mut exists: impl FnMut(&[u8]) -> bool) -> Result<(), CmdError> {
        let missing = self.keys.iter().filter(|k| !exists(k)).count();
        if missing == 0 {
            return Ok(());
        }
        match &self.ask {
            Some(to) if missing == self.keys.len() => {
                Err(CmdError::msg(format!("ASK {} {to}", self.slot)))
            }
            Some(_) => Err(CmdError::msg(TRYAGAIN)),
            None if distinct(&self.keys) > 1 => Err(CmdError::msg(TRYAGAIN)),
            None => Ok(()),
        }
    }
}

/// The bus message types, in the order CLUSTER INFO lists them (Redis's
/// type numbers: ping, pong, meet, ..., update).
pub const MESSAGE_TYPES: [&str; 4] = ["ping", "pong", "meet", "update"];

/// Bus messages sent and received, by type.
#[derive(Debug, Default)]
pub struct MessageStats {
    sent: [AtomicU64; 4],
    received: [AtomicU64; 4],
}

impl MessageStats {
    fn at(counts: &[AtomicU64; 4], kind: &str) {
        if let Some(i) = MESSAGE_TYPES.iter().position(|t| *t == kind) {
            counts[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One message of `kind` sent.
    pub fn sent(&self, kind: &str) {
        Self::at(&self.sent, kind);
    }

    /// One message of `kind` received.
    pub fn received(&self, kind: &str) {
        Self::at(&self.received, kind);
    }

    /// CLUSTER INFO's `cluster_stats_messages_*` fields in Redis's order:
    /// each type sent (only those sent at least once), the total sent, then
    /// the same for received.
    ///
    /// # Source
    /// `genClusterInfoString`, redis/src/cluster.c (7.0).
    pub fn info_fields(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for (dir, counts) in [("sent", &self.sent), ("received", &self.received)] {
            let mut total = 0;
            for (t, n) in MESSAGE_TYPES.iter().zip(counts.iter()) {
                let n = n.load(Ordering::Relaxed);
                total += n;
                if n > 0 {
                    out.push((format!("cluster_stats_messages_{t}_{dir}"), n));
                }
            }
            out.push((format!("cluster_stats_messages_{dir}"), total));
        }
        out
    }
}

/// Per-link facts for CLUSTER LINKS, kept by the bus thread.
#[derive(Debug, Clone)]
pub struct LinkInfo {
    /// `to` (we connected) or `from` (it connected).
    pub direction: &'static str,
    pub node: String,
    /// When the link was made, ms since the Unix epoch.
    pub create_time_ms: u64,
    /// `r`, `w` or `rw`: what the link waits for.
    pub events: &'static str,
    pub send_buffer_allocated: usize,
    pub send_buffer_used: usize,
}

/// One node's cluster: its state, the snapshot commands read, where it is
/// saved, and the bus that spreads it.
pub struct Cluster {
    state: Mutex<ClusterState>,
    view: ArcSwap<SlotView>,
    /// Bumped with every new view; shard threads compare it to notice
    /// slots that left (blocked clients are redirected).
    version: AtomicU64,
    /// nodes.conf (`None` for a static topology file, which is re-read instead).
    conf_path: Option<PathBuf>,
    /// `cluster-node-timeout`, ms (CONFIG SET changes it).
    node_timeout_ms: AtomicU64,
    /// Wakes the bus thread to tell the other nodes of a change.
    bus: OnceLock<Arc<mio::Waker>>,
    /// Bus messages sent and received, by type (CLUSTER INFO).
    pub messages: MessageStats,
    /// CLUSTER LINKS.
    pub links: Mutex<Vec<LinkInfo>>,
    /// Whether the bus learns this node's address from its peers (no
    /// `cluster-announce-ip` and a wildcard bind).
    pub learn_ip: bool,
    /// (current epoch, config epoch) last fsynced to nodes.conf.
    synced_epochs: Mutex<Option<(u64, u64)>>,
}

impl Cluster {
    /// A cluster around `state`, saved to `conf_path` when given.
    pub fn new(
        state: ClusterState,
        conf_path: Option<PathBuf>,
        node_timeout_ms: u64,
        learn_ip: bool,
    ) -> Cluster {
        let view = SlotView::of(&state);
        Cluster {
            state: Mutex::new(state),
            view: ArcSwap::from_pointee(view),
            version: AtomicU64::new(1),
            conf_path,
            node_timeout_ms: AtomicU64::new(node_timeout_ms.max(1)),
            bus: OnceLock::new(),
            messages: MessageStats::default(),
            links: Mutex::new(Vec::new()),
            learn_ip,
            synced_epochs: Mutex::new(None),
        }
    }

    /// Open the cluster state a config asks for: the static topology file
    /// (`cluster-config`) or nodes.conf (`cluster-enabled yes`; created
    /// when missing). `port` is the client port actually bound.
    ///
    /// # Errors
    /// A message naming the file that cannot be read, parsed or written.
    pub fn open(config: &crate::config::Config, port: u16, now_ms: u64) -> Result<Cluster, String> {
        let cport = if config.cluster_port != 0 {
            config.cluster_port
        } else {
            port.checked_add(10000).unwrap_or(0)
        };
        let wildcard = matches!(config.bind.as_str(), "" | "*" | "0.0.0.0" | "::" | "-::*");
        let announced = if !config.cluster_announce_ip.is_empty() {
            config.cluster_announce_ip.clone()
        } else if !wildcard {
            config
                .bind
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_start_matches('-')
                .to_string()
        } else {
            String::new()
        };
        let learn_ip = announced.is_empty();
        let timeout = config.cluster_node_timeout_ms;
        if let Some(path) = &config.cluster_config {
            let topo = Topology::load(path, &config.bind, port)?;
            let mut state = state_of_topology(&topo, now_ms);
            state.require_full_coverage = config.cluster_require_full_coverage;
            return Ok(Cluster::new(state, None, timeout, false));
        }
        let path = if config.cluster_config_file.is_absolute() {
            config.cluster_config_file.clone()
        } else {
            config.dir.join(&config.cluster_config_file)
        };
        // The data directory is created when missing, as the AOF does.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let mut state = match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => ClusterState::from_conf(&text, now_ms)
                .map_err(|e| format!("cluster config file {}: {e}", path.display()))?,
            Ok(_) => ClusterState::new(random_id(), &announced, port, cport, now_ms),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                ClusterState::new(random_id(), &announced, port, cport, now_ms)
            }
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        state.require_full_coverage = config.cluster_require_full_coverage;
        let me = state.myself.clone();
        if let Some(n) = state.nodes.get_mut(&me) {
            n.port = port;
            n.cport = cport;
            if !announced.is_empty() {
                n.ip = announced;
            }
        }
        let cluster = Cluster::new(state, Some(path), timeout, learn_ip);
        cluster.save()?;
        Ok(cluster)
    }

    /// `cluster-node-timeout`, ms.
    pub fn node_timeout_ms(&self) -> u64 {
        self.node_timeout_ms.load(Ordering::Relaxed)
    }

    /// CONFIG SET of the cluster settings that may change while running:
    /// `cluster-node-timeout`, `cluster-require-full-coverage`,
    /// `cluster-announce-ip` (as in Redis; the others are fixed at start).
    pub fn apply_config(&self, cfg: &crate::config::Config) {
        self.node_timeout_ms
            .store(cfg.cluster_node_timeout_ms.max(1), Ordering::Relaxed);
        self.change(|st| {
            let mut changed = Changed::NONE;
            if st.require_full_coverage != cfg.cluster_require_full_coverage {
                st.require_full_coverage = cfg.cluster_require_full_coverage;
                changed.view = true;
            }
            let ip = &cfg.cluster_announce_ip;
            if !ip.is_empty() && st.me().ip != *ip {
                let me = st.myself.clone();
                if let Some(n) = st.nodes.get_mut(&me) {
                    n.ip = ip.clone();
                }
                changed = Changed::ALL;
            }
            ((), changed)
        });
    }

    /// Whether the state comes from a static topology file (not saved).
    pub fn is_static(&self) -> bool {
        self.conf_path.is_none()
    }

    /// The slot map commands check against.
    pub fn view(&self) -> arc_swap::Guard<Arc<SlotView>> {
        self.view.load()
    }

    /// The view's version: changes whenever the view is replaced.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The full state, locked (for reading; use [`Cluster::change`] to change it).
    pub fn lock(&self) -> MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Change the state with `f`; then, as `f` reports, publish a new view,
    /// save nodes.conf and have the bus tell the other nodes.
    pub fn change<R>(&self, f: impl FnOnce(&mut ClusterState) -> (R, Changed)) -> R {
        let mut st = self.lock();
        let (r, changed) = f(&mut st);
        self.after(&st, changed);
        r
    }

    /// What [`Cluster::change`] does after a change, with the lock held.
    pub fn after(&self, st: &ClusterState, changed: Changed) {
        if changed.view {
            self.view.store(Arc::new(SlotView::of(st)));
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        if changed.config {
            if let Err(e) = self.write(st) {
                log::error!("{e}");
            }
        }
        if changed.gossip {
            self.wake_bus();
        }
    }

    /// Write nodes.conf now.
    ///
    /// # Errors
    /// The file could not be written and synced.
    pub fn save(&self) -> Result<(), String> {
        self.write(&self.lock())
    }

    /// Write nodes.conf; fsync it when the epochs it records changed since
    /// the last fsync. As in Redis (7.x `clusterSaveConfig`), slot changes
    /// are written but not synced: after a crash the other nodes' gossip
    /// gives them back; an epoch must never go backwards, so epoch changes
    /// reach the disk before the command that made them answers.
    fn write(&self, st: &ClusterState) -> Result<(), String> {
        let epochs = (st.current_epoch, st.me().config_epoch);
        let mut synced = self.synced_epochs.lock().unwrap_or_else(|p| p.into_inner());
        let sync = *synced != Some(epochs);
        write_conf(self.conf_path.as_ref(), st, sync)?;
        if sync {
            *synced = Some(epochs);
        }
        Ok(())
    }

    /// Hand the bus its waker (once, at start).
    pub fn set_bus_waker(&self, w: Arc<mio::Waker>) {
        let _ = self.bus.set(w);
    }

    /// Ask the bus thread to tell every node about a change now.
    pub fn wake_bus(&self) {
        if let Some(w) = self.bus.get() {
            let _ = w.wake();
        }
    }
}

/// Write nodes.conf. With `sync` (an epoch changed): a temp file, fsynced,
/// renamed over nodes.conf, the directory fsynced — atomic and durable.
/// Without: one write at offset 0 of the existing file, padded with newlines
/// to its old length so it never needs truncating (the parser skips blank
/// lines), as Redis 7.0 rewrites it; a process that dies during it leaves
/// either file whole (one write call), and renaming a fresh file per slot
/// change costs a freed inode each time (an ext4 discard) for nothing.
fn write_conf(path: Option<&PathBuf>, st: &ClusterState, sync: bool) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let Some(path) = path else {
        return Ok(());
    };
    let err = |e: std::io::Error| format!("cannot save cluster config {}: {e}", path.display());
    let mut text = st.to_conf().into_bytes();
    if !sync {
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
            let old = f.metadata().map(|m| m.len()).unwrap_or(0) as usize;
            // Padding beyond a few KiB: start afresh below instead.
            if old >= text.len() && old - text.len() < 16 * 1024 {
                text.resize(old, b'\n');
                return f.write_all_at(&text, 0).map_err(err);
            }
        }
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(&text).map_err(err)?;
    if sync {
        f.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(err)?;
    if sync {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(err)?;
        }
    }
    Ok(())
}

/// The state a static topology file describes: every node known, ids the
/// SHA-1 of the names, epochs the line order.
pub fn state_of_topology(t: &Topology, now_ms: u64) -> ClusterState {
    let me = t.me();
    let mut st = ClusterState::new(
        Arc::from(me.id.as_str()),
        &me.host,
        me.port,
        me.cport(),
        now_ms,
    );
    for n in &t.nodes {
        let id: NodeId = Arc::from(n.id.as_str());
        if n.id != me.id {
            st.nodes.insert(
                id.clone(),
                Node::new(id.clone(), &n.host, n.port, n.cport(), now_ms),
            );
        }
        if let Some(node) = st.nodes.get_mut(&id) {
            node.config_epoch = n.epoch;
        }
        for &(a, b) in &n.ranges {
            for s in a..=b {
                st.set_owner(s, Some(id.clone()));
            }
        }
    }
    st.current_epoch = t.current_epoch();
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> ClusterState {
        let a: NodeId = Arc::from("a".repeat(40));
        let b: NodeId = Arc::from("b".repeat(40));
        let mut s = ClusterState::new(a, "127.0.0.1", 7000, 17000, 0);
        s.nodes
            .insert(b.clone(), Node::new(b.clone(), "127.0.0.1", 7001, 17001, 0));
        for slot in 0..SLOTS {
            s.set_owner(
                slot,
                Some(if slot < 100 {
                    s.myself.clone()
                } else {
                    b.clone()
                }),
            );
        }
        s
    }

    #[test]
    fn routes_follow_owner_and_transit() {
        let mut s = state();
        let b = "b".repeat(40);
        s.set_migrating(5, b.as_bytes()).unwrap();
        s.set_importing(200, b.as_bytes()).unwrap();
        let v = SlotView::of(&s);
        assert_eq!(v.route(1), SlotRoute::Here);
        assert_eq!(v.route(5), SlotRoute::Migrating("127.0.0.1:7001"));
        assert_eq!(v.route(200), SlotRoute::Importing("127.0.0.1:7001"));
        assert_eq!(v.route(300), SlotRoute::Moved("127.0.0.1:7001"));
        let x = Bytes::from("x");
        let y = Bytes::from("y");
        let k = |_: &str| vec![&x];
        assert_eq!(
            v.admit(300, &k("x"), false, false).unwrap_err().to_string(),
            "MOVED 300 127.0.0.1:7001"
        );
        assert_eq!(
            v.admit(200, &k("x"), false, false).unwrap_err().to_string(),
            "MOVED 200 127.0.0.1:7001",
            "importing without ASKING"
        );
        assert!(v.admit(200, &k("x"), true, false).unwrap().is_none());
        let check = v.admit(5, &k("x"), false, false).unwrap().unwrap();
        assert_eq!(
            check.decide(|_| false).unwrap_err().to_string(),
            "ASK 5 127.0.0.1:7001"
        );
        assert!(check.decide(|_| true).is_ok());
        assert!(
            v.admit(5, &k("x"), false, true).unwrap().is_none(),
            "MIGRATE runs"
        );
        let two = vec![&x, &y];
        let check = v.admit(5, &two, false, false).unwrap().unwrap();
        assert_eq!(
            check.decide(|k| k == b"x").unwrap_err().to_string(),
            TRYAGAIN
        );
        let check = v.admit(200, &two, true, false).unwrap().unwrap();
        assert_eq!(
            check.decide(|k| k == b"x").unwrap_err().to_string(),
            TRYAGAIN
        );
        s.set_owner(300, None);
        let v = SlotView::of(&s);
        assert_eq!(
            v.admit(1, &k("x"), false, false).unwrap_err().to_string(),
            "CLUSTERDOWN The cluster is down"
        );
        s.require_full_coverage = false;
        let v = SlotView::of(&s);
        assert_eq!(
            v.admit(300, &k("x"), false, false).unwrap_err().to_string(),
            "CLUSTERDOWN Hash slot not served"
        );
    }
}
