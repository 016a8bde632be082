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
    Slot(XMODEM.checksum(hashed) & (SLOTS - 1))
}

/// CRC16/XMODEM, sixteen bytes per step (the `crc` crate's slice-by-16
/// tables): computed for every key of every command on a sharded server.
const XMODEM: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_XMODEM);

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

    /// The slice-by-16 CRC agrees with an independent byte-at-a-time one
    /// (the `crc16` crate) on every length around the 16-byte steps.
    #[test]
    fn crc_matches_reference_at_every_length() {
        let bytes: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..bytes.len() {
            let key = &bytes[..len];
            let key: Vec<u8> = key
                .iter()
                .map(|&b| if b == b'{' { b'x' } else { b })
                .collect();
            assert_eq!(
                slot_of(&key),
                Slot(crc16::State::<crc16::XMODEM>::calculate(&key) & 16383),
                "length {len}"
            );
        }
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

/// Which shard of this server owns each hash slot.
///
/// Shards always own contiguous slot ranges (SCAN cursors rely on it). A
/// standalone server splits all 16384 slots evenly ([`SlotMap::uniform`]); a
/// cluster node splits only the slots it serves ([`SlotMap::balanced`]), so a
/// node owning 0-5460 with 2 shards uses both of them. Slots the node does not
/// serve are never routed to a shard; they are attached to the range of the
/// owned slot before them so ranges stay contiguous.
#[derive(Clone, Debug)]
pub struct SlotMap {
    shards: u16,
    by_slot: Box<[u16]>,
    /// First slot of each shard's range (`first[s] == first[s + 1]` when empty).
    first: Vec<u16>,
}

impl SlotMap {
    /// Every slot split evenly: `slot * shards / 16384`.
    pub fn uniform(shards: u16) -> SlotMap {
        Self::build(shards, |s| Slot(s).shard(shards).0)
    }

    /// The slots for which `owned` is true split evenly over `shards` (by rank).
    pub fn balanced(shards: u16, owned: impl Fn(u16) -> bool) -> SlotMap {
        let shards = shards.max(1);
        let total = (0..SLOTS).filter(|&s| owned(s)).count() as u32;
        if total == 0 {
            return Self::uniform(shards);
        }
        let mut rank = 0u32;
        let mut current = 0u16;
        let mut assign = vec![0u16; usize::from(SLOTS)];
        for s in 0..SLOTS {
            if owned(s) {
                current = (rank * u32::from(shards) / total) as u16;
                rank += 1;
            }
            assign[usize::from(s)] = current;
        }
        Self::build(shards, |s| assign[usize::from(s)])
    }

    fn build(shards: u16, shard_of: impl Fn(u16) -> u16) -> SlotMap {
        let shards = shards.max(1);
        let by_slot: Box<[u16]> = (0..SLOTS).map(|s| shard_of(s).min(shards - 1)).collect();
        let mut first = vec![SLOTS; usize::from(shards)];
        for (slot, &shard) in by_slot.iter().enumerate().rev() {
            first[usize::from(shard)] = slot as u16;
        }
        // Empty shards start where the next non-empty one does.
        for s in (0..usize::from(shards)).rev() {
            let next = first.get(s + 1).copied().unwrap_or(SLOTS);
            if first[s] == SLOTS || first[s] > next {
                first[s] = next;
            }
        }
        if let Some(f) = first.first_mut() {
            *f = 0;
        }
        SlotMap {
            shards,
            by_slot,
            first,
        }
    }

    /// Number of shards.
    pub fn shards(&self) -> u16 {
        self.shards
    }

    /// The shard owning `slot`.
    pub fn shard(&self, slot: Slot) -> ShardId {
        ShardId(self.by_slot[usize::from(slot.0 & (SLOTS - 1))])
    }

    /// The shard owning `key`.
    pub fn shard_of_key(&self, key: &[u8]) -> ShardId {
        self.shard(slot_of(key))
    }

    /// First slot of `shard`'s range.
    pub fn first_slot(&self, shard: ShardId) -> Slot {
        Slot(
            self.first
                .get(usize::from(shard.0))
                .copied()
                .unwrap_or(SLOTS),
        )
    }

    /// One past the last slot of `shard`'s range (16384 for the last shard).
    pub fn end_slot(&self, shard: ShardId) -> u32 {
        self.first
            .get(usize::from(shard.0) + 1)
            .map_or(u32::from(SLOTS), |&f| u32::from(f))
    }
}

#[cfg(test)]
mod slot_map_tests {
    use super::*;

    #[test]
    fn uniform_matches_the_formula() {
        let m = SlotMap::uniform(3);
        for s in [0u16, 5461, 5462, 10922, 10923, 16383] {
            assert_eq!(m.shard(Slot(s)), Slot(s).shard(3));
        }
        for id in 0..3 {
            assert_eq!(m.first_slot(ShardId(id)), ShardId(id).first_slot(3));
            assert_eq!(m.end_slot(ShardId(id)), ShardId(id).end_slot(3));
        }
    }

    #[test]
    fn balanced_splits_only_owned_slots() {
        // A node owning 0-5460 with 2 shards uses both.
        let m = SlotMap::balanced(2, |s| s <= 5460);
        assert_eq!(m.shard(Slot(0)), ShardId(0));
        assert_eq!(m.shard(Slot(5460)), ShardId(1));
        let on_shard0 = (0..=5460u16)
            .filter(|&s| m.shard(Slot(s)) == ShardId(0))
            .count();
        assert!((2700..=2761).contains(&on_shard0), "{on_shard0}");
        // A node owning the top third starts shard 1 inside its own range.
        let m = SlotMap::balanced(2, |s| s >= 10923);
        assert!(m.first_slot(ShardId(1)).0 > 10923);
        assert_eq!(m.end_slot(ShardId(1)), 16384);
        // Ranges are contiguous and cover everything.
        for shards in [1u16, 2, 3, 5] {
            let m = SlotMap::balanced(shards, |s| s % 7 == 0 || s > 12000);
            let mut prev = 0;
            for s in 0..SLOTS {
                let sh = m.shard(Slot(s)).0;
                assert!(sh >= prev);
                prev = sh;
                assert!(u32::from(m.first_slot(ShardId(sh)).0) <= u32::from(s));
                assert!(u32::from(s) < m.end_slot(ShardId(sh)));
            }
        }
    }
}
