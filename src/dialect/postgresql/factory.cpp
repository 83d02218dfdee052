// PostgreSQL: URI -> connection, and the registry entry.
#include <algorithm>

#include "core/uri.h"
#include "dialect/postgresql/connection.h"
#include "dialect/registry.h"

namespace sqlguard {
namespace detail {
namespace {
std::unique_ptr<Connection> open_postgresql(std::string_view uri, const ConnectOptions& options) {
  std::string password;
  try {
    password = parse_uri(uri).password;
  } catch (const Error&) {
    // libpq accepts forms we do not parse (multiple hosts); it reports
    // malformed URIs itself.
  }
  std::string connstr(uri);
  if (connstr.find("connect_timeout=") == std::string::npos) {
    auto secs = std::max<long long>(2, (options.connect_timeout.count() + 999) / 1000);
    connstr += (connstr.find('?') == std::string::npos ? "?" : "&");
    connstr += "connect_timeout=" + std::to_string(secs);
  }
  if (connstr.find("application_name=") == std::string::npos) connstr += "&application_name=sqlguard";
  return make_pg_connection(std::move(connstr), std::move(password), mask_uri(uri));
}
}  // namespace

const DialectEntry kPostgresqlDialect{DialectKind::kPostgres, "postgresql", {"postgresql", "postgres"}, true, &open_postgresql};
}  // namespace detail


}  // namespace sqlguard
