#include <charconv>

#include "sqlguard/connection.h"

namespace sqlguard {

std::int64_t Value::as_int() const {
  if (auto* i = std::get_if<std::int64_t>(&v_)) return *i;
  if (auto* d = std::get_if<double>(&v_)) {
    // Out of range (or NaN) would be undefined behaviour: a REAL where an
    // integer belongs is refused, never wrapped.
    if (!(*d >= -9223372036854775808.0 && *d < 9223372036854775808.0))
      throw Error(ErrorCode::kInternal, "value " + std::to_string(*d) + " is outside the 64-bit integer range");
    return static_cast<std::int64_t>(*d);
  }
  const std::string* s = std::get_if<std::string>(&v_);
  if (!s) {
    if (auto* b = std::get_if<Blob>(&v_)) s = &b->bytes;
  }
  if (s) {
    std::int64_t out = 0;
    auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), out);
    if (ec == std::errc() && p == s->data() + s->size()) return out;
    // Decimal text such as "1700000000123.000" (MySQL DECIMAL results).
    auto dot = s->find('.');
    if (dot != std::string::npos) {
      auto [p2, ec2] = std::from_chars(s->data(), s->data() + dot, out);
      if (ec2 == std::errc() && p2 == s->data() + dot) return out;
    }
    throw Error(ErrorCode::kInternal, "value '" + s->substr(0, 40) + "' is not an integer");
  }
  throw Error(ErrorCode::kInternal, "NULL where an integer was expected");
}

double Value::as_double() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* i = std::get_if<std::int64_t>(&v_)) return static_cast<double>(*i);
  if (auto* s = std::get_if<std::string>(&v_)) {
    try {
      return std::stod(*s);
    } catch (const std::exception&) {
    }
    throw Error(ErrorCode::kInternal, "value '" + s->substr(0, 40) + "' is not a number");
  }
  throw Error(ErrorCode::kInternal, "NULL where a number was expected");
}

std::string Value::as_string() const {
  if (auto* s = std::get_if<std::string>(&v_)) return *s;
  if (auto* b = std::get_if<Blob>(&v_)) return b->bytes;
  if (auto* i = std::get_if<std::int64_t>(&v_)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v_)) return std::to_string(*d);
  throw Error(ErrorCode::kInternal, "NULL where text was expected");
}

std::optional<std::int64_t> Value::as_opt_int() const {
  if (is_null()) return std::nullopt;
  return as_int();
}

std::optional<std::string> Value::as_opt_string() const {
  if (is_null()) return std::nullopt;
  return as_string();
}

}  // namespace sqlguard
