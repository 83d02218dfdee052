#!/usr/bin/env bash
# Runs the full `sqlguard bench` matrix on SQLite, PostgreSQL and MariaDB with
# DURABLE settings, on throwaway servers of its own (never the test servers),
# plus a throwaway Redis (--redis) and a one-node etcd 3.4 (--etcd, default
# fsync) as comparators beside every dialect, and a second PostgreSQL pass of
# the lease ops with --durable-release (2 WAL flushes per cycle instead of 1).
#
# Usage: tools/bench.sh [--scale] [--quick] [--no-load] [--publish]
#   --scale   also run the 1M-row scale checks (adds minutes per dialect)
#   --quick   0.5s cells (a smoke run, numbers not for publishing)
#   --no-load skip the pass under CPU load (below)
#   --publish replace docs/bench/'s run with this one and rewrite the tables of
#             docs/benchmarks.md and docs/bench.md from it
#             (tools/bench_tables.py). Needs both comparators: a missing
#             redis-server or etcd is then an error, not a skipped comparator.
# Every run also writes <out>/benchmarks.md and <out>/bench.md: the docs with
# their tables rewritten from this run's JSON (no table is typed by hand).
#
# Output: bench-results/<dialect>.json (one JSON object per line, every cell
# tagged with this run's run_id), postgresql-durable-release.json,
# <dialect>.svg, <dialect>.txt (stderr/notes), settings.txt (run_id, machine,
# durability settings), <dialect>-cpu-load.json: the waiters and handoff ops
# again beside `--cpu-load $(nproc)` spinning processes (as many as the
# machine has cores: every core busy, so the clients, the lock client's
# threads and the server wait for a CPU as on a loaded host; about 40 s per
# dialect).
# Default matrix: 9 ops x clients 1,4,16, 2 s per cell and path, plus the
# comparators' lease cells and the durable-release pass, plus the lock-client
# ops once per dialect (held-leases 100,1000,10000 — SQLite 100,1000 — and
# the per-lease model at 100, 3 s ttl held 9 s each; waiters 1000; about a
# minute per dialect, --quick or not), plus the synchronizer ops (fair-lease
# at 4 and 16 clients, each cell the unfair and the fair lease; semaphore-hot
# and rw-mixed at 1, 4, 16: about 25 s per dialect with 2 s cells): about
# 17 min.
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
#   BENCH_ETCD_PORT         throwaway etcd client port (default 56479, peer +1; "off" to skip)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=bench
# shellcheck source=tools/bench_lib.sh
. "$here/bench_lib.sh"  # root, log, die, usage and the servers

scale=0 publish=0 cpu_load=1
duration=${BENCH_DURATION:-2s}
for arg in "$@"; do
  case "$arg" in
    --scale) scale=1 ;;
    --quick) duration=500ms ;;
    --publish) publish=1 ;;
    --no-load) cpu_load=0 ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument: $arg" ;;
  esac
done

bench_bin_and_out
# An earlier run's files would mix runs in this run's tables.
rm -f "$out"/{sqlite,postgresql,mysql,postgresql-durable-release}.{json,svg,txt}
clients=${BENCH_CLIENTS:-1,4,16}
ops=${BENCH_OPS:-all}
warmup=${BENCH_WARMUP:-300ms}
dialects=${BENCH_DIALECTS:-sqlite postgresql mysql}

bench_server_env
redis_port=${BENCH_REDIS_PORT:-56379}
etcd_port=${BENCH_ETCD_PORT:-56479}
run_id=$(date -u +%Y-%m-%dT%H:%M:%SZ)

need_servers=0
[[ " $dialects " == *" postgresql "* || " $dialects " == *" mysql "* ]] && need_servers=1

started_servers=0
redis_pidfile=""
etcd_started=0
etcd_env() { SQLGUARD_SERVERS_DIR=$out SQLGUARD_ETCD_PORT=$etcd_port "$here/etcdserver.sh" "$@"; }
cleanup() {
  local rc=$?
  bench_stop_redis
  if (( etcd_started )); then
    etcd_env stop --purge >&2 || true
    rm -rf "$out/etcd"
  fi
  if (( started_servers )); then bench_stop_servers; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if (( need_servers )); then
  bench_start_servers
  started_servers=1
fi

redis_arg=()
# `bench --help` marks a comparator the CLI cannot load "[unavailable: why]"
# (captured first: a `| grep -q` under pipefail can read a SIGPIPE as a match).
bench_help=$("$bin" bench --help 2>&1) || die "$bin bench --help failed: $bench_help"
unavailable() { # OPTION: whether its help line says [unavailable
  local line
  while IFS= read -r line; do
    [[ "$line" == *"$1 "* && "$line" == *'[unavailable'* ]] && return 0
  done <<<"$bench_help"
  return 1
}
if [[ "$redis_port" != off ]] && command -v redis-server >/dev/null 2>&1 && ! unavailable --redis; then
  if ss -ltn 2>/dev/null | grep -q ":$redis_port "; then
    (( publish )) && die "--publish needs the Redis comparator, but port $redis_port is busy (set BENCH_REDIS_PORT)"
    log "port $redis_port is busy: skipping the Redis comparator"
  else
    bench_start_redis "$redis_port"
    redis_arg=(--redis "127.0.0.1:$redis_port")
    log "Redis comparator on 127.0.0.1:$redis_port (appendfsync always)"
  fi
else
  (( publish )) && die "--publish needs the Redis comparator: no redis-server, or no comparators module with hiredis"
  log "Redis comparator off (no redis-server, or no comparators module with hiredis)"
fi
(( publish )) && [[ "$redis_port" == off ]] && die "--publish needs the Redis comparator (BENCH_REDIS_PORT=off)"

etcd_arg=()
if [[ "$etcd_port" != off ]] && command -v etcd >/dev/null 2>&1 \
   && ! unavailable --etcd; then
  # A throwaway one-node etcd with its own data dir under $out (purged on exit).
  etcd_env stop --purge >/dev/null 2>&1 || true
  etcd_env start >&2 || die "etcd did not start on 127.0.0.1:$etcd_port (see $out/etcd/etcd.log)"
  etcd_started=1
  etcd_arg=(--etcd "127.0.0.1:$etcd_port")
  log "etcd comparator on 127.0.0.1:$etcd_port (one node, default fsync)"
else
  (( publish )) && die "--publish needs the etcd comparator: no etcd (etcd-server), no comparators module with cpp-httplib, or BENCH_ETCD_PORT=off"
  log "etcd comparator off (no etcd, or no comparators module with cpp-httplib)"
fi

{
  echo "run_id: $run_id"
  echo "date: $run_id"
  echo "host: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {print int($2/1024) " MB"}' /proc/meminfo)"
  echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "matrix: clients $clients, $duration per cell and path after $warmup warm-up, threads"
  echo "sqlite: WAL, synchronous=NORMAL (sqlguard's default), file on $(df -P "$out" | awk 'NR==2 {print $1}')"
  echo "postgresql: fsync=on synchronous_commit=on full_page_writes=on (SQLGUARD_DURABLE=1)"
  echo "mariadb: innodb_flush_log_at_trx_commit=1 (SQLGUARD_DURABLE=1), binlog off"
  if [[ ${#redis_arg[@]} -gt 0 ]]; then echo "redis: $(redis-server --version | cut -d' ' -f3), appendonly yes, appendfsync always"; fi
  if [[ ${#etcd_arg[@]} -gt 0 ]]; then echo "etcd: $(etcd --version | awk '/etcd Version/ {print $3}'), one node on loopback, default settings (raft log fsynced per entry)"; fi
  if (( cpu_load )); then echo "cpu load: waiters and handoff again beside $(nproc) spinning processes (--cpu-load $(nproc)), <dialect>-cpu-load.json"; fi
  echo "release: sqlguard's default (PostgreSQL: the release commits without waiting for its WAL flush); PostgreSQL's lease ops again with --durable-release"
} > "$out/settings.txt"

# The ops of $ops among the arguments ("all" in $ops: all of them), comma-separated.
ops_among() {
  local o want=" $* " picked=()
  for o in ${ops//,/ }; do
    if [[ "$o" == all ]]; then picked=("$@"); break; fi
    [[ "$want" == *" $o "* ]] && picked+=("$o")
  done
  (IFS=,; echo "${picked[*]}")
}

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
  # The comparators run beside every dialect (same invocation, same client
  # counts): the lease cells report vs_redis and vs_etcd.
  log "$d: running (${duration} cells) ..."
  "$bin" --db "$uri" --json bench --run-id "$run_id" --ops "$ops" --clients "$clients" --duration "$duration" \
    --warmup "$warmup" --plot "$out/$d.svg" "${redis_arg[@]}" "${etcd_arg[@]}" "${extra[@]}" \
    > "$out/$d.json" 2> "$out/$d.txt" || { cat "$out/$d.txt" >&2; die "$d bench failed"; }
  log "$d: done, $(wc -l < "$out/$d.json") cells -> $out/$d.json, $out/$d.svg"
  if [[ "$d" == postgresql ]]; then
    # The same lease cells with releases that wait for their WAL flush: the
    # tables show both sides of "1 flush per cycle" against the comparators.
    lease_ops=$(ops_among lease-distinct lease-hot handoff)
    if [[ -n "$lease_ops" ]]; then
      log "$d: lease ops again with --durable-release ..."
      "$bin" --db "$uri" --json bench --run-id "$run_id" --durable-release --ops "$lease_ops" --clients "$clients" \
        --duration "$duration" --warmup "$warmup" > "$out/$d-durable-release.json" 2>> "$out/$d.txt" \
        || { cat "$out/$d.txt" >&2; die "$d --durable-release bench failed"; }
    fi
  fi
  # The wait and hand-off ops again on a busy host (issue 40 item 6).
  load_ops=$(ops_among waiters handoff)
  if (( cpu_load )) && [[ -n "$load_ops" ]]; then
    log "$d: $load_ops again beside $(nproc) spinning processes (--cpu-load) ..."
    "$bin" --db "$uri" --json bench --run-id "$run_id" --cpu-load "$(nproc)" --ops "$load_ops" --clients "$clients" \
      --duration "$duration" --warmup "$warmup" > "$out/$d-cpu-load.json" 2>> "$out/$d.txt" \
      || { cat "$out/$d.txt" >&2; die "$d --cpu-load bench failed"; }
  fi
done
[[ "$dialects" == *sqlite* ]] && rm -f "$out"/bench.db "$out"/bench.db-*
rm -f "$out"/bench-redis.aof "$out"/appendonlydir -r 2>/dev/null || true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg), total $((SECONDS - t0)) s" >> "$out/settings.txt"
log "all done in $((SECONDS - t0)) s"

# The tables, generated from this run's JSON.
cp "$root/docs/benchmarks.md" "$out/benchmarks.md"
cp "$root/docs/bench.md" "$out/bench.md"
cp "$root/README.md" "$out/README.md"
python3 "$root/tools/bench_tables.py" "$out" --write "$out/benchmarks.md" "$out/bench.md" "$out/README.md"
log "tables from this run: $out/benchmarks.md, $out/bench.md, $out/README.md"
if (( publish )); then
  # Replace the published run as a whole: no table may mix runs.
  rm -f "$root"/docs/bench/{sqlite,postgresql,mysql,postgresql-durable-release}.{json,svg} \
    "$root"/docs/bench/{sqlite,postgresql,mysql}-cpu-load.json
  for f in "$out"/{sqlite,postgresql,mysql,postgresql-durable-release}.{json,svg} \
           "$out"/{sqlite,postgresql,mysql}-cpu-load.json; do
    if [[ -f "$f" ]]; then cp "$f" "$root/docs/bench/"; fi
  done
  cp "$out/settings.txt" "$root/docs/bench/settings.txt"
  python3 "$root/tools/bench_tables.py" "$root/docs/bench" --write "$root/docs/benchmarks.md" "$root/docs/bench.md" \
    "$root/README.md"
  log "published into docs/bench/, docs/benchmarks.md, docs/bench.md and README.md"
fi
