// Compiled when the sqlite driver package was not found at configure time.
#include "dialect/factory.h"

namespace sqlguard::detail {
const bool kHaveSqlite = false;
std::unique_ptr<Connection> open_sqlite(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported, "sqlite support was not compiled into this build", "sqlite");
}
}  // namespace sqlguard::detail
