// MySQL / MariaDB: URI -> connection, and the registry entry.
#include "core/uri.h"
#include "dialect/mysql/connection.h"
#include "dialect/registry.h"

namespace sqlguard {
namespace detail {
namespace {
std::unique_ptr<Connection> open_mysql(std::string_view uri, const ConnectOptions& options) {
  ParsedUri u = parse_uri(uri);
  auto bad = [&](const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument, "malformed MySQL URI '" + mask_uri(uri) + "': " + why, "mysql");
  };
  if (u.host.empty()) bad("no host");
  if (u.hosts.size() > 1) bad("one host only (mysql://user:pw@host:port/db)");
  if (u.path.empty()) bad("no database name (mysql://user:pw@host:port/db)");
  ConnectOptions o = take_connect_parameters(u, uri, options);
  // Anything else would be silently ignored (an ssl option, say): refused.
  if (!u.query.empty())
    bad("unknown parameter " + uri_fragment(uri, u.query.begin()->first) +
        " (MySQL URIs take connect_timeout, io_timeout and statement_cache_size)");
  return make_mysql_connection(std::move(u), mask_uri(uri), o);
}
}  // namespace

void mysql_doctor(DoctorContext& ctx);  // doctor.cpp
extern const DialectEntry kMysqlDialect{"mysql", {"mysql", "mariadb"}, "mysql://host:port/db", true, &open_mysql, &mysql_doctor,
                                 /*uri_is_path=*/false, nullptr, /*default_port=*/3306};
}  // namespace detail


}  // namespace sqlguard
