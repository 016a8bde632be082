//! [`List`]: the value of a list key (LPUSH/RPUSH/LPOP/LRANGE/...), pure
//! data with no threads or IO.
//!
//! Elements live in a `VecDeque` (O(1) pushes and pops at both ends, O(1)
//! index). Beside them the list keeps the byte size the elements would take
//! in a Redis listpack, so that `OBJECT ENCODING` reports `listpack` or
//! `quicklist` exactly where Redis 7.2+ switches, under
//! `list-max-listpack-size`.
//!
//! # Source
//! redis/src/t_list.c (`listTypeTryConvertListpack`,
//! `listTypeTryConvertQuicklist`), redis/src/quicklist.c
//! (`quicklistNodeExceedsLimit`), redis/src/listpack.c (entry sizes).

use std::collections::VecDeque;

use bytes::Bytes;

/// Bytes of a listpack's header (total bytes + element count) and end mark.
const LP_HEADER_BYTES: usize = 6 + 1;

/// `quicklist.c`'s `optimization_level`: node byte caps for fill -1 .. -5.
const FILL_BYTES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// `quicklist.c`'s `SIZE_SAFETY_LIMIT`: a count-limited node never exceeds this, bytes.
const SIZE_SAFETY_LIMIT_BYTES: usize = 8192;

/// Bytes one element takes in a listpack: encoding byte(s), data, back-length.
///
/// # Source
/// `lpEncodeGetType` / `lpEncodeBacklen`, redis/src/listpack.c: strings that
/// are canonical 64-bit integers are stored as integers of 1..9 bytes.
pub fn lp_entry_bytes(v: &[u8]) -> usize {
    let enc = match crate::cmd::args::parse_i64(v) {
        Some(n) if (0..=127).contains(&n) => 1,
        Some(n) if (-4096..=4095).contains(&n) => 2,
        Some(n) if i16::try_from(n).is_ok() => 3,
        Some(n) if (-(1 << 23)..(1 << 23)).contains(&n) => 4,
        Some(n) if i32::try_from(n).is_ok() => 5,
        Some(_) => 9,
        None if v.len() < 64 => 1 + v.len(),
        None if v.len() < 4096 => 2 + v.len(),
        None => 5 + v.len(),
    };
    let backlen = match enc {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    };
    enc + backlen
}

/// `(byte cap, count cap)` of one quicklist node for `list-max-listpack-size`
/// `fill` (negative: a byte cap by level; positive: an element count).
///
/// # Source
/// `quicklistNodeLimit`, redis/src/quicklist.c.
fn node_limit(fill: i64) -> (usize, usize) {
    if fill >= 0 {
        (usize::MAX, usize::try_from(fill).unwrap_or(usize::MAX))
    } else {
        let level = usize::try_from(-(fill + 1))
            .unwrap_or(usize::MAX)
            .min(FILL_BYTES.len() - 1);
        (FILL_BYTES[level], usize::MAX)
    }
}

/// Whether a node of `bytes` and `count` elements is over the `fill` limit.
///
/// # Source
/// `quicklistNodeExceedsLimit`, redis/src/quicklist.c.
fn exceeds(fill: i64, bytes: usize, count: usize) -> bool {
    let (size_cap, count_cap) = node_limit(fill);
    if size_cap != usize::MAX {
        bytes > size_cap
    } else {
        bytes > SIZE_SAFETY_LIMIT_BYTES || count > count_cap
    }
}

/// Which end of a list (LEFT = head, RIGHT = tail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The head (`LEFT`, LPUSH / LPOP).
    Left,
    /// The tail (`RIGHT`, RPUSH / RPOP).
    Right,
}

impl End {
    /// `LEFT` / `RIGHT`, as AOF records and replies spell them.
    pub fn name(self) -> &'static [u8] {
        match self {
            End::Left => b"LEFT",
            End::Right => b"RIGHT",
        }
    }
}

/// Most bytes of element data in one chunk (a chunk holding a single
/// larger element may pass it). Tiny in unit tests, so they cross chunks.
const CHUNK_MAX_BYTES: usize = if cfg!(test) { 64 } else { 4096 };
/// Most elements in one chunk.
const CHUNK_MAX_ENTRIES: usize = if cfg!(test) { 4 } else { 256 };

/// A run of consecutive elements packed into one buffer, with the end
/// offset of each: 4 bytes of overhead per element (Redis's listpack spends
/// 2..10), O(1) access by position inside the chunk.
#[derive(Clone, Debug, Default)]
struct Chunk {
    data: Vec<u8>,
    /// `ends[i]`: offset in `data` just past element `i`.
    ends: Vec<u32>,
}

impl Chunk {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1] as usize
        }
    }

    fn get(&self, i: usize) -> &[u8] {
        &self.data[self.start(i)..self.ends[i] as usize]
    }

    fn has_room(&self, add_bytes: usize) -> bool {
        self.ends.is_empty()
            || (self.ends.len() < CHUNK_MAX_ENTRIES
                && self.data.len() + add_bytes <= CHUNK_MAX_BYTES)
    }

    fn insert(&mut self, i: usize, v: &[u8]) {
        let at = self.start(i);
        self.data.reserve_exact(v.len());
        self.data.splice(at..at, v.iter().copied());
        self.ends.reserve_exact(1);
        self.ends.insert(i, (at + v.len()) as u32);
        for e in &mut self.ends[i + 1..] {
            *e += v.len() as u32;
        }
    }

    fn remove(&mut self, i: usize) -> Bytes {
        let (a, b) = (self.start(i), self.ends[i] as usize);
        let out = Bytes::copy_from_slice(&self.data[a..b]);
        self.data.drain(a..b);
        self.ends.remove(i);
        for e in &mut self.ends[i..] {
            *e -= (b - a) as u32;
        }
        out
    }

    /// Drop elements `..n` (front) in one move.
    fn drop_front(&mut self, n: usize) {
        let cut = self.start(n);
        self.data.drain(..cut);
        self.ends.drain(..n);
        for e in &mut self.ends {
            *e -= cut as u32;
        }
    }

    /// Keep elements `..n` only.
    fn keep_front(&mut self, n: usize) {
        self.data.truncate(self.start(n));
        self.ends.truncate(n);
    }

    /// Split off elements `at..` into a new chunk.
    fn split_off(&mut self, at: usize) -> Chunk {
        let cut = self.start(at);
        let data = self.data.split_off(cut);
        let ends = self
            .ends
            .split_off(at)
            .into_iter()
            .map(|e| e - cut as u32)
            .collect();
        self.data.shrink_to_fit();
        self.ends.shrink_to_fit();
        Chunk { data, ends }
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        (0..self.len()).map(move |i| self.get(i))
    }

    fn heap_bytes(&self) -> usize {
        self.data.capacity() + 4 * self.ends.capacity()
    }
}

/// A list value: elements packed into chunks of up to 4 KiB / 256
/// elements (as Redis packs a quicklist's nodes into listpacks), so an
/// element costs its bytes plus 4, not a pointer and an allocation.
/// Pushes and pops at both ends touch one chunk; indexing walks chunk
/// sizes from the nearer end.
#[derive(Clone, Debug, Default)]
pub struct List {
    chunks: VecDeque<Chunk>,
    len: usize,
    /// Sum of [`lp_entry_bytes`] over the elements.
    packed_bytes: usize,
    /// Encoded as a quicklist (else a single listpack).
    quicklist: bool,
}

impl List {
    /// An empty list (a listpack).
    pub fn new() -> List {
        List::default()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list has no elements (the key is then deleted).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the list would take as one listpack.
    fn lp_bytes(&self) -> usize {
        LP_HEADER_BYTES + self.packed_bytes
    }

    /// `OBJECT ENCODING`: `listpack` or `quicklist`.
    pub fn encoding(&self) -> &'static str {
        if self.quicklist {
            "quicklist"
        } else {
            "listpack"
        }
    }

    /// Before adding `new` elements: convert to a quicklist when the
    /// listpack would pass the `fill` limit. Redis counts the raw length of
    /// the new strings here, not their encoded size.
    ///
    /// # Source
    /// `listTypeTryConvertListpack`, redis/src/t_list.c.
    pub fn grow_check<'a>(&mut self, fill: i64, new: impl IntoIterator<Item = &'a [u8]>) {
        if self.quicklist {
            return;
        }
        let (mut add_bytes, mut add_len) = (0, 0);
        for v in new {
            add_bytes += v.len();
            add_len += 1;
        }
        if exceeds(fill, self.lp_bytes() + add_bytes, self.len() + add_len) {
            self.quicklist = true;
        }
    }

    /// After removing elements: a quicklist small enough for one node at
    /// half the limit turns back into a listpack. The node count of a real
    /// quicklist depends on its history; here the list counts as one node
    /// when it fits in one.
    ///
    /// # Source
    /// `listTypeTryConvertQuicklist` (shrinking), redis/src/t_list.c.
    pub fn shrink_check(&mut self, fill: i64) {
        if !self.quicklist {
            return;
        }
        let (size_cap, count_cap) = node_limit(fill);
        if self.lp_bytes() <= size_cap / 2 && self.len() <= count_cap / 2 {
            self.quicklist = false;
        }
    }

    /// Push a copy of `v` at `end`.
    pub fn push(&mut self, end: End, v: &[u8]) {
        self.packed_bytes += lp_entry_bytes(v);
        self.len += 1;
        match end {
            End::Left => match self.chunks.front_mut() {
                Some(c) if c.has_room(v.len()) => c.insert(0, v),
                _ => {
                    let mut c = Chunk::default();
                    c.insert(0, v);
                    self.chunks.push_front(c);
                }
            },
            End::Right => match self.chunks.back_mut() {
                Some(c) if c.has_room(v.len()) => {
                    let n = c.len();
                    c.insert(n, v)
                }
                _ => {
                    let mut c = Chunk::default();
                    c.insert(0, v);
                    self.chunks.push_back(c);
                }
            },
        }
    }

    /// Pop one element from `end`.
    pub fn pop(&mut self, end: End) -> Option<Bytes> {
        let v = match end {
            End::Left => {
                let c = self.chunks.front_mut()?;
                let v = c.remove(0);
                if c.len() == 0 {
                    self.chunks.pop_front();
                }
                v
            }
            End::Right => {
                let c = self.chunks.back_mut()?;
                let v = c.remove(c.len() - 1);
                if c.len() == 0 {
                    self.chunks.pop_back();
                }
                v
            }
        };
        self.len -= 1;
        self.packed_bytes -= lp_entry_bytes(&v);
        Some(v)
    }

    /// `(chunk, position in chunk)` of element `i < len`, walking from the
    /// nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut left = i;
            for (ci, c) in self.chunks.iter().enumerate() {
                if left < c.len() {
                    return (ci, left);
                }
                left -= c.len();
            }
        } else {
            let mut from_end = self.len - 1 - i;
            for (ci, c) in self.chunks.iter().enumerate().rev() {
                if from_end < c.len() {
                    return (ci, c.len() - 1 - from_end);
                }
                from_end -= c.len();
            }
        }
        (0, 0)
    }

    /// Element at `index` (negative: from the tail, -1 = last).
    pub fn get(&self, index: i64) -> Option<&[u8]> {
        let (ci, j) = self.locate(self.resolve(index)?);
        Some(self.chunks[ci].get(j))
    }

    /// Replace the element at `index`; false when out of range.
    pub fn set(&mut self, index: i64, v: &[u8]) -> bool {
        let Some(i) = self.resolve(index) else {
            return false;
        };
        let (ci, j) = self.locate(i);
        let c = &mut self.chunks[ci];
        let old = c.remove(j);
        c.insert(j, v);
        self.packed_bytes = self.packed_bytes + lp_entry_bytes(v) - lp_entry_bytes(&old);
        true
    }

    fn resolve(&self, index: i64) -> Option<usize> {
        let len = self.len as i64;
        let i = if index < 0 { len + index } else { index };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// Clamp Redis's `start` / `stop` (inclusive, negative from the tail) to
    /// an index range; `None` when empty.
    ///
    /// # Source
    /// `lrangeCommand` / `ltrimCommand`, redis/src/t_list.c.
    pub fn clamp(&self, start: i64, stop: i64) -> Option<(usize, usize)> {
        let len = self.len as i64;
        let mut start = if start < 0 { len + start } else { start };
        let mut stop = if stop < 0 { len + stop } else { stop };
        if start < 0 {
            start = 0;
        }
        if start > stop || start >= len {
            return None;
        }
        if stop >= len {
            stop = len - 1;
        }
        Some((start as usize, stop as usize))
    }

    /// Elements `from..=to` (indexes from [`clamp`](Self::clamp)).
    pub fn range(&self, from: usize, to: usize) -> impl Iterator<Item = &[u8]> {
        let (ci, j) = if from < self.len {
            self.locate(from)
        } else {
            (self.chunks.len(), 0)
        };
        self.chunks
            .range(ci.min(self.chunks.len())..)
            .flat_map(Chunk::iter)
            .skip(j)
            .take((to + 1).saturating_sub(from))
    }

    /// Every element, head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> {
        self.chunks.iter().flat_map(Chunk::iter)
    }

    /// Keep only elements `from..=to`; `None` empties the list. Costs the
    /// removed elements' chunks, not the whole list.
    pub fn trim(&mut self, keep: Option<(usize, usize)>) {
        let Some((from, to)) = keep else {
            self.chunks.clear();
            self.len = 0;
            self.packed_bytes = 0;
            return;
        };
        let removed_bytes: usize = self
            .range(0, from.saturating_sub(1))
            .take(from)
            .chain(
                self.range(to + 1, self.len.saturating_sub(1))
                    .take(self.len - 1 - to),
            )
            .map(lp_entry_bytes)
            .sum();
        let mut front = from;
        while let Some(c) = self.chunks.front_mut() {
            if front == 0 {
                break;
            }
            if c.len() <= front {
                front -= c.len();
                self.chunks.pop_front();
            } else {
                c.drop_front(front);
                front = 0;
            }
        }
        let mut back = self.len - 1 - to;
        while let Some(c) = self.chunks.back_mut() {
            if back == 0 {
                break;
            }
            if c.len() <= back {
                back -= c.len();
                self.chunks.pop_back();
            } else {
                let n = c.len() - back;
                c.keep_front(n);
                back = 0;
            }
        }
        self.len = to - from + 1;
        self.packed_bytes -= removed_bytes;
    }

    /// Insert a copy of `v` before or after the first element equal to
    /// `pivot`. Returns false when there is no such element.
    pub fn insert(&mut self, after: bool, pivot: &[u8], v: &[u8]) -> bool {
        let Some(i) = self.iter().position(|e| e == pivot) else {
            return false;
        };
        let at = if after { i + 1 } else { i };
        if at == self.len {
            self.push(End::Right, v);
            return true;
        }
        let (mut ci, mut j) = self.locate(at);
        if !self.chunks[ci].has_room(v.len()) && self.chunks[ci].len() > 1 {
            // A full chunk splits in two first.
            let half = self.chunks[ci].len() / 2;
            let tail = self.chunks[ci].split_off(half);
            self.chunks.insert(ci + 1, tail);
            (ci, j) = self.locate(at);
        }
        self.chunks[ci].insert(j, v);
        self.len += 1;
        self.packed_bytes += lp_entry_bytes(v);
        true
    }

    /// Remove elements equal to `v`: the first `count` from the head
    /// (`count` > 0), from the tail (< 0), or all (0). Returns how many.
    pub fn remove(&mut self, count: i64, v: &[u8]) -> usize {
        let mut limit = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        let mut removed = 0;
        let n = self.chunks.len();
        let order: Box<dyn Iterator<Item = usize>> = if count >= 0 {
            Box::new(0..n)
        } else {
            Box::new((0..n).rev())
        };
        for ci in order {
            if limit == 0 {
                break;
            }
            let c = &mut self.chunks[ci];
            let hits: Vec<usize> = if count >= 0 {
                (0..c.len())
                    .filter(|&j| c.get(j) == v)
                    .take(limit)
                    .collect()
            } else {
                (0..c.len())
                    .rev()
                    .filter(|&j| c.get(j) == v)
                    .take(limit)
                    .collect()
            };
            limit -= hits.len();
            removed += hits.len();
            // Highest position first, so earlier positions stay valid.
            let mut hits = hits;
            hits.sort_unstable_by(|a, b| b.cmp(a));
            for j in hits {
                c.remove(j);
            }
        }
        self.chunks.retain(|c| c.len() > 0);
        self.len -= removed;
        self.packed_bytes -= removed * lp_entry_bytes(v);
        removed
    }

    /// Approximate heap footprint in bytes (MEMORY USAGE).
    pub fn memory_usage_bytes(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.chunks.iter().map(Chunk::heap_bytes).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn listpack_entry_sizes() {
        assert_eq!(lp_entry_bytes(b"5"), 2);
        assert_eq!(lp_entry_bytes(b"1000"), 3);
        assert_eq!(lp_entry_bytes(b"100000"), 5);
        assert_eq!(lp_entry_bytes(b"abc"), 5);
        assert_eq!(lp_entry_bytes(&[b'x'; 100]), 103);
    }

    #[test]
    fn push_pop_index_and_encoding() {
        let mut l = List::new();
        for v in ["a", "b", "c"] {
            l.push(End::Right, v.as_bytes());
        }
        l.push(End::Left, b"z");
        assert_eq!(l.get(0), Some(&b"z"[..]));
        assert_eq!(l.get(-1), Some(&b"c"[..]));
        assert_eq!(l.get(4), None);
        assert_eq!(l.clamp(-100, 100), Some((0, 3)));
        assert_eq!(l.clamp(2, 1), None);
        assert_eq!(l.remove(0, b"b"), 1);
        assert!(l.insert(true, b"a", b"x"));
        let all: Vec<_> = l.iter().map(Bytes::copy_from_slice).collect();
        assert_eq!(all, vec![b("z"), b("a"), b("x"), b("c")]);
        // fill 2: three elements do not fit one node.
        l.grow_check(2, [&b"q"[..]]);
        assert_eq!(l.encoding(), "quicklist");
        l.trim(Some((0, 0)));
        l.shrink_check(2);
        assert_eq!(l.encoding(), "listpack");
        assert_eq!(l.packed_bytes, 3);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(bool, u8),
        Pop(bool),
        Set(i64, u8),
        Insert(bool, u8, u8),
        Remove(i64, u8),
        Trim(i64, i64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (any::<bool>(), 0u8..6).prop_map(|(l, v)| Op::Push(l, v)),
            any::<bool>().prop_map(Op::Pop),
            (-8i64..8, 0u8..6).prop_map(|(i, v)| Op::Set(i, v)),
            (any::<bool>(), 0u8..6, 0u8..6).prop_map(|(a, p, v)| Op::Insert(a, p, v)),
            (-3i64..3, 0u8..6).prop_map(|(c, v)| Op::Remove(c, v)),
            (-8i64..8, -8i64..8).prop_map(|(a, b)| Op::Trim(a, b)),
        ]
    }

    /// Values of a few shapes: small ints, big ints, short and long strings.
    fn val(v: u8) -> Bytes {
        match v {
            0 => b("7"),
            1 => b("-70000"),
            2 => b("abc"),
            3 => Bytes::from(vec![b'x'; 70]),
            4 => b("9999999999"),
            _ => b(""),
        }
    }

    proptest::proptest! {
        /// The list behaves as a Vec, and its listpack size stays the sum
        /// of its elements' sizes.
        #[test]
        fn behaves_like_a_vec(ops in proptest::collection::vec(op(), 0..200)) {
            let mut l = List::new();
            let mut m: Vec<Bytes> = Vec::new();
            for o in ops {
                match o {
                    Op::Push(left, v) => {
                        if left { l.push(End::Left, &val(v)); m.insert(0, val(v)); }
                        else { l.push(End::Right, &val(v)); m.push(val(v)); }
                    }
                    Op::Pop(left) => {
                        let want = if m.is_empty() { None } else if left { Some(m.remove(0)) } else { m.pop() };
                        let end = if left { End::Left } else { End::Right };
                        proptest::prop_assert_eq!(l.pop(end), want);
                    }
                    Op::Set(i, v) => {
                        let n = m.len() as i64;
                        let j = if i < 0 { n + i } else { i };
                        let ok = (0..n).contains(&j);
                        if ok { m[j as usize] = val(v); }
                        proptest::prop_assert_eq!(l.set(i, &val(v)), ok);
                    }
                    Op::Insert(after, p, v) => {
                        let pos = m.iter().position(|e| *e == val(p));
                        if let Some(i) = pos { m.insert(if after { i + 1 } else { i }, val(v)); }
                        proptest::prop_assert_eq!(l.insert(after, &val(p), &val(v)), pos.is_some());
                    }
                    Op::Remove(c, v) => {
                        let before = m.len();
                        let target = val(v);
                        let mut left = if c == 0 { usize::MAX } else { c.unsigned_abs() as usize };
                        if c >= 0 {
                            m.retain(|e| if *e == target && left > 0 { left -= 1; false } else { true });
                        } else {
                            let mut r: Vec<Bytes> = m.into_iter().rev().collect();
                            r.retain(|e| if *e == target && left > 0 { left -= 1; false } else { true });
                            m = r.into_iter().rev().collect();
                        }
                        proptest::prop_assert_eq!(l.remove(c, &target), before - m.len());
                    }
                    Op::Trim(a, z) => {
                        let keep = l.clamp(a, z);
                        m = match keep { None => Vec::new(), Some((x, y)) => m[x..=y].to_vec() };
                        l.trim(keep);
                    }
                }
                let got: Vec<Bytes> = l.iter().map(Bytes::copy_from_slice).collect();
                proptest::prop_assert_eq!(&got, &m);
                proptest::prop_assert_eq!(l.len(), m.len());
                let (from, to) = (m.len() / 3, m.len().saturating_sub(1));
                if !m.is_empty() {
                    let part: Vec<Bytes> = l.range(from, to).map(Bytes::copy_from_slice).collect();
                    proptest::prop_assert_eq!(&part[..], &m[from..=to]);
                    for (i, e) in m.iter().enumerate() {
                        proptest::prop_assert_eq!(l.get(i as i64), Some(&e[..]));
                    }
                }
                let size: usize = m.iter().map(|v| lp_entry_bytes(v)).sum();
                proptest::prop_assert_eq!(l.packed_bytes, size);
            }
        }
    }
}
