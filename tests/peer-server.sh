# Sourced by the peer-suite runners (tests/tcl/run-stream-suites.sh,
# tests/py/run-redis-py-streams.sh, tests/node/run-node-redis-streams.sh):
# `start_shardstream SHARDS [ARG ...]` builds the release binary unless
# SHARDSTREAM_BIN names one, starts it on a free loopback port with a fresh
# data directory and no AOF, waits until it answers PING, and stops it (and
# removes the directory) on exit. Sets
# `port` and `work` (the data directory; the log is `$work/shardstream.log`).
start_shardstream() {
  local shards=$1
  shift
  local here bin
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  bin=${SHARDSTREAM_BIN:-}
  if [[ -z "$bin" ]]; then
    (cd "$here" && cargo build --release --bin shardstream)
    bin=$here/target/release/shardstream
  fi
  work=$(mktemp -d)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin" --port "$port" --bind 127.0.0.1 --dir "$work" --appendonly no --shards "$shards" \
    --logfile "$work/shardstream.log" "$@" &
  shardstream_pid=$!
  trap 'kill $shardstream_pid 2>/dev/null || true; wait $shardstream_pid 2>/dev/null || true; rm -rf "$work"' EXIT
  for _ in $(seq 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "shardstream did not answer on port $port" >&2
  return 1
}
