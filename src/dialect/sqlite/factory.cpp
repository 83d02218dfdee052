// SQLite: URI -> connection, and the registry entry.
#include "dialect/registry.h"
#include "dialect/sqlite/connection.h"
#include "sqlguard/connection.h"

namespace sqlguard {
namespace detail {
namespace {
std::unique_ptr<Connection> open_sqlite(std::string_view uri, const ConnectOptions& options) {
  // sqlite::memory:, sqlite:///abs/path, sqlite://relative/path, sqlite:path
  // The path is taken literally (no percent-decoding, no query): the file
  // opened is always the one messages name.
  std::string_view rest = uri.substr(uri.find(':') + 1);
  std::string path;
  if (rest == ":memory:" || rest == "//:memory:") path = ":memory:";
  else if (rest.substr(0, 2) == "//") path = std::string(rest.substr(2));
  else path = std::string(rest);
  auto bad = [&](const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument, "malformed SQLite URI '" + mask_uri(uri) + "': " + why, "sqlite");
  };
  if (path.empty()) bad("no file path (use sqlite:///abs/path.db, sqlite://relative.db or sqlite::memory:)");
  if (path.find('?') != std::string::npos)
    bad("a '?' in an SQLite path is refused: SQLite URIs take no parameters, and cutting the path at the '?' "
        "would open another file than the one named (rename the file, or use ConnectOptions)");
  if (path.find('\0') != std::string::npos) bad("a NUL byte in the path");
  auto first_segment = std::string_view(path).substr(0, path.find('/'));
  if (first_segment.find('@') != std::string_view::npos)
    bad("SQLite URIs take no user or password (an '@' in the first part of a relative path looks like one; "
        "use ./ to mean a file)");
  return make_sqlite_connection(path, mask_uri(uri), options);
}
}  // namespace

bool in_memory(std::string_view uri) {
  std::string_view rest = uri.substr(uri.find(':') + 1);
  return rest == ":memory:" || rest == "//:memory:";
}

void sqlite_doctor(DoctorContext& ctx);  // doctor.cpp
extern const DialectEntry kSqliteDialect{"sqlite", {"sqlite", "sqlite3"}, "sqlite:///path.db or sqlite::memory:", true, &open_sqlite, &sqlite_doctor,
                                  /*uri_is_path=*/true, &in_memory};
}  // namespace detail


}  // namespace sqlguard
