#include "sqlguard/connection.h"

#include <algorithm>

#include <atomic>
#include <mutex>

#include "core/catalog.h"
#include "core/text.h"
#include "dialect/dialect.h"
#include "dialect/registry.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {
std::mutex g_observer_mu;
std::shared_ptr<const StatementObserver> g_observer;  // guarded by g_observer_mu
std::atomic<bool> g_has_observer{false};
}  // namespace

std::string_view to_string(DialectKind kind) noexcept { return detail::dialect_kind_name(kind); }

std::string_view Connection::dialect_name() const noexcept { return dialect().name(); }
DialectKind Connection::kind() const noexcept { return detail::dialect_kind_of(dialect().name()); }

void set_global_statement_observer(StatementObserver observer) {
  std::lock_guard<std::mutex> lk(g_observer_mu);
  g_observer = observer ? std::make_shared<const StatementObserver>(std::move(observer)) : nullptr;
  g_has_observer = g_observer != nullptr;
}

Connection::~Connection() = default;

void Connection::notify(StatementKind kind, std::string_view sql, std::string_view catalog_name) {
  StatementEvent ev{dialect().name(), kind, sql, catalog_name};
  if (observer_) observer_(ev);
  if (g_has_observer.load(std::memory_order_relaxed)) {
    std::shared_ptr<const StatementObserver> global;
    {
      std::lock_guard<std::mutex> lk(g_observer_mu);
      global = g_observer;
    }
    if (global) (*global)(ev);
  }
}

Result Connection::execute(std::string_view sql, const Params& params) {
  detail::check_text_params(params, "Connection::execute()");
  if (observer_ || g_has_observer.load(std::memory_order_relaxed)) notify(StatementKind::kStatement, sql, {});
  return do_execute(sql, params, true);
}

Result Connection::execute_once(std::string_view sql, const Params& params) {
  detail::check_text_params(params, "Connection::execute_once()");
  if (observer_ || g_has_observer.load(std::memory_order_relaxed)) notify(StatementKind::kStatement, sql, {});
  return do_execute(sql, params, false);
}

// The catalog runner (core/catalog.cpp) has already checked the values.
Result Connection::execute_named(std::string_view name, std::string_view sql, const Params& params) {
  if (observer_ || g_has_observer.load(std::memory_order_relaxed)) notify(StatementKind::kStatement, sql, name);
  return do_execute(sql, params, true);
}

void Connection::begin(Isolation isolation) {
  if (observer_ || g_has_observer.load(std::memory_order_relaxed)) notify(StatementKind::kBegin, {}, {});
  do_begin(isolation);
}

void Connection::commit() {
  if (observer_ || g_has_observer.load(std::memory_order_relaxed)) notify(StatementKind::kCommit, {}, {});
  do_commit();
}

void Connection::rollback() {
  if (in_transaction() && (observer_ || g_has_observer.load(std::memory_order_relaxed)))
    notify(StatementKind::kRollback, {}, {});
  do_rollback();
}

std::int64_t Connection::db_now_ms() {
  static constexpr auto kNow = detail::column(detail::Sql::db_now, "db_now_ms");
  return detail::cell(detail::run(*this, detail::Sql::db_now).rows.at(0), kNow).as_int();
}

bool Connection::wait_for_notify(const std::string&, std::chrono::milliseconds) {
  dialect().not_supported("LISTEN/NOTIFY");
}

std::vector<std::string> Connection::wait_for_notify_payloads(const std::string& channel,
                                                              std::chrono::milliseconds timeout) {
  if (wait_for_notify(channel, timeout)) return {std::string()};
  return {};
}

void Connection::unlisten(const std::string&) {}
void Connection::interrupt_wait() noexcept {}

std::vector<std::string> Connection::wait_for_any_notify(const std::vector<std::string>& channels,
                                                         std::chrono::milliseconds timeout) {
  std::vector<std::string> fired;
  for (const auto& ch : channels)
    if (wait_for_notify(ch, std::chrono::milliseconds(0))) fired.push_back(ch);
  if (fired.empty() && !channels.empty() && timeout.count() > 0 && wait_for_notify(channels.front(), timeout))
    fired.push_back(channels.front());
  return fired;
}

std::vector<Connection::Wakeup> Connection::wait_for_any_wakeup(const std::vector<std::string>& channels,
                                                                std::chrono::milliseconds timeout) {
  std::vector<Wakeup> out;
  for (auto& ch : wait_for_any_notify(channels, timeout)) out.push_back(Wakeup{std::move(ch), {std::string()}});
  return out;
}

std::string Dialect::quote(std::string_view validated) const {
  std::string out;
  out.reserve(validated.size() + 4);
  out += quote_;
  for (char c : validated) {
    if (c == '.') {
      out += quote_;
      out += '.';
      out += quote_;
    } else {
      out += c;
    }
  }
  out += quote_;
  return out;
}

const detail::Catalog& Dialect::catalog() const {
  std::call_once(catalog_once_, [this] { catalog_ = &detail::Catalog::of(catalog_name_); });
  return *catalog_;
}

bool Dialect::same_identifier(std::string_view a, std::string_view b) const {
  if (a.size() != b.size()) return false;
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

void Dialect::not_supported(std::string_view feature) const {
  throw Error(ErrorCode::kNotSupported,
              std::string(feature) + " is not supported on " + std::string(name()) +
                  " (see the support matrix, docs/support-matrix.md)",
              std::string(name()));
}

std::unique_ptr<Connection> make_connection(std::string_view uri, const ConnectOptions& options) {
  check_duration(options.connect_timeout, "connect_timeout", std::chrono::milliseconds(1),
                 std::chrono::hours(1));
  check_duration(options.busy_timeout, "busy_timeout", std::chrono::milliseconds(0), std::chrono::hours(1));
  if (options.io_timeout)
    check_duration(*options.io_timeout, "io_timeout", std::chrono::milliseconds(1), std::chrono::hours(24));
  if (options.statement_cache_size > 10000)
    throw Error(ErrorCode::kInvalidArgument, "statement_cache_size is " + std::to_string(options.statement_cache_size) +
                                                 "; it must be between 0 and 10000");
  auto colon = uri.find(':');
  std::string scheme(uri.substr(0, colon == std::string_view::npos ? 0 : colon));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto* d = detail::find_dialect_by_scheme(scheme);
  if (!d) {
    // Text that is not one of our URIs is never echoed: it may be a
    // password passed in the wrong place. A scheme is named only when it
    // clearly is one (followed by "//", or no '@' anywhere).
    std::string known, examples;
    for (const auto* e : detail::registered_dialects()) {
      known += (known.empty() ? "" : ", ") + std::string(e->name);
      examples += (examples.empty() ? "" : ", ") + std::string(e->uri_example);
    }
    bool token = !scheme.empty() && scheme.size() <= 32 && std::isalpha(static_cast<unsigned char>(scheme[0])) &&
                 std::all_of(scheme.begin(), scheme.end(), [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '-' || c == '.'; });
    bool clearly_scheme = token && (uri.substr(colon, 3) == "://" || uri.find('@') == std::string_view::npos);
    std::string what = clearly_scheme ? "unknown URI scheme '" + scheme + "'" : "a database URI needs a scheme";
    throw Error(ErrorCode::kInvalidArgument,
                what + " (got " + std::to_string(uri.size()) +
                    " bytes): use " + examples + " (server URIs take user:password@ before the host; dialects: " +
                    known + ")");
  }
  if (!d->available) {
    d->open(uri, options);  // missing.cpp: throws not_supported naming the build option
    throw Error(ErrorCode::kNotSupported,
                std::string(d->name) + " support was not compiled into this build of sqlguard "
                "(its driver package was not found at configure time)", std::string(d->name));
  }
  return d->open(uri, options);
}

bool dialect_available(DialectKind kind) noexcept { return dialect_available(to_string(kind)); }

bool dialect_available(std::string_view dialect_name) noexcept {
  const auto* d = detail::find_dialect_by_name(dialect_name);
  return d && d->available;
}

void require_no_transaction(const Connection& conn, std::string_view what, std::string_view why) {
  if (!conn.in_transaction()) return;
  std::string msg = std::string(what) + " must not run inside a transaction: the connection is already in a transaction";
  if (!why.empty()) msg += " (" + std::string(why) + ")";
  throw Error(ErrorCode::kInvalidArgument, msg, std::string(conn.dialect().name()));
}

Transaction::Transaction(Connection& conn, Isolation isolation) : conn_(conn) { conn_.begin(isolation); }

Transaction::~Transaction() {
  if (!active_) return;
  try {
    conn_.rollback();
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, std::string("rollback in ~Transaction failed: ") + e.what());
  }
}

void Transaction::commit() {
  if (!active_) throw Error(ErrorCode::kInvalidArgument, "commit() on a transaction that is no longer active");
  active_ = false;  // whatever happens, this object no longer owns the transaction
  conn_.commit();
}

void Transaction::rollback() {
  if (!active_) return;
  active_ = false;
  conn_.rollback();
}

}  // namespace sqlguard
