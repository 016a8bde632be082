//! [`IdMap`]: an ordered map from [`StreamId`] to a small `Copy` value, stored
//! as sorted chunks of at most [`CHUNK`] entries (keys and values in two
//! parallel vectors) indexed by a `BTreeMap` on each chunk's lower fence.
//!
//! Why: a consumer group's PEL holds one entry per delivered, unacked
//! message; as a plain `BTreeMap<StreamId, V>` every entry pays the B-tree's
//! node slack (leaves filled by in-order appends are barely half full) and
//! the padding of `(StreamId, V)`. Here an entry costs its key and value
//! bytes, plus about `1/CHUNK` of a chunk header. IDs are mostly appended in
//! increasing order (deliveries follow the stream), which fills chunks
//! completely: an insert past the end of a full last chunk opens a new one
//! instead of splitting it.
//!
//! Invariants: no chunk is empty; each chunk's keys are strictly ascending;
//! every key of a chunk is at least its fence (its key in the index) and below
//! the next chunk's fence. A fence need not be the chunk's first key (removing
//! a first key does not re-key its chunk), except that the first chunk is
//! re-keyed when a key below its fence is inserted.
//!
//! Complexity: lookups O(log(n / CHUNK) + log CHUNK); inserts and removals
//! add an O(CHUNK) shift within one chunk.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use super::StreamId;

/// Maximum entries per chunk.
pub const CHUNK: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Chunk<V> {
    keys: Vec<StreamId>,
    vals: Vec<V>,
}

impl<V> Chunk<V> {
    /// A chunk of one entry.
    fn single(id: StreamId, v: V) -> Self {
        Chunk {
            keys: vec![id],
            vals: vec![v],
        }
    }
}

/// Ordered map `StreamId -> V` (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdMap<V> {
    chunks: BTreeMap<StreamId, Chunk<V>>,
    len: usize,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            chunks: BTreeMap::new(),
            len: 0,
        }
    }
}

impl<V: Copy> IdMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fence of the chunk that holds (or would hold) `id`: the last fence at
    /// or below `id`, else the first chunk's.
    fn fence_for(&self, id: StreamId) -> Option<StreamId> {
        self.chunks
            .range(..=id)
            .next_back()
            .or_else(|| self.chunks.iter().next())
            .map(|(f, _)| *f)
    }

    /// The value of `id`.
    pub fn get(&self, id: StreamId) -> Option<&V> {
        let (_, c) = self.chunks.range(..=id).next_back()?;
        let i = c.keys.binary_search(&id).ok()?;
        c.vals.get(i)
    }

    /// The value of `id`, mutable.
    pub fn get_mut(&mut self, id: StreamId) -> Option<&mut V> {
        let (_, c) = self.chunks.range_mut(..=id).next_back()?;
        let i = c.keys.binary_search(&id).ok()?;
        c.vals.get_mut(i)
    }

    /// Whether `id` is present.
    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// Inserts or replaces `id`; returns the previous value.
    pub fn insert(&mut self, id: StreamId, v: V) -> Option<V> {
        // Past the last key (a delivery of new entries): one walk to the
        // last chunk, no search inside it.
        if let Some(mut last) = self.chunks.last_entry() {
            let c = last.get_mut();
            if c.keys.last().is_some_and(|&k| k < id) {
                self.len += 1;
                if c.keys.len() < CHUNK {
                    c.keys.push(id);
                    c.vals.push(v);
                } else {
                    // A full last chunk stays full; a new one opens.
                    self.chunks.insert(id, Chunk::single(id, v));
                }
                return None;
            }
        }
        let Some(mut fence) = self.fence_for(id) else {
            self.chunks.insert(id, Chunk::single(id, v));
            self.len = 1;
            return None;
        };
        if id < fence {
            // Below every fence: the first chunk takes it and is re-keyed.
            if let Some(c) = self.chunks.remove(&fence) {
                self.chunks.insert(id, c);
            }
            fence = id;
        }
        let c = self.chunks.get_mut(&fence)?;
        let pos = match c.keys.binary_search(&id) {
            Ok(i) => {
                let slot = c.vals.get_mut(i)?;
                return Some(std::mem::replace(slot, v));
            }
            Err(i) => i,
        };
        self.len += 1;
        if c.keys.len() < CHUNK {
            c.keys.insert(pos, id);
            c.vals.insert(pos, v);
            return None;
        }
        // (Past the last key of a full last chunk was taken above: a new
        // chunk opens and the full one stays full.)
        // Split the full chunk in halves, then insert into the right half.
        let half = CHUNK / 2;
        let mut right = Chunk {
            keys: c.keys.split_off(half),
            vals: c.vals.split_off(half),
        };
        let right_fence = right.keys.first().copied().unwrap_or(id);
        if pos < half {
            c.keys.insert(pos, id);
            c.vals.insert(pos, v);
        } else {
            right.keys.insert(pos - half, id);
            right.vals.insert(pos - half, v);
        }
        let right_fence = right_fence.min(right.keys.first().copied().unwrap_or(id));
        self.chunks.insert(right_fence, right);
        None
    }

    /// Removes `id`; returns its value.
    pub fn remove(&mut self, id: StreamId) -> Option<V> {
        let (&fence, c) = self.chunks.range_mut(..=id).next_back()?;
        let i = c.keys.binary_search(&id).ok()?;
        c.keys.remove(i);
        let v = c.vals.remove(i);
        self.len -= 1;
        let n = c.keys.len();
        if n == 0 {
            self.chunks.remove(&fence);
        } else if n <= CHUNK / 4 {
            self.merge_next(fence);
        }
        Some(v)
    }

    /// Merges the chunk after `fence` into it when both fit in one chunk, so
    /// that scattered removals do not leave many near-empty chunks.
    fn merge_next(&mut self, fence: StreamId) {
        let Some((&next_fence, next)) = self
            .chunks
            .range((Bound::Excluded(fence), Bound::Unbounded))
            .next()
        else {
            return;
        };
        let n = self.chunks.get(&fence).map_or(CHUNK, |c| c.keys.len());
        if n + next.keys.len() > CHUNK {
            return;
        }
        let Some(next) = self.chunks.remove(&next_fence) else {
            return;
        };
        if let Some(c) = self.chunks.get_mut(&fence) {
            c.keys.extend_from_slice(&next.keys);
            c.vals.extend_from_slice(&next.vals);
        }
    }

    /// Entries in ascending key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&StreamId, &V)> + '_ {
        self.chunks
            .values()
            .flat_map(|c| c.keys.iter().zip(c.vals.iter()))
    }

    /// Keys in ascending order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &StreamId> + '_ {
        self.chunks.values().flat_map(|c| c.keys.iter())
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + '_ {
        self.chunks.values().flat_map(|c| c.vals.iter())
    }

    /// The smallest entry.
    pub fn first_key_value(&self) -> Option<(&StreamId, &V)> {
        let (_, c) = self.chunks.iter().next()?;
        Some((c.keys.first()?, c.vals.first()?))
    }

    /// The greatest entry.
    pub fn last_key_value(&self) -> Option<(&StreamId, &V)> {
        let (_, c) = self.chunks.iter().next_back()?;
        Some((c.keys.last()?, c.vals.last()?))
    }

    /// Entries with keys in `r`, ascending.
    pub fn range<R: RangeBounds<StreamId>>(
        &self,
        r: R,
    ) -> impl Iterator<Item = (&StreamId, &V)> + '_ {
        let start = r.start_bound().cloned();
        let end = r.end_bound().cloned();
        let first_fence = match start {
            Bound::Included(s) | Bound::Excluded(s) => self.fence_for(s),
            Bound::Unbounded => None,
        };
        let chunks = match first_fence {
            Some(f) => self.chunks.range(f..),
            None => self.chunks.range(..),
        };
        chunks
            .flat_map(move |(_, c)| {
                let lo = match start {
                    Bound::Included(s) => c.keys.partition_point(|k| *k < s),
                    Bound::Excluded(s) => c.keys.partition_point(|k| *k <= s),
                    Bound::Unbounded => 0,
                };
                let keys = c.keys.get(lo..).unwrap_or(&[]);
                let vals = c.vals.get(lo..).unwrap_or(&[]);
                keys.iter().zip(vals.iter())
            })
            .take_while(move |(k, _)| match end {
                Bound::Included(e) => **k <= e,
                Bound::Excluded(e) => **k < e,
                Bound::Unbounded => true,
            })
    }

    /// Bytes this map holds on the heap, estimated: the chunks' vectors at
    /// their capacity plus the chunk index (B-tree slots about 2/3 full).
    pub fn heap_bytes(&self) -> usize {
        let slot = std::mem::size_of::<StreamId>() + std::mem::size_of::<Chunk<V>>();
        let index = self.chunks.len() * slot * 3 / 2;
        let data: usize = self
            .chunks
            .values()
            .map(|c| {
                c.keys.capacity() * std::mem::size_of::<StreamId>()
                    + c.vals.capacity() * std::mem::size_of::<V>()
            })
            .sum();
        index + data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn id(n: u64) -> StreamId {
        StreamId::new(n / 3, n % 3)
    }

    /// A small deterministic generator (xorshift).
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    fn check(m: &IdMap<u32>, model: &BTreeMap<StreamId, u32>) {
        assert_eq!(m.len(), model.len());
        let a: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
        let b: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(a, b);
        assert_eq!(
            m.first_key_value().map(|(k, v)| (*k, *v)),
            model.first_key_value().map(|(k, v)| (*k, *v))
        );
        assert_eq!(
            m.last_key_value().map(|(k, v)| (*k, *v)),
            model.last_key_value().map(|(k, v)| (*k, *v))
        );
        let mut prev: Option<StreamId> = None;
        for (f, c) in &m.chunks {
            assert!(!c.keys.is_empty() && c.keys.len() <= CHUNK);
            assert_eq!(c.keys.len(), c.vals.len());
            assert!(c.keys[0] >= *f);
            if let Some(p) = prev {
                assert!(p < *f);
            }
            prev = c.keys.last().copied();
        }
    }

    /// A PEL's life: deliveries append past the last key, acks remove
    /// from anywhere (mostly the oldest), a few claims land in the middle.
    #[test]
    fn matches_btreemap_when_appending_past_the_end() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut m = IdMap::new();
        let mut model = BTreeMap::new();
        let mut next = 0u64;
        for step in 0..20_000u32 {
            let r = rng(&mut seed);
            match r % 10 {
                0..=5 => {
                    next += 1 + r % 3;
                    assert_eq!(m.insert(id(next), step), model.insert(id(next), step));
                }
                6 | 7 => {
                    let oldest = model.keys().next().copied();
                    if let Some(k) = oldest {
                        assert_eq!(m.remove(k), model.remove(&k));
                    }
                }
                8 => {
                    let k = id(r % (next + 1));
                    assert_eq!(m.remove(k), model.remove(&k));
                }
                _ => {
                    let k = id(r % (next + 1));
                    assert_eq!(m.insert(k, step), model.insert(k, step));
                }
            }
            if step % 500 == 0 {
                check(&m, &model);
            }
        }
        check(&m, &model);
    }

    #[test]
    fn matches_btreemap_under_random_operations() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut m = IdMap::new();
        let mut model = BTreeMap::new();
        for step in 0..20_000u32 {
            let r = rng(&mut seed);
            let k = id(r % 2_000);
            match r % 7 {
                0..=3 => assert_eq!(m.insert(k, step), model.insert(k, step)),
                4 | 5 => assert_eq!(m.remove(k), model.remove(&k)),
                _ => {
                    if let Some(v) = m.get_mut(k) {
                        *v += 1;
                    }
                    if let Some(v) = model.get_mut(&k) {
                        *v += 1;
                    }
                }
            }
            assert_eq!(m.get(k), model.get(&k));
            if step % 500 == 0 {
                check(&m, &model);
                let lo = id(rng(&mut seed) % 2_000);
                let hi = id(rng(&mut seed) % 2_000);
                if lo <= hi {
                    let a: Vec<_> = m.range(lo..=hi).map(|(k, _)| *k).collect();
                    let b: Vec<_> = model.range(lo..=hi).map(|(k, _)| *k).collect();
                    assert_eq!(a, b);
                }
                let a: Vec<_> = m.range(lo..).map(|(k, _)| *k).collect();
                let b: Vec<_> = model.range(lo..).map(|(k, _)| *k).collect();
                assert_eq!(a, b);
                let a: Vec<_> = m
                    .range((Bound::Excluded(lo), Bound::Unbounded))
                    .map(|(k, _)| *k)
                    .collect();
                let b: Vec<_> = model
                    .range((Bound::Excluded(lo), Bound::Unbounded))
                    .map(|(k, _)| *k)
                    .collect();
                assert_eq!(a, b);
            }
        }
        check(&m, &model);
        // Drain everything.
        let keys: Vec<_> = model.keys().copied().collect();
        for k in keys {
            assert_eq!(m.remove(k), model.remove(&k));
        }
        check(&m, &model);
        assert!(m.is_empty());
    }

    #[test]
    fn appends_fill_chunks_completely() {
        let mut m = IdMap::new();
        for n in 0..(CHUNK as u64 * 10) {
            m.insert(StreamId::new(n + 1, 0), ());
        }
        assert_eq!(m.chunks.len(), 10);
        assert!(m.chunks.values().all(|c| c.keys.len() == CHUNK));
        // Inserting below every key re-keys the first chunk (then splits it).
        m.insert(StreamId::MIN, ());
        assert_eq!(m.first_key_value().map(|(k, _)| *k), Some(StreamId::MIN));
        assert_eq!(m.range(..).count(), CHUNK * 10 + 1);
    }
}
