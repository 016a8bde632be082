//! Reading XREAD / XREADGROUP replies, from the redis crate's values or in
//! place from a consumer's own socket.
//!
//! The redis crate parses every reply into a tree of owned values with a
//! parser-combinator decoder. In the closed loop (`--rate 0`) that was about
//! a quarter of loadgen's CPU, taken from the same cores as the server it
//! measures. So consumers keep their read path on a [`RawConn`]: commands
//! go out packed by [`crate::pack`] (setup commands by the redis crate),
//! the socket is a plain one, and the
//! replies are decoded by redis-protocol's range decoder: frames are offsets
//! into one read buffer, nothing is copied. Both servers under comparison get
//! the same client.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

use redis::{ConnectionAddr, ConnectionInfo, ProtocolVersion, RedisError, RedisResult, Value};
use redis_protocol::resp2::types::RangeFrame as Frame2;
use redis_protocol::resp3::types::RangeFrame as Frame3;

/// A reply read as a tree: arrays (and RESP3 maps, sets and pushes) of
/// strings and numbers.
pub trait Tree<'a>: Copy {
    /// A bulk or simple string's bytes.
    fn bytes(self) -> Option<&'a [u8]>;
    /// Visit the elements of an array, set or push, or a map's keys and
    /// values in turn (k1, v1, k2, v2...); false when `self` is none of them.
    fn children(self, f: &mut dyn FnMut(Self)) -> bool;
    /// Whether `self` is a map (RESP3).
    fn is_map(self) -> bool;
}

impl<'a> Tree<'a> for &'a Value {
    fn bytes(self) -> Option<&'a [u8]> {
        match self {
            Value::BulkString(b) => Some(b),
            Value::SimpleString(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    fn children(self, f: &mut dyn FnMut(Self)) -> bool {
        match self {
            Value::Array(v) | Value::Set(v) => v.iter().for_each(f),
            Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
                f(k);
                f(v)
            }),
            _ => return false,
        }
        true
    }

    fn is_map(self) -> bool {
        matches!(self, Value::Map(_))
    }
}

/// One frame of a [`RawConn`] reply, with the buffer its ranges point into.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    buf: &'a [u8],
    frame: FrameRef<'a>,
}

#[derive(Clone, Copy)]
enum FrameRef<'a> {
    V2(&'a Frame2),
    V3(&'a Frame3),
}

impl<'a> Node<'a> {
    fn at(self, frame: FrameRef<'a>) -> Node<'a> {
        Node {
            buf: self.buf,
            frame,
        }
    }

    fn range(self, (start, end): (usize, usize)) -> Option<&'a [u8]> {
        self.buf.get(start..end)
    }

    /// An error reply's text.
    pub fn error(self) -> Option<&'a [u8]> {
        match self.frame {
            FrameRef::V2(Frame2::Error(r)) => self.range(*r),
            FrameRef::V3(Frame3::SimpleError { data, .. } | Frame3::BlobError { data, .. }) => {
                self.range(*data)
            }
            _ => None,
        }
    }

    /// Whether this is an array reply (EXEC's, say).
    pub fn is_array(self) -> bool {
        matches!(
            self.frame,
            FrameRef::V2(Frame2::Array(_)) | FrameRef::V3(Frame3::Array { .. })
        )
    }

    /// An integer reply.
    pub fn int(self) -> Option<i64> {
        match self.frame {
            FrameRef::V2(Frame2::Integer(i)) | FrameRef::V3(Frame3::Number { data: i, .. }) => {
                Some(*i)
            }
            _ => None,
        }
    }

    /// The error as the redis crate would report it (so MOVED, ASK and
    /// UNBLOCKED are handled as on its connections), or `None`.
    pub fn to_error(self) -> Option<RedisError> {
        let text = self.error()?;
        let mut line = Vec::with_capacity(text.len() + 3);
        line.push(b'-');
        line.extend(
            text.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        line.extend_from_slice(b"\r\n");
        Some(match redis::parse_redis_value(&line) {
            Ok(Value::ServerError(e)) => e.into(),
            Ok(_) => RedisError::from((redis::ErrorKind::Client, "unexpected error reply")),
            Err(e) => e,
        })
    }
}

impl<'a> Tree<'a> for Node<'a> {
    fn bytes(self) -> Option<&'a [u8]> {
        match self.frame {
            FrameRef::V2(Frame2::BulkString(r) | Frame2::SimpleString(r)) => self.range(*r),
            FrameRef::V3(
                Frame3::BlobString { data, .. }
                | Frame3::SimpleString { data, .. }
                | Frame3::VerbatimString { data, .. },
            ) => self.range(*data),
            _ => None,
        }
    }

    fn children(self, f: &mut dyn FnMut(Self)) -> bool {
        match self.frame {
            FrameRef::V2(Frame2::Array(v)) => v.iter().for_each(|c| f(self.at(FrameRef::V2(c)))),
            FrameRef::V3(Frame3::Array { data, .. } | Frame3::Push { data, .. }) => {
                data.iter().for_each(|c| f(self.at(FrameRef::V3(c))))
            }
            FrameRef::V3(Frame3::Set { data, .. }) => {
                data.iter().for_each(|c| f(self.at(FrameRef::V3(c))))
            }
            FrameRef::V3(Frame3::Map { data, .. }) => data.iter().for_each(|(k, v)| {
                f(self.at(FrameRef::V3(k)));
                f(self.at(FrameRef::V3(v)))
            }),
            _ => return false,
        }
        true
    }

    fn is_map(self) -> bool {
        matches!(self.frame, FrameRef::V3(Frame3::Map { .. }))
    }
}

/// Call `f(key, id, fields)` for every entry of an XREAD/XREADGROUP reply, in
/// RESP2 (`[[key, [[id, [f, v, ...]], ...]], ...]`) or RESP3 (map of key →
/// entries) shape; `fields` is the entry's field/value array (or map). A null
/// reply (BLOCK timed out) has no entries.
pub fn for_each_entry<'a, T: Tree<'a>>(reply: T, mut f: impl FnMut(&'a [u8], &'a [u8], T)) {
    let mut per_key = |key: T, entries: T| {
        let Some(key) = key.bytes() else { return };
        entries.children(&mut |e| {
            let (mut id, mut fields, mut i) = (None, None, 0);
            e.children(&mut |part| {
                match i {
                    0 => id = part.bytes(),
                    1 => fields = Some(part),
                    _ => {}
                }
                i += 1;
            });
            if let (Some(id), Some(fields)) = (id, fields) {
                f(key, id, fields)
            }
        });
    };
    if reply.is_map() {
        let mut key = None;
        reply.children(&mut |c| match key.take() {
            None => key = Some(c),
            Some(k) => per_key(k, c),
        });
    } else {
        reply.children(&mut |s| {
            let (mut key, mut i) = (None, 0);
            s.children(&mut |c| {
                match i {
                    0 => key = Some(c),
                    1 => {
                        if let Some(k) = key {
                            per_key(k, c)
                        }
                    }
                    _ => {}
                }
                i += 1;
            });
        });
    }
}

/// Call `f(field, value)` for each pair of an entry's field/value array (or
/// map); a non-string element ends the walk.
pub fn for_each_field<'a, T: Tree<'a>>(fields: T, mut f: impl FnMut(&'a [u8], &'a [u8])) {
    let mut field: Option<Option<&'a [u8]>> = None;
    fields.children(&mut |c| match field.take() {
        None => field = Some(c.bytes()),
        Some(k) => {
            if let (Some(k), Some(v)) = (k, c.bytes()) {
                f(k, v)
            }
        }
    });
}

/// A client's connection to one node: commands go out already packed (see
/// [`crate::pack`]), replies are decoded in place (see the module
/// documentation).
pub struct RawConn {
    sock: Sock,
    /// Read buffer; `buf[..end]` holds the bytes of the current replies.
    buf: Vec<u8>,
    end: usize,
    /// The current replies, each with the offset its ranges are relative to.
    frames: Vec<(usize, Decoded)>,
    resp3: bool,
}

/// The replies to one [`RawConn::query`], in order.
pub struct Replies<'a> {
    buf: &'a [u8],
    frames: &'a [(usize, Decoded)],
}

enum Decoded {
    V2(Frame2),
    V3(Frame3),
}

/// A TCP or Unix-domain socket.
enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Sock::Tcp(s) => s.write_all(bytes),
            Sock::Unix(s) => s.write_all(bytes),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Unix(s) => s.read(buf),
        }
    }
}

impl<'a> Replies<'a> {
    /// Reply `i`.
    pub fn get(&self, i: usize) -> Option<Node<'a>> {
        let (base, frame) = self.frames.get(i)?;
        let frame = match frame {
            Decoded::V2(f) => FrameRef::V2(f),
            Decoded::V3(f) => FrameRef::V3(f),
        };
        Some(Node {
            buf: self.buf.get(*base..)?,
            frame,
        })
    }

    /// How many replies.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

/// Decode the first reply of `data`, if it is all there.
fn decode_one(resp3: bool, data: &[u8]) -> RedisResult<Option<(Decoded, usize)>> {
    let decoded = if resp3 {
        redis_protocol::resp3::decode::complete::decode_range(data)
            .map(|r| r.map(|(f, used)| (Decoded::V3(f), used)))
    } else {
        redis_protocol::resp2::decode::decode_range(data)
            .map(|r| r.map(|(f, used)| (Decoded::V2(f), used)))
    };
    decoded.map_err(|e| RedisError::from((redis::ErrorKind::Parse, "bad reply", e.to_string())))
}

impl RawConn {
    /// Connect to `info`'s address (TCP or Unix socket) and authenticate,
    /// select the database and switch protocol as the redis crate would
    /// (`HELLO 3` for RESP3, else `AUTH`; then `SELECT` when the database is
    /// not 0).
    pub fn open(info: &ConnectionInfo) -> RedisResult<RawConn> {
        let sock = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let s = TcpStream::connect((host.as_str(), *port))?;
                s.set_nodelay(true)?;
                Sock::Tcp(s)
            }
            ConnectionAddr::Unix(path) => Sock::Unix(UnixStream::connect(path)?),
            _ => {
                return Err(RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "loadgen connects over TCP or a Unix socket only (no TLS)",
                )))
            }
        };
        let settings = info.redis_settings();
        let resp3 = settings.protocol() == ProtocolVersion::RESP3;
        let mut conn = RawConn {
            sock,
            buf: vec![0; 64 * 1024],
            end: 0,
            frames: Vec::new(),
            resp3,
        };
        let mut setup = Vec::new();
        let password = settings.password();
        if resp3 {
            let mut hello = redis::cmd("HELLO");
            hello.arg(3);
            if let Some(p) = password {
                hello
                    .arg("AUTH")
                    .arg(settings.username().unwrap_or("default"))
                    .arg(p);
            }
            setup.push(hello);
        } else if let Some(p) = password {
            let mut auth = redis::cmd("AUTH");
            auth.arg(settings.username()).arg(p);
            setup.push(auth);
        }
        if settings.db() != 0 {
            let mut select = redis::cmd("SELECT");
            select.arg(settings.db());
            setup.push(select);
        }
        for cmd in setup {
            let replies = conn.query(&cmd.get_packed_command(), 1)?;
            if let Some(e) = replies.get(0).and_then(Node::to_error) {
                return Err(e);
            }
        }
        Ok(conn)
    }

    /// Send `packed` (one or more commands) and read `n` replies.
    pub fn query(&mut self, packed: &[u8], n: usize) -> RedisResult<Replies<'_>> {
        self.send(packed)?;
        self.recv(n)
    }

    /// Send `packed` (one or more commands) without reading.
    pub fn send(&mut self, packed: &[u8]) -> RedisResult<()> {
        Ok(self.sock.write_all(packed)?)
    }

    /// Read the next `n` replies. The replies of the last call are gone by
    /// then; nothing else may be in flight (the connection is used one round
    /// trip at a time).
    pub fn recv(&mut self, n: usize) -> RedisResult<Replies<'_>> {
        self.end = 0;
        self.frames.clear();
        let mut pos = 0;
        while self.frames.len() < n {
            match decode_one(self.resp3, &self.buf[pos..self.end])? {
                Some((frame, used)) => {
                    self.frames.push((pos, frame));
                    pos += used;
                }
                None => self.fill()?,
            }
        }
        Ok(Replies {
            buf: &self.buf[..self.end],
            frames: &self.frames,
        })
    }

    /// Read more bytes after `end`, growing the buffer when it is full.
    fn fill(&mut self) -> RedisResult<()> {
        if self.buf.len() - self.end < 16 * 1024 {
            let grown = self.buf.len() * 2;
            self.buf.resize(grown, 0);
        }
        match self.sock.read(&mut self.buf[self.end..])? {
            0 => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()),
            got => {
                self.end += got;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::{parse_fields, Received};

    /// A reply tree for the tests, written out in RESP2 or RESP3.
    enum T {
        S(&'static str),
        A(Vec<T>),
        M(Vec<(T, T)>),
        Int(i64),
        Err(&'static str),
        Nil,
    }

    fn wire(t: &T, out: &mut Vec<u8>, resp3: bool) {
        match t {
            T::S(s) => out.extend(format!("${}\r\n{s}\r\n", s.len()).bytes()),
            T::A(v) => {
                out.extend(format!("*{}\r\n", v.len()).bytes());
                v.iter().for_each(|c| wire(c, out, resp3));
            }
            T::M(pairs) if resp3 => {
                out.extend(format!("%{}\r\n", pairs.len()).bytes());
                for (k, v) in pairs {
                    wire(k, out, resp3);
                    wire(v, out, resp3);
                }
            }
            T::M(pairs) => {
                // RESP2 has no maps: Redis sends [[key, value], ...] for XREAD.
                out.extend(format!("*{}\r\n", pairs.len()).bytes());
                for (k, v) in pairs {
                    out.extend(b"*2\r\n");
                    wire(k, out, resp3);
                    wire(v, out, resp3);
                }
            }
            T::Int(i) => out.extend(format!(":{i}\r\n").bytes()),
            T::Err(e) => out.extend(format!("-{e}\r\n").bytes()),
            T::Nil if resp3 => out.extend(b"_\r\n"),
            T::Nil => out.extend(b"*-1\r\n"),
        }
    }

    fn value(t: &T, resp3: bool) -> Value {
        match t {
            T::S(s) => Value::BulkString(s.as_bytes().to_vec()),
            T::A(v) => Value::Array(v.iter().map(|c| value(c, resp3)).collect()),
            T::M(p) if resp3 => Value::Map(
                p.iter()
                    .map(|(k, v)| (value(k, resp3), value(v, resp3)))
                    .collect(),
            ),
            T::M(p) => Value::Array(
                p.iter()
                    .map(|(k, v)| Value::Array(vec![value(k, resp3), value(v, resp3)]))
                    .collect(),
            ),
            T::Int(i) => Value::Int(*i),
            T::Err(_) | T::Nil => Value::Nil,
        }
    }

    fn entry(id: &'static str, t: &'static str, p: &'static str, n: &'static str) -> T {
        T::A(vec![
            T::S(id),
            T::A(
                ["t", t, "p", p, "n", n, "f0", "xx"]
                    .into_iter()
                    .map(T::S)
                    .collect(),
            ),
        ])
    }

    fn read_reply() -> T {
        T::M(vec![
            (
                T::S("s0"),
                T::A(vec![
                    entry("1-0", "100", "0", "7"),
                    entry("1-1", "200", "1", "8"),
                ]),
            ),
            (T::S("s1"), T::A(vec![entry("2-0", "300", "0", "9")])),
        ])
    }

    type Seen = Vec<(String, String, Option<Received>)>;

    fn walk<'a, X: Tree<'a>>(reply: X) -> Seen {
        let mut seen = Vec::new();
        for_each_entry(reply, |k, id, f| {
            seen.push((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(id).into_owned(),
                parse_fields(f),
            ))
        });
        seen
    }

    /// Decode every reply of `bytes` as a [`RawConn`] does.
    fn decode_all(resp3: bool, bytes: &[u8]) -> Vec<(usize, Decoded)> {
        let mut frames = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let (f, used) = decode_one(resp3, &bytes[pos..]).unwrap().unwrap();
            frames.push((pos, f));
            pos += used;
        }
        frames
    }

    /// The replies [`decode_all`] found in `bytes`.
    fn replies_of<'a>(bytes: &'a [u8], frames: &'a [(usize, Decoded)]) -> Replies<'a> {
        Replies { buf: bytes, frames }
    }

    #[test]
    fn entries_walk_alike_from_values_and_in_place_frames() {
        let want = |k: &str, id: &str, t, p, n| {
            (
                k.to_string(),
                id.to_string(),
                Some(Received {
                    due_ns: t,
                    producer: p,
                    seq: n,
                }),
            )
        };
        let expected = vec![
            want("s0", "1-0", 100, 0, 7),
            want("s0", "1-1", 200, 1, 8),
            want("s1", "2-0", 300, 0, 9),
        ];
        for resp3 in [false, true] {
            let tree = read_reply();
            assert_eq!(walk(&value(&tree, resp3)), expected, "resp3 {resp3}");
            let mut bytes = Vec::new();
            wire(&tree, &mut bytes, resp3);
            let frames = decode_all(resp3, &bytes);
            let replies = replies_of(&bytes, &frames);
            assert_eq!(replies.len(), 1);
            let mut seen = walk(replies.get(0).unwrap());
            // A RESP3 map may come back in any key order.
            seen.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
            assert_eq!(seen, expected, "resp3 {resp3}");
            // A timed-out read has no entries.
            let mut nil = Vec::new();
            wire(&T::Nil, &mut nil, resp3);
            let frames = decode_all(resp3, &nil);
            let replies = replies_of(&nil, &frames);
            assert!(walk(replies.get(0).unwrap()).is_empty());
        }
        assert!(walk(&Value::Nil).is_empty());
    }

    #[test]
    fn pipelined_replies_keep_their_own_offsets() {
        for resp3 in [false, true] {
            let mut bytes = Vec::new();
            for t in [T::Int(3), T::Err("MOVED 866 127.0.0.1:7001"), read_reply()] {
                wire(&t, &mut bytes, resp3);
            }
            let frames = decode_all(resp3, &bytes);
            let replies = replies_of(&bytes, &frames);
            assert_eq!(replies.len(), 3);
            assert_eq!(replies.get(0).and_then(Node::int), Some(3));
            let moved = replies.get(1).and_then(Node::to_error).unwrap();
            assert_eq!(moved.redirect_node(), Some(("127.0.0.1:7001", 866)));
            assert!(replies.get(0).and_then(Node::to_error).is_none());
            assert_eq!(walk(replies.get(2).unwrap()).len(), 3);
        }
    }

    #[test]
    fn fields_need_all_three_numbers() {
        let fields = |kv: &[&'static str]| T::A(kv.iter().map(|s| T::S(s)).collect());
        let v = value(&fields(&["t", "1"]), false);
        assert_eq!(parse_fields(&v), None);
        let v = value(&fields(&["t", "1", "p", "2", "n", "x"]), false);
        assert_eq!(parse_fields(&v), None);
        let v = value(&fields(&["f", "v", "n", "3", "p", "2", "t", "1"]), false);
        assert_eq!(
            parse_fields(&v),
            Some(Received {
                due_ns: 1,
                producer: 2,
                seq: 3
            })
        );
    }
}
