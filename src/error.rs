//! Error types.
//!
//! * [`CmdError`]: a command failed; the client gets one error reply and the
//!   connection lives on. `Display` is the exact Redis text (prefix included),
//!   because clients match on it. Every variant is pinned by `tests/errors.rs`.
//! * [`ProtoError`]: the byte stream is not valid RESP; the client gets one
//!   `-ERR Protocol error: ...` reply and the connection is closed, as Redis does.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

/// A command-level failure. Shard code and parsers return these; the codec
/// writes `-<text>\r\n` with [`text`](Self::text).
///
/// The variants that quote the request (a command or subcommand name, a key,
/// a group) keep its bytes as sent: Redis echoes them with `%s`, so a name
/// that is not UTF-8 comes back byte for byte. `Display` shows those bytes
/// lossily (for logs); only [`text`](Self::text) is exact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdError {
    /// `ERR wrong number of arguments for '<cmd>' command` (command name lowercased,
    /// `container|sub` for subcommands, as Redis 7 prints it).
    WrongArity { cmd: String },
    /// `ERR unknown command '<name>', with args beginning with: '<a>' '<b>' `
    UnknownCommand { name: Bytes, args: Vec<Bytes> },
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.` (`sub` as printed: cut by
    /// [`c_str_128`], see [`unknown_subcommand`](Self::unknown_subcommand))
    UnknownSubcommand { cmd: String, sub: Bytes },
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
    NoGroup { key: Bytes, group: Bytes },
    /// `NOGROUP No such consumer group '<group>' for key name '<key>'`
    /// (XGROUP SETID / CREATECONSUMER / DELCONSUMER, XINFO CONSUMERS)
    NoGroupForKey { key: Bytes, group: Bytes },
    /// `NOGROUP No such key '<key>' or consumer group '<group>' in XREADGROUP
    /// with GROUP option` (also what a blocked XREADGROUP gets when its key or
    /// group goes away, Redis 7.2+)
    NoGroupInXreadgroup { key: Bytes, group: Bytes },
    /// `BUSYGROUP Consumer Group name already exists`
    BusyGroup,
    /// `ERR The XGROUP subcommand requires the key to exist. Note that for
    /// CREATE you may want to use the MKSTREAM option to create an empty
    /// stream automatically.`
    XgroupNoKey,
    /// Any other error: the full text, prefix included (e.g. `ERR ...`, `NOGROUP ...`).
    Msg(Cow<'static, str>),
    /// Any other error whose text quotes bytes of the request as sent (not
    /// necessarily UTF-8): the full text, prefix included. Build it with
    /// [`quoting`](Self::quoting).
    Quoting(Bytes),
    /// A script's error reply that passes on the error a command it called
    /// answered (raised by `redis.call`, or a `redis.pcall` error table
    /// returned): the text as for [`Msg`](Self::Msg). The command's error
    /// was counted in errorstats when it answered, so the script's reply
    /// counts only as the script command's failed call (Redis's
    /// `ERR_REPLY_FLAG_NO_STATS_UPDATE`).
    FromScriptCall(Bytes),
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
        Self::quoting(&[
            b"ERR unknown subcommand or wrong number of arguments for '",
            c_str_128(sub),
            b"'. Try ",
            cmd.to_ascii_uppercase().as_bytes(),
            b" HELP.",
        ])
    }

    /// [`UnknownSubcommand`](Self::UnknownSubcommand) for `sub` (as sent)
    /// of container `cmd` (CLIENT, XGROUP, ...).
    pub fn unknown_subcommand(cmd: &str, sub: &[u8]) -> Self {
        CmdError::UnknownSubcommand {
            cmd: cmd.to_string(),
            sub: Bytes::copy_from_slice(c_str_128(sub)),
        }
    }

    /// [`NoGroup`](Self::NoGroup) for `group` of `key` (as sent).
    pub fn no_group(key: &[u8], group: &[u8]) -> Self {
        let (key, group) = quoted_pair(key, group);
        CmdError::NoGroup { key, group }
    }

    /// [`NoGroupForKey`](Self::NoGroupForKey) for `group` of `key` (as sent).
    pub fn no_group_for_key(key: &[u8], group: &[u8]) -> Self {
        let (key, group) = quoted_pair(key, group);
        CmdError::NoGroupForKey { key, group }
    }

    /// [`NoGroupInXreadgroup`](Self::NoGroupInXreadgroup) for `group` of
    /// `key` (as sent).
    pub fn no_group_in_xreadgroup(key: &[u8], group: &[u8]) -> Self {
        let (key, group) = quoted_pair(key, group);
        CmdError::NoGroupInXreadgroup { key, group }
    }

    /// A [`Quoting`](Self::Quoting) error: the concatenation of `parts`,
    /// the first carrying the prefix (`ERR ...`).
    pub fn quoting(parts: &[&[u8]]) -> Self {
        CmdError::Quoting(Bytes::from(parts.concat()))
    }

    /// The error's text as the client gets it (prefix included, no CRLF),
    /// with the bytes of the request it quotes exactly as they were sent.
    pub fn text(&self) -> Cow<'_, [u8]> {
        let quoted = |parts: &[&[u8]]| Cow::Owned(parts.concat());
        match self {
            Self::UnknownCommand { name, args } => {
                let mut t = [
                    b"ERR unknown command '",
                    &name[..],
                    b"', with args beginning with: ",
                ]
                .concat();
                for a in args {
                    t.push(b'\'');
                    t.extend_from_slice(a);
                    t.extend_from_slice(b"' ");
                }
                Cow::Owned(t)
            }
            Self::UnknownSubcommand { cmd, sub } => quoted(&[
                b"ERR unknown subcommand '",
                // Cut by `unknown_subcommand` (`%.128s`).
                sub,
                b"'. Try ",
                cmd.to_ascii_uppercase().as_bytes(),
                b" HELP.",
            ]),
            Self::NoGroup { key, group } => quoted(&[
                b"NOGROUP No such key '",
                key,
                b"' or consumer group '",
                group,
                b"'",
            ]),
            Self::NoGroupForKey { key, group } => quoted(&[
                b"NOGROUP No such consumer group '",
                group,
                b"' for key name '",
                key,
                b"'",
            ]),
            Self::NoGroupInXreadgroup { key, group } => quoted(&[
                b"NOGROUP No such key '",
                key,
                b"' or consumer group '",
                group,
                b"' in XREADGROUP with GROUP option",
            ]),
            Self::Quoting(text) | Self::FromScriptCall(text) => Cow::Borrowed(text),
            other => Cow::Owned(other.to_string().into_bytes()),
        }
    }

    /// `WrongArity` for `cmd` (any case; printed lowercased).
    pub fn arity(cmd: &str) -> Self {
        CmdError::WrongArity {
            cmd: cmd.to_ascii_lowercase(),
        }
    }
}

/// `arg` up to its first NUL byte: what C's `%s` prints of it. Redis
/// formats the arguments it quotes in error messages that way.
pub fn c_str(arg: &[u8]) -> &[u8] {
    arg.split(|&b| b == 0).next().unwrap_or_default()
}

/// What C's `%.128s` prints of `arg`: up to its first NUL byte, at most 128
/// bytes (even inside a multi-byte character). Redis quotes command and
/// subcommand names that way.
pub fn c_str_128(arg: &[u8]) -> &[u8] {
    let s = c_str(arg);
    &s[..s.len().min(128)]
}

/// `key` and `group` as an error quotes them (`'%s'`).
fn quoted_pair(key: &[u8], group: &[u8]) -> (Bytes, Bytes) {
    (
        Bytes::copy_from_slice(c_str(key)),
        Bytes::copy_from_slice(c_str(group)),
    )
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongArity { cmd } => {
                write!(f, "ERR wrong number of arguments for '{cmd}' command")
            }
            Self::UnknownCommand { .. }
            | Self::UnknownSubcommand { .. }
            | Self::NoGroup { .. }
            | Self::NoGroupForKey { .. }
            | Self::NoGroupInXreadgroup { .. }
            | Self::Quoting(_)
            | Self::FromScriptCall(_) => f.write_str(&String::from_utf8_lossy(&self.text())),
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
            Self::BusyGroup => f.write_str("BUSYGROUP Consumer Group name already exists"),
            Self::XgroupNoKey => f.write_str(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ),
            Self::Msg(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for CmdError {}

/// A fatal protocol error: one `-ERR Protocol error: <detail>` reply, then the
/// connection is closed (Redis: `setProtocolError`). The detail is bytes:
/// `expected '$', got '<byte>'` quotes the byte the client sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtoError(pub Cow<'static, [u8]>);

impl ProtoError {
    /// A protocol error with a fixed `detail`.
    pub const fn new(detail: &'static str) -> Self {
        ProtoError(Cow::Borrowed(detail.as_bytes()))
    }

    /// The detail, lossily as text (for logs and tests).
    pub fn detail(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// The error reply the client gets: `ERR Protocol error: <detail>`.
    pub fn reply(&self) -> CmdError {
        CmdError::quoting(&[b"ERR Protocol error: ", &self.0])
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERR Protocol error: {}", self.detail())
    }
}

impl std::error::Error for ProtoError {}

#[cfg(test)]
mod tests {
    use super::CmdError;

    /// Redis cuts the subcommand it echoes to 128 bytes (`%.128s`,
    /// redis-server 7.0: `CLIENT <300 z>` echoes 128 of them), also inside
    /// a multi-byte character, and stops at a NUL (`%s`).
    #[test]
    fn unknown_subcommand_echoes_at_most_128_bytes() {
        let e = CmdError::unknown_subcommand("client", "z".repeat(300).as_bytes());
        let want = format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            "z".repeat(128)
        );
        assert_eq!(e.to_string(), want);
        let short = CmdError::unknown_subcommand("xgroup", b"nosub\0tail");
        assert_eq!(
            short.to_string(),
            "ERR unknown subcommand 'nosub'. Try XGROUP HELP."
        );
        let wide = CmdError::unknown_subcommand("client", "é".repeat(100).as_bytes());
        let text = wide.text();
        let quoted =
            &text[b"ERR unknown subcommand '".len()..text.len() - b"'. Try CLIENT HELP.".len()];
        assert_eq!(quoted, &"é".repeat(64).as_bytes()[..128]);
    }

    /// Names that are not UTF-8 go back byte for byte in [`CmdError::text`];
    /// `Display` shows them lossily.
    #[test]
    fn quoted_bytes_are_exact() {
        let e = CmdError::no_group(b"k\xff", b"g\xfe\0rest");
        assert_eq!(
            &e.text()[..],
            b"NOGROUP No such key 'k\xff' or consumer group 'g\xfe'"
        );
        assert_eq!(
            e.to_string(),
            "NOGROUP No such key 'k\u{fffd}' or consumer group 'g\u{fffd}'"
        );
        let e = CmdError::subcommand_syntax("client", b"\xc3(");
        assert_eq!(
            &e.text()[..],
            b"ERR unknown subcommand or wrong number of arguments for '\xc3('. Try CLIENT HELP."
        );
    }
}
