#!/usr/bin/env bash
# Runs `sqlguard bench --ops churn-soak` (issue 43: a lock client that runs
# for months) on PostgreSQL and MariaDB at once, with DURABLE settings, on
# throwaway servers of its own (never the test servers), and writes
# churn-soak.json: a first line {"run": {...}} (run id, date, machine,
# settings, load) and one cell per dialect, every cell tagged with the run's
# run_id. tools/bench_tables.py renders its table (region churn-soak of
# docs/benchmarks.md) from it.
#
# Usage: tools/churn_soak.sh [--publish] [-- EXTRA BENCH ARGS...]
#   --publish  copy churn-soak.json into docs/bench/ and rewrite the tables
#              of docs/benchmarks.md, docs/bench.md and README.md from it
#   EXTRA      passed to every `sqlguard bench` (e.g. -- --churn-kinds all)
#
# Environment:
#   SOAK_DURATION       default 1h (the published soak); SOAK_SAMPLE_EVERY default 60s
#   SOAK_HELD           default 10000; SOAK_CHURN default 1000; SOAK_TTL default 5s
#   SOAK_BUSY           busy loops to run beside the soak for its CPU load (default 0)
#   SOAK_LABEL          a label for the run's first line (e.g. which code ran: "before: <commit>")
#   SOAK_DIALECTS       default "postgresql mysql" (both at once); "pgbouncer" adds a
#                       PostgreSQL cell through PgBouncer (transaction pooling) in
#                       front of the same server (port SQLGUARD_PGBOUNCER_PORT, default 56433)
#   SQLGUARD_BIN        the sqlguard binary (default: build/tools/sqlguard)
#   BENCH_OUT           output directory (default: bench-results)
#   SQLGUARD_PG_PORT / SQLGUARD_MARIADB_PORT / SQLGUARD_SERVERS_DIR
#                       the servers (default 56432 / 56306 / /tmp/sqlguard-bench-servers, as tools/bench.sh)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=churn-soak
# shellcheck source=tools/bench_lib.sh
. "$here/bench_lib.sh"  # root, log, die, usage and the servers

publish=0
extra=()
while (( $# )); do
  case "$1" in
    --publish) publish=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument: $1" ;;
  esac
  shift
done

bench_bin_and_out
rm -f "$out"/churn-soak{.json,-*.json,-*.txt}
duration=${SOAK_DURATION:-1h}
sample_every=${SOAK_SAMPLE_EVERY:-60s}
held=${SOAK_HELD:-10000}
churn=${SOAK_CHURN:-1000}
ttl=${SOAK_TTL:-5s}
busy=${SOAK_BUSY:-0}
dialects=${SOAK_DIALECTS:-postgresql mysql}

bench_server_env
run_id=soak-$(date -u +%Y-%m-%dT%H:%M:%SZ)

busy_pids=()
cleanup() {
  local rc=$?
  for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  log "stopping the servers"
  [[ " $dialects " != *" pgbouncer "* ]] || "$here/dbservers.sh" stop pgbouncer >&2 || true
  "$here/dbservers.sh" stop all >&2 || true
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_start_servers
if [[ " $dialects " == *" pgbouncer "* ]]; then
  export SQLGUARD_PGBOUNCER_PORT=${SQLGUARD_PGBOUNCER_PORT:-56433}
  "$here/dbservers.sh" start pgbouncer >&2
  eval "$("$here/dbservers.sh" env pgbouncer)"
fi

for ((i = 0; i < busy; i++)); do
  sh -c 'while :; do :; done' &
  busy_pids+=($!)
done

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$SECONDS
pids=()
for d in $dialects; do
  case "$d" in
    postgresql) uri=${SQLGUARD_TEST_PG_URI:?} ;;
    mysql) uri=${SQLGUARD_TEST_MYSQL_URI:?} ;;
    pgbouncer)
      uri=${SQLGUARD_TEST_PGBOUNCER_URI:?}
      [[ "$uri" == *\?* ]] && uri+="&pooler=transaction" || uri+="?pooler=transaction" ;;
    *) die "unknown dialect '$d' in SOAK_DIALECTS (postgresql, mysql, pgbouncer)" ;;
  esac
  if [[ "$d" == pgbouncer && " $dialects " == *" postgresql "* ]]; then
    # Same server: the bench's set-up (its tables) runs once at a time, so
    # this one starts when the direct cell has its first sample.
    w=0
    while [[ ! -s "$out/churn-soak-postgresql.txt" ]] && (( w++ < 600 )); do sleep 0.5; done
  fi
  log "$d: $duration, $held held, churn $churn, ttl $ttl (samples: $out/churn-soak-$d.txt)"
  "$bin" --db "$uri" --json bench --run-id "$run_id" --ops churn-soak --duration "$duration" --held "$held" \
    --churn "$churn" --held-ttl "$ttl" --sample-every "$sample_every" "${extra[@]}" \
    > "$out/churn-soak-$d.json" 2> "$out/churn-soak-$d.txt" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
(( failed )) && { cat "$out"/churn-soak-*.txt >&2; die "a soak failed"; }
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

settings="$(tr ' ' ',' <<<"$dialects" | sed 's/mysql/mariadb/; s/pgbouncer/pgbouncer (transaction pooling, pool 20)/') at once, ${busy} busy loops beside them,"
settings+=" load $load_before before / $load_after after; PostgreSQL fsync, synchronous_commit, full_page_writes on;"
settings+=" InnoDB innodb_flush_log_at_trx_commit=1, binlog off (SQLGUARD_DURABLE=1)"
python3 - "$out" "$run_id" "$settings" "${SOAK_LABEL:-}" $dialects <<'EOF'
import json, os, platform, sys
out, run_id, settings, label, dialects = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown cpu")
mem = next(int(l.split()[1]) // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal"))
u = platform.uname()
head = {"run": {"run_id": run_id, "date": run_id[len("soak-"):], "cpu": cpu, "settings": settings,
                "host": "{} {} {}, {} cores, {} MB".format(u.system, u.release, u.machine, os.cpu_count(), mem)}}
if label:
    head["run"]["label"] = label
with open(os.path.join(out, "churn-soak.json"), "w") as f:
    f.write(json.dumps(head) + "\n")
    for d in dialects:
        for line in open(os.path.join(out, "churn-soak-{}.json".format(d))):
            if not line.strip():
                continue
            cell = json.loads(line)
            if d == "pgbouncer":
                cell["via"] = "pgbouncer"  # the cell's dialect is postgresql: say how it was reached
            f.write(json.dumps(cell) + "\n")
EOF
rm -f "$out"/churn-soak-*.json
log "done in $((SECONDS - t0)) s: $out/churn-soak.json"
if (( publish )); then
  cp "$out/churn-soak.json" "$root/docs/bench/churn-soak.json"
  python3 "$root/tools/bench_tables.py" "$root/docs/bench" --write "$root/docs/benchmarks.md" "$root/docs/bench.md" \
    "$root/README.md"
  log "published into docs/bench/churn-soak.json and docs/benchmarks.md"
fi
