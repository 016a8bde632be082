//! Range reads: XLEN, XRANGE, XREVRANGE, and the entry reply shape every
//! stream read shares.
//!
//! # Source
//! redis/src/t_stream.c: `xlenCommand`, `xrangeGenericCommand`.

use crate::cmd::args::{int_arg, is};
use crate::cmd::{on_shard, ExecCtx, ShardReq};
use crate::error::CmdError;
use crate::io::codec;
use crate::reply::Reply;
use crate::shard::db::ShardDb;
use crate::stream::id::{parse_range_end, parse_range_start};
use crate::stream::{Entry, EntryView, StreamId};
use bytes::{Buf, BufMut, Bytes, BytesMut};

pub(super) fn parse_xlen(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let key = argv[1].clone();
    Ok(on_shard(move |db, cx| apply_xlen(db, cx, &key).into()))
}

/// A parsed `XRANGE` / `XREVRANGE`, bounds resolved to inclusive IDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XrangeReq {
    pub key: Bytes,
    /// Smallest ID included.
    pub start: StreamId,
    /// Greatest ID included.
    pub end: StreamId,
    /// `COUNT n` (negative counts become 0). `None` = no limit.
    pub count: Option<u64>,
    /// XREVRANGE: newest first.
    pub rev: bool,
}

/// `XRANGE key start end [COUNT n]` / `XREVRANGE key end start [COUNT n]`.
///
/// # Errors
/// In Redis's order: start parse, `ERR invalid start ID for the interval`,
/// end parse, `ERR invalid end ID for the interval`, COUNT not an integer,
/// `ERR syntax error` for anything else after the bounds.
/// # Source
/// `xrangeGenericCommand`.
pub fn parse_xrange_req(argv: &[Bytes], rev: bool) -> Result<XrangeReq, CmdError> {
    let (start_arg, end_arg) = if rev {
        (&argv[3], &argv[2])
    } else {
        (&argv[2], &argv[3])
    };
    let start = parse_range_start(start_arg)?.first_included()?;
    let end = parse_range_end(end_arg)?.last_included()?;
    let mut count = None;
    let mut j = 4;
    while j < argv.len() {
        if is(&argv[j], "COUNT") && j + 1 < argv.len() {
            count = Some(u64::try_from(int_arg(&argv[j + 1])?).unwrap_or(0));
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(XrangeReq {
        key: argv[1].clone(),
        start,
        end,
        count,
        rev,
    })
}

pub(super) fn parse_xrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xrange_req(argv, false)?;
    Ok(on_shard(move |db, cx| apply_xrange(db, cx, &req).into()))
}

pub(super) fn parse_xrevrange(argv: &[Bytes]) -> Result<ShardReq, CmdError> {
    let req = parse_xrange_req(argv, true)?;
    Ok(on_shard(move |db, cx| apply_xrange(db, cx, &req).into()))
}

/// `XLEN key`.
///
/// # Reply
/// Number of entries; 0 for a missing key.
/// # Errors
/// `WrongType`.
pub fn apply_xlen(db: &mut ShardDb, cx: &ExecCtx, key: &[u8]) -> Result<Reply, CmdError> {
    let n = db.get_stream(cx.db, key, cx.now_ms)?.map_or(0, |s| s.len());
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// `XRANGE` / `XREVRANGE`.
///
/// # Reply
/// Array of `[id, [field, value, ...]]`; empty array for a missing key; null
/// array when `COUNT` is 0 or negative on an existing key (as Redis).
/// # Errors
/// `WrongType`.
pub fn apply_xrange(db: &mut ShardDb, cx: &ExecCtx, req: &XrangeReq) -> Result<Reply, CmdError> {
    let Some(s) = db.get_stream(cx.db, &req.key, cx.now_ms)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if req.count == Some(0) {
        return Ok(Reply::NullArray);
    }
    let count = req
        .count
        .map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
    if cx.reply_budget_bytes != u64::MAX {
        // Past the client's hard output limit Redis closes the client:
        // measure first, so a reply that would not fit is never written.
        let mut bytes = 0u64;
        for e in s.iter_views(req.start, req.end, req.rev).take(count) {
            bytes += super::read::view_reply_bytes(&e);
            if bytes > cx.reply_budget_bytes {
                return Ok(Reply::OverOutputLimit);
            }
        }
    }
    let mut out = EntriesOut::default();
    for e in s.iter_views(req.start, req.end, req.rev).take(count) {
        out.push(&e);
    }
    Ok(out.finish())
}

/// Stream entries written as one RESP array straight from the nodes that
/// hold them: one buffer per reply, with no allocation per entry or field
/// (a reply built as a [`Reply`] tree takes about ten per entry). The
/// entries are the same bytes [`entry_reply`] encodes to, in RESP2 and RESP3.
pub struct EntriesOut {
    /// [`HEAD_ROOM`] bytes kept for the array header, then the entries.
    buf: BytesMut,
    /// Entries written.
    n: usize,
}

/// Room for the longest array header, `*<u64>\r\n`.
const HEAD_ROOM: usize = 1 + 20 + 2;

impl Default for EntriesOut {
    fn default() -> Self {
        let mut buf = BytesMut::with_capacity(HEAD_ROOM + 1024);
        buf.resize(HEAD_ROOM, 0);
        EntriesOut { buf, n: 0 }
    }
}

impl EntriesOut {
    /// Writes `e` as `[id, [field, value, ...]]` if `admit` accepts its size
    /// in bytes (the size [`super::read::entry_reply_bytes`] gives, which
    /// MAXSIZE counts). Returns whether it was written.
    pub fn push_if(&mut self, e: &EntryView<'_>, admit: impl FnOnce(u64) -> bool) -> bool {
        let start = self.buf.len();
        let fields = e.fields();
        self.buf.put_slice(b"*2\r\n");
        let (mut ms, mut seq) = (itoa::Buffer::new(), itoa::Buffer::new());
        let (ms, seq) = (ms.format(e.id.ms), seq.format(e.id.seq));
        codec::header(&mut self.buf, b'$', (ms.len() + 1 + seq.len()) as i64);
        self.buf.put_slice(ms.as_bytes());
        self.buf.put_u8(b'-');
        self.buf.put_slice(seq.as_bytes());
        self.buf.put_slice(b"\r\n");
        codec::header(&mut self.buf, b'*', 2 * fields.len() as i64);
        for (f, v) in fields {
            codec::bulk(&mut self.buf, f);
            codec::bulk(&mut self.buf, v);
        }
        if admit((self.buf.len() - start) as u64) {
            self.n += 1;
            true
        } else {
            self.buf.truncate(start);
            false
        }
    }

    /// Writes `e` (see [`EntriesOut::push_if`]).
    pub fn push(&mut self, e: &EntryView<'_>) {
        self.push_if(e, |_| true);
    }

    /// Entries written so far.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no entry was written.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Bytes the entries written so far take (the array header aside).
    pub fn bytes(&self) -> u64 {
        (self.buf.len() - HEAD_ROOM) as u64
    }

    /// The array of the entries written, as one [`Reply::Raw`].
    pub fn finish(self) -> Reply {
        let mut head = BytesMut::with_capacity(HEAD_ROOM);
        codec::header(&mut head, b'*', self.n as i64);
        let at = HEAD_ROOM - head.len();
        let mut buf = self.buf;
        buf[at..HEAD_ROOM].copy_from_slice(&head);
        let mut raw = buf.freeze();
        raw.advance(at);
        Reply::Raw(raw)
    }
}

/// One entry as Redis sends it: `[id, [field, value, ...]]`.
pub fn entry_reply(e: Entry) -> Reply {
    let mut fv = Vec::with_capacity(e.fields.len() * 2);
    for (f, v) in e.fields {
        fv.push(Reply::Bulk(f));
        fv.push(Reply::Bulk(v));
    }
    Reply::Array(vec![Reply::Bulk(e.id.to_bytes()), Reply::Array(fv)])
}

/// A list of entries as an array of [`entry_reply`]s.
pub fn entries_reply(entries: Vec<Entry>) -> Reply {
    Reply::Array(entries.into_iter().map(entry_reply).collect())
}
