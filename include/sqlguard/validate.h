// sqlguard/validate.h — the one place user-supplied names and durations are
// checked. Invalid input is refused with Error(kInvalidArgument) and a
// message naming the offending value; nothing is ever truncated.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace sqlguard {

// SQL identifiers (user table/column names): [A-Za-z_][A-Za-z0-9_]*, at most
// 63 characters (PostgreSQL's limit, below MySQL's 64), optionally one
// "schema." prefix of the same form. `what` names the option in errors.
void validate_identifier(std::string_view ident, std::string_view what = "identifier");

// Lock names, idempotency keys, message ids, consumer names: 1..max_bytes
// bytes, no NUL and valid UTF-8. Oversize values are refused, never truncated.
inline constexpr std::size_t kMaxNameBytes = 255;
void validate_name(std::string_view name, std::string_view what = "name",
                   std::size_t max_bytes = kMaxNameBytes);

// Parses "500ms", "30s", "5m", "2h", "1d" (a plain number means seconds)
// into milliseconds. Refuses empty, negative, fractional-ms or unknown units.
std::chrono::milliseconds parse_duration(std::string_view text);

// Formats milliseconds back into the shortest exact form ("1500ms", "30s").
std::string format_duration(std::chrono::milliseconds d);

// Throws kInvalidArgument unless min <= d <= max (bounds inclusive).
void check_duration(std::chrono::milliseconds d, std::string_view what,
                    std::chrono::milliseconds min, std::chrono::milliseconds max);

}  // namespace sqlguard
