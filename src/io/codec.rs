//! RESP decoding and encoding: the only place that knows the wire format.
//!
//! Requests: one scan over a RESP multibulk frame enforces Redis's limits and
//! error texts (`proto-max-bulk-len`, multibulk length, `$` expected), tells
//! how many bytes a partial frame still needs (so a large bulk arriving in
//! pieces is not re-scanned on every read) and, once the frame is complete,
//! yields the arguments as zero-copy slices of the read buffer. Framing is
//! Redis's: a bulk is exactly `len` bytes and the two bytes after it are
//! skipped unchecked (`*1\r\n$4\r\nPINGxx\r\n` is a PING; the `\r\n`
//! left over is an empty inline line). Inline commands (what telnet sends)
//! are split here as Redis's `sdssplitargs` does.
//!
//! Replies: [`encode`] writes a [`Reply`] straight into the output buffer for
//! RESP2 or RESP3. We write these bytes ourselves rather than via
//! `redis-protocol` frames because RESP2 needs both `$-1` and `*-1` (the
//! crate's RESP2 frame has a single `Null`) and because writing in place avoids
//! building a frame tree per reply. (Nothing uses `redis-protocol` any more;
//! the dependency can go.)

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::ctype::is_space;
use crate::error::ProtoError;
use crate::reply::Reply;

/// Redis's limit on an inline request line (PROTO_INLINE_MAX_SIZE), bytes.
pub const INLINE_MAX_BYTES: usize = 64 * 1024;
/// How much Redis reads from a socket at a time for an inline request
/// (PROTO_IOBUF_LEN), bytes.
const REDIS_READ_BYTES: usize = 16 * 1024;
/// Largest multibulk element count Redis accepts from an authenticated client (INT_MAX).
pub const MULTIBULK_MAX: i64 = i32::MAX as i64;
/// Largest multibulk count from a client that has not authenticated yet
/// (Redis: 10 when `requirepass` is set and the client is not authenticated).
pub const MULTIBULK_MAX_UNAUTH: i64 = 10;

/// Largest bulk string from a client that has not authenticated yet, bytes.
pub const UNAUTH_BULK_MAX_BYTES: usize = 16384;

/// Limits the decoder enforces, from the server configuration.
#[derive(Clone, Copy, Debug)]
pub struct DecodeLimits {
    /// `proto-max-bulk-len` in bytes (default 512 MB).
    pub max_bulk_bytes: i64,
    /// Largest multibulk element count.
    pub max_multibulk: i64,
    /// The client must still authenticate (`requirepass` set, no AUTH yet):
    /// Redis then allows at most 10 arguments of at most 16384 bytes.
    pub unauthenticated: bool,
}

/// Outcome of one decode attempt on a connection's read buffer.
#[derive(Debug)]
pub enum Decoded {
    /// One complete command: its arguments (`argv[0]` is the name). May be empty
    /// (an empty inline line or `*0`): the caller skips it.
    Command(Vec<Bytes>),
    /// Not enough bytes yet; at least `min_total` bytes must be buffered before
    /// trying again.
    Incomplete { min_total: usize },
}

/// Decode one command from the front of `buf`, consuming its bytes.
pub fn decode(buf: &mut BytesMut, limits: DecodeLimits) -> Result<Decoded, ProtoError> {
    decode_resuming(buf, limits, &mut FrameScan::default())
}

/// How far the scan of an incomplete multibulk frame got, kept by its
/// connection: the next scan of the same buffer resumes there. A command of
/// many arguments arriving over many reads is then scanned once, not once
/// per read (which was quadratic in its size), as Redis parses its query
/// buffer incrementally.
#[derive(Debug, Default)]
pub struct FrameScan {
    /// The (start, length) of each argument scanned so far; the list keeps
    /// its capacity from one command to the next (up to 1024 arguments).
    args: Vec<(usize, usize)>,
    /// The frame's argument count; 0 when no scan is under way.
    count: usize,
    /// Where the next argument's header starts.
    pos: usize,
}

impl FrameScan {
    /// Bytes at the front of the buffer that the incomplete frame's whole
    /// arguments (and its headers) take: Redis has already moved those out
    /// of its query buffer into the command's arguments, so they do not
    /// count against `client-query-buffer-limit`. 0 when no frame is under
    /// way.
    ///
    /// # Source
    /// `processMultibulkBuffer`, redis/src/networking.c: each argument is
    /// taken out of the query buffer as soon as it is whole (a big one
    /// becomes its own object), and the limit is checked on what is left.
    pub fn parsed_bytes(&self) -> usize {
        if self.count == 0 {
            0
        } else {
            self.pos
        }
    }

    fn reset(&mut self) {
        self.args.clear();
        if self.args.capacity() > 1024 {
            self.args = Vec::new();
        }
        self.count = 0;
        self.pos = 0;
    }
}

/// [`decode`] for a buffer that only grows at its end between calls until a
/// command is taken from it: `scan` (empty at first) carries an incomplete
/// frame's progress from one call to the next.
pub fn decode_resuming(
    buf: &mut BytesMut,
    limits: DecodeLimits,
    scan: &mut FrameScan,
) -> Result<Decoded, ProtoError> {
    if buf.is_empty() {
        return Ok(Decoded::Incomplete { min_total: 1 });
    }
    if buf[0] != b'*' {
        scan.reset();
        return decode_inline(buf);
    }
    // Check the headers (and Redis's limits), then cut the arguments out.
    let decoded = scan_multibulk(buf, limits, scan).map(|s| cut(buf, s, &scan.args));
    if !matches!(decoded, Ok(Decoded::Incomplete { .. })) {
        scan.reset();
    }
    decoded
}

/// Cut a scanned frame out of `buf` as a command's arguments.
fn cut(buf: &mut BytesMut, scan: Scan, args: &[(usize, usize)]) -> Decoded {
    match scan {
        Scan::Need(n) => Decoded::Incomplete { min_total: n },
        Scan::Empty(consumed) => {
            let _ = buf.split_to(consumed);
            Decoded::Command(Vec::new())
        }
        Scan::Complete { end } => {
            let mut frame = buf.split_to(end).freeze();
            let mut argv = Vec::with_capacity(args.len());
            if let Some((&(start, len), rest)) = args.split_last() {
                argv.extend(rest.iter().map(|&(s, l)| frame.slice(s..s + l)));
                // The last argument takes the frame itself: one reference
                // count fewer to raise and drop per command.
                frame.advance(start);
                frame.truncate(len);
                argv.push(frame);
            }
            Decoded::Command(argv)
        }
    }
}

enum Scan {
    /// The whole frame (`end` bytes) is buffered and its headers are valid;
    /// the scan's list holds the (start, length) of each bulk in it.
    Complete { end: usize },
    /// `*0` or `*-1`: an empty command of this many bytes.
    Empty(usize),
    /// At least this many bytes are needed.
    Need(usize),
}

/// Where a header line starting at `from` ends, framed as Redis frames it:
/// the first `\r` ends the number, and the byte after it is taken to be the
/// `\n` without being looked at (so `*1\r$4\r\n` reads `$` as that byte and
/// then finds `4` where the `$` of the first bulk should be).
///
/// # Reply
/// `Ok(cr)`: the index of the `\r`, with the byte after it buffered;
/// `Err(need)`: not framed yet, at least `need` bytes are needed (`None` when
/// no `\r` is buffered at all; the caller applies its size limit).
/// # Source
/// `processMultibulkBuffer`, redis/src/networking.c (7.x/8.x): `strchr(..., '\r')`,
/// then "buffer should also contain \n", then `qb_pos = newline + 2`. As
/// `strchr` stops at a NUL byte, a NUL before the `\r` means no `\r` is
/// found: the frame waits for more input, up to the size limit.
fn header_end(buf: &[u8], from: usize) -> Result<usize, Option<usize>> {
    let cr = buf[from..]
        .iter()
        .position(|&b| b == b'\r' || b == 0)
        .ok_or(None)?
        + from;
    if buf[cr] == 0 {
        return Err(None);
    }
    if cr + 2 > buf.len() {
        return Err(Some(cr + 2));
    }
    Ok(cr)
}

/// Parse a header integer exactly as Redis does (`string2ll` on the text up to `\r`).
fn header_int(text: &[u8]) -> Option<i64> {
    let (neg, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') || (neg && digits == b"0") {
        // Redis's string2ll: no "-0", no leading zeros.
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        v = if neg {
            v.checked_mul(10)?.checked_sub(d)?
        } else {
            v.checked_mul(10)?.checked_add(d)?
        };
    }
    Some(v)
}

/// Walk the multibulk headers, enforcing Redis's limits and error texts.
///
/// # Source
/// `processMultibulkBuffer`, redis/src/networking.c (7.x): error texts
/// `invalid multibulk length`, `expected '$', got 'x'`, `invalid bulk length`,
/// `too big mbulk count string`, `too big bulk count string`.
fn scan_multibulk(
    buf: &[u8],
    limits: DecodeLimits,
    st: &mut FrameScan,
) -> Result<Scan, ProtoError> {
    let (count, mut pos) = if st.count > 0 {
        (st.count, st.pos)
    } else {
        match scan_count(buf, limits)? {
            Ok(header) => header,
            Err(scan) => return Ok(scan),
        }
    };
    while st.args.len() < count {
        let header = match bulk_header_fast(buf, pos) {
            Some(h) => Ok(h),
            None => bulk_header(buf, pos)?,
        };
        let need = match header {
            Ok((len, start)) => {
                if i64::try_from(len).map_or(true, |n| n > limits.max_bulk_bytes) {
                    return Err(ProtoError::new("invalid bulk length"));
                }
                let len = len as usize;
                if limits.unauthenticated && len > UNAUTH_BULK_MAX_BYTES {
                    return Err(ProtoError::new("unauthenticated bulk length"));
                }
                // Redis waits for len + 2 bytes, takes len and skips the
                // next two without looking at them.
                let end = start + len + 2;
                if end <= buf.len() {
                    st.args.push((start, len));
                    pos = end;
                    continue;
                }
                end
            }
            Err(need) => need,
        };
        // Stopped short of the frame's end: resume at this header next time.
        st.count = count;
        st.pos = pos;
        return Ok(Scan::Need(need));
    }
    Ok(Scan::Complete { end: pos })
}

/// The bulk header at `pos` in the form clients send: `$`, a length of 1
/// to 18 digits without a leading zero, `\r` and one more byte buffered.
/// Anything else (an incomplete or odd header) is left to [`bulk_header`],
/// which this agrees with wherever it answers.
///
/// # Reply
/// `(length, start of the bulk's data)`.
#[inline]
fn bulk_header_fast(buf: &[u8], pos: usize) -> Option<(u64, usize)> {
    let line = buf.get(pos..)?;
    if line.first() != Some(&b'$') {
        return None;
    }
    let mut len = 0u64;
    let mut i = 1;
    // 19 digits at most are read: no overflow of u64.
    while i < line.len() && i <= 19 && line[i].is_ascii_digit() {
        len = len * 10 + u64::from(line[i] - b'0');
        i += 1;
    }
    let digits = i - 1;
    let canonical = (1..=18).contains(&digits) && (digits == 1 || line[1] != b'0');
    // The `\r`, and the byte after it (taken for `\n` unread, as Redis does).
    if !canonical || line[i..].first() != Some(&b'\r') || i + 2 > line.len() {
        return None;
    }
    Some((len, pos + i + 2))
}

/// The bulk header at `pos`, parsed as Redis parses it.
///
/// # Reply
/// `Ok(Ok((length, start of the bulk's data)))`; `Ok(Err(need))` when at
/// least `need` bytes must be buffered first (the line, up to its `\r`
/// and one byte more, must be before its first byte is checked for `$`).
/// # Errors
/// `too big bulk count string` (no `\r` within [`INLINE_MAX_BYTES`]),
/// `expected '$', got 'x'`, `invalid bulk length` (not an integer, or
/// negative).
fn bulk_header(buf: &[u8], pos: usize) -> Result<Result<(u64, usize), usize>, ProtoError> {
    if pos >= buf.len() {
        return Ok(Err(pos + 1));
    }
    let cr = match header_end(buf, pos) {
        Ok(cr) => cr,
        Err(Some(need)) => return Ok(Err(need)),
        Err(None) => {
            if buf.len() - pos > INLINE_MAX_BYTES {
                return Err(ProtoError::new("too big bulk count string"));
            }
            return Ok(Err(buf.len() + 1));
        }
    };
    if buf[pos] != b'$' {
        // The byte as it came (`%c`), UTF-8 or not.
        return Err(ProtoError(
            [&b"expected '$', got '"[..], &buf[pos..=pos], b"'"]
                .concat()
                .into(),
        ));
    }
    match header_int(&buf[pos + 1..cr]).and_then(|n| u64::try_from(n).ok()) {
        Some(n) => Ok(Ok((n, cr + 2))),
        None => Err(ProtoError::new("invalid bulk length")),
    }
}

/// The multibulk count header `*<count>\r\n` at the start of `buf`.
///
/// # Reply
/// `Ok(Ok((count, first header)))` for a frame of arguments; `Ok(Err(scan))`
/// when the header is incomplete or the frame is empty (`*0`, `*-1`).
fn scan_count(
    buf: &[u8],
    limits: DecodeLimits,
) -> Result<Result<(usize, usize), Scan>, ProtoError> {
    let cr = match header_end(buf, 1) {
        Ok(cr) => cr,
        Err(Some(need)) => return Ok(Err(Scan::Need(need))),
        Err(None) => {
            if buf.len() > INLINE_MAX_BYTES {
                return Err(ProtoError::new("too big mbulk count string"));
            }
            return Ok(Err(Scan::Need(buf.len() + 1)));
        }
    };
    let count = match header_int(&buf[1..cr]) {
        Some(n) if n <= limits.max_multibulk => n,
        _ => return Err(ProtoError::new("invalid multibulk length")),
    };
    if limits.unauthenticated && count > MULTIBULK_MAX_UNAUTH {
        return Err(ProtoError::new("unauthenticated multibulk length"));
    }
    match usize::try_from(count) {
        Ok(n) if n > 0 => Ok(Ok((n, cr + 2))),
        _ => Ok(Err(Scan::Empty(cr + 2))),
    }
}

/// Decode one inline command (a text line, split like `sdssplitargs`).
///
/// Redis finds the end of the line with `strchr`, which stops at a NUL byte:
/// a NUL before the newline hides it, so the request stays incomplete until
/// more than [`INLINE_MAX_BYTES`] are buffered (`too big inline request`).
/// We do the same. A longer line whose newline is already buffered is
/// accepted as far as Redis accepts one sent in a single write: Redis reads
/// 16 KiB at a time and checks after each read, so it sees the newline if it
/// lies within the read that crosses 64 KiB, the first 80 KiB (a 70 KB line
/// is served; a 1 MB one is refused; redis-server 7.0.15's exact cut-off
/// here was 81,910 bytes, as its reads are not always full).
///
/// # Source
/// `processInlineBuffer`, redis/src/networking.c (7.x).
fn decode_inline(buf: &mut BytesMut) -> Result<Decoded, ProtoError> {
    let nl = buf
        .iter()
        .position(|&b| b == b'\n' || b == 0)
        .filter(|&i| buf.get(i) == Some(&b'\n'));
    let Some(nl) = nl else {
        if buf.len() > INLINE_MAX_BYTES {
            return Err(ProtoError::new("too big inline request"));
        }
        return Ok(Decoded::Incomplete {
            min_total: buf.len() + 1,
        });
    };
    if nl >= INLINE_MAX_BYTES + REDIS_READ_BYTES {
        // Redis would have read past 64 KiB without seeing this newline.
        return Err(ProtoError::new("too big inline request"));
    }
    let line = buf.split_to(nl + 1);
    let mut text = &line[..nl];
    if text.last() == Some(&b'\r') {
        text = &text[..text.len() - 1];
    }
    match split_args(text) {
        Some(args) => Ok(Decoded::Command(args)),
        None => Err(ProtoError::new("unbalanced quotes in request")),
    }
}

/// Split an inline line into arguments: whitespace separated, with `"..."`
/// (backslash escapes, `\xHH`) and `'...'` quoting. `None` on unbalanced quotes
/// or a closing quote not followed by a space. A NUL byte ends the line, as
/// it ends the C string `sdssplitargs` walks (an open quote is then
/// unbalanced).
///
/// # Source
/// `sdssplitargs`, redis/src/sds.c.
pub fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    // Before this cut a NUL outside quotes ended an argument without being
    // consumed, and the whitespace skip did not consume it either: an endless
    // loop pushing empty arguments (found by the `codec` fuzz target).
    let line = line.split(|&b| b == 0).next().unwrap_or_default();
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(Bytes::from(cur));
    }
}

/// Nesting levels [`encode`] goes down on the caller's stack; deeper
/// levels run on stack segments `stacker` allocates (only
/// [`pre_encode`] meets such replies).
const ENCODE_LEVELS_ON_STACK: usize = 64;

/// Append the RESP encoding of `reply` to `out`, for RESP3 when `resp3`.
pub fn encode(reply: &Reply, resp3: bool, out: &mut BytesMut) {
    encode_at(reply, resp3, out, 0);
}

/// [`encode`] of a value nested `depth` levels down.
fn encode_nested(reply: &Reply, resp3: bool, out: &mut BytesMut, depth: usize) {
    if depth > ENCODE_LEVELS_ON_STACK {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || {
            encode_at(reply, resp3, out, depth)
        });
    } else {
        encode_at(reply, resp3, out, depth);
    }
}

/// A reply nested too deep to travel as a tree (see
/// [`Reply::PreEncoded`]) as its bytes in both protocols and its nested
/// errors. The tree is taken apart without recursion.
pub fn pre_encode(tree: Reply) -> Reply {
    let mut resp2 = BytesMut::new();
    let mut resp3 = BytesMut::new();
    encode(&tree, false, &mut resp2);
    encode(&tree, true, &mut resp3);
    let mut errors = Vec::new();
    // Depth first, in writing order, with an explicit stack: dropping or
    // walking the tree recursively is what this type exists to avoid.
    let mut todo = vec![tree];
    while let Some(r) = todo.pop() {
        match r {
            Reply::Error(e) => errors.push(e),
            Reply::Array(items) | Reply::Set(items) => todo.extend(items.into_iter().rev()),
            Reply::Map(pairs) | Reply::PairMap(pairs) | Reply::Pairs(pairs) => {
                for (k, v) in pairs.into_iter().rev() {
                    todo.push(v);
                    todo.push(k);
                }
            }
            Reply::PreEncoded(p) => errors.extend(p.errors),
            _ => {}
        }
    }
    Reply::PreEncoded(Box::new(crate::reply::PreEncoded {
        resp2: resp2.freeze(),
        resp3: resp3.freeze(),
        errors,
    }))
}

fn encode_at(reply: &Reply, resp3: bool, out: &mut BytesMut, depth: usize) {
    match reply {
        Reply::Ok => out.put_slice(b"+OK\r\n"),
        Reply::Simple(s) => {
            out.put_u8(b'+');
            out.put_slice(s);
            out.put_slice(b"\r\n");
        }
        Reply::Int(n) => header(out, b':', *n),
        Reply::Bulk(b) => bulk(out, b),
        Reply::NullBulk => out.put_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        Reply::NullArray => out.put_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
        Reply::Array(items) => {
            header(out, b'*', items.len() as i64);
            for item in items {
                encode_nested(item, resp3, out, depth + 1);
            }
        }
        Reply::Set(items) => {
            header(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
            for item in items {
                encode_nested(item, resp3, out, depth + 1);
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                header(out, b'%', pairs.len() as i64);
            } else {
                header(out, b'*', 2 * pairs.len() as i64);
            }
            for (k, v) in pairs {
                encode_nested(k, resp3, out, depth + 1);
                encode_nested(v, resp3, out, depth + 1);
            }
        }
        Reply::Pairs(pairs) => {
            header(out, b'*', (pairs.len() * if resp3 { 1 } else { 2 }) as i64);
            for (k, v) in pairs {
                if resp3 {
                    out.put_slice(b"*2\r\n");
                }
                encode_nested(k, resp3, out, depth + 1);
                encode_nested(v, resp3, out, depth + 1);
            }
        }
        Reply::PairMap(pairs) => {
            header(out, if resp3 { b'%' } else { b'*' }, pairs.len() as i64);
            for (k, v) in pairs {
                if !resp3 {
                    out.put_slice(b"*2\r\n");
                }
                encode_nested(k, resp3, out, depth + 1);
                encode_nested(v, resp3, out, depth + 1);
            }
        }
        Reply::Double(d) => {
            let text = format_double(*d);
            if resp3 {
                out.put_u8(b',');
                out.put_slice(text.as_bytes());
                out.put_slice(b"\r\n");
            } else {
                bulk(out, text.as_bytes());
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
            } else {
                header(out, b':', i64::from(*b));
            }
        }
        Reply::Verbatim(b) => {
            if resp3 {
                header(out, b'=', b.len() as i64 + 4);
                out.put_slice(b"txt:");
                out.put_slice(b);
                out.put_slice(b"\r\n");
            } else {
                bulk(out, b);
            }
        }
        Reply::VerbatimAs { format, text } => {
            if resp3 {
                header(out, b'=', text.len() as i64 + 4);
                out.put_slice(format);
                out.put_u8(b':');
                out.put_slice(text);
                out.put_slice(b"\r\n");
            } else {
                bulk(out, text);
            }
        }
        Reply::BigNumber(b) => {
            if resp3 {
                out.put_u8(b'(');
                out.put_slice(b);
                out.put_slice(b"\r\n");
            } else {
                bulk(out, b);
            }
        }
        Reply::PreEncoded(p) => out.put_slice(if resp3 { &p.resp3 } else { &p.resp2 }),
        Reply::Raw(b) => out.put_slice(b),
        Reply::NoReply | Reply::OverOutputLimit | Reply::Rerun => {}
        Reply::Error(e) => {
            out.put_u8(b'-');
            // Error text must stay on one line.
            for &b in e.text().iter() {
                out.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
            }
            out.put_slice(b"\r\n");
        }
    }
}

/// Format a double as Redis does for RESP3 (`%.17g`-like, `inf`, `-inf`, `nan`).
pub fn format_double(d: f64) -> String {
    // Redis's `d2string` text (integers as integers, else shortest round trip).
    crate::zset::score::format_score(d)
}

/// Write a RESP header line: `kind`, `n` in decimal, CRLF (`*3\r\n`).
///
/// Most headers count a handful of items or bytes: those below 100 are
/// written as one small copy, without the general formatter (a stream
/// entry in a reply takes about ten headers).
#[inline]
pub fn header(out: &mut BytesMut, kind: u8, n: i64) {
    match n {
        0..=9 => out.put_slice(&[kind, b'0' + n as u8, b'\r', b'\n']),
        10..=99 => out.put_slice(&[
            kind,
            b'0' + (n / 10) as u8,
            b'0' + (n % 10) as u8,
            b'\r',
            b'\n',
        ]),
        _ => {
            let mut buf = itoa::Buffer::new();
            out.put_u8(kind);
            out.put_slice(buf.format(n).as_bytes());
            out.put_slice(b"\r\n");
        }
    }
}

/// Write `b` as a RESP bulk string.
pub fn bulk(out: &mut BytesMut, b: &[u8]) {
    header(out, b'$', b.len() as i64);
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// Encode a command as a RESP multibulk (used by clients in tests and loadgen).
pub fn encode_command<A: AsRef<[u8]>>(args: &[A], out: &mut BytesMut) {
    header(out, b'*', args.len() as i64);
    for a in args {
        bulk(out, a.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> DecodeLimits {
        DecodeLimits {
            max_bulk_bytes: 512 * 1024 * 1024,
            max_multibulk: MULTIBULK_MAX,
            unauthenticated: false,
        }
    }

    /// Decode everything in `wire`, fed `step` bytes at a time through one
    /// resumable scan: the commands, then the error if one ends the input.
    fn decode_in_steps(wire: &[u8], step: usize) -> (Vec<Vec<Bytes>>, Option<String>) {
        let (mut buf, mut scan) = (BytesMut::new(), FrameScan::default());
        let mut commands = Vec::new();
        for chunk in wire.chunks(step) {
            buf.extend_from_slice(chunk);
            loop {
                match decode_resuming(&mut buf, limits(), &mut scan) {
                    Ok(Decoded::Command(argv)) => commands.push(argv),
                    Ok(Decoded::Incomplete { min_total }) => {
                        assert!(min_total > buf.len(), "asks for bytes it has");
                        break;
                    }
                    Err(e) => return (commands, Some(e.detail())),
                }
            }
        }
        (commands, None)
    }

    proptest::proptest! {
        /// Wherever the fast bulk-header path answers, Redis's parse
        /// answers the same; and it answers for the headers clients send.
        #[test]
        fn the_fast_bulk_header_agrees_with_the_full_parse(
            line in proptest::collection::vec(
                proptest::sample::select(b"$-+0123456789\r\nx".to_vec()), 0..24),
            n in 0u64..1_000_000_000_000,
        ) {
            if let Some(h) = bulk_header_fast(&line, 0) {
                proptest::prop_assert_eq!(bulk_header(&line, 0).ok(), Some(Ok(h)));
            }
            let sent = format!("${n}\r\n");
            let h = bulk_header_fast(sent.as_bytes(), 0);
            proptest::prop_assert_eq!(h, Some((n, sent.len())));
        }
    }

    /// Headers are `kind`, the decimal number, CRLF, on both sides of the
    /// small-number path.
    #[test]
    fn headers_write_the_number_in_decimal() {
        for n in [
            i64::MIN,
            -100,
            -1,
            0,
            1,
            9,
            10,
            42,
            99,
            100,
            101,
            12345,
            i64::MAX,
        ] {
            let mut out = BytesMut::new();
            header(&mut out, b'*', n);
            assert_eq!(&out[..], format!("*{n}\r\n").as_bytes(), "{n}");
        }
    }

    /// A frame arriving over many reads resumes its scan where it stopped,
    /// and decodes to what it decodes to in one piece, at every split.
    #[test]
    fn a_scan_resumes_across_reads() {
        let mut wire = Vec::new();
        let many: Vec<String> = (0..300).map(|i| format!("f{i}")).collect();
        wire.extend(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n");
        wire.extend(format!("*{}\r\n$4\r\nXADD\r\n", many.len() + 1).bytes());
        for f in &many {
            wire.extend(format!("${}\r\n{f}\r\n", f.len()).bytes());
        }
        wire.extend(b"*0\r\nPING\r\n*1\r\n$4\r\nPING\r\n");
        let (whole, err) = decode_in_steps(&wire, wire.len());
        assert_eq!(err, None);
        assert_eq!(whole.len(), 5);
        assert_eq!(whole[1].len(), 301);
        assert_eq!(&whole[1][300][..], b"f299");
        for step in [1, 2, 3, 7, 64, 1000] {
            assert_eq!(
                decode_in_steps(&wire, step),
                (whole.clone(), None),
                "step {step}"
            );
        }
        // A bad header line waits for its `\r` and the byte after it, as in
        // Redis, then fails with the commands before it decoded.
        let mut partial = BytesMut::from(&b"*2\r\n$4\r\nECHO\r\n:1"[..]);
        let mut scan = FrameScan::default();
        assert!(matches!(
            decode_resuming(&mut partial, limits(), &mut scan),
            Ok(Decoded::Incomplete { .. })
        ));
        partial.extend_from_slice(b"\r\n");
        let err = decode_resuming(&mut partial, limits(), &mut scan).err();
        assert_eq!(
            err.map(|e| e.detail()).as_deref(),
            Some("expected '$', got ':'")
        );
        let mut bad = wire[..31].to_vec(); // the SET
        bad.extend(b"*2\r\n$4\r\nECHO\r\n:1\r\n");
        for step in [1, 5, bad.len()] {
            let (cmds, err) = decode_in_steps(&bad, step);
            assert_eq!(cmds.len(), 1, "step {step}");
            assert_eq!(err.as_deref(), Some("expected '$', got ':'"), "step {step}");
        }
    }

    /// Inline splitting skips and ends quotes on C's `isspace` set, vertical
    /// tab included; an unquoted argument ends only at space, tab, CR, LF,
    /// as `sdssplitargs` does (redis-server 7.0: `\x0bPING` is PONG,
    /// `ECHO "hi"\x0b` echoes hi).
    #[test]
    fn inline_vertical_tab_is_space_as_in_c() {
        let words =
            |l: &[u8]| split_args(l).map(|v| v.iter().map(|b| b.to_vec()).collect::<Vec<_>>());
        assert_eq!(words(b"\x0bPING"), Some(vec![b"PING".to_vec()]));
        assert_eq!(
            words(b"ECHO \"hi\"\x0b"),
            Some(vec![b"ECHO".to_vec(), b"hi".to_vec()])
        );
        assert_eq!(
            words(b"ECHO 'hi'\x0c"),
            Some(vec![b"ECHO".to_vec(), b"hi".to_vec()])
        );
        assert_eq!(words(b"a\x0bb"), Some(vec![b"a\x0bb".to_vec()]));
        assert_eq!(words(b"ECHO \"hi\"x"), None);
    }

    /// Fuzz finding (codec): a NUL outside quotes made `split_args` loop
    /// forever, pushing empty arguments (a shard thread hang and unbounded
    /// memory from one telnet line). Now NUL ends the line as in C.
    #[test]
    fn split_args_stops_at_nul() {
        let got = split_args(b"ECHO ab\0cd ef").map(|v| v.len());
        assert_eq!(got, Some(2));
        assert_eq!(split_args(b"ECHO \0").map(|v| v.len()), Some(1));
        assert_eq!(split_args(b"\0\0"), Some(Vec::new()));
        assert_eq!(split_args(b"ECHO \"x\0y\""), None);
        assert_eq!(split_args(b"ECHO 'x\0y'"), None);
    }

    /// Fuzz finding (codec), the exact crashing input: an inline line with a
    /// NUL. As in Redis (`strchr` stops at the NUL) the line does not end at
    /// its newline; the client gets `too big inline request` past 64 KiB.
    #[test]
    fn inline_nul_hides_the_newline_like_redis() {
        let input = b"*1\r\n*2\r\n$C*\r\n1\n\r\n s\n\r\n \0\0\0\0\0\0\0\0\0";
        let _ = split_args(input);
        let mut buf = BytesMut::from(&b"ECHO \0\r\nPING\r\n"[..]);
        assert!(matches!(
            decode(&mut buf, limits()),
            Ok(Decoded::Incomplete { .. })
        ));
        let mut big = BytesMut::from(&b"PING \0"[..]);
        big.extend_from_slice(&vec![b'a'; INLINE_MAX_BYTES]);
        big.extend_from_slice(b"\r\n");
        let err = decode(&mut big, limits()).err().map(|e| e.detail());
        assert_eq!(err.as_deref(), Some("too big inline request"));
        let mut ok = BytesMut::from(&b"PING x\r\n"[..]);
        assert_eq!(
            argv(decode(&mut ok, limits()).unwrap()),
            vec![b"PING".to_vec(), b"x".to_vec()]
        );
    }

    fn argv(d: Decoded) -> Vec<Vec<u8>> {
        match d {
            Decoded::Command(a) => a.into_iter().map(|b| b.to_vec()).collect(),
            other => panic!("expected command, got {other:?}"),
        }
    }

    #[test]
    fn decodes_multibulk_and_pipelines() {
        let mut b = BytesMut::from(&b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*1\r\n$4\r\nPING\r\n"[..]);
        assert_eq!(
            argv(decode(&mut b, limits()).unwrap()),
            vec![b"ECHO".to_vec(), b"hi".to_vec()]
        );
        assert_eq!(
            argv(decode(&mut b, limits()).unwrap()),
            vec![b"PING".to_vec()]
        );
        assert!(b.is_empty());
    }

    /// Redis takes exactly `len` bytes of a bulk and skips the two after it
    /// unchecked (redis-server 7.0: `*1\r\n$4\r\nPINGxx\r\n` → `+PONG`, and
    /// `PINGxxPING\r\n` → two PONGs, the rest being an inline command).
    /// Fuzz-style: frames built from RESP's own bytes (`*`, `$`, bare CR,
    /// bare LF, digits, letters) never panic, and every step makes progress:
    /// a command consumes bytes, and "incomplete" asks for more than is
    /// buffered (so the connection cannot spin on the same bytes).
    #[test]
    fn header_framing_always_progresses() {
        let alphabet = b"*$\r\n\r\n0123-PINGx";
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            let mut input = Vec::new();
            let len = (seed % 24) as usize;
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                input.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            seed = seed.wrapping_add(1);
            let mut b = BytesMut::from(&input[..]);
            while !b.is_empty() {
                let before = b.len();
                match decode(&mut b, limits()) {
                    Ok(Decoded::Command(_)) => assert!(b.len() < before, "{input:?}"),
                    Ok(Decoded::Incomplete { min_total }) => {
                        assert!(min_total > b.len(), "{input:?}");
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
    }

    #[test]
    fn bulk_terminator_is_skipped_unchecked_like_redis() {
        let mut b = BytesMut::from(&b"*1\r\n$4\r\nPINGxx\r\n"[..]);
        assert_eq!(
            argv(decode(&mut b, limits()).unwrap()),
            vec![b"PING".to_vec()]
        );
        assert_eq!(&b[..], b"\r\n");
        assert!(argv(decode(&mut b, limits()).unwrap()).is_empty());
        let mut b = BytesMut::from(&b"*2\r\n$4\r\nECHOxx$1\r\na\r\n"[..]);
        assert_eq!(
            argv(decode(&mut b, limits()).unwrap()),
            vec![b"ECHO".to_vec(), b"a".to_vec()]
        );
        let mut b = BytesMut::from(&b"*1\r\n$4\r\nPINGx"[..]);
        assert!(matches!(
            decode(&mut b, limits()),
            Ok(Decoded::Incomplete { min_total: 14 })
        ));
    }

    /// A 70 KB inline line whose newline is buffered is accepted, as by
    /// redis-server 7.0; without its newline, or 1 MB long, it is refused.
    #[test]
    fn long_inline_line_with_its_newline_is_accepted() {
        let mut line = b"ECHO ".to_vec();
        line.extend_from_slice(&vec![b'a'; 70_000]);
        line.extend_from_slice(b"\r\n");
        let mut b = BytesMut::from(&line[..]);
        let got = argv(decode(&mut b, limits()).unwrap());
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].len(), 70_000);
        let mut b = BytesMut::from(&line[..line.len() - 2]);
        let err = decode(&mut b, limits()).err().map(|e| e.detail());
        assert_eq!(err.as_deref(), Some("too big inline request"));
        let mut huge = vec![b'a'; 1 << 20];
        huge.extend_from_slice(b"\r\n");
        let mut b = BytesMut::from(&huge[..]);
        let err = decode(&mut b, limits()).err().map(|e| e.detail());
        assert_eq!(err.as_deref(), Some("too big inline request"));
    }

    #[test]
    fn partial_frames_report_what_they_need() {
        let mut b = BytesMut::from(&b"*2\r\n$4\r\nECHO\r\n$10\r\nabc"[..]);
        match decode(&mut b, limits()).unwrap() {
            Decoded::Incomplete { min_total } => assert_eq!(min_total, 14 + 5 + 10 + 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn protocol_errors_have_redis_text() {
        let cases: &[(&[u8], &str)] = &[
            (b"*abc\r\n", "ERR Protocol error: invalid multibulk length"),
            (b"*1\r\n:1\r\n", "ERR Protocol error: expected '$', got ':'"),
            // A bare CR ends the count; the byte after it is skipped unseen
            // (redis-server 7.0.15 answers exactly this and closes).
            (
                b"*1\r$4\r\nPING\r\n",
                "ERR Protocol error: expected '$', got '4'",
            ),
            // A bare LF is part of the number text.
            (
                b"*1\n$4\r\nPING\r\n",
                "ERR Protocol error: invalid multibulk length",
            ),
            (
                b"*1\r\n$4\nPING\r\n",
                "ERR Protocol error: invalid bulk length",
            ),
            (b"*1\r\n$-5\r\n", "ERR Protocol error: invalid bulk length"),
            (
                b"*1\r\n$999999999999\r\n",
                "ERR Protocol error: invalid bulk length",
            ),
            (
                b"*3000000000\r\n",
                "ERR Protocol error: invalid multibulk length",
            ),
            (
                b"\"abc\r\n",
                "ERR Protocol error: unbalanced quotes in request",
            ),
        ];
        for (input, text) in cases {
            let mut b = BytesMut::from(*input);
            let err = decode(&mut b, limits()).unwrap_err();
            assert_eq!(
                err.to_string(),
                *text,
                "input {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn inline_commands_split_like_sdssplitargs() {
        let mut b = BytesMut::from(&b"SET k \"a b\\x41\" 'c d'\r\n"[..]);
        assert_eq!(
            argv(decode(&mut b, limits()).unwrap()),
            vec![
                b"SET".to_vec(),
                b"k".to_vec(),
                b"a bA".to_vec(),
                b"c d".to_vec()
            ]
        );
        let mut b = BytesMut::from(&b"\r\n"[..]);
        assert!(argv(decode(&mut b, limits()).unwrap()).is_empty());
    }

    #[test]
    fn encodes_resp2_and_resp3() {
        let r = Reply::Map(vec![(Reply::bulk_copy("a"), Reply::Int(1))]);
        let mut out = BytesMut::new();
        encode(&r, false, &mut out);
        assert_eq!(&out[..], b"*2\r\n$1\r\na\r\n:1\r\n");
        out.clear();
        encode(&r, true, &mut out);
        assert_eq!(&out[..], b"%1\r\n$1\r\na\r\n:1\r\n");
        out.clear();
        encode(&Reply::NullArray, false, &mut out);
        assert_eq!(&out[..], b"*-1\r\n");
    }

    #[test]
    fn deep_replies_pre_encode_on_a_small_stack() {
        // Far deeper than a 256 KiB stack holds frame by frame: encoding
        // moves to stacker's segments, taking the tree apart is a loop.
        let encoded = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let mut tree = Reply::Error(crate::error::CmdError::msg("ERR deep"));
                for _ in 0..20_000 {
                    tree = Reply::Map(vec![(Reply::Int(1), tree)]);
                }
                pre_encode(tree)
            })
            .unwrap()
            .join()
            .unwrap();
        let Reply::PreEncoded(p) = &encoded else {
            panic!("not pre-encoded");
        };
        let resp2 = format!("{}-ERR deep\r\n", "*2\r\n:1\r\n".repeat(20_000));
        let resp3 = format!("{}-ERR deep\r\n", "%1\r\n:1\r\n".repeat(20_000));
        assert_eq!(p.resp2, resp2.as_bytes());
        assert_eq!(p.resp3, resp3.as_bytes());
        assert_eq!(p.errors, vec![crate::error::CmdError::msg("ERR deep")]);
        let mut out = BytesMut::new();
        encode(
            &Reply::Array(vec![encoded.clone(), Reply::Int(2)]),
            true,
            &mut out,
        );
        assert_eq!(&out[..], format!("*2\r\n{resp3}:2\r\n").as_bytes());
    }
}
