#!/usr/bin/env bash
# Build sqlguard and run the whole test suite against throwaway PostgreSQL,
# MariaDB and etcd servers. The one command for CI and for humans.
#
# Usage: tools/test.sh [ctest args...]      e.g. tools/test.sh -R lock -j2
#
# Steps: tools/deps.sh, cmake configure (RelWithDebInfo) + build, start both
# servers (tools/dbservers.sh) and etcd (tools/etcdserver.sh, for the bench's
# etcd client test), run ctest (everything but the `topology`
# label), then the deployments, one topology at a time, each stopped after its
# step: start PgBouncer and run the whole suite through it (ctest -R
# '^pgbouncer$'), the pg-ha Patroni cluster with doctor + a short chaos with a
# failover ('^pg_ha$'), pg-async with its doctor verdict and a chaos run whose
# failover to a lagging standby must be caught ('^pg_async$'), and a
# fresh 3-node Galera cluster with the [galera] tests and a chaos run with a
# node kill ('^galera$'). The servers are always stopped on exit. A topology
# that does not start is a failure, never a skip. Exits non-zero if any step
# failed. The topology steps run when no ctest args are given (CI), or as
# SQLGUARD_TOPOLOGIES says.
#
# Environment:
#   SQLGUARD_BUILD_DIR         build directory (default: build)
#   SQLGUARD_TOPOLOGIES        topology steps to run (default with no ctest
#                              args: pgbouncer,pg-ha,pg-async,galera; empty = none)
#   SQLGUARD_REQUIRE_DIALECTS  dialects whose tests must not be skipped
#                              (default: sqlite,postgresql,mysql; set it, even to
#                              an empty string, to override)
#   SQLGUARD_KEEP_SERVERS=1    leave the servers running afterwards
#   SQLGUARD_TOPOLOGY_LOCK     file held (flock) while the topology steps run
#                              (default /tmp/sqlguard-topology.lock; shared machines)
#   SQLGUARD_PG_PORT, SQLGUARD_MARIADB_PORT, SQLGUARD_SERVERS_DIR,
#   SQLGUARD_DURABLE           passed through to tools/dbservers.sh
#   SQLGUARD_ETCD_PORT         passed through to tools/etcdserver.sh
# Exported to the tests: SQLGUARD_TEST_PG_URI, SQLGUARD_TEST_MYSQL_URI,
# SQLGUARD_TEST_ETCD_ENDPOINT, SQLGUARD_REQUIRE_DIALECTS, SQLGUARD_DBSERVERS
# (path of dbservers.sh, for tests that restart a server).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
DBSERVERS=$ROOT/tools/dbservers.sh
ETCDSERVER=$ROOT/tools/etcdserver.sh
BUILD_DIR=${SQLGUARD_BUILD_DIR:-build}

log() { printf 'test.sh: %s\n' "$*" >&2; }
step() { printf '\n==> [%s] %s\n' "$1" "$2" >&2; }

step 1/7 "dependencies (tools/deps.sh)"
"$ROOT/tools/deps.sh"

step 2/7 "configure: cmake -S . -B $BUILD_DIR -DCMAKE_BUILD_TYPE=RelWithDebInfo"
# ccache (tools/deps.sh installs it): the fourth-dialect test builds a copy of
# this tree, which then costs only the files that differ.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=1
fi
# Tests, tools and examples on: a build directory tools/demo.sh configured
# without them gets them back (and keeps what it built).
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSQLGUARD_BUILD_TESTS=ON -DSQLGUARD_BUILD_TOOLS=ON \
  -DSQLGUARD_BUILD_EXAMPLES=ON "${launcher[@]}"

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
    "$ETCDSERVER" stop --purge || log "warning: stopping etcd failed"
  fi
  if [[ -n "${current_topology:-}" ]]; then  # interrupted inside a topology step
    "$DBSERVERS" stop "$current_topology" || log "warning: stopping $current_topology failed"
  fi
  if [[ -n "${LOG_DIR:-}" ]] && compgen -G "$LOG_DIR/*.log" >/dev/null; then
    "$ROOT/tools/test_digest.sh" "$LOG_DIR"/*.log >&2 || log "warning: the failure digest failed"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Each ctest run's output is also kept here; at the end a digest of the failed
# assertions (tools/test_digest.sh) is printed last, so a CI log whose middle
# is cut off still says what failed.
LOG_DIR=$BUILD_DIR/test-logs
rm -rf "$LOG_DIR" && mkdir -p "$LOG_DIR"

step 4/7 "database servers (tools/dbservers.sh start all) and etcd (tools/etcdserver.sh start)"
"$DBSERVERS" start all
"$ETCDSERVER" start
server_env=$("$DBSERVERS" env all; "$ETCDSERVER" env)
eval "$server_env"
export SQLGUARD_REQUIRE_DIALECTS="${SQLGUARD_REQUIRE_DIALECTS-sqlite,postgresql,mysql}"
export SQLGUARD_DBSERVERS="$DBSERVERS"
printf '%s\n' "$server_env" \
  "export SQLGUARD_REQUIRE_DIALECTS=$SQLGUARD_REQUIRE_DIALECTS" \
  "export SQLGUARD_DBSERVERS=$SQLGUARD_DBSERVERS" | sed 's/^/    /' >&2

step 5/7 "tests: ctest --test-dir $BUILD_DIR --output-on-failure --no-tests=error -LE topology $*"
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -LE topology "$@" 2>&1 | tee "$LOG_DIR/tests.log" || rc=$?
if (( rc == 0 )); then log "all tests passed"; else log "ctest failed (exit $rc)"; fi

# One topology at a time, under the machine-wide topology lock (they are
# heavy and share ports); each is stopped after its step, pass or fail.
topology_step() { # topology ctest-name
  local topo=$1 name=$2 trc=0
  log "topology $topo: start"
  # Galera always starts fresh (stop --purge): a whole-cluster restart on old
  # data was seen to fail IST ("IST started with wrong seqno").
  local purge=()
  [[ "$topo" == galera ]] && purge=(--purge)
  current_topology=$topo
  if ! "$DBSERVERS" start "$topo"; then
    log "topology $topo did not start: FAIL"
    "$DBSERVERS" stop "$topo" "${purge[@]}" || true
    current_topology=
    return 1
  fi
  local t0=$SECONDS
  ( eval "$("$DBSERVERS" env "$topo")"
    ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -L topology -R "^${name}\$" ) 2>&1 |
    tee "$LOG_DIR/$name.log" || trc=$?
  log "topology $topo: ctest $name exit $trc after $((SECONDS - t0)) s; stopping it"
  "$DBSERVERS" stop "$topo" "${purge[@]}" || log "warning: stopping $topo failed"
  current_topology=
  return "$trc"
}
if (( $# == 0 )); then default_topologies=pgbouncer,pg-ha,pg-async,galera; else default_topologies=; fi
TOPOLOGIES=${SQLGUARD_TOPOLOGIES-$default_topologies}
# Patroni clusters on ports below the ephemeral range (32768..60999 here): a
# failover restarts a node, and its REST/postgres port must not be taken by a
# client socket of the test's own reconnect storm (measured: "Address already
# in use", the old primary never rejoined, strict mode then blocked commits).
# The same for PgBouncer and Galera (measured in CI: bind() "Address already
# in use" on 56432 and on a Galera IST port after the main suite's storm).
export SQLGUARD_PG_HA_PORT=${SQLGUARD_PG_HA_PORT:-31440} SQLGUARD_PG_ASYNC_PORT=${SQLGUARD_PG_ASYNC_PORT:-31450}
export SQLGUARD_PGBOUNCER_PORT=${SQLGUARD_PGBOUNCER_PORT:-31432} SQLGUARD_GALERA_PORT=${SQLGUARD_GALERA_PORT:-31310}
if [[ -n "$TOPOLOGIES" ]]; then
  step 6/7 "deployments: ${TOPOLOGIES//,/, } (tools/dbservers.sh start TOPOLOGY; ctest -L topology -R ...)"
  exec 9>"${SQLGUARD_TOPOLOGY_LOCK:-/tmp/sqlguard-topology.lock}"
  flock 9
  IFS=, read -r -a topos <<<"$TOPOLOGIES"
  for topo in "${topos[@]}"; do
    case "$topo" in
      pgbouncer) topology_step pgbouncer pgbouncer || rc=1 ;;
      pg-ha) topology_step pg-ha pg_ha || rc=1 ;;
      pg-async) topology_step pg-async pg_async || rc=1 ;;
      galera) topology_step galera galera || rc=1 ;;
      *) log "unknown topology '$topo' in SQLGUARD_TOPOLOGIES"; rc=1 ;;
    esac
  done
  flock -u 9
  if (( rc == 0 )); then log "topology steps passed"; else log "a test step failed"; fi
fi
exit "$rc"
