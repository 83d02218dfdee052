#include "bench_stats.h"

#include <algorithm>
#include <cmath>

namespace sqlguard::bench {

std::int64_t percentile(std::vector<std::int64_t>& v, double q) {
  if (v.empty()) return 0;
  if (!std::is_sorted(v.begin(), v.end())) std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

double percentile_ms(std::vector<std::int64_t>& ns, double q) { return static_cast<double>(percentile(ns, q)) / 1e6; }

std::optional<double> jain_index(const std::vector<std::uint64_t>& shares) {
  double sum = 0, squares = 0;
  for (auto x : shares) {
    sum += static_cast<double>(x);
    squares += static_cast<double>(x) * static_cast<double>(x);
  }
  if (shares.empty() || squares == 0) return std::nullopt;
  return sum * sum / (static_cast<double>(shares.size()) * squares);
}

void Stats::merge_client(const Stats& from) {
  ops += from.ops;
  misses += from.misses;
  errors += from.errors;
  timeouts += from.timeouts;
  lat_ns.insert(lat_ns.end(), from.lat_ns.begin(), from.lat_ns.end());
  wait_ns.insert(wait_ns.end(), from.wait_ns.begin(), from.wait_ns.end());
  wait_cycles.insert(wait_cycles.end(), from.wait_cycles.begin(), from.wait_cycles.end());
  per_client.push_back(from.ops);
  if (first_error.empty()) first_error = from.first_error;
}

}  // namespace sqlguard::bench
