// Internal: the hint a dialect adds to a missing table or column error.
#pragma once

#include <string>
#include <string_view>

namespace sqlguard::detail {

// `msg` with " (run `sqlguard migrate` first?)" when the missing object is
// sqlguard's: the message names one of its tables, or the statement that
// failed is one of sqlguard's own (they touch only sqlguard_ tables). An
// application's missing table is not migrate's business: no hint.
inline std::string with_migrate_hint(std::string msg, std::string_view statement) {
  if (msg.find("sqlguard_") != std::string::npos || statement.find("sqlguard_") != std::string_view::npos)
    msg += " (run `sqlguard migrate` first?)";
  return msg;
}

}  // namespace sqlguard::detail
