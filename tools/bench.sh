#!/usr/bin/env bash
# Runs the full `sqlguard bench` matrix on SQLite, PostgreSQL and MariaDB with
# DURABLE settings, on throwaway servers of its own (never the test servers),
# plus a throwaway Redis for the --redis comparator when available.
#
# Usage: tools/bench.sh [--scale] [--quick] [--publish]
#   --scale   also run the 1M-row scale checks (adds minutes per dialect)
#   --quick   0.5s cells (a smoke run, numbers not for publishing)
#   --publish copy the results into docs/bench/ and rewrite the tables of
#             docs/benchmarks.md from them (tools/bench_tables.py)
# Every run also writes <out>/benchmarks.md: docs/benchmarks.md with its
# tables rewritten from this run's JSON (no table is typed by hand).
#
# Output: bench-results/<dialect>.json (one JSON object per line), <dialect>.svg,
# <dialect>.txt (stderr/notes), settings.txt (machine + durability settings).
# Default matrix: 9 ops x clients 1,4,16, 2 s per cell and path: about 6-7 min.
#
# Environment:
#   SQLGUARD_BIN            the sqlguard binary (default: build/tools/sqlguard)
#   BENCH_OUT               output directory (default: bench-results)
#   BENCH_CLIENTS           default 1,4,16
#   BENCH_OPS               default all (comma-separated, see sqlguard bench --help)
#   BENCH_DURATION          default 2s;  BENCH_WARMUP default 300ms
#   BENCH_DIALECTS          default "sqlite postgresql mysql"
#   SQLGUARD_PG_PORT / SQLGUARD_MARIADB_PORT / SQLGUARD_SERVERS_DIR
#                           bench servers (default 56432 / 56306 / /tmp/sqlguard-bench-servers)
#   BENCH_REDIS_PORT        throwaway redis-server port (default 56379; "off" to skip)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
log() { printf 'bench: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2; }

scale=0 publish=0
duration=${BENCH_DURATION:-2s}
for arg in "$@"; do
  case "$arg" in
    --scale) scale=1 ;;
    --quick) duration=500ms ;;
    --publish) publish=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument: $arg" ;;
  esac
done

bin=${SQLGUARD_BIN:-$root/build/tools/sqlguard}
[[ -x "$bin" ]] || die "no sqlguard binary at $bin (build first, or set SQLGUARD_BIN)"
out=${BENCH_OUT:-$root/bench-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
clients=${BENCH_CLIENTS:-1,4,16}
ops=${BENCH_OPS:-all}
warmup=${BENCH_WARMUP:-300ms}
dialects=${BENCH_DIALECTS:-sqlite postgresql mysql}

export SQLGUARD_PG_PORT=${SQLGUARD_PG_PORT:-56432}
export SQLGUARD_MARIADB_PORT=${SQLGUARD_MARIADB_PORT:-56306}
export SQLGUARD_SERVERS_DIR=${SQLGUARD_SERVERS_DIR:-/tmp/sqlguard-bench-servers}
export SQLGUARD_DURABLE=1
redis_port=${BENCH_REDIS_PORT:-56379}

need_servers=0
[[ " $dialects " == *" postgresql "* || " $dialects " == *" mysql "* ]] && need_servers=1

started_servers=0
redis_pidfile=""
cleanup() {
  local rc=$?
  if [[ -n "$redis_pidfile" && -f "$redis_pidfile" ]]; then
    kill "$(cat "$redis_pidfile")" 2>/dev/null || true
    rm -f "$redis_pidfile"
  fi
  if (( started_servers )); then
    log "stopping the bench servers"
    "$here/dbservers.sh" stop all >&2 || true
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if (( need_servers )); then
  if "$here/dbservers.sh" status all >/dev/null 2>&1; then
    log "bench servers already running in $SQLGUARD_SERVERS_DIR (restarting them with durable settings)"
    "$here/dbservers.sh" restart all >&2
  else
    log "starting durable PostgreSQL :$SQLGUARD_PG_PORT and MariaDB :$SQLGUARD_MARIADB_PORT in $SQLGUARD_SERVERS_DIR"
    "$here/dbservers.sh" start all >&2
  fi
  started_servers=1
  eval "$("$here/dbservers.sh" env)"
fi

redis_arg=()
if [[ "$redis_port" != off ]] && command -v redis-server >/dev/null 2>&1 \
   && ! "$bin" bench --help 2>&1 | grep -q 'not compiled in'; then
  if ss -ltn 2>/dev/null | grep -q ":$redis_port "; then
    log "port $redis_port is busy: skipping the Redis comparator"
  else
    redis_pidfile=$out/.redis.pid
    # A throwaway server: a previous run's AOF would be reloaded first (and
    # answer LOADING to the first commands).
    rm -rf "$out/appendonlydir"
    # appendfsync always: the closest Redis gets to the databases' durable commits
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync always \
      --dir "$out" --appendfilename bench-redis.aof --daemonize yes --pidfile "$redis_pidfile" \
      --logfile "$out/redis.log" >/dev/null
    for _ in $(seq 50); do [[ -f "$redis_pidfile" ]] && break; sleep 0.1; done
    redis_arg=(--redis "127.0.0.1:$redis_port")
    log "Redis comparator on 127.0.0.1:$redis_port (appendfsync always)"
  fi
else
  log "Redis comparator off (no redis-server, or sqlguard built without hiredis)"
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {print int($2/1024) " MB"}' /proc/meminfo)"
  echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "matrix: clients $clients, $duration per cell and path after $warmup warm-up, threads"
  echo "sqlite: WAL, synchronous=NORMAL (sqlguard's default), file on $(df -P "$out" | awk 'NR==2 {print $1}')"
  echo "postgresql: fsync=on synchronous_commit=on full_page_writes=on (SQLGUARD_DURABLE=1)"
  echo "mariadb: innodb_flush_log_at_trx_commit=1 (SQLGUARD_DURABLE=1), binlog off"
  if [[ ${#redis_arg[@]} -gt 0 ]]; then echo "redis: $(redis-server --version | cut -d' ' -f3), appendonly yes, appendfsync always"; fi
} > "$out/settings.txt"

extra=()
(( scale )) && extra+=(--scale)
t0=$SECONDS
for d in $dialects; do
  case "$d" in
    sqlite) rm -f "$out"/bench.db "$out"/bench.db-*; uri="sqlite://$out/bench.db" ;;
    postgresql) uri=${SQLGUARD_TEST_PG_URI:?} ;;
    mysql) uri=${SQLGUARD_TEST_MYSQL_URI:?} ;;
    *) die "unknown dialect '$d' in BENCH_DIALECTS" ;;
  esac
  # Redis runs beside every dialect (same run, same client counts): the lease
  # cells report vs_redis.
  r=("${redis_arg[@]}")
  log "$d: running (${duration} cells) ..."
  "$bin" --db "$uri" --json bench --ops "$ops" --clients "$clients" --duration "$duration" --warmup "$warmup" \
    --plot "$out/$d.svg" "${r[@]}" "${extra[@]}" > "$out/$d.json" 2> "$out/$d.txt" \
    || { cat "$out/$d.txt" >&2; die "$d bench failed"; }
  log "$d: done, $(wc -l < "$out/$d.json") cells -> $out/$d.json, $out/$d.svg"
done
[[ "$dialects" == *sqlite* ]] && rm -f "$out"/bench.db "$out"/bench.db-*
rm -f "$out"/bench-redis.aof "$out"/appendonlydir -r 2>/dev/null || true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg), total $((SECONDS - t0)) s" >> "$out/settings.txt"
log "all done in $((SECONDS - t0)) s"

# The tables, generated from this run's JSON.
cp "$root/docs/benchmarks.md" "$out/benchmarks.md"
python3 "$root/tools/bench_tables.py" "$out" --write "$out/benchmarks.md"
log "tables from this run: $out/benchmarks.md"
if (( publish )); then
  for d in $dialects; do cp "$out/$d.json" "$out/$d.svg" "$root/docs/bench/"; done
  cp "$out/settings.txt" "$root/docs/bench/settings.txt"
  (( scale )) && [[ -f "$out/scale.json" ]] && cp "$out/scale.json" "$root/docs/bench/scale.json"
  python3 "$root/tools/bench_tables.py" "$root/docs/bench" --write "$root/docs/benchmarks.md"
  log "published into docs/bench/ and docs/benchmarks.md"
fi
