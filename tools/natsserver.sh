#!/usr/bin/env bash
# A throwaway NATS server with JetStream for the reference service, on loopback only.
#
# Usage: tools/natsserver.sh start|stop|status|env [--purge]
#
#   start   start nats-server -js (no-op if already running); waits until it accepts
#   stop    SIGTERM, then SIGKILL after 5 s; --purge also deletes its JetStream store
#   status  exit 0 if running, 3 otherwise
#   env     print `export SQLGUARD_NATS_URL=...` for eval
#
# Environment:
#   SQLGUARD_NATS_PORT       client port (default 54222)
#   SQLGUARD_NATS_HTTP_PORT  monitoring port (default 58222; /jsz?streams=true)
#   SQLGUARD_SERVERS_DIR     base directory (default /tmp/sqlguard-servers); the
#                            server lives in $SQLGUARD_SERVERS_DIR/nats
# A missing nats-server binary is an error (exit 1): install it with tools/deps.sh.
set -euo pipefail

PORT=${SQLGUARD_NATS_PORT:-54222}
HTTP_PORT=${SQLGUARD_NATS_HTTP_PORT:-58222}
BASE=${SQLGUARD_SERVERS_DIR:-/tmp/sqlguard-servers}/nats
PIDFILE=$BASE/nats.pid
LOG=$BASE/nats.log

# shellcheck source=tools/throwaway_daemon.sh
. "$(dirname "${BASH_SOURCE[0]}")/throwaway_daemon.sh"
log() { printf 'natsserver: %s\n' "$*" >&2; }

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

start() {
  if daemon_running; then
    log "already running on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"
    return 0
  fi
  local bin
  bin=$(command -v nats-server || true)
  [[ -z $bin && -x /usr/sbin/nats-server ]] && bin=/usr/sbin/nats-server
  if [[ -z $bin ]]; then
    log "nats-server not found: install it (tools/deps.sh installs nats-server)"
    exit 1
  fi
  if accepts; then
    log "port $PORT is taken by another process; set SQLGUARD_NATS_PORT"
    exit 1
  fi
  mkdir -p "$BASE/js"
  "$bin" -js -a 127.0.0.1 -p "$PORT" -m "$HTTP_PORT" -sd "$BASE/js" >>"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  daemon_wait_ready accepts "ready on 127.0.0.1:$PORT (monitoring 127.0.0.1:$HTTP_PORT)"
}

stop() {
  daemon_stop
  if [[ ${1:-} == --purge ]]; then rm -rf "$BASE/js"; fi
}

case ${1:-} in
  start) start ;;
  stop) stop "${2:-}" ;;
  status) if daemon_running; then echo "nats: running on 127.0.0.1:$PORT"; else echo "nats: stopped"; exit 3; fi ;;
  env) echo "export SQLGUARD_NATS_URL=nats://127.0.0.1:$PORT" ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
