# Sourced by the peer-suite runners (tests/tcl/run-stream-suites.sh,
# tests/py/run-redis-py-streams.sh, tests/node/run-node-redis-streams.sh,
# tests/rs/run-redis-rs-streams.sh).
#
# `shardstream_bin` sets `SHARDSTREAM_BIN` to an absolute path: the binary it
# names, or else the release binary, built first (in cargo's target
# directory; CARGO_TARGET_DIR is honoured).
#
# `start_shardstream SHARDS [ARG ...]` runs that binary on a free loopback
# port with a fresh data directory and no AOF, waits until it answers PING,
# and stops it (and removes the directory) on exit. Sets `port` and `work`
# (the data directory; the log is `$work/shardstream.log`).
shardstream_bin() {
  if [[ -z "${SHARDSTREAM_BIN:-}" ]]; then
    local here target
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    (cd "$here" && cargo build --release --bin shardstream)
    target=$(cd "$here" && cargo metadata --format-version 1 --no-deps |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    SHARDSTREAM_BIN=$target/release/shardstream
  fi
  SHARDSTREAM_BIN=$(realpath "$SHARDSTREAM_BIN")
}

start_shardstream() {
  local shards=$1
  shift
  shardstream_bin
  work=$(mktemp -d)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$SHARDSTREAM_BIN" --port "$port" --bind 127.0.0.1 --dir "$work" --appendonly no --shards "$shards" \
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
