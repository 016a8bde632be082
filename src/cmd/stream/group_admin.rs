//! Group administration and introspection: XGROUP, XINFO.
//!
//! # Source
//! redis/src/t_stream.c: `xgroupCommand`, `xinfoCommand`,
//! `xinfoReplyWithStreamInfo`, `streamReplyWithCGLag`.

use crate::aof::effects::{log_group_change, GroupChange};
use crate::cmd::args::{int_arg, is};
use crate::cmd::connection::help_reply;
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::reply::Reply;
use crate::shard::db::{own_small, ShardDb};
use crate::stream::group::ConsumerGroup;
use crate::stream::id::{parse_id, parse_loose_id};
use crate::stream::{Stream, StreamId};
use bytes::Bytes;

use super::*;

pub(super) const ERR_ENTRIESREAD: &str = "ERR value for ENTRIESREAD must be positive or -1";

/// The ID argument of XGROUP CREATE / SETID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupIdArg {
    /// `$`: the stream's last ID.
    Last,
    /// An explicit ID.
    Id(StreamId),
}

/// A parsed `XGROUP` subcommand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XgroupReq {
    /// `CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]`
    Create {
        key: Bytes,
        group: Bytes,
        /// ID parse result, reported after the key checks.
        id: Result<GroupIdArg, CmdError>,
        mkstream: bool,
        entries_read: Option<u64>,
    },
    /// `SETID key group id|$ [ENTRIESREAD n]`
    SetId {
        key: Bytes,
        group: Bytes,
        id: Result<GroupIdArg, CmdError>,
        entries_read: Option<u64>,
    },
    /// `DESTROY key group`
    Destroy { key: Bytes, group: Bytes },
    /// `CREATECONSUMER key group consumer`
    CreateConsumer {
        key: Bytes,
        group: Bytes,
        consumer: Bytes,
    },
    /// `DELCONSUMER key group consumer`
    DelConsumer {
        key: Bytes,
        group: Bytes,
        consumer: Bytes,
    },
    /// `HELP`
    Help,
}

/// `XGROUP CREATE | SETID | DESTROY | CREATECONSUMER | DELCONSUMER | HELP`.
///
/// # Errors
/// Option errors, before any key lookup, as Redis: `ERR value is not an
/// integer or out of range`, `ERR value for ENTRIESREAD must be positive or
/// -1`, `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try
/// XGROUP HELP.`; `ERR unknown subcommand '<sub>'. Try XGROUP HELP.`
/// # Source
/// `xgroupCommand`.
pub fn parse_xgroup_req(argv: &[Bytes]) -> Result<XgroupReq, CmdError> {
    let sub = &argv[1];
    let argc = argv.len();
    let syntax = || CmdError::subcommand_syntax("XGROUP", sub);
    let mut mkstream = false;
    let mut entries_read: Option<u64> = None;
    let create = is(sub, "CREATE");
    let setid = is(sub, "SETID");
    if (create || setid) && argc >= 5 {
        let mut i = 5;
        while i < argc {
            if create && is(&argv[i], "MKSTREAM") {
                mkstream = true;
                i += 1;
            } else if is(&argv[i], "ENTRIESREAD") && i + 1 < argc {
                let n = int_arg(&argv[i + 1])?;
                if n < 0 && n != -1 {
                    return Err(CmdError::msg(ERR_ENTRIESREAD));
                }
                entries_read = u64::try_from(n).ok();
                i += 2;
            } else {
                return Err(syntax());
            }
        }
    }
    // CREATE takes a strict ID; SETID also takes `-` (0-0) and `+` (the
    // greatest ID), as Redis parses it (`streamParseIDOrReply`).
    let id_arg = |a: &Bytes| -> Result<GroupIdArg, CmdError> {
        if &a[..] == b"$" {
            Ok(GroupIdArg::Last)
        } else if setid {
            parse_loose_id(a, 0).map(GroupIdArg::Id)
        } else {
            parse_id(a).map(GroupIdArg::Id)
        }
    };
    let key = || argv[2].clone();
    let group = || argv[3].clone();
    if create && (5..=8).contains(&argc) {
        return Ok(XgroupReq::Create {
            key: key(),
            group: group(),
            id: id_arg(&argv[4]),
            mkstream,
            entries_read,
        });
    }
    if setid && (argc == 5 || argc == 7) {
        return Ok(XgroupReq::SetId {
            key: key(),
            group: group(),
            id: id_arg(&argv[4]),
            entries_read,
        });
    }
    if is(sub, "DESTROY") && argc == 4 {
        return Ok(XgroupReq::Destroy {
            key: key(),
            group: group(),
        });
    }
    if is(sub, "CREATECONSUMER") && argc == 5 {
        return Ok(XgroupReq::CreateConsumer {
            key: key(),
            group: group(),
            consumer: argv[4].clone(),
        });
    }
    if is(sub, "DELCONSUMER") && argc == 5 {
        return Ok(XgroupReq::DelConsumer {
            key: key(),
            group: group(),
            consumer: argv[4].clone(),
        });
    }
    if is(sub, "HELP") && argc == 2 {
        return Ok(XgroupReq::Help);
    }
    if [
        "CREATE",
        "SETID",
        "DESTROY",
        "CREATECONSUMER",
        "DELCONSUMER",
        "HELP",
    ]
    .iter()
    .any(|s| is(sub, s))
    {
        return Err(syntax());
    }
    Err(CmdError::unknown_subcommand("XGROUP", sub))
}

pub(super) fn parse_xgroup(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xgroup_req(argv)?;
    Ok(on_shard(move |db, cx| apply_xgroup(db, cx, req).into()))
}

/// A parsed `XINFO` subcommand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XinfoReq {
    /// `STREAM key [FULL [COUNT n]]`: `full` holds the COUNT (0 = all).
    Stream { key: Bytes, full: Option<u64> },
    /// `GROUPS key`
    Groups { key: Bytes },
    /// `CONSUMERS key group`
    Consumers { key: Bytes, group: Bytes },
    /// `HELP`
    Help,
}

/// `XINFO STREAM | GROUPS | CONSUMERS | HELP`.
///
/// # Errors
/// `ERR unknown subcommand or wrong number of arguments for 'stream'. Try
/// XINFO HELP.` (bad STREAM options), `ERR value is not an integer or out of
/// range` (COUNT), `ERR unknown subcommand '<sub>'. Try XINFO HELP.`
/// # Source
/// `xinfoCommand`, `xinfoReplyWithStreamInfo`.
pub fn parse_xinfo_req(argv: &[Bytes]) -> Result<XinfoReq, CmdError> {
    let sub = &argv[1];
    if is(sub, "HELP") {
        return Ok(XinfoReq::Help);
    }
    if is(sub, "GROUPS") {
        return Ok(XinfoReq::Groups {
            key: argv[2].clone(),
        });
    }
    if is(sub, "CONSUMERS") {
        return Ok(XinfoReq::Consumers {
            key: argv[2].clone(),
            group: argv[3].clone(),
        });
    }
    if is(sub, "STREAM") {
        let argc = argv.len();
        let mut full = None;
        if argc > 3 {
            if !is(&argv[3], "FULL") || (argc != 4 && argc != 6) {
                return Err(CmdError::subcommand_syntax("XINFO", sub));
            }
            let mut count = 10u64;
            if argc == 6 {
                if !is(&argv[4], "COUNT") {
                    return Err(CmdError::subcommand_syntax("XINFO", sub));
                }
                count = clamp_u64(int_arg(&argv[5])?);
            }
            full = Some(count);
        }
        return Ok(XinfoReq::Stream {
            key: argv[2].clone(),
            full,
        });
    }
    Err(CmdError::unknown_subcommand("XINFO", sub))
}

/// XINFO on the owning shard. Bad `XINFO STREAM` options are answered
/// after the key is looked up, as Redis does: a missing key is `ERR no such
/// key` and another type `WRONGTYPE` whatever the options.
pub(super) fn parse_xinfo(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    match parse_xinfo_req(argv) {
        Ok(req) => Ok(on_shard(move |db, cx| apply_xinfo(db, cx, &req).into())),
        Err(e) if is(&argv[1], "STREAM") && argv.len() > 3 => {
            let key = argv[2].clone();
            Ok(on_shard(move |db, cx| {
                let found = db.get_stream(cx.db, &key, cx.now_ms).map(|s| s.is_some());
                Reply::Error(match found {
                    Err(wrong_type) => wrong_type,
                    Ok(false) => CmdError::NoSuchKey,
                    Ok(true) => e,
                })
            }))
        }
        Err(e) => Err(e),
    }
}

/// `XGROUP` on the owning shard.
///
/// # Reply
/// CREATE / SETID: `+OK`; DESTROY: 1 or 0; CREATECONSUMER: 1 (created) or 0;
/// DELCONSUMER: how many entries the consumer had pending; HELP: lines.
/// # Errors
/// In Redis's order: `WrongType`; `ERR The XGROUP subcommand requires the key
/// to exist...` (missing key, unless CREATE MKSTREAM); `NOGROUP No such
/// consumer group '<g>' for key name '<k>'` (SETID, CREATECONSUMER,
/// DELCONSUMER); the ID error; `BUSYGROUP Consumer Group name already exists`.
/// DESTROY wakes readers blocked on the group (they get a NOGROUP error).
///
/// CREATE / SETID store an ENTRIESREAD above the stream's entries-added as
/// entries-added (Redis 8.2.2); SETID takes `-` and `+` as IDs, CREATE does not.
/// # Source
/// `xgroupCommand`; Redis 8.2.2 release notes (redis/redis#14257).
pub fn apply_xgroup(db: &mut ShardDb, cx: &ExecCtx, req: XgroupReq) -> Result<Reply, CmdError> {
    let (key, group) = match &req {
        XgroupReq::Help => return Ok(xgroup_help()),
        XgroupReq::Create { key, group, .. }
        | XgroupReq::SetId { key, group, .. }
        | XgroupReq::Destroy { key, group }
        | XgroupReq::CreateConsumer { key, group, .. }
        | XgroupReq::DelConsumer { key, group, .. } => (key.clone(), group.clone()),
    };
    let mkstream = matches!(req, XgroupReq::Create { mkstream: true, .. });
    let exists = db.get_stream(cx.db, &key, cx.now_ms)?.is_some();
    if !exists && !mkstream {
        return Err(CmdError::XgroupNoKey);
    }
    let has_group = exists
        && db
            .get_stream(cx.db, &key, cx.now_ms)?
            .is_some_and(|s| s.group(&group).is_some());
    let needs_group = matches!(
        req,
        XgroupReq::SetId { .. } | XgroupReq::CreateConsumer { .. } | XgroupReq::DelConsumer { .. }
    );
    if needs_group && !has_group {
        return Err(CmdError::no_group_for_key(&key, &group));
    }
    match req {
        XgroupReq::Create {
            id, entries_read, ..
        } => {
            let id = id?;
            let s = db
                .stream_for_write(cx.db, &key, true, cx.now_ms)?
                .ok_or(CmdError::XgroupNoKey)?;
            if s.group(&group).is_some() {
                return Err(CmdError::BusyGroup);
            }
            let last = match id {
                GroupIdArg::Last => s.last_id(),
                GroupIdArg::Id(id) => id,
            };
            let mut g = ConsumerGroup::new(last, None);
            g.set_last_id(last, entries_read, s.entries_added());
            s.groups_mut().insert(own_small(&group), g);
            let change = GroupChange {
                mkstream: true,
                meta: true,
                ..Default::default()
            };
            log_group_change(db, cx, &key, &group, &change);
            Ok(Reply::Ok)
        }
        XgroupReq::SetId {
            id, entries_read, ..
        } => {
            let id = id?;
            let s = stream_mut(db, cx, &key)?;
            let last = match id {
                GroupIdArg::Last => s.last_id(),
                GroupIdArg::Id(id) => id,
            };
            let entries_added = s.entries_added();
            if let Some(g) = s.group_mut(&group) {
                g.set_last_id(last, entries_read, entries_added);
            }
            let change = GroupChange {
                meta: true,
                ..Default::default()
            };
            log_group_change(db, cx, &key, &group, &change);
            Ok(Reply::Ok)
        }
        XgroupReq::Destroy { .. } => {
            if !has_group {
                return Ok(Reply::Int(0));
            }
            stream_mut(db, cx, &key)?.groups_mut().remove(&group);
            db.log_effect(cx, &[b"XGROUP", b"DESTROY", &key, &group]);
            db.blocking.mark_ready(cx.db, &key);
            Ok(Reply::Int(1))
        }
        XgroupReq::CreateConsumer { consumer, .. } => {
            let s = stream_mut(db, cx, &key)?;
            let created = s
                .group_mut(&group)
                .map(|g| g.get_or_create_consumer(&consumer, cx.now_ms).1);
            if created == Some(true) {
                let change = GroupChange {
                    consumer: Some(&consumer),
                    ..Default::default()
                };
                log_group_change(db, cx, &key, &group, &change);
            }
            Ok(Reply::Int(i64::from(created == Some(true))))
        }
        XgroupReq::DelConsumer { consumer, .. } => {
            let s = stream_mut(db, cx, &key)?;
            let deleted = s
                .group_mut(&group)
                .and_then(|g| g.delete_consumer(&consumer));
            if deleted.is_some() {
                db.log_effect(cx, &[b"XGROUP", b"DELCONSUMER", &key, &group, &consumer]);
            }
            let n = deleted.unwrap_or(0);
            Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
        }
        XgroupReq::Help => Ok(xgroup_help()),
    }
}

/// The stream under `key`, known to exist.
pub(super) fn stream_mut<'a>(
    db: &'a mut ShardDb,
    cx: &ExecCtx,
    key: &[u8],
) -> Result<&'a mut Stream, CmdError> {
    db.get_stream_mut(cx.db, key, cx.now_ms)?
        .ok_or(CmdError::NoSuchKey)
}

/// `XINFO STREAM | GROUPS | CONSUMERS | HELP`.
///
/// # Reply
/// Maps (flat arrays in RESP2) with Redis's field names and order.
/// # Errors
/// `WrongType`; `ERR no such key`; `NOGROUP No such consumer group '<g>' for
/// key name '<k>'` (CONSUMERS).
/// # Source
/// `xinfoCommand`, `xinfoReplyWithStreamInfo`, `streamReplyWithCGLag`.
pub fn apply_xinfo(db: &mut ShardDb, cx: &ExecCtx, req: &XinfoReq) -> Result<Reply, CmdError> {
    let key = match req {
        XinfoReq::Help => return Ok(xinfo_help()),
        XinfoReq::Stream { key, .. }
        | XinfoReq::Groups { key }
        | XinfoReq::Consumers { key, .. } => key,
    };
    let now = cx.now_ms;
    let s = db.get_stream(cx.db, key, now)?.ok_or(CmdError::NoSuchKey)?;
    match req {
        XinfoReq::Groups { .. } => Ok(Reply::Array(
            s.groups()
                .iter()
                .map(|(name, g)| reply_group_info(s, name, g))
                .collect(),
        )),
        XinfoReq::Consumers { group, .. } => {
            let g = s
                .group(group)
                .ok_or_else(|| CmdError::no_group_for_key(key, group))?;
            Ok(Reply::Array(
                g.consumers()
                    .map(|c| {
                        let idle = now.saturating_sub(c.seen_time_ms);
                        let inactive = c.active_time_ms.map_or(-1, |t| {
                            i64::try_from(now.saturating_sub(t)).unwrap_or(i64::MAX)
                        });
                        Reply::Map(vec![
                            (Reply::bulk_copy("name"), Reply::Bulk(c.name.clone())),
                            (Reply::bulk_copy("pending"), Reply::Int(c.pel.len() as i64)),
                            (Reply::bulk_copy("idle"), Reply::Int(idle as i64)),
                            (Reply::bulk_copy("inactive"), Reply::Int(inactive)),
                        ])
                    })
                    .collect(),
            ))
        }
        XinfoReq::Stream { full, .. } => Ok(reply_stream_info(s, *full, now)),
        XinfoReq::Help => Ok(xinfo_help()),
    }
}

pub(super) fn field(name: &'static str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk_copy(name), v)
}

pub(super) fn int_u64(n: u64) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

pub(super) fn opt_int(n: Option<u64>) -> Reply {
    n.map_or(Reply::NullBulk, int_u64)
}

pub(super) fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

/// One group of XINFO GROUPS.
pub(super) fn reply_group_info(s: &Stream, name: &Bytes, g: &ConsumerGroup) -> Reply {
    let counters = s.counters();
    Reply::Map(vec![
        field("name", Reply::Bulk(name.clone())),
        field("consumers", int_u64(g.consumer_count() as u64)),
        field("pending", int_u64(g.pel().len() as u64)),
        field("last-delivered-id", id_reply(g.last_id)),
        field("entries-read", opt_int(g.entries_read)),
        field("lag", opt_int(g.lag(&counters))),
    ])
}

/// XINFO STREAM, and with `full = Some(count)` the FULL form (count 0 = all).
pub(super) fn reply_stream_info(s: &Stream, full: Option<u64>, now_ms: u64) -> Reply {
    let mut m = vec![
        field("length", int_u64(s.len())),
        field("radix-tree-keys", int_u64(s.node_count() as u64)),
        field(
            "radix-tree-nodes",
            int_u64(radix_nodes_estimate(s.node_count())),
        ),
        field("last-generated-id", id_reply(s.last_id())),
        field("max-deleted-entry-id", id_reply(s.max_deleted_entry_id())),
        field("entries-added", int_u64(s.entries_added())),
        field("recorded-first-entry-id", id_reply(s.first_id())),
    ];
    // IDMP (Redis 8.6): always reported, defaults for a stream without a map.
    let cfg = s.idmp().map(|m| m.config()).unwrap_or_default();
    let (pids, iids, added, dups) = s.idmp().map_or((0, 0, 0, 0), |m| {
        (
            m.pids_tracked(now_ms),
            m.iids_tracked(now_ms),
            m.iids_added,
            m.iids_duplicates,
        )
    });
    m.extend([
        field("idmp-duration", int_u64(cfg.duration_s)),
        field("idmp-maxsize", int_u64(cfg.maxsize)),
        field("pids-tracked", int_u64(pids)),
        field("iids-tracked", int_u64(iids)),
        field("iids-added", int_u64(added)),
        field("iids-duplicates", int_u64(dups)),
    ]);
    let Some(count) = full else {
        m.push(field("groups", int_u64(s.groups().len() as u64)));
        m.push(field(
            "first-entry",
            s.first_entry().map_or(Reply::NullBulk, entry_reply),
        ));
        m.push(field(
            "last-entry",
            s.last_entry().map_or(Reply::NullBulk, entry_reply),
        ));
        return Reply::Map(m);
    };
    let take = if count == 0 {
        usize::MAX
    } else {
        usize::try_from(count).unwrap_or(usize::MAX)
    };
    let entries: Vec<_> = s
        .iter_range(StreamId::MIN, StreamId::MAX, false)
        .take(take)
        .collect();
    m.push(field("entries", entries_reply(entries)));
    let counters = s.counters();
    let groups = s
        .groups()
        .iter()
        .map(|(name, g)| {
            let pel = g
                .pel()
                .iter()
                .take(take)
                .map(|(id, p)| {
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::Bulk(g.consumer_name(p.consumer)),
                        int_u64(p.delivery_time_ms),
                        int_u64(p.delivery_count),
                    ])
                })
                .collect();
            let consumers = g
                .consumers()
                .map(|c| {
                    let pel = c
                        .pel
                        .keys()
                        .take(take)
                        .filter_map(|id| {
                            let p = g.pending(*id)?;
                            Some(Reply::Array(vec![
                                id_reply(*id),
                                int_u64(p.delivery_time_ms),
                                int_u64(p.delivery_count),
                            ]))
                        })
                        .collect();
                    Reply::Map(vec![
                        field("name", Reply::Bulk(c.name.clone())),
                        field("seen-time", int_u64(c.seen_time_ms)),
                        field(
                            "active-time",
                            Reply::Int(c.active_time_ms.map_or(-1, |t| t as i64)),
                        ),
                        field("pel-count", int_u64(c.pel.len() as u64)),
                        field("pending", Reply::Array(pel)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                field("name", Reply::Bulk(name.clone())),
                field("last-delivered-id", id_reply(g.last_id)),
                field("entries-read", opt_int(g.entries_read)),
                field("lag", opt_int(g.lag(&counters))),
                field("pel-count", int_u64(g.pel().len() as u64)),
                field("pending", Reply::Array(pel)),
                field("consumers", Reply::Array(consumers)),
                // Redis 8.8: entries released by XNACK (no owner).
                field(
                    "nacked-count",
                    int_u64(g.pel().values().filter(|p| p.is_nacked()).count() as u64),
                ),
            ])
        })
        .collect();
    m.push(field("groups", Reply::Array(groups)));
    Reply::Map(m)
}

/// `radix-tree-nodes`: Redis counts its rax's internal nodes, which we do not
/// have; report a plausible figure (one per key plus the root), 0 when empty
/// never happens in Redis (an empty rax has its root node), so at least 1.
pub(super) fn radix_nodes_estimate(keys: usize) -> u64 {
    (keys as u64).saturating_mul(2).max(1)
}

pub(super) fn xgroup_help() -> Reply {
    help_reply(&[
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
        "HELP",
        "    Prints this help.",
    ])
}

pub(super) fn xinfo_help() -> Reply {
    help_reply(&[
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
        "HELP",
        "    Prints this help.",
    ])
}
