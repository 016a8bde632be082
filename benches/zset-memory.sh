#!/usr/bin/env bash
# Bytes per sorted-set member: the same members on shardstream and on
# redis-server in the same run, compared by INFO used_memory deltas (and
# MEMORY USAGE of one key).
#
#   benches/zset-memory.sh [members]
#
# Two shapes of N members each (default 1M):
#   one-key   one sorted set of N members (skiplist encoding on both):
#             delayed jobs, member "job:<8 digits>", score a due time in ms;
#   small     N/100 sorted sets of 100 members (listpack encoding on both).
# BIN=path picks the shardstream binary (default: a release build). The data
# structures and the allocator are the same in a debug build, so the bytes
# are too.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q --bin shardstream
  BIN=./target/release/shardstream
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RP=$(free_port); SP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >/dev/null &
RPID=$!
DATA=$(mktemp -d)
"$BIN" --port "$SP" --shards "${SHARDS:-2}" --appendonly no --dir "$DATA" 2>/dev/null &
SPID=$!
trap 'kill $RPID $SPID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for p in "$RP" "$SP"; do
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
# ZADD commands, 100 members per command, as RESP.
gen() {
  python3 - "$N" "$1" <<'PY'
import sys
n, shape = int(sys.argv[1]), sys.argv[2]
out = sys.stdout.buffer
due = 1_800_000_000_000
for base in range(0, n, 100):
    key = b"jobs" if shape == "one-key" else b"small:%d" % (base // 100)
    args = [b"ZADD", key]
    for i in range(base, min(base + 100, n)):
        args += [b"%d" % (due + i * 7 % 1_000_003), b"job:%08d" % i]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY
}
used() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '/^used_memory:/{print $2}'; }
printf '%-8s %-12s %14s %14s %13s %14s %10s\n' shape server used_before used_after bytes/member memory_usage encoding
for shape in one-key small; do
  key=$([ "$shape" = one-key ] && echo jobs || echo small:0)
  for p in "$RP" "$SP"; do
    name=$([ "$p" = "$RP" ] && echo redis || echo shardstream)
    redis-cli -p "$p" flushall >/dev/null
    sleep 0.5
    before=$(used "$p")
    gen "$shape" | redis-cli -p "$p" --pipe >/dev/null
    sleep 0.5
    after=$(used "$p")
    mu=$(redis-cli -p "$p" memory usage "$key")
    enc=$(redis-cli -p "$p" object encoding "$key")
    printf '%-8s %-12s %14s %14s %13s %14s %10s\n' "$shape" "$name" "$before" "$after" \
      "$(python3 -c "print(f'{($after-$before)/$N:.1f}')")" "$mu" "$enc"
  done
done
