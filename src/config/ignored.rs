//! Redis settings shardstream accepts and keeps but that change nothing it
//! does: tuning knobs of Redis internals (encodings, rehashing, defrag,
//! lazy freeing), RDB and replication settings that only matter with those
//! features, and logging/process options with no equivalent here.
//!
//! A client or a config file may set them as it would on redis-server: at
//! start (with a warning in the log), with `CONFIG SET` (answered `+OK`, or
//! Redis's `can't set immutable config` / `can't set protected config` for
//! the ones Redis fixes at start), and `CONFIG GET` answers the value set,
//! else Redis's default. A value is checked for its kind as Redis checks it
//! (`yes`/`no`, an integer, a memory size), not for Redis's range, and
//! spelled back as Redis spells it.
//!
//! # Source
//! The names, defaults and mutability of redis-server 7.0.15 (`CONFIG GET`,
//! `CONFIG SET` of each), plus the settings added in 7.2–8.x
//! (`locale-collate`, `max-new-connections-per-cycle`,
//! `max-new-tls-connections-per-cycle`, `unixsocketgroup`,
//! `cluster-announce-human-nodename`) with the defaults on redis.io's
//! redis.conf.

/// How a value is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `yes` or `no` (any case): `argument must be 'yes' or 'no'`.
    Bool,
    /// A signed 64-bit integer: `argument couldn't be parsed into an integer`.
    Int,
    /// A memory size (`100mb`): `argument must be a memory value`.
    Memory,
    /// One of these words (any case), answered in lower case: `argument(s)
    /// must be one of the following: a, b, c`.
    Enum(&'static [&'static str]),
    /// `notify-keyspace-events` classes (`Ag$lshzxeKEtmdn`), answered in
    /// Redis's order (`Ex` reads `xE`; all of `g$lshzxetd` reads `A`).
    Events,
    /// Any text.
    Text,
}

/// Whether `CONFIG SET` may change it, as in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixed {
    /// Settable at run time.
    No,
    /// `can't set immutable config`.
    Immutable,
    /// `can't set protected config` (Redis's default
    /// `enable-protected-configs no`).
    Protected,
}

/// `(name, Redis's default, kind, fixed)`, in redis.conf's order.
pub const IGNORED: &[(&str, &str, Kind, Fixed)] = &[
    ("always-show-logo", "no", Kind::Bool, Fixed::Immutable),
    ("set-proc-title", "yes", Kind::Bool, Fixed::Immutable),
    (
        "proc-title-template",
        "{title} {listen-addr} {server-mode}",
        Kind::Text,
        Fixed::No,
    ),
    ("locale-collate", "", Kind::Text, Fixed::No),
    ("syslog-enabled", "no", Kind::Bool, Fixed::Immutable),
    ("syslog-ident", "redis", Kind::Text, Fixed::Immutable),
    ("syslog-facility", "local0", Kind::Text, Fixed::Immutable),
    ("crash-log-enabled", "yes", Kind::Bool, Fixed::No),
    ("crash-memcheck-enabled", "yes", Kind::Bool, Fixed::No),
    (
        "enable-protected-configs",
        "no",
        Kind::Bool,
        Fixed::Immutable,
    ),
    ("enable-module-command", "no", Kind::Bool, Fixed::Immutable),
    ("dynamic-hz", "yes", Kind::Bool, Fixed::No),
    ("activerehashing", "yes", Kind::Bool, Fixed::No),
    ("lazyfree-lazy-eviction", "no", Kind::Bool, Fixed::No),
    ("lazyfree-lazy-expire", "no", Kind::Bool, Fixed::No),
    ("lazyfree-lazy-server-del", "no", Kind::Bool, Fixed::No),
    ("lazyfree-lazy-user-del", "no", Kind::Bool, Fixed::No),
    ("lazyfree-lazy-user-flush", "no", Kind::Bool, Fixed::No),
    ("replica-lazy-flush", "no", Kind::Bool, Fixed::No),
    ("io-threads-do-reads", "no", Kind::Bool, Fixed::Immutable),
    (
        "oom-score-adj",
        "no",
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        Fixed::No,
    ),
    ("oom-score-adj-values", "0 200 800", Kind::Text, Fixed::No),
    ("disable-thp", "yes", Kind::Bool, Fixed::Immutable),
    ("jemalloc-bg-thread", "yes", Kind::Bool, Fixed::No),
    ("activedefrag", "no", Kind::Bool, Fixed::No),
    (
        "active-defrag-ignore-bytes",
        "104857600",
        Kind::Memory,
        Fixed::No,
    ),
    ("active-defrag-threshold-lower", "10", Kind::Int, Fixed::No),
    ("active-defrag-threshold-upper", "100", Kind::Int, Fixed::No),
    ("active-defrag-cycle-min", "1", Kind::Int, Fixed::No),
    ("active-defrag-cycle-max", "25", Kind::Int, Fixed::No),
    (
        "active-defrag-max-scan-fields",
        "1000",
        Kind::Int,
        Fixed::No,
    ),
    ("notify-keyspace-events", "", Kind::Events, Fixed::No),
    ("hash-max-listpack-entries", "512", Kind::Int, Fixed::No),
    ("hash-max-listpack-value", "64", Kind::Memory, Fixed::No),
    ("hash-max-ziplist-entries", "512", Kind::Int, Fixed::No),
    ("hash-max-ziplist-value", "64", Kind::Memory, Fixed::No),
    ("list-compress-depth", "0", Kind::Int, Fixed::No),
    ("hll-sparse-max-bytes", "3000", Kind::Memory, Fixed::No),
    ("tracking-table-max-keys", "1000000", Kind::Int, Fixed::No),
    ("maxmemory-eviction-tenacity", "10", Kind::Int, Fixed::No),
    ("aof-timestamp-enabled", "no", Kind::Bool, Fixed::No),
    (
        "aof-rewrite-incremental-fsync",
        "yes",
        Kind::Bool,
        Fixed::No,
    ),
    ("rdb-save-incremental-fsync", "yes", Kind::Bool, Fixed::No),
    ("no-appendfsync-on-rewrite", "no", Kind::Bool, Fixed::No),
    (
        "appendfilename",
        "appendonly.aof",
        Kind::Text,
        Fixed::Immutable,
    ),
    (
        "appenddirname",
        "appendonlydir",
        Kind::Text,
        Fixed::Immutable,
    ),
    ("dbfilename", "dump.rdb", Kind::Text, Fixed::Protected),
    ("rdbcompression", "yes", Kind::Bool, Fixed::No),
    ("rdbchecksum", "yes", Kind::Bool, Fixed::Immutable),
    ("stop-writes-on-bgsave-error", "yes", Kind::Bool, Fixed::No),
    (
        "sanitize-dump-payload",
        "no",
        Kind::Enum(&["no", "yes", "clients"]),
        Fixed::No,
    ),
    ("rdb-del-sync-files", "no", Kind::Bool, Fixed::No),
    ("shutdown-timeout", "10", Kind::Int, Fixed::No),
    (
        "shutdown-on-sigint",
        "default",
        Kind::Enum(&["default", "save", "nosave", "now", "force"]),
        Fixed::No,
    ),
    (
        "shutdown-on-sigterm",
        "default",
        Kind::Enum(&["default", "save", "nosave", "now", "force"]),
        Fixed::No,
    ),
    ("replica-serve-stale-data", "yes", Kind::Bool, Fixed::No),
    ("replica-read-only", "yes", Kind::Bool, Fixed::No),
    ("repl-diskless-sync", "yes", Kind::Bool, Fixed::No),
    ("repl-diskless-sync-delay", "5", Kind::Int, Fixed::No),
    ("repl-diskless-sync-max-replicas", "0", Kind::Int, Fixed::No),
    (
        "repl-diskless-load",
        "disabled",
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        Fixed::No,
    ),
    ("repl-ping-replica-period", "10", Kind::Int, Fixed::No),
    ("repl-timeout", "60", Kind::Int, Fixed::No),
    ("repl-disable-tcp-nodelay", "no", Kind::Bool, Fixed::No),
    ("repl-backlog-size", "1048576", Kind::Memory, Fixed::No),
    ("repl-backlog-ttl", "3600", Kind::Int, Fixed::No),
    ("replica-priority", "100", Kind::Int, Fixed::No),
    ("replica-announced", "yes", Kind::Bool, Fixed::No),
    ("replica-ignore-maxmemory", "yes", Kind::Bool, Fixed::No),
    ("min-replicas-to-write", "0", Kind::Int, Fixed::No),
    ("min-replicas-max-lag", "10", Kind::Int, Fixed::No),
    ("replica-announce-ip", "", Kind::Text, Fixed::No),
    ("replica-announce-port", "0", Kind::Int, Fixed::No),
    ("masterauth", "", Kind::Text, Fixed::No),
    ("masteruser", "", Kind::Text, Fixed::No),
    (
        "propagation-error-behavior",
        "ignore",
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        Fixed::No,
    ),
    (
        "replica-ignore-disk-write-errors",
        "no",
        Kind::Bool,
        Fixed::No,
    ),
    ("acllog-max-len", "128", Kind::Int, Fixed::No),
    ("active-expire-effort", "1", Kind::Int, Fixed::No),
    ("max-new-connections-per-cycle", "10", Kind::Int, Fixed::No),
    (
        "max-new-tls-connections-per-cycle",
        "1",
        Kind::Int,
        Fixed::No,
    ),
    ("unixsocketgroup", "", Kind::Text, Fixed::Immutable),
    ("socket-mark-id", "0", Kind::Int, Fixed::Immutable),
    ("bind-source-addr", "", Kind::Text, Fixed::No),
    ("cluster-announce-port", "0", Kind::Int, Fixed::No),
    ("cluster-announce-bus-port", "0", Kind::Int, Fixed::No),
    ("cluster-announce-tls-port", "0", Kind::Int, Fixed::No),
    ("cluster-announce-hostname", "", Kind::Text, Fixed::No),
    ("cluster-announce-human-nodename", "", Kind::Text, Fixed::No),
    (
        "cluster-preferred-endpoint-type",
        "ip",
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        Fixed::No,
    ),
    ("cluster-allow-reads-when-down", "no", Kind::Bool, Fixed::No),
    (
        "cluster-allow-pubsubshard-when-down",
        "yes",
        Kind::Bool,
        Fixed::No,
    ),
    (
        "cluster-replica-validity-factor",
        "10",
        Kind::Int,
        Fixed::No,
    ),
    ("cluster-migration-barrier", "1", Kind::Int, Fixed::No),
    (
        "cluster-allow-replica-migration",
        "yes",
        Kind::Bool,
        Fixed::No,
    ),
    ("cluster-replica-no-failover", "no", Kind::Bool, Fixed::No),
    ("cluster-link-sendbuf-limit", "0", Kind::Memory, Fixed::No),
    ("ignore-warnings", "", Kind::Text, Fixed::No),
    (
        "acl-pubsub-default",
        "resetchannels",
        Kind::Enum(&["allchannels", "resetchannels"]),
        Fixed::No,
    ),
    ("aof-disable-auto-gc", "no", Kind::Bool, Fixed::No),
    ("maxmemory-clients", "0", Kind::Text, Fixed::No),
    ("server_cpulist", "", Kind::Text, Fixed::Immutable),
    ("bio_cpulist", "", Kind::Text, Fixed::Immutable),
    ("aof_rewrite_cpulist", "", Kind::Text, Fixed::Immutable),
    ("bgsave_cpulist", "", Kind::Text, Fixed::Immutable),
];

/// Redis's older names (`slave-*`) of settings above: the same setting,
/// listed by `CONFIG GET` under both names.
pub const ALIASES: &[(&str, &str)] = &[
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-read-only", "replica-read-only"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-priority", "replica-priority"),
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
];

/// The row of an ignored setting (`name` in lower case, or one of its
/// [`ALIASES`]); its first field is the name the value is kept under.
pub fn find(name: &str) -> Option<&'static (&'static str, &'static str, Kind, Fixed)> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canonical)| canonical);
    IGNORED.iter().find(|row| row.0 == name)
}

/// Check `value` for the setting's kind and spell it as `CONFIG GET`
/// answers it: `yes`/`no` in lower case, a number or memory size as its
/// value in decimal (`2mb` reads `2097152`), text as given.
///
/// # Errors
/// Redis's value error for the kind (see [`Kind`]).
pub fn normalize(kind: Kind, value: &str) -> Result<String, String> {
    let err = |e: &str| Err(e.to_string());
    match kind {
        Kind::Bool => match super::parse_bool(value) {
            Some(b) => Ok(if b { "yes" } else { "no" }.to_string()),
            None => err("argument must be 'yes' or 'no'"),
        },
        Kind::Int => match value.parse::<i64>() {
            Ok(v) if !value.starts_with('+') => Ok(v.to_string()),
            _ => err("argument couldn't be parsed into an integer"),
        },
        Kind::Memory => match super::parse_memory_u64(value) {
            Some(v) => Ok(v.to_string()),
            None => err("argument must be a memory value"),
        },
        Kind::Enum(words) => match words.iter().find(|w| w.eq_ignore_ascii_case(value)) {
            Some(w) => Ok(w.to_string()),
            None => Err(format!(
                "argument(s) must be one of the following: {}",
                words.join(", ")
            )),
        },
        Kind::Events => keyspace_events(value),
        Kind::Text => Ok(value.to_string()),
    }
}

/// `notify-keyspace-events` spelled as Redis answers it.
///
/// # Source
/// redis.io "Redis keyspace notifications" (the classes); the order and
/// `A` standing for `g$lshzxetd` as `CONFIG GET` answers them in
/// redis-server (`keyspaceEventsFlagsToString`, redis/src/notify.c).
fn keyspace_events(value: &str) -> Result<String, String> {
    const CLASSES: &str = "g$lshzxetdn";
    const ALL: &str = "g$lshzxetd";
    let mut on = Vec::new();
    for c in value.chars() {
        match c {
            'A' => on.extend(ALL.chars()),
            c if CLASSES.contains(c) || "KEm".contains(c) => on.push(c),
            _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()),
        }
    }
    let mut out = String::new();
    if ALL.chars().all(|c| on.contains(&c)) {
        out.push('A');
        if on.contains(&'n') {
            out.push('n');
        }
    } else {
        out.extend(CLASSES.chars().filter(|c| on.contains(c)));
    }
    out.extend("KEm".chars().filter(|c| on.contains(c)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lower_case() {
        let mut names: Vec<_> = IGNORED.iter().map(|r| r.0).collect();
        assert!(names.iter().all(|n| *n == n.to_ascii_lowercase()));
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn aliases_name_a_row() {
        for (alias, canonical) in ALIASES {
            assert_eq!(find(alias).map(|r| r.0), Some(*canonical));
            assert!(!IGNORED.iter().any(|r| r.0 == *alias));
        }
    }

    #[test]
    fn defaults_read_back_as_they_are() {
        for (name, default, kind, _) in IGNORED {
            assert_eq!(normalize(*kind, default).as_deref(), Ok(*default), "{name}");
        }
    }

    #[test]
    fn values_are_checked_by_kind() {
        let ok = |k, v| normalize(k, v).unwrap();
        let err = |k, v| normalize(k, v).unwrap_err();
        assert_eq!(ok(Kind::Bool, "YES"), "yes");
        assert_eq!(err(Kind::Bool, "maybe"), "argument must be 'yes' or 'no'");
        assert_eq!(ok(Kind::Int, "-5"), "-5");
        assert_eq!(
            err(Kind::Int, "5x"),
            "argument couldn't be parsed into an integer"
        );
        assert_eq!(ok(Kind::Memory, "2mb"), "2097152");
        assert_eq!(err(Kind::Memory, "lots"), "argument must be a memory value");
        assert_eq!(ok(Kind::Text, "any text"), "any text");
        assert_eq!(ok(Kind::Enum(&["no", "yes"]), "YES"), "yes");
        assert_eq!(
            err(Kind::Enum(&["no", "yes"]), "maybe"),
            "argument(s) must be one of the following: no, yes"
        );
        assert_eq!(ok(Kind::Events, "Ex"), "xE");
        assert_eq!(ok(Kind::Events, "KEA"), "AKE");
        assert_eq!(ok(Kind::Events, "g$lshzxetdn"), "An");
        assert_eq!(ok(Kind::Events, ""), "");
        assert_eq!(
            err(Kind::Events, "Q"),
            "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
        );
    }
}
