#include "common.h"

#include <cstdio>
#include <ctime>
#include <iostream>
#include <random>

#include "sqlguard/validate.h"

namespace sqlguard::cli {

Global& global() {
  static Global g;
  return g;
}

int& exit_code() {
  static int code = kExitOk;
  return code;
}

std::chrono::milliseconds duration_flag(const std::string& flag, const std::string& text) {
  try {
    return parse_duration(text);
  } catch (const Error& e) {
    throw e.with_context(flag);
  }
}

std::chrono::milliseconds bounded_duration_flag(const std::string& flag, const std::string& text,
                                                std::chrono::milliseconds min, std::chrono::milliseconds max) {
  std::chrono::milliseconds d;
  try {
    d = parse_duration(text);
  } catch (const Error& e) {
    throw CLI::ValidationError(flag, e.message());
  }
  if (d < min || d > max)
    throw CLI::ValidationError(flag, "is " + text + "; it must be between " + format_duration(min) + " and " +
                                         format_duration(max));
  return d;
}

ConnectOptions connect_options(ConnectOptions o) {
  o.connect_timeout = duration_flag("--connect-timeout", global().connect_timeout);
  return o;
}

std::unique_ptr<Connection> open_db(ConnectOptions o) { return make_connection(global().db, connect_options(o)); }

std::string random_hex(std::size_t digits) {
  static const char* hex = "0123456789abcdef";
  std::random_device rd;
  std::string out;
  while (out.size() < digits) {
    auto r = static_cast<std::uint32_t>(rd());
    for (int i = 0; i < 8 && out.size() < digits; ++i, r >>= 4) out += hex[r & 15];
  }
  return out;
}

void print_json(const nlohmann::json& j) {
  std::cout << j.dump() << std::endl;
}

std::string iso8601(std::int64_t epoch_ms) {
  std::time_t secs = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(epoch_ms % 1000));
  return buf;
}

}  // namespace sqlguard::cli
