#!/usr/bin/env python3
"""Cross-shard transactions side by side with redis-server, in one run.

    python3 benches/tx-vs-redis.py [--runs 3] [--secs 5] [--shards 2]

Starts redis-server (no persistence) and shardstream (release build, no AOF,
`--shards N`) on free loopback ports and measures, against each in turn:

* `loadgen xadd --multi 2`: MULTI, one XADD to each of two streams whose keys
  sit in different halves of the slot space (different shards of
  shardstream), EXEC — transactions/s and per-transaction p50 / p99 µs, at
  pipeline 1 (`-c 8`) and pipeline 16 (`-c 8 -P 16`);
* the same with `--multi 1` (one stream, one shard: the single-shard fast
  path) for reference;
* the cost to single-shard commands running at the same time: `loadgen xadd
  -c 8 -P 16` over 1000 streams alone, then again while `loadgen xadd --multi
  2 -c 4` runs beside it — XADDs/s of the single-shard load in both cases.

Cells are medians of `--runs`; ratio columns are shardstream / redis-server
(higher is better for throughput, lower for latency). Needs redis-server
(apt-get install redis-server).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import ROOT, free_port, start_server, target_dir, wait_up


def xadd(binary, port, secs, args, path):
    """Start `loadgen xadd`; returns the process (its JSON report lands in `path`)."""
    if os.path.exists(path):
        os.remove(path)
    return subprocess.Popen(
        [binary, "xadd", "--port", str(port), "--duration", str(secs), "--quiet",
         "--json", path, *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def report(proc, path):
    proc.wait()
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=int, default=5, help="seconds per loadgen run")
    ap.add_argument("--shards", type=int, default=2)
    opts = ap.parse_args()
    if not shutil.which("redis-server"):
        sys.exit("redis-server not found: apt-get install redis-server")
    subprocess.run(["cargo", "build", "--release", "-q", "--workspace"], cwd=ROOT, check=True)
    tdir = target_dir()
    shard_bin = os.path.join(tdir, "release", "shardstream")
    lg = os.path.join(tdir, "release", "loadgen")

    tmp = tempfile.mkdtemp(prefix="tx-vs-redis-")
    procs = []
    try:
        rp, sp = free_port(), free_port()
        procs.append(start_server(
            ["redis-server", "--port", str(rp), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"]))
        procs.append(start_server(
            [shard_bin, "--port", str(sp), "--shards", str(opts.shards), "--appendonly", "no",
             "--dir", os.path.join(tmp, "data")]))
        servers = [("redis", rp), (f"ss{opts.shards}", sp)]
        for _, p in servers:
            wait_up(p)
        a, b = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
        secs = opts.secs

        def tx(multi, pipeline):
            def run(port):
                j = report(xadd(lg, port, secs, ["--multi", str(multi), "-c", "8", "-P",
                                                 str(pipeline)], a), a)
                return {"tx/s": j["ops_per_s"], "p50": j["latency_us"]["p50"],
                        "p99": j["latency_us"]["p99"]}
            return run

        def alone(port):
            j = report(xadd(lg, port, secs, ["-c", "8", "-P", "16", "--keys", "1000"], a), a)
            return {"xadd/s": j["ops_per_s"]}

        def beside(port):
            single = xadd(lg, port, secs, ["-c", "8", "-P", "16", "--keys", "1000"], a)
            multi = xadd(lg, port, secs, ["--multi", "2", "-c", "4", "--key-prefix",
                                          "loadgen:tx"], b)
            j = report(single, a)
            t = report(multi, b)
            return {"xadd/s": j["ops_per_s"], "tx/s": t["ops_per_s"]}

        rows = [
            ("2 XADD/EXEC, 2 shards, P1", tx(2, 1)),
            ("2 XADD/EXEC, 2 shards, P16", tx(2, 16)),
            ("1 XADD/EXEC, 1 shard, P1", tx(1, 1)),
            ("1 XADD/EXEC, 1 shard, P16", tx(1, 16)),
            ("single-shard XADD alone", alone),
            ("single-shard XADD + tx load", beside),
        ]
        results = {}
        for run in range(opts.runs):
            for name, f in rows:
                for col, port in servers:
                    results.setdefault((name, col), []).append(f(port))
            print(f"run {run + 1}/{opts.runs} done", file=sys.stderr)

        cols = [c for c, _ in servers]
        print(f"{'figure':30} | " + " | ".join(f"{c:>34}" for c in cols) + " | ratio")
        for name, _ in rows:
            keys = list(results[(name, cols[0])][0].keys())
            med = {c: {k: statistics.median(v[k] for v in results[(name, c)]) for k in keys}
                   for c in cols}
            cells = [" ".join(f"{k} {med[c][k]:,.0f}" for k in keys) for c in cols]
            ratio = " ".join(f"{med[cols[1]][k] / max(med[cols[0]][k], 1e-9):.2f}" for k in keys)
            print(f"{name:30} | " + " | ".join(f"{x:>34}" for x in cells) + f" | {ratio}")
        print(f"\nmedians of {opts.runs} runs of {secs} s; p50/p99 are per-transaction µs "
              "(the pipeline's round trip)")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
