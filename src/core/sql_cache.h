// Internal: statement caches keyed by SQL text, looked up by string_view
// without building a std::string per call (C++20 heterogeneous lookup).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sqlguard::detail {

struct SqlHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <typename V>
using SqlCache = std::unordered_map<std::string, V, SqlHash, std::equal_to<>>;

}  // namespace sqlguard::detail
