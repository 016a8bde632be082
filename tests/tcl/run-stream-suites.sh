#!/usr/bin/env bash
# Run Redis's own stream test suites (unit/type/stream, unit/type/stream-cgroups)
# against shardstream in external mode. The suites are not vendored: point
# REDIS_SRC at a Redis source tree (a clone of the redis/redis repository; only
# its `runtest` and `tests/` are used).
#
#   REDIS_SRC=~/src/redis tests/tcl/run-stream-suites.sh            # DEBUG enabled: all tags
#   DEBUG_COMMAND=no REDIS_SRC=~/src/redis tests/tcl/run-stream-suites.sh   # without needs:debug
#   SHARDS=2 REDIS_SRC=~/src/redis tests/tcl/run-stream-suites.sh   # streams on two shard threads
#
# Needs tclsh (apt-get install tcl). Builds the release binary unless
# SHARDSTREAM_BIN names one. Exits with the suite runner's status.
#
# Expected today, with SHARDS=1 (the default) or 2: every test passes (142
# with DEBUG, 130 without) but "XINFO FULL output" when the suites predate
# Redis 8.6 (they count XINFO STREAM FULL's fields without IDMP's).
set -euo pipefail

: "${REDIS_SRC:?set REDIS_SRC to a Redis source tree (runtest and tests/)}"
debug=${DEBUG_COMMAND:-yes}
# shellcheck source=../peer-server.sh
source "$(dirname "$0")/../peer-server.sh"
start_shardstream "${SHARDS:-1}" --enable-debug-command "$debug"

# Tests to leave out, one name per line (none today: lists and sets, which
# some stream tests use, exist now).
: > "$work/skip.txt"

# Without DEBUG the suites' own switch leaves out the tests that need it.
tags=()
[[ "$debug" == no ]] && tags=(--tags -needs:debug)

cd "$REDIS_SRC"
status=0
tclsh tests/test_helper.tcl --host 127.0.0.1 --port "$port" --clients 1 \
  --single unit/type/stream --single unit/type/stream-cgroups \
  --skipfile "$work/skip.txt" "${tags[@]}" "$@" || status=$?
exit $status
