// Prometheus exporter over the metrics registry (include/sqlguard/prometheus.h).
#include "sqlguard/prometheus.h"

#include <limits>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "sqlguard/metrics.h"

namespace sqlguard {
namespace {

std::vector<prometheus::ClientMetric::Label> labels_of(const metrics::Labels& ls) {
  std::vector<prometheus::ClientMetric::Label> out;
  for (const auto& [k, v] : ls) out.push_back({k, v});
  return out;
}

// The registry's snapshot as prometheus-cpp metric families (one family per
// name; the snapshot is ordered by name, so series of a family are adjacent).
std::vector<prometheus::MetricFamily> collect() {
  auto snap = metrics::snapshot();
  std::vector<prometheus::MetricFamily> out;
  for (const auto& c : snap.counters) {
    if (out.empty() || out.back().name != c.name || out.back().type != prometheus::MetricType::Counter)
      out.push_back({c.name, c.help, prometheus::MetricType::Counter, {}});
    prometheus::ClientMetric m;
    m.label = labels_of(c.labels);
    m.counter.value = static_cast<double>(c.value);
    out.back().metric.push_back(std::move(m));
  }
  for (const auto& h : snap.histograms) {
    if (out.empty() || out.back().name != h.name || out.back().type != prometheus::MetricType::Histogram)
      out.push_back({h.name, h.help, prometheus::MetricType::Histogram, {}});
    prometheus::ClientMetric m;
    m.label = labels_of(h.labels);
    m.histogram.sample_count = h.data.count;
    m.histogram.sample_sum = h.data.sum;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.data.buckets.size(); ++i) {
      cumulative += h.data.buckets[i];
      double bound = i < metrics::Histogram::kBounds.size() ? metrics::Histogram::kBounds[i]
                                                             : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back({cumulative, bound});
    }
    out.back().metric.push_back(std::move(m));
  }
  return out;
}

class RegistryCollectable final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override { return collect(); }
};

}  // namespace

std::shared_ptr<prometheus::Collectable> prometheus_collectable() { return std::make_shared<RegistryCollectable>(); }

std::string prometheus_text(const std::vector<std::shared_ptr<prometheus::Collectable>>& extra) {
  auto families = collect();
  for (const auto& c : extra)
    if (c) {
      auto more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace sqlguard
