// Leader election on the lease lock; the contract is in include/sqlguard/leader.h.
#include "sqlguard/leader.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "sqlguard/errors.h"
#include "sqlguard/metrics.h"
#include "core/process.h"
#include "sqlguard/validate.h"
#include "client/client.h"

namespace sqlguard {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string_view to_string(RevokeCause cause) noexcept {
  switch (cause) {
    case RevokeCause::kResigned: return "resigned";
    case RevokeCause::kExpired: return "expired";
    case RevokeCause::kTakenOver: return "taken_over";
    case RevokeCause::kUnreachable: return "database_unreachable";  // as to_string(LossCause)
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

// One thread for every elector of the process: their campaigns are steps
// run on it (timers and the completions of asynchronous acquires), so an
// elector owns no thread; the lock client it campaigns through owns the
// connections. Started by the first campaign, ended with the last.
class ElectionLoop {
 public:
  static std::shared_ptr<ElectionLoop> get() {
    static std::mutex m;
    static std::weak_ptr<ElectionLoop> current;
    static pid_t owner = 0;
    std::lock_guard<std::mutex> lk(m);
    // A forked child has no loop thread: it starts its own.
    if (auto l = current.lock(); l && owner == ::getpid()) return l;
    auto l = std::shared_ptr<ElectionLoop>(new ElectionLoop);
    l->thread_ = std::thread([raw = l.get()] { raw->run(); });
    detail::name_thread(l->thread_, "sqlguard-elect");
    current = l;
    owner = ::getpid();
    return l;
  }

  ~ElectionLoop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (on_loop_thread()) thread_.detach();  // the last elector let go on this thread
    else if (thread_.joinable()) thread_.join();
  }

  void post(steady_clock::time_point at, std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      tasks_.emplace(at, std::move(fn));
    }
    cv_.notify_all();
  }

  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  ElectionLoop() = default;

  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
      if (tasks_.empty()) {
        cv_.wait(lk);
        continue;
      }
      auto it = tasks_.begin();
      if (it->first > steady_clock::now()) {
        cv_.wait_until(lk, it->first);
        continue;
      }
      auto fn = std::move(it->second);
      tasks_.erase(it);
      lk.unlock();
      try {
        fn();
      } catch (const std::exception& e) {
        log(LogLevel::kError, std::string("election loop: a step threw: ") + e.what());
      } catch (...) {
        log(LogLevel::kError, "election loop: a step threw a non-standard exception");
      }
      fn = nullptr;  // its captures go before the lock is taken again
      lk.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::multimap<steady_clock::time_point, std::function<void()>> tasks_;
  std::thread thread_;
};

}  // namespace

// A campaign is a chain of steps on the ElectionLoop: campaign_step (make
// the lease handle, start an asynchronous acquire), acquired (elected, or
// campaign again), check (a leader's lease still trusted? on_lost and a
// timer at the end of its trust window both ask), stop_step (resign). Each
// step carries the campaign's generation: a step of a campaign that ended
// (resign) does nothing.
struct LeaderElector::State : std::enable_shared_from_this<State> {
  std::string uri;
  std::string election;
  ElectionOptions options;
  LeaseOptions lease_options;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool running = false;   // campaigning (until resign()'s stop step is done)
  bool stop = false;      // resign(): step down and end the campaign
  bool leader = false;    // elected and not stepping down
  bool lost = false;      // the client reported the lease lost
  bool pending = false;   // an asynchronous acquire is in flight
  std::uint64_t generation = 0;
  std::int64_t term = 0;  // of the current term; 0 when not leader
  std::int64_t announced = 0;  // the last term whose on_elected has returned
  std::uint64_t won = 0;
  std::unique_ptr<LeaseLock> lock;  // used on the loop thread; owns() from any thread
  std::shared_ptr<ElectionLoop> loop;

  template <typename F, typename... A>
  void call(const char* what, const F& f, A&&... args) noexcept {
    if (!f) return;
    try {
      f(std::forward<A>(args)...);
    } catch (const std::exception& e) {
      log(LogLevel::kError, "election '" + election + "': " + what + " callback threw: " + e.what());
    }
  }

  bool stopping() {
    std::lock_guard<std::mutex> lk(mu);
    return stop;
  }

  std::uint64_t current_generation() {
    std::lock_guard<std::mutex> lk(mu);
    return generation;
  }

  // Runs `step` on the loop after `delay`, if the campaign of generation
  // `g` (default: the current one) is still on then.
  void schedule(milliseconds delay, std::function<void(State&)> step, std::optional<std::uint64_t> of = std::nullopt) {
    std::shared_ptr<ElectionLoop> l;
    std::uint64_t g;
    {
      std::lock_guard<std::mutex> lk(mu);
      l = loop;
      g = of.value_or(generation);
    }
    if (!l) return;
    l->post(steady_clock::now() + delay, [w = weak_from_this(), g, step = std::move(step)] {
      auto s = w.lock();
      if (!s) return;
      {
        std::lock_guard<std::mutex> lk(s->mu);
        if (s->generation != g) return;
      }
      step(*s);
    });
  }

  void campaign_step() {
    if (stopping()) return;
    if (!lock) {
      try {
        auto l = std::make_unique<LeaseLock>(uri, election, lease_options, Watchdog::kOn, options.connect);
        std::lock_guard<std::mutex> lk(mu);
        lock = std::move(l);
      } catch (const std::exception& e) {
        log(LogLevel::kWarning, "election '" + election + "': cannot connect, campaigning again: " + e.what());
        schedule(std::max(options.recampaign_delay, milliseconds(500)), [](State& s) { s.campaign_step(); });
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      pending = true;
    }
    try {
      // Waits on the client's waiter thread, woken by a release; the
      // completion comes back to the loop. An hour, then campaign again.
      // The completion belongs to this campaign: after a resign() and a new
      // campaign() it is ignored.
      lock->acquire_async(std::chrono::hours(1), [w = weak_from_this(), g = current_generation()](bool ok,
                                                                                                  std::exception_ptr e) {
        if (auto s = w.lock()) s->schedule(milliseconds(0), [ok, e](State& st) { st.acquired(ok, e); }, g);
      });
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lk(mu);
        pending = false;
      }
      log(LogLevel::kInfo, "election '" + election + "': campaign attempt failed, retrying: " + e.what());
      schedule(std::max(options.recampaign_delay, milliseconds(200)), [](State& s) { s.campaign_step(); });
    }
  }

  void acquired(bool ok, const std::exception_ptr& error) {
    {
      std::lock_guard<std::mutex> lk(mu);
      pending = false;
    }
    if (stopping()) {
      // resign() came while the lease was being won: hand it straight back.
      if (ok) lock->unlock();
      return;
    }
    if (error) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      log(LogLevel::kInfo, "election '" + election + "': campaign attempt failed, retrying: " + what);
      schedule(std::max(options.recampaign_delay, milliseconds(200)), [](State& s) { s.campaign_step(); });
      return;
    }
    if (!ok) {
      if (lock->hold_count() > 0) lock->release();  // a lost lease this handle still counts
      campaign_step();
      return;
    }
    const std::int64_t t = lock->fence();
    {
      std::lock_guard<std::mutex> lk(mu);
      leader = true;
      lost = false;
      term = t;
      ++won;
    }
    metrics::election_elected();
    log(LogLevel::kInfo, "election '" + election + "': elected, term " + std::to_string(t));
    call("on_elected", options.on_elected, t);
    {
      std::lock_guard<std::mutex> lk(mu);
      announced = t;
    }
    cv.notify_all();  // wait_until_leader(): elected, and on_elected has returned
    check(t);
  }

  // Term `t` still trusted? Otherwise revoked (the cause from the client's
  // loss report; none: its trust window ended before a renewal answered).
  void check(std::int64_t t) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (term != t || stop) return;  // revoked or resigning already
    }
    const bool trusted = [&] {
      std::lock_guard<std::mutex> lk(mu);
      return !lost && lock->owns();
    }();
    if (trusted) {
      // Again when its trust window would end (a renewal moves that on).
      schedule(std::max(lock->remaining(), milliseconds(1)), [t](State& s) { s.check(t); });
      return;
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      leader = false;  // is_leader() is false from here on, before any release
      term = 0;
    }
    Revocation r;
    r.term = t;
    auto loss = lock->last_loss();
    r.cause = loss ? from_loss(loss->cause) : RevokeCause::kExpired;
    r.detail = loss ? loss->detail : "the lease's trust window ended before a renewal answered";
    revoked(r);
    // A lost term is reported first: the release below may wait on an
    // unreachable database (a lost lease sends nothing; a trust window that
    // ended without a loss report sends an owner- and fence-checked release).
    lock->unlock();
    schedule(options.recampaign_delay, [](State& s) { s.campaign_step(); });
  }

  void revoked(const Revocation& r) {
    metrics::election_revoked(to_string(r.cause));
    log(r.cause == RevokeCause::kResigned ? LogLevel::kInfo : LogLevel::kWarning,
        "election '" + election + "': term " + std::to_string(r.term) + " ended (" + std::string(to_string(r.cause)) +
            "): " + r.detail);
    call("on_revoked", options.on_revoked, r);
  }

  // resign(), on the loop: a leader steps down (is_leader() false, the lease
  // released, on_revoked(kResigned)), a pending acquire is cancelled, and the
  // campaign ends (its later steps do nothing).
  void stop_step() {
    std::int64_t t = 0;
    bool was_pending = false;
    {
      std::lock_guard<std::mutex> lk(mu);
      t = term;
      term = 0;
      leader = false;
      was_pending = pending;
      ++generation;  // completions still on their way are ignored
    }
    if (was_pending && lock) lock->cancel_acquire();  // a lease its attempt took is released
    if (t != 0) {
      lock->unlock();  // releases the lease and wakes waiting candidates
      Revocation r;
      r.term = t;
      r.cause = RevokeCause::kResigned;
      r.detail = "resigned";
      revoked(r);
    }
    std::unique_ptr<LeaseLock> done;
    {
      std::lock_guard<std::mutex> lk(mu);
      done = std::move(lock);
    }
    done.reset();  // releases through the lock client (never throws: ~LeaseLock logs)
    {
      std::lock_guard<std::mutex> lk(mu);
      running = false;
      pending = false;
    }
    cv.notify_all();
  }
};

namespace {
void private_uri_refused(const std::string& uri, const std::string& election) {
  if (detail::private_to_connection(uri))
    throw Error(ErrorCode::kInvalidArgument,
                "election '" + election +
                    "': every connection to this URI is its own database (SQLite in memory), so candidates could "
                    "never see each other's lease; use a file (sqlite:///path.db) or a server");
}
}  // namespace

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
  // On the client's renewal thread: the term ends on the loop.
  lo.on_lost = [weak](const LeaseLoss&) {
    if (auto s = weak.lock()) {
      std::int64_t t;
      {
        std::lock_guard<std::mutex> lk(s->mu);
        s->lost = true;
        t = s->term;
      }
      if (t != 0) s->schedule(milliseconds(0), [t](State& st) { st.check(t); });
    }
  };
  validate(lo);
  private_uri_refused(uri, election);
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
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->running) return;
    state_->running = true;
    state_->stop = false;
    state_->lost = false;
    ++state_->generation;
    state_->loop = ElectionLoop::get();
  }
  state_->schedule(milliseconds(0), [](State& s) { s.campaign_step(); });
}

void LeaderElector::resign() {
  std::shared_ptr<ElectionLoop> loop;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (!state_->running) return;
    state_->stop = true;
    state_->leader = false;  // is_leader() is false from here on
    loop = state_->loop;
  }
  if (loop->on_loop_thread()) {
    // From a callback (which the contract rules out): step down right here
    // rather than wait for a step this thread would have to run.
    state_->stop_step();
  } else {
    state_->schedule(milliseconds(0), [](State& s) { s.stop_step(); });
    std::unique_lock<std::mutex> lk(state_->mu);
    state_->cv.wait(lk, [&] { return !state_->running; });
  }
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->loop.reset();
  }
  // `loop` goes here: the last elector's resign() ends the loop's thread
  // (unless this is that thread: then it is detached and ends by itself).
}

bool LeaderElector::campaigning() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->running && !state_->stop;
}

bool LeaderElector::is_leader() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->leader && !state_->lost && state_->lock && state_->lock->owns();
}

bool LeaderElector::wait_until_leader(milliseconds timeout) {
  check_duration(timeout, "timeout", milliseconds(0), std::chrono::hours(24 * 365));
  std::unique_lock<std::mutex> lk(state_->mu);
  if (state_->loop && state_->loop->on_loop_thread())
    throw Error(ErrorCode::kInvalidArgument, "election '" + state_->election +
                                                 "': wait_until_leader() from an elector's callback would wait for "
                                                 "the thread it runs on");
  state_->cv.wait_for(lk, timeout, [&] {
    return (state_->leader && state_->announced == state_->term) || !state_->running || state_->stop;
  });
  lk.unlock();
  return is_leader();
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
