"""A consumer-group lab, run against any Redis-compatible server binary.

Starts the server exactly as published labs start "a Redis server" (a
private Unix socket, TCP off, no snapshots, no AOF):

    SERVER --port 0 --unixsocket DIR/redis.sock --unixsocketperm 700 \\
           --save "" --appendonly no --dir DIR --maxmemory-policy noeviction

then runs the same consumer-group assertions through redis-py over the
socket, and shuts the server down. Usage:

    python3 consumer_group_lab.py SERVER [EXTRA_ARG ...]

(tests/dropin.rs runs it with redis-server and with shardstream; EXTRA_ARG
is for options only one of them has, e.g. `--shards 2`). Exits non-zero on
any mismatch.
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time

import redis


def start(server: str, extra: list, d: str) -> subprocess.Popen:
    sock = os.path.join(d, "redis.sock")
    argv = [server, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
            "--save", "", "--appendonly", "no", "--dir", d,
            "--maxmemory-policy", "noeviction"] + extra
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{server} exited: {proc.stderr.read().decode()}")
        if os.path.exists(sock):
            try:
                redis.Redis(unix_socket_path=sock).ping()
                return proc
            except redis.ConnectionError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{server} did not open {sock}")


def lab(r: redis.Redis, sock: str) -> None:
    # The socket is private and TCP is off.
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o700, oct(os.stat(sock).st_mode)
    assert r.config_get("port") == {"port": "0"}
    assert r.config_get("save") == {"save": ""}
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}

    # A group on a new stream, three entries, two consumers.
    assert r.xgroup_create("orders", "billing", id="$", mkstream=True)
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(3)]
    got = r.xreadgroup("billing", "alice", {"orders": ">"}, count=2)
    assert [e[0] for e in got[0][1]] == ids[:2], got
    assert got[0][1][0][1] == {"n": "0"}
    got = r.xreadgroup("billing", "bob", {"orders": ">"})
    assert [e[0] for e in got[0][1]] == ids[2:], got
    # Nothing new: a non-blocking read answers an empty result.
    assert r.xreadgroup("billing", "bob", {"orders": ">"}) == []

    # Pending entries list.
    summary = r.xpending("orders", "billing")
    assert summary["pending"] == 3, summary
    assert summary["min"] == ids[0] and summary["max"] == ids[2], summary
    assert sorted((c["name"], c["pending"]) for c in summary["consumers"]) == [
        ("alice", 2), ("bob", 1)], summary
    detail = r.xpending_range("orders", "billing", min="-", max="+", count=10,
                              consumername="alice")
    assert [p["message_id"] for p in detail] == ids[:2], detail
    assert all(p["times_delivered"] == 1 for p in detail), detail

    # Acknowledge one; claim alice's other one for bob.
    assert r.xack("orders", "billing", ids[0]) == 1
    assert r.xack("orders", "billing", ids[0]) == 0
    claimed = r.xclaim("orders", "billing", "bob", min_idle_time=0, message_ids=[ids[1]])
    assert [e[0] for e in claimed] == [ids[1]], claimed
    nxt, entries, deleted = r.xautoclaim("orders", "billing", "carol", min_idle_time=0,
                                         start_id="0-0", count=10)
    assert [e[0] for e in entries] == [ids[1], ids[2]], entries
    assert nxt == "0-0" and deleted == [], (nxt, deleted)
    # Re-reading its own history (id 0) gives carol what she owns.
    own = r.xreadgroup("billing", "carol", {"orders": "0"})
    assert [e[0] for e in own[0][1]] == [ids[1], ids[2]], own

    groups = r.xinfo_groups("orders")
    assert len(groups) == 1 and groups[0]["name"] == "billing", groups
    assert groups[0]["pending"] == 2 and groups[0]["last-delivered-id"] == ids[2], groups
    consumers = {c["name"]: c["pending"] for c in r.xinfo_consumers("orders", "billing")}
    assert consumers == {"alice": 0, "bob": 0, "carol": 2}, consumers

    # A blocking read times out with no reply, then is woken by a producer.
    t0 = time.time()
    timed_out = r.xreadgroup("billing", "dave", {"orders": ">"}, block=100)
    assert not timed_out, timed_out
    assert time.time() - t0 >= 0.09
    producer = redis.Redis(unix_socket_path=sock, decode_responses=True)
    late = {}

    def produce():
        time.sleep(0.2)
        late["id"] = producer.xadd("orders", {"n": "late"})

    th = threading.Thread(target=produce)
    th.start()
    woke = r.xreadgroup("billing", "dave", {"orders": ">"}, block=5000)
    th.join()
    assert woke[0][1][0][0] == late["id"] and woke[0][1][0][1] == {"n": "late"}, woke

    # Errors clients rely on.
    try:
        r.xreadgroup("nogroup", "x", {"orders": ">"})
        raise AssertionError("NOGROUP expected")
    except redis.ResponseError as e:
        assert str(e) == ("NOGROUP No such key 'orders' or consumer group 'nogroup' "
                          "in XREADGROUP with GROUP option"), e
    try:
        r.xgroup_create("orders", "billing", id="$")
        raise AssertionError("BUSYGROUP expected")
    except redis.ResponseError as e:
        assert str(e) == "BUSYGROUP Consumer Group name already exists", e

    # Trim and delete the group.
    assert r.xtrim("orders", maxlen=1, approximate=False) == 3
    assert r.xlen("orders") == 1
    assert r.xgroup_destroy("orders", "billing") == 1
    assert r.xinfo_groups("orders") == []


def main() -> None:
    server, extra = sys.argv[1], sys.argv[2:]
    d = tempfile.mkdtemp(prefix="cg-lab-")
    proc = start(server, extra, d)
    try:
        sock = os.path.join(d, "redis.sock")
        lab(redis.Redis(unix_socket_path=sock, decode_responses=True), sock)
        try:
            redis.Redis(unix_socket_path=sock).shutdown(nosave=True)
        except redis.ConnectionError:
            pass
        proc.wait(timeout=20)
        assert proc.returncode == 0, proc.stderr.read().decode()
        assert not os.path.exists(sock), "the socket file is removed at shutdown"
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(d, ignore_errors=True)
    print(f"consumer-group lab passed against {server}")


if __name__ == "__main__":
    main()
