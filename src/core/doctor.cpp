// check_environment(): the checks every dialect shares, then the dialect's
// own (src/dialect/<name>/doctor.cpp via its registry entry). Read-only: the
// doctor never changes the server or the database file.
#include "core/doctor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/catalog.h"
#include "core/engines.h"
#include "core/uri.h"
#include "dialect/dialect.h"
#include "dialect/registry.h"
#include "sqlguard/migrate.h"

namespace sqlguard {

std::string_view to_string(CheckStatus status) noexcept {
  switch (status) {
    case CheckStatus::kOk: return "ok";
    case CheckStatus::kWarn: return "warn";
    case CheckStatus::kFail: return "fail";
  }
  return "fail";
}

namespace detail {

const std::map<std::string, std::string>& DoctorContext::settings() {
  if (!have_settings_) {
    static constexpr Column kName = column(Sql::doctor_settings, "name");
    static constexpr Column kValue = column(Sql::doctor_settings, "value");
    for (const auto& row : run(conn, Sql::doctor_settings).rows)
      settings_[cell(row, kName).as_string()] = cell(row, kValue).is_null() ? std::string() : cell(row, kValue).as_string();
    have_settings_ = true;
  }
  return settings_;
}

std::string DoctorContext::setting(const std::string& name, const std::string& fallback) {
  const auto& s = settings();
  auto it = s.find(name);
  return it == s.end() ? fallback : it->second;
}

void DoctorContext::recover() noexcept {
  try {
    if (conn.in_transaction()) conn.rollback();
  } catch (const Error&) {
    // the session is gone; reconnect below
  }
  try {
    conn.reconnect();
  } catch (const Error& e) {
    log(LogLevel::kDebug, "doctor: reconnect after a failed check failed: " + e.message());
  }
}

std::string doctor_ms(const std::string& ms_text) {
  char* end = nullptr;
  long long ms = std::strtoll(ms_text.c_str(), &end, 10);
  if (ms_text.empty() || (end && *end)) return ms_text;
  if (ms == 0) return "0 (off)";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

void engine_check(DoctorContext& ctx) {
  ctx.check("engine", [&] {
    static constexpr Column kVersion = column(Sql::doctor_engine, "version");
    static constexpr Column kDetail = column(Sql::doctor_engine, "detail");
    const Row row = run(ctx.conn, Sql::doctor_engine).rows.at(0);
    const std::string version = cell(row, kVersion).as_string();
    const std::string detail = cell(row, kDetail).is_null() ? std::string() : cell(row, kDetail).as_string();
    const std::string dialect(ctx.conn.dialect().name());
    if (auto found = detect_distributed_engine(dialect, version + " " + detail)) {
      ctx.fail("engine", found->engine + " (" + found->version + ") speaks the " + dialect +
                             " protocol but breaks sqlguard's guarantees: " + found->reasons +
                             " sqlguard does not support it; see docs/distributed-sql.md");
      return;
    }
    ctx.ok("engine", version + " (not a distributed SQL engine sqlguard knows to break its guarantees)");
  });
}

CheckStatus clock_skew_status(std::int64_t skew_ms, std::int64_t rtt_ms) {
  const std::int64_t unexplained = std::max<std::int64_t>(0, std::llabs(skew_ms) - std::max<std::int64_t>(rtt_ms, 0) / 2);
  if (unexplained > kClockSkewFailMs) return CheckStatus::kFail;
  if (unexplained > kClockSkewWarnMs) return CheckStatus::kWarn;
  return CheckStatus::kOk;
}

namespace {

std::string signed_ms(std::int64_t ms) { return (ms >= 0 ? "+" : "") + std::to_string(ms) + " ms"; }

void common_checks(DoctorContext& ctx) {
  Connection& c = ctx.conn;
  ctx.check("clock", [&] {
    const auto before = std::chrono::system_clock::now();
    const std::int64_t db = c.db_now_ms();
    const auto after = std::chrono::system_clock::now();
    const auto mid = std::chrono::duration_cast<std::chrono::milliseconds>((before + (after - before) / 2).time_since_epoch());
    const std::int64_t rtt = std::chrono::duration_cast<std::chrono::milliseconds>(after - before).count();
    const std::int64_t skew = db - mid.count();
    const std::string text =
        "database clock - this host's clock = " + signed_ms(skew) + " (round trip " + std::to_string(rtt) +
        " ms). Which clock decides what: who may take over an unreleased lease, semaphore or read-write holding "
        "or fair-queue place, the taker's monotonic clock (take-over rule `watched`, the default; `database-clock` "
        "only where LeaseOptions::take_over asks for it); whether a holder still trusts its lease or holding, the "
        "holder's monotonic clock; the time left that `lock list` and a refused `run` show, minimum holds and dedup "
        "retention, the database clock";
    switch (clock_skew_status(skew, rtt)) {
      case CheckStatus::kOk: ctx.ok("clock", text); break;
      case CheckStatus::kWarn:
        ctx.warn("clock", text + ". Over " + std::to_string(kClockSkewWarnMs) +
                              " ms apart: one of the two clocks is not synchronized (check NTP on both)");
        break;
      case CheckStatus::kFail:
        ctx.fail("clock", text + ". Over " + std::to_string(kClockSkewFailMs) +
                              " ms apart: one of the two clocks will be stepped or slewed by more than the smallest "
                              "default safety margin (ttl/10 of a 10 s lease); synchronize both with NTP");
        break;
    }
  });
  ctx.check("migrations", [&] {
    auto states = migration_status(c);
    int applied = 0, known = 0, unknown = 0, level = 0;
    std::string mismatch;
    for (const auto& s : states) {
      if (s.checksum.empty()) ++unknown;  // applied by a newer sqlguard
      else ++known;
      if (s.applied && !s.checksum.empty()) ++applied;
      if (s.applied) level = std::max(level, s.version);
      if (s.checksum_mismatch) mismatch += (mismatch.empty() ? "" : ", ") + std::to_string(s.version);
    }
    std::string counts = std::to_string(applied) + "/" + std::to_string(known) + " migrations applied (level " +
                         std::to_string(level) + ")";
    if (!mismatch.empty())
      ctx.fail("migrations", counts + "; checksum mismatch on migration " + mismatch +
                                 ": the applied schema is not the one this build expects");
    else if (applied == 0)
      ctx.warn("migrations", "the sqlguard tables are missing: run `sqlguard migrate`");
    else if (applied < known)
      ctx.warn("migrations", counts + ": run `sqlguard migrate`");
    else if (unknown > 0)
      ctx.warn("migrations", counts + ", plus " + std::to_string(unknown) +
                                 " applied by a newer sqlguard this build does not know");
    else
      ctx.ok("migrations", counts);
  });
}

bool uri_uses_named_statements(const std::string& uri, const ConnectOptions& options) {
  if (options.statement_cache_size == 0) return false;
  try {
    ParsedUri u = parse_uri(uri);
    auto p = u.query.find("pooler");
    if (p != u.query.end() && p->second == "transaction") return false;
    auto s = u.query.find("statement_cache_size");
    if (s != u.query.end() && s->second == "0") return false;
  } catch (const Error&) {
    // not a server URI with a query (SQLite path): no prepared statements on a server
  }
  return true;
}

std::vector<CheckResult> run_checks(Connection& conn, const std::string& uri, bool named_statements) {
  DoctorContext ctx(conn, uri, named_statements);
  const DialectEntry* d = find_dialect_by_name(conn.dialect().name());
  if (d && d->doctor) d->doctor(ctx);
  common_checks(ctx);
  return std::move(ctx.results);
}

}  // namespace
}  // namespace detail

std::vector<CheckResult> check_environment(const std::string& uri, const ConnectOptions& options) {
  // The doctor's own statements are unnamed (cache 0), so that they work
  // behind a transaction pooler whatever the URI says; what the user's
  // client would do is judged from `uri` and `options`.
  ConnectOptions o = options;
  o.statement_cache_size = 0;
  o.refuse_undeclared_pooler = false;  // the pooler check reports it
  std::unique_ptr<Connection> conn;
  try {
    conn = make_connection(uri, o);
  } catch (const Error& e) {
    return {{"connect", CheckStatus::kFail, e.message()}};
  }
  std::vector<CheckResult> out{{"connect", CheckStatus::kOk,
                                std::string(conn->dialect().name()) + " at " + conn->description()}};
  auto rest = detail::run_checks(*conn, uri, detail::uri_uses_named_statements(uri, options));
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<CheckResult> check_environment(Connection& conn, const std::string& uri) {
  require_no_transaction(conn, "check_environment()");
  return detail::run_checks(conn, uri, conn.statement_cache_capacity() > 0);
}

}  // namespace sqlguard
