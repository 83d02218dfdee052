#!/usr/bin/env bash
# Install every Debian package sqlguard needs (build, tests, throwaway DB servers).
#
# Usage: tools/deps.sh [--demo | --no-servers] [--topologies]
#   --demo         only what tools/demo.sh builds: the library with SQLite and
#                  the CLI (no drivers of other dialects, no test or example
#                  packages, no servers).
#   --no-servers   skip PostgreSQL / MariaDB servers and clients.
#   --topologies   also the multi-server topologies of tools/topologies.sh
#                  (Patroni + etcd, PgBouncer, Galera with rsync SST); implies
#                  the servers. Not part of the default set.
#
# Idempotent: when everything is already installed it prints nothing and touches
# nothing (no apt-get update). Missing packages are installed with apt-get,
# via sudo when not running as root.
set -euo pipefail

log() { printf 'deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() { # the header comment above
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2
}

with_servers=1
with_topologies=0
demo=0
for arg in "$@"; do
  case "$arg" in
    --demo) demo=1; with_servers=0 ;;
    --no-servers) with_servers=0 ;;
    --topologies) with_topologies=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument: $arg" ;;
  esac
done

demo_packages=(build-essential cmake pkg-config ccache libsqlite3-dev sqlite3 libssl-dev libcli11-dev nlohmann-json3-dev)
packages=(
  build-essential cmake pkg-config ccache
  libpqxx-dev libpq-dev
  libsqlite3-dev sqlite3
  libmysqlcppconn-dev
  catch2 libcli11-dev nlohmann-json3-dev libssl-dev
  libhiredis-dev
  procps iproute2
  # the bench tables' checks (tools/bench_*.py) and the servers' port probe (tools/ports_lib.sh)
  python3
  # the reference service (examples/) and its test: HTTP, NATS JetStream, Prometheus
  nats-server libnats-dev libcpp-httplib-dev prometheus-cpp-dev prometheus curl
  # Boost.Asio (headers): examples/async-waiters and the Asio sample of docs/async.md
  libboost-dev
  # the Debian packages (cpack -G DEB): the CLI's man page, and their check (tests/deb/run.sh)
  help2man lintian
)
if (( demo )); then
  (( ! with_topologies )) || die "--demo and --topologies do not go together"
  packages=("${demo_packages[@]}")
fi
if (( with_servers || with_topologies )); then
  # redis-server and etcd-server: the bench's comparators (tools/bench.sh)
  # and the etcd client's test (tools/etcdserver.sh).
  packages+=(postgresql postgresql-client mariadb-server mariadb-client redis-server etcd-server)
  # libfaketime: the chaos clock-step fault (servers and workers whose wall
  # clock steps; tools/dbservers.sh clock).
  packages+=(faketime)
fi
if (( with_topologies )); then
  # python3-etcd: Patroni's etcd3 module imports it (the package only
  # depends on one of several DCS clients). rsync (+ iproute2's ss) is all
  # wsrep_sst_rsync needs here; socat is only for mariabackup SST.
  packages+=(patroni python3-etcd pgbouncer galera-4 rsync)
fi

command -v dpkg-query >/dev/null 2>&1 \
  || die "dpkg-query not found: this script supports Debian/Ubuntu only"

# Prints the packages of "$@" that are not fully installed (one dpkg-query call;
# unknown packages make it exit non-zero, which just means "missing").
not_installed() {
  local installed
  installed=$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null \
                | awk '$2 == "install" && $3 == "ok" && $4 == "installed" { print $1 }' \
              || true)
  local pkg
  for pkg in "$@"; do
    grep -qxF "$pkg" <<<"$installed" || printf '%s\n' "$pkg"
  done
}

mapfile -t missing < <(not_installed "${packages[@]}")

if (( ${#missing[@]} == 0 )); then
  exit 0
fi

log "missing packages: ${missing[*]}"

as_root=()
if (( EUID != 0 )); then
  if command -v sudo >/dev/null 2>&1; then
    log "not running as root; using sudo to install them"
    as_root=(sudo)
  else
    die "not running as root and sudo is not available; as root run:
  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  fi
fi

export DEBIAN_FRONTEND=noninteractive
log "running apt-get update"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
  || die "apt-get update failed"
log "installing: ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" \
  || die "apt-get install failed for: ${missing[*]}"

# Verify: a typo'd or unavailable package would otherwise slip through silently.
mapfile -t still_missing < <(not_installed "${missing[@]}")
(( ${#still_missing[@]} == 0 )) || die "still not installed: ${still_missing[*]}"
log "done"
