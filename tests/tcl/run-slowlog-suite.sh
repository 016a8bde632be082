#!/usr/bin/env bash
# Run Redis's own SLOWLOG test suite (unit/slowlog) against shardstream in
# external mode, as tests/tcl/run-stream-suites.sh runs the stream suites
# (REDIS_SRC = a Redis source tree; SHARDS, DEBUG_COMMAND and
# SHARDSTREAM_BIN as there).
#
#   SHARDS=2 REDIS_SRC=~/src/redis tests/tcl/run-slowlog-suite.sh
#
# Left out: the `needs:repl` tests (replication and ACL settings shardstream
# does not have) and "Rewritten commands are logged as their original
# command", which needs GEOADD (no geo commands). Expected today: every
# other test passes (15 with DEBUG, 10 without; Redis tree of October 2024),
# with one shard or two.
set -euo pipefail

: "${REDIS_SRC:?set REDIS_SRC to a Redis source tree (runtest and tests/)}"
debug=${DEBUG_COMMAND:-yes}
# shellcheck source=../peer-server.sh
source "$(dirname "$0")/../peer-server.sh"
start_shardstream "${SHARDS:-1}" --enable-debug-command "$debug"

echo "SLOWLOG - Rewritten commands are logged as their original command" > "$work/skip.txt"
tags=(--tags -needs:repl)
[[ "$debug" == no ]] && tags+=(--tags -needs:debug)

cd "$REDIS_SRC"
status=0
tclsh tests/test_helper.tcl --host 127.0.0.1 --port "$port" --clients 1 \
  --single unit/slowlog --skipfile "$work/skip.txt" "${tags[@]}" "$@" || status=$?
exit $status
