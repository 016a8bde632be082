//! The cluster configuration one node holds: the nodes it knows, which node
//! serves each hash slot, the slots being migrated or imported, and the epochs
//! that settle conflicts. Pure data and rules, with time as a parameter: the
//! CLUSTER commands ([`crate::cmd::cluster`]) and the cluster bus
//! ([`super::bus`]) change it under [`super::Cluster`]'s lock.
//!
//! The rules are Redis Cluster's (redis.io "Redis cluster specification",
//! and the CLUSTER command pages, 7.x/8.x): a slot's owner changes only to a
//! node claiming it with a greater config epoch; two masters that share a
//! config epoch are told apart by node id, the smaller id taking a new epoch;
//! an operator's `SETSLOT NODE` and `BUMPEPOCH` take a new epoch without
//! agreement. Every node is a master: replicas and failover are not built.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::route::slot::SLOTS;

/// A node id: 40 lowercase hex characters.
pub type NodeId = Arc<str>;

/// How long a forgotten node may not be re-added by gossip (CLUSTER FORGET), ms.
pub const FORGET_BAN_MS: u64 = 60_000;

/// One node as this node knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: NodeId,
    /// Address clients and the bus reach it at; empty while unknown (a
    /// fresh node does not know its own address until a peer tells it).
    pub ip: String,
    /// Client port.
    pub port: u16,
    /// Cluster bus port.
    pub cport: u16,
    /// Config epoch: the version of the slots it claims.
    pub config_epoch: u64,
    /// This node.
    pub myself: bool,
    /// Met through CLUSTER MEET or gossip and not yet answered: its id is a
    /// placeholder until its first PONG.
    pub handshake: bool,
    /// A handshake started by CLUSTER MEET: the first message is a MEET, which
    /// makes the other node add this one.
    pub meet: bool,
    /// No PONG within `cluster-node-timeout` (CLUSTER NODES `fail?`).
    pub pfail: bool,
    /// When the last PING to it was sent and not answered yet (0: none pending), ms.
    pub ping_sent_ms: u64,
    /// When its last PONG arrived, ms.
    pub pong_recv_ms: u64,
    /// Whether the bus link to it is up.
    pub link_up: bool,
    /// When this node was added, ms (handshake timeout).
    pub created_ms: u64,
}

impl Node {
    /// A node known by address only, or by id and address.
    pub fn new(id: NodeId, ip: &str, port: u16, cport: u16, now_ms: u64) -> Node {
        Node {
            id,
            ip: ip.to_string(),
            port,
            cport,
            config_epoch: 0,
            myself: false,
            handshake: false,
            meet: false,
            pfail: false,
            ping_sent_ms: 0,
            pong_recv_ms: 0,
            link_up: false,
            created_ms: now_ms,
        }
    }

    /// CLUSTER NODES flags: `myself,master`, `master,fail?`, `handshake`...
    pub fn flags(&self) -> String {
        let mut f: Vec<&str> = Vec::new();
        if self.myself {
            f.push("myself");
        }
        if self.handshake {
            f.push("handshake");
        } else {
            f.push("master");
        }
        if self.pfail {
            f.push("fail?");
        }
        if self.ip.is_empty() && !self.myself {
            f.push("noaddr");
        }
        f.join(",")
    }

    /// `host:port`, as MOVED and ASK redirects print it.
    pub fn endpoint(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// CLUSTER SHARDS / MYSHARDID: 40 hex characters. Every node is a master
    /// and its own shard, so the shard id is derived from the node id and
    /// every node computes the same one.
    pub fn shard_id(&self) -> String {
        super::sha1_hex(&format!("shard:{}", self.id))
    }
}

/// A slot's state when it is moving (CLUSTER SETSLOT MIGRATING/IMPORTING).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transit {
    Migrating,
    Importing,
}

/// What a change did, for the caller to act on.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The configuration changed: save nodes.conf.
    pub config: bool,
    /// Slot ownership, transit or addresses changed: republish the slot view.
    pub view: bool,
    /// What this node tells the others changed (its slots, its epoch, a new
    /// node): send every node a PONG now rather than at the next PING.
    pub gossip: bool,
}

impl Changed {
    pub const NONE: Changed = Changed {
        config: false,
        view: false,
        gossip: false,
    };
    pub const ALL: Changed = Changed {
        config: true,
        view: true,
        gossip: true,
    };
    /// Saved and seen here, nothing to tell: slots in transit (local to the
    /// two nodes the operator talks to), and what this node learnt from
    /// another (whose own messages spread it).
    pub const LOCAL: Changed = Changed {
        config: true,
        view: true,
        gossip: false,
    };

    /// Both changes together.
    pub fn merge(&mut self, o: Changed) {
        self.config |= o.config;
        self.view |= o.view;
        self.gossip |= o.gossip;
    }
}

/// One node's cluster configuration.
#[derive(Debug, Clone)]
pub struct ClusterState {
    /// This node's id.
    pub myself: NodeId,
    /// Every known node, by id (this one included).
    pub nodes: BTreeMap<NodeId, Node>,
    /// Owner of each of the 16384 slots.
    owner: Vec<Option<NodeId>>,
    /// Slots this node serves and is moving to another node (SETSLOT MIGRATING).
    pub migrating: BTreeMap<u16, NodeId>,
    /// Slots another node serves and this one is receiving (SETSLOT IMPORTING).
    pub importing: BTreeMap<u16, NodeId>,
    /// The greatest epoch seen in the cluster.
    pub current_epoch: u64,
    /// Last epoch this node voted in (no failover: kept for nodes.conf).
    pub last_vote_epoch: u64,
    /// Forgotten nodes and when they may be re-added by gossip, ms.
    banned: HashMap<NodeId, u64>,
    /// `cluster-require-full-coverage`: every slot must be served for `ok`.
    pub require_full_coverage: bool,
}

/// Parse a slot argument: an integer in `0..16384`.
///
/// # Errors
/// `ERR Invalid or out of range slot` (Redis's `getSlotOrReply`).
pub fn slot_arg(arg: &[u8]) -> Result<u16, String> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .and_then(|n| u16::try_from(n).ok())
        .filter(|&n| n < SLOTS)
        .ok_or_else(|| "ERR Invalid or out of range slot".to_string())
}

impl ClusterState {
    /// A node that knows only itself and serves no slot (a fresh Redis
    /// Cluster node), listening on `port`/`cport`, at `ip` if known.
    pub fn new(myself: NodeId, ip: &str, port: u16, cport: u16, now_ms: u64) -> ClusterState {
        let mut me = Node::new(myself.clone(), ip, port, cport, now_ms);
        me.myself = true;
        let mut nodes = BTreeMap::new();
        nodes.insert(myself.clone(), me);
        ClusterState {
            myself,
            nodes,
            owner: vec![None; usize::from(SLOTS)],
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            banned: HashMap::new(),
            require_full_coverage: true,
        }
    }

    /// This node.
    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }

    fn me_mut(&mut self) -> &mut Node {
        let id = self.myself.clone();
        self.nodes
            .get_mut(&id)
            .expect("myself is always a known node")
    }

    /// The node serving `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&NodeId> {
        self.owner.get(usize::from(slot)).and_then(|o| o.as_ref())
    }

    /// Whether this node serves `slot`.
    pub fn is_mine(&self, slot: u16) -> bool {
        self.owner(slot) == Some(&self.myself)
    }

    /// Set the owner of `slot` (no checks; see the commands below). The
    /// owner is stored as the node table's own copy of the id.
    pub fn set_owner(&mut self, slot: u16, node: Option<NodeId>) {
        let node = node.map(|n| match self.nodes.get_key_value(&n) {
            Some((k, _)) => k.clone(),
            None => n,
        });
        if let Some(o) = self.owner.get_mut(usize::from(slot)) {
            *o = node;
        }
    }

    /// Whether slot owner `o` is node `id` (`key`: the node's id as the
    /// node table holds it). Owners are always clones of that key (see
    /// [`ClusterState::set_owner`]), so a pointer comparison decides; an id
    /// the table does not hold is compared as text.
    fn owned_by(o: &Option<NodeId>, key: Option<&NodeId>, id: &str) -> bool {
        match (o, key) {
            (Some(o), Some(k)) => Arc::ptr_eq(o, k),
            (Some(o), None) => &**o == id,
            (None, _) => false,
        }
    }

    /// The slots `id` serves, as sorted inclusive ranges.
    pub fn ranges_of(&self, id: &str) -> Vec<(u16, u16)> {
        let key = self.nodes.get_key_value(id).map(|(k, _)| k);
        let mut out: Vec<(u16, u16)> = Vec::new();
        for (s, o) in self.owner.iter().enumerate() {
            if !Self::owned_by(o, key, id) {
                continue;
            }
            let s = s as u16;
            match out.last_mut() {
                Some(last) if last.1 + 1 == s => last.1 = s,
                _ => out.push((s, s)),
            }
        }
        out
    }

    /// How many slots `id` serves.
    pub fn slot_count(&self, id: &str) -> usize {
        let key = self.nodes.get_key_value(id).map(|(k, _)| k);
        self.owner
            .iter()
            .filter(|o| Self::owned_by(o, key, id))
            .count()
    }

    /// Slots with an owner.
    pub fn assigned_slots(&self) -> usize {
        self.owner.iter().filter(|o| o.is_some()).count()
    }

    /// Slots served by nodes flagged `fail?` (CLUSTER INFO `cluster_slots_pfail`).
    pub fn pfail_slots(&self) -> usize {
        self.owner
            .iter()
            .flatten()
            .filter(|o| self.nodes.get(*o).is_some_and(|n| n.pfail))
            .count()
    }

    /// `cluster_state:ok`: every slot is served (when full coverage is
    /// required). A node in `fail?` still counts: there is no failover to
    /// hand its slots to, and clients keep being sent to it.
    pub fn is_ok(&self) -> bool {
        !self.require_full_coverage || self.assigned_slots() == usize::from(SLOTS)
    }

    /// Masters serving at least one slot (CLUSTER INFO `cluster_size`).
    pub fn size(&self) -> usize {
        let mut ids: Vec<&NodeId> = self.owner.iter().flatten().collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    /// Greatest config epoch of any known node, and the current epoch.
    pub fn max_epoch(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch)
    }

    /// The node with this id, or the single node whose id starts with it
    /// (Redis accepts full ids only; exact match is tried first).
    pub fn node(&self, id: &[u8]) -> Option<&Node> {
        let id = std::str::from_utf8(id).ok()?;
        self.nodes.get(id)
    }

    /// Parse and check a list of slots for ADDSLOTS/DELSLOTS: each valid and
    /// given once.
    ///
    /// # Errors
    /// `ERR Invalid or out of range slot`; `ERR Slot N specified multiple times`.
    pub fn unique_slots(slots: &[u16]) -> Result<(), String> {
        let mut seen = vec![false; usize::from(SLOTS)];
        for &s in slots {
            if std::mem::replace(&mut seen[usize::from(s)], true) {
                return Err(format!("ERR Slot {s} specified multiple times"));
            }
        }
        Ok(())
    }

    /// CLUSTER ADDSLOTS / ADDSLOTSRANGE: this node serves `slots`.
    ///
    /// # Errors
    /// `ERR Slot N specified multiple times`; `ERR Slot N is already busy`
    /// (another node, or this one, serves it). Nothing changes on error.
    pub fn add_slots(&mut self, slots: &[u16]) -> Result<Changed, String> {
        Self::unique_slots(slots)?;
        if let Some(s) = slots.iter().find(|&&s| self.owner(s).is_some()) {
            return Err(format!("ERR Slot {s} is already busy"));
        }
        for &s in slots {
            self.importing.remove(&s);
            self.set_owner(s, Some(self.myself.clone()));
        }
        Ok(Changed::ALL)
    }

    /// CLUSTER DELSLOTS / DELSLOTSRANGE: `slots` become unassigned here.
    ///
    /// # Errors
    /// `ERR Slot N specified multiple times`; `ERR Slot N is already
    /// unassigned`. Nothing changes on error.
    pub fn del_slots(&mut self, slots: &[u16]) -> Result<Changed, String> {
        Self::unique_slots(slots)?;
        if let Some(s) = slots.iter().find(|&&s| self.owner(s).is_none()) {
            return Err(format!("ERR Slot {s} is already unassigned"));
        }
        for &s in slots {
            self.importing.remove(&s);
            self.migrating.remove(&s);
            self.set_owner(s, None);
        }
        Ok(Changed::ALL)
    }

    /// Take a new config epoch without asking the cluster, when this node
    /// does not already hold the greatest one (Redis's
    /// `clusterBumpConfigEpochWithoutConsensus`). Whether it bumped.
    pub fn bump_epoch(&mut self) -> bool {
        let max = self.max_epoch();
        let mine = self.me().config_epoch;
        if mine == 0 || mine != max {
            self.current_epoch = max + 1;
            let e = self.current_epoch;
            self.me_mut().config_epoch = e;
            true
        } else {
            false
        }
    }

    /// CLUSTER SET-CONFIG-EPOCH: a fresh node's first config epoch.
    ///
    /// # Errors
    /// `ERR Invalid config epoch specified: N` (negative);
    /// `ERR The user can assign a config epoch only when the node does not
    /// know any other node.`; `ERR Node config epoch is already non-zero`.
    pub fn set_config_epoch(&mut self, epoch: i64) -> Result<Changed, String> {
        let Ok(epoch) = u64::try_from(epoch) else {
            return Err(format!("ERR Invalid config epoch specified: {epoch}"));
        };
        if self.nodes.len() > 1 {
            return Err("ERR The user can assign a config epoch only when the node does not know any other node.".into());
        }
        if self.me().config_epoch != 0 {
            return Err("ERR Node config epoch is already non-zero".into());
        }
        self.me_mut().config_epoch = epoch;
        self.current_epoch = self.current_epoch.max(epoch);
        Ok(Changed::ALL)
    }

    /// CLUSTER SETSLOT `slot` MIGRATING `node`.
    ///
    /// # Errors
    /// `ERR I'm not the owner of hash slot N`; `ERR I don't know about node ID`.
    pub fn set_migrating(&mut self, slot: u16, node: &[u8]) -> Result<Changed, String> {
        if !self.is_mine(slot) {
            return Err(format!("ERR I'm not the owner of hash slot {slot}"));
        }
        let id = self.known(node)?;
        self.migrating.insert(slot, id);
        Ok(Changed::LOCAL)
    }

    /// CLUSTER SETSLOT `slot` IMPORTING `node`.
    ///
    /// # Errors
    /// `ERR I'm already the owner of hash slot N`; `ERR I don't know about node ID`.
    pub fn set_importing(&mut self, slot: u16, node: &[u8]) -> Result<Changed, String> {
        if self.is_mine(slot) {
            return Err(format!("ERR I'm already the owner of hash slot {slot}"));
        }
        let id = self.known(node)?;
        self.importing.insert(slot, id);
        Ok(Changed::LOCAL)
    }

    /// CLUSTER SETSLOT `slot` STABLE: no longer migrating or importing.
    pub fn set_stable(&mut self, slot: u16) -> Changed {
        let m = self.migrating.remove(&slot).is_some();
        let i = self.importing.remove(&slot).is_some();
        if m || i {
            Changed::LOCAL
        } else {
            Changed::NONE
        }
    }

    /// CLUSTER SETSLOT `slot` NODE `node`: `node` serves `slot` from now on.
    /// `keys_here` is this node's key count in the slot. A node that was
    /// importing the slot and becomes its owner takes a new config epoch, so
    /// the rest of the cluster accepts its claim; a node that was migrating it
    /// away stops migrating.
    ///
    /// # Errors
    /// `ERR Unknown node ID`; `ERR Can't assign hashslot N to a different
    /// node while I still hold keys for this hash slot.`
    pub fn set_node(
        &mut self,
        slot: u16,
        node: &[u8],
        keys_here: usize,
    ) -> Result<Changed, String> {
        let Some(id) = self.node(node).map(|n| n.id.clone()) else {
            return Err(format!(
                "ERR Unknown node {}",
                String::from_utf8_lossy(node)
            ));
        };
        if self.is_mine(slot) && id != self.myself && keys_here > 0 {
            return Err(format!(
                "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
            ));
        }
        if keys_here == 0 && id != self.myself {
            self.migrating.remove(&slot);
        }
        let was_importing = id == self.myself && self.importing.remove(&slot).is_some();
        // This node's own claim changes when it gains or loses the slot:
        // only then do the others need telling now.
        let mine = self.is_mine(slot) || id == self.myself;
        self.set_owner(slot, Some(id));
        let bumped = was_importing && self.bump_epoch();
        Ok(if mine || bumped {
            Changed::ALL
        } else {
            Changed::LOCAL
        })
    }

    /// The id of a known node.
    fn known(&self, node: &[u8]) -> Result<NodeId, String> {
        self.node(node).map(|n| n.id.clone()).ok_or_else(|| {
            format!(
                "ERR I don't know about node {}",
                String::from_utf8_lossy(node)
            )
        })
    }

    /// CLUSTER FORGET: drop `node`, unassign its slots and refuse to re-add
    /// it from gossip for [`FORGET_BAN_MS`].
    ///
    /// # Errors
    /// `ERR Unknown node ID`; `ERR I tried hard but I can't forget myself...`.
    pub fn forget(&mut self, node: &[u8], now_ms: u64) -> Result<Changed, String> {
        let Some(id) = self.node(node).map(|n| n.id.clone()) else {
            return Err(format!(
                "ERR Unknown node {}",
                String::from_utf8_lossy(node)
            ));
        };
        if id == self.myself {
            return Err("ERR I tried hard but I can't forget myself...".into());
        }
        self.remove_node(&id);
        self.banned.insert(id, now_ms + FORGET_BAN_MS);
        Ok(Changed::ALL)
    }

    /// Drop a node and everything that names it.
    pub fn remove_node(&mut self, id: &str) {
        self.nodes.remove(id);
        for o in &mut self.owner {
            if o.as_deref() == Some(id) {
                *o = None;
            }
        }
        self.migrating.retain(|_, n| &**n != id);
        self.importing.retain(|_, n| &**n != id);
    }

    /// Whether gossip may add `id` (it was not forgotten in the last minute).
    pub fn may_add(&mut self, id: &str, now_ms: u64) -> bool {
        self.banned.retain(|_, until| *until > now_ms);
        !self.banned.contains_key(id)
    }

    /// CLUSTER MEET: start a handshake with the node at `ip:port` (bus at
    /// `cport`). A handshake already under way to that address is kept.
    pub fn meet(&mut self, ip: &str, port: u16, cport: u16, now_ms: u64) -> Changed {
        self.start_handshake(ip, port, cport, true, now_ms)
    }

    /// Add a placeholder node to handshake with, unless one for that address exists.
    pub fn start_handshake(
        &mut self,
        ip: &str,
        port: u16,
        cport: u16,
        meet: bool,
        now_ms: u64,
    ) -> Changed {
        if self
            .nodes
            .values()
            .any(|n| n.handshake && n.ip == ip && n.port == port && n.cport == cport)
        {
            return Changed::NONE;
        }
        let id = super::random_id();
        let mut n = Node::new(id.clone(), ip, port, cport, now_ms);
        n.handshake = true;
        n.meet = meet;
        self.nodes.insert(id, n);
        Changed {
            config: false,
            view: true,
            gossip: false,
        }
    }

    /// CLUSTER RESET: forget every other node, serve no slot, stop every
    /// migration; HARD also zeroes the epochs and takes a new node id.
    pub fn reset(&mut self, hard: bool) -> Changed {
        let me = self.myself.clone();
        let others: Vec<NodeId> = self.nodes.keys().filter(|id| **id != me).cloned().collect();
        for id in others {
            self.remove_node(&id);
        }
        self.owner.iter_mut().for_each(|o| *o = None);
        self.migrating.clear();
        self.importing.clear();
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            let mut node = self
                .nodes
                .remove(&me)
                .expect("myself is always a known node");
            let id = super::random_id();
            node.id = id.clone();
            node.config_epoch = 0;
            self.nodes.insert(id.clone(), node);
            self.myself = id;
        }
        Changed::ALL
    }

    /// Apply what a node claims about itself in a bus message: its slots at
    /// `config_epoch` win over owners with a smaller one (slots this node is
    /// importing are left alone: the operator finishes those with SETSLOT).
    /// Returns what changed, and the slots where the sender claims a slot
    /// whose owner here has a greater epoch (to send it an UPDATE).
    pub fn apply_claim(
        &mut self,
        sender: &str,
        config_epoch: u64,
        slots: &[(u16, u16)],
    ) -> (Changed, Vec<NodeId>) {
        let mut changed = Changed::NONE;
        let mut stale_against: Vec<NodeId> = Vec::new();
        let Some(sid) = self.nodes.get_key_value(sender).map(|(k, _)| k.clone()) else {
            return (changed, stale_against);
        };
        if let Some(n) = self.nodes.get_mut(sender) {
            if n.config_epoch != config_epoch {
                n.config_epoch = config_epoch;
                changed.config = true;
            }
        }
        for &(a, b) in slots {
            for s in a..=b {
                // Owners share the node table's ids: the usual case (the
                // sender already owns it) is one pointer compare.
                if self.owner(s).is_some_and(|c| Arc::ptr_eq(c, &sid)) {
                    continue;
                }
                let cur = self.owner(s).cloned();
                if self.importing.contains_key(&s) {
                    continue;
                }
                let cur_epoch = cur
                    .as_ref()
                    .and_then(|c| self.nodes.get(c))
                    .map(|n| n.config_epoch);
                match cur_epoch {
                    Some(e) if e >= config_epoch => {
                        if e > config_epoch {
                            if let Some(c) = cur {
                                if !stale_against.contains(&c) {
                                    stale_against.push(c);
                                }
                            }
                        }
                    }
                    _ => {
                        if cur.as_ref() == Some(&self.myself) {
                            self.migrating.remove(&s);
                        }
                        self.set_owner(s, Some(sid.clone()));
                        changed.merge(Changed::LOCAL);
                    }
                }
            }
        }
        (changed, stale_against)
    }

    /// Two masters with one config epoch: the one with the smaller node id
    /// takes a new epoch (Redis's `clusterHandleConfigEpochCollision`).
    /// Whether this node took one.
    pub fn resolve_epoch_collision(&mut self, sender: &str, sender_epoch: u64) -> bool {
        let me = self.me();
        if sender_epoch != me.config_epoch || sender <= &*self.myself {
            return false;
        }
        self.current_epoch += 1;
        let e = self.current_epoch;
        self.me_mut().config_epoch = e;
        true
    }

    /// Serialize as nodes.conf: one CLUSTER NODES line a node (with open
    /// slots), then `vars currentEpoch N lastVoteEpoch M`.
    pub fn to_conf(&self) -> String {
        let mut out = String::new();
        for n in self.nodes.values().filter(|n| !n.handshake) {
            out.push_str(&self.node_line(n, true));
            out.push('\n');
        }
        out.push_str(&format!(
            "vars currentEpoch {} lastVoteEpoch {}\n",
            self.current_epoch, self.last_vote_epoch
        ));
        out
    }

    /// One CLUSTER NODES line (no newline):
    /// `<id> <ip>:<port>@<cport> <flags> - <ping-sent> <pong-recv> <config-epoch>
    /// <link-state> <slot-range>...`, with `[slot->-id]` / `[slot-<-id]` for
    /// this node's migrating / importing slots. `for_conf` drops the timers.
    pub fn node_line(&self, n: &Node, for_conf: bool) -> String {
        let mut line = format!(
            "{} {}:{}@{} {} - {} {} {} {}",
            n.id,
            n.ip,
            n.port,
            n.cport,
            n.flags(),
            if for_conf { 0 } else { n.ping_sent_ms },
            if for_conf { 0 } else { n.pong_recv_ms },
            n.config_epoch,
            if n.myself || n.link_up {
                "connected"
            } else {
                "disconnected"
            }
        );
        for (a, b) in self.ranges_of(&n.id) {
            if a == b {
                line.push_str(&format!(" {a}"));
            } else {
                line.push_str(&format!(" {a}-{b}"));
            }
        }
        if n.myself {
            for (s, to) in &self.migrating {
                line.push_str(&format!(" [{s}->-{to}]"));
            }
            for (s, from) in &self.importing {
                line.push_str(&format!(" [{s}-<-{from}]"));
            }
        }
        line
    }

    /// Read a nodes.conf written by [`ClusterState::to_conf`].
    ///
    /// # Errors
    /// A message naming the line that does not parse, or a file with no
    /// `myself` line.
    pub fn from_conf(text: &str, now_ms: u64) -> Result<ClusterState, String> {
        let mut myself: Option<NodeId> = None;
        let mut nodes = BTreeMap::new();
        let mut owner: Vec<Option<NodeId>> = vec![None; usize::from(SLOTS)];
        let mut migrating = BTreeMap::new();
        let mut importing = BTreeMap::new();
        let (mut current_epoch, mut last_vote_epoch) = (0, 0);
        for (i, line) in text.lines().enumerate() {
            let err = |m: &str| format!("line {}: {m}", i + 1);
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            if f[0] == "vars" {
                for kv in f[1..].chunks(2) {
                    let v = kv.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
                    match kv[0] {
                        "currentEpoch" => current_epoch = v,
                        "lastVoteEpoch" => last_vote_epoch = v,
                        _ => {}
                    }
                }
                continue;
            }
            if f.len() < 8 {
                return Err(err("expected a CLUSTER NODES line"));
            }
            let id: NodeId = Arc::from(f[0]);
            let addr = f[1].split(',').next().unwrap_or("");
            let (hostport, cport) = addr.split_once('@').ok_or_else(|| err("no @cport"))?;
            let (ip, port) = hostport.rsplit_once(':').ok_or_else(|| err("no :port"))?;
            let port: u16 = port.parse().map_err(|_| err("bad port"))?;
            let cport: u16 = cport.parse().map_err(|_| err("bad cport"))?;
            let mut n = Node::new(id.clone(), ip, port, cport, now_ms);
            n.myself = f[2].split(',').any(|x| x == "myself");
            n.config_epoch = f[6].parse().map_err(|_| err("bad config epoch"))?;
            if n.myself {
                myself = Some(id.clone());
            }
            for tok in &f[8..] {
                if let Some(inner) = tok.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                    if let Some((s, to)) = inner.split_once("->-") {
                        let s = slot_arg(s.as_bytes()).map_err(|e| err(&e))?;
                        migrating.insert(s, Arc::from(to));
                    } else if let Some((s, from)) = inner.split_once("-<-") {
                        let s = slot_arg(s.as_bytes()).map_err(|e| err(&e))?;
                        importing.insert(s, Arc::from(from));
                    }
                    continue;
                }
                let (a, b) = match tok.split_once('-') {
                    Some((a, b)) => (a, b),
                    None => (*tok, *tok),
                };
                let a = slot_arg(a.as_bytes()).map_err(|e| err(&e))?;
                let b = slot_arg(b.as_bytes()).map_err(|e| err(&e))?;
                for s in a..=b {
                    owner[usize::from(s)] = Some(id.clone());
                }
            }
            nodes.insert(id, n);
        }
        let myself = myself.ok_or("no line for this node (flags 'myself')")?;
        Ok(ClusterState {
            myself,
            nodes,
            owner,
            migrating,
            importing,
            current_epoch,
            last_vote_epoch,
            banned: HashMap::new(),
            require_full_coverage: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: char) -> NodeId {
        Arc::from(c.to_string().repeat(40))
    }

    fn two() -> ClusterState {
        let mut s = ClusterState::new(id('a'), "127.0.0.1", 7000, 17000, 0);
        s.nodes
            .insert(id('b'), Node::new(id('b'), "127.0.0.1", 7001, 17001, 0));
        s
    }

    #[test]
    fn add_and_del_slots_check_everything_first() {
        let mut s = two();
        assert_eq!(
            s.add_slots(&[1, 2, 1]).unwrap_err(),
            "ERR Slot 1 specified multiple times"
        );
        s.add_slots(&[1, 2, 3]).unwrap();
        assert_eq!(
            s.add_slots(&[4, 3]).unwrap_err(),
            "ERR Slot 3 is already busy"
        );
        assert!(s.owner(4).is_none(), "nothing changes on error");
        assert_eq!(s.ranges_of(&s.myself.clone()), vec![(1, 3)]);
        assert_eq!(
            s.del_slots(&[3, 9]).unwrap_err(),
            "ERR Slot 9 is already unassigned"
        );
        s.del_slots(&[2]).unwrap();
        assert_eq!(s.ranges_of(&s.myself.clone()), vec![(1, 1), (3, 3)]);
        assert!(!s.is_ok());
    }

    #[test]
    fn setslot_rules() {
        let mut s = two();
        s.add_slots(&[10]).unwrap();
        let b = "b".repeat(40);
        assert_eq!(
            s.set_importing(10, b.as_bytes()).unwrap_err(),
            "ERR I'm already the owner of hash slot 10"
        );
        assert_eq!(
            s.set_migrating(11, b.as_bytes()).unwrap_err(),
            "ERR I'm not the owner of hash slot 11"
        );
        assert!(s
            .set_migrating(10, b"zz")
            .unwrap_err()
            .contains("I don't know about node zz"));
        s.set_migrating(10, b.as_bytes()).unwrap();
        assert_eq!(
            s.set_node(10, b.as_bytes(), 3).unwrap_err(),
            "ERR Can't assign hashslot 10 to a different node while I still hold keys for this hash slot."
        );
        s.set_node(10, b.as_bytes(), 0).unwrap();
        assert!(s.migrating.is_empty());
        assert_eq!(s.owner(10).map(|x| &**x), Some(b.as_str()));
        // Importing it back and taking it bumps our epoch past b's.
        s.nodes.get_mut(b.as_str()).unwrap().config_epoch = 5;
        s.set_importing(10, b.as_bytes()).unwrap();
        s.set_node(10, s.myself.clone().as_bytes(), 0).unwrap();
        assert!(s.importing.is_empty());
        assert_eq!(s.me().config_epoch, 6);
        assert_eq!(s.current_epoch, 6);
    }

    #[test]
    fn claims_with_greater_epochs_win() {
        let mut s = two();
        s.set_config_epoch(1).unwrap_err(); // knows b already
        s.add_slots(&[0, 1]).unwrap();
        s.me_mut().config_epoch = 2;
        let b = "b".repeat(40);
        let (c, stale) = s.apply_claim(&b, 1, &[(1, 2)]);
        assert!(c.view, "slot 2 was free");
        assert_eq!(
            stale,
            vec![s.myself.clone()],
            "slot 1 is ours at a greater epoch"
        );
        assert!(s.is_mine(1));
        let (_, stale) = s.apply_claim(&b, 3, &[(0, 1)]);
        assert!(stale.is_empty());
        assert_eq!(s.slot_count(&b), 3);
    }

    #[test]
    fn epoch_collisions_bump_the_smaller_id() {
        let mut s = two();
        assert!(
            !s.resolve_epoch_collision(&"b".repeat(40), 1),
            "different epochs"
        );
        assert!(s.resolve_epoch_collision(&"b".repeat(40), 0));
        assert_eq!(s.me().config_epoch, 1);
        let mut t = ClusterState::new(id('c'), "", 1, 2, 0);
        assert!(
            !t.resolve_epoch_collision(&"b".repeat(40), 0),
            "b is smaller: b bumps"
        );
    }

    #[test]
    fn bump_and_set_config_epoch() {
        let mut s = ClusterState::new(id('a'), "", 7000, 17000, 0);
        assert_eq!(
            s.set_config_epoch(-1).unwrap_err(),
            "ERR Invalid config epoch specified: -1"
        );
        s.set_config_epoch(3).unwrap();
        assert_eq!(
            s.set_config_epoch(4).unwrap_err(),
            "ERR Node config epoch is already non-zero"
        );
        assert!(!s.bump_epoch(), "already the greatest");
        s.current_epoch = 7;
        assert!(s.bump_epoch());
        assert_eq!(s.me().config_epoch, 8);
    }

    #[test]
    fn forget_bans_and_reset() {
        let mut s = two();
        s.set_owner(5, Some(id('b')));
        s.forget(b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 100)
            .unwrap();
        assert!(s.owner(5).is_none());
        assert!(!s.may_add(&"b".repeat(40), 200));
        assert!(s.may_add(&"b".repeat(40), 100 + FORGET_BAN_MS));
        assert!(s
            .forget(s.myself.clone().as_bytes(), 0)
            .unwrap_err()
            .contains("forget myself"));
        s.add_slots(&[1]).unwrap();
        s.set_config_epoch(4).unwrap();
        s.reset(true);
        assert_eq!(s.assigned_slots(), 0);
        assert_eq!(s.me().config_epoch, 0);
        assert_ne!(&*s.myself, &*id('a'));
    }

    #[test]
    fn nodes_conf_round_trips() {
        let mut s = two();
        s.add_slots(&(0..100).collect::<Vec<_>>()).unwrap();
        s.add_slots(&[200]).unwrap();
        s.set_owner(300, Some(id('b')));
        s.set_migrating(5, "b".repeat(40).as_bytes()).unwrap();
        s.set_importing(300, "b".repeat(40).as_bytes()).unwrap();
        s.current_epoch = 9;
        let text = s.to_conf();
        assert!(text.contains(" 0-99 200 [5->-bbbb"), "{text}");
        let t = ClusterState::from_conf(&text, 0).unwrap();
        assert_eq!(t.myself, s.myself);
        assert_eq!(t.ranges_of(&t.myself.clone()), vec![(0, 99), (200, 200)]);
        assert_eq!(t.migrating, s.migrating);
        assert_eq!(t.importing, s.importing);
        assert_eq!(t.current_epoch, 9);
        assert_eq!(t.to_conf(), text);
        assert!(ClusterState::from_conf("garbage\n", 0).is_err());
    }
}
