// The process-wide metrics registry (include/sqlguard/metrics.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "sqlguard/errors.h"
#include "sqlguard/metrics.h"

namespace sqlguard::metrics {

void Histogram::observe(double seconds) noexcept {
  if (!(seconds >= 0)) seconds = 0;  // NaN / negative (clock oddities) count as 0
  std::size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  double ns = std::min(seconds * 1e9, 1e18);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
}

Histogram::Data Histogram::data() const noexcept {
  Data d;
  d.buckets.reserve(buckets_.size());
  for (const auto& b : buckets_) d.buckets.push_back(b.load(std::memory_order_relaxed));
  // count = sum of buckets, so the exposition is consistent even while observed concurrently
  d.count = 0;
  for (auto b : d.buckets) d.count += b;
  d.sum = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return d;
}

void Histogram::reset() noexcept {
  for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
  count_.store(0, std::memory_order_relaxed);
  sum_ns_.store(0, std::memory_order_relaxed);
}

namespace {

enum class Kind { kCounter, kHistogram };

struct Family {
  Kind kind;
  std::string help;
  std::map<Labels, std::unique_ptr<Counter>> counters;
  std::map<Labels, std::unique_ptr<Histogram>> histograms;
};

struct Registry {
  std::mutex mu;
  std::map<std::string, Family, std::less<>> families;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: metrics are bumped until the process ends
  return *r;
}

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 200) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

Family& family(std::string_view name, std::string_view help, const Labels& labels, Kind kind) {
  if (!valid_name(name))
    throw Error(ErrorCode::kInvalidArgument, "metric name '" + std::string(name) + "' must match [a-zA-Z_][a-zA-Z0-9_]*");
  for (const auto& [k, v] : labels)
    if (!valid_name(k) || k.rfind("__", 0) == 0)
      throw Error(ErrorCode::kInvalidArgument, "label name '" + k + "' of metric '" + std::string(name) +
                                                   "' must match [a-zA-Z_][a-zA-Z0-9_]* and not start with __");
  auto& r = registry();
  auto it = r.families.find(name);
  if (it == r.families.end())
    it = r.families.emplace(std::string(name), Family{kind, std::string(help), {}, {}}).first;
  else if (it->second.kind != kind)
    throw Error(ErrorCode::kInvalidArgument, "metric '" + std::string(name) + "' is already registered as a " +
                                                 (it->second.kind == Kind::kCounter ? "counter" : "histogram"));
  else if (it->second.help.empty())
    it->second.help = std::string(help);  // a lookup without help came first (Prometheus wants the text)
  return it->second;
}

}  // namespace

Counter& counter(std::string_view name, std::string_view help, const Labels& labels) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto& f = family(name, help, labels, Kind::kCounter);
  auto& slot = f.counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Histogram& histogram(std::string_view name, std::string_view help, const Labels& labels) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto& f = family(name, help, labels, Kind::kHistogram);
  auto& slot = f.histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>();
  return *slot;
}

Snapshot snapshot() {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  Snapshot s;
  for (const auto& [name, f] : r.families) {
    for (const auto& [labels, c] : f.counters) s.counters.push_back({name, f.help, labels, c->value()});
    for (const auto& [labels, h] : f.histograms) s.histograms.push_back({name, f.help, labels, h->data()});
  }
  return s;
}

void reset() {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (auto& [name, f] : r.families) {
    for (auto& [labels, c] : f.counters) c->reset();
    for (auto& [labels, h] : f.histograms) h->reset();
  }
}

void election_elected() noexcept {
  static Counter& c = counter("sqlguard_election_elected_total", "Leader terms won by this process");
  c.inc();
}

void election_revoked(std::string_view cause) noexcept {
  try {
    counter("sqlguard_election_revoked_total", "Leader terms ended, by cause", {{"cause", std::string(cause)}}).inc();
  } catch (const std::exception& e) {
    log(LogLevel::kError, std::string("metrics: ") + e.what());
  }
}

}  // namespace sqlguard::metrics
