// Migrations serialized by a transaction-scoped advisory lock (PostgreSQL):
// the whole run is one transaction (DDL is transactional) and the lock is its
// first statement, released by its COMMIT or ROLLBACK. Safe behind a
// transaction pooler, and a lost session cannot strand it.
#include "core/catalog.h"
#include "core/migration_lock.h"
#include "dialect/dialect.h"

namespace sqlguard::detail {
namespace {

class TransactionLockMigrations final : public MigrationLockPlan {
 public:
  std::string_view name() const noexcept override { return "transaction_lock"; }
  bool whole_run_in_one_transaction() const noexcept override { return true; }

  // The wait is the transaction's lock_timeout (migration_lock.h), not max_wait.
  std::unique_ptr<MigrationLockHold> lock(Connection& conn, std::chrono::seconds) const override {
    static constexpr Column kLocked = column(Sql::migrate_lock_xact, "locked");
    auto r = run(conn, Sql::migrate_lock_xact);
    if (r.rows.empty() || cell(r.rows[0], kLocked).is_null() || cell(r.rows[0], kLocked).as_int() != 1)
      throw Error(ErrorCode::kLockBusy, "could not take the migration lock within 300 s",
                  std::string(conn.dialect().name()));
    return std::make_unique<MigrationLockHold>();  // the run's transaction ends it
  }
};

}  // namespace

const MigrationLockPlan& transaction_lock_migrations() {
  static const TransactionLockMigrations plan;
  return plan;
}

}  // namespace sqlguard::detail
