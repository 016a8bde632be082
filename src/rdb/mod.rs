//! Redis's serialization format for one value, as `DUMP` produces and
//! `RESTORE` consumes it: pure data, no threads or IO.
//!
//! A payload is `<object type byte> <value in RDB encoding> <RDB version,
//! 2 bytes LE> <CRC64 of everything before, 8 bytes LE>` (CRC-64/Jones,
//! reflected, as Redis's `crc64`; the [`crc`] crate's `CRC_64_REDIS`).
//!
//! # Adding a value type
//! Each value type has one arm in [`encode_value`] (which type byte and
//! encoder to use for a [`Value`] variant) and one per accepted type byte in
//! [`decode_value`]; the encoding itself goes in a sibling module like
//! [`stream`] (strings are inline here). The primitives every type needs are
//! in [`wire`] (lengths, strings, times) and [`listpack`] (Redis's flat list
//! encoding, used by small hashes, sets, sorted sets and list nodes too).
//! A type byte without an arm answers `ERR Bad data format`, as Redis does
//! for a type it cannot load.
//!
//! # Versions
//! Payloads of RDB version 1 to [`MAX_ACCEPTED_VERSION`] are read (what
//! the newest Redis accepts). Written payloads carry
//! [`DEFAULT_DUMP_VERSION`] (12, what Redis 7.4 to 8.4 write; 8.6 writes 13
//! only to add encodings streams without IDMP do not use) unless the
//! `dump-payload-version` setting asks for an older one, so that an older
//! server (7.0 refuses versions above 10) can RESTORE them: 10 writes
//! streams as `STREAM_LISTPACKS_2`, 9 and below as `STREAM_LISTPACKS`.
//!
//! # Source
//! redis/src/cluster.c `createDumpPayload` / `verifyDumpPayload`,
//! `restoreCommand`; redis/src/rdb.h (type bytes, `RDB_VERSION`).

pub mod listpack;
pub mod listset;
pub mod stream;
pub mod wire;
pub mod zset;

use crate::shard::db::Value;
use wire::{Reader, Writer};

/// `RDB_TYPE_STRING`.
pub const TYPE_STRING: u8 = 0;
/// `RDB_TYPE_STREAM_LISTPACKS` (Redis 5.0).
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
/// `RDB_TYPE_STREAM_LISTPACKS_2` (Redis 7.0, RDB 10).
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
/// `RDB_TYPE_STREAM_LISTPACKS_3` (Redis 7.2, RDB 11).
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;

/// RDB version written by default (Redis 7.4 to 8.4).
pub const DEFAULT_DUMP_VERSION: u16 = 12;
/// Highest RDB version accepted by RESTORE (Redis 8.6).
pub const MAX_ACCEPTED_VERSION: u16 = 13;
/// Lowest version `dump-payload-version` may ask for (Redis 5.0/6.x).
pub const MIN_DUMP_VERSION: u16 = 9;

/// `ERR DUMP payload version or checksum are wrong`.
pub const ERR_PAYLOAD_VERSION_OR_CHECKSUM: &str = "ERR DUMP payload version or checksum are wrong";
/// `ERR Bad data format`.
pub const ERR_BAD_DATA_FORMAT: &str = "ERR Bad data format";

/// Why a payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdbError {
    /// Too short, a version above [`MAX_ACCEPTED_VERSION`], or a wrong CRC.
    VersionOrChecksum,
    /// The value encoding is malformed or of a type we do not load.
    BadFormat,
}

impl RdbError {
    /// Redis's reply text.
    pub fn text(self) -> &'static str {
        match self {
            RdbError::VersionOrChecksum => ERR_PAYLOAD_VERSION_OR_CHECKSUM,
            RdbError::BadFormat => ERR_BAD_DATA_FORMAT,
        }
    }
}

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// The DUMP payload of `value` for RDB version `version` (clamped to
/// [`MIN_DUMP_VERSION`]..=[`DEFAULT_DUMP_VERSION`]).
pub fn dump_payload(value: &Value, version: u16) -> Vec<u8> {
    let version = version.clamp(MIN_DUMP_VERSION, DEFAULT_DUMP_VERSION);
    let mut w = Writer::new();
    encode_value(&mut w, value, version);
    w.raw(&version.to_le_bytes());
    let crc = CRC64.checksum(&w.buf);
    w.raw(&crc.to_le_bytes());
    w.buf
}

/// Type byte and encoding of `value` (the per-type extension point).
fn encode_value(w: &mut Writer, value: &Value, version: u16) {
    match value {
        Value::Str(s) => {
            w.byte(TYPE_STRING);
            w.string(s);
        }
        Value::Zset(z) => zset::encode(w, z),
        Value::List(l) => listset::encode_list(w, l),
        Value::Set(set) => listset::encode_set(w, set),
        Value::Stream(s) => {
            let (ty, generation) = match version {
                11.. => (TYPE_STREAM_LISTPACKS_3, 3),
                10 => (TYPE_STREAM_LISTPACKS_2, 2),
                _ => (TYPE_STREAM_LISTPACKS, 1),
            };
            w.byte(ty);
            stream::encode(w, s, generation);
        }
    }
}

/// Check the footer of `payload`: at least 10 bytes, version at most
/// [`MAX_ACCEPTED_VERSION`], CRC64 matching. Returns the body (type byte
/// and value) and the version.
///
/// # Source
/// `verifyDumpPayload`.
pub fn verify_payload(payload: &[u8]) -> Result<(&[u8], u16), RdbError> {
    if payload.len() < 10 {
        return Err(RdbError::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > MAX_ACCEPTED_VERSION {
        return Err(RdbError::VersionOrChecksum);
    }
    let mut want = [0u8; 8];
    want.copy_from_slice(&footer[2..]);
    let crc = CRC64.checksum(&payload[..payload.len() - 8]);
    if crc != u64::from_le_bytes(want) {
        return Err(RdbError::VersionOrChecksum);
    }
    Ok((body, version))
}

/// Decode a whole DUMP payload into a value.
///
/// # Errors
/// [`RdbError::VersionOrChecksum`] from [`verify_payload`], then
/// [`RdbError::BadFormat`] for an unknown type byte or a malformed value
/// (including bytes left over after it).
pub fn restore_payload(payload: &[u8]) -> Result<Value, RdbError> {
    let (body, _version) = verify_payload(payload)?;
    let mut r = Reader::new(body);
    let value = decode_value(&mut r)?;
    if !r.at_end() {
        return Err(RdbError::BadFormat);
    }
    Ok(value)
}

/// Read a type byte and the value it announces (the per-type extension point).
fn decode_value(r: &mut Reader<'_>) -> Result<Value, RdbError> {
    match r.byte()? {
        TYPE_STRING => Ok(Value::Str(r.string()?.into())),
        TYPE_STREAM_LISTPACKS => Ok(Value::Stream(Box::new(stream::decode(r, 1)?))),
        TYPE_STREAM_LISTPACKS_2 => Ok(Value::Stream(Box::new(stream::decode(r, 2)?))),
        TYPE_STREAM_LISTPACKS_3 => Ok(Value::Stream(Box::new(stream::decode(r, 3)?))),
        ty @ (zset::TYPE_ZSET_2 | zset::TYPE_ZSET_LISTPACK) => {
            Ok(Value::Zset(Box::new(zset::decode(r, ty)?)))
        }
        ty @ (listset::TYPE_LIST | listset::TYPE_LIST_QUICKLIST_2) => {
            Ok(Value::List(Box::new(listset::decode_list(r, ty)?)))
        }
        ty @ (listset::TYPE_SET | listset::TYPE_SET_INTSET | listset::TYPE_SET_LISTPACK) => {
            Ok(Value::Set(Box::new(listset::decode_set(r, ty)?)))
        }
        _ => Err(RdbError::BadFormat),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{IdSpec, NodeLimits, Stream, StreamId};
    use bytes::Bytes;

    /// `DUMP` of `SET k hello` on redis-server 7.0.15 (RDB version 10).
    const REDIS7_HELLO: &[u8] = b"\x00\x05hello\x0a\x00cr\xdfve4 \x0a";

    #[test]
    fn redis_string_payload_restores() {
        match restore_payload(REDIS7_HELLO) {
            Ok(Value::Str(s)) => assert_eq!(&s[..], b"hello"),
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn footer_checks() {
        let mut p = REDIS7_HELLO.to_vec();
        p[3] ^= 1;
        assert_eq!(restore_payload(&p).err(), Some(RdbError::VersionOrChecksum));
        assert_eq!(
            restore_payload(b"short").err(),
            Some(RdbError::VersionOrChecksum)
        );
        // A version above what we accept, with a valid CRC.
        let mut w = Writer::new();
        w.byte(0);
        w.string(b"x");
        w.raw(&(MAX_ACCEPTED_VERSION + 1).to_le_bytes());
        let crc = CRC64.checksum(&w.buf);
        w.raw(&crc.to_le_bytes());
        assert_eq!(
            restore_payload(&w.buf).err(),
            Some(RdbError::VersionOrChecksum)
        );
        // An unknown type byte with a valid footer.
        let mut w = Writer::new();
        w.byte(200);
        w.raw(&10u16.to_le_bytes());
        let crc = CRC64.checksum(&w.buf);
        w.raw(&crc.to_le_bytes());
        assert_eq!(restore_payload(&w.buf).err(), Some(RdbError::BadFormat));
    }

    fn sample_stream() -> Stream {
        sample_stream_of(250)
    }

    fn sample_stream_of(n: u64) -> Stream {
        let mut s = Stream::new();
        let lim = NodeLimits::default();
        for i in 1..=n {
            let fields: Vec<(Bytes, Bytes)> = if i % 7 == 0 {
                vec![("other".into(), Bytes::from(vec![b'v'; (i * 13) as usize]))]
            } else {
                vec![
                    ("n".into(), i.to_string().into()),
                    ("s".into(), "txt".into()),
                ]
            };
            s.append(
                IdSpec::Explicit(StreamId::new(1000 + i / 3, i)),
                &fields,
                0,
                lim,
            )
            .unwrap();
        }
        s.delete(StreamId::new(1000, 1));
        s.delete(StreamId::new(1010, 30));
        let mut g = crate::stream::group::ConsumerGroup::new(StreamId::new(1020, 60), Some(60));
        let (a, _) = g.get_or_create_consumer(&Bytes::from("alice"), 5);
        let (b, _) = g.get_or_create_consumer(&Bytes::from("bob"), 6);
        g.touch_active(a, 7);
        g.claim(StreamId::new(1001, 3), a, 100, 2);
        g.claim(StreamId::new(1002, 6), b, 200, 1);
        g.claim(StreamId::new(1003, 9), a, 300, 5);
        let _ = b;
        s.groups_mut().insert("g1".into(), g);
        s.groups_mut().insert(
            "g2".into(),
            crate::stream::group::ConsumerGroup::new(StreamId::MIN, None),
        );
        s
    }

    fn same(a: &Stream, b: &Stream, generation: u8) {
        let all = |s: &Stream| {
            s.iter_range(StreamId::MIN, StreamId::MAX, false)
                .collect::<Vec<_>>()
        };
        assert_eq!(all(a), all(b));
        assert_eq!(a.len(), b.len());
        assert_eq!(a.last_id(), b.last_id());
        assert_eq!(a.first_id(), b.first_id());
        if generation >= 2 {
            assert_eq!(a.max_deleted_entry_id(), b.max_deleted_entry_id());
            assert_eq!(a.entries_added(), b.entries_added());
        }
        assert_eq!(a.groups().len(), b.groups().len());
        for ((na, ga), (nb, gb)) in a.groups().iter().zip(b.groups()) {
            assert_eq!(na, nb);
            assert_eq!(ga.last_id, gb.last_id);
            if generation >= 2 {
                assert_eq!(ga.entries_read, gb.entries_read);
            }
            let pel = |g: &crate::stream::group::ConsumerGroup| {
                g.pel()
                    .iter()
                    .map(|(id, p)| {
                        (
                            *id,
                            g.consumer_name(p.consumer),
                            p.delivery_time_ms,
                            p.delivery_count,
                        )
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(pel(ga), pel(gb));
            let cons = |g: &crate::stream::group::ConsumerGroup| {
                g.consumers()
                    .map(|c| (c.name.clone(), c.seen_time_ms, c.active_time_ms))
                    .collect::<Vec<_>>()
            };
            if generation >= 3 {
                assert_eq!(cons(ga), cons(gb));
            }
        }
        b.check_invariants().unwrap();
    }

    #[test]
    fn streams_round_trip_in_every_generation() {
        let s = sample_stream();
        for version in [9u16, 10, 11, 12] {
            let p = dump_payload(&Value::Stream(Box::new(s.clone())), version);
            let want_type = match version {
                9 => TYPE_STREAM_LISTPACKS,
                10 => TYPE_STREAM_LISTPACKS_2,
                _ => TYPE_STREAM_LISTPACKS_3,
            };
            assert_eq!(p[0], want_type);
            assert_eq!(
                u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]]),
                version
            );
            match restore_payload(&p) {
                Ok(Value::Stream(b)) => {
                    let generation = [1, 2, 3][usize::from(version.min(11) - 9)];
                    same(&s, &b, generation)
                }
                other => panic!("{:?}", other.err()),
            }
        }
    }

    /// A payload's nodes come back as they were, whatever the default
    /// node size, as Redis keeps the listpacks it loads; a node whose
    /// first entries were deleted starts at its first live one.
    #[test]
    fn restored_streams_keep_their_nodes() {
        let mut s = Stream::new();
        let small = NodeLimits {
            max_entries: 3,
            max_bytes: 0,
        };
        let f = [(Bytes::from("f"), Bytes::from("v"))];
        for i in 1..=10 {
            s.append(IdSpec::Explicit(StreamId::new(i, 0)), &f, 0, small)
                .unwrap();
        }
        assert!(s.delete(StreamId::new(4, 0)));
        let p = dump_payload(&Value::Stream(Box::new(s.clone())), 12);
        let Ok(Value::Stream(b)) = restore_payload(&p) else {
            panic!("restore failed")
        };
        assert_eq!(b.node_count(), 4);
        assert_eq!(
            b.range(StreamId::MIN, StreamId::MAX, None, false),
            s.range(StreamId::MIN, StreamId::MAX, None, false)
        );
        b.check_invariants().unwrap();
    }

    #[test]
    fn xnack_released_entries_are_left_out() {
        let mut s = sample_stream_of(20);
        let g = s.group_mut(b"g1").unwrap();
        assert!(g.nack(StreamId::new(1001, 3), false, |n| n));
        let pending_before = g.pel().len();
        let p = dump_payload(&Value::Stream(Box::new(s)), 12);
        let Ok(Value::Stream(b)) = restore_payload(&p) else {
            panic!("restore failed")
        };
        let g = b.group(b"g1").unwrap();
        assert_eq!(g.pel().len(), pending_before - 1);
        assert!(g.pending(StreamId::new(1001, 3)).is_none());
        b.check_invariants().unwrap();
    }

    #[test]
    fn empty_stream_and_strings_round_trip() {
        let mut s = Stream::new();
        s.set_last_id(StreamId::new(5, 5), Some(3), None).unwrap();
        let p = dump_payload(&Value::Stream(Box::new(s.clone())), 12);
        match restore_payload(&p) {
            Ok(Value::Stream(b)) => same(&s, &b, 3),
            other => panic!("{:?}", other.err()),
        }
        for v in [&b""[..], b"0", b"-12345678901", b"12", &[0xffu8; 300][..]] {
            let p = dump_payload(&Value::Str(Bytes::copy_from_slice(v)), 12);
            match restore_payload(&p) {
                Ok(Value::Str(b)) => assert_eq!(&b[..], v),
                other => panic!("{:?}", other.err()),
            }
        }
    }

    proptest::proptest! {
        /// Arbitrary bodies behind each stream type byte and a valid footer:
        /// refused or decoded into a consistent stream, never a panic; what
        /// decodes dumps and restores again to the same entries.
        #[test]
        fn arbitrary_payloads_never_panic(
            ty in proptest::sample::select(vec![0u8, 15, 19, 21]),
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let mut q = vec![ty];
            q.extend_from_slice(&body);
            q.extend_from_slice(&12u16.to_le_bytes());
            let crc = CRC64.checksum(&q);
            q.extend_from_slice(&crc.to_le_bytes());
            if let Ok(v) = restore_payload(&q) {
                if let Value::Stream(s) = &v {
                    proptest::prop_assert_eq!(s.check_invariants(), Ok(()));
                }
                let again = restore_payload(&dump_payload(&v, 12));
                proptest::prop_assert!(again.is_ok());
            }
        }
    }

    #[test]
    fn corrupt_stream_payloads_never_panic() {
        let s = sample_stream_of(30);
        let p = dump_payload(&Value::Stream(Box::new(s)), 12);
        let body_len = p.len() - 10;
        // Flip each byte of the body (fixing up the CRC) and cut the body
        // short: every variant is either refused or decodes; none panics.
        for i in 0..body_len {
            for cut in [false, true] {
                let mut q = if cut {
                    p[..i].to_vec()
                } else {
                    p[..body_len].to_vec()
                };
                if !cut {
                    q[i] ^= 0x5A;
                }
                q.extend_from_slice(&12u16.to_le_bytes());
                let crc = CRC64.checksum(&q);
                q.extend_from_slice(&crc.to_le_bytes());
                if let Ok(Value::Stream(b)) = restore_payload(&q) {
                    b.check_invariants().unwrap();
                }
            }
        }
    }
}
