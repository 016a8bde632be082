//! CLUSTER commands, READONLY, READWRITE, ASKING.
//!
//! A standalone node (the default) answers them as Redis standalone does
//! (`ERR This instance has cluster support disabled`, INFO
//! `cluster_enabled:0`). A cluster node (`cluster-enabled yes`, or a static
//! `cluster-config` topology; see [`crate::cluster`]) answers every
//! subcommand `redis-cli --cluster` drives: ADDSLOTS, ADDSLOTSRANGE,
//! DELSLOTS, DELSLOTSRANGE, FLUSHSLOTS, MEET, FORGET, SET-CONFIG-EPOCH,
//! BUMPEPOCH, SETSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, MYID, MYSHARDID,
//! RESET, SAVECONFIG, LINKS, NODES, SLOTS, SHARDS, INFO, KEYSLOT,
//! COUNT-FAILURE-REPORTS, REPLICAS. With `--cluster-mode emulated` (the idea
//! is Dragonfly's) a node presents itself as a fixed Redis Cluster of one
//! master owning all 16384 slots, so `redis-cli --cluster check` and
//! redis-py's `RedisCluster` accept it; its data path is unchanged (no
//! CROSSSLOT checks, SELECT allowed); the subcommands that change a cluster
//! are refused there.
//!
//! CLUSTER subcommands answer on the connection's thread, under the cluster
//! state's lock; COUNTKEYSINSLOT, GETKEYSINSLOT and SETSLOT NODE run on the
//! shard owning the slot (they need its keys); RESET and FLUSHSLOTS count
//! every shard's keys first. Redirections (MOVED, ASK, TRYAGAIN, CROSSSLOT,
//! CLUSTERDOWN) are decided before a command runs ([`crate::io::gates`]).
//!
//! Reply shapes and error texts are Redis 7.0's for a cluster node with no
//! hostname set (the differential tests compare them with redis-server's);
//! MYSHARDID is Redis 7.2's. An emulated node's id is the server's `run_id`,
//! its advertised address the local address of the connection asking, its
//! config epoch 0, as on a Redis node given every slot with `CLUSTER
//! ADDSLOTSRANGE 0 16383`. The cluster bus port is `port + 10000` unless
//! `cluster-port` says otherwise.

use bytes::Bytes;

use std::sync::Arc;

use crate::cluster::{Changed, Cluster, ClusterState};
use crate::cmd::args::{int_arg, text};
use crate::cmd::{on_shard, Action, CommandSpec, ConnCtx, Flags, Handler, Keys, Merge};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::route::slot::{slot_of, ShardId, Slot, SLOTS};
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

/// A row that changes the cluster configuration (admin, as in Redis).
const fn admin(
    name: &'static str,
    arity: i16,
    summary: &'static str,
    since: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    row(
        name,
        arity,
        Flags::ADMIN.with(Flags::STALE).with(Flags::NOSCRIPT),
        &["admin", "slow", "dangerous"],
        summary,
        since,
        f,
    )
}

/// `CLUSTER` subcommand rows (`CLUSTER|KEYSLOT`, ...).
const CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    admin(
        "CLUSTER|ADDSLOTS",
        -3,
        "Assigns new hash slots to a node.",
        "3.0.0",
        addslots,
    ),
    admin(
        "CLUSTER|ADDSLOTSRANGE",
        -4,
        "Assigns new hash slot ranges to a node.",
        "7.0.0",
        addslotsrange,
    ),
    admin(
        "CLUSTER|BUMPEPOCH",
        2,
        "Advances the cluster config epoch.",
        "3.0.0",
        bumpepoch,
    ),
    admin(
        "CLUSTER|COUNT-FAILURE-REPORTS",
        3,
        "Returns the number of active failure reports active for a node.",
        "3.0.0",
        count_failure_reports,
    ),
    admin(
        "CLUSTER|DELSLOTS",
        -3,
        "Sets hash slots as unbound for a node.",
        "3.0.0",
        delslots,
    ),
    admin(
        "CLUSTER|DELSLOTSRANGE",
        -4,
        "Sets hash slot ranges as unbound for a node.",
        "7.0.0",
        delslotsrange,
    ),
    admin(
        "CLUSTER|FLUSHSLOTS",
        2,
        "Deletes all slots information from a node.",
        "3.0.0",
        flushslots,
    ),
    admin(
        "CLUSTER|FORGET",
        3,
        "Removes a node from the nodes table.",
        "3.0.0",
        forget,
    ),
    row(
        "CLUSTER|LINKS",
        2,
        Flags::STALE,
        &["slow"],
        "Returns a list of all TCP links to and from peer nodes.",
        "7.0.0",
        links,
    ),
    admin(
        "CLUSTER|MEET",
        -4,
        "Forces a node to handshake with another node.",
        "3.0.0",
        meet,
    ),
    row(
        "CLUSTER|MYSHARDID",
        2,
        Flags::STALE,
        &["slow"],
        "Returns the shard ID of a node.",
        "7.2.0",
        myshardid,
    ),
    row(
        "CLUSTER|REPLICAS",
        3,
        Flags::ADMIN.with(Flags::STALE),
        &["admin", "slow", "dangerous"],
        "Lists the replica nodes of a master node.",
        "5.0.0",
        replicas,
    ),
    admin("CLUSTER|RESET", -2, "Resets a node.", "3.0.0", reset),
    admin(
        "CLUSTER|SAVECONFIG",
        2,
        "Forces a node to save the cluster configuration to disk.",
        "3.0.0",
        saveconfig,
    ),
    admin(
        "CLUSTER|SET-CONFIG-EPOCH",
        3,
        "Sets the configuration epoch for a new node.",
        "3.0.0",
        set_config_epoch,
    ),
    admin(
        "CLUSTER|SETSLOT",
        -4,
        "Binds a hash slot to a node.",
        "3.0.0",
        setslot,
    ),
    row(
        "CLUSTER|SLAVES",
        3,
        Flags::ADMIN.with(Flags::STALE),
        &["admin", "slow", "dangerous"],
        "Lists the replica nodes of a master node.",
        "3.0.0",
        replicas,
    ),
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
        return Err(CmdError::unknown_subcommand("CLUSTER", sub_name));
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

/// One node as CLUSTER SLOTS/SHARDS describe it.
struct NodeView {
    id: String,
    ip: String,
    port: u16,
    /// Inclusive slot ranges, sorted.
    ranges: Vec<(u16, u16)>,
    shard_id: String,
}

/// The address of this node as the asking client reached it (a cluster
/// node that has not learnt its own address yet, or an emulated one).
fn local_ip(cx: &ConnCtx<'_>) -> String {
    cx.conn
        .shared
        .laddr
        .ip()
        .map(|ip| ip.to_string())
        .unwrap_or_else(|| cx.shared.addr.ip().to_string())
}

/// The cluster as this node sees it: every known node (handshakes left
/// out), or (emulated) this node alone owning every slot, advertised at the
/// local address of the connection asking.
fn view(cx: &ConnCtx<'_>) -> Vec<NodeView> {
    match &cx.shared.cluster {
        Some(c) => {
            let st = c.lock();
            let mut nodes: Vec<NodeView> = st
                .nodes
                .values()
                .filter(|n| !n.handshake)
                .map(|n| NodeView {
                    id: n.id.to_string(),
                    ip: if n.ip.is_empty() {
                        local_ip(cx)
                    } else {
                        n.ip.clone()
                    },
                    port: n.port,
                    ranges: st.ranges_of(&n.id),
                    shard_id: n.shard_id(),
                })
                .collect();
            // By first slot served (nodes with none last): the order Redis
            // leaves to its hash table, made stable.
            nodes.sort_by_key(|n| n.ranges.first().map_or(u32::MAX, |r| u32::from(r.0)));
            nodes
        }
        None => vec![NodeView {
            id: cx.shared.run_id.clone(),
            ip: local_ip(cx),
            port: cx.shared.addr.port(),
            ranges: vec![(0, SLOTS - 1)],
            shard_id: crate::cluster::sha1_hex(&format!("shard:{}", cx.shared.run_id)),
        }],
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
/// Verbatim string, one line per known node ending in `\n`:
/// `<id> <ip>:<port>@<cport> <flags> - <ping-sent> <pong-recv> <config-epoch>
/// <link-state> <slot-range>...`; flags `myself,master` for this node,
/// `master`, `handshake`, `fail?`, `noaddr`; a range is `first-last` or one
/// slot; this node's slots in transit follow as `[slot->-<id>]` (migrating)
/// and `[slot-<-<id>]` (importing).
/// # Source
/// `clusterGenNodesDescription`, redis/src/cluster.c (7.0).
fn nodes(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let mut out = String::new();
    match &cx.shared.cluster {
        Some(c) => {
            let st = c.lock();
            // By first slot served (nodes with none last), as CLUSTER SLOTS.
            let mut lines: Vec<(u32, String)> = st
                .nodes
                .values()
                .map(|n| {
                    let first = st
                        .ranges_of(&n.id)
                        .first()
                        .map_or(u32::MAX, |r| u32::from(r.0));
                    (first, st.node_line(n, false))
                })
                .collect();
            lines.sort();
            for (_, line) in lines {
                out.push_str(&line);
                out.push('\n');
            }
        }
        None => {
            for n in view(cx) {
                out.push_str(&format!(
                    "{} {}:{}@{} myself,master - 0 0 {CONFIG_EPOCH} connected 0-16383\n",
                    n.id,
                    n.ip,
                    n.port,
                    n.port.checked_add(10000).unwrap_or(0),
                ));
            }
        }
    }
    Ok(Reply::Verbatim(out.into()).into())
}

/// `CLUSTER INFO`
///
/// # Reply
/// Verbatim string of `field:value\r\n` lines, Redis 7.0's fields in its
/// order: state (`ok` when every slot is served, or coverage is not
/// required), slots assigned / ok / pfail / fail, known nodes, size (masters
/// serving slots), current and own config epochs, bus messages sent and
/// received per type (ping, pong, meet, update; only those seen) and in
/// all. An emulated node reports one node owning every slot.
/// # Source
/// `genClusterInfoString`, redis/src/cluster.c (7.0).
fn info(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let all = SLOTS as usize;
    let (ok, assigned, pfail, known, size, current_epoch, my_epoch, messages) =
        match &cx.shared.cluster {
            Some(c) => {
                let st = c.lock();
                (
                    st.is_ok(),
                    st.assigned_slots(),
                    st.pfail_slots(),
                    st.nodes.len(),
                    st.size(),
                    st.current_epoch,
                    st.me().config_epoch,
                    c.messages.info_fields(),
                )
            }
            None => (
                true,
                all,
                0,
                1,
                1,
                CONFIG_EPOCH,
                CONFIG_EPOCH,
                crate::cluster::MessageStats::default().info_fields(),
            ),
        };
    let mut fields: Vec<(String, String)> = vec![
        (
            "cluster_state".into(),
            if ok { "ok" } else { "fail" }.into(),
        ),
        ("cluster_slots_assigned".into(), assigned.to_string()),
        ("cluster_slots_ok".into(), (assigned - pfail).to_string()),
        ("cluster_slots_pfail".into(), pfail.to_string()),
        ("cluster_slots_fail".into(), "0".into()),
        ("cluster_known_nodes".into(), known.to_string()),
        ("cluster_size".into(), size.to_string()),
        ("cluster_current_epoch".into(), current_epoch.to_string()),
        ("cluster_my_epoch".into(), my_epoch.to_string()),
    ];
    fields.extend(messages.into_iter().map(|(k, v)| (k, v.to_string())));
    fields.push((
        "total_cluster_links_buffer_limit_exceeded".into(),
        "0".into(),
    ));
    let mut out = String::new();
    for (name, value) in fields {
        out.push_str(&name);
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
        Some(c) => c.lock().myself.to_string(),
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
        "ADDSLOTS <slot> [<slot> ...]",
        "    Assign slots to current node.",
        "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
        "    Assign slots which are between <start-slot> and <end-slot> to current node.",
        "BUMPEPOCH",
        "    Advance the cluster config epoch.",
        "COUNT-FAILURE-REPORTS <node-id>",
        "    Return number of failure reports for <node-id>.",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "DELSLOTS <slot> [<slot> ...]",
        "    Delete slots information from current node.",
        "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
        "    Delete slots information which are between <start-slot> and <end-slot>.",
        "FLUSHSLOTS",
        "    Delete current node own slots information.",
        "FORGET <node-id>",
        "    Remove a node from the cluster.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "LINKS",
        "    Return information about all network links between this node and its peers.",
        "MEET <ip> <port> [<bus-port>]",
        "    Connect nodes into a working cluster.",
        "MYID",
        "    Return the node id.",
        "MYSHARDID",
        "    Return the node's shard id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "REPLICAS <node-id>",
        "    Return <node-id> replicas (none: shardstream has no replicas).",
        "RESET [HARD|SOFT]",
        "    Reset current node (default: soft).",
        "SAVECONFIG",
        "    Force saving cluster configuration on disk.",
        "SET-CONFIG-EPOCH <epoch>",
        "    Set config epoch of current node.",
        "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
        "    Set slot state.",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
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

/// `ASKING` — the client follows an `-ASK` redirect: its next command
/// (or, inside MULTI, the commands up to EXEC) may run on a slot this node
/// is importing. `+OK`.
///
/// # Source
/// `askingCommand` and `getNodeByQuery`, redis/src/cluster.c (7.x).
fn asking(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    cx.conn.asking = true;
    Ok(Reply::Ok.into())
}

/// The node's cluster, for the subcommands that change it: a node started
/// with `cluster-enabled yes` (or a static topology).
///
/// # Errors
/// `ERR This instance has cluster support disabled` on a standalone node;
/// on an emulated one (a fixed one-node cluster) the subcommand is refused
/// too, naming the setting that makes a real cluster node.
fn real_cluster(cx: &ConnCtx<'_>, sub: &str) -> Result<Arc<Cluster>, CmdError> {
    cluster_enabled(cx)?;
    cx.shared.cluster.clone().ok_or_else(|| {
        CmdError::msg(format!(
            "ERR CLUSTER {sub} needs a cluster node (cluster-enabled yes); this node emulates a one-node cluster"
        ))
    })
}

/// Redis's `addReplySubcommandSyntaxError` for a CLUSTER subcommand given
/// the wrong number of arguments past its table arity (MEET, RESET).
fn subcommand_syntax(argv: &[Bytes]) -> CmdError {
    CmdError::subcommand_syntax("CLUSTER", &argv[1])
}

/// Parse slot numbers (`ERR Invalid or out of range slot`).
fn slot_list(args: &[Bytes]) -> Result<Vec<u16>, CmdError> {
    args.iter()
        .map(|a| crate::cluster::state::slot_arg(a).map_err(CmdError::msg))
        .collect()
}

/// Parse `start end` pairs into the slots they cover.
///
/// # Errors
/// `ERR Invalid or out of range slot`; `ERR start slot number N is greater
/// than end slot number M`.
fn slot_ranges(args: &[Bytes], sub: &str) -> Result<Vec<u16>, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::arity(&format!("cluster|{sub}")));
    }
    let mut out = Vec::new();
    for pair in args.chunks(2) {
        let a = crate::cluster::state::slot_arg(&pair[0]).map_err(CmdError::msg)?;
        let b = crate::cluster::state::slot_arg(&pair[1]).map_err(CmdError::msg)?;
        if a > b {
            return Err(CmdError::msg(format!(
                "ERR start slot number {a} is greater than end slot number {b}"
            )));
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// Apply a state change and answer `+OK`, or its error.
fn change_ok(
    cluster: &Cluster,
    f: impl FnOnce(&mut ClusterState) -> Result<Changed, String>,
) -> Result<Action, CmdError> {
    cluster
        .change(|st| match f(st) {
            Ok(c) => (Ok(()), c),
            Err(e) => (Err(e), Changed::NONE),
        })
        .map_err(CmdError::msg)?;
    Ok(Reply::Ok.into())
}

/// ADDSLOTS, ADDSLOTSRANGE, DELSLOTS, DELSLOTSRANGE: parse the slots (one
/// by one, or `start end` pairs with `ranges`) and add them to this node or
/// unassign them.
fn change_slots(
    cx: &ConnCtx<'_>,
    argv: &[Bytes],
    sub: &str,
    ranges: bool,
    add: bool,
) -> Result<Action, CmdError> {
    let c = real_cluster(cx, sub)?;
    let slots = if ranges {
        slot_ranges(&argv[2..], &sub.to_ascii_lowercase())?
    } else {
        slot_list(&argv[2..])?
    };
    change_ok(&c, |st| {
        if add {
            st.add_slots(&slots)
        } else {
            st.del_slots(&slots)
        }
    })
}

/// `CLUSTER ADDSLOTS slot [slot ...]` — this node serves the given slots.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR Invalid or out of range slot`; `ERR Slot N specified multiple
/// times`; `ERR Slot N is already busy`. Nothing changes on error.
/// # Source
/// `CLUSTER ADDSLOTS`, redis.io and redis/src/cluster.c (7.0).
fn addslots(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    change_slots(cx, argv, "ADDSLOTS", false, true)
}

/// `CLUSTER ADDSLOTSRANGE start end [start end ...]` — ADDSLOTS for ranges.
///
/// # Errors
/// As ADDSLOTS; `ERR start slot number N is greater than end slot number M`.
/// # Source
/// `CLUSTER ADDSLOTSRANGE`, redis.io (7.0).
fn addslotsrange(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    change_slots(cx, argv, "ADDSLOTSRANGE", true, true)
}

/// `CLUSTER DELSLOTS slot [slot ...]` — the slots become unassigned here.
///
/// # Errors
/// `ERR Invalid or out of range slot`; `ERR Slot N specified multiple
/// times`; `ERR Slot N is already unassigned`.
/// # Source
/// `CLUSTER DELSLOTS`, redis.io (3.0).
fn delslots(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    change_slots(cx, argv, "DELSLOTS", false, false)
}

/// `CLUSTER DELSLOTSRANGE start end [start end ...]` — DELSLOTS for ranges.
///
/// # Source
/// `CLUSTER DELSLOTSRANGE`, redis.io (7.0).
fn delslotsrange(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    change_slots(cx, argv, "DELSLOTSRANGE", true, false)
}

/// `CLUSTER FLUSHSLOTS` — unassign every slot of this node; its databases
/// must be empty.
///
/// # Errors
/// `ERR DB must be empty to perform CLUSTER FLUSHSLOTS.`
/// # Source
/// `CLUSTER FLUSHSLOTS`, redis.io (3.0).
fn flushslots(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "FLUSHSLOTS")?;
    Ok(when_empty(
        cx,
        "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.",
        move || {
            c.change(|st| {
                let me = st.myself.clone();
                let mine: Vec<u16> = (0..SLOTS).filter(|&s| st.owner(s) == Some(&me)).collect();
                (Reply::Ok, st.del_slots(&mine).unwrap_or(Changed::NONE))
            })
        },
    ))
}

/// Count every key of every shard and database; `then` runs when there are
/// none, else the reply is `refusal`.
fn when_empty(
    cx: &ConnCtx<'_>,
    refusal: &'static str,
    then: impl FnOnce() -> Reply + Send + 'static,
) -> Action {
    let parts = (0..cx.shared.shards)
        .map(|s| {
            (
                ShardId(s),
                on_shard(|db: &mut ShardDb, _cx: &crate::cmd::ExecCtx| {
                    let n: usize = (0..db.databases()).map(|i| db.keyspace(i).len()).sum();
                    Reply::Int(n as i64)
                }),
            )
        })
        .collect();
    let merge: Merge = Box::new(move |replies: Vec<Reply>| {
        let keys: i64 = replies
            .iter()
            .map(|r| if let Reply::Int(n) = r { *n } else { 0 })
            .sum();
        if keys > 0 {
            Reply::Error(CmdError::msg(refusal))
        } else {
            then()
        }
    });
    Action::FanOut { parts, merge }
}

/// `CLUSTER MEET ip port [cluster-bus-port]` — start a handshake with the
/// node at that address; it joins this node's cluster once it answers.
///
/// # Reply
/// `+OK` (the handshake goes on in the background).
/// # Errors
/// `ERR Invalid TCP base port specified: P`; `ERR Invalid TCP bus port specified:
/// P`; `ERR Invalid node address specified: ip:port`.
/// # Source
/// `CLUSTER MEET`, redis.io and redis/src/cluster.c (7.0).
fn meet(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "MEET")?;
    if argv.len() > 5 {
        return Err(subcommand_syntax(argv));
    }
    // Redis parses the ports as integers first, then refuses an address
    // it cannot reach (bad IP, port out of 1-65535) as a whole.
    let int_of = |a: &Bytes, what: &str| {
        text(a).parse::<i64>().map_err(|_| {
            CmdError::msg(format!(
                "ERR Invalid TCP {what} port specified: {}",
                text(a)
            ))
        })
    };
    let port = int_of(&argv[3], "base")?;
    let cport = match argv.get(4) {
        Some(a) => int_of(a, "bus")?,
        None => port + 10000,
    };
    let ip = text(&argv[2]);
    let valid = |p: i64| (1..=65535).contains(&p);
    if ip.parse::<std::net::IpAddr>().is_err() || !valid(port) || !valid(cport) {
        return Err(CmdError::msg(format!(
            "ERR Invalid node address specified: {ip}:{}",
            text(&argv[3])
        )));
    }
    let (port, cport) = (port as u16, cport as u16);
    let now = crate::shard::now_ms();
    c.change(|st| ((), st.meet(&ip, port, cport, now)));
    c.wake_bus();
    Ok(Reply::Ok.into())
}

/// `CLUSTER FORGET node-id` — drop a node from this node's table (and keep
/// it out for 60 s, so gossip does not bring it back meanwhile).
///
/// # Errors
/// `ERR Unknown node <id>`; `ERR I tried hard but I can't forget myself...`.
/// # Source
/// `CLUSTER FORGET`, redis.io (3.0).
fn forget(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "FORGET")?;
    let now = crate::shard::now_ms();
    change_ok(&c, |st| st.forget(&argv[2], now))
}

/// `CLUSTER SET-CONFIG-EPOCH epoch` — a fresh node's config epoch (what
/// `redis-cli --cluster create` gives each node so none collide).
///
/// # Errors
/// `ERR value is not an integer or out of range`; `ERR Invalid config epoch
/// specified: N`; `ERR The user can assign a config epoch only when the node
/// does not know any other node.`; `ERR Node config epoch is already non-zero`.
/// # Source
/// `CLUSTER SET-CONFIG-EPOCH`, redis.io (3.0).
fn set_config_epoch(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "SET-CONFIG-EPOCH")?;
    let epoch = int_arg(&argv[2])?;
    change_ok(&c, |st| st.set_config_epoch(epoch))
}

/// `CLUSTER BUMPEPOCH` — take a new config epoch unless this node already
/// holds the greatest.
///
/// # Reply
/// Simple string `BUMPED <epoch>` or `STILL <epoch>`.
/// # Source
/// `CLUSTER BUMPEPOCH`, redis.io (3.0).
fn bumpepoch(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "BUMPEPOCH")?;
    let (bumped, epoch) = c.change(|st| {
        let bumped = st.bump_epoch();
        let epoch = st.me().config_epoch;
        let changed = if bumped { Changed::ALL } else { Changed::NONE };
        ((bumped, epoch), changed)
    });
    let word = if bumped { "BUMPED" } else { "STILL" };
    Ok(Reply::Simple(format!("{word} {epoch}").into_bytes().into()).into())
}

/// `CLUSTER SETSLOT slot IMPORTING node-id | MIGRATING node-id | NODE
/// node-id | STABLE` — move a slot between nodes (what `redis-cli --cluster
/// reshard` drives, with MIGRATE in between).
///
/// NODE runs on the shard owning the slot, which counts the keys still
/// here: a node may not give away a slot it still holds keys of.
///
/// # Reply
/// `+OK`.
/// # Errors
/// `ERR Invalid or out of range slot`; `ERR I'm not the owner of hash slot
/// N`; `ERR I'm already the owner of hash slot N`; `ERR I don't know about
/// node <id>`; `ERR Unknown node <id>`; `ERR Can't assign hashslot N to a
/// different node while I still hold keys for this hash slot.`; `ERR Invalid
/// CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP`.
/// # Source
/// `CLUSTER SETSLOT`, redis.io and redis/src/cluster.c (7.0).
fn setslot(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "SETSLOT")?;
    let slot = crate::cluster::state::slot_arg(&argv[2]).map_err(CmdError::msg)?;
    let action = text(&argv[3]).to_ascii_uppercase();
    let bad = || {
        CmdError::msg("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")
    };
    match (action.as_str(), argv.get(4), argv.len()) {
        ("MIGRATING", Some(node), 5) => change_ok(&c, |st| st.set_migrating(slot, node)),
        ("IMPORTING", Some(node), 5) => change_ok(&c, |st| st.set_importing(slot, node)),
        ("STABLE", None, 4) => change_ok(&c, |st| Ok(st.set_stable(slot))),
        ("NODE", Some(node), 5) => {
            let node = node.clone();
            Ok(on_slot_shard(cx, Slot(slot), move |db, _ecx| {
                let keys: usize = (0..db.databases())
                    .map(|i| db.keys_in_slot(i, slot).count())
                    .sum();
                match c.change(|st| match st.set_node(slot, &node, keys) {
                    Ok(ch) => (Ok(()), ch),
                    Err(e) => (Err(e), Changed::NONE),
                }) {
                    Ok(()) => Reply::Ok,
                    Err(e) => Reply::Error(CmdError::msg(e)),
                }
            }))
        }
        _ => Err(bad()),
    }
}

/// `CLUSTER MYSHARDID` — this node's shard id (40 hex characters; every
/// node is a master and its own shard).
///
/// # Source
/// `CLUSTER MYSHARDID`, redis.io (7.2).
fn myshardid(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let id = match &cx.shared.cluster {
        Some(c) => c.lock().me().shard_id(),
        None => view(cx)
            .into_iter()
            .next()
            .map(|n| n.shard_id)
            .unwrap_or_default(),
    };
    Ok(Reply::bulk(id).into())
}

/// `CLUSTER RESET [HARD | SOFT]` — forget every other node and serve no
/// slot; HARD also zeroes the epochs and takes a new node id. A node that
/// holds keys refuses.
///
/// # Errors
/// `ERR CLUSTER RESET can't be called with master nodes containing keys`;
/// `ERR syntax error`.
/// # Source
/// `CLUSTER RESET`, redis.io (3.0).
fn reset(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "RESET")?;
    if argv.len() > 3 {
        return Err(subcommand_syntax(argv));
    }
    let hard = match argv.get(2).map(|a| text(a).to_ascii_uppercase()) {
        None => false,
        Some(m) if m == "SOFT" => false,
        Some(m) if m == "HARD" => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    Ok(when_empty(
        cx,
        "ERR CLUSTER RESET can't be called with master nodes containing keys",
        move || {
            c.change(|st| ((), st.reset(hard)));
            Reply::Ok
        },
    ))
}

/// `CLUSTER SAVECONFIG` — write nodes.conf now (it is also written after
/// every change).
///
/// # Errors
/// `ERR error saving the cluster node config: <reason>`.
/// # Source
/// `CLUSTER SAVECONFIG`, redis.io (3.0).
fn saveconfig(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "SAVECONFIG")?;
    c.save()
        .map_err(|e| CmdError::msg(format!("ERR error saving the cluster node config: {e}")))?;
    Ok(Reply::Ok.into())
}

/// `CLUSTER LINKS` — this node's cluster bus connections.
///
/// # Reply
/// Array of maps: `direction` (`to`/`from`), `node`, `create-time` (ms since
/// the Unix epoch), `events`, `send-buffer-allocated`, `send-buffer-used`
/// (bytes).
/// # Source
/// `CLUSTER LINKS`, redis.io (7.0).
fn links(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    cluster_enabled(cx)?;
    let Some(c) = &cx.shared.cluster else {
        return Ok(Reply::Array(Vec::new()).into());
    };
    let links = c.links.lock().map(|l| l.clone()).unwrap_or_default();
    let field = |name: &'static str, v: Reply| (Reply::bulk(name), v);
    Ok(Reply::Array(
        links
            .into_iter()
            .map(|l| {
                Reply::Map(vec![
                    field("direction", Reply::bulk(l.direction)),
                    field("node", Reply::bulk(l.node)),
                    field("create-time", Reply::Int(l.create_time_ms as i64)),
                    field("events", Reply::bulk(l.events)),
                    field(
                        "send-buffer-allocated",
                        Reply::Int(l.send_buffer_allocated as i64),
                    ),
                    field("send-buffer-used", Reply::Int(l.send_buffer_used as i64)),
                ])
            })
            .collect(),
    )
    .into())
}

/// `CLUSTER COUNT-FAILURE-REPORTS node-id` — failure reports about a node:
/// always 0, as nodes report no failures to each other (no failover).
///
/// # Errors
/// `ERR Unknown node <id>`.
fn count_failure_reports(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "COUNT-FAILURE-REPORTS")?;
    if c.lock().node(&argv[2]).is_none() {
        return Err(CmdError::msg(format!(
            "ERR Unknown node {}",
            text(&argv[2])
        )));
    }
    Ok(Reply::Int(0).into())
}

/// `CLUSTER REPLICAS node-id` (and its old name SLAVES) — the replicas of a
/// master: none, as shardstream has no replicas.
///
/// # Errors
/// `ERR Unknown node <id>`.
fn replicas(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let c = real_cluster(cx, "REPLICAS")?;
    if c.lock().node(&argv[2]).is_none() {
        return Err(CmdError::msg(format!(
            "ERR Unknown node {}",
            text(&argv[2])
        )));
    }
    Ok(Reply::Array(Vec::new()).into())
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
