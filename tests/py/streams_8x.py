"""redis-py's 8.x stream API against one shardstream server.

Run by tests/stream_newest.rs: `python3 streams_8x.py PORT`. Drives the
8.6 and 8.10 additions the way redis-py 8.1's own tests do (IDMP,
IDMPAUTO, XCFGSET, the idmp-* XINFO fields, MAXCOUNT / MAXSIZE on XREAD
and XREADGROUP) and the 8.2.2 ENTRIESREAD clamp. Exits non-zero (an
AssertionError or a redis error) on any mismatch.
"""
import sys

import redis


def total(res) -> int:
    """Entries in an XREAD / XREADGROUP reply (RESP2 shape)."""
    return sum(len(entries) for _, entries in res)


def main() -> None:
    r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), decode_responses=False)
    assert r.info("server")["redis_version"].startswith("8.10."), r.info("server")

    # IDMP / IDMPAUTO (8.6).
    s = "py:idmp"
    a = r.xadd(s, {"field1": "value1"}, idmp=("producer1", b"msg1"))
    assert r.xadd(s, {"field1": "value1"}, idmp=("producer1", b"msg1")) == a
    assert r.xadd(s, {"field1": "value1"}, idmp=("producer1", b"msg2")) != a
    assert r.xadd(s, {"field1": "value1"}, idmp=("producer2", b"msg1")) != a
    r.xadd(s, {"field1": "value1"}, idmp=("producer1", b"\x01"))
    b = r.xadd(s, {"field1": "value1"}, idmpauto="producer3")
    assert r.xadd(s, {"field1": "value1"}, idmpauto="producer3") == b
    assert r.xadd(s, {"field1": "value2"}, idmpauto="producer3") != b
    assert r.xlen(s) == 6
    info = r.xinfo_stream(s)
    assert info["idmp-duration"] == 100 and info["idmp-maxsize"] == 100, info
    assert info["pids-tracked"] == 3, info
    assert info["iids-tracked"] == 6 and info["iids-added"] == 6, info
    assert info["iids-duplicates"] == 2, info

    # XCFGSET (8.6).
    assert r.xcfgset(s, idmp_duration=120) in (b"OK", True)
    assert r.xcfgset(s, idmp_maxsize=5000) in (b"OK", True)
    assert r.xcfgset(s, idmp_duration=60, idmp_maxsize=10000) in (b"OK", True)
    info = r.xinfo_stream(s)
    assert info["idmp-duration"] == 60 and info["idmp-maxsize"] == 10000, info
    assert info["iids-tracked"] == 0, info
    try:
        r.execute_command("XCFGSET", s, "IDMP-DURATION", 0)
        raise AssertionError("IDMP-DURATION 0 accepted")
    except redis.ResponseError as e:
        assert str(e) == "invalid duration", e

    # MAXCOUNT / MAXSIZE (8.10): cumulative across streams, in key order.
    s1, s2 = "py:{mc}1", "py:{mc}2"
    for i in range(3):
        r.xadd(s1, {"f": i})
        r.xadd(s2, {"f": i})
    assert total(r.xread(streams={s1: 0, s2: 0}, count=3, max_count=4)) == 4
    assert total(r.xread(streams={s1: 0}, max_count=2)) == 2
    assert total(r.xread(streams={s1: 0}, max_size=1)) == 1
    assert total(r.xread(streams={s1: 0}, max_size=65536)) == 3
    r.xgroup_create(s1, "g", 0)
    r.xgroup_create(s2, "g", 0)
    res = r.xreadgroup("g", "c", streams={s1: ">", s2: ">"}, count=3, max_count=4)
    assert total(res) == 4, res
    assert r.xpending(s2, "g")["pending"] == 1

    # ENTRIESREAD above entries-added is clamped (8.2.2).
    e = "py:er"
    for i in range(3):
        r.xadd(e, {"f": i})
    r.xgroup_create(e, "g", 0, entries_read=7)
    g = r.xinfo_groups(e)[0]
    assert g["entries-read"] == 3 and g["lag"] == 3, g
    print("ok")


if __name__ == "__main__":
    main()
