"""redis-py's RedisCluster against a three-node shardstream cluster.

Run by tests/cluster_nodes.rs: `python3 cluster_client.py PORT_A PORT_B PORT_C`
with nodes serving slots 0-5460, 5461-10922 and 10923-16383 on 127.0.0.1.
Exits non-zero (an AssertionError or a redis error) on any mismatch.
"""
import sys

import redis
from redis.cluster import RedisCluster
from redis.exceptions import ClusterCrossSlotError, MovedError

RANGES = [(0, 5460), (5461, 10922), (10923, 16383)]


def main() -> None:
    ports = [int(p) for p in sys.argv[1:4]]
    rc = RedisCluster(host="127.0.0.1", port=ports[0], decode_responses=True)

    # The client learnt the topology: three masters, one per configured port.
    masters = sorted(n.port for n in rc.get_primaries())
    assert masters == sorted(ports), masters

    def node_of(key: str) -> int:
        slot = rc.keyslot(key)
        return next(i for i, (a, b) in enumerate(RANGES) if a <= slot <= b)

    streams = [f"pystream:{i}" for i in range(24)]
    assert {node_of(s) for s in streams} == {0, 1, 2}, "streams on every node"

    for i, s in enumerate(streams):
        for j in range(3):
            got = rc.xadd(s, {"n": str(j)}, id=f"{i + 1}-{j}")
            assert got == f"{i + 1}-{j}", got
        rc.set(f"pystr:{i}", str(i))

    for i, s in enumerate(streams):
        assert rc.xlen(s) == 3
        ids = [e[0] for e in rc.xrange(s)]
        assert ids == [f"{i + 1}-{j}" for j in range(3)], ids
        read = rc.xread({s: f"{i + 1}-0"})
        assert read[0][0] == s and [e[0] for e in read[0][1]] == [
            f"{i + 1}-1",
            f"{i + 1}-2",
        ], read
        assert rc.get(f"pystr:{i}") == str(i)

    # Consumer groups through the cluster client, on every node.
    for i, s in enumerate(streams):
        assert rc.xgroup_create(s, "g", id="0") is True
        got = rc.xreadgroup("g", "c1", {s: ">"}, count=10)
        ids = [e[0] for e in got[0][1]]
        assert ids == [f"{i + 1}-{j}" for j in range(3)], got
        assert rc.xack(s, "g", *ids[:2]) == 2
        pending = rc.xpending(s, "g")
        assert pending["pending"] == 1 and pending["min"] == ids[2], pending
        assert rc.xreadgroup("g", "c1", {s: ">"}, block=5) in (None, [], {}), "nothing new"

    # CLUSTER SHARDS: one shard per node with its slot range and one master.
    direct = [redis.Redis(host="127.0.0.1", port=p, decode_responses=True) for p in ports]
    shards = direct[0].execute_command("CLUSTER", "SHARDS")
    assert len(shards) == 3, shards
    for shard, (a, b), port in zip(shards, RANGES, ports):
        shard = dict(zip(shard[::2], shard[1::2])) if isinstance(shard, list) else shard
        assert shard["slots"] == [a, b], shard
        (node,) = shard["nodes"]
        node = dict(zip(node[::2], node[1::2])) if isinstance(node, list) else node
        assert node["port"] == port and node["role"] == "master", node
        assert node["ip"] == "127.0.0.1" and len(node["id"]) == 40, node

    # A direct request to the wrong node is MOVED to the owner.
    s = next(s for s in streams if node_of(s) == 2)
    try:
        direct[0].xlen(s)
        raise AssertionError("expected MOVED")
    except MovedError as e:
        assert str(e) == f"{rc.keyslot(s)} 127.0.0.1:{ports[2]}", str(e)

    # Keys of one command on two slots: CROSSSLOT (redis-py refuses it client
    # side too, so ask a node directly).
    a = [k for k in streams if node_of(k) == 0]
    try:
        direct[0].execute_command("XREAD", "STREAMS", a[0], a[1], "0", "0")
        raise AssertionError("expected CROSSSLOT")
    except ClusterCrossSlotError as e:
        assert "Keys in request don't hash to the same slot" in str(e), str(e)

    print("redis-py cluster client: ok")


if __name__ == "__main__":
    main()
