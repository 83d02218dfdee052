// Internal: distributed SQL engines that speak the PostgreSQL or MySQL
// protocol but break what sqlguard relies on (session advisory locks, FOR
// UPDATE, gap-free increasing sequences, one clock). `sqlguard doctor` fails
// on them (the `engine` check); docs/distributed-sql.md explains each.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sqlguard::detail {

struct EngineFinding {
  std::string engine;   // "CockroachDB", "YugabyteDB", "TiDB", "Citus", "Vitess"
  std::string version;  // the part of the version text that named it
  std::string reasons;  // what breaks sqlguard's guarantees there, one sentence each
};

// Recognises an engine from what the server says about itself: for
// `postgresql`, version() and the names of installed extensions ("citus
// 12.1-1"); for `mysql`, VERSION() and @@version_comment. nullopt: none of
// the engines above (a plain PostgreSQL or MariaDB/MySQL).
std::optional<EngineFinding> detect_distributed_engine(std::string_view dialect, std::string_view version_text);

}  // namespace sqlguard::detail
