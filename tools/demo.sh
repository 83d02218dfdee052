#!/usr/bin/env bash
# Build the sqlguard CLI and run a demo against a local SQLite file; no
# database servers needed.
#
# Usage: tools/demo.sh [args for `sqlguard demo`...]
#
# Installs what the demo's build needs (tools/deps.sh --demo), configures
# ${SQLGUARD_BUILD_DIR:-build} without the test suite and the examples, builds
# only the CLI (and the library it links), then runs `sqlguard demo "$@"`.
# tools/test.sh, run afterwards on the same build directory, switches the
# tests and examples back on and reuses what was built.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${SQLGUARD_BUILD_DIR:-build}
CLI=$BUILD_DIR/tools/sqlguard
[[ "$CLI" == */* ]] || CLI=./$CLI

log() { printf 'demo.sh: %s\n' "$*" >&2; }
step() { printf '\n==> %s\n' "$*" >&2; }

step "dependencies (tools/deps.sh --demo)"
tools/deps.sh --demo

launcher=()
if command -v ccache >/dev/null; then  # as tools/test.sh: the same cache serves both
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=1
fi
step "configure: cmake -S . -B $BUILD_DIR -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSQLGUARD_BUILD_TESTS=OFF -DSQLGUARD_BUILD_EXAMPLES=OFF"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSQLGUARD_BUILD_TESTS=OFF -DSQLGUARD_BUILD_EXAMPLES=OFF \
  -DSQLGUARD_BUILD_TOOLS=ON "${launcher[@]}"

step "build: cmake --build $BUILD_DIR --target sqlguard_cli -j$(nproc) (the CLI and the library)"
cmake --build "$BUILD_DIR" --target sqlguard_cli -j"$(nproc)"

[[ -x "$CLI" ]] || { log "error: the CLI was not built at $CLI"; exit 1; }

step "$CLI demo $*"
exec "$CLI" demo "$@"
