// Internal: the ONE dialect registry. A dialect is a folder src/dialect/<name>/
// (connection, error table, factory), sql/<name>/ and migrations/<name>/, plus
// one line in registry.def. Nothing else switches on the dialect; a dialect
// is known by its name (the public DialectKind enum is never extended).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard::detail {

class DoctorContext;  // core/doctor.h

struct DialectEntry {
  std::string_view name;                      // "postgresql": folders, JSON, messages
  std::vector<std::string_view> schemes;      // URI schemes, lower case
  std::string_view uri_example;               // for messages: "postgresql://host:port/db"
  bool available;                             // the driver was found at configure time
  std::unique_ptr<Connection> (*open)(std::string_view uri, const ConnectOptions& options);
  // The dialect's checks for check_environment() (src/dialect/<name>/doctor.cpp);
  // nullptr = only the common ones.
  void (*doctor)(DoctorContext& ctx) = nullptr;
  // The URI names a file path, not user:password@host (SQLite): masking
  // (mask_uri) looks for credentials only where a path can hold them.
  bool uri_is_path = false;
  // The URI names a database only the connection that opens it can see
  // (SQLite ":memory:"): a pool of several such connections is refused.
  bool (*private_to_connection)(std::string_view uri) = nullptr;
  // The port a URI without one connects to (0: none, or not fixed), unless
  // the environment variable `port_env` (when named) is set: canonical_uri()
  // writes it out, so "h" and "h:5432" are one server.
  int default_port = 0;
  const char* port_env = nullptr;
};

const std::vector<const DialectEntry*>& registered_dialects();
const DialectEntry* find_dialect_by_name(std::string_view name) noexcept;
const DialectEntry* find_dialect_by_scheme(std::string_view scheme) noexcept;
// The deprecated DialectKind of a dialect name (kOther for a dialect added
// after the three it names), and back ("other").
DialectKind dialect_kind_of(std::string_view name) noexcept;
std::string_view dialect_kind_name(DialectKind kind) noexcept;

// Each dialect folder defines its entry in factory.cpp (or missing.cpp when
// its driver was not compiled in) as `extern const DialectEntry k...{...}`;
// registry.def lists them, and only registry.cpp reads it (a new dialect's
// line then recompiles that one file).

}  // namespace sqlguard::detail
