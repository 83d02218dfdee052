#include "text.h"

#include "sqlguard/validate.h"

#include <algorithm>
#include <cstdio>

namespace sqlguard::cli {
namespace {

// One character decoded at `s[i]`: its code point and length, or why the
// byte there does not start a well-formed character (then len == 1).
struct Decoded {
  char32_t cp = 0;
  std::size_t len = 1;
  const char* problem = nullptr;
};

Decoded decode(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return {c, 1, nullptr};
  // Lead byte: sequence length, payload bits, smallest code point of that length.
  struct Lead {
    unsigned char mask, value, payload;
    std::size_t len;
    char32_t min;
  };
  static constexpr Lead kLeads[] = {{0xE0, 0xC0, 0x1F, 2, 0x80}, {0xF0, 0xE0, 0x0F, 3, 0x800},
                                    {0xF8, 0xF0, 0x07, 4, 0x10000}};
  const Lead* lead = nullptr;
  for (const auto& l : kLeads)
    if ((c & l.mask) == l.value) lead = &l;
  if (!lead) return {0, 1, "a byte that cannot start a character"};
  const std::size_t n = lead->len;
  const char32_t min = lead->min;
  char32_t cp = c & lead->payload;
  if (i + n > s.size()) return {0, 1, "a truncated character"};
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {0, 1, "a truncated character"};
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min) return {0, 1, "an overlong form"};
  if (cp >= 0xD800 && cp <= 0xDFFF) return {0, 1, "a UTF-16 surrogate"};
  if (cp > 0x10FFFF) return {0, 1, "a code point above U+10FFFF"};
  return {cp, n, nullptr};
}

std::string hex_escape(const char* format, unsigned value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace

std::optional<std::string> utf8_problem(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    auto d = decode(s, i);
    if (d.problem)
      return std::string("is not valid UTF-8: ") + d.problem + " at byte " + std::to_string(i) +
             hex_escape(" (0x%02x)", static_cast<unsigned char>(s[i]));
    i += d.len;
  }
  return std::nullopt;
}

std::string terminal_safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto d = decode(s, i);
    if (d.problem) out += hex_escape("\\x%02x", static_cast<unsigned char>(s[i]));
    else if (d.cp == '\n') out += "\\n";
    else if (d.cp == '\r') out += "\\r";
    else if (d.cp == '\t') out += "\\t";
    else if (d.cp < 0x20 || d.cp == 0x7F) out += hex_escape("\\x%02x", static_cast<unsigned>(d.cp));
    else if (is_unsafe_to_show(d.cp)) out += hex_escape("\\u%04x", static_cast<unsigned>(d.cp));
    else out.append(s.substr(i, d.len));
    i += d.len;
  }
  return out;
}

std::string remaining_text(std::int64_t ms) {
  char buf[32];
  if (ms < 1000) return std::to_string(std::max<std::int64_t>(ms, 0)) + "ms";
  if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms / 100) / 10.0);  // 51380 -> 51.3s: never more than is left
    return buf;
  }
  const std::int64_t s = ms / 1000;
  if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else if (s < 86'400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
  else std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86'400), static_cast<long long>(s / 3600 % 24));
  return buf;
}

}  // namespace sqlguard::cli
