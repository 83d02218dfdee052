#include "bench_sql.h"

#include <iostream>
#include <sstream>

#include "bench_raw.h"

namespace sqlguard::bench {

// What one op sends per completed operation (steady state), for --emit-sql
// and statements_per_op. Comments describe the bound values.
std::vector<std::string> op_statements(const std::string& op, Connection& c, const Sql& s) {
  const auto k = c.kind();
  const bool my = k == DialectKind::kMysql, pg = k == DialectKind::kPostgres, lite = k == DialectKind::kSqlite;
  std::vector<std::string> v;
  auto lease = [&] {
    if (my) {
      v.push_back("-- owner, ttl_ms, min_hold_ms(0), name  (takes over the expired row)\n" + s.acquire);
      v.push_back("-- name, owner  (only when the UPDATE matched: read the new fence)\n" + s.read_mine);
    } else {
      v.push_back("-- name, owner, ttl_ms, min_hold_ms(0)\n" + s.acquire);
    }
    v.push_back("-- name, owner\n" + s.release);
    if (!s.notify.empty()) v.push_back("-- channel 'sqlguard_' || left(sha256(name), 24)  (wakes blocked waiters)\n" + s.notify);
  };
  if (op == "lease-distinct" || op == "lease-hot") lease();
  else if (op == "handoff") {
    lease();
    if (pg) v.insert(v.begin(), "-- waiters: LISTEN \"sqlguard_<sha256(name)[:24]>\" once, then the acquire on each NOTIFY or backoff tick");
  } else if (op == "guarded-decrement") {
    v.push_back("-- 1, id, 1\n" + s.g_update);
  } else if (op == "rowlock-decrement") {
    if (my) {
      v.push_back(s.my_get_timeout);
      v.push_back("-- 5 (lock_timeout, whole seconds)\n" + s.my_set_timeout);
    }
    if (lite) v.push_back("-- then sqlite3_busy_timeout(5000) (C API, no SQL)\n" + s.sqlite_busy);
    v.push_back(lite ? "BEGIN IMMEDIATE" : my ? "START TRANSACTION" : "BEGIN");
    if (pg) v.push_back("-- '5000ms'\n" + s.pg_set_local);
    v.push_back("-- id\n" + s.rl_select);
    if (my) v.push_back("-- previous timeout\n" + s.my_set_timeout);
    v.push_back("-- qty - 1, id\n" + s.rl_update);
    v.push_back("COMMIT");
  } else if (op == "cas-decrement") {
    v.push_back(lite ? "BEGIN IMMEDIATE" : my ? "START TRANSACTION" : "BEGIN");
    v.push_back("-- id\n" + s.cas_select);
    v.push_back("-- qty - 1, id, version\n" + s.cas_update);
    v.push_back("COMMIT");
  } else if (op == "idem-first") {
    v.push_back("-- scope, key, fingerprint, owner, lease_ms, lease_ms + retention_ms\n" + s.idem_insert);
    v.push_back("-- 'completed', 201, body (blob), retention_ms, scope, key, owner\n" + s.idem_complete);
  } else if (op == "idem-replay") {
    v.push_back(std::string("-- scope, key, ... (the key exists: ") + (my ? "error 1062" : "0 rows") + ")\n" + s.idem_insert);
    v.push_back("-- scope, key\n" + s.idem_select);
  } else if (op == "inbox") {
    v.push_back(lite ? "BEGIN IMMEDIATE" : my ? "START TRANSACTION" : "BEGIN");
    v.push_back("-- consumer, message_id, retention_ms\n" + s.inbox_insert);
    v.push_back("-- id  (the handler's business write)\n" + s.inbox_effect);
    v.push_back("COMMIT");
  }
  return v;
}

int count_sql(const std::vector<std::string>& v) {
  int n = 0;
  for (const auto& s : v) {
    // a line that is not a comment = a statement
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line.rfind("--", 0) != 0) {
        ++n;
        break;
      }
  }
  return n;
}

void emit_sql(const std::unique_ptr<Connection>& admin, const std::string& dialect,
              const std::vector<std::string>& ops, const Sql& sql) {
  std::cout << "-- sqlguard bench --emit-sql, dialect " << dialect
            << ". Statements as sqlguard sends them (`?` = bound value"
            << (admin->kind() == DialectKind::kPostgres ? "; the driver numbers them $1..$n" : "") << ").\n";
  for (const auto& op : ops) {
    std::cout << "\n-- op: " << op << "\n";
    for (const auto& st : op_statements(op, *admin, sql)) {
      std::string text = st;
      if (admin->kind() == DialectKind::kPostgres) {
        // print the numbered form too: what pgbench -M prepared needs
        auto nl = text.rfind('\n');
        std::string stmt = nl == std::string::npos ? text : text.substr(nl + 1);
        if (stmt.find('?') != std::string::npos)
          text += ";\n-- native: " + number_placeholders(stmt);
      }
      std::cout << text << ";\n";
    }
  }
}

}  // namespace sqlguard::bench
