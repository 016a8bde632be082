#!/usr/bin/env python3
"""Bytes per list element and per set member, shardstream vs redis-server.

    python3 benches/listset-memory.py [--n 1000000] [--size 10]

Starts redis-server (no persistence) and a release shardstream (`--shards 1`,
no AOF) on free loopback ports, then for each server in turn: reads INFO
memory `used_memory`, fills one list (RPUSH) and one set of each encoding
(SADD: strings into a hash-table set, integers into an intset, with
`set-max-intset-entries` raised to `--n` on both)
with `--n` items of `--size` bytes in pipelines, reads `used_memory` again
and prints (after - before) / n for each. A memory figure, not a timing: it
does not depend on the machine's load. Needs redis-server and redis-py.
"""
import argparse
import os
import subprocess
import tempfile

import redis

from benchlib import ROOT, free_port, wait_up


def used(r):
    return int(r.info("memory")["used_memory"])


def fill(r, cmd, key, items, batch=1000):
    for i in range(0, len(items), batch):
        r.execute_command(cmd, key, *items[i:i + batch])


def measure(port, n, size):
    r = redis.Redis(port=port)
    r.flushall()
    # Room for the whole intset in both servers.
    r.config_set("set-max-intset-entries", n)
    out = {}
    strings = [(f"{i:0{size}d}x")[-size:].encode() for i in range(n)]
    for name, cmd, items in [
        ("list element", "RPUSH", strings),
        ("set member (hashtable)", "SADD", strings),
        ("set member (intset)", "SADD", [str(i * 7).encode() for i in range(n)]),
    ]:
        before = used(r)
        fill(r, cmd, "k", items)
        after = used(r)
        out[name] = (after - before) / len(items)
        r.delete("k")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=10)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "--bin", "shardstream"],
                   cwd=ROOT, check=True)
    shard_bin = os.path.join(ROOT, "target", "release", "shardstream")
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        rp, sp = free_port(), free_port()
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(rp), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [shard_bin, "--port", str(sp), "--shards", "1", "--appendonly", "no",
             "--dir", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        try:
            wait_up(rp)
            wait_up(sp)
            theirs = measure(rp, args.n, args.size)
            ours = measure(sp, args.n, args.size)
        finally:
            for p in procs:
                p.terminate()
                p.wait()
    print(f"{'bytes per item':28} {'shardstream':>12} {'redis-server':>12} {'ratio':>6}")
    for k in ours:
        ratio = ours[k] / theirs[k] if theirs[k] else float("nan")
        print(f"{k:28} {ours[k]:12.1f} {theirs[k]:12.1f} {ratio:6.2f}")


if __name__ == "__main__":
    main()
