#!/usr/bin/env bash
# Coalesced calls of one lock client (LockClientOptions::batch_max, issue 40
# item 5): `lease-coalesced` (64 and 256 requester threads on ONE client with
# 4 connections, coalescing on and off in one cell) beside today's per-call
# `lease-distinct` at 16 clients (a connection each) and durable Redis
# (appendfsync always: per-call at 16 clients, and the requesters on two
# pipelined connections), in one run, on PostgreSQL and MariaDB with DURABLE
# settings, on throwaway servers of its own (never the test servers).
#
# Usage: tools/bench_coalesced.sh [--publish]
#   --publish  write docs/bench/coalesced/ and rewrite the `coalesced` table
#              of docs/lock-client.md from it (tools/bench_tables.py)
#
# Output: <out>/<dialect>.json (the bench's JSON lines, Redis's cells
# included), <out>/settings.txt. About 2 min.
#
# Environment:
#   SQLGUARD_BIN      the sqlguard binary (default: build/tools/sqlguard)
#   BENCH_OUT         output directory (default: bench-results/coalesced)
#   BENCH_DURATION    default 3s;  BENCH_REQUESTERS default 64,256
#   BENCH_DIALECTS    default "postgresql mysql"
#   BENCH_REDIS_PORT  throwaway redis-server port (default 56379)
#   SQLGUARD_PG_PORT / SQLGUARD_MARIADB_PORT / SQLGUARD_SERVERS_DIR: as tools/bench.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=bench_coalesced
# shellcheck source=tools/bench_lib.sh
. "$here/bench_lib.sh"

bench_publish_flag "$@"

BENCH_OUT=${BENCH_OUT:-$root/bench-results/coalesced}
bench_bin_and_out
rm -f "$out"/{postgresql,mysql}.{json,txt} "$out/settings.txt"
duration=${BENCH_DURATION:-3s}
requesters=${BENCH_REQUESTERS:-64,256}
dialects=${BENCH_DIALECTS:-postgresql mysql}
redis_port=${BENCH_REDIS_PORT:-56379}
run_id=$(date -u +%Y-%m-%dT%H:%M:%SZ)
command -v redis-server >/dev/null 2>&1 || die "no redis-server (tools/deps.sh installs it): the comparator is part of the run"
ss -ltn 2>/dev/null | grep -q ":$redis_port " && die "port $redis_port is busy (set BENCH_REDIS_PORT)"

bench_server_env
started=0
cleanup() {
  local rc=$?
  bench_stop_redis
  if (( started )); then bench_stop_servers; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bench_start_servers
started=1
bench_start_redis "$redis_port"

{
  bench_settings_head "$run_id"
  echo "matrix: lease-distinct at 16 clients and lease-coalesced at $requesters requesters (threads, then coroutines on 2 executor threads), $duration per cell after 300ms warm-up, no raw path"
  echo "redis: $(redis-server --version | cut -d' ' -f3), appendonly yes, appendfsync always"
} >"$out/settings.txt"

for d in $dialects; do
  case "$d" in
    postgresql) uri=$SQLGUARD_TEST_PG_URI ;;
    mysql) uri=$SQLGUARD_TEST_MYSQL_URI ;;
    *) die "unknown dialect $d (postgresql, mysql)" ;;
  esac
  log "$d: lease-distinct at 16 clients, lease-coalesced at $requesters requesters, Redis beside them"
  "$bin" --db "$uri" migrate >/dev/null
  "$bin" --db "$uri" --json bench --ops lease-distinct,lease-coalesced --clients 16 --requesters "$requesters" \
    --duration "$duration" --no-raw --redis "127.0.0.1:$redis_port" --run-id "$run_id" \
    >"$out/$d.json" 2>>"$out/$d.txt" || { cat "$out/$d.txt" >&2; die "$d bench failed"; }
done

if (( publish )); then
  dest=$root/docs/bench/coalesced
  mkdir -p "$dest"
  cp "$out"/{postgresql,mysql}.json "$out/settings.txt" "$dest/"
  python3 "$here/bench_tables.py" "$root/docs/bench" --write "$root/docs/lock-client.md"
  log "published to docs/bench/coalesced/ and docs/lock-client.md"
fi
log "done: $out"
