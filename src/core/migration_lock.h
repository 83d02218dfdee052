// Internal: how a dialect serializes migration runs (named in its registry
// entry, dialect/dialect.h). migrate() asks the plan, never the catalog.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "sqlguard/connection.h"

namespace sqlguard::detail {

// Frees the migration lock when destroyed (a transaction-scoped lock: nothing
// to do, the run's transaction ends it).
class MigrationLockHold {
 public:
  virtual ~MigrationLockHold() = default;
};

class MigrationLockPlan {
 public:
  virtual ~MigrationLockPlan() = default;
  virtual std::string_view name() const noexcept = 0;
  // True: the whole run is one transaction, begun before lock().
  virtual bool whole_run_in_one_transaction() const noexcept = 0;
  // Takes the lock; Error(kLockBusy) when it cannot. The row plan waits up to
  // `max_wait` (migrate(): 300 s); the transaction plan's advisory lock waits
  // as long as the transaction's lock_timeout lets it (migrate(): the
  // session's; history scope changes set 2 s first). Also serializes the grant
  // history's scope changes (strategies/history.cpp).
  virtual std::unique_ptr<MigrationLockHold> lock(Connection& conn, std::chrono::seconds max_wait) const = 0;
};

// A transaction-scoped advisory lock taken first inside the one transaction
// of the whole run (migrate_lock_xact; PostgreSQL, safe behind a pooler).
const MigrationLockPlan& transaction_lock_migrations();
// A lock ROW around the run (migrate_lock_table, migrate_lock_clear,
// migrate_lock_row, migrate_unlock_row; MariaDB: GET_LOCK is node-local on
// Galera, a row is certified cluster-wide). One transaction per migration
// where DDL is transactional.
const MigrationLockPlan& lock_row_migrations();
// The whole run is one transaction that excludes every other writer
// (SQLite's BEGIN IMMEDIATE); no lock statement.
const MigrationLockPlan& exclusive_transaction_migrations();

}  // namespace sqlguard::detail
