// Native-driver baseline for sqlguard bench (see bench_raw.h).
#include "bench_raw.h"

#include <cstdio>
#include <map>
#include <random>
#include <sstream>

#ifdef SQLGUARD_BENCH_SQLITE
#include <sqlite3.h>
#include "sqlguard/sqlite.h"
#endif
#ifdef SQLGUARD_BENCH_POSTGRESQL
#include <pqxx/pqxx>
#include "sqlguard/postgresql.h"
#endif
#ifdef SQLGUARD_BENCH_MYSQL
#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>
#include "sqlguard/mysql.h"
#endif


namespace sqlguard::bench {

std::string number_placeholders(std::string_view sql) {
#ifdef SQLGUARD_BENCH_POSTGRESQL
  return postgresql::numbered_placeholders(sql);
#else
  return std::string(sql);
#endif
}

namespace {

// nrows and first (NULL = "") from rows.
void finish(RawResult& r) {
  r.nrows = r.rows.size();
  if (r.rows.empty()) return;
  r.first.reserve(r.rows[0].size());
  for (const auto& c : r.rows[0]) r.first.push_back(c.value_or(std::string()));
}

#ifdef SQLGUARD_BENCH_SQLITE
class SqliteRaw final : public RawConn {
 public:
  explicit SqliteRaw(sqlite3* db) : db_(db) {
    begin_ = prepare("BEGIN IMMEDIATE");
    commit_ = prepare("COMMIT");
    rollback_ = prepare("ROLLBACK");
  }
  ~SqliteRaw() override {
    for (auto* s : stmts_) sqlite3_finalize(s);
  }
  int prepare(const std::string& sql) override {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &st, nullptr) !=
        SQLITE_OK)
      throw RawError(RawErr::kOther, std::string("prepare: ") + sqlite3_errmsg(db_));
    stmts_.push_back(st);
    return static_cast<int>(stmts_.size() - 1);
  }
  using RawConn::exec;
  RawResult exec(int h, const std::vector<P>& params) override {
    sqlite3_stmt* st = stmts_[static_cast<std::size_t>(h)];
    int i = 1;
    for (const auto& p : params) {
      if (p.type == P::kInt) sqlite3_bind_int64(st, i, p.i);
      else if (p.type == P::kDouble) sqlite3_bind_double(st, i, p.d);
      else if (p.type == P::kBlob) sqlite3_bind_blob64(st, i, p.s.data(), p.s.size(), SQLITE_STATIC);
      else sqlite3_bind_text64(st, i, p.s.data(), p.s.size(), SQLITE_STATIC, SQLITE_UTF8);
      ++i;
    }
    RawResult r;
    for (;;) {
      int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        int ext = sqlite3_extended_errcode(db_);
        std::string msg = sqlite3_errmsg(db_);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        RawErr k = RawErr::kOther;
        if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE) k = RawErr::kDuplicate;
        else if ((ext & 0xff) == SQLITE_BUSY || (ext & 0xff) == SQLITE_LOCKED) k = RawErr::kBusy;
        throw RawError(k, msg);
      }
      int n = sqlite3_column_count(st);
      auto& row = r.rows.emplace_back();
      row.reserve(static_cast<std::size_t>(n));
      for (int c = 0; c < n; ++c) {
        const unsigned char* t = sqlite3_column_text(st, c);
        if (sqlite3_column_type(st, c) == SQLITE_NULL) row.emplace_back();
        else row.emplace_back(std::string(reinterpret_cast<const char*>(t), static_cast<std::size_t>(sqlite3_column_bytes(st, c))));
      }
    }
    finish(r);
    if (!sqlite3_stmt_readonly(st)) r.affected = sqlite3_changes64(db_);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return r;
  }
  void begin() override { exec(begin_, {}); }
  void commit() override {
    try {
      exec(commit_, {});
    } catch (...) {
      if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  void rollback() noexcept override {
    if (sqlite3_get_autocommit(db_)) return;
    try {
      exec(rollback_, {});
    } catch (...) {
      // Benchmark only: the next BEGIN reports a broken session.
    }
  }

 private:
  sqlite3* db_;
  std::vector<sqlite3_stmt*> stmts_;
  int begin_ = 0, commit_ = 0, rollback_ = 0;
};
#endif

#ifdef SQLGUARD_BENCH_POSTGRESQL
class PgRaw final : public RawConn {
 public:
  // Behind a transaction pooler (`pooler`) consecutive statements may run on
  // different server sessions, so no named statement is kept (as the
  // library's driver does): each runs as an unnamed one. Elsewhere names are
  // unique per connection, so a server session another client used before
  // cannot hold one of the same name.
  PgRaw(pqxx::connection_base& c, bool pooler) : c_(c), pooler_(pooler) {
    std::random_device rd;
    prefix_ = "raw" + std::to_string((static_cast<std::uint64_t>(rd()) << 32) | rd()) + "_";
  }
  ~PgRaw() override { tx_.reset(); }
  int prepare(const std::string& sql) override {
    std::string name = prefix_ + std::to_string(names_.size() + 1);
    if (pooler_) texts_.push_back(number_placeholders(sql));
    else c_.prepare(name, number_placeholders(sql));
    names_.push_back(name);
    return static_cast<int>(names_.size() - 1);
  }
  using RawConn::exec;
  RawResult exec(int h, const std::vector<P>& params) override {
    std::vector<std::string> pp;
    pp.reserve(params.size());
    for (const auto& p : params) {
      if (p.type == P::kInt) pp.push_back(std::to_string(p.i));
      else if (p.type == P::kDouble) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", p.d);
        pp.emplace_back(buf);
      }
      else if (p.type == P::kText) pp.emplace_back(p.s);
      else {
        static const char* hex = "0123456789abcdef";
        std::string out = "\\x";
        out.reserve(2 + p.s.size() * 2);
        for (unsigned char ch : p.s) {
          out += hex[ch >> 4];
          out += hex[ch & 15];
        }
        pp.push_back(std::move(out));
      }
    }
    try {
      pqxx::result res;
      const auto i = static_cast<std::size_t>(h);
      auto run = [&](pqxx::transaction_base& t) {
        return pooler_ ? t.exec_params(texts_[i], pqxx::prepare::make_dynamic_params(pp))
                       : t.exec_prepared(names_[i], pqxx::prepare::make_dynamic_params(pp));
      };
      if (tx_) {
        res = run(*tx_);
      } else {
        pqxx::nontransaction nt(c_);
        res = run(nt);
      }
      RawResult r;
      r.affected = static_cast<std::int64_t>(res.affected_rows());
      for (const auto& row : res) {
        auto& out = r.rows.emplace_back();
        for (const auto& f : row) {
          if (f.is_null()) out.emplace_back();
          else out.emplace_back(std::string(f.c_str(), f.size()));
        }
      }
      finish(r);
      return r;
    } catch (const pqxx::unique_violation& e) {
      throw RawError(RawErr::kDuplicate, e.what());
    } catch (const pqxx::transaction_rollback& e) {
      throw RawError(RawErr::kConflict, e.what());
    } catch (const pqxx::sql_error& e) {
      throw RawError(e.sqlstate() == "55P03" ? RawErr::kBusy : RawErr::kOther, e.what());
    }
  }
  void begin() override { tx_ = std::make_unique<pqxx::work>(c_); }
  void commit() override {
    auto tx = std::move(tx_);
    try {
      tx->commit();
    } catch (const pqxx::transaction_rollback& e) {
      throw RawError(RawErr::kConflict, e.what());
    }
  }
  void rollback() noexcept override {
    auto tx = std::move(tx_);
    if (!tx) return;
    try {
      tx->abort();
    } catch (...) {
      // Benchmark only: the next statement reports a broken session.
    }
  }

 private:
  pqxx::connection_base& c_;
  bool pooler_;
  std::string prefix_;
  std::vector<std::string> names_, texts_;
  std::unique_ptr<pqxx::work> tx_;
};
#endif

#ifdef SQLGUARD_BENCH_MYSQL
class MysqlRaw final : public RawConn {
 public:
  explicit MysqlRaw(sql::Connection* c) : c_(c), stmt_(c->createStatement()) {}
  int prepare(const std::string& sql) override {
    stmts_.emplace_back(c_->prepareStatement(sql));
    return static_cast<int>(stmts_.size() - 1);
  }
  using RawConn::exec;
  RawResult exec(int h, const std::vector<P>& params) override {
    auto& ps = stmts_[static_cast<std::size_t>(h)];
    try {
      unsigned idx = 1;
      std::vector<std::unique_ptr<std::istringstream>> blobs;
      for (const auto& p : params) {
        if (p.type == P::kInt) ps->setInt64(idx, p.i);
        else if (p.type == P::kDouble) ps->setDouble(idx, p.d);
        else if (p.type == P::kText) ps->setString(idx, sql::SQLString(p.s.data(), p.s.size()));
        else {
          blobs.push_back(std::make_unique<std::istringstream>(std::string(p.s)));
          ps->setBlob(idx, blobs.back().get());
        }
        ++idx;
      }
      RawResult r;
      // The server says whether a result set came (no guess from the text):
      // executeUpdate() answers -1 while one is pending (as the library's
      // driver reads it; Connector/C++ 1.1 has no getUpdateCount() for
      // prepared statements).
      const int affected = ps->executeUpdate();
      if (affected == -1) {
        std::unique_ptr<sql::ResultSet> rs(ps->getResultSet());
        unsigned n = rs->getMetaData()->getColumnCount();
        while (rs->next()) {
          auto& row = r.rows.emplace_back();
          for (unsigned c = 1; c <= n; ++c) {
            if (rs->isNull(c)) row.emplace_back();
            else row.emplace_back(rs->getString(c).asStdString());
          }
        }
        finish(r);
      } else {
        r.affected = affected;
      }
      return r;
    } catch (const sql::SQLException& e) {
      throw classify(e);
    }
  }
  void begin() override { plain("START TRANSACTION"); }
  void commit() override { plain("COMMIT"); }
  void rollback() noexcept override {
    try {
      plain("ROLLBACK");
    } catch (...) {
      // Benchmark only: the next statement reports a broken session.
    }
  }

 private:
  static RawError classify(const sql::SQLException& e) {
    switch (e.getErrorCode()) {
      case 1062: return RawError(RawErr::kDuplicate, e.what());
      case 1213: return RawError(RawErr::kConflict, e.what());
      case 1205: case 3572: return RawError(RawErr::kBusy, e.what());
      default: return RawError(RawErr::kOther, e.what());
    }
  }
  void plain(const char* sql) {
    try {
      stmt_->execute(sql);
    } catch (const sql::SQLException& e) {
      throw classify(e);
    }
  }
  sql::Connection* c_;
  std::unique_ptr<sql::Statement> stmt_;
  std::vector<std::unique_ptr<sql::PreparedStatement>> stmts_;
};
#endif

}  // namespace

std::unique_ptr<RawConn> make_raw(Connection& conn) {
  switch (conn.kind()) {
#ifdef SQLGUARD_BENCH_SQLITE
    case DialectKind::kSqlite: return std::make_unique<SqliteRaw>(sqlite::native_handle(conn));
#endif
#ifdef SQLGUARD_BENCH_POSTGRESQL
    case DialectKind::kPostgresql:
      return std::make_unique<PgRaw>(postgresql::native_connection(conn), conn.capabilities().transaction_pooler);
#endif
#ifdef SQLGUARD_BENCH_MYSQL
    case DialectKind::kMysql: return std::make_unique<MysqlRaw>(mysql::native_handle(conn));
#endif
    default: break;
  }
  throw Error(ErrorCode::kNotSupported, "bench: no raw driver baseline for " + std::string(to_string(conn.kind())));
}

namespace {

class RawSession final : public Connection {
 public:
  RawSession(Connection& base, std::shared_ptr<RawConn> raw) : base_(base), raw_(std::move(raw)) {}
  const Capabilities& capabilities() const noexcept override { return base_.capabilities(); }
  const Dialect& dialect() const noexcept override { return base_.dialect(); }
  const std::string& description() const noexcept override { return base_.description(); }
  std::size_t cached_statements() const noexcept override { return handles_.size(); }
  std::size_t statement_cache_capacity() const noexcept override { return SIZE_MAX; }
  void execute_script(std::string_view) override {
    throw Error(ErrorCode::kNotSupported, "bench raw session: no scripts");
  }
  bool in_transaction() const noexcept override { return in_tx_; }
  void reconnect() override { throw Error(ErrorCode::kConnectionLost, "bench raw session: no reconnect"); }
  std::int64_t session_id() override { return base_.session_id(); }

 protected:
  Result do_execute(std::string_view sql, const Params& params, bool) override {
    auto it = handles_.find(sql);
    if (it == handles_.end()) it = handles_.emplace(std::string(sql), raw_->prepare(std::string(sql))).first;
    std::vector<P> ps;
    std::vector<std::string> bytes;  // blobs' bytes, alive for the call (reserved: no reallocation)
    ps.reserve(params.size());
    bytes.reserve(params.size());
    for (const auto& v : params) {
      if (v.is_int()) ps.emplace_back(v.as_int());
      else if (v.is_double()) ps.emplace_back(v.as_double());
      else if (const std::string* t = v.text_if()) ps.emplace_back(std::string_view(*t));
      else if (v.is_null()) throw Error(ErrorCode::kInternal, "bench raw session: NULL parameters are not bound");
      else ps.push_back(P::blob(bytes.emplace_back(v.as_string())));
    }
    RawResult r;
    try {
      r = raw_->exec(it->second, ps);
    } catch (const RawError& e) {
      // The codes the library's drivers give the same errors.
      switch (e.kind) {
        case RawErr::kDuplicate: throw Error(ErrorCode::kAlreadyExists, e.what());
        case RawErr::kConflict: throw Error(ErrorCode::kConflict, e.what());
        case RawErr::kBusy: throw Error(ErrorCode::kLockBusy, e.what());
        case RawErr::kOther: throw Error(ErrorCode::kInternal, e.what());
      }
      throw;
    }
    Result out;
    out.affected = r.affected;
    out.rows.reserve(r.rows.size());
    for (auto& row : r.rows) {
      Row& o = out.rows.emplace_back();
      o.cells.reserve(row.size());
      for (auto& c : row) o.cells.push_back(c ? Value(std::move(*c)) : Value());
    }
    return out;
  }
  void do_begin(Isolation) override {
    raw_->begin();
    in_tx_ = true;
  }
  void do_commit() override {
    in_tx_ = false;
    raw_->commit();
  }
  void do_rollback() override {
    in_tx_ = false;
    raw_->rollback();
  }

 private:
  Connection& base_;
  std::shared_ptr<RawConn> raw_;
  std::map<std::string, int, std::less<>> handles_;
  bool in_tx_ = false;
};

}  // namespace

std::unique_ptr<Connection> make_raw_session(Connection& base, std::shared_ptr<RawConn> raw) {
  return std::make_unique<RawSession>(base, std::move(raw));
}

std::vector<P> in_bind_order(const CatalogEntry& entry, std::vector<P> values) {
  if (entry.bind_order.empty()) return values;
  std::vector<P> out;
  out.reserve(entry.bind_order.size());
  for (int i : entry.bind_order) out.push_back(values.at(static_cast<std::size_t>(i)));
  return out;
}

}  // namespace sqlguard::bench
