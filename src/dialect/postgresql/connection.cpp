// PostgreSQL dialect over libpqxx 6.4. Statements are prepared once per
// connection; values travel as text-format parameters (bytea as \x hex).
#include <pqxx/pqxx>

#include <cmath>
#include <map>
#include <unordered_map>

#include "core/uri.h"
#include "core/placeholders.h"
#include "core/sql_cache.h"
#include "dialect/dialect.h"
#include "core/catalog.h"
#include "dialect/postgresql/connection.h"
#include "dialect/postgresql/errors.h"
#include "sqlguard/postgres.h"

namespace sqlguard {
namespace {
struct PgParam {
  bool null = true;
  std::string text;
};
}  // namespace
}  // namespace sqlguard

namespace pqxx {
template <>
struct string_traits<sqlguard::PgParam> {
  static constexpr const char* name() noexcept { return "sqlguard::PgParam"; }
  static constexpr bool has_null() noexcept { return true; }
  static bool is_null(const sqlguard::PgParam& p) { return p.null; }
  static sqlguard::PgParam null() { return {}; }
  static void from_string(const char s[], sqlguard::PgParam& p) { p = {false, s}; }
  static std::string to_string(const sqlguard::PgParam& p) { return p.text; }
};
}  // namespace pqxx

namespace sqlguard {
namespace {

class PgDialect final : public Dialect {
 public:
  PgDialect() : Dialect(DialectKind::kPostgres, "postgresql", '"') {}
  // SET cannot take parameters; set_config(..., true) is SET LOCAL with a
  // bound value. 0 would mean "wait forever", so callers pass >= 1 ms.
  void set_local_lock_timeout(Connection& c, std::chrono::milliseconds t) const override {
    detail::run(c, detail::Sql::lock_timeout_local, {std::to_string(t.count()) + "ms"});
  }
};
const PgDialect kDialect;

using detail::number_placeholders;

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& c, const std::string& ch) : pqxx::notification_receiver(c, ch) {}
  void operator()(const std::string&, int) override { fired = true; }
  bool fired = false;
};

class PgConnection final : public Connection {
 public:
  PgConnection(std::string connstr, std::string password, std::string description)
      : connstr_(std::move(connstr)), password_(std::move(password)), description_(std::move(description)) {
    caps_.row_locks = caps_.nowait = caps_.skip_locked = caps_.shared_row_locks = true;
    caps_.listen_notify = caps_.wakeups = caps_.transactional_ddl = true;
    connect();
  }
  ~PgConnection() override {
    receivers_.clear();
    tx_.reset();
  }

  DialectKind kind() const noexcept override { return DialectKind::kPostgres; }
  const Capabilities& capabilities() const noexcept override { return caps_; }
  const Dialect& dialect() const noexcept override { return kDialect; }
  const std::string& description() const noexcept override { return description_; }

  Result do_execute(std::string_view sql, const Params& params) override {
    if (!tx_ && (!conn_ || !conn_->is_open())) reconnect();
    try {
      const std::string& name = prepared(sql);
      std::vector<PgParam> pp;
      pp.reserve(params.size());
      for (const auto& v : params) pp.push_back(to_param(v));
      pqxx::result r;
      if (tx_) {
        r = tx_->exec_prepared(name, pqxx::prepare::make_dynamic_params(pp));
      } else {
        pqxx::nontransaction nt(*conn_);
        r = nt.exec_prepared(name, pqxx::prepare::make_dynamic_params(pp));
      }
      return convert(r);
    } catch (...) {
      rethrow(sql, false);
    }
  }

  void execute_script(std::string_view sql) override {
    if (!tx_ && (!conn_ || !conn_->is_open())) reconnect();
    try {
      if (tx_) {
        tx_->exec(std::string(sql));
      } else {
        pqxx::nontransaction nt(*conn_);
        nt.exec(std::string(sql));
      }
    } catch (...) {
      rethrow(sql.substr(0, 200), false);
    }
  }

  void do_begin(Isolation iso) override {
    if (tx_) throw Error(ErrorCode::kInvalidArgument, "a transaction is already open on this connection", "postgresql");
    if (!conn_ || !conn_->is_open()) reconnect();
    try {
      switch (iso) {
        case Isolation::kDefault:
        case Isolation::kReadCommitted:
          tx_ = std::make_unique<pqxx::transaction<pqxx::read_committed>>(*conn_);
          break;
        case Isolation::kRepeatableRead:
          tx_ = std::make_unique<pqxx::transaction<pqxx::repeatable_read>>(*conn_);
          break;
        case Isolation::kSerializable:
          tx_ = std::make_unique<pqxx::transaction<pqxx::serializable>>(*conn_);
          break;
      }
    } catch (...) {
      tx_.reset();
      rethrow("BEGIN", false);
    }
  }
  void do_commit() override {
    if (!tx_) throw Error(ErrorCode::kInvalidArgument, "commit() without an open transaction", "postgresql");
    try {
      tx_->commit();
      tx_.reset();
    } catch (...) {
      tx_.reset();
      rethrow("COMMIT", true);
    }
  }
  void do_rollback() override {
    if (!tx_) return;
    auto tx = std::move(tx_);
    try {
      tx->abort();
    } catch (...) {
      rethrow("ROLLBACK", false);
    }
  }
  bool in_transaction() const noexcept override { return tx_ != nullptr; }

  void reconnect() override {
    tx_.reset();
    receivers_.clear();
    prepared_.clear();
    conn_.reset();
    connect();
  }
  std::int64_t session_id() override {
    if (!conn_ || !conn_->is_open()) reconnect();
    return conn_->backendpid();
  }

  pqxx::transaction_base* tx() noexcept { return tx_.get(); }
  pqxx::connection_base& conn() {
    if (!conn_ || !conn_->is_open()) reconnect();
    return *conn_;
  }

  void unlisten(const std::string& channel) override {
    if (tx_) return;  // pqxx issues UNLISTEN outside transactions only; it goes with the session
    try {
      receivers_.erase(channel);
    } catch (...) {
      rethrow("UNLISTEN", false);
    }
  }

  bool wait_for_notify(const std::string& channel, std::chrono::milliseconds timeout) override {
    if (tx_) throw Error(ErrorCode::kInvalidArgument, "wait_for_notify() inside a transaction", "postgresql");
    try {
      auto& c = conn();
      auto it = receivers_.find(channel);
      if (it == receivers_.end()) it = receivers_.emplace(channel, std::make_unique<Receiver>(c, channel)).first;
      Receiver& r = *it->second;
      c.get_notifs();
      if (!r.fired && timeout.count() > 0) {
        long us = static_cast<long>(timeout.count()) * 1000;
        c.await_notification(us / 1'000'000, us % 1'000'000);
      }
      bool fired = r.fired;
      r.fired = false;
      return fired;
    } catch (...) {
      rethrow("LISTEN", false);
    }
  }

 private:
  void connect() {
    try {
      conn_ = std::make_unique<pqxx::connection>(connstr_);
    } catch (const std::exception& e) {
      conn_.reset();
      std::string msg = detail::scrub(e.what(), password_);
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      for (auto& ch : msg)
        if (ch == '\n' || ch == '\t') ch = ' ';
      ErrorCode code = ErrorCode::kConnectionLost;
      if (msg.find("authentication failed") != std::string::npos || msg.find("no password supplied") != std::string::npos)
        code = ErrorCode::kUnauthenticated;
      else if (msg.find("does not exist") != std::string::npos)
        code = ErrorCode::kNotFound;
      else if (msg.find("invalid") != std::string::npos || msg.find("missing \"=\"") != std::string::npos ||
               msg.find("unexpected") != std::string::npos)
        code = ErrorCode::kInvalidArgument;
      throw Error(code, "cannot connect to " + description_ + ": " + msg, "postgresql");
    }
  }

  const std::string& prepared(std::string_view sql) {
    auto it = prepared_.find(sql);
    if (it != prepared_.end()) return it->second;
    std::string name = "sg" + std::to_string(++counter_);
    conn_->prepare(name, number_placeholders(sql));
    return prepared_.emplace(std::string(sql), std::move(name)).first->second;
  }

  static PgParam to_param(const Value& v) {
    if (v.is_null()) return {};
    if (v.is_blob()) {
      static const char* hex = "0123456789abcdef";
      std::string b = v.as_string();
      std::string out = "\\x";
      out.reserve(2 + b.size() * 2);
      for (unsigned char c : b) {
        out += hex[c >> 4];
        out += hex[c & 15];
      }
      return {false, std::move(out)};
    }
    if (v.is_double()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", v.as_double());
      return {false, buf};
    }
    return {false, v.as_string()};
  }

  static Result convert(const pqxx::result& r) {
    Result out;
    out.affected = static_cast<std::int64_t>(r.affected_rows());
    const auto ncol = r.columns();
    std::vector<pqxx::oid> types(ncol);
    for (pqxx::row::size_type c = 0; c < ncol; ++c) types[c] = r.column_type(c);
    out.rows.reserve(r.size());
    for (const auto& row : r) {
      sqlguard::Row o;
      o.cells.reserve(ncol);
      for (pqxx::row::size_type c = 0; c < ncol; ++c) {
        const auto& f = row[c];
        if (f.is_null()) {
          o.cells.emplace_back();
          continue;
        }
        switch (types[c]) {
          case 20: case 21: case 23: case 26:  // int8 int2 int4 oid
            o.cells.emplace_back(f.as<std::int64_t>());
            break;
          case 16:  // bool
            o.cells.emplace_back(static_cast<std::int64_t>(f.c_str()[0] == 't'));
            break;
          case 700: case 701:  // float4 float8
            o.cells.emplace_back(f.as<double>());
            break;
          case 17: {  // bytea
            pqxx::binarystring b(f);
            o.cells.push_back(Value::blob(b.str()));
            break;
          }
          default:
            o.cells.emplace_back(std::string(f.c_str(), f.size()));
        }
      }
      out.rows.push_back(std::move(o));
    }
    return out;
  }

  [[noreturn]] void rethrow(std::string_view sql, bool committing) {
    std::string stmt(sql);
    auto lost = [&](const std::string& msg) -> Error {
      tx_.reset();
      if (committing)
        return Error(ErrorCode::kCommitInDoubt,
                     "connection lost during COMMIT; the transaction may or may not have committed: " + msg,
                     "postgresql", "", stmt);
      return Error(ErrorCode::kConnectionLost, "connection lost: " + msg, "postgresql", "", stmt);
    };
    try {
      throw;
    } catch (const Error&) {
      throw;
    } catch (const pqxx::in_doubt_error& e) {
      throw Error(ErrorCode::kCommitInDoubt, clean(e.what()), "postgresql", "", stmt);
    } catch (const pqxx::statement_completion_unknown& e) {
      throw Error(ErrorCode::kCommitInDoubt, clean(e.what()), "postgresql", "40003", stmt);
    } catch (const pqxx::serialization_failure& e) {
      throw Error(ErrorCode::kConflict, clean(e.what()), "postgresql", "40001", stmt);
    } catch (const pqxx::deadlock_detected& e) {
      throw Error(ErrorCode::kConflict, clean(e.what()), "postgresql", "40P01", stmt);
    } catch (const pqxx::transaction_rollback& e) {
      throw Error(ErrorCode::kConflict, clean(e.what()), "postgresql", "40000", stmt);
    } catch (const pqxx::broken_connection& e) {
      throw lost(clean(e.what()));
    } catch (const pqxx::sql_error& e) {
      std::string state = e.sqlstate();
      ErrorCode code = pg::classify_state(state);
      if (code == ErrorCode::kConnectionLost) throw lost(clean(e.what()));
      std::string msg = clean(e.what());
      if (code == ErrorCode::kSchemaMismatch) msg += " (run `sqlguard migrate` first?)";
      throw Error(code, msg, "postgresql", state, stmt);
    } catch (const std::exception& e) {
      if (!conn_ || !conn_->is_open()) throw lost(clean(e.what()));
      throw Error(ErrorCode::kInternal, clean(e.what()), "postgresql", "", stmt);
    }
  }

  std::string clean(const char* what) const {
    std::string m = detail::scrub(what, password_);
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    auto nl = m.find('\n');
    if (nl != std::string::npos) m = m.substr(0, nl);  // drop LINE/caret context
    return m;
  }

  std::string connstr_;
  std::string password_;
  std::string description_;
  Capabilities caps_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<pqxx::transaction_base> tx_;
  detail::SqlCache<std::string> prepared_;
  std::map<std::string, std::unique_ptr<Receiver>> receivers_;
  int counter_ = 0;
};

PgConnection& as_pg(Connection& conn, const char* fn) {
  auto* c = dynamic_cast<PgConnection*>(&conn);
  if (!c)
    throw Error(ErrorCode::kInvalidArgument,
                std::string("postgres::") + fn + "() needs a PostgreSQL connection, got " + std::string(to_string(conn.kind())));
  return *c;
}

}  // namespace

namespace detail {
std::unique_ptr<Connection> make_pg_connection(std::string connstr, std::string password, std::string description) {
  return std::make_unique<PgConnection>(std::move(connstr), std::move(password), std::move(description));
}
}  // namespace detail

namespace postgres {
pqxx::transaction_base& native_transaction(Connection& conn) {
  auto& pg = as_pg(conn, "native_transaction");
  if (!pg.tx())
    throw Error(ErrorCode::kInvalidArgument, "postgres::native_transaction(): no sqlguard transaction is open",
                "postgresql");
  return *pg.tx();
}
pqxx::connection_base& native_connection(Connection& conn) { return as_pg(conn, "native_connection").conn(); }
std::string numbered_placeholders(std::string_view sql) { return detail::number_placeholders(sql); }
}  // namespace postgres

}  // namespace sqlguard
