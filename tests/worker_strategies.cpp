// Worker modes for the row-lock, CAS and transition tests. Every mode takes a
// start time (ms since epoch) as its LAST argument and sleeps until then, so
// all processes of a test hit the database together.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "sqlguard/retry.h"
#include "sqlguard/row_lock.h"
#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"
#include "worker_registry.h"

using namespace sqlguard;

namespace {
void wait_until(const std::string& start_ms) {
  auto target = std::chrono::system_clock::time_point(std::chrono::milliseconds(std::stoll(start_ms)));
  std::this_thread::sleep_until(target);
}
}  // namespace

// cas-increment TABLE KEY COUNT START: COUNT read-modify-write increments of
// `n` through VersionCas::update(); prints "attempts conflicts".
static sgworker::Register cas_increment("cas-increment", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = make_connection(uri);
  VersionCas cas(*conn, {.table = a.at(0), .columns = {"n"}});
  RetryPolicy policy;
  policy.max_attempts = 500;
  policy.initial_backoff = std::chrono::milliseconds(1);
  policy.max_backoff = std::chrono::milliseconds(20);
  int count = std::stoi(a.at(2));
  std::int64_t key = std::stoll(a.at(1));
  wait_until(a.at(3));
  int attempts = 0, conflicts = 0;
  for (int i = 0; i < count; ++i) {
    auto r = cas.update(key, [](const Versioned& cur) -> std::optional<Params> {
      return Params{cur.values.at(0).as_int() + 1};
    }, policy);
    attempts += r.stats.attempts;
    conflicts += r.stats.conflicts + r.stats.busy;
    if (!r) {
      std::fprintf(stderr, "increment %d ended %s\n", i, std::string(to_string(r.status)).c_str());
      return 3;
    }
  }
  std::printf("%d %d\n", attempts, conflicts);
  return 0;
});

// guarded-order STOCK ORDERS WORKER N START: N orders of one unit through the
// guarded decrement, each with its order row in the same transaction; prints
// how many sold.
static sgworker::Register guarded_order("guarded-order", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = make_connection(uri);
  GuardedUpdate dec(*conn, {.table = a.at(0),
                            .key_column = "id",
                            .assignments = {{"qty", AssignOp::kSubtract}},
                            .guards = {{"qty", Compare::kGe}}});
  std::string insert = "INSERT INTO " + a.at(1) + " (worker, n) VALUES (?, ?)";
  int worker = std::stoi(a.at(2)), n = std::stoi(a.at(3));
  wait_until(a.at(4));
  int sold = 0;
  for (int i = 0; i < n; ++i) {
    Transaction tx(*conn);
    if (dec.apply(1, {1, 1})) {
      tx.execute(insert, {worker, i});
      tx.commit();
      ++sold;
    }
  }
  std::printf("%d\n", sold);
  return 0;
});

// naive-order STOCK WORKER N THINK_MS START: the negative control. Reads the
// stock, "thinks", then writes the decremented value back without any lock
// or condition: a lost-update race that oversells. Prints how many it sold.
static sgworker::Register naive_order("naive-order", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = make_connection(uri);
  int n = std::stoi(a.at(2));
  auto think = std::chrono::milliseconds(std::stoi(a.at(3)));
  wait_until(a.at(4));
  int sold = 0;
  for (int i = 0; i < n; ++i) {
    auto qty = conn->execute("SELECT qty FROM " + a.at(0) + " WHERE id = 1").rows.at(0)[0].as_int();
    std::this_thread::sleep_for(think);
    if (qty >= 1) {
      conn->execute("UPDATE " + a.at(0) + " SET qty = ? WHERE id = 1", {qty - 1});
      ++sold;
    }
  }
  std::printf("%d\n", sold);
  return 0;
});

// claim-jobs JOBS WORKER START: claims pending jobs one at a time with SKIP
// LOCKED until none is left; prints each claimed id on its own line.
static sgworker::Register claim_jobs("claim-jobs", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = make_connection(uri);
  RowLocker jobs(*conn, {.table = a.at(0), .key_column = "id", .claim_filter = {"status"}});
  std::string done = "UPDATE " + a.at(0) + " SET status = 'done', claimed_by = ?, claims = claims + 1 WHERE id = ?";
  RowLockOptions o;
  o.wait = LockWait::kSkipLocked;
  int worker = std::stoi(a.at(1));
  wait_until(a.at(2));
  for (;;) {
    auto scope = jobs.claim(1, {"pending"}, o);
    if (scope.status() != LockStatus::kLocked) break;
    auto id = scope.rows().at(0)[0].as_int();
    scope.execute(done, {worker, id});
    scope.commit();
    std::printf("%lld\n", static_cast<long long>(id));
  }
  return 0;
});

// fire-pay ORDERS NKEYS ACTOR START: fires "pay" (audited) on keys 1..NKEYS;
// prints "key outcome" per key.
static sgworker::Register fire_pay("fire-pay", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = make_connection(uri);
  StateMachine sm(*conn, {.table = a.at(0),
                          .states = {"pending", "paid", "shipped", "cancelled"},
                          .terminal_states = {"cancelled"},
                          .transitions = {{.event = "pay", .from = {"pending"}, .to = "paid"},
                                          {.event = "ship", .from = {"paid"}, .to = "shipped"},
                                          {.event = "cancel", .from = {"pending", "paid"}, .to = "cancelled"}},
                          .audit = AuditSpec{}});
  int n = std::stoi(a.at(1));
  wait_until(a.at(3));
  for (int k = 1; k <= n; ++k) {
    auto r = sm.fire(k, "pay", {.values = {}, .actor = a.at(2)});
    std::printf("%d %s\n", k, std::string(to_string(r.status)).c_str());
  }
  return 0;
});
