#!/usr/bin/env bash
# A new lock kind is one source file, its statements and one line (issue 37,
# item 4). Copies this source tree and adds "stubmutex", a one-permit mutex on
# the holdings engine:
#   src/strategies/kinds/stub_mutex.cpp    the kind (tests/new_kind/stub_mutex.cpp)
#   sql/<dialect>/stub_mutex.sql           its statement, per dialect
#   include/sqlguard/lock_kinds.def        one line
# checks that nothing else in the copy differs from this tree, builds the
# library and the test suite, and runs the lock family's kind tests
# ([lock-kinds]: every kind of lock_kinds.def through make_lock, the
# one-kind-per-name rule for every pair of kinds) on SQLite, PostgreSQL and
# MariaDB, expecting the new kind among them. Control: the same expectation
# on this tree's own test binary (no stubmutex) must fail.
# Usage: run.sh SOURCE_DIR WORK_DIR BUILD_TYPE [THIS_TREE_TEST_BINARY]
# PostgreSQL and MariaDB run when SQLGUARD_TEST_PG_URI / SQLGUARD_TEST_MYSQL_URI
# are set (tools/test.sh sets them); under CI=true a missing one is a failure.
set -euo pipefail
src=$1 work=$2 build_type=${3:-RelWithDebInfo} this_tests=${4:-}
say() { printf 'new_kind: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
line='SQLGUARD_LOCK_KIND(kStubMutex, "stubmutex", "a stub mutex", kStubMutexKind)'

# shellcheck source=tests/tree_copy.sh
. "$src/tests/tree_copy.sh"
tree_copy "$src" "$work"

# The new kind: its source file, its statements, one registry line.
cp "$src/tests/new_kind/stub_mutex.cpp" "$work/src/src/strategies/kinds/stub_mutex.cpp"
for d in sqlite postgresql mysql; do
  cp "$src/tests/new_kind/sql/$d/stub_mutex.sql" "$work/src/sql/$d/stub_mutex.sql"
done
echo "$line" >>"$work/src/include/sqlguard/lock_kinds.def"

# Nothing else differs: every other file is byte-identical, and the only new
# paths are the kind's source file and its statements.
tree_differs_only "$src" "$work" include/sqlguard/lock_kinds.def '^src/strategies/kinds/stub_mutex\.cpp$' \
  '^sql/(sqlite|postgresql|mysql)/stub_mutex\.sql$'
say "the copy differs from this tree by src/strategies/kinds/stub_mutex.cpp ($(wc -l <"$src/tests/new_kind/stub_mutex.cpp") lines), sql/{sqlite,postgresql,mysql}/stub_mutex.sql and one line of lock_kinds.def"

# The new line of lock_kinds.def changes LockKind (lock.h), so the library
# compiles again; of the tests, only the kind tests' file is built.
tree_build "$src" "$work" "$build_type" sqlguard_tests -- -DSQLGUARD_TEST_ONLY=test_lock_kinds \
  || fail "the copy with the new kind does not build"

# The kind tests on every dialect, expecting stubmutex among the kinds.
dialects=(sqlite)
for pair in postgresql:SQLGUARD_TEST_PG_URI mysql:SQLGUARD_TEST_MYSQL_URI; do
  var=${pair#*:}
  if [[ -n "${!var:-}" ]]; then
    dialects+=("${pair%%:*}")
  elif [[ "${CI:-}" == true ]]; then
    fail "$var is not set: under CI every dialect runs (tools/test.sh starts the servers)"
  else
    say "$var not set: ${pair%%:*} skipped (not under CI)"
  fi
done
out=$(mktemp)
for d in "${dialects[@]}"; do
  rc=0
  SQLGUARD_TEST_DIALECT=$d SQLGUARD_TEST_EXPECT_KIND=stubmutex "$work/src/build/tests/sqlguard_tests" \
    "[lock-kinds]" >"$out" 2>&1 || rc=$?
  tail -3 "$out" >&2
  (( rc == 0 )) || { rm -f "$out"; fail "the kind tests failed on $d with stubmutex (exit $rc)"; }
  say "the kind tests pass on $d with stubmutex among the kinds"
done

# Control: this tree has no stubmutex; the same expectation must fail there.
if [[ -n "$this_tests" ]]; then
  rc=0
  SQLGUARD_TEST_DIALECT=sqlite SQLGUARD_TEST_EXPECT_KIND=stubmutex "$this_tests" \
    "every kind of lock_kinds.def*" >"$out" 2>&1 || rc=$?
  grep -q "stubmutex" "$out" || { rm -f "$out"; fail "control: the expectation's failure does not name stubmutex"; }
  (( rc != 0 )) || { rm -f "$out"; fail "control: the expected kind passed on a tree without it"; }
  say "control: without the line, the expectation fails (exit $rc) naming stubmutex"
fi
rm -f "$out"
