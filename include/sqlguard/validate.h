// sqlguard/validate.h — the one place user-supplied text, names and durations
// are checked. Invalid input is refused with Error(kInvalidArgument) and a
// message naming the parameter; nothing is ever truncated or cut.
//
// The text rule (validate_text) is the same on every dialect: valid UTF-8 in
// the strict sense of Unicode (no overlong forms, no UTF-16 surrogates
// U+D800..U+DFFF, nothing above U+10FFFF) and no NUL byte (PostgreSQL cannot
// store one in text and libpq would cut the value there). It is enforced for
// EVERY text Value bound to a statement (Connection::execute() and sqlguard's
// own statements), so a key "alice\0x" can never reach the database as
// "alice". Bytes travel as Value::blob and are never checked.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstddef>
#include <string>
#include <string_view>

namespace sqlguard {

// SQL identifiers (user table/column names): [A-Za-z_][A-Za-z0-9_]*, at most
// 63 characters (PostgreSQL's limit, below MySQL's 64), optionally one
// "schema." prefix of the same form. `what` names the option in errors.
void validate_identifier(std::string_view ident, std::string_view what = "identifier");

// True if `text` is well-formed UTF-8 (Unicode table 3-7: no overlong forms,
// no surrogates, nothing above U+10FFFF). NUL bytes are valid UTF-8.
bool is_valid_utf8(std::string_view text) noexcept;

// The text rule: throws Error(kInvalidArgument) "<what> contains a NUL byte
// at byte N" / "<what> is not valid UTF-8 at byte N (<why>)" unless `text`
// is valid UTF-8 without NUL bytes. Any length, including empty, passes.
void validate_text(std::string_view text, std::string_view what);

// Lock names, owners, idempotency scopes and keys, message ids, consumer
// names: 1..max_bytes bytes and the text rule. Oversize values are refused,
// never truncated.
inline constexpr std::size_t kMaxNameBytes = 255;
void validate_name(std::string_view name, std::string_view what = "name",
                   std::size_t max_bytes = kMaxNameBytes);

// `text` made safe to show on a terminal or to put in JSON: the result is
// valid UTF-8 on one line. Control characters (C0, DEL, C1), line/paragraph
// separators and bidirectional overrides are escaped (\n, \t, \r, \x1b,
// \u0085, \u202e), bytes that are not UTF-8 become \xNN, and a backslash
// becomes \\ so every output maps back to exactly one input. Printable text
// (including non-ASCII letters) is unchanged. At most `max_bytes` of the
// input are shown, then "..." (never cutting a character). Used for names in
// error messages, and by `sqlguard lock list`.
std::string printable(std::string_view text, std::size_t max_bytes = std::string_view::npos);

// True for the code points printable() escapes besides \n \r \t: C0/C1
// controls and DEL, line/paragraph separators, bidirectional embeddings,
// overrides, isolates and marks, and characters that show nothing (zero-width
// space and joiners, word joiner, BOM, soft hyphen...), so that two names
// that differ only by them never look the same.
bool is_unsafe_to_show(char32_t cp) noexcept;

// Parses a duration into milliseconds: one or more <number><unit> parts,
// units ms, s, m (or min), h, d, a number optionally with a decimal fraction:
// "500ms", "30s", "1.5s", "5m", "1h30m", "1d12h". Refuses (kInvalidArgument,
// the message lists the accepted forms) empty text, a negative value, a bare
// number without a unit ("5": seconds or minutes? it is not guessed), an
// unknown unit, a total that is not whole milliseconds ("0.5ms") and one
// that overflows.
std::chrono::milliseconds parse_duration(std::string_view text);

// Formats milliseconds back into the shortest exact form ("1500ms", "30s").
std::string format_duration(std::chrono::milliseconds d);

// Formats a database time (ms since the Unix epoch, UTC) as ISO 8601 with
// milliseconds: "2026-12-06T13:41:31.250Z". What every time sqlguard reports
// (history, verify, the CLI's JSON) is written as.
std::string format_db_time(std::int64_t epoch_ms);

// Throws kInvalidArgument unless min <= d <= max (bounds inclusive).
void check_duration(std::chrono::milliseconds d, std::string_view what,
                    std::chrono::milliseconds min, std::chrono::milliseconds max);

}  // namespace sqlguard
