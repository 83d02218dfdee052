// Internal: PostgreSQL's numbered parameters. sqlguard writes `?`; libpq
// wants $1..$n. Quoted text is left alone.
#pragma once

#include <string>
#include <string_view>

namespace sqlguard::detail {

inline std::string number_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  int n = 0;
  char quote = 0;
  for (char c : sql) {
    if (quote) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace sqlguard::detail
