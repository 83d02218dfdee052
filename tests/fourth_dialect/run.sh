#!/usr/bin/env bash
# A fourth dialect is folders plus one line (issue 24). Copies this source
# tree and adds "stubsql", SQLite's engine and SQL under a new name:
#   src/dialect/stubsql/   tests/fourth_dialect/stubsql/ (factory.cpp, dialect.cmake)
#   sql/stubsql/           a copy of sql/sqlite/
#   migrations/stubsql/    a copy of migrations/sqlite/
#   src/dialect/registry.def   one line
# checks that nothing else in the copy differs from this tree, builds the
# library and the test files with lease tests, and runs them on stubsql.
# Usage: run.sh SOURCE_DIR WORK_DIR BUILD_TYPE
set -euo pipefail
src=$1 work=$2 build_type=${3:-RelWithDebInfo}
say() { printf 'fourth_dialect: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

# shellcheck source=tests/tree_copy.sh
. "$src/tests/tree_copy.sh"
tree_copy "$src" "$work"

# The new dialect: its folders and one registry line.
cp -r "$src/tests/fourth_dialect/stubsql" "$work/src/src/dialect/stubsql"
cp -r "$src/sql/sqlite" "$work/src/sql/stubsql"
cp -r "$src/migrations/sqlite" "$work/src/migrations/stubsql"
echo 'SQLGUARD_DIALECT(kStubsqlDialect)' >>"$work/src/src/dialect/registry.def"

# Nothing else differs: every other file is byte-identical, and the only new
# paths are the three folders.
tree_differs_only "$src" "$work" src/dialect/registry.def '^src/dialect/stubsql/' '^sql/stubsql/' '^migrations/stubsql/'
say "the copy differs from this tree by src/dialect/stubsql/, sql/stubsql/, migrations/stubsql/ and one line of registry.def"

# The library whole; of the tests, the files with a [lease] test case (the
# only ones run below: compiling the other 40-odd files took most of this
# step's minutes on a cold compiler cache).
# (test_faultproxy.cpp is added with the tools, which the copy leaves out.)
lease_files=$(grep -l '\[lease\]' "$src"/tests/test_*.cpp | xargs -n1 basename | sed 's/\.cpp$//' |
  grep -vx test_faultproxy | paste -sd';')
[[ -n $lease_files ]] || fail "no test file has a [lease] test case"
tree_build "$src" "$work" "$build_type" sqlguard_tests sqlguard_test_worker -- "-DSQLGUARD_TEST_ONLY=$lease_files" \
  || fail "the copy with the fourth dialect does not build"

# The lease tests on it.
out=$(mktemp)
rc=0
SQLGUARD_TEST_DIALECT=stubsql SQLGUARD_TEST_FILE_DIALECT=1 "$work/src/build/tests/sqlguard_tests" \
  "[lease]~[cli]~[chaos]" >"$out" 2>&1 || rc=$?
tail -5 "$out" >&2
grep -q 'not as written in sql/stubsql/' "$out" || { rm -f "$out"; fail "the suite did not run on stubsql's catalog"; }
grep -q ' 0 not as written in sql/stubsql/' "$out" || { rm -f "$out"; fail "statements not as written in sql/stubsql/"; }
rm -f "$out"
(( rc == 0 )) || fail "the lease tests failed on stubsql (exit $rc)"
say "the lease tests pass on stubsql"
