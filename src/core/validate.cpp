#include "sqlguard/validate.h"

#include <charconv>
#include <limits>

#include "sqlguard/errors.h"

namespace sqlguard {

namespace {
[[noreturn]] void invalid(std::string msg) { throw Error(ErrorCode::kInvalidArgument, std::move(msg)); }

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

bool simple_ident(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}
}  // namespace

void validate_identifier(std::string_view ident, std::string_view what) {
  auto dot = ident.find('.');
  bool ok = dot == std::string_view::npos
                ? simple_ident(ident)
                : simple_ident(ident.substr(0, dot)) && simple_ident(ident.substr(dot + 1));
  if (!ok)
    invalid(std::string(what) + " '" + printable(ident) +
            "' is not a valid SQL identifier: use [A-Za-z_][A-Za-z0-9_]*, at most 63 characters, "
            "optionally schema-qualified");
}

void validate_name(std::string_view name, std::string_view what, std::size_t max_bytes) {
  if (name.empty()) invalid(std::string(what) + " must not be empty");
  if (name.size() > max_bytes)
    invalid(std::string(what) + " is " + std::to_string(name.size()) + " bytes; the limit is " +
            std::to_string(max_bytes) + " (names are never truncated)");
  if (name.find('\0') != std::string_view::npos)
    invalid(std::string(what) + " '" + printable(name) + "' contains a NUL byte");
  if (!valid_utf8(name)) invalid(std::string(what) + " '" + printable(name) + "' is not valid UTF-8");
}

std::chrono::milliseconds parse_duration(std::string_view text) {
  std::string_view t = text;
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  if (t.empty()) invalid("duration must not be empty (examples: 500ms, 30s, 5m)");
  if (t.front() == '-') invalid("duration '" + printable(text) + "' must not be negative");
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec == std::errc::result_out_of_range) invalid("duration '" + printable(text) + "' is too large");
  if (ec != std::errc() || p == t.data())
    invalid("duration '" + printable(text) + "' must start with a whole number (examples: 500ms, 30s, 5m)");
  std::string_view unit(p, static_cast<std::size_t>(t.data() + t.size() - p));
  std::int64_t mult = 0;
  if (unit.empty() || unit == "s") mult = 1000;
  else if (unit == "ms") mult = 1;
  else if (unit == "m" || unit == "min") mult = 60'000;
  else if (unit == "h") mult = 3'600'000;
  else if (unit == "d") mult = 86'400'000;
  else invalid("duration '" + printable(text) + "' has unknown unit '" + printable(unit) + "' (use ms, s, m, h or d)");
  if (n > std::numeric_limits<std::int64_t>::max() / mult)
    invalid("duration '" + printable(text) + "' is too large");
  return std::chrono::milliseconds(n * mult);
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

void check_duration(std::chrono::milliseconds d, std::string_view what, std::chrono::milliseconds min,
                    std::chrono::milliseconds max) {
  if (d < min || d > max)
    invalid(std::string(what) + " is " + format_duration(d) + "; it must be between " + format_duration(min) +
            " and " + format_duration(max));
}

}  // namespace sqlguard
