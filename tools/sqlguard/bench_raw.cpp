// Native-driver baseline for sqlguard bench (see bench_raw.h).
#include "bench_raw.h"

#include <sstream>

#ifdef SQLGUARD_BENCH_SQLITE
#include <sqlite3.h>
#include "sqlguard/sqlite.h"
#endif
#ifdef SQLGUARD_BENCH_POSTGRES
#include <pqxx/pqxx>
#include "sqlguard/postgres.h"
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
#ifdef SQLGUARD_BENCH_POSTGRES
  return postgres::numbered_placeholders(sql);
#else
  return std::string(sql);
#endif
}

namespace {

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
  RawResult exec(int h, std::initializer_list<P> params) override {
    sqlite3_stmt* st = stmts_[static_cast<std::size_t>(h)];
    int i = 1;
    for (const auto& p : params) {
      if (p.type == P::kInt) sqlite3_bind_int64(st, i, p.i);
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
      if (r.nrows++ == 0) {
        int n = sqlite3_column_count(st);
        r.first.reserve(static_cast<std::size_t>(n));
        for (int c = 0; c < n; ++c) {
          const unsigned char* t = sqlite3_column_text(st, c);
          r.first.emplace_back(t ? reinterpret_cast<const char*>(t) : "", static_cast<std::size_t>(sqlite3_column_bytes(st, c)));
        }
      }
    }
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

#ifdef SQLGUARD_BENCH_POSTGRES
class PgRaw final : public RawConn {
 public:
  explicit PgRaw(pqxx::connection_base& c) : c_(c) {}
  ~PgRaw() override { tx_.reset(); }
  int prepare(const std::string& sql) override {
    std::string name = "raw" + std::to_string(names_.size() + 1);
    c_.prepare(name, number_placeholders(sql));
    names_.push_back(name);
    return static_cast<int>(names_.size() - 1);
  }
  RawResult exec(int h, std::initializer_list<P> params) override {
    std::vector<std::string> pp;
    pp.reserve(params.size());
    for (const auto& p : params) {
      if (p.type == P::kInt) pp.push_back(std::to_string(p.i));
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
      const std::string& name = names_[static_cast<std::size_t>(h)];
      if (tx_) {
        res = tx_->exec_prepared(name, pqxx::prepare::make_dynamic_params(pp));
      } else {
        pqxx::nontransaction nt(c_);
        res = nt.exec_prepared(name, pqxx::prepare::make_dynamic_params(pp));
      }
      RawResult r;
      r.affected = static_cast<std::int64_t>(res.affected_rows());
      r.nrows = res.size();
      if (!res.empty())
        for (const auto& f : res[0]) r.first.emplace_back(f.c_str(), f.size());
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
  std::vector<std::string> names_;
  std::unique_ptr<pqxx::work> tx_;
};
#endif

#ifdef SQLGUARD_BENCH_MYSQL
class MysqlRaw final : public RawConn {
 public:
  explicit MysqlRaw(sql::Connection* c) : c_(c), stmt_(c->createStatement()) {}
  int prepare(const std::string& sql) override {
    std::size_t i = 0;
    // SET STATEMENT var = value FOR <statement> (Galera causal reads): look at the statement.
    if (sql.rfind("SET STATEMENT ", 0) == 0) {
      auto f = sql.find(" FOR");  // FOR, then a space or a line break
      if (f != std::string::npos) i = f + 4;
    }
    while (i < sql.size() && (sql[i] == ' ' || sql[i] == '\n' || sql[i] == '\t' || sql[i] == '(')) ++i;
    std::string head = sql.substr(i, 6);
    for (auto& ch : head) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    // INSERT ... RETURNING (the catalog's lease_take) returns rows too.
    const bool rows = head == "SELECT" || (head == "INSERT" && (sql.find("\nRETURNING ") != std::string::npos ||
                                                                sql.find(" RETURNING ") != std::string::npos));
    stmts_.push_back({std::unique_ptr<sql::PreparedStatement>(c_->prepareStatement(sql)), rows});
    return static_cast<int>(stmts_.size() - 1);
  }
  RawResult exec(int h, std::initializer_list<P> params) override {
    auto& s = stmts_[static_cast<std::size_t>(h)];
    try {
      unsigned idx = 1;
      std::vector<std::unique_ptr<std::istringstream>> blobs;
      for (const auto& p : params) {
        if (p.type == P::kInt) s.ps->setInt64(idx, p.i);
        else if (p.type == P::kText) s.ps->setString(idx, sql::SQLString(p.s.data(), p.s.size()));
        else {
          blobs.push_back(std::make_unique<std::istringstream>(std::string(p.s)));
          s.ps->setBlob(idx, blobs.back().get());
        }
        ++idx;
      }
      RawResult r;
      if (s.query) {
        std::unique_ptr<sql::ResultSet> rs(s.ps->executeQuery());
        unsigned n = rs->getMetaData()->getColumnCount();
        while (rs->next()) {
          if (r.nrows++ == 0)
            for (unsigned c = 1; c <= n; ++c) r.first.emplace_back(rs->getString(c).asStdString());
        }
      } else {
        r.affected = s.ps->executeUpdate();
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
  struct Stmt {
    std::unique_ptr<sql::PreparedStatement> ps;
    bool query;
  };
  sql::Connection* c_;
  std::unique_ptr<sql::Statement> stmt_;
  std::vector<Stmt> stmts_;
};
#endif

}  // namespace

std::unique_ptr<RawConn> make_raw(Connection& conn) {
  switch (conn.kind()) {
#ifdef SQLGUARD_BENCH_SQLITE
    case DialectKind::kSqlite: return std::make_unique<SqliteRaw>(sqlite::native_handle(conn));
#endif
#ifdef SQLGUARD_BENCH_POSTGRES
    case DialectKind::kPostgres: return std::make_unique<PgRaw>(postgres::native_connection(conn));
#endif
#ifdef SQLGUARD_BENCH_MYSQL
    case DialectKind::kMysql: return std::make_unique<MysqlRaw>(mysql::native_handle(conn));
#endif
    default: break;
  }
  throw Error(ErrorCode::kNotSupported, "bench: no raw driver baseline for " + std::string(to_string(conn.kind())));
}

}  // namespace sqlguard::bench
