#include "sqlguard/admin.h"

#include <algorithm>

#include "core/catalog.h"
#include "sqlguard/validate.h"

namespace sqlguard::admin {

using detail::Sql;
using detail::run;

int terminate_sessions(Connection& conn, const std::vector<std::int64_t>& spare) {
  const auto& cat = detail::catalog(conn);
  std::vector<std::int64_t> ids;
  static constexpr auto kSessionId = detail::column(Sql::admin_list_sessions, "session_id");
  for (const auto& row : run(conn, Sql::admin_list_sessions).rows) ids.push_back(detail::cell(row, kSessionId).as_int());
  int ended = 0;
  for (auto id : ids) {
    if (std::find(spare.begin(), spare.end(), id) != spare.end()) continue;
    try {
      // KILL takes no placeholder on MariaDB: the id is an integer the server gave us.
      auto sql = cat.render(Sql::admin_terminate_session, {{"id", std::to_string(id)}});
      detail::run_rendered(conn, Sql::admin_terminate_session, sql, cat.entry(Sql::admin_terminate_session).params.empty()
                                                                       ? Params{}
                                                                       : Params{id});
      ++ended;
    } catch (const Error& e) {
      // The session ended by itself in between; nothing to do.
      if (e.code() != ErrorCode::kNotFound && e.code() != ErrorCode::kInternal) throw;
    }
  }
  return ended;
}

bool delete_lease(Connection& conn, const std::string& name) {
  validate_name(name, "lock name");
  return run(conn, Sql::admin_delete_lease, {name}).affected == 1;
}

bool delete_fenced_resource(Connection& conn, const std::string& resource) {
  validate_name(resource, "resource");
  return run(conn, Sql::admin_delete_fenced_resource, {resource}).affected == 1;
}

std::int64_t delete_inbox_consumer(Connection& conn, const std::string& consumer) {
  validate_name(consumer, "inbox consumer", 128);
  return run(conn, Sql::admin_delete_inbox_consumer, {consumer}).affected;
}

std::int64_t delete_by_prefix(Connection& conn, const std::string& prefix) {
  validate_name(prefix, "prefix");
  for (unsigned char c : prefix)
    if (c >= 0x80) throw Error(ErrorCode::kInvalidArgument, "delete_by_prefix(): the prefix must be ASCII");
  const Params p{static_cast<std::int64_t>(prefix.size()), prefix};
  return run(conn, Sql::admin_delete_prefix_leases, p).affected + run(conn, Sql::admin_delete_prefix_holdings, p).affected +
         run(conn, Sql::admin_delete_prefix_places, p).affected + run(conn, Sql::admin_delete_prefix_sync, p).affected +
         run(conn, Sql::admin_delete_prefix_idempotency, p).affected +
         run(conn, Sql::admin_delete_prefix_inbox, p).affected + run(conn, Sql::admin_delete_prefix_history, p).affected;
}

}  // namespace sqlguard::admin
