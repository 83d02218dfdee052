// Compiled instead of factory.cpp when the mysql driver package was not found at
// configure time: the dialect stays registered (its catalog, messages) but
// cannot open connections.
#include "dialect/registry.h"

namespace sqlguard::detail {
namespace {
std::unique_ptr<Connection> open_missing(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported,
              "mysql support was not compiled into this build of sqlguard (its driver package was not found at "
              "configure time)",
              "mysql");
}
}  // namespace
const DialectEntry kMysqlDialect{DialectKind::kMysql, "mysql", {"mysql", "mariadb"}, "mysql://host:port/db", false, &open_missing};
}  // namespace sqlguard::detail
