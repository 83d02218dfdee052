#!/usr/bin/env bash
# Bounded barging (LeaseOptions::barging_limit, issue 40): the hot lock
# (`lease-hot`, 16 clients) under each barging limit, on SQLite, PostgreSQL
# and MariaDB with DURABLE settings, on throwaway servers of its own (never
# the test servers), ROUNDS rounds of every limit in turn (the same round
# runs every limit back to back, so the machine's drift hits them alike).
#
# Usage: tools/bench_barging.sh [--publish]
#   --publish  write docs/bench/barging/ and rewrite the `barging` table of
#              docs/lease-lock.md from it (tools/bench_tables.py)
#
# Output: <out>/<dialect>.json (one JSON object per line: the cell, its
# `barging_limit_ms` and `round`), <out>/settings.txt. About 5 min.
#
# Environment:
#   SQLGUARD_BIN      the sqlguard binary (default: build/tools/sqlguard)
#   BENCH_OUT         output directory (default: bench-results/barging)
#   BARGING_LIMITS    default "1h 200ms 100ms 50ms 20ms" (1h: no bound, the rule off)
#   BARGING_ROUNDS    default 2;  BENCH_DURATION default 3s;  BENCH_CLIENTS default 16
#   BENCH_DIALECTS    default "sqlite postgresql mysql"
#   SQLGUARD_PG_PORT / SQLGUARD_MARIADB_PORT / SQLGUARD_SERVERS_DIR: as tools/bench.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=bench_barging
# shellcheck source=tools/bench_lib.sh
. "$here/bench_lib.sh"

bench_publish_flag "$@"

BENCH_OUT=${BENCH_OUT:-$root/bench-results/barging}
bench_bin_and_out
rm -f "$out"/{sqlite,postgresql,mysql}.json "$out/settings.txt"
limits=${BARGING_LIMITS:-1h 200ms 100ms 50ms 20ms}
rounds=${BARGING_ROUNDS:-2}
duration=${BENCH_DURATION:-3s}
clients=${BENCH_CLIENTS:-16}
dialects=${BENCH_DIALECTS:-sqlite postgresql mysql}
run_id=$(date -u +%Y-%m-%dT%H:%M:%SZ)

bench_side_servers

sqlite_dir=$(mktemp -d)

{
  bench_settings_head "$run_id"
  echo "matrix: lease-hot, $clients clients, $duration per cell after 300ms warm-up, threads, no raw path; limits $limits; $rounds rounds"
} >"$out/settings.txt"

for d in $dialects; do
  uri=$(bench_uri_of "$d" "$sqlite_dir")
  "$bin" --db "$uri" migrate >/dev/null
  for r in $(seq 1 "$rounds"); do
    for lim in $limits; do
      log "$d round $r: --barging-limit $lim"
      "$bin" --db "$uri" bench --ops lease-hot --clients "$clients" --duration "$duration" --no-raw --json \
        --barging-limit "$lim" --run-id "$run_id" 2>>"$out/$d.txt" |
        bench_tag_round "$r" >>"$out/$d.json"
    done
  done
done
rm -rf "$sqlite_dir"

if (( publish )); then
  dest=$root/docs/bench/barging
  mkdir -p "$dest"
  cp "$out"/{sqlite,postgresql,mysql}.json "$out/settings.txt" "$dest/"
  python3 "$here/bench_tables.py" "$root/docs/bench" --write "$root/docs/lease-lock.md"
  log "published to docs/bench/barging/ and docs/lease-lock.md"
fi
log "done: $out"
