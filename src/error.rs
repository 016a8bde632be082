//! Error types.
//!
//! * [`CmdError`]: a command failed; the client gets one error reply and the
//!   connection lives on. `Display` is the exact Redis text (prefix included),
//!   because clients match on it. Every variant is pinned by `tests/errors.rs`.
//! * [`ProtoError`]: the byte stream is not valid RESP; the client gets one
//!   `-ERR Protocol error: ...` reply and the connection is closed, as Redis does.

use std::borrow::Cow;
use std::fmt;

/// A command-level failure. Shard code and parsers return these; the codec
/// writes `-<Display>\r\n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdError {
    /// `ERR wrong number of arguments for '<cmd>' command` (command name lowercased,
    /// `container|sub` for subcommands, as Redis 7 prints it).
    WrongArity { cmd: String },
    /// `ERR unknown command '<name>', with args beginning with: '<a>' '<b>' `
    UnknownCommand { name: String, args: Vec<String> },
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand { cmd: String, sub: String },
    /// `ERR syntax error`
    Syntax,
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`
    WrongType,
    /// `ERR value is not an integer or out of range`
    NotInteger,
    /// `ERR value is not a valid float`
    NotFloat,
    /// `ERR increment or decrement would overflow`
    Overflow,
    /// `ERR invalid expire time in '<cmd>' command`
    InvalidExpire { cmd: String },
    /// `NOAUTH Authentication required.`
    NoAuth,
    /// `WRONGPASS invalid username-password pair or user is disabled.`
    WrongPass,
    /// `ERR DB index is out of range`
    DbIndexOutOfRange,
    /// `CROSSSLOT Keys in request don't hash to the same slot`
    CrossSlot,
    /// `MOVED <slot> <host>:<port>`
    Moved { slot: u16, addr: String },
    /// `ERR max number of clients reached`
    MaxClients,
    /// `ERR Replica can't interact with the keyspace`: a monitor (flagged
    /// like a replica in Redis) sent a command that reads or writes keys.
    ReplicaKeyspace,
    /// `ERR Invalid stream ID specified as stream command argument`
    InvalidStreamId,
    /// `ERR The ID specified in XADD is equal or smaller than the target stream top item`
    StreamIdTooSmall,
    /// `ERR The ID specified in XADD must be greater than 0-0`
    StreamIdZero,
    /// `ERR The stream has exhausted the last possible ID, unable to add more items`
    StreamExhausted,
    /// `ERR no such key` (XINFO, XSETID, XCFGSET on a missing stream)
    NoSuchKey,
    /// `NOGROUP No such key '<key>' or consumer group '<group>'` (XPENDING,
    /// XCLAIM, XAUTOCLAIM, XACKDEL, XNACK)
    NoGroup { key: String, group: String },
    /// `NOGROUP No such consumer group '<group>' for key name '<key>'`
    /// (XGROUP SETID / CREATECONSUMER / DELCONSUMER, XINFO CONSUMERS)
    NoGroupForKey { key: String, group: String },
    /// `NOGROUP No such key '<key>' or consumer group '<group>' in XREADGROUP
    /// with GROUP option` (also what a blocked XREADGROUP gets when its key or
    /// group goes away, Redis 7.2+)
    NoGroupInXreadgroup { key: String, group: String },
    /// `BUSYGROUP Consumer Group name already exists`
    BusyGroup,
    /// `ERR The XGROUP subcommand requires the key to exist. Note that for
    /// CREATE you may want to use the MKSTREAM option to create an empty
    /// stream automatically.`
    XgroupNoKey,
    /// Any other error: the full text, prefix included (e.g. `ERR ...`, `NOGROUP ...`).
    Msg(Cow<'static, str>),
    /// A script's error reply that passes on the error a command it called
    /// answered (raised by `redis.call`, or a `redis.pcall` error table
    /// returned): the text as for [`Msg`](Self::Msg). The command's error
    /// was counted in errorstats when it answered, so the script's reply
    /// counts only as the script command's failed call (Redis's
    /// `ERR_REPLY_FLAG_NO_STATS_UPDATE`).
    FromScriptCall(Cow<'static, str>),
}

impl CmdError {
    /// An error with free text; `text` must carry its own prefix (`ERR`, `NOGROUP`, ...).
    pub fn msg(text: impl Into<Cow<'static, str>>) -> Self {
        CmdError::Msg(text.into())
    }

    /// Redis's `addReplySubcommandSyntaxError`: `ERR unknown subcommand or
    /// wrong number of arguments for '<sub>'. Try <CMD> HELP.`, for a
    /// subcommand given more arguments than it takes (`sub` as the client
    /// sent it, `cmd` the container: CLIENT, CLUSTER, ...).
    pub fn subcommand_syntax(cmd: &str, sub: &[u8]) -> Self {
        CmdError::Msg(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
                String::from_utf8_lossy(sub),
                cmd.to_ascii_uppercase()
            )
            .into(),
        )
    }

    /// `WrongArity` for `cmd` (any case; printed lowercased).
    pub fn arity(cmd: &str) -> Self {
        CmdError::WrongArity {
            cmd: cmd.to_ascii_lowercase(),
        }
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongArity { cmd } => {
                write!(f, "ERR wrong number of arguments for '{cmd}' command")
            }
            Self::UnknownCommand { name, args } => {
                write!(
                    f,
                    "ERR unknown command '{name}', with args beginning with: "
                )?;
                for a in args {
                    write!(f, "'{a}' ")?;
                }
                Ok(())
            }
            Self::UnknownSubcommand { cmd, sub } => {
                // Redis prints at most 128 bytes of it (`%.128s`); callers
                // build it with `args::quoted`, cut at a NUL as `%s` is.
                let mut cut = sub.len().min(128);
                while !sub.is_char_boundary(cut) {
                    cut -= 1;
                }
                write!(
                    f,
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    &sub[..cut],
                    cmd.to_ascii_uppercase()
                )
            }
            Self::Syntax => f.write_str("ERR syntax error"),
            Self::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            Self::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            Self::NotFloat => f.write_str("ERR value is not a valid float"),
            Self::Overflow => f.write_str("ERR increment or decrement would overflow"),
            Self::InvalidExpire { cmd } => write!(f, "ERR invalid expire time in '{cmd}' command"),
            Self::NoAuth => f.write_str("NOAUTH Authentication required."),
            Self::WrongPass => {
                f.write_str("WRONGPASS invalid username-password pair or user is disabled.")
            }
            Self::DbIndexOutOfRange => f.write_str("ERR DB index is out of range"),
            Self::CrossSlot => f.write_str("CROSSSLOT Keys in request don't hash to the same slot"),
            Self::Moved { slot, addr } => write!(f, "MOVED {slot} {addr}"),
            Self::MaxClients => f.write_str("ERR max number of clients reached"),
            Self::ReplicaKeyspace => f.write_str("ERR Replica can't interact with the keyspace"),
            Self::InvalidStreamId => {
                f.write_str("ERR Invalid stream ID specified as stream command argument")
            }
            Self::StreamIdTooSmall => f.write_str(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            ),
            Self::StreamIdZero => {
                f.write_str("ERR The ID specified in XADD must be greater than 0-0")
            }
            Self::StreamExhausted => f.write_str(
                "ERR The stream has exhausted the last possible ID, unable to add more items",
            ),
            Self::NoSuchKey => f.write_str("ERR no such key"),
            Self::NoGroup { key, group } => write!(
                f,
                "NOGROUP No such key '{key}' or consumer group '{group}'"
            ),
            Self::NoGroupForKey { key, group } => write!(
                f,
                "NOGROUP No such consumer group '{group}' for key name '{key}'"
            ),
            Self::NoGroupInXreadgroup { key, group } => write!(
                f,
                "NOGROUP No such key '{key}' or consumer group '{group}' in XREADGROUP with GROUP option"
            ),
            Self::BusyGroup => f.write_str("BUSYGROUP Consumer Group name already exists"),
            Self::XgroupNoKey => f.write_str(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ),
            Self::Msg(text) | Self::FromScriptCall(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for CmdError {}

/// A fatal protocol error: one `-ERR Protocol error: <detail>` reply, then the
/// connection is closed (Redis: `setProtocolError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtoError(pub Cow<'static, str>);

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERR Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtoError {}

#[cfg(test)]
mod tests {
    use super::CmdError;

    /// Redis cuts the subcommand it echoes to 128 bytes (`%.128s`,
    /// redis-server 7.0: `CLIENT <300 z>` echoes 128 of them).
    #[test]
    fn unknown_subcommand_echoes_at_most_128_bytes() {
        let e = CmdError::UnknownSubcommand {
            cmd: "client".into(),
            sub: "z".repeat(300),
        };
        let want = format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            "z".repeat(128)
        );
        assert_eq!(e.to_string(), want);
        let short = CmdError::UnknownSubcommand {
            cmd: "xgroup".into(),
            sub: "nosub".into(),
        };
        assert_eq!(
            short.to_string(),
            "ERR unknown subcommand 'nosub'. Try XGROUP HELP."
        );
    }
}
