// SQLite: URI -> connection, and the registry entry.
#include "dialect/registry.h"
#include "dialect/sqlite/connection.h"

namespace sqlguard {
namespace detail {
namespace {
std::unique_ptr<Connection> open_sqlite(std::string_view uri, const ConnectOptions& options) {
  // sqlite::memory:, sqlite:///abs/path, sqlite://relative/path, sqlite:path
  std::string_view rest = uri.substr(uri.find(':') + 1);
  std::string path;
  if (rest == ":memory:" || rest == "//:memory:") path = ":memory:";
  else if (rest.substr(0, 2) == "//") path = std::string(rest.substr(2));
  else path = std::string(rest);
  auto q = path.find('?');
  if (q != std::string::npos) path.resize(q);
  if (path.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "malformed SQLite URI '" + std::string(uri) +
                    "': no file path (use sqlite:///abs/path.db, sqlite://relative.db or sqlite::memory:)",
                "sqlite");
  return make_sqlite_connection(path, std::string(uri), options);
}
}  // namespace

const DialectEntry kSqliteDialect{DialectKind::kSqlite, "sqlite", {"sqlite", "sqlite3"}, true, &open_sqlite};
}  // namespace detail


}  // namespace sqlguard
