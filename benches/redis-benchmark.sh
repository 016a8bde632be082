#!/usr/bin/env bash
# Side-by-side redis-benchmark: shardstream vs redis-server on this machine, in one run.
#
#   benches/redis-benchmark.sh [requests] [tests]
#
# Starts both servers on free loopback ports, runs redis-benchmark with
# -c 50 at -P 16 and -P 1 against each, and prints requests/s, p50 and p99
# (ms) and the shardstream/redis ratio. Needs redis-server and redis-benchmark
# (apt-get install redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
TESTS=${2:-set,get}
SHARDS=${SHARDS:-$(nproc)}

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

run() { # port pipeline -> lines "test rps p50 p99"
  redis-benchmark -p "$1" -c 50 -n "$N" -P "$2" -t "$TESTS" --csv 2>/dev/null |
    tail -n +2 | tr -d '"' | awk -F, '{print $1, $2, $5, $7}'
}
printf '%-6s %-4s %14s %8s %8s %14s %8s %8s %7s\n' test P redis_rps p50 p99 shard_rps p50 p99 ratio
for P in 16 1; do
  r=$(run "$RP" "$P"); s=$(run "$SP" "$P")
  paste -d' ' <(echo "$r") <(echo "$s") | while read -r t rr rp50 rp99 _ sr sp50 sp99; do
    ratio=$(python3 -c "print(f'{$sr/$rr:.2f}')")
    printf '%-6s %-4s %14s %8s %8s %14s %8s %8s %7s\n' "$t" "$P" "$rr" "$rp50" "$rp99" "$sr" "$sp50" "$sp99" "$ratio"
  done
done
