//! Unit tests of the sorted-set family: command lines through the table,
//! applied on a fresh shard (no threads).

use bytes::Bytes;

use crate::cmd::testing::{argv, exec};
use crate::cmd::ExecCtx;
use crate::reply::Reply;
use crate::route::slot::ShardId;
use crate::shard::db::ShardDb;

fn db() -> ShardDb {
    ShardDb::new(ShardId(0), 1, 16)
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

/// ZRANGESTORE and ZMPOP run on the connection's thread (their keys may
/// span shards): their one-shard form is applied here directly.
fn zrangestore(d: &mut ShardDb, line: &str) -> Reply {
    let a = argv(line);
    match super::range::parse_range_req(&a, 2, true) {
        Ok(req) => super::range::apply_zrangestore(d, &ExecCtx::at(0, 1000), &a[1], &req).into(),
        Err(e) => Reply::Error(e),
    }
}

fn zmpop(d: &mut ShardDb, line: &str) -> Reply {
    match super::pop::parse_zmpop_req(&argv(line), 1) {
        Ok(req) => super::pop::apply_pop(d, &ExecCtx::at(0, 1000), &req).into(),
        Err(e) => Reply::Error(e),
    }
}

fn err(r: Reply) -> String {
    match r {
        Reply::Error(e) => e.to_string(),
        other => panic!("not an error: {other:?}"),
    }
}

#[test]
fn zadd_options_and_replies() {
    let mut d = db();
    assert_eq!(exec(&mut d, "ZADD z 1 a 2 b 3 c"), Reply::Int(3));
    assert_eq!(exec(&mut d, "ZADD z CH 1 a 5 b 4 d"), Reply::Int(2));
    assert_eq!(exec(&mut d, "ZADD z XX 9 nope"), Reply::Int(0));
    assert_eq!(exec(&mut d, "ZADD z NX INCR 1 a"), Reply::NullBulk);
    assert_eq!(exec(&mut d, "ZADD z GT INCR -1 a"), Reply::NullBulk);
    assert_eq!(exec(&mut d, "ZADD z INCR 0.5 a"), Reply::Double(1.5));
    assert_eq!(exec(&mut d, "ZINCRBY z 1 a"), Reply::Double(2.5));
    assert_eq!(exec(&mut d, "ZSCORE z a"), Reply::Double(2.5));
    assert_eq!(exec(&mut d, "ZCARD z"), Reply::Int(4));
    assert_eq!(
        err(exec(&mut d, "ZADD z NX XX 1 a")),
        "ERR XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        err(exec(&mut d, "ZADD z GT LT 1 a")),
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        err(exec(&mut d, "ZADD z INCR 1 a 2 b")),
        "ERR INCR option supports a single increment-element pair"
    );
    assert_eq!(
        err(exec(&mut d, "ZADD z nan a")),
        "ERR value is not a valid float"
    );
    assert_eq!(err(exec(&mut d, "ZADD z 1 a 2")), "ERR syntax error");
    assert_eq!(exec(&mut d, "ZADD z inf x"), Reply::Int(1));
    assert_eq!(
        err(exec(&mut d, "ZINCRBY z -inf x")),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(exec(&mut d, "SET s v"), Reply::Ok);
    assert!(err(exec(&mut d, "ZADD s 1 a")).starts_with("WRONGTYPE"));
}

#[test]
fn ranges_ranks_and_removal() {
    let mut d = db();
    exec(&mut d, "ZADD z 1 a 2 b 3 c 4 d 5 e");
    let arr = |v: &[&str]| Reply::Array(v.iter().map(|s| bulk(s)).collect());
    assert_eq!(
        exec(&mut d, "ZRANGE z 0 -1"),
        arr(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(exec(&mut d, "ZRANGE z 0 1 REV"), arr(&["e", "d"]));
    assert_eq!(exec(&mut d, "ZREVRANGE z -2 -1"), arr(&["b", "a"]));
    assert_eq!(
        exec(&mut d, "ZRANGE z (1 4 BYSCORE LIMIT 1 2"),
        arr(&["c", "d"])
    );
    assert_eq!(
        exec(&mut d, "ZRANGE z 4 (1 BYSCORE REV LIMIT 1 -1"),
        arr(&["c", "b"])
    );
    assert_eq!(
        exec(&mut d, "ZRANGEBYSCORE z -inf +inf LIMIT -1 2"),
        arr(&[])
    );
    assert_eq!(
        exec(&mut d, "ZRANGE z 0 0 WITHSCORES"),
        Reply::Pairs(vec![(bulk("a"), Reply::Double(1.0))])
    );
    assert_eq!(exec(&mut d, "ZRANK z c"), Reply::Int(2));
    assert_eq!(
        exec(&mut d, "ZREVRANK z c WITHSCORE"),
        Reply::Array(vec![Reply::Int(2), Reply::Double(3.0)])
    );
    assert_eq!(exec(&mut d, "ZRANK z zz WITHSCORE"), Reply::NullArray);
    assert_eq!(exec(&mut d, "ZCOUNT z (1 3"), Reply::Int(2));
    assert_eq!(exec(&mut d, "ZREMRANGEBYSCORE z 4 +inf"), Reply::Int(2));
    assert_eq!(exec(&mut d, "ZREMRANGEBYRANK z 0 0"), Reply::Int(1));
    assert_eq!(exec(&mut d, "ZREM z b c x"), Reply::Int(2));
    assert_eq!(exec(&mut d, "EXISTS z"), Reply::Int(0));
    exec(&mut d, "ZADD l 0 a 0 b 0 c 0 d");
    assert_eq!(exec(&mut d, "ZRANGEBYLEX l [b (d"), arr(&["b", "c"]));
    assert_eq!(exec(&mut d, "ZREVRANGEBYLEX l + - LIMIT 0 1"), arr(&["d"]));
    assert_eq!(exec(&mut d, "ZLEXCOUNT l - +"), Reply::Int(4));
    assert_eq!(exec(&mut d, "ZREMRANGEBYLEX l - (c"), Reply::Int(2));
    assert_eq!(zrangestore(&mut d, "ZRANGESTORE dst l 0 -1"), Reply::Int(2));
    assert_eq!(exec(&mut d, "ZRANGE dst 0 -1"), arr(&["c", "d"]));
    assert_eq!(zrangestore(&mut d, "ZRANGESTORE dst l 5 6"), Reply::Int(0));
    assert_eq!(exec(&mut d, "EXISTS dst"), Reply::Int(0));
}

#[test]
fn pops() {
    let mut d = db();
    exec(&mut d, "ZADD z 1 a 2 b 3 c");
    assert_eq!(
        exec(&mut d, "ZPOPMIN z"),
        Reply::Array(vec![bulk("a"), Reply::Double(1.0)])
    );
    assert_eq!(
        exec(&mut d, "ZPOPMAX z 5"),
        Reply::Pairs(vec![
            (bulk("c"), Reply::Double(3.0)),
            (bulk("b"), Reply::Double(2.0))
        ])
    );
    assert_eq!(exec(&mut d, "ZPOPMIN z"), Reply::Array(vec![]));
    exec(&mut d, "ZADD y 1 a");
    assert_eq!(
        exec(&mut d, "BZPOPMIN nokey y 0"),
        Reply::Array(vec![bulk("y"), bulk("a"), Reply::Double(1.0)])
    );
    assert_eq!(exec(&mut d, "BZPOPMIN y 0"), Reply::NullArray);
    exec(&mut d, "ZADD x 1 a 2 b");
    assert_eq!(
        zmpop(&mut d, "ZMPOP 2 nokey x MAX COUNT 5"),
        Reply::Array(vec![
            bulk("x"),
            Reply::Array(vec![
                Reply::Array(vec![bulk("b"), Reply::Double(2.0)]),
                Reply::Array(vec![bulk("a"), Reply::Double(1.0)]),
            ])
        ])
    );
    assert_eq!(zmpop(&mut d, "ZMPOP 1 x MIN"), Reply::NullArray);
    assert_eq!(
        err(zmpop(&mut d, "ZMPOP 0 x MIN")),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(zmpop(&mut d, "ZMPOP 1 x MIN COUNT 0")),
        "ERR count should be greater than 0"
    );
    assert_eq!(
        err(exec(&mut d, "BZPOPMIN x -1")),
        "ERR timeout is negative"
    );
    assert_eq!(
        err(exec(&mut d, "BZPOPMIN x inf")),
        "ERR timeout is out of range"
    );
    assert_eq!(
        err(exec(&mut d, "BZPOPMIN x abc")),
        "ERR timeout is not a float or out of range"
    );
}

#[test]
fn encoding_follows_thresholds() {
    let mut d = db();
    for i in 0..128 {
        exec(&mut d, &format!("ZADD z {i} m{i}"));
    }
    assert_eq!(exec(&mut d, "OBJECT ENCODING z"), bulk("listpack"));
    exec(&mut d, "ZADD z 1 one-more");
    assert_eq!(exec(&mut d, "OBJECT ENCODING z"), bulk("skiplist"));
    exec(&mut d, &format!("ZADD long 1 {}", "x".repeat(65)));
    assert_eq!(exec(&mut d, "OBJECT ENCODING long"), bulk("skiplist"));
    assert_eq!(exec(&mut d, "TYPE z"), Reply::simple("zset"));
}

#[test]
fn zscan_cursor_keeps_score_order_and_skips_nothing() {
    use super::read::{cursor_score, score_cursor};
    for s in [
        f64::NEG_INFINITY,
        -2.5,
        -0.0,
        0.0,
        1e-300,
        7.0,
        f64::INFINITY,
    ] {
        assert_ne!(score_cursor(s), 0);
        assert_eq!(cursor_score(score_cursor(s)).to_bits(), s.to_bits());
    }
    assert!(score_cursor(-1.0) < score_cursor(0.0) && score_cursor(0.0) < score_cursor(3.0));
    let mut d = db();
    for i in 0..300 {
        exec(&mut d, &format!("ZADD z {} m{i}", i / 25));
    }
    // Remove members behind the cursor between calls: nothing else is missed.
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let Reply::Array(v) = exec(&mut d, &format!("ZSCAN z {cursor} COUNT 10")) else {
            panic!("not an array");
        };
        let (Reply::Bulk(c), Reply::Array(items)) = (&v[0], &v[1]) else {
            panic!("bad shape");
        };
        for pair in items.chunks(2) {
            if let Reply::Bulk(m) = &pair[0] {
                seen.insert(m.clone());
                if calls % 2 == 0 {
                    exec(&mut d, &format!("ZREM z {}", String::from_utf8_lossy(m)));
                }
            }
        }
        calls += 1;
        cursor = String::from_utf8_lossy(c).into_owned();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 300);
    assert!(calls < 40, "{calls} calls");
}
