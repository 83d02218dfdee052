#include "dialect/mysql/galera_checks.h"

#include <map>
#include <string>

#include "core/catalog.h"
#include "sqlguard/errors.h"

namespace sqlguard::mysql {
namespace {

using detail::Sql;

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
  if (v[0].is_null() || v[0].as_int() == 0) {
    add(out, "galera_wsrep", CheckStatus::kOk, "wsrep_on=OFF: not a Galera node (no Galera checks)");
    return;
  }
  add(out, "galera_wsrep", CheckStatus::kOk, "wsrep_on=ON: a Galera node");

  // The cluster as this node sees it.
  try {
    std::map<std::string, std::string> st;
    for (const auto& row : detail::run(conn, Sql::galera_status).rows) st[row[0].as_string()] = row[1].as_string();
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
  const std::int64_t sess = v[1].is_null() ? 0 : v[1].as_int(), glob = v[2].is_null() ? 0 : v[2].as_int();
  add(out, "galera_sync_wait", CheckStatus::kOk,
      "wsrep_sync_wait=" + std::to_string(sess) + " (global " + std::to_string(glob) +
          "); sqlguard sets it per statement where a read decides ownership (renew, guard, replay, inbox, acquire)" +
          (glob != 0 ? "; the global value also makes every other read of every session wait" : ""));

  // The fence sequence: a cache is per node on Galera and refused at creation.
  try {
    auto r = detail::run(conn, Sql::galera_fence_sequence);
    const std::int64_t cache = r.rows.at(0)[0].as_int(), incr = r.rows.at(0)[1].as_int();
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

  const std::string binlog = v[3].is_null() ? "" : v[3].as_string();
  if (binlog == "ROW")
    add(out, "galera_binlog_format", CheckStatus::kOk, "binlog_format=ROW");
  else
    add(out, "galera_binlog_format", CheckStatus::kFail,
        "binlog_format=" + binlog + ": Galera replicates row events only; set binlog_format=ROW");

  const std::int64_t autoinc = v[4].is_null() ? -1 : v[4].as_int();
  add(out, "galera_autoinc_lock_mode", autoinc == 2 ? CheckStatus::kOk : CheckStatus::kWarn,
      "innodb_autoinc_lock_mode=" + std::to_string(autoinc) + (autoinc == 2 ? "" : " (Galera wants 2, interleaved)"));
}

}  // namespace sqlguard::mysql
