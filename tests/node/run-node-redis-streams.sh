#!/usr/bin/env bash
# Run node-redis's own stream command tests against shardstream, with
# node-redis's own harness (@redis/test-utils: FLUSHALL before and after each
# test, version gates from --redis-version, here the redis_version of our INFO).
# The tests are not vendored: point NODE_REDIS_SRC at a node-redis source
# tree (a clone of the redis/node-redis repository). Its @redis/client is the
# one tested, so the tests match their library.
#
#   NODE_REDIS_SRC=~/src/node-redis tests/node/run-node-redis-streams.sh            # two shards
#   SHARDS=1 NODE_REDIS_SRC=~/src/node-redis tests/node/run-node-redis-streams.sh   # one
#
# Runs packages/client/lib/commands/X*.spec.ts and CLIENT_UNBLOCK.spec.ts
# (argument tests only) with mocha, or the specs named as arguments (e.g.
# `XADD XREADGROUP`), in two passes:
#  1. the `client.*` half and the argument tests, against one shardstream
#     server. No shim: the harness's own RE_CLUSTER=true mode (made for a
#     managed database) reads the server's address from the file named by
#     REDIS_ENDPOINTS_CONFIG_PATH instead of starting Redis in docker, and
#     leaves the `cluster.*` half pending. (That mode skips the
#     minimumDockerVersion gates of the client half; every gate of these
#     specs is at or below our 8.10, so it runs what CI would.)
#  2. the `cluster.*` half, against a Redis Cluster of two shardstream nodes
#     (static topology, half the slots each), as the harness's docker cluster
#     has two masters. It has no switch for an existing cluster, so
#     cluster-shim.cjs, a mocha root hook, replaces its spawnRedisCluster with
#     one returning our nodes' ports.
# Each node runs SHARDS shard threads (default 2). The specs speak RESP3 only:
# node-redis 6 defaults to RESP3 and the harness has no protocol switch.
#
# Needs node 20+ and npm. Prepares the tree once if needed (`npm ci`, then
# `npm run build`, which test-utils needs: about two minutes). Builds the
# release binary unless SHARDSTREAM_BIN names one. Exits non-zero if any
# test fails.
#
# Expected today (node-redis of August 2026, its specs for Redis 8.10): every
# test passes, with one shard or two: 178 in the first pass (50 pending:
# the cluster half), 50 in the second.
set -euo pipefail

: "${NODE_REDIS_SRC:?set NODE_REDIS_SRC to a node-redis source tree (packages/client, packages/test-utils)}"
here=$(cd "$(dirname "$0")" && pwd)
shards=${SHARDS:-2}
# shellcheck source=../peer-server.sh
source "$here/../peer-server.sh"
# An absolute path: the script changes directory before starting the server.
shardstream_bin

cd "$NODE_REDIS_SRC"
if [[ ! -x node_modules/.bin/mocha ]]; then
  echo "== npm ci in $NODE_REDIS_SRC"
  npm ci --no-audit --no-fund
fi
if [[ ! -f packages/test-utils/dist/lib/index.js || ! -f packages/bloom/dist/lib/index.js ]]; then
  echo "== npm run build in $NODE_REDIS_SRC"
  npm run build
fi

start_shardstream "$shards"
bin=$SHARDSTREAM_BIN
version=$(redis-cli -p "$port" info server | tr -d '\r' | sed -n 's/^redis_version://p')

# Two cluster nodes, each with its own port, bus port and directory under $work
# (removed by start_shardstream's exit trap, which this one extends).
read -r p1 b1 p2 b2 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(4)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))')
printf 'a 127.0.0.1 %s 0-8191\nb 127.0.0.1 %s 8192-16383\n' "$p1" "$p2" > "$work/topology"
cluster_pids=()
server_cleanup=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
trap 'kill "${cluster_pids[@]}" 2>/dev/null || true; wait "${cluster_pids[@]}" 2>/dev/null || true; '"$server_cleanup" EXIT
for node in "$p1 $b1" "$p2 $b2"; do
  read -r p b <<<"$node"
  mkdir "$work/node-$p"
  "$bin" --port "$p" --cluster-port "$b" --bind 127.0.0.1 --dir "$work/node-$p" \
    --appendonly no --shards "$shards" --cluster-config "$work/topology" \
    --logfile "$work/node-$p/shardstream.log" &
  cluster_pids+=($!)
done
for p in "$p1" "$p2"; do
  for i in $(seq 51); do
    [[ $(redis-cli -p "$p" cluster info 2>/dev/null | tr -d '\r' | head -1) == cluster_state:ok ]] && break
    ((i < 51)) || { echo "cluster node on port $p is not up" >&2; exit 1; }
    sleep 0.1
  done
done

printf '{"standalone": {"tls": false, "raw_endpoints": [{"dns_name": "127.0.0.1", "port": %s}]}}\n' \
  "$port" > "$work/endpoints.json"

cd packages/client
if (($#)); then
  specs=()
  for name in "$@"; do specs+=("lib/commands/$name.spec.ts"); done
else
  specs=(lib/commands/X*.spec.ts)
  [[ -f lib/commands/CLIENT_UNBLOCK.spec.ts ]] && specs+=(lib/commands/CLIENT_UNBLOCK.spec.ts)
fi
mocha=(../../node_modules/.bin/mocha --require tsx --exit --forbid-only --fail-zero --timeout 30000
  --redis-version="$version")
status=0
echo "== client: shardstream $version, $shards shard(s), port $port"
RE_CLUSTER=true REDIS_ENDPOINTS_CONFIG_PATH="$work/endpoints.json" \
  "${mocha[@]}" "${specs[@]}" || status=$?
echo "== cluster: two shardstream nodes, ports $p1 and $p2"
env -u RE_CLUSTER SHARDSTREAM_PORT="$port" SHARDSTREAM_CLUSTER_PORTS="$p1,$p2" \
  "${mocha[@]}" --require "$here/cluster-shim.cjs" --grep '(^| )cluster\.' "${specs[@]}" || status=$?
exit $status
