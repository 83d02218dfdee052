// A stub lock kind, "stubmutex": a one-permit mutex built on the holdings
// engine (a semaphore's row, renewed and waited for by the lock client). It is
// what tests/new_kind/run.sh adds to a copy of the tree to prove that a new
// kind is this one file (as src/strategies/kinds/stub_mutex.cpp), its
// statements (sql/<dialect>/stub_mutex.sql) and one line of
// include/sqlguard/lock_kinds.def:
//   SQLGUARD_LOCK_KIND(kStubMutex, "stubmutex", "a stub mutex", kStubMutexKind)
// The family's tests ([lock-kinds]) then run on it as on every kind.
#include <memory>

#include "sqlguard/lock_client.h"
#include "sqlguard/validate.h"
#include "core/catalog.h"
#include "strategies/kinds.h"
#include "strategies/sync/sync_handle.h"

// The statements of sql/<dialect>/stub_mutex.sql, declared as in src/core/statements.def.
#ifdef SQLGUARD_KIND_STATEMENTS
SQLGUARD_SQL(stub_mutex_holders, "name", many, "owner, fence, expire_at, db_now_ms")
#endif

namespace sqlguard::detail {
namespace {

using std::chrono::milliseconds;

class StubMutex final : public Lock {
 public:
  StubMutex(std::shared_ptr<LockClient> client, std::string name, LeaseOptions options, Watchdog watchdog)
      : h_(std::move(client), std::move(name), LockKind::kStubMutex, std::move(options), watchdog == Watchdog::kOn,
           "StubMutex") {}

  LockKind kind() const noexcept override { return LockKind::kStubMutex; }
  const std::string& name() const noexcept override { return h_.name(); }
  bool try_acquire() override { return h_.try_acquire(SyncMode::kPermits, 1, 1); }
  bool acquire(milliseconds wait) override { return h_.acquire(SyncMode::kPermits, 1, 1, wait); }
  void acquire_async(milliseconds wait, AcquireCallback done) override {
    h_.acquire_async(SyncMode::kPermits, 1, 1, wait, std::move(done));
  }
  using Lock::acquire_async;
  bool cancel_acquire() override { return h_.cancel_acquire(); }
  bool release() override { return h_.release(); }
  bool owns() const override { return h_.owns(); }
  std::int64_t fence() const override { return h_.fence(); }
  std::string owner() const override { return h_.owner(); }
  int hold_count() const override { return h_.hold_count(); }
  milliseconds remaining() const override { return h_.remaining(); }
  std::optional<LeaseLoss> last_loss() const override { return h_.last_loss(); }
  bool run_guarded(const std::function<void(Transaction&)>& work) override { return h_.run_guarded(work); }

 protected:
  milliseconds lock_wait() const override { return h_.options().wait; }

 private:
  SyncHandle h_;
};

void check(const LockSpec& spec) { refuse_spec_extras(spec, "a stub mutex"); }

std::shared_ptr<Lock> make(std::shared_ptr<LockClient> client, std::string name, const LockSpec& spec,
                           LeaseOptions options, Watchdog watchdog) {
  (void)spec;  // checked by check() first
  return std::make_shared<StubMutex>(std::move(client), std::move(name), std::move(options), watchdog);
}

std::shared_ptr<Lock> make_from_uri(const std::string& uri, std::string name, const LockSpec& spec,
                                    LeaseOptions options, Watchdog watchdog, const ConnectOptions& connect) {
  validate_name(name, "StubMutex name");
  validate_sync_options(options, "StubMutex", false);
  return make(shared_client_for(uri, options, connect, "StubMutex"), std::move(name), spec, std::move(options),
              watchdog);
}

// Its own statement: the live holder rows of a name of this kind.
std::vector<LockHolder> holders(Connection& conn, const std::string& name) {
  static constexpr auto kOwner = column(Sql::stub_mutex_holders, "owner");
  static constexpr auto kFence = column(Sql::stub_mutex_holders, "fence");
  static constexpr auto kExpire = column(Sql::stub_mutex_holders, "expire_at");
  static constexpr auto kNow = column(Sql::stub_mutex_holders, "db_now_ms");
  std::vector<LockHolder> out;
  for (const auto& row : run(conn, Sql::stub_mutex_holders, {name}).rows)
    out.push_back(LockHolder{cell(row, kOwner).as_string(), cell(row, kFence).as_int(), "permits", 1,
                             cell(row, kExpire).as_int() - cell(row, kNow).as_int()});
  return out;
}

}  // namespace

const KindOps kStubMutexKind{check, make, make_from_uri, holders};

}  // namespace sqlguard::detail
