// Compiled instead of factory.cpp when the sqlite driver package was not found at
// configure time: the dialect stays registered (its catalog, messages) but
// cannot open connections.
#include "dialect/registry.h"

namespace sqlguard::detail {
namespace {
std::unique_ptr<Connection> open_missing(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported,
              "sqlite support was not compiled into this build of sqlguard (its driver package was not found at "
              "configure time)",
              "sqlite");
}
}  // namespace
const DialectEntry kSqliteDialect{DialectKind::kSqlite, "sqlite", {"sqlite", "sqlite3"}, "sqlite:///path.db or sqlite::memory:", false, &open_missing,
                                  /*doctor=*/nullptr, /*uri_is_path=*/true};
}  // namespace sqlguard::detail
