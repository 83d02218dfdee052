// Internal: the SQL catalog files generated from sql/ at build time.
#pragma once

#include <cstddef>

namespace sqlguard::detail {

struct EmbeddedSqlFile {
  const char* dialect;  // directory name: sqlite, postgresql, mysql
  const char* path;     // "postgresql/lease.sql"
  const char* text;
};

extern const EmbeddedSqlFile kEmbeddedSqlFiles[];
extern const std::size_t kEmbeddedSqlFileCount;

}  // namespace sqlguard::detail
