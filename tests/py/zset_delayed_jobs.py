"""redis-py's sorted-set API on the delayed-job pattern, against one server.

Run by tests/zset.rs: `python3 zset_delayed_jobs.py PORT PROTOCOL` (2 or
3), against shardstream and against redis-server. Jobs sit in a sorted set
scored by their due time (ms); workers take the earliest due one with
ZPOPMIN / BZPOPMIN, ZRANGE ... BYSCORE LIMIT + ZREM, or the MULTI pattern.
Exits non-zero (an AssertionError or a redis error) on any mismatch.
"""
import sys
import threading
import time

import redis


def pairs(popped):
    """`[key, [[member, score], ...]]` with scores as floats: redis-py leaves
    ZMPOP's RESP2 scores as bytes and parses RESP3 doubles."""
    key, items = popped
    return [key, [(m, float(sc)) for m, sc in items]]


def tl(items):
    """Member/score pairs as tuples (redis-py gives lists in RESP3, and
    ZPOPMIN without a count is one flat pair there, as Redis sends it)."""
    if len(items) == 2 and not isinstance(items[0], (list, tuple)):
        return [tuple(items)]
    return [tuple(p) for p in items]


def main() -> None:
    port, protocol = int(sys.argv[1]), int(sys.argv[2])
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True)
    r.flushall()
    version = tuple(int(x) for x in r.info("server")["redis_version"].split(".")[:2])
    due = 1_800_000_000_000
    q = "{jobs}due"
    assert r.zadd(q, {f"job-{i}": due + i * 10 for i in range(100)}) == 100
    assert r.zadd(q, {"job-0": due + 5}, xx=True, ch=True) == 1
    assert r.zadd(q, {"job-new": due - 1}, nx=True) == 1
    assert r.zadd(q, {"job-new": due - 100}, gt=True) == 0
    assert r.zincrby(q, 0.5, "job-new") == due - 0.5
    assert r.zscore(q, "job-1") == due + 10
    assert r.zmscore(q, ["job-2", "nope"]) == [due + 20, None]
    assert r.zcard(q) == 101
    assert r.zrank(q, "job-0") == 1 and r.zrevrank(q, "job-0") == 99
    if version >= (7, 2):
        assert r.zrank(q, "job-0", withscore=True) == [1, due + 5]

    # The earliest due jobs, then remove what was taken.
    taken = tl(r.zrange(q, "-inf", due + 25, byscore=True, offset=0, num=2, withscores=True))
    assert taken == [("job-new", due - 0.5), ("job-0", due + 5)], taken
    assert r.zrem(q, *[m for m, _ in taken]) == 2
    assert r.zcount(q, "-inf", f"({due + 30}") == 2
    assert r.zrangebyscore(q, due, due + 20) == ["job-1", "job-2"]
    assert tl(r.zrevrangebyscore(q, due + 20, due, withscores=True)) == [
        ("job-2", due + 20),
        ("job-1", due + 10),
    ]

    # ZPOPMIN / ZPOPMAX / ZMPOP.
    assert tl(r.zpopmin(q)) == [("job-1", due + 10)]
    assert tl(r.zpopmax(q, 2)) == [("job-99", due + 990), ("job-98", due + 980)]
    assert pairs(r.zmpop(2, ["{jobs}none", q], min=True, count=2)) == [
        q,
        [("job-2", due + 20), ("job-3", due + 30)],
    ]

    # The MULTI pattern of older workers.
    pipe = r.pipeline(transaction=True)
    pipe.zrange(q, 0, 0, withscores=True)
    pipe.zremrangebyrank(q, 0, 0)
    head, removed = pipe.execute()
    assert tl(head) == [("job-4", due + 40)] and removed == 1, head

    # A worker blocked in BZPOPMIN is woken by the producer's ZADD.
    empty = "{jobs}empty"
    got = {}

    def worker() -> None:
        w = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True)
        got["job"] = w.bzpopmin([empty], timeout=5)

    t = threading.Thread(target=worker)
    t.start()
    deadline = time.time() + 5
    while r.info("clients")["blocked_clients"] != 1:
        assert time.time() < deadline, "worker never blocked"
        time.sleep(0.01)
    r.zadd(empty, {"late": due})
    t.join()
    assert tuple(got["job"]) == (empty, "late", due), got
    assert r.bzpopmax([empty], timeout=0.05) is None
    assert r.bzmpop(0.05, 1, [empty], min=True) is None
    r.zadd(empty, {"a": 1, "b": 2})
    assert pairs(r.bzmpop(1, 1, [empty], max=True, count=5)) == [empty, [("b", 2.0), ("a", 1.0)]]

    # Iteration and sampling.
    members = dict(r.zscan_iter(q, count=7))
    assert len(members) == r.zcard(q) == 93 and members["job-50"] == due + 500, (len(members), r.zcard(q), members.get("job-50"))
    sample = r.zrandmember(q, 5, withscores=True)
    if protocol == 2:  # a flat list in RESP2, pairs in RESP3
        sample = list(zip(sample[::2], sample[1::2]))
    assert len(sample) == 5, sample
    assert all(r.zscore(q, m) == float(sc) for m, sc in sample), sample
    assert r.zrangestore("{jobs}copy", q, 0, 9) == 10
    assert r.zremrangebyscore("{jobs}copy", "-inf", due + 60) == 2
    assert r.zremrangebylex("{jobs}copy", "-", "+") == 8
    assert r.exists("{jobs}copy") == 0
    assert r.type(q) == "zset"
    assert r.object("encoding", q) == "listpack"
    print("ok")


if __name__ == "__main__":
    main()
