# Sourced by tools/bench.sh, the side runs (bench_barging.sh, bench_cart.sh, bench_coalesced.sh, bench_history.sh,
# bench_lockset.sh) and tools/churn_soak.sh: their messages, the
# binary, the output directory and the durable throwaway servers of a
# published run. Needs $here (tools/) and $prog (the messages' prefix).

root=$(cd "$here/.." && pwd)
log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0" >&2; }

# Sets bin (the sqlguard binary) and out (the output directory, created, absolute).
bench_bin_and_out() {
  bin=${SQLGUARD_BIN:-$root/build/tools/sqlguard}
  [[ -x "$bin" ]] || die "no sqlguard binary at $bin (build first, or set SQLGUARD_BIN)"
  out=${BENCH_OUT:-$root/bench-results}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
}

# The machine lines every run's settings.txt starts with (the run id is its date).
bench_settings_head() { # run_id
  echo "run_id: $1"
  echo "date: $1"
  echo "host: $(uname -sr) $(uname -m), $(nproc) cores, $(awk '/MemTotal/ {printf "%d MB", $2 / 1024}' /proc/meminfo)"
  echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
}

# Copies `bench --json` cells from stdin to stdout, each with "round": ROUND added.
bench_tag_round() { # round
  python3 -c 'import json, sys
r = int(sys.argv[1])
for line in sys.stdin:
    if line.strip():
        c = json.loads(line); c["round"] = r; print(json.dumps(c, sort_keys=True))' "$1"
}

# A dialect's database: the bench servers' (after bench_start_servers), or an
# SQLite file in DIR.
bench_uri_of() { # dialect sqlite_dir
  case "$1" in
    sqlite) echo "sqlite://$2/bench.db" ;;
    postgresql) echo "$SQLGUARD_TEST_PG_URI" ;;
    mysql) echo "$SQLGUARD_TEST_MYSQL_URI" ;;
    *) die "unknown dialect $1" ;;
  esac
}

# The bench servers: their own ports and directory (never the test servers'), durable settings.
bench_server_env() {
  export SQLGUARD_PG_PORT=${SQLGUARD_PG_PORT:-56432}
  export SQLGUARD_MARIADB_PORT=${SQLGUARD_MARIADB_PORT:-56306}
  export SQLGUARD_SERVERS_DIR=${SQLGUARD_SERVERS_DIR:-/tmp/sqlguard-bench-servers}
  export SQLGUARD_DURABLE=1
}

# Starts them (restarts them with durable settings when they already run) and
# exports SQLGUARD_TEST_PG_URI / SQLGUARD_TEST_MYSQL_URI.
bench_start_servers() {
  if "$root/tools/dbservers.sh" status all >/dev/null 2>&1; then
    log "bench servers already running in $SQLGUARD_SERVERS_DIR (restarting them with durable settings)"
    "$root/tools/dbservers.sh" restart all >&2
  else
    log "starting durable PostgreSQL :$SQLGUARD_PG_PORT and MariaDB :$SQLGUARD_MARIADB_PORT in $SQLGUARD_SERVERS_DIR"
    "$root/tools/dbservers.sh" start all >&2
  fi
  eval "$("$root/tools/dbservers.sh" env)"
}

# A side run's servers (bench_barging.sh, bench_cart.sh, bench_history.sh,
# bench_lockset.sh): the durable bench servers when $dialects names a server
# dialect, stopped on exit, after the script's `side_cleanup` (if it defines
# one) has removed what it leaves.
bench_side_servers() {
  bench_server_env
  bench_started=0
  trap bench_side_exit EXIT
  trap 'exit 130' INT TERM
  if [[ " $dialects " == *" postgresql "* || " $dialects " == *" mysql "* ]]; then
    bench_start_servers
    bench_started=1
  fi
}
bench_side_exit() {
  local rc=$?
  if (( bench_started )); then bench_stop_servers; fi
  if declare -F side_cleanup >/dev/null; then side_cleanup; fi
  exit $rc
}

# A side run of one bench command per dialect of $dialects (SQLite: the
# file $out/DB.db): `sqlguard --db URI --json bench ARGS... --run-id $run_id`
# into $out/<dialect>.json, its messages in $out/<dialect>.txt.
bench_side_dialects() { # db what args...
  local db=$1 what=$2 d uri
  shift 2
  for d in $dialects; do
    case "$d" in
      sqlite) uri="sqlite://$out/$db.db" ;;
      postgresql) uri=$SQLGUARD_TEST_PG_URI ;;
      mysql) uri=$SQLGUARD_TEST_MYSQL_URI ;;
      *) die "unknown dialect $d (sqlite, postgresql, mysql)" ;;
    esac
    log "$d: $what"
    "$bin" --db "$uri" migrate >/dev/null
    "$bin" --db "$uri" --json bench "$@" --run-id "$run_id" \
      >"$out/$d.json" 2>>"$out/$d.txt" || { cat "$out/$d.txt" >&2; die "$d bench failed"; }
  done
}

# --publish of a side run: its files into docs/bench/SUB/ and DOC's tables
# rewritten from them (tools/bench_tables.py).
bench_side_publish() { # sub doc
  local dest=$root/docs/bench/$1 d
  mkdir -p "$dest"
  rm -f "$dest"/*.json
  for d in $dialects; do cp "$out/$d.json" "$dest/"; done
  cp "$out/settings.txt" "$dest/"
  python3 "$here/bench_tables.py" "$root/docs/bench" --write "$root/$2"
  log "published to docs/bench/$1/ and $2"
}

# Stops them (an EXIT trap's part, for the script that started them).
bench_stop_servers() {
  log "stopping the bench servers"
  "$root/tools/dbservers.sh" stop all >&2 || true
}

# A throwaway redis-server on 127.0.0.1:$1 (appendfsync always: the closest
# Redis gets to the databases' durable commits), its files in $out; sets
# redis_pidfile (bench_stop_redis stops it). A previous run's AOF would be
# reloaded first (and answer LOADING to the first commands): removed.
bench_start_redis() {
  redis_pidfile=$out/.redis.pid
  rm -rf "$out/appendonlydir"
  redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync always \
    --dir "$out" --appendfilename bench-redis.aof --daemonize yes --pidfile "$redis_pidfile" \
    --logfile "$out/redis.log" >/dev/null
  for _ in $(seq 50); do [[ -f "$redis_pidfile" ]] && break; sleep 0.1; done
  [[ -f "$redis_pidfile" ]] || die "redis-server on port $1 did not start (see $out/redis.log)"
}

bench_stop_redis() {
  if [[ -n "${redis_pidfile:-}" && -f "$redis_pidfile" ]]; then
    kill "$(cat "$redis_pidfile")" 2>/dev/null || true
    rm -f "$redis_pidfile"
  fi
}

# Sets publish=1 for --publish; prints the usage for -h/--help; refuses
# anything else (the side runs: bench_barging.sh, bench_coalesced.sh).
bench_publish_flag() {
  publish=0
  local arg
  for arg in "$@"; do
    case "$arg" in
      --publish) publish=1 ;;
      -h|--help) usage; exit 0 ;;
      *) usage; die "unknown argument: $arg" ;;
    esac
  done
}
