//! A three-node cluster from one static topology file (`cluster-config`),
//! all nodes in this process on loopback ports learnt before any node starts:
//! MOVED and CROSSSLOT on direct requests, CLUSTER SLOTS/SHARDS/NODES/INFO/MYID
//! describing the real topology, MULTI/EXEC and blocking reads under the same
//! checks, the `cluster-allow-local-multislot` opt-in, a malformed file refused
//! at start, and cluster-aware clients (redis-rs `ClusterClient`,
//! `redis-cli -c`, redis-py `RedisCluster`) spreading streams over all nodes.
mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};

use common::{assert_same_replies, test_config, RedisCluster, RespClient, ScratchDir, TestServer};
use shardstream::cluster::node_id;
use shardstream::config::Config;
use shardstream::route::slot::slot_of;

/// Slot ranges of nodes a, b, c.
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];
const NAMES: [&str; 3] = ["node-a", "node-b", "node-c"];

/// Three in-process nodes sharing one topology file.
struct Cluster {
    nodes: Vec<TestServer>,
    ports: Vec<u16>,
    /// Holds the topology file. After `nodes`: fields drop in order, so the
    /// nodes stop before it is removed.
    _dir: ScratchDir,
}

impl Cluster {
    /// Bind three listeners first (so every port is known and kept), write the
    /// topology naming them, then start one node on each.
    fn start(allow_local_multislot: bool) -> Cluster {
        let listeners: Vec<TcpListener> = (0..3)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
            .collect();
        let ports: Vec<u16> = listeners
            .iter()
            .map(|l| l.local_addr().expect("addr").port())
            .collect();
        let mut text = String::from("# test cluster\n");
        for i in 0..3 {
            let (a, b) = RANGES[i];
            text.push_str(&format!("{} 127.0.0.1 {} {a}-{b}\n", NAMES[i], ports[i]));
        }
        let dir = ScratchDir::new("cluster");
        let file = dir.join("cluster.conf");
        std::fs::write(&file, text).expect("write topology");
        let nodes = listeners
            .into_iter()
            .map(|l| {
                TestServer::on_listener(
                    Config {
                        shards: 2,
                        cluster_config: Some(file.clone()),
                        cluster_allow_local_multislot: allow_local_multislot,
                        ..test_config()
                    },
                    l,
                )
            })
            .collect();
        Cluster {
            nodes,
            ports,
            _dir: dir,
        }
    }

    fn client(&self, node: usize) -> RespClient {
        self.nodes[node].client()
    }

    fn url(&self, node: usize) -> String {
        format!("redis://127.0.0.1:{}/", self.ports[node])
    }
}

/// Index of the node serving `key`.
fn node_of(key: &str) -> usize {
    let s = slot_of(key.as_bytes()).0;
    RANGES.iter().position(|&(a, b)| a <= s && s <= b).unwrap()
}

/// The `n`-th key named `<prefix>:<i>` that lands on `node`.
fn key_on(node: usize, prefix: &str, n: usize) -> String {
    (0..)
        .map(|i| format!("{prefix}:{i}"))
        .filter(|k| node_of(k) == node)
        .nth(n)
        .unwrap()
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}", s.len())
}

#[test]
fn moved_for_keys_served_elsewhere_and_keyless_commands_local() {
    let cl = Cluster::start(false);
    let mut a = cl.client(0);
    let kb = key_on(1, "k", 0);
    let kc = key_on(2, "k", 0);
    let slot_b = slot_of(kb.as_bytes()).0;
    let slot_c = slot_of(kc.as_bytes()).0;
    let moved_b = format!("-MOVED {slot_b} 127.0.0.1:{}", cl.ports[1]);
    let moved_c = format!("-MOVED {slot_c} 127.0.0.1:{}", cl.ports[2]);
    assert_eq!(a.raw(&["SET", &kb, "v"]), moved_b);
    assert_eq!(a.raw(&["GET", &kb]), moved_b);
    assert_eq!(a.raw(&["XADD", &kc, "*", "f", "v"]), moved_c);
    assert_eq!(a.raw(&["XRANGE", &kc, "-", "+"]), moved_c);
    assert_eq!(a.raw(&["XREAD", "STREAMS", &kc, "0"]), moved_c);
    assert_eq!(
        a.raw(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", &kc, ">"]),
        moved_c
    );
    assert_eq!(
        a.raw(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            &kc,
            ">"
        ]),
        moved_c
    );
    assert_eq!(a.raw(&["XACK", &kc, "g", "1-1"]), moved_c);
    assert_eq!(
        a.raw(&["XGROUP", "CREATE", &kc, "g", "$", "MKSTREAM"]),
        moved_c
    );
    // A blocking read is redirected before it parks.
    assert_eq!(
        a.raw(&["XREAD", "BLOCK", "0", "STREAMS", &kc, "$"]),
        moved_c
    );
    // The owner serves it.
    let mut b = cl.client(1);
    assert_eq!(b.raw(&["SET", &kb, "v"]), "+OK");
    assert_eq!(b.raw(&["GET", &kb]), "$1\r\nv");
    // Keyless commands run anywhere; a local key is served.
    assert_eq!(a.raw(&["PING"]), "+PONG");
    let ka = key_on(0, "k", 0);
    assert_eq!(a.raw(&["SET", &ka, "1"]), "+OK");
    assert_eq!(a.raw(&["DBSIZE"]), ":1");
    // Redirections are rejected calls in INFO commandstats.
    let stats = a.raw(&["INFO", "commandstats"]);
    let set = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_set:"))
        .unwrap_or_default();
    assert!(set.starts_with("cmdstat_set:calls=1,usec="), "{stats}");
    assert!(set.ends_with(",rejected_calls=1,failed_calls=0"), "{stats}");
    assert!(a.raw(&["INFO", "cluster"]).contains("cluster_enabled:1"));
    assert_eq!(
        a.raw(&["SELECT", "1"]),
        "-ERR SELECT is not allowed in cluster mode"
    );
    assert_eq!(a.raw(&["SELECT", "0"]), "+OK");
}

#[test]
fn crossslot_for_keys_on_different_slots() {
    let cl = Cluster::start(false);
    let mut a = cl.client(0);
    let (k1, k2) = (key_on(0, "x", 0), key_on(0, "x", 1));
    assert_ne!(slot_of(k1.as_bytes()), slot_of(k2.as_bytes()));
    let cross = "-CROSSSLOT Keys in request don't hash to the same slot";
    // Both local, different slots: refused as Redis Cluster does.
    assert_eq!(a.raw(&["MSET", &k1, "1", &k2, "2"]), cross);
    assert_eq!(a.raw(&["DEL", &k1, &k2]), cross);
    assert_eq!(a.raw(&["XREAD", "STREAMS", &k1, &k2, "0", "0"]), cross);
    // Lists and sets: multi-key commands, blocking ones included.
    assert_eq!(a.raw(&["LMOVE", &k1, &k2, "LEFT", "LEFT"]), cross);
    assert_eq!(a.raw(&["BLPOP", &k1, &k2, "0"]), cross);
    assert_eq!(a.raw(&["LMPOP", "2", &k1, &k2, "LEFT"]), cross);
    assert_eq!(a.raw(&["BLMPOP", "0", "2", &k1, &k2, "LEFT"]), cross);
    assert_eq!(a.raw(&["SINTER", &k1, &k2]), cross);
    assert_eq!(a.raw(&["SINTERCARD", "2", &k1, &k2]), cross);
    assert_eq!(a.raw(&["SMOVE", &k1, &k2, "m"]), cross);
    // CROSSSLOT wins over MOVED, whichever key comes first.
    let kb = key_on(1, "x", 0);
    assert_eq!(a.raw(&["DEL", &kb, &k1]), cross);
    // One hash tag: one slot, served.
    assert_eq!(
        a.raw(&["XADD", "{t}s1", "1-1", "f", "v"]),
        if node_of("{t}s1") == 0 {
            "$3\r\n1-1".to_string()
        } else {
            format!(
                "-MOVED {} 127.0.0.1:{}",
                slot_of(b"{t}").0,
                cl.ports[node_of("{t}s1")]
            )
        }
    );
    let tag = (0..)
        .map(|i| format!("{{tag{i}}}"))
        .find(|t| node_of(t) == 0)
        .unwrap();
    let (s1, s2) = (format!("{tag}s1"), format!("{tag}s2"));
    assert_eq!(a.raw(&["XADD", &s1, "1-1", "f", "v"]), "$3\r\n1-1");
    assert_eq!(a.raw(&["XADD", &s2, "2-1", "g", "w"]), "$3\r\n2-1");
    assert_eq!(
        a.raw(&["XREAD", "STREAMS", &s1, &s2, "0", "0"]),
        format!(
            "*2\r\n*2\r\n{}\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n{}\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\ng\r\n$1\r\nw",
            bulk(&s1),
            bulk(&s2)
        )
    );
    assert_eq!(a.raw(&["DEL", &s1, &s2]), ":2");
}

#[test]
fn local_multislot_opt_in_serves_only_when_every_slot_is_local() {
    let cl = Cluster::start(false);
    let mut a = cl.client(0);
    let cross = "-CROSSSLOT Keys in request don't hash to the same slot";
    let (k1, k2) = (key_on(0, "s", 0), key_on(0, "s", 1));
    assert_eq!(a.raw(&["XADD", &k1, "1-1", "f", "v"]), "$3\r\n1-1");
    assert_eq!(a.raw(&["XADD", &k2, "1-2", "f", "v"]), "$3\r\n1-2");
    assert_eq!(a.raw(&["XREAD", "STREAMS", &k1, &k2, "0", "0"]), cross);
    assert_eq!(
        a.raw(&["CONFIG", "GET", "cluster-allow-local-multislot"]),
        "*2\r\n$29\r\ncluster-allow-local-multislot\r\n$2\r\nno"
    );
    assert_eq!(
        a.raw(&["CONFIG", "SET", "cluster-allow-local-multislot", "yes"]),
        "+OK"
    );
    let reply = a.raw(&["XREAD", "COUNT", "1", "STREAMS", &k1, &k2, "0", "0"]);
    assert!(
        reply.starts_with(&format!("*2\r\n*2\r\n{}\r\n", bulk(&k1))),
        "{reply}"
    );
    assert!(reply.contains(&bulk(&k2)), "{reply}");
    assert_eq!(a.raw(&["EXISTS", &k1, &k2, &key_on(0, "s", 2)]), ":2");
    // A slot served elsewhere still refuses the whole command.
    let kb = key_on(1, "s", 0);
    assert_eq!(a.raw(&["XREAD", "STREAMS", &k1, &kb, "0", "0"]), cross);
    assert_eq!(
        a.raw(&["EXISTS", &kb]),
        format!(
            "-MOVED {} 127.0.0.1:{}",
            slot_of(kb.as_bytes()).0,
            cl.ports[1]
        )
    );
    // Started with the directive on, a node serves it from the first command.
    let on = Cluster::start(true);
    let mut a = on.client(0);
    assert_eq!(a.raw(&["EXISTS", &k1, &k2]), ":0");
    assert_eq!(
        a.raw(&["CONFIG", "SET", "cluster-config", "/x"]),
        "-ERR CONFIG SET failed (possibly related to argument 'cluster-config') - can't set immutable config"
    );
}

#[test]
fn multi_exec_follows_redis_cluster_rules() {
    let cl = Cluster::start(false);
    let mut a = cl.client(0);
    let (k1, k2) = (key_on(0, "m", 0), key_on(0, "m", 1));
    let kb = key_on(1, "m", 0);
    // A queued command served elsewhere is MOVED and dooms the transaction.
    assert_eq!(a.raw(&["MULTI"]), "+OK");
    assert_eq!(a.raw(&["SET", &k1, "1"]), "+QUEUED");
    assert_eq!(
        a.raw(&["SET", &kb, "1"]),
        format!(
            "-MOVED {} 127.0.0.1:{}",
            slot_of(kb.as_bytes()).0,
            cl.ports[1]
        )
    );
    assert_eq!(
        a.raw(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors."
    );
    // Local commands on two slots: EXEC answers CROSSSLOT and discards.
    assert_eq!(a.raw(&["MULTI"]), "+OK");
    assert_eq!(a.raw(&["SET", &k1, "1"]), "+QUEUED");
    assert_eq!(a.raw(&["SET", &k2, "2"]), "+QUEUED");
    assert_eq!(
        a.raw(&["EXEC"]),
        "-CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(a.raw(&["EXEC"]), "-ERR EXEC without MULTI");
    assert_eq!(a.raw(&["EXISTS", &k1]), ":0");
    // One slot: runs.
    assert_eq!(a.raw(&["MULTI"]), "+OK");
    assert_eq!(a.raw(&["SET", &k1, "1"]), "+QUEUED");
    assert_eq!(a.raw(&["INCR", &k1]), "+QUEUED");
    assert_eq!(a.raw(&["PING"]), "+QUEUED");
    assert_eq!(a.raw(&["EXEC"]), "*3\r\n+OK\r\n:2\r\n+PONG");
}

/// CROSSSLOT, MULTI/EXEC and SELECT on keys this node serves read exactly as
/// on a real Redis Cluster node (one that serves every slot).
#[test]
fn refusals_match_redis_cluster() {
    let Some(redis) = RedisCluster::start() else {
        return;
    };
    let cl = Cluster::start(false);
    let (k1, k2) = (key_on(0, "d", 0), key_on(0, "d", 1));
    let tag = (0..)
        .map(|i| format!("{{t{i}}}"))
        .find(|t| node_of(t) == 0)
        .unwrap();
    let script = format!(
        "MSET {k1} 1 {k2} 2
         DEL {k1} {k2}
         EXISTS {k1} {k2}
         XREAD STREAMS {k1} {k2} 0 0
         XREAD BLOCK 10 STREAMS {k1} {k2} $ $
         MULTI
         SET {k1} 1
         SET {k2} 2
         EXEC
         EXEC
         MULTI
         MSET {k1} 1 {k2} 2
         SET {k1} 1
         EXEC
         MULTI
         SET {k1} 1
         INCR {k1}
         PING
         EXEC
         SELECT 1
         SELECT x
         SELECT 0
         XADD {tag}a 1-1 f v
         XADD {tag}b 2-2 g w
         XREAD STREAMS {tag}a {tag}b 0 0
         MSET {tag}a 1 {k1} 2
         DEL {tag}a {tag}b {k1}"
    );
    assert_same_replies(
        &mut cl.client(0),
        &mut RespClient::connect(redis.addr),
        &script,
    );
}

#[test]
fn cluster_commands_describe_the_topology() {
    let cl = Cluster::start(false);
    let ids: Vec<String> = NAMES.iter().map(|n| node_id(n)).collect();
    for (me, id) in ids.iter().enumerate() {
        let mut c = cl.client(me);
        assert_eq!(c.raw(&["CLUSTER", "MYID"]), bulk(id));
        // SLOTS: one range per node, by first slot.
        let mut want = String::from("*3");
        for i in 0..3 {
            want.push_str(&format!(
                "\r\n*3\r\n:{}\r\n:{}\r\n*4\r\n{}\r\n:{}\r\n{}\r\n*0",
                RANGES[i].0,
                RANGES[i].1,
                bulk("127.0.0.1"),
                cl.ports[i],
                bulk(&ids[i])
            ));
        }
        assert_eq!(c.raw(&["CLUSTER", "SLOTS"]), want);
        // SHARDS: one shard per node, each with its slots and its one master.
        let mut want = String::from("*3");
        for i in 0..3 {
            want.push_str(&format!(
                "\r\n*4\r\n$5\r\nslots\r\n*2\r\n:{}\r\n:{}\r\n$5\r\nnodes\r\n*1\r\n*14\r\n\
                 $2\r\nid\r\n{}\r\n$4\r\nport\r\n:{}\r\n$2\r\nip\r\n{}\r\n$8\r\nendpoint\r\n{}\r\n\
                 $4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n\
                 $6\r\nhealth\r\n$6\r\nonline",
                RANGES[i].0,
                RANGES[i].1,
                bulk(&ids[i]),
                cl.ports[i],
                bulk("127.0.0.1"),
                bulk("127.0.0.1"),
            ));
        }
        assert_eq!(c.raw(&["CLUSTER", "SHARDS"]), want);
        // NODES: myself flagged, epochs by line.
        let mut text = String::new();
        for i in 0..3 {
            text.push_str(&format!(
                "{} 127.0.0.1:{}@{} {} - 0 0 {} connected {}-{}\n",
                ids[i],
                cl.ports[i],
                cl.ports[i] + 10000,
                if i == me { "myself,master" } else { "master" },
                i + 1,
                RANGES[i].0,
                RANGES[i].1
            ));
        }
        // The bus's ping/pong times and link state vary: compare the rest.
        let got = c.raw(&["CLUSTER", "NODES"]);
        let normal: String = got
            .lines()
            .skip(1)
            .map(|l| {
                let mut f: Vec<&str> = l.split(' ').collect();
                if f.len() > 7 {
                    f[4] = "0";
                    f[5] = "0";
                    f[7] = "connected";
                }
                f.join(" ") + "\n"
            })
            .collect();
        assert_eq!(normal, text, "{got}");
        let info = c.raw(&["CLUSTER", "INFO"]);
        for field in [
            "cluster_state:ok\r\n".to_string(),
            "cluster_slots_assigned:16384\r\n".into(),
            "cluster_known_nodes:3\r\n".into(),
            "cluster_size:3\r\n".into(),
            "cluster_current_epoch:3\r\n".into(),
            format!("cluster_my_epoch:{}\r\n", me + 1),
        ] {
            assert!(info.contains(&field), "{field} in {info}");
        }
    }
    // COUNTKEYSINSLOT / GETKEYSINSLOT count this node's keys.
    let mut c = cl.client(2);
    let k = key_on(2, "cnt", 0);
    let slot = slot_of(k.as_bytes()).0.to_string();
    assert_eq!(c.raw(&["SET", &k, "v"]), "+OK");
    assert_eq!(c.raw(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), ":1");
    assert_eq!(
        c.raw(&["CLUSTER", "GETKEYSINSLOT", &slot, "10"]),
        format!("*1\r\n{}", bulk(&k))
    );
    assert_eq!(
        cl.client(0).raw(&["CLUSTER", "COUNTKEYSINSLOT", &slot]),
        ":0"
    );
    for cmd in ["READONLY", "READWRITE", "ASKING"] {
        assert_eq!(c.raw(&[cmd]), "+OK");
    }
}

#[test]
fn redis_rs_cluster_client_spreads_streams_over_every_node() {
    use redis::Commands;
    let cl = Cluster::start(false);
    let client = redis::cluster::ClusterClient::new(vec![cl.url(1)]).expect("cluster client");
    let mut con = client.get_connection().expect("cluster connection");
    let streams: Vec<String> = (0..30).map(|i| format!("stream:{i}")).collect();
    let on: std::collections::HashSet<usize> = streams.iter().map(|s| node_of(s)).collect();
    assert_eq!(on.len(), 3, "streams land on every node");
    for (i, s) in streams.iter().enumerate() {
        for j in 0..3 {
            let id: String = redis::cmd("XADD")
                .arg(s)
                .arg(format!("{}-{j}", i + 1))
                .arg("n")
                .arg(j)
                .query(&mut con)
                .expect("XADD through the cluster client");
            assert_eq!(id, format!("{}-{j}", i + 1));
        }
        let _: () = con.set(format!("str:{i}"), i).expect("SET");
    }
    type Entries = Vec<(String, Vec<String>)>;
    for (i, s) in streams.iter().enumerate() {
        let len: usize = redis::cmd("XLEN").arg(s).query(&mut con).expect("XLEN");
        assert_eq!(len, 3);
        let range: Entries = redis::cmd("XRANGE")
            .arg(s)
            .arg("-")
            .arg("+")
            .query(&mut con)
            .expect("XRANGE");
        let ids: Vec<String> = range.into_iter().map(|(id, _)| id).collect();
        assert_eq!(
            ids,
            (0..3).map(|j| format!("{}-{j}", i + 1)).collect::<Vec<_>>()
        );
        let read: Vec<(String, Entries)> = redis::cmd("XREAD")
            .arg("STREAMS")
            .arg(s)
            .arg(format!("{}-0", i + 1))
            .query(&mut con)
            .expect("XREAD");
        assert_eq!(read.len(), 1);
        assert_eq!(&read[0].0, s);
        assert_eq!(read[0].1.len(), 2);
        assert_eq!(read[0].1[0].1, vec!["n".to_string(), "1".to_string()]);
        let v: i64 = con.get(format!("str:{i}")).expect("GET");
        assert_eq!(v, i as i64);
    }
    // Consumer groups through the cluster client: every stream's group on its node.
    for (i, s) in streams.iter().enumerate() {
        let ok: String = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(s)
            .arg("g")
            .arg("0")
            .query(&mut con)
            .expect("XGROUP CREATE");
        assert_eq!(ok, "OK");
        let read: Vec<(String, Entries)> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c1")
            .arg("COUNT")
            .arg(10)
            .arg("STREAMS")
            .arg(s)
            .arg(">")
            .query(&mut con)
            .expect("XREADGROUP");
        let ids: Vec<String> = read[0].1.iter().map(|(id, _)| id.clone()).collect();
        assert_eq!(
            ids,
            (0..3).map(|j| format!("{}-{j}", i + 1)).collect::<Vec<_>>()
        );
        let acked: i64 = redis::cmd("XACK")
            .arg(s)
            .arg("g")
            .arg(&ids[..2])
            .query(&mut con)
            .expect("XACK");
        assert_eq!(acked, 2);
        let pending: (i64, String, String, Vec<(String, String)>) = redis::cmd("XPENDING")
            .arg(s)
            .arg("g")
            .query(&mut con)
            .expect("XPENDING");
        assert_eq!(pending.0, 1);
        assert_eq!(pending.1, ids[2]);
        // Nothing new: a blocking read times out with a null reply.
        let none: Option<Vec<(String, Entries)>> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c1")
            .arg("BLOCK")
            .arg(5)
            .arg("STREAMS")
            .arg(s)
            .arg(">")
            .query(&mut con)
            .expect("XREADGROUP BLOCK");
        assert!(none.is_none());
    }
    // A reader blocked through one cluster connection is woken by an XADD
    // through another (either order delivers the entry exactly once).
    let s = streams.iter().find(|s| node_of(s) == 2).unwrap().clone();
    let reader_client = client.clone();
    let stream = s.clone();
    let reader = std::thread::spawn(move || {
        let mut con = reader_client.get_connection().expect("reader connection");
        let got: Vec<(String, Entries)> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c2")
            .arg("BLOCK")
            .arg(0)
            .arg("STREAMS")
            .arg(&stream)
            .arg(">")
            .query(&mut con)
            .expect("XREADGROUP BLOCK 0");
        got
    });
    let id: String = redis::cmd("XADD")
        .arg(&s)
        .arg("999-1")
        .arg("wake")
        .arg("up")
        .query(&mut con)
        .expect("XADD");
    let got = reader.join().expect("reader thread");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1[0].0, id);
    assert_eq!(got[0].1[0].1, vec!["wake".to_string(), "up".to_string()]);
    // Every node holds exactly the keys of its slots.
    for n in 0..3 {
        let want = streams.iter().filter(|s| node_of(s) == n).count()
            + (0..30)
                .filter(|i| node_of(&format!("str:{i}")) == n)
                .count();
        assert_eq!(cl.client(n).raw(&["DBSIZE"]), format!(":{want}"));
    }
}

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn redis_cli_follows_redirects() {
    if !have("redis-cli", "--version") {
        assert!(
            std::env::var_os("SHARDSTREAM_REQUIRE_REDIS").is_none(),
            "redis-cli is required"
        );
        eprintln!("redis-cli not installed: skipping");
        return;
    }
    let cl = Cluster::start(false);
    let port = cl.ports[0].to_string();
    let run = |cluster_mode: bool, args: &[&str]| {
        let mut cmd = Command::new("redis-cli");
        if cluster_mode {
            cmd.arg("-c");
        }
        let out = cmd
            .args(["-h", "127.0.0.1", "-p", &port])
            .args(args)
            .output()
            .expect("run redis-cli");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let kc = key_on(2, "cli", 0);
    assert_eq!(run(true, &["set", &kc, "bar"]), "OK");
    assert_eq!(run(true, &["get", &kc]), "bar");
    let stream = key_on(1, "clistream", 0);
    assert_eq!(run(true, &["xadd", &stream, "5-1", "f", "v"]), "5-1");
    assert_eq!(run(true, &["xlen", &stream]), "1");
    assert_eq!(cl.client(1).raw(&["XLEN", &stream]), ":1");
    // Without -c the redirection is shown, not followed.
    assert_eq!(
        run(false, &["get", &kc]),
        format!(
            "MOVED {} 127.0.0.1:{}",
            slot_of(kc.as_bytes()).0,
            cl.ports[2]
        )
    );
    assert_eq!(cl.client(2).raw(&["GET", &kc]), "$3\r\nbar");
}

#[test]
fn redis_py_cluster_client() {
    let has_redis_py = Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_redis_py {
        assert!(
            std::env::var_os("SHARDSTREAM_REQUIRE_REDIS").is_none(),
            "redis-py is required (pip install redis)"
        );
        eprintln!("python3 with redis-py not available: skipping");
        return;
    }
    let cl = Cluster::start(false);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/cluster_client.py");
    let ports: Vec<String> = cl.ports.iter().map(u16::to_string).collect();
    let out = Command::new("python3")
        .arg(script)
        .args(&ports)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "redis-py script failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The script wrote through the cluster client to every node.
    for n in 0..3 {
        let dbsize = cl.client(n).raw(&["DBSIZE"]);
        assert_ne!(dbsize, ":0", "node {n} got keys");
    }
}

#[test]
fn bad_topology_files_refuse_to_start() {
    let dir = ScratchDir::new("cluster-bad");
    let cases = [
        (
            "a 127.0.0.1 7000 0-9000\nb 127.0.0.1 7001 8000-16383\n",
            "line 2: slot 8000 is already assigned to node 'a' (line 1)",
        ),
        (
            "a 127.0.0.1 7000 0-9000\nb 127.0.0.1 7001 9002-16383\n",
            "1 slots are not assigned to any node (first unassigned: 9001-9001)",
        ),
        (
            "a 127.0.0.1 7000 0-16383 x-y\n",
            "line 1: 'x' is not a slot",
        ),
        ("# empty\nb 127.0.0.1\n", "line 2: expected"),
    ];
    for (n, (text, want)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad-{n}.conf"));
        std::fs::write(&file, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_shardstream"))
            .args([
                "--port",
                "7000",
                "--no-pin",
                "--shards",
                "1",
                "--cluster-config",
            ])
            .arg(&file)
            .output()
            .expect("run shardstream");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{want:?} in {err:?}");
        assert!(err.contains(&file.display().to_string()), "{err}");
    }
}

/// Every node splits its own slots over its shards: with 2 shards per node,
/// both shards of every node hold keys, and SCAN still visits each key once.
#[test]
fn each_node_uses_all_of_its_shards() {
    let cluster = Cluster::start(false);
    for node in 0..3 {
        let mut c = cluster.client(node);
        for i in 0..200 {
            let key = key_on(node, "spread", i);
            assert_eq!(c.raw(&["XADD", key.as_str(), "1-1", "f", "v"]), bulk("1-1"));
        }
        let info = c.raw(&["INFO", "shardstream"]);
        for shard in ["shard0:", "shard1:"] {
            let line = info
                .lines()
                .find(|l| l.starts_with(shard))
                .unwrap_or_else(|| panic!("no {shard} line in {info}"));
            let keys: u64 = line
                .split(',')
                .find_map(|f| f.strip_prefix("keys="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            assert!(
                keys > 30,
                "node {node} {shard} holds only {keys} keys: {line}"
            );
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = "0".to_string();
        loop {
            let reply = c.raw(&["SCAN", cursor.as_str(), "COUNT", "37"]);
            let mut lines = reply.lines().skip(2); // *2, $len
            cursor = lines.next().expect("cursor").to_string();
            for l in lines.skip(1).filter(|l| !l.starts_with('$')) {
                assert!(seen.insert(l.to_string()), "{l} returned twice");
            }
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 200, "node {node}");
    }
}
