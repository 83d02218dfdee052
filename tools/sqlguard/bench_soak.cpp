// sqlguard bench: churn-soak (issue 43). A service locks by order or message
// id: every name is new, acquired, held a moment and released, for months.
// One LockClient holds --held renewed holdings; every cycle it releases the
// --churn oldest and acquires --churn new ones on names never used before,
// one cycle every --cycle-every (back to back when a cycle takes longer) for
// --duration, so that each holding lives about held/churn cycles and is
// renewed meanwhile, and samples what the process holds (RSS,
// heap in use) beside acquisitions, losses and the client's own stats(): at
// the start (the first full set held), every --sample-every, at the baseline
// (the first minute) and at the end. Memory that grows with the
// acquisitions while what is held stays the same is state kept per name
// ever acquired: heap retained per acquisition (from the baseline to the
// end) says how much.
//
// --churn-kinds all spreads the new names over every kind the client offers,
// so that each kind's per-name state is exercised: a lease, a fair lease, a
// semaphore permit, a read-write shared and an exclusive holding, a lease
// taken with acquire_async(), and two waits that end without the lock (a
// fair waiter whose wait times out, a waiter that is cancelled), each on a
// new name that a holding of the churn (the wait's "blocker") has.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <future>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <variant>

#include "bench.h"
#include "sqlguard/errors.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"

namespace sqlguard::bench {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using nlohmann::json;

milliseconds soak_baseline_at(milliseconds duration) { return std::min<milliseconds>(milliseconds(60000), duration / 2); }

namespace {

// The kinds of the churn, in the order --churn-kinds all takes them.
enum class Kind { kLease, kFair, kSemaphore, kRwShared, kRwExclusive, kAsync, kWaitTimeout, kWaitCancel };
constexpr Kind kEveryKind[] = {Kind::kLease,       Kind::kFair,  Kind::kSemaphore,   Kind::kRwShared,
                               Kind::kRwExclusive, Kind::kAsync, Kind::kWaitTimeout, Kind::kWaitCancel};
constexpr std::int64_t kSoakPermits = 2;           // a churn semaphore's permits (one is taken)
constexpr milliseconds kTimedWait{50};             // the wait that times out
constexpr milliseconds kLongWait{10000};           // the async acquire's and the cancelled wait's

// The losses on_lost reported: a count per cause, and the first one's
// cause, detail and what was left of its trust window (what an operator
// needs to tell a slow renewal from a take-over).
struct Losses {
  std::atomic<std::uint64_t> n{0};
  // The soak's clock (the first full set held); a loss during the fill has
  // a negative time.
  std::atomic<Clock::rep> t0{Clock::now().time_since_epoch().count()};
  mutable std::mutex mu;
  std::map<std::string, std::uint64_t> by_cause;
  json first;
  void add(const LeaseLoss& l) {
    ++n;
    const double t_s = std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(t0.load())).count();
    std::lock_guard<std::mutex> g(mu);
    ++by_cause[std::string(to_string(l.cause))];
    if (first.is_null())
      first = {{"t_s", r3(t_s)}, {"cause", std::string(to_string(l.cause))}, {"detail", l.detail},
               {"window_left_ms", l.window_left.count()}};
  }
  json causes() const {
    std::lock_guard<std::mutex> g(mu);
    return by_cause;
  }
  json first_loss() const {
    std::lock_guard<std::mutex> g(mu);
    return first;
  }
};

// One holding of the soak, whatever its kind.
using Holding = std::variant<std::unique_ptr<LeaseLock>, std::unique_ptr<Semaphore>, std::unique_ptr<ReadWriteLease>>;

bool release(Holding& h) {
  return std::visit([](auto& p) { return p->release(); }, h);
}

// Whether the holding was reported lost (its release then finds it gone:
// one loss, not two).
bool reported_lost(const Holding& h) {
  return std::visit([](const auto& p) { return p->last_loss().has_value(); }, h);
}

// A wait that must end without the lock, and its handle.
struct EndingWait {
  std::unique_ptr<LeaseLock> waiter;
  std::future<bool> done;
  bool cancel = false;  // false: it times out
};

class Soak {
 public:
  Soak(const ClientBench& b, const SoakPlan& plan, std::shared_ptr<LockClient> client)
      : b_(b), plan_(plan), client_(std::move(client)), lost_(std::make_shared<Losses>()) {
    if (plan.all_kinds) kinds_.assign(std::begin(kEveryKind), std::end(kEveryKind));
    else kinds_ = {Kind::kLease};
  }

  // The first full set: `held` leases on names of cycle 0.
  void fill() {
    for (std::size_t i = 0; i < plan_.held; ++i) {
      auto l = std::make_unique<LeaseLock>(client_, name(0, i), options(false), Watchdog::kOn);
      take(Holding(std::move(l)), [&](Holding& h) { return std::get<0>(h)->try_acquire(); });
    }
  }

  // One cycle: the `churn` oldest holdings released, `churn` new names taken.
  void cycle() {
    ++cycles_;
    const auto t_cycle = Clock::now();
    // The new names first, the oldest released after: at its peak the
    // client holds held + churn, and every cycle is a bulk acquire beside
    // a full set being renewed (issue 36 item 10's "second bulk acquire").
    std::vector<std::pair<Holding, std::future<bool>>> asyncs;
    std::vector<EndingWait> waits;
    refused_now_ = false;
    for (std::size_t i = 0; i < plan_.churn; ++i) {
      if (refused_now_) {
        // The client refused new work (its renewer is behind): the rest of
        // this cycle's names are not asked for (a service backs off too).
        ++refused_;
        continue;
      }
      const std::string n = name(cycles_, i);
      const Kind kind = kinds_[slot_++ % kinds_.size()];
      try {
        switch (kind) {
          case Kind::kLease:
          case Kind::kFair:
            take(Holding(std::make_unique<LeaseLock>(client_, n, options(kind == Kind::kFair), Watchdog::kOn)),
                 [](Holding& h) { return std::get<0>(h)->try_acquire(); });
            break;
          case Kind::kSemaphore:
            take(Holding(std::make_unique<Semaphore>(client_, n, kSoakPermits, options(false), Watchdog::kOn)),
                 [](Holding& h) { return std::get<1>(h)->try_acquire(1); });
            break;
          case Kind::kRwShared:
          case Kind::kRwExclusive: {
            const LeaseMode mode = kind == Kind::kRwShared ? LeaseMode::kShared : LeaseMode::kExclusive;
            take(Holding(std::make_unique<ReadWriteLease>(client_, n, options(false), Watchdog::kOn)),
                 [mode](Holding& h) { return std::get<2>(h)->try_acquire(mode); });
            break;
          }
          case Kind::kAsync: {
            auto l = std::make_unique<LeaseLock>(client_, n, options(false), Watchdog::kOn);
            auto f = l->acquire_async(kLongWait);
            asyncs.emplace_back(Holding(std::move(l)), std::move(f));
            break;
          }
          case Kind::kWaitTimeout:
          case Kind::kWaitCancel: {
            // The blocker is the churn's holding of this name; the waiter
            // (another handle: another owner) waits for it and never gets it.
            const bool fair = kind == Kind::kWaitTimeout;
            if (!take(Holding(std::make_unique<LeaseLock>(client_, n, options(fair), Watchdog::kOn)),
                      [](Holding& h) { return std::get<0>(h)->try_acquire(); }))
              break;
            EndingWait w;
            w.cancel = kind == Kind::kWaitCancel;
            w.waiter = std::make_unique<LeaseLock>(client_, n, options(fair), Watchdog::kOn);
            w.done = w.waiter->acquire_async(w.cancel ? kLongWait : kTimedWait);
            waits.push_back(std::move(w));
            break;
          }
        }
      } catch (const std::exception& e) {
        error(std::string("acquiring ") + n + ": " + e.what());
      }
    }
    for (auto& [h, f] : asyncs) {
      try {
        if (f.get()) {
          ++acquisitions_;
          ring_.push_back(std::move(h));
        } else {
          error("an acquire_async() on a new name ended without the lease");
        }
      } catch (const std::exception& e) {
        error(std::string("acquire_async: ") + e.what());
      }
    }
    for (auto& w : waits) {
      try {
        if (w.cancel) w.waiter->cancel_acquire();
        if (w.done.get()) {
          error("a waiter got a name its blocker holds");
          w.waiter->release();
        } else {
          ++(w.cancel ? waits_cancelled_ : waits_timed_out_);
        }
      } catch (const std::exception& e) {
        error(std::string("waiting: ") + e.what());
      }
    }
    const double acquire_s = seconds_since(t_cycle);
    // As many of the oldest released as were acquired: `held` between
    // cycles, fewer only while the client refuses new names.
    const std::size_t k = ring_.size() > plan_.held ? ring_.size() - plan_.held : 0;
    for (std::size_t i = 0; i < k; ++i) {
      Holding h = std::move(ring_.front());
      ring_.pop_front();
      release_one(h);
    }
    const double cycle_s = seconds_since(t_cycle);
    cycle_s_max_ = std::max(cycle_s_max_, cycle_s);
    acquire_s_max_ = std::max(acquire_s_max_, acquire_s);
  }

  // Releases every holding (the end of the soak).
  void release_all() {
    for (auto& h : ring_) release_one(h);
    ring_.clear();
  }

  // What the soak, the process and the client say now, `t_s` seconds in.
  // The slowest cycle and acquire phase since the last sample go with it.
  json sample(double t_s) {
    const LockClientStats st = client_->stats();
    const ResidentSplit rs = resident_split();
    json s = {{"t_s", r3(t_s)},
            {"cycles", cycles_},
            {"acquisitions", acquisitions_},
            {"releases", releases_},
            {"held", ring_.size()},
            {"losses", losses(st)},
            {"on_lost_calls", lost_->n.load()},
            {"leases_lost", st.leases_lost},
            {"release_not_held", release_not_held_},
            {"errors", errors_},
            {"refused", refused_},
            {"renewal_behind", st.renewal_behind},
            {"rss_bytes", rss_bytes()},
            {"rss_anon_bytes", rs.anon_bytes},
            {"rss_file_bytes", rs.file_bytes},
            {"heap_bytes", heap_in_use()},
            {"heap_from_system_bytes", heap_from_system()},
            {"threads", process_threads()},
            {"held_leases", st.held_leases},
            {"queue_places", st.queue_places},
            {"waiters", st.waiters},
            {"listening", st.listening},
            {"connections_open", st.connections_open},
            {"renewal_statements", st.renewal_statements},
            {"leases_renewed", st.leases_renewed},
            {"renewal_lag_p99_ms", r3(st.renewal_lag_p99_ms)},
            {"renewal_lag_max_ms", r3(st.renewal_lag_max_ms)},
            {"cycle_s_max", r3(cycle_s_max_)},
            {"churn_acquire_s_max", r3(acquire_s_max_)},
            {"losses_by_cause", lost_->causes()}};
    cycle_s_max_ = acquire_s_max_ = 0;
    return s;
  }

  // Losses: leases the client lost (its on_lost calls or its own count of
  // them, whichever is larger: each loss is seen by both) and releases that
  // found the holding gone.
  std::uint64_t losses(const LockClientStats& st) const {
    return std::max<std::uint64_t>(lost_->n.load(), st.leases_lost) + release_not_held_;
  }

  std::uint64_t acquisitions() const { return acquisitions_; }
  std::uint64_t errors() const { return errors_; }
  std::uint64_t refused() const { return refused_; }
  const std::string& first_error() const { return first_error_; }
  std::uint64_t waits_timed_out() const { return waits_timed_out_; }
  std::uint64_t waits_cancelled() const { return waits_cancelled_; }
  std::uint64_t on_lost_calls() const { return lost_->n.load(); }
  json losses_by_cause() const { return lost_->causes(); }
  json first_loss() const { return lost_->first_loss(); }
  void start_clock(Clock::time_point t0) { lost_->t0 = t0.time_since_epoch().count(); }
  std::uint64_t release_not_held() const { return release_not_held_; }

 private:
  std::string name(std::uint64_t cycle, std::size_t i) const {
    return b_.prefix + ":" + std::to_string(cycle) + ":" + std::to_string(i);
  }
  LeaseOptions options(bool fair) const {
    LeaseOptions o;
    o.ttl = plan_.ttl;
    o.fair = fair;
    o.on_lost = [lost = lost_](const LeaseLoss& l) { lost->add(l); };
    return o;
  }
  // Releases one holding: a release that finds it gone counts, unless its
  // loss was reported already (one loss, not two).
  void release_one(Holding& h) {
    try {
      if (!release(h) && !reported_lost(h)) ++release_not_held_;
      ++releases_;
    } catch (const std::exception& e) {
      error(std::string("releasing: ") + e.what());
    }
  }
  // Acquires `h` with `attempt`; held: it joins the ring. A new name that
  // is not free is an error (nobody else uses the cell's names).
  bool take(Holding h, const std::function<bool(Holding&)>& attempt) {
    try {
      if (!attempt(h)) {
        error("a new name was not free");
        return false;
      }
    } catch (const Error& e) {
      // The client refused new work while its renewer was behind (held
      // leases first): counted, not an error.
      if (e.code() == ErrorCode::kResourceExhausted) {
        ++refused_;
        refused_now_ = true;
        return false;
      }
      error(std::string("acquiring: ") + e.what());
      return false;
    } catch (const std::exception& e) {
      error(std::string("acquiring: ") + e.what());
      return false;
    }
    ++acquisitions_;
    ring_.push_back(std::move(h));
    return true;
  }
  void error(const std::string& what) {
    ++errors_;
    if (first_error_.empty()) first_error_ = what;
    std::this_thread::sleep_for(milliseconds(1));  // never spin on a broken database
  }

  const ClientBench& b_;
  const SoakPlan plan_;
  std::shared_ptr<LockClient> client_;
  std::shared_ptr<Losses> lost_;
  std::vector<Kind> kinds_;
  std::deque<Holding> ring_;  // oldest first
  std::uint64_t cycles_ = 0, slot_ = 0, acquisitions_ = 0, releases_ = 0, release_not_held_ = 0;
  std::uint64_t waits_timed_out_ = 0, waits_cancelled_ = 0, errors_ = 0, refused_ = 0;
  std::string first_error_;
  double cycle_s_max_ = 0, acquire_s_max_ = 0;
  bool refused_now_ = false;  // this cycle met a refusal
};

std::int64_t as_i64(const json& s, const char* k) { return s.at(k).get<std::int64_t>(); }

}  // namespace

json churn_soak_cell(const ClientBench& b, const SoakPlan& plan, const std::function<void(const json&)>& on_sample) {
  json j = {{"held", plan.held},
            {"churn", plan.churn},
            {"churn_kinds", plan.all_kinds ? "all" : "lease"},
            {"ttl_ms", plan.ttl.count()},
            {"cycle_every_ms", plan.cycle_every.count()},
            {"sample_every_s", r3(std::chrono::duration<double>(plan.sample_every).count())},
            {"duration_requested_s", r3(std::chrono::duration<double>(plan.duration).count())},
            {"heap_source", "mallinfo2 uordblks + hblkhd (every arena)"},
            {"rss_source", "/proc/self/statm resident"}};
  const auto t_cell = Clock::now();
  std::string app;
  const std::string uri = tagged_uri(b, &app);
  start_shared_threads(b);
  trim_heap();
  json samples = json::array();
  json released;
  double fill_s = 0;
  std::uint64_t fill_acquisitions = 0;
  LockClientStats end_stats;
  {
    auto client = LockClient::create(uri, client_options(b));
    Soak soak(b, plan, client);
    const auto t_fill = Clock::now();
    soak.fill();
    fill_s = seconds_since(t_fill);
    fill_acquisitions = soak.acquisitions();
    // The soak's clock starts with the first full set held.
    const auto t0 = Clock::now();
    soak.start_clock(t0);
    const auto end = t0 + plan.duration;
    const auto baseline_at = t0 + soak_baseline_at(plan.duration);
    bool baseline_taken = false;
    auto take_sample = [&](bool baseline) {
      json s = soak.sample(seconds_since(t0));
      if (baseline) s["baseline"] = true;
      samples.push_back(s);
      if (on_sample) on_sample(s);
    };
    take_sample(false);
    auto next_sample = t0 + plan.sample_every;
    for (auto now = Clock::now(); now < end; now = Clock::now()) {
      const auto cycle_start = now;
      soak.cycle();
      now = Clock::now();
      if (now >= end) break;  // the end sample follows
      const bool baseline = !baseline_taken && now >= baseline_at;
      if (baseline || now >= next_sample) {
        take_sample(baseline);
        baseline_taken = baseline_taken || baseline;
        while (next_sample <= now) next_sample += plan.sample_every;
      }
      // The next cycle starts a --cycle-every after this one did (at once
      // when this one took longer).
      std::this_thread::sleep_until(std::min(cycle_start + plan.cycle_every, end));
    }
    // The end: the baseline too when the run never reached it elsewhere.
    take_sample(!baseline_taken);
    end_stats = client->stats();
    // Everything released, the client still alive: what stays now stays
    // with no holding at all.
    soak.release_all();
    std::this_thread::sleep_for(milliseconds(100));  // releases' completions run on the client's threads
    const LockClientStats st = client->stats();
    released = {{"rss_bytes", rss_bytes()},     {"heap_bytes", heap_in_use()},        {"held_leases", st.held_leases},
                {"queue_places", st.queue_places}, {"waiters", st.waiters},           {"listening", st.listening},
                {"losses", soak.losses(st)}};
    j["cycles"] = samples.back()["cycles"];
    j["acquisitions"] = soak.acquisitions();
    j["fill_acquisitions"] = fill_acquisitions;
    j["fill_s"] = r3(fill_s);
    j["waits_timed_out"] = soak.waits_timed_out();
    j["waits_cancelled"] = soak.waits_cancelled();
    j["on_lost_calls"] = soak.on_lost_calls();
    j["losses_by_cause"] = soak.losses_by_cause();
    if (!soak.first_loss().is_null()) j["first_loss"] = soak.first_loss();
    j["leases_lost"] = st.leases_lost;
    j["release_not_held"] = soak.release_not_held();
    j["losses"] = soak.losses(st);
    j["errors"] = soak.errors();
    j["refused"] = soak.refused();
    if (!soak.first_error().empty()) j["first_error"] = soak.first_error();
  }
  const json& first = samples.front();
  const json& last = samples.back();
  const json* base = &last;
  for (const auto& s : samples)
    if (s.value("baseline", false)) {
      base = &s;
      break;
    }
  const double duration_s = last["t_s"].get<double>();
  const std::int64_t churn_acq = as_i64(last, "acquisitions") - as_i64(first, "acquisitions");
  const std::int64_t acq_after = as_i64(last, "acquisitions") - as_i64(*base, "acquisitions");
  const std::int64_t rss_base = as_i64(*base, "rss_bytes");
  std::optional<double> growth;  // over the samples after the baseline
  bool after = false;
  for (const auto& s : samples) {
    if (after) {
      const double g = 100.0 * static_cast<double>(as_i64(s, "rss_bytes") - rss_base) / static_cast<double>(rss_base);
      growth = growth ? std::max(*growth, g) : g;
    }
    if (&s == base) after = true;
  }
  j["duration_s"] = r3(duration_s);
  j["churn_acquisitions"] = churn_acq;
  j["churn_per_s"] = duration_s > 0 ? json(r3(static_cast<double>(churn_acq) / duration_s)) : json(nullptr);
  j["baseline_s"] = (*base)["t_s"];
  j["acquisitions_after_baseline"] = acq_after;
  j["rss_start_bytes"] = first["rss_bytes"];
  j["rss_baseline_bytes"] = rss_base;
  j["rss_end_bytes"] = last["rss_bytes"];
  j["rss_growth_pct"] = growth ? json(r3(*growth)) : json(nullptr);
  // The same growth split: written pages and mapped files' pages (each against
  // the baseline's RSS, so the two add up to the RSS growth at each sample).
  for (const char* part : {"rss_anon_bytes", "rss_file_bytes"}) {
    if (!base->contains(part)) continue;
    const std::int64_t p0 = as_i64(*base, part);
    j[std::string(part, std::strlen(part) - 6) + "_baseline_bytes"] = p0;
    j[std::string(part, std::strlen(part) - 6) + "_end_bytes"] = last[part];
    j[std::string(part, std::strlen(part) - 6) + "_growth_pct"] =
        r3(100.0 * static_cast<double>(as_i64(last, part) - p0) / static_cast<double>(rss_base));
  }
  j["heap_from_system_end_bytes"] = last.value("heap_from_system_bytes", json(nullptr));
  j["heap_start_bytes"] = first["heap_bytes"];
  j["heap_baseline_bytes"] = (*base)["heap_bytes"];
  j["heap_end_bytes"] = last["heap_bytes"];
  j["heap_retained_per_acquisition_bytes"] =
      acq_after > 0
          ? json(r3(static_cast<double>(as_i64(last, "heap_bytes") - as_i64(*base, "heap_bytes")) /
                    static_cast<double>(acq_after)))
          : json(nullptr);
  // The same, settled: a renewal round's statement buffers (several MB at
  // 10,000 held) are in use while it runs and freed when it ends, so one
  // sample can catch them. The lowest heap of the five samples from the
  // baseline on, against the lowest of the last five.
  {
    std::vector<const json*> after_base;
    bool from = false;
    for (const auto& s : samples) {
      if (&s == base) from = true;
      if (from) after_base.push_back(&s);
    }
    auto lowest = [](auto begin, auto end) {
      std::int64_t low = std::numeric_limits<std::int64_t>::max();
      for (auto it = begin; it != end; ++it) low = std::min(low, as_i64(**it, "heap_bytes"));
      return low;
    };
    const std::size_t k = std::min<std::size_t>(5, after_base.size() / 2);
    if (k > 0 && acq_after > 0) {
      const std::int64_t h0 = lowest(after_base.begin(), after_base.begin() + static_cast<std::ptrdiff_t>(k));
      const std::int64_t h1 = lowest(after_base.end() - static_cast<std::ptrdiff_t>(k), after_base.end());
      j["heap_settled_baseline_bytes"] = h0;
      j["heap_settled_end_bytes"] = h1;
      j["heap_settled_retained_per_acquisition_bytes"] =
          r3(static_cast<double>(h1 - h0) / static_cast<double>(acq_after));
    } else {
      j["heap_settled_retained_per_acquisition_bytes"] = nullptr;
    }
  }
  j["released"] = released;
  j["renewal_statements"] = end_stats.renewal_statements;
  j["leases_renewed"] = end_stats.leases_renewed;
  j["renewal_lag_p99_ms"] = r3(end_stats.renewal_lag_p99_ms);
  j["renewal_lag_max_ms"] = r3(end_stats.renewal_lag_max_ms);
  // Issue 43's target: RSS after the first minute flat within 5 %, 0 losses.
  j["target_met"] = growth.has_value() && *growth <= 5.0 && j["losses"].get<std::uint64_t>() == 0;
  j["samples"] = samples;
  j["cell_s"] = r3(seconds_since(t_cell));
  return j;
}

}  // namespace sqlguard::bench
