#!/usr/bin/env bash
# A throwaway one-node etcd 3.4 (Debian etcd-server) on loopback, with its
# default durability (the raft log fsynced per entry): the bench's etcd
# comparator and the etcd client's tests (ctest etcd) use it.
#
# Usage: tools/etcdserver.sh start|stop|status|env [--purge]
#
#   start   start etcd (no-op if already running); waits until /health is true
#   stop    SIGTERM, then SIGKILL after 5 s; --purge also deletes its data dir
#   status  exit 0 if running, 3 otherwise
#   env     print `export SQLGUARD_TEST_ETCD_ENDPOINT=127.0.0.1:PORT` for eval
#
# Environment:
#   SQLGUARD_ETCD_PORT       client port (default 52379); the peer port is PORT+1
#   SQLGUARD_SERVERS_DIR     base directory (default /tmp/sqlguard-servers); the
#                            server lives in $SQLGUARD_SERVERS_DIR/etcd
# A missing etcd binary is an error (exit 1): install it with tools/deps.sh.
set -euo pipefail

PORT=${SQLGUARD_ETCD_PORT:-52379}
PEER_PORT=$((PORT + 1))
BASE=${SQLGUARD_SERVERS_DIR:-/tmp/sqlguard-servers}/etcd
PIDFILE=$BASE/etcd.pid
LOG=$BASE/etcd.log

# shellcheck source=tools/throwaway_daemon.sh
. "$(dirname "${BASH_SOURCE[0]}")/throwaway_daemon.sh"
log() { printf 'etcdserver: %s\n' "$*" >&2; }

healthy() {
  local reply
  reply=$({ exec 3<>"/dev/tcp/127.0.0.1/$PORT" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && cat <&3; } 2>/dev/null) \
    || return 1
  [[ $reply == *'"health":"true"'* ]]
}

port_taken() { ss -ltnH "sport = :$1" 2>/dev/null | grep -q .; }

start() {
  if daemon_running; then
    log "already running on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"
    return 0
  fi
  if ! command -v etcd >/dev/null; then
    log "etcd not found: install it (tools/deps.sh installs etcd-server)"
    exit 1
  fi
  local p
  for p in "$PORT" "$PEER_PORT"; do
    if port_taken "$p"; then
      log "port $p is taken by another process; set SQLGUARD_ETCD_PORT"
      exit 1
    fi
  done
  mkdir -p "$BASE"
  etcd --name sqlguard --data-dir "$BASE/data" \
    --listen-client-urls "http://127.0.0.1:$PORT" --advertise-client-urls "http://127.0.0.1:$PORT" \
    --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
    --initial-cluster "sqlguard=http://127.0.0.1:$PEER_PORT" --initial-cluster-state new \
    --logger zap --log-level warn >>"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  daemon_wait_ready healthy "ready on 127.0.0.1:$PORT (data $BASE/data)"
}

stop() {
  daemon_stop
  if [[ ${1:-} == --purge ]]; then rm -rf "$BASE/data"; fi
}

case ${1:-} in
  start) start ;;
  stop) stop "${2:-}" ;;
  status) if daemon_running; then echo "etcd: running on 127.0.0.1:$PORT"; else echo "etcd: stopped"; exit 3; fi ;;
  env) echo "export SQLGUARD_TEST_ETCD_ENDPOINT=127.0.0.1:$PORT" ;;
  *) sed -n '2,17p' "$0" >&2; exit 2 ;;
esac
