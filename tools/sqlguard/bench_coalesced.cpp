// lease-coalesced (issue 40 item 5): many requesters on ONE lock client, each
// taking and releasing a lease name of its own, with the client's coalescing
// on (LockClientOptions::batch_max) and off (every call alone), same cell.
#include <memory>
#include <stdexcept>
#include <string>

#include "bench.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"

namespace sqlguard::bench {

using std::chrono::milliseconds;
using nlohmann::json;

namespace {

struct Path {
  Stats st;
  LockClientStats client;
};

// One path: `requesters` threads on one client with `batch_max`.
Path run_path(const ClientBench& b, std::size_t requesters, std::size_t batch_max, const std::string& tag,
              milliseconds warmup, milliseconds duration) {
  LockClientOptions co = client_options(b);
  co.max_connections = 4;  // renewal + listener + 2 work connections
  co.batch_max = batch_max;
  auto client = LockClient::create(b.uri, co);
  LeaseOptions o;
  o.ttl = milliseconds(kTtlMs);
  const std::string prefix = b.prefix + ":" + tag + ":";
  Path p;
  p.st = run_clients(static_cast<int>(requesters), false, [&](int i) -> OpFn {
    auto lock = std::make_shared<LeaseLock>(client, prefix + std::to_string(i), o);
    return [lock] {
      if (!lock->try_acquire()) return false;  // (a name of its own: never expected)
      if (!lock->release()) throw std::runtime_error("release: the lease was not held");
      return true;
    };
  }, warmup, duration);
  p.client = client->stats();
  return p;
}

}  // namespace

json coalesced_cell(const ClientBench& b, std::size_t requesters, milliseconds warmup, milliseconds duration) {
  json j = {{"requesters", requesters}, {"clients", requesters}, {"client_model", "one LockClient, 4 connections"}};
  const std::size_t batch_max = LockClientOptions{}.batch_max;
  Path co = run_path(b, requesters, batch_max, "co", warmup, duration);
  Path alone = run_path(b, requesters, 1, "alone", warmup, duration);
  add_cell_fields(j, "lease-coalesced", co.st, nullptr);
  j["misses"] = co.st.misses;
  j["batch_max"] = batch_max;
  j["connections"] = co.client.connections_open;
  j["batches"] = co.client.batches;
  j["batched_calls"] = co.client.batched_calls;
  j["calls_per_batch"] = co.client.batches > 0 ? json(r3(static_cast<double>(co.client.batched_calls) /
                                                        static_cast<double>(co.client.batches)))
                                               : json(nullptr);
  j["alone_ops_per_s"] = r3(alone.st.ops_per_s());
  j["alone_p50_ms"] = r3(alone.st.pct_ms(0.5));
  j["alone_p99_ms"] = r3(alone.st.pct_ms(0.99));
  j["alone_errors"] = alone.st.errors;
  j["coalesced_vs_alone"] =
      alone.st.ops_per_s() > 0 ? json(r3(co.st.ops_per_s() / alone.st.ops_per_s())) : json(nullptr);
  if (!alone.st.first_error.empty()) j["alone_first_error"] = alone.st.first_error;
  return j;
}

}  // namespace sqlguard::bench
