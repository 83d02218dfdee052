// Internal: the text rule's building blocks (validate.cpp), shared by the
// public validators, the statement runners and the error/log sanitizer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard::detail {

// The first byte where `text` stops being well-formed UTF-8, and why
// ("overlong encoding", "UTF-16 surrogate", "code point above U+10FFFF",
// "unexpected continuation byte", "truncated sequence", "invalid byte").
struct Utf8Problem {
  std::size_t offset = 0;
  std::string_view why;
};
std::optional<Utf8Problem> find_invalid_utf8(std::string_view text) noexcept;

// printable() that leaves backslashes alone: every Error message and log
// line goes through it (errors.cpp), so what() is always one line of valid
// UTF-8 without control characters, whatever a value or a driver put there.
std::string one_line(std::string_view text);

// The text rule (validate_text) over every text value bound to a statement:
// the ONE check between user values and a driver, run by Connection::execute()
// and by the catalog runner (core/catalog.cpp). `names[i]`, when given and
// long enough, names params[i] in the error; otherwise "parameter i+1".
void check_text_params(const Params& params, std::string_view statement, const std::vector<std::string>* names = nullptr);

}  // namespace sqlguard::detail
