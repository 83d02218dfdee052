// sqlguard bench: the "raw" baseline — statements run directly through the
// native driver (sqlite3 / libpqxx / mysqlcppconn) with statement handles
// prepared once, no sqlguard code on the hot path. The native session is
// borrowed from a sqlguard connection so both paths share the exact session
// settings (MySQL time zone, READ COMMITTED, CLIENT_FOUND_ROWS; SQLite WAL).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/catalog.h"
#include "sqlguard/connection.h"

namespace sqlguard::bench {

// A bound parameter (views: the caller keeps the bytes alive for the call).
struct P {
  enum Type { kInt, kText, kBlob, kDouble } type;
  std::int64_t i = 0;
  double d = 0;
  std::string_view s;
  P(std::int64_t v) : type(kInt), i(v) {}
  P(double v) : type(kDouble), d(v) {}
  P(int v) : type(kInt), i(v) {}
  P(std::string_view v) : type(kText), s(v) {}
  P(const std::string& v) : type(kText), s(v) {}
  P(const char* v) : type(kText), s(v) {}
  static P blob(std::string_view v) {
    P p(v);
    p.type = kBlob;
    return p;
  }
};

enum class RawErr { kDuplicate, kConflict, kBusy, kOther };
struct RawError : std::runtime_error {
  RawError(RawErr k, const std::string& m) : std::runtime_error(m), kind(k) {}
  RawErr kind;
};

struct RawResult {
  std::int64_t affected = 0;
  std::size_t nrows = 0;
  std::vector<std::string> first;  // cells of the first row, as text (NULL = "")
  std::vector<std::vector<std::optional<std::string>>> rows;  // every row, NULL = nullopt
};

class RawConn {
 public:
  virtual ~RawConn() = default;
  // Prepares a statement written with `?` placeholders; returns its handle.
  virtual int prepare(const std::string& sql) = 0;
  virtual RawResult exec(int stmt, const std::vector<P>& params) = 0;
  RawResult exec(int stmt, std::initializer_list<P> params) { return exec(stmt, std::vector<P>(params)); }
  virtual void begin() = 0;  // SQLite: BEGIN IMMEDIATE (as sqlguard)
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
};

// Borrows the native handle of `conn` (which must outlive the RawConn).
std::unique_ptr<RawConn> make_raw(Connection& conn);

// A Connection whose statements run through `raw` (prepared once per text,
// no sqlguard driver code): the library's own protocol code (acquire_lease,
// release_lease: the dialect's plans and the catalog's parameter order) runs
// on it unchanged, so the raw baseline has no copy of the lease protocol.
// Dialect, capabilities and session id are `base`'s (which must outlive it).
std::unique_ptr<Connection> make_raw_session(Connection& base, std::shared_ptr<RawConn> raw);

// `values` (in the catalog's canonical order for `entry`) in the order of the
// entry's `?` placeholders (CatalogEntry::bind_order).
std::vector<P> in_bind_order(const CatalogEntry& entry, std::vector<P> values);

// `?` -> $1..$n (PostgreSQL's native form), skipping quoted text.
std::string number_placeholders(std::string_view sql);

}  // namespace sqlguard::bench
