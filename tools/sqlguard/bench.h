// sqlguard bench: shared pieces between the runner (cmd_bench.cpp), the
// Redis comparator (bench_redis.cpp) and the SVG plot (bench_plot.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sqlguard::bench {

// One client's operation: returns true when it counts as a completed op
// (e.g. false = lock held by someone else). Exceptions count as errors.
using OpFn = std::function<bool()>;

struct Stats {
  std::uint64_t ops = 0, misses = 0, errors = 0;
  std::vector<std::int64_t> lat_ns;  // of completed ops in the measured window
  double elapsed_s = 0;
  std::string first_error;
  double ops_per_s() const { return elapsed_s > 0 ? static_cast<double>(ops) / elapsed_s : 0; }
  double pct_ms(double q);  // sorts lat_ns on first use
};

// Runs `clients` copies of the loop built by `make(client)` for `warmup`
// then `duration`, each on its own thread, or in its own forked process when
// `processes`. `make` runs in the thread/child (open connections there).
Stats run_clients(int clients, bool processes, const std::function<OpFn(int client)>& make,
                  std::chrono::milliseconds warmup, std::chrono::milliseconds duration);

// Redis comparator (compiled only with hiredis). Cells have dialect "redis".
bool redis_compiled();
std::vector<nlohmann::json> run_redis(const std::string& host_port, const std::vector<std::string>& ops,
                                      const std::vector<int>& clients, bool processes,
                                      std::chrono::milliseconds warmup, std::chrono::milliseconds duration);

// Writes an SVG line chart of ops/s (log scale) against clients, one line per op
// (dashed: raw driver baseline; dotted: redis).
void write_svg(const std::string& path, const std::string& title, const std::vector<nlohmann::json>& cells);

}  // namespace sqlguard::bench
