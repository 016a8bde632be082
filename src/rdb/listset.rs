//! Lists and sets in DUMP payloads.
//!
//! Written in the plain encodings every Redis release loads: a list as
//! `RDB_TYPE_LIST` (type 1: count, then each element as a string, head
//! first) and a set as `RDB_TYPE_SET` (type 2: count, then each member).
//! Read: those, plus what Redis 7.x writes — `RDB_TYPE_LIST_QUICKLIST_2`
//! (type 18: nodes, each a container kind and a listpack or one plain
//! element), `RDB_TYPE_SET_INTSET` (type 11) and `RDB_TYPE_SET_LISTPACK`
//! (type 20).
//!
//! # Source
//! `rdbSaveObject` / `rdbLoadObject`, redis/src/rdb.c; the intset layout of
//! redis/src/intset.h (format facts only).

use super::listpack;
use super::wire::{Reader, Writer};
use super::RdbError;
use crate::list::{End, List};
use crate::set::{Set, SetLimits};

/// A list, one string per element.
pub const TYPE_LIST: u8 = 1;
/// A set, one string per member.
pub const TYPE_SET: u8 = 2;
/// A set of integers as one intset blob.
pub const TYPE_SET_INTSET: u8 = 11;
/// A list as quicklist nodes of listpacks (Redis 7.0+).
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
/// A small set as one listpack (Redis 7.2+).
pub const TYPE_SET_LISTPACK: u8 = 20;

/// Quicklist node container kinds.
const NODE_PLAIN: u64 = 1;
const NODE_PACKED: u64 = 2;

/// Append `l` (type byte included).
pub fn encode_list(w: &mut Writer, l: &List) {
    w.byte(TYPE_LIST);
    w.len(l.len() as u64);
    for v in l.iter() {
        w.string(v);
    }
}

/// Append `s` (type byte included).
pub fn encode_set(w: &mut Writer, s: &Set) {
    w.byte(TYPE_SET);
    w.len(s.len() as u64);
    for m in s.iter() {
        w.string(&m);
    }
}

/// Read a list of type `ty` (its type byte already read).
pub fn decode_list(r: &mut Reader<'_>, ty: u8) -> Result<List, RdbError> {
    let mut l = List::new();
    match ty {
        TYPE_LIST => {
            for _ in 0..r.count()? {
                l.push(End::Right, &r.string()?);
            }
        }
        TYPE_LIST_QUICKLIST_2 => {
            for _ in 0..r.count()? {
                let kind = r.length()?;
                let blob = r.string()?;
                match kind {
                    NODE_PLAIN => l.push(End::Right, &blob),
                    NODE_PACKED => {
                        for e in listpack::decode(&blob)? {
                            l.push(End::Right, &e.into_bytes());
                        }
                    }
                    _ => return Err(RdbError::BadFormat),
                }
            }
        }
        _ => return Err(RdbError::BadFormat),
    }
    if l.is_empty() {
        return Err(RdbError::BadFormat);
    }
    Ok(l)
}

/// Read a set of type `ty` (its type byte already read).
pub fn decode_set(r: &mut Reader<'_>, ty: u8) -> Result<Set, RdbError> {
    let members: Vec<Vec<u8>> = match ty {
        TYPE_SET => (0..r.count()?)
            .map(|_| r.string())
            .collect::<Result<_, _>>()?,
        TYPE_SET_LISTPACK => listpack::decode(&r.string()?)?
            .into_iter()
            .map(listpack::Elem::into_bytes)
            .collect(),
        TYPE_SET_INTSET => intset_members(&r.string()?)?
            .into_iter()
            .map(|n| itoa::Buffer::new().format(n).as_bytes().to_vec())
            .collect(),
        _ => return Err(RdbError::BadFormat),
    };
    let Some(first) = members.first() else {
        return Err(RdbError::BadFormat);
    };
    let limits = SetLimits::default();
    let mut s = Set::create(first, members.len(), &limits);
    for m in &members {
        if !s.add(m, &limits) {
            // A member twice: Redis refuses the payload.
            return Err(RdbError::BadFormat);
        }
    }
    Ok(s)
}

/// The integers of an intset blob: encoding width (u32 LE: 2, 4 or 8),
/// count (u32 LE), then the values, little-endian, strictly ascending.
fn intset_members(blob: &[u8]) -> Result<Vec<i64>, RdbError> {
    let word = |at: usize| -> Result<u32, RdbError> {
        let b = blob.get(at..at + 4).ok_or(RdbError::BadFormat)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let width = word(0)? as usize;
    let count = word(4)? as usize;
    if !matches!(width, 2 | 4 | 8) || blob.len() != 8 + width * count {
        return Err(RdbError::BadFormat);
    }
    let mut out = Vec::with_capacity(count);
    for c in blob[8..].chunks_exact(width) {
        let v = match width {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        };
        if out.last().is_some_and(|&p| p >= v) {
            return Err(RdbError::BadFormat);
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::db::Value;
    use bytes::Bytes;

    /// Members of `s`, sorted.
    fn members(s: &Set) -> Vec<Bytes> {
        let mut v: Vec<Bytes> = s.iter().collect();
        v.sort();
        v
    }

    #[test]
    fn lists_and_sets_round_trip() {
        let mut l = List::new();
        for v in ["a", "bb", "12", ""] {
            l.push(End::Right, v.as_bytes());
        }
        let p = super::super::dump_payload(&Value::List(Box::new(l)), 12);
        let Ok(Value::List(back)) = super::super::restore_payload(&p) else {
            panic!("not a list");
        };
        let got: Vec<&[u8]> = back.iter().collect();
        assert_eq!(got, vec![&b"a"[..], b"bb", b"12", b""]);

        let limits = SetLimits::default();
        let mut s = Set::create(b"x", 3, &limits);
        for m in ["x", "7", "yy"] {
            s.add(m.as_bytes(), &limits);
        }
        let p = super::super::dump_payload(&Value::Set(Box::new(s)), 12);
        let Ok(Value::Set(back)) = super::super::restore_payload(&p) else {
            panic!("not a set");
        };
        assert_eq!(
            members(&back),
            vec![Bytes::from("7"), Bytes::from("x"), Bytes::from("yy")]
        );
    }

    #[test]
    fn redis_encodings_decode() {
        // An intset of 2-byte integers: -3, 5, 300.
        let mut blob = Vec::new();
        blob.extend(2u32.to_le_bytes());
        blob.extend(3u32.to_le_bytes());
        for v in [-3i16, 5, 300] {
            blob.extend(v.to_le_bytes());
        }
        let mut w = Writer::new();
        w.string(&blob);
        let s = decode_set(&mut Reader::new(&w.buf), TYPE_SET_INTSET).unwrap();
        assert_eq!(
            members(&s),
            vec![Bytes::from("-3"), Bytes::from("300"), Bytes::from("5")]
        );
        // Out of order: refused.
        blob[8..10].copy_from_slice(&900i16.to_le_bytes());
        let mut w = Writer::new();
        w.string(&blob);
        assert!(decode_set(&mut Reader::new(&w.buf), TYPE_SET_INTSET).is_err());
        // A quicklist of one packed node and one plain node.
        let mut lp = listpack::Builder::new();
        lp.string(b"h");
        lp.int(42);
        let mut w = Writer::new();
        w.len(2);
        w.len(NODE_PACKED);
        w.string(&lp.finish());
        w.len(NODE_PLAIN);
        w.string(b"big");
        let l = decode_list(&mut Reader::new(&w.buf), TYPE_LIST_QUICKLIST_2).unwrap();
        let got: Vec<&[u8]> = l.iter().collect();
        assert_eq!(got, vec![&b"h"[..], b"42", b"big"]);
    }
}
