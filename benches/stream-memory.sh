#!/usr/bin/env bash
# Bytes per stream entry: add N entries of 4 small fields to one stream on
# shardstream and on redis-server in the same run, and compare INFO used_memory
# deltas (and MEMORY USAGE of the key).
#
#   benches/stream-memory.sh [entries]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
cargo build --release -q --bin shardstream
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RP=$(free_port); SP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >/dev/null &
RPID=$!
DATA=$(mktemp -d)
./target/release/shardstream --port "$SP" --shards 2 --appendonly no --dir "$DATA" 2>/dev/null &
SPID=$!
trap 'kill $RPID $SPID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for p in "$RP" "$SP"; do
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
# The rider example of the Redis streams docs: 4 small fields per entry.
gen() {
  python3 - "$N" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
names = [b"Castilla", b"Norem", b"Prickett", b"Sarah", b"Lee"]
for i in range(n):
    args = [b"XADD", b"race:france", b"*", b"rider", names[i % 5], b"speed",
            b"%.1f" % (20 + (i % 150) / 10), b"position", b"%d" % (i % 20),
            b"location_id", b"%d" % (i % 7)]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY
}
used() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '/^used_memory:/{print $2}'; }
printf '%-12s %14s %14s %12s %14s\n' server used_before used_after bytes/entry memory_usage
for p in "$RP" "$SP"; do
  name=$([ "$p" = "$RP" ] && echo redis || echo shardstream)
  before=$(used "$p")
  gen | redis-cli -p "$p" --pipe >/dev/null
  after=$(used "$p")
  mu=$(redis-cli -p "$p" memory usage race:france)
  len=$(redis-cli -p "$p" xlen race:france)
  printf '%-12s %14s %14s %12s %14s  (xlen %s)\n' "$name" "$before" "$after" \
    "$(python3 -c "print(f'{($after-$before)/$N:.1f}')")" "$mu" "$len"
done
