//! The checks a command passes before it runs, in the order Redis's
//! `processCommand` makes them: known command → arity → subcommand → protected (DEBUG) → NOAUTH →
//! cluster redirection → AOF write errors (MISCONF) → OOM → busy script (`-BUSY`) → a monitor's
//! keyspace commands → MULTI queueing.
//! Each `gate_*` answers `Err` with the reply that refuses the command;
//! [`admit`] runs them in order, counts the refusal as Redis does
//! (`rejected_calls`) and answers it, so the caller only routes admitted
//! commands.
//!
//! # Source
//! `processCommand`, redis/src/server.c (7.x).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::table::{self, CommandSpec};
use crate::cmd::{self, Flags};
use crate::error::CmdError;
use crate::io::conn::{Conn, Pending, Session};
use crate::reply::Reply;
use crate::route::slot::slot_of;
use crate::server::Shared;

/// Whether a command name is what an HTTP request sends as its first word
/// (`POST`) or a header line (`Host:`), any case: a browser tricked into
/// talking to the server (cross-protocol scripting). Only asked on the
/// unknown-command path, so it costs known commands nothing. `GET /path`
/// stays an ordinary inline GET, as in Redis.
///
/// # Source
/// `securityWarningCommand` and its check in `processCommand`,
/// redis/src/server.c (7.0 to 8.x): such a connection is closed with no
/// reply.
fn is_cross_protocol_probe(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
}

/// Log a cross-protocol probe, at most once a minute (as Redis rate-limits
/// its warning).
fn warn_cross_protocol(conn: &Conn) {
    static LAST_WARNED_S: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let last = LAST_WARNED_S.load(Ordering::Relaxed);
    if now_s.saturating_sub(last) >= 60
        && LAST_WARNED_S
            .compare_exchange(last, now_s, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        log::warn!(
            "Possible SECURITY ATTACK detected: client {} sent an HTTP request line or \
             header (POST / Host:) as a command, as a cross-protocol attack from a web \
             page would; connection closed",
            conn.session.shared.addr
        );
    }
}

/// Redis's reply to a DENYOOM command while over `maxmemory`.
pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// A command the gates let through.
pub struct Admitted {
    /// The table row that decides the command (a container's subcommand row).
    pub spec: &'static CommandSpec,
    /// Its command statistics row (INFO commandstats), if it has one.
    pub stat: Option<usize>,
}

/// Run every gate for `argv`. Returns the command when it may run; `None`
/// when it was refused (the refusal is already queued as its reply) or
/// queued inside MULTI (`+QUEUED` is queued).
pub fn admit(shared: &Shared, conn: &mut Conn, argv: &mut Option<Vec<Bytes>>) -> Option<Admitted> {
    let args = argv.as_deref()?;
    conn.session.transit = None;
    // The same command as the last one (a pipeline): no table lookup.
    let cached = conn
        .cmd_cache
        .filter(|(s, _)| s.name.as_bytes().eq_ignore_ascii_case(&args[0]));
    let Some((spec, stat)) = cached.or_else(|| {
        let spec = table::lookup(&args[0])?;
        let entry = (spec, shared.cmdstats.index_of(spec.name));
        conn.cmd_cache = Some(entry);
        Some(entry)
    }) else {
        if is_cross_protocol_probe(&args[0]) {
            // No reply, and no earlier pipelined reply either: Redis frees
            // the client asynchronously and skips writing to it.
            warn_cross_protocol(conn);
            conn.dead = true;
            return None;
        }
        let err = table::unknown_command(args);
        shared.count_call("unknown", false, true);
        reject(shared, conn, err);
        return None;
    };
    if !spec.arity_ok(args.len()) {
        shared.count_call(spec.name, false, true);
        reject_cmd(shared, conn, spec, CmdError::arity(spec.name));
        return None;
    }
    let top = spec;
    let spec = match gate_subcommand(spec, args) {
        Ok(sub) => sub,
        Err(e) => {
            // As Redis counts them: a known subcommand's arity error on
            // that subcommand's row, an unknown subcommand on none.
            let row = args
                .get(1)
                .and_then(|sub| table::lookup_sub(spec, sub))
                .map_or("unknown", |sub| sub.name);
            shared.count_call(row, false, true);
            reject(shared, conn, e);
            return None;
        }
    };
    if let Some(after) = gate_order(spec, conn) {
        // Runs again through every gate once that reply is answered.
        conn.deferred = argv.take();
        conn.hold_until = Some(after);
        return None;
    }
    if let Err(e) = gate_protected(shared, spec, &conn.session) {
        shared.count_call(spec.name, false, true);
        reject(shared, conn, e);
        return None;
    }
    // A container's statistics row is its subcommand's.
    let stat = if std::ptr::eq(spec, top) {
        stat
    } else {
        shared.cmdstats.index_of(spec.name)
    };
    if let Some(i) = stat {
        conn.session.shared.last_cmd.store(i, Ordering::Relaxed);
    }
    if let Err(e) = gate_auth(spec, &conn.session) {
        shared.count_call(spec.name, false, true);
        reject_cmd(shared, conn, spec, e);
        return None;
    }
    // Cluster redirection comes before queueing, as in Redis's processCommand:
    // a redirected command inside MULTI dooms the transaction; a refused EXEC
    // discards it and answers the redirection itself.
    if let Err(e) = gate_cluster(shared, spec, args, &mut conn.session) {
        shared.count_call(spec.name, false, true);
        if spec.name == "EXEC" {
            cmd::tx::reset_multi(&mut conn.session);
        }
        reject(shared, conn, e);
        return None;
    }
    if let Err(e) = gate_aof(shared, spec).and_then(|()| gate_oom(shared, spec, &conn.session)) {
        shared.count_call(spec.name, false, true);
        reject_cmd(shared, conn, spec, e);
        return None;
    }
    if let Err(e) = gate_busy(shared, spec) {
        shared.count_call(spec.name, false, true);
        reject_cmd(shared, conn, spec, e);
        return None;
    }
    if let Err(e) = gate_monitor(spec, &conn.session) {
        shared.count_call(spec.name, false, true);
        reject(shared, conn, e);
        return None;
    }
    if conn.session.multi.is_some() && !runs_inside_multi(spec.name) {
        if spec.flags.has(Flags::NO_MULTI) {
            let err = CmdError::msg("ERR Command not allowed inside a transaction");
            reject(shared, conn, err);
            return None;
        }
        if let (Some(queue), Some(args)) = (conn.session.multi.as_mut(), argv.take()) {
            conn.session.multi_bytes += args.iter().map(|a| a.len() + 8).sum::<usize>();
            queue.push(args);
            conn.session.multi_flags = conn.session.multi_flags.with(spec.flags);
            let n = queue.len() as u64;
            conn.session.shared.multi.store(n, Ordering::Relaxed);
        }
        conn.push_slot(Pending::Ready(Reply::simple("QUEUED")));
        return None;
    }
    Some(Admitted { spec, stat })
}

/// Container commands (CLIENT, CONFIG, COMMAND, CLUSTER): the subcommand row
/// decides arity, flags and statistics, checked before NOAUTH and before
/// queueing in MULTI, as Redis's processCommand does.
fn gate_subcommand(
    spec: &'static CommandSpec,
    argv: &[Bytes],
) -> Result<&'static CommandSpec, CmdError> {
    if spec.subcommands.is_empty() || argv.len() < 2 {
        return Ok(spec);
    }
    cmd::connection::resolve_subcommand(spec, argv)
}

/// Commands whose effect or view must not overtake this connection's
/// earlier requests still running on other shards, as they run after them
/// in Redis: `Some(seq)` of the reply to wait for. CLIENT KILL / UNBLOCK
/// and CONFIG SET (`Flags::AFTER_EARLIER`) wait for every earlier request
/// (a pipelined XADD then CLIENT UNBLOCK of its reader); function registry
/// commands (`Flags::FUNCTION_REGISTRY`) for the connection's latest
/// registry change, which commits on shard 0 (so does an EXEC that plans
/// registry commands). Notes a registry change (or an EXEC with one) as
/// it is admitted. Commands queued in MULTI do not wait: EXEC runs them in
/// order.
fn gate_order(spec: &CommandSpec, conn: &mut Conn) -> Option<u64> {
    if let Some(queue) = &conn.session.multi {
        if spec.name != "EXEC" {
            return None;
        }
        // EXEC plans its registry commands when it runs: after the
        // connection's earlier change; one that changes the libraries is a
        // change itself.
        if !conn.session.multi_flags.has(Flags::FUNCTION_REGISTRY) {
            return None;
        }
        if let Some(change) = conn.function_change.filter(|&seq| conn.is_pending(seq)) {
            return Some(change);
        }
        let changes =
            |s: &CommandSpec| s.flags.has(Flags::FUNCTION_REGISTRY) && s.flags.has(Flags::WRITE);
        if queue
            .iter()
            .any(|argv| table::row_of(argv).is_some_and(changes))
        {
            conn.function_change = Some(conn.next_seq());
        }
        return None;
    }
    if spec.flags.has(Flags::AFTER_EARLIER) && conn.has_in_flight() {
        return Some(conn.next_seq().saturating_sub(1));
    }
    if spec.flags.has(Flags::FUNCTION_REGISTRY) {
        if let Some(change) = conn.function_change.filter(|&seq| conn.is_pending(seq)) {
            return Some(change);
        }
        if spec.flags.has(Flags::WRITE) {
            conn.function_change = Some(conn.next_seq());
        }
    }
    None
}

/// Protected commands (DEBUG) run only as `enable-debug-command` allows.
fn gate_protected(shared: &Shared, spec: &CommandSpec, session: &Session) -> Result<(), CmdError> {
    if spec.name != "DEBUG" {
        return Ok(());
    }
    let setting = shared
        .config
        .read()
        .map(|c| c.enable_debug_command)
        .unwrap_or("no");
    cmd::debug::gate_debug(setting, &session.shared.addr)
}

/// `requirepass` is set and the connection has not authenticated: only
/// NO_AUTH commands (AUTH, HELLO, QUIT...) run.
fn gate_auth(spec: &CommandSpec, session: &Session) -> Result<(), CmdError> {
    if !session.authenticated && !spec.flags.has(Flags::NO_AUTH) {
        return Err(CmdError::NoAuth);
    }
    Ok(())
}

/// A script runs past `busy-reply-threshold` on some shard: only
/// `allow-busy` commands (SCRIPT KILL, FUNCTION KILL/STATS, ...) run, as in
/// Redis; the others answer `-BUSY`.
fn gate_busy(shared: &Shared, spec: &CommandSpec) -> Result<(), CmdError> {
    if !shared.scripts.any_busy() || spec.flags.has(Flags::ALLOW_BUSY) {
        return Ok(());
    }
    match cmd::scripting::busy_error(shared) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A monitor (Redis flags it like a replica) may not run commands that
/// touch the keyspace: those flagged `write` or `readonly`, or that may
/// replicate (EVAL, EVALSHA, FCALL). Inside MULTI the refusal dooms the
/// transaction, as any refusal does.
///
/// # Errors
/// [`CmdError::ReplicaKeyspace`].
/// # Source
/// The replica check of `processCommand`, redis/src/server.c (7.0), after
/// the busy-script check and before queueing.
fn gate_monitor(spec: &CommandSpec, session: &Session) -> Result<(), CmdError> {
    if session.monitor.is_some()
        && (spec.flags.has(Flags::WRITE)
            || spec.flags.has(Flags::READONLY)
            || spec.flags.has(Flags::MAY_REPLICATE))
    {
        return Err(CmdError::ReplicaKeyspace);
    }
    Ok(())
}

/// A shard that cannot write its AOF refuses writes (and PING), as Redis
/// does after a failed AOF write or fsync (`-MISCONF`).
fn gate_aof(shared: &Shared, spec: &CommandSpec) -> Result<(), CmdError> {
    if spec.flags.has(Flags::WRITE) || spec.name == "PING" {
        if let Some(err) = shared.tunables.aof.write_refusal() {
            return Err(err);
        }
    }
    Ok(())
}

/// Over `maxmemory`: refuse what [`refused_on_oom`] says (`-OOM`).
fn gate_oom(shared: &Shared, spec: &CommandSpec, session: &Session) -> Result<(), CmdError> {
    if shared.over_maxmemory() && refused_on_oom(spec, session) {
        return Err(CmdError::msg(OOM_ERROR));
    }
    Ok(())
}

/// Commands that run even inside MULTI instead of being queued.
fn runs_inside_multi(name: &str) -> bool {
    matches!(
        name,
        "EXEC" | "DISCARD" | "MULTI" | "WATCH" | "QUIT" | "RESET"
    )
}

/// Whether a command is refused while used memory is over `maxmemory`:
/// DENYOOM commands, EXEC of a transaction holding one, and anything queued
/// inside MULTI except EXEC, DISCARD, QUIT and RESET (queueing costs memory).
///
/// # Source
/// `processCommand` (the `reject_cmd_on_oom` rule), redis/src/server.c (7.x).
fn refused_on_oom(spec: &CommandSpec, session: &Session) -> bool {
    if spec.flags.has(Flags::DENYOOM) {
        return true;
    }
    if session.multi.is_none() {
        return false;
    }
    match spec.name {
        "EXEC" => session.multi_flags.has(Flags::DENYOOM),
        "DISCARD" | "QUIT" | "RESET" => false,
        _ => true,
    }
}

/// Redis Cluster's redirection check (`getNodeByQuery`, Redis 7.x/8.x): a
/// command's keys must share one slot (else `CROSSSLOT`, unless
/// `cluster-allow-local-multislot` and this node serves every slot), served
/// (else `CLUSTERDOWN Hash slot not served`), while the cluster is up (else
/// `CLUSTERDOWN The cluster is down`), by this node (else `MOVED <slot>
/// <host>:<port>`), or imported by it after ASKING. On a slot in transit
/// the keys decide: the check goes with the command to its shard
/// ([`Session::transit`]; ASK / TRYAGAIN there). EXEC checks the keys of
/// every queued command together. Keyless commands, and servers that are not
/// cluster nodes, pass.
///
/// ASKING lasts for the next command, or until EXEC inside MULTI.
///
/// # Errors
/// [`CmdError::CrossSlot`], [`CmdError::Moved`], `CLUSTERDOWN ...`.
fn gate_cluster(
    shared: &Shared,
    spec: &CommandSpec,
    argv: &[Bytes],
    session: &mut Session,
) -> Result<(), CmdError> {
    let Some(cluster) = &shared.cluster else {
        return Ok(());
    };
    // RESTORE-ASKING (what MIGRATE sends) carries its own ASKING.
    let asking = session.asking || spec.flags.has(Flags::ASKING);
    if spec.name != "ASKING" && (session.multi.is_none() || spec.name == "EXEC") {
        session.asking = false;
    }
    // The keys, borrowed: cloned only when a slot in transit needs them on
    // the shard.
    fn keys_of<'a>(spec: &CommandSpec, argv: &'a [Bytes], out: &mut Vec<&'a Bytes>) {
        out.extend(
            spec.key_indexes(argv)
                .into_iter()
                .filter_map(|i| argv.get(i)),
        )
    }
    let mut keys: Vec<&Bytes> = Vec::new();
    let exec = spec.name == "EXEC";
    if exec {
        let Some(queue) = &session.multi else {
            return Ok(());
        };
        for a in queue {
            if let Some(s) = table::row_of(a) {
                keys_of(s, a, &mut keys);
            }
        }
    } else {
        keys_of(spec, argv, &mut keys);
    }
    let Some(first) = keys.first() else {
        return Ok(());
    };
    let slot = slot_of(first).0;
    let view = cluster.view();
    if view.route(slot) == crate::cluster::SlotRoute::Unserved {
        return Err(CmdError::msg("CLUSTERDOWN Hash slot not served"));
    }
    if keys.iter().skip(1).any(|k| slot_of(k).0 != slot) {
        let allow = shared
            .tunables
            .cluster_allow_local_multislot
            .load(Ordering::Relaxed);
        let here = |k: &&Bytes| view.route(slot_of(k).0) == crate::cluster::SlotRoute::Here;
        if allow && view.ok && keys.iter().all(here) {
            return Ok(());
        }
        return Err(CmdError::CrossSlot);
    }
    let check = view.admit(slot, &keys, asking, spec.name == "MIGRATE")?;
    // A transaction on a slot in transit runs here with the keys it finds
    // (its keys are not checked one by one against the migration).
    if !exec && session.multi.is_none() {
        session.transit = check;
    }
    Ok(())
}

/// Answer a command that was refused before running; inside MULTI this also
/// dooms the transaction (EXECABORT), as Redis does.
pub fn reject(shared: &Shared, conn: &mut Conn, err: CmdError) {
    shared.cmdstats.count_error(&err);
    if conn.session.multi.is_some() {
        conn.session.multi_failed = true;
    }
    conn.push_slot(Pending::Ready(Reply::Error(err)));
}

/// [`reject`], except that a refused EXEC answers `EXECABORT Transaction
/// discarded because of: <reason>` (and discards the transaction, if one is
/// open), inside MULTI or not, as Redis's `rejectCommand` hands any refused
/// EXEC to `execCommandAbort`.
fn reject_cmd(shared: &Shared, conn: &mut Conn, spec: &CommandSpec, err: CmdError) {
    if spec.name == "EXEC" {
        crate::cmd::tx::reset_multi(&mut conn.session);
        let text = err.to_string();
        let reason = text.strip_prefix("ERR ").unwrap_or(&text);
        let err = CmdError::msg(format!(
            "EXECABORT Transaction discarded because of: {reason}"
        ));
        shared.cmdstats.count_error(&err);
        conn.push_slot(Pending::Ready(Reply::Error(err)));
        return;
    }
    reject(shared, conn, err);
}
