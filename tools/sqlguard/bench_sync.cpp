// sqlguard bench: the synchronizer ops (issue 28). `fair-lease` runs the
// fairness loop on the unfair lease and then on the fair one
// (LeaseOptions::fair) in one cell; `semaphore-hot` has every client on one
// semaphore of --permits permits; `rw-mixed` one read-write lease, 90 % of
// the cycles shared and 10 % exclusive.
//
// Every client is a thread with a LockClient of its own and one handle of
// it: a deployment has one client per process, so each thread plays one
// process, and the numbers are those of the cross-process protocol (the
// database decides, waiters in other processes are woken or poll). One
// client shared by all threads (as the `waiters` op has) would serve the
// name's waiters from in-process wake-ups and its 2 work connections: that
// measures the client's own queue, which `waiters` already does.
//
// The loop of every client (the fairness loop): a waited acquire
// (kSyncAcquireWait), hold --hold, release, pause --hold. Counted when the
// acquire STARTS inside the measured window. Each grant draws a number from
// one counter per cell, so an acquire's wait can also be counted in grants
// to others (`wait_*_cycles`). The bench also counts holders itself (from
// the moment acquire() returned until release() is called: inside the
// database's holding) and reports grants that found the op's invariant
// broken by that count (`overlaps`: 0 unless the library is wrong).
#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

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

bool sync_op(const std::string& op) { return op == "fair-lease" || op == "semaphore-hot" || op == "rw-mixed"; }

namespace {

constexpr milliseconds kTtl{kTtlMs};

LeaseOptions sync_options(bool fair) {
  LeaseOptions o;
  o.ttl = kTtl;
  o.fair = fair;
  if (!fair) apply_barging_limit(o);
  return o;
}

// One client's handle, as the loop drives it. `exclusive`: the mode asked
// for (only the read-write lease has two).
class Handle {
 public:
  virtual ~Handle() = default;
  virtual bool acquire(bool exclusive, milliseconds wait) = 0;
  virtual bool release() = 0;
};

class LeaseHandle final : public Handle {
 public:
  LeaseHandle(std::shared_ptr<LockClient> c, const std::string& name, bool fair)
      : lock_(std::move(c), name, sync_options(fair)) {}
  bool acquire(bool, milliseconds wait) override { return lock_.acquire(wait); }
  bool release() override { return lock_.release(); }

 private:
  LeaseLock lock_;
};

class SemaphoreHandle final : public Handle {
 public:
  SemaphoreHandle(std::shared_ptr<LockClient> c, const std::string& name, std::int64_t permits)
      : sem_(std::move(c), name, permits, sync_options(false)) {}
  bool acquire(bool, milliseconds wait) override { return sem_.acquire(1, wait); }
  bool release() override { return sem_.release(); }

 private:
  Semaphore sem_;
};

class RwHandle final : public Handle {
 public:
  RwHandle(std::shared_ptr<LockClient> c, const std::string& name) : rw_(std::move(c), name, sync_options(false)) {}
  bool acquire(bool exclusive, milliseconds wait) override {
    return rw_.acquire(exclusive ? LeaseMode::kExclusive : LeaseMode::kShared, wait);
  }
  bool release() override { return rw_.release(); }

 private:
  ReadWriteLease rw_;
};

// The handle of `op` on `client` (fair-lease: `fair` picks the side).
std::unique_ptr<Handle> make_handle(const std::string& op, std::shared_ptr<LockClient> client, const std::string& name,
                                    std::int64_t permits, bool fair) {
  if (op == "fair-lease") return std::make_unique<LeaseHandle>(std::move(client), name, fair);
  if (op == "semaphore-hot") return std::make_unique<SemaphoreHandle>(std::move(client), name, permits);
  if (op == "rw-mixed") return std::make_unique<RwHandle>(std::move(client), name);
  throw Error(ErrorCode::kInvalidArgument, "bench: '" + op + "' is not a synchronizer op");
}

// What one run of the loop measured.
struct SyncRun {
  std::array<Stats, 2> mode;  // by the mode asked for: [0] shared (semaphore: a permit), [1] exclusive (lease)
  Stats all;                  // both modes; per_client = each client's cycles
  std::int64_t max_holders = 0;  // most non-exclusive holders at once (semaphore: permits held)
  std::uint64_t overlaps = 0;    // grants that found the invariant broken by the bench's count
  // Over the whole run (warm-up included): acquisitions, and those a release
  // named (LockClientStats::named_handoffs) and granted in its own commit
  // (granted_handoffs: held without a statement of the waiter's own).
  std::uint64_t acquired = 0, named = 0, granted = 0;
};

// The loop, on `clients` threads. `exclusive(rng)` picks each cycle's mode;
// `shared_cap`: how many non-exclusive holders may hold at once.
SyncRun run_sync(const SyncBench& b, const std::function<std::unique_ptr<Handle>(std::shared_ptr<LockClient>)>& make,
                 const std::function<bool(std::mt19937_64&)>& exclusive, std::int64_t shared_cap) {
  const auto n = static_cast<std::size_t>(b.clients);
  std::vector<std::array<Stats, 2>> per(n);
  std::atomic<std::uint64_t> seq{0}, overlaps{0}, acquired{0}, named{0}, granted{0};
  std::atomic<std::int64_t> shared_now{0}, exclusive_now{0}, max_holders{0};
  std::atomic<int> phase{0}, ready{0};
  std::mutex err_mu;
  std::string setup_error;
  std::vector<std::thread> ts;
  for (std::size_t i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      std::shared_ptr<LockClient> client;
      std::unique_ptr<Handle> h;
      try {
        LockClientOptions co;
        co.connect = b.connect;
        client = LockClient::create(b.uri, co);
        h = make(client);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(err_mu);
        if (setup_error.empty()) setup_error = std::string("client setup failed: ") + e.what();
        ready.fetch_add(1);
        return;
      }
      ready.fetch_add(1);
      std::mt19937_64 rng(0x5eed + i);  // the same mode sequence per client in every run
      while (phase.load() < 2) {
        const bool measured = phase.load() == 1;
        const bool x = exclusive(rng);
        Stats& st = per[i][x ? 1 : 0];
        bool holding = false;
        try {
          const std::uint64_t s0 = seq.load();
          const auto t0 = Clock::now();
          const bool owned = h->acquire(x, kSyncAcquireWait);
          const auto t1 = Clock::now();
          const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
          if (!owned) {
            if (measured) {
              st.wait_ns.push_back(waited);
              st.wait_cycles.push_back(static_cast<std::int64_t>(seq.load() - s0));
              ++st.timeouts;
            }
            continue;
          }
          const std::uint64_t k = seq.fetch_add(1);
          acquired.fetch_add(1);
          holding = true;
          if (x) {
            const auto e = exclusive_now.fetch_add(1) + 1;
            if (e > 1 || shared_now.load() > 0) ++overlaps;
          } else {
            const auto s = shared_now.fetch_add(1) + 1;
            if (exclusive_now.load() > 0 || s > shared_cap) ++overlaps;
            for (auto m = max_holders.load(); s > m && !max_holders.compare_exchange_weak(m, s);) {
            }
          }
          hold_for(b.hold, t1);
          (x ? exclusive_now : shared_now).fetch_sub(1);
          holding = false;
          if (!h->release()) throw Error(ErrorCode::kLeaseLost, "bench: the holding was no longer held at release");
          if (measured) {
            ++st.ops;
            st.lat_ns.push_back(waited);
            st.wait_ns.push_back(waited);
            st.wait_cycles.push_back(static_cast<std::int64_t>(k - s0));
          }
          std::this_thread::sleep_for(b.hold);  // the pause: step back before asking again
        } catch (const std::exception& e) {
          if (holding) (x ? exclusive_now : shared_now).fetch_sub(1);
          if (measured) ++st.errors;
          if (st.first_error.empty()) st.first_error = e.what();
          std::this_thread::sleep_for(milliseconds(1));  // never spin on a broken session
        }
      }
      h.reset();  // releases a holding left over, before the client goes
      const LockClientStats cs = client->stats();
      named.fetch_add(cs.named_handoffs);
      granted.fetch_add(cs.granted_handoffs);
    });
  }
  while (ready.load() < b.clients) std::this_thread::sleep_for(milliseconds(2));
  std::this_thread::sleep_for(b.warmup);
  const auto t0 = Clock::now();
  phase = 1;
  std::this_thread::sleep_for(b.duration);
  phase = 2;
  const auto t1 = Clock::now();
  for (auto& t : ts) t.join();
  if (!setup_error.empty()) throw Error(ErrorCode::kInternal, "bench: " + setup_error);
  SyncRun r;
  const double elapsed = std::chrono::duration<double>(t1 - t0).count();
  for (std::size_t i = 0; i < n; ++i) {
    Stats both;
    for (int m = 0; m < 2; ++m) {
      r.mode[static_cast<std::size_t>(m)].merge_client(per[i][static_cast<std::size_t>(m)]);
      both.merge_client(per[i][static_cast<std::size_t>(m)]);
    }
    r.all.merge_client(both);
  }
  for (auto* s : {&r.mode[0], &r.mode[1], &r.all}) s->elapsed_s = elapsed;
  r.max_holders = max_holders.load();
  r.overlaps = overlaps.load();
  r.acquired = acquired.load();
  r.named = named.load();
  r.granted = granted.load();
  return r;
}

void add_loop_fields(json& j, const SyncBench& b) {
  j["hold_ms"] = b.hold.count();
  j["pause_ms"] = b.hold.count();
  j["acquire_wait_ms"] = kSyncAcquireWait.count();
  j["client_model"] = "a LockClient per client thread";
  j["raw_ops_per_s"] = nullptr;
  j["overhead_ratio"] = nullptr;
}

// A mode's figures of rw-mixed.
void add_mode_fields(json& j, const std::string& prefix, Stats& st) {
  j[prefix + "ops_per_s"] = r3(st.ops_per_s());
  j[prefix + "ops"] = st.ops;
  j[prefix + "p50_ms"] = r3(st.pct_ms(0.5));
  j[prefix + "p99_ms"] = r3(st.pct_ms(0.99));
  j[prefix + "wait_max_ms"] = r3(st.wait_pct_ms(1.0));
  j[prefix + "wait_max_cycles"] = percentile(st.wait_cycles, 1.0);
  j[prefix + "timeouts"] = st.timeouts;
}

}  // namespace

json sync_cell(const std::string& op, const SyncBench& b) {
  json j;
  add_loop_fields(j, b);
  if (op == "fair-lease") {
    if (b.clients < 2) throw Error(ErrorCode::kInvalidArgument, "bench: fair-lease needs 2 clients or more");
    auto side = [&](bool fair) {
      const std::string name = b.prefix + (fair ? ":fair" : ":unfair");
      return run_sync(
          b, [&](std::shared_ptr<LockClient> c) { return make_handle(op, std::move(c), name, 0, fair); },
          [](std::mt19937_64&) { return true; }, 0);
    };
    // The unfair lease first, then the fair one: same clients, loop and
    // server, fresh clients and a name of its own each.
    SyncRun unfair = side(false);
    SyncRun fair = side(true);
    add_sync_fields(j, "", fair.all);
    add_sync_fields(j, "unfair_", unfair.all);
    j["overlaps"] = fair.overlaps;
    j["unfair_overlaps"] = unfair.overlaps;
    // How the fair side's hand-offs went: named by the release's wake-up
    // (PostgreSQL), and of those granted in the release's own commit.
    const double acq = static_cast<double>(std::max<std::uint64_t>(fair.acquired, 1));
    j["named_handoff_share"] = r3(static_cast<double>(fair.named) / acq);
    j["granted_handoff_share"] = r3(static_cast<double>(fair.granted) / acq);
    const double u = unfair.all.ops_per_s();
    j["fair_vs_unfair"] = u > 0 ? json(r3(fair.all.ops_per_s() / u)) : json(nullptr);
    if (!j.contains("first_error") && j.contains("unfair_first_error")) j["first_error"] = j["unfair_first_error"];
    return j;
  }
  if (op == "semaphore-hot") {
    const std::string name = b.prefix + ":sem";
    SyncRun r = run_sync(
        b, [&](std::shared_ptr<LockClient> c) { return make_handle(op, std::move(c), name, b.permits, false); },
        [](std::mt19937_64&) { return false; }, b.permits);
    j["permits"] = b.permits;
    add_sync_fields(j, "", r.all);
    j["max_holders"] = r.max_holders;
    j["overlaps"] = r.overlaps;
    return j;
  }
  if (op == "rw-mixed") {
    const std::string name = b.prefix + ":rw";
    SyncRun r = run_sync(
        b, [&](std::shared_ptr<LockClient> c) { return make_handle(op, std::move(c), name, 0, false); },
        [](std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0, 1)(rng) < kRwExclusiveShare; },
        std::numeric_limits<std::int64_t>::max());
    j["exclusive_share"] = kRwExclusiveShare;
    add_sync_fields(j, "", r.all);
    add_mode_fields(j, "shared_", r.mode[0]);
    add_mode_fields(j, "exclusive_", r.mode[1]);
    // A writer's longest wait (one that gave up included): what writer preference bounds.
    j["writer_wait_max_ms"] = j["exclusive_wait_max_ms"];
    j["max_shared_holders"] = r.max_holders;
    j["overlaps"] = r.overlaps;
    return j;
  }
  throw Error(ErrorCode::kInvalidArgument, "bench: '" + op + "' is not a synchronizer op");
}

std::function<void()> sync_solo_cycle(const std::string& op, std::shared_ptr<LockClient> client,
                                      const std::string& name, std::int64_t permits, bool exclusive) {
  auto h = std::shared_ptr<Handle>(make_handle(op, std::move(client), name, permits, op == "fair-lease"));
  return [h, exclusive] {
    if (!h->acquire(exclusive, kSyncAcquireWait))
      throw Error(ErrorCode::kInternal, "bench: a name nobody else uses was busy");
    if (!h->release()) throw Error(ErrorCode::kLeaseLost, "bench: the holding was no longer held at release");
  };
}


}  // namespace sqlguard::bench
