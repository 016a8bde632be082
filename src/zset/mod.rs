//! Sorted sets: pure data, no threads or IO (the sibling of [`crate::stream`]).
//!
//! A [`SortedSet`] keeps its members ordered by `(score, member)` in a
//! vector of small sorted chunks (at most [`CHUNK_MAX`] entries each): a
//! two-level order index whose positions (ranks) are found by summing chunk
//! lengths and whose inserts move at most one chunk. Small sets stop there,
//! like Redis's `listpack` encoding: lookups by member scan the entries.
//! Past `zset-max-listpack-entries` members, or with a member longer than
//! `zset-max-listpack-value` bytes, a member → score hash map is added (the
//! `skiplist` encoding: O(1) ZSCORE, O(log n) ZADD/ZREM/ZRANK), and, as in
//! Redis, a set never goes back.
//!
//! Members are immutable shared byte strings ([`Member`]): the order index
//! and the map hold the same allocation, as Redis's skiplist and dict share
//! one sds.
//!
//! # Source
//! redis/src/t_zset.c: ordering by score then `memcmp` of the members
//! (`zslInsert`), the listpack → skiplist conversion rules (`zsetAdd`,
//! `zsetTypeCreate`, `zsetTypeMaybeConvert`).

pub mod score;

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// A member's bytes, shared by the order index and the member map.
///
/// `Arc` rather than `Rc` only because a [`crate::shard::db::Value`] must be
/// `Send` (an AOF rewrite copies a shard's values to another thread); the
/// bytes are never mutated.
pub type Member = Arc<[u8]>;

/// Most entries one chunk of the order index holds before it splits in two.
pub const CHUNK_MAX: usize = 128;

/// `zset-max-listpack-entries` / `zset-max-listpack-value` in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingLimits {
    /// Members a compact (listpack) set may hold.
    pub max_listpack_entries: usize,
    /// Longest member, bytes, a compact set may hold.
    pub max_listpack_value_bytes: usize,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            max_listpack_entries: 128,
            max_listpack_value_bytes: 64,
        }
    }
}

/// What [`SortedSet::add`] did, as Redis's `zsetAdd` reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AddOutcome {
    /// A new member.
    Added(f64),
    /// An existing member whose score changed.
    Updated(f64),
    /// An existing member whose score stays (same score given); counts as processed.
    Unchanged(f64),
    /// Nothing done: NX on an existing member, XX on a missing one, GT/LT refused.
    Nop,
    /// INCR made the score NaN (`inf` + `-inf`): nothing done.
    NotANumber,
}

/// ZADD's conditions (`NX`, `XX`, `GT`, `LT`, `INCR`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub incr: bool,
}

/// Compare two entries in set order: score, then member bytes.
fn cmp_entry(a_score: f64, a_member: &[u8], b_score: f64, b_member: &[u8]) -> Ordering {
    a_score
        .partial_cmp(&b_score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a_member.cmp(b_member))
}

/// A sorted set (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct SortedSet {
    /// Entries in `(score, member)` order, in chunks of 1..=CHUNK_MAX (none when empty).
    chunks: Vec<Vec<(f64, Member)>>,
    /// Member → score; `None` while the set is compact (listpack).
    dict: Option<HashMap<Member, f64>>,
    len: usize,
}

impl SortedSet {
    /// An empty set, compact unless `size_hint` members or a first member of
    /// `first_member_len` bytes already pass `limits` (Redis's `zsetTypeCreate`).
    pub fn with_hint(size_hint: usize, first_member_len: usize, limits: EncodingLimits) -> Self {
        let mut s = SortedSet::default();
        if size_hint > limits.max_listpack_entries
            || first_member_len > limits.max_listpack_value_bytes
        {
            s.dict = Some(HashMap::with_capacity(size_hint));
        }
        s
    }

    /// Number of members (`ZCARD`).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set has no member (a key never holds an empty set).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the set uses the compact encoding (`OBJECT ENCODING` says
    /// `listpack`; otherwise `skiplist`).
    pub fn is_listpack(&self) -> bool {
        self.dict.is_none()
    }

    /// Switch to the hash-indexed encoding if the set holds `size_hint` more
    /// members than the compact encoding allows (Redis's `zsetTypeMaybeConvert`,
    /// called with the number of members a command is about to add).
    pub fn maybe_convert(&mut self, size_hint: usize, limits: EncodingLimits) {
        if self.dict.is_none() && size_hint > limits.max_listpack_entries {
            self.convert_to_skiplist();
        }
    }

    fn convert_to_skiplist(&mut self) {
        if self.dict.is_some() {
            return;
        }
        let mut d = HashMap::with_capacity(self.len + 1);
        for (s, m) in self.chunks.iter().flatten() {
            d.insert(m.clone(), *s);
        }
        self.dict = Some(d);
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.dict {
            Some(d) => d.get(member).copied(),
            None => self
                .chunks
                .iter()
                .flatten()
                .find(|(_, m)| &m[..] == member)
                .map(|(s, _)| *s),
        }
    }

    /// Chunk index and offset where `(score, member)` is or would be inserted.
    fn locate(&self, score: f64, member: &[u8]) -> (usize, Result<usize, usize>) {
        if self.chunks.is_empty() {
            return (0, Err(0));
        }
        let ci = self
            .chunks
            .partition_point(|c| {
                let (s, m) = c.last().expect("chunks are never empty");
                cmp_entry(*s, m, score, member) == Ordering::Less
            })
            .min(self.chunks.len() - 1);
        let pos = self.chunks[ci].binary_search_by(|(s, m)| cmp_entry(*s, m, score, member));
        (ci, pos)
    }

    fn insert_entry(&mut self, score: f64, member: Member) {
        let (ci, pos) = self.locate(score, &member);
        let off = pos.unwrap_or_else(|p| p);
        if self.chunks.is_empty() {
            self.chunks.push(Vec::with_capacity(4));
        }
        let chunk = &mut self.chunks[ci];
        chunk.insert(off, (score, member.clone()));
        if chunk.len() > CHUNK_MAX {
            let tail = chunk.split_off(chunk.len() / 2);
            chunk.shrink_to(CHUNK_MAX);
            self.chunks.insert(ci + 1, tail);
        }
        if let Some(d) = &mut self.dict {
            d.insert(member, score);
        }
        self.len += 1;
    }

    fn remove_entry(&mut self, score: f64, member: &[u8]) -> Option<Member> {
        let (ci, pos) = self.locate(score, member);
        let off = pos.ok()?;
        let (_, m) = self.chunks[ci].remove(off);
        if self.chunks[ci].is_empty() {
            self.chunks.remove(ci);
        } else if ci + 1 < self.chunks.len()
            && self.chunks[ci].len() + self.chunks[ci + 1].len() <= CHUNK_MAX / 2
        {
            // Keep chunks from thinning out after many removals.
            let next = self.chunks.remove(ci + 1);
            self.chunks[ci].extend(next);
        }
        if let Some(d) = &mut self.dict {
            d.remove(member);
        }
        self.len -= 1;
        Some(m)
    }

    /// Add or update `member` under ZADD's `flags`, converting to the
    /// hash-indexed encoding when `limits` say so.
    ///
    /// # Source
    /// `zsetAdd`, redis/src/t_zset.c.
    pub fn add(
        &mut self,
        member: &[u8],
        score: f64,
        flags: AddFlags,
        limits: EncodingLimits,
    ) -> AddOutcome {
        if score.is_nan() {
            return AddOutcome::NotANumber;
        }
        match self.score(member) {
            Some(cur) => {
                if flags.nx {
                    return AddOutcome::Nop;
                }
                let mut new = score;
                if flags.incr {
                    new += cur;
                    if new.is_nan() {
                        return AddOutcome::NotANumber;
                    }
                }
                if (flags.lt && new >= cur) || (flags.gt && new <= cur) {
                    return AddOutcome::Nop;
                }
                if new == cur {
                    return AddOutcome::Unchanged(new);
                }
                if let Some(m) = self.remove_entry(cur, member) {
                    self.insert_entry(new, m);
                }
                AddOutcome::Updated(new)
            }
            None if flags.xx => AddOutcome::Nop,
            None => {
                if self.dict.is_none()
                    && (self.len + 1 > limits.max_listpack_entries
                        || member.len() > limits.max_listpack_value_bytes)
                {
                    self.convert_to_skiplist();
                }
                self.insert_entry(score, Member::from(member));
                AddOutcome::Added(score)
            }
        }
    }

    /// Remove `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = self.score(member)?;
        self.remove_entry(score, member).map(|_| score)
    }

    /// Number of entries in the chunks before chunk `ci`.
    fn prefix_len(&self, ci: usize) -> usize {
        self.chunks[..ci].iter().map(Vec::len).sum()
    }

    /// 0-based position of `member` in ascending order (`ZRANK`).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        let (ci, pos) = self.locate(score, member);
        Some(self.prefix_len(ci) + pos.ok()?)
    }

    /// Chunk and offset of rank `rank` (< len).
    fn locate_rank(&self, mut rank: usize) -> (usize, usize) {
        for (ci, c) in self.chunks.iter().enumerate() {
            if rank < c.len() {
                return (ci, rank);
            }
            rank -= c.len();
        }
        (self.chunks.len(), 0)
    }

    /// The entry at rank `rank` in ascending order.
    pub fn by_rank(&self, rank: usize) -> Option<(f64, &Member)> {
        let (ci, off) = self.locate_rank(rank);
        self.chunks
            .get(ci)
            .and_then(|c| c.get(off))
            .map(|(s, m)| (*s, m))
    }

    /// Number of entries, in ascending order, for which `pred` holds, given
    /// that it holds for a prefix of the order (a partition point).
    pub fn count_while(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        let ci = self.chunks.partition_point(|c| {
            let (s, m) = c.last().expect("chunks are never empty");
            pred(*s, m)
        });
        if ci == self.chunks.len() {
            return self.len;
        }
        self.prefix_len(ci) + self.chunks[ci].partition_point(|(s, m)| pred(*s, m))
    }

    /// Ranks `[start, end)` of the entries whose score is in `range`.
    pub fn score_span(&self, range: &score::ScoreRange) -> (usize, usize) {
        if range.is_empty() {
            return (0, 0);
        }
        let start = self.count_while(|s, _| !range.above_min(s));
        let end = self.count_while(|s, _| range.below_max(s));
        (start, end.max(start))
    }

    /// Ranks `[start, end)` of the entries whose member is in `range`
    /// (meaningful when all scores are equal, as Redis documents).
    pub fn lex_span(&self, range: &score::LexRange) -> (usize, usize) {
        if range.is_empty() {
            return (0, 0);
        }
        let start = self.count_while(|_, m| !range.above_min(m));
        let end = self.count_while(|_, m| range.below_max(m));
        (start, end.max(start))
    }

    /// Entries of ranks `[start, end)` (clamped to the set), ascending, or
    /// descending from `end - 1` when `rev`.
    pub fn range(
        &self,
        start: usize,
        end: usize,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (f64, &Member)> + '_> {
        let end = end.min(self.len);
        if start >= end {
            return Box::new(std::iter::empty());
        }
        let (ci, off) = self.locate_rank(start);
        let mut left = end - start;
        let mut slices: Vec<&[(f64, Member)]> = Vec::new();
        let mut first = true;
        for c in &self.chunks[ci..] {
            let from = if first { off } else { 0 };
            first = false;
            let take = (c.len() - from).min(left);
            slices.push(&c[from..from + take]);
            left -= take;
            if left == 0 {
                break;
            }
        }
        if rev {
            Box::new(
                slices
                    .into_iter()
                    .rev()
                    .flat_map(|s| s.iter().rev())
                    .map(|(s, m)| (*s, m)),
            )
        } else {
            Box::new(slices.into_iter().flatten().map(|(s, m)| (*s, m)))
        }
    }

    /// Every entry in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = (f64, &Member)> + '_ {
        self.chunks.iter().flatten().map(|(s, m)| (*s, m))
    }

    /// Remove the entries of ranks `[start, end)` (clamped); returns them in
    /// ascending order.
    pub fn remove_range(&mut self, start: usize, end: usize) -> Vec<(f64, Member)> {
        let end = end.min(self.len);
        if start >= end {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(end - start);
        let (mut ci, mut off) = self.locate_rank(start);
        let mut left = end - start;
        while left > 0 && ci < self.chunks.len() {
            let chunk = &mut self.chunks[ci];
            let take = (chunk.len() - off).min(left);
            out.extend(chunk.drain(off..off + take));
            left -= take;
            ci += 1;
            off = 0;
        }
        self.chunks.retain(|c| !c.is_empty());
        self.len -= out.len();
        if let Some(d) = &mut self.dict {
            for (_, m) in &out {
                d.remove(&m[..]);
            }
        }
        out
    }

    /// Approximate heap bytes held (MEMORY USAGE): chunk buffers, member
    /// allocations (with their reference counts) and the member map's table.
    pub fn memory_usage_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(f64, Member)>();
        let chunks: usize = self
            .chunks
            .iter()
            .map(|c| c.capacity() * entry + std::mem::size_of::<Vec<(f64, Member)>>())
            .sum();
        let members: usize = self
            .iter()
            .map(|(_, m)| (2 * std::mem::size_of::<usize>() + m.len()).next_multiple_of(8))
            .sum();
        let dict = self.dict.as_ref().map_or(0, |d| {
            // hashbrown: capacity is 7/8 of the buckets; one control byte each.
            let buckets = (d.capacity() * 8 / 7).next_power_of_two();
            buckets * (std::mem::size_of::<(Member, f64)>() + 1)
        });
        std::mem::size_of::<SortedSet>() + chunks + members + dict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> EncodingLimits {
        EncodingLimits::default()
    }

    #[test]
    fn order_rank_and_conversion() {
        let mut z = SortedSet::default();
        for i in 0..1000u32 {
            let m = format!("m{:04}", (i * 7919) % 1000);
            let s = f64::from((i * 7919) % 1000 / 10);
            assert!(matches!(
                z.add(m.as_bytes(), s, AddFlags::default(), lim()),
                AddOutcome::Added(_)
            ));
            if z.len() == 128 {
                assert!(z.is_listpack());
            }
        }
        assert!(!z.is_listpack());
        assert_eq!(z.len(), 1000);
        let all: Vec<(f64, Vec<u8>)> = z.iter().map(|(s, m)| (s, m.to_vec())).collect();
        for w in all.windows(2) {
            assert_eq!(cmp_entry(w[0].0, &w[0].1, w[1].0, &w[1].1), Ordering::Less);
        }
        for (i, (s, m)) in all.iter().enumerate() {
            assert_eq!(z.rank(m), Some(i));
            assert_eq!(z.score(m), Some(*s));
            assert_eq!(z.by_rank(i).map(|(_, m)| m.to_vec()), Some(m.clone()));
        }
        let rev: Vec<Vec<u8>> = z.range(10, 20, true).map(|(_, m)| m.to_vec()).collect();
        let want: Vec<Vec<u8>> = all[10..20].iter().rev().map(|e| e.1.clone()).collect();
        assert_eq!(rev, want);
        let removed = z.remove_range(100, 900);
        assert_eq!(removed.len(), 800);
        assert_eq!(z.len(), 200);
        assert_eq!(z.rank(&all[900].1), Some(100));
        assert_eq!(z.score(&all[500].1), None);
    }

    #[test]
    fn add_flags_follow_zsetadd() {
        let mut z = SortedSet::default();
        let f = |nx, xx, gt, lt, incr| AddFlags {
            nx,
            xx,
            gt,
            lt,
            incr,
        };
        assert_eq!(
            z.add(b"a", 1.0, f(false, true, false, false, false), lim()),
            AddOutcome::Nop
        );
        assert_eq!(
            z.add(b"a", 1.0, AddFlags::default(), lim()),
            AddOutcome::Added(1.0)
        );
        assert_eq!(
            z.add(b"a", 5.0, f(true, false, false, false, false), lim()),
            AddOutcome::Nop
        );
        assert_eq!(
            z.add(b"a", 0.5, f(false, false, true, false, false), lim()),
            AddOutcome::Nop
        );
        assert_eq!(
            z.add(b"a", 2.0, f(false, false, true, false, true), lim()),
            AddOutcome::Updated(3.0)
        );
        assert_eq!(
            z.add(b"a", 3.0, AddFlags::default(), lim()),
            AddOutcome::Unchanged(3.0)
        );
        z.add(b"b", f64::INFINITY, AddFlags::default(), lim());
        assert_eq!(
            z.add(
                b"b",
                f64::NEG_INFINITY,
                f(false, false, false, false, true),
                lim()
            ),
            AddOutcome::NotANumber
        );
        assert_eq!(z.remove(b"a"), Some(3.0));
        assert_eq!(z.len(), 1);
        let big = vec![b'x'; 65];
        z.add(&big, 1.0, AddFlags::default(), lim());
        assert!(!z.is_listpack());
    }
}
