//! Where commands go: one server, or a Redis Cluster routed by hash slot.
//!
//! Each worker thread owns a [`Router`]: synchronous `redis` connections, one
//! per node it has talked to. In cluster mode the slot map comes from
//! `CLUSTER SLOTS` and is refreshed when a node answers `MOVED`.

use std::collections::HashMap;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError, RedisResult, Value};

/// Number of hash slots in Redis Cluster.
pub const SLOTS: usize = 16384;

/// Hash slot of `key`: CRC16/XMODEM of the key, or of its first non-empty
/// `{tag}`, mod 16384.
///
/// # Source
/// `keyHashSlot`, redis/src/cluster.c (7.x).
pub fn slot_of(key: &[u8]) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(hashed) & 0x3FFF
}

fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = key.get(open + 1..)?;
    let len = rest.iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &rest[..len])
}

/// A node address, `host:port`.
pub type NodeAddr = (String, u16);

/// Which node serves each slot.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The server given on the command line; credentials come from here.
    pub seed: ConnectionInfo,
    /// Distinct nodes; `slot_node` indexes into this.
    pub nodes: Vec<NodeAddr>,
    slot_node: Vec<u16>,
}

impl Topology {
    /// Every slot on the seed server (a standalone server).
    pub fn single(url: &str) -> RedisResult<Topology> {
        let seed = url.into_connection_info()?;
        let addr = node_addr(&seed);
        Ok(Topology {
            seed,
            nodes: vec![addr],
            slot_node: vec![0; SLOTS],
        })
    }

    /// The topology of the server at `url`: asked with `CLUSTER SLOTS` when
    /// `cluster`, else every slot on it. The error says which step failed
    /// (the caller names the target).
    pub fn of(url: &str, cluster: bool) -> Result<Topology, String> {
        if !cluster {
            return Topology::single(url).map_err(|e| e.to_string());
        }
        Topology::discover(url).map_err(|e| match e.code() {
            Some(_) => format!("--cluster needs a Redis Cluster node; CLUSTER SLOTS answered: {e}"),
            None => e.to_string(),
        })
    }

    /// Ask the seed (or any known node) for `CLUSTER SLOTS`.
    pub fn discover(url: &str) -> RedisResult<Topology> {
        let seed = url.into_connection_info()?;
        if matches!(seed.addr(), ConnectionAddr::Unix(_)) {
            return Err(bad(
                "--cluster needs a TCP address (cluster nodes are reached by host:port)",
            ));
        }
        let mut con = redis::Client::open(seed.clone())?.get_connection()?;
        let reply: Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con)?;
        Self::from_cluster_slots(seed, &reply)
    }

    /// Build from a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id], replicas...], ...]`.
    /// An empty host means "the address you reached me at".
    pub fn from_cluster_slots(seed: ConnectionInfo, reply: &Value) -> RedisResult<Topology> {
        let seed_addr = node_addr(&seed);
        let mut nodes: Vec<NodeAddr> = Vec::new();
        let mut slot_node = vec![u16::MAX; SLOTS];
        let Value::Array(ranges) = reply else {
            return Err(bad("CLUSTER SLOTS: not an array"));
        };
        for range in ranges {
            let Value::Array(parts) = range else {
                return Err(bad("CLUSTER SLOTS: range not an array"));
            };
            let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
                (parts.first(), parts.get(1), parts.get(2))
            else {
                return Err(bad("CLUSTER SLOTS: bad range"));
            };
            let host = match master.first() {
                Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
                Some(Value::SimpleString(h)) => h.clone(),
                _ => String::new(),
            };
            let host = if host.is_empty() || host == "?" {
                seed_addr.0.clone()
            } else {
                host
            };
            let Some(Value::Int(port)) = master.get(1) else {
                return Err(bad("CLUSTER SLOTS: bad port"));
            };
            let addr = (host, *port as u16);
            let idx = match nodes.iter().position(|n| *n == addr) {
                Some(i) => i,
                None => {
                    nodes.push(addr);
                    nodes.len() - 1
                }
            };
            for s in (*start).max(0)..=(*end).min(SLOTS as i64 - 1) {
                slot_node[s as usize] = idx as u16;
            }
        }
        if nodes.is_empty() {
            return Err(bad("CLUSTER SLOTS: no slots served"));
        }
        // Unserved slots go to the first node: it will answer MOVED or CLUSTERDOWN.
        for s in slot_node.iter_mut() {
            if *s == u16::MAX {
                *s = 0;
            }
        }
        Ok(Topology {
            seed,
            nodes,
            slot_node,
        })
    }

    /// Index into `nodes` of the node serving `slot`.
    pub fn node_of_slot(&self, slot: u16) -> usize {
        self.slot_node.get(slot as usize).copied().unwrap_or(0) as usize
    }

    /// Connection info for node `idx` (seed credentials, that node's address).
    /// A standalone server reached over a Unix socket is the seed itself.
    pub fn info_for(&self, idx: usize) -> ConnectionInfo {
        if matches!(self.seed.addr(), ConnectionAddr::Unix(_)) {
            return self.seed.clone();
        }
        let (host, port) = self
            .nodes
            .get(idx)
            .cloned()
            .unwrap_or_else(|| node_addr(&self.seed));
        self.seed.clone().set_addr(ConnectionAddr::Tcp(host, port))
    }
}

/// The node key of `info`'s address: `(host, port)`, or `(socket path, 0)`
/// for a Unix socket.
fn node_addr(info: &ConnectionInfo) -> NodeAddr {
    match info.addr() {
        ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
        ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
        ConnectionAddr::Unix(path) => (path.to_string_lossy().into_owned(), 0),
        _ => ("127.0.0.1".into(), 6379),
    }
}

fn bad(msg: &'static str) -> RedisError {
    RedisError::from((redis::ErrorKind::Client, msg))
}

/// A worker thread's connections: one per node, opened on first use.
pub struct Router {
    pub topo: Topology,
    cluster: bool,
    url: String,
    conns: HashMap<NodeAddr, redis::Connection>,
    /// Consumers' read connections (see [`crate::reply::RawConn`]).
    raws: HashMap<NodeAddr, crate::reply::RawConn>,
}

impl Router {
    /// Route with `topo`; `cluster` enables MOVED handling by rediscovery.
    pub fn new(url: &str, topo: Topology, cluster: bool) -> Router {
        Router {
            topo,
            cluster,
            url: url.to_string(),
            conns: HashMap::new(),
            raws: HashMap::new(),
        }
    }

    /// The address of node `idx` (the seed's when out of range).
    fn addr_of(&self, idx: usize) -> NodeAddr {
        self.topo
            .nodes
            .get(idx)
            .cloned()
            .unwrap_or_else(|| node_addr(&self.topo.seed))
    }

    /// The connection to node `idx`, connecting if needed.
    pub fn conn(&mut self, idx: usize) -> RedisResult<&mut redis::Connection> {
        let addr = self.addr_of(idx);
        if !self.conns.contains_key(&addr) {
            let con = redis::Client::open(self.topo.info_for(idx))?.get_connection()?;
            self.conns.insert(addr.clone(), con);
        }
        self.conns
            .get_mut(&addr)
            .ok_or_else(|| bad("connection vanished"))
    }

    /// The in-place-decoding connection to node `idx` (consumers' reads, see
    /// [`crate::reply::RawConn`]), connecting if needed.
    pub fn raw(&mut self, idx: usize) -> RedisResult<&mut crate::reply::RawConn> {
        let addr = self.addr_of(idx);
        if !self.raws.contains_key(&addr) {
            let con = crate::reply::RawConn::open(&self.topo.info_for(idx))?;
            self.raws.insert(addr.clone(), con);
        }
        self.raws
            .get_mut(&addr)
            .ok_or_else(|| bad("connection vanished"))
    }

    /// A PING on each node's in-place connection (the one workers read
    /// on): an unreachable node, a wrong password or database is a setup
    /// error with its reason, before the run starts.
    pub fn check_nodes(&mut self) -> Result<(), String> {
        let ping = redis::cmd("PING").get_packed_command();
        for node in 0..self.topo.nodes.len() {
            let replies = self
                .raw(node)
                .and_then(|c| c.query(&ping, 1).map(|r| r.get(0)?.to_error()));
            match replies {
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }

    /// Whether MOVED is followed (the target is a cluster).
    pub fn cluster(&self) -> bool {
        self.cluster
    }

    /// Forget node `idx`'s connection (after an IO error) so the next use reconnects.
    pub fn drop_conn(&mut self, idx: usize) {
        if let Some(addr) = self.topo.nodes.get(idx) {
            self.conns.remove(addr);
            self.raws.remove(addr);
        }
    }

    /// React to an error: in cluster mode, rediscover on MOVED or ASK (a slot
    /// in migration is retried until it settles) and on `UNBLOCKED` (a blocked
    /// read whose key was migrated away), returning true: retry. Drop the
    /// connection on IO errors.
    pub fn handle_error(&mut self, node: usize, err: &RedisError) -> bool {
        let moved_away = err.code() == Some("UNBLOCKED");
        if (err.redirect_node().is_some() || moved_away) && self.cluster {
            if let Ok(t) = Topology::discover(&self.url) {
                self.topo = t;
            }
            return true;
        }
        if err.is_io_error() || err.is_connection_dropped() {
            self.drop_conn(node);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_known_vectors() {
        assert_eq!(slot_of(b"123456789"), 0x31C3);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_eq!(slot_of(b"foo{}{bar}"), slot_of(b"foo{}{bar}"));
        assert_ne!(slot_of(b"foo{}{bar}"), slot_of(b"bar"));
    }

    #[test]
    fn cluster_slots_parse() {
        let seed = "redis://10.0.0.1:7000/".into_connection_info().unwrap();
        let node = |h: &str, p| {
            Value::Array(vec![
                Value::BulkString(h.as_bytes().to_vec()),
                Value::Int(p),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(8191), node("", 7000)]),
            Value::Array(vec![
                Value::Int(8192),
                Value::Int(16383),
                node("10.0.0.2", 7001),
                node("10.0.0.3", 7002),
            ]),
        ]);
        let t = Topology::from_cluster_slots(seed, &reply).unwrap();
        assert_eq!(
            t.nodes,
            vec![("10.0.0.1".into(), 7000), ("10.0.0.2".into(), 7001)]
        );
        assert_eq!(t.node_of_slot(0), 0);
        assert_eq!(t.node_of_slot(8191), 0);
        assert_eq!(t.node_of_slot(8192), 1);
        assert_eq!(t.node_of_slot(16383), 1);
    }
}
