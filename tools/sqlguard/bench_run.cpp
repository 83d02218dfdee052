// sqlguard bench: running one cell. run_clients() drives N client loops
// (threads, or forked processes reporting back through a pipe);
// run_handoff() measures lock hand-off latency between N threads and
// measure_ceiling() what one hand-off physically needs; both drive any
// system's Contender, as contended_cycle() does for lease-hot.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "bench.h"
#include "process.h"
#include "sqlguard/errors.h"

namespace sqlguard::bench {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// Phases shared by the coordinator and the clients (also across fork()).
struct Shared {
  std::atomic<int> ready{0};
  std::atomic<int> phase{0};  // 0 warmup, 1 measure, 2 stop
};

// One client's loop; only ops that START in the measured phase are counted.
void client_loop(Shared& sh, const OpFn& fn, Stats& st) {
  while (true) {
    int ph = sh.phase.load(std::memory_order_acquire);
    if (ph == 2) return;
    auto t0 = Clock::now();
    try {
      const OpResult r = fn();
      auto t1 = Clock::now();
      if (ph == 1) {
        if (r.wait_ns >= 0) st.wait_ns.push_back(r.wait_ns);
        if (r.timed_out) ++st.timeouts;
        if (r.done) {
          ++st.ops;
          st.lat_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        } else {
          ++st.misses;
        }
      }
    } catch (const std::exception& e) {
      if (ph == 1) ++st.errors;
      if (st.first_error.empty()) st.first_error = e.what();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // never spin on a broken session
    }
  }
}

// A client process's report: ok, ops, misses, errors, timeouts, then the
// counts of the latency and wait samples that follow its first error.
constexpr std::size_t kHeader = 7;

bool write_all(int fd, const void* p, std::size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}
bool read_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

Stats run_clients(int clients, bool processes, const std::function<OpFn(int client)>& make,
                  std::chrono::milliseconds warmup, std::chrono::milliseconds duration) {
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw Error(ErrorCode::kInternal, "bench: mmap failed");
  auto* sh = new (mem) Shared();
  struct Unmap {
    void* m;
    ~Unmap() { munmap(m, sizeof(Shared)); }
  } unmap{mem};

  Stats total;
  std::vector<Stats> per(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  std::vector<cli::proc::Child> children;  // each reports through its pipe
  std::mutex err_mu;
  std::string setup_error;

  auto body = [&](int i, Stats& st) {
    OpFn fn;
    try {
      fn = make(i);
    } catch (const std::exception& e) {
      st.first_error = std::string("client setup failed: ") + e.what();
      st.errors = 1;
      sh->ready.fetch_add(1);
      return false;
    }
    sh->ready.fetch_add(1);
    client_loop(*sh, fn, st);
    fn = nullptr;  // close connections before reporting
    return true;
  };

  for (int i = 0; i < clients; ++i) {
    if (!processes) {
      threads.emplace_back([&, i] {
        if (!body(i, per[static_cast<std::size_t>(i)])) {
          std::lock_guard<std::mutex> lk(err_mu);
          if (setup_error.empty()) setup_error = per[static_cast<std::size_t>(i)].first_error;
        }
      });
      continue;
    }
    cli::proc::SpawnOptions so;
    so.out = cli::proc::SpawnOptions::Out::kPipe;
    children.push_back(cli::proc::fork_call(
        [&, i](int fd) {
          Stats st;
          bool ok = body(i, st);
          std::uint64_t hdr[kHeader] = {ok ? 1u : 0u, st.ops,           st.misses,
                                        st.errors,   st.timeouts,    st.lat_ns.size(),
                                        st.wait_ns.size()};
          std::uint64_t elen = st.first_error.size();
          bool w = write_all(fd, hdr, sizeof hdr) && write_all(fd, &elen, sizeof elen) &&
                   write_all(fd, st.first_error.data(), elen) &&
                   write_all(fd, st.lat_ns.data(), st.lat_ns.size() * sizeof(std::int64_t)) &&
                   write_all(fd, st.wait_ns.data(), st.wait_ns.size() * sizeof(std::int64_t));
          return w ? 0 : 1;
        },
        so));
  }
  // Wait for every client to be connected (bounded: connect timeouts apply).
  while (sh->ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::this_thread::sleep_for(warmup);
  auto t0 = Clock::now();
  sh->phase.store(1, std::memory_order_release);
  std::this_thread::sleep_for(duration);
  sh->phase.store(2, std::memory_order_release);
  auto t1 = Clock::now();
  total.elapsed_s = std::chrono::duration<double>(t1 - t0).count();
  for (auto& t : threads) t.join();
  for (auto& s : per) total.merge_client(s);
  for (auto& child : children) {
    const int fd = child.out_fd();
    std::uint64_t hdr[kHeader] = {}, elen = 0;
    Stats st;
    if (read_all(fd, hdr, sizeof hdr) && read_all(fd, &elen, sizeof elen)) {
      st.first_error.resize(elen);
      read_all(fd, st.first_error.data(), elen);
      st.ops = hdr[1];
      st.misses = hdr[2];
      st.errors = hdr[3];
      st.timeouts = hdr[4];
      st.lat_ns.resize(hdr[5]);
      read_all(fd, st.lat_ns.data(), hdr[5] * sizeof(std::int64_t));
      st.wait_ns.resize(hdr[6]);
      read_all(fd, st.wait_ns.data(), hdr[6] * sizeof(std::int64_t));
      if (!hdr[0] && setup_error.empty()) setup_error = st.first_error;
    } else if (setup_error.empty()) {
      setup_error = "a client process died";
    }
    child.close_out();
    child.wait();
    total.merge_client(st);
  }
  if (!setup_error.empty()) throw Error(ErrorCode::kInternal, "bench: " + setup_error);
  return total;
}

// ---- hand-off latency ------------------------------------------------------------

// A plain sleep_for(1 ms) overshoots by 0.07-0.12 ms here (timer slack and
// the VM's timer), which the hand-off ceiling (hold + release commit +
// acquire commit) would charge to the lock.
void hold_for(milliseconds hold, Clock::time_point from) {
  const auto end = from + hold;
  const auto coarse = end - std::chrono::microseconds(100);
  if (Clock::now() < coarse) std::this_thread::sleep_until(coarse);
  while (Clock::now() < end) std::this_thread::yield();
}

bool contended(const std::string& op) { return op == "lease-hot" || op == "handoff"; }
bool cart_op(const std::string& op) { return op == "cart-decrement" || op == "cart-per-row"; }
TakeOver& bench_take_over() {
  static TakeOver rule = TakeOver::kWatched;
  return rule;
}
std::optional<milliseconds>& bench_barging_limit() {
  static std::optional<milliseconds> limit;
  return limit;
}
void apply_barging_limit(LeaseOptions& o) {
  if (bench_barging_limit()) o.barging_limit = *bench_barging_limit();
}

bool client_op(const std::string& op) {
  return op == "held-leases" || op == "waiters" || op == "takeover" || op == "lease-coalesced" || op == "lock-set" ||
         op == kSoakOp;
}

OpFn contended_cycle(std::shared_ptr<Contender> c) {
  return [c]() -> OpResult {
    const auto t0 = Clock::now();
    const bool owned = c->acquire(kAcquireTimeout);
    const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    if (owned) c->release();
    return {owned, wait, !owned};
  };
}

// N threads contend for one lock with blocking acquire (each system's own
// way of waiting). A holder keeps the lock for `hold`, releases, and stamps
// steady_clock right after release() returns; the next owner stamps right
// after acquire() returns. Each acquisition draws a number from a counter
// while it holds the lock, so the numbers follow the order of ownership and
// the stamps are paired by them; only hand-offs to ANOTHER client count.
Stats run_handoff(int clients, const std::string& name, const MakeContender& make, milliseconds warmup,
                  milliseconds duration, milliseconds hold) {
  struct Ev {
    std::uint64_t seq;
    int client;
    Clock::time_point acq, rel;
  };
  std::mutex mu;
  std::vector<Ev> evs;
  std::vector<Stats> per(static_cast<std::size_t>(clients));  // acquisitions, waits, timeouts
  std::atomic<std::uint64_t> seq{0};
  std::atomic<int> phase{0}, ready{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < clients; ++i) {
    ts.emplace_back([&, i] {
      Stats& mine = per[static_cast<std::size_t>(i)];
      std::unique_ptr<Contender> c;
      try {
        c = make(name, i);
      } catch (const std::exception& e) {
        mine.first_error = std::string("client setup failed: ") + e.what();
        ++mine.errors;
        ready.fetch_add(1);
        return;
      }
      ready.fetch_add(1);
      while (phase.load() < 2) {
        const bool measured = phase.load() == 1;
        try {
          const auto t0 = Clock::now();
          const bool owned = c->acquire(kAcquireTimeout);
          const auto acq = Clock::now();
          if (measured) {
            mine.wait_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(acq - t0).count());
            if (!owned) ++mine.timeouts;
          }
          if (!owned) continue;
          const auto n = seq.fetch_add(1);
          hold_for(hold, acq);
          c->release();
          const auto rel = Clock::now();
          if (measured) {
            ++mine.ops;
            std::lock_guard<std::mutex> lk(mu);
            evs.push_back({n, i, acq, rel});
          }
          std::this_thread::sleep_for(hold);  // step back so a waiter can take it
        } catch (const std::exception& e) {
          if (measured) ++mine.errors;
          if (mine.first_error.empty()) mine.first_error = e.what();
          std::this_thread::sleep_for(milliseconds(1));  // never spin on a broken session
        }
      }
    });
  }
  while (ready.load() < clients) std::this_thread::sleep_for(milliseconds(2));
  std::this_thread::sleep_for(warmup);
  auto t0 = Clock::now();
  phase = 1;
  std::this_thread::sleep_for(duration);
  phase = 2;
  auto t1 = Clock::now();
  for (auto& t : ts) t.join();
  Stats st;
  for (const auto& p : per) st.merge_client(p);  // ops = acquisitions so far
  st.elapsed_s = std::chrono::duration<double>(t1 - t0).count();
  st.ops = 0;
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.seq < b.seq; });
  for (std::size_t k = 1; k < evs.size(); ++k) {
    if (evs[k].client == evs[k - 1].client) {
      ++st.misses;  // re-acquired by the same client: not a hand-off
      continue;
    }
    ++st.ops;
    st.lat_ns.push_back(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::nanoseconds>(evs[k].acq - evs[k - 1].rel).count()));
  }
  return st;
}

Ceiling measure_ceiling(const std::string& name, const MakeContender& make, milliseconds warmup, milliseconds duration,
                        milliseconds hold) {
  auto c = make(name, 0);
  std::vector<std::int64_t> acq, rel, ping;
  const auto t_measure = Clock::now() + warmup, t_end = t_measure + duration;
  auto ns = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
  for (auto now = Clock::now(); now < t_end; now = Clock::now()) {
    if (!c->acquire(kAcquireTimeout)) throw Error(ErrorCode::kInternal, "bench: a lock nobody else uses was busy");
    const auto got = Clock::now();
    hold_for(hold, got);
    const auto rel0 = Clock::now();
    c->release();
    const auto rel1 = Clock::now();
    c->ping();
    const auto pinged = Clock::now();
    if (now >= t_measure) {
      acq.push_back(ns(got - now));
      rel.push_back(ns(rel1 - rel0));
      ping.push_back(ns(pinged - rel1));
    }
    std::this_thread::sleep_for(hold);  // the hand-off loop's step back
  }
  Ceiling out;
  out.hold_ms = static_cast<double>(hold.count());
  out.release_ms = percentile_ms(rel, 0.5);
  out.wakeup_ms = percentile_ms(ping, 0.5) / 2;
  out.acquire_ms = percentile_ms(acq, 0.5);
  return out;
}

}  // namespace sqlguard::bench
