// The lock client's side of a lock set (include/sqlguard/lock_set.h): one
// all-or-none attempt over several leases in one transaction, and a guarded
// transaction over all of them. Each name is taken by the dialect's own
// acquire plan (acquire_lease_seated: the same statements and take-over rule
// as a single lease's attempt); the transaction makes them one commit.
#include <span>

#include "client/client.h"
#include "core/catalog.h"
#include "core/reconnect.h"
#include "plans/plans.h"
#include "sqlguard/validate.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

// What one name of the set got inside the attempt's transaction.
struct SetTook {
  std::string owner;
  std::int64_t fence = 0;
  std::int64_t expire_at = 0;
};

}  // namespace

bool ClientCore::try_acquire_set(std::span<const std::shared_ptr<ClientLease>> leases, SetRefusal* refused) {
  check_process();
  for (const auto& l : leases) admit(*l);
  auto c = borrow();
  Connection& conn = *c;
  const auto start = steady_clock::now();
  std::vector<SetTook> got;
  got.reserve(leases.size());
  // MariaDB: each take holds its name's wake-up lock (a session lock, not
  // undone by a rollback) until the lease's release; a set that rolls back
  // gives back the ones it took, or their waiters would wait for nobody.
  const bool wake_locks = wait_plan_->release_on_acquiring_session();
  const auto give_back_wake_locks = [&]() noexcept {
    if (!wake_locks) return;
    for (std::size_t i = 0; i < got.size(); ++i) {
      try {
        run(conn, Sql::lease_wakeup_signal, {lease_wakeup_channel(leases[i]->name)});
      } catch (const std::exception& e) {
        log(LogLevel::kDebug, "freeing the wake-up lock of '" + leases[i]->name + "' failed: " + e.what());
      }
    }
  };
  bool all = true;
  try {
    Transaction tx(conn);
    for (const auto& l : leases) {
      const auto& o = l->options;
      const std::string owner = o.owner.empty() ? make_owner_token() : o.owner;
      auto r = acquire_lease_here(conn, l->name, owner, o.ttl, o.min_hold, nullptr, false, o.take_over, {});
      if (!r.acquired) {
        refused->name = l->name;
        refused->holder_remaining_ms = r.holder_remaining_ms;
        note_refusal(*l->state, r.holder_remaining_ms);
        all = false;
        break;
      }
      got.push_back(SetTook{owner, r.fence, r.expire_at_ms});
      // (Still the set's transaction: a statement the server aborted it in
      // throws, and nothing runs after it outside the transaction.)
      if (!conn.in_transaction())
        throw Error(ErrorCode::kConflict, "lock set: the transaction ended while '" + l->name + "' was taken");
    }
    if (all) tx.commit();
    else tx.rollback();
  } catch (const Error& e) {
    // A deadlock victim, a lock wait timeout, a Galera certification
    // failure: another writer of one of the names won; nothing was taken.
    if (!is_contention(e)) {
      give_back_wake_locks();
      throw;
    }
    refused->name.clear();
    refused->holder_remaining_ms = 0;
    all = false;
  }
  if (!all) {
    give_back_wake_locks();
    return false;
  }
  for (std::size_t i = 0; i < leases.size(); ++i)
    took(leases[i], c.slot(), got[i].owner, got[i].fence, got[i].expire_at, start);
  return true;
}

bool ClientCore::run_guarded_set(std::span<const std::shared_ptr<ClientLease>> leases,
                                 const std::function<void(Transaction&)>& work) {
  check_process();
  milliseconds left = milliseconds::max();
  for (const auto& l : leases) {
    std::lock_guard<std::mutex> lk(l->state->mu);
    if (!l->state->valid_locked()) return false;
    left = std::min(left, std::chrono::duration_cast<milliseconds>(l->state->valid_until - steady_clock::now()));
  }
  auto c = borrow();
  Connection& conn = *c;
  // The renewer leaves the rows out while the transaction holds them.
  struct Guarded {
    ClientCore& core;
    std::span<const std::shared_ptr<ClientLease>> leases;
    explicit Guarded(ClientCore& c, std::span<const std::shared_ptr<ClientLease>> ls) : core(c), leases(ls) {
      for (const auto& l : leases) ++l->guarded;
    }
    ~Guarded() {
      for (const auto& l : leases) {
        --l->guarded;
        core.renew_soon(l.get());
      }
    }
  } guarded(*this, leases);
  return with_reconnect(
      conn, std::max(left, milliseconds(1)), "guarded transaction on a lock set",
      [&](int) {
        std::vector<std::pair<std::string, std::int64_t>> held;  // owner, fence of each name
        held.reserve(leases.size());
        for (const auto& l : leases) {
          std::lock_guard<std::mutex> lk(l->state->mu);
          if (!l->state->valid_locked()) return false;
          held.emplace_back(l->state->owner, l->state->fence);
        }
        Transaction tx(conn);
        for (std::size_t i = 0; i < leases.size(); ++i) {
          const ClientLease& l = *leases[i];
          const auto& [owner, fence] = held[i];
          if (run(conn, Sql::lease_guard_check, {l.name, owner, fence}).affected == 1) continue;
          tx.rollback();
          std::int64_t known_expire_at = 0;
          {
            std::lock_guard<std::mutex> lk(l.state->mu);
            if (l.state->fence == fence) known_expire_at = l.state->expire_at;
          }
          std::string detail;
          const LossCause cause = diagnose_lease(conn, l.name, owner, fence, known_expire_at, &detail);
          l.state->mark_lost(cause, std::move(detail), &owner, fence);
          return false;
        }
        work(tx);
        tx.commit();
        return true;
      },
      InDoubt::kThrow);
}

}  // namespace sqlguard::detail
