// The lock client's work connections: borrowed call by call, one per slot
// (a client over a borrowed connection: that one, never busy).
#include <algorithm>
#include <limits>

#include "client/client.h"
#include "core/catalog.h"
#include "core/reconnect.h"
#include "plans/plans.h"
#include "plans/waiter.h"
#include "sqlguard/validate.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// ---- work connections ----------------------------------------------------------

ClientCore::Borrowed::~Borrowed() {
  if (!core_) return;
  {
    std::lock_guard<std::mutex> lk(core_->slot_mu_);
    core_->slots_[static_cast<std::size_t>(slot_)].busy = false;
    core_->wake_pending_locked();  // the oldest call queued for coalescing that may take it
  }
  core_->slot_cv_.notify_all();
}

Connection& ClientCore::Borrowed::operator*() const { return core_->slot_connection(slot_); }

Connection& ClientCore::slot_connection(int slot) const {
  return borrowed_ ? *borrowed_ : *slots_[static_cast<std::size_t>(slot)].conn;
}

void ClientCore::Borrowed::discard() noexcept {
  if (core_->borrowed_) return;  // the caller's: it reconnects on its next use
  std::unique_ptr<Connection> gone;
  std::lock_guard<std::mutex> lk(core_->slot_mu_);
  gone = std::move(core_->slots_[static_cast<std::size_t>(slot_)].conn);
}

ClientCore::Borrowed ClientCore::borrow_for(const ClientLease& l, bool pinned) {
  int slot = -1;
  if (pinned) {
    std::lock_guard<std::mutex> lk(l.state->mu);
    slot = l.slot;
  }
  return borrow(slot);
}

int ClientCore::free_slot_locked(int pinned) const {
  if (pinned >= 0) return slots_[static_cast<std::size_t>(pinned)].busy ? -1 : pinned;
  for (int pass = 0; pass < 2; ++pass)  // an open connection first
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].busy && (pass == 1 || slots_[i].conn)) return static_cast<int>(i);
  return -1;
}

ClientCore::Borrowed ClientCore::claim(std::unique_lock<std::mutex>& lk, int got) {
  auto& s = slots_[static_cast<std::size_t>(got)];
  s.busy = true;
  if (!s.conn) {
    lk.unlock();
    try {
      auto c = connect(false);
      lk.lock();
      s.conn = std::move(c);
    } catch (...) {
      if (!lk.owns_lock()) lk.lock();
      s.busy = false;
      wake_pending_locked();
      lk.unlock();
      slot_cv_.notify_all();
      throw;
    }
  }
  lk.unlock();
  return Borrowed(this, got);
}

ClientCore::Borrowed ClientCore::borrow(int slot) { return *borrow_until(steady_clock::time_point::max(), slot); }

std::optional<ClientCore::Borrowed> ClientCore::borrow_until(steady_clock::time_point until, int slot) {
  check_process();
  if (borrowed_) return Borrowed(this, 0);
  const auto timeout_at = steady_clock::now() + options_.borrow_timeout;
  std::unique_lock<std::mutex> lk(slot_mu_);
  int got = -1;
  auto pick = [&] {
    if (stop_) return true;
    got = free_slot_locked(slot);
    return got >= 0;
  };
  if (!slot_cv_.wait_until(lk, std::min(timeout_at, until), pick) || got < 0) {
    if (!stop_ && until < timeout_at) return std::nullopt;  // the caller's deadline came first
    throw_exhausted_locked(slot);
  }
  return claim(lk, got);
}

void ClientCore::throw_exhausted_locked(int slot) { throw exhausted_error_locked(slot); }

Error ClientCore::exhausted_error_locked(int slot) {
  ++exhausted_;
  return Error(ErrorCode::kResourceExhausted,
               "lock client of " + description_ + ": " +
                   (slot >= 0 ? std::string("the work connection that holds this lease's session lock")
                              : "all " + std::to_string(slots_.size()) + " work connections") +
                   " stayed busy for borrow_timeout (" + format_duration(options_.borrow_timeout) +
                   "); held leases are still renewed. Raise LockClientOptions::max_connections or borrow_timeout");
}

}  // namespace sqlguard::detail
