// Compiled instead of factory.cpp when the postgresql dialect is not built
// (SQLGUARD_WITH_POSTGRESQL=OFF, or AUTO and libpqxx-dev not found): the dialect stays
// registered (its catalog, URI scheme, messages) but opening a connection throws
// not_supported naming the build option.
#include "dialect/registry.h"

namespace sqlguard::detail {
namespace {
std::unique_ptr<Connection> open_missing(std::string_view, const ConnectOptions&) {
  throw Error(ErrorCode::kNotSupported,
              "postgresql support was not compiled into this build of sqlguard: configure it with "
              "-DSQLGUARD_WITH_POSTGRESQL=ON (needs libpqxx-dev)",
              "postgresql");
}
}  // namespace
extern const DialectEntry kPostgresqlDialect{"postgresql", {"postgresql", "postgres"}, "postgresql://host:port/db", false, &open_missing};
}  // namespace sqlguard::detail
