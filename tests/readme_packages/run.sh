#!/usr/bin/env bash
# The README's package list is enough for the README's own configure (issue
# 39): the build is configured, in a fresh directory, with the cmake flags the
# README's "Install and link" shows, while every package CMake looks up that
# the README does not list is made unfindable (CMAKE_DISABLE_FIND_PACKAGE_*,
# cache entries set to NOTFOUND). The configure must succeed and build the
# library and the CLI. Negative control: the same with one listed package
# (CLI11) made unfindable must fail, or the hiding proves nothing.
# Usage: run.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work"
mkdir -p "$work"

# The section, its packages (backticked words that are Debian package names)
# and the first `cmake -S` line of its shell block.
section=$(awk '/^## Install and link/ { on = 1; next } /^## / { on = 0 } on' "$src/README.md")
[[ -n $section ]] || { echo "readme_packages: FAIL: README.md has no '## Install and link' section" >&2; exit 1; }
# (A backticked list may wrap: the section is one line for this.)
mapfile -t listed < <(tr '\n' ' ' <<<"$section" | grep -o '`[^`]*`' | tr -d '`' | tr ' ' '\n' |
  grep -E '^(build-essential|cmake|pkg-config|catch2|[a-z0-9.+]+(-[a-z0-9.+]+)*-dev)$' | sort -u)
configure=$(grep -m1 -E '^cmake -S \. -B build' <<<"$section" || true)
[[ -n $configure ]] || { echo "readme_packages: FAIL: no 'cmake -S . -B build' line in the README's install section" >&2; exit 1; }
read -r -a readme_flags <<<"${configure#cmake -S . -B build}"
echo "readme_packages: the README lists: ${listed[*]}" >&2
echo "readme_packages: its configure flags: ${readme_flags[*]}" >&2

is_listed() { local p; for p in "${listed[@]}"; do [[ $p == "$1" ]] && return 0; done; return 1; }

# What CMake looks up (CMakeLists.txt, src/dialect/*/dialect.cmake, tools/,
# tests/, examples/) and the Debian package that provides it.
declare -A by_find_package=(
  [OpenSSL]=libssl-dev [PkgConfig]=pkg-config [SQLite3]=libsqlite3-dev [Boost]=libboost-dev
  [CLI11]=libcli11-dev [nlohmann_json]=nlohmann-json3-dev [Catch2]=catch2 [prometheus-cpp]=prometheus-cpp-dev
)
declare -A by_cache_entry=(  # find_path / find_library results
  [MYSQLCPPCONN_INCLUDE_DIR]=libmysqlcppconn-dev [MYSQLCPPCONN_LIBRARY]=libmysqlcppconn-dev
  [HIREDIS_INCLUDE_DIR]=libhiredis-dev [HIREDIS_LIBRARY]=libhiredis-dev
  [NATS_INCLUDE_DIR]=libnats-dev [NATS_LIBRARY]=libnats-dev
)

hidden_flags() { # extra packages to hide...
  local flags=() name
  for name in "${!by_find_package[@]}"; do
    if ! is_listed "${by_find_package[$name]}" || [[ " $* " == *" ${by_find_package[$name]} "* ]]; then
      flags+=("-DCMAKE_DISABLE_FIND_PACKAGE_$name=ON")
    fi
  done
  for name in "${!by_cache_entry[@]}"; do
    if ! is_listed "${by_cache_entry[$name]}" || [[ " $* " == *" ${by_cache_entry[$name]} "* ]]; then
      flags+=("-D$name=$name-NOTFOUND")
    fi
  done
  printf '%s\n' "${flags[@]}"
}

# pkg-config modules (libpqxx, cpp-httplib): only those of listed packages
# are visible, through a directory holding just their .pc files.
pcdir="$work/pkgconfig"
mkdir -p "$pcdir"
for pkg in "${listed[@]}"; do
  dpkg -L "$pkg" 2>/dev/null | grep -E '\.pc$' | while read -r pc; do ln -sf "$pc" "$pcdir/"; done || true
done
# libpqxx.pc requires libpq.pc (libpq-dev, a dependency of libpqxx-dev).
if is_listed libpqxx-dev; then
  dpkg -L libpq-dev 2>/dev/null | grep -E '\.pc$' | while read -r pc; do ln -sf "$pc" "$pcdir/"; done || true
fi

run_configure() { # dir extra-hidden-packages...
  local dir=$1
  shift
  mapfile -t hide < <(hidden_flags "$@")
  PKG_CONFIG_LIBDIR=$pcdir PKG_CONFIG_PATH= cmake -S "$src" -B "$dir" "${readme_flags[@]}" "${hide[@]}" \
    >"$dir.log" 2>&1
}

if ! run_configure "$work/readme"; then
  echo "readme_packages: FAIL: the README's configure fails with only the README's packages:" >&2
  tail -30 "$work/readme.log" >&2
  exit 1
fi
targets=$(cmake --build "$work/readme" --target help 2>/dev/null)
for target in sqlguard sqlguard_cli; do
  if ! grep -qx "\.\.\. $target" <<<"$targets"; then
    echo "readme_packages: FAIL: the README's configure does not build $target" >&2
    exit 1
  fi
done
echo "readme_packages: the README's configure works with only its packages (library and CLI)" >&2

if run_configure "$work/control" libcli11-dev; then
  echo "readme_packages: FAIL: negative control: the configure passed with CLI11 hidden (hiding proves nothing)" >&2
  exit 1
fi
grep -q "CLI11" "$work/control.log" || { echo "readme_packages: FAIL: negative control failed for another reason:" >&2; tail -20 "$work/control.log" >&2; exit 1; }
echo "readme_packages: negative control: with CLI11 hidden the configure fails, naming it" >&2
