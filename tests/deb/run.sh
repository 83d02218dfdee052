#!/usr/bin/env bash
# The Debian packages work on this machine: builds them from the build tree
# (cpack -G DEB), checks each package's Depends against the dialects built,
# installs them (dpkg -i; apt-get install -f for missing dependencies), builds
# and runs consumers against /usr (find_package and pkg-config, no prefix
# given) and the installed CLI, then purges the packages again - always, by
# trap, also on failure.
#
# Needs root (dpkg -i) and changes /usr, so it runs only when asked:
# SQLGUARD_TEST_DEB=1 (.ci/run sets it; CI runs as root). Otherwise, and when
# not root, it exits 77 (ctest: skipped). It refuses to run when any of the
# packages is already installed (it would purge someone's install).
#
# Usage: run.sh SOURCE_DIR BUILD_DIR "COMPONENTS"   (ctest -L deb)
set -euo pipefail
src=$1 build=$2 components=${3:-}
say() { printf 'deb: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
skip() { say "skipped: $*"; exit 77; }

[[ "${SQLGUARD_TEST_DEB:-0}" == 1 ]] || skip "set SQLGUARD_TEST_DEB=1 to install the packages on this machine (needs root)"
[[ "$(id -u)" == 0 ]] || skip "needs root for dpkg -i"
for tool in dpkg dpkg-deb dpkg-shlibdeps cpack pkg-config; do
  command -v "$tool" >/dev/null || fail "$tool not found (Debian: dpkg-dev, cmake, pkg-config)"
done

pkgs=(sqlguard libsqlguard-dev libsqlguard0)
# One run at a time on a machine (they install into /usr).
exec 9>/tmp/sqlguard-deb-test.lock
flock 9
for p in "${pkgs[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == *" installed" ]]; then
    fail "$p is already installed: not touching it (dpkg --purge ${pkgs[*]} first)"
  fi
done

work=$(mktemp -d /tmp/sqlguard-deb.XXXXXX)
installed=0
cleanup() {
  local rc=$?
  if (( installed )); then
    say "purging ${pkgs[*]}"
    dpkg --purge "${pkgs[@]}" >/dev/null || { say "warning: dpkg --purge failed"; rc=1; }
    [[ ! -e /usr/lib/libsqlguard.so.0 && ! -e /usr/include/sqlguard/connection.h ]] \
      || { say "FAIL: files left in /usr after the purge"; rc=1; }
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "cpack -G DEB"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/packages" >"$work/cpack.log" 2>&1 \
  || { cat "$work/cpack.log" >&2; fail "cpack failed"; }
debs=("$work"/packages/*.deb)
(( ${#debs[@]} == 3 )) || fail "expected 3 packages, got: ${debs[*]}"
for d in "${debs[@]}"; do
  say "$(basename "$d"): $(dpkg-deb -f "$d" Depends)"
done

# Depends follow the dialects built: libsqlguard0 needs a driver's runtime
# package exactly when that dialect is in.
runtime_deps=$(dpkg-deb -f "$work"/packages/libsqlguard0_*.deb Depends)
check_dep() { # component regex
  if [[ " $components " == *" $1 "* ]]; then
    [[ "$runtime_deps" =~ $2 ]] || fail "libsqlguard0 lacks a $2 dependency though $1 was built: $runtime_deps"
  else
    [[ ! "$runtime_deps" =~ $2 ]] || fail "libsqlguard0 depends on $2 though $1 was not built: $runtime_deps"
  fi
}
check_dep sqlite 'libsqlite3'
check_dep postgresql 'libpqxx'
check_dep mysql 'libmysqlcppconn'
check_dep prometheus 'libprometheus-cpp-core'
[[ "$(dpkg-deb -f "$work"/packages/libsqlguard-dev_*.deb Depends)" == *"libsqlguard0 (="* ]] \
  || fail "libsqlguard-dev does not depend on its libsqlguard0"

say "dpkg -i"
installed=1
if ! dpkg -i "${debs[@]}" >"$work/dpkg.log" 2>&1; then
  say "dpkg -i left dependencies missing: apt-get install -f"
  apt-get install -f -y --no-install-recommends >>"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "apt-get install -f failed"; }
fi
for p in "${pkgs[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$p")" == "install ok installed" ]] || fail "$p is not installed"
done

# Consumers against /usr: nothing points at a prefix.
unset CMAKE_PREFIX_PATH PKG_CONFIG_PATH LD_LIBRARY_PATH
cxx=${CXX:-c++}
say "find_package(sqlguard) from /usr"
if ! { cmake -S "$src/tests/consumer" -B "$work/consumer" -DCONSUMER_MODE=core && cmake --build "$work/consumer"; } \
     >"$work/consumer.log" 2>&1; then
  cat "$work/consumer.log" >&2
  fail "consumer build"
fi
grep -q 'sqlguard_DIR:PATH=/usr/lib' "$work/consumer/CMakeCache.txt" || fail "find_package did not find /usr's sqlguard"
out=$("$work/consumer/consumer" deb-find_package) || fail "find_package consumer: $out"
say "$out"
say "pkg-config sqlguard from /usr: $(pkg-config --cflags --libs sqlguard)"
# shellcheck disable=SC2046
"$cxx" -std=c++20 "$src/tests/consumer/main.cpp" $(pkg-config --cflags --libs sqlguard) -o "$work/consumer-pc"
libs=$(ldd "$work/consumer-pc")  # (no `| grep -q` under pipefail: an early exit is SIGPIPE)
[[ "$libs" =~ libsqlguard\.so\.0\ =\>\ (/usr)?/lib/ ]] \
  || fail "the pkg-config consumer does not load /usr's libsqlguard: $libs"
out=$("$work/consumer-pc" deb-pkg-config) || fail "pkg-config consumer: $out"
say "$out"
if dpkg-query -W sqlguard >/dev/null 2>&1 && [[ -x /usr/bin/sqlguard ]]; then
  say "/usr/bin/sqlguard migrate"
  /usr/bin/sqlguard --db "sqlite://$work/cli.db" migrate >&2 || fail "/usr/bin/sqlguard migrate"
fi
say "ok"
