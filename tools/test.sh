#!/usr/bin/env bash
# Build sqlguard and run the whole test suite against throwaway PostgreSQL and
# MariaDB servers. The one command for CI and for humans.
#
# Usage: tools/test.sh [ctest args...]      e.g. tools/test.sh -R lock -j2
#
# Steps: tools/deps.sh, cmake configure (RelWithDebInfo) + build, start both
# servers (tools/dbservers.sh), run ctest (all but the `galera` label), then a
# short Galera pass: start the 3-node galera topology, ctest -L galera (the
# [galera] tests, a chaos run with a node kill included), stop it. The servers
# and the topology are always stopped on exit. Exits non-zero if either fails.
# The Galera pass runs when no ctest args are given (CI) or with
# SQLGUARD_GALERA=1; SQLGUARD_GALERA=0 leaves it out. A cluster that does not
# start is a failure, never a skip.
#
# Environment:
#   SQLGUARD_BUILD_DIR         build directory (default: build)
#   SQLGUARD_REQUIRE_DIALECTS  dialects whose tests must not be skipped
#                              (default: sqlite,postgresql,mysql; set it, even to
#                              an empty string, to override)
#   SQLGUARD_KEEP_SERVERS=1    leave the servers running afterwards
#   SQLGUARD_GALERA=0|1        leave out / force the Galera pass (see above)
#   SQLGUARD_TOPOLOGY_LOCK     file held (flock) while the galera topology runs
#                              (default /tmp/sqlguard-topology.lock; shared machines)
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

step 1/7 "dependencies (tools/deps.sh)"
"$ROOT/tools/deps.sh"

step 2/7 "configure: cmake -S . -B $BUILD_DIR -DCMAKE_BUILD_TYPE=RelWithDebInfo"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo

step 3/7 "build: cmake --build $BUILD_DIR -j$(nproc)"
cmake --build "$BUILD_DIR" -j"$(nproc)"

# shellcheck disable=SC2317 # invoked via trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ "${SQLGUARD_KEEP_SERVERS:-0}" == 1 ]]; then
    log "SQLGUARD_KEEP_SERVERS=1: leaving the database servers running"
  else
    step 7/7 "stopping database servers"
    "$DBSERVERS" stop all || log "warning: stopping the database servers failed"
  fi
  if [[ -n "${galera_started:-}" ]]; then
    "$DBSERVERS" stop galera --purge || log "warning: stopping the galera topology failed"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step 4/7 "database servers (tools/dbservers.sh start all)"
"$DBSERVERS" start all
server_env=$("$DBSERVERS" env all)
eval "$server_env"
export SQLGUARD_REQUIRE_DIALECTS="${SQLGUARD_REQUIRE_DIALECTS-sqlite,postgresql,mysql}"
export SQLGUARD_DBSERVERS="$DBSERVERS"
printf '%s\n' "$server_env" \
  "export SQLGUARD_REQUIRE_DIALECTS=$SQLGUARD_REQUIRE_DIALECTS" \
  "export SQLGUARD_DBSERVERS=$SQLGUARD_DBSERVERS" | sed 's/^/    /' >&2

step 5/7 "tests: ctest --test-dir $BUILD_DIR --output-on-failure --no-tests=error -LE galera $*"
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -LE galera "$@" || rc=$?
if (( rc == 0 )); then log "all tests passed"; else log "ctest failed (exit $rc)"; fi

# The Galera pass: its own topology (3 nodes, ~35 s to start), its own step;
# always a fresh cluster (stop --purge: a whole-cluster restart on old data
# was seen to fail IST with "IST started with wrong seqno").
galera=${SQLGUARD_GALERA:-}
if [[ -z "$galera" ]]; then if (( $# == 0 )); then galera=1; else galera=0; fi; fi
if [[ "$galera" == 1 ]]; then
  step 6/7 "Galera: tools/dbservers.sh start galera; ctest -L galera; stop galera"
  grc=0
  exec {topo_fd}>"${SQLGUARD_TOPOLOGY_LOCK:-/tmp/sqlguard-topology.lock}"
  flock "$topo_fd"
  galera_started=1
  if "$DBSERVERS" start galera; then
    eval "$("$DBSERVERS" env galera)"
    export SQLGUARD_TEST_GALERA_URIS
    SQLGUARD_TEST_MYSQL_URI=${SQLGUARD_TEST_GALERA_URIS%%,*} \
      ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -L galera || grc=$?
  else
    log "the galera topology did not start"
    grc=1
  fi
  "$DBSERVERS" stop galera --purge || log "warning: stopping the galera topology failed"
  galera_started=
  flock -u "$topo_fd"
  if (( grc == 0 )); then log "Galera pass passed"; else log "Galera pass failed (exit $grc)"; rc=1; fi
fi
exit "$rc"
