// Internal: what really differs between dialects besides their SQL (which is
// in sql/<dialect>/, see core/catalog.h): identifier quoting, and the lock
// wait bound of a row-lock scope where it is a session setting.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "sqlguard/connection.h"

namespace sqlguard {
namespace detail {
class Catalog;
}

class Dialect {
 public:
  // `catalog`: the SQL catalog to use when it is a variant of the dialect's
  // own ("postgresql+pooler", see core/catalog.h); empty = `name`.
  Dialect(DialectKind kind, std::string_view name, char quote, std::string_view catalog = {})
      : kind_(kind), name_(name), quote_(quote), catalog_name_(catalog.empty() ? name : catalog) {}
  virtual ~Dialect() = default;
  DialectKind kind() const noexcept { return kind_; }
  std::string_view name() const noexcept { return name_; }

  // Quotes an identifier that validate_identifier() already accepted
  // ("schema.table" becomes two quoted parts).
  std::string quote(std::string_view validated) const;
  // The SQL catalog of this dialect (parsed on first use).
  const detail::Catalog& catalog() const;

  // Lock wait bound of a row-lock scope. A session-scoped setting (MySQL
  // innodb_lock_wait_timeout, SQLite busy timeout) is set BEFORE begin() and
  // returns the previous value, which restore_session_lock_timeout() puts
  // back after the scope. A transaction-local one (PostgreSQL lock_timeout)
  // is set right AFTER begin() by set_local_lock_timeout(). Values are bound.
  virtual std::optional<std::int64_t> push_session_lock_timeout(Connection&, std::chrono::milliseconds) const {
    return std::nullopt;
  }
  virtual void restore_session_lock_timeout(Connection&, std::int64_t /*previous*/) const {}
  virtual void set_local_lock_timeout(Connection&, std::chrono::milliseconds) const {}

  // Throws Error(kNotSupported) naming the dialect and the feature.
  [[noreturn]] void not_supported(std::string_view feature) const;

 private:
  DialectKind kind_;
  std::string_view name_;
  char quote_;
  std::string_view catalog_name_;
  mutable std::once_flag catalog_once_;
  mutable const detail::Catalog* catalog_ = nullptr;
};

}  // namespace sqlguard
