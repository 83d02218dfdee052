// Compiled when the postgres driver package was not found at configure time.
#include "dialect/factory.h"

namespace sqlguard::detail {
const bool kHavePostgres = false;
std::unique_ptr<Connection> open_postgres(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported, "postgres support was not compiled into this build", "postgres");
}
}  // namespace sqlguard::detail
