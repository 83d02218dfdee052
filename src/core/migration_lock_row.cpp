// Migrations serialized by a lock ROW (MariaDB): GET_LOCK is node-local on
// Galera, a row is certified cluster-wide. Create the table, clear a holder
// whose row expired (a migrator that died holding it), insert the row; a
// duplicate key (or a certification conflict) means another migrator holds
// it, retried with backoff for up to max_wait (migrate(): 300 s). The run is not one transaction:
// one per migration where DDL is transactional (migrate()).
#include <chrono>
#include <thread>

#include "core/catalog.h"
#include "core/migration_lock.h"
#include "dialect/dialect.h"
#include "sqlguard/backoff.h"

namespace sqlguard::detail {
namespace {

class LockRowHold final : public MigrationLockHold {
 public:
  explicit LockRowHold(Connection& conn) : conn_(conn) {}
  ~LockRowHold() override {
    try {
      run(conn_, Sql::migrate_unlock_row);
    } catch (const std::exception& e) {
      // The row expires by itself (migrate_lock_row): the next migrator
      // waits at most that long.
      log(LogLevel::kWarning, std::string("releasing the migration lock failed: ") + e.what());
    }
  }

 private:
  Connection& conn_;
};

class LockRowMigrations final : public MigrationLockPlan {
 public:
  std::string_view name() const noexcept override { return "lock_row"; }
  bool whole_run_in_one_transaction() const noexcept override { return false; }

  std::unique_ptr<MigrationLockHold> lock(Connection& conn, std::chrono::seconds max_wait) const override {
    run(conn, Sql::migrate_lock_table);
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    for (int attempt = 1;; ++attempt) {
      try {
        run(conn, Sql::migrate_lock_clear);
        if (insert_if_absent(conn, Sql::migrate_lock_row, {})) return std::make_unique<LockRowHold>(conn);
      } catch (const Error& e) {
        // Two nodes inserting at once: the loser fails certification. Retry.
        if (e.code() != ErrorCode::kConflict) throw;
      }
      if (std::chrono::steady_clock::now() >= deadline)
        throw Error(ErrorCode::kLockBusy,
                    "could not take the migration lock (row sqlguard_migrate_lock) within " +
                        std::to_string(max_wait.count()) + " s: a migration or a history scope change holds it",
                    std::string(conn.dialect().name()));
      std::this_thread::sleep_for(Backoff{std::chrono::milliseconds(50), std::chrono::seconds(2)}.delay(attempt));
    }
  }
};

}  // namespace

const MigrationLockPlan& lock_row_migrations() {
  static const LockRowMigrations plan;
  return plan;
}

}  // namespace sqlguard::detail
