//! Unit tests of the stream family: `apply_*` on a fresh `ShardDb`.

/// Commands without groups.
mod plain {
    use super::super::*;

    use bytes::Bytes;

    use crate::cmd::ExecCtx;
    use crate::error::CmdError;
    use crate::reply::Reply;
    use crate::shard::blocking::Ticket;
    use crate::shard::db::ShardDb;
    use crate::stream::id::parse_id;

    use crate::route::slot::ShardId;
    use crate::shard::db::Value;
    use crate::stream::{Entry, StreamId};

    fn argv(s: &str) -> Vec<Bytes> {
        s.split_whitespace()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn fresh() -> (ShardDb, ExecCtx) {
        (ShardDb::new(ShardId(0), 1, 16), ExecCtx::at(0, 1000))
    }

    fn xadd(db: &mut ShardDb, cx: &ExecCtx, line: &str) -> Result<Reply, CmdError> {
        apply_xadd(db, cx, parse_xadd_req(&argv(line))?)
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn entry(id: &str, fv: &[&str]) -> Reply {
        Reply::Array(vec![
            bulk(id),
            Reply::Array(fv.iter().map(|s| bulk(s)).collect()),
        ])
    }

    #[test]
    fn xadd_ids_and_errors() {
        let (mut db, cx) = fresh();
        assert_eq!(xadd(&mut db, &cx, "XADD s 5-1 a 1"), Ok(bulk("5-1")));
        assert_eq!(xadd(&mut db, &cx, "XADD s 5-* a 2"), Ok(bulk("5-2")));
        assert_eq!(xadd(&mut db, &cx, "XADD s * a 3"), Ok(bulk("1000-0")));
        assert_eq!(xadd(&mut db, &cx, "XADD s * a 3"), Ok(bulk("1000-1")));
        assert_eq!(
            xadd(&mut db, &cx, "XADD s 5-3 a 1"),
            Err(CmdError::StreamIdTooSmall)
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD s 7 a"),
            Err(CmdError::arity("xadd"))
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD s MAXLEN 5"),
            Err(CmdError::arity("xadd"))
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD s MAXLEN -1 * a 1"),
            Err(CmdError::msg("ERR The MAXLEN argument must be >= 0."))
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD s MAXLEN 1 LIMIT 5 * a 1"),
            Err(CmdError::msg(
                "ERR syntax error, LIMIT cannot be used without the special ~ option"
            ))
        );
        // Invalid or 0-0 IDs leave no key behind.
        assert_eq!(
            xadd(&mut db, &cx, "XADD t 0-0 a 1"),
            Err(CmdError::StreamIdZero)
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD t bad a 1"),
            Err(CmdError::InvalidStreamId)
        );
        assert!(!db.exists(0, b"t", 1000));
        assert_eq!(
            xadd(&mut db, &cx, "XADD t NOMKSTREAM * a 1"),
            Ok(Reply::NullBulk)
        );
        assert!(!db.exists(0, b"t", 1000));
        db.set(
            0,
            Bytes::from_static(b"str"),
            Value::Str(Bytes::new()),
            None,
        );
        assert_eq!(
            xadd(&mut db, &cx, "XADD str * a 1"),
            Err(CmdError::WrongType)
        );
        assert_eq!(apply_xlen(&mut db, &cx, b"s"), Ok(Reply::Int(4)));
        assert_eq!(apply_xlen(&mut db, &cx, b"none"), Ok(Reply::Int(0)));
        assert_eq!(apply_xlen(&mut db, &cx, b"str"), Err(CmdError::WrongType));
    }

    #[test]
    fn xadd_trims() {
        let (mut db, cx) = fresh();
        for i in 1..=10 {
            xadd(&mut db, &cx, &format!("XADD s MAXLEN 3 {i} f v")).unwrap();
        }
        assert_eq!(apply_xlen(&mut db, &cx, b"s"), Ok(Reply::Int(3)));
        xadd(&mut db, &cx, "XADD s MINID = 10 11 f v").unwrap();
        assert_eq!(apply_xlen(&mut db, &cx, b"s"), Ok(Reply::Int(2)));
    }

    #[test]
    fn xrange_and_xrevrange() {
        let (mut db, cx) = fresh();
        for id in ["1-1", "1-2", "2-0", "3-5"] {
            xadd(&mut db, &cx, &format!("XADD s {id} k {id}")).unwrap();
        }
        let run = |db: &mut ShardDb, line: &str, rev: bool| {
            apply_xrange(db, &cx, &parse_xrange_req(&argv(line), rev)?).map(Reply::expanded)
        };
        assert_eq!(
            run(&mut db, "XRANGE s (1-1 2", false),
            Ok(Reply::Array(vec![
                entry("1-2", &["k", "1-2"]),
                entry("2-0", &["k", "2-0"])
            ]))
        );
        assert_eq!(
            run(&mut db, "XREVRANGE s + - COUNT 1", true),
            Ok(Reply::Array(vec![entry("3-5", &["k", "3-5"])]))
        );
        assert_eq!(
            run(&mut db, "XRANGE s - + COUNT 0", false),
            Ok(Reply::NullArray)
        );
        assert_eq!(
            run(&mut db, "XRANGE s - + COUNT -3", false),
            Ok(Reply::NullArray)
        );
        assert_eq!(
            run(&mut db, "XRANGE none - + COUNT 0", false),
            Ok(Reply::Array(vec![]))
        );
        assert_eq!(
            run(&mut db, "XRANGE s - + FOO", false),
            Err(CmdError::Syntax)
        );
        assert_eq!(
            run(
                &mut db,
                "XRANGE s (18446744073709551615-18446744073709551615 x",
                false
            ),
            Err(CmdError::msg("ERR invalid start ID for the interval"))
        );
    }

    #[test]
    fn xdel_xtrim_xsetid() {
        let (mut db, cx) = fresh();
        for i in 1..=5 {
            xadd(&mut db, &cx, &format!("XADD s {i} f v")).unwrap();
        }
        let ids = |s: &str| -> Result<Vec<StreamId>, CmdError> {
            argv(s).iter().map(|a| parse_id(a)).collect()
        };
        assert_eq!(
            apply_xdel(&mut db, &cx, b"none", ids("bad")),
            Ok(Reply::Int(0))
        );
        assert_eq!(
            apply_xdel(&mut db, &cx, b"s", ids("1 bad")),
            Err(CmdError::InvalidStreamId)
        );
        assert_eq!(
            apply_xdel(&mut db, &cx, b"s", ids("1 1 9")),
            Ok(Reply::Int(1))
        );
        let (key, trim) = parse_xtrim_req(&argv("XTRIM s MAXLEN = 2")).unwrap();
        assert_eq!(apply_xtrim(&mut db, &cx, &key, trim), Ok(Reply::Int(2)));
        assert_eq!(
            parse_xtrim_req(&argv("XTRIM s MAXLEN 1 NOMKSTREAM")),
            Err(CmdError::Syntax)
        );
        let setid =
            |db: &mut ShardDb, line: &str| apply_xsetid(db, &cx, &parse_xsetid_req(&argv(line))?);
        assert_eq!(setid(&mut db, "XSETID none 1"), Err(CmdError::NoSuchKey));
        assert_eq!(
            setid(&mut db, "XSETID s 4"),
            Err(CmdError::msg(crate::stream::ERR_XSETID_SMALLER_THAN_TOP))
        );
        assert_eq!(setid(&mut db, "XSETID s 9 ENTRIESADDED 20"), Ok(Reply::Ok));
        assert_eq!(
            xadd(&mut db, &cx, "XADD s 9 f v"),
            Err(CmdError::StreamIdTooSmall)
        );
        assert_eq!(
            setid(&mut db, "XSETID none 1 MAXDELETEDID 2"),
            Err(CmdError::msg(
                crate::stream::ERR_XSETID_SMALLER_THAN_MAX_DELETED
            ))
        );
    }

    #[test]
    fn xread_resolves_ids_in_key_order() {
        let (mut db, cx) = fresh();
        xadd(&mut db, &cx, "XADD a 1 f 1").unwrap();
        xadd(&mut db, &cx, "XADD a 2 f 2").unwrap();
        db.set(
            0,
            Bytes::from_static(b"str"),
            Value::Str(Bytes::new()),
            None,
        );
        let read = |db: &mut ShardDb, line: &str| {
            apply_xread(db, &cx, &parse_xread_req(&argv(line))?).map(|(r, _)| r.expanded())
        };
        assert_eq!(
            read(&mut db, "XREAD COUNT 1 STREAMS a none 0 0"),
            Ok(Reply::PairMap(vec![(
                bulk("a"),
                Reply::Array(vec![entry("1-0", &["f", "1"])])
            )]))
        );
        assert_eq!(read(&mut db, "XREAD STREAMS a $"), Ok(Reply::NullArray));
        assert_eq!(
            read(&mut db, "XREAD STREAMS a +"),
            Ok(Reply::PairMap(vec![(
                bulk("a"),
                Reply::Array(vec![entry("2-0", &["f", "2"])])
            )]))
        );
        assert_eq!(
            read(&mut db, "XREAD STREAMS str a bad 0"),
            Err(CmdError::WrongType)
        );
        assert_eq!(
            read(&mut db, "XREAD STREAMS a str bad 0"),
            Err(CmdError::InvalidStreamId)
        );
        assert_eq!(
            parse_xread_req(&argv("XREAD BLOCK -1 STREAMS a 0")),
            Err(CmdError::msg("ERR timeout is negative"))
        );
        assert_eq!(
            xread_block_ms(&argv("XREAD BLOCK 10 STREAMS a 0")),
            Some(10)
        );
        assert_eq!(xread_block_ms(&argv("XREAD STREAMS a 0")), None);
    }

    #[test]
    fn entry_reply_bytes_is_the_encoded_size() {
        let e = |id: StreamId, n: usize, len: usize| Entry {
            id,
            fields: (0..n)
                .map(|i| {
                    (
                        Bytes::from(format!("field{i}")),
                        Bytes::from(vec![b'v'; len]),
                    )
                })
                .collect(),
        };
        for entry in [
            e(StreamId::new(1, 1), 1, 1),
            e(StreamId::new(1_700_000_000_000, 12), 6, 120),
            e(StreamId::MAX, 0, 0),
        ] {
            let mut out = bytes::BytesMut::new();
            crate::io::codec::encode(&entry_reply(entry.clone()), false, &mut out);
            assert_eq!(entry_reply_bytes(&entry), out.len() as u64);
        }
    }

    #[test]
    fn entries_out_writes_what_the_reply_tree_encodes() {
        let (mut db, cx) = fresh();
        // The master's fields, other fields, more fields, binary and empty
        // values, a large ID, and a deleted entry in between.
        for line in [
            "XADD s 1-1 a 1 b 2",
            "XADD s 1-2 a 3 b 4",
            "XADD s 1-3 c 5",
            "XADD s 2-0 a 6 b 7 c 8",
            "XADD s 3-0 a x b y",
        ] {
            xadd(&mut db, &cx, line).unwrap();
        }
        let mut fields = vec![
            (
                Bytes::from_static(b"bin"),
                Bytes::from_static(b"\r\n\0\xff"),
            ),
            (Bytes::from_static(b"empty"), Bytes::new()),
        ];
        fields.push((Bytes::from_static(b"a"), Bytes::from(vec![b'v'; 300])));
        let s = db.get_stream_mut(0, b"s", 1000).unwrap().unwrap();
        let at = crate::stream::IdSpec::Explicit(StreamId::new(3, 1));
        s.append(at, &fields, 1000, Default::default()).unwrap();
        assert!(s.delete(StreamId::new(3, 0)));
        xadd(&mut db, &cx, "XADD s 18446744073709551615-5 a z b w").unwrap();
        let s = db.get_stream_mut(0, b"s", 1000).unwrap().unwrap();
        for rev in [false, true] {
            let tree = entries_reply(s.range(StreamId::MIN, StreamId::MAX, None, rev));
            let mut out = EntriesOut::default();
            let mut sizes = Vec::new();
            for v in s.iter_views(StreamId::MIN, StreamId::MAX, rev) {
                assert!(out.push_if(&v, |n| {
                    sizes.push(n);
                    true
                }));
                // A refused entry leaves nothing behind.
                let before = out.bytes();
                assert!(!out.push_if(&v, |_| false));
                assert_eq!(out.bytes(), before);
            }
            let want: Vec<u64> = s
                .range(StreamId::MIN, StreamId::MAX, None, rev)
                .iter()
                .map(entry_reply_bytes)
                .collect();
            assert_eq!(sizes, want);
            let in_place: Vec<u64> = s
                .iter_views(StreamId::MIN, StreamId::MAX, rev)
                .map(|v| view_reply_bytes(&v))
                .collect();
            assert_eq!(in_place, want);
            assert_eq!(out.len(), 6);
            let raw = out.finish();
            for resp3 in [false, true] {
                let (mut a, mut b) = (bytes::BytesMut::new(), bytes::BytesMut::new());
                crate::io::codec::encode(&raw, resp3, &mut a);
                crate::io::codec::encode(&tree, resp3, &mut b);
                assert_eq!(a, b);
            }
            assert_eq!(raw.expanded(), tree);
        }
        assert_eq!(
            EntriesOut::default().finish().expanded(),
            Reply::Array(vec![])
        );
    }

    #[test]
    fn read_budget_admits_the_first_entry_then_caps() {
        let caps = ReadCaps {
            max_count: Some(3),
            max_size_bytes: Some(100),
        };
        let mut b = ReadBudget::new(caps);
        assert!(b.admit(500));
        assert!(!b.admit(1));
        assert!(b.is_done());
        let mut b = ReadBudget::new(caps);
        assert!(b.admit(40) && b.admit(40) && !b.is_done());
        assert!(b.admit(20));
        assert!(b.is_done() && !b.admit(0));
    }

    #[test]
    fn parked_xread_is_served_by_xadd() {
        let (mut db, cx) = fresh();
        let ticket = Ticket::new();
        let req = parse_xread_req(&argv("XREAD BLOCK 0 STREAMS a $")).unwrap();
        assert_eq!(
            park_xread_apply(&mut db, &cx, req, ticket.clone()),
            Reply::NoReply
        );
        assert_eq!(db.blocking.len(), 1);
        let mut out = Vec::new();
        xadd(&mut db, &cx, "XADD a 3 f v").unwrap();
        crate::shard::blocking::serve_ready(
            &mut db,
            1000,
            &mut out,
            &crate::shard::blocking::no_redirect,
        );
        assert_eq!(out.len(), 1);
        assert!(ticket.is_fired());
        assert_eq!(db.blocking.len(), 0);
    }
}

/// Consumer-group commands.
mod groups {
    use super::super::*;

    use bytes::Bytes;

    use crate::cmd::ExecCtx;
    use crate::error::CmdError;
    use crate::reply::Reply;
    use crate::shard::blocking::Ticket;
    use crate::shard::db::ShardDb;

    use crate::stream::id::parse_id;

    use crate::cmd::stream::{apply_xadd, apply_xdel, parse_xadd_req};
    use crate::route::slot::ShardId;

    fn argv(s: &str) -> Vec<Bytes> {
        s.split_whitespace()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn fresh() -> (ShardDb, ExecCtx) {
        (ShardDb::new(ShardId(0), 1, 16), ExecCtx::at(0, 1000))
    }

    /// Runs `line`; written-out entries ([`Reply::Raw`]) come back as the
    /// tree they encode.
    fn run(db: &mut ShardDb, cx: &ExecCtx, line: &str) -> Result<Reply, CmdError> {
        run_raw(db, cx, line).map(Reply::expanded)
    }

    fn run_raw(db: &mut ShardDb, cx: &ExecCtx, line: &str) -> Result<Reply, CmdError> {
        let a = argv(line);
        let name = a[0].to_ascii_uppercase();
        match &name[..] {
            b"XADD" => apply_xadd(db, cx, parse_xadd_req(&a)?),
            b"XDEL" => apply_xdel(db, cx, &a[1], a[2..].iter().map(|x| parse_id(x)).collect()),
            b"XGROUP" => apply_xgroup(db, cx, parse_xgroup_req(&a)?),
            b"XREADGROUP" => apply_xreadgroup(db, cx, &parse_xreadgroup_req(&a)?),
            b"XACK" => apply_xack(
                db,
                cx,
                &a[1],
                &a[2],
                a[3..].iter().map(|x| parse_id(x)).collect(),
            ),
            b"XPENDING" => apply_xpending(db, cx, &a[1], &a[2], parse_xpending_req(&a)?.as_ref()),
            b"XCLAIM" => apply_xclaim(db, cx, &a[1], &a[2], &a[3], parse_xclaim_opts(&a)),
            b"XAUTOCLAIM" => apply_xautoclaim(db, cx, &parse_xautoclaim_req(&a)?),
            b"XINFO" => apply_xinfo(db, cx, &parse_xinfo_req(&a)?),
            _ => panic!("unknown {line}"),
        }
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn ids_of(r: &Reply) -> Vec<String> {
        let Reply::PairMap(p) = r.clone().expanded() else {
            return vec![];
        };
        p.iter()
            .flat_map(|(_, v)| match v {
                Reply::Array(es) => es
                    .iter()
                    .filter_map(|e| match e {
                        Reply::Array(x) => match x.first() {
                            Some(Reply::Bulk(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
                _ => vec![],
            })
            .collect()
    }

    #[test]
    fn create_read_ack_pending() {
        let (mut db, cx) = fresh();
        assert_eq!(
            run(&mut db, &cx, "XGROUP CREATE s g $"),
            Err(CmdError::XgroupNoKey)
        );
        assert_eq!(
            run(&mut db, &cx, "XGROUP CREATE s g $ MKSTREAM"),
            Ok(Reply::Ok)
        );
        assert_eq!(
            run(&mut db, &cx, "XGROUP CREATE s g $"),
            Err(CmdError::BusyGroup)
        );
        for i in 1..=3 {
            run(&mut db, &cx, &format!("XADD s {i} f v")).unwrap();
        }
        let r = run(&mut db, &cx, "XREADGROUP GROUP g c COUNT 2 STREAMS s >").unwrap();
        assert_eq!(ids_of(&r), vec!["1-0", "2-0"]);
        assert_eq!(
            run(&mut db, &cx, "XPENDING s g"),
            Ok(Reply::Array(vec![
                Reply::Int(2),
                bulk("1-0"),
                bulk("2-0"),
                Reply::Array(vec![Reply::Array(vec![bulk("c"), bulk("2")])]),
            ]))
        );
        assert_eq!(run(&mut db, &cx, "XACK s g 1 1 9"), Ok(Reply::Int(1)));
        assert_eq!(run(&mut db, &cx, "XACK s nog bad"), Ok(Reply::Int(0)));
        assert_eq!(
            run(&mut db, &cx, "XACK s g bad"),
            Err(CmdError::InvalidStreamId)
        );
        // History: only c's own pending entries; another consumer sees none.
        let r = run(&mut db, &cx, "XREADGROUP GROUP g c STREAMS s 0").unwrap();
        assert_eq!(ids_of(&r), vec!["2-0"]);
        let r = run(&mut db, &cx, "XREADGROUP GROUP g other STREAMS s 0").unwrap();
        assert_eq!(r, Reply::PairMap(vec![(bulk("s"), Reply::Array(vec![]))]));
        // Deleted entry in history comes back as [id, nil].
        run(&mut db, &cx, "XDEL s 2").unwrap();
        let r = run(&mut db, &cx, "XREADGROUP GROUP g c STREAMS s 0").unwrap();
        assert_eq!(
            r,
            Reply::PairMap(vec![(
                bulk("s"),
                Reply::Array(vec![Reply::Array(vec![bulk("2-0"), Reply::NullArray])])
            )])
        );
    }

    #[test]
    fn xclaim_and_xautoclaim() {
        let (mut db, cx) = fresh();
        run(&mut db, &cx, "XGROUP CREATE s g 0 MKSTREAM").unwrap();
        for i in 1..=4 {
            run(&mut db, &cx, &format!("XADD s {i} f v")).unwrap();
        }
        run(&mut db, &cx, "XREADGROUP GROUP g a STREAMS s >").unwrap();
        let later = ExecCtx::at(0, 5000);
        assert_eq!(
            run(&mut db, &later, "XCLAIM s g b 3000 1 JUSTID"),
            Ok(Reply::Array(vec![bulk("1-0")]))
        );
        // Too recent now.
        assert_eq!(
            run(&mut db, &later, "XCLAIM s g b 3000 1"),
            Ok(Reply::Array(vec![]))
        );
        run(&mut db, &cx, "XDEL s 3").unwrap();
        let r = run(&mut db, &later, "XAUTOCLAIM s g b 10 0 COUNT 2 JUSTID").unwrap();
        assert_eq!(
            r,
            Reply::Array(vec![
                bulk("4-0"),
                Reply::Array(vec![bulk("2-0")]),
                Reply::Array(vec![bulk("3-0")]),
            ])
        );
        assert_eq!(
            run(&mut db, &later, "XCLAIM s nog b 1 1"),
            Err(CmdError::no_group(b"s", b"nog"))
        );
        assert_eq!(
            run(&mut db, &later, "XCLAIM s g b x 1"),
            Err(CmdError::msg(
                "ERR Invalid min-idle-time argument for XCLAIM"
            ))
        );
    }

    #[test]
    fn parked_reader_is_served_once_and_woken_by_destroy() {
        let (mut db, cx) = fresh();
        run(&mut db, &cx, "XGROUP CREATE s g $ MKSTREAM").unwrap();
        let req = parse_xreadgroup_req(&argv("XREADGROUP GROUP g c BLOCK 0 STREAMS s >")).unwrap();
        let t1 = Ticket::new();
        assert_eq!(
            park_xreadgroup_apply(&mut db, &cx, req.clone(), t1.clone()),
            Reply::NoReply
        );
        let t2 = Ticket::new();
        assert_eq!(
            park_xreadgroup_apply(&mut db, &cx, req, t2.clone()),
            Reply::NoReply
        );
        // t2 already answered elsewhere (timeout): it must not take the entry.
        assert!(t2.claim());
        run(&mut db, &cx, "XADD s 1 f v").unwrap();
        let mut out = Vec::new();
        crate::shard::blocking::serve_ready(
            &mut db,
            1000,
            &mut out,
            &crate::shard::blocking::no_redirect,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(ids_of(&out[0].1), vec!["1-0"]);
        // Second parked reader, then the group goes away.
        let req = parse_xreadgroup_req(&argv("XREADGROUP GROUP g c BLOCK 0 STREAMS s >")).unwrap();
        let t3 = Ticket::new();
        park_xreadgroup_apply(&mut db, &cx, req, t3);
        run(&mut db, &cx, "XGROUP DESTROY s g").unwrap();
        let mut out = Vec::new();
        crate::shard::blocking::serve_ready(
            &mut db,
            1000,
            &mut out,
            &crate::shard::blocking::no_redirect,
        );
        assert_eq!(
            out.first().map(|o| o.1.clone()),
            Some(Reply::Error(CmdError::NoGroupInXreadgroup {
                key: "s".into(),
                group: "g".into()
            }))
        );
    }
    /// Consumers parked over several shards (rerun tickets) on one stream
    /// are woken one at a time, in the order they parked: the key is held
    /// until the woken consumer's read runs here, a write meanwhile wakes
    /// nobody, and a read that blocks meanwhile waits in line.
    #[test]
    fn woken_rerun_holds_the_key_until_its_read_runs() {
        use crate::shard::blocking::{no_redirect, serve_ready, BlockedWatch};
        use crate::shard::msg::ReplyTo;
        let (mut db, cx) = fresh();
        run(&mut db, &cx, "XGROUP CREATE s g $ MKSTREAM").unwrap();
        let at = |conn| ExecCtx {
            reply_to: ReplyTo {
                io: 0,
                conn,
                seq: 0,
                part: 0,
            },
            ..cx
        };
        let line = |conn: u64, block: &str| {
            argv(&format!(
                "XREADGROUP GROUP g c{conn} COUNT 1 {block} STREAMS s >"
            ))
        };
        let park = |db: &mut ShardDb, conn: u64| {
            let watch = BlockedWatch {
                flag: Default::default(),
                count: Default::default(),
            };
            let t = Ticket::watched_rerun(watch);
            let req = parse_xreadgroup_req(&line(conn, "BLOCK 0")).unwrap();
            assert_eq!(
                park_xreadgroup_apply(db, &at(conn), req, t.clone()),
                Reply::NoReply
            );
            t
        };
        // The rerun itself: the read, as the connection's thread sends it.
        let rerun = |db: &mut ShardDb, conn: u64| {
            let req = super::super::group_read::parse_xreadgroup(&line(conn, "")).unwrap();
            ids_of(&req.apply(db, &at(conn)))
        };
        let woken = |db: &mut ShardDb| {
            let mut out = Vec::new();
            serve_ready(db, 1000, &mut out, &no_redirect);
            out.into_iter()
                .map(|(to, r)| (to.conn, r))
                .collect::<Vec<_>>()
        };
        let (t1, t2) = (park(&mut db, 1), park(&mut db, 2));
        run(&mut db, &cx, "XADD s 1 f v").unwrap();
        assert_eq!(woken(&mut db), vec![(1, Reply::Rerun)]);
        assert!(t1.is_fired() && !t2.is_fired());
        // Held for c1: a read that blocks now parks behind c2, and another
        // write wakes nobody yet.
        let t3 = park(&mut db, 3);
        assert!(!t3.is_fired());
        assert!(db.blocking.holds_any(0, &[Bytes::from_static(b"s")]));
        run(&mut db, &cx, "XADD s 2 f v").unwrap();
        assert_eq!(woken(&mut db), vec![]);
        // c1's read takes its entry; then c2, and only c2, is woken.
        assert_eq!(rerun(&mut db, 1), vec!["1-0"]);
        assert_eq!(woken(&mut db), vec![(2, Reply::Rerun)]);
        assert_eq!(rerun(&mut db, 2), vec!["2-0"]);
        assert_eq!(woken(&mut db), vec![]);
        assert!(!t3.is_fired());
        // c3 is woken by the next entry; if its rerun never comes (its
        // client left), the hold ends on the tick after 50 ms.
        run(&mut db, &cx, "XADD s 3 f v").unwrap();
        assert_eq!(woken(&mut db), vec![(3, Reply::Rerun)]);
        db.blocking.end_stale_rerun_holds(1049);
        assert!(db.blocking.holds_any(0, &[Bytes::from_static(b"s")]));
        db.blocking.end_stale_rerun_holds(1050);
        assert!(!db.blocking.holds_any(0, &[Bytes::from_static(b"s")]));
    }
}
