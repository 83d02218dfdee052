// A fourth dialect for tests/fourth_dialect/run.sh: "stubsql", SQLite's
// engine and SQL under a new name. It shows what adding a dialect takes: this
// folder (src/dialect/stubsql/), sql/stubsql/, migrations/stubsql/ and one
// line in src/dialect/registry.def. Its connection is an SQLite connection
// seen through the public Connection interface; its Dialect names its own
// catalog (sql/stubsql/) and the plans SQLite uses.
#include "core/migration_lock.h"
#include "dialect/dialect.h"
#include "dialect/registry.h"
#include "dialect/sqlite/connection.h"
#include "plans/plans.h"

namespace sqlguard {
namespace detail {
namespace {

class StubDialect final : public Dialect {
 public:
  StubDialect()
      : Dialect("stubsql", '"',
                {&read_then_update(/*returning=*/true), &connection_wakeups(), &exclusive_transaction_migrations(),
                 &renew_returning()}) {}
  bool reports_key_collation() const override { return false; }
};
const StubDialect kDialect;

class StubConnection final : public Connection {
 public:
  explicit StubConnection(std::unique_ptr<Connection> inner) : inner_(std::move(inner)) {}
  const Capabilities& capabilities() const noexcept override { return inner_->capabilities(); }
  const Dialect& dialect() const noexcept override { return kDialect; }
  const std::string& description() const noexcept override { return inner_->description(); }
  std::size_t cached_statements() const noexcept override { return inner_->cached_statements(); }
  std::size_t statement_cache_capacity() const noexcept override { return inner_->statement_cache_capacity(); }
  void execute_script(std::string_view sql) override { inner_->execute_script(sql); }
  bool in_transaction() const noexcept override { return inner_->in_transaction(); }
  void reconnect() override { inner_->reconnect(); }
  std::int64_t session_id() override { return inner_->session_id(); }
  bool wait_for_notify(const std::string& channel, std::chrono::milliseconds timeout) override {
    return inner_->wait_for_notify(channel, timeout);
  }
  void unlisten(const std::string& channel) override { inner_->unlisten(channel); }
  std::vector<std::string> wait_for_any_notify(const std::vector<std::string>& channels,
                                               std::chrono::milliseconds timeout) override {
    return inner_->wait_for_any_notify(channels, timeout);
  }

 protected:
  Result do_execute(std::string_view sql, const Params& params, bool cache) override {
    return cache ? inner_->execute(sql, params) : inner_->execute_once(sql, params);
  }
  void do_begin(Isolation isolation) override { inner_->begin(isolation); }
  void do_commit() override { inner_->commit(); }
  void do_rollback() override { inner_->rollback(); }

 private:
  std::unique_ptr<Connection> inner_;
};

// stubsql:///abs/path.db, stubsql://relative.db
std::unique_ptr<Connection> open_stubsql(std::string_view uri, const ConnectOptions& options) {
  std::string_view rest = uri.substr(uri.find(':') + 1);
  if (rest.substr(0, 2) == "//") rest.remove_prefix(2);
  if (rest.empty()) throw Error(ErrorCode::kInvalidArgument, "malformed stubsql URI: no file path", "stubsql");
  return std::make_unique<StubConnection>(make_sqlite_connection(std::string(rest), std::string(uri), options));
}
}  // namespace

extern const DialectEntry kStubsqlDialect{"stubsql", {"stubsql"}, "stubsql:///path.db", true, &open_stubsql, nullptr,
                                   /*uri_is_path=*/true};
}  // namespace detail
}  // namespace sqlguard
