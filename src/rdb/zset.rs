//! Sorted sets in DUMP payloads.
//!
//! Written as `RDB_TYPE_ZSET_2` (type 5): the member count, then each
//! member as a string followed by its score as an 8-byte little-endian IEEE
//! double, from the highest score down (the order Redis saves a skiplist
//! in). Read: that, and `RDB_TYPE_ZSET_LISTPACK` (type 17: one listpack of
//! member, score pairs, which Redis 7.0+ writes for small sets).
//!
//! # Source
//! `rdbSaveObject` / `rdbLoadObject`, redis/src/rdb.c (format facts only).

use super::listpack;
use super::wire::{Reader, Writer};
use super::RdbError;
use crate::zset::{AddFlags, AddOutcome, EncodingLimits, SortedSet};

/// Type byte of a sorted set with binary scores.
pub const TYPE_ZSET_2: u8 = 5;
/// Type byte of a small sorted set as one listpack.
pub const TYPE_ZSET_LISTPACK: u8 = 17;

/// Append `z` (type byte included).
pub fn encode(w: &mut Writer, z: &SortedSet) {
    w.byte(TYPE_ZSET_2);
    w.len(z.len() as u64);
    let all = z.range(0, z.len(), true);
    for (score, member) in all {
        w.string(member);
        w.raw(&score.to_le_bytes());
    }
}

/// Read a sorted set of type `ty` (its type byte already read).
pub fn decode(r: &mut Reader<'_>, ty: u8) -> Result<SortedSet, RdbError> {
    let limits = EncodingLimits::default();
    let mut pairs: Vec<(Vec<u8>, f64)> = Vec::new();
    match ty {
        TYPE_ZSET_2 => {
            let n = r.count()?;
            for _ in 0..n {
                let member = r.string()?;
                let mut b = [0u8; 8];
                b.copy_from_slice(r.take(8)?);
                pairs.push((member, f64::from_le_bytes(b)));
            }
        }
        TYPE_ZSET_LISTPACK => {
            let lp = r.string()?;
            let mut elems = listpack::decode(&lp)?.into_iter();
            while let Some(member) = elems.next() {
                let score = elems.next().ok_or(RdbError::BadFormat)?;
                let text = score.into_bytes();
                let score = std::str::from_utf8(&text)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                    .ok_or(RdbError::BadFormat)?;
                pairs.push((member.into_bytes(), score));
            }
        }
        _ => return Err(RdbError::BadFormat),
    }
    if pairs.is_empty() {
        return Err(RdbError::BadFormat);
    }
    let first_len = pairs.first().map_or(0, |(m, _)| m.len());
    let mut z = SortedSet::with_hint(pairs.len(), first_len, limits);
    for (member, score) in pairs {
        match z.add(&member, score, AddFlags::default(), limits) {
            AddOutcome::Added(_) => {}
            // A duplicate member or a NaN score: Redis refuses the payload.
            _ => return Err(RdbError::BadFormat),
        }
    }
    Ok(z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::db::Value;

    /// `DUMP` of `ZADD zz 1 a 2.5 b` on redis-server 7.0.15.
    const REDIS7_ZSET: &[u8] =
        b"\x11\x14\x14\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x832.5\x04\xff\x0a\x00\xd4Ln\xa4\xf6D\xd9\xd7";

    #[test]
    fn redis_zset_payload_restores() {
        let Ok(Value::Zset(z)) = super::super::restore_payload(REDIS7_ZSET) else {
            panic!("not restored");
        };
        assert_eq!(z.score(b"a"), Some(1.0));
        assert_eq!(z.score(b"b"), Some(2.5));
        assert_eq!(z.len(), 2);
    }

    #[test]
    fn round_trip_and_bad_payloads() {
        let limits = EncodingLimits::default();
        let mut z = SortedSet::default();
        for (m, s) in [("a", 1.5), ("b", -2.0), ("c", f64::INFINITY)] {
            z.add(m.as_bytes(), s, AddFlags::default(), limits);
        }
        let payload = super::super::dump_payload(&Value::Zset(Box::new(z)), 12);
        let Ok(Value::Zset(back)) = super::super::restore_payload(&payload) else {
            panic!("not a sorted set");
        };
        let got: Vec<(f64, Vec<u8>)> = back.iter().map(|(s, m)| (s, m.to_vec())).collect();
        assert_eq!(
            got,
            vec![
                (-2.0, b"b".to_vec()),
                (1.5, b"a".to_vec()),
                (f64::INFINITY, b"c".to_vec())
            ]
        );
        // A listpack of member/score pairs, as Redis 7.0 writes small sets.
        let mut lp = listpack::Builder::new();
        lp.string(b"x");
        lp.int(3);
        lp.string(b"y");
        lp.string(b"0.25");
        let mut w = Writer::new();
        w.string(&lp.finish());
        let mut r = Reader::new(&w.buf);
        let z = decode(&mut r, TYPE_ZSET_LISTPACK).unwrap();
        assert_eq!(z.score(b"x"), Some(3.0));
        assert_eq!(z.score(b"y"), Some(0.25));
        // A duplicate member is refused.
        let mut w = Writer::new();
        w.len(2);
        for _ in 0..2 {
            w.string(b"m");
            w.raw(&1f64.to_le_bytes());
        }
        assert_eq!(
            decode(&mut Reader::new(&w.buf), TYPE_ZSET_2).err(),
            Some(RdbError::BadFormat)
        );
    }
}
