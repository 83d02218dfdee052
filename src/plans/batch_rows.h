// Internal: statements over a list of rows (the lock client's batched
// renewals and polls). Each row is one fragment of the statement's list;
// the list is padded up to a power of two with rows that match nothing, so a
// connection prepares at most 11 texts for every batch size instead of one
// per size (each would take a place in its statement cache).
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "sqlguard/lease_lock.h"

namespace sqlguard::detail {

// `n` rounded up to a power of two, at most kMaxRenewalBatch.
inline std::size_t padded_size(std::size_t n) {
  std::size_t size = 1;
  while (size < n) size *= 2;
  return std::min(size, kMaxRenewalBatch);
}

// Statement `id` with its list `list` made of `places` copies of `fragment`.
inline std::string render_rows(const Catalog& cat, Sql id, const char* list, Sql fragment, std::size_t places) {
  return cat.render(id, {{list, std::vector<std::string>(places, cat.render(fragment, {}))}});
}

// The rows' values in order (`fields(values, row)` appends one row's), then
// `pad` (one padding row's values) until there are `places` rows.
template <typename Rows, typename Fields>
Params padded_values(const Rows& rows, std::size_t places, const Params& pad, Fields&& fields) {
  Params values;
  values.reserve(places * pad.size());
  for (const auto& r : rows) fields(values, r);
  for (std::size_t i = std::size(rows); i < places; ++i) values.insert(values.end(), pad.begin(), pad.end());
  return values;
}

}  // namespace sqlguard::detail
