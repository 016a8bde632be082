"""A delayed-message queue driven by redis-py's `register_script`.

Run by tests/scripting.rs: `python3 delayed_messages.py PORT` against
shardstream or redis-server. Messages wait in a delay queue until due; one
script atomically moves every due message into the delivery stream, so a
message is delivered exactly once however many movers race. Exits non-zero
on any mismatch.

Two delay queues, each keyed on one {hash tag} so a script runs on one shard:
* a stream whose entry IDs are the due times (`XADD delayed <due_ms>-* ...`):
  due messages are `XRANGE delayed - <now>`;
* a sorted set scored by due time (`ZADD`): the earliest due members are
  moved into the stream (`ZRANGEBYSCORE` + `ZREM` + `XADD`).
"""
import sys
import threading

import redis

STREAM_MOVER = """
local due = redis.call('XRANGE', KEYS[1], '-', ARGV[1], 'COUNT', ARGV[2])
for _, entry in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', unpack(entry[2]))
  redis.call('XDEL', KEYS[1], entry[1])
end
return #due
"""

ZSET_MOVER = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, member in ipairs(due) do
  if redis.call('ZREM', KEYS[1], member) == 1 then
    redis.call('XADD', KEYS[2], '*', 'msg', member)
  end
end
return #due
"""


def delivered(r, stream):
    return [fields[b"msg"] for _, fields in r.xrange(stream)]


def race(movers, now, batch):
    moved = []
    lock = threading.Lock()

    def run(mover):
        total = 0
        while True:
            n = mover(now, batch)
            if n == 0:
                break
            total += n
        with lock:
            moved.append(total)

    threads = [threading.Thread(target=run, args=(m,)) for m in movers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(moved)


def stream_queue(r, port):
    delayed, ready = "{dq}:delayed", "{dq}:ready"
    r.delete(delayed, ready)
    for i in range(200):
        due = 1000 + i * 10  # ms; due times 1000..2990
        r.xadd(delayed, {"msg": f"m{i}"}, id=f"{due}-*")
    movers = []
    for _ in range(4):
        conn = redis.Redis(host="127.0.0.1", port=port)
        script = conn.register_script(STREAM_MOVER)
        movers.append(lambda now, batch, s=script: s(keys=[delayed, ready], args=[now, batch]))
    # Nothing is due before 1000.
    assert movers[0](999, 10) == 0
    # At 1995 the first 100 are due; four racing movers deliver each once.
    assert race(movers, 1995, 7) == 100
    got = delivered(r, ready)
    assert got == [f"m{i}".encode() for i in range(100)], got[:5]
    assert r.xlen(delayed) == 100
    assert race(movers, 10_000, 13) == 100
    assert delivered(r, ready) == [f"m{i}".encode() for i in range(200)]
    assert r.xlen(delayed) == 0
    # register_script runs EVALSHA and falls back to EVAL after SCRIPT FLUSH.
    r.script_flush()
    r.xadd(delayed, {"msg": "late"}, id="5000-*")
    assert movers[1](6000, 10) == 1
    assert delivered(r, ready)[-1] == b"late"


def zset_queue(r, port):
    delayed, ready = "{zq}:delayed", "{zq}:ready"
    r.delete(delayed, ready)
    r.zadd(delayed, {f"z{i}": 1000 + i for i in range(100)})
    movers = []
    for _ in range(4):
        conn = redis.Redis(host="127.0.0.1", port=port)
        script = conn.register_script(ZSET_MOVER)
        movers.append(lambda now, batch, s=script: s(keys=[delayed, ready], args=[now, batch]))
    assert movers[0](999, 10) == 0
    assert race(movers, 1049, 5) == 50
    got = delivered(r, ready)
    # Moved in due order, each exactly once.
    assert got == [f"z{i}".encode() for i in range(50)], got
    assert r.zcard(delayed) == 50
    assert race(movers, 10_000, 9) == 50
    assert delivered(r, ready) == [f"z{i}".encode() for i in range(100)]
    assert r.zcard(delayed) == 0


def main():
    port = int(sys.argv[1])
    r = redis.Redis(host="127.0.0.1", port=port)
    stream_queue(r, port)
    zset_queue(r, port)
    print("delayed messages OK (stream and sorted-set queues)")


if __name__ == "__main__":
    main()
