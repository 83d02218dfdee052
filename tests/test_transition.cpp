// State-machine transitions, audit rows and guarded updates (inventory).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <future>
#include <thread>
#include <algorithm>

#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"
#include "sql_audit.h"
#include "test_context.h"

using namespace sqlguard;
using sgtest::ctx;
using Catch::Matchers::Contains;

namespace {
StateMachineSpec order_spec(const std::string& table, bool audit = false) {
  StateMachineSpec s{.table = table,
                     .states = {"pending", "paid", "shipped", "cancelled"},
                     .terminal_states = {"cancelled"},
                     .transitions = {{.event = "pay", .from = {"pending"}, .to = "paid", .guards = {{"amount", Compare::kLe}}},
                                     {.event = "ship", .from = {"paid"}, .to = "shipped"},
                                     {.event = "cancel", .from = {"pending", "paid"}, .to = "cancelled"}}};
  if (audit) s.audit = AuditSpec{};
  return s;
}
std::string make_orders(Connection& c, int n) {
  std::string t = ctx().unique("tr_orders");
  c.execute_script("CREATE TABLE " + t +
                   " (id INTEGER NOT NULL PRIMARY KEY, status VARCHAR(16) NOT NULL, amount INTEGER NOT NULL)");
  Transaction tx(c);
  for (int i = 1; i <= n; ++i) tx.execute("INSERT INTO " + t + " (id, status, amount) VALUES (?, 'pending', 50)", {i});
  tx.commit();
  return t;
}
std::int64_t audit_count(const std::string& machine) {
  return sgtest::query_int("SELECT COUNT(*) FROM sqlguard_transition_audit WHERE machine = ?", {machine});
}
std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

TEST_CASE("a transition applies once; repeating it is AlreadyInTarget; from another state it is Rejected with that state", "[transition]") {
  auto c = ctx().connect();
  auto t = make_orders(*c, 2);
  StateMachine sm(*c, order_spec(t));
  auto r = sm.fire(1, "pay", {.values = {100}});
  CHECK(r.status == TransitionStatus::kApplied);
  CHECK(r.from == std::optional<std::string>("pending"));
  CHECK(r.to == "paid");
  auto again = sm.fire(1, "pay", {.values = {100}});
  CHECK(again.status == TransitionStatus::kAlreadyInTarget);
  CHECK(again.current_state == std::optional<std::string>("paid"));
  CHECK(sm.fire(1, "ship").status == TransitionStatus::kApplied);
  auto late = sm.fire(1, "cancel");
  CHECK(late.status == TransitionStatus::kRejected);
  CHECK(late.current_state == std::optional<std::string>("shipped"));
  CHECK_FALSE(late.guard_failed);
  CHECK(sm.state_of(1) == std::optional<std::string>("shipped"));
  CHECK(sm.fire(77, "ship").status == TransitionStatus::kNotFound);
  CHECK_FALSE(sm.state_of(77));
}

TEST_CASE("a guard that does not hold rejects the transition and says so", "[transition]") {
  auto c = ctx().connect();
  auto t = make_orders(*c, 1);
  StateMachine sm(*c, order_spec(t));
  auto r = sm.fire(1, "pay", {.values = {49}});  // amount (50) <= 49 is false
  CHECK(r.status == TransitionStatus::kRejected);
  CHECK(r.guard_failed);
  CHECK(r.current_state == std::optional<std::string>("pending"));
  CHECK(sm.fire(1, "pay", {.values = {50}}).status == TransitionStatus::kApplied);
  CHECK_THROWS_WITH(sm.fire(1, "pay"), Contains("0 values; the event needs 1"));
}

TEST_CASE("an undeclared transition is refused before any SQL is sent", "[transition]") {
  auto c = ctx().connect();
  // The table does not exist: any statement would fail with SchemaMismatch.
  StateMachine sm(*c, order_spec(ctx().unique("no_such_table")));
  auto code_of = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  CHECK(code_of([&] { sm.fire(1, "refund"); }) == ErrorCode::kInvalidTransition);
  CHECK_THROWS_WITH(sm.fire(1, "refund"), Contains("event 'refund' is not declared") && Contains("pay, ship, cancel"));
  CHECK(code_of([&] { sm.transition_to(1, "pending"); }) == ErrorCode::kInvalidTransition);  // nothing leads there
  CHECK(code_of([&] { sm.transition_to(1, "paid"); }) == ErrorCode::kInvalidTransition);     // only a guarded event does
  CHECK(code_of([&] { sm.transition_to(1, "refunded"); }) == ErrorCode::kInvalidArgument);   // unknown state
  CHECK_FALSE(c->in_transaction());
  // Control: a declared event does reach the database and fails there.
  CHECK(code_of([&] { sm.fire(1, "ship"); }) == ErrorCode::kSchemaMismatch);
  // Pure lookups need no SQL either.
  CHECK(sm.can_fire("pending", "cancel"));
  CHECK_FALSE(sm.can_fire("shipped", "cancel"));
  CHECK(sm.is_terminal("cancelled"));
}

TEST_CASE("state machines refuse bad identifiers, unknown states and ill-formed transition tables", "[transition]") {
  auto c = ctx().connect();
  auto bad = [&](auto mutate) {
    auto s = order_spec("orders");
    mutate(s);
    try {
      StateMachine sm(*c, s);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(bad([](auto& s) { s.table = "orders; DROP TABLE x"; }), Contains("StateMachineSpec::table"));
  CHECK_THAT(bad([](auto& s) { s.status_column = "st atus"; }), Contains("status_column"));
  CHECK_THAT(bad([](auto& s) { s.transitions[0].to = "refunded"; }), Contains("state 'refunded'"));
  CHECK_THAT(bad([](auto& s) { s.transitions[1].from = {"nowhere"}; }), Contains("state 'nowhere'"));
  CHECK_THAT(bad([](auto& s) { s.transitions[1].event = "pay"; }), Contains("event 'pay' is declared twice"));
  CHECK_THAT(bad([](auto& s) { s.transitions[1].from = {"cancelled"}; }), Contains("leaves terminal state 'cancelled'"));
  CHECK_THAT(bad([](auto& s) { s.states.push_back("paid"); }), Contains("declared twice"));
  CHECK_THAT(bad([](auto& s) { s.transitions[0].guards[0].column = "1x"; }), Contains("TransitionDef::guards"));
  CHECK_THAT(bad([](auto& s) { s.transitions[0].assignments = {{"status"}}; }), Contains("key or status column"));
  CHECK_THAT(bad([](auto& s) { s.audit = AuditSpec{.table = "audit log"}; }), Contains("AuditSpec::table"));
  CHECK_THAT(bad([](auto& s) { s.transitions.clear(); }), Contains("at least one transition"));
}

TEST_CASE("audit rows are written with the transition, only when it applies, with the exact from-state", "[transition]") {
  auto c = ctx().connect();
  auto t = make_orders(*c, 3);
  StateMachine sm(*c, order_spec(t, true));
  CHECK(sm.fire(1, "pay", {.values = {50}, .actor = "alice"}));
  CHECK(sm.fire(1, "pay", {.values = {50}, .actor = "alice"}).status == TransitionStatus::kAlreadyInTarget);
  auto cancel = sm.fire(1, "cancel", {.actor = "bob"});  // two from-states: read under lock
  CHECK(cancel.status == TransitionStatus::kApplied);
  CHECK(cancel.from == std::optional<std::string>("paid"));
  CHECK(sm.transition_to(2, "cancelled", "carol").status == TransitionStatus::kApplied);
  {
    // In the caller's transaction: rolled back together.
    Transaction tx(*c);
    CHECK(sm.fire(3, "cancel"));
    tx.rollback();
  }
  CHECK(sm.state_of(3) == std::optional<std::string>("pending"));
  auto rows = c->execute(
      "SELECT entity_key, event, from_state, to_state, actor FROM sqlguard_transition_audit WHERE machine = ? ORDER BY audit_id",
      {t});
  REQUIRE(rows.rows.size() == 3);
  auto row = [&](std::size_t i) {
    const auto& r = rows.rows[i];
    return r[0].as_string() + " " + r[1].as_string() + " " + r[2].as_string() + " " + r[3].as_string() + " " +
           r[4].as_opt_string().value_or("NULL");
  };
  CHECK(row(0) == "1 pay pending paid alice");
  CHECK(row(1) == "1 cancel paid cancelled bob");
  CHECK(row(2) == "2 cancel pending cancelled carol");
  auto at = c->execute("SELECT MIN(at_ms) FROM sqlguard_transition_audit WHERE machine = ?", {t}).rows[0][0].as_int();
  CHECK(std::llabs(at - now_ms()) < 60000);  // database clock, epoch ms
}

TEST_CASE("four workers firing the same transitions: each row applies exactly once and audit rows match", "[transition][multiprocess]") {
  auto c = ctx().connect();
  const int kKeys = 40, kWorkers = 4;
  auto t = make_orders(*c, kKeys);
  auto start = now_ms() + 300;
  std::vector<std::vector<std::string>> argv;
  for (int w = 0; w < kWorkers; ++w)
    argv.push_back({sgtest::worker_path(), "fire-pay", ctx().uri, t, std::to_string(kKeys), "w" + std::to_string(w),
                    std::to_string(start)});
  std::vector<std::string> outs;
  auto rcs = sgtest::run_parallel(argv, &outs);
  std::map<int, int> applied;
  int other = 0, unexpected = 0;
  for (int w = 0; w < kWorkers; ++w) {
    CHECK(rcs[w] == 0);
    std::istringstream in(outs[w]);
    int k;
    std::string outcome;
    while (in >> k >> outcome) {
      if (outcome == "applied") ++applied[k];
      else if (outcome == "already_in_target" || outcome == "rejected") ++other;
      else ++unexpected;
    }
  }
  CHECK(unexpected == 0);
  CHECK(applied.size() == kKeys);
  for (auto& [k, n] : applied) {
    INFO("key " << k);
    CHECK(n == 1);
  }
  CHECK(other == kKeys * (kWorkers - 1));
  CHECK(audit_count(t) == kKeys);
  CHECK(sgtest::query_int("SELECT COUNT(DISTINCT entity_key) FROM sqlguard_transition_audit WHERE machine = ?", {t}) == kKeys);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM " + t + " WHERE status = 'paid'") == kKeys);
}

TEST_CASE("a guarded update decrements only while the guard holds", "[transition][inventory]") {
  auto c = ctx().connect();
  std::string t = ctx().unique("tr_stock");
  c->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL)");
  c->execute("INSERT INTO " + t + " (id, qty) VALUES (1, 5)");
  GuardedUpdate dec(*c, {.table = t, .assignments = {{"qty", AssignOp::kSubtract}}, .guards = {{"qty", Compare::kGe}}});
  CHECK(dec.apply(1, {3, 3}).status == GuardedStatus::kApplied);
  CHECK(dec.apply(1, {3, 3}).status == GuardedStatus::kRejected);  // only 2 left
  CHECK(dec.apply(1, {2, 2}).status == GuardedStatus::kApplied);
  CHECK(dec.apply(2, {1, 1}).status == GuardedStatus::kNotFound);
  CHECK(sgtest::query_int("SELECT qty FROM " + t + " WHERE id = 1") == 0);
  CHECK_THROWS_WITH(dec.apply(1, {1}), Contains("expected 2"));
  CHECK_THROWS_WITH(GuardedUpdate(*c, {.table = t, .assignments = {{"qty; --"}}}), Contains("GuardedUpdateSpec::assignments"));
  CHECK_THROWS_WITH(GuardedUpdate(*c, {.table = t, .assignments = {}}), Contains("at least one"));
}

namespace {
// 8 processes share 300 orders of one unit against a stock of 100.
std::vector<int> run_shop(const std::string& mode, const std::vector<std::string>& tables, const std::string& think = "") {
  const int kWorkers = 8, kOrders = 300;
  auto start = now_ms() + 400;
  std::vector<std::vector<std::string>> argv;
  for (int w = 0; w < kWorkers; ++w) {
    int n = kOrders / kWorkers + (w < kOrders % kWorkers ? 1 : 0);
    std::vector<std::string> a{sgtest::worker_path(), mode, ctx().uri};
    a.insert(a.end(), tables.begin(), tables.end());
    a.push_back(std::to_string(w));
    a.push_back(std::to_string(n));
    if (!think.empty()) a.push_back(think);
    a.push_back(std::to_string(start));
    argv.push_back(a);
  }
  std::vector<std::string> outs;
  auto rcs = sgtest::run_parallel(argv, &outs);
  std::vector<int> sold;
  for (int w = 0; w < kWorkers; ++w) {
    CHECK(rcs[w] == 0);
    sold.push_back(std::atoi(outs[w].c_str()));
  }
  return sold;
}
std::string make_stock_100(Connection& c) {
  std::string t = ctx().unique("tr_shop");
  c.execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL)");
  c.execute("INSERT INTO " + t + " (id, qty) VALUES (1, 100)");
  return t;
}
}  // namespace

TEST_CASE("8 processes with 300 orders against a stock of 100 sell exactly 100 and never go below 0", "[transition][inventory][multiprocess]") {
  auto c = ctx().connect();
  auto stock = make_stock_100(*c);
  std::string orders = ctx().unique("tr_order_rows");
  c->execute_script("CREATE TABLE " + orders + " (worker INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (worker, n))");
  auto sold = run_shop("guarded-order", {stock, orders});
  int total = 0, workers_selling = 0;
  for (int s : sold) total += s, workers_selling += s > 0;
  CHECK(total == 100);
  CHECK(sgtest::query_int("SELECT qty FROM " + stock + " WHERE id = 1") == 0);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM " + orders) == 100);  // one order row per unit sold
  CHECK(workers_selling >= 2);
}

TEST_CASE("negative control: naive read-then-write from 8 processes oversells", "[transition][inventory][multiprocess]") {
  auto c = ctx().connect();
  auto stock = make_stock_100(*c);
  // Read, think 3 ms, write back qty - 1 with no lock and no condition.
  auto sold = run_shop("naive-order", {stock}, "3");
  int total = 0;
  for (int s : sold) total += s;
  INFO("naive workers sold " << total << " units of a stock of 100");
  CHECK(total > 100);  // lost updates: the test above would catch this bug
}

TEST_CASE("a key column that compares loosely (MariaDB PAD SPACE / _ci) is named in a warning when a writer is built",
          "[transition][collation]") {
  if (!ctx().is(DialectKind::kMysql)) {
    SUCCEED("MariaDB's PAD SPACE and _ci collations (PostgreSQL: nondeterministic collations, not created here; "
            "SQLite: not read, see README)");
    return;
  }
  auto c = ctx().connect();
  std::vector<std::string> warnings;
  std::mutex mu;
  set_log_hook([&](LogLevel level, std::string_view m) {
    std::lock_guard<std::mutex> lk(mu);
    if (level == LogLevel::kWarning) warnings.emplace_back(m);
  });
  struct ResetHook {
    ~ResetHook() { set_log_hook(nullptr); }
  } reset;
  auto warned = [&](const std::string& table) {
    std::lock_guard<std::mutex> lk(mu);
    for (const auto& w : warnings)
      if (w.find("'" + table + "'") != std::string::npos && w.find("loosely") != std::string::npos) return true;
    return false;
  };
  const std::string loose = ctx().unique("tr_loose"), exact = ctx().unique("tr_exact");
  c->execute_script("CREATE TABLE " + loose +
                    " (id VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, qty INTEGER NOT NULL)");
  c->execute_script("CREATE TABLE " + exact +
                    " (id VARCHAR(20) COLLATE utf8mb4_nopad_bin NOT NULL PRIMARY KEY, qty INTEGER NOT NULL)");
  c->execute("INSERT INTO " + loose + " (id, qty) VALUES ('a', 5)");
  c->execute("INSERT INTO " + exact + " (id, qty) VALUES ('a', 5)");
  GuardedUpdate dec_loose(*c, {.table = loose, .assignments = {{"qty", AssignOp::kSubtract}}});
  GuardedUpdate dec_exact(*c, {.table = exact, .assignments = {{"qty", AssignOp::kSubtract}}});
  CHECK(warned(loose));
  CHECK_FALSE(warned(exact));  // negative control: a _nopad_bin key column is exact
  // What the warning is about: 'a ' and 'A' are the row 'a' under the loose collation only.
  CHECK(dec_loose.apply(std::string("a "), {1}).status == GuardedStatus::kApplied);
  CHECK(dec_loose.apply(std::string("A"), {1}).status == GuardedStatus::kApplied);
  CHECK(dec_exact.apply(std::string("a "), {1}).status == GuardedStatus::kNotFound);
  CHECK(sgtest::query_int("SELECT qty FROM " + loose + " WHERE id = 'a'") == 3);
}

// ---- GuardedUpdate::apply_all(): a cart of keys, all or none (issue 41) ----------------------

namespace {
std::string make_skus(Connection& c, const std::vector<int>& qty, bool versioned = false) {
  std::string t = ctx().unique("tr_skus");
  c.execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL" +
                   (versioned ? ", version INTEGER NOT NULL" : "") + ")");
  Transaction tx(c);
  for (std::size_t i = 0; i < qty.size(); ++i)
    tx.execute("INSERT INTO " + t + (versioned ? " (id, qty, version) VALUES (?, ?, 0)" : " (id, qty) VALUES (?, ?)"),
               {static_cast<std::int64_t>(i + 1), qty[i]});
  tx.commit();
  return t;
}
std::string quantities(const std::string& t) {
  auto c = ctx().connect();
  auto r = c->execute("SELECT qty FROM " + t + " ORDER BY id");
  std::string s;
  for (const auto& row : r.rows) s += (s.empty() ? "" : ",") + std::to_string(row[0].as_int());
  return s;
}
GuardedUpdateSpec cart_spec(const std::string& t) {
  return {.table = t, .assignments = {{"qty", AssignOp::kSubtract}}, .guards = {{"qty", Compare::kGe}}};
}
GuardedItem take(std::int64_t sku, std::int64_t n) { return {sku, {n, n}}; }
}  // namespace

TEST_CASE("apply_all writes every key of a cart or none, and names each key that failed", "[transition][cart]") {
  auto c = ctx().connect();
  auto t = make_skus(*c, {5, 5, 1});
  GuardedUpdate stock(*c, cart_spec(t));

  // SKU 3 has 1 left, the cart wants 2: nothing is written, SKU 3 (items[1]) is named.
  auto r = stock.apply_all({take(1, 2), take(3, 2), take(2, 3)});
  CHECK(r.status == GuardedStatus::kRejected);
  REQUIRE(r.failures.size() == 1);
  CHECK(r.failures[0].index == 1);
  CHECK(r.failures[0].status == GuardedStatus::kRejected);
  CHECK(quantities(t) == "5,5,1");

  // A key with no row: kNotFound, nothing written; every failing key is listed in item order.
  r = stock.apply_all({take(9, 1), take(1, 1), take(3, 5)});
  CHECK(r.status == GuardedStatus::kNotFound);
  REQUIRE(r.failures.size() == 2);
  CHECK((r.failures[0].index == 0 && r.failures[0].status == GuardedStatus::kNotFound));
  CHECK((r.failures[1].index == 2 && r.failures[1].status == GuardedStatus::kRejected));
  CHECK(quantities(t) == "5,5,1");

  // Every guard holds: every key is written, each by its own amount.
  r = stock.apply_all({take(2, 3), take(1, 2), take(3, 1)});
  CHECK(r.status == GuardedStatus::kApplied);
  CHECK(r.failures.empty());
  CHECK(quantities(t) == "3,2,0");
  // One key alone works too.
  CHECK(stock.apply_all({take(1, 3)}));
  CHECK(quantities(t) == "0,2,0");

  // Negative control: the same cart as single apply() calls writes the keys whose guards held
  // before the one that failed; the check above would catch an apply_all() that did so.
  auto t2 = make_skus(*c, {5, 5, 1});
  GuardedUpdate one(*c, cart_spec(t2));
  CHECK(one.apply(1, {2, 2}));
  CHECK_FALSE(one.apply(3, {2, 2}));
  CHECK(quantities(t2) != "5,5,1");
}

TEST_CASE("apply_all refuses bad input before any SQL is sent", "[transition][cart]") {
  auto c = ctx().connect();
  auto t = make_skus(*c, {5, 5});
  GuardedUpdate stock(*c, cart_spec(t));
  CHECK_THROWS_WITH(stock.apply_all({}), Contains("no items"));
  CHECK_THROWS_WITH(stock.apply_all({take(1, 1), take(2, 1), take(1, 2)}),
                    Contains("items[2] repeats the key of items[0]"));
  CHECK_THROWS_WITH(stock.apply_all({take(1, 1), {2, {1}}}), Contains("items[1] has 1 values; expected 2"));
  CHECK_THROWS_WITH(stock.apply_all({{Value(), {1, 1}}}), Contains("NULL key"));
  std::vector<GuardedItem> many;
  for (std::size_t i = 0; i <= stock.max_keys_per_call(); ++i) many.push_back(take(static_cast<std::int64_t>(i + 1), 1));
  CHECK_THROWS_WITH(stock.apply_all(many), Contains("at most " + std::to_string(stock.max_keys_per_call())));
  CHECK(stock.max_keys_per_call() == 1000);
  // A value the text rule refuses is named by its item.
  GuardedUpdate named(*c, {.table = t, .assignments = {{"qty", AssignOp::kSet}}});
  CHECK_THROWS_WITH(named.apply_all({{1, {1}}, {2, {std::string("a\0b", 3)}}}), Contains("items[1]"));
  CHECK(quantities(t) == "5,5");
  // The largest cart the spec allows is written whole.
  std::vector<int> full(stock.max_keys_per_call(), 1);
  auto big = make_skus(*c, full);
  GuardedUpdate all(*c, cart_spec(big));
  for (auto& it : many) it.values = {1, 1};
  many.pop_back();
  {
    // (Not audited: std::regex recurses per token of a statement with 1,000 keys in three lists;
    // the same entries are audited with a few keys in the other cases.)
    sgtest::SqlAuditExempt exempt;
    CHECK(all.apply_all(many));
  }
  CHECK(sgtest::query_int("SELECT SUM(qty) FROM " + big) == 0);
}

TEST_CASE("apply_all runs in the caller's transaction and moves a declared version once per row", "[transition][cart]") {
  auto c = ctx().connect();
  auto t = make_skus(*c, {5, 5}, true);
  declare_versioned_table(*c, t, "version");
  GuardedUpdate stock(*c, cart_spec(t));
  {
    Transaction tx(*c);
    CHECK(stock.apply_all({take(1, 1), take(2, 2)}));
    tx.rollback();
  }
  CHECK(quantities(t) == "5,5");
  {
    Transaction tx(*c);
    CHECK(stock.apply_all({take(2, 2), take(1, 1)}));
    CHECK_FALSE(stock.apply_all({take(1, 1), take(2, 9)}));  // refused inside the transaction: nothing more written
    tx.commit();
  }
  CHECK(quantities(t) == "4,3");
  CHECK(sgtest::query_int("SELECT SUM(version) FROM " + t) == 2);
  CHECK(sgtest::query_int("SELECT MIN(version) FROM " + t) == 1);
}

namespace {
struct CartRun {
  std::int64_t applied = 0, rejected = 0, deadlocks = 0, other_errors = 0;
  std::string first_error{};
};
// `threads` clients each place `carts` carts of the same `skus` keys, in an order of their own
// (reversed for every other client), each in a transaction held `hold_ms` after its writes.
// per_row: the cart as one apply() per key in the cart's order (the negative control).
CartRun run_carts(const std::string& t, int threads, int carts, int skus, int hold_ms, bool per_row) {
  CartRun total;
  std::mutex mu;
  std::vector<std::thread> ts;
  for (int w = 0; w < threads; ++w)
    ts.emplace_back([&, w] {
      CartRun mine;
      auto c = ctx().connect();
      GuardedUpdate stock(*c, cart_spec(t));
      std::vector<GuardedItem> cart;
      for (int k = 1; k <= skus; ++k) cart.push_back(take(k, 1));
      if (w % 2) std::reverse(cart.begin(), cart.end());
      for (int i = 0; i < carts; ++i) {
        try {
          Transaction tx(*c);
          bool ok = true;
          if (per_row) {
            for (const auto& it : cart) {
              ok = ok && stock.apply(it.key, it.values);
              std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
            }
          } else {
            ok = static_cast<bool>(stock.apply_all(cart));
            std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
          }
          if (ok) {
            tx.commit();
            ++mine.applied;
          } else {
            tx.rollback();
            ++mine.rejected;
          }
        } catch (const Error& e) {
          const std::string m = e.what();
          if (e.code() == ErrorCode::kConflict && (m.find("eadlock") != std::string::npos)) ++mine.deadlocks;
          else if (++mine.other_errors == 1) mine.first_error = m;
        }
      }
      std::lock_guard<std::mutex> lk(mu);
      total.applied += mine.applied, total.rejected += mine.rejected, total.deadlocks += mine.deadlocks,
          total.other_errors += mine.other_errors;
      if (total.first_error.empty()) total.first_error = mine.first_error;
    });
  for (auto& th : ts) th.join();
  return total;
}
}  // namespace

TEST_CASE("carts of the same SKUs in opposite orders never deadlock and never oversell", "[transition][cart][contention]") {
  auto c = ctx().connect();
  const int kStock = 60;
  auto t = make_skus(*c, {kStock, kStock, kStock, kStock});
  // 4 clients, 25 carts each of all 4 SKUs, half of them in reverse order, every transaction held
  // 2 ms after its writes: 100 carts against a stock of 60 of each.
  auto r = run_carts(t, 4, 25, 4, 2, false);
  INFO("applied " << r.applied << ", rejected " << r.rejected << ", deadlocks " << r.deadlocks << ", other errors "
                  << r.other_errors << " " << r.first_error);
  CHECK(r.deadlocks == 0);
  CHECK(r.other_errors == 0);
  CHECK(r.applied == kStock);     // every unit sold, none twice
  CHECK(r.rejected == 100 - kStock);
  CHECK(quantities(t) == "0,0,0,0");
  if (ctx().is(DialectKind::kSqlite)) return;  // one writer at a time: no row locks to deadlock on
  // Negative control: the same carts as one apply() per SKU in the cart's order deadlock
  // (PostgreSQL and MariaDB abort one transaction of the cycle; PostgreSQL looks for the cycle
  // after deadlock_timeout, 1 s, hence 2 clients and 3 carts each, 20 ms between their rows).
  auto t2 = make_skus(*c, {kStock, kStock, kStock, kStock});
  auto naive = run_carts(t2, 2, 3, 4, 20, true);
  INFO("per-row: applied " << naive.applied << ", deadlocks " << naive.deadlocks << ", other errors " << naive.other_errors);
  CHECK(naive.deadlocks > 0);
}

TEST_CASE("apply_all retries a deadlock with another writer outside a transaction, and throws it inside the caller's",
          "[transition][cart][contention]") {
  if (ctx().is(DialectKind::kSqlite)) {
    SUCCEED("SQLite: one writer at a time, no row locks to deadlock on");
    return;
  }
  auto c = ctx().connect();
  auto other = ctx().connect();
  auto t = make_skus(*c, {5, 5});
  GuardedUpdate stock(*c, cart_spec(t));
  // Another writer holds row 2 and then asks for row 1, while apply_all() holds row 1 and waits
  // for row 2: a deadlock, whose victim is apply_all() (PostgreSQL: the first waiter, whose
  // deadlock_timeout runs out first; MariaDB: the lighter transaction, a lock and no change).
  struct Outcome {
    std::optional<GuardedBatchResult> result;
    std::string error;
    bool other_aborted = false;
  };
  auto crossed = [&](bool in_transaction, const RetryPolicy& policy) {
    Outcome o;
    Transaction tx(*other);
    tx.execute("UPDATE " + t + " SET qty = qty - 1 WHERE id = 2");
    auto f = std::async(std::launch::async, [&] {
      std::optional<Transaction> mine;
      if (in_transaction) mine.emplace(*c);
      auto r = stock.apply_all({take(1, 1), take(2, 1)}, policy);
      if (mine) mine->commit();
      return r;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    try {
      tx.execute("UPDATE " + t + " SET qty = qty - 1 WHERE id = 1");
      tx.commit();
    } catch (const Error&) {
      o.other_aborted = true;
    }
    try {
      o.result = f.get();
    } catch (const Error& e) {
      o.error = e.what();
    }
    return o;
  };
  auto o = crossed(false, RetryPolicy{});
  INFO("other writer aborted: " << o.other_aborted << "; error: " << o.error);
  REQUIRE_FALSE(o.other_aborted);  // apply_all() was the victim
  REQUIRE(o.result);
  CHECK(o.result->status == GuardedStatus::kApplied);
  CHECK(o.result->stats.attempts >= 2);
  CHECK(o.result->stats.conflicts >= 1);
  CHECK(quantities(t) == "3,3");  // the other writer's unit of each, then the cart's
  // Control: with one attempt the deadlock reaches the caller; in the caller's transaction too.
  o = crossed(false, RetryPolicy{.max_attempts = 1});
  CHECK_FALSE(o.result);
  CHECK_THAT(o.error, Contains("eadlock"));
  o = crossed(true, RetryPolicy{});
  CHECK_FALSE(o.result);
  CHECK_THAT(o.error, Contains("eadlock"));
  CHECK(quantities(t) == "1,1");  // the other writer's units only
}

// ---- StateMachine::fire_all(): several rows move together or none does (issue 41) ------------

TEST_CASE("fire_all moves every row or none, names each row that failed, and audits each move", "[transition][cart]") {
  auto c = ctx().connect();
  auto t = make_orders(*c, 4);  // 1..4 pending, amount 50
  StateMachine sm(*c, order_spec(t, true));
  const std::string machine = t;
  REQUIRE(sm.fire(4, "pay", {.values = {100}}));
  const auto audits = audit_count(machine);

  // Row 4 is paid already, row 2's guard (amount <= 49) fails, row 99 does not exist: nothing moves.
  auto r = sm.fire_all({{1, {100}}, {2, {49}}, {4, {100}}, {99, {100}}}, "pay", "ops");
  CHECK(r.status == TransitionStatus::kRejected);
  CHECK(r.event == "pay");
  CHECK(r.to == "paid");
  REQUIRE(r.failures.size() == 3);
  CHECK((r.failures[0].index == 1 && r.failures[0].status == TransitionStatus::kRejected && r.failures[0].guard_failed &&
         r.failures[0].current_state == std::optional<std::string>("pending")));
  CHECK((r.failures[1].index == 2 && r.failures[1].status == TransitionStatus::kAlreadyInTarget &&
         r.failures[1].current_state == std::optional<std::string>("paid")));
  CHECK((r.failures[2].index == 3 && r.failures[2].status == TransitionStatus::kNotFound && !r.failures[2].current_state));
  for (int k = 1; k <= 3; ++k) CHECK(sm.state_of(k) == std::optional<std::string>("pending"));
  CHECK(audit_count(machine) == audits);

  // Every row may move: all three do, each audited with the state it left.
  r = sm.fire_all({{3, {100}}, {1, {50}}, {2, {100}}}, "pay", "ops");
  CHECK(r.status == TransitionStatus::kApplied);
  CHECK(r.failures.empty());
  for (int k = 1; k <= 4; ++k) CHECK(sm.state_of(k) == std::optional<std::string>("paid"));
  CHECK(audit_count(machine) == audits + 3);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM sqlguard_transition_audit WHERE machine = ? AND event = 'pay' AND "
                          "from_state = 'pending' AND to_state = 'paid' AND actor = 'ops'",
                          {machine}) == 3);
  // A multi-from event: each row's own from-state is audited.
  REQUIRE(sm.fire(1, "ship"));
  r = sm.fire_all({{1, {}}, {2, {}}}, "cancel");
  CHECK(r.status == TransitionStatus::kRejected);  // 1 is shipped: nothing cancelled
  CHECK(sm.state_of(2) == std::optional<std::string>("paid"));
  CHECK(sm.fire_all({{2, {}}, {3, {}}}, "cancel"));
  CHECK(sm.state_of(3) == std::optional<std::string>("cancelled"));

  // Negative control: the same batch as single fire() calls moves the rows before the one that fails.
  auto t2 = make_orders(*c, 2);
  StateMachine one(*c, order_spec(t2));
  CHECK(one.fire(1, "pay", {.values = {100}}));
  CHECK_FALSE(one.fire(2, "pay", {.values = {49}}));
  CHECK(one.state_of(1) == std::optional<std::string>("paid"));
}

TEST_CASE("fire_all refuses an undeclared event and bad items before any SQL", "[transition][cart]") {
  auto c = ctx().connect();
  auto t = make_orders(*c, 2);
  StateMachine sm(*c, order_spec(t));
  CHECK_THROWS_AS(sm.fire_all({{1, {100}}}, "refund"), Error);
  try {
    sm.fire_all({{1, {100}}}, "refund");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidTransition);
  }
  CHECK_THROWS_WITH(sm.fire_all({}, "pay"), Contains("no items"));
  CHECK_THROWS_WITH(sm.fire_all({{1, {100}}, {1, {100}}}, "pay"), Contains("items[1] repeats the key of items[0]"));
  CHECK_THROWS_WITH(sm.fire_all({{1, {}}}, "pay"), Contains("items[0] has 0 values; expected 1"));
  CHECK_THROWS_WITH(sm.fire_all({{Value(), {1}}}, "pay"), Contains("NULL key"));
  CHECK_THROWS_WITH(sm.fire_all({{1, {100}}}, "pay", std::string(300, 'a')), Contains("actor"));
  CHECK(sm.max_keys_per_call("pay") == 1000);
  CHECK(sm.state_of(1) == std::optional<std::string>("pending"));
}

TEST_CASE("fire_all calls on the same rows in opposite orders never deadlock; the first moves them all",
          "[transition][cart][contention]") {
  auto c = ctx().connect();
  auto t = make_orders(*c, 8);
  std::atomic<int> applied{0}, in_target{0}, errors{0};
  std::string first_error;
  std::mutex mu;
  std::vector<std::thread> ts;
  for (int w = 0; w < 4; ++w)
    ts.emplace_back([&, w] {
      auto mine = ctx().connect();
      StateMachine sm(*mine, order_spec(t));
      std::vector<FireItem> items;
      for (int k = 1; k <= 8; ++k) items.push_back({k, {}});
      if (w % 2) std::reverse(items.begin(), items.end());
      try {
        auto r = sm.fire_all(items, "cancel");
        if (r) ++applied;
        else if (r.status == TransitionStatus::kAlreadyInTarget && r.failures.size() == 8) ++in_target;
      } catch (const Error& e) {
        ++errors;
        std::lock_guard<std::mutex> lk(mu);
        first_error = e.what();
      }
    });
  for (auto& th : ts) th.join();
  INFO(first_error);
  CHECK(errors == 0);
  CHECK(applied == 1);
  CHECK(in_target == 3);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM " + t + " WHERE status = 'cancelled'") == 8);
}

TEST_CASE("fire_all on a table declared versioned moves each row's version once", "[transition][cart]") {
  auto c = ctx().connect();
  std::string t = ctx().unique("tr_vorders");
  c->execute_script("CREATE TABLE " + t +
                    " (id INTEGER NOT NULL PRIMARY KEY, status VARCHAR(16) NOT NULL, amount INTEGER NOT NULL, "
                    "version INTEGER NOT NULL)");
  for (int i = 1; i <= 3; ++i) c->execute("INSERT INTO " + t + " (id, status, amount, version) VALUES (?, 'pending', 50, 0)", {i});
  StateMachine sm(*c, order_spec(t));
  declare_versioned_table(*c, t, "version");  // after construction: the write looks it up
  CHECK(sm.fire_all({{2, {60}}, {1, {60}}}, "pay"));
  CHECK(sgtest::query_int("SELECT SUM(version) FROM " + t) == 2);
  CHECK(sgtest::query_int("SELECT version FROM " + t + " WHERE id = 3") == 0);
  CHECK_FALSE(sm.fire_all({{3, {60}}, {1, {60}}}, "pay"));  // 1 is paid: nothing moves, no version either
  CHECK(sgtest::query_int("SELECT SUM(version) FROM " + t) == 2);
}
