// Migrations serialized by their own transaction (SQLite): the whole run is
// one BEGIN IMMEDIATE transaction, which excludes every other writer until it
// ends. No lock statement.
#include "core/migration_lock.h"

namespace sqlguard::detail {
namespace {

class ExclusiveTransactionMigrations final : public MigrationLockPlan {
 public:
  std::string_view name() const noexcept override { return "exclusive_transaction"; }
  bool whole_run_in_one_transaction() const noexcept override { return true; }
  std::unique_ptr<MigrationLockHold> lock(Connection&, std::chrono::seconds) const override { return std::make_unique<MigrationLockHold>(); }
};

}  // namespace

const MigrationLockPlan& exclusive_transaction_migrations() {
  static const ExclusiveTransactionMigrations plan;
  return plan;
}

}  // namespace sqlguard::detail
