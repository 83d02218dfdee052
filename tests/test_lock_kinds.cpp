// A name is one lock (issue 36, items 2 and 3; docs/synchronizers.md): a name
// used as one kind of lock (lease, semaphore, read-write lease) is refused as
// another, at once and naming both kinds, held or not; two first uses of one
// name as two kinds at the same instant never both acquire; a semaphore asked
// with another count than its own is refused naming both counts, and the
// count changes only explicitly (resize_semaphore, Semaphore::set_permits).
// Fair and non-fair handles of one kind share the name (they exclude each
// other as one lock). On every dialect.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sqlguard/admin.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/lock_kinds.h"
#include "sqlguard/migrate.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
#include "strategies/kinds.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::code_of;
using sgtest::ctx;

namespace {

LeaseOptions opts(bool fair = false) {
  LeaseOptions o;
  o.ttl = 5s;
  o.backoff_max = 50ms;
  o.fair = fair;
  return o;
}

// One way to use a name: a handle of `client`, tried once and released.
struct Use {
  std::function<bool()> try_acquire;
  std::function<bool()> release;
};

struct Kind {
  std::string label;   // for the test's messages
  std::string family;  // uses of one family are one kind of lock: they may share a name
  std::string is;      // how an error names a name of this kind ("is a ...")
  std::string asked;   // how an error names a use of this kind ("asked as a ...")
  std::function<Use(std::shared_ptr<LockClient>, const std::string&)> make;
};

// Every kind of lock_kinds.def, made by make_lock (a new kind is in this
// table without a line here): a semaphore of 1 permit, fair or not, and both
// sides of a read-write lease.
std::vector<Kind> kinds() {
  auto use = [](LockSpec spec, bool fair) {
    return [spec, fair](std::shared_ptr<LockClient> c, const std::string& n) {
      std::shared_ptr<Lock> l = make_lock(c, n, spec, opts(fair));
      return Use{[l] { return l->try_acquire(); }, [l] { return l->release(); }};
    };
  };
  std::vector<Kind> out;
  for (LockKind k : lock_kinds()) {
    const std::string name(to_string(k)), noun = detail::kind_noun(name);
    // Fair and non-fair leases are one kind of lock: one family.
    const std::string family = k == LockKind::kFairLease ? "lease" : name;
    const std::string is = family == "lease" ? "lease" : noun;
    LockSpec spec{k};
    if (k == LockKind::kSemaphore) {
      spec.permits = 1;
      out.push_back({"fair semaphore", family, is, noun, use(spec, true)});
    }
    if (k == LockKind::kReadWrite) {
      out.push_back({"exclusive", family, is, noun, use(spec, false)});
      spec.mode = LeaseMode::kShared;
      out.push_back({"shared", family, is, noun, use(spec, false)});
      continue;
    }
    out.push_back({k == LockKind::kFairLease ? "fair lease" : name, family, is, noun, use(spec, false)});
  }
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The explicit way to change a semaphore's count (one line, so that a
// negative control on the old code can stand in set_permits).
std::int64_t resize(Connection& conn, const std::string& name, std::int64_t permits) {
  return resize_semaphore(conn, name, permits);
}

// A lease's "is a ..." part: "is a lease" or "is a fair lease" (a fair
// lease's name that has had waiters).
bool names_stored(const std::string& what, const Kind& k) {
  if (k.family == "lease") return has(what, "is a lease") || has(what, "is a fair lease");
  return has(what, "is " + k.is);
}

}  // namespace

TEST_CASE("a name held as one kind of lock is refused as every other kind at once, naming both kinds, and still "
          "after its release; kinds of one family exclude each other",
          "[lock-kinds]") {
  auto a = LockClient::create(ctx().uri);
  auto b = LockClient::create(ctx().uri);
  int n = 0;
  for (const auto& first : kinds())
    for (const auto& second : kinds()) {
      const std::string name = ctx().unique("kinds" + std::to_string(n++));
      INFO(first.label << " held, then " << second.label << " on '" << name << "'");
      Use held = first.make(a, name);
      REQUIRE(held.try_acquire());
      Use other = second.make(b, name);
      if (first.family == second.family) {
        // One kind of lock (fair and non-fair handles share it): the holder
        // excludes it as its own kind does.
        if (first.label != "shared" || second.label != "shared") CHECK_FALSE(other.try_acquire());
        CHECK(held.release());
        continue;
      }
      std::string what;
      bool acquired = false;
      CHECK(code_of([&] { acquired = other.try_acquire(); }, &what) == ErrorCode::kInvalidArgument);
      CHECK_FALSE(acquired);
      INFO(what);
      CHECK(names_stored(what, first));
      CHECK(has(what, "asked as " + second.asked));
      CHECK(has(what, "a name is one lock"));
      // The kind stays the name's while its rows exist, held or not.
      CHECK(held.release());
      what.clear();
      acquired = false;
      CHECK(code_of([&] { acquired = other.try_acquire(); }, &what) == ErrorCode::kInvalidArgument);
      CHECK_FALSE(acquired);
      CHECK(names_stored(what, first));
    }
}

TEST_CASE("a lease of a semaphore's name is refused at once, by the free function and by a waiting acquire, plain "
          "or fair; the name's reservation is neither listed nor force-released nor deleted as a lease",
          "[lock-kinds]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("kindsem");
  Semaphore sem(client, name, 2, opts());
  REQUIRE(sem.try_acquire());
  auto conn = ctx().connect();
  std::string what;
  CHECK(code_of([&] { acquire_lease(*conn, name, "someone", 5s); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(has(what, "is a semaphore of 2 permits; asked as a lease"));
  // A waiting acquire is refused at its first attempt, not at the end of its wait.
  LeaseLock lease(client, name, opts());
  const auto start = std::chrono::steady_clock::now();
  CHECK(code_of([&] { lease.acquire(20s); }) == ErrorCode::kInvalidArgument);
  CHECK(std::chrono::steady_clock::now() - start < 15s);
  LeaseLock fair(client, name, opts(true));
  CHECK(code_of([&] { fair.acquire(20s); }) == ErrorCode::kInvalidArgument);
  // The name's reservation is not a lease: not listed, not force-released,
  // not deleted by the operator's delete_lease.
  for (const auto& l : list_leases(*conn, true)) CHECK(l.name != name);
  CHECK_FALSE(force_release(*conn, name));
  CHECK_FALSE(admin::delete_lease(*conn, name));
  CHECK(code_of([&] { acquire_lease(*conn, name, "someone", 5s); }) == ErrorCode::kInvalidArgument);
  CHECK(sem.release());
}

TEST_CASE("two first uses of a name as two kinds at the same instant never both acquire; the same race between two "
          "holders of one semaphore of 2 permits does",
          "[lock-kinds]") {
  // Each round: a fresh name, two clients' threads released together, one
  // asks it as a lease (or a semaphore of 2 permits: the negative control),
  // the other as a semaphore or an exclusive read-write lease. A side that
  // loses the race may be refused (it saw the other kind) or "not acquired"
  // (contention: SQLite busy, a deadlock victim); the latter asks again while
  // the winner still holds and must then be refused: the name is the winner's
  // kind, not merely taken.
  struct Tally {
    int both = 0, one = 0, refused_in_race = 0, refused_after = 0, loser_not_refused = 0;
  };
  auto race = [](const std::string& base, int rounds, bool control) {
    auto a = LockClient::create(ctx().uri);
    auto b = LockClient::create(ctx().uri);
    Tally t;
    for (int r = 0; r < rounds; ++r) {
      const std::string name = ctx().unique(base + std::to_string(r));
      std::unique_ptr<LeaseLock> lease;
      std::unique_ptr<Semaphore> first;
      if (control) first = std::make_unique<Semaphore>(a, name, 2, opts());
      else lease = std::make_unique<LeaseLock>(a, name, opts());
      std::unique_ptr<Semaphore> sem;
      std::unique_ptr<ReadWriteLease> rw;
      if (control || r % 2 == 0) sem = std::make_unique<Semaphore>(b, name, 2, opts());
      else rw = std::make_unique<ReadWriteLease>(b, name, opts());
      auto try_a = [&] { return control ? first->try_acquire() : lease->try_acquire(); };
      auto try_b = [&] { return sem ? sem->try_acquire() : rw->try_acquire(LeaseMode::kExclusive); };
      // 1: acquired, 0: not acquired, -1: refused as another kind.
      auto attempt = [](const std::function<bool()>& f) {
        try {
          return f() ? 1 : 0;
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kInvalidArgument) throw;
          return -1;
        }
      };
      std::atomic<int> ready{0};
      auto go = [&ready] {
        ++ready;
        while (ready.load() < 2) std::this_thread::yield();
      };
      int got_a = 0, got_b = 0;
      std::thread ta([&] {
        go();
        got_a = attempt(try_a);
      });
      std::thread tb([&] {
        go();
        got_b = attempt(try_b);
      });
      ta.join();
      tb.join();
      t.refused_in_race += (got_a < 0) + (got_b < 0);
      if (got_a == 1 && got_b == 1) ++t.both;
      if ((got_a == 1) != (got_b == 1)) {
        ++t.one;
        if (got_a == 0 || got_b == 0) {
          const int again = attempt(got_a == 0 ? std::function<bool()>(try_a) : std::function<bool()>(try_b));
          if (again < 0) ++t.refused_after;
          else {
            ++t.loser_not_refused;
            if (again == 1) got_a == 0 ? (got_a = 1) : (got_b = 1);
          }
        }
      }
      if (got_a == 1) control ? first->release() : lease->release();
      if (got_b == 1) sem ? sem->release() : rw->release();
    }
    return t;
  };
  const int rounds = ctx().is_sqlite() ? 20 : 40;
  const Tally kinds = race("kindrace", rounds, false);
  INFO("rounds " << rounds << ": both acquired " << kinds.both << ", one " << kinds.one << ", refused in the race "
                 << kinds.refused_in_race << ", refused on asking again " << kinds.refused_after
                 << ", loser not refused " << kinds.loser_not_refused);
  CHECK(kinds.both == 0);
  CHECK(kinds.one > 0);
  CHECK(kinds.loser_not_refused == 0);
  CHECK(kinds.refused_in_race + kinds.refused_after == kinds.one);
  // Negative control: the harness does make both sides acquire at once when
  // the name allows it, so "both == 0" above could have failed; and a loser
  // of a name that is not another kind is not refused, so the refusal count
  // above could have fallen short.
  const Tally control = race("kindctl", rounds, true);
  INFO("control: both acquired " << control.both << ", one " << control.one << ", refused "
                                 << control.refused_in_race + control.refused_after);
  CHECK(control.both > 0);
  CHECK(control.refused_in_race + control.refused_after == 0);
}

TEST_CASE("a semaphore asked with another count than its own is refused naming both counts and the way to change "
          "it; resize_semaphore changes it for every user",
          "[lock-kinds][semaphore]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("kindpermits");
  Semaphore three(client, name, 3, opts());
  REQUIRE(three.try_acquire());
  Semaphore one(client, name, 1, opts());
  std::string what;
  bool acquired = false;
  CHECK(code_of([&] { acquired = one.try_acquire(); }, &what) == ErrorCode::kInvalidArgument);
  CHECK_FALSE(acquired);
  INFO(what);
  CHECK(has(what, "has 3 permits; asked with 1"));
  CHECK(has(what, "lock resize"));
  CHECK(has(what, "set_permits"));
  CHECK(code_of([&] { one.acquire(1, 10s); }) == ErrorCode::kInvalidArgument);  // at once, not after the wait
  // The explicit way: the count changes for every user of the name.
  auto conn = ctx().connect();
  CHECK(resize(*conn, name, 1) == 3);
  CHECK(synchronizer_info(*conn, name).permits == 1);
  Semaphore three_more(client, name, 3, opts());
  CHECK(code_of([&] { three_more.try_acquire(); }, &what) == ErrorCode::kInvalidArgument);  // 3 is not its count now
  CHECK(has(what, "has 1 permits; asked with 3"));
  CHECK_FALSE(one.try_acquire());  // the holder above the new count keeps its permit
  CHECK(three.release());
  CHECK(one.try_acquire());
  CHECK(one.release());
  // A new name: resize creates it; a lease's name: refused naming both kinds.
  const std::string fresh = ctx().unique("kindresize");
  CHECK(resize(*conn, fresh, 4) == 0);
  CHECK(synchronizer_info(*conn, fresh).permits == 4);
  const std::string lease_name = ctx().unique("kindresizelease");
  REQUIRE(acquire_lease(*conn, lease_name, "someone", 5s).acquired);
  CHECK(code_of([&] { resize(*conn, lease_name, 2); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(has(what, "is a lease; asked as a semaphore"));
  CHECK(code_of([&] { resize(*conn, fresh, 0); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("migration 0008 reserves the names of semaphores and read-write leases made before it, so a lease of them "
          "is refused",
          "[lock-kinds][migrate]") {
  auto conn = make_connection(ctx().fresh_database());
  std::vector<Migration> before;
  for (auto& m : embedded_migrations(ctx().kind))
    if (m.version < 8) before.push_back(m);
  migrate(*conn, before);
  const Params sem{std::string("old-sem"), std::string("semaphore"), std::int64_t{2}};
  const Params rw{std::string("old-rw"), std::string("rw"), std::int64_t{0}};
  for (const auto& p : {sem, rw}) {
    // As sync_open wrote them before 0008.
    conn->execute("INSERT INTO sqlguard_sync (name, kind, permits) VALUES (?, ?, ?)", p);
  }
  migrate(*conn);
  for (const std::string name : {"old-sem", "old-rw"}) {
    INFO(name);
    std::string what;
    CHECK(code_of([&] { acquire_lease(*conn, name, "someone", 5s); }, &what) == ErrorCode::kInvalidArgument);
    CHECK(has(what, "asked as a lease"));
  }
}

namespace {
// The spec of a kind's exclusive use: a semaphore of one permit, a read-write
// lease's exclusive side, any other kind as it is.
LockSpec exclusive_spec(LockKind k) {
  LockSpec spec{k};
  if (k == LockKind::kSemaphore) spec.permits = 1;
  return spec;
}
}  // namespace

TEST_CASE("every kind of lock_kinds.def, made by make_lock, excludes another client, lists its holder, runs guarded "
          "work and hands over to a waiter with a larger fence; a two-permit semaphore is the control",
          "[lock-kinds][lock-family]") {
  auto a = LockClient::create(ctx().uri);
  auto b = LockClient::create(ctx().uri);
  auto conn = ctx().connect();
  REQUIRE(lock_kinds().size() >= 4);
  // tests/new_kind/run.sh: a kind added to a copy of the tree must be here.
  if (const char* expected = std::getenv("SQLGUARD_TEST_EXPECT_KIND")) {
    INFO("SQLGUARD_TEST_EXPECT_KIND=" << expected);
    bool known = false;
    for (LockKind k : lock_kinds()) known = known || to_string(k) == std::string(expected);
    REQUIRE(known);
  }
  for (LockKind k : lock_kinds()) {
    const std::string name = ctx().unique("mk_" + std::string(to_string(k)));
    INFO("kind " << to_string(k) << " on '" << name << "'");
    const LockSpec spec = exclusive_spec(k);
    std::shared_ptr<Lock> first = make_lock(a, name, spec, opts());
    std::shared_ptr<Lock> second = make_lock(b, name, spec, opts());
    CHECK(first->kind() == k);
    CHECK(first->name() == name);
    CHECK(lock_holders(*conn, name, k).empty());
    REQUIRE(first->try_acquire());
    CHECK_FALSE(second->try_acquire());
    auto holders = lock_holders(*conn, name, k);
    REQUIRE(holders.size() == 1);
    CHECK(holders[0].owner == first->owner());
    CHECK(holders[0].fence == first->fence());
    CHECK(holders[0].remaining_ms > 0);
    // Guarded work runs for the holder only.
    bool ran = false;
    CHECK(first->run_guarded([&](Transaction&) { ran = true; }));
    CHECK(ran);
    ran = false;
    CHECK_FALSE(second->run_guarded([&](Transaction&) { ran = true; }));
    CHECK_FALSE(ran);
    // A waiter on the other client gets it when the holder releases.
    auto waited = second->acquire_async(5s);
    CHECK(waited.wait_for(100ms) == std::future_status::timeout);
    const std::int64_t fence = first->fence();
    CHECK(first->release());
    REQUIRE(waited.wait_for(5s) == std::future_status::ready);
    CHECK(waited.get());
    CHECK(second->owns());
    CHECK(second->fence() > fence);
    holders = lock_holders(*conn, name, k);
    REQUIRE(holders.size() == 1);
    CHECK(holders[0].owner == second->owner());
    CHECK(second->release());
    CHECK(lock_holders(*conn, name, k).empty());
  }
  SECTION("control: a semaphore of 2 permits lets the second client in, and lists both holders") {
    const std::string name = ctx().unique("mk_control");
    LockSpec two{LockKind::kSemaphore};
    two.permits = 2;
    auto first = make_lock(a, name, two, opts());
    auto second = make_lock(b, name, two, opts());
    REQUIRE(first->try_acquire());
    CHECK(second->try_acquire());
    CHECK(lock_holders(*conn, name, LockKind::kSemaphore).size() == 2);
    CHECK(lock_holders(*conn, name, LockKind::kLease).empty());  // not of that kind: no holders
    CHECK(first->release());
    CHECK(second->release());
  }
}

TEST_CASE("a lock spec is read back as written and refused, naming what is wrong, when it does not fit its kind",
          "[lock-kinds]") {
  for (const char* text : {"lease", "fair", "semaphore:3", "rw:shared", "rw:exclusive"}) {
    INFO(text);
    CHECK(to_string(parse_lock_spec(text)) == text);
  }
  CHECK(parse_lock_spec("rw").mode == LeaseMode::kExclusive);
  for (LockKind k : lock_kinds()) {
    const std::string text = std::string(to_string(k)) + (k == LockKind::kSemaphore ? ":2" : "");
    CHECK(parse_lock_spec(text).kind == k);
  }
  std::string what;
  CHECK(code_of([] { parse_lock_spec("mutex"); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(has(what, "unknown lock kind 'mutex'"));
  CHECK(has(what, "lease, fair, semaphore, rw"));
  CHECK(code_of([] { parse_lock_spec("semaphore:x"); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(has(what, "a permit count"));
  CHECK(code_of([] { parse_lock_spec("semaphore:"); }, &what) == ErrorCode::kInvalidArgument);
  // make_lock checks a spec made without parse_lock_spec the same way.
  LockSpec counted{LockKind::kLease};
  counted.permits = 2;
  auto any_client = LockClient::create(ctx().uri);
  CHECK(code_of([&] { make_lock(any_client, ctx().unique("spec"), counted); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(has(what, "a lease takes no permit count"));

  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("spec");
  struct Bad {
    const char* spec;
    const char* says;
  } bad[] = {{"lease:3", "takes no permit count"},
             {"fair:shared", "has no shared side"},
             {"semaphore", "is 0; it must be between 1 and 1000000"},
             {"semaphore:1000001", "is 1000001; it must be between 1 and 1000000"},
             {"semaphore:shared", "has no shared side"},
             {"rw:2", "takes no permit count"}};
  for (const auto& b : bad) {
    INFO(b.spec);
    CHECK(code_of([&] { make_lock(client, name, parse_lock_spec(b.spec), opts()); }, &what) ==
          ErrorCode::kInvalidArgument);
    CHECK(has(what, b.says));
  }
  LeaseOptions fair = opts(true);
  CHECK(code_of([&] { make_lock(client, name, LockSpec{LockKind::kLease}, fair); }, &what) ==
        ErrorCode::kInvalidArgument);
  CHECK(has(what, "ask for kind 'fair'"));
  CHECK(code_of([&] { make_lock(std::shared_ptr<LockClient>(), name, LockSpec{}); }, &what) ==
        ErrorCode::kInvalidArgument);
  // A fair lease by its kind: make_lock sets options.fair.
  auto f = make_lock(client, name, LockSpec{LockKind::kFairLease}, opts());
  CHECK(f->kind() == LockKind::kFairLease);
}
