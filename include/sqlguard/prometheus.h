// sqlguard/prometheus.h — the metrics registry (metrics.h) exported through
// prometheus-cpp (Debian prometheus-cpp-dev). Built when that package is
// found at configure time, as library target sqlguard::prometheus (link it
// in addition to sqlguard::sqlguard); the configure step prints whether it is on.
//
//   prometheus::Exposer exposer{"127.0.0.1:9464"};
//   exposer.RegisterCollectable(sqlguard::prometheus_collectable());
// or, in a service that serves its own HTTP:
//   res.set_content(sqlguard::prometheus_text(), sqlguard::kPrometheusContentType);
//
// Every counter of the registry is a Prometheus counter, every histogram a
// Prometheus histogram (buckets in seconds, cumulative as the format needs).
// The exposition text is written by prometheus-cpp's TextSerializer, never
// by hand. Thread safety: both functions may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Collectable;
}

namespace sqlguard {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// A prometheus-cpp Collectable reading the sqlguard metrics registry at each
// collection.
std::shared_ptr<prometheus::Collectable> prometheus_collectable();

// The text exposition format of the sqlguard registry, followed by the
// families of `extra` collectables (e.g. your own prometheus::Registry).
std::string prometheus_text(const std::vector<std::shared_ptr<prometheus::Collectable>>& extra = {});

}  // namespace sqlguard
