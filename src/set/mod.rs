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

use indexmap::IndexSet;

use bytes::Bytes;

use crate::cmd::args::parse_i64;

/// The set encoding thresholds (`set-max-intset-entries`,
/// `set-max-listpack-entries`, `set-max-listpack-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetLimits {
    /// `set-max-intset-entries`: most members of an intset.
    pub max_intset_entries: usize,
    /// `set-max-listpack-entries`: a listpack set has fewer members than this.
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

/// The members of an intset: sorted integers stored at the narrowest width
/// that holds them all (16, 32 or 64 bits), widened when a member needs
/// it, as Redis's intset does.
#[derive(Clone, Debug)]
pub enum Ints {
    /// Every member fits 16 bits.
    W16(Vec<i16>),
    /// Every member fits 32 bits, one needs more than 16.
    W32(Vec<i32>),
    /// One member needs 64 bits.
    W64(Vec<i64>),
}

/// Run `$body` with `$v` bound to the vector of whichever width `$ints` has.
macro_rules! each_width {
    ($ints:expr, $v:ident => $body:expr) => {
        match $ints {
            Ints::W16($v) => $body,
            Ints::W32($v) => $body,
            Ints::W64($v) => $body,
        }
    };
}

impl Default for Ints {
    fn default() -> Self {
        Ints::W16(Vec::new())
    }
}

impl Ints {
    /// Number of members.
    pub fn len(&self) -> usize {
        each_width!(self, v => v.len())
    }

    /// Whether there are no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Member at position `i < len`.
    pub fn get(&self, i: usize) -> i64 {
        match self {
            Ints::W16(v) => i64::from(v[i]),
            Ints::W32(v) => i64::from(v[i]),
            Ints::W64(v) => v[i],
        }
    }

    /// Position of `n`, or where it would go.
    fn search(&self, n: i64) -> Result<usize, usize> {
        let len = self.len();
        let out_of_width = match self {
            Ints::W16(_) => i16::try_from(n).is_err(),
            Ints::W32(_) => i32::try_from(n).is_err(),
            Ints::W64(_) => false,
        };
        if out_of_width {
            // Wider than every member: below them all or above them all.
            return Err(if n < 0 { 0 } else { len });
        }
        match self {
            Ints::W16(v) => v.binary_search(&(n as i16)),
            Ints::W32(v) => v.binary_search(&(n as i32)),
            Ints::W64(v) => v.binary_search(&n),
        }
    }

    /// Whether `n` is a member.
    pub fn contains(&self, n: i64) -> bool {
        self.search(n).is_ok()
    }

    /// Widen the storage so that `n` fits.
    fn widen_for(&mut self, n: i64) {
        let need = if i16::try_from(n).is_ok() {
            16
        } else if i32::try_from(n).is_ok() {
            32
        } else {
            64
        };
        let have = match self {
            Ints::W16(_) => 16,
            Ints::W32(_) => 32,
            Ints::W64(_) => 64,
        };
        if need <= have {
            return;
        }
        let all: Vec<i64> = (0..self.len()).map(|i| self.get(i)).collect();
        *self = if need == 32 {
            Ints::W32(all.into_iter().map(|x| x as i32).collect())
        } else {
            Ints::W64(all)
        };
    }

    /// Insert `n`; false when already a member. Grows by exactly one slot
    /// (an insert moves the tail anyway, as in Redis).
    pub fn insert(&mut self, n: i64) -> bool {
        let Err(at) = self.search(n) else {
            return false;
        };
        self.widen_for(n);
        each_width!(self, v => {
            v.reserve_exact(1);
            v.insert(at, n as _);
        });
        true
    }

    /// Remove `n`; false when not a member.
    pub fn remove(&mut self, n: i64) -> bool {
        let Ok(at) = self.search(n) else {
            return false;
        };
        each_width!(self, v => {
            v.remove(at);
        });
        true
    }

    fn heap_bytes(&self) -> usize {
        each_width!(self, v => v.capacity() * std::mem::size_of_val(&v.first().copied().unwrap_or_default()))
    }
}

/// A member as stored: its bytes in an exact-size allocation (16 bytes of
/// handle, where `Bytes` takes 32).
pub type Member = Box<[u8]>;

fn member(m: &[u8]) -> Member {
    m.to_vec().into_boxed_slice()
}

fn int_bytes(n: i64) -> Bytes {
    let mut buf = itoa::Buffer::new();
    Bytes::copy_from_slice(buf.format(n).as_bytes())
}

/// A set value.
#[derive(Clone, Debug)]
pub enum Set {
    /// Sorted integers.
    Int(Ints),
    /// Members in insertion order.
    Pack(Vec<Member>),
    /// A hash set.
    Hash(IndexSet<Member>),
}

/// Decimal digits of `n` with its sign (`sdigits10`).
fn sdigits10(n: i64) -> usize {
    let mut buf = itoa::Buffer::new();
    buf.format(n).len()
}

impl Set {
    /// An empty intset (where `*STORE` results start, as in Redis).
    pub fn empty_intset() -> Set {
        Set::Int(Ints::default())
    }

    /// A hash-table set of `members`.
    pub fn from_hash(members: impl IntoIterator<Item = Bytes>) -> Set {
        Set::Hash(members.into_iter().map(|m| member(&m)).collect())
    }

    /// An empty set in the encoding Redis picks for a first member `first`
    /// and about `size_hint` members.
    ///
    /// # Source
    /// `setTypeCreate`, redis/src/t_set.c.
    pub fn create(first: &[u8], size_hint: usize, limits: &SetLimits) -> Set {
        if parse_i64(first).is_some() && size_hint <= limits.max_intset_entries {
            Set::empty_intset()
        } else if size_hint <= limits.max_listpack_entries {
            Set::Pack(Vec::new())
        } else {
            Set::Hash(IndexSet::with_capacity(size_hint))
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
        let members: IndexSet<Member> = self.iter().map(|m| member(&m)).collect();
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
            Set::Int(v) => parse_i64(m).is_some_and(|n| v.contains(n)),
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
                h.insert(member(m))
            }
            Set::Pack(v) => {
                if v.iter().any(|x| x[..] == *m) {
                    return false;
                }
                if v.len() < limits.max_listpack_entries
                    && m.len() <= limits.max_listpack_value_bytes
                {
                    v.push(member(m));
                } else {
                    self.convert_to_hash();
                    if let Set::Hash(h) = self {
                        h.insert(member(m));
                    }
                }
                true
            }
            Set::Int(v) => {
                if let Some(n) = parse_i64(m) {
                    if !v.insert(n) {
                        return false;
                    }
                    if v.len() > limits.intset_max() {
                        self.convert_to_hash();
                    }
                    return true;
                }
                let longest = match v.len() {
                    0 => 0,
                    n => sdigits10(v.get(0)).max(sdigits10(v.get(n - 1))),
                };
                if v.len() < limits.max_listpack_entries
                    && m.len() <= limits.max_listpack_value_bytes
                    && longest <= limits.max_listpack_value_bytes
                {
                    let mut members: Vec<Member> = self.iter().map(|x| member(&x)).collect();
                    members.push(member(m));
                    *self = Set::Pack(members);
                } else {
                    self.convert_to_hash();
                    if let Set::Hash(h) = self {
                        h.insert(member(m));
                    }
                }
                true
            }
        }
    }

    /// Remove `m`; returns whether it was a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Int(v) => parse_i64(m).is_some_and(|n| v.remove(n)),
            Set::Pack(v) => match v.iter().position(|x| x[..] == *m) {
                Some(i) => {
                    v.remove(i);
                    true
                }
                None => false,
            },
            // O(1): the last member takes the removed one's position.
            Set::Hash(h) => h.swap_remove(m),
        }
    }

    /// Every member, in the encoding's order (ascending integers, insertion
    /// order, or hash order).
    pub fn iter(&self) -> Box<dyn Iterator<Item = Bytes> + '_> {
        match self {
            Set::Int(v) => Box::new((0..v.len()).map(|i| int_bytes(v.get(i)))),
            Set::Pack(v) => Box::new(v.iter().map(|m| Bytes::copy_from_slice(m))),
            Set::Hash(h) => Box::new(h.iter().map(|m| Bytes::copy_from_slice(m))),
        }
    }

    /// The member at position `i` (`i < len`) of an arbitrary but fixed
    /// order: how random members are drawn. O(1) for every encoding.
    pub fn nth(&self, i: usize) -> Option<Bytes> {
        match self {
            Set::Int(v) => (i < v.len()).then(|| int_bytes(v.get(i))),
            Set::Pack(v) => v.get(i).map(|m| Bytes::copy_from_slice(m)),
            Set::Hash(h) => h.get_index(i).map(|m| Bytes::copy_from_slice(m)),
        }
    }

    /// Up to `count` distinct members drawn at random with `rand` (a source
    /// of uniform `u64`s), in random order: the whole set shuffled when
    /// `count` covers it; a partial shuffle of positions when `count` is a
    /// large share of it; otherwise draws of positions with rejection of
    /// repeats (O(count), as Redis's SRANDMEMBER case 4).
    ///
    /// # Source
    /// `srandmemberWithCountCommand`, redis/src/t_set.c (the same cases,
    /// with our own draws).
    pub fn random_distinct(&self, count: usize, mut rand: impl FnMut() -> u64) -> Vec<Bytes> {
        let len = self.len();
        if count >= len {
            let mut all: Vec<Bytes> = self.iter().collect();
            shuffle(&mut all, &mut rand);
            return all;
        }
        if count.saturating_mul(3) > len {
            let mut pos: Vec<usize> = (0..len).collect();
            for i in 0..count {
                let j = i + (rand() % (len - i) as u64) as usize;
                pos.swap(i, j);
            }
            return pos[..count].iter().filter_map(|&i| self.nth(i)).collect();
        }
        let mut chosen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let i = (rand() % len as u64) as usize;
            if chosen.insert(i) {
                out.extend(self.nth(i));
            }
        }
        out
    }

    /// Approximate heap footprint in bytes (MEMORY USAGE).
    pub fn memory_usage_bytes(&self) -> usize {
        match self {
            Set::Int(v) => v.heap_bytes(),
            Set::Pack(v) => {
                v.capacity() * std::mem::size_of::<Member>()
                    + v.iter().map(|m| m.len()).sum::<usize>()
            }
            Set::Hash(h) => {
                // Entries (hash + member) and the index table.
                h.capacity() * (std::mem::size_of::<Member>() + 8 + 8)
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
        assert!(s.add(b"-70000", &lim), "widens to 32 bits");
        assert!(s.add(b"9000000000", &lim), "widens to 64 bits");
        assert!(s.contains(b"-70000") && !s.contains(b"70000"));
        assert!(s.remove(b"-70000") && s.remove(b"9000000000"));
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

    #[test]
    fn random_draws_are_distinct_members_in_every_case() {
        let lim = SetLimits::default();
        let mut s = Set::create(b"x", 1000, &lim);
        for i in 0..1000 {
            s.add(format!("m{i}").as_bytes(), &lim);
        }
        assert_eq!(s.encoding(), "hashtable");
        let mut x = 88172645463325252u64;
        let mut rand = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for count in [1, 10, 333, 334, 999, 1000, 5000] {
            let got = s.random_distinct(count, &mut rand);
            assert_eq!(got.len(), count.min(1000), "count {count}");
            let distinct: std::collections::HashSet<&Bytes> = got.iter().collect();
            assert_eq!(distinct.len(), got.len(), "count {count}");
            assert!(got.iter().all(|m| s.contains(m)));
        }
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
                match v % 5 {
                    0 | 1 => v.to_string().into_bytes(),
                    4 => (i64::from(v) * 1_000_000_000).to_string().into_bytes(),
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
                    Set::Int(v) => proptest::prop_assert!(v.len() <= intset && (1..v.len()).all(|i| v.get(i - 1) < v.get(i))),
                    Set::Pack(v) => proptest::prop_assert!(v.len() <= pack && v.iter().all(|x| x.len() <= 8)),
                    Set::Hash(_) => {}
                }
            }
        }
    }
}
