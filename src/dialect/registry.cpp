#include "dialect/registry.h"

namespace sqlguard::detail {

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

const DialectEntry& find_dialect(DialectKind kind) {
  for (const auto* d : registered_dialects())
    if (d->kind == kind) return *d;
  throw Error(ErrorCode::kInternal, "dialect kind " + std::to_string(static_cast<int>(kind)) + " is not registered");
}

}  // namespace sqlguard::detail
