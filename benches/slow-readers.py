#!/usr/bin/env python3
"""Memory and fairness under slow readers and big values, shardstream vs redis-server.

    python3 benches/slow-readers.py [--entries 200000] [--value-mb 100]

Each case runs on a fresh server (release build, no AOF; redis-server without
persistence), one server at a time, with a bystander client that sends PING
in a loop the whole time:

* limit:   200k stream entries of ~100 bytes; CONFIG SET
           client-output-buffer-limit "normal 4mb 2mb 2"; a client pipelines
           `XRANGE big - +` ten times and never reads.
* nolimit: the same data, no limit; a client pipelines 30k
           `XRANGE big - + COUNT 100` and never reads (then goes away).
* bigval:  SET of one --value-mb MB value, then GET of it, read in full.

Reported per case and server: peak RSS above the loaded baseline (VmHWM −
VmRSS before the case, MB), RSS above baseline once the case is over (MB),
and the bystander's PING p99 / max (ms). Ratios are shardstream / redis.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resp(*args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
    return b"".join(out)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Client:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def reply(self):
        line = self.f.readline()
        t = line[:1]
        if t in (b"+", b"-", b":"):
            return line[1:-2]
        if t == b"$":
            n = int(line[1:-2])
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(line[1:-2])
            return [self.reply() for _ in range(max(n, 0))]
        raise RuntimeError(f"unexpected reply {line!r}")

    def call(self, *args):
        self.s.sendall(resp(*args))
        return self.reply()


def rss_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_hwm(pid):
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def bystander(port, stop, out):
    c = Client(port)
    lat = []
    while not stop.is_set():
        t = time.perf_counter()
        c.call("PING")
        lat.append(time.perf_counter() - t)
        time.sleep(0.001)
    out.extend(lat)


def load(port, entries):
    c = Client(port)
    payload = b"x" * 80
    batch = 1000
    for start in range(0, entries, batch):
        c.s.sendall(b"".join(resp("XADD", "big", "*", "f", payload) for _ in range(batch)))
        for _ in range(batch):
            c.reply()
    return c


def case_limit(port, admin):
    admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 4mb 2mb 2")
    slow = socket.create_connection(("127.0.0.1", port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.sendall(resp("XRANGE", "big", "-", "+") * 10)
    time.sleep(3)
    slow.close()


def case_nolimit(port, admin):
    admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0")
    slow = socket.create_connection(("127.0.0.1", port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    one = resp("XRANGE", "big", "-", "+", "COUNT", "100")
    for _ in range(30):
        slow.sendall(one * 1000)
    time.sleep(3)
    slow.close()


def case_bigval(port, admin, value_mb):
    c = Client(port)
    c.s.sendall(resp("SET", "v", b"y" * (value_mb << 20)))
    assert c.reply() == b"OK"
    got = c.call("GET", "v")
    assert got is not None and len(got) == value_mb << 20
    c.call("DEL", "v")


def run_case(name, server_cmd, entries, value_mb):
    port = free_port()
    proc = subprocess.Popen(server_cmd(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        admin = load(port, entries) if name != "bigval" else Client(port)
        time.sleep(0.5)
        base = rss_kb(proc.pid, "VmRSS")
        reset_hwm(proc.pid)
        stop = threading.Event()
        lat = []
        t = threading.Thread(target=bystander, args=(port, stop, lat))
        t.start()
        time.sleep(0.2)
        if name == "limit":
            case_limit(port, admin)
        elif name == "nolimit":
            case_nolimit(port, admin)
        else:
            case_bigval(port, admin, value_mb)
        time.sleep(1)
        stop.set()
        t.join()
        peak = rss_kb(proc.pid, "VmHWM")
        after = rss_kb(proc.pid, "VmRSS")
        lat.sort()
        p99 = lat[int(len(lat) * 0.99)] if lat else 0
        return (peak - base) / 1024, (after - base) / 1024, p99 * 1000, (lat[-1] if lat else 0) * 1000
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=200000)
    ap.add_argument("--value-mb", type=int, default=100)
    opts = ap.parse_args()
    if not shutil.which("redis-server"):
        sys.exit("redis-server not found: apt-get install redis-server")
    subprocess.run(["cargo", "build", "--release", "-q", "--bin", "shardstream"], cwd=ROOT, check=True)
    out = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    import json
    binary = os.path.join(json.loads(out)["target_directory"], "release", "shardstream")
    tmp = tempfile.mkdtemp(prefix="slow-readers-")
    servers = {
        "redis": lambda p: ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no"],
        "shardstream": lambda p: [binary, "--port", str(p), "--appendonly", "no", "--dir",
                                  os.path.join(tmp, str(p))],
    }
    print(f"{'case':8} | {'server':11} | {'peak MB':>8} | {'after MB':>8} | {'PING p99 ms':>11} | {'max ms':>8}")
    try:
        for name in ("limit", "nolimit", "bigval"):
            res = {}
            for srv, cmd in servers.items():
                res[srv] = run_case(name, cmd, opts.entries, opts.value_mb)
                peak, after, p99, mx = res[srv]
                print(f"{name:8} | {srv:11} | {peak:8.1f} | {after:8.1f} | {p99:11.2f} | {mx:8.2f}")
            r, s = res["redis"], res["shardstream"]
            print(f"{name:8} | {'ratio':11} | {s[0] / max(r[0], 1):8.2f} | {'':8} | "
                  f"{s[2] / max(r[2], 0.001):11.2f} | {s[3] / max(r[3], 0.001):8.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
