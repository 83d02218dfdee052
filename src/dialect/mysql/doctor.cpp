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

// What a commit survives (see the PostgreSQL check). On a Galera node a
// commit is also certified on the other nodes before it returns, so a crash
// of one node loses nothing the cluster acknowledged: a lazy redo flush there
// is a warning (a crash of the whole cluster loses the last second).
void durability(DoctorContext& ctx) {
  const std::string flush = ctx.setting("innodb_flush_log_at_trx_commit"), log_bin = ctx.setting("log_bin"),
                    sync_binlog = ctx.setting("sync_binlog");
  const bool galera = ctx.setting("wsrep_on") == "ON";
  std::string text = "innodb_flush_log_at_trx_commit=" + flush + ", log_bin=" + log_bin;
  if (log_bin == "ON") text += ", sync_binlog=" + sync_binlog;
  if (flush != "1") {
    const std::string loss = flush == "2" ? "a crash of the machine (power loss, kernel panic)"
                                          : "a crash of the server";
    const std::string why = ": " + loss + " loses the last second of commits, among them acquired leases and "
                            "issued fences: the restarted server grants a lease its holder still uses and issues a "
                            "fence twice; set innodb_flush_log_at_trx_commit=1";
    if (galera)
      ctx.warn("durability", text + why + " (on Galera the other nodes keep what they certified, so this needs "
                                          "the whole cluster to go down at once)");
    else
      ctx.fail("durability", text + why);
  } else if (log_bin == "ON" && sync_binlog != "1") {
    ctx.warn("durability", text + ": a crash of the machine can lose binary log events of commits InnoDB kept, so "
                                   "a replica (or a point-in-time restore) misses leases and fences the primary "
                                   "issued; set sync_binlog=1 where a replica can be promoted");
  } else {
    ctx.ok("durability", text + " (an acquire's commit survives a crash)");
  }
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
  engine_check(ctx);
  ctx.check("server_version", [&] { server_version(ctx); });
  ctx.check("durability", [&] { durability(ctx); });
  ctx.check("isolation", [&] { isolation(ctx); });
  ctx.check("timeouts", [&] { timeouts(ctx); });
  // Galera (one "not a Galera node" line elsewhere): wsrep_on, cluster
  // status and size, wsrep_sync_wait, the NOCACHE fence sequence, ROW binlog.
  mysql::add_galera_checks(ctx.conn, ctx.results);
}

}  // namespace sqlguard::detail
