//! The cluster bus: how nodes tell each other what they know.
//!
//! One thread per node, asleep in `poll` between events, listening on the
//! bus port (`cluster-port`, default `port + 10000`). The behaviour is Redis
//! Cluster's (redis.io, "Redis cluster specification"); the wire format is
//! shardstream's own, so a shardstream node cannot join a cluster of
//! redis-server nodes.
//!
//! * Every node keeps one outgoing link to every other node it knows and
//!   sends it a PING every [`PING_INTERVAL_MS`]; the other side answers with
//!   a PONG on the same link.
//! * Each PING/PONG carries the sender's id, address, current epoch, config
//!   epoch and the slots it serves, so a slot's owner converges on the node
//!   claiming it with the greatest config epoch (a node seeing a stale claim
//!   answers with an UPDATE naming the owner), and two masters that share a
//!   config epoch are told apart (the smaller id takes a new one).
//! * Each PING/PONG also carries a gossip section: the other nodes the
//!   sender knows. A node learns of a node it does not know this way and
//!   starts a handshake with it; CLUSTER MEET starts one by hand. A
//!   handshake node's id is a placeholder until its first PONG names it.
//! * A node that has not answered a PING for `cluster-node-timeout` is
//!   flagged `fail?`. There is no failover (no replicas), so that flag is
//!   all a failure does.
//! * Any change to the configuration is sent at once to every node (a PONG
//!   broadcast), not only at the next PING.
//!
//! Frames: a 4-byte big-endian length, then a JSON object (see [`Msg`]).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use serde_json::{json, Value};

use super::state::{Changed, ClusterState, Node, NodeId};
use super::{Cluster, LinkInfo};
use crate::server::Shared;

/// How often each link is sent a PING, ms.
pub const PING_INTERVAL_MS: u64 = 500;
/// How often the bus looks at its links and timers, ms.
const CRON_MS: u64 = 100;
/// Largest frame accepted, bytes: a longer one closes the link. A PING
/// about a thousand nodes is about 100 KiB.
const MAX_FRAME: usize = 1 << 20;
/// Handshakes one message may start: a node learns of the others from later
/// messages, and a forged message cannot start thousands at once.
const MAX_NEW_PER_MESSAGE: usize = 16;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);

/// What one bus message says: the sender's view of itself, and gossip.
#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    /// `meet`, `ping`, `pong` or `update`.
    pub kind: String,
    pub sender: String,
    /// The sender's address as it knows it (empty: use the link's peer address).
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    /// Slots the sender serves (for `update`: the slots of `update_node`).
    pub slots: Vec<(u16, u16)>,
    /// Other nodes the sender knows: (id, ip, port, cport).
    pub gossip: Vec<(String, String, u16, u16)>,
    /// `update`: the node whose claim wins, and its config epoch.
    pub update_node: String,
    pub update_epoch: u64,
}

impl Msg {
    /// A PING/PONG/MEET from this node, as the state stands.
    pub fn from_state(kind: &str, st: &ClusterState) -> Msg {
        let me = st.me();
        Msg {
            kind: kind.into(),
            sender: me.id.to_string(),
            ip: me.ip.clone(),
            port: me.port,
            cport: me.cport,
            current_epoch: st.current_epoch,
            config_epoch: me.config_epoch,
            slots: st.ranges_of(&me.id),
            gossip: st
                .nodes
                .values()
                .filter(|n| !n.myself && !n.handshake && !n.ip.is_empty())
                .map(|n| (n.id.to_string(), n.ip.clone(), n.port, n.cport))
                .collect(),
            update_node: String::new(),
            update_epoch: 0,
        }
    }

    /// An UPDATE telling the receiver that `owner` serves its slots at its epoch.
    pub fn update(st: &ClusterState, owner: &Node) -> Msg {
        let mut m = Msg::from_state("update", st);
        m.gossip.clear();
        m.update_node = owner.id.to_string();
        m.update_epoch = owner.config_epoch;
        m.slots = st.ranges_of(&owner.id);
        m
    }

    /// The frame: length, then JSON.
    pub fn encode(&self) -> Vec<u8> {
        let v = json!({
            "type": self.kind,
            "sender": self.sender,
            "ip": self.ip,
            "port": self.port,
            "cport": self.cport,
            "current_epoch": self.current_epoch,
            "config_epoch": self.config_epoch,
            "slots": self.slots.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>(),
            "gossip": self.gossip.iter().map(|(id, ip, p, c)| json!([id, ip, p, c])).collect::<Vec<_>>(),
            "update_node": self.update_node,
            "update_epoch": self.update_epoch,
        });
        let body = v.to_string().into_bytes();
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    /// Parse a frame's JSON body; `None` when it is not a bus message.
    pub fn decode(body: &[u8]) -> Option<Msg> {
        let v: Value = serde_json::from_slice(body).ok()?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let n = |k: &str| v.get(k).and_then(Value::as_u64);
        let port = |x: Option<u64>| x.and_then(|p| u16::try_from(p).ok());
        let pair = |x: &Value| -> Option<(u64, u64)> {
            let a = x.as_array()?;
            Some((a.first()?.as_u64()?, a.get(1)?.as_u64()?))
        };
        let slots = v
            .get("slots")?
            .as_array()?
            .iter()
            .map(|r| {
                let (a, b) = pair(r)?;
                let (a, b) = (u16::try_from(a).ok()?, u16::try_from(b).ok()?);
                (a <= b && b < crate::route::slot::SLOTS).then_some((a, b))
            })
            .collect::<Option<Vec<_>>>()?;
        let gossip = v
            .get("gossip")?
            .as_array()?
            .iter()
            .filter_map(|g| {
                let g = g.as_array()?;
                Some((
                    g.first()?.as_str()?.to_string(),
                    g.get(1)?.as_str()?.to_string(),
                    port(g.get(2)?.as_u64())?,
                    port(g.get(3)?.as_u64())?,
                ))
            })
            .collect();
        Some(Msg {
            kind: s("type")?,
            sender: s("sender")?,
            ip: s("ip")?,
            port: port(n("port"))?,
            cport: port(n("cport"))?,
            current_epoch: n("current_epoch")?,
            config_epoch: n("config_epoch")?,
            slots,
            gossip,
            update_node: s("update_node").unwrap_or_default(),
            update_epoch: n("update_epoch").unwrap_or(0),
        })
    }
}

/// Whether `id` looks like a node id (40 hex characters).
fn valid_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One bus connection.
struct Link {
    stream: TcpStream,
    /// Outgoing: the node it was opened to (a placeholder id while in handshake).
    node: Option<NodeId>,
    outbound: bool,
    /// Outgoing: the connection is established.
    connected: bool,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    created_ms: u64,
    /// When the last PING on it was sent, ms.
    last_ping_ms: u64,
}

impl Link {
    /// Queue a frame and write what the socket takes now.
    fn send(&mut self, frame: &[u8]) -> std::io::Result<()> {
        self.wbuf.extend_from_slice(frame);
        self.flush()
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.outbound && !self.connected {
            return Ok(());
        }
        while !self.wbuf.is_empty() {
            match self.stream.write(&self.wbuf) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.wbuf.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Read what arrived; `Err` when the peer closed or failed.
    fn fill(&mut self) -> std::io::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.rbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next whole frame's body, if one has arrived.
    ///
    /// # Errors
    /// A frame longer than [`MAX_FRAME`].
    fn next_frame(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let Some(len) = self.rbuf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if len > MAX_FRAME {
            return Err(ErrorKind::InvalidData.into());
        }
        if self.rbuf.len() < 4 + len {
            return Ok(None);
        }
        let body = self.rbuf[4..4 + len].to_vec();
        self.rbuf.drain(..4 + len);
        Ok(Some(body))
    }
}

/// Bind the bus port and start the bus thread.
///
/// # Errors
/// The port cannot be bound, or the thread cannot start.
pub fn spawn(shared: Arc<Shared>, addr: SocketAddr) -> std::io::Result<JoinHandle<()>> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(std_listener);
    let Some(cluster) = shared.cluster.clone() else {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "the cluster bus runs only on a cluster node",
        ));
    };
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    cluster.set_bus_waker(waker);
    std::thread::Builder::new()
        .name("cluster-bus".into())
        .spawn(move || {
            let mut bus = Bus {
                poll,
                listener,
                links: HashMap::new(),
                next_token: 2,
                shared,
                cluster,
                last_cron_ms: 0,
                accept_pending: false,
            };
            bus.run();
        })
}

struct Bus {
    poll: Poll,
    listener: TcpListener,
    links: HashMap<Token, Link>,
    next_token: usize,
    shared: Arc<Shared>,
    cluster: Arc<Cluster>,
    last_cron_ms: u64,
    /// An accept failed (not for lack of connections): retry on the cron.
    accept_pending: bool,
}

fn now_ms() -> u64 {
    crate::shard::now_ms()
}

impl Bus {
    fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    fn run(&mut self) {
        if let Err(e) =
            self.poll
                .registry()
                .register(&mut self.listener, LISTENER, Interest::READABLE)
        {
            log::error!("cluster bus: cannot poll the listener: {e}");
            return;
        }
        let mut events = Events::with_capacity(256);
        while !self.shared.shutdown.load(Ordering::SeqCst) {
            if let Err(e) = self
                .poll
                .poll(&mut events, Some(Duration::from_millis(CRON_MS)))
            {
                if e.kind() != ErrorKind::Interrupted {
                    log::error!("cluster bus: poll failed: {e}");
                    return;
                }
            }
            let mut broadcast = false;
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => broadcast = true,
                    t => self.ready(t, ev.is_writable()),
                }
            }
            let now = now_ms();
            if broadcast {
                self.broadcast("pong");
            }
            if now.saturating_sub(self.last_cron_ms) >= CRON_MS {
                self.last_cron_ms = now;
                if self.accept_pending {
                    self.accept();
                }
                self.cron(now);
            }
        }
    }

    fn register(&mut self, mut link: Link) {
        let token = Token(self.next_token);
        self.next_token += 1;
        if self
            .poll
            .registry()
            .register(
                &mut link.stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_ok()
        {
            self.links.insert(token, link);
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    self.register(Link {
                        stream,
                        node: None,
                        outbound: false,
                        connected: true,
                        rbuf: Vec::new(),
                        wbuf: Vec::new(),
                        created_ms: now_ms(),
                        last_ping_ms: 0,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.accept_pending = false;
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, say: connections stay queued and
                    // no new readiness event will come for them, so the
                    // cron tries again until the queue is drained.
                    if !self.accept_pending {
                        log::warn!("cluster bus: accept failed: {e}");
                    }
                    self.accept_pending = true;
                    return;
                }
            }
        }
    }

    /// Close a link; an outgoing one is opened again by the next cron.
    fn close(&mut self, token: Token) {
        if let Some(mut link) = self.links.remove(&token) {
            let _ = self.poll.registry().deregister(&mut link.stream);
            if let (true, Some(id)) = (link.outbound, &link.node) {
                let mut st = self.cluster().lock();
                if let Some(n) = st.nodes.get_mut(id) {
                    n.link_up = false;
                }
            }
        }
    }

    /// A link is readable or writable.
    fn ready(&mut self, token: Token, writable: bool) {
        let Some(link) = self.links.get_mut(&token) else {
            return;
        };
        if link.outbound && !link.connected && writable {
            match link.stream.take_error() {
                Ok(None) if link.stream.peer_addr().is_ok() => {
                    link.connected = true;
                    if let Some(id) = link.node.clone() {
                        let mut st = self.cluster().lock();
                        if let Some(n) = st.nodes.get_mut(&id) {
                            n.link_up = true;
                        }
                    }
                }
                Ok(None) => return,
                _ => return self.close(token),
            }
        }
        let Some(link) = self.links.get_mut(&token) else {
            return;
        };
        if link.flush().is_err() || link.fill().is_err() {
            // Frames that arrived before the close are still handled.
            self.drain_frames(token);
            return self.close(token);
        }
        self.drain_frames(token);
    }

    fn drain_frames(&mut self, token: Token) {
        loop {
            let Some(link) = self.links.get_mut(&token) else {
                return;
            };
            match link.next_frame() {
                Ok(Some(body)) => match Msg::decode(&body) {
                    Some(m) if valid_id(&m.sender) => self.handle(token, m),
                    _ => return self.close(token),
                },
                Ok(None) => return,
                Err(_) => return self.close(token),
            }
        }
    }

    /// Send a frame on a link; a failed write closes it.
    fn send(&mut self, token: Token, msg: &Msg) {
        let frame = msg.encode();
        let failed = match self.links.get_mut(&token) {
            Some(link) => link.send(&frame).is_err(),
            None => false,
        };
        if failed {
            self.close(token);
        } else {
            self.cluster().messages.sent(&msg.kind);
        }
    }

    /// Handle one message that arrived on `token`.
    fn handle(&mut self, token: Token, m: Msg) {
        let cluster = self.cluster.clone();
        cluster.messages.received(&m.kind);
        let now = now_ms();
        let Some(link) = self.links.get(&token) else {
            return;
        };
        let peer_ip = link.stream.peer_addr().map(|a| a.ip().to_string()).ok();
        let local_ip = link.stream.local_addr().map(|a| a.ip().to_string()).ok();
        let link_node = link.node.clone();
        let outbound = link.outbound;
        let mut replies: Vec<Msg> = Vec::new();
        let mut rename: Option<NodeId> = None;
        {
            let mut st = cluster.lock();
            let mut changed = Changed::NONE;
            let me = st.myself.clone();
            // A node learns its own address from the first node that talks to it.
            if cluster.learn_ip && (m.kind == "meet" || st.me().ip.is_empty()) {
                if let Some(ip) = &local_ip {
                    if st.me().ip != *ip {
                        if let Some(n) = st.nodes.get_mut(&me) {
                            n.ip = ip.clone();
                        }
                        changed.merge(Changed::ALL);
                    }
                }
            }
            let sender_ip = if m.ip.is_empty() {
                peer_ip.clone().unwrap_or_default()
            } else {
                m.ip.clone()
            };
            let sender: NodeId = Arc::from(m.sender.as_str());
            // A handshake answered: the placeholder takes the sender's real id.
            if outbound && m.kind == "pong" {
                if let Some(hid) = &link_node {
                    let placeholder = st.nodes.get(hid).is_some_and(|n| n.handshake);
                    if let Some(mut node) = placeholder.then(|| st.nodes.remove(hid)).flatten() {
                        if sender != me
                            && !st.nodes.contains_key(&sender)
                            && st.may_add(&sender, now)
                        {
                            node.id = sender.clone();
                            node.handshake = false;
                            node.meet = false;
                            node.link_up = true;
                            st.nodes.insert(sender.clone(), node);
                            rename = Some(sender.clone());
                        }
                        changed.merge(Changed::ALL);
                    }
                }
            }
            if m.kind == "meet"
                && sender != me
                && !st.nodes.contains_key(&sender)
                && st.may_add(&sender, now)
            {
                let mut n = Node::new(sender.clone(), &sender_ip, m.port, m.cport, now);
                n.config_epoch = m.config_epoch;
                st.nodes.insert(sender.clone(), n);
                changed.merge(Changed::ALL);
            }
            let known = sender != me && st.nodes.get(&sender).is_some_and(|n| !n.handshake);
            if known {
                if let Some(n) = st.nodes.get_mut(&sender) {
                    if !sender_ip.is_empty()
                        && (n.ip != sender_ip || n.port != m.port || n.cport != m.cport)
                    {
                        n.ip = sender_ip.clone();
                        n.port = m.port;
                        n.cport = m.cport;
                        changed.merge(Changed::LOCAL);
                    }
                    if m.kind == "pong" {
                        n.pong_recv_ms = now;
                        n.ping_sent_ms = 0;
                        n.pfail = false;
                        if outbound {
                            n.link_up = true;
                        }
                    }
                }
                if m.current_epoch > st.current_epoch {
                    st.current_epoch = m.current_epoch;
                    changed.config = true;
                }
                if m.kind == "update" {
                    let winner: NodeId = Arc::from(m.update_node.as_str());
                    let newer = st
                        .nodes
                        .get(&winner)
                        .is_some_and(|n| m.update_epoch > n.config_epoch);
                    if newer && winner != me {
                        let (c, _) = st.apply_claim(&winner, m.update_epoch, &m.slots);
                        changed.merge(c);
                    }
                } else {
                    let (c, stale) = st.apply_claim(&sender, m.config_epoch, &m.slots);
                    changed.merge(c);
                    for owner in stale {
                        if let Some(o) = st.nodes.get(&owner) {
                            replies.push(Msg::update(&st, o));
                        }
                    }
                    if st.resolve_epoch_collision(&sender, m.config_epoch) {
                        changed.merge(Changed::ALL);
                    }
                }
                let mut started = 0;
                for (id, ip, port, cport) in &m.gossip {
                    if *id == *me || st.nodes.contains_key(id.as_str()) || !valid_id(id) {
                        continue;
                    }
                    if started < MAX_NEW_PER_MESSAGE && !ip.is_empty() && st.may_add(id, now) {
                        started += 1;
                        changed.merge(st.start_handshake(ip, *port, *cport, false, now));
                    }
                }
            }
            if m.kind == "ping" || m.kind == "meet" {
                replies.push(Msg::from_state("pong", &st));
            }
            // An incoming link is named by its sender once that is a known
            // node (CLUSTER LINKS `from`).
            if !outbound
                && link_node.is_none()
                && sender != me
                && st.nodes.get(&sender).is_some_and(|n| !n.handshake)
            {
                rename = Some(sender.clone());
            }
            cluster.after(&st, changed);
        }
        if let Some(id) = rename {
            if let Some(link) = self.links.get_mut(&token) {
                link.node = Some(id);
            }
        }
        for r in &replies {
            self.send(token, r);
        }
    }

    /// Send `kind` (a PONG after a change) to every connected outgoing link.
    fn broadcast(&mut self, kind: &str) {
        let msg = Msg::from_state(kind, &self.cluster().lock());
        let tokens: Vec<Token> = self
            .links
            .iter()
            .filter(|(_, l)| l.outbound)
            .map(|(t, _)| *t)
            .collect();
        for t in tokens {
            self.send(t, &msg);
        }
    }

    /// Timers: open missing links, PING, flag silent nodes, drop stale
    /// handshakes, refresh CLUSTER LINKS.
    fn cron(&mut self, now: u64) {
        let cluster = self.cluster.clone();
        let timeout = cluster.node_timeout_ms();
        let linked: Vec<NodeId> = self
            .links
            .values()
            .filter(|l| l.outbound)
            .filter_map(|l| l.node.clone())
            .collect();
        let mut to_open: Vec<(NodeId, String, u16, bool)> = Vec::new();
        let mut stale_links: Vec<Token> = Vec::new();
        {
            let mut st = cluster.lock();
            let mut changed = Changed::NONE;
            let handshake_limit = timeout.max(1000);
            let expired: Vec<NodeId> = st
                .nodes
                .values()
                .filter(|n| n.handshake && now.saturating_sub(n.created_ms) > handshake_limit)
                .map(|n| n.id.clone())
                .collect();
            for id in expired {
                st.remove_node(&id);
                changed.view = true;
            }
            for n in st.nodes.values_mut() {
                if n.myself {
                    continue;
                }
                if n.ping_sent_ms != 0 && now.saturating_sub(n.ping_sent_ms) > timeout && !n.pfail {
                    n.pfail = true;
                    log::warn!(
                        "cluster: node {} ({}) is not answering: fail?",
                        n.id,
                        n.endpoint()
                    );
                }
                if !n.ip.is_empty() && n.cport != 0 && !linked.contains(&n.id) {
                    to_open.push((n.id.clone(), n.ip.clone(), n.cport, n.meet));
                }
            }
            for (t, l) in &self.links {
                let Some(id) = &l.node else { continue };
                // A node forgotten (CLUSTER FORGET, RESET) loses its link.
                if l.outbound && !st.nodes.contains_key(id) {
                    stale_links.push(*t);
                    continue;
                }
                let pending = st.nodes.get(id).map_or(0, |n| n.ping_sent_ms);
                if l.outbound && pending != 0 && now.saturating_sub(pending) > timeout / 2 {
                    stale_links.push(*t);
                }
            }
            cluster.after(&st, changed);
        }
        for t in stale_links {
            self.close(t);
        }
        for (id, ip, cport, meet) in to_open {
            self.open(id, &ip, cport, meet, now);
        }
        // PING every outgoing link on its interval.
        let due: Vec<Token> = self
            .links
            .iter()
            .filter(|(_, l)| l.outbound && now.saturating_sub(l.last_ping_ms) >= PING_INTERVAL_MS)
            .map(|(t, _)| *t)
            .collect();
        for t in due {
            self.ping(t, now);
        }
        self.publish_links();
    }

    /// Open an outgoing link to a node and queue its first message.
    fn open(&mut self, id: NodeId, ip: &str, cport: u16, meet: bool, now: u64) {
        let stream = ip
            .parse::<std::net::IpAddr>()
            .ok()
            .and_then(|ip| TcpStream::connect(SocketAddr::new(ip, cport)).ok());
        let Some(stream) = stream else {
            // Unreachable counts as unanswered: the node turns `fail?`
            // after the timeout, as when a connect fails in Redis.
            let mut st = self.cluster().lock();
            if let Some(n) = st.nodes.get_mut(&id) {
                if n.ping_sent_ms == 0 {
                    n.ping_sent_ms = now;
                }
            }
            return;
        };
        let _ = stream.set_nodelay(true);
        let first = {
            let st = self.cluster().lock();
            Msg::from_state(if meet { "meet" } else { "ping" }, &st)
        };
        let mut link = Link {
            stream,
            node: Some(id.clone()),
            outbound: true,
            connected: false,
            rbuf: Vec::new(),
            wbuf: first.encode(),
            created_ms: now,
            last_ping_ms: now,
        };
        link.rbuf.reserve(4096);
        self.register(link);
        self.cluster().messages.sent(&first.kind);
        let mut st = self.cluster().lock();
        if let Some(n) = st.nodes.get_mut(&id) {
            if n.ping_sent_ms == 0 {
                n.ping_sent_ms = now;
            }
        }
    }

    fn ping(&mut self, token: Token, now: u64) {
        let (msg, id) = {
            let st = self.cluster().lock();
            let Some(link) = self.links.get(&token) else {
                return;
            };
            let meet = link
                .node
                .as_ref()
                .and_then(|id| st.nodes.get(id))
                .is_some_and(|n| n.meet);
            (
                Msg::from_state(if meet { "meet" } else { "ping" }, &st),
                link.node.clone(),
            )
        };
        if let Some(link) = self.links.get_mut(&token) {
            link.last_ping_ms = now;
        }
        self.send(token, &msg);
        if let Some(id) = id {
            let mut st = self.cluster().lock();
            if let Some(n) = st.nodes.get_mut(&id) {
                if n.ping_sent_ms == 0 {
                    n.ping_sent_ms = now;
                }
            }
        }
    }

    /// Refresh what CLUSTER LINKS shows.
    fn publish_links(&self) {
        let infos = self
            .links
            .values()
            .filter_map(|l| {
                Some(LinkInfo {
                    direction: if l.outbound { "to" } else { "from" },
                    node: l.node.as_ref()?.to_string(),
                    create_time_ms: l.created_ms,
                    events: if l.wbuf.is_empty() { "r" } else { "rw" },
                    send_buffer_allocated: l.wbuf.capacity(),
                    send_buffer_used: l.wbuf.len(),
                })
            })
            .collect();
        *self
            .cluster()
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = infos;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let mut st = ClusterState::new(Arc::from("a".repeat(40)), "127.0.0.1", 7000, 17000, 0);
        st.add_slots(&[0, 1, 2, 10]).unwrap();
        let b: NodeId = Arc::from("b".repeat(40));
        st.nodes
            .insert(b.clone(), Node::new(b, "127.0.0.2", 7001, 17001, 0));
        let m = Msg::from_state("ping", &st);
        assert_eq!(m.slots, vec![(0, 2), (10, 10)]);
        assert_eq!(m.gossip.len(), 1);
        let frame = m.encode();
        assert_eq!(
            u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
            frame.len() - 4
        );
        assert_eq!(Msg::decode(&frame[4..]), Some(m));
        assert_eq!(Msg::decode(b"{\"type\":\"ping\"}"), None);
        assert_eq!(Msg::decode(b"not json"), None);
        assert!(valid_id(&"f".repeat(40)));
        assert!(!valid_id("x"));
    }
}
