//! RDB primitives: length encoding, string encoding (plain, integer, LZF),
//! millisecond times and raw stream IDs, as Redis writes them inside an RDB
//! file and a DUMP payload.
//!
//! # Source
//! redis/src/rdb.c (`rdbSaveLen`/`rdbLoadLenByRef`, `rdbSaveRawString`,
//! `rdbTryIntegerEncoding`, `rdbLoadLzfStringObject`,
//! `rdbSaveMillisecondTime`), redis/src/rdb.h (the `RDB_6BITLEN` ...
//! `RDB_ENC_LZF` tags), 7.x and 8.x (unchanged since 4.0).

use super::RdbError;
use crate::stream::StreamId;

/// Length tag: 6-bit length in the low bits of the byte (`00xxxxxx`).
const LEN_6BIT: u8 = 0;
/// Length tag: 14-bit length, big endian (`01xxxxxx xxxxxxxx`).
const LEN_14BIT: u8 = 1;
/// Length byte: a 32-bit big-endian length follows.
const LEN_32BIT: u8 = 0x80;
/// Length byte: a 64-bit big-endian length follows.
const LEN_64BIT: u8 = 0x81;
/// Length tag: a special string encoding (`11xxxxxx`), kind in the low bits.
const LEN_ENCVAL: u8 = 3;
/// Special encodings: integers stored in 1, 2 or 4 little-endian bytes, LZF.
const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

/// Appends RDB-encoded values to a byte buffer.
#[derive(Default)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// One raw byte (an object type tag).
    pub fn byte(&mut self, b: u8) {
        self.buf.push(b);
    }

    /// Raw bytes, no length prefix (`rdbWriteRaw`).
    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// A length (`rdbSaveLen`): 1, 2, 5 or 9 bytes.
    pub fn len(&mut self, n: u64) {
        if n < 1 << 6 {
            self.buf.push((LEN_6BIT << 6) | n as u8);
        } else if n < 1 << 14 {
            self.buf.push((LEN_14BIT << 6) | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else if n <= u64::from(u32::MAX) {
            self.buf.push(LEN_32BIT);
            self.buf.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            self.buf.push(LEN_64BIT);
            self.buf.extend_from_slice(&n.to_be_bytes());
        }
    }

    /// A string (`rdbSaveRawString`): strings of at most 11 bytes that are
    /// the canonical text of an integer fitting 32 bits are stored as that
    /// integer, as Redis does; anything else as length + bytes.
    /// (Redis also LZF-compresses strings over 20 bytes when that saves
    /// space; payloads are valid either way and readers accept both.)
    pub fn string(&mut self, s: &[u8]) {
        if s.len() <= 11 {
            if let Some(v) = canonical_int(s) {
                if let Ok(v) = i8::try_from(v) {
                    self.buf.push((LEN_ENCVAL << 6) | ENC_INT8);
                    self.buf.extend_from_slice(&v.to_le_bytes());
                    return;
                } else if let Ok(v) = i16::try_from(v) {
                    self.buf.push((LEN_ENCVAL << 6) | ENC_INT16);
                    self.buf.extend_from_slice(&v.to_le_bytes());
                    return;
                } else if let Ok(v) = i32::try_from(v) {
                    self.buf.push((LEN_ENCVAL << 6) | ENC_INT32);
                    self.buf.extend_from_slice(&v.to_le_bytes());
                    return;
                }
            }
        }
        self.len(s.len() as u64);
        self.buf.extend_from_slice(s);
    }

    /// A millisecond time or `-1` (`rdbSaveMillisecondTime`): 8 bytes,
    /// little endian, two's complement.
    pub fn ms_time(&mut self, t: i64) {
        self.buf.extend_from_slice(&t.to_le_bytes());
    }

    /// A stream ID as Redis keys its radix trees: 16 raw bytes, `ms` then
    /// `seq`, each big endian (`streamEncodeID`).
    pub fn raw_id(&mut self, id: StreamId) {
        self.buf.extend_from_slice(&encode_id(id));
    }
}

/// The 16-byte big-endian form of `id` (`streamEncodeID`).
pub fn encode_id(id: StreamId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.ms.to_be_bytes());
    b[8..].copy_from_slice(&id.seq.to_be_bytes());
    b
}

/// The ID of a 16-byte big-endian key (`streamDecodeID`).
pub fn decode_id(b: &[u8]) -> Result<StreamId, RdbError> {
    if b.len() != 16 {
        return Err(RdbError::BadFormat);
    }
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&b[..8]);
    seq.copy_from_slice(&b[8..]);
    Ok(StreamId::new(
        u64::from_be_bytes(ms),
        u64::from_be_bytes(seq),
    ))
}

/// `s` as an `i64` when `s` is exactly the decimal text Redis would print
/// for it (no sign but `-`, no leading zeros, no spaces): the strings Redis
/// stores as integers (`string2ll` round trip).
pub fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let text = std::str::from_utf8(s).ok()?;
    let v: i64 = text.parse().ok()?;
    (itoa::Buffer::new().format(v).as_bytes() == s).then_some(v)
}

/// Reads RDB-encoded values from a byte slice; every read checks bounds.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// Largest string a payload may declare (Redis's `proto-max-bulk-len`
/// ceiling), bytes: a corrupt length never makes us allocate more.
const MAX_STRING_BYTES: u64 = 512 * 1024 * 1024;

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Whether every byte was consumed.
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// `n` raw bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let end = self.pos.checked_add(n).ok_or(RdbError::BadFormat)?;
        let s = self.buf.get(self.pos..end).ok_or(RdbError::BadFormat)?;
        self.pos = end;
        Ok(s)
    }

    /// One raw byte.
    pub fn byte(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    /// A length, or the special-encoding tag: `(value, is_encoded)`.
    fn len_or_enc(&mut self) -> Result<(u64, bool), RdbError> {
        let b = self.byte()?;
        match b >> 6 {
            LEN_6BIT => Ok((u64::from(b & 0x3F), false)),
            LEN_14BIT => Ok(((u64::from(b & 0x3F) << 8) | u64::from(self.byte()?), false)),
            LEN_ENCVAL => Ok((u64::from(b & 0x3F), true)),
            _ => match b {
                LEN_32BIT => {
                    let mut a = [0u8; 4];
                    a.copy_from_slice(self.take(4)?);
                    Ok((u64::from(u32::from_be_bytes(a)), false))
                }
                LEN_64BIT => {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(self.take(8)?);
                    Ok((u64::from_be_bytes(a), false))
                }
                _ => Err(RdbError::BadFormat),
            },
        }
    }

    /// A length (`rdbLoadLen`).
    pub fn length(&mut self) -> Result<u64, RdbError> {
        match self.len_or_enc()? {
            (n, false) => Ok(n),
            (_, true) => Err(RdbError::BadFormat),
        }
    }

    /// A length used as a count of items that follow, each at least one
    /// byte: larger than the bytes left means a corrupt payload.
    pub fn count(&mut self) -> Result<usize, RdbError> {
        let n = self.length()?;
        if n > self.remaining() as u64 {
            return Err(RdbError::BadFormat);
        }
        Ok(n as usize)
    }

    /// A string in any of its encodings (`rdbGenericLoadStringObject`):
    /// plain, an integer (returned as its decimal text), or LZF-compressed.
    pub fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        let (n, enc) = self.len_or_enc()?;
        if !enc {
            if n > MAX_STRING_BYTES {
                return Err(RdbError::BadFormat);
            }
            return Ok(self.take(n as usize)?.to_vec());
        }
        let v: i64 = match n as u8 {
            ENC_INT8 => i64::from(self.byte()? as i8),
            ENC_INT16 => {
                let mut a = [0u8; 2];
                a.copy_from_slice(self.take(2)?);
                i64::from(i16::from_le_bytes(a))
            }
            ENC_INT32 => {
                let mut a = [0u8; 4];
                a.copy_from_slice(self.take(4)?);
                i64::from(i32::from_le_bytes(a))
            }
            ENC_LZF => {
                let clen = self.length()?;
                let len = self.length()?;
                if len > MAX_STRING_BYTES || clen > self.remaining() as u64 {
                    return Err(RdbError::BadFormat);
                }
                let data = self.take(clen as usize)?;
                if len == 0 {
                    return Err(RdbError::BadFormat);
                }
                let out = lzf::decompress(data, len as usize).map_err(|_| RdbError::BadFormat)?;
                if out.len() != len as usize {
                    return Err(RdbError::BadFormat);
                }
                return Ok(out);
            }
            _ => return Err(RdbError::BadFormat),
        };
        Ok(itoa::Buffer::new().format(v).as_bytes().to_vec())
    }

    /// A millisecond time (`rdbLoadMillisecondTime`).
    pub fn ms_time(&mut self) -> Result<i64, RdbError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(a))
    }

    /// A raw 16-byte stream ID.
    pub fn raw_id(&mut self) -> Result<StreamId, RdbError> {
        decode_id(self.take(16)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip_at_every_width() {
        for n in [
            0u64,
            63,
            64,
            16383,
            16384,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
            u64::MAX,
        ] {
            let mut w = Writer::new();
            w.len(n);
            let want = match n {
                0..=63 => 1,
                64..=16383 => 2,
                16384..=0xFFFF_FFFF => 5,
                _ => 9,
            };
            assert_eq!(w.buf.len(), want, "{n}");
            let mut r = Reader::new(&w.buf);
            assert_eq!(r.length().unwrap(), n);
            assert!(r.at_end());
        }
    }

    #[test]
    fn strings_use_integer_encodings_as_redis() {
        // Bytes redis-server 7.0 writes for DUMP of these values (type byte
        // and footer stripped).
        for (s, enc) in [
            (&b"12"[..], &b"\xc0\x0c"[..]),
            (b"-1", b"\xc0\xff"),
            (b"1000", b"\xc1\xe8\x03"),
            (b"100000", b"\xc2\xa0\x86\x01\x00"),
            (b"012", b"\x03012"),
            (b"+1", b"\x02+1"),
            (b"4294967296", b"\x0a4294967296"),
            (b"", b"\x00"),
        ] {
            let mut w = Writer::new();
            w.string(s);
            assert_eq!(w.buf, enc, "{:?}", String::from_utf8_lossy(s));
            let mut r = Reader::new(&w.buf);
            assert_eq!(r.string().unwrap(), s);
        }
    }

    #[test]
    fn lzf_strings_decode_and_bad_ones_fail() {
        let text = b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let c = lzf::compress(text).unwrap();
        let mut w = Writer::new();
        w.byte(0xC3);
        w.len(c.len() as u64);
        w.len(text.len() as u64);
        w.raw(&c);
        assert_eq!(Reader::new(&w.buf).string().unwrap(), text);
        // Declared length wrong: refused, no panic.
        let mut bad = Writer::new();
        bad.byte(0xC3);
        bad.len(c.len() as u64);
        bad.len(text.len() as u64 + 5);
        bad.raw(&c);
        assert!(Reader::new(&bad.buf).string().is_err());
        // Truncated.
        assert!(Reader::new(&w.buf[..w.buf.len() - 1]).string().is_err());
        assert!(Reader::new(b"\x81\xff\xff\xff\xff\xff\xff\xff\xff")
            .string()
            .is_err());
    }

    #[test]
    fn ids_are_big_endian() {
        let id = StreamId::new(0x0102, 3);
        let b = encode_id(id);
        assert_eq!(&b[..], b"\0\0\0\0\0\0\x01\x02\0\0\0\0\0\0\0\x03");
        assert_eq!(decode_id(&b).unwrap(), id);
    }
}
