//! Argument descriptions for `COMMAND DOCS`: data, one entry per command
//! table row name (`XGROUP|CREATE` for subcommands), turned into replies by
//! [`reply_arguments`]. Tools use them for hints and completion (redis-cli
//! 7.2+ builds its hints from COMMAND DOCS).
//!
//! The shapes follow Redis's command JSON files: `type` is one of `string`,
//! `integer`, `double`, `key`, `pattern`, `unix-time`, `pure-token`, `oneof`,
//! `block`; `flags` holds `optional`, `multiple`, `multiple_token`; `oneof`
//! and `block` nest `arguments`. Each argument's reply is a map of `name`,
//! `type`, `display_text` (not for `oneof`/`block`, as Redis 7.2+),
//! `key_spec_index`, `token`, `since`, `flags`, `arguments`, in that order.
//!
//! Covered: the stream commands (with the 8.x additions: KEEPREF/DELREF/ACKED,
//! XREADGROUP CLAIM, XACKDEL, XDELEX) and the generic commands redis-cli's
//! hints and client libraries use most. `complexity`, `history` and
//! `doc_flags` are not given.

use crate::reply::Reply;

/// Argument types (`ARG_TYPE_STR` in Redis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    String,
    Integer,
    Double,
    /// A key: its key-spec index.
    Key(u8),
    Pattern,
    UnixTime,
    PureToken,
    OneOf,
    Block,
}

impl ArgType {
    fn name(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Double => "double",
            ArgType::Key(_) => "key",
            ArgType::Pattern => "pattern",
            ArgType::UnixTime => "unix-time",
            ArgType::PureToken => "pure-token",
            ArgType::OneOf => "oneof",
            ArgType::Block => "block",
        }
    }
}

/// Argument flag: may be left out.
pub const OPTIONAL: u8 = 1;
/// Argument flag: may repeat.
pub const MULTIPLE: u8 = 2;
/// Argument flag: repeats with its token each time.
pub const MULTIPLE_TOKEN: u8 = 4;

/// One argument of a command.
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    pub name: &'static str,
    pub ty: ArgType,
    pub token: Option<&'static str>,
    pub since: Option<&'static str>,
    pub flags: u8,
    pub args: &'static [Arg],
}

impl Arg {
    /// An argument of type `ty`.
    pub const fn new(name: &'static str, ty: ArgType) -> Arg {
        Arg {
            name,
            ty,
            token: None,
            since: None,
            flags: 0,
            args: &[],
        }
    }
    /// Introduced by `token`.
    pub const fn token(mut self, t: &'static str) -> Arg {
        self.token = Some(t);
        self
    }
    /// Added in release `v`.
    pub const fn since(mut self, v: &'static str) -> Arg {
        self.since = Some(v);
        self
    }
    /// Optional.
    pub const fn opt(mut self) -> Arg {
        self.flags |= OPTIONAL;
        self
    }
    /// May repeat.
    pub const fn multi(mut self) -> Arg {
        self.flags |= MULTIPLE;
        self
    }
    /// Nested arguments (`oneof` / `block`).
    pub const fn of(mut self, args: &'static [Arg]) -> Arg {
        self.args = args;
        self
    }
}

const fn s(name: &'static str) -> Arg {
    Arg::new(name, ArgType::String)
}
const fn int(name: &'static str) -> Arg {
    Arg::new(name, ArgType::Integer)
}
const fn key() -> Arg {
    Arg::new("key", ArgType::Key(0))
}
const fn tok(name: &'static str, token: &'static str) -> Arg {
    Arg::new(name, ArgType::PureToken).token(token)
}
const fn oneof(name: &'static str, args: &'static [Arg]) -> Arg {
    Arg::new(name, ArgType::OneOf).of(args)
}
const fn block(name: &'static str, args: &'static [Arg]) -> Arg {
    Arg::new(name, ArgType::Block).of(args)
}

const TRIM_STRATEGY: Arg = oneof(
    "strategy",
    &[
        tok("maxlen", "MAXLEN"),
        tok("minid", "MINID").since("6.2.0"),
    ],
);
const TRIM_OPERATOR: Arg = oneof("operator", &[tok("equal", "="), tok("approximately", "~")]).opt();
const TRIM_ARGS: &[Arg] = &[
    TRIM_STRATEGY,
    TRIM_OPERATOR,
    s("threshold"),
    int("count").token("LIMIT").since("6.2.0").opt(),
];
/// KEEPREF | DELREF | ACKED (Redis 8.2).
const REF_POLICY: Arg = oneof(
    "condition",
    &[
        tok("keepref", "KEEPREF"),
        tok("delref", "DELREF"),
        tok("acked", "ACKED"),
    ],
)
.since("8.2.0")
.opt();
const STREAMS_BLOCK: Arg = block("streams", &[key().multi(), s("id").multi()]).token("STREAMS");
const GROUP_ID: Arg = oneof("id-selector", &[s("id"), tok("new-id", "$")]);
const EXPIRE_CONDITION: Arg = oneof(
    "condition",
    &[
        tok("nx", "NX"),
        tok("xx", "XX"),
        tok("gt", "GT"),
        tok("lt", "LT"),
    ],
)
.since("7.0.0")
.opt();

/// Arguments by command table row name.
pub const DOCS: &[(&str, &[Arg])] = &[
    (
        "XADD",
        &[
            key(),
            tok("nomkstream", "NOMKSTREAM").since("6.2.0").opt(),
            REF_POLICY,
            block("trim", TRIM_ARGS).opt(),
            oneof("id-selector", &[tok("auto-id", "*"), s("id")]),
            block("data", &[s("field"), s("value")]).multi(),
        ],
    ),
    ("XLEN", &[key()]),
    (
        "XRANGE",
        &[
            key(),
            s("start"),
            s("end"),
            int("count").token("COUNT").opt(),
        ],
    ),
    (
        "XREVRANGE",
        &[
            key(),
            s("end"),
            s("start"),
            int("count").token("COUNT").opt(),
        ],
    ),
    ("XDEL", &[key(), s("id").multi()]),
    (
        "XDELEX",
        &[
            key(),
            REF_POLICY,
            block("ids", &[int("numids"), s("id").multi()]).token("IDS"),
        ],
    ),
    ("XTRIM", &[key(), block("trim", TRIM_ARGS), REF_POLICY]),
    (
        "XREAD",
        &[
            int("count").token("COUNT").opt(),
            int("milliseconds").token("BLOCK").opt(),
            STREAMS_BLOCK,
        ],
    ),
    (
        "XREADGROUP",
        &[
            block("group-block", &[s("group"), s("consumer")]).token("GROUP"),
            int("count").token("COUNT").opt(),
            int("milliseconds").token("BLOCK").opt(),
            tok("noack", "NOACK").opt(),
            int("min-idle-time").token("CLAIM").since("8.4.0").opt(),
            STREAMS_BLOCK,
        ],
    ),
    ("XACK", &[key(), s("group"), s("id").multi()]),
    (
        "XACKDEL",
        &[
            key(),
            s("group"),
            REF_POLICY,
            block("ids", &[int("numids"), s("id").multi()]).token("IDS"),
        ],
    ),
    (
        "XPENDING",
        &[
            key(),
            s("group"),
            block(
                "filters",
                &[
                    int("min-idle-time").token("IDLE").since("6.2.0").opt(),
                    s("start"),
                    s("end"),
                    int("count"),
                    s("consumer").opt(),
                ],
            )
            .opt(),
        ],
    ),
    (
        "XCLAIM",
        &[
            key(),
            s("group"),
            s("consumer"),
            s("min-idle-time"),
            s("id").multi(),
            int("ms").token("IDLE").opt(),
            Arg::new("unix-time-milliseconds", ArgType::UnixTime)
                .token("TIME")
                .opt(),
            int("count").token("RETRYCOUNT").opt(),
            tok("force", "FORCE").opt(),
            tok("justid", "JUSTID").opt(),
            s("lastid").token("LASTID").opt(),
        ],
    ),
    (
        "XAUTOCLAIM",
        &[
            key(),
            s("group"),
            s("consumer"),
            s("min-idle-time"),
            s("start"),
            int("count").token("COUNT").opt(),
            tok("justid", "JUSTID").opt(),
        ],
    ),
    (
        "XSETID",
        &[
            key(),
            s("last-id"),
            int("entries-added")
                .token("ENTRIESADDED")
                .since("7.0.0")
                .opt(),
            s("max-deleted-id")
                .token("MAXDELETEDID")
                .since("7.0.0")
                .opt(),
        ],
    ),
    (
        "XGROUP|CREATE",
        &[
            key(),
            s("group"),
            GROUP_ID,
            tok("mkstream", "MKSTREAM").opt(),
            int("entriesread").token("ENTRIESREAD").opt(),
        ],
    ),
    (
        "XGROUP|SETID",
        &[
            key(),
            s("group"),
            GROUP_ID,
            int("entriesread").token("ENTRIESREAD").opt(),
        ],
    ),
    ("XGROUP|DESTROY", &[key(), s("group")]),
    ("XGROUP|CREATECONSUMER", &[key(), s("group"), s("consumer")]),
    ("XGROUP|DELCONSUMER", &[key(), s("group"), s("consumer")]),
    (
        "XINFO|STREAM",
        &[
            key(),
            block("full-block", &[int("count").token("COUNT").opt()])
                .token("FULL")
                .opt(),
        ],
    ),
    ("XINFO|GROUPS", &[key()]),
    ("XINFO|CONSUMERS", &[key(), s("group")]),
    (
        "XGROUPLATENCY",
        &[key(), s("group"), tok("reset", "RESET").opt()],
    ),
    ("GET", &[key()]),
    (
        "SET",
        &[
            key(),
            s("value"),
            oneof("condition", &[tok("nx", "NX"), tok("xx", "XX")])
                .since("2.6.12")
                .opt(),
            tok("get", "GET").since("6.2.0").opt(),
            oneof(
                "expiration",
                &[
                    int("seconds").token("EX").since("2.6.12"),
                    int("milliseconds").token("PX").since("2.6.12"),
                    Arg::new("unix-time-seconds", ArgType::UnixTime)
                        .token("EXAT")
                        .since("6.2.0"),
                    Arg::new("unix-time-milliseconds", ArgType::UnixTime)
                        .token("PXAT")
                        .since("6.2.0"),
                    tok("keepttl", "KEEPTTL").since("6.0.0"),
                ],
            )
            .opt(),
        ],
    ),
    ("DEL", &[key().multi()]),
    ("UNLINK", &[key().multi()]),
    ("EXISTS", &[key().multi()]),
    ("TYPE", &[key()]),
    ("TTL", &[key()]),
    ("PTTL", &[key()]),
    ("INCR", &[key()]),
    ("EXPIRE", &[key(), int("seconds"), EXPIRE_CONDITION]),
    ("PEXPIRE", &[key(), int("milliseconds"), EXPIRE_CONDITION]),
    (
        "SCAN",
        &[
            int("cursor"),
            Arg::new("pattern", ArgType::Pattern).token("MATCH").opt(),
            int("count").token("COUNT").opt(),
            s("type").token("TYPE").since("6.0.0").opt(),
        ],
    ),
    ("KEYS", &[Arg::new("pattern", ArgType::Pattern)]),
    ("SELECT", &[int("index")]),
    ("PING", &[s("message").opt()]),
    ("ECHO", &[s("message")]),
    ("INFO", &[s("section").opt().multi()]),
    ("AUTH", &[s("username").since("6.0.0").opt(), s("password")]),
    (
        "HELLO",
        &[block(
            "arguments",
            &[
                int("protover"),
                block("username-password", &[s("username"), s("password")])
                    .token("AUTH")
                    .opt(),
                s("clientname").token("SETNAME").opt(),
            ],
        )
        .opt()],
    ),
    ("DUMP", &[key()]),
    (
        "RESTORE",
        &[
            key(),
            int("ttl"),
            s("serialized-value"),
            tok("replace", "REPLACE").since("3.0.0").opt(),
            tok("absttl", "ABSTTL").since("5.0.0").opt(),
            int("seconds").token("IDLETIME").since("5.0.0").opt(),
            int("frequency").token("FREQ").since("5.0.0").opt(),
        ],
    ),
    ("CONFIG|GET", &[s("parameter").multi()]),
    (
        "CONFIG|SET",
        &[block("data", &[s("parameter"), s("value")]).multi()],
    ),
    ("CLIENT|SETNAME", &[s("connection-name")]),
];

/// The arguments of table row `name`, if documented.
pub fn args_of(name: &str) -> Option<&'static [Arg]> {
    DOCS.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, a)| *a)
}

/// The `arguments` reply for `args`.
pub fn reply_arguments(args: &[Arg]) -> Reply {
    Reply::Array(args.iter().map(reply_arg).collect())
}

fn reply_arg(a: &Arg) -> Reply {
    let k = |s: &'static str| Reply::bulk(s);
    let mut m = vec![(k("name"), k(a.name)), (k("type"), k(a.ty.name()))];
    if !matches!(a.ty, ArgType::OneOf | ArgType::Block) {
        m.push((k("display_text"), k(a.name)));
    }
    if let ArgType::Key(i) = a.ty {
        m.push((k("key_spec_index"), Reply::Int(i64::from(i))));
    }
    if let Some(t) = a.token {
        m.push((k("token"), k(t)));
    }
    if let Some(v) = a.since {
        m.push((k("since"), k(v)));
    }
    if a.flags != 0 {
        let mut f = Vec::new();
        for (bit, name) in [
            (OPTIONAL, "optional"),
            (MULTIPLE, "multiple"),
            (MULTIPLE_TOKEN, "multiple_token"),
        ] {
            if a.flags & bit != 0 {
                f.push(Reply::simple(name));
            }
        }
        m.push((k("flags"), Reply::Array(f)));
    }
    if !a.args.is_empty() {
        m.push((k("arguments"), reply_arguments(a.args)));
    }
    Reply::Map(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_name_is_a_command() {
        for (name, args) in DOCS {
            let found = match name.split_once('|') {
                None => crate::cmd::table::lookup(name.as_bytes()).is_some(),
                Some((c, sub)) => crate::cmd::table::lookup(c.as_bytes())
                    .and_then(|spec| crate::cmd::table::lookup_sub(spec, sub.as_bytes()))
                    .is_some(),
            };
            assert!(found, "{name} is not in the command table");
            assert!(!args.is_empty(), "{name}");
        }
    }
}
