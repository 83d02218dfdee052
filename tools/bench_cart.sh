#!/usr/bin/env bash
# Carts (issue 41 item 1): `cart-decrement` (an order of 5 SKUs from a
# catalogue of 20, one GuardedUpdate::apply_all()) beside `cart-per-row`
# (the same orders as one GuardedUpdate::apply() per SKU in the cart's order
# inside a transaction: what a user writes without apply_all), in one run,
# at 1 and 16 clients, on SQLite and on PostgreSQL and MariaDB with DURABLE
# settings, on throwaway servers of its own (never the test servers).
#
# Usage: tools/bench_cart.sh [--publish]
#   --publish  write docs/bench/cart/ and rewrite the `cart` table of
#              docs/guide.md from it (tools/bench_tables.py)
#
# Output: <out>/<dialect>.json (the bench's JSON lines), <out>/settings.txt.
# About 1 min.
#
# Environment:
#   SQLGUARD_BIN      the sqlguard binary (default: build/tools/sqlguard)
#   BENCH_OUT         output directory (default: bench-results/cart)
#   BENCH_DURATION    default 3s;  BENCH_CLIENTS default 1,16
#   BENCH_DIALECTS    default "sqlite postgresql mysql"
#   SQLGUARD_PG_PORT / SQLGUARD_MARIADB_PORT / SQLGUARD_SERVERS_DIR: as tools/bench.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=bench_cart
# shellcheck source=tools/bench_lib.sh
. "$here/bench_lib.sh"

bench_publish_flag "$@"

BENCH_OUT=${BENCH_OUT:-$root/bench-results/cart}
bench_bin_and_out
rm -f "$out"/{sqlite,postgresql,mysql}.{json,txt} "$out/settings.txt" "$out"/cart.db "$out"/cart.db-*
duration=${BENCH_DURATION:-3s}
clients=${BENCH_CLIENTS:-1,16}
dialects=${BENCH_DIALECTS:-sqlite postgresql mysql}
run_id=$(date -u +%Y-%m-%dT%H:%M:%SZ)

side_cleanup() { rm -f "$out"/cart.db "$out"/cart.db-*; }
bench_side_servers

{
  bench_settings_head "$run_id"
  echo "matrix: cart-decrement and cart-per-row at $clients clients (threads), $duration per cell after 300ms warm-up, no raw path"
  echo "sqlite: WAL, synchronous=NORMAL (sqlguard's default), file on $(df -P "$out" | awk 'NR==2 {print $1}')"
} >"$out/settings.txt"

bench_side_dialects cart "cart-decrement and cart-per-row at $clients clients" --ops cart-decrement,cart-per-row --clients "$clients" --duration "$duration" --no-raw

if (( publish )); then
  bench_side_publish cart docs/guide.md
fi
log "done: $out"
