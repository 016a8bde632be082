//! Sorted sets: pure data, no threads or IO (the sibling of [`crate::stream`]).
//!
//! A [`SortedSet`] keeps its members ordered by `(score, member)` in a
//! vector of chunks, each a packed byte buffer of up to [`CHUNK_MAX`]
//! entries (or [`CHUNK_MAX_BYTES`]), laid out like Redis's listpack: the
//! score as 8 bytes, the member's length as a varint, the member's bytes.
//! Members live only there, with no allocation of their own. Positions
//! (ranks) are found by summing chunk counts, a key by a binary search over
//! the chunks' first entries and a scan of one chunk; an insert or removal
//! moves the bytes of one chunk.
//!
//! Small sets stop there, like Redis's `listpack` encoding: lookups by
//! member scan the entries. Past `zset-max-listpack-entries` members, or
//! with a member longer than `zset-max-listpack-value` bytes, a map from the
//! member's 64-bit hash to its score is added (the `skiplist` encoding:
//! ZSCORE without a scan; a hit is confirmed in the order index, so hash
//! collisions cannot give a wrong answer). As in Redis, a set never goes
//! back to the compact encoding.
//!
//! Bytes per member (`benches/zset-memory.sh`, 1M members `job:<8 digits>`
//! with millisecond scores): 65.7 in one large set vs redis-server's 109.8;
//! 28.3 in sets of 100 vs 26.5.
//!
//! # Source
//! redis/src/t_zset.c: ordering by score then `memcmp` of the members
//! (`zslInsert`), the listpack → skiplist conversion rules (`zsetAdd`,
//! `zsetTypeCreate`, `zsetTypeMaybeConvert`).

pub mod score;

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use bytes::Bytes;

/// An owned member, as commands receive and return them.
pub type Member = Bytes;

/// Most entries one chunk of the order index holds before it splits in two.
pub const CHUNK_MAX: usize = 64;

/// Bytes past which a chunk of two or more entries splits in two.
pub const CHUNK_MAX_BYTES: usize = 2048;

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

/// One run of consecutive entries, packed like a listpack: per entry the
/// score (8 bytes, little-endian IEEE 754), the member's length (LEB128
/// varint) and the member's bytes.
#[derive(Clone, Debug, Default)]
struct Chunk {
    buf: Vec<u8>,
    n: u32,
}

/// Decode the entry at `pos` of `buf`: `(score, member, next position)`.
fn decode(buf: &[u8], pos: usize) -> (f64, &[u8], usize) {
    let mut score = [0u8; 8];
    score.copy_from_slice(&buf[pos..pos + 8]);
    let mut p = pos + 8;
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[p];
        p += 1;
        len |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (f64::from_le_bytes(score), &buf[p..p + len], p + len)
}

/// The encoding of one entry.
fn encode(score: f64, member: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 10 + member.len());
    out.extend_from_slice(&score.to_le_bytes());
    let mut len = member.len();
    loop {
        let b = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
    out.extend_from_slice(member);
    out
}

impl Chunk {
    fn first(&self) -> (f64, &[u8]) {
        let (s, m, _) = decode(&self.buf, 0);
        (s, m)
    }

    /// `(score, member, byte offset)` of every entry, in order.
    fn entries(&self) -> ChunkIter<'_> {
        ChunkIter {
            buf: &self.buf,
            pos: 0,
        }
    }

    /// Byte offset of entry `i` (or the end of the buffer for `i == n`).
    fn offset_of(&self, i: usize) -> usize {
        self.entries().nth(i).map_or(self.buf.len(), |(_, _, p)| p)
    }

    /// Insert the encoded entry `e` at byte offset `at`.
    fn insert_at(&mut self, at: usize, e: &[u8]) {
        self.buf.reserve_exact(e.len());
        self.buf.splice(at..at, e.iter().copied());
        self.n += 1;
    }

    /// Whether the chunk should split in two.
    fn too_big(&self) -> bool {
        self.n as usize > CHUNK_MAX || (self.n >= 2 && self.buf.len() > CHUNK_MAX_BYTES)
    }

    /// Split off the second half of the entries.
    fn split(&mut self) -> Chunk {
        let keep = self.n as usize / 2;
        let at = self.offset_of(keep);
        let tail = Chunk {
            buf: self.buf[at..].to_vec(),
            n: self.n - keep as u32,
        };
        self.buf.truncate(at);
        self.buf.shrink_to_fit();
        self.n = keep as u32;
        tail
    }
}

struct ChunkIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = (f64, &'a [u8], usize);

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let at = self.pos;
        let (s, m, next) = decode(self.buf, at);
        self.pos = next;
        Some((s, m, at))
    }
}

/// Hashes of members: one random key per process (the member map's keys
/// are these hashes, so a client cannot choose colliding members).
fn member_hash(member: &[u8]) -> u64 {
    static STATE: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    STATE
        .get_or_init(std::collections::hash_map::RandomState::new)
        .hash_one(member)
}

/// A hasher for keys that already are hashes.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Member → score for large sets, without a copy of the members: keyed by
/// the member's 64-bit hash; a hit is confirmed by finding `(score,
/// member)` in the order index. Members whose hash is already taken go to
/// `overflow` (practically never).
#[derive(Clone, Debug, Default)]
struct Dict {
    main: HashMap<u64, f64, BuildHasherDefault<PreHashed>>,
    overflow: Vec<(u64, f64)>,
}

/// A place in one chunk: entry index and byte offset.
type Spot = (usize, usize);

/// A sorted set (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct SortedSet {
    /// Entries in `(score, member)` order; no chunk is empty.
    chunks: Vec<Chunk>,
    /// Member hash → score; `None` while the set is compact (listpack).
    dict: Option<Box<Dict>>,
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
            let mut d = Box::<Dict>::default();
            d.main.reserve(size_hint);
            s.dict = Some(d);
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
        let mut d = Box::<Dict>::default();
        d.main.reserve(self.len + 1);
        for c in &self.chunks {
            for (s, m, _) in c.entries() {
                dict_insert(&mut d, member_hash(m), s);
            }
        }
        self.dict = Some(d);
    }

    /// Where `(score, member)` is or would be: chunk index, and within it
    /// `Ok((entry index, byte offset))` when present or `Err` with the
    /// insertion point.
    fn locate(&self, score: f64, member: &[u8]) -> (usize, Result<Spot, Spot>) {
        if self.chunks.is_empty() {
            return (0, Err((0, 0)));
        }
        // The last chunk whose first entry is <= the key.
        let ci = self
            .chunks
            .partition_point(|c| {
                let (s, m) = c.first();
                cmp_entry(s, m, score, member) != Ordering::Greater
            })
            .saturating_sub(1);
        let c = &self.chunks[ci];
        for (i, (s, m, at)) in c.entries().enumerate() {
            match cmp_entry(s, m, score, member) {
                Ordering::Less => {}
                Ordering::Equal => return (ci, Ok((i, at))),
                Ordering::Greater => return (ci, Err((i, at))),
            }
        }
        (ci, Err((c.n as usize, c.buf.len())))
    }

    fn contains_entry(&self, score: f64, member: &[u8]) -> bool {
        self.locate(score, member).1.is_ok()
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.dict {
            Some(d) => {
                let h = member_hash(member);
                d.main
                    .get(&h)
                    .copied()
                    .into_iter()
                    .chain(d.overflow.iter().filter(|(x, _)| *x == h).map(|(_, s)| *s))
                    .find(|s| self.contains_entry(*s, member))
            }
            None => self
                .chunks
                .iter()
                .flat_map(Chunk::entries)
                .find(|(_, m, _)| *m == member)
                .map(|(s, _, _)| s),
        }
    }

    fn insert_entry(&mut self, score: f64, member: &[u8]) {
        // A listpack stores integral scores as integers, so -0 reads back
        // as 0 there (Redis's zzlInsertAt with double2ll); a skiplist keeps it.
        let score = if self.dict.is_none() && score == 0.0 {
            0.0
        } else {
            score
        };
        let (ci, pos) = self.locate(score, member);
        let (_, at) = pos.unwrap_or_else(|p| p);
        if self.chunks.is_empty() {
            self.chunks.push(Chunk::default());
        }
        let chunk = &mut self.chunks[ci];
        chunk.insert_at(at, &encode(score, member));
        if chunk.too_big() {
            let tail = chunk.split();
            self.chunks.insert(ci + 1, tail);
        }
        if let Some(d) = &mut self.dict {
            dict_insert(d, member_hash(member), score);
        }
        self.len += 1;
    }

    fn remove_entry(&mut self, score: f64, member: &[u8]) -> bool {
        let (ci, pos) = self.locate(score, member);
        let Ok((_, at)) = pos else {
            return false;
        };
        let chunk = &mut self.chunks[ci];
        let (_, _, next) = decode(&chunk.buf, at);
        chunk.buf.drain(at..next);
        chunk.n -= 1;
        if chunk.n == 0 {
            self.chunks.remove(ci);
        } else if ci + 1 < self.chunks.len()
            && (self.chunks[ci].n + self.chunks[ci + 1].n) as usize <= CHUNK_MAX / 2
            && self.chunks[ci].buf.len() + self.chunks[ci + 1].buf.len() <= CHUNK_MAX_BYTES / 2
        {
            // Keep chunks from thinning out after many removals.
            let next = self.chunks.remove(ci + 1);
            let c = &mut self.chunks[ci];
            c.buf.reserve_exact(next.buf.len());
            c.buf.extend_from_slice(&next.buf);
            c.n += next.n;
        } else {
            self.chunks[ci].buf.shrink_to_fit();
        }
        if let Some(d) = &mut self.dict {
            dict_remove(d, member_hash(member), score);
        }
        self.len -= 1;
        true
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
                if self.remove_entry(cur, member) {
                    self.insert_entry(new, member);
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
                self.insert_entry(score, member);
                AddOutcome::Added(score)
            }
        }
    }

    /// Remove `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = self.score(member)?;
        self.remove_entry(score, member).then_some(score)
    }

    /// Number of entries in the chunks before chunk `ci`, summed from the
    /// nearer end (both ends of the order are cheap: ZPOPMIN, ZPOPMAX).
    fn prefix_len(&self, ci: usize) -> usize {
        if ci <= self.chunks.len() / 2 {
            self.chunks[..ci].iter().map(|c| c.n as usize).sum()
        } else {
            self.len
                - self.chunks[ci..]
                    .iter()
                    .map(|c| c.n as usize)
                    .sum::<usize>()
        }
    }

    /// 0-based position of `member` in ascending order (`ZRANK`).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        let (ci, pos) = self.locate(score, member);
        Some(self.prefix_len(ci) + pos.ok()?.0)
    }

    /// Chunk and entry index of rank `rank` (`chunks.len()` when past the end).
    fn locate_rank(&self, mut rank: usize) -> (usize, usize) {
        if rank >= self.len {
            return (self.chunks.len(), 0);
        }
        if rank >= self.len / 2 {
            // Walk back from the end: entries after the wanted one.
            let mut after = self.len - 1 - rank;
            for (ci, c) in self.chunks.iter().enumerate().rev() {
                if after < c.n as usize {
                    return (ci, c.n as usize - 1 - after);
                }
                after -= c.n as usize;
            }
        }
        for (ci, c) in self.chunks.iter().enumerate() {
            if rank < c.n as usize {
                return (ci, rank);
            }
            rank -= c.n as usize;
        }
        (self.chunks.len(), 0)
    }

    /// The entry at rank `rank` in ascending order.
    pub fn by_rank(&self, rank: usize) -> Option<(f64, &[u8])> {
        let (ci, i) = self.locate_rank(rank);
        let (s, m, _) = self.chunks.get(ci)?.entries().nth(i)?;
        Some((s, m))
    }

    /// Number of entries, in ascending order, for which `pred` holds, given
    /// that it holds for a prefix of the order (a partition point).
    pub fn count_while(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        // Chunks whose first entry passes: the boundary is in the last of them.
        let ci = self.chunks.partition_point(|c| {
            let (s, m) = c.first();
            pred(s, m)
        });
        if ci == 0 {
            return 0;
        }
        let c = &self.chunks[ci - 1];
        self.prefix_len(ci - 1) + c.entries().take_while(|(s, m, _)| pred(*s, m)).count()
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
    pub fn range(&self, start: usize, end: usize, rev: bool) -> Vec<(f64, &[u8])> {
        let end = end.min(self.len);
        if start >= end {
            return Vec::new();
        }
        let (ci, i) = self.locate_rank(start);
        let mut out: Vec<(f64, &[u8])> = Vec::with_capacity(end - start);
        let mut skip = i;
        'outer: for c in &self.chunks[ci..] {
            for (s, m, _) in c.entries().skip(skip) {
                out.push((s, m));
                if out.len() == end - start {
                    break 'outer;
                }
            }
            skip = 0;
        }
        if rev {
            out.reverse();
        }
        out
    }

    /// Every entry in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = (f64, &[u8])> + '_ {
        self.chunks
            .iter()
            .flat_map(Chunk::entries)
            .map(|(s, m, _)| (s, m))
    }

    /// Remove the entries of ranks `[start, end)` (clamped); returns them in
    /// ascending order.
    pub fn remove_range(&mut self, start: usize, end: usize) -> Vec<(f64, Member)> {
        let out: Vec<(f64, Member)> = self
            .range(start, end, false)
            .into_iter()
            .map(|(s, m)| (s, Bytes::copy_from_slice(m)))
            .collect();
        if out.is_empty() {
            return out;
        }
        let (mut ci, first) = self.locate_rank(start);
        let mut left = out.len();
        let mut skip = first;
        while left > 0 && ci < self.chunks.len() {
            let c = &mut self.chunks[ci];
            let from = c.offset_of(skip);
            let take = (c.n as usize - skip).min(left);
            let to = c.offset_of(skip + take);
            c.buf.drain(from..to);
            c.buf.shrink_to_fit();
            c.n -= take as u32;
            left -= take;
            skip = 0;
            ci += 1;
        }
        self.chunks.retain(|c| c.n > 0);
        self.len -= out.len();
        if let Some(d) = &mut self.dict {
            for (s, m) in &out {
                dict_remove(d, member_hash(m), *s);
            }
        }
        out
    }

    /// Approximate heap bytes held (MEMORY USAGE): the chunk buffers and
    /// their index, and the member map's table.
    pub fn memory_usage_bytes(&self) -> usize {
        let chunks: usize = self.chunks.iter().map(|c| c.buf.capacity()).sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Chunk>();
        let dict = self.dict.as_ref().map_or(0, |d| {
            // hashbrown: capacity is 7/8 of the buckets; one control byte each.
            let buckets = (d.main.capacity() * 8 / 7).next_power_of_two();
            buckets * (std::mem::size_of::<(u64, f64)>() + 1)
                + d.overflow.capacity() * std::mem::size_of::<(u64, f64)>()
                + std::mem::size_of::<Dict>()
        });
        std::mem::size_of::<SortedSet>() + chunks + dict
    }
}

fn dict_insert(d: &mut Dict, h: u64, score: f64) {
    match d.main.entry(h) {
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(score);
        }
        std::collections::hash_map::Entry::Occupied(_) => d.overflow.push((h, score)),
    }
}

/// Forget one member with hash `h` and score `score`. Entries with equal
/// hash and score are interchangeable (lookups confirm in the order index).
fn dict_remove(d: &mut Dict, h: u64, score: f64) {
    if d.main.get(&h) == Some(&score) {
        match d.overflow.iter().position(|(x, _)| *x == h) {
            Some(i) => {
                let (_, s) = d.overflow.swap_remove(i);
                d.main.insert(h, s);
            }
            None => {
                d.main.remove(&h);
            }
        }
    } else if let Some(i) = d.overflow.iter().position(|e| *e == (h, score)) {
        d.overflow.swap_remove(i);
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
        let rev: Vec<Vec<u8>> = z
            .range(10, 20, true)
            .into_iter()
            .map(|(_, m)| m.to_vec())
            .collect();
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

    #[test]
    fn matches_an_ordered_model_under_random_operations() {
        use std::collections::{BTreeSet, HashMap};
        for limits in [
            lim(),
            EncodingLimits {
                max_listpack_entries: 0,
                max_listpack_value_bytes: 0,
            },
        ] {
            let mut z = SortedSet::default();
            let mut model: HashMap<Vec<u8>, f64> = HashMap::new();
            let mut x: u64 = 0x2545_F491_4F6C_DD1D;
            let mut rnd = |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            for step in 0..20_000 {
                let m = format!("m{}", rnd(700)).into_bytes();
                match rnd(10) {
                    0..=5 => {
                        let s = rnd(50) as f64 / 4.0;
                        z.add(&m, s, AddFlags::default(), limits);
                        model.insert(m, s);
                    }
                    6..=7 => assert_eq!(z.remove(&m), model.remove(&m)),
                    8 => assert_eq!(z.score(&m), model.get(&m).copied()),
                    _ => {
                        let a = rnd(z.len() as u64 + 1) as usize;
                        let removed = z.remove_range(a, a + 5);
                        for (s, m) in removed {
                            assert_eq!(model.remove(&m[..]), Some(s));
                        }
                    }
                }
                if step % 1000 == 0 || step == 19_999 {
                    let want: BTreeSet<(u64, Vec<u8>)> = model
                        .iter()
                        .map(|(m, s)| (s.to_bits(), m.clone()))
                        .collect();
                    let got: Vec<(u64, Vec<u8>)> =
                        z.iter().map(|(s, m)| (s.to_bits(), m.to_vec())).collect();
                    assert_eq!(got, want.into_iter().collect::<Vec<_>>());
                    assert_eq!(z.len(), model.len());
                    for (i, (_, m)) in got.iter().enumerate() {
                        assert_eq!(z.rank(m), Some(i));
                    }
                }
            }
        }
    }

    #[test]
    fn colliding_member_hashes_stay_exact() {
        let mut d = Dict::default();
        dict_insert(&mut d, 7, 1.0);
        dict_insert(&mut d, 7, 2.0);
        dict_insert(&mut d, 7, 1.0);
        assert_eq!(d.overflow.len(), 2);
        dict_remove(&mut d, 7, 1.0);
        dict_remove(&mut d, 7, 2.0);
        assert_eq!(d.main.len() + d.overflow.len(), 1);
        dict_remove(&mut d, 7, 1.0);
        assert!(d.main.is_empty() && d.overflow.is_empty());
    }
}
