//! Fuzz target `streams`: arbitrary sequences of stream and consumer-group
//! commands (XADD with IDMP / IDMPAUTO, XCFGSET, XDEL, XTRIM, XSETID, XGROUP,
//! XREADGROUP with MAXCOUNT / MAXSIZE, XACK, XCLAIM, XAUTOCLAIM, plus
//! XINFO/XPENDING/XRANGE reads) applied to one key of one
//! `ShardDb` through the real parsers and apply functions, checking after
//! every operation:
//! * `Stream::check_invariants` (length = live entries, IDs strictly
//!   increasing, first/last ID, consumer PELs partition each group PEL);
//! * every ID XADD returns is above the stream's previous `last_id` (or, for
//!   an idempotent XADD, an ID it returned before);
//! * PEL ⊆ delivered IDs: every pending ID was returned by an XREADGROUP,
//!   XCLAIM or XAUTOCLAIM reply;
//! * lag / entries-read: unless the input used XSETID, ENTRIESREAD or XCLAIM
//!   LASTID (which set these counters by hand), a known `entries_read` is at most
//!   `entries_added`, and a known lag lies between the live entries after the
//!   group's last ID and `entries_added`. (Not "entries ever added after the
//!   last ID": entries trimmed away before the group read them stay in the lag
//!   forever, in Redis 7.0.15 too: XADD 1-1, group reads it, XADD 2-0 trimmed
//!   at once by MINID ~, XADD 3-0, group reads it: lag 1.)
#![no_main]

mod common;

use std::collections::BTreeSet;

use arbitrary::Arbitrary;
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use shardstream::reply::Reply;
use shardstream::route::slot::ShardId;
use shardstream::shard::db::ShardDb;
use shardstream::stream::StreamId;

const KEY: &str = "s";

#[derive(Arbitrary, Debug, Clone, Copy)]
enum IdArg {
    /// An ID ever added, by index (wraps).
    Added(u8),
    /// The ID just after an added one.
    AfterAdded(u8),
    /// A small explicit ID.
    Small(u8, u8),
    Zero,
    Max,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum AddId {
    Auto,
    AutoSeq(u8),
    Explicit(u8, u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Trim {
    minid: bool,
    approx: bool,
    threshold: IdArg,
    maxlen: u8,
    limit: Option<u8>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum GroupStart {
    Last,
    Id(IdArg),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Add {
        id: AddId,
        fields: u8,
        trim: Option<Trim>,
        nomkstream: bool,
        /// `IDMP pid iid` (`Some(iid)`) or `IDMPAUTO pid` (`None`), Redis 8.6.
        idmp: Option<(u8, Option<u8>)>,
    },
    /// `XCFGSET key IDMP-DURATION d IDMP-MAXSIZE n` (Redis 8.6).
    CfgSet {
        duration_s: Option<u8>,
        maxsize: Option<u8>,
    },
    Del {
        ids: Vec<IdArg>,
    },
    Trim(Trim),
    SetId {
        id: IdArg,
        entries_added: Option<u8>,
        max_deleted: Option<IdArg>,
    },
    Create {
        group: u8,
        start: GroupStart,
        mkstream: bool,
        entries_read: Option<u8>,
    },
    SetGroupId {
        group: u8,
        start: GroupStart,
        entries_read: Option<u8>,
    },
    Destroy {
        group: u8,
    },
    CreateConsumer {
        group: u8,
        consumer: u8,
    },
    DelConsumer {
        group: u8,
        consumer: u8,
    },
    ReadNew {
        group: u8,
        consumer: u8,
        count: Option<u8>,
        noack: bool,
        /// `MAXCOUNT` / `MAXSIZE` (Redis 8.10).
        max_count: Option<u8>,
        max_size: Option<u8>,
    },
    ReadPending {
        group: u8,
        consumer: u8,
        from: IdArg,
        count: Option<u8>,
    },
    Ack {
        group: u8,
        ids: Vec<IdArg>,
    },
    Claim {
        group: u8,
        consumer: u8,
        min_idle: u8,
        ids: Vec<IdArg>,
        force: bool,
        justid: bool,
        retrycount: Option<u8>,
        lastid: Option<IdArg>,
    },
    AutoClaim {
        group: u8,
        consumer: u8,
        min_idle: u8,
        start: IdArg,
        count: Option<u8>,
        justid: bool,
    },
    Read {
        info: u8,
    },
    Tick(u8),
}

struct State {
    db: ShardDb,
    now: u64,
    /// Every ID XADD ever returned, ascending.
    added: Vec<StreamId>,
    /// Every ID that appeared in an XREADGROUP / XCLAIM / XAUTOCLAIM reply.
    delivered: BTreeSet<StreamId>,
    /// XSETID or ENTRIESREAD used: counters were set by hand.
    tainted: bool,
}

fn id_text(id: StreamId) -> String {
    format!("{}-{}", id.ms, id.seq)
}

impl State {
    fn id(&self, a: IdArg) -> StreamId {
        let pick = |i: u8| {
            self.added
                .get(usize::from(i) % self.added.len().max(1))
                .copied()
                .unwrap_or(StreamId::new(0, 1))
        };
        match a {
            IdArg::Added(i) => pick(i),
            IdArg::AfterAdded(i) => pick(i).next().unwrap_or(StreamId::MAX),
            IdArg::Small(ms, seq) => StreamId::new(u64::from(ms), u64::from(seq)),
            IdArg::Zero => StreamId::MIN,
            IdArg::Max => StreamId::MAX,
        }
    }

    fn run(&mut self, args: Vec<String>) -> Reply {
        let argv: Vec<Bytes> = args.into_iter().map(Bytes::from).collect();
        self.now += 1;
        common::run(&mut self.db, self.now, &argv).unwrap_or(Reply::NoReply)
    }

    fn trim_args(&self, t: &Trim, out: &mut Vec<String>) {
        out.push(if t.minid { "MINID" } else { "MAXLEN" }.into());
        out.push(if t.approx { "~" } else { "=" }.into());
        out.push(if t.minid {
            id_text(self.id(t.threshold))
        } else {
            t.maxlen.to_string()
        });
        if let Some(l) = t.limit {
            out.push("LIMIT".into());
            out.push(l.to_string());
        }
    }
}

fn group(g: u8) -> String {
    format!("g{}", g % 3)
}

fn consumer(c: u8) -> String {
    format!("c{}", c % 4)
}

/// Collect every bulk string that reads as a stream ID.
fn collect_ids(r: &Reply, out: &mut BTreeSet<StreamId>) {
    match r {
        Reply::Bulk(b) => {
            let parsed = std::str::from_utf8(b).ok().and_then(|t| {
                let (ms, seq) = t.split_once('-')?;
                Some(StreamId::new(ms.parse().ok()?, seq.parse().ok()?))
            });
            if let Some(id) = parsed {
                out.insert(id);
            }
        }
        Reply::Array(v) | Reply::Set(v) => v.iter().for_each(|x| collect_ids(x, out)),
        Reply::Map(v) | Reply::PairMap(v) => v.iter().for_each(|(a, b)| {
            collect_ids(a, out);
            collect_ids(b, out);
        }),
        _ => {}
    }
}

fn apply(st: &mut State, op: &Op) {
    let s = |x: &str| x.to_string();
    match op {
        Op::Add {
            id,
            fields,
            trim,
            nomkstream,
            idmp,
        } => {
            let before = st
                .db
                .get_stream(0, KEY.as_bytes(), st.now)
                .ok()
                .flatten()
                .map(|s| s.last_id());
            let mut a = vec![s("XADD"), s(KEY)];
            if *nomkstream {
                a.push(s("NOMKSTREAM"));
            }
            if let Some(t) = trim {
                st.trim_args(t, &mut a);
            }
            match idmp {
                Some((pid, Some(iid))) => {
                    a.extend([s("IDMP"), format!("p{}", pid % 3), format!("i{}", iid % 8)])
                }
                Some((pid, None)) => a.extend([s("IDMPAUTO"), format!("p{}", pid % 3)]),
                None => {}
            }
            a.push(match id {
                AddId::Auto => s("*"),
                AddId::AutoSeq(ms) => format!("{ms}-*"),
                AddId::Explicit(ms, seq) => format!("{ms}-{seq}"),
            });
            for i in 0..=(fields % 3) {
                a.push(format!("f{i}"));
                a.push(s("v"));
            }
            if let Reply::Bulk(b) = st.run(a) {
                let mut got = BTreeSet::new();
                collect_ids(&Reply::Bulk(b), &mut got);
                let new = got.into_iter().next().expect("XADD replied a non-ID bulk");
                // An idempotent XADD may answer an ID it returned before.
                if idmp.is_some() && st.added.contains(&new) {
                    return;
                }
                if let Some(prev) = before {
                    assert!(new > prev, "XADD returned {new} <= previous last_id {prev}");
                }
                if let Some(&last) = st.added.last() {
                    assert!(new > last || st.tainted, "XADD returned {new} after {last}");
                }
                if st.added.last().is_none_or(|&l| new > l) {
                    st.added.push(new);
                }
            }
        }
        Op::Del { ids } => {
            let mut a = vec![s("XDEL"), s(KEY)];
            a.extend(ids.iter().take(8).map(|i| id_text(st.id(*i))));
            if ids.is_empty() {
                a.push(s("0-1"));
            }
            st.run(a);
        }
        Op::Trim(t) => {
            let mut a = vec![s("XTRIM"), s(KEY)];
            st.trim_args(t, &mut a);
            st.run(a);
        }
        Op::SetId {
            id,
            entries_added,
            max_deleted,
        } => {
            st.tainted = true;
            let mut a = vec![s("XSETID"), s(KEY), id_text(st.id(*id))];
            if let Some(n) = entries_added {
                a.push(s("ENTRIESADDED"));
                a.push(n.to_string());
            }
            if let Some(m) = max_deleted {
                a.push(s("MAXDELETEDID"));
                a.push(id_text(st.id(*m)));
            }
            st.run(a);
        }
        Op::Create {
            group: g,
            start,
            mkstream,
            entries_read,
        } => {
            let mut a = vec![s("XGROUP"), s("CREATE"), s(KEY), group(*g)];
            a.push(match start {
                GroupStart::Last => s("$"),
                GroupStart::Id(i) => id_text(st.id(*i)),
            });
            if *mkstream {
                a.push(s("MKSTREAM"));
            }
            if let Some(n) = entries_read {
                st.tainted = true;
                a.push(s("ENTRIESREAD"));
                a.push(n.to_string());
            }
            st.run(a);
        }
        Op::SetGroupId {
            group: g,
            start,
            entries_read,
        } => {
            let mut a = vec![s("XGROUP"), s("SETID"), s(KEY), group(*g)];
            a.push(match start {
                GroupStart::Last => s("$"),
                GroupStart::Id(i) => id_text(st.id(*i)),
            });
            if let Some(n) = entries_read {
                st.tainted = true;
                a.push(s("ENTRIESREAD"));
                a.push(n.to_string());
            }
            st.run(a);
        }
        Op::Destroy { group: g } => {
            st.run(vec![s("XGROUP"), s("DESTROY"), s(KEY), group(*g)]);
        }
        Op::CreateConsumer {
            group: g,
            consumer: c,
        } => {
            st.run(vec![
                s("XGROUP"),
                s("CREATECONSUMER"),
                s(KEY),
                group(*g),
                consumer(*c),
            ]);
        }
        Op::DelConsumer {
            group: g,
            consumer: c,
        } => {
            st.run(vec![
                s("XGROUP"),
                s("DELCONSUMER"),
                s(KEY),
                group(*g),
                consumer(*c),
            ]);
        }
        Op::ReadNew {
            group: g,
            consumer: c,
            count,
            noack,
            max_count,
            max_size,
        } => {
            let mut a = vec![s("XREADGROUP"), s("GROUP"), group(*g), consumer(*c)];
            if let Some(n) = count {
                a.push(s("COUNT"));
                a.push(n.to_string());
            }
            if let Some(n) = max_count {
                a.extend([s("MAXCOUNT"), n.to_string()]);
            }
            if let Some(n) = max_size {
                a.extend([s("MAXSIZE"), (u32::from(*n) * 4).to_string()]);
            }
            if *noack {
                a.push(s("NOACK"));
            }
            a.extend([s("STREAMS"), s(KEY), s(">")]);
            let r = st.run(a);
            collect_ids(&r, &mut st.delivered);
        }
        Op::ReadPending {
            group: g,
            consumer: c,
            from,
            count,
        } => {
            let mut a = vec![s("XREADGROUP"), s("GROUP"), group(*g), consumer(*c)];
            if let Some(n) = count {
                a.push(s("COUNT"));
                a.push(n.to_string());
            }
            a.extend([s("STREAMS"), s(KEY), id_text(st.id(*from))]);
            let r = st.run(a);
            collect_ids(&r, &mut st.delivered);
        }
        Op::Ack { group: g, ids } => {
            let mut a = vec![s("XACK"), s(KEY), group(*g)];
            a.extend(ids.iter().take(8).map(|i| id_text(st.id(*i))));
            if ids.is_empty() {
                a.push(s("0-1"));
            }
            st.run(a);
        }
        Op::Claim {
            group: g,
            consumer: c,
            min_idle,
            ids,
            force,
            justid,
            retrycount,
            lastid,
        } => {
            let mut a = vec![
                s("XCLAIM"),
                s(KEY),
                group(*g),
                consumer(*c),
                min_idle.to_string(),
            ];
            a.extend(ids.iter().take(8).map(|i| id_text(st.id(*i))));
            if ids.is_empty() {
                a.push(s("0-1"));
            }
            if *force {
                a.push(s("FORCE"));
            }
            if *justid {
                a.push(s("JUSTID"));
            }
            if let Some(n) = retrycount {
                a.push(s("RETRYCOUNT"));
                a.push(n.to_string());
            }
            if let Some(l) = lastid {
                // Moves the group's last ID without touching entries_read
                // (as Redis does): the counters are then hand-set.
                st.tainted = true;
                a.push(s("LASTID"));
                a.push(id_text(st.id(*l)));
            }
            let r = st.run(a);
            collect_ids(&r, &mut st.delivered);
        }
        Op::AutoClaim {
            group: g,
            consumer: c,
            min_idle,
            start,
            count,
            justid,
        } => {
            let mut a = vec![
                s("XAUTOCLAIM"),
                s(KEY),
                group(*g),
                consumer(*c),
                min_idle.to_string(),
                id_text(st.id(*start)),
            ];
            if let Some(n) = count {
                a.push(s("COUNT"));
                a.push(n.to_string());
            }
            if *justid {
                a.push(s("JUSTID"));
            }
            let r = st.run(a);
            collect_ids(&r, &mut st.delivered);
        }
        Op::Read { info } => {
            let a: Vec<String> = match info % 6 {
                0 => vec![s("XINFO"), s("STREAM"), s(KEY), s("FULL")],
                1 => vec![s("XINFO"), s("GROUPS"), s(KEY)],
                2 => vec![s("XINFO"), s("CONSUMERS"), s(KEY), group(*info / 6)],
                3 => vec![s("XPENDING"), s(KEY), group(*info / 6)],
                4 => vec![
                    s("XPENDING"),
                    s(KEY),
                    group(*info / 6),
                    s("-"),
                    s("+"),
                    s("10"),
                ],
                _ => vec![s("XRANGE"), s(KEY), s("-"), s("+")],
            };
            st.run(a);
        }
        Op::CfgSet {
            duration_s,
            maxsize,
        } => {
            let mut a = vec![s("XCFGSET"), s(KEY)];
            if let Some(d) = duration_s {
                a.extend([s("IDMP-DURATION"), d.to_string()]);
            }
            if let Some(n) = maxsize {
                a.extend([s("IDMP-MAXSIZE"), n.to_string()]);
            }
            st.run(a);
        }
        Op::Tick(ms) => st.now += u64::from(*ms) * 10,
    }
}

fn check(st: &mut State, op: &Op) {
    let now = st.now;
    let Ok(Some(stream)) = st.db.get_stream(0, KEY.as_bytes(), now) else {
        return;
    };
    if let Err(e) = stream.check_invariants() {
        panic!("after {op:?}: {e}");
    }
    let counters = stream.counters();
    for (name, g) in stream.groups() {
        for id in g.pel().keys() {
            assert!(
                st.delivered.contains(id),
                "after {op:?}: group {name:?} has {id} pending, never delivered"
            );
        }
        if st.tainted {
            continue;
        }
        if let Some(n) = g.entries_read {
            assert!(
                n <= counters.entries_added,
                "after {op:?}: group {name:?} entries_read {n} > entries_added {}",
                counters.entries_added
            );
        }
        if let Some(lag) = g.lag(&counters) {
            let live_after = stream
                .range(
                    g.last_id.next().unwrap_or(StreamId::MAX),
                    StreamId::MAX,
                    None,
                    false,
                )
                .len() as u64;
            let live_after = if g.last_id == StreamId::MAX {
                0
            } else {
                live_after
            };
            assert!(
                live_after <= lag && lag <= counters.entries_added,
                "after {op:?}: group {name:?} lag {lag}, live after {live_after}, entries_added {}",
                counters.entries_added
            );
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut st = State {
        db: ShardDb::new(ShardId(0), 1, 16),
        now: 1_700_000_000_000,
        added: Vec::new(),
        delivered: BTreeSet::new(),
        tainted: false,
    };
    for op in ops.iter().take(200) {
        apply(&mut st, op);
        check(&mut st, op);
    }
});
