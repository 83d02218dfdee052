#!/usr/bin/env bash
# Regenerates sql/<dialect>/statements.sql: the exact statements sqlguard
# sends per operation (from `sqlguard bench --emit-sql`), for review and for
# replaying with pgbench / mysqlslap. The test suite checks that the files are
# current (tests/test_sql_files.cpp), so run this after changing any SQL.
#
# Usage: tools/gen-sql.sh        (needs the throwaway servers: tools/dbservers.sh start)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CLI=${SQLGUARD_BUILD_DIR:-build}/tools/sqlguard
eval "$(tools/dbservers.sh env)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
declare -A uris=([sqlite]="sqlite://$tmp/gen.db" [postgresql]="$SQLGUARD_TEST_PG_URI" [mysql]="$SQLGUARD_TEST_MYSQL_URI")
for d in sqlite postgresql mysql; do
  mkdir -p "sql/$d"
  "$CLI" --db "${uris[$d]}" bench --emit-sql > "sql/$d/statements.sql"
  echo "wrote sql/$d/statements.sql ($(grep -c ';$' "sql/$d/statements.sql") statements)"
done
