#!/usr/bin/env bash
# Side-by-side XADD -> XREADGROUP latency: redis-server vs shardstream, in one run.
#
#   benches/vs-redis.sh [duration_s]
#   PLOT_DIR=plots benches/vs-redis.sh 10    # also one overlay SVG per configuration
#   ROUNDS=5 benches/vs-redis.sh 5           # each cell the median of 5 alternating runs
#
# Starts redis-server (if installed) and shardstream on free loopback ports,
# runs the same loadgen configurations against both and prints, per
# configuration, the delivered rate (entries/s) and p50/p99/p99.9 (ms) for each
# server and the shardstream/redis ratio of each percentile (< 1 means
# shardstream is faster). A cell marked SAT is a run whose consumers (or
# producers) could not keep up with the target: its latency includes a growing
# queue, so compare it with care; FAIL means entries were lost or duplicated.
# Configurations: 1k, 10k and 50k entries/s with 2 producers and 2 consumers at
# COUNT 10, and the Redis docs' setting (10k/s, COUNT 10000).
#
# Tail percentiles of one short run swing with whatever else the host does
# (on a shared 2-core VM, p99 flips from 0.5x to 3x between identical runs).
# ROUNDS=N (default 1) runs every configuration N times, alternating the two
# servers run by run, and prints the median of each figure over the rounds,
# with the number of rounds in which shardstream's figure was the lower.
#
# Binaries come from cargo's target directory (CARGO_TARGET_DIR is honoured).
# loadgen's output of every run is kept in a log directory when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
SHARDS=${SHARDS:-$(nproc)}
PLOT_DIR=${PLOT_DIR:-}
ROUNDS=${ROUNDS:-1}

cargo build --release -q --bin shardstream -p shardstream
cargo build --release -q -p loadgen
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
BIN=$TARGET_DIR/release
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
TMP=$(mktemp -d -t vs-redis.XXXXXX)
PIDS=()
KEEP=0
cleanup() {
  local rc=$?
  kill "${PIDS[@]}" 2>/dev/null || true
  if [ "$KEEP" = 1 ] || [ "$rc" != 0 ]; then
    rm -rf "$TMP/data"
    echo "logs and JSON reports kept in $TMP" >&2
  else
    rm -rf "$TMP"
  fi
}
trap cleanup EXIT
[ -n "$PLOT_DIR" ] && mkdir -p "$PLOT_DIR"

SP=$(free_port)
# Each server in a session of its own, as a service runs: the scheduler
# groups CPU time by session (see start_server in benches/benchlib.py).
setsid "$BIN/shardstream" --port "$SP" --shards "$SHARDS" --appendonly no --dir "$TMP/data" 2>"$TMP/shardstream.log" &
PIDS+=($!)
RP=""
if command -v redis-server >/dev/null; then
  RP=$(free_port)
  setsid redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >"$TMP/redis-server.log" 2>&1 &
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
run() { # port tag args... ; writes $TMP/<tag>.json and $TMP/<tag>.log
  local port=$1 tag=$2; shift 2
  local rc=0
  "$BIN/loadgen" --port "$port" --duration "$DURATION" --warmup 1 --quiet \
    --json "$TMP/$tag.json" "$@" >"$TMP/$tag.log" 2>&1 || rc=$?
  # 0 OK, 3 SATURATED (flagged in the table); anything else is a failure.
  if [ "$rc" != 0 ] && [ "$rc" != 3 ]; then
    KEEP=1
    echo "loadgen exited $rc on $tag, see $TMP/$tag.log" >&2
  fi
}
echo "rate = delivered entries/s; p50 p99 p99.9 in ms; ratio = shardstream / redis (< 1: shardstream faster)"
[ "$ROUNDS" -gt 1 ] && echo "each figure: the median of $ROUNDS runs per server, alternating"
printf '%-6s | %-36s | %-36s | %s\n' config "redis rate p50 p99 p99.9" "shardstream rate p50 p99 p99.9" "ratio p50 p99 p99.9"
for c in "${CONFIGS[@]}"; do
  name=${c%%:*}; args=${c#*:}
  for round in $(seq "$ROUNDS"); do
    plot=()
    # shellcheck disable=SC2086
    if [ -n "$RP" ]; then
      run "$RP" "r-$name-$round" $args --label "redis-server"
      [ -n "$PLOT_DIR" ] && [ "$round" = 1 ] && [ -f "$TMP/r-$name-$round.json" ] &&
        plot+=(--compare "$TMP/r-$name-$round.json")
    fi
    [ -n "$PLOT_DIR" ] && [ "$round" = 1 ] && plot+=(--plot "$PLOT_DIR/vs-redis-$name.svg")
    # shellcheck disable=SC2086
    run "$SP" "s-$name-$round" $args --label "shardstream" "${plot[@]}"
  done
  python3 - "$name" "$TMP" "$ROUNDS" <<'PY'
import json, os, statistics, sys
name, tmp, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(tag):
    """Per round: (rate, p50, p99, p99.9, verdict) of the runs that left a report."""
    out = []
    for i in range(1, rounds + 1):
        f = os.path.join(tmp, f"{tag}-{name}-{i}.json")
        if os.path.exists(f):
            with open(f) as fh:
                j = json.load(fh)
            l = j["latency_us"]
            out.append((j["rate_delivered"], l["p50"], l["p99"], l["p99.9"], j.get("verdict")))
    return out
def summary(runs):
    if not runs:
        return None
    med = [statistics.median(r[k] for r in runs) for k in range(4)]
    verdicts = {r[4] for r in runs}
    flag = " FAIL" if "failed" in verdicts else " SAT" if "saturated" in verdicts else \
        "" if verdicts == {"ok"} else " ?"
    return med + [flag]
def cell(r):
    if r is None:
        return "-"
    ms = lambda us: f"{us / 1000:.2f}"
    return f"{r[0]:8.0f}/s {ms(r[1]):>7} {ms(r[2]):>7} {ms(r[3]):>7}{r[4]}"
rr, ss = load("r"), load("s")
r, s = summary(rr), summary(ss)
ratio = "-"
if r and s:
    ratio = " ".join(f"{b / a:5.2f}" if a else "  inf" for a, b in zip(r[1:4], s[1:4]))
    if rounds > 1 and len(rr) == len(ss):
        wins = [sum(b[k] < a[k] for a, b in zip(rr, ss)) for k in (1, 2, 3)]
        ratio += "  (lower in " + "/".join(map(str, wins)) + f" of {len(ss)})"
print(f"{name:6} | {cell(r):36} | {cell(s):36} | {ratio}")
PY
done
[ -n "$PLOT_DIR" ] && echo "overlay plots: $PLOT_DIR/vs-redis-*.svg"
exit "$KEEP"  # 1 when any run failed (logs kept)
