// MariaDB / MySQL checks of check_environment() (framework: core/doctor.h;
// SQL: sql/mysql/doctor.sql; the Galera checks: galera_checks.cpp). To add a
// check: a function below and one `ctx.check(...)` line in mysql_doctor().
#include <cstdlib>

#include "core/doctor.h"
#include "dialect/mysql/galera_checks.h"

namespace sqlguard::detail {
namespace {

void server_version(DoctorContext& ctx) {
  std::string v = ctx.setting("version", ctx.conn.capabilities().server_version);
  if (!ctx.conn.capabilities().sequences)
    ctx.fail("server_version", v + ": not supported (sqlguard's fencing tokens need SEQUENCE: MariaDB 10.3+)");
  else
    ctx.ok("server_version", v + " (supported; tested on MariaDB 10.11)");
}

void isolation(DoctorContext& ctx) {
  ctx.ok("isolation", "tx_isolation=" + ctx.setting("isolation") +
                          " (sqlguard sets the isolation of each of its transactions itself)");
}

void timeouts(DoctorContext& ctx) {
  std::string iw = ctx.setting("innodb_lock_wait_timeout"), lw = ctx.setting("lock_wait_timeout"),
              ms = ctx.setting("max_statement_time", "0");
  std::string text = "innodb_lock_wait_timeout=" + iw + " s, lock_wait_timeout=" + lw +
                     " s, max_statement_time=" + ms + " s";
  double stmt = std::strtod(ms.c_str(), nullptr);
  if (stmt > 0 && stmt < 1)
    ctx.warn("timeouts", text + ": a server-wide statement limit under 1 s cancels sqlguard's blocking waits early");
  else
    ctx.ok("timeouts", text + " (sqlguard sets innodb_lock_wait_timeout per row-lock scope)");
}

}  // namespace

void mysql_doctor(DoctorContext& ctx) {
  ctx.check("server_version", [&] { server_version(ctx); });
  ctx.check("isolation", [&] { isolation(ctx); });
  ctx.check("timeouts", [&] { timeouts(ctx); });
  // Galera (one "not a Galera node" line elsewhere): wsrep_on, cluster
  // status and size, wsrep_sync_wait, the NOCACHE fence sequence, ROW binlog.
  mysql::add_galera_checks(ctx.conn, ctx.results);
}

}  // namespace sqlguard::detail
