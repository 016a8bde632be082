//! The command table: the single source of truth for every command's name,
//! arity, flags and key positions.
//!
//! Arity checks, routing (which shard runs a command), CROSSSLOT checks and
//! `COMMAND COUNT|INFO|DOCS|GETKEYS|LIST` are all derived from these rows; each
//! command family file exports its rows as `SPECS`.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::cmd::args::c_str;
use crate::cmd::{Action, ConnCtx, ShardReq};
use crate::error::c_str_128;
use crate::error::CmdError;
use crate::reply::Reply;

/// Command flags, as `COMMAND INFO` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags(pub u32);

impl Flags {
    pub const NONE: Flags = Flags(0);
    pub const WRITE: Flags = Flags(1);
    pub const READONLY: Flags = Flags(1 << 1);
    pub const DENYOOM: Flags = Flags(1 << 2);
    pub const ADMIN: Flags = Flags(1 << 3);
    pub const PUBSUB: Flags = Flags(1 << 4);
    pub const NOSCRIPT: Flags = Flags(1 << 5);
    pub const BLOCKING: Flags = Flags(1 << 6);
    pub const LOADING: Flags = Flags(1 << 7);
    pub const STALE: Flags = Flags(1 << 8);
    pub const SKIP_MONITOR: Flags = Flags(1 << 9);
    pub const FAST: Flags = Flags(1 << 10);
    pub const NO_AUTH: Flags = Flags(1 << 11);
    pub const NO_MULTI: Flags = Flags(1 << 12);
    pub const ALLOW_BUSY: Flags = Flags(1 << 13);
    /// Served for a slot being imported without a preceding ASKING (Redis's
    /// `CMD_ASKING`: RESTORE-ASKING, what MIGRATE sends in cluster mode).
    pub const ASKING: Flags = Flags(1 << 14);
    /// May replicate even when it does not write (EVAL, EVALSHA, FCALL:
    /// Redis's `CMD_MAY_REPLICATE`). Internal, as in Redis: `COMMAND INFO`
    /// does not list it; a monitor may not run such commands.
    pub const MAY_REPLICATE: Flags = Flags(1 << 15);
    /// Acts on other clients (CLIENT KILL, CLIENT UNBLOCK), so runs only
    /// once this connection's earlier requests on other shards are
    /// answered, where Redis runs it: after them. Internal, not in `COMMAND
    /// INFO`.
    pub const AFTER_EARLIER: Flags = Flags(1 << 16);
    /// Reads or changes the function registry (FCALL, FCALL_RO, FUNCTION
    /// LOAD, DELETE, FLUSH, RESTORE, LIST, DUMP): runs only once this
    /// connection's earlier registry changes (the rows that also have
    /// `WRITE`; they commit on shard 0) are answered, so a pipelined or
    /// queued FCALL sees the FUNCTION LOAD before it, as in Redis.
    /// Internal, not in `COMMAND INFO`.
    pub const FUNCTION_REGISTRY: Flags = Flags(1 << 17);
    /// Never recorded in SLOWLOG (EXEC: the commands it runs are, one by
    /// one). Redis's `CMD_SKIP_SLOWLOG`; `COMMAND INFO` lists it.
    pub const SKIP_SLOWLOG: Flags = Flags(1 << 18);

    const NAMES: &'static [(Flags, &'static str)] = &[
        (Flags::WRITE, "write"),
        (Flags::READONLY, "readonly"),
        (Flags::DENYOOM, "denyoom"),
        (Flags::ADMIN, "admin"),
        (Flags::PUBSUB, "pubsub"),
        (Flags::NOSCRIPT, "noscript"),
        (Flags::BLOCKING, "blocking"),
        (Flags::LOADING, "loading"),
        (Flags::STALE, "stale"),
        (Flags::SKIP_MONITOR, "skip_monitor"),
        (Flags::SKIP_SLOWLOG, "skip_slowlog"),
        (Flags::ASKING, "asking"),
        (Flags::FAST, "fast"),
        (Flags::NO_AUTH, "no_auth"),
        (Flags::NO_MULTI, "no_multi"),
        (Flags::ALLOW_BUSY, "allow_busy"),
    ];

    /// Union of two flag sets (usable in `const` rows).
    pub const fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// Whether every flag of `other` is set.
    pub const fn has(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Flag names in Redis's spelling, for `COMMAND INFO`.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(f, _)| self.has(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// Where a command's keys are in its argv (argv[0] is the command name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// No keys: runs on the connection's thread or on every shard.
    None,
    /// Keys at `first`, `first + step`, ... up to `last` (negative: from the end, -1 = last arg).
    Range { first: u8, last: i8, step: u8 },
    /// `... STREAMS k1 .. kn id1 .. idn`: the first half of the arguments after
    /// the `STREAMS` token (XREAD, XREADGROUP).
    AfterStreamsToken,
    /// `argv[at]` is a key count n, the n keys follow it (ZMPOP, LMPOP,
    /// SINTERCARD at 1; BZMPOP, BLMPOP, EVAL and FCALL at 2). A count that is
    /// not a positive integer or runs past the arguments gives no keys (the
    /// parser reports the error).
    NumKeys { at: u8 },
    /// MIGRATE: the key at `argv[3]`, or, with the `KEYS` option (`argv[3]`
    /// empty), every argument after `KEYS`; see
    /// [`crate::cmd::migrate::key_indexes`]. `COMMAND INFO` reports 3 3 1
    /// and `movablekeys`, as Redis does.
    Migrate,
}

impl Keys {
    /// The key is argv[1] (most commands).
    pub const FIRST: Keys = Keys::Range {
        first: 1,
        last: 1,
        step: 1,
    };
    /// The key is argv[2] (subcommands such as `OBJECT ENCODING key`, `XGROUP CREATE key`).
    pub const SECOND: Keys = Keys::Range {
        first: 2,
        last: 2,
        step: 1,
    };
    /// Every argument from argv[1] on is a key (DEL, EXISTS, MGET...).
    pub const ALL: Keys = Keys::Range {
        first: 1,
        last: -1,
        step: 1,
    };
}

/// How the results of a multi-key command split over several shards are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMerge {
    /// Must not span shards: refused with an error.
    Refuse,
    /// Sum of integer replies (DEL, UNLINK, EXISTS, TOUCH).
    SumInt,
    /// `+OK` when every part said OK (MSET). Like every merge here, over
    /// several shards the parts run with the shards held, so the command is
    /// atomic (see `route::router::route_keyed`).
    AllOk,
    /// One reply element per key, in the caller's key order (MGET).
    KeyOrder,
    /// XREAD-style: `[key, entries]` pairs in the caller's key order, null when none.
    Streams,
    /// Atomic across shards, all or nothing (MSETNX): with every involved
    /// shard held, `:0` and no change when any key exists, else every part
    /// runs and the answer is `:1`.
    AtomicIfNoneExist,
    /// MIGRATE: `+NOKEY` when every part said NOKEY, else the first part's
    /// error (parts in order of their first key), else `+OK`.
    NoKeyOrOk,
}

/// Parses one argv (or one shard's part of it) into a shard request.
pub type ParseFn = fn(&[Bytes]) -> Result<ShardReq, CmdError>;

/// How a command is executed.
#[derive(Clone, Copy)]
pub enum Handler {
    /// Parsed on the connection's thread into a request that runs on the shard(s)
    /// owning its keys; `merge` says how to combine parts when keys span shards.
    Keyed {
        parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
        merge: FanMerge,
    },
    /// A keyed read that may block (XREAD / XREADGROUP with BLOCK).
    /// `parse` builds the non-blocking form (used as is when `block_ms` says
    /// the argv does not block, inside MULTI, and as the first, non-blocking
    /// pass over several shards); `block_ms` returns the BLOCK timeout in ms
    /// (0 = forever) when the argv asks to block; `park` builds, for one shard's
    /// part of the argv, a request that serves the read now if it has data
    /// (claiming the ticket first) or parks a waiter and replies
    /// [`Reply::NoReply`](crate::reply::Reply::NoReply).
    Blocking {
        parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
        merge: FanMerge,
        block_ms: fn(&[Bytes]) -> Option<u64>,
        park: fn(
            &[Bytes],
            std::sync::Arc<crate::shard::blocking::Ticket>,
        ) -> Result<ShardReq, CmdError>,
        /// When keys span shards, a side-effect-free check of one shard's
        /// part, run on every shard before any part reads (XREADGROUP: type,
        /// group, ID per key). Answers `+OK` or `[local key index, error]`.
        validate: Option<ParseFn>,
    },
    /// Runs on the connection's thread with the connection's state; may answer directly,
    /// or fan out to shards (DBSIZE, INFO, FLUSHALL...).
    Conn(fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>),
}

/// One row of the command table.
#[derive(Clone, Copy)]
pub struct CommandSpec {
    /// Upper-case name (`XADD`); container commands (`CLIENT`) list their subcommands in `subcommands`.
    pub name: &'static str,
    /// Redis arity: positive = exact argc, negative = at least `-arity` (argv[0] counted).
    pub arity: i16,
    pub flags: Flags,
    pub keys: Keys,
    /// ACL categories without the `@` (for `COMMAND INFO` / `COMMAND DOCS`).
    pub acl: &'static [&'static str],
    /// One-line summary (`COMMAND DOCS`).
    pub summary: &'static str,
    /// Redis version that introduced it (`COMMAND DOCS`).
    pub since: &'static str,
    /// Command group (`COMMAND DOCS`): `stream`, `string`, `generic`, `server`, `connection`, `cluster`, `transactions`.
    pub group: &'static str,
    /// Subcommands (`CLIENT|ID`), each a full row with `name` like `CLIENT|ID`.
    pub subcommands: &'static [CommandSpec],
    pub handler: Handler,
}

impl CommandSpec {
    /// A row for a keyed command (`Handler::Keyed`) without subcommands.
    #[allow(clippy::too_many_arguments)]
    pub const fn keyed(
        name: &'static str,
        arity: i16,
        flags: Flags,
        keys: Keys,
        group: &'static str,
        acl: &'static [&'static str],
        summary: &'static str,
        since: &'static str,
        parse: fn(&[Bytes]) -> Result<ShardReq, CmdError>,
        merge: FanMerge,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags,
            keys,
            acl,
            summary,
            since,
            group,
            subcommands: &[],
            handler: Handler::Keyed { parse, merge },
        }
    }

    /// A row for a command that runs on the connection's thread (`Handler::Conn`,
    /// no keys, no subcommands).
    #[allow(clippy::too_many_arguments)]
    pub const fn conn(
        name: &'static str,
        arity: i16,
        flags: Flags,
        group: &'static str,
        acl: &'static [&'static str],
        summary: &'static str,
        since: &'static str,
        f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags,
            keys: Keys::None,
            acl,
            summary,
            since,
            group,
            subcommands: &[],
            handler: Handler::Conn(f),
        }
    }

    /// Whether `argc` (argv[0] included) satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        if self.arity >= 0 {
            argc == self.arity as usize
        } else {
            argc >= (-self.arity) as usize
        }
    }

    /// Indexes into argv of this command's keys. Empty for keyless commands, or
    /// when the argv is malformed (the parser reports that error).
    pub fn key_indexes(&self, argv: &[Bytes]) -> Vec<usize> {
        match self.keys {
            Keys::None => Vec::new(),
            Keys::Range { first, last, step } => {
                let argc = argv.len() as i64;
                let first = i64::from(first);
                let last = if last < 0 {
                    argc + i64::from(last)
                } else {
                    i64::from(last)
                };
                let step = i64::from(step.max(1));
                let mut out = Vec::new();
                let mut i = first;
                while i <= last && i < argc {
                    out.push(i as usize);
                    i += step;
                }
                out
            }
            Keys::AfterStreamsToken => {
                // Positional, as the parser reads the options: a group or
                // consumer called STREAMS is not the STREAMS keyword.
                let Some(pos) = crate::cmd::stream::streams_keyword_at(argv) else {
                    return Vec::new();
                };
                let start = pos + 1;
                let n = argv.len().saturating_sub(start);
                if n == 0 || n % 2 != 0 {
                    return Vec::new();
                }
                (start..start + n / 2).collect()
            }
            Keys::NumKeys { at } => {
                let at = usize::from(at);
                let n = argv
                    .get(at)
                    .and_then(|a| crate::cmd::args::parse_i64(a))
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(0);
                if n == 0 || at + n >= argv.len() {
                    return Vec::new();
                }
                (at + 1..=at + n).collect()
            }
            Keys::Migrate => crate::cmd::migrate::key_indexes(argv),
        }
    }

    /// `(first, last, step)` for `COMMAND INFO` (0, 0, 0 for keyless; -1 last for variadic).
    pub fn key_triple(&self) -> (i64, i64, i64) {
        match self.keys {
            Keys::None => (0, 0, 0),
            Keys::Range { first, last, step } => (first.into(), last.into(), step.into()),
            // Redis reports XREAD/XREADGROUP as movablekeys with 0 0 0.
            Keys::AfterStreamsToken | Keys::NumKeys { .. } => (0, 0, 0),
            // Redis: the first key spec (argv[3]), plus movablekeys.
            Keys::Migrate => (3, 3, 1),
        }
    }
}

/// FNV-1a over a command name: the command and stats indexes only hold our
/// own command names, so it needs speed, not SipHash's flood resistance.
#[derive(Default)]
pub struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Every command family's rows, in one list.
pub fn all_specs() -> &'static [&'static CommandSpec] {
    static ALL: OnceLock<Vec<&'static CommandSpec>> = OnceLock::new();
    ALL.get_or_init(|| {
        let families: &[&'static [CommandSpec]] = crate::cmd::FAMILIES;
        families.iter().flat_map(|f| f.iter()).collect()
    })
}

/// Look a command up by name, any case.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    type Index = HashMap<Vec<u8>, &'static CommandSpec, BuildHasherDefault<NameHasher>>;
    static INDEX: OnceLock<Index> = OnceLock::new();
    let index = INDEX.get_or_init(|| {
        all_specs()
            .iter()
            .map(|s| (s.name.as_bytes().to_ascii_uppercase(), *s))
            .collect()
    });
    if name.len() > 32 {
        return None;
    }
    let mut upper = [0u8; 32];
    let upper = &mut upper[..name.len()];
    upper.copy_from_slice(name);
    upper.make_ascii_uppercase();
    index.get(&*upper).copied()
}

/// Look up a subcommand of a container command (`CLIENT` + `id` → `CLIENT|ID`).
/// The table row that decides a command's keys, flags and statistics: a
/// container's subcommand row (`XGROUP|CREATE`), else the command's own.
/// `None` for an unknown command or subcommand, or a subcommand's wrong
/// arity.
pub fn row_of(argv: &[Bytes]) -> Option<&'static CommandSpec> {
    let spec = lookup(argv.first()?)?;
    if spec.subcommands.is_empty() || argv.len() < 2 {
        return Some(spec);
    }
    crate::cmd::connection::resolve_subcommand(spec, argv).ok()
}

pub fn lookup_sub(spec: &CommandSpec, sub: &[u8]) -> Option<&'static CommandSpec> {
    // Subcommand rows live in `'static` slices, so this reference is 'static.
    let subs: &'static [CommandSpec] = all_specs()
        .iter()
        .find(|s| s.name == spec.name)
        .map(|s| s.subcommands)?;
    subs.iter().find(|s| {
        s.name
            .split_once('|')
            .is_some_and(|(_, n)| n.as_bytes().eq_ignore_ascii_case(sub))
    })
}

/// The `ERR unknown command` error Redis gives, with up to the first args quoted.
///
/// Redis formats the name and each argument as C strings (`%.128s`,
/// `'%.*s' `): each stops at its first NUL byte, the name is cut to 128
/// bytes, and arguments are appended while the list is under 128 bytes,
/// each cut to what is left of the 128 (quotes and spaces count). Bytes
/// that are not UTF-8 go back as they came.
/// # Source
/// `processCommand`, redis/src/server.c (7.x/8.x).
pub fn unknown_command(argv: &[Bytes]) -> CmdError {
    let mut args = Vec::new();
    let mut total = 0;
    for a in &argv[1..] {
        if total >= 128 {
            break;
        }
        let a = c_str(a);
        let cut = &a[..a.len().min(128 - total)];
        total += cut.len() + 3;
        args.push(Bytes::copy_from_slice(cut));
    }
    CmdError::UnknownCommand {
        name: Bytes::copy_from_slice(c_str_128(&argv[0])),
        args,
    }
}

/// Reply for `COMMAND INFO` of one row (Redis 7 shape: name, arity, flags,
/// first key, last key, step, ACL categories, tips, key specs, subcommands).
pub fn reply_command_info(spec: &CommandSpec) -> Reply {
    let (first, last, step) = spec.key_triple();
    let mut flags: Vec<Reply> = spec.flags.names().into_iter().map(Reply::simple).collect();
    if matches!(
        spec.keys,
        Keys::AfterStreamsToken | Keys::NumKeys { .. } | Keys::Migrate
    ) {
        flags.push(Reply::simple("movablekeys"));
    }
    Reply::Array(vec![
        Reply::bulk(spec.name.to_ascii_lowercase()),
        Reply::Int(spec.arity.into()),
        Reply::Set(flags),
        Reply::Int(first),
        Reply::Int(last),
        Reply::Int(step),
        Reply::Set(
            spec.acl
                .iter()
                .map(|c| Reply::Simple(format!("@{c}").into_bytes().into()))
                .collect(),
        ),
        Reply::Set(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(spec.subcommands.iter().map(reply_command_info).collect()),
    ])
}

/// Reply for `COMMAND DOCS` of one row: a map of summary, since, group,
/// `arguments` when [`crate::cmd::docs`] describes them, subcommands.
pub fn reply_command_docs(spec: &CommandSpec) -> Reply {
    let mut fields = vec![
        (Reply::bulk_copy("summary"), Reply::bulk_copy(spec.summary)),
        (Reply::bulk_copy("since"), Reply::bulk_copy(spec.since)),
        (Reply::bulk_copy("group"), Reply::bulk_copy(spec.group)),
    ];
    if let Some(args) = crate::cmd::docs::args_of(spec.name) {
        fields.push((
            Reply::bulk_copy("arguments"),
            crate::cmd::docs::reply_arguments(args),
        ));
    }
    if !spec.subcommands.is_empty() {
        fields.push((
            Reply::bulk_copy("subcommands"),
            Reply::Map(
                spec.subcommands
                    .iter()
                    .map(|s| {
                        (
                            Reply::bulk(s.name.to_ascii_lowercase()),
                            reply_command_docs(s),
                        )
                    })
                    .collect(),
            ),
        ));
    }
    Reply::Map(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_uppercase() {
        let mut seen = std::collections::HashSet::new();
        for s in all_specs() {
            assert_eq!(s.name, s.name.to_ascii_uppercase());
            assert!(seen.insert(s.name), "duplicate {}", s.name);
            assert!(s.arity != 0, "{} has arity 0", s.name);
        }
    }
}
