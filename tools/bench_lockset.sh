#!/usr/bin/env bash
# Lock sets (issue 41 item 2): `lock-set` — orders of 5 names from a catalogue
# of 20, all or none, held 1 ms, as one LockSet per order and (same cell) name
# by name in byte order with LeaseLock::acquire each: what a user writes
# without sets — at 1, 4 and 16 clients (a LockClient each), on SQLite and on
# PostgreSQL and MariaDB with DURABLE settings, on throwaway servers of its
# own (never the test servers).
#
# Usage: tools/bench_lockset.sh [--publish]
#   --publish  write docs/bench/lock-set/ and rewrite the `lock-set` table of
#              docs/lease-lock.md from it (tools/bench_tables.py)
#
# Output: <out>/<dialect>.json (the bench's JSON lines), <out>/settings.txt.
# About 2 min.
#
# Environment:
#   SQLGUARD_BIN      the sqlguard binary (default: build/tools/sqlguard)
#   BENCH_OUT         output directory (default: bench-results/lock-set)
#   BENCH_DURATION    default 3s;  BENCH_CLIENTS default 1,4,16
#   BENCH_DIALECTS    default "sqlite postgresql mysql"
#   SQLGUARD_PG_PORT / SQLGUARD_MARIADB_PORT / SQLGUARD_SERVERS_DIR: as tools/bench.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=bench_lockset
# shellcheck source=tools/bench_lib.sh
. "$here/bench_lib.sh"

bench_publish_flag "$@"

BENCH_OUT=${BENCH_OUT:-$root/bench-results/lock-set}
bench_bin_and_out
rm -f "$out"/{sqlite,postgresql,mysql}.{json,txt} "$out/settings.txt" "$out"/lockset.db "$out"/lockset.db-*
duration=${BENCH_DURATION:-3s}
clients=${BENCH_CLIENTS:-1,4,16}
dialects=${BENCH_DIALECTS:-sqlite postgresql mysql}
run_id=$(date -u +%Y-%m-%dT%H:%M:%SZ)

side_cleanup() { rm -f "$out"/lockset.db "$out"/lockset.db-*; }
bench_side_servers

{
  bench_settings_head "$run_id"
  echo "matrix: lock-set at $clients clients (threads, a LockClient each), orders of 5 names of 20 held 1ms, as a set and name by name, $duration per path after 300ms warm-up"
  echo "sqlite: WAL, synchronous=NORMAL (sqlguard's default), file on $(df -P "$out" | awk 'NR==2 {print $1}')"
} >"$out/settings.txt"

bench_side_dialects lockset "lock-set at $clients clients" --ops lock-set --clients "$clients" --duration "$duration" --hold 1ms

if (( publish )); then
  bench_side_publish lock-set docs/lease-lock.md
fi
log "done: $out"
