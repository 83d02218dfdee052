// Compiled instead of factory.cpp when the mysql dialect is not built
// (SQLGUARD_WITH_MYSQL=OFF, or AUTO and libmysqlcppconn-dev and libboost-dev not found): the dialect stays
// registered (its catalog, URI scheme, messages) but opening a connection throws
// not_supported naming the build option.
#include "dialect/registry.h"

namespace sqlguard::detail {
namespace {
std::unique_ptr<Connection> open_missing(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported,
              "mysql support was not compiled into this build of sqlguard: configure it with "
              "-DSQLGUARD_WITH_MYSQL=ON (needs libmysqlcppconn-dev and libboost-dev)",
              "mysql");
}
}  // namespace
extern const DialectEntry kMysqlDialect{"mysql", {"mysql", "mariadb"}, "mysql://host:port/db", false, &open_missing};
}  // namespace sqlguard::detail
