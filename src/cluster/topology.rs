//! Static cluster topology: which node serves which hash slots.
//!
//! Several shardstream nodes form a Redis Cluster from one file that every
//! node is given (`--cluster-config FILE`, or `cluster-config FILE` in the
//! config file). One node a line:
//!
//! ```text
//! # name  host       port  slots
//! a       127.0.0.1  7000  0-5460
//! b       127.0.0.1  7001  5461-10922
//! c       127.0.0.1  7002  10923-16383
//! ```
//!
//! Slots are comma-separated ranges (`0-100,200-300`) or single slots (`42`);
//! `#` starts a comment. Every slot must belong to exactly one node. A node
//! finds its own line by its listening port (and, when several lines share
//! the port, by its bind address).
//!
//! Node ids (CLUSTER MYID/NODES/SHARDS/SLOTS) are the SHA-1 of the node name
//! in 40 hex characters, so every node computes the same id for every other
//! node without talking to it. Config epochs are the line order (1, 2, ...).
//! The file seeds a node's cluster state at start ([`super::state_of_topology`]);
//! from then on the node is a cluster node like any other (slots can move,
//! the bus spreads changes), but nothing is saved: the file is read again at
//! the next start.

use std::path::Path;

use crate::error::CmdError;
use crate::route::slot::{Slot, SLOTS};

/// One node of the cluster, as the topology file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Name from the file (first column).
    pub name: String,
    /// 40 hex characters: SHA-1 of `name`.
    pub id: String,
    /// Host clients are redirected to, verbatim from the file.
    pub host: String,
    /// Client port.
    pub port: u16,
    /// Slot ranges served, inclusive, in file order.
    pub ranges: Vec<(u16, u16)>,
    /// Config epoch: the node's 1-based line order among nodes.
    pub epoch: u64,
}

impl ClusterNode {
    /// `host:port`, as MOVED redirects print it.
    pub fn endpoint(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Cluster bus port as Redis derives it: `port + 10000` (0 when it does not fit).
    pub fn cport(&self) -> u16 {
        self.port.checked_add(10000).unwrap_or(0)
    }

    /// Slot ranges sorted by first slot, adjacent ranges joined.
    pub fn sorted_ranges(&self) -> Vec<(u16, u16)> {
        let mut r = self.ranges.clone();
        r.sort_unstable();
        let mut out: Vec<(u16, u16)> = Vec::with_capacity(r.len());
        for (a, b) in r {
            match out.last_mut() {
                Some(last) if u32::from(last.1) + 1 == u32::from(a) => last.1 = b,
                _ => out.push((a, b)),
            }
        }
        out
    }
}

/// The whole cluster and which node is this one.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Nodes in file order.
    pub nodes: Vec<ClusterNode>,
    /// Index into `nodes` of the node serving each slot.
    owner: Vec<u16>,
    /// Index into `nodes` of this server.
    pub myself: usize,
}

/// Node id for a node name: SHA-1 of the name, 40 lowercase hex characters.
pub fn node_id(name: &str) -> String {
    super::sha1_hex(name)
}

/// Parse one slot range token: `a-b` or `a`, each in `0..16384`, `a <= b`.
fn parse_range(tok: &str) -> Result<(u16, u16), String> {
    let slot = |s: &str| -> Result<u16, String> {
        s.trim()
            .parse::<u16>()
            .ok()
            .filter(|&n| n < SLOTS)
            .ok_or_else(|| format!("'{s}' is not a slot (0-16383)"))
    };
    let (a, b) = match tok.split_once('-') {
        Some((a, b)) => (slot(a)?, slot(b)?),
        None => {
            let s = slot(tok)?;
            (s, s)
        }
    };
    if a > b {
        return Err(format!("slot range '{tok}' ends before it starts"));
    }
    Ok((a, b))
}

/// Parse the nodes of a topology file: one `name host port ranges` per line.
///
/// # Errors
/// A message naming the (1-based) line: missing fields, a bad port or slot
/// range, a duplicate name or address, a slot given twice; or naming the
/// first unassigned slots when some slot belongs to no node.
pub fn parse_nodes(text: &str) -> Result<(Vec<ClusterNode>, Vec<u16>), String> {
    const NONE: u16 = u16::MAX;
    let mut nodes: Vec<ClusterNode> = Vec::new();
    let mut lines_of: Vec<usize> = Vec::new();
    let mut owner = vec![NONE; usize::from(SLOTS)];
    for (n, raw) in text.lines().enumerate() {
        let lineno = n + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |msg: String| format!("line {lineno}: {msg}");
        let mut fields = line.split_whitespace();
        let (Some(name), Some(host), Some(port)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(err(
                "expected '<node-name> <host> <port> <slot-range>[,<slot-range>...]'".into(),
            ));
        };
        let slots: Vec<&str> = fields.collect();
        if slots.is_empty() {
            return Err(err(format!("node '{name}' has no slot ranges")));
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| err(format!("'{port}' is not a port (1-65535)")))?;
        if let Some(i) = nodes.iter().position(|o| o.name == name) {
            return Err(err(format!(
                "node name '{name}' is already used on line {}",
                lines_of[i]
            )));
        }
        if let Some(i) = nodes.iter().position(|o| o.host == host && o.port == port) {
            return Err(err(format!(
                "address {host}:{port} is already used on line {}",
                lines_of[i]
            )));
        }
        let idx = u16::try_from(nodes.len())
            .ok()
            .filter(|&i| i != NONE)
            .ok_or_else(|| err("too many nodes".into()))?;
        let mut ranges = Vec::new();
        for tok in slots.iter().flat_map(|s| s.split(',')) {
            if tok.is_empty() {
                continue;
            }
            let (a, b) = parse_range(tok).map_err(err)?;
            for s in a..=b {
                let o = &mut owner[usize::from(s)];
                if *o != NONE {
                    let other = usize::from(*o);
                    let (oname, oline) = (
                        nodes.get(other).map_or(name, |x| x.name.as_str()),
                        lines_of.get(other).copied().unwrap_or(lineno),
                    );
                    return Err(err(format!(
                        "slot {s} is already assigned to node '{oname}' (line {oline})"
                    )));
                }
                *o = idx;
            }
            ranges.push((a, b));
        }
        nodes.push(ClusterNode {
            name: name.to_string(),
            id: node_id(name),
            host: host.to_string(),
            port,
            ranges,
            epoch: u64::from(idx) + 1,
        });
        lines_of.push(lineno);
    }
    if nodes.is_empty() {
        return Err("no nodes defined".into());
    }
    if let Some(first) = owner.iter().position(|&o| o == NONE) {
        let last = owner[first..]
            .iter()
            .position(|&o| o != NONE)
            .map_or(usize::from(SLOTS) - 1, |n| first + n - 1);
        let missing = owner.iter().filter(|&&o| o == NONE).count();
        return Err(format!(
            "{missing} slots are not assigned to any node (first unassigned: {first}-{last})"
        ));
    }
    Ok((nodes, owner))
}

impl Topology {
    /// Parse `text` and find this server's node by `port` (and `bind` when
    /// several lines share the port).
    ///
    /// # Errors
    /// Any [`parse_nodes`] error; no line or several lines for this server.
    pub fn from_text(text: &str, bind: &str, port: u16) -> Result<Topology, String> {
        let (nodes, owner) = parse_nodes(text)?;
        if port == 0 {
            return Err("a cluster node needs a fixed --port (not 0)".into());
        }
        let on_port: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].port == port)
            .collect();
        let mine: Vec<usize> = match on_port.len() {
            0 | 1 => on_port,
            _ => on_port
                .into_iter()
                .filter(|&i| nodes[i].host == bind)
                .collect(),
        };
        match mine.as_slice() {
            [me] => Ok(Topology {
                nodes,
                owner,
                myself: *me,
            }),
            [] => Err(format!(
                "no node is listed with port {port} (and host {bind}): cannot tell which node this is"
            )),
            _ => Err(format!(
                "several nodes are listed with {bind}:{port}: cannot tell which node this is"
            )),
        }
    }

    /// Read and parse a topology file (see [`Topology::from_text`]); errors name the file.
    pub fn load(path: &Path, bind: &str, port: u16) -> Result<Topology, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read cluster config {}: {e}", path.display()))?;
        Topology::from_text(&text, bind, port)
            .map_err(|e| format!("cluster config {}: {e}", path.display()))
    }

    /// This server's node.
    pub fn me(&self) -> &ClusterNode {
        &self.nodes[self.myself]
    }

    /// Index into `nodes` of the node serving `slot`.
    fn owner_index(&self, slot: Slot) -> usize {
        self.owner
            .get(usize::from(slot.0))
            .map_or(self.myself, |&o| usize::from(o))
    }

    /// The node serving `slot`.
    pub fn owner(&self, slot: Slot) -> &ClusterNode {
        &self.nodes[self.owner_index(slot)]
    }

    /// Whether this server serves `slot`.
    pub fn is_local(&self, slot: Slot) -> bool {
        self.owner_index(slot) == self.myself
    }

    /// Number of slots this server serves.
    pub fn local_slots(&self) -> usize {
        self.owner
            .iter()
            .filter(|&&o| usize::from(o) == self.myself)
            .count()
    }

    /// Highest config epoch (CLUSTER INFO `cluster_current_epoch`).
    pub fn current_epoch(&self) -> u64 {
        self.nodes.iter().map(|n| n.epoch).max().unwrap_or(0)
    }

    /// Every (first, last, node) range of the cluster, by first slot.
    pub fn ranges(&self) -> Vec<(u16, u16, &ClusterNode)> {
        let mut out: Vec<(u16, u16, &ClusterNode)> = self
            .nodes
            .iter()
            .flat_map(|n| n.sorted_ranges().into_iter().map(move |(a, b)| (a, b, n)))
            .collect();
        out.sort_by_key(|(a, _, _)| *a);
        out
    }

    /// Decide whether this node serves a command whose keys hash to `slots`
    /// (Redis's `getNodeByQuery`): keys on two slots → `CROSSSLOT` (unless
    /// `allow_local_multislot` and every slot is local); one slot served
    /// elsewhere → `MOVED <slot> <host>:<port>`; no keys → served here.
    ///
    /// # Errors
    /// [`CmdError::CrossSlot`], [`CmdError::Moved`].
    pub fn check(
        &self,
        slots: impl IntoIterator<Item = Slot>,
        allow_local_multislot: bool,
    ) -> Result<(), CmdError> {
        let mut first: Option<Slot> = None;
        let mut multi = false;
        let mut all_local = true;
        for s in slots {
            all_local &= self.is_local(s);
            match first {
                None => first = Some(s),
                Some(f) if f != s => multi = true,
                Some(_) => {}
            }
        }
        let Some(slot) = first else {
            return Ok(());
        };
        if multi {
            return if allow_local_multislot && all_local {
                Ok(())
            } else {
                Err(CmdError::CrossSlot)
            };
        }
        if all_local {
            Ok(())
        } else {
            Err(CmdError::Moved {
                slot: slot.0,
                addr: self.owner(slot).endpoint(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE: &str = "# three nodes\n\
        a 127.0.0.1 7000 0-5460\n\
        b 127.0.0.1 7001 5461-10922   # middle\n\
        \n\
        c 127.0.0.1 7002 10923-16000,16001-16383\n";

    #[test]
    fn parses_and_finds_myself() {
        let t = Topology::from_text(THREE, "127.0.0.1", 7001).unwrap();
        assert_eq!(t.me().name, "b");
        assert_eq!(t.me().epoch, 2);
        assert_eq!(t.current_epoch(), 3);
        assert_eq!(t.local_slots(), 10922 - 5461 + 1);
        assert!(t.is_local(Slot(5461)));
        assert!(!t.is_local(Slot(5460)));
        assert_eq!(t.owner(Slot(16383)).name, "c");
        assert_eq!(
            t.nodes[2].sorted_ranges(),
            vec![(10923, 16383)],
            "adjacent ranges join"
        );
        assert_eq!(t.ranges().len(), 3);
    }

    #[test]
    fn ids_are_sha1_of_the_name() {
        // SHA-1("abc") is the FIPS 180 test vector.
        assert_eq!(node_id("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(node_id("a").len(), 40);
    }

    #[test]
    fn check_redirects() {
        let t = Topology::from_text(THREE, "127.0.0.1", 7000).unwrap();
        assert_eq!(t.check([], false), Ok(()));
        assert_eq!(t.check([Slot(1), Slot(1)], false), Ok(()));
        assert_eq!(
            t.check([Slot(6000)], false),
            Err(CmdError::Moved {
                slot: 6000,
                addr: "127.0.0.1:7001".into()
            })
        );
        assert_eq!(t.check([Slot(1), Slot(2)], false), Err(CmdError::CrossSlot));
        assert_eq!(t.check([Slot(1), Slot(2)], true), Ok(()));
        assert_eq!(
            t.check([Slot(1), Slot(6000)], true),
            Err(CmdError::CrossSlot)
        );
        assert_eq!(
            t.check([Slot(6000), Slot(6001)], true),
            Err(CmdError::CrossSlot)
        );
    }

    #[test]
    fn refuses_bad_files_naming_the_line() {
        let bad = |text: &str| Topology::from_text(text, "127.0.0.1", 7000).unwrap_err();
        assert!(bad("a 127.0.0.1 7000\n").starts_with("line 1:"));
        assert!(bad("a 127.0.0.1 x 0-16383\n").contains("'x' is not a port"));
        assert!(bad("a 127.0.0.1 7000 0-16384\n").contains("'16384' is not a slot"));
        assert!(bad("a 127.0.0.1 7000 9-3\n").contains("ends before"));
        let e = bad("a 127.0.0.1 7000 0-9000\n\nb 127.0.0.1 7001 8000-16383\n");
        assert_eq!(
            e,
            "line 3: slot 8000 is already assigned to node 'a' (line 1)"
        );
        let e = bad("a 127.0.0.1 7000 0-9000\nb 127.0.0.1 7001 9002-16383\n");
        assert!(
            e.contains("1 slots are not assigned") && e.contains("9001-9001"),
            "{e}"
        );
        assert!(bad("a h 7000 0-100\na h 7001 101-16383\n").contains("line 2: node name 'a'"));
        assert!(bad("# nothing\n").contains("no nodes"));
        assert!(bad("a 127.0.0.1 7001 0-16383\n").contains("no node is listed with port 7000"));
    }

    #[test]
    fn port_ties_are_broken_by_bind_address() {
        let text = "a 10.0.0.1 7000 0-8000\nb 10.0.0.2 7000 8001-16383\n";
        let t = Topology::from_text(text, "10.0.0.2", 7000).unwrap();
        assert_eq!(t.me().name, "b");
        assert!(Topology::from_text(text, "0.0.0.0", 7000).is_err());
        assert!(Topology::from_text(text, "10.0.0.2", 0).is_err());
    }
}
