// Leader election on the lease lock; the contract is in include/sqlguard/leader.h.
#include "sqlguard/leader.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "sqlguard/metrics.h"
#include "sqlguard/validate.h"

namespace sqlguard {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string_view to_string(RevokeCause cause) noexcept {
  switch (cause) {
    case RevokeCause::kResigned: return "resigned";
    case RevokeCause::kExpired: return "expired";
    case RevokeCause::kTakenOver: return "taken_over";
    case RevokeCause::kUnreachable: return "unreachable";
    case RevokeCause::kOutcomeUnknown: return "outcome_unknown";
  }
  return "unknown";
}

namespace {
RevokeCause from_loss(LossCause c) {
  switch (c) {
    case LossCause::kExpired: return RevokeCause::kExpired;
    case LossCause::kTakenOver: return RevokeCause::kTakenOver;
    case LossCause::kUnreachable: return RevokeCause::kUnreachable;
    case LossCause::kOutcomeUnknown: return RevokeCause::kOutcomeUnknown;
  }
  return RevokeCause::kExpired;
}
}  // namespace

struct LeaderElector::State {
  std::string uri;
  std::string election;
  ElectionOptions options;
  LeaseOptions lease_options;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool running = false;   // a campaign thread exists
  bool stop = false;      // resign(): step down and end the campaign thread
  bool leader = false;    // elected and not stepping down
  bool lost = false;      // the watchdog reported a loss
  std::int64_t term = 0;
  std::uint64_t won = 0;
  std::unique_ptr<LeaseLock> lock;  // created and used by the campaign thread; owns() from any thread
  std::thread thread;

  template <typename F, typename... A>
  void call(const char* what, const F& f, A&&... args) noexcept {
    if (!f) return;
    try {
      f(std::forward<A>(args)...);
    } catch (const std::exception& e) {
      log(LogLevel::kError, "election '" + election + "': " + what + " callback threw: " + e.what());
    }
  }

  // Sleeps up to `d`, returning early (true) when resign() was called.
  bool nap(milliseconds d) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, d, [&] { return stop; });
  }

  bool stopping() {
    std::lock_guard<std::mutex> lk(mu);
    return stop;
  }

  void run() noexcept {
    // Each chunk of blocking acquire() is short so resign() is answered fast;
    // a release still wakes the waiter at once within a chunk.
    const milliseconds chunk = std::min<milliseconds>(milliseconds(300), options.ttl);
    while (!stopping()) {
      if (!lock) {
        try {
          auto l = std::make_unique<LeaseLock>(uri, election, lease_options, Watchdog::kOn, options.connect);
          std::lock_guard<std::mutex> lk(mu);
          lock = std::move(l);
        } catch (const std::exception& e) {
          log(LogLevel::kWarning, "election '" + election + "': cannot connect, campaigning again: " + e.what());
          nap(std::max(options.recampaign_delay, milliseconds(500)));
          continue;
        }
      }
      bool got = false;
      try {
        got = lock->acquire(chunk);
      } catch (const std::exception& e) {
        log(LogLevel::kInfo, "election '" + election + "': campaign attempt failed, retrying: " + e.what());
        nap(std::max(options.recampaign_delay, milliseconds(200)));
        continue;
      }
      if (!got) {
        if (lock->hold_count() > 0) lock->release();  // a lost lease this handle still counts
        continue;
      }
      std::int64_t t = lock->fence();
      {
        std::lock_guard<std::mutex> lk(mu);
        if (!stop) {
          leader = true;
          lost = false;
          term = t;
          ++won;
        }
      }
      if (stopping()) {
        // resign() came while the lease was being won: hand it straight back
        // (outside `mu`: the release joins the watchdog, whose loss callback takes `mu`).
        lock->unlock();
        break;
      }
      metrics::election_elected();
      log(LogLevel::kInfo, "election '" + election + "': elected, term " + std::to_string(t));
      call("on_elected", options.on_elected, t);

      // Hold until resign() or the lease is no longer trusted (watchdog
      // loss, or the trust window ended).
      bool resigned = false;
      {
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
          if (stop) {
            resigned = true;
            break;
          }
          if (lost || !lock->owns()) break;
          auto left = lock->remaining();
          cv.wait_for(lk, std::clamp<milliseconds>(left, milliseconds(1), milliseconds(50)));
        }
        leader = false;  // is_leader() is false from here on, before any release
      }
      Revocation r;
      r.term = t;
      if (resigned) {
        r.cause = RevokeCause::kResigned;
        r.detail = "resigned";
        lock->unlock();  // releases the lease and wakes waiting candidates
      } else {
        auto loss = lock->last_loss();
        r.cause = loss ? from_loss(loss->cause) : RevokeCause::kExpired;
        r.detail = loss ? loss->detail : "the lease's trust window ended before a renewal answered";
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        term = 0;
      }
      metrics::election_revoked(to_string(r.cause));
      log(resigned ? LogLevel::kInfo : LogLevel::kWarning, "election '" + election + "': term " +
                                                              std::to_string(t) + " ended (" +
                                                              std::string(to_string(r.cause)) + "): " + r.detail);
      // A lost term is reported first: the release below may wait on an
      // unreachable database (a lost lease sends nothing; a trust window that
      // ended without a loss report sends an owner- and fence-checked release).
      call("on_revoked", options.on_revoked, r);
      if (resigned) break;
      lock->unlock();
      nap(options.recampaign_delay);
    }
    std::unique_ptr<LeaseLock> done;
    {
      std::lock_guard<std::mutex> lk(mu);
      done = std::move(lock);
    }
    done.reset();  // releases through the lock client (never throws: ~LeaseLock logs)
  }
};

LeaderElector::LeaderElector(std::string uri, std::string election, ElectionOptions options)
    : state_(std::make_shared<State>()) {
  validate_name(election, "election name");
  if (!options.candidate.empty()) validate_name(options.candidate, "candidate");
  check_duration(options.recampaign_delay, "recampaign_delay", milliseconds(0), std::chrono::minutes(10));
  LeaseOptions lo;
  lo.ttl = options.ttl;
  lo.renew_period = options.renew_period;
  lo.safety_margin = options.safety_margin;
  lo.backoff_max = std::min<milliseconds>(milliseconds(250), options.ttl);
  lo.backoff_initial = std::min<milliseconds>(milliseconds(5), lo.backoff_max);
  if (!options.candidate.empty()) lo.owner = options.candidate + "/" + make_owner_token();
  std::weak_ptr<State> weak = state_;
  lo.on_lost = [weak](const LeaseLoss&) {
    if (auto s = weak.lock()) {
      {
        std::lock_guard<std::mutex> lk(s->mu);
        s->lost = true;
      }
      s->cv.notify_all();
    }
  };
  validate(lo);
  state_->uri = std::move(uri);
  state_->election = std::move(election);
  state_->options = std::move(options);
  state_->lease_options = std::move(lo);
}

LeaderElector::~LeaderElector() {
  try {
    resign();
  } catch (const std::exception& e) {
    log(LogLevel::kError, std::string("~LeaderElector: ") + e.what());
  }
}

void LeaderElector::campaign() {
  std::lock_guard<std::mutex> lk(state_->mu);
  if (state_->running) return;
  state_->running = true;
  state_->stop = false;
  auto s = state_;
  state_->thread = std::thread([s] { s->run(); });
}

void LeaderElector::resign() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (!state_->running) return;
    state_->stop = true;
    state_->leader = false;
    t = std::move(state_->thread);
  }
  state_->cv.notify_all();
  if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->running = false;
}

bool LeaderElector::campaigning() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->running && !state_->stop;
}

bool LeaderElector::is_leader() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->leader && !state_->lost && state_->lock && state_->lock->owns();
}

std::int64_t LeaderElector::term() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  // The same test as is_leader(): the campaign thread notices an ended trust
  // window up to 50 ms later, and term() must not outlive is_leader().
  const bool leader = state_->leader && !state_->lost && state_->lock && state_->lock->owns();
  return leader ? state_->term : 0;
}

std::uint64_t LeaderElector::terms_won() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->won;
}

std::optional<LeaseInfo> LeaderElector::leader(Connection& conn, const std::string& election) {
  return lease_info(conn, election);
}

}  // namespace sqlguard
