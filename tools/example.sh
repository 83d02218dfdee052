#!/usr/bin/env bash
# The reference service in one command: starts nats-server (tools/natsserver.sh),
# order-service on an embedded SQLite file and a shipping consumer, runs the
# scripted client (order-load) and prints a short report. Everything it starts
# is stopped on exit.
#
# Usage: tools/example.sh [--orders N] [--keys N]     (defaults 400, 100)
#
# Environment: SQLGUARD_BUILD_DIR (default build; built if the binaries are
# missing), SQLGUARD_NATS_PORT (default 54222), SQLGUARD_EXAMPLE_PORT (HTTP,
# default 18080).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
BUILD=${SQLGUARD_BUILD_DIR:-build}
ORDERS=400
KEYS=100
while (( $# )); do
  case $1 in
    --orders) ORDERS=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    *) sed -n '2,11p' "$0" >&2; exit 2 ;;
  esac
done
HTTP_PORT=${SQLGUARD_EXAMPLE_PORT:-18080}
WORK=$(mktemp -d /tmp/sqlguard-example.XXXXXX)
export SQLGUARD_SERVERS_DIR=$WORK
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  "$ROOT/tools/natsserver.sh" stop --purge || true
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

if [[ ! -x $BUILD/examples/order-service ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target order-service order-load shipping-consumer
fi
"$ROOT/tools/natsserver.sh" start
eval "$("$ROOT/tools/natsserver.sh" env)"
DB="sqlite://$WORK/orders.db"
SEED=100
"$BUILD/examples/order-service" --db "$DB" --listen "127.0.0.1:$HTTP_PORT" --nats "$SQLGUARD_NATS_URL" \
  --seed-stock "$SEED" --instance example >"$WORK/service.log" 2>&1 &
pids+=($!)
"$BUILD/examples/shipping-consumer" --db "$DB" --nats "$SQLGUARD_NATS_URL" --name ship-1 >"$WORK/consumer.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$HTTP_PORT/healthz" >/dev/null && break
  sleep 0.1
done

echo "== order-service on $DB, NATS $SQLGUARD_NATS_URL, http://127.0.0.1:$HTTP_PORT"
echo "-- one order, then the same request again (replayed), a different body (422), no key (400):"
h=(-H "Idempotency-Key: demo-1" -H "X-Client-Id: demo" -H "Content-Type: application/json")
curl -s -i "${h[@]}" -d '{"sku":"sku-1","qty":2}' "http://127.0.0.1:$HTTP_PORT/orders" | grep -E "^HTTP|^Idempotent|^\{" || true
curl -s -i "${h[@]}" -d '{"sku":"sku-1","qty":2}' "http://127.0.0.1:$HTTP_PORT/orders" | grep -E "^HTTP|^Idempotent|^\{" || true
curl -s -o /dev/null -w "different body: %{http_code}\n" "${h[@]}" -d '{"sku":"sku-1","qty":3}' "http://127.0.0.1:$HTTP_PORT/orders"
curl -s -o /dev/null -w "no key: %{http_code}\n" -d '{"sku":"sku-1","qty":3}' "http://127.0.0.1:$HTTP_PORT/orders"
id=$(curl -s "${h[@]}" -d '{"sku":"sku-1","qty":2}' "http://127.0.0.1:$HTTP_PORT/orders" | sed 's/.*"id":"\([^"]*\)".*/\1/')
echo "-- pay, ship, then cancel (409: shipped is terminal):"
for ev in pay ship cancel; do
  curl -s -o /dev/null -w "$ev: %{http_code}\n" -X POST -d '' "http://127.0.0.1:$HTTP_PORT/orders/$id/$ev"
done
echo "-- stock of sku-1: $(curl -s "http://127.0.0.1:$HTTP_PORT/stock/sku-1")"
echo "-- scripted client: $ORDERS orders over $KEYS keys, retries, duplicates, client time-outs:"
"$BUILD/examples/order-load" --target "127.0.0.1:$HTTP_PORT" --orders "$ORDERS" --keys "$KEYS" --concurrency 8 \
  --db "$DB" --seed-stock "$SEED" --expect-events 60 >"$WORK/report.json" || { cat "$WORK/report.json"; exit 1; }
python3 - "$WORK/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e = r.get("events", {})
print(f"   {r['http_requests']} HTTP requests in {r['seconds']:.1f} s: {r['keys_with_order']} orders, "
      f"{r['replayed_answers']} replays, {r['out_of_stock_answers']} out of stock, {r['retries']} retries "
      f"({r['client_timeouts']} client time-outs)")
print(f"   stock left {r.get('stock_left')}; events: {e.get('outbox')} in the outbox, {e.get('applied')} applied "
      f"(distinct {e.get('applied_distinct')}), relay terms {e.get('relay_terms')}")
print("   checks:", "all passed" if r["ok"] else "FAILED: " + "; ".join(r["errors"]))
PY
echo "-- a few metrics (GET /metrics):"
curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | grep -E "^sqlguard_(idempotency_(executions|replays|in_progress|mismatch)_total|inbox_(processed|duplicates)_total|election_elected_total|transition_applied_total) " || true
