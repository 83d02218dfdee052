#!/usr/bin/env bash
# Throwaway multi-server topologies for sqlguard's tests, on loopback only.
# Usually reached through tools/dbservers.sh, which hands these targets over.
#
# Usage: tools/topologies.sh ACTION TARGET [N] [--purge]
#
# Targets:
#   pgbouncer  PgBouncer (pool_mode = transaction) in front of dbservers.sh's
#              `pg` server (started first if it is not running). A `*`
#              wildcard database: any database created on the pg server is
#              reachable through the bouncer under the same name.
#   pg-ha      Patroni + one etcd + two PostgreSQL nodes, synchronous_mode
#              and synchronous_mode_strict (commits wait for the standby;
#              only a synchronous standby is promoted).
#   pg-async   the same with asynchronous streaming replication.
#   galera     three MariaDB Galera nodes (rsync SST).
#
# Actions:
#   start TARGET        start (initialise the first time); starts only what is
#                       missing, a no-op if everything runs; waits for readiness
#   stop TARGET         graceful stop, SIGKILL after a timeout; --purge also
#                       deletes the topology's directory. `stop pgbouncer`
#                       also stops the pg server if `start pgbouncer` started it
#                       (pg's data stays; `stop pg --purge` removes it).
#   restart TARGET      stop + start, keeping the data
#   status TARGET       one line per process/node (which node is primary);
#                       exit 0 if everything runs, 3 otherwise
#   env TARGET          print `export SQLGUARD_TEST_*=...` lines for eval:
#                         pgbouncer SQLGUARD_TEST_PGBOUNCER_URI=postgresql://U:P@127.0.0.1:PORT/DB
#                                   SQLGUARD_TEST_PGBOUNCER_LOCKS_URI=(same)/sqlguard_locks: the
#                                   same database on a pool of its own (pool_size 2)
#                         pg-ha     SQLGUARD_TEST_PG_HA_URI=postgresql://U:P@127.0.0.1:P1,127.0.0.1:P2/DB?target_session_attrs=read-write
#                         pg-async  SQLGUARD_TEST_PG_ASYNC_URI=(same form)
#                         galera    SQLGUARD_TEST_GALERA_URIS=mysql://U:P@127.0.0.1:P1/DB,...P2/DB,...P3/DB
#   check TARGET        smoke test with the real clients (psql / mariadb)
#   failover pg-ha|pg-async
#                       kill -9 the primary's Patroni and postgres, wait until
#                       the other node is read-write, print its port on stdout,
#                       restart the killed node so it rejoins as a standby
#                       (pg-ha: waits until it is the synchronous standby again,
#                       since strict mode blocks commits without one).
#                       pg-async, the negative control, first makes its standby
#                       lag: its walreceiver is stopped (SIGSTOP) for
#                       SQLGUARD_ASYNC_FAILOVER_LAG seconds while the primary
#                       commits on, and SIGKILLed right after the primary's
#                       kill, so what queued up is never read: the promoted
#                       standby lacks those seconds of acknowledged commits.
#                       (On loopback it otherwise replays within milliseconds
#                       and a failover loses next to nothing.)
#                       Step timings go to stderr. Promotion takes ~20-25 s
#                       (Patroni's minimum ttl is 20 s); on pg-ha the new
#                       primary's commits wait until the old node is back.
#   node-kill galera N  kill -9 Galera node N (1-3); survivors notice in ~5 s.
#                       Killing two of three leaves the last one without
#                       quorum (non-primary): `restart galera` then.
#   clock galera N OFFSET
#                       step node N's wall clock (NOW()) to OFFSET from the real
#                       time (+30s, -1h, 0), when the cluster was started under
#                       libfaketime: SQLGUARD_SERVER_CLOCK=faketime start|restart
#                       galera (node-start, and start/restart without the
#                       variable, keep the cluster's clock; a new cluster is real)
#   node-start galera N restart node N (recovers its wsrep position first, so
#                       it rejoins by IST, not a full SST); waits until it is
#                       synced and the cluster has all running nodes again
#
# Environment (besides dbservers.sh's SQLGUARD_SERVERS_DIR, SQLGUARD_PG_PORT,
# SQLGUARD_DURABLE, SQLGUARD_START_TIMEOUT, SQLGUARD_STOP_TIMEOUT):
#   SQLGUARD_PGBOUNCER_PORT   PgBouncer port (default 56432)
#   SQLGUARD_PG_HA_PORT       first port of pg-ha (default 55440): postgres
#                             +0/+1, Patroni REST +2/+3, etcd client +4, peer +5
#   SQLGUARD_PG_ASYNC_PORT    first port of pg-async (default 55450), same layout
#   SQLGUARD_GALERA_PORT      first port of galera (default 53310): node N uses
#                             BASE+10(N-1) for SQL, +1 gcomm, +2 IST, +3 SST
#   SQLGUARD_FAILOVER_TIMEOUT seconds to wait for promotion/rejoin (default 90)
#   SQLGUARD_ASYNC_FAILOVER_LAG seconds the pg-async standby is held back
#                             before a failover (default 3; 0: no lag)
#   SQLGUARD_DURABLE=1        durable settings; default fast: PG fsync=off
#                             (synchronous_commit stays on for pg-ha, or
#                             strict synchronous replication would be moot;
#                             full_page_writes stays on for pg_rewind),
#                             InnoDB flush_log_at_trx_commit=2
#
# Packages (patroni etcd-server python3-etcd pgbouncer galera-4 rsync) come
# from `tools/deps.sh --topologies`, run automatically when one is missing.
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

unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGPASSWORD PGPASSFILE PGOPTIONS \
  PGSERVICE PGSERVICEFILE PGSSLMODE PGDATA PGTARGETSESSIONATTRS \
  MYSQL_HOST MYSQL_TCP_PORT MYSQL_UNIX_PORT MYSQL_PWD

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DBSERVERS=$SCRIPT_DIR/dbservers.sh
DEPS=$SCRIPT_DIR/deps.sh

# ---------------------------------------------------------------- settings ---

BASE=${SQLGUARD_SERVERS_DIR:-/tmp/sqlguard-servers}
[[ "$BASE" == /* ]] || BASE="$PWD/$BASE"
while [[ "$BASE" == */ && "$BASE" != / ]]; do BASE=${BASE%/}; done
[[ "$BASE" != / ]] || die "SQLGUARD_SERVERS_DIR must not be /"

PG_PORT=${SQLGUARD_PG_PORT:-55432}
BOUNCER_PORT=${SQLGUARD_PGBOUNCER_PORT:-56432}
PG_HA_PORT=${SQLGUARD_PG_HA_PORT:-55440}
PG_ASYNC_PORT=${SQLGUARD_PG_ASYNC_PORT:-55450}
GALERA_PORT=${SQLGUARD_GALERA_PORT:-53310}
DURABLE=${SQLGUARD_DURABLE:-0}
START_TIMEOUT=${SQLGUARD_START_TIMEOUT:-30}
STOP_TIMEOUT=${SQLGUARD_STOP_TIMEOUT:-15}
FAILOVER_TIMEOUT=${SQLGUARD_FAILOVER_TIMEOUT:-90}
ASYNC_FAILOVER_LAG=${SQLGUARD_ASYNC_FAILOVER_LAG:-3}

check_port_value() { # value varname [span]
  if ! [[ "$1" =~ ^[0-9]+$ ]] || (( $1 < 1 || $1 + ${3:-0} > 65535 )); then
    die "$2='$1' is not a valid TCP port (or the ports after it run past 65535)"
  fi
}
check_port_value "$PG_PORT" SQLGUARD_PG_PORT
check_port_value "$BOUNCER_PORT" SQLGUARD_PGBOUNCER_PORT
check_port_value "$PG_HA_PORT" SQLGUARD_PG_HA_PORT 5
check_port_value "$PG_ASYNC_PORT" SQLGUARD_PG_ASYNC_PORT 5
check_port_value "$GALERA_PORT" SQLGUARD_GALERA_PORT 23
for v in START_TIMEOUT STOP_TIMEOUT FAILOVER_TIMEOUT ASYNC_FAILOVER_LAG; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "SQLGUARD_$v must be an integer"
done
case "$DURABLE" in
  1|true|yes|on) DURABLE=1 ;;
  0|false|no|off|'') DURABLE=0 ;;
  *) die "SQLGUARD_DURABLE must be 0 or 1 (got '$DURABLE')" ;;
esac

TEST_USER=sqlguard
TEST_PASSWORD=sqlguard
TEST_DB=sqlguard_test
# Patroni's own roles; loopback-only throwaway clusters.
PATRONI_SU_PASSWORD=sqlguard-su
PATRONI_REPL_USER=replicator
PATRONI_REPL_PASSWORD=sqlguard-repl

if (( EUID == 0 )); then
  IS_ROOT=1
  PG_OS_USER=postgres
  MY_OS_USER=mysql
  MY_ADMIN_USER=root
else
  IS_ROOT=0
  PG_OS_USER=$(id -un)
  MY_OS_USER=$PG_OS_USER
  MY_ADMIN_USER=$PG_OS_USER
fi

pick_pg_bin() {
  local d
  if [[ -n "${SQLGUARD_PG_BIN:-}" ]]; then
    PG_BIN=$SQLGUARD_PG_BIN
  elif [[ -x /usr/lib/postgresql/15/bin/pg_ctl ]]; then
    PG_BIN=/usr/lib/postgresql/15/bin
  else
    PG_BIN=
    for d in /usr/lib/postgresql/*/bin; do [[ -x "$d/pg_ctl" ]] && PG_BIN=$d; done
  fi
  [[ -n "$PG_BIN" && -x "$PG_BIN/pg_ctl" ]] \
    || die "postgresql: pg_ctl not found; run tools/deps.sh or set SQLGUARD_PG_BIN"
  PSQL=$PG_BIN/psql
  [[ -x "$PSQL" ]] || PSQL=psql
}

# ----------------------------------------------------------------- helpers ---

now_us() { local t=${EPOCHREALTIME//[!0-9]/}; printf '%s' "$t"; }
elapsed() { # start_us -> "1.23s"
  local d=$(( $(now_us) - $1 ))
  printf '%d.%02ds' $(( d / 1000000 )) $(( (d % 1000000) / 10000 ))
}
deadline_in() { printf '%s' $(( $(now_us) + $1 * 1000000 )); }
past() { (( $(now_us) >= $1 )); }

# Alive = known to ps and not a zombie (the reaper here is lazy).
proc_alive() {
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  st=${st//[[:space:]]/}
  [[ -n "$st" && "$st" != Z* ]]
}
proc_comm() { ps -o comm= -p "$1" 2>/dev/null | tr -d '[:space:]'; }

read_pidfile() {
  local pid
  [[ -r "$1" ]] || return 1
  pid=$(head -n 1 "$1" 2>/dev/null | tr -d '[:space:]') || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  printf '%s' "$pid"
}

# pid from FILE if alive and its command name matches the glob.
pid_from() { # pidfile comm-glob
  local pid comm
  pid=$(read_pidfile "$1") || return 1
  proc_alive "$pid" || return 1
  comm=$(proc_comm "$pid")
  # shellcheck disable=SC2053 # glob match intended
  [[ "$comm" == $2 ]] || return 1
  printf '%s' "$pid"
}

wait_gone() { # pid timeout_seconds
  local pid=$1 dl
  dl=$(deadline_in "$2")
  while proc_alive "$pid"; do
    past "$dl" && return 1
    sleep 0.1
  done
}

# All descendants of PID (children first level, then theirs), by id.
descendants() {
  local p kids
  kids=$(ps -o pid= --ppid "$1" 2>/dev/null | tr -s '[:space:]' ' ' || true)
  for p in $kids; do printf '%s ' "$p"; descendants "$p"; done
}

# SIGTERM, wait, then SIGKILL PID and whatever it left behind.
terminate() { # pid what [signal]
  local pid=$1 what=$2 sig=${3:-TERM} kids
  proc_alive "$pid" || return 0
  kids=$(descendants "$pid")
  kill -"$sig" "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
    kids="$kids $(descendants "$pid")"
    log "$what: still running after ${STOP_TIMEOUT}s; SIGKILL to $pid${kids:+ and$kids}"
    # shellcheck disable=SC2086
    kill -KILL "$pid" $kids 2>/dev/null || true
    wait_gone "$pid" 5 || die "$what: pid $pid survived SIGKILL"
  fi
  # shellcheck disable=SC2086 # a list of pids
  reap_leftovers "$what" $kids
}

# Children that outlived their parent (e.g. PostgreSQL backends of a killed
# postmaster, an rsync daemon of an interrupted SST).
reap_leftovers() { # what pid...
  local what=$1 p left=
  shift
  for p in "$@"; do proc_alive "$p" && left+=" $p"; done
  [[ -z "$left" ]] && return 0
  sleep 1
  local still=
  for p in $left; do proc_alive "$p" && still+=" $p"; done
  [[ -z "$still" ]] && return 0
  log "$what: SIGKILL to leftover processes$still"
  # shellcheck disable=SC2086
  kill -KILL $still 2>/dev/null || true
  for p in $still; do wait_gone "$p" 5 || log "$what: warning: pid $p survived SIGKILL"; done
}

port_listeners() { ss -ltnpH "sport = :$1" 2>/dev/null || true; }

require_free_port() { # port what var
  local who
  who=$(port_listeners "$1")
  if [[ -n "$who" ]]; then
    who=$(grep -o 'users:(.*)' <<<"$who" | head -n 1 || true)
    die "$2: TCP port $1 is already in use${who:+ by $who}; set $3 to another base port or stop whatever listens there"
  fi
  wait_port_unbound "$1" "$3" "$2"
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
        *) log "making $d traversable (chmod o+x) for $PG_OS_USER/$MY_OS_USER"; chmod o+x "$d" ;;
      esac
      [[ "$d" == / ]] && break
      d=$(dirname "$d")
    done
  fi
}

# One lock per topology (not dbservers.sh's $BASE/.lock: `start pgbouncer`
# runs `dbservers.sh start pg`, which takes that one). fd 9 is closed for
# every daemon and child script.
take_lock() { # name
  exec 9>"$BASE/.lock-$1"
  flock -w 300 9 || die "timed out waiting for lock $BASE/.lock-$1"
}

make_owned_dir() { # dir owner mode
  mkdir -p "$1"
  if (( IS_ROOT )); then chown "$2": "$1"; fi
  chmod "$3" "$1"
}
own() { # owner file...
  local o=$1; shift
  if (( IS_ROOT )); then chown "$o": "$@"; fi
}

mode_name() { if (( DURABLE )); then echo durable; else echo fast; fi; }

# Run a command as USER (from a directory it can read).
as_user() { # user dir cmd...
  local u=$1 d=$2; shift 2
  if (( IS_ROOT )); then
    (cd "$d" && runuser -u "$u" -- "$@")
  else
    (cd "$d" && "$@")
  fi
}

# Start a foreground daemon in its own session as USER, writing its own pid
# (the exec'd daemon's, not runuser's) to PIDFILE.
spawn_daemon() { # user dir pidfile logfile cmd...
  local u=$1 d=$2 pidfile=$3 logf=$4; shift 4
  rm -f "$pidfile"
  # shellcheck disable=SC2016 # expanded by the inner sh
  local inner='echo $$ >"$0"; exec "$@"'
  if (( IS_ROOT )); then
    (cd "$d" && exec setsid runuser -u "$u" -- sh -c "$inner" "$pidfile" "$@") \
      </dev/null >>"$logf" 2>&1 9>&- &
  else
    (cd "$d" && exec setsid sh -c "$inner" "$pidfile" "$@") </dev/null >>"$logf" 2>&1 9>&- &
  fi
  local spawner=$! dl
  dl=$(deadline_in 10)
  until read_pidfile "$pidfile" >/dev/null; do
    if past "$dl" || ! proc_alive "$spawner"; then
      read_pidfile "$pidfile" >/dev/null && break
      return 1
    fi
    sleep 0.05
  done
}

# GET http://127.0.0.1:PORT/PATH with bash's /dev/tcp; prints the response.
http_get() { # port path
  # shellcheck disable=SC2016 # expanded by the inner bash
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
    printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$1" >&3
    cat <&3' "$1" "$2" 2>/dev/null
}

# Single-quoted export line (our URIs contain no single quote).
print_export() { printf "export %s='%s'\n" "$1" "$2"; }

# Missing tools -> `tools/deps.sh --topologies` (idempotent; a no-op when
# everything is installed).
ensure_tools() { # command...
  local c missing=
  for c in "$@"; do
    case "$c" in
      /*) [[ -x "$c" || -e "$c" ]] || missing+=" $c" ;;
      *) command -v "$c" >/dev/null 2>&1 || missing+=" $c" ;;
    esac
  done
  [[ -z "$missing" ]] && return 0
  log "missing:$missing; running tools/deps.sh --topologies"
  "$DEPS" --topologies 9>&- || die "tools/deps.sh --topologies failed"
  for c in "$@"; do
    case "$c" in
      /*) [[ -e "$c" ]] || die "still missing after deps: $c" ;;
      *) command -v "$c" >/dev/null 2>&1 || die "still missing after deps: $c" ;;
    esac
  done
}

# --------------------------------------------------------------- PgBouncer ---

PGB_DIR=$BASE/pgbouncer
PGB_INI=$PGB_DIR/pgbouncer.ini
PGB_PIDFILE=$PGB_DIR/pgbouncer.pid
PGB_LOG=$PGB_DIR/pgbouncer.log
PGB_STARTED_PG=$PGB_DIR/started-pg

pgb_pid() { pid_from "$PGB_PIDFILE" 'pgbouncer*'; }
pgb_port() { sed -n 's/^listen_port = //p' "$PGB_INI" 2>/dev/null; }
pgb_backend_port() { sed -n 's/^\* = host=127.0.0.1 port=\([0-9]*\).*/\1/p' "$PGB_INI" 2>/dev/null; }
pg_direct_port() { sed -n 4p "$BASE/pg/data/postmaster.pid" 2>/dev/null | tr -d '[:space:]'; }

pgb_psql() { # dbname args... (through the bouncer as the test user)
  local db=$1; shift
  PGCONNECT_TIMEOUT=5 "$PSQL" -X -q -v ON_ERROR_STOP=1 \
    "postgresql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$(pgb_port)/$db" "$@"
}

pgb_start() {
  local pid t0 pgport dl err
  ensure_tools pgbouncer
  pick_pg_bin
  if pid=$(pgb_pid); then
    log "pgbouncer: already running (pid $pid, port $(pgb_port), backend port $(pgb_backend_port))"
    return 0
  fi
  t0=$(now_us)
  require_free_port "$BOUNCER_PORT" pgbouncer SQLGUARD_PGBOUNCER_PORT
  if ! "$DBSERVERS" status pg >/dev/null 2>&1; then
    log "pgbouncer: the pg server is not running; starting it (dbservers.sh start pg)"
    "$DBSERVERS" start pg 9>&- || die "pgbouncer: could not start the pg server"
    make_owned_dir "$PGB_DIR" "$PG_OS_USER" 0755
    touch "$PGB_STARTED_PG"
  fi
  pgport=$(pg_direct_port)
  [[ -n "$pgport" ]] || die "pgbouncer: cannot read the pg server's port from $BASE/pg/data/postmaster.pid"
  prepare_base
  make_owned_dir "$PGB_DIR" "$PG_OS_USER" 0755
  make_owned_dir "$PGB_DIR/run" "$PG_OS_USER" 0755
  # The test user's password in clear: PgBouncer checks the client's SCRAM
  # login against it and logs in to PostgreSQL with it (SCRAM as well).
  printf '"%s" "%s"\n' "$TEST_USER" "$TEST_PASSWORD" >"$PGB_DIR/userlist.txt"
  chmod 0600 "$PGB_DIR/userlist.txt"
  cat >"$PGB_INI" <<EOF
; Generated by tools/topologies.sh at every start; edits are overwritten.
[databases]
; Wildcard: any database name goes to the pg server under the same name, with
; the client's own user and password (e.g. databases that tests create).
* = host=127.0.0.1 port=$pgport
; The lock clients' own pool (docs/deploying-postgresql.md): the same database
; under another name, so that their renewals never queue behind the
; application's transactions in the shared pool.
sqlguard_locks = host=127.0.0.1 port=$pgport dbname=$TEST_DB pool_size=2

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOUNCER_PORT
unix_socket_dir = $PGB_DIR/run
auth_type = scram-sha-256
auth_file = $PGB_DIR/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
reserve_pool_size = 0
server_login_retry = 1
server_connect_timeout = 5
; Check a pooled server connection (empty query) before every reuse: after a
; server restart or failover, a dead one is dropped instead of handed to a
; client as "server conn crashed?".
server_check_delay = 0
ignore_startup_parameters = extra_float_digits
logfile = $PGB_LOG
pidfile = $PGB_PIDFILE
log_connections = 0
log_disconnections = 0
EOF
  touch "$PGB_LOG"
  own "$PG_OS_USER" "$PGB_INI" "$PGB_DIR/userlist.txt" "$PGB_LOG"
  rm -f "$PGB_PIDFILE" "$PGB_DIR/run/.s.PGSQL.$BOUNCER_PORT"
  log "pgbouncer: starting on 127.0.0.1:$BOUNCER_PORT (pool_mode transaction, backend 127.0.0.1:$pgport)"
  if ! as_user "$PG_OS_USER" "$PGB_DIR" pgbouncer -d -q "$PGB_INI" </dev/null >>"$PGB_LOG" 2>&1 9>&-; then
    show_log_tail "$PGB_LOG" pgbouncer
    die "pgbouncer: failed to start"
  fi
  dl=$(deadline_in "$START_TIMEOUT")
  until err=$(pgb_psql "$TEST_DB" -tAc 'SELECT 1' 2>&1); do
    if past "$dl"; then
      show_log_tail "$PGB_LOG" pgbouncer
      die "pgbouncer: no working connection through 127.0.0.1:$BOUNCER_PORT after ${START_TIMEOUT}s: $err"
    fi
    sleep 0.1
  done
  pid=$(pgb_pid) || die "pgbouncer: answers but pid file $PGB_PIDFILE is missing"
  log "pgbouncer: ready on 127.0.0.1:$BOUNCER_PORT (pid $pid) in $(elapsed "$t0")"
}

pgb_stop() {
  local pid t0
  if pid=$(pgb_pid); then
    t0=$(now_us)
    log "pgbouncer: stopping (pid $pid)"
    # SIGTERM = immediate shutdown (SIGINT would wait for clients to leave).
    terminate "$pid" pgbouncer TERM
    rm -f "$PGB_PIDFILE"
    log "pgbouncer: stopped in $(elapsed "$t0")"
  else
    log "pgbouncer: not running"
  fi
  if [[ -e "$PGB_STARTED_PG" ]]; then
    log "pgbouncer: stopping the pg server that start pgbouncer started"
    "$DBSERVERS" stop pg 9>&- || die "pgbouncer: could not stop the pg server"
    rm -f "$PGB_STARTED_PG"
  fi
}

pgb_status() {
  local pid
  if pid=$(pgb_pid); then
    echo "pgbouncer: running  port $(pgb_port)  pid $pid  pool_mode transaction  backend 127.0.0.1:$(pgb_backend_port)"
    "$DBSERVERS" status pg || return 1
    return 0
  fi
  echo "pgbouncer: stopped  port $BOUNCER_PORT"
  return 1
}

pgb_env() {
  print_export SQLGUARD_TEST_PGBOUNCER_URI \
    "postgresql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$BOUNCER_PORT/$TEST_DB"
  print_export SQLGUARD_TEST_PGBOUNCER_LOCKS_URI \
    "postgresql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$BOUNCER_PORT/sqlguard_locks"
}

# Two psql sessions through the bouncer. A runs a transaction, B opens one
# and keeps it, A runs another: A's two transactions must report different
# backend pids (in session mode they never would).
pgb_check() {
  local tmp pa1 pa2 pb pid_a pid_b dbname rc=0
  pick_pg_bin
  pgb_pid >/dev/null || die "pgbouncer: not running"
  tmp=$(mktemp -d)
  mkfifo "$tmp/a" "$tmp/b"
  pgb_psql "$TEST_DB" -tA <"$tmp/a" >"$tmp/a.out" 2>&1 &
  pid_a=$!
  pgb_psql "$TEST_DB" -tA <"$tmp/b" >"$tmp/b.out" 2>&1 &
  pid_b=$!
  exec 5>"$tmp/a" 6>"$tmp/b"
  wait_lines() { # file n
    local dl; dl=$(deadline_in 10)
    until (( $(wc -l <"$1") >= $2 )); do past "$dl" && return 1; sleep 0.05; done
  }
  printf 'BEGIN; SELECT pg_backend_pid(); COMMIT;\n' >&5; wait_lines "$tmp/a.out" 1
  printf 'BEGIN; SELECT pg_backend_pid();\n' >&6;       wait_lines "$tmp/b.out" 1
  printf 'BEGIN; SELECT pg_backend_pid(); COMMIT;\n' >&5; wait_lines "$tmp/a.out" 2
  printf 'COMMIT;\n' >&6
  exec 5>&- 6>&-
  wait "$pid_a" "$pid_b" || true
  pa1=$(sed -n 1p "$tmp/a.out"); pa2=$(sed -n 2p "$tmp/a.out"); pb=$(sed -n 1p "$tmp/b.out")
  echo "pgbouncer check: client A tx1 backend $pa1, client B (open tx) backend $pb, client A tx2 backend $pa2"
  if [[ "$pa1" =~ ^[0-9]+$ && "$pa2" =~ ^[0-9]+$ && "$pa1" != "$pa2" ]]; then
    echo "pgbouncer check: OK, transaction pooling (one client, two transactions, two backends)"
  else
    echo "pgbouncer check: FAILED (expected two different backend pids for client A)"
    cat "$tmp/a.out" "$tmp/b.out"
    rc=1
  fi
  # A database created on the server directly is reachable through the bouncer.
  dbname=sgtest_bouncer_$$
  PGCONNECT_TIMEOUT=5 "$PSQL" -X -q -v ON_ERROR_STOP=1 \
    "postgresql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$(pgb_backend_port)/$TEST_DB" \
    -c "CREATE DATABASE $dbname"
  if [[ "$(pgb_psql "$dbname" -tAc 'SELECT current_database()')" == "$dbname" ]]; then
    echo "pgbouncer check: OK, fresh database $dbname reachable through the bouncer"
  else
    echo "pgbouncer check: FAILED to reach fresh database $dbname through the bouncer"; rc=1
  fi
  PGCONNECT_TIMEOUT=5 "$PSQL" -X -q \
    "postgresql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$(pgb_backend_port)/$TEST_DB" \
    -c "DROP DATABASE $dbname WITH (FORCE)" || rc=1
  rm -rf "$tmp"
  return "$rc"
}

# ----------------------------------------------------- Patroni + etcd + PG ---

# Sets the variables of variant $1 (pg-ha | pg-async).
pt_vars() {
  PT=$1
  case "$PT" in
    pg-ha) PT_BASE_PORT=$PG_HA_PORT; PT_SYNC=1; PT_PORT_VAR=SQLGUARD_PG_HA_PORT ;;
    pg-async) PT_BASE_PORT=$PG_ASYNC_PORT; PT_SYNC=0; PT_PORT_VAR=SQLGUARD_PG_ASYNC_PORT ;;
    *) die "internal: unknown patroni variant $PT" ;;
  esac
  PT_DIR=$BASE/$PT
  PT_SCOPE=sqlguard-$PT
  PT_ETCD_CLIENT=$(( PT_BASE_PORT + 4 ))
  PT_ETCD_PEER=$(( PT_BASE_PORT + 5 ))
  PT_ETCD_DIR=$PT_DIR/etcd
  PT_ETCD_PIDFILE=$PT_DIR/etcd.pid
  PT_ETCD_LOG=$PT_DIR/etcd.log
}
pt_pgport() { echo $(( PT_BASE_PORT + $1 - 1 )); }
pt_restport() { echo $(( PT_BASE_PORT + $1 + 1 )); }
pt_ndir() { echo "$PT_DIR/node$1"; }
pt_data() { echo "$PT_DIR/node$1/data"; }
pt_sock() { echo "$PT_DIR/node$1/run"; }

pt_etcd_pid() { pid_from "$PT_ETCD_PIDFILE" 'etcd*'; }
pt_patroni_pid() { pid_from "$(pt_ndir "$1")/patroni.pid" 'patroni*'; }
pt_pg_pid() { pid_from "$(pt_data "$1")/postmaster.pid" 'postgres*'; }

pt_sql() { # node sql -> psql -tA output, as postgres over the node's socket
  PGCONNECT_TIMEOUT=2 as_user "$PG_OS_USER" "$(pt_ndir "$1")" "$PSQL" -X -qtA \
    -v ON_ERROR_STOP=1 -h "$(pt_sock "$1")" -p "$(pt_pgport "$1")" -U postgres -d postgres \
    -c "$2" 2>/dev/null
}

# primary | replica | down
pt_role() {
  local r
  r=$(pt_sql "$1" 'SELECT pg_is_in_recovery()') || { echo down; return; }
  case "$r" in f) echo primary ;; t) echo replica ;; *) echo down ;; esac
}

# Prints the node number of the (single) read-write node, or fails.
pt_primary() {
  local n found=
  for n in 1 2; do
    [[ "$(pt_role "$n")" == primary ]] && found+="$n "
  done
  found=${found% }
  [[ -n "$found" && "$found" != *' '* ]] || return 1
  echo "$found"
}

# Replication state of standby NODE as seen by primary P: "streaming sync" etc.
pt_repl_state() { # primary node
  pt_sql "$1" "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = 'node$2'" \
    | head -n 1
}

# Starts the topology's etcd and waits for /health. Up to 3 attempts: right
# after another topology stopped, etcd was seen to exit at once (once in CI,
# "etcd not healthy"; the next run passed). Each failed attempt says why
# (exited, or no health within START_TIMEOUT) with its log tail.
pt_etcd_start() {
  local pid dl attempt why
  if pid=$(pt_etcd_pid); then return 0; fi
  for attempt in 1 2 3; do
    require_free_port "$PT_ETCD_CLIENT" "$PT etcd" "$PT_PORT_VAR"
    require_free_port "$PT_ETCD_PEER" "$PT etcd" "$PT_PORT_VAR"
    make_owned_dir "$PT_ETCD_DIR" "$PG_OS_USER" 0700
    touch "$PT_ETCD_LOG"; own "$PG_OS_USER" "$PT_ETCD_LOG"
    log "$PT: starting etcd on 127.0.0.1:$PT_ETCD_CLIENT (attempt $attempt of 3)"
    why=
    if ! spawn_daemon "$PG_OS_USER" "$PT_DIR" "$PT_ETCD_PIDFILE" "$PT_ETCD_LOG" \
      etcd --name "$PT_SCOPE" --data-dir "$PT_ETCD_DIR" \
        --listen-client-urls "http://127.0.0.1:$PT_ETCD_CLIENT" \
        --advertise-client-urls "http://127.0.0.1:$PT_ETCD_CLIENT" \
        --listen-peer-urls "http://127.0.0.1:$PT_ETCD_PEER" \
        --initial-advertise-peer-urls "http://127.0.0.1:$PT_ETCD_PEER" \
        --initial-cluster "$PT_SCOPE=http://127.0.0.1:$PT_ETCD_PEER" \
        --initial-cluster-token "$PT_SCOPE" --initial-cluster-state new \
        --logger zap --log-level warn --auto-compaction-retention 1; then
      why="etcd did not start"
    else
      dl=$(deadline_in "$START_TIMEOUT")
      until http_get "$PT_ETCD_CLIENT" /health | grep -q '"health":"true"'; do
        if ! pt_etcd_pid >/dev/null; then why="etcd exited before it was healthy"; break; fi
        if past "$dl"; then why="etcd not healthy on 127.0.0.1:$PT_ETCD_CLIENT within ${START_TIMEOUT}s"; break; fi
        sleep 0.1
      done
    fi
    [[ -z "$why" ]] && return 0
    show_log_tail "$PT_ETCD_LOG" "$PT etcd"
    log "$PT: $why (attempt $attempt of 3)"
    if pid=$(pt_etcd_pid); then kill -9 "$pid" 2>/dev/null || true; fi
    sleep 1
  done
  die "$PT: etcd did not become healthy after 3 attempts: $why"
}

pt_write_conf() { # node
  local n=$1 nd sync=false strict=false fsync=off synccommit=off
  nd=$(pt_ndir "$n")
  if (( PT_SYNC )); then sync=true; strict=true; synccommit=on; fi
  if (( DURABLE )); then fsync=on; synccommit=on; fi
  cat >"$nd/patroni.yml" <<EOF
# Generated by tools/topologies.sh at every start; edits are overwritten.
# bootstrap.dcs applies only when the cluster is first created.
scope: $PT_SCOPE
namespace: /sqlguard/
name: node$n
restapi:
  listen: 127.0.0.1:$(pt_restport "$n")
  connect_address: 127.0.0.1:$(pt_restport "$n")
etcd3:
  hosts: 127.0.0.1:$PT_ETCD_CLIENT
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: $sync
    synchronous_mode_strict: $strict
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 200
        wal_level: replica
        hot_standby: 'on'
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
  initdb:
  - encoding: UTF8
  - locale: C
  - auth-local: trust
  - auth-host: scram-sha-256
postgresql:
  listen: 127.0.0.1:$(pt_pgport "$n")
  connect_address: 127.0.0.1:$(pt_pgport "$n")
  data_dir: $(pt_data "$n")
  bin_dir: $PG_BIN
  pgpass: $nd/pgpass
  authentication:
    superuser:
      username: postgres
      password: $PATRONI_SU_PASSWORD
    replication:
      username: $PATRONI_REPL_USER
      password: $PATRONI_REPL_PASSWORD
  parameters:
    unix_socket_directories: '$(pt_sock "$n")'
    fsync: '$fsync'
    synchronous_commit: '$synccommit'
    full_page_writes: 'on'
  pg_hba:
  - local all all trust
  - host replication $PATRONI_REPL_USER 127.0.0.1/32 scram-sha-256
  - host all all 127.0.0.1/32 scram-sha-256
  basebackup:
  - checkpoint: fast
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
watchdog:
  mode: 'off'
EOF
  own "$PG_OS_USER" "$nd/patroni.yml"
  chmod 0600 "$nd/patroni.yml"
}

pt_node_start() { # node
  local n=$1 nd pid
  nd=$(pt_ndir "$n")
  if pid=$(pt_patroni_pid "$n"); then return 0; fi
  if ! pt_pg_pid "$n" >/dev/null; then
    require_free_port "$(pt_pgport "$n")" "$PT node$n" "$PT_PORT_VAR"
  fi
  require_free_port "$(pt_restport "$n")" "$PT node$n patroni" "$PT_PORT_VAR"
  check_socket_path "$(pt_sock "$n")/.s.PGSQL.$(pt_pgport "$n")" "$PT node$n"
  make_owned_dir "$nd" "$PG_OS_USER" 0700
  make_owned_dir "$(pt_sock "$n")" "$PG_OS_USER" 0755
  touch "$nd/patroni.log"; own "$PG_OS_USER" "$nd/patroni.log"
  pt_write_conf "$n"
  log "$PT: starting Patroni node$n (postgres 127.0.0.1:$(pt_pgport "$n"), REST 127.0.0.1:$(pt_restport "$n"))"
  spawn_daemon "$PG_OS_USER" "$nd" "$nd/patroni.pid" "$nd/patroni.log" \
    env PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$nd" LANG=C.UTF-8 \
      patroni "$nd/patroni.yml" \
    || { show_log_tail "$nd/patroni.log" "$PT node$n"; die "$PT: Patroni node$n did not start"; }
}

# Wait until some node is the primary; prints its number.
pt_wait_primary() { # timeout [only-node]
  local dl p n
  dl=$(deadline_in "$1")
  while :; do
    if p=$(pt_primary); then
      if [[ -z "${2:-}" || "$p" == "$2" ]]; then echo "$p"; return 0; fi
    fi
    if past "$dl"; then return 1; fi
    for n in 1 2; do
      pt_patroni_pid "$n" >/dev/null || [[ ! -e "$(pt_ndir "$n")/patroni.pid" ]] || {
        show_log_tail "$(pt_ndir "$n")/patroni.log" "$PT node$n"
        die "$PT: Patroni node$n exited"
      }
    done
    sleep 0.2
  done
}

# Patroni's own view (its REST API answers 200 on /sync only for the member
# named in the DCS /sync key). PostgreSQL's sync_state is not enough: with
# no standby, strict mode sets synchronous_standby_names = '*', so a rejoining
# standby shows up as "sync" before Patroni has recorded it, and until then
# Patroni would not promote it.
pt_is_sync_standby() { # node
  [[ "$(http_get "$(pt_restport "$1")" /sync | head -n 1)" == *' 200 '* ]]
}

# Wait until standby NODE streams from primary P (and for pg-ha is the
# synchronous standby, for PostgreSQL and for Patroni).
pt_wait_standby() { # primary node timeout
  local p=$1 n=$2 dl st
  dl=$(deadline_in "$3")
  while :; do
    st=$(pt_repl_state "$p" "$n" || true)
    if (( PT_SYNC )); then
      [[ "$st" == 'streaming sync' ]] && pt_is_sync_standby "$n" && return 0
    else
      [[ "$st" == streaming* ]] && return 0
    fi
    if past "$dl"; then
      log "$PT: node$n replication state '${st:-none}'$( (( PT_SYNC )) && ! pt_is_sync_standby "$n" && echo ', not yet the synchronous standby in Patroni')"
      return 1
    fi
    sleep 0.2
  done
}

pt_bootstrap_sql() { # primary
  pt_sql "$1" "SELECT 1" >/dev/null || return 1
  PGCONNECT_TIMEOUT=5 as_user "$PG_OS_USER" "$(pt_ndir "$1")" "$PSQL" -X -q -v ON_ERROR_STOP=1 \
    -h "$(pt_sock "$1")" -p "$(pt_pgport "$1")" -U postgres -d postgres <<SQL
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

pt_start() {
  local t0 p n other fresh=1
  ensure_tools patroni etcd /usr/lib/python3/dist-packages/etcd
  pick_pg_bin
  if pt_etcd_pid >/dev/null && pt_patroni_pid 1 >/dev/null && pt_patroni_pid 2 >/dev/null \
     && p=$(pt_primary); then
    log "$PT: already running (primary node$p, port $(pt_pgport "$p"))"
    return 0
  fi
  t0=$(now_us)
  prepare_base
  make_owned_dir "$PT_DIR" "$PG_OS_USER" 0755
  mode_name >"$PT_DIR/mode"
  [[ -f "$(pt_data 1)/PG_VERSION" || -f "$(pt_data 2)/PG_VERSION" ]] && fresh=0
  pt_etcd_start
  if (( fresh )); then
    log "$PT: new cluster ($(mode_name) settings); node1 bootstraps, node2 clones it"
    pt_node_start 1
    p=$(pt_wait_primary "$START_TIMEOUT" 1) || {
      show_log_tail "$(pt_ndir 1)/patroni.log" "$PT node1"; die "$PT: node1 did not become primary"; }
    pt_node_start 2
  else
    pt_node_start 1
    pt_node_start 2
    p=$(pt_wait_primary "$(( START_TIMEOUT + 30 ))") || {
      show_log_tail "$(pt_ndir 1)/patroni.log" "$PT node1"
      show_log_tail "$(pt_ndir 2)/patroni.log" "$PT node2"
      die "$PT: no primary after $(( START_TIMEOUT + 30 ))s"; }
  fi
  other=$(( 3 - p ))
  if ! pt_wait_standby "$p" "$other" "$(( START_TIMEOUT * 2 ))"; then
    show_log_tail "$(pt_ndir "$other")/patroni.log" "$PT node$other"
    die "$PT: node$other is not a streaming standby of node$p"
  fi
  pt_bootstrap_sql "$p" || die "$PT: could not create role/database $TEST_USER/$TEST_DB on node$p"
  # The multi-host URI must work as given to the tests.
  local err
  err=$(PGCONNECT_TIMEOUT=5 "$PSQL" -X -qtA -c 'SELECT 1' "$(pt_uri)" 2>&1) \
    || die "$PT: cannot connect with $(pt_uri): $err"
  log "$PT: ready in $(elapsed "$t0"): primary node$p 127.0.0.1:$(pt_pgport "$p"), standby node$other 127.0.0.1:$(pt_pgport "$other") ($(pt_repl_state "$p" "$other"))"
}

# Stop one node: Patroni first (it stops its postgres), then whatever is left.
pt_node_stop() { # node
  local n=$1 pid ppid
  if pid=$(pt_patroni_pid "$n"); then
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$(( STOP_TIMEOUT + 15 ))"; then
      log "$PT: Patroni node$n still running; SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || die "$PT: Patroni pid $pid survived SIGKILL"
    fi
  fi
  rm -f "$(pt_ndir "$n")/patroni.pid"
  if ppid=$(pt_pg_pid "$n"); then
    log "$PT: stopping postgres node$n (pid $ppid)"
    as_user "$PG_OS_USER" "$(pt_ndir "$n")" "$PG_BIN/pg_ctl" stop -D "$(pt_data "$n")" -m fast -W -s \
      </dev/null 9>&- || true
    terminate "$ppid" "$PT postgres node$n"
  fi
}

pt_stop() {
  local t0 n pid
  if [[ ! -d "$PT_DIR" ]]; then log "$PT: not running"; return 0; fi
  pick_pg_bin
  t0=$(now_us)
  # Both Patroni daemons get SIGTERM together: one after the other costs a
  # standby "waiting to be released from synchronous standby" (two loops)
  # plus the primary's own loop, and the primary first would fail over.
  for n in 1 2; do
    if pid=$(pt_patroni_pid "$n"); then
      log "$PT: stopping Patroni node$n (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for n in 1 2; do pt_node_stop "$n"; done
  if pid=$(pt_etcd_pid); then
    log "$PT: stopping etcd (pid $pid)"
    terminate "$pid" "$PT etcd"
  fi
  rm -f "$PT_ETCD_PIDFILE"
  log "$PT: stopped in $(elapsed "$t0")"
}

pt_status() {
  local n rc=0 pid ppid role p='' line st
  if pid=$(pt_etcd_pid); then
    echo "$PT etcd: running  port $PT_ETCD_CLIENT  pid $pid"
  else
    echo "$PT etcd: stopped  port $PT_ETCD_CLIENT"; rc=3
  fi
  pick_pg_bin
  p=$(pt_primary 2>/dev/null || true)
  for n in 1 2; do
    line="$PT node$n: "
    pid=$(pt_patroni_pid "$n" || true)
    ppid=$(pt_pg_pid "$n" || true)
    role=$(pt_role "$n")
    if [[ -n "$pid" && -n "$ppid" && "$role" != down ]]; then
      line+="running  $role"
      if [[ "$role" == replica && -n "$p" ]]; then
        st=$(pt_repl_state "$p" "$n" || true)
        if (( PT_SYNC )); then
          if pt_is_sync_standby "$n"; then st+=', patroni sync standby'; else st+=', not patroni sync standby'; fi
        fi
        line+=" (${st:-not streaming})"
      fi
    else
      line+="stopped"; rc=3
    fi
    line+="  port $(pt_pgport "$n")  patroni pid ${pid:--}  postgres pid ${ppid:--}"
    echo "$line"
  done
  if [[ -n "$p" ]]; then
    echo "$PT: primary node$p port $(pt_pgport "$p")  mode $(cat "$PT_DIR/mode" 2>/dev/null || echo '?')"
  else
    echo "$PT: no primary"; rc=3
  fi
  return "$rc"
}

pt_uri() { # [dbname]
  echo "postgresql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$(pt_pgport 1),127.0.0.1:$(pt_pgport 2)/${1:-$TEST_DB}?target_session_attrs=read-write"
}

# A real write (txid_current() alone writes no WAL before its commit record
# and so never waits for a synchronous standby). In the postgres database,
# away from the tests' tables.
PT_PROBE_SQL="CREATE TABLE IF NOT EXISTS sqlguard_failover_probe (at timestamptz);
INSERT INTO sqlguard_failover_probe VALUES (clock_timestamp())"

pt_env() {
  local var=SQLGUARD_TEST_PG_HA_URI
  [[ "$PT" == pg-async ]] && var=SQLGUARD_TEST_PG_ASYNC_URI
  print_export "$var" "$(pt_uri)"
}

# Patroni, its postmaster and all the postmaster's children (a whole-node
# crash; killing only postgres makes Patroni restart it in place).
pt_node_pids() { # node
  local n=$1 pid ppid pids=''
  pid=$(pt_patroni_pid "$n" || true)
  ppid=$(pt_pg_pid "$n" || true)
  [[ -n "$pid" ]] && pids+=" $pid $(descendants "$pid")"
  [[ -n "$ppid" ]] && pids+=" $ppid $(descendants "$ppid")"
  # shellcheck disable=SC2086 # dedupe a list of pids
  printf '%s\n' $pids | sort -un | tr '\n' ' '
}

pt_kill_pids() { # node pid...
  local n=$1 pid
  shift
  (( $# )) || return 0
  kill -KILL "$@" 2>/dev/null || true
  for pid in "$@"; do wait_gone "$pid" 10 || die "$PT: pid $pid survived SIGKILL"; done
  rm -f "$(pt_ndir "$n")/patroni.pid"
}

# pg-async's failover: hold the standby's walreceiver (SIGSTOP) for
# ASYNC_FAILOVER_LAG seconds while the primary commits on; prints its pid
# (nothing when the lag is 0). pt_drop_lag ends it after the primary's kill.
pt_lag_standby() { # primary standby
  local old=$1 n=$2 wr
  (( ASYNC_FAILOVER_LAG > 0 )) || return 0
  wr=$(pt_sql "$n" "SELECT pid FROM pg_stat_wal_receiver" || true)
  [[ "$wr" =~ ^[0-9]+$ ]] || die "$PT: node$n has no walreceiver to hold back"
  kill -STOP "$wr"
  log "$PT: node$n's walreceiver (pid $wr) stopped for ${ASYNC_FAILOVER_LAG}s: the standby falls behind"
  sleep "$ASYNC_FAILOVER_LAG"
  log "$PT: node$n received up to $(pt_sql "$n" "SELECT pg_last_wal_receive_lsn()"), node$old is at" \
      "$(pt_sql "$old" "SELECT pg_current_wal_lsn()")"
  echo "$wr"
}

# SIGKILL (not SIGCONT) the held walreceiver: the WAL queued in its socket is
# never read. Its postmaster restarts the standby's processes (crash
# recovery from what reached pg_wal), then Patroni promotes it.
pt_drop_lag() { # standby walreceiver-pid
  kill -KILL "$2" 2>/dev/null || true
  log "$PT: node$1's held walreceiver (pid $2) SIGKILLed: the WAL it had not read is lost"
}

pt_failover() {
  local old new t0 t_kill t_promote st ok wfile='' wpid='' t_commit='' wr=''
  pick_pg_bin
  old=$(pt_primary) || die "$PT: no primary; is it running? (dbservers.sh status $PT)"
  new=$(( 3 - old ))
  if ! pt_patroni_pid "$new" >/dev/null || [[ "$(pt_role "$new")" != replica ]]; then
    die "$PT: node$new is not a running standby; nothing to fail over to"
  fi
  st=$(pt_repl_state "$old" "$new" || true)
  if (( PT_SYNC )) && ! pt_is_sync_standby "$new"; then
    die "$PT: node$new is not (yet) Patroni's synchronous standby, so it cannot be promoted; retry in a few seconds"
  fi
  log "$PT: primary node$old (port $(pt_pgport "$old")), standby node$new ($st)"
  (( PT_SYNC )) || wr=$(pt_lag_standby "$old" "$new")
  local pids
  pids=$(pt_node_pids "$old")
  log "$PT: kill -9 Patroni and postgres of node$old (pids ${pids% })"
  t0=$(now_us)
  # shellcheck disable=SC2086 # a list of pids
  pt_kill_pids "$old" $pids
  [[ -z "$wr" ]] || pt_drop_lag "$new" "$wr"
  t_kill=$(elapsed "$t0")
  log "$PT: node$old dead after $t_kill; waiting for node$new to be promoted (ttl 20s)"
  if ! pt_wait_primary "$FAILOVER_TIMEOUT" "$new" >/dev/null; then
    show_log_tail "$(pt_ndir "$new")/patroni.log" "$PT node$new"
    die "$PT: node$new not promoted within ${FAILOVER_TIMEOUT}s"
  fi
  t_promote=$(elapsed "$t0")
  log "$PT: node$new read-write (pg_is_in_recovery() = false) ${t_promote} after the kill"
  pt_pgport "$new"
  # A real commit issued right now; note when it returns. pg-ha: strict
  # synchronous mode makes it wait for a synchronous standby, i.e. until
  # node$old has rejoined. pg-async: it returns at once.
  (( PT_SYNC )) && log "$PT: strict synchronous mode: commits on node$new wait until node$old rejoins as synchronous standby"
  wfile=$(mktemp)
  ( pt_sql "$new" "$PT_PROBE_SQL" >/dev/null 2>&1 && now_us >"$wfile" ) &
  wpid=$!
  # shellcheck disable=SC2064,SC2046 # expand now; a list of pids
  trap "kill \$(descendants $wpid) $wpid 2>/dev/null; rm -f '$wfile'" EXIT
  if (( ! PT_SYNC )); then
    local dl0; dl0=$(deadline_in 10)
    while [[ ! -s "$wfile" ]] && proc_alive "$wpid" && ! past "$dl0"; do sleep 0.05; done
  fi
  local t1; t1=$(now_us)
  pt_node_start "$old"
  if ! pt_wait_standby "$new" "$old" "$FAILOVER_TIMEOUT"; then
    show_log_tail "$(pt_ndir "$old")/patroni.log" "$PT node$old"
    die "$PT: node$old did not rejoin as a standby within ${FAILOVER_TIMEOUT}s"
  fi
  log "$PT: node$old rejoined as $(pt_repl_state "$new" "$old") standby $(elapsed "$t1") after its restart"
  local dl wdone
  dl=$(deadline_in 30)
  while [[ ! -s "$wfile" ]] && proc_alive "$wpid" && ! past "$dl"; do sleep 0.1; done
  wdone=$(cat "$wfile" 2>/dev/null || true)
  if [[ -n "$wdone" ]]; then
    t_commit=$(( wdone - t0 ))
    t_commit=$(printf '%d.%02ds' $(( t_commit / 1000000 )) $(( (t_commit % 1000000) / 10000 )))
    log "$PT: the commit issued on node$new at its promotion returned ${t_commit} after the kill"
  else
    log "$PT: warning: the commit issued on node$new at its promotion failed or has not returned"
  fi
  ok=$(PGCONNECT_TIMEOUT=5 timeout 30 "$PSQL" -X -qtA -c "$PT_PROBE_SQL" "$(pt_uri postgres)" 2>&1) \
    || die "$PT: write through the multi-host URI failed: $ok"
  log "$PT: write through the multi-host URI committed; failover cycle took $(elapsed "$t0") in all"
  log "$PT: timings: kill ${t_kill}, promotion ${t_promote} after the kill${t_commit:+, first commit ${t_commit} after the kill}"
  trap - EXIT
  rm -f "$wfile"
}

pt_check() {
  local p s v dl
  pick_pg_bin
  p=$(pt_primary) || die "$PT: no primary"
  s=$(( 3 - p ))
  PGCONNECT_TIMEOUT=5 "$PSQL" -X -q -v ON_ERROR_STOP=1 "$(pt_uri postgres)" <<'SQL'
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS sg_topology_check (id int PRIMARY KEY, v text);
INSERT INTO sg_topology_check VALUES (1, now()::text)
  ON CONFLICT (id) DO UPDATE SET v = excluded.v;
SQL
  v=$(PGCONNECT_TIMEOUT=5 "$PSQL" -X -qtA -c 'SELECT v FROM sg_topology_check WHERE id = 1' "$(pt_uri postgres)")
  echo "$PT check: wrote '$v' through the multi-host URI (primary node$p)"
  dl=$(deadline_in 10)
  until [[ "$(PGCONNECT_TIMEOUT=5 as_user "$PG_OS_USER" "$(pt_ndir "$s")" "$PSQL" -X -qtA \
              -h "$(pt_sock "$s")" -p "$(pt_pgport "$s")" -U postgres -d postgres \
              -c 'SELECT v FROM sg_topology_check WHERE id = 1' 2>/dev/null)" == "$v" ]]; do
    past "$dl" && { echo "$PT check: FAILED, standby node$s does not show the row"; return 1; }
    sleep 0.1
  done
  echo "$PT check: OK, standby node$s has it ($(pt_repl_state "$p" "$s")); $(pt_sql "$p" 'SHOW synchronous_standby_names' | sed 's/^/synchronous_standby_names=/')"
  pt_sql "$p" 'DROP TABLE sg_topology_check' >/dev/null || true
  v=$(PGCONNECT_TIMEOUT=5 "$PSQL" -X -qtA -c 'SELECT current_user, current_database(), inet_server_port()' "$(pt_uri)") \
    || { echo "$PT check: FAILED to connect with $(pt_uri)"; return 1; }
  echo "$PT check: OK, $(pt_uri) -> $v"
}

# ------------------------------------------------------------------ Galera ---

GA_DIR=$BASE/galera
GA_PROVIDER=/usr/lib/galera/libgalera_smm.so
GA_CLUSTER=sqlguard-galera

ga_dir() { echo "$GA_DIR/node$1"; }
ga_data() { echo "$GA_DIR/node$1/data"; }
ga_sock() { echo "$GA_DIR/node$1/mariadb.sock"; }
ga_cnf() { echo "$GA_DIR/node$1/my.cnf"; }
ga_log() { echo "$GA_DIR/node$1/mariadb.log"; }
ga_port() { echo $(( GALERA_PORT + 10 * ($1 - 1) )); }
ga_gport() { echo $(( $(ga_port "$1") + 1 )); }
ga_iport() { echo $(( $(ga_port "$1") + 2 )); }
ga_sport() { echo $(( $(ga_port "$1") + 3 )); }
ga_pid() { pid_from "$(ga_dir "$1")/mariadb.pid" 'mariadbd*'; }
ga_running_nodes() { local n; for n in 1 2 3; do ga_pid "$n" >/dev/null && printf '%s ' "$n"; done; return 0; }

find_mariadb_tools() {
  MARIADBD=$(command -v mariadbd || true)
  [[ -n "$MARIADBD" ]] || { [[ -x /usr/sbin/mariadbd ]] && MARIADBD=/usr/sbin/mariadbd; }
  [[ -n "$MARIADBD" ]] || die "mariadb: mariadbd not found; run tools/deps.sh"
}

ga_sql() { # node sql (admin over the socket)
  mariadb --no-defaults --socket="$(ga_sock "$1")" -u"$MY_ADMIN_USER" --connect-timeout=2 \
    --batch --skip-column-names -e "$2" 2>/dev/null
}

# "ready size state" of a node, e.g. "ON 3 Synced".
ga_wsrep() { # node
  local out
  out=$(ga_sql "$1" "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready','wsrep_cluster_size','wsrep_local_state_comment')") || return 1
  awk '{ v[$1] = $2 } END { printf "%s %s %s\n", v["wsrep_ready"], v["wsrep_cluster_size"], v["wsrep_local_state_comment"] }' <<<"$out"
}

ga_write_cnf() { # node
  local n=$1 flush=2 user_line='' addrs=''
  (( DURABLE )) && flush=1
  (( IS_ROOT )) && user_line="user=$MY_OS_USER"
  addrs="127.0.0.1:$(ga_gport 1),127.0.0.1:$(ga_gport 2),127.0.0.1:$(ga_gport 3)"
  cat >"$(ga_cnf "$n")" <<EOF
# Generated by tools/topologies.sh at every start; edits are overwritten.
# Layout after MariaDB's mysql-test/suite/galera_3nodes/galera_3nodes.cnf.
[mysqld]
datadir=$(ga_data "$n")
socket=$(ga_sock "$n")
pid-file=$(ga_dir "$n")/mariadb.pid
port=$(ga_port "$n")
bind-address=127.0.0.1
skip-name-resolve
skip-log-bin
$user_line
max-connections=300
thread-cache-size=0
character-set-server=utf8mb4
innodb-flush-log-at-trx-commit=$flush
innodb-buffer-pool-size=128M
binlog-format=ROW
default-storage-engine=InnoDB
innodb-autoinc-lock-mode=2
wsrep-on=ON
wsrep-provider=$GA_PROVIDER
wsrep-cluster-name=$GA_CLUSTER
wsrep-cluster-address=gcomm://$addrs
wsrep-node-name=node$n
wsrep-node-address=127.0.0.1
wsrep-node-incoming-address=127.0.0.1:$(ga_port "$n")
wsrep-sst-method=rsync
wsrep-sst-receive-address=127.0.0.1:$(ga_sport "$n")
wsrep-provider-options='base_host=127.0.0.1;base_port=$(ga_gport "$n");gmcast.listen_addr=tcp://127.0.0.1:$(ga_gport "$n");ist.recv_addr=127.0.0.1:$(ga_iport "$n");gcache.size=64M;evs.suspect_timeout=PT5S;evs.inactive_timeout=PT10S'
EOF
}

# libfaketime for a node (the cluster's choice, $GA_DIR/clock): sets
# GA_CLOCK_ENV, the prefix that starts mariadbd under it, reading node N's
# offset file at every clock reading (monotonic clock left real).
ga_clock_env() { # node
  GA_CLOCK_ENV=()
  [[ "$(cat "$GA_DIR/clock" 2>/dev/null)" == faketime ]] || return 0
  # Asked for with SQLGUARD_SERVER_CLOCK: from the real time; kept otherwise.
  faketime_env "$(ga_dir "$1")/faketime.rc" "$([[ -n "${SQLGUARD_SERVER_CLOCK:-}" ]] && echo 1 || echo 0)"
  GA_CLOCK_ENV=("${FAKETIME_ENV[@]}")
}

ga_clock() { # node offset
  local n=$1 off=$2
  # A node that is down (a node-kill) gets it when it starts again.
  [[ -d "$(ga_dir "$n")" ]] || die "galera: node$n does not exist; start galera first"
  [[ "$(cat "$GA_DIR/clock" 2>/dev/null)" == faketime ]] \
    || die "galera: not running under libfaketime; restart it with SQLGUARD_SERVER_CLOCK=faketime tools/dbservers.sh restart galera"
  faketime_step "$(ga_dir "$n")/faketime.rc" "$off"
  log "galera: node$n wall clock now real $FAKETIME_OFFSET"
}

ga_install_db() { # node
  local n=$1 args
  log "galera: mariadb-install-db for node$n in $(ga_data "$n")"
  rm -rf "$(ga_data "$n")"
  args=(--no-defaults --datadir="$(ga_data "$n")" --skip-test-db --skip-name-resolve
        --auth-root-authentication-method=socket)
  if (( IS_ROOT )); then args+=(--user="$MY_OS_USER"); else args+=(--auth-root-socket-user="$MY_ADMIN_USER"); fi
  if ! (cd "$(ga_dir "$n")" && mariadb-install-db "${args[@]}") </dev/null >>"$(ga_log "$n")" 2>&1 9>&-; then
    show_log_tail "$(ga_log "$n")" "galera node$n"
    die "galera: mariadb-install-db failed for node$n"
  fi
  touch "$(ga_dir "$n")/.initialized"
}

# Start node N; bootstrap=1 starts a new cluster from it. Waits until it is
# Synced and the cluster counts EXPECT nodes.
ga_node_start() { # node bootstrap expect
  ga_pid "$1" >/dev/null && return 0
  ga_node_spawn "$1" "$2"
  ga_node_wait "$1" "$3"
}

declare -A GA_SPAWNED=() GA_T0=()

# Start node N in the background; bootstrap=1 starts a new cluster from it.
ga_node_spawn() { # node bootstrap
  local n=$1 boot=$2 d args p
  d=$(ga_dir "$n")
  GA_T0[$n]=$(now_us)
  for p in "$(ga_port "$n")" "$(ga_gport "$n")" "$(ga_iport "$n")" "$(ga_sport "$n")"; do
    require_free_port "$p" "galera node$n" SQLGUARD_GALERA_PORT
  done
  check_socket_path "$(ga_sock "$n")" "galera node$n"
  make_owned_dir "$d" "$MY_OS_USER" 0755
  touch "$(ga_log "$n")"; own "$MY_OS_USER" "$(ga_log "$n")"
  if (( boot )) && [[ ! -f "$d/.initialized" || ! -d "$(ga_data "$n")/mysql" ]]; then
    ga_install_db "$n"
  fi
  # A joiner gets its data by SST (or IST) from the cluster.
  make_owned_dir "$(ga_data "$n")" "$MY_OS_USER" 0755
  if (( boot )) && [[ -f "$(ga_data "$n")/grastate.dat" ]] \
     && grep -q '^safe_to_bootstrap: 0' "$(ga_data "$n")/grastate.dat"; then
    log "galera: node$n: forcing safe_to_bootstrap (throwaway cluster; no node was shut down last)"
    sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$(ga_data "$n")/grastate.dat"
  fi
  rm -f "$d/mariadb.pid" "$(ga_sock "$n")" "$(ga_sock "$n").lock"
  ga_write_cnf "$n"
  ga_clock_env "$n"
  args=(--defaults-file="$(ga_cnf "$n")")
  (( boot )) && args+=(--wsrep-new-cluster)
  local pos
  if [[ -n "${GA_POS[$n]:-}" ]]; then
    pos=${GA_POS[$n]}
  else
    pos=$(ga_recover_position "$n") || die "galera: node$n: wsrep position recovery failed"
  fi
  [[ -n "$pos" ]] && args+=(--wsrep-start-position="$pos")
  log "galera: starting node$n on 127.0.0.1:$(ga_port "$n")$( (( boot )) && echo ' (bootstrapping a new cluster)')"
  echo "=== $(date '+%F %T') start node$n boot=$boot" >>"$(ga_log "$n")"
  (cd "$d" && exec setsid "${GA_CLOCK_ENV[@]}" "$MARIADBD" "${args[@]}") </dev/null >>"$(ga_log "$n")" 2>&1 9>&- &
  GA_SPAWNED[$n]=$!
}

# Wait until node N is Synced and the cluster counts EXPECT nodes.
# With soft=1, a node that exits during startup returns 2 (its log shown)
# instead of ending the script.
ga_node_wait() { # node expect [soft]
  local n=$1 expect=$2 soft=${3:-0} spawned=${GA_SPAWNED[$1]} dl st r size c
  dl=$(deadline_in "$(( START_TIMEOUT * 3 ))")
  while :; do
    st=$(ga_wsrep "$n" || true)
    read -r r size c <<<"$st" || true
    if [[ "$r" == ON && "$c" == Synced && "$size" =~ ^[0-9]+$ ]] && (( size >= expect )); then
      break
    fi
    if ! proc_alive "$spawned"; then
      show_log_tail "$(ga_log "$n")" "galera node$n"
      (( soft )) && return 2
      die "galera: node$n exited during startup"
    fi
    if past "$dl"; then
      show_log_tail "$(ga_log "$n")" "galera node$n"
      die "galera: node$n not synced in a cluster of $expect after $(( START_TIMEOUT * 3 ))s (state: ${st:-no answer})"
    fi
    sleep 0.2
  done
  ga_pid "$n" >/dev/null || die "galera: node$n answers but its pid file is missing"
  GA_LAST_START=$(elapsed "${GA_T0[$n]}")
  log "galera: node$n synced (cluster size $size) in $GA_LAST_START"
}

# After a crash grastate.dat says seqno -1 and mariadbd does not recover the
# position itself (galera_recovery does that for systemd): without it a
# restarted node asks for a full SST instead of IST. Prints uuid:seqno.
ga_recover_position() { # node
  local n=$1 gs out pos
  gs=$(ga_data "$n")/grastate.dat
  [[ -f "$gs" && -d "$(ga_data "$n")/mysql" ]] || return 0
  grep -qE '^seqno:[[:space:]]*-1' "$gs" || return 0
  out=$(cd "$(ga_dir "$n")" && "$MARIADBD" --defaults-file="$(ga_cnf "$n")" --wsrep-recover \
          --disable-log-error </dev/null 2>&1 9>&-) || {
    printf '%s\n' "$out" >>"$(ga_log "$n")"
    return 1
  }
  printf '%s\n' "$out" >>"$(ga_log "$n")"
  pos=$(sed -n 's/.*WSREP: Recovered position:[[:space:]]*//p' <<<"$out" | tail -n 1)
  if [[ -n "$pos" ]]; then log "galera: node$n: recovered wsrep position $pos"; fi
  printf '%s' "$pos"
}

ga_bootstrap_sql() { # node
  local host
  {
    for host in 127.0.0.1 localhost; do
      echo "CREATE USER IF NOT EXISTS '$TEST_USER'@'$host' IDENTIFIED BY '$TEST_PASSWORD';"
      echo "ALTER USER '$TEST_USER'@'$host' IDENTIFIED BY '$TEST_PASSWORD';"
      echo "GRANT ALL PRIVILEGES ON *.* TO '$TEST_USER'@'$host';"
    done
    echo "CREATE DATABASE IF NOT EXISTS \`$TEST_DB\` CHARACTER SET utf8mb4;"
  } | mariadb --no-defaults --socket="$(ga_sock "$1")" -u"$MY_ADMIN_USER" --batch
}

# Which node to bootstrap from when none runs (sets GA_BOOT): the one Galera
# marked safe_to_bootstrap (the last to shut down cleanly); after a crash of
# all nodes, the one with the highest (recovered) seqno.
declare -A GA_POS=()
ga_choose_boot() {
  local n pos seq best=-2
  GA_BOOT=1
  for n in 1 2 3; do
    [[ -d "$(ga_data "$n")/mysql" ]] || continue
    if grep -qs '^safe_to_bootstrap: 1' "$(ga_data "$n")/grastate.dat"; then
      GA_BOOT=$n; return
    fi
  done
  for n in 1 2 3; do
    [[ -d "$(ga_data "$n")/mysql" && -f "$(ga_data "$n")/grastate.dat" ]] || continue
    seq=$(sed -n 's/^seqno:[[:space:]]*//p' "$(ga_data "$n")/grastate.dat")
    if [[ "$seq" == -1 ]]; then
      ga_write_cnf "$n"
      pos=$(ga_recover_position "$n") || die "galera: node$n: wsrep position recovery failed"
      GA_POS[$n]=$pos
      seq=${pos##*:}
    fi
    [[ "$seq" =~ ^-?[0-9]+$ ]] || continue
    if (( seq > best )); then best=$seq; GA_BOOT=$n; fi
  done
}

ga_start() {
  local t0 running boot n count
  ensure_tools rsync "$GA_PROVIDER"
  find_mariadb_tools
  running=$(ga_running_nodes)
  if [[ "$running" == "1 2 3 " ]]; then
    log "galera: already running (nodes 1 2 3, ports $(ga_port 1) $(ga_port 2) $(ga_port 3))"
    return 0
  fi
  t0=$(now_us)
  prepare_base
  make_owned_dir "$GA_DIR" "$MY_OS_USER" 0755
  mode_name >"$GA_DIR/mode"
  count=$(wc -w <<<"$running")
  # The cluster's clock: asked for, or real for a new cluster, or kept.
  if [[ -n "${SQLGUARD_SERVER_CLOCK:-}" ]]; then
    [[ "$SQLGUARD_SERVER_CLOCK" == faketime || "$SQLGUARD_SERVER_CLOCK" == real ]] \
      || die "SQLGUARD_SERVER_CLOCK=$SQLGUARD_SERVER_CLOCK: use faketime or real"
    echo "$SQLGUARD_SERVER_CLOCK" >"$GA_DIR/clock"
  elif (( count == 0 )) || [[ ! -f "$GA_DIR/clock" ]]; then
    [[ -f "$GA_DIR/clock" && "$action" == restart ]] || echo real >"$GA_DIR/clock"
  fi
  log "galera: $(cat "$GA_DIR/clock") clock"
  if (( count == 0 )); then
    ga_choose_boot
    boot=$GA_BOOT
    ga_node_start "$boot" 1 1
    running="$boot "
    count=1
  fi
  # Joiners start one after another, each Synced before the next, and a
  # joiner that aborts during its state transfer is started again (up to 2
  # more times). The abort: the donor Galera picked answers "State transfer
  # ... failed: Not in primary component" while the joiner's own arrival
  # changes the view, and the joiner gives up ("Will never receive state.
  # Need to abort"). Seen twice on 2026-12-04, both on a restart under
  # libfaketime, both the third node joining (once with both joiners started
  # together, once one after the other); its data is intact, a new start
  # joins by IST.
  for n in 1 2 3; do
    [[ " $running" == *" $n "* ]] && continue
    ga_join_retrying "$n" $(( count + 1 ))
    count=$(( count + 1 ))
  done
  n=${running%% *}
  ga_bootstrap_sql "$n" || die "galera: could not create user/database $TEST_USER/$TEST_DB"
  for n in 1 2 3; do
    mariadb-admin --no-defaults -h127.0.0.1 -P"$(ga_port "$n")" -u"$TEST_USER" -p"$TEST_PASSWORD" \
      --connect-timeout=5 ping >/dev/null 2>&1 \
      || die "galera: node$n does not accept $TEST_USER on 127.0.0.1:$(ga_port "$n")"
  done
  log "galera: ready in $(elapsed "$t0"): nodes on 127.0.0.1:$(ga_port 1),$(ga_port 2),$(ga_port 3)"
}

# Starts node N as a joiner and waits until it is Synced in a cluster of
# EXPECT; a joiner that exits during its state transfer is started again, up
# to 3 tries in all (see do_start: the donor's "Not in primary component").
ga_join_retrying() { # node expect
  local n=$1 expect=$2 try rc
  for try in 1 2 3; do
    ga_node_spawn "$n" 0
    rc=0
    ga_node_wait "$n" "$expect" 1 || rc=$?
    (( rc == 0 )) && return 0
    (( try < 3 )) || die "galera: node$n exited during startup $try times"
    log "galera: node$n exited during startup (try $try of 3); starting it again"
    GA_POS[$n]=''
    sleep 1
  done
}

ga_node_stop() { # node
  local n=$1 pid
  if pid=$(ga_pid "$n"); then
    log "galera: stopping node$n (pid $pid)"
    terminate "$pid" "galera node$n"
  fi
  rm -f "$(ga_dir "$n")/mariadb.pid"
}

ga_stop() {
  local t0 n
  if [[ ! -d "$GA_DIR" ]]; then log "galera: not running"; return 0; fi
  t0=$(now_us)
  # Node 1 last, so that it is the one marked safe_to_bootstrap.
  for n in 3 2 1; do ga_node_stop "$n"; done
  log "galera: stopped in $(elapsed "$t0")"
}

ga_status() {
  local n rc=0 pid st
  for n in 1 2 3; do
    if pid=$(ga_pid "$n"); then
      st=$(ga_wsrep "$n" || echo '? ? ?')
      read -r r s c <<<"$st"
      echo "galera node$n: running  port $(ga_port "$n")  pid $pid  wsrep_ready $r  cluster_size $s  state $c"
      [[ "$r" == ON ]] || rc=3
    else
      echo "galera node$n: stopped  port $(ga_port "$n")"; rc=3
    fi
  done
  echo "galera: mode $(cat "$GA_DIR/mode" 2>/dev/null || echo '?')"
  return "$rc"
}

ga_env() {
  local n uris=
  for n in 1 2 3; do
    uris+="${uris:+,}mysql://$TEST_USER:$TEST_PASSWORD@127.0.0.1:$(ga_port "$n")/$TEST_DB"
  done
  print_export SQLGUARD_TEST_GALERA_URIS "$uris"
}

ga_node_kill() { # node
  local n=$1 pid pids t0 dl st other s
  pid=$(ga_pid "$n") || die "galera: node$n is not running"
  pids="$pid $(descendants "$pid")"
  local before=''
  other=$(ga_running_nodes | tr ' ' '\n' | grep -vx "$n" | head -n 1 || true)
  if [[ -n "$other" ]]; then
    read -r _ before _ <<<"$(ga_wsrep "$other" || true)" || true
  fi
  t0=$(now_us)
  log "galera: kill -9 node$n (pid $pid)"
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
  for pid in $pids; do wait_gone "$pid" 10 || die "galera: pid $pid survived SIGKILL"; done
  log "galera: node$n dead after $(elapsed "$t0")"
  [[ -n "$other" && "$before" =~ ^[0-9]+$ ]] || return 0
  dl=$(deadline_in 30)
  while :; do
    st=$(ga_wsrep "$other" || true)
    read -r _ s _ <<<"$st" || true
    [[ "${s:-}" =~ ^[0-9]+$ ]] && (( s < before )) && break
    past "$dl" && { log "galera: node$other still reports '$st' after 30s"; return 0; }
    sleep 0.1
  done
  log "galera: node$other sees the loss after $(elapsed "$t0"): ready/size/state $st"
}

ga_node_start_action() { # node
  local n=$1 running count lines before how
  find_mariadb_tools
  ga_pid "$n" >/dev/null && { log "galera: node$n already running"; return 0; }
  running=$(ga_running_nodes)
  count=$(wc -w <<<"$running")
  (( count > 0 )) || die "galera: no node is running; use 'start galera' to bootstrap the cluster"
  local m primary=0
  for m in $running; do [[ "$(ga_wsrep "$m" || true)" == ON* ]] && primary=1; done
  (( primary )) || die "galera: no running node is in a primary component (quorum lost: ${running% } survived alone); use 'restart galera'"
  before=$(wc -l <"$(ga_log "$n")" 2>/dev/null || echo 0)
  # (A joiner that aborts is started again, as at a cluster start: seen in CI
  # on a rejoin under libfaketime, after which a chaos run's next node kill
  # left one node alone.)
  ga_join_retrying "$n" "$(( count + 1 ))"
  lines=$(tail -n +"$(( before + 1 ))" "$(ga_log "$n")")
  # The rsync script runs in both cases and says which one it did.
  if grep -q 'rsync IST completed' <<<"$lines"; then how=IST
  elif grep -q 'rsync SST completed' <<<"$lines"; then how='full SST (rsync)'
  else how='?'; fi
  log "galera: node$n rejoined via $how in $GA_LAST_START"
}

ga_check() {
  local n v rc=0 err
  for n in 1 2 3; do ga_pid "$n" >/dev/null || die "galera: node$n not running"; done
  myc() { # node sql
    mariadb --no-defaults -h127.0.0.1 -P"$(ga_port "$1")" -u"$TEST_USER" -p"$TEST_PASSWORD" \
      --batch --skip-column-names "$TEST_DB" -e "$2"
  }
  myc 1 "CREATE TABLE IF NOT EXISTS sg_topology_check (id INT PRIMARY KEY, v VARCHAR(64));
         REPLACE INTO sg_topology_check VALUES (1, NOW(6));"
  v=$(myc 1 "SELECT v FROM sg_topology_check WHERE id = 1")
  for n in 2 3; do
    if [[ "$(myc "$n" "SET SESSION wsrep_sync_wait = 1; SELECT v FROM sg_topology_check WHERE id = 1")" == "$v" ]]; then
      echo "galera check: OK, row written on node1 read on node$n"
    else
      echo "galera check: FAILED, node$n does not show the row"; rc=1
    fi
  done
  myc 1 "DROP SEQUENCE IF EXISTS sg_topology_seq"
  if err=$(myc 1 "CREATE SEQUENCE sg_topology_seq" 2>&1); then
    echo "galera check: CREATE SEQUENCE (default CACHE) succeeded"
  else
    echo "galera check: CREATE SEQUENCE (default CACHE) fails as expected: ${err##*$'\n'}"
  fi
  myc 1 "DROP SEQUENCE IF EXISTS sg_topology_seq"
  if err=$(myc 1 "CREATE SEQUENCE sg_topology_seq NOCACHE" 2>&1); then
    v=$(myc 2 "SET SESSION wsrep_sync_wait = 1; SELECT NEXTVAL(sg_topology_seq)" 2>&1) || rc=1
    echo "galera check: CREATE SEQUENCE ... NOCACHE works; NEXTVAL on node2 = $v, on node3 = $(myc 3 "SET SESSION wsrep_sync_wait = 1; SELECT NEXTVAL(sg_topology_seq)" 2>&1)"
    myc 1 "DROP SEQUENCE sg_topology_seq"
  else
    echo "galera check: FAILED, CREATE SEQUENCE ... NOCACHE: $err"; rc=1
  fi
  myc 1 "DROP TABLE sg_topology_check"
  for n in 1 2 3; do echo "galera node$n: ready/size/state $(ga_wsrep "$n")"; done
  return "$rc"
}

# -------------------------------------------------------------------- main ---

action='' target='' node='' purge=0 offset=''
for arg in "$@"; do
  if [[ "$action" == clock && -n "$node" && -z "$offset" ]]; then offset=$arg; continue; fi
  case "$arg" in
    -h|--help|help) usage; exit 0 ;;
    --purge) purge=1 ;;
    start|stop|restart|status|env|check|failover|node-kill|node-start|clock)
      [[ -z "$action" ]] || die "more than one action given"
      action=$arg ;;
    pgbouncer|pg-ha|pg-async|galera)
      [[ -z "$target" ]] || die "more than one target given"
      target=$arg ;;
    [1-3]) [[ -z "$node" ]] || die "more than one node number given"; node=$arg ;;
    *) usage; die "unknown argument: $arg" ;;
  esac
done
[[ -n "$action" ]] || { usage; die "no action given"; }
[[ -n "$target" ]] || { usage; die "no target given (pgbouncer, pg-ha, pg-async, galera)"; }
(( purge == 0 )) || [[ "$action" == stop ]] || die "--purge is only valid with stop"
case "$action" in
  failover) [[ "$target" == pg-ha || "$target" == pg-async ]] || die "failover is for pg-ha or pg-async" ;;
  node-kill|node-start|clock)
    [[ "$target" == galera ]] || die "$action is for galera"
    [[ -n "$node" ]] || die "$action galera needs a node number (1-3)"
    [[ "$action" != clock || -n "$offset" ]] || die "clock galera N needs an offset (+30s, -1h, 0)" ;;
  *) [[ -z "$node" ]] || die "a node number is only valid with node-kill/node-start" ;;
esac

for tool in ss ps flock setsid; do
  command -v "$tool" >/dev/null || die "'$tool' not found; run tools/deps.sh"
done
if (( IS_ROOT )); then
  command -v runuser >/dev/null || die "'runuser' not found (util-linux)"
fi

case "$target" in
  pg-ha|pg-async) pt_vars "$target" ;;
esac

if [[ "$action" == env ]]; then
  case "$target" in
    pgbouncer) pgb_env ;;
    pg-ha|pg-async) pt_env ;;
    galera) ga_env ;;
  esac
  exit 0
fi

if [[ "$action" == status ]]; then
  rc=0
  case "$target" in
    pgbouncer) pgb_status || rc=3 ;;
    pg-ha|pg-async) pt_status || rc=3 ;;
    galera) ga_status || rc=3 ;;
  esac
  exit "$rc"
fi

if [[ "$action" == check ]]; then
  case "$target" in
    pgbouncer) pgb_check ;;
    pg-ha|pg-async) pt_check ;;
    galera) ga_check ;;
  esac
  exit $?
fi

# A clock step takes no lock: it only rewrites one offset file, and a chaos
# run steps clocks while a node-start (which holds the lock) rejoins a node.
if [[ "$action" == clock ]]; then
  ga_clock "$node" "$offset"
  exit 0
fi

if [[ "$action" == stop && ! -d "$BASE" ]]; then
  log "nothing to stop ($BASE does not exist)"
  exit 0
fi
prepare_base
take_lock "$target"

do_start() {
  case "$target" in
    pgbouncer) pgb_start ;;
    pg-ha|pg-async) pt_start ;;
    galera) ga_start ;;
  esac
}
do_stop() {
  case "$target" in
    pgbouncer) pgb_stop ;;
    pg-ha|pg-async) pt_stop ;;
    galera) ga_stop ;;
  esac
}

case "$action" in
  start) do_start ;;
  stop)
    do_stop
    if (( purge )); then
      case "$target" in
        pgbouncer) d=$PGB_DIR ;; pg-ha|pg-async) d=$PT_DIR ;; galera) d=$GA_DIR ;;
      esac
      if [[ -e "$d" ]]; then log "$target: purging $d"; rm -rf "$d"; fi
      rm -f "$BASE/.lock-$target"
    fi ;;
  restart) do_stop; do_start ;;
  failover) pt_failover ;;
  node-kill) ga_node_kill "$node" ;;
  node-start) find_mariadb_tools; ga_node_start_action "$node" ;;
esac
exit 0
