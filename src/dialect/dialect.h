// Internal: what really differs between dialects besides their SQL (which is
// in sql/<dialect>/, see core/catalog.h): identifier quoting, the named
// protocol plans (how an acquire is decided, how a waiter is woken, how
// migrations are serialized), and virtuals with defaults for the rest (SOCI
// style): the lock wait bound of a row-lock scope, a server-side statement
// bound for watchdog sessions, how identifiers compare.
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
class AcquirePlan;
class WaitPlan;
class MigrationLockPlan;
class RenewPlan;
class BatchPlan;

// The plans a dialect (or variant) uses: src/plans/plans.h,
// src/core/migration_lock.h. Chosen once, shared by every connection.
struct DialectPlans {
  const AcquirePlan* acquire;
  const WaitPlan* wait;
  const MigrationLockPlan* migrations;
  const RenewPlan* renew;
  // Coalesced try-acquires and releases of the lock client; nullptr: none
  // (each name is sent alone).
  const BatchPlan* batch = nullptr;
};
}  // namespace detail

class Dialect {
 public:
  // `catalog`: the name of the SQL catalog (sql/<catalog>/); empty = `name`.
  Dialect(std::string_view name, char quote, detail::DialectPlans plans, std::string_view catalog = {})
      : name_(name), quote_(quote), plans_(plans), catalog_name_(catalog.empty() ? name : catalog) {}
  virtual ~Dialect() = default;
  std::string_view name() const noexcept { return name_; }

  // Quotes an identifier that validate_identifier() already accepted
  // ("schema.table" becomes two quoted parts).
  std::string quote(std::string_view validated) const;
  // The SQL catalog of this dialect (parsed on first use).
  const detail::Catalog& catalog() const;
  const detail::DialectPlans& plans() const noexcept { return plans_; }

  // Bounds every statement of a watchdog's session on the server too (its
  // client-side I/O deadline always applies). Default: nothing more.
  virtual void bound_session_statements(Connection&, std::chrono::milliseconds) const {}
  // True where lease_release commits without waiting for the flush (safe on
  // its own, see sql/postgresql/lease.sql): inside a caller's transaction, or
  // for ReleaseCommit::kDurable, lease_release_flushed runs instead.
  virtual bool release_skips_commit_flush() const noexcept { return false; }
  // Whether two spellings name the same column (validated identifiers).
  // Default: ASCII case-insensitive (unquoted identifiers fold).
  virtual bool same_identifier(std::string_view a, std::string_view b) const;
  // Whether key_column_collation can tell a key column's collation, so the
  // writers on user tables can warn about one that compares keys loosely.
  // Default: true. SQLite: false (its catalog does not report COLLATE).
  virtual bool reports_key_collation() const { return true; }
  // Whether GuardedUpdate::apply_all() is one statement (guarded_apply_many:
  // lock, check and write all or none), or guarded_lock_many then
  // guarded_update_many in one transaction. Default: false (two statements).
  virtual bool guards_many_keys_in_one_statement() const noexcept { return false; }

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
  std::string_view name_;
  char quote_;
  detail::DialectPlans plans_;
  std::string_view catalog_name_;
  mutable std::once_flag catalog_once_;
  mutable const detail::Catalog* catalog_ = nullptr;
};

}  // namespace sqlguard
