#!/usr/bin/env bash
# 10,000 connections: peak RSS with 10k idle clients, and throughput with 10k
# clients, shardstream vs redis-server, in one run.
#
#   benches/connections.sh [clients] [requests]
#
# Needs redis-server and redis-benchmark (`-I` opens idle connections) and an
# open-file limit above the client count (the script raises its soft limit to
# the hard limit). RSS is VmRSS/VmHWM from /proc/<pid>/status.
set -euo pipefail
set -f  # commands below hold a literal *, never a glob
cd "$(dirname "$0")/.."
CLIENTS=${1:-10000}
REQUESTS=${2:-200000}
SHARDS=${SHARDS:-$(nproc)}
ulimit -n "$(ulimit -Hn)"
cargo build --release -q --bin shardstream -p shardstream
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
TMP=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$TMP"' EXIT

SP=$(free_port)
# Each server in a session of its own, as a service runs: the scheduler
# groups CPU time by session (see start_server in benches/benchlib.py).
setsid ./target/release/shardstream --port "$SP" --shards "$SHARDS" --no-pin --maxclients $((CLIENTS + 100)) --dir "$TMP/data" 2>/dev/null &
SPID=$!; PIDS+=($SPID)
RP=$(free_port)
setsid redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --maxclients $((CLIENTS + 100)) >/dev/null &
RPID=$!; PIDS+=($RPID)
for p in $SP $RP; do
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$p") 2>/dev/null && break; sleep 0.1; done
done

kb() { awk -v k="$2:" '$1==k {print $2}' "/proc/$1/status"; }
clients() { redis-cli -p "$1" info clients | awk -F: '/^connected_clients/ {print $2+0}'; }

printf '%-12s %12s %14s %14s %10s\n' server idle_rss_kb rss_10k_kb hwm_10k_kb clients
for pair in "shardstream $SP $SPID" "redis $RP $RPID"; do
  set -- $pair
  base=$(kb "$3" VmRSS)
  redis-benchmark -p "$2" -c "$CLIENTS" -I >/dev/null 2>&1 &
  BPID=$!
  for _ in $(seq 600); do [ "$(clients "$2")" -ge "$CLIENTS" ] && break; sleep 0.5; done
  printf '%-12s %12s %14s %14s %10s\n' "$1" "$base" "$(kb "$3" VmRSS)" "$(kb "$3" VmHWM)" "$(clients "$2")"
  kill "$BPID"; wait "$BPID" 2>/dev/null || true
  for _ in $(seq 100); do [ "$(clients "$2")" -le 1 ] && break; sleep 0.2; done
done

echo
echo "throughput, $CLIENTS clients, $REQUESTS requests (requests/s)"
for pair in "shardstream $SP" "redis $RP"; do
  set -- $pair
  for t in "SET k v" "GET k" "XADD s * f v"; do
    r=$(redis-benchmark -p "$2" -c "$CLIENTS" -n "$REQUESTS" -q $t 2>/dev/null | tr '\r' '\n' | { grep "requests per second" || echo "failed: n/a requests per second"; } | tail -1 | sed 's/.*: \([0-9.]*\) requests per second.*/\1/')
    printf '%-12s %-32s %s\n' "$1" "$t" "$r"
  done
done
