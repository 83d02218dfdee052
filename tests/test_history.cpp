// The grant history (include/sqlguard/history.h, issue 41 item 3): what the
// triggers record for every lock kind on every dialect, `verify` over real
// traffic, and forged records it must catch (the negative controls).
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "sqlguard/cleanup.h"
#include "sqlguard/history.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::code_of;
using sgtest::ctx;
using std::chrono::milliseconds;

namespace {
// Records the names under a fresh prefix for one test; stops on the way out.
struct Recorded {
  std::unique_ptr<Connection> conn = ctx().connect();
  std::string prefix;
  explicit Recorded(std::string_view base) : prefix(ctx().unique(base) + ":") { enable_history(*conn, prefix, 1h); }
  ~Recorded() {
    try {
      disable_history(*conn, prefix);
    } catch (...) {
    }
  }
  std::vector<HistoryEvent> of(const std::string& name) {
    HistoryQuery q;
    q.name = name;
    return read_history(*conn, q);
  }
  VerifyReport verify() {
    VerifyOptions o;
    o.prefix = prefix;
    return verify_history(*conn, o);
  }
};

std::vector<std::string> events(const std::vector<HistoryEvent>& h) {
  std::vector<std::string> out;
  for (const auto& e : h) out.push_back(e.event);
  return out;
}

LeaseOptions opts(milliseconds ttl = 5s) {
  LeaseOptions o;
  o.ttl = ttl;
  o.backoff_initial = 2ms;
  o.backoff_max = 20ms;
  return o;
}

// A forged row: what a broken lock would have written.
void forge(Connection& c, const HistoryEvent& e) {
  c.execute(
      "INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, "
      "prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {e.name, e.at_ms, e.event, e.kind, e.mode, e.slot, e.owner, e.fence, e.permits, e.capacity, e.until_ms,
       e.prev_owner, e.prev_fence, e.prev_until_ms, e.prev_ttl_ms, e.at_ms + 3600000});
}

std::int64_t trigger_count(Connection& c) {
  const char* sql = ctx().is_sqlite() ? "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'sqlguard_history%'"
                    : ctx().is(DialectKind::kPostgresql)
                        ? "SELECT COUNT(*) FROM pg_trigger WHERE tgname LIKE 'sqlguard_history%'"
                        : "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND "
                          "TRIGGER_NAME LIKE 'sqlguard_history%'";
  return c.execute(sql).rows.at(0)[0].as_int();
}
bool triggers_installed(Connection& c) { return trigger_count(c) == 6; }
}  // namespace

TEST_CASE("the grant history records a lease's grant, release, take-over and late renewal, in scope only",
          "[history]") {
  Recorded rec("hist");
  auto c1 = ctx().connect(), c2 = ctx().connect();
  const std::string name = rec.prefix + "job", outside = ctx().unique("hist_out");
  std::string first_owner;
  std::int64_t first_fence = 0;
  {
    LeaseLock a(*c1, name, opts()), o(*c1, outside, opts());
    REQUIRE(a.try_acquire());
    REQUIRE(o.try_acquire());
    first_fence = a.fence();
    first_owner = a.owner();
    REQUIRE(a.release());
    REQUIRE(o.release());
    auto h = rec.of(name);
    // The release goes in with the write that ends its released row (below).
    REQUIRE(events(h) == std::vector<std::string>{"grant"});
    CHECK(h[0].owner == a.owner());
    CHECK(h[0].fence == first_fence);
    CHECK(h[0].kind == "lease");
    CHECK(h[0].until_ms > h[0].at_ms);
    CHECK(rec.of(outside).empty());  // not under the prefix
  }
  // The next grant carries the released holding and its release time; a
  // renewal after its own expiry (nobody took it over) is a renew_gap.
  LeaseOptions short_ttl = opts(150ms);
  short_ttl.safety_margin = 10ms;
  LeaseLock b(*c1, name, short_ttl);
  REQUIRE(b.try_acquire());
  std::this_thread::sleep_for(300ms);
  REQUIRE(b.renew());
  // A take-over of the unreleased lease under the database-clock rule once it
  // has run out: the event names the holding it ended and its expiry.
  std::this_thread::sleep_for(300ms);
  LeaseOptions taker_opts = opts();
  taker_opts.take_over = TakeOver::kDatabaseClock;
  LeaseLock c(*c2, name, taker_opts);
  REQUIRE(c.try_acquire());
  auto h = rec.of(name);
  REQUIRE(events(h) == std::vector<std::string>{"grant", "grant", "renew_gap", "takeover"});
  CHECK(h[1].id > h[0].id);
  CHECK(h[1].prev_owner == first_owner);  // the released holding
  CHECK(h[1].prev_fence == first_fence);
  CHECK(h[1].prev_until_ms >= h[0].at_ms);  // its release time
  CHECK(h[1].prev_until_ms <= h[1].at_ms);
  CHECK(h[3].owner == c.owner());
  CHECK(h[3].prev_owner == h[1].owner);
  CHECK(h[3].prev_fence == h[1].fence);
  CHECK(h[3].prev_until_ms == h[2].until_ms);  // the late renewal's expiry
  CHECK(h[3].prev_ttl_ms == 150);
  CHECK(h[3].at_ms >= h[3].prev_until_ms);
  auto r = rec.verify();
  CHECK(r.ok());
  CHECK(r.events == 4);
  CHECK(r.grants == 3);
  CHECK(r.releases == 1);
  CHECK(r.takeovers == 1);
  CHECK(r.renewal_gaps == 1);
  CHECK(r.unmatched == 0);
  // The last release: recorded when cleanup purges the released row, timed at the release.
  CHECK(c.release());
  CHECK(events(rec.of(name)).size() == 4);
  const auto released_at = rec.conn->db_now_ms();
  std::this_thread::sleep_for(20ms);
  CleanupOptions co;
  co.lock_grace = 0ms;
  cleanup(*rec.conn, co);
  h = rec.of(name);
  REQUIRE(events(h) == std::vector<std::string>{"grant", "grant", "renew_gap", "takeover", "release"});
  CHECK(h[4].fence == c.fence());
  CHECK(h[4].at_ms <= released_at);
  r = rec.verify();
  CHECK(r.ok());
  CHECK(r.releases == 2);
  CHECK(r.unmatched == 0);

  // The negative control: a take-over forged 2 s before the holder's expiry.
  HistoryEvent f = h[4];
  f.event = "takeover";
  f.at_ms = rec.conn->db_now_ms();
  f.owner = "forged";
  f.fence = c.fence() + 1000;
  f.prev_owner = c.owner();
  f.prev_fence = c.fence();
  f.prev_until_ms = f.at_ms + 2000;
  f.prev_ttl_ms = 5000;
  forge(*rec.conn, f);
  r = rec.verify();
  REQUIRE(r.violations.size() == 1);
  CHECK(r.violations[0].rule == "overlap");
  CHECK(r.violations[0].name == name);
  CHECK_THAT(r.violations[0].detail, Catch::Contains("early") && Catch::Contains("forged"));
}

TEST_CASE("verify finds forged overlaps of every kind: permits, a writer beside a reader, two kinds, a fence gone back",
          "[history]") {
  Recorded rec("histf");
  auto client = LockClient::create(ctx().uri);
  const std::string sem = rec.prefix + "sem", rw = rec.prefix + "rw", lease = rec.prefix + "lease";
  Semaphore s1(client, sem, 2, opts()), s2(client, sem, 2, opts());
  REQUIRE(s1.try_acquire());
  REQUIRE(s2.try_acquire());
  ReadWriteLease r1(client, rw, opts());
  REQUIRE(r1.try_acquire(LeaseMode::kShared));
  auto c = ctx().connect();
  LeaseLock l(*c, lease, opts());
  REQUIRE(l.try_acquire());
  auto clean = rec.verify();
  REQUIRE(clean.ok());  // the real record holds
  CHECK(clean.grants == 4);
  auto sh = rec.of(sem);
  REQUIRE(events(sh) == std::vector<std::string>{"grant", "grant"});
  CHECK(sh[1].kind == "semaphore");
  CHECK(sh[1].capacity == 2);
  CHECK(sh[1].mode == "P");
  CHECK(rec.of(rw).at(0).kind == "rw");
  CHECK(rec.of(rw).at(0).mode == "S");

  const auto now = rec.conn->db_now_ms();
  HistoryEvent third = sh[1];  // a third permit of two
  third.at_ms = now;
  third.slot = 999;
  third.fence += 100;
  third.owner = "forged-permit";
  forge(*rec.conn, third);
  HistoryEvent writer = rec.of(rw).at(0);  // a writer beside the reader
  writer.at_ms = now;
  writer.slot = 999;
  writer.mode = "X";
  writer.fence += 100;
  writer.owner = "forged-writer";
  forge(*rec.conn, writer);
  HistoryEvent kind = rec.of(lease).at(0);  // a semaphore grant on a held lease's name
  kind.at_ms = now;
  kind.kind = "semaphore";
  kind.mode = "P";
  kind.slot = 1;
  kind.capacity = 5;
  kind.owner = "forged-kind";
  forge(*rec.conn, kind);
  auto r = rec.verify();
  REQUIRE(r.violations.size() == 3);
  CHECK(r.violations[0].rule == "permits");
  CHECK(r.violations[0].name == sem);
  CHECK(r.violations[1].rule == "overlap");
  CHECK(r.violations[1].name == rw);
  CHECK(r.violations[2].rule == "two_kinds");
  CHECK(r.violations[2].name == lease);
  REQUIRE(r.violations[2].other);
  CHECK(r.violations[2].other->owner == l.owner());
  CHECK(l.release());
  // A lease granted a fence below one already granted.
  HistoryEvent back = rec.of(lease).at(0);
  back.at_ms = rec.conn->db_now_ms();
  back.fence -= 1;
  back.owner = "forged-fence";
  forge(*rec.conn, back);
  VerifyOptions vo;
  vo.prefix = lease;
  auto rf = verify_history(*rec.conn, vo);
  bool fence_order = false;
  for (const auto& v : rf.violations) fence_order |= v.rule == "fence_order";
  CHECK(fence_order);
  CHECK(s1.release());
  CHECK(s2.release());
  CHECK(r1.release());
}

TEST_CASE("concurrent holders of leases, permits and read-write holdings: one grant and one release recorded per holding, verify holds",
          "[history]") {
  Recorded rec("histc");
  auto client = LockClient::create(ctx().uri);
  const std::string sem = rec.prefix + "s", rw = rec.prefix + "rw";
  std::atomic<int> grants{0}, stop{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      LeaseOptions o = opts(3s);
      o.fair = t >= 2;  // a default lease for threads 0 and 1, a fair one for 2 and 3
      LeaseLock l(client, rec.prefix + (o.fair ? "fair" : "default"), o);
      Semaphore s(client, sem, 2, opts(3s));
      ReadWriteLease r(client, rw, opts(3s));
      const LeaseMode mode = t == 0 ? LeaseMode::kExclusive : LeaseMode::kShared;
      while (!stop) {
        if (l.acquire(2s)) {
          ++grants;
          l.release();
        }
        if (s.acquire(2s)) {
          ++grants;
          s.release();
        }
        if (r.acquire(mode, 2s)) {
          ++grants;
          r.release();
        }
      }
    });
  std::this_thread::sleep_for(1500ms);
  stop = 1;
  for (auto& t : ts) t.join();
  // The last releases go in when their released rows are purged.
  std::this_thread::sleep_for(20ms);
  CleanupOptions co;
  co.lock_grace = 0ms;
  cleanup(*rec.conn, co);
  auto r = rec.verify();
  INFO("grants " << grants << ", recorded grants " << r.grants << ", releases " << r.releases);
  CHECK(r.ok());
  CHECK(grants > 12);
  // Every grant and every release recorded once (a release with the next
  // grant or the purge of its row); a hand-over counts as the releasing
  // holder's release and the next holder's grant, its confirmation as neither.
  CHECK(r.grants == grants);
  CHECK(r.releases == grants);
  CHECK(r.takeovers == 0);
  CHECK(r.unmatched == 0);
}

TEST_CASE("a bounded-barging hand-over and its confirmation are recorded, and verify reads them as one holder each",
          "[history][barging]") {
  Recorded rec("histb");
  auto c1 = ctx().connect(), c2 = ctx().connect(), probe = ctx().connect();
  // One hand-over: the waiter takes the turn at once (barging_limit 0) and
  // then pauses `pause` at a time, listening; the holder releases `after`
  // once the turn is the waiter's.
  auto handover = [&](const std::string& name, milliseconds ttl, milliseconds pause, milliseconds after) {
    LeaseOptions h = opts(), w = opts(ttl);
    w.barging_limit = 0ms;
    w.backoff_initial = w.backoff_max = pause;
    LeaseLock holder(*c1, name, h), waiter(*c2, name, w);
    REQUIRE(holder.try_acquire());
    auto got = std::async(std::launch::async, [&] { return waiter.acquire(5s); });
    REQUIRE(sgtest::eventually([&] {
      return !probe->execute("SELECT next_owner FROM sqlguard_lock WHERE name = ?", {name}).rows.at(0)[0].as_string().empty();
    }, 5s));
    std::this_thread::sleep_for(after);
    REQUIRE(holder.release());
    REQUIRE(got.get());
    auto ev = events(rec.of(name));
    CHECK(waiter.release());
    return ev;
  };
  // The waiter listens in a long pause when the release comes: the release's
  // wake-up (MariaDB: its wake-up lock; SQLite: its futex word; PostgreSQL:
  // the NOTIFY that carries the grant) or its read shows the hand-over, and
  // it holds the lease as handed, with no confirming write. (Behind a
  // transaction pooler nothing wakes it: its polling attempt confirms.)
  CHECK(handover(rec.prefix + "bb", 5s, 2s, 200ms) ==
        (ctx().pooler ? std::vector<std::string>{"grant", "handover", "confirm"}
                      : std::vector<std::string>{"grant", "handover"}));
  // A wait that began more than half a ttl before the hand-over confirms it
  // with a take of its own (the trust window counted from its start is too
  // short to hold it as handed), on every dialect.
  CHECK(handover(rec.prefix + "bc", 400ms, 20ms, 300ms) == std::vector<std::string>{"grant", "handover", "confirm"});
  auto r = rec.verify();
  CHECK(r.ok());
  CHECK(r.takeovers == 0);
  CHECK(r.unmatched == 0);
  // Each holder's release is recorded as every other (with its row's purge).
  std::this_thread::sleep_for(20ms);
  CleanupOptions co;
  co.lock_grace = 0ms;
  cleanup(*rec.conn, co);
  r = rec.verify();
  CHECK(r.ok());
  CHECK(r.grants == 4);
  CHECK(r.releases == 4);
  CHECK(r.unmatched == 0);
}

TEST_CASE("history scopes: the triggers exist while a scope does, cleanup keeps rows for their retention", "[history]") {
  auto c = ctx().connect();
  const std::string prefix = ctx().unique("hists") + ":";
  enable_history(*c, prefix, 1min);
  CHECK(triggers_installed(*c));
  bool listed = false;
  for (const auto& s : history_scopes(*c))
    if (s.prefix == prefix) listed = s.retention == 1min && s.since_ms > 0;
  CHECK(listed);
  LeaseLock l(*c, prefix + "x", opts());
  REQUIRE(l.try_acquire());
  REQUIRE(l.release());
  std::this_thread::sleep_for(20ms);
  CleanupOptions purge;
  purge.lock_grace = 0ms;
  purge.history = false;
  cleanup(*c, purge);  // the released row purged: its release recorded
  HistoryQuery q;
  q.prefix = prefix;
  REQUIRE(read_history(*c, q).size() == 2);
  // Retention: rows past keep_until go at the next cleanup, the others stay.
  c->execute("UPDATE sqlguard_history SET keep_until = 1 WHERE name = ? AND event = 'grant'", {prefix + "x"});
  CleanupOptions co;
  co.locks = co.idempotency = co.inbox = false;
  CHECK(cleanup(*c, co).history_deleted >= 1);
  auto left = read_history(*c, q);
  REQUIRE(left.size() == 1);
  CHECK(left[0].event == "release");
  CHECK(disable_history(*c, prefix));
  CHECK_FALSE(disable_history(*c, prefix));  // already gone
  // Nothing is recorded once the scope is gone.
  REQUIRE(l.try_acquire());
  REQUIRE(l.release());
  std::this_thread::sleep_for(20ms);
  cleanup(*c, purge);
  CHECK(read_history(*c, q).size() == 1);
  // With no scope left at all the triggers are gone (other tests' scopes may
  // still be there: then they stay, as they must).
  if (history_scopes(*c).empty()) CHECK_FALSE(triggers_installed(*c));
}

TEST_CASE("overlapping scopes: one row per event with the longest retention; scopes changed from two connections at once",
          "[history]") {
  auto c = ctx().connect(), c2 = ctx().connect();
  const std::string base = ctx().unique("histo");
  const std::string outer = base + ":", inner = base + ":pay:";
  // Two scopes changed at once below; the second's prefix has a quote, a
  // backslash and a two-byte character (the triggers carry it as hex bytes).
  const std::string p1 = base + ":t1:", p2 = base + ":t2'\\\xc3\xbc:";
  struct Disable {  // on the way out, pass or fail: no scope of this test left recording
    Connection& conn;
    std::vector<std::string> prefixes;
    ~Disable() {
      for (const auto& p : prefixes) try {
          disable_history(conn, p);
        } catch (...) {
        }
    }
  } disable_all{*c, {outer, inner, p1, p2}};
  auto retained = [&](const std::string& name) {  // keep_until - at_ms of each row of the name
    std::vector<std::int64_t> out;
    for (const auto& row :
         c->execute("SELECT keep_until - at_ms FROM sqlguard_history WHERE name = ? ORDER BY id", {name}).rows)
      out.push_back(row[0].as_int());
    return out;
  };
  auto cycle = [&](const std::string& name) {
    LeaseLock l(*c, name, opts());
    REQUIRE(l.try_acquire());
    REQUIRE(l.release());
  };
  using Ms = std::vector<std::int64_t>;
  enable_history(*c, outer, 1h);
  enable_history(*c, inner, 2h);
  cycle(inner + "a");
  cycle(outer + "b");
  CHECK(retained(inner + "a") == Ms{7200000});  // both scopes cover it: one row, the longer retention
  CHECK(retained(outer + "b") == Ms{3600000});
  enable_history(*c, inner, 30min);  // a new retention, shorter than the outer scope's now
  cycle(inner + "c");
  CHECK(retained(inner + "c") == Ms{3600000});
  CHECK(disable_history(*c, outer));  // the inner scope still records; outer-only names stop
  cycle(inner + "d");
  cycle(outer + "e");
  CHECK(retained(inner + "d") == Ms{1800000});
  CHECK(retained(outer + "e").empty());
  CHECK(disable_history(*c, inner));  // none of this test's scopes left
  // Two connections change their own scopes at the same moment, three rounds:
  // after each change both sets of names are recorded, or neither, and a drop
  // of the last scope racing another's install leaves that one recording
  // (scope changes are serialized by the migration lock).
  for (std::size_t round = 1; round <= 3; ++round) {
    auto f1 = std::async(std::launch::async, [&] { enable_history(*c, p1, 1h); });
    auto f2 = std::async(std::launch::async, [&] { enable_history(*c2, p2, 1h); });
    f1.get();
    f2.get();
    cycle(p1 + "x");
    cycle(p2 + "x");
    auto g1 = std::async(std::launch::async, [&] { return disable_history(*c, p1); });
    auto g2 = std::async(std::launch::async, [&] { return disable_history(*c2, p2); });
    CHECK(g1.get());
    CHECK(g2.get());
    cycle(p1 + "x");  // not recorded while disabled
    cycle(p2 + "x");
    enable_history(*c, p1, 1h);
    auto h1 = std::async(std::launch::async, [&] { return disable_history(*c, p1); });
    auto h2 = std::async(std::launch::async, [&] { enable_history(*c2, p2, 1h); });
    CHECK(h1.get());
    h2.get();
    cycle(p1 + "x");
    cycle(p2 + "x");
    CHECK(disable_history(*c, p2));
    CHECK(retained(p1 + "x").size() == round);
    CHECK(retained(p2 + "x").size() == 2 * round);
  }
}

TEST_CASE("history calls refuse bad input before any statement", "[history][bad-input]") {
  auto c = ctx().connect();
  CHECK(code_of([&] { enable_history(*c, "p", 0ms); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { enable_history(*c, std::string("a\0b", 3)); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { enable_history(*c, std::string(256, 'a')); }) == ErrorCode::kInvalidArgument);
  HistoryQuery q;
  q.limit = 0;
  CHECK(code_of([&] { read_history(*c, q); }) == ErrorCode::kInvalidArgument);
  q.limit = 10;
  q.name = "a";
  q.prefix = "b";
  CHECK(code_of([&] { read_history(*c, q); }) == ErrorCode::kInvalidArgument);
  VerifyOptions vo;
  vo.max_violations = 0;
  CHECK(code_of([&] { verify_history(*c, vo); }) == ErrorCode::kInvalidArgument);
  c->begin();
  CHECK(code_of([&] { enable_history(*c, "p"); }) == ErrorCode::kInvalidArgument);
  c->rollback();
}

TEST_CASE("enabling the history while a transaction holds a written lock row fails within seconds, disturbing nothing",
          "[history]") {
  if (ctx().is_sqlite()) return;  // SQLite: one writer; DDL waits for the write lock like any write
  auto holder = ctx().connect(), c = ctx().connect();
  const std::string prefix = ctx().unique("histl") + ":";
  LeaseLock l(*holder, prefix + "held", opts());
  REQUIRE(l.try_acquire());
  // A transaction that has written the lock row and not committed yet (a
  // release inside the caller's transaction, ReleaseCommit's flushed path).
  holder->begin();
  holder->execute("UPDATE sqlguard_lock SET renewed_at = renewed_at WHERE name = ?", {prefix + "held"});
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  CHECK(code_of([&] { enable_history(*c, prefix); }, &what) == ErrorCode::kLockBusy);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  CHECK_THAT(what, Catch::Contains("could not be changed within 2 s"));
  bool listed = false;
  for (const auto& s : history_scopes(*c)) listed |= s.prefix == prefix;
  CHECK_FALSE(listed);  // nothing half done: no scope without its triggers
  holder->commit();
  CHECK(l.owns());
  enable_history(*c, prefix);  // with the transaction gone it goes through
  CHECK(disable_history(*c, prefix));
  CHECK(l.release());
}

TEST_CASE("a scope change that fails half way (a holding's row held) leaves the triggers as the listed scopes need them",
          "[history]") {
  if (ctx().is_sqlite()) return;  // SQLite: one writer; DDL waits for the write lock like any write
  auto client = LockClient::create(ctx().uri);
  auto holder = ctx().connect(), c = ctx().connect();
  const std::string prefix = ctx().unique("histh") + ":";
  Semaphore sem(client, prefix + "sem", 2, opts());
  REQUIRE(sem.try_acquire());
  // The lock table is free, the holdings' table is not: on MariaDB (each DDL
  // statement commits alone) the lease triggers are rewritten before the
  // holdings' first one waits out its 2 s; PostgreSQL rolls back as one.
  holder->begin();
  holder->execute("UPDATE sqlguard_sync_holder SET renewed_at = renewed_at WHERE name = ?", {prefix + "sem"});
  std::string what;
  CHECK(code_of([&] { enable_history(*c, prefix); }, &what) == ErrorCode::kLockBusy);
  holder->commit();
  const bool others = !history_scopes(*c).empty();  // other tests' scopes, if any
  bool listed = false;
  for (const auto& s : history_scopes(*c)) listed |= s.prefix == prefix;
  CHECK_FALSE(listed);
  // All six triggers or none, as the scope list needs, and a name of the failed
  // prefix not recorded.
  CHECK(triggers_installed(*c) == others);
  if (!others) CHECK(trigger_count(*c) == 0);
  LeaseLock l(*c, prefix + "x", opts());
  REQUIRE(l.try_acquire());
  REQUIRE(l.release());
  HistoryQuery q;
  q.prefix = prefix;
  CHECK(read_history(*c, q).empty());
  CHECK_THAT(what, Catch::Contains("nothing was changed") || Catch::Contains("put back"));
  CHECK(sem.release());
}
