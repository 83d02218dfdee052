#!/usr/bin/env bash
# The Debian packages work on this machine: builds them from the build tree
# (tools/packages.sh: cpack -G DEB and its repairs), checks them with lintian
# (with a negative control: a package without its copyright file is caught),
# checks that each package's binaries are stripped into its -dbgsym .ddeb and
# that Depends follow what was built and split what is optional (the CLI
# needs neither prometheus-cpp nor the bench comparators' hiredis and
# cpp-httplib), installs them (dpkg -i; apt-get install -f for missing
# dependencies), builds and runs consumers against /usr (find_package and
# pkg-config, no prefix given) and the installed CLI (with and without the
# comparators package), then purges the packages again - always, by trap,
# also on failure.
#
# Needs root (dpkg -i) and changes /usr, so it runs only when asked:
# SQLGUARD_TEST_DEB=1 (.ci/run sets it; CI runs as root). Otherwise, and when
# not root, it exits 77 (ctest: skipped). It refuses to run when any of the
# packages is already installed (it would purge someone's install).
#
# Usage: run.sh SOURCE_DIR BUILD_DIR "COMPONENTS" "PACKAGES"   (ctest -L deb)
set -Eeuo pipefail
src=$1 build=$2 components=${3:-} packages=${4:-}
say() { printf 'deb: %s\n' "$*" >&2; }
# A command that fails outside a check (set -e) still says where.
trap 'say "FAIL: line $LINENO: $BASH_COMMAND"' ERR
fail() { say "FAIL: $*"; exit 1; }
skip() { say "skipped: $*"; exit 77; }

[[ "${SQLGUARD_TEST_DEB:-0}" == 1 ]] || skip "set SQLGUARD_TEST_DEB=1 to install the packages on this machine (needs root)"
[[ "$(id -u)" == 0 ]] || skip "needs root for dpkg -i"
for tool in dpkg dpkg-deb dpkg-shlibdeps cpack pkg-config lintian readelf; do
  command -v "$tool" >/dev/null || fail "$tool not found (Debian: dpkg-dev, cmake, pkg-config, lintian, binutils)"
done
[[ -n "$packages" ]] || fail "no package list given (tests/CMakeLists.txt passes SQLGUARD_DEB_PACKAGES)"

read -r -a pkgs <<<"$packages"
has_pkg() { [[ " $packages " == *" $1 "* ]]; }
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
    [[ ! -e /usr/lib/libsqlguard.so.0 && ! -e /usr/include/sqlguard/connection.h && ! -e /usr/lib/sqlguard ]] \
      || { say "FAIL: files left in /usr after the purge"; rc=1; }
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "tools/packages.sh"
"$src/tools/packages.sh" "$build" "$work/packages" >"$work/packages.log" 2>&1 \
  || { cat "$work/packages.log" >&2; fail "tools/packages.sh failed"; }
debs=()
for p in "${pkgs[@]}"; do
  d=("$work"/packages/"${p}"_*.deb)
  [[ -f "${d[0]}" ]] || fail "no package $p: $(ls "$work/packages")"
  debs+=("${d[0]}")
  say "$p $(dpkg-deb -f "${d[0]}" Installed-Size) KiB: Depends: $(dpkg-deb -f "${d[0]}" Depends)"
done
all=("$work"/packages/*.deb)
(( ${#all[@]} == ${#pkgs[@]} )) || fail "expected the packages ${pkgs[*]}, got: ${all[*]}"
deb_of() { local d=("$work"/packages/"$1"_*.deb); echo "${d[0]}"; }

# lintian: no error and no warning. Suppressed, one tag: initial-upload-
# closes-no-bugs (the Debian archive's ITP bug; these are not uploaded).
lint=(lintian --fail-on error,warning --suppress-tags initial-upload-closes-no-bugs --tag-display-limit 0)
say "lintian"
"${lint[@]}" "$work"/packages/*.deb "$work"/packages/*.ddeb >&2 || fail "lintian found errors or warnings (above)"
# Negative control: the same check on libsqlguard0 without its copyright file fails.
mkdir -p "$work/control"
dpkg-deb -R "$(deb_of libsqlguard0)" "$work/control/p"
rm "$work/control/p/usr/share/doc/libsqlguard0/copyright"
dpkg-deb --root-owner-group -b "$work/control/p" "$work/control/libsqlguard0_broken.deb" >/dev/null
if control=$("${lint[@]}" "$work/control/libsqlguard0_broken.deb" 2>&1); then
  fail "negative control: lintian passed a package without its copyright file"
fi
[[ "$control" == *no-copyright-file* ]] || fail "negative control: lintian failed, but not on no-copyright-file: $control"

# Stripped, with the debug information in each package's -dbgsym .ddeb
# (matched by build id).
for p in "${pkgs[@]}"; do
  d=$(deb_of "$p")
  mkdir -p "$work/x/$p"
  dpkg-deb -x "$d" "$work/x/$p"
  elves=0
  while IFS= read -r -d '' f; do
    [[ "$(head -c4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]] || continue
    elves=$((elves + 1))
    sections=$(readelf -S --wide "$f")
    [[ "$sections" != *.debug_info* ]] || fail "$p: ${f#"$work/x/$p"} is not stripped"
    id=$(readelf -n "$f" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
    [[ -n "$id" ]] || fail "$p: ${f#"$work/x/$p"} has no build id"
    dd=("$work"/packages/"$p"-dbgsym_*.ddeb)
    [[ -f "${dd[0]}" ]] || fail "$p has ELF files but no -dbgsym package"
    listing=$(dpkg-deb -c "${dd[0]}")  # (no `| grep -q` under pipefail: an early exit is SIGPIPE)
    [[ "$listing" == *"usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"* ]] \
      || fail "$p-dbgsym lacks the debug file of ${f#"$work/x/$p"} (build id $id)"
  done < <(find "$work/x/$p" -type f -print0)
  # Every package but the headers one has binaries (none found: the check above saw nothing).
  if [[ "$p" == libsqlguard-dev ]]; then
    (( elves == 0 )) || fail "libsqlguard-dev carries ELF files"
  else
    (( elves > 0 )) || fail "$p: no ELF file found in it"
    say "$p: $elves ELF file(s), stripped, debug information in $p-dbgsym"
  fi
done

# Depends follow the dialects built: libsqlguard0 needs a driver's runtime
# package exactly when that dialect is in. What is optional is split off.
runtime_deps=$(dpkg-deb -f "$(deb_of libsqlguard0)" Depends)
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
[[ ! "$runtime_deps" =~ prometheus ]] || fail "libsqlguard0 depends on prometheus-cpp: $runtime_deps"
if [[ " $components " == *" prometheus "* ]]; then
  has_pkg libsqlguard-prometheus0 || fail "prometheus was built but there is no libsqlguard-prometheus0"
  [[ "$(dpkg-deb -f "$(deb_of libsqlguard-prometheus0)" Depends)" =~ libprometheus-cpp-core ]] \
    || fail "libsqlguard-prometheus0 does not depend on libprometheus-cpp-core"
fi
[[ "$(dpkg-deb -f "$(deb_of libsqlguard-dev)" Depends)" == *"libsqlguard0 (="* ]] \
  || fail "libsqlguard-dev does not depend on its libsqlguard0"
if has_pkg sqlguard; then
  cli_deps=$(dpkg-deb -f "$(deb_of sqlguard)" Depends)
  [[ ! "$cli_deps" =~ hiredis|httplib|prometheus ]] || fail "sqlguard (the CLI) depends on an optional part: $cli_deps"
fi
if has_pkg sqlguard-bench-comparators; then
  [[ "$(dpkg-deb -f "$(deb_of sqlguard)" Suggests)" == *sqlguard-bench-comparators* ]] \
    || fail "sqlguard does not suggest sqlguard-bench-comparators"
fi

# First without the comparators: `bench --redis` then names their package.
first=()
for d in "${debs[@]}"; do [[ "$(basename "$d")" == sqlguard-bench-comparators_* ]] || first+=("$d"); done
say "dpkg -i ${#first[@]} packages"
installed=1
if ! dpkg -i "${first[@]}" >"$work/dpkg.log" 2>&1; then
  say "dpkg -i left dependencies missing: apt-get install -f"
  apt-get install -f -y --no-install-recommends >>"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "apt-get install -f failed"; }
fi
if has_pkg sqlguard-bench-comparators; then
  out=$(/usr/bin/sqlguard --db "sqlite://$work/cli.db" bench --ops lease-hot --redis 127.0.0.1:9 2>&1) \
    && fail "bench --redis without the comparators package succeeded: $out"
  [[ "$out" == *"install the package sqlguard-bench-comparators"* ]] \
    || fail "bench --redis without the comparators package does not name it: $out"
  say "without sqlguard-bench-comparators: $out"
  if ! dpkg -i "$(deb_of sqlguard-bench-comparators)" >>"$work/dpkg.log" 2>&1; then
    apt-get install -f -y --no-install-recommends >>"$work/dpkg.log" 2>&1 \
      || { cat "$work/dpkg.log" >&2; fail "installing sqlguard-bench-comparators failed"; }
  fi
  # (apt-get install -f may also "fix" by removing it.)
  [[ "$(dpkg-query -W -f='${Status}' sqlguard-bench-comparators)" == "install ok installed" ]] \
    || { cat "$work/dpkg.log" >&2; fail "sqlguard-bench-comparators is not installed"; }
  # Loaded from /usr/lib/sqlguard/: the comparator now runs, and the refused
  # connection names Redis's address.
  out=$(/usr/bin/sqlguard --db "sqlite://$work/cli.db" bench --ops lease-hot --redis 127.0.0.1:9 --duration 1s 2>&1) \
    && fail "bench --redis 127.0.0.1:9 succeeded: $out"
  [[ "$out" == *"redis 127.0.0.1:9"* ]] || fail "bench --redis with the comparators package: $out"
  say "with sqlguard-bench-comparators: $out"
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
if has_pkg sqlguard; then
  say "/usr/bin/sqlguard migrate"
  /usr/bin/sqlguard --db "sqlite://$work/cli.db" migrate >&2 || fail "/usr/bin/sqlguard migrate"
  [[ -f /usr/share/man/man1/sqlguard.1.gz ]] || fail "no man page /usr/share/man/man1/sqlguard.1.gz"
fi
say "ok"
