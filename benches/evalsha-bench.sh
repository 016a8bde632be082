#!/usr/bin/env bash
# EVALSHA of a two-command script: shardstream vs redis-server on this
# machine, in one run.
#
#   benches/evalsha-bench.sh [requests] [clients]
#
# Starts both servers on free loopback ports, loads the same script in each
# (INCR a counter, then XADD its value to a capped stream: two redis.call per
# EVALSHA, keys in one slot) and runs redis-benchmark's EVALSHA at -P 1 and
# -P 16, printing requests/s, p50 and p99 (ms) and the shardstream/redis
# throughput ratio. Needs redis-server, redis-cli and redis-benchmark
# (apt-get install redis-server redis-tools). Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
C=${2:-50}
SHARDS=${SHARDS:-$(nproc)}
SCRIPT="local n = redis.call('INCR', KEYS[1]) redis.call('XADD', KEYS[2], 'MAXLEN', '~', '1000', '*', 'n', n) return n"

cargo build --release -q --bin shardstream
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RP=$(free_port); SP=$(free_port)
# Each server in a session of its own, as a service runs: the scheduler
# groups CPU time by session (see start_server in benches/benchlib.py).
setsid redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >/dev/null &
RPID=$!
DATA=$(mktemp -d)
setsid ./target/release/shardstream --port "$SP" --shards "$SHARDS" --appendonly no --dir "$DATA" 2>/dev/null &
SPID=$!
trap 'kill $RPID $SPID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for p in "$RP" "$SP"; do
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
RSHA=$(redis-cli -p "$RP" SCRIPT LOAD "$SCRIPT")
SSHA=$(redis-cli -p "$SP" SCRIPT LOAD "$SCRIPT")
[ "$RSHA" = "$SSHA" ] || { echo "SHA1 differs: $RSHA vs $SSHA" >&2; exit 1; }

run() { # port pipeline -> "rps p50 p99"
  redis-benchmark -p "$1" -c "$C" -n "$N" -P "$2" --csv \
    EVALSHA "$RSHA" 2 '{bench}:counter' '{bench}:events' 2>/dev/null |
    tail -n 1 | tr -d '"' | awk -F, '{print $2, $5, $7}'
}
printf '%-4s %12s %8s %8s %12s %8s %8s %7s\n' P redis_rps p50 p99 shard_rps p50 p99 ratio
for P in 1 16; do
  read -r rr rp50 rp99 <<<"$(run "$RP" "$P")"
  read -r sr sp50 sp99 <<<"$(run "$SP" "$P")"
  ratio=$(python3 -c "print(f'{$sr/$rr:.2f}')")
  printf '%-4s %12s %8s %8s %12s %8s %8s %7s\n' "$P" "$rr" "$rp50" "$rp99" "$sr" "$sp50" "$sp99" "$ratio"
done
# Both servers ran every request: the counters agree.
echo "counter: redis $(redis-cli -p "$RP" GET '{bench}:counter')  shardstream $(redis-cli -p "$SP" GET '{bench}:counter')"
