#!/usr/bin/env bash
# Run redis-rs's own stream tests (the `redis` crate's redis/tests/
# test_streams.rs, its only stream test file) against shardstream, with
# redis-rs's own harness (redis-test's RedisServer: one server per test on a
# free loopback port, FLUSHDB once it answers, version gates read from INFO).
# The tests are not vendored: point REDIS_RS_SRC at a redis-rs source tree (a
# clone of the redis-rs/redis-rs repository). Its `redis` crate is the one
# tested, so the tests match their library.
#
#   REDIS_RS_SRC=~/src/redis-rs tests/rs/run-redis-rs-streams.sh            # two shards
#   SHARDS=1 REDIS_RS_SRC=~/src/redis-rs tests/rs/run-redis-rs-streams.sh   # one
#   REDIS_RS_SRC=~/src/redis-rs tests/rs/run-redis-rs-streams.sh xnack     # a name filter
#
# The harness spawns the program named by REDISRS_SERVER_BIN (default
# `redis-server`) with redis-server's flags: `-v` for a version probe, then
# `--save "" --logfile DIR/redis.log` and `--port N --bind 127.0.0.1` (or
# `--port 0 --unixsocket PATH`). shardstream takes all of these as they are,
# but it defaults to one shard thread per core, AOF on and `./data` as its
# data directory, which every test's server would share. So REDISRS_SERVER_BIN
# names a small wrapper, written here into a temporary directory, that adds
# `--shards $SHARDS --appendonly no --dir DIR` (DIR = the harness's per-server
# temporary directory, where it puts the log) and execs shardstream, which the
# harness then kills at the end of the test. (`-v` answers `v=0.1.0`, major
# version 0, so the harness does not add `--enable-debug-command`.)
#
# Three passes, as redis-rs's Makefile runs them: TCP over RESP2, TCP over
# RESP3 (PROTOCOL=RESP3), and a Unix socket over RESP2
# (REDISRS_SERVER_TYPE=unix). Not the TLS pass (tcp+tls): shardstream has no
# TLS. Builds with redis-rs's Cargo.lock and default features (`streams`
# among them) into REDIS_RS_TARGET_DIR (default: target/ inside
# REDIS_RS_SRC), at most 2 jobs (CARGO_BUILD_JOBS), the first time about
# three minutes; the tests run 2 at a time (TEST_THREADS), each with its own
# server. Builds shardstream's release binary (in its own target directory,
# CARGO_TARGET_DIR honoured) unless SHARDSTREAM_BIN names one. Exits non-zero
# if any test fails.
#
# Expected today (redis-rs of August 2026, its tests for Redis 8.8): all 51
# pass in each pass, with one shard or two.
set -euo pipefail

: "${REDIS_RS_SRC:?set REDIS_RS_SRC to a redis-rs source tree (redis/tests/test_streams.rs)}"
here=$(cd "$(dirname "$0")/../.." && pwd)
shards=${SHARDS:-2}
# shellcheck source=../peer-server.sh
source "$here/tests/peer-server.sh"
shardstream_bin
bin=$SHARDSTREAM_BIN
REDIS_RS_SRC=$(realpath "$REDIS_RS_SRC")

wrap=$(mktemp -d)
trap 'rm -rf "$wrap"' EXIT
cat >"$wrap/redis-server" <<EOF
#!/usr/bin/env bash
# redis-server for redis-rs's test harness: shardstream with its own shard
# count, no AOF, and the harness's per-server temporary directory as data dir.
[[ "\${1:-}" == -v || "\${1:-}" == --version ]] && exec "$bin" -v
dir= prev=
for arg in "\$@"; do
  [[ "\$prev" == --logfile ]] && dir=\$(dirname "\$arg")
  prev=\$arg
done
[[ -n "\$dir" ]] || { echo "redis-server wrapper: no --logfile" >&2; exit 1; }
exec "$bin" "\$@" --shards "$shards" --appendonly no --dir "\$dir"
EOF
chmod +x "$wrap/redis-server"

cd "$REDIS_RS_SRC"
export CARGO_TARGET_DIR=${REDIS_RS_TARGET_DIR:-$REDIS_RS_SRC/target}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
cargo=(cargo test --locked -p redis --test test_streams)
echo "== build (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
"${cargo[@]}" --no-run

status=0
for pass in "tcp RESP2" "tcp RESP3" "unix RESP2"; do
  read -r type protocol <<<"$pass"
  echo "== $type, $protocol: shardstream, $shards shard(s)"
  REDISRS_SERVER_BIN="$wrap/redis-server" REDISRS_SERVER_TYPE=$type PROTOCOL=$protocol \
    "${cargo[@]}" -- --test-threads "${TEST_THREADS:-2}" "$@" || status=$?
done
exit $status
