#include "sqlguard/validate.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <limits>

#include "core/text.h"
#include "sqlguard/errors.h"

namespace sqlguard {

// Characters that move the cursor, recolour the terminal, end a line for a
// reader, reorder what is shown, or show nothing at all (so that two names
// that differ only by them look the same).
bool is_unsafe_to_show(char32_t cp) noexcept {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202A && cp <= 0x202E) ||                  // bidi embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069) ||                  // bidi isolates
         (cp >= 0x200B && cp <= 0x200F) || cp == 0x061C ||  // zero-width space/joiners, LRM, RLM, ALM
         (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF ||  // word joiner, invisible operators, BOM
         cp == 0x00AD || cp == 0x180E || cp == 0x034F ||    // soft hyphen, Mongolian vowel separator, CGJ
         (cp >= 0xFFF9 && cp <= 0xFFFB);                    // interlinear annotation
}

namespace {
[[noreturn]] void invalid(std::string msg) { throw Error(ErrorCode::kInvalidArgument, std::move(msg)); }

bool simple_ident(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

// Length of the well-formed UTF-8 sequence at s[i] (Unicode table 3-7), or 0
// with `why` set.
std::size_t sequence_length(std::string_view s, std::size_t i, std::string_view* why) noexcept {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // below: overlong
    if (c == 0xED) hi = 0x9F;  // above: UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // below: overlong
    if (c == 0xF4) hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    *why = c < 0xC0 ? "unexpected continuation byte"
           : c < 0xC2 ? "overlong encoding"
           : c <= 0xF7 ? "code point above U+10FFFF"
                       : "invalid byte";
    return 0;
  }
  if (i + 1 >= s.size()) {
    *why = "truncated sequence";
    return 0;
  }
  const unsigned char c1 = b(i + 1);
  if (c1 < lo || c1 > hi) {
    if (c1 < 0x80 || c1 > 0xBF) *why = "truncated sequence";
    else if (c == 0xED) *why = "UTF-16 surrogate";
    else if (c == 0xF4) *why = "code point above U+10FFFF";
    else *why = "overlong encoding";
    return 0;
  }
  for (std::size_t k = 2; k < n; ++k) {
    if (i + k >= s.size() || (b(i + k) >> 6) != 2) {
      *why = "truncated sequence";
      return 0;
    }
  }
  return n;
}

// Code point of a well-formed sequence of length n at s[i].
char32_t decode(std::string_view s, std::size_t i, std::size_t n) noexcept {
  auto b = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
  switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}



std::string escape(std::string_view s, std::size_t max_bytes, bool escape_backslash) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(s.size(), max_bytes) + 8);
  std::size_t i = 0;
  while (i < s.size()) {
    if (i >= max_bytes) {
      out += "...";
      break;
    }
    std::string_view why;
    std::size_t n = sequence_length(s, i, &why);
    if (n == 0) {  // not UTF-8: show the byte
      unsigned char u = static_cast<unsigned char>(s[i]);
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
      ++i;
      continue;
    }
    char32_t cp = decode(s, i, n);
    if (cp == '\\' && escape_backslash) {
      out += "\\\\";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (is_unsafe_to_show(cp)) {
      if (cp < 0x80) {
        out += "\\x";
        out += hex[(cp >> 4) & 15];
        out += hex[cp & 15];
      } else {
        out += "\\u";
        for (int shift = 12; shift >= 0; shift -= 4) out += hex[(cp >> shift) & 15];
      }
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  return out;
}
}  // namespace

namespace detail {
std::optional<Utf8Problem> find_invalid_utf8(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    std::string_view why;
    std::size_t n = sequence_length(text, i, &why);
    if (n == 0) return Utf8Problem{i, why};
    i += n;
  }
  return std::nullopt;
}

std::string one_line(std::string_view text) { return escape(text, std::string_view::npos, false); }

void check_text_params(const Params& params, std::string_view statement, const std::vector<std::string>* names) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string* s = params[i].text_if();
    if (!s || (s->find('\0') == std::string::npos && !find_invalid_utf8(*s))) continue;
    std::string what = names && i < names->size() && !(*names)[i].empty() ? (*names)[i] : "parameter " + std::to_string(i + 1);
    what += " (of " + std::string(statement) + ")";
    validate_text(*s, what);
  }
}
}  // namespace detail

bool is_valid_utf8(std::string_view text) noexcept { return !detail::find_invalid_utf8(text); }

std::string printable(std::string_view text, std::size_t max_bytes) { return escape(text, max_bytes, true); }

void validate_text(std::string_view text, std::string_view what) {
  auto nul = text.find('\0');
  auto bad = detail::find_invalid_utf8(text);
  if (bad && (nul == std::string_view::npos || bad->offset < nul))
    invalid(std::string(what) + " is not valid UTF-8 at byte " + std::to_string(bad->offset) + " (" +
            std::string(bad->why) + "): '" + printable(text, 80) +
            "'; text must be UTF-8 on every dialect (send bytes as Value::blob)");
  if (nul != std::string_view::npos)
    invalid(std::string(what) + " contains a NUL byte at byte " + std::to_string(nul) + ": '" + printable(text, 80) +
            "'; PostgreSQL would cut the text there, so it is refused on every dialect (send bytes as Value::blob)");
}

void validate_identifier(std::string_view ident, std::string_view what) {
  auto dot = ident.find('.');
  bool ok = dot == std::string_view::npos
                ? simple_ident(ident)
                : simple_ident(ident.substr(0, dot)) && simple_ident(ident.substr(dot + 1));
  if (!ok)
    invalid(std::string(what) + " '" + printable(ident, 80) +
            "' is not a valid SQL identifier: use [A-Za-z_][A-Za-z0-9_]*, at most 63 characters, "
            "optionally schema-qualified");
}

void validate_name(std::string_view name, std::string_view what, std::size_t max_bytes) {
  if (name.empty()) invalid(std::string(what) + " must not be empty");
  if (name.size() > max_bytes)
    invalid(std::string(what) + " is " + std::to_string(name.size()) + " bytes; the limit is " +
            std::to_string(max_bytes) + " (names are never truncated)");
  validate_text(name, what);
}

std::chrono::milliseconds parse_duration(std::string_view text) {
  static constexpr const char* kForms = "use a number and a unit: ms, s, m, h or d, e.g. 500ms, 30s, 1.5s, 5m, 1h30m";
  std::string_view t = text;
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  const auto bad = [&](const std::string& why) {
    invalid("duration '" + printable(text, 80) + "' " + why + " (" + kForms + ")");
  };
  if (t.empty()) invalid(std::string("duration must not be empty (") + kForms + ")");
  if (t.front() == '-') bad("must not be negative");
  // One or more <number><unit> parts ("1h30m"); a number may have a decimal
  // fraction ("1.5s") as long as the total is a whole number of milliseconds.
  // Exact integer arithmetic: no floating point rounding.
  static constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t total = 0;
  while (!t.empty()) {
    std::size_t k = 0;
    std::int64_t whole = 0, frac = 0, scale = 1;  // value = whole + frac / scale
    bool digits = false;
    for (; k < t.size() && t[k] >= '0' && t[k] <= '9'; ++k, digits = true) {
      if (whole > (kMax - 9) / 10) bad("is too large");
      whole = whole * 10 + (t[k] - '0');
    }
    if (k < t.size() && t[k] == '.') {
      ++k;
      for (; k < t.size() && t[k] >= '0' && t[k] <= '9'; ++k, digits = true) {
        if (scale > kMax / 100) bad("has too many decimal places");
        frac = frac * 10 + (t[k] - '0');
        scale *= 10;
      }
    }
    if (!digits) bad(k == 0 && total == 0 ? "must start with a number" : "has a unit without a number");
    std::size_t u = k;
    while (u < t.size() && ((t[u] >= 'a' && t[u] <= 'z') || (t[u] >= 'A' && t[u] <= 'Z'))) ++u;
    std::string_view unit = t.substr(k, u - k);
    std::int64_t mult = 0;
    if (unit == "ms") mult = 1;
    else if (unit == "s") mult = 1000;
    else if (unit == "m" || unit == "min") mult = 60'000;
    else if (unit == "h") mult = 3'600'000;
    else if (unit == "d") mult = 86'400'000;
    else if (unit.empty())
      bad(u == t.size() && total == 0 && text.find_first_of("abcdefghijklmnopqrstuvwxyz") == std::string_view::npos
              ? "has no unit (a bare number is not taken as seconds)"
              : "has a number without a unit");
    else bad("has unknown unit '" + printable(unit, 80) + "'");
    if (whole > kMax / mult) bad("is too large");
    std::int64_t part = whole * mult;
    // frac / scale of the unit must be whole milliseconds.
    if (frac != 0) {
      if (frac > kMax / mult || (frac * mult) % scale != 0) bad("is not a whole number of milliseconds");
      part += frac * mult / scale;
    }
    if (part > kMax - total) bad("is too large");
    total += part;
    t.remove_prefix(u);
  }
  return std::chrono::milliseconds(total);
}

std::string format_db_time(std::int64_t epoch_ms) {
  // Floor division: a time before 1970 still prints its own millisecond.
  std::int64_t secs = epoch_ms / 1000, milli = epoch_ms % 1000;
  if (milli < 0) {
    milli += 1000;
    --secs;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(milli));
  return buf;
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms != 0 && ms % 86'400'000 == 0) return std::to_string(ms / 86'400'000) + "d";  // 7d, not 168h
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
