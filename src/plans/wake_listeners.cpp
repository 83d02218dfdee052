// The lock client's wake-up listeners (plans.h, WakeListener): one session
// for every name the client's waiters wait on.
#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "core/catalog.h"
#include "plans/plans.h"

namespace sqlguard::detail {
namespace {

using std::chrono::milliseconds;

// PostgreSQL LISTEN (one session for every waited channel), SQLite futex
// words (futex_waitv): Connection::wait_for_any_notify.
class ChannelListener final : public WakeListener {
 public:
  std::vector<WokenName> wait(Connection& conn, const std::vector<WaitedName>& names, milliseconds d) override {
    std::vector<std::string> channels;
    std::vector<WokenName> woken;
    bool fresh = false;
    for (const auto& n : names) {
      channels.push_back(n.channel);
      if (listening_.insert(n.channel).second) fresh = true;
    }
    // Names it listens to from now on are answered at once (below); the
    // others wait. Channels no longer named stop being listened to.
    std::map<std::string, std::vector<std::string>> f;
    for (auto& w : conn.wait_for_any_wakeup(channels, fresh ? milliseconds(0) : d)) f[w.channel] = std::move(w.payloads);
    std::set<std::string> now(channels.begin(), channels.end());
    for (auto it = listening_.begin(); it != listening_.end();) it = now.count(*it) ? std::next(it) : listening_.erase(it);
    for (const auto& n : names) {
      auto fi = f.find(n.channel);
      if (fresh && !answered_.count(n.channel)) woken.push_back(WokenName{n.name, {std::string()}});
      else if (fi != f.end()) woken.push_back(WokenName{n.name, fi->second});
    }
    answered_ = listening_;
    return woken;
  }
  void session_lost() noexcept override {
    listening_.clear();
    answered_.clear();
  }

 private:
  std::set<std::string> listening_;  // channels named to the session
  std::set<std::string> answered_;   // channels whose first answer was given
};

// MariaDB/Galera: the holder holds its lease's wake-up lock (GET_LOCK) and a
// release frees it. One session waits on the wake-up lock of the
// longest-waiting name whose wake-ups still find it free (GET_LOCK with a
// timeout) and frees it in the same statement when granted (the head's
// take-over must take it for the new holder), and answers that name. The
// other names are polled.
class WakeupLockListener final : public WakeListener {
 public:
  std::vector<WokenName> wait(Connection& conn, const std::vector<WaitedName>& names, milliseconds d) override {
    auto it = std::find_if(names.begin(), names.end(), [](const WaitedName& n) { return !n.idle; });
    if (it == names.end()) {
      // Nothing to block on now (heads trying, or names polled): look again
      // soon, when a head's attempt has ended.
      std::this_thread::sleep_for(std::min(d, milliseconds(5)));
      return {};
    }
    const double seconds = static_cast<double>(std::max<milliseconds>(d, milliseconds(1)).count()) / 1000.0;
    // Granted and freed in one statement: a round trip in between would be
    // a window in which the head's take-over finds the lock taken (by this
    // session) and holds the lease without it, so the next waits would be
    // granted at once while the lease is still held.
    auto r = run(conn, Sql::lease_wakeup_pass, {it->channel, seconds});
    static constexpr auto kPassed = column(Sql::lease_wakeup_pass, "passed");
    const bool passed = !r.rows.empty() && !cell(r.rows[0], kPassed).is_null() && cell(r.rows[0], kPassed).as_int() == 1;
    if (!passed) return {};
    return {WokenName{it->name, {std::string()}}};
  }
  void session_lost() noexcept override {}
  bool waits_on_active_only() const noexcept override { return true; }
};

}  // namespace

std::unique_ptr<WakeListener> make_channel_listener() { return std::make_unique<ChannelListener>(); }
std::unique_ptr<WakeListener> make_wakeup_lock_listener() { return std::make_unique<WakeupLockListener>(); }

}  // namespace sqlguard::detail
