//! MIGRATE: move keys to another instance (shardstream or Redis), as DUMP
//! on this side, RESTORE on the target and DEL here once the target said OK.
//!
//! Parsing runs on the connection's thread. The shard owning the keys
//! serializes them with DUMP's code ([`crate::cmd::dump::dump_key`]), talks
//! to the target over a cached blocking socket ([`crate::migrate`]) — the
//! shard serves nothing else meanwhile, as Redis blocks its whole server
//! for MIGRATE — and deletes what the target restored through the normal
//! delete path ([`crate::cmd::keys::apply_del`]: AOF, WATCH, blocked
//! readers and the keyspace see an ordinary DEL). Keys on several shards
//! (the KEYS form, standalone mode) split by shard: each shard migrates its
//! own keys over its own socket and the replies merge
//! ([`crate::route::router::merge_nokey_or_ok`]).
//!
//! # Source
//! `migrateCommand`, `migrateGetKeys`, redis/src/cluster.c (7.x; the same
//! behaviour in 8.x).

use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::cmd::args::{self, is};
use crate::cmd::dump::{dump_key, Dumped};
use crate::cmd::{on_shard, CommandSpec, ExecCtx, FanMerge, Flags, Keys, ShardReq};
use crate::error::CmdError;
use crate::io::codec::encode_command;
use crate::migrate::{is_timeout, ConnectError, SocketCache, TargetConn, NO_DB};
use crate::reply::Reply;
use crate::shard::db::ShardDb;

/// Table rows of this family (group `generic`).
pub const SPECS: &[CommandSpec] = &[CommandSpec::keyed(
    "MIGRATE",
    -6,
    Flags::WRITE,
    Keys::Migrate,
    "generic",
    &["keyspace", "write", "slow", "dangerous"],
    "Atomically transfers a key from one Redis instance to another.",
    "2.6.0",
    parse_migrate,
    FanMerge::NoKeyOrOk,
)];

/// The status reply when none of the keys exists here (`+NOKEY`).
pub const NOKEY: &str = "NOKEY";
/// `ERR When using MIGRATE KEYS option, the key argument must be set to the empty string`.
pub const ERR_KEYS_NEED_EMPTY_KEY: &str =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";
/// `IOERR error or timeout connecting to the client` (sic: Redis 3.0 to 8.x
/// say "client" for the target here).
pub const ERR_IO_CONNECT: &str = "IOERR error or timeout connecting to the client";
/// `IOERR error or timeout writing to target instance` (Redis 3.2 to 8.x).
pub const ERR_IO_WRITE: &str = "IOERR error or timeout writing to target instance";
/// `IOERR error or timeout reading to target instance` (sic, Redis 3.2 to 8.x).
pub const ERR_IO_READ: &str = "IOERR error or timeout reading to target instance";
/// Prefix of an error the target replied: `ERR Target instance replied
/// with error: <the target's error line without its '-'>`.
pub const ERR_TARGET_PREFIX: &str = "ERR Target instance replied with error: ";

/// A parsed MIGRATE.
pub struct Migrate {
    /// Target host, as given (resolved when connecting).
    pub host: String,
    /// Target port as C's `atoi` reads the argument (Redis does; a bad port
    /// fails at connect time, after the NOKEY check).
    pub port: i64,
    /// `host:port` as spelled in the command: the socket cache key.
    pub target: String,
    /// The keys to move: `argv[3]`, or those after `KEYS`.
    pub keys: Vec<Bytes>,
    /// `destination-db`, sent as `SELECT db` (the target judges its range).
    pub db: i64,
    /// Connect, write and read timeout, ms (at least 1; 1000 when the
    /// argument is 0 or negative).
    pub timeout_ms: u64,
    /// `COPY`: keep the keys here.
    pub copy: bool,
    /// `REPLACE`: `RESTORE ... REPLACE` on the target.
    pub replace: bool,
    /// `AUTH2 username password`'s user.
    pub username: Option<Bytes>,
    /// `AUTH password` or `AUTH2`'s password: send AUTH first.
    pub password: Option<Bytes>,
}

/// MIGRATE's keys as `COMMAND GETKEYS`, routing and cluster slot checks
/// see them ([`Keys::Migrate`]): `argv[3]`, unless a `KEYS` option followed by
/// at least one argument appears among the options from `argv[6]` on (AUTH
/// passes over its password, AUTH2 over its two arguments, other words are
/// passed over). Then the keys are the arguments after `KEYS`, or none when
/// `argv[3]` is not empty (the parser reports that error).
///
/// # Source
/// `migrateGetKeys`, redis/src/db.c (7.0; the same in 8.x), as `COMMAND
/// GETKEYS` of redis-server 7.0 answers.
pub fn key_indexes(argv: &[Bytes]) -> Vec<usize> {
    let Some(key) = argv.get(3) else {
        return Vec::new();
    };
    let mut i = 6;
    while i + 1 < argv.len() {
        let word = &argv[i];
        if is(word, "KEYS") {
            if !key.is_empty() {
                return Vec::new();
            }
            return (i + 1..argv.len()).collect();
        }
        if is(word, "AUTH") {
            i += 1;
        } else if is(word, "AUTH2") {
            i += 2;
        }
        i += 1;
    }
    vec![3]
}

/// Indexes of the MIGRATE arguments MONITOR and SLOWLOG show as
/// `(redacted)`: AUTH's password, AUTH2's username and password, as the
/// option parser meets them (up to `KEYS` or the first bad option).
///
/// # Source
/// The `redactClientCommandArgument` calls of `migrateCommand`.
pub fn redacted_args(argv: &[Bytes]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let word = &argv[j];
        if is(word, "AUTH") && more >= 1 {
            out.push(j + 1);
            j += 1;
        } else if is(word, "AUTH2") && more >= 2 {
            out.extend([j + 1, j + 2]);
            j += 2;
        } else if !is(word, "COPY") && !is(word, "REPLACE") {
            break;
        }
        j += 1;
    }
    out
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key [key ...]]`
///
/// # Errors
/// In Redis's order, options first (left to right, `KEYS` ending them):
/// `ERR syntax error` (an unknown option, AUTH without a password, AUTH2
/// without both arguments), [`ERR_KEYS_NEED_EMPTY_KEY`]; then `ERR value is
/// not an integer or out of range` for `timeout`, then for `destination-db`.
/// Everything else is decided on the shard ([`apply_migrate`]).
/// # Source
/// `migrateCommand`, redis/src/cluster.c.
pub fn parse_migrate(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse(argv)?;
    Ok(on_shard(move |db, cx| apply_migrate(db, cx, req)))
}

/// [`parse_migrate`] without boxing (unit tests).
fn parse(argv: &[Bytes]) -> Result<Migrate, CmdError> {
    let arg = |i: usize| argv.get(i).ok_or(CmdError::Syntax);
    let (host, port, key) = (arg(1)?, arg(2)?, arg(3)?);
    let mut copy = false;
    let mut replace = false;
    let mut username = None;
    let mut password = None;
    let mut keys_at = None;
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let word = &argv[j];
        if is(word, "COPY") {
            copy = true;
        } else if is(word, "REPLACE") {
            replace = true;
        } else if is(word, "AUTH") {
            if more < 1 {
                return Err(CmdError::Syntax);
            }
            password = Some(argv[j + 1].clone());
            j += 1;
        } else if is(word, "AUTH2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            username = Some(argv[j + 1].clone());
            password = Some(argv[j + 2].clone());
            j += 2;
        } else if is(word, "KEYS") {
            if !key.is_empty() {
                return Err(CmdError::msg(ERR_KEYS_NEED_EMPTY_KEY));
            }
            keys_at = Some(j + 1);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let timeout = args::int_arg(arg(5)?)?;
    let db = args::int_arg(arg(4)?)?;
    let host = String::from_utf8_lossy(host).into_owned();
    let port_text = String::from_utf8_lossy(port);
    Ok(Migrate {
        target: format!("{host}:{port_text}"),
        port: atoi(port),
        host,
        keys: match keys_at {
            Some(at) => argv[at..].to_vec(),
            None => vec![key.clone()],
        },
        db,
        timeout_ms: u64::try_from(timeout)
            .ok()
            .filter(|t| *t > 0)
            .unwrap_or(1000),
        copy,
        replace,
        username,
        password,
    })
}

/// C's `atoi` as Redis reads MIGRATE's port: leading blanks, a sign, the
/// digits up to the first non-digit (0 when none); saturating rather than
/// undefined on overflow.
fn atoi(b: &[u8]) -> i64 {
    let s = b.trim_ascii_start();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let v = digits
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .fold(0i64, |v, &c| {
            v.saturating_mul(10).saturating_add(i64::from(c - b'0'))
        });
    if neg {
        -v
    } else {
        v
    }
}

/// MIGRATE on the shard owning the keys.
///
/// Serializes the keys that exist (each a keyspace hit or miss, as DUMP),
/// then, as one pipeline on the cached socket for `host:port` (connected
/// within the timeout; every write and read waits at most the timeout):
/// `AUTH [username] password` when asked, `SELECT db` unless the socket's
/// last successful MIGRATE selected that database (as in Redis, a socket
/// with none counts as having database -1, so `db` -1 sends no SELECT
/// there), one `RESTORE key ttl
/// payload [REPLACE]` per key (`RESTORE-ASKING` when this server is in
/// cluster mode; `ttl` the ms left, 0 for none). One reply line is read per
/// command. Without COPY, every key the target restored is deleted here
/// (also when another key failed); a DEL per key goes to the AOF.
///
/// A cached socket that fails (not by timeout) before any RESTORE reply was
/// read is closed and the whole exchange retried once on a new one. Any
/// socket error closes the socket; a target error forgets its selected db.
///
/// # Reply
/// `+OK`; `+NOKEY` when none of the keys exists (nothing is sent).
/// # Errors
/// * `ERR Target instance replied with error: <text>` ([`ERR_TARGET_PREFIX`]):
///   the AUTH or SELECT error, else the first RESTORE error (e.g. `BUSYKEY
///   Target key name already exists.`); the keys restored are still moved.
/// * [`ERR_IO_CONNECT`]: no connection attempt could start (the host does
///   not resolve, a negative port, no route).
/// * [`ERR_IO_WRITE`]: the pipeline could not be written — including, as
///   in Redis, a connection that was refused or timed out: Redis's blocking
///   connect reports success once the attempt started, and the failure
///   shows at the first write.
/// * [`ERR_IO_READ`]: a reply did not come (timeout, closed connection);
///   keys restored before it are still moved.
/// # Source
/// `migrateCommand`, `migrateGetSocket`, redis/src/cluster.c (7.x; the
/// texts are the same in 8.x); `connSocketBlockingConnect`, redis/src/socket.c.
pub fn apply_migrate(db: &mut ShardDb, cx: &ExecCtx, req: Migrate) -> Reply {
    let found: Vec<(&Bytes, Dumped)> = req
        .keys
        .iter()
        .filter_map(|k| dump_key(db, cx, k).map(|d| (k, d)))
        .collect();
    if found.is_empty() {
        return Reply::simple(NOKEY);
    }
    let restore: &[u8] = if db
        .tunables
        .cluster_enabled
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    let (restored, reply) = exchange(&mut db.migrate_sockets, &req, &found, restore);
    if !req.copy && !restored.is_empty() {
        let keys: Vec<Bytes> = restored.iter().map(|&i| found[i].0.clone()).collect();
        crate::cmd::keys::apply_del(db, cx, &keys);
    }
    reply
}

/// Talk to the target, retrying once on a fresh socket as Redis's
/// `try_again` does. Returns the indexes (into `keys`) of the keys the
/// target restored, and the command's reply.
fn exchange(
    sockets: &mut SocketCache,
    req: &Migrate,
    keys: &[(&Bytes, Dumped)],
    restore: &[u8],
) -> (Vec<usize>, Reply) {
    let timeout = Duration::from_millis(req.timeout_ms);
    let mut may_retry = true;
    loop {
        let conn = match sockets.get(&req.target, &req.host, req.port, timeout) {
            Ok(conn) => conn,
            Err(ConnectError::NotStarted(_)) => return (Vec::new(), error(ERR_IO_CONNECT)),
            // Redis learns of these at its first write.
            Err(ConnectError::Failed(e)) => {
                if may_retry && !is_timeout(&e) {
                    may_retry = false;
                    continue;
                }
                return (Vec::new(), error(ERR_IO_WRITE));
            }
        };
        let select = conn.last_db != req.db;
        let pipeline = encode_pipeline(req, keys, select, restore);
        let trip = round_trip(conn, &pipeline, req, select, keys.len());
        let (failed, text) = match trip {
            Trip::WriteFailed(e) => (e, ERR_IO_WRITE),
            Trip::ReadFailed(e) => (e, ERR_IO_READ),
            Trip::Replies {
                restored,
                target_error,
                lost,
            } => {
                if let Some((read, e)) = &lost {
                    sockets.close(&req.target);
                    let retry = target_error.is_none() && *read == 0 && !is_timeout(e);
                    if retry && may_retry {
                        may_retry = false;
                        continue;
                    }
                }
                let reply = match (target_error, lost) {
                    (Some(text), _) => error(format!("{ERR_TARGET_PREFIX}{text}")),
                    (None, Some(_)) => error(ERR_IO_READ),
                    (None, None) => Reply::Ok,
                };
                return (restored, reply);
            }
        };
        sockets.close(&req.target);
        if may_retry && !is_timeout(&failed) {
            may_retry = false;
            continue;
        }
        return (Vec::new(), error(text));
    }
}

/// The whole request as one buffer: AUTH, SELECT, the RESTOREs.
fn encode_pipeline(
    req: &Migrate,
    keys: &[(&Bytes, Dumped)],
    select: bool,
    restore: &[u8],
) -> BytesMut {
    let mut out = BytesMut::with_capacity(
        64 + keys
            .iter()
            .map(|(k, d)| k.len() + d.payload.len() + 64)
            .sum::<usize>(),
    );
    if let Some(password) = &req.password {
        match &req.username {
            Some(user) => encode_command(&[&b"AUTH"[..], user, password], &mut out),
            None => encode_command(&[&b"AUTH"[..], password], &mut out),
        }
    }
    if select {
        let mut n = itoa::Buffer::new();
        encode_command(&[&b"SELECT"[..], n.format(req.db).as_bytes()], &mut out);
    }
    let mut n = itoa::Buffer::new();
    for (key, dumped) in keys {
        let ttl = n.format(dumped.ttl_ms).as_bytes();
        if req.replace {
            encode_command(
                &[restore, key, ttl, &dumped.payload, &b"REPLACE"[..]],
                &mut out,
            );
        } else {
            encode_command(&[restore, key, ttl, &dumped.payload], &mut out);
        }
    }
    out
}

/// What one write-then-read pass over the socket gave.
enum Trip {
    /// The pipeline could not be written.
    WriteFailed(std::io::Error),
    /// The AUTH or SELECT reply could not be read.
    ReadFailed(std::io::Error),
    /// RESTORE replies were read, up to `lost` (the index of the reply
    /// that could not be read, and why).
    Replies {
        /// Keys restored (indexes into the keys), in order.
        restored: Vec<usize>,
        /// The first error: AUTH's, else SELECT's, else a RESTORE's; its
        /// text without the leading `-`.
        target_error: Option<String>,
        lost: Option<(usize, std::io::Error)>,
    },
}

/// Write the pipeline and read its replies: AUTH's and SELECT's when sent,
/// then one per key. A key counts as restored when its reply is not an
/// error and neither AUTH nor SELECT failed. Updates the socket's selected
/// database: `db` after a clean pass, unknown after a target error.
fn round_trip(
    conn: &mut TargetConn,
    pipeline: &[u8],
    req: &Migrate,
    select: bool,
    nkeys: usize,
) -> Trip {
    if let Err(e) = conn.write_all(pipeline) {
        return Trip::WriteFailed(e);
    }
    let mut early_error = None;
    for sent in [req.password.is_some(), select] {
        if !sent {
            continue;
        }
        match conn.read_line() {
            Ok(line) if line.first() == Some(&b'-') => {
                early_error.get_or_insert(line);
            }
            Ok(_) => {}
            Err(e) => return Trip::ReadFailed(e),
        }
    }
    let mut restored = Vec::with_capacity(nkeys);
    let mut target_error = None;
    let mut lost = None;
    for j in 0..nkeys {
        let line = match conn.read_line() {
            Ok(line) => line,
            Err(e) => {
                lost = Some((j, e));
                break;
            }
        };
        let failed = match &early_error {
            Some(e) => Some(e),
            None => (line.first() == Some(&b'-')).then_some(&line),
        };
        match failed {
            Some(e) => {
                if target_error.is_none() {
                    conn.last_db = NO_DB;
                    // As addReplyErrorFormat: no line breaks in an error.
                    let text = String::from_utf8_lossy(&e[1..]).replace(['\r', '\n'], " ");
                    target_error = Some(text);
                }
            }
            None => restored.push(j),
        }
    }
    if target_error.is_none() && lost.is_none() {
        conn.last_db = req.db;
    }
    Trip::Replies {
        restored,
        target_error,
        lost,
    }
}

/// An error reply with full text.
fn error(text: impl Into<std::borrow::Cow<'static, str>>) -> Reply {
    Reply::Error(CmdError::msg(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|w| {
                Bytes::from(if w == "\"\"" {
                    String::new()
                } else {
                    w.to_string()
                })
            })
            .collect()
    }

    fn keys_of(line: &str) -> Vec<String> {
        let a = argv(line);
        key_indexes(&a)
            .into_iter()
            .map(|i| String::from_utf8_lossy(&a[i]).into_owned())
            .collect()
    }

    /// Pinned against `COMMAND GETKEYS` of redis-server 7.0.
    #[test]
    fn key_positions_match_redis() {
        assert_eq!(keys_of("MIGRATE h 1 k 0 5"), ["k"]);
        assert_eq!(keys_of("MIGRATE h 1 \"\" 0 5"), [""]);
        assert_eq!(keys_of("MIGRATE h 1 \"\" 0 5 KEYS a b"), ["a", "b"]);
        assert_eq!(keys_of("MIGRATE h 1 \"\" 0 5 keys"), [""]);
        assert_eq!(keys_of("MIGRATE h 1 \"\" 0 5 keys keys"), ["keys"]);
        assert_eq!(keys_of("MIGRATE h 1 k 0 5 keys"), ["k"]);
        assert!(keys_of("MIGRATE h 1 k 0 5 keys a b").is_empty());
        assert_eq!(keys_of("MIGRATE h 1 \"\" 0 5 auth keys a b"), [""]);
        assert_eq!(keys_of("MIGRATE h 1 \"\" 0 5 auth2 u keys a b"), [""]);
        assert_eq!(
            keys_of("MIGRATE h 1 \"\" 0 5 auth2 u p keys a b"),
            ["a", "b"]
        );
        assert_eq!(keys_of("MIGRATE h 1 \"\" 0 5 bogus copy keys x"), ["x"]);
    }

    #[test]
    fn parse_errors_in_redis_order() {
        let err = |line: &str| parse(&argv(line)).err().map(|e| e.to_string());
        assert_eq!(
            err("MIGRATE h 1 k x y bogus").as_deref(),
            Some("ERR syntax error")
        );
        assert_eq!(
            err("MIGRATE h 1 k x y KEYS a").as_deref(),
            Some(ERR_KEYS_NEED_EMPTY_KEY)
        );
        assert_eq!(
            err("MIGRATE h 1 k 0 5 AUTH").as_deref(),
            Some("ERR syntax error")
        );
        assert_eq!(
            err("MIGRATE h 1 k 0 5 AUTH2 u").as_deref(),
            Some("ERR syntax error")
        );
        assert_eq!(
            err("MIGRATE h 1 k x 5").as_deref(),
            Some("ERR value is not an integer or out of range")
        );
        // KEYS ends the options: what follows is keys, not options.
        let m = parse(&argv("MIGRATE h 7 \"\" 2 -3 COPY KEYS a REPLACE")).unwrap();
        assert!(m.copy && !m.replace);
        assert_eq!(m.keys, [Bytes::from("a"), Bytes::from("REPLACE")]);
        assert_eq!((m.db, m.timeout_ms, m.port), (2, 1000, 7));
        assert_eq!(m.target, "h:7");
        let m = parse(&argv("MIGRATE h 1 k 0 5 AUTH2 u p")).unwrap();
        assert_eq!(m.username.as_deref(), Some(&b"u"[..]));
        assert_eq!(m.password.as_deref(), Some(&b"p"[..]));
    }

    #[test]
    fn passwords_are_redacted() {
        let r = |line: &str| redacted_args(&argv(line));
        assert_eq!(r("MIGRATE h 1 k 0 5 COPY AUTH2 u p KEYS"), [8, 9]);
        assert_eq!(r("MIGRATE h 1 \"\" 0 5 AUTH pw KEYS AUTH x"), [7]);
        assert_eq!(r("MIGRATE h 1 k 0 5 AUTH"), Vec::<usize>::new());
        assert_eq!(r("MIGRATE h 1 k 0 5 bogus AUTH pw"), Vec::<usize>::new());
    }

    #[test]
    fn ports_read_as_atoi() {
        assert_eq!(atoi(b" 12"), 12);
        assert_eq!(atoi(b"1x"), 1);
        assert_eq!(atoi(b"abc"), 0);
        assert_eq!(atoi(b"-1"), -1);
    }

    #[test]
    fn missing_keys_reply_nokey_without_connecting() {
        let mut db = ShardDb::new(crate::route::slot::ShardId(0), 1, 1);
        let cx = ExecCtx::at(0, 1_000);
        // Port 0 would fail if a connection were tried.
        let req = parse(&argv("MIGRATE 127.0.0.1 0 \"\" 0 5 KEYS a b")).unwrap();
        assert_eq!(apply_migrate(&mut db, &cx, req), Reply::simple(NOKEY));
        assert!(db.migrate_sockets.is_empty());
        assert_eq!(db.stats.keyspace_misses, 2);
    }
}
