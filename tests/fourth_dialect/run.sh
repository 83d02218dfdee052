#!/usr/bin/env bash
# A fourth dialect is folders plus one line (issue 24). Copies this source
# tree and adds "stubsql", SQLite's engine and SQL under a new name:
#   src/dialect/stubsql/   tests/fourth_dialect/stubsql/ (factory.cpp, dialect.cmake)
#   sql/stubsql/           a copy of sql/sqlite/
#   migrations/stubsql/    a copy of migrations/sqlite/
#   src/dialect/registry.def   one line
# checks that nothing else in the copy differs from this tree, builds the
# library and the test suite, and runs the lease tests on stubsql.
# Usage: run.sh SOURCE_DIR WORK_DIR BUILD_TYPE
set -euo pipefail
src=$1 work=$2 build_type=${3:-RelWithDebInfo}
say() { printf 'fourth_dialect: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

rm -rf "$work/src"
mkdir -p "$work/src"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
(cd "$src" && git ls-files -z --cached --others --exclude-standard) >"$list" \
  || fail "git ls-files failed in $src (the test copies the tracked tree)"
(cd "$src" && xargs -0 tar --ignore-failed-read -cf - <"$list") | tar -xf - -C "$work/src"

# The new dialect: its folders and one registry line.
cp -r "$src/tests/fourth_dialect/stubsql" "$work/src/src/dialect/stubsql"
cp -r "$src/sql/sqlite" "$work/src/sql/stubsql"
cp -r "$src/migrations/sqlite" "$work/src/migrations/stubsql"
echo 'SQLGUARD_DIALECT(kStubsqlDialect)' >>"$work/src/src/dialect/registry.def"

# Nothing else differs: every other file is byte-identical, and the only new
# paths are the three folders.
changed=$(cd "$src" && xargs -0 -I{} sh -c 'test ! -f "$1" || cmp -s "$1" "$2/$1" || echo "$1"' _ {} "$work/src" <"$list")
[[ "$changed" == "src/dialect/registry.def" ]] || fail "files changed besides src/dialect/registry.def: $changed"
added=$(diff "$src/src/dialect/registry.def" "$work/src/src/dialect/registry.def" | grep -c '^>' || true)
[[ "$added" == 1 ]] || fail "registry.def: $added lines added, not one"
extra=$(cd "$work/src" && find . -type f | sed 's|^\./||' | sort | comm -23 - <(tr '\0' '\n' <"$list" | sort) \
        | grep -v -e '^src/dialect/stubsql/' -e '^sql/stubsql/' -e '^migrations/stubsql/' || true)
[[ -z "$extra" ]] || fail "new files outside the dialect's folders: $extra"
say "the copy differs from this tree by src/dialect/stubsql/, sql/stubsql/, migrations/stubsql/ and one line of registry.def"

# Build it (ccache, when the main build used it, makes this mostly cache hits).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$src} CCACHE_NOHASHDIR=1
fi
cmake -S "$work/src" -B "$work/src/build" -DCMAKE_BUILD_TYPE="$build_type" -DSQLGUARD_BUILD_TOOLS=OFF \
  -DSQLGUARD_BUILD_EXAMPLES=OFF "${launcher[@]}" >/dev/null
cmake --build "$work/src/build" -j"$(nproc)" --target sqlguard_tests sqlguard_test_worker >/dev/null \
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
