//! [`Reply`]: the only output type of command code.
//!
//! Command code builds a `Reply`; `io::codec` turns it into RESP2 or RESP3 bytes
//! for the connection's negotiated protocol (maps become flat arrays in RESP2,
//! sets become arrays, doubles become bulk strings, nulls keep RESP2's
//! distinction between `$-1` and `*-1`).

use bytes::Bytes;
use std::borrow::Cow;

use crate::error::CmdError;

/// A reply to one command.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`
    Ok,
    /// `+<text>` (simple string): bytes, as a script's `{ok = ...}` may
    /// carry any (CR and LF already replaced).
    Simple(Cow<'static, [u8]>),
    /// `:<n>`
    Int(i64),
    /// `$<len>\r\n<bytes>`
    Bulk(Bytes),
    /// Null bulk string: RESP2 `$-1`, RESP3 `_`.
    NullBulk,
    /// Null array: RESP2 `*-1` (e.g. XREAD BLOCK timeout), RESP3 `_`.
    NullArray,
    /// `*<n>` followed by the elements.
    Array(Vec<Reply>),
    /// RESP3 map `%<n>`; RESP2 flat array of 2n elements.
    Map(Vec<(Reply, Reply)>),
    /// Key → value pairs that RESP2 shows as an array of 2-element arrays
    /// (XREAD / XREADGROUP replies) and RESP3 as a map.
    PairMap(Vec<(Reply, Reply)>),
    /// Ordered pairs that RESP2 shows as one flat array of 2n elements and
    /// RESP3 as an array of n 2-element arrays (ZRANGE WITHSCORES,
    /// ZRANDMEMBER WITHSCORES, ZPOPMIN with a count: Redis keeps an array,
    /// not a map, so that clients keep the order).
    Pairs(Vec<(Reply, Reply)>),
    /// RESP3 set `~<n>`; RESP2 array.
    Set(Vec<Reply>),
    /// RESP3 double `,<f>`; RESP2 bulk string.
    Double(f64),
    /// RESP3 boolean `#t`/`#f`; RESP2 integer 1/0.
    Bool(bool),
    /// RESP3 verbatim string `=<len>\r\ntxt:<text>`; RESP2 bulk string.
    Verbatim(Bytes),
    /// RESP3 verbatim string of another format, `=<len>\r\n<fmt>:<text>`;
    /// RESP2 bulk string. Scripts make it (`{verbatim_string={format=,
    /// string=}}`); `format` is the first three bytes of theirs, padded
    /// with spaces, as Redis's `addReplyVerbatim` writes it.
    VerbatimAs { format: [u8; 3], text: Bytes },
    /// RESP3 big number `(<digits>`; RESP2 bulk string. Scripts make it
    /// (`{big_number=}`); Redis writes the text as given, CR/LF as spaces.
    BigNumber(Bytes),
    /// `-<error text>`
    Error(CmdError),
    /// A deeply nested reply (a script's, up to Redis's ~8000 levels),
    /// encoded on the shard for both protocols by
    /// [`crate::io::codec::pre_encode`]: a tree that deep must not reach
    /// code that walks or drops it recursively on another thread's stack.
    PreEncoded(Box<PreEncoded>),
    /// One RESP value already encoded, made only of arrays and bulk strings,
    /// so its bytes are the same in RESP2 and RESP3; written as it is. Stream
    /// reads write their entries this way, straight from the nodes
    /// (`cmd::stream::range::EntriesOut`). Code that looks inside replies
    /// (Lua) reads it through [`Reply::expanded`].
    Raw(Bytes),
    /// Internal, never encoded: the request parked a blocking waiter and its
    /// reply comes later from whoever claims the ticket (a shard or the
    /// connection's thread on timeout). Shards do not send it.
    NoReply,
    /// Internal, never encoded: a shard woke a read blocked over streams of
    /// several shards; the connection's thread runs the read again over all
    /// of them, as Redis 7.2+ re-executes an unblocked command, so it gets
    /// every stream that has data (see [`crate::shard::blocking::Ticket`]).
    Rerun,
    /// Internal, never encoded: the reply would have taken the client past
    /// its hard output buffer limit (`ExecCtx::reply_budget_bytes`), so it was
    /// not built; the connection is closed as Redis closes a client whose
    /// output buffer passes the limit.
    OverOutputLimit,
}

/// The bytes of one reply in each protocol, and the error replies nested
/// in it (INFO counts each, as Redis counts every error reply it writes).
#[derive(Clone, Debug, PartialEq)]
pub struct PreEncoded {
    /// The RESP2 encoding.
    pub resp2: Bytes,
    /// The RESP3 encoding.
    pub resp3: Bytes,
    /// The errors nested in the reply, in the order they are written.
    pub errors: Vec<CmdError>,
}

impl Reply {
    /// A bulk string reply from anything byte-like.
    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// A bulk string reply copied from a `&str` or `&[u8]`.
    pub fn bulk_copy(b: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(b.as_ref()))
    }

    /// A simple string reply from a static text.
    pub fn simple(s: &'static str) -> Reply {
        Reply::Simple(Cow::Borrowed(s.as_bytes()))
    }

    /// Whether this reply is an error.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// The error, when this reply is one.
    pub fn error_text(&self) -> Option<&CmdError> {
        match self {
            Reply::Error(e) => Some(e),
            _ => None,
        }
    }
}

impl Reply {
    /// This reply with every [`Reply::Raw`] in it decoded back into arrays
    /// and bulk strings: the tree the same reply would have been had it been
    /// built value by value.
    pub fn expanded(self) -> Reply {
        match self {
            Reply::Raw(b) => {
                let mut pos = 0;
                parse_raw(&b, &mut pos)
            }
            Reply::Array(items) => Reply::Array(items.into_iter().map(Reply::expanded).collect()),
            Reply::Set(items) => Reply::Set(items.into_iter().map(Reply::expanded).collect()),
            Reply::Map(p) => Reply::Map(expand_pairs(p)),
            Reply::PairMap(p) => Reply::PairMap(expand_pairs(p)),
            Reply::Pairs(p) => Reply::Pairs(expand_pairs(p)),
            other => other,
        }
    }
}

fn expand_pairs(pairs: Vec<(Reply, Reply)>) -> Vec<(Reply, Reply)> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.expanded(), v.expanded()))
        .collect()
}

/// Decode the RESP value at `*pos` of a [`Reply::Raw`] (arrays, bulk
/// strings and their nulls), moving `pos` past it. Input that is not such
/// a value, which `Raw`'s writers never produce, decodes as a null bulk.
fn parse_raw(b: &Bytes, pos: &mut usize) -> Reply {
    let Some(&kind) = b.get(*pos) else {
        return Reply::NullBulk;
    };
    let Some(cr) = b[*pos..].iter().position(|&c| c == b'\r').map(|i| *pos + i) else {
        return Reply::NullBulk;
    };
    let n: Option<i64> = std::str::from_utf8(&b[*pos + 1..cr])
        .ok()
        .and_then(|t| t.parse().ok());
    *pos = cr + 2;
    match (kind, n) {
        (b'*', Some(n)) if n < 0 => Reply::NullArray,
        (b'*', Some(n)) => Reply::Array((0..n).map(|_| parse_raw(b, pos)).collect()),
        (b'$', Some(n)) if n < 0 => Reply::NullBulk,
        (b'$', Some(n)) => {
            let end = (*pos + n as usize).min(b.len());
            let item = b.slice(*pos..end);
            *pos = end + 2;
            Reply::Bulk(item)
        }
        _ => Reply::NullBulk,
    }
}

impl From<CmdError> for Reply {
    fn from(e: CmdError) -> Reply {
        Reply::Error(e)
    }
}

impl From<Result<Reply, CmdError>> for Reply {
    fn from(r: Result<Reply, CmdError>) -> Reply {
        r.unwrap_or_else(Reply::Error)
    }
}
