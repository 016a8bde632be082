//! Hash slots and shards.
//!
//! A key maps to a hash slot `crc16(key) mod 16384` (CRC16/XMODEM, as the Redis
//! Cluster specification defines it), hashing only the first non-empty `{tag}`
//! when there is one. Shards own contiguous slot ranges, so a slot's shard is
//! `slot * shards / 16384`, computed here and nowhere else.

/// Number of hash slots in Redis Cluster.
pub const SLOTS: u16 = 16384;

/// A hash slot, `0..16384`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u16);

/// Index of a shard thread, `0..shards`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub u16);

/// Slot of `key`: CRC16/XMODEM of the key, or of its first non-empty `{tag}`, mod 16384.
///
/// # Source
/// `keyHashSlot`, Redis Cluster specification ("Hash tags").
pub fn slot_of(key: &[u8]) -> Slot {
    let hashed = hash_tag(key).unwrap_or(key);
    Slot(crc16::State::<crc16::XMODEM>::calculate(hashed) & (SLOTS - 1))
}

/// The part of `key` between the first `{` and the first `}` after it, if non-empty.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let len = key[open + 1..].iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

impl Slot {
    /// The shard owning this slot when there are `shards` shards (contiguous ranges).
    pub fn shard(self, shards: u16) -> ShardId {
        ShardId((u32::from(self.0) * u32::from(shards.max(1)) / u32::from(SLOTS)) as u16)
    }
}

impl ShardId {
    /// The first slot this shard owns when there are `shards` shards.
    pub fn first_slot(self, shards: u16) -> Slot {
        let shards = u32::from(shards.max(1));
        // smallest s with s * shards / 16384 >= id
        Slot(((u32::from(self.0) * u32::from(SLOTS)).div_ceil(shards)) as u16)
    }

    /// One past the last slot this shard owns (16384 for the last shard).
    pub fn end_slot(self, shards: u16) -> u32 {
        if u32::from(self.0) + 1 >= u32::from(shards.max(1)) {
            u32::from(SLOTS)
        } else {
            u32::from(ShardId(self.0 + 1).first_slot(shards).0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(slot_of(b"123456789"), Slot(0x31C3));
        assert_eq!(slot_of(b"foo"), Slot(12182));
        assert_eq!(
            slot_of(b"{user1000}.following"),
            slot_of(b"{user1000}.followers")
        );
        // empty tag: whole key hashed
        assert_eq!(
            slot_of(b"foo{}{bar}"),
            Slot(crc16::State::<crc16::XMODEM>::calculate(b"foo{}{bar}") & 16383)
        );
        assert_eq!(slot_of(b"foo{{bar}}zap"), slot_of(b"{bar"));
    }

    #[test]
    fn shard_ranges_are_contiguous_and_cover_all_slots() {
        for shards in [1u16, 2, 3, 4, 7, 16, 64] {
            let mut expected_first = 0u32;
            for id in 0..shards {
                let sid = ShardId(id);
                let first = u32::from(sid.first_slot(shards).0);
                assert_eq!(first, expected_first, "shards={shards} id={id}");
                let end = sid.end_slot(shards);
                for s in [first, end - 1] {
                    assert_eq!(Slot(s as u16).shard(shards), sid);
                }
                expected_first = end;
            }
            assert_eq!(expected_first, 16384);
        }
    }
}
