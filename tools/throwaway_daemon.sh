# Shared by the throwaway one-process servers (tools/natsserver.sh,
# tools/etcdserver.sh): sourced, not run. The caller defines log() and sets
# PIDFILE and LOG.

# 0 when the process in $PIDFILE runs. A stopped daemon can linger as a
# zombie for a moment: that is not running.
daemon_running() {
  [[ -f $PIDFILE ]] || return 1
  local pid
  pid=$(cat "$PIDFILE")
  kill -0 "$pid" 2>/dev/null || return 1
  [[ $(ps -o stat= -p "$pid" 2>/dev/null) != Z* ]]
}

# Waits up to 10 s for `$1` (a command) to succeed while the daemon runs;
# logs "$2" then. Otherwise says so with the log's tail and exits 1.
daemon_wait_ready() { # ready-command ready-message
  for _ in $(seq 1 100); do
    if $1; then
      log "$2 (pid $(cat "$PIDFILE"))"
      return 0
    fi
    daemon_running || break
    sleep 0.1
  done
  log "not ready within 10 s; see $LOG"
  tail -n 20 "$LOG" >&2 || true
  exit 1
}

# SIGTERM, then SIGKILL after 5 s; forgets the pid file.
daemon_stop() {
  if daemon_running; then
    local pid
    pid=$(cat "$PIDFILE")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      daemon_running || break
      sleep 0.1
    done
    daemon_running && kill -KILL "$pid" 2>/dev/null || true
    log "stopped (pid $pid)"
  fi
  rm -f "$PIDFILE"
}
