#!/usr/bin/env bash
# Build sqlguard and run the whole test suite against throwaway PostgreSQL and
# MariaDB servers. The one command for CI and for humans.
#
# Usage: tools/test.sh [ctest args...]      e.g. tools/test.sh -R lock -j2
#
# Steps: tools/deps.sh, cmake configure (RelWithDebInfo) + build, start both
# servers (tools/dbservers.sh), run ctest, and always stop the servers on exit.
# Exits with ctest's status.
#
# Environment:
#   SQLGUARD_BUILD_DIR         build directory (default: build)
#   SQLGUARD_REQUIRE_DIALECTS  dialects whose tests must not be skipped
#                              (default: sqlite,postgresql,mysql; set it, even to
#                              an empty string, to override)
#   SQLGUARD_KEEP_SERVERS=1    leave the servers running afterwards
#   SQLGUARD_PG_PORT, SQLGUARD_MARIADB_PORT, SQLGUARD_SERVERS_DIR,
#   SQLGUARD_DURABLE           passed through to tools/dbservers.sh
# Exported to the tests: SQLGUARD_TEST_PG_URI, SQLGUARD_TEST_MYSQL_URI,
# SQLGUARD_REQUIRE_DIALECTS, SQLGUARD_DBSERVERS (path of dbservers.sh, for
# tests that restart a server).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
DBSERVERS=$ROOT/tools/dbservers.sh
BUILD_DIR=${SQLGUARD_BUILD_DIR:-build}

log() { printf 'test.sh: %s\n' "$*" >&2; }
step() { printf '\n==> [%s] %s\n' "$1" "$2" >&2; }

step 1/6 "dependencies (tools/deps.sh)"
"$ROOT/tools/deps.sh"

step 2/6 "configure: cmake -S . -B $BUILD_DIR -DCMAKE_BUILD_TYPE=RelWithDebInfo"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo

step 3/6 "build: cmake --build $BUILD_DIR -j$(nproc)"
cmake --build "$BUILD_DIR" -j"$(nproc)"

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ "${SQLGUARD_KEEP_SERVERS:-0}" == 1 ]]; then
    log "SQLGUARD_KEEP_SERVERS=1: leaving the database servers running"
  else
    step 6/6 "stopping database servers"
    "$DBSERVERS" stop all || log "warning: stopping the database servers failed"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step 4/6 "database servers (tools/dbservers.sh start all)"
"$DBSERVERS" start all
server_env=$("$DBSERVERS" env all)
eval "$server_env"
export SQLGUARD_REQUIRE_DIALECTS="${SQLGUARD_REQUIRE_DIALECTS-sqlite,postgresql,mysql}"
export SQLGUARD_DBSERVERS="$DBSERVERS"
printf '%s\n' "$server_env" \
  "export SQLGUARD_REQUIRE_DIALECTS=$SQLGUARD_REQUIRE_DIALECTS" \
  "export SQLGUARD_DBSERVERS=$SQLGUARD_DBSERVERS" | sed 's/^/    /' >&2

step 5/6 "tests: ctest --test-dir $BUILD_DIR --output-on-failure --no-tests=error $*"
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error "$@" || rc=$?
if (( rc == 0 )); then log "all tests passed"; else log "ctest failed (exit $rc)"; fi
exit "$rc"
