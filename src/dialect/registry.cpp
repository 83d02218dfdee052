#include "dialect/registry.h"

namespace sqlguard::detail {

// The entries (each dialect's factory.cpp or missing.cpp defines its own).
#define SQLGUARD_DIALECT(entry) extern const DialectEntry entry;
#include "dialect/registry.def"
#undef SQLGUARD_DIALECT

const std::vector<const DialectEntry*>& registered_dialects() {
  // One line per dialect, in registry.def.
  static const std::vector<const DialectEntry*> all = {
#define SQLGUARD_DIALECT(entry) &entry,
#include "dialect/registry.def"
#undef SQLGUARD_DIALECT
  };
  return all;
}

const DialectEntry* find_dialect_by_name(std::string_view name) noexcept {
  for (const auto* d : registered_dialects())
    if (d->name == name) return d;
  return nullptr;
}

const DialectEntry* find_dialect_by_scheme(std::string_view scheme) noexcept {
  for (const auto* d : registered_dialects())
    for (auto s : d->schemes)
      if (s == scheme) return d;
  return nullptr;
}

DialectKind dialect_kind_of(std::string_view name) noexcept {
  if (name == "sqlite") return DialectKind::kSqlite;
  if (name == "postgresql") return DialectKind::kPostgresql;
  if (name == "mysql") return DialectKind::kMysql;
  return DialectKind::kOther;
}

std::string_view dialect_kind_name(DialectKind kind) noexcept {
  switch (kind) {
    case DialectKind::kSqlite: return "sqlite";
    case DialectKind::kPostgresql: return "postgresql";
    case DialectKind::kMysql: return "mysql";
    case DialectKind::kOther: break;
  }
  return "other";
}

}  // namespace sqlguard::detail
