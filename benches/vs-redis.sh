#!/usr/bin/env bash
# Side-by-side XADD -> XREADGROUP latency: redis-server vs shardstream, in one run.
#
#   benches/vs-redis.sh [duration_s]
#
# Starts redis-server (if installed) and shardstream on free loopback ports,
# runs the same loadgen configurations against both and prints, per
# configuration, the achieved rate and p50/p99/p99.9 (us) for each server and
# the shardstream/redis ratio of each percentile (< 1 means shardstream is
# faster). Configurations: 1k, 10k and 50k entries/s with 2 producers and
# 2 consumers at COUNT 10, and the Redis docs' setting (10k/s, COUNT 10000).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
SHARDS=${SHARDS:-$(nproc)}

cargo build --release -q --bin shardstream -p shardstream
cargo build --release -q -p loadgen
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
TMP=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$TMP"' EXIT

SP=$(free_port)
./target/release/shardstream --port "$SP" --shards "$SHARDS" --appendonly no --dir "$TMP/data" 2>/dev/null &
PIDS+=($!)
RP=""
if command -v redis-server >/dev/null; then
  RP=$(free_port)
  redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
  PIDS+=($!)
else
  echo "redis-server not installed: shardstream only" >&2
fi
for p in $SP $RP; do
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$p") 2>/dev/null && break; sleep 0.1; done
done

CONFIGS=(
  "1k:--rate 1000 --producers 2 --consumers 2 --count 10"
  "10k:--rate 10000 --producers 2 --consumers 2 --count 10"
  "50k:--rate 50000 --producers 2 --consumers 2 --count 10"
  "docs:--rate 10000 --producers 1 --consumers 1 --count 10000"
)
run() { # port name args... -> json file path
  local port=$1 out=$2; shift 2
  ./target/release/loadgen --port "$port" --duration "$DURATION" --warmup 1 --quiet \
    --json "$out" "$@" >/dev/null || echo "loadgen reported a failure, see $out" >&2
}
printf '%-5s | %-34s | %-34s | %s\n' config "redis rate p50 p99 p99.9" "shardstream rate p50 p99 p99.9" "ratio p50 p99 p99.9"
for c in "${CONFIGS[@]}"; do
  name=${c%%:*}; args=${c#*:}
  # shellcheck disable=SC2086
  [ -n "$RP" ] && run "$RP" "$TMP/r-$name.json" $args
  # shellcheck disable=SC2086
  run "$SP" "$TMP/s-$name.json" $args
  python3 - "$name" "$TMP/r-$name.json" "$TMP/s-$name.json" <<'PY'
import json, os, sys
name, rf, sf = sys.argv[1:4]
def load(f):
    if not os.path.exists(f):
        return None
    with open(f) as fh:
        j = json.load(fh)
    l = j["latency_us"]
    return j["rate_achieved"], l["p50"], l["p99"], l["p99.9"], j["passed"]
def cell(r):
    if r is None:
        return "-"
    return f"{r[0]:8.0f}/s {r[1]:6} {r[2]:7} {r[3]:7}{'' if r[4] else ' FAIL'}"
r, s = load(rf), load(sf)
ratio = "-"
if r and s:
    ratio = " ".join(f"{b / a:5.2f}" if a else "  inf" for a, b in zip(r[1:4], s[1:4]))
print(f"{name:5} | {cell(r):34} | {cell(s):34} | {ratio}")
PY
done
