// detect_distributed_engine(): the version strings these engines report
// (captured from their documentation and release notes; the engines
// themselves are not available on the test machines) and why each breaks
// sqlguard. docs/distributed-sql.md carries the sources.
#include "core/engines.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace sqlguard::detail {
namespace {

struct Engine {
  std::string_view dialect;  // the protocol it speaks
  std::string_view marker;   // case-insensitive substring of the version text
  std::string_view name;
  std::string_view reasons;
};

constexpr std::string_view kClock =
    " Each node has its own clock: sqlguard's expiries use the database clock of one server, so a lease's "
    "window would depend on which node answered (a per-node clock margin would be needed).";

// Order matters only where one text could hold two markers (none today).
constexpr std::array<Engine, 5> kEngines{{
    {"postgresql", "cockroachdb", "CockroachDB",
     "Its session advisory-lock functions (pg_advisory_lock and friends) are no-ops that return true, so the "
     "advisory locks sqlguard takes around migrations and waits exclude nobody."},
    {"postgresql", "-yb-", "YugabyteDB",
     "Each session caches 100 or more sequence values (ysql_sequence_cache_minval), so fencing tokens issued "
     "by two sessions go backwards in time; advisory locks are missing or a preview feature, depending on "
     "the version."},
    {"postgresql", "citus", "Citus",
     "Sequences used from worker nodes hand out per-node ranges, so fencing tokens are not increasing across "
     "nodes; row-locking reads of a distributed table work only in single-shard queries."},
    {"mysql", "tidb", "TiDB",
     "It accepts SKIP LOCKED and ignores it, and in optimistic transactions a locking read locks nothing until "
     "commit; AUTO_INCREMENT values and sequences are allocated in per-node batches, so fencing tokens are "
     "not increasing across nodes."},
    {"mysql", "vitess", "Vitess",
     "vtgate routes each statement to a shard (and, by default, may send reads to replicas): row locks and "
     "the fence sequence are per shard, GET_LOCK runs on one reserved connection, and a transaction spanning "
     "shards is not atomic by default."},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The whitespace-delimited word of `text` around byte `pos`.
std::string word_at(std::string_view text, std::size_t pos) {
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  std::size_t b = pos, e = pos;
  while (b > 0 && !is_space(text[b - 1])) --b;
  while (e < text.size() && !is_space(text[e])) ++e;
  return std::string(text.substr(b, e - b));
}

}  // namespace

std::optional<EngineFinding> detect_distributed_engine(std::string_view dialect, std::string_view version_text) {
  const std::string text = lower(version_text);
  for (const auto& e : kEngines) {
    if (e.dialect != dialect) continue;
    auto pos = text.find(e.marker);
    if (pos == std::string::npos) continue;
    return EngineFinding{std::string(e.name), word_at(version_text, pos), std::string(e.reasons) + std::string(kClock)};
  }
  return std::nullopt;
}

}  // namespace sqlguard::detail
