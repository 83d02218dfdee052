// A guarded transaction, written once for every lock kind
// (Lock::run_guarded): one transaction that first re-checks the handle's
// row (a lease's lock row, a holding's row: owner, fence, not expired) and
// locks it until commit, so nobody can take it over in between. A lease
// whose renewal is due is renewed inside it, on the row it has locked
// already; a holding is not (an acquire counts live holdings with a read
// of its own and would trust the old expiry), the renewer renews it when
// the transaction ends.
#include <span>

#include "client/client.h"
#include "core/catalog.h"
#include "core/reconnect.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {
std::string described(const ClientLease& l) {
  return (l.kind == RowKind::kLease ? "lease '" : "holding of '") + l.name + "'";
}
}  // namespace

bool ClientCore::run_guarded(const std::shared_ptr<ClientLease>& l, const std::function<void(Transaction&)>& work) {
  check_process();
  milliseconds left{0};
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    if (l->state->valid_locked())
      left = std::chrono::duration_cast<milliseconds>(l->state->valid_until - steady_clock::now());
  }
  auto c = borrow_for(*l, false);
  Connection& conn = *c;
  // The renewer leaves this row out while the transaction holds it (a batch
  // would wait for it), and renews it right after if it fell due.
  struct Guarded {
    ClientCore& core;
    ClientLease& lease;
    Guarded(ClientCore& c, ClientLease& l) : core(c), lease(l) { ++lease.guarded; }
    ~Guarded() {
      --lease.guarded;
      core.renew_soon(&lease);
    }
  } guarded(*this, *l);
  // A connection that broke (a killed session, a failover, an I/O deadline)
  // before COMMIT was sent committed nothing, so the whole transaction runs
  // again on a fresh connection while the trust window lasts. An unknown
  // COMMIT outcome is never retried.
  return with_reconnect(
      conn, left, "guarded transaction on " + described(*l),
      [&](int) {
        std::string owner;
        std::int64_t fence, key;
        {
          std::lock_guard<std::mutex> lk(l->state->mu);
          if (!l->state->valid_locked()) return false;
          owner = l->state->owner;
          fence = l->state->fence;
          key = l->key;
        }
        return guarded_once(conn, *l, owner, fence, key, work);
      },
      InDoubt::kThrow);
}

bool ClientCore::guarded_once(Connection& conn, ClientLease& l, const std::string& owner, std::int64_t fence,
                              std::int64_t key, const std::function<void(Transaction&)>& work) {
  const bool lease = l.kind == RowKind::kLease;
  if (!lease && l.renew && renewal_wanted(&l)) {
    // A holding due for renewal is renewed first, in a statement of its
    // own: back-to-back guarded transactions would otherwise keep the
    // renewer out (its batch would wait for their row locks) until the
    // trust window ends. Not inside the transaction: see the file comment.
    const auto start = steady_clock::now();
    const RowRenewal row{l.name, key, owner, fence, l.options.ttl};
    if (renew_holdings(conn, std::span<const RowRenewal>(&row, 1)).front()) {
      {
        std::lock_guard<std::mutex> lk(l.state->mu);
        if (l.state->owner == owner && l.state->fence == fence && !l.state->lost)
          l.state->valid_until = start + l.options.ttl - l.margin;
      }
      renewed_in_guard(&l);
    }
  }
  Transaction tx(conn);
  // One renewal statement a period, not one per transaction, while guarded
  // transactions keep the renewer out.
  const bool renew_here = lease && l.renew && renewal_wanted(&l);
  const auto renew_start = steady_clock::now();
  // Still held (guard_check), then renewed if it is due.
  const bool held = guard_check(conn, l, owner, fence, key) &&
                    (!renew_here || renew_lease(conn, l.name, owner, fence, l.options.ttl));
  if (!held) {
    tx.rollback();
    std::int64_t known_expire_at = 0;
    {
      std::lock_guard<std::mutex> lk(l.state->mu);
      if (l.state->fence == fence) known_expire_at = l.state->expire_at;
    }
    guard_lost(conn, l, owner, fence, key, known_expire_at);
    return false;
  }
  work(tx);
  tx.commit();
  if (renew_here) {
    {
      std::lock_guard<std::mutex> lk(l.state->mu);
      if (l.state->owner == owner && l.state->fence == fence && !l.state->lost)
        l.state->valid_until = renew_start + l.options.ttl - l.margin;
    }
    renewed_in_guard(&l);
  }
  return true;
}

bool ClientCore::guard_check(Connection& conn, const ClientLease& l, const std::string& owner, std::int64_t fence,
                             std::int64_t key) {
  return l.kind == RowKind::kLease ? run(conn, Sql::lease_guard_check, {l.name, owner, fence}).affected == 1
                                   : run(conn, Sql::sync_guard_check, {l.name, key, owner, fence}).affected == 1;
}

void ClientCore::guard_lost(Connection& conn, ClientLease& l, const std::string& owner, std::int64_t fence,
                            std::int64_t key, std::int64_t known_expire_at) {
  std::string detail;
  const LossCause cause = l.kind == RowKind::kLease
                              ? diagnose_lease(conn, l.name, owner, fence, known_expire_at, &detail)
                              : diagnose_holding(conn, l.name, key, owner, fence, true, &detail);
  l.state->mark_lost(cause, std::move(detail), &owner, fence);
}

}  // namespace sqlguard::detail
