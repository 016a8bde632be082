#!/usr/bin/env python3
"""Consumer-group benchmarks, shardstream vs redis-server in one run.

1. Bytes per pending entry: add N entries, create a group, then read all of
   them without ACK (XREADGROUP COUNT 1000 in a loop); INFO used_memory delta
   over the reads / N.
2. XREADGROUP + XACK throughput (entries/s) with COUNT 1 and COUNT 100: one
   client, read a batch, ack its IDs, repeat until M entries are consumed.

    cargo build --release --bin shardstream
    python3 benches/group-bench.py [N] [M] [name=path ...]

Extra `name=path` arguments run more shardstream binaries side by side (for
example a build of an older commit: `before=/tmp/shardstream-before`).

Needs redis-py (`pip install redis`) and redis-server on PATH. Both servers
listen on free loopback ports; shardstream runs with --shards 2 and
--appendonly no.
"""
import socket
import subprocess
import sys
import time

import redis

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
M = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait(r):
    for _ in range(400):
        try:
            r.ping()
            return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit("server did not start")


def used(r):
    return int(r.info("memory")["used_memory"])


def fill(r, key, n):
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.xadd(key, {"rider": "Castilla", "speed": "30.2", "position": str(i % 20), "location_id": str(i % 7)})
        if i % 10_000 == 9_999:
            p.execute()
    p.execute()


def pel_bytes(r):
    r.delete("pel")
    fill(r, "pel", N)
    r.xgroup_create("pel", "g", "0")
    before = used(r)
    read = 0
    while read < N:
        res = r.xreadgroup("g", "c", {"pel": ">"}, count=1000)
        if not res:
            break
        read += len(res[0][1])
    after = used(r)
    pending = r.xpending("pel", "g")["pending"]
    r.delete("pel")
    return (after - before) / max(pending, 1), pending


def throughput(r, count):
    key = f"tp{count}"
    r.delete(key)
    fill(r, key, M)
    r.xgroup_create(key, "g", "0")
    done = 0
    t0 = time.perf_counter()
    while done < M:
        res = r.xreadgroup("g", "c", {key: ">"}, count=count)
        if not res:
            break
        ids = [e[0] for e in res[0][1]]
        r.xack(key, "g", *ids)
        done += len(ids)
    dt = time.perf_counter() - t0
    assert r.xpending(key, "g")["pending"] == 0
    r.delete(key)
    return done / dt


def main():
    bins = [("shardstream", "./target/release/shardstream")]
    bins += [tuple(a.split("=", 1)) for a in sys.argv[3:]]
    rp = free_port()
    procs = [
        subprocess.Popen(["redis-server", "--port", str(rp), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL),
    ]
    servers = [("redis", redis.Redis(port=rp, decode_responses=True))]
    for name, path in bins:
        sp = free_port()
        # No persistence (as redis-server above): the default would log every
        # write to ./data, shared by every binary started here.
        procs.append(subprocess.Popen([path, "--port", str(sp), "--shards", "2",
                                       "--appendonly", "no"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        servers.append((name, redis.Redis(port=sp, decode_responses=True)))
    try:
        for _, r in servers:
            wait(r)
        print(f"bytes per pending entry after reading {N} entries without ACK (COUNT 1000):")
        for name, r in servers:
            b, n = pel_bytes(r)
            print(f"  {name:12} {b:8.1f} B/entry  ({n} pending)")
        print(f"XREADGROUP + XACK, one client, {M} entries:")
        for count in (1, 100):
            for name, r in servers:
                print(f"  COUNT {count:<4} {name:12} {throughput(r, count):12.0f} entries/s")
    finally:
        for p in procs:
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main()
