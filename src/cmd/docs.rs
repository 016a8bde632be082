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
//! Covered: every command and subcommand of the table that takes arguments.
//! Sources: for commands Redis 7.0 has, what redis-server 7.0 reports, with
//! the 7.2 changes Redis still ships in 8.x (renamed arguments such as CLIENT
//! KILL's `old-format`, `display` texts, lower-case enum tokens); for later
//! additions the redis.io command pages: KEEPREF/DELREF/ACKED, XDELEX and
//! XACKDEL (8.2), XREADGROUP CLAIM (8.4), XADD IDMP and XCFGSET (8.6), XNACK
//! and XIDMPRECORD (8.8), XREAD/XREADGROUP MAXCOUNT/MAXSIZE (8.10).
//! MIGRATE follows the redis.io page of 8.x (`key-selector`,
//! `authentication` with `auth` / `auth2`, `keys`), 7.2's renaming of 7.0's
//! `key_or_empty_string`, `password`, `username_password` and `key`.
//! XGROUPLATENCY and the XSCHEDULE family are shardstream's own. SET lists
//! only the arguments shardstream accepts (not 8.4's IFEQ/IFNE/IFDEQ/IFDNE).
//! `tests/ops.rs` compares the entries with a real redis-server.
//! `complexity`, `history` and `doc_flags` are not given.

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
    /// `display_text` when it differs from `name` (Redis 7.2+ `display`).
    pub display: Option<&'static str>,
    pub token: Option<&'static str>,
    pub since: Option<&'static str>,
    /// `deprecated_since`: the release that deprecated this form.
    pub deprecated_since: Option<&'static str>,
    pub flags: u8,
    pub args: &'static [Arg],
}

impl Arg {
    /// An argument of type `ty`.
    pub const fn new(name: &'static str, ty: ArgType) -> Arg {
        Arg {
            name,
            ty,
            display: None,
            token: None,
            since: None,
            deprecated_since: None,
            flags: 0,
            args: &[],
        }
    }
    /// Introduced by `token`.
    pub const fn token(mut self, t: &'static str) -> Arg {
        self.token = Some(t);
        self
    }
    /// Shown as `d` (`display_text`) instead of its name.
    pub const fn display(mut self, d: &'static str) -> Arg {
        self.display = Some(d);
        self
    }
    /// Deprecated since release `v`.
    pub const fn deprecated(mut self, v: &'static str) -> Arg {
        self.deprecated_since = Some(v);
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
/// KEEPREF | DELREF | ACKED (Redis 8.2). Redis gives this argument no
/// `since`, in XADD and XTRIM as in the then new XDELEX and XACKDEL.
const REF_POLICY: Arg = oneof(
    "condition",
    &[
        tok("keepref", "KEEPREF"),
        tok("delref", "DELREF"),
        tok("acked", "ACKED"),
    ],
)
.opt();
/// XADD's `IDMPAUTO pid | IDMP pid iid` (Redis 8.6).
const IDMP: Arg = oneof(
    "idmp",
    &[
        s("pid").display("producer-id").token("IDMPAUTO"),
        block(
            "idmp",
            &[
                s("pid").display("producer-id"),
                s("iid").display("idempotent-id"),
            ],
        )
        .token("IDMP"),
    ],
)
.since("8.6.0")
.opt();

/// RESTORE's and RESTORE-ASKING's arguments.
const RESTORE_ARGS: &[Arg] = &[
    key(),
    int("ttl"),
    s("serialized-value"),
    tok("replace", "REPLACE").since("3.0.0").opt(),
    tok("absttl", "ABSTTL").since("5.0.0").opt(),
    int("seconds").token("IDLETIME").since("5.0.0").opt(),
    int("frequency").token("FREQ").since("5.0.0").opt(),
];

/// Arguments by command table row name.
pub const DOCS: &[(&str, &[Arg])] = &[
    (
        "XADD",
        &[
            key(),
            tok("nomkstream", "NOMKSTREAM").since("6.2.0").opt(),
            REF_POLICY,
            IDMP,
            block("trim", TRIM_ARGS).opt(),
            oneof("id-selector", &[tok("auto-id", "*"), s("id")]),
            block("data", &[s("field"), s("value")]).multi(),
        ],
    ),
    ("XTRIM", &[key(), block("trim", TRIM_ARGS), REF_POLICY]),
    (
        "XDELEX",
        &[
            key(),
            REF_POLICY,
            block("ids", &[int("numids"), s("id").multi()]).token("IDS"),
        ],
    ),
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
        "XGROUPLATENCY",
        &[key(), s("group"), tok("reset", "RESET").opt()],
    ),
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
    (
        "XREAD",
        &[
            int("count").token("COUNT").opt(),
            int("maxcount").token("MAXCOUNT").since("8.10.0").opt(),
            int("maxsize").token("MAXSIZE").since("8.10.0").opt(),
            int("milliseconds").token("BLOCK").opt(),
            block("streams", &[key().multi(), s("ID").multi()]).token("STREAMS"),
        ],
    ),
    (
        "XREADGROUP",
        &[
            block("group-block", &[s("group"), s("consumer")]).token("GROUP"),
            int("count").token("COUNT").opt(),
            int("maxcount").token("MAXCOUNT").since("8.10.0").opt(),
            int("maxsize").token("MAXSIZE").since("8.10.0").opt(),
            int("milliseconds").token("BLOCK").opt(),
            int("min-idle-time").token("CLAIM").since("8.4.0").opt(),
            tok("noack", "NOACK").opt(),
            block("streams", &[key().multi(), s("ID").multi()]).token("STREAMS"),
        ],
    ),
    // shardstream's own delayed-delivery family (src/cmd/delayed.rs).
    (
        "XSCHEDULE",
        &[
            key(),
            oneof(
                "when",
                &[
                    int("milliseconds").token("IN"),
                    Arg::new("unix-time-milliseconds", ArgType::UnixTime).token("AT"),
                ],
            ),
            block("data", &[s("field"), s("value")]).multi(),
        ],
    ),
    ("XUNSCHEDULE", &[key(), s("token").multi()]),
    ("XSCHEDULED", &[key()]),
    // Stream commands of Redis 8.6 (XCFGSET) and 8.8 (XNACK, XIDMPRECORD).
    (
        "XCFGSET",
        &[
            key(),
            int("idmp-duration").token("IDMP-DURATION").opt(),
            int("idmp-maxsize").token("IDMP-MAXSIZE").opt(),
        ],
    ),
    (
        "XNACK",
        &[
            key(),
            s("group"),
            oneof(
                "mode",
                &[
                    tok("silent", "SILENT"),
                    tok("fail", "FAIL"),
                    tok("fatal", "FATAL"),
                ],
            ),
            block("ids", &[int("numids"), s("id").multi()]).token("IDS"),
            int("count").token("RETRYCOUNT").opt(),
            tok("force", "FORCE").opt(),
        ],
    ),
    ("XIDMPRECORD", &[key(), s("pid"), s("iid"), s("stream-id")]),
    // From here on: as Redis reports them (names, types, tokens, flags, since).
    ("APPEND", &[key(), s("value")]),
    ("AUTH", &[s("username").since("6.0.0").opt(), s("password")]),
    (
        "BLMOVE",
        &[
            Arg::new("source", ArgType::Key(0)),
            Arg::new("destination", ArgType::Key(1)),
            oneof("wherefrom", &[tok("left", "LEFT"), tok("right", "RIGHT")]),
            oneof("whereto", &[tok("left", "LEFT"), tok("right", "RIGHT")]),
            Arg::new("timeout", ArgType::Double),
        ],
    ),
    (
        "BLMPOP",
        &[
            Arg::new("timeout", ArgType::Double),
            int("numkeys"),
            key().multi(),
            oneof("where", &[tok("left", "LEFT"), tok("right", "RIGHT")]),
            int("count").token("COUNT").opt(),
        ],
    ),
    (
        "BLPOP",
        &[key().multi(), Arg::new("timeout", ArgType::Double)],
    ),
    (
        "BRPOP",
        &[key().multi(), Arg::new("timeout", ArgType::Double)],
    ),
    (
        "BRPOPLPUSH",
        &[
            Arg::new("source", ArgType::Key(0)),
            Arg::new("destination", ArgType::Key(1)),
            Arg::new("timeout", ArgType::Double),
        ],
    ),
    (
        "BZMPOP",
        &[
            Arg::new("timeout", ArgType::Double),
            int("numkeys"),
            key().multi(),
            oneof("where", &[tok("min", "MIN"), tok("max", "MAX")]),
            int("count").token("COUNT").opt(),
        ],
    ),
    (
        "BZPOPMAX",
        &[key().multi(), Arg::new("timeout", ArgType::Double)],
    ),
    (
        "BZPOPMIN",
        &[key().multi(), Arg::new("timeout", ArgType::Double)],
    ),
    (
        "CLIENT|KILL",
        &[oneof(
            "filter",
            &[
                s("old-format").display("ip:port").deprecated("2.8.12"),
                oneof(
                    "new-format",
                    &[
                        int("client-id").token("ID").since("2.8.12").opt(),
                        oneof(
                            "client-type",
                            &[
                                tok("normal", "normal"),
                                tok("master", "master").since("3.2.0"),
                                tok("slave", "slave"),
                                tok("replica", "replica").since("5.0.0"),
                                tok("pubsub", "pubsub"),
                            ],
                        )
                        .token("TYPE")
                        .since("2.8.12")
                        .opt(),
                        s("username").token("USER").opt(),
                        s("addr").display("ip:port").token("ADDR").opt(),
                        s("laddr")
                            .display("ip:port")
                            .token("LADDR")
                            .since("6.2.0")
                            .opt(),
                        oneof("skipme", &[tok("yes", "YES"), tok("no", "NO")])
                            .token("SKIPME")
                            .opt(),
                        int("maxage").token("MAXAGE").since("7.4.0").opt(),
                    ],
                )
                .multi(),
            ],
        )],
    ),
    (
        "CLIENT|LIST",
        &[
            oneof(
                "client-type",
                &[
                    tok("normal", "normal"),
                    tok("master", "master"),
                    tok("replica", "replica"),
                    tok("pubsub", "pubsub"),
                ],
            )
            .token("TYPE")
            .since("5.0.0")
            .opt(),
            int("client-id").token("ID").since("6.2.0").opt().multi(),
        ],
    ),
    (
        "CLIENT|NO-EVICT",
        &[oneof("enabled", &[tok("on", "ON"), tok("off", "OFF")])],
    ),
    (
        "CLIENT|NO-TOUCH",
        &[oneof("enabled", &[tok("on", "ON"), tok("off", "OFF")])],
    ),
    (
        "CLIENT|SETINFO",
        &[oneof(
            "attr",
            &[s("libname").token("lib-name"), s("libver").token("lib-ver")],
        )],
    ),
    ("CLIENT|SETNAME", &[s("connection-name")]),
    ("CLUSTER|COUNTKEYSINSLOT", &[int("slot")]),
    ("CLUSTER|GETKEYSINSLOT", &[int("slot"), int("count")]),
    ("CLUSTER|KEYSLOT", &[s("key")]),
    ("COMMAND|DOCS", &[s("command-name").opt().multi()]),
    ("COMMAND|GETKEYS", &[s("command"), s("arg").opt().multi()]),
    ("COMMAND|INFO", &[s("command-name").opt().multi()]),
    (
        "COMMAND|LIST",
        &[oneof(
            "filterby",
            &[
                s("module-name").token("MODULE"),
                s("category").token("ACLCAT"),
                Arg::new("pattern", ArgType::Pattern).token("PATTERN"),
            ],
        )
        .token("FILTERBY")
        .opt()],
    ),
    ("CONFIG|GET", &[s("parameter").multi()]),
    (
        "CONFIG|SET",
        &[block("data", &[s("parameter"), s("value")]).multi()],
    ),
    (
        "COPY",
        &[
            Arg::new("source", ArgType::Key(0)),
            Arg::new("destination", ArgType::Key(1)),
            int("destination-db").token("DB").opt(),
            tok("replace", "REPLACE").opt(),
        ],
    ),
    ("DECR", &[key()]),
    ("DECRBY", &[key(), int("decrement")]),
    ("DEL", &[key().multi()]),
    ("DUMP", &[key()]),
    ("ECHO", &[s("message")]),
    (
        "EVAL",
        &[
            s("script"),
            int("numkeys"),
            key().opt().multi(),
            s("arg").opt().multi(),
        ],
    ),
    (
        "EVALSHA",
        &[
            s("sha1"),
            int("numkeys"),
            key().opt().multi(),
            s("arg").opt().multi(),
        ],
    ),
    (
        "EVALSHA_RO",
        &[
            s("sha1"),
            int("numkeys"),
            key().opt().multi(),
            s("arg").opt().multi(),
        ],
    ),
    (
        "EVAL_RO",
        &[
            s("script"),
            int("numkeys"),
            key().opt().multi(),
            s("arg").opt().multi(),
        ],
    ),
    ("EXISTS", &[key().multi()]),
    (
        "EXPIRE",
        &[
            key(),
            int("seconds"),
            oneof(
                "condition",
                &[
                    tok("nx", "NX"),
                    tok("xx", "XX"),
                    tok("gt", "GT"),
                    tok("lt", "LT"),
                ],
            )
            .since("7.0.0")
            .opt(),
        ],
    ),
    (
        "EXPIREAT",
        &[
            key(),
            Arg::new("unix-time-seconds", ArgType::UnixTime),
            oneof(
                "condition",
                &[
                    tok("nx", "NX"),
                    tok("xx", "XX"),
                    tok("gt", "GT"),
                    tok("lt", "LT"),
                ],
            )
            .since("7.0.0")
            .opt(),
        ],
    ),
    ("EXPIRETIME", &[key()]),
    (
        "FCALL",
        &[
            s("function"),
            int("numkeys"),
            key().opt().multi(),
            s("arg").opt().multi(),
        ],
    ),
    (
        "FCALL_RO",
        &[
            s("function"),
            int("numkeys"),
            key().opt().multi(),
            s("arg").opt().multi(),
        ],
    ),
    (
        "FLUSHALL",
        &[oneof(
            "flush-type",
            &[
                tok("async", "ASYNC").since("4.0.0"),
                tok("sync", "SYNC").since("6.2.0"),
            ],
        )
        .opt()],
    ),
    (
        "FLUSHDB",
        &[oneof(
            "flush-type",
            &[
                tok("async", "ASYNC").since("4.0.0"),
                tok("sync", "SYNC").since("6.2.0"),
            ],
        )
        .opt()],
    ),
    ("FUNCTION|DELETE", &[s("library-name")]),
    (
        "FUNCTION|FLUSH",
        &[oneof("flush-type", &[tok("async", "ASYNC"), tok("sync", "SYNC")]).opt()],
    ),
    (
        "FUNCTION|LIST",
        &[
            s("library-name-pattern").token("LIBRARYNAME").opt(),
            tok("withcode", "WITHCODE").opt(),
        ],
    ),
    (
        "FUNCTION|LOAD",
        &[tok("replace", "REPLACE").opt(), s("function-code")],
    ),
    (
        "FUNCTION|RESTORE",
        &[
            s("serialized-value"),
            oneof(
                "policy",
                &[
                    tok("flush", "FLUSH"),
                    tok("append", "APPEND"),
                    tok("replace", "REPLACE"),
                ],
            )
            .opt(),
        ],
    ),
    ("GET", &[key()]),
    ("GETDEL", &[key()]),
    (
        "GETEX",
        &[
            key(),
            oneof(
                "expiration",
                &[
                    int("seconds").token("EX"),
                    int("milliseconds").token("PX"),
                    Arg::new("unix-time-seconds", ArgType::UnixTime).token("EXAT"),
                    Arg::new("unix-time-milliseconds", ArgType::UnixTime).token("PXAT"),
                    tok("persist", "PERSIST"),
                ],
            )
            .opt(),
        ],
    ),
    (
        "HELLO",
        &[block(
            "arguments",
            &[
                int("protover"),
                block("auth", &[s("username"), s("password")])
                    .token("AUTH")
                    .opt(),
                s("clientname").token("SETNAME").opt(),
            ],
        )
        .opt()],
    ),
    ("INCR", &[key()]),
    ("INCRBY", &[key(), int("increment")]),
    (
        "INCRBYFLOAT",
        &[key(), Arg::new("increment", ArgType::Double)],
    ),
    ("INFO", &[s("section").opt().multi()]),
    ("KEYS", &[Arg::new("pattern", ArgType::Pattern)]),
    ("LATENCY|HISTOGRAM", &[s("COMMAND").opt().multi()]),
    ("LATENCY|HISTORY", &[s("event")]),
    ("LATENCY|RESET", &[s("event").opt().multi()]),
    ("LINDEX", &[key(), int("index")]),
    (
        "LINSERT",
        &[
            key(),
            oneof("where", &[tok("before", "BEFORE"), tok("after", "AFTER")]),
            s("pivot"),
            s("element"),
        ],
    ),
    ("LLEN", &[key()]),
    (
        "LMOVE",
        &[
            Arg::new("source", ArgType::Key(0)),
            Arg::new("destination", ArgType::Key(1)),
            oneof("wherefrom", &[tok("left", "LEFT"), tok("right", "RIGHT")]),
            oneof("whereto", &[tok("left", "LEFT"), tok("right", "RIGHT")]),
        ],
    ),
    (
        "LMPOP",
        &[
            int("numkeys"),
            key().multi(),
            oneof("where", &[tok("left", "LEFT"), tok("right", "RIGHT")]),
            int("count").token("COUNT").opt(),
        ],
    ),
    ("LPOP", &[key(), int("count").since("6.2.0").opt()]),
    (
        "LPOS",
        &[
            key(),
            s("element"),
            int("rank").token("RANK").opt(),
            int("num-matches").token("COUNT").opt(),
            int("len").token("MAXLEN").opt(),
        ],
    ),
    ("LPUSH", &[key(), s("element").multi()]),
    ("LPUSHX", &[key(), s("element").multi()]),
    ("LRANGE", &[key(), int("start"), int("stop")]),
    ("LREM", &[key(), int("count"), s("element")]),
    ("LSET", &[key(), int("index"), s("element")]),
    ("LTRIM", &[key(), int("start"), int("stop")]),
    (
        "MEMORY|USAGE",
        &[key(), int("count").token("SAMPLES").opt()],
    ),
    ("MGET", &[key().multi()]),
    (
        "MIGRATE",
        &[
            s("host"),
            int("port"),
            oneof("key-selector", &[key(), tok("empty-string", "")]),
            int("destination-db"),
            int("timeout"),
            tok("copy", "COPY").since("3.0.0").opt(),
            tok("replace", "REPLACE").since("3.0.0").opt(),
            oneof(
                "authentication",
                &[
                    s("auth").display("password").token("AUTH").since("4.0.7"),
                    block("auth2", &[s("username"), s("password")])
                        .token("AUTH2")
                        .since("6.0.0"),
                ],
            )
            .opt(),
            Arg::new("keys", ArgType::Key(1))
                .display("key")
                .token("KEYS")
                .since("3.0.6")
                .opt()
                .multi(),
        ],
    ),
    ("MSET", &[block("data", &[key(), s("value")]).multi()]),
    ("MSETNX", &[block("data", &[key(), s("value")]).multi()]),
    ("OBJECT|ENCODING", &[key()]),
    ("OBJECT|FREQ", &[key()]),
    ("OBJECT|IDLETIME", &[key()]),
    ("OBJECT|REFCOUNT", &[key()]),
    ("PERSIST", &[key()]),
    (
        "PEXPIRE",
        &[
            key(),
            int("milliseconds"),
            oneof(
                "condition",
                &[
                    tok("nx", "NX"),
                    tok("xx", "XX"),
                    tok("gt", "GT"),
                    tok("lt", "LT"),
                ],
            )
            .since("7.0.0")
            .opt(),
        ],
    ),
    (
        "PEXPIREAT",
        &[
            key(),
            Arg::new("unix-time-milliseconds", ArgType::UnixTime),
            oneof(
                "condition",
                &[
                    tok("nx", "NX"),
                    tok("xx", "XX"),
                    tok("gt", "GT"),
                    tok("lt", "LT"),
                ],
            )
            .since("7.0.0")
            .opt(),
        ],
    ),
    ("PEXPIRETIME", &[key()]),
    ("PING", &[s("message").opt()]),
    ("PSETEX", &[key(), int("milliseconds"), s("value")]),
    ("PTTL", &[key()]),
    ("RENAME", &[key(), Arg::new("newkey", ArgType::Key(1))]),
    ("RENAMENX", &[key(), Arg::new("newkey", ArgType::Key(1))]),
    ("RESTORE", RESTORE_ARGS),
    ("RESTORE-ASKING", RESTORE_ARGS),
    ("RPOP", &[key(), int("count").since("6.2.0").opt()]),
    (
        "RPOPLPUSH",
        &[
            Arg::new("source", ArgType::Key(0)),
            Arg::new("destination", ArgType::Key(1)),
        ],
    ),
    ("RPUSH", &[key(), s("element").multi()]),
    ("RPUSHX", &[key(), s("element").multi()]),
    ("SADD", &[key(), s("member").multi()]),
    (
        "SCAN",
        &[
            int("cursor"),
            Arg::new("pattern", ArgType::Pattern).token("MATCH").opt(),
            int("count").token("COUNT").opt(),
            s("type").token("TYPE").since("6.0.0").opt(),
        ],
    ),
    ("SCARD", &[key()]),
    ("SCRIPT|EXISTS", &[s("sha1").multi()]),
    (
        "SCRIPT|FLUSH",
        &[
            oneof("flush-type", &[tok("async", "ASYNC"), tok("sync", "SYNC")])
                .since("6.2.0")
                .opt(),
        ],
    ),
    ("SCRIPT|LOAD", &[s("script")]),
    ("SDIFF", &[key().multi()]),
    (
        "SDIFFSTORE",
        &[
            Arg::new("destination", ArgType::Key(0)),
            Arg::new("key", ArgType::Key(1)).multi(),
        ],
    ),
    ("SELECT", &[int("index")]),
    ("SETEX", &[key(), int("seconds"), s("value")]),
    ("SETNX", &[key(), s("value")]),
    (
        "SHUTDOWN",
        &[
            oneof(
                "save-selector",
                &[tok("nosave", "NOSAVE"), tok("save", "SAVE")],
            )
            .opt(),
            tok("now", "NOW").since("7.0.0").opt(),
            tok("force", "FORCE").since("7.0.0").opt(),
            tok("abort", "ABORT").since("7.0.0").opt(),
        ],
    ),
    ("SINTER", &[key().multi()]),
    (
        "SINTERCARD",
        &[
            int("numkeys"),
            key().multi(),
            int("limit").token("LIMIT").opt(),
        ],
    ),
    (
        "SINTERSTORE",
        &[
            Arg::new("destination", ArgType::Key(0)),
            Arg::new("key", ArgType::Key(1)).multi(),
        ],
    ),
    ("SISMEMBER", &[key(), s("member")]),
    ("SLOWLOG|GET", &[int("count").opt()]),
    ("SMEMBERS", &[key()]),
    ("SMISMEMBER", &[key(), s("member").multi()]),
    (
        "SMOVE",
        &[
            Arg::new("source", ArgType::Key(0)),
            Arg::new("destination", ArgType::Key(1)),
            s("member"),
        ],
    ),
    ("SPOP", &[key(), int("count").since("3.2.0").opt()]),
    ("SRANDMEMBER", &[key(), int("count").since("2.6.0").opt()]),
    ("SREM", &[key(), s("member").multi()]),
    (
        "SSCAN",
        &[
            key(),
            int("cursor"),
            Arg::new("pattern", ArgType::Pattern).token("MATCH").opt(),
            int("count").token("COUNT").opt(),
        ],
    ),
    ("STRLEN", &[key()]),
    ("SUNION", &[key().multi()]),
    (
        "SUNIONSTORE",
        &[
            Arg::new("destination", ArgType::Key(0)),
            Arg::new("key", ArgType::Key(1)).multi(),
        ],
    ),
    ("TOUCH", &[key().multi()]),
    ("TTL", &[key()]),
    ("TYPE", &[key()]),
    ("UNLINK", &[key().multi()]),
    ("WATCH", &[key().multi()]),
    ("XACK", &[key(), s("group"), s("ID").multi()]),
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
        "XCLAIM",
        &[
            key(),
            s("group"),
            s("consumer"),
            s("min-idle-time"),
            s("ID").multi(),
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
    ("XDEL", &[key(), s("ID").multi()]),
    (
        "XGROUP|CREATE",
        &[
            key(),
            s("group"),
            oneof("id-selector", &[s("id"), tok("new-id", "$")]),
            tok("mkstream", "MKSTREAM").opt(),
            int("entriesread")
                .display("entries-read")
                .token("ENTRIESREAD")
                .opt(),
        ],
    ),
    ("XGROUP|CREATECONSUMER", &[key(), s("group"), s("consumer")]),
    ("XGROUP|DELCONSUMER", &[key(), s("group"), s("consumer")]),
    ("XGROUP|DESTROY", &[key(), s("group")]),
    (
        "XGROUP|SETID",
        &[
            key(),
            s("group"),
            oneof("id-selector", &[s("id"), tok("new-id", "$")]),
            int("entriesread")
                .display("entries-read")
                .token("ENTRIESREAD")
                .opt(),
        ],
    ),
    ("XINFO|CONSUMERS", &[key(), s("group")]),
    ("XINFO|GROUPS", &[key()]),
    (
        "XINFO|STREAM",
        &[
            key(),
            block(
                "full-block",
                &[tok("full", "FULL"), int("count").token("COUNT").opt()],
            )
            .opt(),
        ],
    ),
    ("XLEN", &[key()]),
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
        "ZADD",
        &[
            key(),
            oneof("condition", &[tok("nx", "NX"), tok("xx", "XX")])
                .since("3.0.2")
                .opt(),
            oneof("comparison", &[tok("gt", "GT"), tok("lt", "LT")])
                .since("6.2.0")
                .opt(),
            tok("change", "CH").since("3.0.2").opt(),
            tok("increment", "INCR").since("3.0.2").opt(),
            block("data", &[Arg::new("score", ArgType::Double), s("member")]).multi(),
        ],
    ),
    ("ZCARD", &[key()]),
    (
        "ZCOUNT",
        &[
            key(),
            Arg::new("min", ArgType::Double),
            Arg::new("max", ArgType::Double),
        ],
    ),
    ("ZINCRBY", &[key(), int("increment"), s("member")]),
    ("ZLEXCOUNT", &[key(), s("min"), s("max")]),
    (
        "ZMPOP",
        &[
            int("numkeys"),
            key().multi(),
            oneof("where", &[tok("min", "MIN"), tok("max", "MAX")]),
            int("count").token("COUNT").opt(),
        ],
    ),
    ("ZMSCORE", &[key(), s("member").multi()]),
    ("ZPOPMAX", &[key(), int("count").opt()]),
    ("ZPOPMIN", &[key(), int("count").opt()]),
    (
        "ZRANDMEMBER",
        &[
            key(),
            block(
                "options",
                &[int("count"), tok("withscores", "WITHSCORES").opt()],
            )
            .opt(),
        ],
    ),
    (
        "ZRANGE",
        &[
            key(),
            s("start"),
            s("stop"),
            oneof(
                "sortby",
                &[tok("byscore", "BYSCORE"), tok("bylex", "BYLEX")],
            )
            .since("6.2.0")
            .opt(),
            tok("rev", "REV").since("6.2.0").opt(),
            block("limit", &[int("offset"), int("count")])
                .token("LIMIT")
                .since("6.2.0")
                .opt(),
            tok("withscores", "WITHSCORES").opt(),
        ],
    ),
    (
        "ZRANGEBYLEX",
        &[
            key(),
            s("min"),
            s("max"),
            block("limit", &[int("offset"), int("count")])
                .token("LIMIT")
                .opt(),
        ],
    ),
    (
        "ZRANGEBYSCORE",
        &[
            key(),
            Arg::new("min", ArgType::Double),
            Arg::new("max", ArgType::Double),
            tok("withscores", "WITHSCORES").since("2.0.0").opt(),
            block("limit", &[int("offset"), int("count")])
                .token("LIMIT")
                .opt(),
        ],
    ),
    (
        "ZRANGESTORE",
        &[
            Arg::new("dst", ArgType::Key(0)),
            Arg::new("src", ArgType::Key(1)),
            s("min"),
            s("max"),
            oneof(
                "sortby",
                &[tok("byscore", "BYSCORE"), tok("bylex", "BYLEX")],
            )
            .opt(),
            tok("rev", "REV").opt(),
            block("limit", &[int("offset"), int("count")])
                .token("LIMIT")
                .opt(),
        ],
    ),
    (
        "ZRANK",
        &[key(), s("member"), tok("withscore", "WITHSCORE").opt()],
    ),
    ("ZREM", &[key(), s("member").multi()]),
    ("ZREMRANGEBYLEX", &[key(), s("min"), s("max")]),
    ("ZREMRANGEBYRANK", &[key(), int("start"), int("stop")]),
    (
        "ZREMRANGEBYSCORE",
        &[
            key(),
            Arg::new("min", ArgType::Double),
            Arg::new("max", ArgType::Double),
        ],
    ),
    (
        "ZREVRANGE",
        &[
            key(),
            int("start"),
            int("stop"),
            tok("withscores", "WITHSCORES").opt(),
        ],
    ),
    (
        "ZREVRANGEBYLEX",
        &[
            key(),
            s("max"),
            s("min"),
            block("limit", &[int("offset"), int("count")])
                .token("LIMIT")
                .opt(),
        ],
    ),
    (
        "ZREVRANGEBYSCORE",
        &[
            key(),
            Arg::new("max", ArgType::Double),
            Arg::new("min", ArgType::Double),
            tok("withscores", "WITHSCORES").opt(),
            block("limit", &[int("offset"), int("count")])
                .token("LIMIT")
                .opt(),
        ],
    ),
    (
        "ZREVRANK",
        &[key(), s("member"), tok("withscore", "WITHSCORE").opt()],
    ),
    (
        "ZSCAN",
        &[
            key(),
            int("cursor"),
            Arg::new("pattern", ArgType::Pattern).token("MATCH").opt(),
            int("count").token("COUNT").opt(),
        ],
    ),
    ("ZSCORE", &[key(), s("member")]),
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
        m.push((k("display_text"), k(a.display.unwrap_or(a.name))));
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
    if let Some(v) = a.deprecated_since {
        m.push((k("deprecated_since"), k(v)));
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
