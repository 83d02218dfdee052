#!/usr/bin/env bash
# Throwaway PostgreSQL and MariaDB servers for sqlguard's tests, on loopback only.
#
# Usage: tools/dbservers.sh start|stop|restart|crash|status|env [pg|mariadb|all] [--purge]
#        tools/dbservers.sh clock pg|mariadb OFFSET
#        tools/dbservers.sh ACTION pgbouncer|pg-ha|pg-async|galera [N] [--purge]
#
#   start    initialise (first time) and start; a no-op if already running
#   stop     graceful stop, escalating to SIGKILL after a timeout; no-op if stopped
#            --purge (stop only) also deletes the data directories
#   restart  stop + start, keeping the data (used by chaos tests)
#   crash    SIGKILL the server and all its processes at once (no shutdown,
#            no checkpoint, no flush), then start it again: the server runs
#            its crash recovery. What survives is what had reached the OS:
#            with the default fast settings PostgreSQL's synchronous_commit=off
#            loses the last commits (WAL still in shared memory); MariaDB's
#            flush_log_at_trx_commit=2 writes its log at every commit (kept:
#            only an OS crash loses it). SQLGUARD_DURABLE=1 loses nothing.
#   status   print running/stopped per server; exit 0 if all selected servers
#            run, 3 otherwise
#   env      print `export SQLGUARD_TEST_*_URI=...` lines for eval
#   clock    step the wall clock of a server started under libfaketime
#            (SQLGUARD_SERVER_CLOCK=faketime) to OFFSET from the real one:
#            +30s, -30s, +1h, -1h, 0 (libfaketime's relative form: a sign,
#            digits, s/m/h/d). Only the server's CLOCK_REALTIME moves (NOW(),
#            the database clock); its monotonic clock is left alone. Takes
#            effect at the server's next clock reading (FAKETIME_NO_CACHE).
#
# `all` (the default) means pg + mariadb only. Multi-server topologies are
# separate targets, handled by tools/topologies.sh (see its header, or
# `tools/topologies.sh --help`); they never collide with pg/mariadb ports:
#
#   tools/dbservers.sh start|stop|restart|status|env|check TOPOLOGY [--purge]
#   tools/dbservers.sh failover pg-ha|pg-async
#   tools/dbservers.sh node-kill|node-start galera N
#
#   pgbouncer  PgBouncer 1.18, pool_mode = transaction, in front of `pg`
#              (starts pg if needed), `*` wildcard database; port 56432
#              (SQLGUARD_PGBOUNCER_PORT). env: SQLGUARD_TEST_PGBOUNCER_URI
#   pg-ha      Patroni + etcd + 2 PostgreSQL nodes, synchronous_mode(_strict);
#              ports 55440.. (SQLGUARD_PG_HA_PORT). env: SQLGUARD_TEST_PG_HA_URI
#              = postgresql://U:P@127.0.0.1:P1,127.0.0.1:P2/DB?target_session_attrs=read-write
#   pg-async   the same with asynchronous replication; ports 55450..
#              (SQLGUARD_PG_ASYNC_PORT). env: SQLGUARD_TEST_PG_ASYNC_URI
#   galera     3-node MariaDB Galera cluster; ports 53310.. (SQLGUARD_GALERA_PORT).
#              env: SQLGUARD_TEST_GALERA_URIS = mysql://U:P@127.0.0.1:P1/DB,...,...P3/DB
#   check      smoke test with psql/mariadb (transaction pooling, replication)
#   failover   kill -9 the primary's Patroni+postgres, wait for the standby's
#              promotion (prints the new primary's port), rejoin the old one
#   node-kill / node-start   kill -9 / restart (IST/SST rejoin) Galera node N
# Their packages come from `tools/deps.sh --topologies` (run on demand).
#
# Environment:
#   SQLGUARD_SERVERS_DIR   base directory for data, sockets, logs
#                          (default /tmp/sqlguard-servers)
#   SQLGUARD_PG_PORT       PostgreSQL TCP port (default 55432)
#   SQLGUARD_MARIADB_PORT  MariaDB TCP port (default 53306)
#   SQLGUARD_DURABLE=1     durable settings (PG fsync/synchronous_commit/
#                          full_page_writes on, InnoDB flush_log_at_trx_commit=1);
#                          default is fast, non-durable test settings.
#                          Applied at every start; restart and crash keep the
#                          server's settings unless the variable is set.
#   SQLGUARD_SERVER_CLOCK=faketime  start (or restart) the server under
#                          libfaketime (Debian faketime, preloaded), its offset
#                          0 until `clock` steps it; =real starts it without.
#                          restart and crash keep the server's clock unless
#                          the variable is set; a plain start is real.
#                          PostgreSQL under it commits synchronously even
#                          with fast settings (see pg_write_conf).
#   SQLGUARD_FAKETIME_LIB  libfaketime to preload (default: Debian's
#                          libfaketimeMT.so.1)
#   SQLGUARD_PG_BIN        PostgreSQL bin dir (default /usr/lib/postgresql/15/bin)
#   SQLGUARD_START_TIMEOUT seconds to wait for readiness (default 30)
#   SQLGUARD_STOP_TIMEOUT  seconds before escalating to SIGKILL (default 15)
#
# Never touches a system-wide server: own data dirs, own sockets, own ports,
# no systemctl/service. As root, PostgreSQL runs as `postgres` and MariaDB as
# `mysql`; otherwise both run as the current user.
set -euo pipefail
# shellcheck source=tools/faketime_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/faketime_lib.sh"
# shellcheck source=tools/ports_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/ports_lib.sh"

log() { printf 'dbservers: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() { # the header comment above
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2
}

# Client environment that could redirect our admin connections elsewhere.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGPASSWORD PGPASSFILE PGOPTIONS \
  PGSERVICE PGSERVICEFILE PGSSLMODE PGDATA \
  MYSQL_HOST MYSQL_TCP_PORT MYSQL_UNIX_PORT MYSQL_PWD

# ---------------------------------------------------------------- settings ---

BASE=${SQLGUARD_SERVERS_DIR:-/tmp/sqlguard-servers}
[[ "$BASE" == /* ]] || BASE="$PWD/$BASE"
while [[ "$BASE" == */ && "$BASE" != / ]]; do BASE=${BASE%/}; done
[[ "$BASE" != / ]] || die "SQLGUARD_SERVERS_DIR must not be /"

PG_PORT=${SQLGUARD_PG_PORT:-55432}
MY_PORT=${SQLGUARD_MARIADB_PORT:-53306}
DURABLE=${SQLGUARD_DURABLE:-0}
DURABLE_GIVEN=${SQLGUARD_DURABLE:+1}
CLOCK=${SQLGUARD_SERVER_CLOCK:-real}
CLOCK_GIVEN=${SQLGUARD_SERVER_CLOCK:+1}
case "$CLOCK" in real|faketime) ;; *) printf 'dbservers: error: SQLGUARD_SERVER_CLOCK=%s: use faketime or real\n' "$CLOCK" >&2; exit 1 ;; esac
START_TIMEOUT=${SQLGUARD_START_TIMEOUT:-30}
STOP_TIMEOUT=${SQLGUARD_STOP_TIMEOUT:-15}

check_port_value() { # value varname
  if ! [[ "$1" =~ ^[0-9]+$ ]] || (( $1 < 1 || $1 > 65535 )); then
    die "$2='$1' is not a valid TCP port"
  fi
}
check_port_value "$PG_PORT" SQLGUARD_PG_PORT
check_port_value "$MY_PORT" SQLGUARD_MARIADB_PORT
[[ "$START_TIMEOUT" =~ ^[0-9]+$ ]] || die "SQLGUARD_START_TIMEOUT must be an integer"
[[ "$STOP_TIMEOUT" =~ ^[0-9]+$ ]] || die "SQLGUARD_STOP_TIMEOUT must be an integer"
case "$DURABLE" in
  1|true|yes|on) DURABLE=1 ;;
  0|false|no|off|'') DURABLE=0 ;;
  *) die "SQLGUARD_DURABLE must be 0 or 1 (got '$DURABLE')" ;;
esac

PG_DIR=$BASE/pg
PG_DATA=$PG_DIR/data
PG_SOCK_DIR=$PG_DIR/run
PG_LOG=$PG_DIR/postgres.log
PG_PIDFILE=$PG_DATA/postmaster.pid
PG_MARKER=$PG_DIR/.initialized

MY_DIR=$BASE/mariadb
MY_DATA=$MY_DIR/data
MY_SOCK=$MY_DIR/mariadb.sock
MY_PIDFILE=$MY_DIR/mariadb.pid
MY_LOG=$MY_DIR/mariadb.log
MY_MARKER=$MY_DIR/.initialized

TEST_USER=sqlguard
TEST_PASSWORD=sqlguard
TEST_DB=sqlguard_test

if (( EUID == 0 )); then
  IS_ROOT=1
  PG_OS_USER=postgres
  MY_OS_USER=mysql
  MY_ADMIN_USER=root   # root@localhost via unix_socket auth
else
  IS_ROOT=0
  PG_OS_USER=$(id -un)
  MY_OS_USER=$PG_OS_USER
  MY_ADMIN_USER=$PG_OS_USER  # created by mariadb-install-db --auth-root-socket-user
fi

# ----------------------------------------------------------------- helpers ---

now_us() { local t=${EPOCHREALTIME//[!0-9]/}; printf '%s' "$t"; }
elapsed() { # start_us -> "1.23s"
  local d=$(( $(now_us) - $1 ))
  printf '%d.%02ds' $(( d / 1000000 )) $(( (d % 1000000) / 10000 ))
}

# A PID is alive if ps knows it and it is not a zombie: the reaper here is lazy,
# so a dead daemon can linger as <defunct> and still pass `kill -0`.
proc_alive() {
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  st=${st//[[:space:]]/}
  [[ -n "$st" && "$st" != Z* ]]
}

proc_comm() { ps -o comm= -p "$1" 2>/dev/null | tr -d '[:space:]'; }

# First line of a pid file, if it is a number.
read_pidfile() {
  local pid
  [[ -r "$1" ]] || return 1
  pid=$(head -n 1 "$1" 2>/dev/null | tr -d '[:space:]') || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  printf '%s' "$pid"
}

# Wait until PID is gone (or a zombie); returns 1 on timeout.
wait_gone() { # pid timeout_seconds
  local pid=$1 deadline=$(( $(now_us) + $2 * 1000000 ))
  while proc_alive "$pid"; do
    (( $(now_us) < deadline )) || return 1
    sleep 0.1
  done
}

# SIGKILL a server process and its children in one call (a postmaster's
# backends die with it, as in a crash) and wait until all are gone.
kill9_tree() { # pid what
  local pid=$1 what=$2 kids k
  kids=$(ps -o pid= --ppid "$pid" 2>/dev/null | xargs || true)
  log "$what: SIGKILL to $pid${kids:+ and its children $kids}"
  # shellcheck disable=SC2086 # kids is a list of pids
  kill -KILL "$pid" $kids 2>/dev/null || true
  for k in $pid $kids; do
    wait_gone "$k" 5 || die "$what: pid $k survived SIGKILL"
  done
}

port_listeners() { ss -ltnpH "sport = :$1" 2>/dev/null || true; }

# Fail clearly if someone else listens on the port we want. A server just
# SIGKILLed (crash) can still show its listening socket for a moment after
# its pid is gone (the kernel closes it as the exit completes): the port is
# looked at again for up to 3 s before it counts as someone else's.
require_free_port() { # port envvar what
  local port=$1 var=$2 what=$3 who deadline=$(( $(now_us) + 3000000 ))
  who=$(port_listeners "$port")
  while [[ -n "$who" ]] && (( $(now_us) < deadline )); do
    sleep 0.1
    who=$(port_listeners "$port")
  done
  if [[ -n "$who" ]]; then
    who=$(grep -o 'users:(.*)' <<<"$who" | head -n 1 || true)
    die "$what: TCP port $port is already in use by another process${who:+ ($who)}," \
        "not by our $what server. Set $var to a free port (e.g. $var=$(( port + 1 )))" \
        "or stop whatever is listening there."
  fi
  wait_port_unbound "$port" "$var" "$what"
}

show_log_tail() { # file what
  if [[ -s "$1" ]]; then
    log "$2: last 30 lines of $1:"
    tail -n 30 "$1" | sed 's/^/    /' >&2
  else
    log "$2: log $1 is empty or missing"
  fi
}

check_socket_path() { # path what
  (( ${#1} < 100 )) \
    || die "$2: unix socket path '$1' is ${#1} chars (must be < 100); use a shorter SQLGUARD_SERVERS_DIR"
}

# Make BASE exist and be traversable (o+x) along its whole path, so that
# postgres/mysql can reach their directories when we run as root.
prepare_base() {
  if [[ ! -d "$BASE" ]]; then
    mkdir -p "$BASE"
    chmod 0755 "$BASE"
  fi
  if (( IS_ROOT )); then
    local d=$BASE perms
    while :; do
      perms=$(stat -Lc '%A' "$d")
      case "${perms:9:1}" in
        x|t) ;;
        *) log "making $d traversable (chmod o+x) for $PG_OS_USER/$MY_OS_USER"
           chmod o+x "$d" ;;
      esac
      [[ "$d" == / ]] && break
      d=$(dirname "$d")
    done
  fi
}

# Serialise start/stop/restart across concurrent invocations (e.g. parallel
# tests restarting a server). fd 9 is closed for every daemon we spawn.
take_lock() {
  exec 9>"$BASE/.lock"
  flock -w 120 9 || die "timed out waiting for lock $BASE/.lock"
}

make_owned_dir() { # dir owner mode
  mkdir -p "$1"
  if (( IS_ROOT )); then chown "$2": "$1"; fi
  chmod "$3" "$1"
}

mode_name() { if (( DURABLE )); then echo durable; else echo fast; fi; }

# restart/crash without SQLGUARD_DURABLE: start again with the settings the
# server ran with (a chaos run must not turn a durable server into a fast one).
keep_mode() { # mode-file
  [[ -z "$DURABLE_GIVEN" ]] || return 0
  case "$(cat "$1" 2>/dev/null)" in
    durable) DURABLE=1 ;;
    fast) DURABLE=0 ;;
  esac
}

# ------------------------------------------------------------------ clock ---

# restart/crash without SQLGUARD_SERVER_CLOCK: the clock the server ran with.
keep_clock() { # clock-file
  [[ -z "$CLOCK_GIVEN" ]] || return 0
  [[ "$(cat "$1" 2>/dev/null)" == faketime ]] && CLOCK=faketime || CLOCK=real
}

# Sets CLOCK_ENV: the command prefix that starts a server process under
# libfaketime (CLOCK=faketime), reading its offset from DIR/faketime.rc at
# every clock reading; empty for the real clock. Records the choice.
clock_env() { # dir
  CLOCK_ENV=()
  echo "$CLOCK" >"$1/clock"
  [[ "$CLOCK" == faketime ]] || return 0
  # A start asked for with SQLGUARD_SERVER_CLOCK begins at the real time; a
  # restart or crash that kept the clock keeps its offset too.
  faketime_env "$1/faketime.rc" "$([[ -n "$CLOCK_GIVEN" ]] && echo 1 || echo 0)"
  CLOCK_ENV=("${FAKETIME_ENV[@]}")
}

clock_status() { # dir -> "real" or "faketime +30s"
  if [[ "$(cat "$1/clock" 2>/dev/null)" == faketime ]]; then
    printf 'faketime %s' "$(cat "$1/faketime.rc" 2>/dev/null || echo '?')"
  else
    printf real
  fi
}

# clock pg|mariadb OFFSET: rewrites the offset file (atomically: a reader
# never sees it half written).
server_clock() { # dir what running(0/1) offset
  local dir=$1 what=$2 running=$3 off=$4
  [[ "$off" =~ ^[+-]?[0-9]+[smhd]?$ ]] || die "clock: bad offset '$off' (use +30s, -30s, +1h, -1h, 0)"
  (( running )) || die "$what: not running; start it with SQLGUARD_SERVER_CLOCK=faketime tools/dbservers.sh start"
  [[ "$(cat "$dir/clock" 2>/dev/null)" == faketime ]] \
    || die "$what: not running under libfaketime; restart it with SQLGUARD_SERVER_CLOCK=faketime tools/dbservers.sh restart"
  faketime_step "$dir/faketime.rc" "$off"
  log "$what: wall clock now real $FAKETIME_OFFSET"
}

# -------------------------------------------------------------- PostgreSQL ---

pick_pg_bin() {
  local d
  if [[ -n "${SQLGUARD_PG_BIN:-}" ]]; then
    PG_BIN=$SQLGUARD_PG_BIN
  elif [[ -x /usr/lib/postgresql/15/bin/pg_ctl ]]; then
    PG_BIN=/usr/lib/postgresql/15/bin
  else
    PG_BIN=
    for d in /usr/lib/postgresql/*/bin; do
      [[ -x "$d/pg_ctl" ]] && PG_BIN=$d
    done
  fi
  [[ -n "$PG_BIN" && -x "$PG_BIN/pg_ctl" && -x "$PG_BIN/initdb" ]] \
    || die "postgresql: pg_ctl/initdb not found (looked in ${PG_BIN:-/usr/lib/postgresql/*/bin}); run tools/deps.sh or set SQLGUARD_PG_BIN"
}

# Run a PostgreSQL tool as the server's OS user, from a directory it can read.
pg_as() {
  if (( IS_ROOT )); then
    (cd "$PG_DIR" && runuser -u "$PG_OS_USER" -- "$@")
  else
    (cd "$PG_DIR" && "$@")
  fi
}

pg_pid() {
  local pid
  pid=$(read_pidfile "$PG_PIDFILE") || return 1
  proc_alive "$pid" || return 1
  [[ "$(proc_comm "$pid")" == postgres* ]] || return 1
  printf '%s' "$pid"
}

pg_running_port() { sed -n 4p "$PG_PIDFILE" 2>/dev/null | tr -d '[:space:]'; }

pg_write_conf() {
  local on=off sync=off
  (( DURABLE )) && on=on sync=on
  # Under libfaketime a backend can die of heap corruption: PostgreSQL reads
  # the clock inside its SIGALRM handler (timeout.c: deadlock_timeout, lock
  # and statement timeouts), and libfaketime re-reads its offset file there
  # (FAKETIME_NO_CACHE: fopen, malloc). Seen once in CI: "malloc():
  # mismatching next->prev_size", the postmaster's crash restart, and two
  # commits acknowledged unflushed lost (the chaos clock-step run's
  # lost_commits). So a faked-clock server commits synchronously (written to
  # the OS before the acknowledgement: a crash restart loses nothing; fsync
  # stays as the mode says), and a crash there costs a reconnect, not data.
  [[ "$CLOCK" == faketime ]] && sync=on
  cat >"$PG_DATA/sqlguard.conf" <<EOF
# Generated by tools/dbservers.sh at every start; edits are overwritten.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_SOCK_DIR'
max_connections = 200
fsync = $on
synchronous_commit = $sync
full_page_writes = $on
EOF
  if (( IS_ROOT )); then chown "$PG_OS_USER": "$PG_DATA/sqlguard.conf"; fi
  mode_name >"$PG_DIR/mode"
}

# A plain start (not restart or crash, which keep the server as it was)
# forgets what ALTER SYSTEM left in postgresql.auto.conf: a test killed
# before its cleanup (e.g. one that sets synchronous_standby_names to a
# standby that never comes, after which every commit waits) must not outlive
# the run it was part of.
pg_reset_auto_conf() {
  local f=$PG_DATA/postgresql.auto.conf
  [[ -f "$f" ]] && grep -qv '^#' "$f" || return 0
  log "postgresql: forgetting ALTER SYSTEM settings left in $f: $(grep -v '^#' "$f" | xargs)"
  printf '# Do not edit this file manually!\n# It will be overwritten by the ALTER SYSTEM command.\n' >"$f"
}

pg_init() {
  if [[ -e "$PG_DATA" ]]; then
    log "postgresql: removing incomplete data dir $PG_DATA"
    rm -rf "$PG_DATA"
  fi
  log "postgresql: initdb in $PG_DATA"
  if ! pg_as "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --encoding=UTF8 --no-locale \
       --auth-local=trust --auth-host=scram-sha-256 --no-sync >>"$PG_LOG" 2>&1 9>&-; then
    show_log_tail "$PG_LOG" postgresql
    die "postgresql: initdb failed"
  fi
  printf "\ninclude_if_exists = 'sqlguard.conf'\n" >>"$PG_DATA/postgresql.conf"
  touch "$PG_MARKER"
}

pg_psql_admin() { # SQL on stdin
  local psql=$PG_BIN/psql
  [[ -x "$psql" ]] || psql=psql
  pg_as "$psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCK_DIR" -p "$PG_PORT" \
    -U postgres -d postgres
}

pg_bootstrap() {
  pg_psql_admin <<SQL
DO \$\$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '$TEST_USER') THEN
    CREATE ROLE $TEST_USER LOGIN CREATEDB SUPERUSER PASSWORD '$TEST_PASSWORD';
  ELSE
    ALTER ROLE $TEST_USER LOGIN CREATEDB SUPERUSER PASSWORD '$TEST_PASSWORD';
  END IF;
END
\$\$;
SELECT 'CREATE DATABASE $TEST_DB OWNER $TEST_USER ENCODING ''UTF8'''
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_database WHERE datname = '$TEST_DB')\gexec
SQL
}

pg_start() {
  local pid t0 isready rport
  pick_pg_bin
  if pid=$(pg_pid); then
    rport=$(pg_running_port)
    log "postgresql: already running (pid $pid, port ${rport:-?})"
    if [[ -n "$rport" && "$rport" != "$PG_PORT" ]]; then
      log "postgresql: warning: it listens on $rport but SQLGUARD_PG_PORT=$PG_PORT; use restart to apply"
    fi
    return 0
  fi
  t0=$(now_us)
  require_free_port "$PG_PORT" SQLGUARD_PG_PORT postgresql
  check_socket_path "$PG_SOCK_DIR/.s.PGSQL.$PG_PORT" postgresql
  prepare_base
  make_owned_dir "$PG_DIR" "$PG_OS_USER" 0755
  make_owned_dir "$PG_SOCK_DIR" "$PG_OS_USER" 0755
  touch "$PG_LOG"
  if (( IS_ROOT )); then chown "$PG_OS_USER": "$PG_LOG"; fi
  [[ -f "$PG_MARKER" && -f "$PG_DATA/PG_VERSION" ]] || pg_init
  pg_write_conf
  # Leftovers of a killed server. postgres itself would refuse to start while
  # the old PID still "exists" -- and a zombie does, until the lazy reaper
  # collects it. pg_pid already said no live postmaster owns them.
  if [[ -e "$PG_PIDFILE" ]]; then
    log "postgresql: removing stale postmaster.pid (pid $(read_pidfile "$PG_PIDFILE" || echo '?') is gone)"
    rm -f "$PG_PIDFILE"
  fi
  rm -f "$PG_SOCK_DIR/.s.PGSQL.$PG_PORT" "$PG_SOCK_DIR/.s.PGSQL.$PG_PORT.lock"

  clock_env "$PG_DIR"
  log "postgresql: starting on 127.0.0.1:$PG_PORT ($(mode_name) settings, $CLOCK clock, data $PG_DATA)"
  # pg_ctl -w notices a postmaster that dies during startup; fd 9 (our lock)
  # must not leak into the daemon.
  if ! pg_as "${CLOCK_ENV[@]}" "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t "$START_TIMEOUT" -s \
       </dev/null >/dev/null 9>&-; then
    show_log_tail "$PG_LOG" postgresql
    die "postgresql: server failed to start (pg_ctl start -w, timeout ${START_TIMEOUT}s)"
  fi
  isready=$PG_BIN/pg_isready
  [[ -x "$isready" ]] || isready=pg_isready
  local deadline=$(( $(now_us) + START_TIMEOUT * 1000000 ))
  until "$isready" -h 127.0.0.1 -p "$PG_PORT" -t 1 -q; do
    if (( $(now_us) >= deadline )); then
      show_log_tail "$PG_LOG" postgresql
      die "postgresql: not accepting TCP connections on 127.0.0.1:$PG_PORT after ${START_TIMEOUT}s"
    fi
    sleep 0.1
  done
  if ! pg_bootstrap; then
    show_log_tail "$PG_LOG" postgresql
    die "postgresql: could not create role/database $TEST_USER/$TEST_DB"
  fi
  log "postgresql: ready on 127.0.0.1:$PG_PORT (pid $(pg_pid || echo '?')) in $(elapsed "$t0")"
}

pg_stop() {
  local pid t0
  if ! pid=$(pg_pid); then
    log "postgresql: not running"
    return 0
  fi
  pick_pg_bin
  t0=$(now_us)
  log "postgresql: stopping (pid $pid)"
  pg_as "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m fast -W -s </dev/null 9>&- \
    || log "postgresql: pg_ctl stop reported an error; waiting for pid $pid anyway"
  if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
    log "postgresql: still running after ${STOP_TIMEOUT}s"
    kill9_tree "$pid" postgresql
  fi
  log "postgresql: stopped in $(elapsed "$t0")"
}

# A server crash: every postgres process SIGKILLed at once; the next start
# replays the WAL from the last checkpoint (crash recovery).
pg_crash() {
  local pid
  pid=$(pg_pid) || die "postgresql: not running; nothing to crash"
  kill9_tree "$pid" "postgresql: crash"
}

pg_status() {
  local pid
  if pid=$(pg_pid); then
    echo "postgresql: running  port $(pg_running_port)  pid $pid  mode $(cat "$PG_DIR/mode" 2>/dev/null || echo '?')  clock $(clock_status "$PG_DIR")  data $PG_DATA"
    return 0
  fi
  echo "postgresql: stopped  port $PG_PORT"
  return 1
}

# ----------------------------------------------------------------- MariaDB ---

find_mariadb_tools() {
  MARIADBD=$(command -v mariadbd || true)
  [[ -n "$MARIADBD" ]] || { [[ -x /usr/sbin/mariadbd ]] && MARIADBD=/usr/sbin/mariadbd; }
  [[ -n "$MARIADBD" ]] || die "mariadb: mariadbd not found; run tools/deps.sh"
  command -v mariadb-install-db >/dev/null || die "mariadb: mariadb-install-db not found; run tools/deps.sh"
  command -v mariadb-admin >/dev/null || die "mariadb: mariadb-admin not found; run tools/deps.sh"
  command -v mariadb >/dev/null || die "mariadb: mariadb client not found; run tools/deps.sh"
}

my_pid() {
  local pid
  pid=$(read_pidfile "$MY_PIDFILE") || return 1
  proc_alive "$pid" || return 1
  [[ "$(proc_comm "$pid")" == mariadbd* || "$(proc_comm "$pid")" == mysqld* ]] || return 1
  printf '%s' "$pid"
}

my_init() {
  local args
  if [[ -e "$MY_DATA" ]]; then
    log "mariadb: removing incomplete data dir $MY_DATA"
    rm -rf "$MY_DATA"
  fi
  log "mariadb: mariadb-install-db in $MY_DATA"
  # --no-defaults must come first: the system my.cnf points at /run/mysqld.
  args=(--no-defaults --datadir="$MY_DATA" --skip-test-db --skip-name-resolve
        --auth-root-authentication-method=socket)
  if (( IS_ROOT )); then
    args+=(--user="$MY_OS_USER")
  else
    args+=(--auth-root-socket-user="$MY_ADMIN_USER")
  fi
  if ! (cd "$MY_DIR" && mariadb-install-db "${args[@]}") </dev/null >>"$MY_LOG" 2>&1 9>&-; then
    show_log_tail "$MY_LOG" mariadb
    die "mariadb: mariadb-install-db failed"
  fi
  touch "$MY_MARKER"
}

my_admin_sql() { # SQL on stdin, via the unix socket as the socket-auth admin
  mariadb --no-defaults --socket="$MY_SOCK" -u"$MY_ADMIN_USER" --batch --skip-column-names
}

my_bootstrap() {
  local host
  {
    for host in 127.0.0.1 localhost; do
      echo "CREATE USER IF NOT EXISTS '$TEST_USER'@'$host' IDENTIFIED BY '$TEST_PASSWORD';"
      echo "ALTER USER '$TEST_USER'@'$host' IDENTIFIED BY '$TEST_PASSWORD';"
      echo "GRANT ALL PRIVILEGES ON *.* TO '$TEST_USER'@'$host';"
    done
    echo "CREATE DATABASE IF NOT EXISTS \`$TEST_DB\` CHARACTER SET utf8mb4;"
  } | my_admin_sql
}

my_start() {
  local pid t0 flush=2 args spawned deadline
  find_mariadb_tools
  if pid=$(my_pid); then
    log "mariadb: already running (pid $pid, port $(cat "$MY_DIR/port" 2>/dev/null || echo '?'))"
    if [[ "$(cat "$MY_DIR/port" 2>/dev/null)" != "$MY_PORT" ]]; then
      log "mariadb: warning: SQLGUARD_MARIADB_PORT=$MY_PORT differs from the running port; use restart to apply"
    fi
    return 0
  fi
  t0=$(now_us)
  require_free_port "$MY_PORT" SQLGUARD_MARIADB_PORT mariadb
  check_socket_path "$MY_SOCK" mariadb
  prepare_base
  make_owned_dir "$MY_DIR" "$MY_OS_USER" 0755
  touch "$MY_LOG"
  if (( IS_ROOT )); then chown "$MY_OS_USER": "$MY_LOG"; fi
  [[ -f "$MY_MARKER" && -d "$MY_DATA/mysql" ]] || my_init
  # Leftovers of a crashed/killed server (nothing of ours runs, port is free).
  rm -f "$MY_PIDFILE" "$MY_SOCK" "$MY_SOCK.lock"

  (( DURABLE )) && flush=1
  # --no-defaults must be the FIRST option.
  args=(--no-defaults --datadir="$MY_DATA" --socket="$MY_SOCK" --port="$MY_PORT"
        --bind-address=127.0.0.1 --skip-name-resolve --skip-log-bin
        --pid-file="$MY_PIDFILE"
        --innodb-flush-log-at-trx-commit="$flush"
        --max-connections=300 --character-set-server=utf8mb4)
  if (( IS_ROOT )); then args+=(--user="$MY_OS_USER"); fi
  mode_name >"$MY_DIR/mode"
  echo "$MY_PORT" >"$MY_DIR/port"

  clock_env "$MY_DIR"
  log "mariadb: starting on 127.0.0.1:$MY_PORT ($(mode_name) settings, $CLOCK clock, data $MY_DATA)"
  # setsid: own session, so a signal to our process group (e.g. a killed test
  # job) does not take the server down. fd 9 (our lock) must not leak.
  (cd "$MY_DIR" && exec setsid "${CLOCK_ENV[@]}" "$MARIADBD" "${args[@]}") </dev/null >>"$MY_LOG" 2>&1 9>&- &
  spawned=$!

  deadline=$(( $(now_us) + START_TIMEOUT * 1000000 ))
  # Ready = answers on its unix socket (as the socket-auth admin). A TCP ping
  # as root is useless here: root@127.0.0.1 does not exist and this client
  # then fails with 1130 instead of reporting "alive". TCP is checked below
  # with the test user once it exists.
  until mariadb-admin --no-defaults --socket="$MY_SOCK" -u"$MY_ADMIN_USER" \
          --connect-timeout=1 ping >/dev/null 2>&1; do
    if ! proc_alive "$spawned"; then
      show_log_tail "$MY_LOG" mariadb
      die "mariadb: server exited during startup"
    fi
    if (( $(now_us) >= deadline )); then
      show_log_tail "$MY_LOG" mariadb
      kill -TERM "$spawned" 2>/dev/null || true
      die "mariadb: not ready on 127.0.0.1:$MY_PORT after ${START_TIMEOUT}s"
    fi
    sleep 0.1
  done
  if ! my_bootstrap; then
    show_log_tail "$MY_LOG" mariadb
    die "mariadb: could not create user/database $TEST_USER/$TEST_DB"
  fi
  local tcp_err
  if ! tcp_err=$(mariadb-admin --no-defaults -h127.0.0.1 -P"$MY_PORT" -u"$TEST_USER" \
                   -p"$TEST_PASSWORD" --connect-timeout=5 ping 2>&1 >/dev/null); then
    show_log_tail "$MY_LOG" mariadb
    die "mariadb: answers on its socket but not on 127.0.0.1:$MY_PORT as $TEST_USER: $tcp_err"
  fi
  # The pid file is written before the server accepts connections.
  pid=$(my_pid) || die "mariadb: server answers but pid file $MY_PIDFILE is missing"
  log "mariadb: ready on 127.0.0.1:$MY_PORT (pid $pid) in $(elapsed "$t0")"
}

my_stop() {
  local pid t0
  if ! pid=$(my_pid); then
    log "mariadb: not running"
    return 0
  fi
  t0=$(now_us)
  log "mariadb: stopping (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
    log "mariadb: still running after ${STOP_TIMEOUT}s"
    kill9_tree "$pid" mariadb
  fi
  rm -f "$MY_PIDFILE"
  log "mariadb: stopped in $(elapsed "$t0")"
}

# A server crash: SIGKILL, no shutdown; the next start runs InnoDB's crash
# recovery (redo log).
my_crash() {
  local pid
  pid=$(my_pid) || die "mariadb: not running; nothing to crash"
  kill9_tree "$pid" "mariadb: crash"
}

my_status() {
  local pid
  if pid=$(my_pid); then
    echo "mariadb: running  port $(cat "$MY_DIR/port" 2>/dev/null || echo '?')  pid $pid  mode $(cat "$MY_DIR/mode" 2>/dev/null || echo '?')  clock $(clock_status "$MY_DIR")  data $MY_DATA"
    return 0
  fi
  echo "mariadb: stopped  port $MY_PORT"
  return 1
}

# -------------------------------------------------------------------- main ---

# Topology targets and actions belong to tools/topologies.sh.
for arg in "$@"; do
  case "$arg" in
    pgbouncer|pg-ha|pg-async|galera|check|failover|node-kill|node-start)
      exec "$(dirname "${BASH_SOURCE[0]}")/topologies.sh" "$@" ;;
  esac
done

action=
target=
purge=0
offset=
for arg in "$@"; do
  if [[ "$action" == clock && -n "$target" && -z "$offset" ]]; then offset=$arg; continue; fi
  case "$arg" in
    -h|--help|help) usage; exit 0 ;;
    --purge) purge=1 ;;
    start|stop|restart|crash|status|env|clock)
      [[ -z "$action" ]] || { usage; die "more than one action given"; }
      action=$arg ;;
    pg|postgres|postgresql) [[ -z "$target" ]] || die "more than one target given"; target=pg ;;
    mariadb|mysql) [[ -z "$target" ]] || die "more than one target given"; target=mariadb ;;
    all) [[ -z "$target" ]] || die "more than one target given"; target=all ;;
    *) usage; die "unknown argument: $arg" ;;
  esac
done
[[ -n "$action" ]] || { usage; die "no action given"; }
target=${target:-all}
(( purge == 0 )) || [[ "$action" == stop ]] || die "--purge is only valid with stop"
if [[ "$action" == clock ]]; then
  [[ "$target" == pg || "$target" == mariadb ]] || die "clock: name one server (pg or mariadb)"
  [[ -n "$offset" ]] || die "clock: no offset given (e.g. +30s, -1h, 0)"
fi

want_pg=0 want_my=0
[[ "$target" == pg || "$target" == all ]] && want_pg=1
[[ "$target" == mariadb || "$target" == all ]] && want_my=1

for tool in ss ps flock setsid; do
  command -v "$tool" >/dev/null || die "'$tool' not found; run tools/deps.sh (iproute2/procps/util-linux)"
done
if (( IS_ROOT )); then
  command -v runuser >/dev/null || die "'runuser' not found (util-linux)"
  id "$PG_OS_USER" >/dev/null 2>&1 || die "OS user '$PG_OS_USER' missing; install postgresql (tools/deps.sh)"
  id "$MY_OS_USER" >/dev/null 2>&1 || die "OS user '$MY_OS_USER' missing; install mariadb-server (tools/deps.sh)"
fi

if [[ "$action" == start || "$action" == restart || "$action" == crash ]]; then
  (( want_pg )) && check_socket_path "$PG_SOCK_DIR/.s.PGSQL.$PG_PORT" postgresql
  (( want_my )) && check_socket_path "$MY_SOCK" mariadb
fi

case "$action" in
  env)
    (( want_pg )) && printf 'export SQLGUARD_TEST_PG_URI=%q\n' \
      "postgresql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$PG_PORT/$TEST_DB"
    (( want_my )) && printf 'export SQLGUARD_TEST_MYSQL_URI=%q\n' \
      "mysql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$MY_PORT/$TEST_DB"
    exit 0 ;;
  status)
    rc=0
    if (( want_pg )); then pg_status || rc=3; fi
    if (( want_my )); then my_status || rc=3; fi
    exit "$rc" ;;
  start)
    prepare_base
    take_lock
    if (( want_pg )); then pg_pid >/dev/null || pg_reset_auto_conf; pg_start; fi
    (( want_my )) && my_start
    ;;
  stop)
    if [[ -d "$BASE" ]]; then
      take_lock
      (( want_pg )) && pg_stop
      (( want_my )) && my_stop
    else
      log "nothing to stop ($BASE does not exist)"
    fi
    if (( purge )); then
      if (( want_pg )) && [[ -e "$PG_DIR" ]]; then log "postgresql: purging $PG_DIR"; rm -rf "$PG_DIR"; fi
      if (( want_my )) && [[ -e "$MY_DIR" ]]; then log "mariadb: purging $MY_DIR"; rm -rf "$MY_DIR"; fi
      if [[ "$target" == all && -d "$BASE" ]]; then
        rm -f "$BASE/.lock"
        rmdir "$BASE" 2>/dev/null || log "kept $BASE (not empty)"
      fi
    fi
    ;;
  restart)
    prepare_base
    take_lock
    if (( want_pg )); then keep_mode "$PG_DIR/mode"; keep_clock "$PG_DIR/clock"; pg_stop; pg_start; fi
    if (( want_my )); then keep_mode "$MY_DIR/mode"; keep_clock "$MY_DIR/clock"; my_stop; my_start; fi
    ;;
  clock)
    prepare_base
    if (( want_pg )); then running=0; pg_pid >/dev/null && running=1; server_clock "$PG_DIR" postgresql "$running" "$offset"; fi
    if (( want_my )); then running=0; my_pid >/dev/null && running=1; server_clock "$MY_DIR" mariadb "$running" "$offset"; fi
    ;;
  crash)
    prepare_base
    take_lock
    if (( want_pg )); then t0=$(now_us); keep_mode "$PG_DIR/mode"; keep_clock "$PG_DIR/clock"; pg_crash; pg_start; log "postgresql: crash + recovery took $(elapsed "$t0")"; fi
    if (( want_my )); then t0=$(now_us); keep_mode "$MY_DIR/mode"; keep_clock "$MY_DIR/clock"; my_crash; my_start; log "mariadb: crash + recovery took $(elapsed "$t0")"; fi
    ;;
esac
exit 0
