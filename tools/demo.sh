#!/usr/bin/env bash
# Build the sqlguard CLI and run a demo against a local SQLite file; no
# database servers needed.
#
# Usage: tools/demo.sh [args for `sqlguard demo`...]
#
# Installs build dependencies (tools/deps.sh --no-servers), configures and
# builds into ${SQLGUARD_BUILD_DIR:-build}, then runs `sqlguard demo "$@"` if the
# CLI has a demo subcommand, else migrates sqlite://demo.db and acquires a lock.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${SQLGUARD_BUILD_DIR:-build}
CLI=$BUILD_DIR/tools/sqlguard
[[ "$CLI" == */* ]] || CLI=./$CLI

log() { printf 'demo.sh: %s\n' "$*" >&2; }
step() { printf '\n==> %s\n' "$*" >&2; }

step "dependencies (tools/deps.sh --no-servers)"
tools/deps.sh --no-servers

step "configure: cmake -S . -B $BUILD_DIR -DCMAKE_BUILD_TYPE=RelWithDebInfo"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo

step "build: cmake --build $BUILD_DIR -j$(nproc)"
cmake --build "$BUILD_DIR" -j"$(nproc)"

[[ -x "$CLI" ]] || { log "error: the CLI was not built at $CLI"; exit 1; }

# A subcommand line in the help output looks like "  demo   Run a ...".
help_text=$("$CLI" --help 2>&1 || true)
if grep -Eq '^[[:space:]]+demo([[:space:]]|$)' <<<"$help_text"; then
  step "$CLI demo $*"
  exec "$CLI" demo "$@"
fi

(( $# == 0 )) || log "warning: '$CLI' has no demo subcommand; ignoring arguments: $*"
step "$CLI --db sqlite://demo.db migrate"
"$CLI" --db sqlite://demo.db migrate
step "$CLI --db sqlite://demo.db lock acquire demo-lock --ttl 30s --json"
"$CLI" --db sqlite://demo.db lock acquire demo-lock --ttl 30s --json
