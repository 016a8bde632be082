//! [`Set`]: the value of a set key (SADD/SREM/SMEMBERS/...), pure data with
//! no threads or IO.
//!
//! Three encodings, switched where Redis 7.2+ switches them, so that
//! `OBJECT ENCODING` and the member order of small sets match Redis:
//! * `intset`: sorted `i64`s, while every member is a canonical integer and
//!   there are at most `set-max-intset-entries` of them;
//! * `listpack`: members in insertion order, while there are fewer than
//!   `set-max-listpack-entries` and none is longer than `set-max-listpack-value`;
//! * `hashtable`: a hash set, beyond those limits (never converted back).
//!
//! # Source
//! redis/src/t_set.c: `setTypeCreate`, `setTypeAddAux`, `maybeConvertIntset`,
//! `setTypeMaybeConvert` (7.2).

use std::collections::HashSet;

use bytes::Bytes;

use crate::cmd::args::parse_i64;

/// The set encoding thresholds (`set-max-intset-entries`,
/// `set-max-listpack-entries`, `set-max-listpack-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetLimits {
    pub max_intset_entries: usize,
    pub max_listpack_entries: usize,
    /// Longest member a listpack set holds, bytes.
    pub max_listpack_value_bytes: usize,
}

impl Default for SetLimits {
    /// Redis's defaults: 512, 128, 64.
    fn default() -> Self {
        SetLimits {
            max_intset_entries: 512,
            max_listpack_entries: 128,
            max_listpack_value_bytes: 64,
        }
    }
}

impl SetLimits {
    /// `intsetMaxEntries`: the configured cap, at most 2^30.
    fn intset_max(&self) -> usize {
        self.max_intset_entries.min(1 << 30)
    }
}

/// A set value.
#[derive(Clone, Debug)]
pub enum Set {
    /// Sorted integers.
    Int(Vec<i64>),
    /// Members in insertion order.
    Pack(Vec<Bytes>),
    /// A hash set.
    Hash(HashSet<Bytes>),
}

/// Decimal digits of `n` with its sign (`sdigits10`).
fn sdigits10(n: i64) -> usize {
    let mut buf = itoa::Buffer::new();
    buf.format(n).len()
}

impl Set {
    /// An empty set in the encoding Redis picks for a first member `first`
    /// and about `size_hint` members.
    ///
    /// # Source
    /// `setTypeCreate`, redis/src/t_set.c.
    pub fn create(first: &[u8], size_hint: usize, limits: &SetLimits) -> Set {
        if parse_i64(first).is_some() && size_hint <= limits.max_intset_entries {
            Set::Int(Vec::new())
        } else if size_hint <= limits.max_listpack_entries {
            Set::Pack(Vec::new())
        } else {
            Set::Hash(HashSet::with_capacity(size_hint))
        }
    }

    /// SADD of `size_hint` members to an existing set: a set that will not
    /// fit its encoding becomes a hash table first.
    ///
    /// # Source
    /// `setTypeMaybeConvert`, redis/src/t_set.c.
    pub fn maybe_convert(&mut self, size_hint: usize, limits: &SetLimits) {
        let over = match self {
            Set::Pack(_) => size_hint > limits.max_listpack_entries,
            Set::Int(_) => size_hint > limits.max_intset_entries,
            Set::Hash(_) => false,
        };
        if over {
            self.convert_to_hash();
        }
    }

    fn convert_to_hash(&mut self) {
        let members: HashSet<Bytes> = self.iter().collect();
        *self = Set::Hash(members);
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            Set::Int(v) => v.len(),
            Set::Pack(v) => v.len(),
            Set::Hash(h) => h.len(),
        }
    }

    /// Whether the set is empty (the key is then deleted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `OBJECT ENCODING`: `intset`, `listpack` or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Int(_) => "intset",
            Set::Pack(_) => "listpack",
            Set::Hash(_) => "hashtable",
        }
    }

    /// Whether `m` is a member.
    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Int(v) => parse_i64(m).is_some_and(|n| v.binary_search(&n).is_ok()),
            Set::Pack(v) => v.iter().any(|x| x[..] == *m),
            Set::Hash(h) => h.contains(m),
        }
    }

    /// Add `m`; returns whether it was new. Converts the encoding as Redis does.
    ///
    /// # Source
    /// `setTypeAddAux`, redis/src/t_set.c (7.2).
    pub fn add(&mut self, m: &[u8], limits: &SetLimits) -> bool {
        match self {
            Set::Hash(h) => {
                if h.contains(m) {
                    return false;
                }
                h.insert(Bytes::copy_from_slice(m))
            }
            Set::Pack(v) => {
                if v.iter().any(|x| x[..] == *m) {
                    return false;
                }
                if v.len() < limits.max_listpack_entries
                    && m.len() <= limits.max_listpack_value_bytes
                {
                    v.push(Bytes::copy_from_slice(m));
                } else {
                    self.convert_to_hash();
                    if let Set::Hash(h) = self {
                        h.insert(Bytes::copy_from_slice(m));
                    }
                }
                true
            }
            Set::Int(v) => {
                if let Some(n) = parse_i64(m) {
                    let Err(at) = v.binary_search(&n) else {
                        return false;
                    };
                    v.insert(at, n);
                    if v.len() > limits.intset_max() {
                        self.convert_to_hash();
                    }
                    return true;
                }
                let longest = match (v.first(), v.last()) {
                    (Some(&lo), Some(&hi)) => sdigits10(lo).max(sdigits10(hi)),
                    _ => 0,
                };
                if v.len() < limits.max_listpack_entries
                    && m.len() <= limits.max_listpack_value_bytes
                    && longest <= limits.max_listpack_value_bytes
                {
                    let mut members: Vec<Bytes> = self.iter().collect();
                    members.push(Bytes::copy_from_slice(m));
                    *self = Set::Pack(members);
                } else {
                    self.convert_to_hash();
                    if let Set::Hash(h) = self {
                        h.insert(Bytes::copy_from_slice(m));
                    }
                }
                true
            }
        }
    }

    /// Remove `m`; returns whether it was a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Int(v) => match parse_i64(m).map(|n| v.binary_search(&n)) {
                Some(Ok(i)) => {
                    v.remove(i);
                    true
                }
                _ => false,
            },
            Set::Pack(v) => match v.iter().position(|x| x[..] == *m) {
                Some(i) => {
                    v.remove(i);
                    true
                }
                None => false,
            },
            Set::Hash(h) => h.remove(m),
        }
    }

    /// Every member, in the encoding's order (ascending integers, insertion
    /// order, or hash order).
    pub fn iter(&self) -> Box<dyn Iterator<Item = Bytes> + '_> {
        match self {
            Set::Int(v) => Box::new(v.iter().map(|n| {
                let mut buf = itoa::Buffer::new();
                Bytes::copy_from_slice(buf.format(*n).as_bytes())
            })),
            Set::Pack(v) => Box::new(v.iter().cloned()),
            Set::Hash(h) => Box::new(h.iter().cloned()),
        }
    }

    /// The member at position `i` (`i < len`) of an arbitrary but fixed
    /// order: how random members are drawn. O(1) for intset and listpack,
    /// O(n) for a hash table.
    pub fn nth(&self, i: usize) -> Option<Bytes> {
        match self {
            Set::Int(v) => v.get(i).map(|n| {
                let mut buf = itoa::Buffer::new();
                Bytes::copy_from_slice(buf.format(*n).as_bytes())
            }),
            Set::Pack(v) => v.get(i).cloned(),
            Set::Hash(h) => h.iter().nth(i).cloned(),
        }
    }

    /// Up to `count` distinct members drawn at random with `rand` (a source
    /// of uniform `u64`s), in random order.
    pub fn random_distinct(&self, count: usize, mut rand: impl FnMut() -> u64) -> Vec<Bytes> {
        let len = self.len();
        if count >= len {
            let mut all: Vec<Bytes> = self.iter().collect();
            shuffle(&mut all, &mut rand);
            return all;
        }
        // Partial Fisher-Yates over positions: O(count) draws.
        let mut members: Vec<Bytes> = self.iter().collect();
        for i in 0..count {
            let j = i + (rand() % (len - i) as u64) as usize;
            members.swap(i, j);
        }
        members.truncate(count);
        members
    }

    /// Approximate heap footprint in bytes (MEMORY USAGE).
    pub fn memory_usage_bytes(&self) -> usize {
        match self {
            Set::Int(v) => v.capacity() * 8,
            Set::Pack(v) => {
                v.capacity() * std::mem::size_of::<Bytes>()
                    + v.iter().map(|m| m.len()).sum::<usize>()
            }
            Set::Hash(h) => {
                h.capacity() * (std::mem::size_of::<Bytes>() + 8)
                    + h.iter().map(|m| m.len()).sum::<usize>()
            }
        }
    }
}

/// Fisher-Yates shuffle with `rand`.
pub fn shuffle<T>(v: &mut [T], rand: &mut impl FnMut() -> u64) {
    for i in (1..v.len()).rev() {
        let j = (rand() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(s: &Set) -> Vec<String> {
        s.iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    }

    #[test]
    fn intset_to_listpack_to_hashtable() {
        let lim = SetLimits::default();
        let mut s = Set::create(b"3", 2, &lim);
        assert!(s.add(b"3", &lim));
        assert!(s.add(b"1", &lim));
        assert!(!s.add(b"1", &lim));
        assert_eq!(s.encoding(), "intset");
        assert_eq!(members(&s), ["1", "3"]);
        assert!(s.add(b"a", &lim));
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(members(&s), ["1", "3", "a"]);
        assert!(s.contains(b"3") && s.contains(b"a") && !s.contains(b"b"));
        assert!(s.add(&[b'x'; 65], &lim));
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 4);
        assert!(s.remove(b"a") && !s.remove(b"a"));
    }

    #[test]
    fn intset_past_its_cap_becomes_a_hashtable() {
        let lim = SetLimits {
            max_intset_entries: 2,
            ..SetLimits::default()
        };
        let mut s = Set::create(b"1", 1, &lim);
        for m in ["1", "2", "3"] {
            s.add(m.as_bytes(), &lim);
        }
        assert_eq!(s.encoding(), "hashtable");
        let mut n = 7u64;
        let got = s.random_distinct(2, || {
            n = n.wrapping_mul(6364136223846793005).wrapping_add(1);
            n >> 33
        });
        assert_eq!(got.len(), 2);
        assert_ne!(got[0], got[1]);
    }

    proptest::proptest! {
        /// The set behaves as a set whatever its encoding, and each
        /// encoding holds only what it may.
        #[test]
        fn behaves_like_a_set(
            ops in proptest::collection::vec((proptest::bool::ANY, 0u8..40), 0..200),
            intset in 1usize..20,
            pack in 1usize..20,
        ) {
            let lim = SetLimits { max_intset_entries: intset, max_listpack_entries: pack, max_listpack_value_bytes: 8 };
            let member = |v: u8| -> Vec<u8> {
                match v % 4 {
                    0 | 1 => v.to_string().into_bytes(),
                    2 => format!("m{v}").into_bytes(),
                    _ => format!("long-member-{v}").into_bytes(),
                }
            };
            let mut s = Set::create(&member(ops.first().map_or(0, |o| o.1)), 1, &lim);
            let mut m = std::collections::BTreeSet::new();
            for (add, v) in ops {
                let x = member(v);
                if add {
                    proptest::prop_assert_eq!(s.add(&x, &lim), m.insert(x.clone()));
                } else {
                    proptest::prop_assert_eq!(s.remove(&x), m.remove(&x));
                }
                proptest::prop_assert_eq!(s.len(), m.len());
                let got: std::collections::BTreeSet<Vec<u8>> = s.iter().map(|b| b.to_vec()).collect();
                proptest::prop_assert_eq!(&got, &m);
                match &s {
                    Set::Int(v) => proptest::prop_assert!(v.len() <= intset && v.windows(2).all(|w| w[0] < w[1])),
                    Set::Pack(v) => proptest::prop_assert!(v.len() <= pack && v.iter().all(|x| x.len() <= 8)),
                    Set::Hash(_) => {}
                }
            }
        }
    }
}
