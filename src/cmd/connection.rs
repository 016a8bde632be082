//! Connection commands: HELLO, AUTH, RESET and the CLIENT container (ID,
//! SETNAME, GETNAME, SETINFO, LIST, INFO, KILL, REPLY, UNBLOCK, NO-EVICT,
//! NO-TOUCH, HELP).
//!
//! They run on the connection's thread and only touch the connection's [`Session`], its
//! [`ClientShared`] record and the server-wide client registry; no shard is
//! involved (except RESET forgetting the connection's WATCHed keys).
//!
//! [`Session`]: crate::io::conn::Session
//! [`ClientShared`]: crate::io::conn::ClientShared

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::cmd::args::{self, is, parse_i64};
use crate::cmd::table::{self, lookup, lookup_sub};
use crate::cmd::{Action, CommandSpec, ConnCtx, Flags, Handler, Keys};
use crate::error::CmdError;
use crate::io::conn::ClientShared;
use crate::reply::Reply;
use crate::server::Shared;

/// The server name HELLO reports (`server` field). Clients expect `redis`.
pub const SERVER_NAME: &str = "redis";

/// The Redis version shardstream reports in HELLO (`version`) and INFO
/// (`redis_version`). Clients gate features on it (RESP3, stream options added
/// in 7.x), so it names the Redis release whose command set we follow rather
/// than shardstream's own version (INFO `shardstream_version` carries that).
pub const REDIS_COMPAT_VERSION: &str = "8.10.0";

/// Flags Redis gives HELLO and AUTH: usable before authenticating.
const CONN_AUTH_FLAGS: Flags = Flags::NOSCRIPT
    .with(Flags::LOADING)
    .with(Flags::STALE)
    .with(Flags::FAST)
    .with(Flags::NO_AUTH)
    .with(Flags::ALLOW_BUSY);

const NLS: Flags = Flags::NOSCRIPT.with(Flags::LOADING).with(Flags::STALE);
const ADMIN_NLS: Flags = Flags::ADMIN.with(NLS);
/// CLIENT KILL / UNBLOCK: see [`Flags::AFTER_EARLIER`].
const ADMIN_NLS_IN_ORDER: Flags = ADMIN_NLS.with(Flags::AFTER_EARLIER);

const fn row(
    name: &'static str,
    arity: i16,
    flags: Flags,
    acl: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    f: fn(&mut ConnCtx<'_>, &[Bytes]) -> Result<Action, CmdError>,
) -> CommandSpec {
    CommandSpec::conn(name, arity, flags, "connection", acl, summary, since, f)
}

const SLOW_CONN: &[&str] = &["slow", "connection"];
const ADMIN_CONN: &[&str] = &["admin", "slow", "dangerous", "connection"];

/// Rows of `CLIENT|<sub>`.
const CLIENT_SUBS: &[CommandSpec] = &[
    row(
        "CLIENT|ID",
        2,
        NLS,
        SLOW_CONN,
        "Returns the unique client ID of the connection.",
        "5.0.0",
        client_id,
    ),
    row(
        "CLIENT|SETNAME",
        3,
        NLS,
        SLOW_CONN,
        "Sets the connection name.",
        "2.6.9",
        client_setname,
    ),
    row(
        "CLIENT|GETNAME",
        2,
        NLS,
        SLOW_CONN,
        "Returns the name of the connection.",
        "2.6.9",
        client_getname,
    ),
    row(
        "CLIENT|SETINFO",
        4,
        NLS,
        SLOW_CONN,
        "Sets information specific to the client or connection.",
        "7.2.0",
        client_setinfo,
    ),
    row(
        "CLIENT|LIST",
        -2,
        ADMIN_NLS,
        ADMIN_CONN,
        "Lists open connections.",
        "2.4.0",
        client_list,
    ),
    row(
        "CLIENT|INFO",
        2,
        NLS,
        SLOW_CONN,
        "Returns information about the connection.",
        "6.2.0",
        client_info,
    ),
    row(
        "CLIENT|KILL",
        -3,
        ADMIN_NLS_IN_ORDER,
        ADMIN_CONN,
        "Terminates open connections.",
        "2.4.0",
        client_kill,
    ),
    row(
        "CLIENT|REPLY",
        3,
        NLS,
        SLOW_CONN,
        "Instructs the server whether to reply to commands.",
        "3.2.0",
        client_reply,
    ),
    row(
        "CLIENT|UNBLOCK",
        -3,
        ADMIN_NLS_IN_ORDER,
        ADMIN_CONN,
        "Unblocks a client blocked by a blocking command from a different connection.",
        "5.0.0",
        client_unblock,
    ),
    row(
        "CLIENT|NO-EVICT",
        3,
        ADMIN_NLS,
        ADMIN_CONN,
        "Sets the client eviction mode of the connection.",
        "7.0.0",
        client_no_evict,
    ),
    row(
        "CLIENT|NO-TOUCH",
        3,
        NLS,
        SLOW_CONN,
        "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
        "7.2.0",
        client_no_touch,
    ),
    row(
        "CLIENT|HELP",
        2,
        Flags::LOADING.with(Flags::STALE),
        SLOW_CONN,
        "Returns helpful text about the different subcommands.",
        "5.0.0",
        client_help,
    ),
];

/// Table rows of this family.
pub const SPECS: &[CommandSpec] = &[
    row(
        "HELLO",
        -1,
        CONN_AUTH_FLAGS,
        &["fast", "connection"],
        "Handshakes with the Redis server.",
        "6.0.0",
        hello,
    ),
    row(
        "AUTH",
        -2,
        CONN_AUTH_FLAGS,
        &["fast", "connection"],
        "Authenticates the connection.",
        "1.0.0",
        auth,
    ),
    row(
        "RESET",
        1,
        CONN_AUTH_FLAGS,
        &["fast", "connection"],
        "Resets the connection.",
        "6.2.0",
        reset,
    ),
    CommandSpec {
        name: "CLIENT",
        arity: -2,
        flags: Flags::NONE,
        keys: Keys::None,
        acl: &["slow"],
        summary: "A container for client connection commands.",
        since: "2.4.0",
        group: "connection",
        subcommands: CLIENT_SUBS,
        handler: Handler::Conn(run_subcommand),
    },
];

// ---------------------------------------------------------------------------
// Container dispatch

/// Run `argv[1]` as a subcommand of the container command `argv[0]` (CLIENT,
/// CONFIG, COMMAND). The connection's thread normally resolves subcommands itself; this
/// is the container row's handler for callers that route by the container.
///
/// # Errors
/// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`;
/// `ERR wrong number of arguments for '<cmd>|<sub>' command`.
/// # Source
/// `processCommand` subcommand lookup and arity check, redis/src/server.c.
pub fn run_subcommand(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let container = argv
        .first()
        .and_then(|n| lookup(n))
        .ok_or_else(|| table::unknown_command(argv))?;
    let spec = resolve_subcommand(container, argv)?;
    match spec.handler {
        Handler::Conn(f) => f(cx, argv),
        Handler::Keyed { .. } | Handler::Blocking { .. } => Err(CmdError::msg(
            "ERR this subcommand cannot run inside its container",
        )),
    }
}

/// The row of `argv[1]` under `container`, with its arity checked.
///
/// # Errors
/// As [`run_subcommand`].
pub fn resolve_subcommand(
    container: &'static CommandSpec,
    argv: &[Bytes],
) -> Result<&'static CommandSpec, CmdError> {
    let sub = argv.get(1).ok_or_else(|| CmdError::arity(container.name))?;
    let spec = lookup_sub(container, sub)
        .ok_or_else(|| CmdError::unknown_subcommand(container.name, sub))?;
    if !spec.arity_ok(argv.len()) {
        return Err(CmdError::arity(spec.name));
    }
    Ok(spec)
}

// ---------------------------------------------------------------------------
// HELLO / AUTH

/// Whether `user`/`pass` authenticate against the configuration: the only user
/// is `default`; without `requirepass` it accepts any password (Redis's
/// `nopass` default user).
///
/// # Errors
/// `WRONGPASS invalid username-password pair or user is disabled.`
fn check_credentials(shared: &Shared, user: &[u8], pass: &[u8]) -> Result<(), CmdError> {
    let required = shared
        .config
        .read()
        .map(|c| c.requirepass.clone())
        .unwrap_or(None);
    if user != b"default" {
        return Err(CmdError::WrongPass);
    }
    match required {
        None => Ok(()),
        Some(p) if same_secret(p.as_bytes(), pass) => Ok(()),
        Some(_) => Err(CmdError::WrongPass),
    }
}

/// Compare secrets in time independent of where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`
///
/// Switches the connection to RESP `protover` (2 or 3), optionally
/// authenticating and naming it, and describes the server.
///
/// # Reply
/// A map: `server` "redis", `version` [`REDIS_COMPAT_VERSION`], `proto`, `id`
/// (client id), `mode` "standalone", `role` "master", `modules` (empty array);
/// in the newly selected protocol.
/// # Errors
/// * `ERR Protocol version is not an integer or out of range`
/// * `NOPROTO unsupported protocol version` (not 2 or 3)
/// * `ERR Syntax error in HELLO option '<opt>'`
/// * `WRONGPASS ...` for bad AUTH credentials
/// * `NOAUTH HELLO must be called with the client already authenticated, ...`
///   when `requirepass` is set and neither earlier AUTH nor HELLO AUTH succeeded
/// * `ERR Client names cannot contain spaces, newlines or special characters.`
/// # Source
/// `helloCommand`, redis/src/networking.c.
pub fn hello(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let mut proto = if cx.conn.resp3 { 3 } else { 2 };
    if let Some(v) = argv.get(1) {
        let v = parse_i64(v).ok_or_else(|| {
            CmdError::msg("ERR Protocol version is not an integer or out of range")
        })?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::msg("NOPROTO unsupported protocol version"));
        }
        proto = v;
    }
    let mut creds: Option<(&Bytes, &Bytes)> = None;
    let mut name: Option<&Bytes> = None;
    let mut i = 2;
    while i < argv.len() {
        let opt = &argv[i];
        let more = argv.len() - 1 - i;
        if is(opt, "AUTH") && more >= 2 {
            creds = Some((&argv[i + 1], &argv[i + 2]));
            i += 3;
        } else if is(opt, "SETNAME") && more >= 1 {
            name = Some(&argv[i + 1]);
            i += 2;
        } else {
            return Err(CmdError::quoting(&[
                b"ERR Syntax error in HELLO option '",
                args::c_str(opt),
                b"'",
            ]));
        }
    }
    if let Some((user, pass)) = creds {
        check_credentials(cx.shared, user, pass)?;
        cx.conn.authenticated = true;
    }
    if !cx.conn.authenticated {
        return Err(CmdError::msg(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    if let Some(n) = name {
        set_client_name(&cx.conn.shared, n)?;
    }
    cx.conn.resp3 = proto == 3;
    cx.conn.shared.resp.store(proto as usize, Ordering::Relaxed);
    Ok(Reply::Map(vec![
        (Reply::bulk_copy("server"), Reply::bulk_copy(SERVER_NAME)),
        (
            Reply::bulk_copy("version"),
            Reply::bulk_copy(REDIS_COMPAT_VERSION),
        ),
        (Reply::bulk_copy("proto"), Reply::Int(proto)),
        (Reply::bulk_copy("id"), Reply::Int(cx.conn.id as i64)),
        (Reply::bulk_copy("mode"), Reply::bulk_copy("standalone")),
        (Reply::bulk_copy("role"), Reply::bulk_copy("master")),
        (Reply::bulk_copy("modules"), Reply::Array(Vec::new())),
    ])
    .into())
}

/// `AUTH [username] password`
///
/// Authenticates the connection. The only user is `default`.
///
/// # Reply
/// `+OK`.
/// # Errors
/// * `ERR AUTH <password> called without any password configured for the
///   default user. Are you sure your configuration is correct?` — one-argument
///   form without `requirepass`
/// * `WRONGPASS invalid username-password pair or user is disabled.`
/// * `ERR syntax error` with more than two arguments
/// # Source
/// `authCommand`, redis/src/acl.c.
pub fn auth(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let (user, pass): (&[u8], &Bytes) = match argv {
        [_, pass] => {
            let configured = requirepass_set(cx.shared).unwrap_or(false);
            if !configured {
                return Err(CmdError::msg(
                    "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ));
            }
            (b"default", pass)
        }
        [_, user, pass] => (user, pass),
        _ => return Err(CmdError::Syntax),
    };
    check_credentials(cx.shared, user, pass)?;
    cx.conn.authenticated = true;
    Ok(Reply::Ok.into())
}

// ---------------------------------------------------------------------------
// CLIENT subcommands

/// Whether a client name / lib-name / lib-ver is acceptable: printable ASCII
/// without spaces (`'!'..='~'`).
fn valid_client_attr(v: &[u8]) -> bool {
    v.iter().all(|b| (b'!'..=b'~').contains(b))
}

/// Set (or, with an empty name, clear) the connection name.
fn set_client_name(client: &ClientShared, name: &[u8]) -> Result<(), CmdError> {
    if !valid_client_attr(name) {
        return Err(CmdError::msg(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    if let Ok(mut n) = client.name.lock() {
        *n = (!name.is_empty()).then(|| args::text(name));
    }
    Ok(())
}

/// `CLIENT ID` — the connection's id, an integer.
fn client_id(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(Reply::Int(cx.conn.id as i64).into())
}

/// `CLIENT SETNAME name` — `+OK`; an empty name clears it.
///
/// # Errors
/// `ERR Client names cannot contain spaces, newlines or special characters.`
fn client_setname(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    set_client_name(&cx.conn.shared, &argv[2])?;
    Ok(Reply::Ok.into())
}

/// `CLIENT GETNAME` — the name as a bulk string, or a null bulk when unnamed.
fn client_getname(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    let name = cx.conn.shared.name.lock().ok().and_then(|n| n.clone());
    Ok(name.map_or(Reply::NullBulk, Reply::bulk).into())
}

/// `CLIENT SETINFO <LIB-NAME libname | LIB-VER libver>` — `+OK`.
///
/// # Errors
/// `ERR Unrecognized option '<attr>'`; `ERR <attr> cannot contain spaces,
/// newlines or special characters.`
/// # Source
/// `clientSetinfoCommand`, redis/src/networking.c (7.2).
fn client_setinfo(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let attr = &argv[2];
    let value = &argv[3];
    let slot = if is(attr, "LIB-NAME") {
        &cx.conn.shared.lib_name
    } else if is(attr, "LIB-VER") {
        &cx.conn.shared.lib_ver
    } else {
        return Err(CmdError::msg(format!(
            "ERR Unrecognized option '{}'",
            args::text(attr)
        )));
    };
    if !valid_client_attr(value) {
        return Err(CmdError::msg(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            args::text(attr)
        )));
    }
    if let Ok(mut s) = slot.lock() {
        *s = (!value.is_empty()).then(|| args::text(value));
    }
    Ok(Reply::Ok.into())
}

/// Every connected client, by id.
fn all_clients(shared: &Shared) -> Vec<Arc<ClientShared>> {
    let mut v: Vec<Arc<ClientShared>> = shared
        .clients
        .lock()
        .map(|m| {
            m.values()
                .filter(|c| !c.killed.load(Ordering::SeqCst))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|c| c.id);
    v
}

/// Client lines as CLIENT LIST/INFO reply text: one line each, `\n`-terminated.
fn client_lines(shared: &Shared, clients: &[Arc<ClientShared>]) -> Reply {
    let now = shared.uptime_ms();
    let mut text = String::new();
    for c in clients {
        text.push_str(&c.info_line(now, &shared.cmdstats));
        text.push('\n');
    }
    Reply::Verbatim(Bytes::from(text))
}

/// Client types Redis knows (`CLIENT LIST TYPE`, `CLIENT KILL TYPE`); every
/// shardstream client is `normal`.
fn client_type_matches_normal(t: &[u8]) -> Result<bool, CmdError> {
    if is(t, "normal") {
        Ok(true)
    } else if ["master", "replica", "slave", "pubsub"]
        .iter()
        .any(|k| is(t, k))
    {
        Ok(false)
    } else {
        Err(CmdError::quoting(&[
            b"ERR Unknown client type '",
            args::c_str(t),
            b"'",
        ]))
    }
}

/// `CLIENT LIST [TYPE <NORMAL | MASTER | REPLICA | PUBSUB>] [ID client-id [client-id ...]]`
///
/// # Reply
/// Verbatim text, one `id=.. addr=.. ...` line per client, ordered by id.
/// # Errors
/// `ERR Unknown client type '<t>'`; `ERR Invalid client ID`; `ERR syntax error`.
/// # Source
/// `clientCommand` LIST, redis/src/networking.c.
fn client_list(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let mut clients = all_clients(cx.shared);
    if argv.len() == 4 && is(&argv[2], "TYPE") {
        if !client_type_matches_normal(&argv[3])? {
            clients.clear();
        }
    } else if argv.len() >= 4 && is(&argv[2], "ID") {
        let mut ids = Vec::new();
        for a in &argv[3..] {
            match parse_i64(a) {
                Some(id) if id > 0 => ids.push(id as u64),
                _ => return Err(CmdError::msg("ERR Invalid client ID")),
            }
        }
        clients.retain(|c| ids.contains(&c.id));
    } else if argv.len() != 2 {
        return Err(CmdError::Syntax);
    }
    Ok(client_lines(cx.shared, &clients).into())
}

/// `CLIENT INFO` — this connection's CLIENT LIST line, as verbatim text.
fn client_info(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(client_lines(cx.shared, std::slice::from_ref(&cx.conn.shared)).into())
}

/// Mark a client killed and wake its shard thread, which closes the
/// connection. From here on it is gone for everyone else, as Redis frees
/// another client at once: a read it is blocked in is claimed (no write
/// sent after the kill is delivered to it), and CLIENT LIST, KILL and
/// UNBLOCK no longer see it.
fn kill_client(shared: &Shared, c: &ClientShared) {
    c.killed.store(true, Ordering::SeqCst);
    if let Some(ticket) = c.ticket.lock().ok().and_then(|t| t.upgrade()) {
        ticket.claim();
    }
    crate::io::KILL_EPOCH.fetch_add(1, Ordering::SeqCst);
    let thread = c.thread.load(Ordering::SeqCst);
    if let Some(t) = shared.threads.get(usize::from(thread)) {
        t.wake();
    }
}

/// `CLIENT REPLY ON|OFF|SKIP` — whether this connection gets replies:
/// `OFF` writes none (errors included) until `CLIENT REPLY ON`; `SKIP` drops
/// the reply of the next command only (nothing under `OFF`). Commands still
/// run: a pipeline of writes under `OFF` costs no reply traffic.
///
/// # Reply
/// `+OK` for `ON`; nothing for `OFF` and `SKIP`.
///
/// # Errors
/// `ERR syntax error` for another mode (not written under `OFF`).
///
/// # Source
/// `clientCommand` "reply", redis/src/networking.c.
fn client_reply(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let s = &mut *cx.conn;
    let mode = &argv[2];
    if is(mode, "ON") {
        s.reply_off = false;
        s.reply_skip = 0;
    } else if is(mode, "OFF") {
        s.reply_off = true;
    } else if is(mode, "SKIP") {
        if !s.reply_off {
            // This command's reply, then the next one's.
            s.reply_skip = 2;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    // Written only for ON: OFF and SKIP are silenced by the dispatcher.
    Ok(Reply::Ok.into())
}

/// `CLIENT UNBLOCK <client-id> [TIMEOUT|ERROR]` — end another client's
/// blocking command (XREAD/XREADGROUP BLOCK, BLPOP, BZPOPMIN, ...) as if it
/// timed out (`TIMEOUT`, the default: it gets a null array) or with the
/// error `-UNBLOCKED client unblocked via CLIENT UNBLOCK` (`ERROR`, which
/// counts as a failed call of that command and errorstat `UNBLOCKED`).
///
/// # Reply
/// Integer: 1 if the client was blocked and is now unblocked, 0 otherwise
/// (no such client, not blocked, or already being answered).
///
/// # Errors
/// `ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR` (checked first);
/// `ERR value is not an integer or out of range` for the id; more than four
/// arguments: `ERR unknown subcommand or wrong number of arguments for
/// 'unblock'. Try CLIENT HELP.`
///
/// # Source
/// `clientCommand` "unblock", redis/src/networking.c (reply and errors as
/// Redis 8.x; a timeout is not a failed call since Redis 7.2).
fn client_unblock(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    use crate::shard::blocking::Unblocked;
    if argv.len() > 4 {
        return Err(CmdError::subcommand_syntax("CLIENT", &argv[1]));
    }
    let how = match argv.get(3) {
        None => Unblocked::Timeout,
        Some(r) if is(r, "TIMEOUT") => Unblocked::Timeout,
        Some(r) if is(r, "ERROR") => Unblocked::Error,
        Some(_) => {
            return Err(CmdError::msg(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let id = args::int_arg(&argv[2])?;
    let target = cx
        .shared
        .clients
        .lock()
        .ok()
        .and_then(|m| m.get(&(id as u64)).cloned())
        .filter(|c| !c.killed.load(Ordering::SeqCst));
    let ticket = target
        .as_ref()
        .and_then(|c| c.ticket.lock().ok().and_then(|t| t.upgrade()));
    let unblocked = match (target, ticket) {
        (Some(c), Some(t)) if t.unblock(how) => {
            // Its connection's thread answers it on its next loop turn.
            let thread = c.thread.load(Ordering::SeqCst);
            if let Some(t) = cx.shared.threads.get(usize::from(thread)) {
                t.wake();
            }
            1
        }
        _ => 0,
    };
    Ok(Reply::Int(unblocked).into())
}

/// Filters of the new CLIENT KILL form.
#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    /// `Some(false)`: a type no shardstream client has.
    normal: Option<bool>,
    skipme: bool,
    /// `MAXAGE`: only clients connected at least this many seconds.
    max_age_s: Option<u64>,
}

impl KillFilter {
    fn matches(&self, c: &ClientShared) -> bool {
        self.id.is_none_or(|id| id == c.id)
            && self.addr.as_ref().is_none_or(|a| *a == c.addr.to_string())
            && self
                .laddr
                .as_ref()
                .is_none_or(|a| *a == c.laddr.to_string())
            && self.normal.unwrap_or(true)
            && self
                .max_age_s
                .is_none_or(|max| c.created.elapsed().as_secs() >= max)
    }
}

/// `CLIENT KILL ip:port` (old form) or
/// `CLIENT KILL [ID id] [TYPE type] [USER user] [ADDR ip:port] [LADDR ip:port] [SKIPME yes|no] [MAXAGE s] ...`
/// (`MAXAGE`, Redis 7.4: clients connected at least `s` seconds)
///
/// Closes the matching connections (the shard thread serving each closes it; the killer
/// gets its reply first when it kills itself).
///
/// # Reply
/// Old form: `+OK`. New form: the number of clients killed.
/// # Errors
/// * `ERR No such client` (old form, no match)
/// * `ERR client-id should be greater than 0`
/// * `ERR maxage is not an integer or out of range`, `ERR maxage should be greater than 0`
/// * `ERR Unknown client type '<t>'`, `ERR No such user '<u>'`
/// * `ERR syntax error` for an odd number of filter arguments, an unknown
///   filter or a SKIPME value other than yes/no
/// # Source
/// `clientKillCommand`, redis/src/networking.c.
fn client_kill(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let me = cx.conn.id;
    if argv.len() == 3 {
        let addr = args::text(&argv[2]);
        let victims: Vec<_> = all_clients(cx.shared)
            .into_iter()
            .filter(|c| c.addr.to_string() == addr)
            .collect();
        if victims.is_empty() {
            return Err(CmdError::msg("ERR No such client"));
        }
        return Ok(kill_all(cx, victims, me, Reply::Ok));
    }
    let mut f = KillFilter {
        skipme: true,
        ..KillFilter::default()
    };
    let pairs = &argv[2..];
    if !pairs.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    for pair in pairs.chunks_exact(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        if is(opt, "ID") {
            match parse_i64(val) {
                Some(id) if id > 0 => f.id = Some(id as u64),
                _ => return Err(CmdError::msg("ERR client-id should be greater than 0")),
            }
        } else if is(opt, "MAXAGE") {
            let age = parse_i64(val)
                .ok_or_else(|| CmdError::msg("ERR maxage is not an integer or out of range"))?;
            if age <= 0 {
                return Err(CmdError::msg("ERR maxage should be greater than 0"));
            }
            f.max_age_s = Some(age as u64);
        } else if is(opt, "TYPE") {
            let normal = client_type_matches_normal(val)?;
            f.normal = Some(f.normal.unwrap_or(true) && normal);
        } else if is(opt, "ADDR") {
            f.addr = Some(args::text(val));
        } else if is(opt, "LADDR") {
            f.laddr = Some(args::text(val));
        } else if is(opt, "USER") {
            if val.as_ref() != b"default" {
                return Err(CmdError::quoting(&[
                    b"ERR No such user '",
                    args::c_str(val),
                    b"'",
                ]));
            }
        } else if is(opt, "SKIPME") {
            if is(val, "yes") {
                f.skipme = true;
            } else if is(val, "no") {
                f.skipme = false;
            } else {
                return Err(CmdError::Syntax);
            }
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let victims: Vec<_> = all_clients(cx.shared)
        .into_iter()
        .filter(|c| f.matches(c) && !(f.skipme && c.id == me))
        .collect();
    let n = victims.len() as i64;
    Ok(kill_all(cx, victims, me, Reply::Int(n)))
}

/// Kill `victims`; when the caller is among them, answer `reply` and then close.
fn kill_all(
    cx: &mut ConnCtx<'_>,
    victims: Vec<Arc<ClientShared>>,
    me: u64,
    reply: Reply,
) -> Action {
    let mut self_too = false;
    for v in victims {
        if v.id == me {
            self_too = true;
        } else {
            kill_client(cx.shared, &v);
        }
    }
    if self_too {
        Action::Close(reply)
    } else {
        Action::Reply(reply)
    }
}

/// `RESET`
///
/// Gives the connection the state of a fresh one: discards an open MULTI
/// block and forgets the WATCHed keys, leaves MONITOR mode, selects
/// database 0, switches to RESP2, clears the client name, leaves READONLY
/// and ASKING modes, turns NO-EVICT and NO-TOUCH off, and requires AUTH
/// again when `requirepass` is set. That is all of Redis's list that
/// shardstream has state for (it has no pub/sub, CLIENT TRACKING or CLIENT
/// REPLY). Runs inside MULTI and before authenticating, as in Redis.
///
/// # Reply
/// `+RESET`, once the watches are gone from their shards.
/// # Source
/// `resetCommand`, `clearClientConnectionState`, redis/src/networking.c
/// (7.x).
fn reset(cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    // A config lock poisoned by a panic: ask for AUTH rather than skip it.
    let needs_auth = requirepass_set(cx.shared).unwrap_or(true);
    let s = &mut *cx.conn;
    crate::cmd::tx::reset_multi(s);
    if s.monitor.take().is_some() {
        cx.shared.monitors.detach(s.id);
        s.shared.monitor.store(false, Ordering::Relaxed);
    }
    s.db = 0;
    s.shared.db.store(0, Ordering::Relaxed);
    s.resp3 = false;
    s.shared.resp.store(2, Ordering::Relaxed);
    if let Ok(mut n) = s.shared.name.lock() {
        *n = None;
    }
    s.readonly = false;
    s.asking = false;
    // Replies back on (a RESET that CLIENT REPLY SKIP covers stays silent,
    // as in Redis, which clears only the skip still to come).
    s.reply_off = false;
    s.shared.no_evict.store(false, Ordering::Relaxed);
    s.shared.no_touch.store(false, Ordering::Relaxed);
    s.authenticated = !needs_auth;
    Ok(crate::cmd::tx::unwatch_then(s, Reply::simple("RESET")))
}

/// Whether `requirepass` is set; `None` when the config lock is poisoned
/// (each caller picks its safe answer).
fn requirepass_set(shared: &crate::server::Shared) -> Option<bool> {
    shared.config.read().ok().map(|c| c.requirepass.is_some())
}

/// `on` / `off` argument of NO-EVICT / NO-TOUCH (`ERR syntax error` otherwise).
fn on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if is(arg, "on") {
        Ok(true)
    } else if is(arg, "off") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// `CLIENT NO-EVICT <ON | OFF>` — `+OK`. shardstream does not evict clients,
/// so the mode only shows in CLIENT LIST (`flags=e`).
fn client_no_evict(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let on = on_off(&argv[2])?;
    cx.conn.shared.no_evict.store(on, Ordering::Relaxed);
    Ok(Reply::Ok.into())
}

/// `CLIENT NO-TOUCH <ON | OFF>` — `+OK`. While on, the client's commands
/// leave its keys' access times (OBJECT IDLETIME) and LFU counters (OBJECT
/// FREQ) alone, except TOUCH; CLIENT LIST shows `flags=T`. Takes effect from
/// the connection's next command, pipelined or not. Syntax error for
/// anything but `on` / `off`.
/// # Source
/// Redis 7.2 `CLIENT NO-TOUCH` (redis.io/commands/client-no-touch).
fn client_no_touch(cx: &mut ConnCtx<'_>, argv: &[Bytes]) -> Result<Action, CmdError> {
    let on = on_off(&argv[2])?;
    cx.conn.shared.no_touch.store(on, Ordering::Relaxed);
    Ok(Reply::Ok.into())
}

/// Build a HELP reply: one simple string per line.
pub fn help_reply(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect())
}

/// `CLIENT HELP` — an array of simple strings describing the subcommands.
fn client_help(_cx: &mut ConnCtx<'_>, _argv: &[Bytes]) -> Result<Action, CmdError> {
    Ok(help_reply(&[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are: ID <client-id>, TYPE <normal|master|replica|pubsub>,",
        "    USER <username>, ADDR <ip:port>, LADDR <ip:port>, SKIPME <yes|no>,",
        "    MAXAGE <seconds>.",
        "LIST [TYPE <normal|master|replica|pubsub>] [ID <client-id> [...]]",
        "    Return information about client connections.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "NO-EVICT <on|off>",
        "    Accepted for compatibility; clients are never evicted.",
        "NO-TOUCH <on|off>",
        "    Accepted for compatibility; keys keep no access statistics.",
        "SETINFO <LIB-NAME|LIB-VER> <value>",
        "    Record the client library name or version.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "HELP",
        "    Print this help.",
    ])
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_attr_charset() {
        assert!(valid_client_attr(b"my-lib_1.0"));
        assert!(valid_client_attr(b""));
        assert!(!valid_client_attr(b"a b"));
        assert!(!valid_client_attr(b"a\nb"));
        assert!(!valid_client_attr("é".as_bytes()));
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"pw", b"pw"));
        assert!(!same_secret(b"pw", b"pw2"));
        assert!(!same_secret(b"pw", b"px"));
        assert!(!same_secret(b"", b"x"));
    }

    #[test]
    fn client_subcommands_resolve() {
        let client = lookup(b"client").expect("CLIENT row");
        let argv = [Bytes::from_static(b"client"), Bytes::from_static(b"nope")];
        assert_eq!(
            resolve_subcommand(client, &argv)
                .err()
                .map(|e| e.to_string()),
            Some("ERR unknown subcommand 'nope'. Try CLIENT HELP.".to_string())
        );
        let argv = [
            Bytes::from_static(b"client"),
            Bytes::from_static(b"setname"),
        ];
        assert_eq!(
            resolve_subcommand(client, &argv)
                .err()
                .map(|e| e.to_string()),
            Some("ERR wrong number of arguments for 'client|setname' command".to_string())
        );
    }
}
