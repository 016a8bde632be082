#!/usr/bin/env bash
# Run redis-py's own stream tests against shardstream, with redis-py's own
# harness (its conftest.py: INFO and DPING probes at session start, clients
# on database 9, FLUSHDB after each test, version gates read from INFO).
# The tests are not vendored: point REDIS_PY_SRC at a redis-py source tree
# (a clone of the redis/redis-py repository). Its `redis` package is the one
# tested, so the tests match their library.
#
#   REDIS_PY_SRC=~/src/redis-py tests/py/run-redis-py-streams.sh            # two shards
#   SHARDS=1 REDIS_PY_SRC=~/src/redis-py tests/py/run-redis-py-streams.sh   # one
#
# Runs every stream test (`test_x*`) and CLIENT UNBLOCK's of
# tests/test_commands.py and tests/test_asyncio/test_commands.py, over RESP2
# and then RESP3. Needs pytest, pytest-asyncio and pytest-timeout
# (`pip install pytest pytest-asyncio pytest-timeout`). Builds the release
# binary unless SHARDSTREAM_BIN names one. Exits non-zero if any test fails.
#
# Expected today (redis-py of August 2026, 8.x tests): every selected test
# passes over both protocols; the few skipped are gated on a Redis older
# than 8.2.2 (shardstream reports 8.10).
set -euo pipefail

: "${REDIS_PY_SRC:?set REDIS_PY_SRC to a redis-py source tree (tests/ and redis/)}"
# shellcheck source=../peer-server.sh
source "$(dirname "$0")/../peer-server.sh"
start_shardstream "${SHARDS:-2}"

cd "$REDIS_PY_SRC"
status=0
for protocol in 2 3; do
  echo "== RESP$protocol"
  PYTHONPATH="$REDIS_PY_SRC${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest \
    tests/test_commands.py tests/test_asyncio/test_commands.py \
    -k "test_x or test_client_unblock" --protocol "$protocol" \
    --redis-url "redis://127.0.0.1:$port/9" --timeout 60 -p no:cacheprovider \
    -q -rfs -W ignore "$@" || status=$?
done
exit $status
