"""Helpers shared by the benchmark scripts in this folder: starting a
server the way a service runs, free loopback ports (also pairs for cluster
nodes), waiting for a server to listen, and where cargo puts the
binaries."""
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cluster_ports(n, bus_offset=10000):
    """`n` free ports P on 127.0.0.1 whose cluster bus port P + 10000 is free
    too. Candidates come from the kernel (bind to port 0), never a fixed list."""
    def bindable(port):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return True
            except OSError:
                return False
    ports = []
    for _ in range(1000):
        p = free_port()
        taken = set(ports) | {q + bus_offset for q in ports}
        if (p + bus_offset <= 65535 and p not in taken
                and p + bus_offset not in taken and bindable(p + bus_offset)):
            ports.append(p)
            if len(ports) == n:
                return ports
    sys.exit("no free port pairs P, P+10000 on 127.0.0.1")


def start_server(argv, **popen_args):
    """Start a server under test in a session of its own, as a daemon or a
    service would run, and return its `subprocess.Popen`.

    Linux's scheduler (with `kernel.sched_autogroup_enabled`, the default on
    desktop and many cloud kernels) shares CPU between sessions first and
    between the threads of one session second. A server started in the
    benchmark's own session would share one group with the load generator's
    threads, and one started apart (say, `redis-server --daemonize yes`) would
    not: on 2 cores that alone moved the 1k entries/s p99.9 by 2x. Every
    server a script compares is started here, so each gets a session of its
    own and none gets the load generator's."""
    popen_args.setdefault("stdout", subprocess.DEVNULL)
    popen_args.setdefault("stderr", subprocess.DEVNULL)
    popen_args.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen(argv, start_new_session=True, **popen_args)


def wait_up(port, secs=20):
    """Wait until something accepts connections on 127.0.0.1:`port`."""
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server on port {port} did not start")


def cpu_times():
    """The host's CPU time counters (the `cpu` line of /proc/stat), or None
    where there is no /proc."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def steal_percent(before, after):
    """The share of CPU time the hypervisor took (steal) between two
    `cpu_times()` readings, in percent; None when unknown. Around 0.1% on a
    quiet VM; at 1% and above, latency tails move by 2x between runs."""
    if not before or not after or len(before) < 8:
        return None
    delta = [b - a for a, b in zip(before, after)]
    # user nice system idle iowait irq softirq steal (guest time is in user)
    total = sum(delta[:8])
    return 100.0 * delta[7] / total if total > 0 else None


def target_dir():
    """Cargo's target directory for this workspace."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)["target_directory"]
