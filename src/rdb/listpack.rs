//! Listpacks: the flat list encoding Redis stores stream nodes in (and, in
//! RDB, small hashes, sets, sorted sets and list nodes).
//!
//! Layout: `<total-bytes u32 LE> <count u16 LE> <element>... <0xFF>`; an
//! element is `<encoding+data> <backlen>`, where `backlen` is the size of
//! `encoding+data` in 1 to 5 bytes. Integers use the smallest of the 7-bit,
//! 13-bit, 16/24/32/64-bit encodings; strings a 6-bit, 12-bit or 32-bit
//! length. Strings that are the canonical text of an `i64` are stored as
//! integers, as `lpAppend` does. The count is 65535 when it does not fit.
//!
//! # Source
//! redis/src/listpack.c (`lpEncodeGetType`, `lpEncodeBacklen`,
//! `lpCurrentEncodedSizeUnsafe`, `lpGet`), Redis 5.0 to 8.x.

use super::wire::canonical_int;
use super::RdbError;

/// One listpack element: an integer or a string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Elem {
    Int(i64),
    Str(Vec<u8>),
}

impl Elem {
    /// The element as bytes (integers as their decimal text).
    pub fn into_bytes(self) -> Vec<u8> {
        match self {
            Elem::Int(v) => itoa::Buffer::new().format(v).as_bytes().to_vec(),
            Elem::Str(s) => s,
        }
    }

    /// The element as an integer (strings holding a canonical integer too,
    /// as `lpGetInteger` accepts them).
    pub fn as_int(&self) -> Result<i64, RdbError> {
        match self {
            Elem::Int(v) => Ok(*v),
            Elem::Str(s) => canonical_int(s).ok_or(RdbError::BadFormat),
        }
    }
}

/// Header: total bytes (4) + element count (2).
const HEADER_BYTES: usize = 6;
/// The terminator byte.
const EOF: u8 = 0xFF;

/// Builds a listpack.
pub struct Builder {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// An empty listpack.
    pub fn new() -> Builder {
        Builder {
            buf: vec![0; HEADER_BYTES],
            count: 0,
        }
    }

    /// Bytes the finished listpack would take.
    pub fn len_bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Append an integer in its smallest encoding.
    pub fn int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = if v < 0 { (1 << 13) + v } else { v } as u16;
            self.buf.push(0xC0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if let Ok(v) = i16::try_from(v) {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&v.to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(v) = i32::try_from(v) {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&v.to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_elem(start);
    }

    /// Append a string (as an integer when it is one, as Redis does).
    pub fn string(&mut self, s: &[u8]) {
        if let Some(v) = canonical_int(s) {
            return self.int(v);
        }
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xE0 | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.finish_elem(start);
    }

    /// Write the back-length of the element that starts at `start`.
    fn finish_elem(&mut self, start: usize) {
        let l = (self.buf.len() - start) as u64;
        let mut chunks = Vec::with_capacity(5);
        let n = match l {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        for i in (0..n).rev() {
            let part = ((l >> (7 * i)) & 127) as u8;
            // Every byte but the first (most significant) has the high bit set.
            chunks.push(if i == n - 1 { part } else { part | 128 });
        }
        self.buf.extend_from_slice(&chunks);
        self.count += 1;
    }

    /// The finished listpack bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(u16::MAX);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Size in bytes of the back-length of an element of `l` bytes.
fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Decode every element of listpack `lp`, checking the header's total size,
/// every element's bounds and the terminator.
///
/// # Errors
/// [`RdbError::BadFormat`] for anything malformed.
pub fn decode(lp: &[u8]) -> Result<Vec<Elem>, RdbError> {
    let bad = || RdbError::BadFormat;
    if lp.len() < HEADER_BYTES + 1 {
        return Err(bad());
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() || lp[lp.len() - 1] != EOF {
        return Err(bad());
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    let mut out = Vec::new();
    let mut p = HEADER_BYTES;
    let end = lp.len() - 1;
    while p < end {
        let b = lp[p];
        let get = |from: usize, n: usize| lp.get(from..from + n).ok_or_else(bad);
        let (elem, size) = if b & 0x80 == 0 {
            (Elem::Int(i64::from(b)), 1)
        } else if b & 0xC0 == 0x80 {
            let n = usize::from(b & 0x3F);
            (Elem::Str(get(p + 1, n)?.to_vec()), 1 + n)
        } else if b & 0xE0 == 0xC0 {
            let lo = *get(p + 1, 1)?.first().ok_or_else(bad)?;
            let u = (i64::from(b & 0x1F) << 8) | i64::from(lo);
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            (Elem::Int(v), 2)
        } else if b & 0xF0 == 0xE0 {
            let lo = *get(p + 1, 1)?.first().ok_or_else(bad)?;
            let n = (usize::from(b & 0x0F) << 8) | usize::from(lo);
            (Elem::Str(get(p + 2, n)?.to_vec()), 2 + n)
        } else {
            match b {
                0xF0 => {
                    let l = get(p + 1, 4)?;
                    let n = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
                    (Elem::Str(get(p + 5, n)?.to_vec()), 5 + n)
                }
                0xF1 => {
                    let l = get(p + 1, 2)?;
                    (Elem::Int(i64::from(i16::from_le_bytes([l[0], l[1]]))), 3)
                }
                0xF2 => {
                    let l = get(p + 1, 3)?;
                    // Sign-extend 24 bits.
                    let v = i32::from_le_bytes([0, l[0], l[1], l[2]]) >> 8;
                    (Elem::Int(i64::from(v)), 4)
                }
                0xF3 => {
                    let l = get(p + 1, 4)?;
                    (
                        Elem::Int(i64::from(i32::from_le_bytes([l[0], l[1], l[2], l[3]]))),
                        5,
                    )
                }
                0xF4 => {
                    let l = get(p + 1, 8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(l);
                    (Elem::Int(i64::from_le_bytes(a)), 9)
                }
                _ => return Err(bad()),
            }
        };
        p = p
            .checked_add(size + backlen_size(size))
            .filter(|&q| q <= end)
            .ok_or_else(bad)?;
        out.push(elem);
    }
    if declared != u16::MAX && usize::from(declared) != out.len() {
        return Err(bad());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_round_trips() {
        let ints = [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            8388607,
            -8388608,
            8388608,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ];
        let strs: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"abc".to_vec(),
            vec![b'x'; 63],
            vec![b'x'; 64],
            vec![b'y'; 4095],
            vec![b'z'; 4096],
            vec![b'w'; 20000],
            b"007".to_vec(),
        ];
        let mut b = Builder::new();
        for v in ints {
            b.int(v);
        }
        for s in &strs {
            b.string(s);
        }
        let lp = b.finish();
        let got = decode(&lp).unwrap();
        let mut want: Vec<Elem> = ints.iter().map(|v| Elem::Int(*v)).collect();
        want.extend(strs.iter().map(|s| Elem::Str(s.clone())));
        assert_eq!(got, want);
    }

    #[test]
    fn known_bytes() {
        // lpNew + lpAppend("1") + lpAppend("a"), as Redis lays it out.
        let mut b = Builder::new();
        b.string(b"1");
        b.string(b"a");
        assert_eq!(b.finish(), b"\x0c\x00\x00\x00\x02\x00\x01\x01\x81a\x02\xff");
    }

    #[test]
    fn malformed_listpacks_are_refused() {
        let mut b = Builder::new();
        b.string(b"hello");
        let lp = b.finish();
        for cut in 0..lp.len() {
            assert!(decode(&lp[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_count = lp.clone();
        wrong_count[4] = 3;
        assert!(decode(&wrong_count).is_err());
        let mut bad_enc = lp.clone();
        bad_enc[6] = 0xF7;
        assert!(decode(&bad_enc).is_err());
    }
}
