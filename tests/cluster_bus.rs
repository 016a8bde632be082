//! Redis Cluster nodes (`cluster-enabled yes`) over real sockets: nodes
//! meet and converge over the cluster bus, slots move with SETSLOT while
//! clients get ASK / TRYAGAIN / MOVED as Redis gives them, blocked readers
//! follow their slot, nodes.conf survives a restart, and the CLUSTER
//! subcommands' errors match a fresh redis-server cluster node's.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{bind_free, eventually, free_port, test_config, RespClient, ScratchDir, TestServer};
use shardstream::config::Config;

/// A cluster node in this process, with its own data dir and bus port.
struct Node {
    srv: TestServer,
    cport: u16,
    /// The data dir when [`Node::start`] made it. After `srv`: fields drop
    /// in order, so the server stops before the dir is removed.
    _scratch: Option<ScratchDir>,
}

impl Node {
    fn start(tag: &str) -> Node {
        let dir = ScratchDir::new(&format!("cluster-bus-{tag}"));
        let node = Node::start_in(dir.to_path_buf(), free_port());
        Node {
            _scratch: Some(dir),
            ..node
        }
    }

    fn start_in(dir: PathBuf, cport: u16) -> Node {
        Node::start_on(dir, cport, bind_free())
    }

    fn start_on(dir: PathBuf, cport: u16, listener: std::net::TcpListener) -> Node {
        let config = Config {
            cluster_enabled: true,
            cluster_port: cport,
            cluster_node_timeout_ms: 5000,
            dir,
            ..test_config()
        };
        Node {
            srv: TestServer::on_listener(config, listener),
            cport,
            _scratch: None,
        }
    }

    fn c(&self) -> RespClient {
        self.srv.client()
    }

    fn port(&self) -> u16 {
        self.srv.addr.port()
    }

    fn id(&self) -> String {
        bulk(&self.c().raw(&["CLUSTER", "MYID"]))
    }

    /// Have this node meet `other` over the bus.
    fn meet(&self, other: &Node) {
        let (p, cp) = (other.port().to_string(), other.cport.to_string());
        assert_eq!(
            self.c().raw(&["CLUSTER", "MEET", "127.0.0.1", &p, &cp]),
            "+OK"
        );
    }

    fn info(&self) -> String {
        self.c().raw(&["CLUSTER", "INFO"])
    }

    /// `(id, slot ranges)` of every node in CLUSTER NODES, sorted: what two
    /// nodes must agree on.
    fn signature(&self) -> Vec<String> {
        let text = self.c().raw(&["CLUSTER", "NODES"]);
        let mut sig: Vec<String> = text
            .lines()
            .filter(|l| l.len() > 40 && !l.starts_with('='))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let slots: Vec<&str> = f[8..]
                    .iter()
                    .copied()
                    .filter(|s| !s.starts_with('['))
                    .collect();
                format!("{} {}", f[0].trim_start_matches('!'), slots.join(","))
            })
            .collect();
        sig.sort();
        sig
    }
}

/// The text of a bulk-string reply.
fn bulk(reply: &str) -> String {
    reply.lines().nth(1).unwrap_or("").to_string()
}

/// Start `n` nodes, give each an equal share of the slots and its own
/// config epoch, and join them (each meets the first), as `redis-cli
/// --cluster create` does; wait until all agree and are `ok`.
fn cluster(n: usize) -> Vec<Node> {
    let nodes: Vec<Node> = (0..n).map(|i| Node::start(&format!("n{i}"))).collect();
    let per = 16384 / n;
    for (i, node) in nodes.iter().enumerate() {
        let first = i * per;
        let last = if i == n - 1 { 16383 } else { (i + 1) * per - 1 };
        let mut c = node.c();
        assert_eq!(
            c.raw(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &first.to_string(),
                &last.to_string()
            ]),
            "+OK"
        );
        assert_eq!(
            c.raw(&["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()]),
            "+OK"
        );
    }
    for node in &nodes[1..] {
        node.meet(&nodes[0]);
    }
    let agreed = eventually(20, || {
        let first = nodes[0].signature();
        first.len() == n
            && nodes
                .iter()
                .all(|x| x.signature() == first && x.info().contains("cluster_state:ok"))
    });
    assert!(
        agreed,
        "nodes did not converge: {:#?}",
        nodes.iter().map(|x| x.signature()).collect::<Vec<_>>()
    );
    nodes
}

#[test]
fn three_nodes_meet_converge_and_redirect() {
    let nodes = cluster(3);
    let info = nodes[1].info();
    assert!(info.contains("cluster_known_nodes:3"), "{info}");
    assert!(info.contains("cluster_size:3"), "{info}");
    assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
    assert!(info.contains("cluster_current_epoch:3"), "{info}");
    assert!(info.contains("cluster_my_epoch:2"), "{info}");
    for field in [
        "cluster_stats_messages_ping_sent:",
        "cluster_stats_messages_pong_received:",
    ] {
        assert!(info.contains(field), "{info}");
    }
    // foo hashes to 12182: the third node's.
    let third = format!("127.0.0.1:{}", nodes[2].port());
    assert_eq!(
        nodes[0].c().raw(&["SET", "foo", "bar"]),
        format!("-MOVED 12182 {third}")
    );
    assert_eq!(nodes[2].c().raw(&["SET", "foo", "bar"]), "+OK");
    assert_eq!(
        nodes[0].c().raw(&["MGET", "foo", "bar"]),
        "-CROSSSLOT Keys in request don't hash to the same slot"
    );
    // Keyless commands run anywhere; CLUSTER SLOTS names every node.
    assert_eq!(nodes[0].c().raw(&["PING"]), "+PONG");
    let slots = nodes[0].c().raw(&["CLUSTER", "SLOTS"]);
    for n in &nodes {
        assert!(slots.contains(&format!(":{}\r\n", n.port())), "{slots}");
    }
    // Every node knows every other's bus link.
    assert!(eventually(10, || {
        let links = nodes[0].c().raw(&["CLUSTER", "LINKS"]);
        nodes[1..].iter().all(|n| links.contains(&n.id()))
    }));
}

#[test]
fn slot_migration_asks_tryagain_and_moves_blocked_readers() {
    let nodes = cluster(2);
    let (a, b) = (&nodes[0], &nodes[1]);
    let (a_id, b_id) = (a.id(), b.id());
    let b_addr = format!("127.0.0.1:{}", b.port());
    // {t} hashes to slot 15710... pick a tag on the first node's half.
    let tag = (0..1000)
        .map(|i| format!("t{i}"))
        .find(|t| {
            let r = a.c().raw(&["CLUSTER", "KEYSLOT", &format!("{{{t}}}")]);
            r.trim_start_matches(':').parse::<u32>().unwrap() < 8192
        })
        .unwrap();
    let key = |k: &str| format!("{{{tag}}}{k}");
    let slot = a.c().raw(&["CLUSTER", "KEYSLOT", &key("x")]);
    let slot = slot.trim_start_matches(':').to_string();
    let mut ca = a.c();
    assert_eq!(ca.raw(&["SET", &key("s1"), "v"]), "+OK");
    assert!(ca
        .raw(&["XADD", &key("stream"), "1-1", "f", "v"])
        .contains("1-1"));

    // Two readers block before the migration: one on the stream (which
    // moves), one on a key that does not exist (it stays until the slot goes).
    let mut r1 = a.c();
    r1.send(&["XREAD", "BLOCK", "0", "STREAMS", &key("stream"), "$"]);
    let mut r2 = a.c();
    r2.send(&["XREAD", "BLOCK", "0", "STREAMS", &key("nokey"), "$"]);
    common::wait_blocked(&mut ca, 2);

    assert_eq!(
        b.c()
            .raw(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &a_id]),
        "+OK"
    );
    assert_eq!(
        ca.raw(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &b_id]),
        "+OK"
    );
    let nodes_line = ca.raw(&["CLUSTER", "NODES"]);
    assert!(
        nodes_line.contains(&format!("[{slot}->-{b_id}]")),
        "{nodes_line}"
    );
    // Keys still here are served; missing ones are asked for at the target;
    // a mix is TRYAGAIN.
    assert!(ca.raw(&["GET", &key("s1")]).ends_with("\r\nv"));
    assert_eq!(
        ca.raw(&["GET", &key("missing")]),
        format!("-ASK {slot} {b_addr}")
    );
    assert_eq!(
        ca.raw(&["MGET", &key("s1"), &key("missing")]),
        "-TRYAGAIN Multiple keys request during rehashing of slot"
    );
    // The target redirects back unless the client says ASKING, for one command.
    let mut cb = b.c();
    let a_addr = format!("127.0.0.1:{}", a.port());
    assert_eq!(
        cb.raw(&["GET", &key("new")]),
        format!("-MOVED {slot} {a_addr}")
    );
    assert_eq!(cb.raw(&["ASKING"]), "+OK");
    assert_eq!(cb.raw(&["SET", &key("new"), "n"]), "+OK");
    assert_eq!(
        cb.raw(&["GET", &key("new")]),
        format!("-MOVED {slot} {a_addr}")
    );
    assert_eq!(cb.raw(&["ASKING"]), "+OK");
    assert_eq!(
        cb.raw(&["MGET", &key("new"), &key("other")]),
        "-TRYAGAIN Multiple keys request during rehashing of slot"
    );

    // Move the keys by hand (DUMP / RESTORE after ASKING / DEL), as MIGRATE does.
    for k in ["s1", "stream"] {
        let payload = dump_payload(&mut ca, &key(k));
        assert_eq!(cb.raw(&["ASKING"]), "+OK");
        let mut args: Vec<Vec<u8>> = vec![b"RESTORE".to_vec(), key(k).into_bytes(), b"0".to_vec()];
        args.push(payload);
        assert_eq!(cb.raw(&args), "+OK");
        assert_eq!(ca.raw(&["DEL", &key(k)]), ":1");
    }
    // The reader on the stream that left is asked to follow it.
    assert_eq!(r1.read_reply(), format!("-ASK {slot} {b_addr}"));
    assert_eq!(ca.raw(&["CLUSTER", "SETSLOT", &slot, "NODE", &b_id]), "+OK");
    // The slot is gone: the reader on the missing key is sent to its new owner.
    assert_eq!(r2.read_reply(), format!("-MOVED {slot} {b_addr}"));
    assert_eq!(cb.raw(&["CLUSTER", "SETSLOT", &slot, "NODE", &b_id]), "+OK");
    assert!(cb.raw(&["GET", &key("s1")]).ends_with("\r\nv"));
    assert_eq!(
        ca.raw(&["GET", &key("s1")]),
        format!("-MOVED {slot} {b_addr}")
    );
    // The importing node holds the greatest epoch (it takes a new one
    // unless it already had it), so its claim wins everywhere.
    let info_b = b.info();
    assert!(
        info_b.contains("cluster_current_epoch:2") && info_b.contains("cluster_my_epoch:2"),
        "{info_b}"
    );
    assert!(eventually(10, || a.signature() == b.signature()));
    assert!(!ca.raw(&["CLUSTER", "NODES"]).contains("->-"));
}

/// The raw DUMP payload of `key`.
fn dump_payload(c: &mut RespClient, key: &str) -> Vec<u8> {
    c.send(&["DUMP", key]);
    c.read_bulk_bytes()
}

#[test]
fn setslot_node_refuses_while_keys_remain_and_nodes_conf_survives_restart() {
    let dir = ScratchDir::new("cluster-bus-restart");
    let cport = free_port();
    let listener = bind_free();
    let port = listener.local_addr().unwrap().port();
    let node = Node::start_on(dir.to_path_buf(), cport, listener);
    let other = Node::start("other");
    node.meet(&other);
    let other_id = other.id();
    // Known by its real id (a handshake shows a placeholder id first).
    assert!(eventually(10, || {
        let nodes = node.c().raw(&["CLUSTER", "NODES"]);
        nodes.contains(&other_id) && !nodes.contains("handshake")
    }));
    let mut c = node.c();
    assert_eq!(c.raw(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "+OK");
    assert_eq!(c.raw(&["SET", "foo", "1"]), "+OK");
    assert_eq!(
        c.raw(&["CLUSTER", "SETSLOT", "12182", "NODE", &other_id]),
        "-ERR Can't assign hashslot 12182 to a different node while I still hold keys for this hash slot."
    );
    assert_eq!(
        c.raw(&["CLUSTER", "SETSLOT", "12181", "MIGRATING", &other_id]),
        "+OK"
    );
    // Met at epoch 0, one of the two took a new epoch (the collision rule);
    // BUMPEPOCH makes this one the greatest, once.
    let bumped = c.raw(&["CLUSTER", "BUMPEPOCH"]);
    assert!(
        bumped.starts_with("+BUMPED ") || bumped.starts_with("+STILL "),
        "{bumped}"
    );
    let epoch = bumped.split(' ').nth(1).unwrap().to_string();
    assert_eq!(c.raw(&["CLUSTER", "BUMPEPOCH"]), format!("+STILL {epoch}"));
    let id = node.id();
    let before = c.raw(&["CLUSTER", "NODES"]);
    drop(c);
    drop(node);
    let conf = std::fs::read_to_string(dir.join("nodes.conf")).unwrap();
    assert!(
        conf.contains(&id) && conf.contains(&format!("vars currentEpoch {epoch}")),
        "{conf}"
    );
    // Same port, same dir: the same node, slots, epoch and open slot.
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let node = Node::start_on(dir.to_path_buf(), cport, listener);
    assert_eq!(node.id(), id);
    let after = node.c().raw(&["CLUSTER", "NODES"]);
    assert!(after.contains("0-16383 [12181->-"), "{after}");
    assert!(
        after.contains(&format!(
            "{id} 127.0.0.1:{port}@{cport} myself,master - 0 0 {epoch} connected"
        )),
        "before {before}\nafter {after}"
    );
    assert!(after.contains(&other_id));
}

/// A fresh redis-server cluster node (no slots), killed on drop.
struct RedisNode {
    child: std::process::Child,
    port: u16,
    _dir: ScratchDir,
}

impl RedisNode {
    fn start() -> Option<RedisNode> {
        if !common::redis_server_installed() {
            return None;
        }
        let port = (0..20)
            .map(|_| free_port())
            .find(|p| *p < 55535)
            .expect("a free port under 55535");
        let dir = ScratchDir::new("redis-node");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--cluster-enabled",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        assert!(eventually(10, || std::net::TcpStream::connect(addr).is_ok()));
        Some(RedisNode {
            child,
            port,
            _dir: dir,
        })
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn cluster_subcommand_errors_match_redis() {
    let Some(redis) = RedisNode::start() else {
        return;
    };
    let ours = Node::start("diff");
    let mut r = RespClient::connect(format!("127.0.0.1:{}", redis.port).parse().unwrap());
    let mut o = ours.c();
    std::thread::sleep(Duration::from_millis(100));
    common::assert_same_replies(
        &mut o,
        &mut r,
        "
        CLUSTER ADDSLOTS 1 2 1
        CLUSTER ADDSLOTS 16384
        CLUSTER ADDSLOTS -1
        CLUSTER ADDSLOTS x
        CLUSTER ADDSLOTS
        CLUSTER ADDSLOTSRANGE 5 3
        CLUSTER ADDSLOTSRANGE 1 2 3
        CLUSTER ADDSLOTS 100
        CLUSTER ADDSLOTS 100 101
        CLUSTER ADDSLOTSRANGE 100 101
        CLUSTER DELSLOTS 200
        CLUSTER DELSLOTS 100 100
        CLUSTER DELSLOTS 100
        CLUSTER DELSLOTSRANGE 100 100
        CLUSTER ADDSLOTSRANGE 0 5
        CLUSTER INFO
        CLUSTER SETSLOT 100 MIGRATING abc
        CLUSTER SETSLOT 3 MIGRATING abc
        CLUSTER SETSLOT 3 IMPORTING abc
        CLUSTER SETSLOT 100 IMPORTING abc
        CLUSTER SETSLOT 100 NODE abc
        CLUSTER SETSLOT 100 STABLE
        CLUSTER SETSLOT 100 BOGUS
        CLUSTER SETSLOT 100 NODE
        CLUSTER SETSLOT 99999 STABLE
        CLUSTER SET-CONFIG-EPOCH -1
        CLUSTER SET-CONFIG-EPOCH x
        CLUSTER SET-CONFIG-EPOCH 5
        CLUSTER SET-CONFIG-EPOCH 6
        CLUSTER BUMPEPOCH
        CLUSTER FORGET abc
        CLUSTER MEET 127.0.0.1 0
        CLUSTER MEET 127.0.0.1 x
        CLUSTER MEET nonsense 7000
        CLUSTER MEET 127.0.0.1 7000 1 2
        CLUSTER COUNTKEYSINSLOT 100
        CLUSTER COUNTKEYSINSLOT 16384
        CLUSTER GETKEYSINSLOT 100 10
        CLUSTER RESET BOGUS
        CLUSTER RESET SOFT extra
        SELECT 99999999999
        SELECT 1
        SELECT 0
        CLUSTER COUNT-FAILURE-REPORTS abc
        CLUSTER REPLICAS abc
        CLUSTER SAVECONFIG
        GET foo
        SET foo bar
        ASKING
        ",
    );
    // A node serving only some slots is down: keys are refused.
    assert_eq!(
        o.raw(&["GET", "{a}"]),
        r.raw(&["GET", "{a}"]),
        "a served slot while the cluster is down"
    );
}

#[test]
fn a_cluster_node_creates_its_data_directory() {
    let dir = ScratchDir::new("cluster-bus-mkdir");
    let node = Node::start_in(dir.join("not/yet"), free_port());
    assert!(node.info().contains("cluster_state:fail"));
    assert!(dir.join("not/yet/nodes.conf").exists());
}

/// A PING frame from a node nobody knows (the bus answers it with a PONG).
fn ping_frame() -> Vec<u8> {
    let body = format!(
        "{{\"type\":\"ping\",\"sender\":\"{}\",\"ip\":\"\",\"port\":1,\"cport\":2,\
         \"current_epoch\":0,\"config_epoch\":0,\"slots\":[],\"gossip\":[]}}",
        "e".repeat(40)
    );
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body.as_bytes());
    f
}

/// Whether the bus at `port` answers a PING with a PONG within 3 s.
fn bus_answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    if s.write_all(&ping_frame()).is_err() {
        return false;
    }
    let mut len = [0u8; 4];
    if s.read_exact(&mut len).is_err() {
        return false;
    }
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).is_ok() && String::from_utf8_lossy(&body).contains("\"pong\"")
}

#[test]
fn the_bus_survives_bad_frames_and_running_out_of_descriptors() {
    use std::io::Write;
    let dir = ScratchDir::new("cluster-bus-fd");
    let (port, cport) = (free_port(), free_port());
    // A child server with few descriptors, so they run out quickly.
    /// Kills the child server however the test ends.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _child = Reap(
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n 128 && exec {} --port {port} --bind 127.0.0.1 --cluster-enabled yes \
             --cluster-port {cport} --dir {} --appendonly no --shards 2 --no-pin",
                env!("CARGO_BIN_EXE_shardstream"),
                dir.display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn shardstream"),
    );
    assert!(eventually(10, || bus_answers(cport)), "bus up");
    // Garbage, a huge length, half a frame: each closes only its link.
    for bad in [
        b"garbage garbage garbage\r\n".to_vec(),
        vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3],
        ping_frame()[..20].to_vec(),
        {
            let mut f = 5u32.to_be_bytes().to_vec();
            f.extend_from_slice(b"{\"a\":");
            f
        },
    ] {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", cport)).unwrap();
        let _ = s.write_all(&bad);
    }
    assert!(bus_answers(cport), "bus answers after bad frames");
    // Exhaust the descriptors on the bus port, then give them back.
    let bus: std::net::SocketAddr = format!("127.0.0.1:{cport}").parse().unwrap();
    let hog: Vec<std::net::TcpStream> = (0..300)
        .filter_map(|_| std::net::TcpStream::connect_timeout(&bus, Duration::from_millis(100)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    drop(hog);
    assert!(
        eventually(10, || bus_answers(cport)),
        "the bus accepts again once descriptors are free"
    );
    let mut c = RespClient::connect(format!("127.0.0.1:{port}").parse().unwrap());
    assert_eq!(c.raw(&["PING"]), "+PONG");
}
