#!/usr/bin/env python3
"""Online resharding of streams: how fast slots move, and what clients feel.

For each server binary given (redis-server and/or shardstream, side by side):

1. Four nodes on free loopback ports (and free bus ports, +10000), started
   with redis-server's cluster command line; `redis-cli --cluster create` of
   three, `redis-cli --cluster add-node` of the fourth (it owns no slot).
2. STREAMS streams x ENTRIES entries (1,000 x 1,000 = 1M by default; four
   fields each, Redis's rider example), each with a consumer group whose
   consumer has been delivered 100 entries and acknowledged 50, loaded with
   `redis-cli --pipe` on each node.
3. A probe client (redis-py `RedisCluster`) does XADD then XREADGROUP COUNT 1
   on a random stream at a fixed rate and times each call; its latency is
   taken for a few seconds with the cluster idle ("before"), then while
   `redis-cli --cluster reshard --cluster-from all --cluster-to <4th>` moves
   a quarter of the slots (4096) to the fourth node ("during").
4. Prints keys and entries moved, the reshard's wall time, entries moved per
   second, and the probe's p50/p99/p99.9/max per command before and during
   the move; with two servers, a comparison with ratios. Afterwards the
   total number of entries is checked (loaded + acknowledged probe XADDs)
   and `redis-cli --cluster check` must pass.

    cargo build --release --bin shardstream
    python3 benches/cluster-reshard.py --redis /usr/bin/redis-server \\
        --shardstream target/release/shardstream [--streams 1000] [--entries 1000]

Needs redis-cli and redis-py. Each node keeps its data in a temporary
directory (no persistence: --save "" --appendonly no), removed at the end.
shardstream nodes also get --shardstream-args (default: --no-pin, since four
nodes share this machine's cores).
"""
import argparse
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from benchlib import cluster_ports, wait_up

SLOTS = 16384
GROUP = "g"
FIELDS = ("rider", "Castilla", "speed", "30.2", "position", "5", "location_id", "2")


def resp(*args) -> bytes:
    """One command in the Redis protocol (RESP)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Cluster:
    """Four nodes of one server binary; the fourth joins without slots."""

    def __init__(self, name, binary, extra, root):
        self.name = name
        self.ports = cluster_ports(4)
        self.addrs = [f"127.0.0.1:{p}" for p in self.ports]
        self.procs = []
        for p in self.ports:
            d = os.path.join(root, f"{name}-{p}")
            os.makedirs(d)
            argv = [binary, "--port", str(p), "--bind", "127.0.0.1", "--dir", d,
                    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", "5000", "--save", "", "--appendonly", "no",
                    *extra]
            with open(os.path.join(d, "server.log"), "wb") as log:
                self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL))
        for p in self.ports:
            wait_up(p)
        self.direct = [redis.Redis(port=p, decode_responses=True) for p in self.ports]
        for r in self.direct:
            # CLUSTER SLOTS/NODES as the server sends them.
            r.set_response_callback("CLUSTER SLOTS", lambda reply, **_: reply)
            r.set_response_callback("CLUSTER NODES", lambda reply, **_: reply)
        self.ids = [r.execute_command("CLUSTER", "MYID") for r in self.direct]

    def cli(self, *args, timeout=1800):
        res = subprocess.run(["redis-cli", *args], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL,
                             env={**os.environ, "TERM": "dumb"})
        if res.returncode != 0:
            tail = "\n".join((res.stdout + res.stderr).splitlines()[-20:])
            raise SystemExit(f"{self.name}: redis-cli {' '.join(args)} failed:\n{tail}")
        return res.stdout

    def agreed(self, count):
        """The first `count` nodes each know `count` connected nodes and
        report cluster_state:ok."""
        for r in self.direct[:count]:
            lines = r.execute_command("CLUSTER", "NODES").strip().splitlines()
            if len(lines) != count or any(l.split()[7] != "connected" for l in lines):
                return False
            if "cluster_state:ok" not in r.execute_command("CLUSTER", "INFO"):
                return False
        return True

    def wait_agreed(self, count, secs=60):
        deadline = time.time() + secs
        while not self.agreed(count):
            if time.time() > deadline:
                raise SystemExit(f"{self.name}: {count} nodes did not agree within {secs}s")
            time.sleep(0.2)

    def form(self):
        self.cli("--cluster", "create", *self.addrs[:3], "--cluster-replicas", "0",
                 "--cluster-yes", timeout=120)
        self.wait_agreed(3)
        self.cli("--cluster", "add-node", self.addrs[3], self.addrs[0], timeout=60)
        self.wait_agreed(4)
        # redis-cli refuses to reshard until every node agrees on the slots.
        deadline = time.time() + 60
        while subprocess.run(["redis-cli", "--cluster", "check", self.addrs[0]],
                             capture_output=True).returncode != 0:
            if time.time() > deadline:
                raise SystemExit(f"{self.name}: redis-cli --cluster check never passed")
            time.sleep(0.5)

    def owners(self):
        """slot -> node index, from CLUSTER SLOTS of the first node."""
        owner = [None] * SLOTS
        index = {p: i for i, p in enumerate(self.ports)}
        for start, end, master, *_ in self.direct[0].execute_command("CLUSTER", "SLOTS"):
            for s in range(int(start), int(end) + 1):
                owner[s] = index[int(master[1])]
        return owner

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


def load(cl, streams, entries):
    """Entries with explicit IDs, a group, 100 delivered and 50 acked per
    stream, sent to each stream's node through `redis-cli --pipe`."""
    owner = cl.owners()
    per_node = [[] for _ in cl.ports]
    for s in streams:
        per_node[owner[key_slot(s.encode())]].append(s)
    base = 1_700_000_000_000
    procs = []
    for node, keys in enumerate(per_node):
        if not keys:
            continue
        p = subprocess.Popen(["redis-cli", "-p", str(cl.ports[node]), "--pipe"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        procs.append(p)
        for s in keys:
            chunk = [resp("XADD", s, f"{base + i}-0", *FIELDS) for i in range(entries)]
            chunk.append(resp("XGROUP", "CREATE", s, GROUP, "0"))
            chunk.append(resp("XREADGROUP", "GROUP", GROUP, "c1", "COUNT", "100",
                              "STREAMS", s, ">"))
            chunk.append(resp("XACK", s, GROUP, *[f"{base + i}-0" for i in range(50)]))
            p.stdin.write(b"".join(chunk))
    for p in procs:
        out = p.communicate()[0].decode()
        if p.returncode != 0 or "errors: 0," not in out:
            raise SystemExit(f"{cl.name}: loading failed: {out[-500:]}")


class Probe:
    """XADD + XREADGROUP COUNT 1 on a random stream, `rate` pairs a second,
    each call timed: (start time, command, seconds, error or None)."""

    def __init__(self, port, streams, rate, new_node_port):
        self.rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
        # redis-py (8.1 at least) knows only the nodes in CLUSTER SLOTS and
        # fails on an ASK to any other, such as the empty node receiving its
        # first slot (redis-py issue 4015). Tell it about that node, as a
        # MOVED to it would.
        from redis.cluster import PRIMARY, ClusterNode, get_node_name
        cache = getattr(getattr(self.rc, "nodes_manager", None), "nodes_cache", None)
        if cache is not None:
            cache.setdefault(get_node_name("127.0.0.1", new_node_port),
                             ClusterNode("127.0.0.1", new_node_port, PRIMARY))
        self.streams = streams
        self.interval = 1.0 / rate
        self.samples = []
        self.xadds = 0
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def timed(self, name, fn):
        t = time.perf_counter()
        err = None
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - every failure counts, none stops the probe
            err = f"{type(e).__name__}: {e}"
        self.samples.append((t, name, time.perf_counter() - t, err))
        return err is None

    def run(self):
        rnd = random.Random(7)
        fields = dict(zip(FIELDS[::2], FIELDS[1::2]))
        next_at = time.perf_counter()
        while not self.stop_flag.is_set():
            s = rnd.choice(self.streams)
            if self.timed("XADD", lambda: self.rc.xadd(s, fields)):
                self.xadds += 1
            self.timed("XREADGROUP",
                       lambda: self.rc.xreadgroup(GROUP, "probe", {s: ">"}, count=1))
            next_at += self.interval
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.perf_counter()  # fell behind: don't burst to catch up

    def start(self):
        self.thread.start()

    def stop(self):
        self.stop_flag.set()
        self.thread.join()
        self.rc.close()

    def window(self, name, t0, t1):
        lat = sorted(d for t, n, d, e in self.samples if n == name and t0 <= t < t1 and e is None)
        errors = [e for t, n, d, e in self.samples if n == name and t0 <= t < t1 and e]
        return lat, errors


def pct(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def run_one(name, binary, extra, args, root):
    streams = [f"stream:{i}" for i in range(args.streams)]
    print(f"\n== {name} ({binary} {' '.join(extra)})", flush=True)
    cl = Cluster(name, binary, extra, root)
    try:
        cl.form()
        t = time.time()
        load(cl, streams, args.entries)
        print(f"  loaded {args.streams * args.entries:,} entries in {time.time() - t:.1f}s",
              flush=True)

        probe = Probe(cl.ports[0], streams, args.rate, cl.ports[3])
        probe.start()
        time.sleep(1)  # the client connects to every node: not part of "before"
        before0 = time.perf_counter()
        time.sleep(args.before)
        start = time.perf_counter()
        cl.cli("--cluster", "reshard", cl.addrs[0], "--cluster-from", "all",
               "--cluster-to", cl.ids[3], "--cluster-slots", str(args.slots),
               "--cluster-pipeline", str(args.pipeline), "--cluster-yes")
        end = time.perf_counter()
        time.sleep(0.2)
        probe.stop()

        owner = cl.owners()
        moved_keys = [s for s in streams if owner[key_slot(s.encode())] == 3]
        pipe = cl.direct[3].pipeline(transaction=False)
        for s in moved_keys:
            pipe.xlen(s)
        moved_entries = sum(pipe.execute())
        res = {"keys": len(moved_keys), "entries": moved_entries, "secs": end - start,
               "slots": sum(1 for o in owner if o == 3)}
        res["rate"] = moved_entries / res["secs"]
        for cmd in ("XADD", "XREADGROUP"):
            for label, (t0, t1) in (("before", (before0, start)), ("during", (start, end))):
                lat, errors = probe.window(cmd, t0, t1)
                res[(cmd, label)] = (lat, errors)

        # Nothing lost or doubled: every loaded entry and acknowledged probe XADD.
        total = 0
        for node, r in enumerate(cl.direct):
            keys = [s for s in streams if owner[key_slot(s.encode())] == node]
            pipe = r.pipeline(transaction=False)
            for s in keys:
                pipe.xlen(s)
            total += sum(pipe.execute())
        want = args.streams * args.entries + probe.xadds
        if total != want:
            raise SystemExit(f"{name}: {total} entries after the move, want {want}")
        cl.cli("--cluster", "check", cl.addrs[0], timeout=120)
        print_result(res)
        return res
    finally:
        cl.stop()


def fmt_ms(v):
    return f"{v * 1000:.2f}"


def print_result(res):
    print(f"  moved {res['slots']} slots, {res['keys']:,} keys, {res['entries']:,} entries "
          f"in {res['secs']:.2f}s: {res['rate']:,.0f} entries/s, "
          f"{res['slots'] / res['secs']:,.0f} slots/s")
    print(f"  {'probe latency (ms)':24} {'n':>6} {'p50':>8} {'p99':>8} {'p99.9':>8} {'max':>8}  errors")
    for cmd in ("XADD", "XREADGROUP"):
        for label in ("before", "during"):
            lat, errors = res[(cmd, label)]
            print(f"  {cmd + ' ' + label:24} {len(lat):6} {fmt_ms(pct(lat, .5)):>8} "
                  f"{fmt_ms(pct(lat, .99)):>8} {fmt_ms(pct(lat, .999)):>8} "
                  f"{fmt_ms(lat[-1] if lat else float('nan')):>8}  {len(errors)}"
                  + (f" (first: {errors[0]})" if errors else ""))


def compare(a_name, a, b_name, b):
    print(f"\n== {b_name} / {a_name}")
    rows = [("reshard wall time (s)", a["secs"], b["secs"], "{:.2f}"),
            ("entries moved / s", a["rate"], b["rate"], "{:,.0f}")]
    for cmd in ("XADD", "XREADGROUP"):
        for q, qn in ((.5, "p50"), (.99, "p99"), (.999, "p99.9")):
            for label in ("before", "during"):
                rows.append((f"{cmd} {qn} {label} (ms)", pct(a[(cmd, label)][0], q) * 1000,
                             pct(b[(cmd, label)][0], q) * 1000, "{:.2f}"))
    print(f"  {'':28} {a_name:>14} {b_name:>14} {'ratio':>8}")
    for label, x, y, f in rows:
        ratio = y / x if x else float("nan")
        print(f"  {label:28} {f.format(x):>14} {f.format(y):>14} {ratio:8.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", help="redis-server binary")
    ap.add_argument("--shardstream", help="shardstream binary")
    ap.add_argument("--shardstream-args", default="--no-pin",
                    help="extra options for shardstream nodes (default: %(default)s)")
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--entries", type=int, default=1000, help="entries per stream")
    ap.add_argument("--slots", type=int, default=SLOTS // 4, help="slots to move (default 1/4)")
    ap.add_argument("--pipeline", type=int, default=10,
                    help="keys per MIGRATE (redis-cli --cluster-pipeline, default 10)")
    ap.add_argument("--rate", type=float, default=500, help="probe XADD+XREADGROUP pairs/s")
    ap.add_argument("--before", type=float, default=5, help="seconds of idle-cluster latency")
    args = ap.parse_args()
    servers = []
    if args.redis:
        servers.append(("redis-server", args.redis, []))
    if args.shardstream:
        servers.append(("shardstream", args.shardstream, shlex.split(args.shardstream_args)))
    if not servers:
        ap.error("give --redis and/or --shardstream")
    for tool in ("redis-cli",):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (apt-get install redis-tools)")
    print(f"cluster reshard: {args.streams:,} streams x {args.entries:,} entries, "
          f"{args.slots} of {SLOTS} slots to an empty 4th node, probe at {args.rate:g}/s")
    root = tempfile.mkdtemp(prefix="cluster-reshard-")
    try:
        results = [(name, run_one(name, binary, extra, args, root))
                   for name, binary, extra in servers]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if len(results) == 2:
        compare(results[0][0], results[0][1], results[1][0], results[1][1])


if __name__ == "__main__":
    main()
