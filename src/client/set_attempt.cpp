// The lock client's side of a lock set (include/sqlguard/lock_set.h): one
// all-or-none attempt over several leases in one transaction, and a guarded
// transaction over all of them. Each name is taken by the dialect's own
// acquire plan (acquire_lease_seated: the same statements and take-over rule
// as a single lease's attempt); the transaction makes them one commit.
#include <algorithm>
#include <optional>
#include <span>

#include "client/client.h"
#include "core/catalog.h"
#include "core/reconnect.h"
#include "dialect/dialect.h"
#include "plans/plans.h"
#include "sqlguard/validate.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

// What one name of the set got inside the attempt's transaction.
struct SetTook {
  std::string owner;
  SyncGrant grant;  // (a lease's: its fence and expiry)
};

}  // namespace

int ClientCore::slot_of(const Connection& conn) const {
  std::lock_guard<std::mutex> lk(slot_mu_);
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].conn.get() == &conn) return static_cast<int>(i);
  return -1;
}

void ClientCore::release_set_quietly(std::span<const SetPart> parts) noexcept {
  for (const auto& p : parts) {
    if (p.release) p.release(*this);
    else release_quietly(p.lease);
  }
}

bool ClientCore::try_acquire_set_on(Connection& conn, int slot, std::span<const SetPart> parts,
                                    SetRefusal* refused, const std::string& first) {
  for (const auto& p : parts) admit(*p.lease);
  const auto start = steady_clock::now();
  // The order of the takes: as given, or the lease that stood in the way
  // first (see client.h).
  std::vector<std::size_t> order(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) order[i] = i;
  if (!first.empty() && conn.dialect().plans().acquire->never_waits_on_an_existing_row()) {
    auto it = std::find_if(order.begin(), order.end(),
                           [&](std::size_t i) { return !parts[i].take && parts[i].lease->name == first; });
    if (it != order.end()) std::rotate(order.begin(), it, it + 1);
  }
  std::vector<std::optional<SetTook>> got(parts.size());
  // MariaDB: each lease's take holds its name's wake-up lock (a session lock,
  // not undone by a rollback) until the lease's release; a set that rolls
  // back gives back the ones it took, or their waiters would wait for nobody.
  const bool wake_locks = wait_plan_->release_on_acquiring_session();
  const auto give_back_wake_locks = [&]() noexcept {
    if (!wake_locks) return;
    for (std::size_t i = 0; i < parts.size(); ++i)
      if (got[i] && !parts[i].take) wait_plan_->wake_waiters(conn, parts[i].lease->name);  // a holding has none
  };
  bool all = true;
  try {
    // READ COMMITTED: a holding's count reads what is committed when it is
    // taken, not a snapshot from the set's first statement (MariaDB).
    Transaction tx(conn, Isolation::kReadCommitted);
    for (const std::size_t i : order) {
      const SetPart& p = parts[i];
      const ClientLease& l = *p.lease;
      const auto& o = l.options;
      const std::string owner = o.owner.empty() ? make_owner_token() : o.owner;
      SetTook t{owner, SyncGrant{}};
      std::int64_t busy_ms = -1;
      if (p.take) {
        const SyncGrant g = p.take(conn, owner);
        if (g.acquired) t.grant = g;
        else busy_ms = g.takeover_in_ms;
      } else {
        auto r = acquire_lease_here(conn, l.name, owner, o.ttl, o.min_hold, nullptr, false, o.take_over, {});
        if (r.acquired) t.grant.fence = r.fence, t.grant.expire_at = r.expire_at_ms;
        else busy_ms = r.holder_remaining_ms;
      }
      if (busy_ms >= 0) {
        refused->name = l.name;
        refused->holder_remaining_ms = busy_ms;
        note_refusal(*l.state, busy_ms);
        all = false;
        break;
      }
      got[i] = std::move(t);
      // (Still the set's transaction: a statement the server aborted it in
      // throws, and nothing runs after it outside the transaction.)
      if (!conn.in_transaction())
        throw Error(ErrorCode::kConflict, "lock set: the transaction ended while '" + l.name + "' was taken");
    }
    if (all) tx.commit();
    else tx.rollback();
  } catch (const Error& e) {
    // A deadlock victim, a lock wait timeout, a Galera certification
    // failure, a holding slot another node inserted first: another writer of
    // one of the names won; nothing was taken.
    if (!is_insert_race(e)) {
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
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].took) parts[i].took(*this, got[i]->grant, got[i]->owner, start);
    else took(parts[i].lease, slot, got[i]->owner, got[i]->grant.fence, got[i]->grant.expire_at, start);
  }
  return true;
}

bool ClientCore::run_guarded_set(std::span<const SetPart> parts, const std::function<void(Transaction&)>& work) {
  check_process();
  milliseconds left = milliseconds::max();
  for (const auto& p : parts) {
    std::lock_guard<std::mutex> lk(p.lease->state->mu);
    if (!p.lease->state->valid_locked()) return false;
    left = std::min(left, std::chrono::duration_cast<milliseconds>(p.lease->state->valid_until - steady_clock::now()));
  }
  auto c = borrow();
  Connection& conn = *c;
  // The renewer leaves the rows out while the transaction holds them.
  struct Guarded {
    ClientCore& core;
    std::span<const SetPart> parts;
    explicit Guarded(ClientCore& c, std::span<const SetPart> ps) : core(c), parts(ps) {
      for (const auto& p : parts) ++p.lease->guarded;
    }
    ~Guarded() {
      for (const auto& p : parts) {
        --p.lease->guarded;
        core.renew_soon(p.lease.get());
      }
    }
  } guarded(*this, parts);
  struct Held {
    std::string owner;
    std::int64_t fence, key, expire_at;
  };
  return with_reconnect(
      conn, std::max(left, milliseconds(1)), "guarded transaction on a lock set",
      [&](int) {
        std::vector<Held> held;
        held.reserve(parts.size());
        for (const auto& p : parts) {
          const auto& st = *p.lease->state;
          std::lock_guard<std::mutex> lk(st.mu);
          if (!st.valid_locked()) return false;
          held.push_back(Held{st.owner, st.fence, p.lease->key, st.expire_at});
        }
        Transaction tx(conn);
        for (std::size_t i = 0; i < parts.size(); ++i) {
          ClientLease& l = *parts[i].lease;
          const Held& h = held[i];
          if (guard_check(conn, l, h.owner, h.fence, h.key)) continue;
          tx.rollback();
          guard_lost(conn, l, h.owner, h.fence, h.key, h.expire_at);
          return false;
        }
        work(tx);
        tx.commit();
        return true;
      },
      InDoubt::kThrow);
}

}  // namespace sqlguard::detail
