#!/usr/bin/env bash
# What the grant history costs (issue 41 item 3, include/sqlguard/history.h):
# `lease-hot` and `lease-distinct` with the run's names recorded
# (`sqlguard bench --history`) and without, on SQLite, PostgreSQL and MariaDB
# with DURABLE settings, on throwaway servers of its own (never the test
# servers), ROUNDS rounds; each round runs without, then with, back to back,
# so the machine's drift hits both alike.
#
# Usage: tools/bench_history.sh [--publish]
#   --publish  write docs/bench/history/ and rewrite the `history` table of
#              docs/history.md from it (tools/bench_tables.py)
#
# Output: <out>/<dialect>.json (one JSON object per line: the cell, its
# `history` and `round`), <out>/settings.txt. About 10 min.
#
# Environment:
#   SQLGUARD_BIN      the sqlguard binary (default: build/tools/sqlguard)
#   BENCH_OUT         output directory (default: bench-results/history)
#   HISTORY_ROUNDS    default 8 (single rounds swing by a third here: the table reads medians);  BENCH_DURATION default 2s;  BENCH_CLIENTS default 1,16
#   BENCH_DIALECTS    default "sqlite postgresql mysql"
#   SQLGUARD_PG_PORT / SQLGUARD_MARIADB_PORT / SQLGUARD_SERVERS_DIR: as tools/bench.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=bench_history
# shellcheck source=tools/bench_lib.sh
. "$here/bench_lib.sh"

bench_publish_flag "$@"

BENCH_OUT=${BENCH_OUT:-$root/bench-results/history}
bench_bin_and_out
rm -f "$out"/{sqlite,postgresql,mysql}.json "$out/settings.txt"
rounds=${HISTORY_ROUNDS:-8}
duration=${BENCH_DURATION:-2s}
clients=${BENCH_CLIENTS:-1,16}
dialects=${BENCH_DIALECTS:-sqlite postgresql mysql}
run_id=$(date -u +%Y-%m-%dT%H:%M:%SZ)

bench_side_servers

sqlite_dir=$(mktemp -d)

{
  bench_settings_head "$run_id"
  echo "matrix: lease-hot and lease-distinct, $clients clients, $duration per cell after 300ms warm-up, threads, no raw path; without and with --history; $rounds rounds"
} >"$out/settings.txt"

for d in $dialects; do
  uri=$(bench_uri_of "$d" "$sqlite_dir")
  "$bin" --db "$uri" migrate >/dev/null
  for r in $(seq 1 "$rounds"); do
    for variant in off on; do
      flag=()
      [[ $variant == on ]] && flag=(--history)
      log "$d round $r: history $variant"
      "$bin" --db "$uri" bench --ops lease-hot,lease-distinct --clients "$clients" --duration "$duration" --no-raw --json \
        "${flag[@]}" --run-id "$run_id" 2>>"$out/$d.txt" |
        bench_tag_round "$r" >>"$out/$d.json"
    done
  done
done
rm -rf "$sqlite_dir"

if (( publish )); then
  dest=$root/docs/bench/history
  mkdir -p "$dest"
  cp "$out"/{sqlite,postgresql,mysql}.json "$out/settings.txt" "$dest/"
  python3 "$here/bench_tables.py" "$root/docs/bench" --write "$root/docs/history.md"
  log "published to docs/bench/history/ and docs/history.md"
fi
log "done: $out"
