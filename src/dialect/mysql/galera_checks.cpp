#include "dialect/mysql/galera_checks.h"

#include <map>
#include <string>

#include "core/catalog.h"
#include "sqlguard/errors.h"

namespace sqlguard::mysql {
namespace {

using detail::Sql;
using detail::cell;
using detail::column;

// Result columns read by name (src/core/statements.def).
constexpr auto kWsrepOn = column(Sql::galera_variables, "wsrep_on");
constexpr auto kSessionSyncWait = column(Sql::galera_variables, "session_sync_wait");
constexpr auto kGlobalSyncWait = column(Sql::galera_variables, "global_sync_wait");
constexpr auto kBinlogFormat = column(Sql::galera_variables, "binlog_format");
constexpr auto kAutoincLockMode = column(Sql::galera_variables, "autoinc_lock_mode");
constexpr auto kThreadCacheSize = column(Sql::galera_variables, "thread_cache_size");
constexpr auto kStatusName = column(Sql::galera_status, "name");
constexpr auto kStatusValue = column(Sql::galera_status, "value");
constexpr auto kCacheSize = column(Sql::galera_fence_sequence, "cache_size");
constexpr auto kIncrement = column(Sql::galera_fence_sequence, "increment");

void add(std::vector<CheckResult>& out, std::string check, CheckStatus st, std::string detail) {
  out.push_back({std::move(check), st, std::move(detail)});
}

}  // namespace

void add_galera_checks(Connection& conn, std::vector<CheckResult>& out) {
  Result vars;
  try {
    vars = detail::run(conn, Sql::galera_variables);
  } catch (const Error& e) {
    // MySQL without wsrep variables, or no permission: nothing to judge.
    add(out, "galera_wsrep", CheckStatus::kWarn, std::string("could not read the wsrep variables: ") + e.message());
    return;
  }
  const auto& v = vars.rows.at(0);
  if (cell(v, kWsrepOn).is_null() || cell(v, kWsrepOn).as_int() == 0) {
    add(out, "galera_wsrep", CheckStatus::kOk, "wsrep_on=OFF: not a Galera node (no Galera checks)");
    return;
  }
  add(out, "galera_wsrep", CheckStatus::kOk, "wsrep_on=ON: a Galera node");

  // The cluster as this node sees it.
  try {
    std::map<std::string, std::string> st;
    for (const auto& row : detail::run(conn, Sql::galera_status).rows) st[cell(row, kStatusName).as_string()] = cell(row, kStatusValue).as_string();
    const std::string status = st["wsrep_cluster_status"], ready = st["wsrep_ready"],
                      state = st["wsrep_local_state_comment"], size_text = st["wsrep_cluster_size"];
    const long size = size_text.empty() ? 0 : std::stol(size_text);
    std::string d = "wsrep_cluster_status=" + status + ", wsrep_ready=" + ready + ", wsrep_cluster_size=" +
                    size_text + ", wsrep_local_state_comment=" + state;
    if (status != "Primary" || ready != "ON")
      add(out, "galera_cluster", CheckStatus::kFail,
          d + ": this node is outside the primary component or not ready; it refuses queries (1047)");
    else if (state != "Synced")
      add(out, "galera_cluster", CheckStatus::kWarn, d + ": the node is not Synced (donor/joiner); reads may lag");
    else if (size < 3)
      add(out, "galera_cluster", CheckStatus::kWarn,
          d + ": fewer than 3 nodes; losing one leaves no majority (non-primary) unless the rest form one");
    else
      add(out, "galera_cluster", CheckStatus::kOk, d);
  } catch (const std::exception& e) {
    add(out, "galera_cluster", CheckStatus::kFail, std::string("could not read the wsrep status: ") + e.what());
  }

  // Causal reads: sqlguard sets wsrep_sync_wait per deciding statement, so
  // any session/global value works; a global one makes every read wait.
  const Value &sess_v = cell(v, kSessionSyncWait), &glob_v = cell(v, kGlobalSyncWait);
  const std::int64_t sess = sess_v.is_null() ? 0 : sess_v.as_int(), glob = glob_v.is_null() ? 0 : glob_v.as_int();
  add(out, "galera_sync_wait", CheckStatus::kOk,
      "wsrep_sync_wait=" + std::to_string(sess) + " (global " + std::to_string(glob) +
          "); sqlguard sets it per statement where a read decides ownership (renew, guard, replay, inbox, acquire)" +
          (glob != 0 ? "; the global value also makes every other read of every session wait" : ""));

  // The fence sequence: a cache is per node on Galera and refused at creation.
  try {
    auto r = detail::run(conn, Sql::galera_fence_sequence);
    const std::int64_t cache = cell(r.rows.at(0), kCacheSize).as_int(), incr = cell(r.rows.at(0), kIncrement).as_int();
    if (cache == 0)
      add(out, "galera_fence_sequence", CheckStatus::kOk, "sqlguard_fence_seq is NOCACHE, increment " + std::to_string(incr));
    else
      add(out, "galera_fence_sequence", CheckStatus::kFail,
          "sqlguard_fence_seq has cache_size " + std::to_string(cache) +
              ": run `sqlguard migrate` (0004_galera makes it NOCACHE)");
  } catch (const Error& e) {
    add(out, "galera_fence_sequence", e.code() == ErrorCode::kSchemaMismatch ? CheckStatus::kWarn : CheckStatus::kFail,
        std::string("could not read sqlguard_fence_seq: ") + e.message());
  }

  const std::string binlog = cell(v, kBinlogFormat).is_null() ? "" : cell(v, kBinlogFormat).as_string();
  if (binlog == "ROW")
    add(out, "galera_binlog_format", CheckStatus::kOk, "binlog_format=ROW");
  else
    add(out, "galera_binlog_format", CheckStatus::kFail,
        "binlog_format=" + binlog + ": Galera replicates row events only; set binlog_format=ROW");

  const std::int64_t autoinc = cell(v, kAutoincLockMode).is_null() ? -1 : cell(v, kAutoincLockMode).as_int();
  add(out, "galera_autoinc_lock_mode", autoinc == 2 ? CheckStatus::kOk : CheckStatus::kWarn,
      "innodb_autoinc_lock_mode=" + std::to_string(autoinc) + (autoinc == 2 ? "" : " (Galera wants 2, interleaved)"));

  // Measured on MariaDB 10.11.19 (docs/deploying-galera.md): a server thread
  // whose session was brute-force aborted keeps the abort, and a new session
  // the thread cache hands it fails its first statements with 1213 (a third
  // of new sessions on a node after a conflict-heavy run; none without cache).
  const std::int64_t cache = cell(v, kThreadCacheSize).is_null() ? -1 : cell(v, kThreadCacheSize).as_int();
  add(out, "galera_thread_cache", cache == 0 ? CheckStatus::kOk : CheckStatus::kWarn,
      "thread_cache_size=" + std::to_string(cache) +
          (cache == 0 ? ""
                      : ": new sessions can inherit a brute-force abort from a cached server thread and fail their "
                        "first statements with 1213 (a connect failure); set thread_cache_size=0 on Galera nodes"));
}

}  // namespace sqlguard::mysql
