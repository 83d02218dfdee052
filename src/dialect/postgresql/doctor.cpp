// PostgreSQL checks of check_environment() (framework: core/doctor.h; SQL:
// sql/postgresql/doctor.sql): server version, primary or standby,
// replication and synchronous commit, a transaction pooler in the path,
// durability, default isolation, lock/statement timeouts; first, whether it
// is PostgreSQL at all (core/engines.h).
#include <cstdlib>
#include <set>

#include "core/catalog.h"
#include "core/doctor.h"
#include "core/uri.h"

namespace sqlguard::detail {
namespace {

long long num(const std::string& s) { return std::strtoll(s.c_str(), nullptr, 10); }

void server_version(DoctorContext& ctx) {
  long long v = num(ctx.setting("server_version_num", "0"));
  std::string text = "PostgreSQL " + ctx.setting("server_version", ctx.conn.capabilities().server_version);
  if (v >= 120000)
    ctx.ok("server_version", text + " (supported; tested on 15)");
  else if (v >= 90500)
    ctx.warn("server_version", text + ": untested (sqlguard is tested on PostgreSQL 12+, mainly 15)");
  else
    ctx.fail("server_version", text + ": not supported (sqlguard needs FOR UPDATE SKIP LOCKED and "
                                      "ON CONFLICT, PostgreSQL 9.5+)");
}

void primary(DoctorContext& ctx) {
  if (ctx.setting("in_recovery") == "false")
    ctx.ok("primary", "connected to a primary (read-write)");
  else
    ctx.fail("primary", "connected to a standby (read-only, in recovery): sqlguard must write to the primary; "
                        "list every node in the URI with target_session_attrs=read-write");
}

// Standbys and synchronous commit. An asynchronous standby that gets
// promoted may lack committed lease rows and fence values: two holders of
// one lock, a fence issued twice.
void replication(DoctorContext& ctx) {
  const std::string ssn = ctx.setting("synchronous_standby_names");
  const std::string sc = ctx.setting("synchronous_commit");
  auto rows = run(ctx.conn, Sql::doctor_standbys).rows;
  std::string sync, async, unknown;
  static constexpr auto kName = detail::column(Sql::doctor_standbys, "application_name");
  static constexpr auto kSyncState = detail::column(Sql::doctor_standbys, "sync_state");
  for (const auto& r : rows) {
    const std::string app = detail::cell(r, kName).as_string();
    std::string name = app.empty() ? "(unnamed)" : app;
    std::string state = detail::cell(r, kSyncState).as_string();
    std::string& bucket = (state == "sync" || state == "quorum") ? sync : state.empty() ? unknown : async;
    bucket += (bucket.empty() ? "" : ", ") + name + (state.empty() ? "" : " (" + state + ")");
  }
  const std::string settings =
      "synchronous_standby_names='" + ssn + "', synchronous_commit=" + sc;
  const bool commit_waits = sc == "on" || sc == "remote_write" || sc == "remote_apply";
  if (rows.empty()) {
    if (!ssn.empty())
      ctx.warn("replication", "no standby attached but " + settings +
                                  ": commits wait for a synchronous standby that is not there");
    else
      ctx.ok("replication", "no streaming standby attached (" + settings + ")");
    return;
  }
  if (!async.empty()) {
    ctx.warn("replication",
             "asynchronous standby: " + async + (sync.empty() ? "" : "; synchronous: " + sync) + " (" + settings +
                 "). HAZARD: a failover to an asynchronous standby can lose committed lease rows and fence "
                 "values, so two clients can hold one lock and a fence can be issued twice; promote only "
                 "synchronous standbys (Patroni synchronous_mode + synchronous_mode_strict)");
    return;
  }
  if (!unknown.empty()) {
    ctx.warn("replication", "standby " + unknown + " attached but its sync_state is not visible to this user "
                            "(grant pg_monitor to check it); " + settings);
    return;
  }
  if (!commit_waits) {
    ctx.warn("replication", "synchronous standby " + sync + " attached but " + settings +
                                ": commits do not wait for it, so a failover can lose committed lease rows");
    return;
  }
  ctx.ok("replication", "every standby is synchronous: " + sync + " (" + settings + ")");
}

std::set<int> uri_ports(const std::string& uri) {
  std::set<int> ports;
  if (uri.empty()) return ports;
  ParsedUri u = parse_uri(uri);
  for (const auto& h : u.hosts) ports.insert(h.port ? h.port : 5432);
  if (u.hosts.empty()) ports.insert(5432);
  return ports;
}

// A transaction pooler between client and server: the pid libpq got at
// connect (the pooler's own) differs from the backend's, the backend's pid
// changes between transactions, or the server listens on another port than
// the URI names.
void pooler(DoctorContext& ctx) {
  Connection& c = ctx.conn;
  std::vector<std::string> signs;
  const std::int64_t client_pid = c.session_id();
  const std::int64_t backend_pid = num(ctx.setting("backend_pid", "0"));
  if (client_pid != backend_pid)
    signs.push_back("the pid this connection got at connect (" + std::to_string(client_pid) +
                    ") is not the backend's (" + std::to_string(backend_pid) + ")");
  std::set<std::int64_t> pids{backend_pid};
  for (int i = 0; i < 3; ++i) {
    Transaction tx(c);
    static constexpr auto kBackendPid = detail::column(Sql::doctor_backend_pid, "backend_pid");
    pids.insert(detail::cell(run(c, Sql::doctor_backend_pid).rows.at(0), kBackendPid).as_int());
    tx.commit();
  }
  const bool moves = pids.size() > 1;
  if (moves) signs.push_back("the backend pid changed across 4 transactions (" + std::to_string(pids.size()) + " pids)");
  const std::string port = ctx.setting("server_port");
  auto ports = uri_ports(ctx.uri);
  if (!port.empty() && !ports.empty() && !ports.count(static_cast<int>(num(port))))
    signs.push_back("the server listens on port " + port + ", not the URI's");
  const bool mode = c.capabilities().transaction_pooler;
  if (signs.empty()) {
    if (mode)
      ctx.ok("pooler", "no pooler detected, pooler=transaction set: no named prepared statements, no LISTEN "
                       "(harmless without a pooler; waiters poll)");
    else
      ctx.ok("pooler", "no pooler detected (direct connection)");
    return;
  }
  std::string why;
  for (const auto& s : signs) why += (why.empty() ? "" : "; ") + s;
  if (mode) {
    ctx.ok("pooler", "pooler detected (" + why + "); pooler=transaction is set: unnamed statements only, no "
                     "LISTEN (waiters poll), no session SET, migrations under a transaction-scoped lock");
    return;
  }
  std::string would;
  if (ctx.named_statements) would = "named prepared statements";
  if (c.capabilities().listen_notify) would += std::string(would.empty() ? "" : " and ") + "LISTEN";
  if (!would.empty())
    ctx.fail("pooler", "a pooler is between client and server (" + why + ") but the URI has no pooler=transaction: "
                       "sqlguard would use " + would + ", which break behind transaction pooling (42P05 "
                       "\"prepared statement already exists\", lost wake-ups); add ?pooler=transaction");
  else
    ctx.warn("pooler", "a pooler is between client and server (" + why + "); if it pools by transaction, add "
                       "?pooler=transaction to the URI");
}

void isolation(DoctorContext& ctx) {
  std::string iso = ctx.setting("default_transaction_isolation");
  if (iso == "read committed") {
    ctx.ok("isolation", "default_transaction_isolation=" + iso);
  } else if (ctx.conn.capabilities().transaction_pooler) {
    // Behind a transaction pooler sqlguard keeps no session setting: its
    // autocommit statements run at the database's default.
    ctx.fail("isolation", "default_transaction_isolation=" + iso +
                              " and ?pooler=transaction: sqlguard cannot set its sessions to read committed behind a "
                              "transaction pooler, and its autocommit statements fail at " + iso +
                              " (releases with 40001); set the database's or role's default_transaction_isolation "
                              "to 'read committed'");
  } else {
    ctx.ok("isolation", "default_transaction_isolation=" + iso +
                            "; sqlguard's connections set their session default to read committed at connect (your "
                            "own transactions on them ask for their isolation with begin())");
  }
}

// What a commit survives. sqlguard's acquires and fences must survive a crash
// of the server (or its machine): otherwise the restarted server grants a
// lease a live client still holds and issues a fence a second time.
void durability(DoctorContext& ctx) {
  const std::string fsync = ctx.setting("fsync"), sc = ctx.setting("synchronous_commit"),
                    fpw = ctx.setting("full_page_writes");
  const std::string text = "fsync=" + fsync + ", synchronous_commit=" + sc + ", full_page_writes=" + fpw;
  std::string fails;
  if (fsync == "off")
    fails += "; with fsync=off a crash of the machine (power loss, kernel panic) can corrupt the database and "
             "lose committed leases and fences, so a fence is issued twice: set fsync=on";
  if (sc == "off")
    fails += "; with synchronous_commit=off a server crash loses the last commits (up to 3 x wal_writer_delay), "
             "among them acquired leases and issued fences: the restarted server grants a lease its holder still "
             "uses and issues a fence twice: set synchronous_commit=on (sqlguard relaxes it itself only for a "
             "release, whose loss just leaves the lease to expire)";
  if (!fails.empty())
    ctx.fail("durability", text + fails);
  else if (fpw == "off")
    ctx.warn("durability", text + "; with full_page_writes=off a power loss can leave torn pages that corrupt "
                                  "the database, unless the filesystem writes pages atomically (e.g. ZFS): set "
                                  "full_page_writes=on otherwise");
  else
    ctx.ok("durability", text + " (an acquire's commit survives a crash; releases skip the WAL flush by design)");
}

void timeouts(DoctorContext& ctx) {
  std::string st = ctx.setting("statement_timeout", "0"), lt = ctx.setting("lock_timeout", "0"),
              it = ctx.setting("idle_in_transaction_session_timeout", "0");
  std::string text = "statement_timeout=" + doctor_ms(st) + ", lock_timeout=" + doctor_ms(lt) +
                     ", idle_in_transaction_session_timeout=" + doctor_ms(it);
  long long s = num(st), l = num(lt);
  if ((s > 0 && s < 1000) || (l > 0 && l < 100))
    ctx.warn("timeouts", text + ": short server defaults cancel sqlguard's blocking waits early (they surface "
                                "as timeouts / lock busy); sqlguard bounds its own waits");
  else
    ctx.ok("timeouts", text + " (sqlguard bounds its own lock waits with SET LOCAL lock_timeout)");
}

}  // namespace

void postgresql_doctor(DoctorContext& ctx) {
  engine_check(ctx);
  ctx.check("server_version", [&] { server_version(ctx); });
  ctx.check("primary", [&] { primary(ctx); });
  ctx.check("replication", [&] { replication(ctx); });
  ctx.check("pooler", [&] { pooler(ctx); });
  ctx.check("durability", [&] { durability(ctx); });
  ctx.check("isolation", [&] { isolation(ctx); });
  ctx.check("timeouts", [&] { timeouts(ctx); });
}

}  // namespace sqlguard::detail
