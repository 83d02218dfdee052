// sqlguard bench: every statement the ops send, exactly as sqlguard sends
// them: the raw baseline runs them (bench_ops.cpp), --emit-sql prints them,
// statements_per_op counts them. Moved as one unit from cmd_bench.cpp (text
// unchanged); it reads private library headers (the lease lock's own
// statements, the Dialect builders) until the library exposes them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench.h"
#include "dialect/dialect.h"
#include "sqlguard/connection.h"
#include "strategies/lease_sql.h"

namespace sqlguard::bench {

// Every statement the ops issue, with `?` placeholders exactly as sqlguard
// hands them to Connection::execute(). Lease statements come from the lease
// lock itself (detail::lease_sql); the others are rebuilt here from the same
// Dialect builders the strategies use (their SQL lives in private members).
struct Sql {
  std::string acquire, insert, read_mine, info, release, notify;
  std::string g_update, g_exists;
  std::string rl_select, rl_update, my_get_timeout, my_set_timeout, pg_set_local, sqlite_busy;
  std::string cas_select, cas_update, cas_version;
  std::string idem_insert, idem_select, idem_complete;
  std::string inbox_insert, inbox_effect;

  explicit Sql(Connection& c) {
    const Dialect& d = c.dialect();
    acquire = detail::lease_sql(c, "acquire");
    insert = detail::lease_sql(c, "insert");
    read_mine = detail::lease_sql(c, "read_mine");
    info = detail::lease_sql(c, "info");
    release = detail::lease_sql(c, "release");
    notify = detail::lease_sql(c, "notify");
    const std::string t = d.quote(kStock), id = d.quote("id"), qty = d.quote("qty"), ver = d.quote("version");
    g_update = "UPDATE " + t + " SET " + qty + " = " + qty + " - ? WHERE " + id + " = ? AND " + qty + " >= ?";
    g_exists = "SELECT 1 FROM " + t + " WHERE " + id + " = ?";
    rl_select = "SELECT " + id + ", " + qty + " FROM " + t + " WHERE " + id + " = ?" + d.row_lock_suffix(false, false, false);
    rl_update = "UPDATE " + t + " SET " + qty + " = ? WHERE " + id + " = ?";
    my_get_timeout = "SELECT @@SESSION.innodb_lock_wait_timeout";
    my_set_timeout = "SET SESSION innodb_lock_wait_timeout = ?";
    pg_set_local = "SELECT set_config('lock_timeout', ?, true)";
    sqlite_busy = "PRAGMA busy_timeout";
    cas_select = "SELECT " + ver + ", " + qty + " FROM " + t + " WHERE " + id + " = ?";
    cas_update = "UPDATE " + t + " SET " + qty + " = ?, " + ver + " = " + ver + " + 1 WHERE " + id + " = ? AND " + ver + " = ?";
    cas_version = "SELECT " + ver + " FROM " + t + " WHERE " + id + " = ?";
    const std::string now(d.now_ms()), it = "sqlguard_idempotency";
    idem_insert = d.insert_dedup(it, "scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at",
                                 "?, ?, 'in_progress', ?, ?, " + now + " + ?, " + now + ", " + now + " + ?",
                                 "scope, idem_key");
    idem_select = "SELECT status, fingerprint, response_code, response_body, CASE WHEN locked_until <= " + now +
                  " THEN 1 ELSE 0 END, CASE WHEN expire_at <= " + now + " THEN 1 ELSE 0 END FROM " + it +
                  " WHERE scope = ? AND idem_key = ?";
    idem_complete = "UPDATE " + it + " SET status = ?, response_code = ?, response_body = ?, completed_at = " + now +
                    ", locked_until = " + now + ", expire_at = " + now +
                    " + ? WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress'";
    inbox_insert = d.insert_dedup("sqlguard_inbox", "consumer, message_id, processed_at, expire_at",
                                  "?, ?, " + now + ", " + now + " + ?", "consumer, message_id");
    inbox_effect = "UPDATE " + t + " SET " + qty + " = " + qty + " - 1 WHERE " + id + " = ?";
  }
};

// What one op sends per completed operation (steady state); see bench_sql.cpp.
std::vector<std::string> op_statements(const std::string& op, Connection& c, const Sql& s);

// Statements in op_statements() output (comment lines do not count).
int count_sql(const std::vector<std::string>& v);

// --emit-sql: prints the statements of `ops` on stdout (with PostgreSQL's
// numbered form for pgbench).
void emit_sql(const std::unique_ptr<Connection>& admin, const std::string& dialect,
              const std::vector<std::string>& ops, const Sql& sql);

}  // namespace sqlguard::bench
