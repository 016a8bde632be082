//! Cluster introspection. A standalone node (the default) answers these
//! commands as Redis standalone does (`ERR This instance has cluster support
//! disabled`, INFO `cluster_enabled:0`). With `--cluster-mode emulated` (the
//! idea is Dragonfly's; `cluster-enabled yes` in a redis.conf means the same)
//! a node presents itself as a Redis Cluster of one master owning all 16384
//! slots (`cluster_enabled:1`), so `redis-cli --cluster check` and redis-py's
//! `RedisCluster` accept it; the data path is unchanged (no CROSSSLOT checks,
//! SELECT allowed), as one node serves every slot. With
//! `cluster-config` (see [`crate::cluster`]) it describes the configured
//! nodes, so cluster-aware clients (redis-rs `ClusterClient`, redis-py
//! `RedisCluster`, `redis-cli -c`) work against it unchanged. Redirections
//! (MOVED/CROSSSLOT) are decided by the IO layer before a command runs.
//!
//! CLUSTER KEYSLOT/SLOTS/SHARDS/NODES/INFO/MYID/HELP answer on the connection's thread;
//! COUNTKEYSINSLOT and GETKEYSINSLOT run on the shard owning the slot (they
//! count this node's keys, so 0 for a slot another node serves, as in Redis).
//! READONLY, READWRITE and ASKING are accepted (there are no replicas and no
//! slot migrations yet).
//!
//! Reply shapes are Redis 7.0's for a cluster node with no hostname set.
//! Without a topology the node id is the server's `run_id` (40 hex
//! characters, fixed for the process life), the advertised address is the
//! local address of the connection asking (the address the client reached us
//! on) and the config epoch is 0, as on a Redis node that was given all slots
//! with `CLUSTER ADDSLOTSRANGE 0 16383`. With a topology ids are SHA-1 of the
//! node names, addresses are the file's and epochs the line order. The cluster
//! bus port is `port + 10000` as in Redis (0 when that does not fit in 16 bits).

use bytes::Bytes;

use crate::cmd::args::{int_arg, text};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, Flags, Handler, Keys, Merge};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::{slot_of, Slot, SLOTS};
use crate::shard::db::ShardDb;

/// A keyless row of this family (runs on the connection's thread).
const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec::conn(name, arity, flags, "cluster", acl, summary, since, f)
}

/// `CLUSTER` subcommand rows (`CLUSTER|KEYSLOT`, ...).
const CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    row(
        "CLUSTER|COUNTKEYSINSLOT",
        3,
        Flags::STALE,
        &["slow"],
        "Returns the number of keys in a hash slot.",
        "3.0.0",
        countkeysinslot,
    ),
    row(
        "CLUSTER|GETKEYSINSLOT",
        4,
        Flags::STALE,
        &["slow"],
        "Returns the key names in a hash slot.",
        "3.0.0",
        getkeysinslot,
    ),
    row(
        "CLUSTER|HELP",
        2,
        Flags::LOADING.with(Flags::STALE),
        &["slow"],
        "Returns helpful text about the different subcommands.",
        "5.0.0",
        help,
    ),
    row(
        "CLUSTER|INFO",
        2,
        Flags::STALE,
        &["slow"],
        "Returns information about the state of a node.",
        "3.0.0",
        info,
    ),
    row(
        "CLUSTER|KEYSLOT",
        3,
        Flags::STALE,
        &["slow"],
        "Returns the hash slot for a key.",
        "3.0.0",
        keyslot,
    ),
    row(
        "CLUSTER|MYID",
        2,
        Flags::STALE,
        &["slow"],
        "Returns the ID of a node.",
        "3.0.0",
        myid,
    ),
    row(
        "CLUSTER|NODES",
        2,
        Flags::STALE,
        &["slow"],
        "Returns the cluster configuration for a node.",
        "3.0.0",
        nodes,
    ),
    row(
        "CLUSTER|SHARDS",
        2,
        Flags::LOADING.with(Flags::STALE),
        &["slow"],
        "Returns the mapping of cluster slots to shards.",
        "7.0.0",
        shards,
    ),
    row(
        "CLUSTER|SLOTS",
        2,
        Flags::LOADING.with(Flags::STALE),
        &["slow"],
        "Returns the mapping of cluster slots to nodes.",
        "3.0.0",
        slots,
    ),
];

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
        name: "CLUSTER",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::None,
        acl: &["slow"],
        summary: "A container for Redis Cluster commands.",
        since: "3.0.0",
        group: "cluster",
        subcommands: CLUSTER_SUBCOMMANDS,
        handler: Handler::Conn(cluster),
    },
    row(
        "READONLY",
        1,
        Flags::FAST.with(Flags::LOADING).with(Flags::STALE),
        &["fast", "connection"],
        "Enables read-only queries for a connection to a Redis Cluster replica node.",
        "3.0.0",
        readonly,
    ),
    row(
        "READWRITE",
        1,
        Flags::FAST.with(Flags::LOADING).with(Flags::STALE),
        &["fast", "connection"],
        "Enables read-write queries for a connection to a Redis Cluster replica node.",
        "3.0.0",
        readwrite,
    ),
    row(
        "ASKING",
        1,
        Flags::FAST,
        &["fast", "connection"],
        "Signals that a cluster client is following an -ASK redirect.",
        "3.0.0",
        asking,
    ),
];

/// Config epoch this node reports (NODES, INFO).
const CONFIG_EPOCH: u64 = 0;

/// `CLUSTER <subcommand> [args]`
///
/// Runs the subcommand's row. The IO layer has already checked that the
/// subcommand exists and its arity (so a bad one also dooms a MULTI, as in
/// Redis); the checks are repeated here so the handler stands on its own.
///
/// # Errors
/// `ERR unknown subcommand '<sub>'. Try CLUSTER HELP.`;
/// `ERR wrong number of arguments for 'cluster|<sub>' command`.
/// # Source
/// `clusterCommand`, redis/src/cluster.c (7.0); subcommand lookup in `processCommand`.
fn cluster(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let Some(sub_name) = argv.get(1) else {
        return Err(CmdError::arity("cluster"));
    };
    let Some(sub) = CLUSTER_SUBCOMMANDS.iter().find(|s| {
        s.name
            .split_once('|')
            .is_some_and(|(_, n)| n.as_bytes().eq_ignore_ascii_case(sub_name))
    }) else {
        return Err(CmdError::UnknownSubcommand {
            cmd: "CLUSTER".into(),
            sub: text(sub_name),
        });
    };
    if !sub.arity_ok(argv.len()) {
        return Err(CmdError::arity(sub.name));
    }
    match sub.handler {
        Handler::Conn(f) => f(cx, argv),
        // Every CLUSTER subcommand row is a Conn row.
        Handler::Keyed { .. } | Handler::Blocking { .. } => {
            Err(CmdError::msg("ERR internal: keyed CLUSTER subcommand"))
        }
    }
}

/// `ERR This instance has cluster support disabled` unless the node is in
/// cluster mode: `--cluster-mode emulated` (or `cluster-enabled yes`), or a
/// `cluster-config` topology. Redis standalone answers every CLUSTER
/// subcommand, READONLY, READWRITE and ASKING this way.
///
/// # Source
/// `clusterCommand` / `readonlyCommand` / `askingCommand`, redis/src/cluster.c (7.0).
fn cluster_enabled(cx: &ConnCtx<'_>) -> Result<(), CmdError> {
    if is_cluster_mode(cx.shared) {
        Ok(())
    } else {
        Err(CmdError::msg(
            "ERR This instance has cluster support disabled",
        ))
    }
}

/// Whether this node presents itself as a cluster node (INFO `cluster_enabled`).
pub fn is_cluster_mode(shared: &crate::server::Shared) -> bool {
    shared.cluster.is_some()
        || shared
            .config
            .read()
            .map(|c| c.cluster_emulated)
            .unwrap_or(false)
}

/// `CLUSTER KEYSLOT key`
///
/// # Reply
/// Integer: the hash slot of `key` (CRC16/XMODEM mod 16384, `{hash tag}` honoured).
/// # Source
/// `CLUSTER KEYSLOT` in `clusterCommand`, redis/src/cluster.c; `keyHashSlot`.
fn keyslot(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let key = argv
        .get(2)
        .ok_or_else(|| CmdError::arity("cluster|keyslot"))?;
    Ok(Reply::Int(slot_of(key).0.into()).into())
}

/// One node as CLUSTER SLOTS/SHARDS/NODES describe it.
struct NodeView {
    id: String,
    ip: String,
    port: u16,
    /// Cluster bus port: `port + 10000`, or 0 when that does not fit.
    cport: u16,
    /// Inclusive slot ranges, sorted.
    ranges: Vec<(u16, u16)>,
    epoch: u64,
    myself: bool,
}

/// The cluster as this node sees it: the topology's nodes in file order, or
/// (no topology) this node alone owning every slot, advertised at the local
/// address of the connection asking.
fn view(cx: &ConnCtx<'_>) -> Vec<NodeView> {
    match &cx.shared.cluster {
        Some(topo) => topo
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeView {
                id: n.id.clone(),
                ip: n.host.clone(),
                port: n.port,
                cport: n.cport(),
                ranges: n.sorted_ranges(),
                epoch: n.epoch,
                myself: i == topo.myself,
            })
            .collect(),
        None => {
            let port = cx.shared.addr.port();
            vec![NodeView {
                id: cx.shared.run_id.clone(),
                ip: cx
                    .conn
                    .shared
                    .laddr
                    .ip()
                    .map(|ip| ip.to_string())
                    .unwrap_or_else(|| cx.shared.addr.ip().to_string()),
                port,
                cport: port.checked_add(10000).unwrap_or(0),
                ranges: vec![(0, SLOTS - 1)],
                epoch: CONFIG_EPOCH,
                myself: true,
            }]
        }
    }
}

/// `CLUSTER SLOTS`
///
/// # Reply
/// One element per contiguous slot range, by first slot:
/// `[first, last, [ip, port, node-id, {}]]` (the last element is the node's
/// metadata map, empty because no hostname is set). A one-node server answers
/// `[[0, 16383, [ip, port, id, {}]]]`.
/// # Source
/// `clusterReplyMultiBulkSlots`, redis/src/cluster.c (7.0).
fn slots(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let nodes = view(cx);
    let mut ranges: Vec<(u16, u16, &NodeView)> = nodes
        .iter()
        .flat_map(|n| n.ranges.iter().map(move |&(a, b)| (a, b, n)))
        .collect();
    ranges.sort_by_key(|(a, _, _)| *a);
    Ok(Reply::Array(
        ranges
            .into_iter()
            .map(|(a, b, n)| {
                Reply::Array(vec![
                    Reply::Int(a.into()),
                    Reply::Int(b.into()),
                    Reply::Array(vec![
                        Reply::bulk(n.ip.clone()),
                        Reply::Int(n.port.into()),
                        Reply::bulk(n.id.clone()),
                        Reply::Map(Vec::new()),
                    ]),
                ])
            })
            .collect(),
    )
    .into())
}

/// `CLUSTER SHARDS`
///
/// # Reply
/// One element per node (each node is a shard of one master):
/// `{slots: [first, last, ...], nodes: [{id, port, ip, endpoint, role:
/// master, replication-offset: 0, health: online}]}` (maps are flat arrays in RESP2).
/// # Source
/// `clusterReplyShards` / `addNodeDetailsToShardReply`, redis/src/cluster.c (7.0).
fn shards(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let field = |name: &'static str, v: Reply| (Reply::bulk(name), v);
    let shards = view(cx)
        .into_iter()
        .map(|n| {
            let slots = n
                .ranges
                .iter()
                .flat_map(|&(a, b)| [Reply::Int(a.into()), Reply::Int(b.into())])
                .collect();
            let node = Reply::Map(vec![
                field("id", Reply::bulk(n.id)),
                field("port", Reply::Int(n.port.into())),
                field("ip", Reply::bulk(n.ip.clone())),
                field("endpoint", Reply::bulk(n.ip)),
                field("role", Reply::bulk("master")),
                field("replication-offset", Reply::Int(0)),
                field("health", Reply::bulk("online")),
            ]);
            Reply::Map(vec![
                field("slots", Reply::Array(slots)),
                field("nodes", Reply::Array(vec![node])),
            ])
        })
        .collect();
    Ok(Reply::Array(shards).into())
}

/// `CLUSTER NODES`
///
/// # Reply
/// Verbatim string, one line per node ending in `\n`:
/// `<id> <ip>:<port>@<cport> <flags> - 0 0 <epoch> connected <ranges...>`,
/// flags `myself,master` for this node and `master` for the others; a range
/// is `first-last`, or one slot number.
/// # Source
/// `clusterGenNodesDescription`, redis/src/cluster.c (7.0).
fn nodes(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let mut out = String::new();
    for n in view(cx) {
        let flags = if n.myself { "myself,master" } else { "master" };
        out.push_str(&format!(
            "{} {}:{}@{} {flags} - 0 0 {} connected",
            n.id, n.ip, n.port, n.cport, n.epoch
        ));
        for (a, b) in n.ranges {
            if a == b {
                out.push_str(&format!(" {a}"));
            } else {
                out.push_str(&format!(" {a}-{b}"));
            }
        }
        out.push('\n');
    }
    Ok(Reply::Verbatim(out.into()).into())
}

/// `CLUSTER INFO`
///
/// # Reply
/// Verbatim string of `field:value\r\n` lines, Redis 7.0's fields in its order:
/// state ok, all 16384 slots assigned and ok, the topology's node count as
/// known nodes and size (1 without a topology), its epochs.
/// # Source
/// `genClusterInfoString`, redis/src/cluster.c (7.0).
fn info(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let (nodes, current_epoch, my_epoch) = match &cx.shared.cluster {
        Some(t) => (t.nodes.len(), t.current_epoch(), t.me().epoch),
        None => (1, CONFIG_EPOCH, CONFIG_EPOCH),
    };
    let fields: [(&str, String); 12] = [
        ("cluster_state", "ok".into()),
        ("cluster_slots_assigned", SLOTS.to_string()),
        ("cluster_slots_ok", SLOTS.to_string()),
        ("cluster_slots_pfail", "0".into()),
        ("cluster_slots_fail", "0".into()),
        ("cluster_known_nodes", nodes.to_string()),
        ("cluster_size", nodes.to_string()),
        ("cluster_current_epoch", current_epoch.to_string()),
        ("cluster_my_epoch", my_epoch.to_string()),
        ("cluster_stats_messages_sent", "0".into()),
        ("cluster_stats_messages_received", "0".into()),
        ("total_cluster_links_buffer_limit_exceeded", "0".into()),
    ];
    let mut out = String::new();
    for (name, value) in fields {
        out.push_str(name);
        out.push(':');
        out.push_str(&value);
        out.push_str("\r\n");
    }
    Ok(Reply::Verbatim(out.into()).into())
}

/// `CLUSTER MYID`
///
/// # Reply
/// Bulk string: this node's 40-hex-character id (SHA-1 of its topology name;
/// the server's `run_id` without a topology).
fn myid(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let id = match &cx.shared.cluster {
        Some(t) => t.me().id.clone(),
        None => cx.shared.run_id.clone(),
    };
    Ok(Reply::bulk(id).into())
}

/// A slot number argument: an integer (`ERR value is not an integer or out of
/// range`) in `0..16384` (else `invalid`).
fn slot_arg(arg: &[u8], invalid: &'static str) -> Result<Slot, CmdError> {
    let n = int_arg(arg)?;
    u16::try_from(n)
        .ok()
        .filter(|&s| s < SLOTS)
        .map(Slot)
        .ok_or(CmdError::msg(invalid))
}

/// Run `req` on the shard owning `slot` and answer with its reply.
fn on_slot_shard(
    cx: &ConnCtx<'_>,
    slot: Slot,
    f: impl FnOnce(&mut ShardDb, &crate::cmd::ExecCtx) -> Reply + Send + 'static,
) -> Action {
    let merge: Merge =
        Box::new(|parts: Vec<Reply>| parts.into_iter().next().unwrap_or(Reply::NullBulk));
    Action::FanOut {
        parts: vec![(cx.shared.slot_map.shard(slot), on_shard(f))],
        merge,
    }
}

/// `CLUSTER COUNTKEYSINSLOT slot`
///
/// Counts the live keys of the selected database in `slot`, on the shard owning it.
///
/// # Reply
/// Integer.
/// # Errors
/// `ERR value is not an integer or out of range`; `ERR Invalid slot` outside `0..16384`.
/// # Source
/// `CLUSTER COUNTKEYSINSLOT` in `clusterCommand`, redis/src/cluster.c (7.0).
fn countkeysinslot(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let arg = argv
        .get(2)
        .ok_or_else(|| CmdError::arity("cluster|countkeysinslot"))?;
    let slot = slot_arg(arg, "ERR Invalid slot")?;
    Ok(on_slot_shard(cx, slot, move |db, ecx| {
        Reply::Int(apply_keys_in_slot(db, ecx, slot, usize::MAX).len() as i64)
    }))
}

/// `CLUSTER GETKEYSINSLOT slot count`
///
/// Lists up to `count` live keys of the selected database in `slot`, on the
/// shard owning it (in the shard's scan order, not Redis's insertion order).
///
/// # Reply
/// Array of bulk strings.
/// # Errors
/// `ERR value is not an integer or out of range` for a non-integer slot or
/// count; `ERR Invalid slot or number of keys` for a slot outside `0..16384`
/// or a negative count.
/// # Source
/// `CLUSTER GETKEYSINSLOT` in `clusterCommand`, redis/src/cluster.c (7.0).
fn getkeysinslot(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let (Some(slot), Some(count)) = (argv.get(2), argv.get(3)) else {
        return Err(CmdError::arity("cluster|getkeysinslot"));
    };
    const INVALID: &str = "ERR Invalid slot or number of keys";
    let slot = int_arg(slot)?;
    let count = int_arg(count)?;
    let slot = u16::try_from(slot)
        .ok()
        .filter(|&s| s < SLOTS)
        .map(Slot)
        .ok_or(CmdError::msg(INVALID))?;
    let count = usize::try_from(count).map_err(|_| CmdError::msg(INVALID))?;
    Ok(on_slot_shard(cx, slot, move |db, ecx| {
        Reply::Array(
            apply_keys_in_slot(db, ecx, slot, count)
                .into_iter()
                .map(Reply::Bulk)
                .collect(),
        )
    }))
}

/// Up to `limit` live keys of database `cx.db` in `slot` (shard side; expired
/// keys awaiting removal are skipped).
pub fn apply_keys_in_slot(
    db: &ShardDb,
    cx: &crate::cmd::ExecCtx,
    slot: Slot,
    limit: usize,
) -> Vec<Bytes> {
    let mut out = Vec::new();
    if limit == 0 {
        return out;
    }
    db.scan_from(cx.db, (slot.0, 0), cx.now_ms, |(s, _), key, _| {
        if s != slot.0 {
            return false;
        }
        out.push(key.clone());
        out.len() < limit
    });
    out
}

/// `CLUSTER HELP`
///
/// # Reply
/// Array of simple strings describing the subcommands this node supports.
fn help(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    const LINES: &[&str] = &[
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Reply::Array(LINES.iter().copied().map(Reply::simple).collect()).into())
}

/// `READONLY` — marks the connection as allowing replica reads. `+OK`.
/// (This node is a master, so reads were always allowed.)
fn readonly(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    cx.conn.readonly = true;
    Ok(Reply::Ok.into())
}

/// `READWRITE` — clears the READONLY mark. `+OK`.
fn readwrite(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    cx.conn.readonly = false;
    Ok(Reply::Ok.into())
}

/// `ASKING` — announces an -ASK redirect follow-up. `+OK` (no slot migrations
/// exist yet, so it changes nothing).
fn asking(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    Ok(Reply::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::ExecCtx;
    use crate::route::slot::ShardId;
    use crate::shard::db::Value;

    #[test]
    fn keys_in_slot_skips_expired_and_other_slots() {
        let mut db = ShardDb::new(ShardId(0), 1, 1);
        let slot = slot_of(b"{t}a");
        for (k, exp) in [
            ("{t}a", None),
            ("{t}b", Some(50)),
            ("{t}c", None),
            ("x", None),
        ] {
            db.set(0, Bytes::from(k), Value::Str(Bytes::new()), exp);
        }
        let cx = ExecCtx::at(0, 100);
        let mut keys = apply_keys_in_slot(&db, &cx, slot, usize::MAX);
        keys.sort();
        assert_eq!(keys, vec![Bytes::from("{t}a"), Bytes::from("{t}c")]);
        assert_eq!(apply_keys_in_slot(&db, &cx, slot, 1).len(), 1);
        assert!(apply_keys_in_slot(&db, &cx, slot, 0).is_empty());
    }

    #[test]
    fn slot_args() {
        assert_eq!(slot_arg(b"16383", "E"), Ok(Slot(16383)));
        assert_eq!(slot_arg(b"16384", "E"), Err(CmdError::msg("E")));
        assert_eq!(slot_arg(b"-1", "E"), Err(CmdError::msg("E")));
        assert_eq!(slot_arg(b"x", "E"), Err(CmdError::NotInteger));
    }
}
