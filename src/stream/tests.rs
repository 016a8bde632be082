//! Unit tests (Redis edge cases, checked against redis-server 7.0.15) and a
//! property test of the packed store against a naive `BTreeMap` model.

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;

use super::*;

const M: u64 = u64::MAX;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(Bytes, Bytes)> {
    pairs
        .iter()
        .map(|(f, v)| {
            (
                Bytes::copy_from_slice(f.as_bytes()),
                Bytes::copy_from_slice(v.as_bytes()),
            )
        })
        .collect()
}

fn ids(entries: &[Entry]) -> Vec<StreamId> {
    entries.iter().map(|e| e.id).collect()
}

const DEF: NodeLimits = NodeLimits {
    max_entries: 100,
    max_bytes: 4096,
};

fn add(s: &mut Stream, spec: IdSpec) -> Result<StreamId, CmdError> {
    s.append(spec, &kv(&[("f", "v")]), 0, DEF)
}

#[test]
fn auto_ids_never_go_backwards() {
    let mut s = Stream::new();
    assert_eq!(
        s.append(IdSpec::Auto, &kv(&[("f", "v")]), 100, DEF),
        Ok(id(100, 0))
    );
    assert_eq!(
        s.append(IdSpec::Auto, &kv(&[("f", "v")]), 100, DEF),
        Ok(id(100, 1))
    );
    // Clock went back: reuse last ms.
    assert_eq!(
        s.append(IdSpec::Auto, &kv(&[("f", "v")]), 50, DEF),
        Ok(id(100, 2))
    );
    assert_eq!(add(&mut s, IdSpec::Explicit(id(100, M))), Ok(id(100, M)));
    // seq overflow moves to the next ms.
    assert_eq!(
        s.append(IdSpec::Auto, &kv(&[("f", "v")]), 7, DEF),
        Ok(id(101, 0))
    );
    assert_eq!(s.entries_added(), 5);
    assert_eq!(s.len(), 5);
}

#[test]
fn xadd_id_errors_like_redis() {
    let mut s = Stream::new();
    assert_eq!(
        add(&mut s, IdSpec::Explicit(id(0, 0))),
        Err(CmdError::StreamIdZero)
    );
    assert_eq!(add(&mut s, IdSpec::AutoSeq { ms: 0 }), Ok(id(0, 1)));
    assert_eq!(
        add(&mut s, IdSpec::Explicit(id(0, 1))),
        Err(CmdError::StreamIdTooSmall)
    );
    assert_eq!(add(&mut s, IdSpec::AutoSeq { ms: 7 }), Ok(id(7, 0)));
    assert_eq!(add(&mut s, IdSpec::AutoSeq { ms: 7 }), Ok(id(7, 1)));
    assert_eq!(
        add(&mut s, IdSpec::AutoSeq { ms: 6 }),
        Err(CmdError::StreamIdTooSmall)
    );
    assert_eq!(add(&mut s, IdSpec::Explicit(id(9, M))), Ok(id(9, M)));
    // Redis >= 7.2 (and the 7.0 code intent): EDOM → "equal or smaller".
    // redis-server 7.0.15 itself replies "ERR Elements are too large to be stored".
    assert_eq!(
        add(&mut s, IdSpec::AutoSeq { ms: 9 }),
        Err(CmdError::StreamIdTooSmall)
    );
    assert_eq!(
        add(&mut s, IdSpec::Explicit(StreamId::MAX)),
        Ok(StreamId::MAX)
    );
    // Exhausted is reported for any ID, except an explicit 0-0 which is checked first.
    assert_eq!(add(&mut s, IdSpec::Auto), Err(CmdError::StreamExhausted));
    assert_eq!(
        add(&mut s, IdSpec::AutoSeq { ms: 5 }),
        Err(CmdError::StreamExhausted)
    );
    assert_eq!(
        add(&mut s, IdSpec::Explicit(id(0, 1))),
        Err(CmdError::StreamExhausted)
    );
    assert_eq!(
        add(&mut s, IdSpec::Explicit(id(0, 0))),
        Err(CmdError::StreamIdZero)
    );
    assert_eq!(s.len(), 5);
    assert_eq!(s.next_id(IdSpec::Auto, 0), Err(CmdError::StreamExhausted));
}

#[test]
fn xdel_and_xtrim_metadata_like_redis() {
    // Mirrors: XADD s 1..6; XTRIM s MAXLEN 2; XDEL s 5-0; XTRIM s MAXLEN 0;
    // XADD s 7-0; XDEL s 7-0 (XINFO STREAM after each, redis-server 7.0.15).
    let mut s = Stream::new();
    for ms in 1..=6 {
        add(&mut s, IdSpec::Explicit(id(ms, 0))).unwrap();
    }
    assert_eq!(s.first_id(), id(1, 0));
    let maxlen = |n, approx| TrimSpec {
        strategy: TrimStrategy::MaxLen(n),
        approx,
        limit: None,
        refs: Default::default(),
    };
    assert_eq!(s.trim(maxlen(2, false), DEF), 4);
    assert_eq!(
        (s.len(), s.first_id(), s.max_deleted_entry_id()),
        (2, id(5, 0), id(0, 0))
    );
    assert!(s.delete(id(5, 0)));
    assert!(!s.delete(id(5, 0)));
    assert_eq!(
        (s.len(), s.first_id(), s.max_deleted_entry_id()),
        (1, id(6, 0), id(5, 0))
    );
    assert_eq!(s.trim(maxlen(0, false), DEF), 1);
    assert_eq!(
        (s.len(), s.first_id(), s.max_deleted_entry_id()),
        (0, id(0, 0), id(5, 0))
    );
    assert_eq!(s.node_count(), 0);
    assert_eq!(s.last_id(), id(6, 0));
    add(&mut s, IdSpec::Explicit(id(7, 0))).unwrap();
    assert!(s.delete(id(7, 0)));
    assert_eq!(
        (s.first_id(), s.max_deleted_entry_id(), s.entries_added()),
        (id(0, 0), id(7, 0), 7)
    );
}

#[test]
fn approx_trim_removes_whole_nodes_only() {
    let lim = NodeLimits {
        max_entries: 3,
        max_bytes: 0,
    };
    let mut s = Stream::new();
    for ms in 1..=10 {
        s.append(IdSpec::Explicit(id(ms, 0)), &kv(&[("f", "v")]), 0, lim)
            .unwrap();
    }
    assert_eq!(s.node_live_counts(), vec![3, 3, 3, 1]);
    let spec = |strategy, limit| TrimSpec {
        strategy,
        approx: true,
        limit,
        refs: Default::default(),
    };
    assert_eq!(s.trim(spec(TrimStrategy::MaxLen(8), None), lim), 0);
    assert_eq!(s.trim(spec(TrimStrategy::MaxLen(7), Some(2)), lim), 0);
    assert_eq!(s.trim(spec(TrimStrategy::MaxLen(2), Some(5)), lim), 3);
    assert_eq!(s.trim(spec(TrimStrategy::MinId(id(9, 0)), None), lim), 3);
    assert_eq!(s.first_id(), id(7, 0));
    assert_eq!(s.len(), 4);
    assert_eq!(lim.default_approx_trim_limit(), 300);
    assert_eq!(
        NodeLimits {
            max_entries: 0,
            max_bytes: 0
        }
        .default_approx_trim_limit(),
        10_000
    );
}

/// Found by the proptest once it checked `check_invariants`: Redis 7.0 let
/// XSETID set `last_id` below a tombstone (it checked only the last live
/// entry), so a later entry could follow a greater deleted ID in the same
/// node (7.0.15: XADD 1-0, XADD 1-7, XDEL 1-7, XSETID 1-0, XADD 1-5 →
/// `XRANGE s 1-0 1-6` gives 1-0 and 1-5). Redis 8.0 refuses that XSETID
/// (`smaller than current max_deleted_entry_id`); readers still skip
/// tombstones before comparing IDs, shown here with the max deleted ID set
/// back by an explicit MAXDELETEDID.
#[test]
fn append_after_xsetid_below_a_tombstone() {
    let mut s = Stream::new();
    add(&mut s, IdSpec::Explicit(id(1, 0))).unwrap();
    add(&mut s, IdSpec::Explicit(id(1, 7))).unwrap();
    assert!(s.delete(id(1, 7)));
    assert_eq!(
        s.set_last_id(id(1, 0), None, None),
        Err(CmdError::msg(ERR_XSETID_SMALLER_THAN_CURRENT_MAX_DELETED))
    );
    // Allowed: last ID stays at or above the max deleted ID, which the
    // caller lowers first (XSETID 1-7 MAXDELETEDID 1-0, then XSETID 1-0).
    s.set_last_id(id(1, 7), None, Some(id(1, 0))).unwrap();
    s.set_last_id(id(1, 0), None, None).unwrap();
    assert_eq!(add(&mut s, IdSpec::Explicit(id(1, 5))), Ok(id(1, 5)));
    assert_eq!(s.check_invariants(), Ok(()));
    assert_eq!(
        ids(&s.range(id(1, 0), id(1, 6), None, false)),
        vec![id(1, 0), id(1, 5)]
    );
    assert_eq!(
        ids(&s.range(StreamId::MIN, StreamId::MAX, None, true)),
        vec![id(1, 5), id(1, 0)]
    );
    assert_eq!(s.get(id(1, 5)).map(|e| e.id), Some(id(1, 5)));
    assert!(s.get(id(1, 7)).is_none());
    assert!(s.delete(id(1, 5)));
    assert_eq!(s.len(), 1);
    assert_eq!(s.check_invariants(), Ok(()));
}

#[test]
fn xsetid_checks_like_redis() {
    let mut s = Stream::new();
    for ms in 1..=3 {
        add(&mut s, IdSpec::Explicit(id(ms, 0))).unwrap();
    }
    let err = |t: &'static str| Err(CmdError::msg(t));
    assert_eq!(
        s.set_last_id(id(2, 0), None, None),
        err(ERR_XSETID_SMALLER_THAN_TOP)
    );
    assert_eq!(s.set_last_id(id(3, 0), None, None), Ok(()));
    assert_eq!(
        s.set_last_id(id(10, 0), Some(2), None),
        err(ERR_XSETID_ENTRIES_ADDED_SMALL)
    );
    assert_eq!(
        s.set_last_id(id(1, 0), Some(1), Some(id(11, 0))),
        err(ERR_XSETID_SMALLER_THAN_MAX_DELETED)
    );
    assert_eq!(
        s.set_last_id(id(2, 0), Some(1), None),
        err(ERR_XSETID_SMALLER_THAN_TOP)
    );
    assert_eq!(s.set_last_id(id(10, 0), Some(5), Some(id(9, 0))), Ok(()));
    assert_eq!(
        (s.last_id(), s.entries_added(), s.max_deleted_entry_id()),
        (id(10, 0), 5, id(9, 0))
    );
    // Lowering last_id below the max deleted ID is refused (Redis 8.0); with
    // the max deleted ID lowered first it goes, and later entries still read in order.
    assert!(s.delete(id(3, 0)));
    assert_eq!(
        s.set_last_id(id(2, 5), None, Some(StreamId::MIN)),
        err(ERR_XSETID_SMALLER_THAN_CURRENT_MAX_DELETED)
    );
    assert_eq!(s.max_deleted_entry_id(), id(9, 0));
    assert_eq!(s.set_last_id(id(10, 0), None, Some(id(2, 0))), Ok(()));
    assert_eq!(s.set_last_id(id(2, 5), None, Some(StreamId::MIN)), Ok(()));
    assert_eq!(s.max_deleted_entry_id(), id(2, 0)); // 0-0 means "not given"
    assert_eq!(add(&mut s, IdSpec::Explicit(id(2, 6))), Ok(id(2, 6)));
    assert_eq!(
        ids(&s.range(StreamId::MIN, id(2, 10), None, false)),
        vec![id(1, 0), id(2, 0), id(2, 6)]
    );
    assert_eq!(
        ids(&s.range(id(2, 1), StreamId::MAX, None, true)),
        vec![id(2, 6)]
    );
    assert!(s.contains(id(2, 6)));
    // Empty stream: any ID goes.
    let mut e = Stream::new();
    assert_eq!(e.set_last_id(StreamId::MIN, Some(0), None), Ok(()));
}

#[test]
fn range_count_and_reverse() {
    let lim = NodeLimits {
        max_entries: 2,
        max_bytes: 4096,
    };
    let mut s = Stream::new();
    for ms in [5, 5, 5, 6] {
        s.append(IdSpec::AutoSeq { ms }, &kv(&[("f", "v")]), 0, lim)
            .unwrap();
    }
    let all = ids(&s.range(StreamId::MIN, StreamId::MAX, None, false));
    assert_eq!(all, vec![id(5, 0), id(5, 1), id(5, 2), id(6, 0)]);
    assert_eq!(
        ids(&s.range(id(5, 1), id(5, M), None, false)),
        vec![id(5, 1), id(5, 2)]
    );
    assert_eq!(
        ids(&s.range(StreamId::MIN, StreamId::MAX, Some(2), true)),
        vec![id(6, 0), id(5, 2)]
    );
    assert!(s
        .range(StreamId::MIN, StreamId::MAX, Some(0), false)
        .is_empty());
    assert!(s
        .range(StreamId::MAX, StreamId::MIN, None, false)
        .is_empty());
    assert!(s.range(StreamId::MAX, StreamId::MIN, None, true).is_empty());
    assert_eq!(s.get(id(5, 2)).unwrap().fields, kv(&[("f", "v")]));
    assert_eq!(s.first_entry().unwrap().id, id(5, 0));
    assert_eq!(s.last_entry().unwrap().id, id(6, 0));
    assert!(s.memory_usage_bytes() > std::mem::size_of::<Stream>());
}

// ---------------------------------------------------------------------------
// Property test: packed store vs. naive model.

#[derive(Default, Debug)]
struct Model {
    entries: BTreeMap<StreamId, Vec<(Bytes, Bytes)>>,
    last_id: StreamId,
    max_deleted: StreamId,
    entries_added: u64,
}

impl Model {
    fn first_id(&self) -> StreamId {
        self.entries.keys().next().copied().unwrap_or(StreamId::MIN)
    }

    fn next_id(&self, spec: IdSpec, now_ms: u64) -> Result<StreamId, CmdError> {
        if spec == IdSpec::Explicit(StreamId::MIN) {
            return Err(CmdError::StreamIdZero);
        }
        if self.last_id == StreamId::MAX {
            return Err(CmdError::StreamExhausted);
        }
        let l = self.last_id;
        let cand = match spec {
            IdSpec::Auto if now_ms > l.ms => id(now_ms, 0),
            IdSpec::Auto if l.seq == M => id(l.ms + 1, 0),
            IdSpec::Auto => id(l.ms, l.seq + 1),
            IdSpec::AutoSeq { ms } if ms == l.ms && l.seq == M => {
                return Err(CmdError::StreamIdTooSmall)
            }
            IdSpec::AutoSeq { ms } if ms == l.ms => id(ms, l.seq + 1),
            IdSpec::AutoSeq { ms } => id(ms, 0),
            IdSpec::Explicit(x) => x,
        };
        if cand <= l {
            Err(CmdError::StreamIdTooSmall)
        } else {
            Ok(cand)
        }
    }

    fn set_last_id(
        &mut self,
        new: StreamId,
        added: Option<u64>,
        maxdel: Option<StreamId>,
    ) -> Result<(), CmdError> {
        if maxdel.is_some_and(|m| new < m) {
            return Err(CmdError::msg(ERR_XSETID_SMALLER_THAN_MAX_DELETED));
        }
        if new < self.max_deleted {
            return Err(CmdError::msg(ERR_XSETID_SMALLER_THAN_CURRENT_MAX_DELETED));
        }
        if self
            .entries
            .keys()
            .next_back()
            .is_some_and(|&top| new < top)
        {
            return Err(CmdError::msg(ERR_XSETID_SMALLER_THAN_TOP));
        }
        if added.is_some_and(|n| n < self.entries.len() as u64) {
            return Err(CmdError::msg(ERR_XSETID_ENTRIES_ADDED_SMALL));
        }
        self.last_id = new;
        if let Some(n) = added {
            self.entries_added = n;
        }
        if let Some(m) = maxdel.filter(|m| *m != StreamId::MIN) {
            self.max_deleted = m;
        }
        Ok(())
    }

    fn range(&self, start: StreamId, end: StreamId, count: Option<usize>, rev: bool) -> Vec<Entry> {
        if start > end {
            return vec![];
        }
        let it = self.entries.range(start..=end).map(|(k, v)| Entry {
            id: *k,
            fields: v.clone(),
        });
        let v: Vec<Entry> = if rev {
            it.rev().collect()
        } else {
            it.collect()
        };
        match count {
            Some(n) => v.into_iter().take(n).collect(),
            None => v,
        }
    }

    /// How many entries an exact, unlimited trim removes.
    fn exact_trim_count(&self, strategy: TrimStrategy) -> u64 {
        match strategy {
            TrimStrategy::MaxLen(n) => (self.entries.len() as u64).saturating_sub(n),
            TrimStrategy::MinId(min) => self.entries.range(..min).count() as u64,
        }
    }

    fn remove_oldest(&mut self, n: u64) {
        for _ in 0..n {
            self.entries.pop_first();
        }
    }
}

#[derive(Clone, Debug)]
enum IdGen {
    Auto {
        now_ms: u64,
    },
    AutoSeq {
        dms: i8,
    },
    /// last_id.ms + dms, seq.
    ExplicitRel {
        dms: i8,
        seq: u64,
    },
    ExplicitAbs(StreamId),
}

#[derive(Clone, Debug)]
enum Op {
    Append(IdGen, Vec<(Bytes, Bytes)>),
    /// Delete the n-th live entry (mod len), or a random ID.
    DeleteNth(usize),
    DeleteId(StreamId),
    Trim(TrimSpec),
    /// XSETID relative to the current top entry.
    SetId {
        dms: i8,
        seq: u64,
        added: Option<u64>,
        maxdel: Option<StreamId>,
    },
    /// Range between the i-th and j-th live entries (mod len), nudged by -1/0/+1.
    RangeNth {
        i: usize,
        j: usize,
        nudge: (i8, i8),
        count: Option<usize>,
        rev: bool,
    },
    Range {
        start: StreamId,
        end: StreamId,
        count: Option<usize>,
        rev: bool,
    },
}

fn small_id() -> impl Strategy<Value = StreamId> {
    prop_oneof![
        8 => (0u64..40, prop_oneof![0u64..4, Just(M)]).prop_map(|(ms, seq)| id(ms, seq)),
        1 => Just(StreamId::MIN),
        1 => Just(StreamId::MAX),
        1 => (prop_oneof![Just(M - 1), Just(M)], prop_oneof![0u64..3, Just(M)]).prop_map(|(ms, seq)| id(ms, seq)),
    ]
}

fn fields() -> impl Strategy<Value = Vec<(Bytes, Bytes)>> {
    let value = prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..12),
        1 => prop::collection::vec(any::<u8>(), 100..300),
        1 => Just(vec![]),
    ]
    .prop_map(Bytes::from);
    let name = prop::sample::select(vec!["a", "b", "c", ""])
        .prop_map(|n: &'static str| Bytes::from_static(n.as_bytes()));
    prop_oneof![
        // Often the same names as most masters: values only are stored.
        3 => (value.clone(), value.clone()).prop_map(|(x, y)| vec![
            (Bytes::from_static(b"a"), x),
            (Bytes::from_static(b"b"), y)
        ]),
        2 => prop::collection::vec((name, value), 0..4),
    ]
}

fn id_gen() -> impl Strategy<Value = IdGen> {
    prop_oneof![
        4 => (0u64..60).prop_map(|now_ms| IdGen::Auto { now_ms }),
        2 => (-1i8..3).prop_map(|dms| IdGen::AutoSeq { dms }),
        3 => (-1i8..3, prop_oneof![0u64..4, Just(M)]).prop_map(|(dms, seq)| IdGen::ExplicitRel { dms, seq }),
        1 => small_id().prop_map(IdGen::ExplicitAbs),
    ]
}

fn trim_spec() -> impl Strategy<Value = TrimSpec> {
    let strategy = prop_oneof![
        (0u64..30).prop_map(TrimStrategy::MaxLen),
        small_id().prop_map(TrimStrategy::MinId),
    ];
    (strategy, any::<bool>(), prop::option::of(0u64..12)).prop_map(|(strategy, approx, limit)| {
        TrimSpec {
            strategy,
            approx,
            limit,
            refs: Default::default(),
        }
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (id_gen(), fields()).prop_map(|(g, f)| Op::Append(g, f)),
        3 => any::<usize>().prop_map(Op::DeleteNth),
        1 => small_id().prop_map(Op::DeleteId),
        2 => trim_spec().prop_map(Op::Trim),
        1 => (-1i8..3, 0u64..3, prop::option::of(0u64..40), prop::option::of(small_id()))
            .prop_map(|(dms, seq, added, maxdel)| Op::SetId { dms, seq, added, maxdel }),
        3 => (any::<usize>(), any::<usize>(), (-1i8..=1, -1i8..=1), prop::option::of(0usize..6), any::<bool>())
            .prop_map(|(i, j, nudge, count, rev)| Op::RangeNth { i, j, nudge, count, rev }),
        2 => (small_id(), small_id(), prop::option::of(0usize..6), any::<bool>())
            .prop_map(|(start, end, count, rev)| Op::Range { start, end, count, rev }),
    ]
}

fn limits() -> impl Strategy<Value = NodeLimits> {
    prop_oneof![
        Just(NodeLimits {
            max_entries: 3,
            max_bytes: 64
        }),
        Just(NodeLimits {
            max_entries: 1,
            max_bytes: 0
        }),
        Just(NodeLimits {
            max_entries: 2,
            max_bytes: 4096
        }),
        Just(NodeLimits {
            max_entries: 0,
            max_bytes: 40
        }),
        Just(NodeLimits::default()),
    ]
}

fn shift(ms: u64, d: i8) -> u64 {
    if d < 0 {
        ms.saturating_sub(d.unsigned_abs() as u64)
    } else {
        ms.saturating_add(d as u64)
    }
}

fn check_same(s: &Stream, m: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(s.len(), m.entries.len() as u64);
    prop_assert_eq!(s.last_id(), m.last_id);
    prop_assert_eq!(s.first_id(), m.first_id());
    prop_assert_eq!(s.max_deleted_entry_id(), m.max_deleted);
    prop_assert_eq!(s.entries_added(), m.entries_added);
    prop_assert_eq!(
        s.range(StreamId::MIN, StreamId::MAX, None, false),
        m.range(StreamId::MIN, StreamId::MAX, None, false)
    );
    prop_assert_eq!(
        s.range(StreamId::MIN, StreamId::MAX, None, true),
        m.range(StreamId::MIN, StreamId::MAX, None, true)
    );
    prop_assert!(
        s.node_live_counts().iter().all(|&n| n > 0),
        "empty node kept"
    );
    // Reads from inside the stream (each node seeks its first entry): from
    // every live ID, the ones around it, and past the end.
    let mut starts = vec![StreamId::MIN, StreamId::MAX, m.last_id];
    for &id in m.entries.keys() {
        starts.push(id);
        starts.extend(id.next());
        if id.seq > 0 {
            starts.push(StreamId::new(id.ms, id.seq - 1));
        }
    }
    for start in starts {
        for count in [None, Some(1)] {
            prop_assert_eq!(
                s.range(start, StreamId::MAX, count, false),
                m.range(start, StreamId::MAX, count, false),
                "from {:?}",
                start
            );
        }
    }
    Ok(())
}

fn run_ops(lim: NodeLimits, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut s = Stream::new();
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Append(g, f) => {
                let spec = match g {
                    IdGen::Auto { now_ms } => (IdSpec::Auto, now_ms),
                    IdGen::AutoSeq { dms } => (
                        IdSpec::AutoSeq {
                            ms: shift(m.last_id.ms, dms),
                        },
                        0,
                    ),
                    IdGen::ExplicitRel { dms, seq } => {
                        (IdSpec::Explicit(id(shift(m.last_id.ms, dms), seq)), 0)
                    }
                    IdGen::ExplicitAbs(x) => (IdSpec::Explicit(x), 0),
                };
                let want = m.next_id(spec.0, spec.1);
                prop_assert_eq!(s.next_id(spec.0, spec.1), want.clone());
                let got = s.append(spec.0, &f, spec.1, lim);
                prop_assert_eq!(&got, &want);
                if let Ok(new) = want {
                    m.entries.insert(new, f);
                    m.last_id = new;
                    m.entries_added += 1;
                }
            }
            Op::DeleteNth(n) => {
                if let Some(&victim) = m.entries.keys().nth(n % m.entries.len().max(1)) {
                    prop_assert!(s.contains(victim));
                    prop_assert!(s.delete(victim));
                    prop_assert!(!s.contains(victim));
                    m.entries.remove(&victim);
                    m.max_deleted = m.max_deleted.max(victim);
                }
            }
            Op::DeleteId(x) => {
                let had = m.entries.remove(&x).is_some();
                prop_assert_eq!(s.delete(x), had);
                if had {
                    m.max_deleted = m.max_deleted.max(x);
                }
            }
            Op::Trim(spec) => {
                let before_nodes = s.node_live_counts();
                let exact = m.exact_trim_count(spec.strategy);
                let removed = s.trim(spec, lim);
                let limit = match spec.limit {
                    Some(0) => None,
                    Some(n) => Some(n),
                    None if spec.approx => Some(lim.default_approx_trim_limit()),
                    None => None,
                };
                prop_assert!(removed <= exact, "removed {} > exact {}", removed, exact);
                if let Some(l) = limit {
                    prop_assert!(removed <= l);
                }
                if limit.is_none() && !spec.approx {
                    prop_assert_eq!(removed, exact);
                }
                if spec.approx {
                    // Whole nodes only: `removed` is a prefix sum of node sizes.
                    let mut acc = 0;
                    let mut ok = removed == 0;
                    for n in before_nodes {
                        acc += n;
                        ok |= acc == removed;
                    }
                    prop_assert!(ok, "approx trim split a node: removed {}", removed);
                }
                m.remove_oldest(removed);
            }
            Op::SetId {
                dms,
                seq,
                added,
                maxdel,
            } => {
                let base = m.entries.keys().next_back().copied().unwrap_or(m.last_id);
                let new = id(shift(base.ms, dms), seq);
                let want = m.set_last_id(new, added, maxdel);
                prop_assert_eq!(s.set_last_id(new, added, maxdel), want);
            }
            Op::RangeNth {
                i,
                j,
                nudge,
                count,
                rev,
            } => {
                let n = m.entries.len().max(1);
                let pick = |k: usize, d: i8| {
                    let base = m.entries.keys().nth(k % n).copied().unwrap_or_default();
                    match d {
                        -1 => base.prev().unwrap_or(base),
                        1 => base.next().unwrap_or(base),
                        _ => base,
                    }
                };
                let (start, end) = (pick(i, nudge.0), pick(j, nudge.1));
                prop_assert_eq!(
                    s.range(start, end, count, rev),
                    m.range(start, end, count, rev)
                );
                prop_assert_eq!(s.contains(start), m.entries.contains_key(&start));
                prop_assert_eq!(
                    s.has_entry_from(start),
                    m.entries.range(start..).next().is_some()
                );
            }
            Op::Range {
                start,
                end,
                count,
                rev,
            } => {
                prop_assert_eq!(
                    s.range(start, end, count, rev),
                    m.range(start, end, count, rev)
                );
                if let Some(e) = m.entries.keys().next() {
                    prop_assert_eq!(s.get(*e).map(|e| e.fields), m.entries.get(e).cloned());
                }
                prop_assert_eq!(s.contains(start), m.entries.contains_key(&start));
                prop_assert_eq!(
                    s.has_entry_from(start),
                    m.entries.range(start..).next().is_some()
                );
            }
        }
        check_same(&s, &m)?;
        if let Err(e) = s.check_invariants() {
            return Err(TestCaseError::fail(e));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn packed_store_matches_model(lim in limits(), ops in prop::collection::vec(op(), 1..80)) {
        run_ops(lim, ops)?;
    }
}
