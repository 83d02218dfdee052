// Compiled when the mysql driver package was not found at configure time.
#include "dialect/factory.h"

namespace sqlguard::detail {
const bool kHaveMysql = false;
std::unique_ptr<Connection> open_mysql(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported, "mysql support was not compiled into this build", "mysql");
}
}  // namespace sqlguard::detail
