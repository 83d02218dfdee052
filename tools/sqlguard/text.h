// Text from the command line or the database, checked or made safe for the
// place it goes: a name the CLI passes on, a terminal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sqlguard::cli {

// Why `s` is not well-formed UTF-8 — a byte that cannot start a character,
// a truncated character, an overlong form, a UTF-16 surrogate or a code
// point above U+10FFFF — and at which byte; nullopt when it is well-formed.
std::optional<std::string> utf8_problem(std::string_view s);

// `s` for a terminal, on one line: control characters (C0, DEL, C1) become
// escapes (\n, \r, \t, \x1b, \u009b) and every byte that is not part of
// well-formed UTF-8 becomes \xNN, so no escape sequence and no line break
// of the input reaches the terminal. Printable UTF-8 is kept as it is, the
// backslash too: the function is idempotent, so a message that already
// quotes a value escaped (as the library's do) passes unchanged. Where the
// exact bytes matter, --json has them.
std::string terminal_safe(std::string_view s);

// A remaining time for people: "850ms", "51.4s", "12m05s", "3h12m", "2d03h"
// (`lock list`'s REMAINING, "held by X for another ..."). --json keeps
// remaining_ms.
std::string remaining_text(std::int64_t ms);

}  // namespace sqlguard::cli
