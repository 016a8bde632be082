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
    Left,
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

/// A list value.
#[derive(Clone, Debug, Default)]
pub struct List {
    items: VecDeque<Bytes>,
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
        self.items.len()
    }

    /// Whether the list has no elements (the key is then deleted).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
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

    /// Push `v` at `end`.
    pub fn push(&mut self, end: End, v: Bytes) {
        self.packed_bytes += lp_entry_bytes(&v);
        match end {
            End::Left => self.items.push_front(v),
            End::Right => self.items.push_back(v),
        }
    }

    /// Pop one element from `end`.
    pub fn pop(&mut self, end: End) -> Option<Bytes> {
        let v = match end {
            End::Left => self.items.pop_front(),
            End::Right => self.items.pop_back(),
        }?;
        self.packed_bytes -= lp_entry_bytes(&v);
        Some(v)
    }

    /// Element at `index` (negative: from the tail, -1 = last).
    pub fn get(&self, index: i64) -> Option<&Bytes> {
        self.items.get(self.resolve(index)?)
    }

    /// Replace the element at `index`; false when out of range.
    pub fn set(&mut self, index: i64, v: Bytes) -> bool {
        let Some(i) = self.resolve(index) else {
            return false;
        };
        self.packed_bytes += lp_entry_bytes(&v);
        let old = std::mem::replace(&mut self.items[i], v);
        self.packed_bytes -= lp_entry_bytes(&old);
        true
    }

    fn resolve(&self, index: i64) -> Option<usize> {
        let len = self.items.len() as i64;
        let i = if index < 0 { len + index } else { index };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// Clamp Redis's `start` / `stop` (inclusive, negative from the tail) to
    /// an index range; `None` when empty.
    ///
    /// # Source
    /// `lrangeCommand` / `ltrimCommand`, redis/src/t_list.c.
    pub fn clamp(&self, start: i64, stop: i64) -> Option<(usize, usize)> {
        let len = self.items.len() as i64;
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
    pub fn range(&self, from: usize, to: usize) -> impl DoubleEndedIterator<Item = &Bytes> {
        self.items.range(from..=to)
    }

    /// Every element, head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Bytes> + ExactSizeIterator {
        self.items.iter()
    }

    /// Keep only elements `from..=to`; `None` empties the list.
    pub fn trim(&mut self, keep: Option<(usize, usize)>) {
        match keep {
            None => {
                self.items.clear();
                self.packed_bytes = 0;
            }
            Some((from, to)) => {
                self.items.truncate(to + 1);
                self.items.drain(..from);
                self.packed_bytes = self.items.iter().map(|v| lp_entry_bytes(v)).sum();
            }
        }
    }

    /// Insert `v` before or after the first element equal to `pivot`.
    /// Returns false when there is no such element.
    pub fn insert(&mut self, after: bool, pivot: &[u8], v: Bytes) -> bool {
        let Some(i) = self.items.iter().position(|e| e[..] == *pivot) else {
            return false;
        };
        self.packed_bytes += lp_entry_bytes(&v);
        self.items.insert(if after { i + 1 } else { i }, v);
        true
    }

    /// Remove elements equal to `v`: the first `count` from the head
    /// (`count` > 0), from the tail (< 0), or all (0). Returns how many.
    pub fn remove(&mut self, count: i64, v: &[u8]) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        let mut removed = 0;
        if count >= 0 {
            let mut i = 0;
            while i < self.items.len() && removed < limit {
                if self.items[i][..] == *v {
                    self.items.remove(i);
                    removed += 1;
                } else {
                    i += 1;
                }
            }
        } else {
            let mut i = self.items.len();
            while i > 0 && removed < limit {
                i -= 1;
                if self.items[i][..] == *v {
                    self.items.remove(i);
                    removed += 1;
                }
            }
        }
        self.packed_bytes -= removed * lp_entry_bytes(v);
        removed
    }

    /// Approximate heap footprint in bytes (MEMORY USAGE).
    pub fn memory_usage_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<Bytes>()
            + self.items.iter().map(|v| v.len()).sum::<usize>()
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
            l.push(End::Right, b(v));
        }
        l.push(End::Left, b("z"));
        assert_eq!(l.get(0), Some(&b("z")));
        assert_eq!(l.get(-1), Some(&b("c")));
        assert_eq!(l.get(4), None);
        assert_eq!(l.clamp(-100, 100), Some((0, 3)));
        assert_eq!(l.clamp(2, 1), None);
        assert_eq!(l.remove(0, b"b"), 1);
        assert!(l.insert(true, b"a", b("x")));
        let all: Vec<_> = l.iter().cloned().collect();
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
        fn behaves_like_a_vec(ops in proptest::collection::vec(op(), 0..60)) {
            let mut l = List::new();
            let mut m: Vec<Bytes> = Vec::new();
            for o in ops {
                match o {
                    Op::Push(left, v) => {
                        if left { l.push(End::Left, val(v)); m.insert(0, val(v)); }
                        else { l.push(End::Right, val(v)); m.push(val(v)); }
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
                        proptest::prop_assert_eq!(l.set(i, val(v)), ok);
                    }
                    Op::Insert(after, p, v) => {
                        let pos = m.iter().position(|e| *e == val(p));
                        if let Some(i) = pos { m.insert(if after { i + 1 } else { i }, val(v)); }
                        proptest::prop_assert_eq!(l.insert(after, &val(p), val(v)), pos.is_some());
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
                let got: Vec<Bytes> = l.iter().cloned().collect();
                proptest::prop_assert_eq!(&got, &m);
                let size: usize = m.iter().map(|v| lp_entry_bytes(v)).sum();
                proptest::prop_assert_eq!(l.packed_bytes, size);
            }
        }
    }
}
