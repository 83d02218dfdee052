#include "sqlguard/connection.h"

#include <algorithm>

#include "dialect/dialect.h"
#include "dialect/factory.h"
#include "sqlguard/validate.h"

namespace sqlguard {

std::string_view to_string(DialectKind kind) noexcept {
  switch (kind) {
    case DialectKind::kSqlite: return "sqlite";
    case DialectKind::kPostgres: return "postgresql";
    case DialectKind::kMysql: return "mysql";
  }
  return "unknown";
}

Connection::~Connection() = default;

std::int64_t Connection::db_now_ms() {
  std::string sql = "SELECT ";
  sql += dialect().now_ms();
  return execute(sql).rows.at(0)[0].as_int();
}

bool Connection::wait_for_notify(const std::string&, std::chrono::milliseconds) {
  dialect().not_supported("LISTEN/NOTIFY");
}

void Connection::unlisten(const std::string&) {}

void Dialect::not_supported(std::string_view feature) const {
  throw Error(ErrorCode::kNotSupported,
              std::string(feature) + " is not supported on " + std::string(name()) +
                  " (see the support matrix in README.md)",
              std::string(name()));
}

std::string quote_parts(std::string_view validated, char q) {
  std::string out;
  out.reserve(validated.size() + 4);
  out += q;
  for (char c : validated) {
    if (c == '.') {
      out += q;
      out += '.';
      out += q;
    } else {
      out += c;
    }
  }
  out += q;
  return out;
}

std::string mask_uri(std::string_view uri) {
  std::string s(uri);
  // URI form: scheme://user:password@host...
  auto scheme_end = s.find("://");
  if (scheme_end != std::string::npos) {
    auto auth_start = scheme_end + 3;
    auto at = s.find('@', auth_start);
    auto slash = s.find('/', auth_start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      auto colon = s.find(':', auth_start);
      if (colon != std::string::npos && colon < at) s.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // Query/keyword form: password=...
  for (std::string key : {"password=", "passwd=", "pwd="}) {
    std::size_t pos = 0;
    while ((pos = s.find(key, pos)) != std::string::npos) {
      auto start = pos + key.size();
      auto end = s.find_first_of("& ", start);
      if (end == std::string::npos) end = s.size();
      s.replace(start, end - start, "***");
      pos = start + 3;
    }
  }
  return s;
}

std::unique_ptr<Connection> make_connection(std::string_view uri, const ConnectOptions& options) {
  check_duration(options.connect_timeout, "connect_timeout", std::chrono::milliseconds(1),
                 std::chrono::hours(1));
  check_duration(options.busy_timeout, "busy_timeout", std::chrono::milliseconds(0), std::chrono::hours(1));
  check_duration(options.io_timeout, "io_timeout", std::chrono::milliseconds(0), std::chrono::hours(24));
  auto colon = uri.find(':');
  if (uri.empty() || colon == std::string_view::npos)
    throw Error(ErrorCode::kInvalidArgument,
                "malformed database URI '" + mask_uri(uri) +
                    "': expected sqlite:///path.db, sqlite::memory:, postgresql://... or mysql://...");
  std::string scheme(uri.substr(0, colon));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  DialectKind kind;
  if (scheme == "sqlite" || scheme == "sqlite3") kind = DialectKind::kSqlite;
  else if (scheme == "postgresql" || scheme == "postgres") kind = DialectKind::kPostgres;
  else if (scheme == "mysql" || scheme == "mariadb") kind = DialectKind::kMysql;
  else
    throw Error(ErrorCode::kInvalidArgument, "unknown URI scheme '" + scheme + "' in '" + mask_uri(uri) +
                                                 "': use sqlite, postgresql or mysql (mariadb)");
  if (!dialect_available(kind))
    throw Error(ErrorCode::kNotSupported,
                std::string(to_string(kind)) + " support was not compiled into this build of sqlguard "
                "(its driver package was not found at configure time)", std::string(to_string(kind)));
  switch (kind) {
    case DialectKind::kSqlite: return detail::open_sqlite(uri, options);
    case DialectKind::kPostgres: return detail::open_postgres(uri, options);
    case DialectKind::kMysql: return detail::open_mysql(uri, options);
  }
  throw Error(ErrorCode::kInternal, "unreachable");
}

bool dialect_available(DialectKind kind) noexcept {
  switch (kind) {
    case DialectKind::kSqlite: return detail::kHaveSqlite;
    case DialectKind::kPostgres: return detail::kHavePostgres;
    case DialectKind::kMysql: return detail::kHaveMysql;
  }
  return false;
}

Transaction::Transaction(Connection& conn, Isolation isolation) : conn_(conn) { conn_.begin(isolation); }

Transaction::~Transaction() {
  if (!active_) return;
  try {
    conn_.rollback();
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, std::string("rollback in ~Transaction failed: ") + e.what());
  }
}

void Transaction::commit() {
  if (!active_) throw Error(ErrorCode::kInvalidArgument, "commit() on a transaction that is no longer active");
  active_ = false;  // whatever happens, this object no longer owns the transaction
  conn_.commit();
}

void Transaction::rollback() {
  if (!active_) return;
  active_ = false;
  conn_.rollback();
}

}  // namespace sqlguard
