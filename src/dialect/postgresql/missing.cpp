// Compiled instead of factory.cpp when the postgresql driver package was not found at
// configure time: the dialect stays registered (its catalog, messages) but
// cannot open connections.
#include "dialect/registry.h"

namespace sqlguard::detail {
namespace {
std::unique_ptr<Connection> open_missing(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported,
              "postgresql support was not compiled into this build of sqlguard (its driver package was not found at "
              "configure time)",
              "postgresql");
}
}  // namespace
const DialectEntry kPostgresqlDialect{DialectKind::kPostgresql, "postgresql", {"postgresql", "postgres"}, "postgresql://host:port/db", false, &open_missing};
}  // namespace sqlguard::detail
