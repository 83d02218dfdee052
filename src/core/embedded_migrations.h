// Internal: the table generated from migrations/ at build time.
#pragma once

#include <cstddef>

namespace sqlguard::detail {

struct EmbeddedMigration {
  const char* dialect;  // directory name: sqlite, postgresql, mysql
  int version;
  const char* name;
  const char* sql;
};

extern const EmbeddedMigration kEmbeddedMigrations[];
extern const std::size_t kEmbeddedMigrationCount;

}  // namespace sqlguard::detail
