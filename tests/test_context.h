// The per-dialect test context (SOCI's test_context idea): every test in the
// shared suite asks it for connections, capabilities and unique names, so
// one suite runs unchanged against SQLite, PostgreSQL and MariaDB.
//
// The dialect comes from SQLGUARD_TEST_DIALECT (sqlite | postgresql | mysql);
// the server URIs from SQLGUARD_TEST_PG_URI / SQLGUARD_TEST_MYSQL_URI (printed
// by tools/dbservers.sh env). Each run gets a fresh database (a temp SQLite
// file, or a CREATE DATABASE on the server) with all migrations applied.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/connection.h"

namespace sgtest {

struct Context {
  sqlguard::DialectKind kind = sqlguard::DialectKind::kSqlite;
  std::string name;      // "sqlite", "postgresql", "mysql"
  std::string uri;       // the per-run database, migrated
  std::string base_uri;  // server URI the per-run database was created from
  std::string run_id;    // random, makes names unique across runs
  // PostgreSQL through a transaction pooler (the `pgbouncer` ctest entry:
  // the URI has ?pooler=transaction). A few tests whose premise is a server
  // session owned by an idle client (kill it by session_id(), authenticate
  // a role at the server) check the pooler's behaviour instead.
  bool pooler = false;

  std::unique_ptr<sqlguard::Connection> connect(const sqlguard::ConnectOptions& o = {}) const;
  // A name no other test in this run uses: "<base>_<run>_<n>".
  std::string unique(std::string_view base) const;
  bool is(sqlguard::DialectKind k) const { return kind == k; }
  bool is_sqlite() const { return kind == sqlguard::DialectKind::kSqlite; }
  // Creates another empty (unmigrated) database and returns its URI; it is
  // dropped at the end of the run.
  std::string fresh_database() const;
};

const Context& ctx();

// Processes. argv[0] is the program path. Returns the exit status (or
// 128+signal). `out` receives stdout when given.
int run_process(const std::vector<std::string>& argv, std::string* out = nullptr,
                const std::vector<std::string>& extra_env = {});
// Starts all at once and waits for all; returns the exit statuses in order.
std::vector<int> run_parallel(const std::vector<std::vector<std::string>>& argvs,
                              std::vector<std::string>* outs = nullptr);
// Starts a process without waiting; returns its pid (stdout to `out_file`
// when given).
int spawn(const std::vector<std::string>& argv, const std::string& out_file = {});
int wait_pid(int pid);

// The test worker and the CLI of this build (test_context.cpp: the only
// file compiled with their paths, so the other test files compile the same
// in a copy of the tree and hit the compiler cache: tests/fourth_dialect/).
std::string worker_path();
// SQLGUARD_TEST_CLI=/path/to/sqlguard runs the CLI tests against another
// binary (a negative control: the tests of a fix must fail on the old one).
std::string cli_path();

// One cached connection for setup and checks, main thread only (opening a
// server connection per check would dominate the run time).
sqlguard::Connection& probe();
// Runs a statement / reads one integer through probe() (test setup only).
void exec(const std::string& sql, const sqlguard::Params& params = {});
std::int64_t query_int(const std::string& sql, const sqlguard::Params& params = {});

}  // namespace sgtest
