"""Online resharding of a real Redis Cluster holding streams and consumer groups.

Runs against any server binary that takes redis-server's command line (so
redis-server itself is the reference) and drives it only with the standard
tools: `redis-cli --cluster` for topology changes, redis-py's `RedisCluster`
for the data. Usage:

    python3 cluster_reshard.py SERVER SCRATCH_DIR [options] [-- SERVER_ARG ...]

    python3 tests/py/cluster_reshard.py redis-server /tmp/reshard
    python3 tests/py/cluster_reshard.py target/release/shardstream /tmp/reshard \\
        -- --shards 2 --no-pin

Anything after `--` is passed to every node (options only one of the two
servers has). What it does:

1. Four nodes on free loopback ports P (P+10000, the cluster bus, free too),
   each started as

       SERVER --port P --bind 127.0.0.1 --dir SCRATCH_DIR/node-P \\
              --cluster-enabled yes --cluster-config-file nodes.conf \\
              --cluster-node-timeout 5000 --save "" --appendonly no

2. `redis-cli --cluster create` of the first three (no replicas), then waits
   for `cluster_state:ok` everywhere.
3. Streams spread over every node (and a block of streams sharing one hash
   tag, so one slot holds more keys than redis-cli migrates per MIGRATE),
   each with entries and a consumer group in which consumer `setup` has
   been delivered most entries and acknowledged most of those.
4. A writer thread (XADD to random streams, recording every acknowledged
   ID) and group readers (XREADGROUP BLOCK 100 COUNT 10 + XACK of most of
   what they got; two over all streams, one mostly blocked on the
   hash-tagged streams) run while the fourth node is added (`add-node`), 2000
   slots are moved to it (`reshard`) and the cluster is evened out
   (`rebalance --cluster-use-empty-masters`). Any exception that reaches
   a client thread is a failure: redirections (MOVED, ASK, TRYAGAIN) must
   be handled inside redis-py, invisibly. (Two allowances, both explained
   in `Traffic`: servers older than Redis 7.2 may answer a blocked
   XREADGROUP whose stream migrated with -UNBLOCKED, and the clients are
   told about the new node, which redis-py needs for ASK redirections.)
   Where Redis 7.0 and Redis 8 differ, the server's redis_version decides
   which behaviour is expected; shardstream follows Redis 8.
5. Checks: every acknowledged entry is in its stream exactly once and
   nothing else is; each group's last-delivered-id, entries-read, lag, PEL
   (XPENDING summary and full range, owner and delivery count of every
   pending entry) and consumers are exactly what the clients did; XINFO
   STREAM length/last-generated-id/entries-added are intact; every key is
   on the node owning its slot and nowhere else (CLUSTER COUNTKEYSINSLOT,
   DBSIZE adding up to the number of streams); CLUSTER INFO is ok on every
   node; no slot is left migrating or importing; and `redis-cli --cluster
   check` is clean.
6. The same again while 500 slots move back from the new node to the first
   one (skip with --no-reshard-back).
7. The same again while the new node is emptied (all its slots resharded to
   the first) and removed with `redis-cli --cluster del-node`; the three
   others must then agree without it (skip with --no-del-node).

All nodes are killed at the end, also on failure (their logs are printed
then). Prints PASS or FAIL with every failed check, exits 1 on FAIL.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import threading
import time

import redis

# Free port pairs (client port P, bus port P + 10000) come from the
# benchmarks' helpers, shared with benches/cluster-reshard.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benches"))
from benchlib import cluster_ports  # noqa: E402
from redis.cluster import RedisCluster

GROUP = "g"
NODE_TIMEOUT_MS = 5000
BUS_OFFSET = 10000  # the cluster bus listens on port + 10000
CLIENT_TIMEOUT = 30  # seconds: a reply slower than this is a failure, not a hang


# ---------------------------------------------------------------- helpers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def id_key(entry_id: str) -> tuple:
    """A stream ID as a sortable (ms, seq) pair."""
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


def wait_until(pred, secs: float, step: float = 0.1) -> bool:
    deadline = time.time() + secs
    while True:
        try:
            if pred():
                return True
        except redis.RedisError:
            pass
        if time.time() >= deadline:
            return False
        time.sleep(step)


class Failures:
    """Collects failed checks so one run reports all of them."""

    def __init__(self):
        self.items = []

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.items.append(what)
            log(f"FAILED: {what}")
        return ok


# ------------------------------------------------------------------ nodes


class Node:
    def __init__(self, server: str, port: int, root: str, extra: list):
        self.port = port
        self.addr = f"127.0.0.1:{port}"
        self.dir = os.path.join(root, f"node-{port}")
        os.makedirs(self.dir, exist_ok=True)
        argv = [server, "--port", str(port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                "--save", "", "--appendonly", "no"] + extra
        self.log_path = os.path.join(self.dir, "server.log")
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        self.r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True,
                             socket_timeout=CLIENT_TIMEOUT)
        # Replies as the server sends them: this test reads them as redis-cli does.
        for cmd in ("CLUSTER INFO", "CLUSTER NODES", "CLUSTER SLOTS"):
            self.r.set_response_callback(cmd, lambda reply, **_: reply)
        self.id = None

    def wait_ready(self, secs: float = 20) -> None:
        def up():
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.addr} exited with {self.proc.returncode}")
            try:
                return self.r.ping()
            except redis.ConnectionError:
                return False
        if not wait_until(up, secs, 0.05):
            raise RuntimeError(f"node {self.addr} did not answer PING in {secs}s")
        self.id = self.r.execute_command("CLUSTER", "MYID")

    def cluster_info(self) -> dict:
        text = self.r.execute_command("CLUSTER", "INFO")
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def cluster_nodes(self) -> list:
        """CLUSTER NODES as raw lines (open slots show as `[slot->-id]`)."""
        text = self.r.execute_command("CLUSTER", "NODES")
        return [line for line in text.splitlines() if line.strip()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"


def redis_cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run redis-cli, returning its result (output captured, colours off)."""
    argv = ["redis-cli", *args]
    log("$ " + " ".join(argv))
    start = time.time()
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL, env={**os.environ, "TERM": "dumb"})
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return subprocess.CompletedProcess(argv, -1, out, f"timed out after {timeout}s")
    res.elapsed = time.time() - start
    return res


def summarize_cli(res: subprocess.CompletedProcess, lines: int = 25) -> str:
    """The end of a redis-cli run's output, for a failure message."""
    text = (res.stdout or "") + (res.stderr or "")
    # Progress lines of '#' (rebalance) or '.' (one per key moved) are long.
    kept = [l for l in text.splitlines() if not set(l) <= {"#", "."}]
    return "\n".join(kept[-lines:])


# ---------------------------------------------------------------- traffic


class Model:
    """What the clients did, per stream: the expected state of the data."""

    def __init__(self, streams, port):
        self.streams = list(streams)
        self.port = port  # a node to start cluster clients from
        self.entries = {s: [] for s in streams}      # every acknowledged ID, in order
        self.delivered = {s: [] for s in streams}    # IDs delivered to group g, in order
        self.pending = {s: {} for s in streams}      # ID -> consumer, not yet acked
        self.consumers = {s: set() for s in streams}  # consumers that exist in group g
        self.hot = []  # the streams sharing one hash tag (one slot)


class Traffic:
    """A writer and group readers, each on its own RedisCluster client.

    The writer XADDs to random streams and records each acknowledged ID.
    Each reader does XREADGROUP COUNT 10 BLOCK 100 on random streams (one
    stream per call: a cluster client can't mix slots in one command) and
    XACKs what it got except every fourth entry, so the PEL keeps growing
    through the migration. Streams hold few undelivered entries, so the
    readers keep up with the writer, and the one on the hash-tagged streams
    is mostly blocked, also when their slot moves. Exceptions are recorded,
    never retried.
    """

    # Redis before 7.2 (`pre_7_2`) differs from Redis 8, the spec, twice:
    # - It answers a blocked XREADGROUP whose stream was just migrated away
    #   (deleted on the source) with this error. Redis 7.2 and later re-run
    #   the blocked command instead, which the cluster check turns into an
    #   ASK or MOVED that clients follow. So the error is accepted only from
    #   servers older than 7.2.
    # - XREADGROUP creates the consumer only when it delivers entries; 7.2
    #   and later create it on every call, also one that blocks and times
    #   out.
    UNBLOCKED = "UNBLOCKED the stream key no longer exists"

    def __init__(self, model: Model, rate: float, readers: int, hot: list,
                 pre_7_2: bool = False):
        self.model = model
        self.pre_7_2 = pre_7_2
        self.tolerated = 0
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.errors = []
        self.writes = 0
        self.reads = 0
        self.acks = 0
        self.timeouts = 0  # XREADGROUP calls that blocked 100 ms for nothing
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.clients = []
        self.threads = [threading.Thread(target=self._writer, args=(self._client(),),
                                         name="writer", daemon=True)]
        # Readers over all streams, and one over the hash-tagged streams only:
        # the writer adds to those as rarely as to any other stream, so it is
        # mostly blocked, also when their slot migrates.
        plan = [(f"reader-{k + 1}", model.streams) for k in range(readers)]
        if hot:
            plan.append(("reader-hot", hot))
        for k, (name, streams) in enumerate(plan):
            self.threads.append(threading.Thread(
                target=self._reader, args=(self._client(), name, streams, k),
                name=name, daemon=True))

    def _client(self):
        c = RedisCluster(host="127.0.0.1", port=self.model.port, decode_responses=True,
                         socket_timeout=CLIENT_TIMEOUT)
        self.clients.append(c)
        return c

    def start(self):
        for t in self.threads:
            t.start()

    def learn_node(self, host: str, port: int):
        """Put a node that serves no slot yet into each client's node cache.

        redis-py (8.1 at least) builds that cache from CLUSTER SLOTS, which
        lists no slotless node, and fails with AttributeError ('NoneType'
        object has no attribute 'redis_connection') when an ASK points to a
        node it doesn't know: during the first slot moved to a new node,
        any client may get one (redis-py issue 4015). A MOVED adds the
        node the same way as this does, so a client that learns the node
        here behaves as one with that bug fixed; the servers see no
        difference."""
        from redis.cluster import PRIMARY, ClusterNode, get_node_name
        for c in self.clients:
            cache = getattr(getattr(c, "nodes_manager", None), "nodes_cache", None)
            if cache is not None:
                cache.setdefault(get_node_name(host, port), ClusterNode(host, port, PRIMARY))

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=60)
            if t.is_alive():
                self.errors.append(f"{t.name} did not stop within 60s")
        for c in self.clients:
            c.close()

    def _record(self, who, e):
        with self.lock:
            self.errors.append(f"{who}: {type(e).__name__}: {e}")

    def _writer(self, client):
        rnd = random.Random(1)
        n = 0
        while not self.stop_flag.is_set():
            s = rnd.choice(self.model.streams)
            try:
                new_id = client.xadd(s, {"w": str(n), "pad": "x" * 32})
            except Exception as e:  # noqa: BLE001 - any surfacing exception fails
                self._record("writer XADD", e)
                time.sleep(0.05)
                continue
            with self.lock:
                self.model.entries[s].append(new_id)
                self.writes += 1
            n += 1
            if self.interval:
                time.sleep(self.interval)

    def _reader(self, client, name, streams, seed):
        rnd = random.Random(100 + seed)
        m = self.model
        while not self.stop_flag.is_set():
            s = rnd.choice(streams)
            if not self.pre_7_2:
                # The call creates the consumer, whatever it delivers.
                with self.lock:
                    m.consumers[s].add(name)
            try:
                got = client.xreadgroup(GROUP, name, {s: ">"}, count=10, block=100)
            except redis.ResponseError as e:
                if self.pre_7_2 and self.UNBLOCKED in str(e):
                    with self.lock:
                        self.tolerated += 1
                else:
                    self._record(f"{name} XREADGROUP", e)
                    time.sleep(0.05)
                continue
            except Exception as e:  # noqa: BLE001
                self._record(f"{name} XREADGROUP", e)
                time.sleep(0.05)
                continue
            ids = []
            for _stream, entries in (got or []):
                ids.extend(e[0] for e in entries)
            if not ids:
                with self.lock:
                    self.timeouts += 1
                continue
            with self.lock:
                m.consumers[s].add(name)
                m.delivered[s].extend(ids)
                for i in ids:
                    m.pending[s][i] = name
                self.reads += len(ids)
            to_ack = [i for k, i in enumerate(ids) if k % 4 != 3]
            try:
                acked = client.xack(s, GROUP, *to_ack)
            except Exception as e:  # noqa: BLE001
                self._record(f"{name} XACK", e)
                continue
            if acked != len(to_ack):
                self._record(f"{name} XACK", f"acked {acked} of {len(to_ack)} on {s}")
            with self.lock:
                for i in to_ack:
                    m.pending[s].pop(i, None)
                self.acks += len(to_ack)


# ------------------------------------------------------------------- test


class ReshardTest:
    def __init__(self, args, extra):
        self.args = args
        self.extra = extra
        self.fail = Failures()
        self.nodes = []
        self.rc = None
        self.pre_7_2 = False
        self.last_view = ""
        self.members_now = 4  # nodes in the cluster (3 after del-node)

    # ---- cluster plumbing

    def start_nodes(self):
        ports = cluster_ports(4)
        log(f"starting 4 nodes on ports {ports} (bus ports +{BUS_OFFSET})")
        self.nodes = [Node(self.args.server, p, self.args.dir, self.extra) for p in ports]
        for n in self.nodes:
            n.wait_ready()
            enabled = n.r.info("cluster").get("cluster_enabled")
            if str(enabled) != "1":
                raise RuntimeError(f"{n.addr}: INFO cluster_enabled is {enabled!r}, not 1")
        version = self.nodes[0].r.info("server").get("redis_version", "")
        major_minor = tuple(int(x) for x in str(version).split(".")[:2] if x.isdigit())
        self.pre_7_2 = major_minor < (7, 2)
        log(f"nodes report redis_version {version}"
            + (" (before 7.2: a blocked XREADGROUP may see -UNBLOCKED on migration, "
               "and XREADGROUP creates consumers only when it delivers)"
               if self.pre_7_2 else ""))

    def members(self, count):
        return self.nodes[:count]

    def agreed(self, count) -> bool:
        """Every one of the first `count` nodes knows exactly `count` nodes,
        all linked (no handshake/fail/noaddr), with the same slot map, and
        reports cluster_state:ok. What disagrees is kept for the report."""
        maps = set()
        for n in self.members(count):
            lines = n.cluster_nodes()
            self.last_view = f"{n.addr} CLUSTER NODES:\n  " + "\n  ".join(lines)
            fields = [line.split() for line in lines]
            if len(fields) != count or any(len(f) < 8 for f in fields):
                return False
            for f in fields:
                flags, link = f[2].split(","), f[7]
                if link != "connected" or any(
                        bad in flags for bad in ("handshake", "fail", "fail?", "noaddr")):
                    return False
            # Node ID -> its slot ranges (open-slot markers `[...]` aside).
            maps.add(tuple(sorted((f[0], tuple(sorted(x for x in f[8:] if not x.startswith("["))))
                                  for f in fields)))
            state = n.cluster_info().get("cluster_state")
            if state != "ok":
                self.last_view = f"{n.addr} CLUSTER INFO cluster_state:{state}"
                return False
        if len(maps) != 1:
            self.last_view = "nodes report different slot maps"
        return len(maps) == 1

    def wait_agreed(self, count, what, secs=60) -> bool:
        t = time.time()
        self.last_view = ""
        ok = wait_until(lambda: self.agreed(count), secs, 0.2)
        if ok:
            log(f"{what}: all {count} nodes agree ({time.time() - t:.1f}s)")
        return self.fail.check(ok, f"{what}: {count} nodes did not agree on the topology "
                                   f"with cluster_state:ok within {secs}s; last seen: "
                                   f"{self.last_view}")

    def cli_check(self, what, wait_secs=30) -> bool:
        """`redis-cli --cluster check` passes (retried while gossip settles)."""
        first = self.nodes[0].addr
        res = None
        deadline = time.time() + wait_secs
        while True:
            res = redis_cli("--cluster", "check", first, timeout=60)
            out = res.stdout + res.stderr
            clean = (res.returncode == 0 and "[OK] All 16384 slots covered." in out
                     and "[OK] All nodes agree about slots configuration." in out
                     and "[WARNING]" not in out and "[ERR]" not in out)
            if clean or time.time() > deadline:
                break
            time.sleep(1)
        return self.fail.check(clean, f"{what}: redis-cli --cluster check {first} not clean "
                                      f"(exit {res.returncode}):\n{summarize_cli(res)}")

    def run_cli_step(self, what, *args, timeout=300) -> bool:
        res = redis_cli(*args, timeout=timeout)
        elapsed = getattr(res, "elapsed", timeout)
        ok = self.fail.check(res.returncode == 0,
                             f"{what} exited {res.returncode}:\n{summarize_cli(res)}")
        if ok:
            log(f"{what}: done in {elapsed:.1f}s")
        return ok

    def slot_owners(self) -> dict:
        """slot -> port from CLUSTER SLOTS of the first node."""
        owners = {}
        for start, end, master, *_ in self.nodes[0].r.execute_command("CLUSTER", "SLOTS"):
            for slot in range(int(start), int(end) + 1):
                owners[slot] = int(master[1])
        return owners

    # ---- data

    def stream_names(self):
        names = [f"stream:{i}" for i in range(self.args.streams)]
        # One hash tag in a low slot: redis-cli moves the lowest slots of each
        # source first, so this slot moves during the first reshard, with more
        # keys than one MIGRATE batch (--cluster-pipeline, 10 by default).
        tag = next(f"hot{i}" for i in range(100000)
                   if self.rc.keyslot(f"{{hot{i}}}") < 400)
        names += [f"{{{tag}}}:{j}" for j in range(self.args.hot_streams)]
        return names

    def load(self, model: Model):
        """Entries, then group g from 0 in which consumer `setup` has been
        delivered all but the last 10 and acknowledged all but every 10th
        of those: PELs to carry over, and few undelivered entries, so the
        readers soon wait (blocked) for the writer's."""
        rc = self.rc
        per = self.args.entries
        pipe = rc.pipeline()
        for s in model.streams:
            for i in range(per):
                pipe.xadd(s, {"i": str(i), "pad": "y" * 32})
        ids = pipe.execute()
        for k, s in enumerate(model.streams):
            model.entries[s] = list(ids[k * per:(k + 1) * per])
        take = max(per - 10, 1)
        for s in model.streams:
            rc.xgroup_create(s, GROUP, id="0")
            got = rc.xreadgroup(GROUP, "setup", {s: ">"}, count=take)
            delivered = [e[0] for e in got[0][1]]
            if delivered != model.entries[s][:take]:
                raise RuntimeError(f"setup read of {s}: {len(delivered)} entries")
            model.delivered[s] = delivered
            model.consumers[s].add("setup")
            rc.xack(s, GROUP, *[i for k, i in enumerate(delivered) if k % 10 != 9])
            model.pending[s] = {i: "setup" for k, i in enumerate(delivered) if k % 10 == 9}

    # ---- checks

    def verify(self, model: Model, traffic_errors, label):
        """Everything the clients did is exactly what the cluster holds."""
        log(f"verifying ({label})")
        f = self.fail
        f.check(not traffic_errors, f"{label}: {len(traffic_errors)} client exception(s), first: "
                                    + "; ".join(traffic_errors[:5]))
        rc = RedisCluster(host="127.0.0.1", port=self.nodes[0].port, decode_responses=True,
                          socket_timeout=CLIENT_TIMEOUT)
        try:
            bad_streams = 0
            for s in model.streams:
                if not self.verify_stream(rc, model, s, label):
                    bad_streams += 1
                    if bad_streams >= 10:
                        f.check(False, f"{label}: stopping stream checks after 10 bad streams")
                        break
            self.verify_keys(rc, model, label)
        finally:
            rc.close()
        self.verify_topology(label)

    def verify_stream(self, rc, model, s, label) -> bool:
        f = self.fail
        want = model.entries[s]
        got = [e[0] for e in rc.xrange(s)]
        if got != want:
            dup = len(got) - len(set(got))
            missing = [i for i in want if i not in set(got)]
            extra = [i for i in got if i not in set(want)]
            return f.check(False, f"{label}: {s}: XRANGE differs: {len(got)} entries, want "
                                  f"{len(want)}; {dup} duplicated, missing {missing[:5]}, "
                                  f"unexpected {extra[:5]}, in order: "
                                  f"{got == sorted(got, key=id_key)}")
        ok = True
        info = rc.xinfo_stream(s)
        ok &= f.check(info["length"] == len(want) and info["last-generated-id"] == want[-1]
                      and info.get("entries-added", len(want)) == len(want)
                      and info["groups"] == 1,
                      f"{label}: {s}: XINFO STREAM length={info['length']} "
                      f"last-generated-id={info['last-generated-id']} "
                      f"entries-added={info.get('entries-added')} groups={info['groups']}, "
                      f"want {len(want)}/{want[-1]}/{len(want)}/1")

        # Two readers may read one stream at once and record their replies in
        # either order, so the delivered IDs are compared as a set: each
        # delivered once, and together a prefix of the stream.
        delivered = sorted(model.delivered[s], key=id_key)
        twice = len(delivered) - len(set(delivered))
        ok &= f.check(twice == 0 and delivered == want[:len(delivered)],
                      f"{label}: {s}: delivered IDs are not a prefix of the stream: "
                      f"{twice} delivered twice, skipped "
                      f"{[i for i in want[:len(delivered)] if i not in set(delivered)][:5]}")
        pending = model.pending[s]
        (group,) = rc.xinfo_groups(s)
        want_group = {"name": GROUP, "last-delivered-id": delivered[-1],
                      "pending": len(pending), "consumers": len(model.consumers[s])}
        have_group = {k: group.get(k) for k in want_group}
        if group.get("entries-read") is not None:  # Redis >= 7.0
            want_group["entries-read"] = len(delivered)
            have_group["entries-read"] = group["entries-read"]
            want_group["lag"] = len(want) - len(delivered)
            have_group["lag"] = group.get("lag")
        ok &= f.check(have_group == want_group,
                      f"{label}: {s}: XINFO GROUPS {have_group}, want {want_group}")

        summary = rc.xpending(s, GROUP)
        per_consumer = {}
        for c in pending.values():
            per_consumer[c] = per_consumer.get(c, 0) + 1
        have_summary = (summary["pending"], summary["min"], summary["max"],
                        {c["name"]: int(c["pending"]) for c in summary["consumers"] or []})
        want_summary = (len(pending), min(pending, key=id_key) if pending else None,
                        max(pending, key=id_key) if pending else None, per_consumer)
        ok &= f.check(have_summary == want_summary,
                      f"{label}: {s}: XPENDING summary {have_summary}, want {want_summary}")

        rows = rc.xpending_range(s, GROUP, min="-", max="+", count=len(pending) + 10)
        have_pel = {r["message_id"]: (r["consumer"], r["times_delivered"]) for r in rows}
        want_pel = {i: (c, 1) for i, c in pending.items()}
        ok &= f.check(have_pel == want_pel,
                      f"{label}: {s}: XPENDING range differs: missing "
                      f"{sorted(set(want_pel) - set(have_pel))[:5]}, unexpected "
                      f"{sorted(set(have_pel) - set(want_pel))[:5]}, wrong owner/count "
                      f"{[(i, have_pel[i]) for i in have_pel if i in want_pel and have_pel[i] != want_pel[i]][:5]}")

        consumers = {c["name"]: c["pending"] for c in rc.xinfo_consumers(s, GROUP)}
        want_consumers = {c: per_consumer.get(c, 0) for c in model.consumers[s]}
        ok &= f.check(consumers == want_consumers,
                      f"{label}: {s}: XINFO CONSUMERS {consumers}, want {want_consumers}")
        return ok

    def verify_keys(self, rc, model, label):
        """Each stream lives only on the node owning its slot; DBSIZE adds up."""
        owners = self.slot_owners()
        slots = {}
        for s in model.streams:
            slots.setdefault(rc.keyslot(s), []).append(s)
        total = 0
        for n in self.nodes:
            dbsize = n.r.dbsize()
            total += dbsize
            owned = 0
            for slot, keys in slots.items():
                count = n.r.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
                want = len(keys) if owners.get(slot) == n.port else 0
                self.fail.check(count == want, f"{label}: {n.addr}: CLUSTER COUNTKEYSINSLOT "
                                               f"{slot} = {count}, want {want} ({keys[0]}...)")
                owned += want
            self.fail.check(dbsize == owned, f"{label}: {n.addr}: DBSIZE {dbsize}, "
                                             f"want {owned} (the streams in its slots)")
        self.fail.check(total == len(model.streams),
                        f"{label}: DBSIZE summed over nodes {total}, want {len(model.streams)}")
        per_node = {n.port: sum(1 for p in owners.values() if p == n.port) for n in self.nodes}
        log(f"{label}: slots per node {per_node}, keys per node "
            f"{ {n.port: n.r.dbsize() for n in self.nodes} }")

    def verify_topology(self, label):
        count = self.members_now
        for n in self.members(count):
            info = n.cluster_info()
            got = {k: info.get(k) for k in ("cluster_state", "cluster_slots_assigned",
                                            "cluster_slots_ok", "cluster_known_nodes",
                                            "cluster_size")}
            want = {"cluster_state": "ok", "cluster_slots_assigned": "16384",
                    "cluster_slots_ok": "16384", "cluster_known_nodes": str(count),
                    "cluster_size": str(count)}
            self.fail.check(got == want, f"{label}: {n.addr}: CLUSTER INFO {got}, want {want}")
            open_slots = [x for line in n.cluster_nodes() for x in line.split()[8:]
                          if x.startswith("[")]
            self.fail.check(not open_slots, f"{label}: {n.addr}: open slots {open_slots[:5]}")
        self.cli_check(label)

    # ---- the scenario

    def run(self):
        a = self.args
        self.start_nodes()
        p1, p4 = self.nodes[0], self.nodes[3]

        if not self.run_cli_step("create", "--cluster", "create",
                                 *[n.addr for n in self.nodes[:3]],
                                 "--cluster-replicas", "0", "--cluster-yes", timeout=120):
            return
        if not self.wait_agreed(3, "create"):
            return

        self.rc = RedisCluster(host="127.0.0.1", port=p1.port, decode_responses=True,
                               socket_timeout=CLIENT_TIMEOUT)
        model = Model(self.stream_names(), p1.port)
        model.hot = model.streams[a.streams:]
        owners = self.slot_owners()
        spread = {owners[self.rc.keyslot(s)] for s in model.streams}
        if not self.fail.check(spread == {n.port for n in self.nodes[:3]},
                               f"streams must start on all 3 nodes, are on {spread}"):
            return
        t = time.time()
        self.load(model)
        log(f"loaded {len(model.streams)} streams x {a.entries} entries with a group each "
            f"({time.time() - t:.1f}s)")

        traffic = Traffic(model, a.rate, a.readers, model.hot, self.pre_7_2)
        traffic.start()
        log("writer and reader running")
        try:
            steps_ok = (
                self.run_cli_step("add-node", "--cluster", "add-node", p4.addr, p1.addr, timeout=60)
                and self.wait_agreed(4, "add-node")
                and self.cli_check("after add-node")
            )
            traffic.learn_node("127.0.0.1", p4.port)
            if steps_ok:
                before = traffic.writes
                steps_ok = self.run_cli_step(
                    f"reshard {a.slots} slots to {p4.addr}", "--cluster", "reshard", p1.addr,
                    "--cluster-from", "all", "--cluster-to", p4.id,
                    "--cluster-slots", str(a.slots), "--cluster-yes")
                log(f"{traffic.writes - before} XADDs acknowledged during the reshard")
                hot = self.rc.keyslot(model.streams[-1])
                self.fail.check(not steps_ok or self.slot_owners().get(hot) == p4.port,
                                f"slot {hot} (the {a.hot_streams} hash-tagged streams) was "
                                f"expected to move to {p4.addr} in the reshard")
                steps_ok = steps_ok and self.cli_check("after reshard")
            if steps_ok:
                steps_ok = self.run_cli_step(
                    "rebalance", "--cluster", "rebalance", p1.addr,
                    "--cluster-use-empty-masters") and self.cli_check("after rebalance")
            # Give the reader a moment to drain entries written just now.
            time.sleep(0.5)
        finally:
            traffic.stop()
        self.report_traffic(traffic)
        if not steps_ok:
            self.fail.check(not traffic.errors, "client exceptions: " + "; ".join(traffic.errors[:5]))
            return
        self.verify(model, traffic.errors, "after reshard + rebalance")

        if a.no_reshard_back or self.fail.items:
            return
        def reshard_back():
            ok = self.run_cli_step(
                f"reshard {a.slots_back} slots back to {p1.addr}", "--cluster", "reshard",
                p1.addr, "--cluster-from", p4.id, "--cluster-to", p1.id,
                "--cluster-slots", str(a.slots_back), "--cluster-yes")
            return ok and self.cli_check("after reshard back")

        traffic, steps_ok = self.under_traffic(model, reshard_back)
        if not steps_ok:
            return
        self.verify(model, traffic.errors, "after reshard back")

        if a.no_del_node or self.fail.items:
            return

        # Empty the 4th node (reshard all its slots to the first) and remove
        # it with del-node, under traffic; the other three go on alone.
        def remove_p4():
            left = sum(1 for port in self.slot_owners().values() if port == p4.port)
            ok = self.run_cli_step(
                f"reshard the {left} slots of {p4.addr} to {p1.addr}", "--cluster", "reshard",
                p1.addr, "--cluster-from", p4.id, "--cluster-to", p1.id,
                "--cluster-slots", str(left), "--cluster-yes")
            ok = ok and self.run_cli_step(
                "del-node", "--cluster", "del-node", p1.addr, p4.id, timeout=60)
            self.members_now = 3
            return ok and self.wait_agreed(3, "del-node")

        traffic, steps_ok = self.under_traffic(model, remove_p4)
        if steps_ok:
            self.fail.check(p4.r.dbsize() == 0, f"{p4.addr} still holds keys after del-node")
            self.verify(model, traffic.errors, "after del-node")

    def under_traffic(self, model, step):
        """Run `step` with a fresh writer and readers going; report them.
        Returns (traffic, what `step` returned)."""
        a = self.args
        traffic = Traffic(model, a.rate, a.readers, model.hot, self.pre_7_2)
        traffic.start()
        try:
            ok = step()
            time.sleep(0.5)  # let the readers drain what was just written
        finally:
            traffic.stop()
        self.report_traffic(traffic)
        return traffic, ok

    @staticmethod
    def report_traffic(traffic):
        log(f"traffic: {traffic.writes} XADDs, {traffic.reads} entries delivered, "
            f"{traffic.acks} acked, {traffic.timeouts} blocked reads timed out, "
            f"{len(traffic.errors)} exceptions"
            + (f", {traffic.tolerated} XREADGROUP -UNBLOCKED (Redis < 7.2)"
               if traffic.tolerated else ""))

    def stop_nodes(self):
        for n in self.nodes:
            n.stop()


def parse_args(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(
        description="Online resharding of a 3+1 node cluster holding streams and groups.",
        epilog="Arguments after -- are passed to every node.")
    ap.add_argument("server", help="server binary (redis-server or shardstream)")
    ap.add_argument("dir", help="scratch directory; one sub-directory per node")
    ap.add_argument("--streams", type=int, default=200, help="streams spread over all slots")
    ap.add_argument("--hot-streams", type=int, default=25,
                    help="extra streams sharing one hash tag (one slot)")
    ap.add_argument("--entries", type=int, default=200, help="entries loaded per stream")
    ap.add_argument("--slots", type=int, default=2000, help="slots moved to the new node")
    ap.add_argument("--slots-back", type=int, default=500, help="slots moved back afterwards")
    ap.add_argument("--rate", type=float, default=2000,
                    help="writer XADDs per second at most (0: as fast as it goes)")
    ap.add_argument("--readers", type=int, default=2, help="group reader threads")
    ap.add_argument("--no-reshard-back", action="store_true", help="skip the second reshard")
    ap.add_argument("--no-del-node", action="store_true",
                    help="skip emptying and removing the 4th node")
    ap.add_argument("--keep", action="store_true", help="keep the node directories on PASS")
    return ap.parse_args(argv), extra


def main() -> int:
    args, extra = parse_args(sys.argv[1:])
    args.server = shutil.which(args.server) or args.server
    os.makedirs(args.dir, exist_ok=True)
    test = ReshardTest(args, extra)
    t0 = time.time()
    try:
        test.run()
    except Exception as e:  # noqa: BLE001 - reported as a failure below
        test.fail.check(False, f"aborted: {type(e).__name__}: {e}")
    finally:
        test.stop_nodes()
    elapsed = time.time() - t0
    if test.fail.items:
        for n in test.nodes:
            print(f"\n--- log tail of {n.addr} ({n.log_path})\n{n.log_tail()}")
        print(f"\nFAIL: cluster reshard against {args.server} ({elapsed:.0f}s), "
              f"{len(test.fail.items)} failed check(s):")
        for item in test.fail.items:
            print(f"  - {item}")
        return 1
    if not args.keep:
        for n in test.nodes:
            shutil.rmtree(n.dir, ignore_errors=True)
    print(f"\nPASS: cluster reshard against {args.server} ({elapsed:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
