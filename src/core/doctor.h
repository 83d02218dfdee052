// Internal: the framework behind check_environment() (sqlguard/doctor.h).
// core/doctor.cpp runs the checks every dialect shares (connect, database
// clock, sqlguard's tables and migration level), then the dialect's own
// checks: src/dialect/<name>/doctor.cpp, reached through the `doctor` member
// of its registry entry. A dialect adds a check by appending one
// `ctx.check("id", [&] { ... })` to its doctor function; every statement a
// check sends is a catalog entry (sql/<name>/doctor.sql).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sqlguard/doctor.h"
#include "sqlguard/errors.h"

namespace sqlguard::detail {

// The clock check's verdict for a database clock `skew_ms` ahead of this
// host's (negative: behind), measured over a round trip of `rtt_ms`: the part
// of the skew the round trip cannot explain decides. Beyond kClockSkewWarnMs
// one of the two clocks is not synchronized; beyond kClockSkewFailMs it will
// be stepped or slewed by more than the smallest default safety margin
// (ttl/10 of a 10 s lease), which is what a step may take from what still
// runs on the database clock (TakeOver::kDatabaseClock, minimum holds,
// semaphore and read-write holdings, retention).
inline constexpr std::int64_t kClockSkewWarnMs = 100;
inline constexpr std::int64_t kClockSkewFailMs = 1000;
CheckStatus clock_skew_status(std::int64_t skew_ms, std::int64_t rtt_ms);

class DoctorContext {
 public:
  DoctorContext(Connection& conn, std::string uri, bool named_statements)
      : conn(conn), uri(std::move(uri)), named_statements(named_statements) {}

  Connection& conn;
  // As given to check_environment() (may be empty). Never print it: use
  // conn.description() (masked).
  const std::string uri;
  // A client opening `uri` as the user does would use named server-side
  // prepared statements (its statement cache is not 0).
  const bool named_statements;
  std::vector<CheckResult> results;

  void ok(std::string check, std::string detail) { add(std::move(check), CheckStatus::kOk, std::move(detail)); }
  void warn(std::string check, std::string detail) { add(std::move(check), CheckStatus::kWarn, std::move(detail)); }
  void fail(std::string check, std::string detail) { add(std::move(check), CheckStatus::kFail, std::move(detail)); }
  void add(std::string check, CheckStatus status, std::string detail) {
    results.push_back({std::move(check), status, std::move(detail)});
  }

  // Runs one check; a sqlguard::Error it throws becomes a `fail` result of
  // `check` (the connection is reconnected for the next check if it broke).
  template <typename F>
  void check(const char* check_id, F&& f) {
    try {
      f();
    } catch (const Error& e) {
      fail(check_id, "could not check: " + e.message());
      recover();
    }
  }

  // The rows of the dialect's doctor_settings entry as name -> value (read
  // once per run, on first use).
  const std::map<std::string, std::string>& settings();
  // settings() value, or `fallback` when the server did not report it.
  std::string setting(const std::string& name, const std::string& fallback = {});

 private:
  void recover() noexcept;
  bool have_settings_ = false;
  std::map<std::string, std::string> settings_;
};

// A dialect's own checks (DialectEntry::doctor).
using DoctorChecks = void (*)(DoctorContext&);

// The `engine` check of a server dialect (its doctor_engine statement): fails
// naming a distributed SQL engine that speaks the dialect's protocol but
// breaks sqlguard's guarantees (core/engines.h), ok otherwise. Run it first.
void engine_check(DoctorContext& ctx);

// "12 ms", "1.5 s", "0 (off)": a millisecond setting for a detail line.
std::string doctor_ms(const std::string& ms_text);

}  // namespace sqlguard::detail
