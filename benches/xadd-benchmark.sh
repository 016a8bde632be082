#!/usr/bin/env bash
# XADD throughput, shardstream vs redis-server in one run (redis-benchmark
# custom command, -c 50, pipelined and not, one key and 1000 random keys).
#
#   benches/xadd-benchmark.sh [requests]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
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
bench() { # port pipeline keyspace-args... -> "rps p50 p99"
  local port=$1 p=$2; shift 2
  redis-benchmark -p "$port" -c 50 -n "$N" -P "$p" --csv "$@" 2>/dev/null |
    tail -n 1 | tr -d '"' | awk -F, '{print $2, $5, $7}'
}
printf '%-10s %-3s %12s %7s %7s %12s %7s %7s %6s\n' keys P redis_rps p50 p99 shard_rps p50 p99 ratio
for P in 16 1; do
  for keys in 1 1000; do
    if [ "$keys" = 1 ]; then args=(XADD s '*' rider Castilla speed 30.2); else
      args=(-r 1000 XADD 's:__rand_int__' '*' rider Castilla speed 30.2); fi
    redis-cli -p "$RP" flushall >/dev/null; redis-cli -p "$SP" flushall >/dev/null
    read -r rr rp50 rp99 < <(bench "$RP" "$P" "${args[@]}")
    read -r sr sp50 sp99 < <(bench "$SP" "$P" "${args[@]}")
    printf '%-10s %-3s %12s %7s %7s %12s %7s %7s %6s\n' "$keys" "$P" "$rr" "$rp50" "$rp99" "$sr" "$sp50" "$sp99" \
      "$(python3 -c "print(f'{$sr/$rr:.2f}')")"
  done
done
