// Compiled instead of factory.cpp when the sqlite dialect is not built
// (SQLGUARD_WITH_SQLITE=OFF, or AUTO and libsqlite3-dev not found): the dialect stays
// registered (its catalog, URI scheme, messages) but opening a connection throws
// not_supported naming the build option.
#include "dialect/registry.h"

namespace sqlguard::detail {
namespace {
std::unique_ptr<Connection> open_missing(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported,
              "sqlite support was not compiled into this build of sqlguard: configure it with "
              "-DSQLGUARD_WITH_SQLITE=ON (needs libsqlite3-dev)",
              "sqlite");
}
}  // namespace
extern const DialectEntry kSqliteDialect{"sqlite", {"sqlite", "sqlite3"}, "sqlite:///path.db or sqlite::memory:", false, &open_missing,
                                  /*doctor=*/nullptr, /*uri_is_path=*/true};
}  // namespace sqlguard::detail
