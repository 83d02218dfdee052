// sqlguard bench: what one cell measured, and the statistics reported from it
// (percentiles, Jain's fairness index). No database code: the CLI and the
// tests (tests/bench/) link it as the sqlguard_bench_stats library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sqlguard::bench {

// The q-quantile (0 < q <= 1) of `ns` in milliseconds, by nearest rank: the
// smallest sample with at least q of all samples at or below it. 0 for no
// samples. Sorts `ns`.
double percentile_ms(std::vector<std::int64_t>& ns, double q);
// The same nearest-rank q-quantile of plain counts (e.g. waits in lock
// cycles), as a count. 0 for no samples. Sorts `v`.
std::int64_t percentile(std::vector<std::int64_t>& v, double q);

// Jain's fairness index of the clients' shares: (Σx)² / (n · Σx²). 1 when
// every client got the same share, 1/n when one client got everything.
// nullopt when there are no clients or nobody got anything.
std::optional<double> jain_index(const std::vector<std::uint64_t>& shares);

// What one cell (or one path of it) measured.
struct Stats {
  std::uint64_t ops = 0, misses = 0, errors = 0;
  std::vector<std::int64_t> lat_ns;  // of completed ops in the measured window
  double elapsed_s = 0;
  std::string first_error;
  // Contended cells (lease-hot, handoff): completed ops per client, in
  // client order; every acquire's wait (from the call until the lock was
  // owned or the call gave up); acquires that gave up.
  std::vector<std::uint64_t> per_client;
  std::vector<std::int64_t> wait_ns;
  std::uint64_t timeouts = 0;
  // The synchronizer ops: each acquire's wait counted in lock cycles, i.e.
  // how many grants of the name went to others between its call and its own
  // grant (or its giving up). A FIFO lock with N clients keeps it near N.
  std::vector<std::int64_t> wait_cycles;

  double ops_per_s() const { return elapsed_s > 0 ? static_cast<double>(ops) / elapsed_s : 0; }
  double pct_ms(double q) { return percentile_ms(lat_ns, q); }
  double wait_pct_ms(double q) { return percentile_ms(wait_ns, q); }
  // Adds another client's (or slice's) counts and samples; elapsed_s is the
  // caller's. per_client gets `from`'s ops as one more client.
  void merge_client(const Stats& from);
};

}  // namespace sqlguard::bench
