// Internal: the lock client (include/sqlguard/lock_client.h). One ClientCore
// per LockClient: its connection slots (renewal, listener, work), the renewer
// (client_renewer.cpp) and the waiter and listener threads
// (client_waiters.cpp). A lease handle made from a client keeps a
// ClientLease: its name, options and LeaseState, no connection or thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "strategies/lease/lease_state.h"

namespace sqlguard::detail {

class WaitPlan;
class WakeListener;

// One lease handle's lease, as the client sees it. Shared by the handle, the
// renewer (while held and renewed) and the waiter thread (while waiting).
struct ClientLease {
  std::string name;
  std::string channel;  // lease_wakeup_channel(name)
  // What the client needs of the handle's LeaseOptions (not a copy of all of
  // them: a held lease should cost rows, not kilobytes).
  struct Options {
    std::chrono::milliseconds ttl{0}, min_hold{0}, backoff_initial{0}, backoff_max{0};
    ReleaseCommit release_commit = ReleaseCommit::kCoveredByNextAcquire;
    std::string owner;  // fixed owner token, or empty
  } options;
  std::chrono::milliseconds margin{0}, period{0};
  bool renew = true;  // the client renews it while held (Watchdog::kOn)
  std::shared_ptr<LeaseState> state = std::make_shared<LeaseState>();
  // Where the dialect's release must run on the session that acquired
  // (WaitPlan::release_on_acquiring_session): that work slot, else -1.
  int slot = -1;  // guarded by state->mu
  bool waiting = false;  // an asynchronous acquire is pending; guarded by ClientCore::wait_mu_
  // Inside run_guarded: its transaction holds the lease's row (or SQLite's
  // write lock); a renewal statement would wait for it, and with it every
  // lease of the batch. The renewer leaves it out until the transaction ends.
  std::atomic<int> guarded{0};
};

using AcquireDone = std::function<void(bool acquired, std::exception_ptr error)>;

// A URI whose every connection is its own database (SQLite in memory): a
// lock client cannot serve it.
bool private_to_connection(const std::string& uri);

// One pending asynchronous acquire.
struct ClientWait {
  std::shared_ptr<ClientLease> lease;
  std::chrono::steady_clock::time_point deadline;
  AcquireDone done;
  std::optional<Error> outage;  // the last attempt found the database unreachable (or no connection was free)
  bool cancelled = false;       // while its attempt runs
};

// The waiters of one name, in arrival order; only the head tries.
struct NameQueue {
  std::string channel;
  std::deque<std::shared_ptr<ClientWait>> waits;
  std::chrono::steady_clock::time_point since{};     // the head's turn began (listener priority)
  std::chrono::steady_clock::time_point next_try{};  // the head's next attempt
  std::chrono::milliseconds backoff{0};
  std::chrono::milliseconds holder_remaining{0};
  bool woken = false;    // a release (local or by the listener): try at once
  int idle_wakes = 0;    // wake-ups in a row that found the lease held
  bool busy = false;     // the head's attempt is running
};

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(std::string uri, LockClientOptions options);
  ~ClientCore();
  void open();  // the renewal connection and one work connection

  // Every entry point: throws in a forked child.
  void check_process() const;
  bool same_process() const noexcept;
  const std::string& description() const noexcept { return description_; }
  const LockClientOptions& options() const noexcept { return options_; }
  LockClientStats stats() const;

  // ---- work connections -----------------------------------------------------
  class Borrowed {
   public:
    Borrowed(ClientCore* core, int slot) : core_(core), slot_(slot) {}
    Borrowed(Borrowed&& o) noexcept : core_(o.core_), slot_(o.slot_) { o.core_ = nullptr; }
    Borrowed& operator=(Borrowed&&) = delete;
    ~Borrowed();
    Connection& operator*() const;
    Connection* operator->() const { return &**this; }
    int slot() const noexcept { return slot_; }
    void discard() noexcept;  // close the session (its state is unknown)
   private:
    ClientCore* core_;
    int slot_;
  };
  // A work connection within options.borrow_timeout (kResourceExhausted
  // otherwise); `slot` >= 0: that one. Connects a slot that has none.
  Borrowed borrow(int slot = -1);
  const WaitPlan& wait_plan() const noexcept { return *wait_plan_; }

  // ---- leases (the rest of a client handle's calls run in LeaseLock on a
  // borrowed work connection) ------------------------------------------------
  bool try_acquire(const std::shared_ptr<ClientLease>& lease);
  bool acquire(const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds wait);
  void acquire_async(const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds wait, AcquireDone done);
  // Cancels the lease's pending asynchronous acquire (its callback gets
  // false); false when none was pending.
  bool cancel_acquire(const std::shared_ptr<ClientLease>& lease);
  // A guarded transaction of the lease ended: renew it now if it is due.
  void renew_soon(const ClientLease* lease);
  // The renewer renews the lease while it is held (from now, every period).
  void renew_register(const std::shared_ptr<ClientLease>& lease);
  void renew_unregister(const ClientLease* lease);
  // A handle of this client released `name`: its local waiters try at once.
  void local_release(const std::string& name);

 private:
  // One attempt on `conn` (no re-entrancy check); on success the lease's
  // state is set and its renewal registered. `holder_remaining` out.
  bool attempt_on(Borrowed& conn, const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds budget,
                  std::chrono::milliseconds* holder_remaining);
  void release_quietly(const std::shared_ptr<ClientLease>& lease) noexcept;
  std::unique_ptr<Connection> connect(bool renewal) const;
 public:
  // A connection of a client to `uri`: io_timeout = connect.io_timeout, at
  // most 10 s (10 s when unset); the renewal connection's statements are
  // bounded on the server too. The renewer's worker calls it without the
  // client (it may outlive it).
  static std::unique_ptr<Connection> open_connection(const std::string& uri, ConnectOptions connect, bool renewal);
 private:

  // ---- renewer (client_renewer.cpp) ------------------------------------------
  void renewer_loop();

  // ---- waiters (client_waiters.cpp) --------------------------------------------
  void start_waiter_threads();
  void waiter_loop();
  void listener_loop();

  const std::string uri_;
  const LockClientOptions options_;
  std::string description_;
  const pid_t pid_;
  const WaitPlan* wait_plan_ = nullptr;
  bool session_bound_release_ = false;

  // Work slots.
  struct Slot {
    std::unique_ptr<Connection> conn;
    bool busy = false;
  };
  mutable std::mutex slot_mu_;
  std::condition_variable slot_cv_;
  std::vector<Slot> slots_;

  // Renewer.
  struct Renewal;
  mutable std::mutex renew_mu_;
  std::condition_variable renew_cv_;
  std::map<const ClientLease*, std::shared_ptr<Renewal>> renewals_;
  std::shared_ptr<Connection> renew_conn_;  // reserved; replaced after a connection problem
  std::atomic<bool> renew_conn_open_{false};
  std::thread renewer_;
  bool stop_ = false;
  std::uint64_t renewal_rounds_ = 0, renewal_statements_ = 0, leases_renewed_ = 0, leases_lost_ = 0;
  std::vector<double> lag_ms_;  // ring of the last 4096 renewal lags
  std::size_t lag_next_ = 0;
  bool renewer_worker_ = false;  // the BoundedCaller worker exists

  // Waiters.
  mutable std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::map<std::string, NameQueue> queues_;
  std::thread waiter_, listener_;
  bool waiter_threads_ = false;
  bool listener_open_ = false;
  std::size_t listening_ = 0;  // names the listener covered in its last wait
  std::atomic<std::thread::id> waiter_thread_id_{};
  std::uint64_t wakeups_ = 0, polls_ = 0, attempts_ = 0;
  mutable std::atomic<std::uint64_t> exhausted_{0};
};

}  // namespace sqlguard::detail
