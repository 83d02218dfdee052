// lock-set (issue 41 item 2): orders that each hold kCartSkus names drawn from
// a catalogue of kCartCatalogue, all or none, taken by `clients` service
// instances (a LockClient of its own each, as every process has one). Two
// paths in the same cell:
//   set         a LockSet of the order's names: one transaction per attempt,
//               nothing held while it waits (no hold-and-wait);
//   one-by-one  what users write without sets: a LeaseLock per name, taken
//               in byte order (so two orders never deadlock) with
//               acquire(wait) each, holding the names taken so far while it
//               waits for the next; released in reverse.
// An order acquires (waiting up to kAcquireTimeout), holds `hold`, releases.
// Each path checks every hold in process: a name held by two orders at one
// instant is counted in `overlaps` (never expected: the leases are the same).
#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/lock_set.h"

namespace sqlguard::bench {

using std::chrono::milliseconds;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Who holds each catalogue name right now (in this process), and how often
// two orders did at once.
struct Holders {
  std::vector<std::atomic<int>> count = std::vector<std::atomic<int>>(kCartCatalogue);
  std::atomic<std::uint64_t> overlaps{0};
  void enter(const std::vector<int>& idx) {
    for (int i : idx)
      if (count[static_cast<std::size_t>(i)].fetch_add(1) != 0) ++overlaps;
  }
  void leave(const std::vector<int>& idx) {
    for (int i : idx) count[static_cast<std::size_t>(i)].fetch_sub(1);
  }
};

// Client `client`'s orders: kCartSkus distinct catalogue indexes, in a
// random order (the same sequence on both paths and every dialect).
struct Carts {
  std::minstd_rand rng;
  explicit Carts(int client) : rng(static_cast<std::uint32_t>(client * 7919 + 17)) {}
  std::vector<int> next() { return draw_cart(rng); }
};

std::string sku_name(const std::string& prefix, int i) { return prefix + "sku" + std::to_string(100 + i); }

struct Path {
  Stats st;
  std::uint64_t overlaps = 0;
};

Path run_path(const ClientBench& b, int clients, bool set, milliseconds hold, milliseconds warmup,
              milliseconds duration) {
  // Both paths lock the same names (one catalogue), one after the other.
  const std::string prefix = b.prefix + ":";
  LeaseOptions o;
  o.ttl = milliseconds(kTtlMs);
  auto holders = std::make_shared<Holders>();
  Path p;
  p.st = run_clients(clients, false, [&](int i) -> OpFn {
    auto client = LockClient::create(b.uri, client_options(b));
    auto carts = std::make_shared<Carts>(i);
    auto held = [holders, hold](const std::vector<int>& idx) {
      holders->enter(idx);
      std::this_thread::sleep_for(hold);
      holders->leave(idx);
    };
    if (set) {
      return [client, carts, held, prefix, o]() -> OpResult {
        const std::vector<int> idx = carts->next();
        std::vector<std::string> names;
        for (int k : idx) names.push_back(sku_name(prefix, k));
        LockSet s(client, names, o);
        const auto t0 = Clock::now();
        const bool got = s.acquire(kAcquireTimeout);
        const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        if (!got) return {false, wait, true};
        held(idx);
        if (!s.release()) throw std::runtime_error("lock set release: a name was no longer held");
        return {true, wait, false};
      };
    }
    auto locks = std::make_shared<std::vector<std::unique_ptr<LeaseLock>>>();
    for (int k = 0; k < kCartCatalogue; ++k) locks->push_back(std::make_unique<LeaseLock>(client, sku_name(prefix, k), o));
    return [client, carts, held, locks]() -> OpResult {
      std::vector<int> idx = carts->next();
      // Byte order of the names (sku100 .. sku119: the indexes' order).
      std::sort(idx.begin(), idx.end());
      const auto t0 = Clock::now();
      std::size_t taken = 0;
      for (; taken < idx.size(); ++taken)
        if (!(*locks)[static_cast<std::size_t>(idx[taken])]->acquire(kAcquireTimeout)) break;
      const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
      const bool got = taken == idx.size();
      if (got) held(idx);
      for (std::size_t k = taken; k-- > 0;)
        if (!(*locks)[static_cast<std::size_t>(idx[k])]->release())
          throw std::runtime_error("release: a lease of the order was no longer held");
      return {got, wait, !got};
    };
  }, warmup, duration);
  p.overlaps = holders->overlaps.load();
  return p;
}

}  // namespace

json lock_set_cell(const ClientBench& b, int clients, milliseconds hold, milliseconds warmup, milliseconds duration) {
  json j = {{"clients", clients}, {"client_model", "a LockClient per client"}, {"names_per_order", kCartSkus},
            {"catalogue", kCartCatalogue}, {"hold_ms", hold.count()}};
  Path set = run_path(b, clients, true, hold, warmup, duration);
  Path one = run_path(b, clients, false, hold, warmup, duration);
  add_cell_fields(j, "lock-set", set.st, nullptr);
  j["wait_p99_ms"] = r3(set.st.wait_pct_ms(0.99));
  j["timeouts"] = set.st.timeouts;
  j["overlaps"] = set.overlaps;
  j["one_by_one_ops_per_s"] = r3(one.st.ops_per_s());
  j["one_by_one_p50_ms"] = r3(one.st.pct_ms(0.5));
  j["one_by_one_p99_ms"] = r3(one.st.pct_ms(0.99));
  j["one_by_one_wait_p99_ms"] = r3(one.st.wait_pct_ms(0.99));
  j["one_by_one_timeouts"] = one.st.timeouts;
  j["one_by_one_errors"] = one.st.errors;
  j["one_by_one_overlaps"] = one.overlaps;
  if (!one.st.first_error.empty()) j["one_by_one_first_error"] = one.st.first_error;
  j["set_vs_one_by_one"] =
      one.st.ops_per_s() > 0 ? json(r3(set.st.ops_per_s() / one.st.ops_per_s())) : json(nullptr);
  return j;
}

}  // namespace sqlguard::bench
