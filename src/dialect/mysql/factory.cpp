// MySQL / MariaDB: URI -> connection, and the registry entry.
#include "core/uri.h"
#include "dialect/mysql/connection.h"
#include "dialect/registry.h"

namespace sqlguard {
namespace detail {
namespace {
std::unique_ptr<Connection> open_mysql(std::string_view uri, const ConnectOptions& options) {
  ParsedUri u = parse_uri(uri);
  if (u.host.empty())
    throw Error(ErrorCode::kInvalidArgument, "malformed MySQL URI '" + mask_uri(uri) + "': no host", "mysql");
  if (u.path.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "malformed MySQL URI '" + mask_uri(uri) + "': no database name (mysql://user:pw@host:port/db)", "mysql");
  return make_mysql_connection(std::move(u), mask_uri(uri), options);
}
}  // namespace

const DialectEntry kMysqlDialect{DialectKind::kMysql, "mysql", {"mysql", "mariadb"}, true, &open_mysql};
}  // namespace detail


}  // namespace sqlguard
