// sqlguard bench: throughput and latency per op x client count, against the
// same statements run through the native driver (the "raw" baseline).
// Method and results: docs/bench.md.
#include <algorithm>
#include <atomic>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "bench.h"
#include "bench_raw.h"
#include "common.h"
#include "sqlguard/catalog.h"
#include "sqlguard/cleanup.h"
#include "sqlguard/idempotency.h"
#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/migrate.h"
#include "sqlguard/row_lock.h"
#include "sqlguard/transition.h"
#include "sqlguard/validate.h"
#include "sqlguard/version_cas.h"

namespace sqlguard::cli {
namespace {

using namespace sqlguard::bench;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr const char* kStock = "sqlguard_bench_stock";
// The ops' own business writes (what a user's code would send).
constexpr const char* kRowLockUpdate = "UPDATE sqlguard_bench_stock SET qty = ? WHERE id = ?";
constexpr const char* kInboxEffect = "UPDATE sqlguard_bench_stock SET qty = qty - 1 WHERE id = ?";
constexpr std::int64_t kTtlMs = 30000;
constexpr std::int64_t kIdemLeaseMs = 30000, kIdemRetentionMs = 3600000;
constexpr std::int64_t kInboxRetentionMs = 3600000;
constexpr std::int64_t kRowLockTimeoutMs = 5000;
constexpr std::int64_t kBigQty = 1000000000000LL;
const char* const kAllOps[] = {"lease-distinct", "lease-hot",  "handoff",     "guarded-decrement", "rowlock-decrement",
                               "cas-decrement",  "idem-first", "idem-replay", "inbox"};

// Every statement the ops issue, exactly as sqlguard sends them: the lease
// and dedup statements straight from the public SQL catalog
// (sql/<dialect>/*.sql); the statements on the bench table (catalog
// templates filled with its identifiers) captured from what the strategies
// send, through a statement observer. The raw baseline runs these texts.
// `c` must have the bench table (create_stock).
struct Sql {
  std::string acquire, insert, read_mine, info, release, notify;
  std::string g_update, g_exists;
  std::string rl_select, rl_update, my_get_timeout, my_set_timeout, pg_set_local, sqlite_busy;
  std::string cas_select, cas_update, cas_version;
  std::string idem_insert, idem_select, idem_complete;
  std::string inbox_insert, inbox_effect;

  explicit Sql(Connection& c) {
    const std::string d(to_string(c.kind()));
    auto text = [&](const char* name) {
      const auto& e = sql_statement(d, name);
      return e.available ? e.text : std::string();
    };
    acquire = text("lease_acquire");
    insert = text("lease_insert");
    read_mine = text("lease_read_mine");
    info = text("lease_info");
    release = text("lease_release");
    notify = text("lease_notify");
    my_get_timeout = text("lock_timeout_get");
    my_set_timeout = text("lock_timeout_set");
    pg_set_local = text("lock_timeout_local");
    sqlite_busy = c.kind() == DialectKind::kSqlite ? my_get_timeout : std::string();
    if (c.kind() == DialectKind::kSqlite) my_get_timeout.clear();
    idem_insert = text("idem_insert");
    idem_select = text("idem_select");
    idem_complete = text("idem_complete");
    inbox_insert = text("inbox_insert");
    // The bench's own business writes (the "user's" statements).
    rl_update = kRowLockUpdate;
    inbox_effect = kInboxEffect;

    std::map<std::string, std::string> seen;  // catalog name -> text as sent
    c.set_statement_observer([&](const StatementEvent& e) {
      if (!e.catalog_name.empty()) seen[std::string(e.catalog_name)] = std::string(e.sql);
    });
    const std::int64_t absent = -1;  // touches no row
    GuardedUpdate(c, GuardedUpdateSpec{kStock, "id", {{"qty", AssignOp::kSubtract}}, {{"qty", Compare::kGe}}})
        .apply(absent, {1, 1});
    RowLockSpec rs;
    rs.table = kStock;
    rs.columns = {"qty"};
    RowLocker(c, rs).lock(absent);
    VersionCasSpec cs;
    cs.table = kStock;
    cs.columns = {"qty"};
    VersionCas cas(c, cs);
    cas.read(absent);
    cas.compare_and_set(absent, 0, {1});
    c.set_statement_observer({});
    g_update = seen.at("guarded_update");
    g_exists = seen.at("row_exists");
    rl_select = seen.at("row_lock_select");
    cas_select = seen.at("cas_select");
    cas_update = seen.at("cas_update");
    cas_version = seen.at("cas_version");
  }
};

// What one op sends per completed operation in steady state, recorded from
// a real run of the sqlguard path: one line per round trip (BEGIN/COMMIT
// included), each statement with its catalog entry and parameters.
struct Recorded {
  std::vector<std::string> lines;
  int round_trips = 0;
};

// ---- per-cell context --------------------------------------------------------

struct Cell {
  std::string op;
  int clients = 1;
  std::string prefix;     // unique names of this cell
  std::int64_t key_base;  // stock rows key_base + client (sqlguard) and + 10000 + client (raw)
};

std::string random_tag() {
  std::mt19937_64 rng{std::random_device{}()};
  std::ostringstream o;
  o << std::hex << (rng() & 0xffffffffffULL);
  return o.str();
}

void create_stock(Connection& c) {
  c.execute_script(std::string("CREATE TABLE IF NOT EXISTS ") + kStock +
                   " (id BIGINT NOT NULL PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)");
}

void fill_stock(Connection& c, std::int64_t from, int n) {
  const std::string t = kStock;
  Transaction tx(c);
  for (int i = 0; i < n; ++i) {
    tx.execute("DELETE FROM " + t + " WHERE id = ?", {from + i});
    tx.execute("INSERT INTO " + t + " (id, qty, version) VALUES (?, ?, 0)", {from + i, kBigQty});
  }
  tx.commit();
}

std::string owner_for(const Cell& cell, int client, const char* path) {
  // Same length as make_owner_token() output would be is not needed: a
  // token is an opaque string; the raw path uses a fixed one per client.
  return std::string(path) + "-" + std::to_string(client) + "@" + cell.prefix;
}

std::int64_t to_i(const std::string& s) { return std::stoll(s); }

// ---- sqlguard paths ------------------------------------------------------------

OpFn sg_op(const Cell& cell, int client, const std::function<std::unique_ptr<Connection>()>& open) {
  std::shared_ptr<Connection> conn = open();
  const std::string& op = cell.op;
  const std::int64_t key = cell.key_base + client;
  if (op == "lease-distinct" || op == "lease-hot") {
    std::string name = cell.prefix + (op == "lease-hot" ? ":hot" : ":sg" + std::to_string(client));
    LeaseOptions o;
    o.ttl = milliseconds(kTtlMs);
    auto lock = std::make_shared<LeaseLock>(*conn, name, o);
    return [conn, lock] {
      if (!lock->try_acquire()) return false;
      lock->release();
      return true;
    };
  }
  if (op == "guarded-decrement") {
    auto gu = std::make_shared<GuardedUpdate>(
        *conn, GuardedUpdateSpec{kStock, "id", {{"qty", AssignOp::kSubtract}}, {{"qty", Compare::kGe}}});
    return [conn, gu, key] { return gu->apply(key, {1, 1}).status == GuardedStatus::kApplied; };
  }
  if (op == "rowlock-decrement") {
    RowLockSpec spec;
    spec.table = kStock;
    spec.columns = {"qty"};
    auto rl = std::make_shared<RowLocker>(*conn, spec);
    auto upd = std::make_shared<std::string>(kRowLockUpdate);
    return [conn, rl, upd, key] {
      auto scope = rl->lock(key);
      if (!scope) return false;
      scope.execute(*upd, {scope.rows()[0][1].as_int() - 1, key});
      scope.commit();
      return true;
    };
  }
  if (op == "cas-decrement") {
    VersionCasSpec spec;
    spec.table = kStock;
    spec.columns = {"qty"};
    auto cas = std::make_shared<VersionCas>(*conn, spec);
    return [conn, cas, key] {
      auto r = cas->update(key, [](const Versioned& cur) -> std::optional<Params> {
        return Params{cur.values[0].as_int() - 1};
      });
      return r.status == CasStatus::kApplied;
    };
  }
  if (op == "idem-first" || op == "idem-replay") {
    IdempotencyOptions o;
    o.lease = milliseconds(kIdemLeaseMs);
    o.retention = milliseconds(kIdemRetentionMs);
    auto idem = std::make_shared<IdempotencyKeys>(*conn, o);
    auto fp = std::make_shared<std::string>(request_fingerprint({"POST", "/orders", "{\"sku\":42}"}));
    auto handler = [](IdempotencyExecution&) { return StoredResponse{201, "{\"order\":1}"}; };
    std::string base = cell.prefix + ":sg" + std::to_string(client);
    if (op == "idem-replay") {
      idem->execute("bench", base, *fp, handler);
      return [conn, idem, fp, handler, base] {
        return idem->execute("bench", base, *fp, handler).outcome == IdempotencyOutcome::kReplayed;
      };
    }
    auto n = std::make_shared<std::uint64_t>(0);
    return [conn, idem, fp, handler, base, n] {
      std::string k = base + ":" + std::to_string((*n)++);
      return idem->execute("bench", k, *fp, handler).outcome == IdempotencyOutcome::kExecuted;
    };
  }
  if (op == "inbox") {
    InboxOptions o;
    o.retention = milliseconds(kInboxRetentionMs);
    auto inbox = std::make_shared<Inbox>(*conn, o);
    auto eff = std::make_shared<std::string>(kInboxEffect);
    auto n = std::make_shared<std::uint64_t>(0);
    std::string base = cell.prefix + ":sg" + std::to_string(client);
    return [conn, inbox, eff, n, base, key] {
      std::string id = base + ":" + std::to_string((*n)++);
      auto r = inbox->process("bench", id, [&](Transaction& tx) { tx.execute(*eff, {key}); });
      return r.outcome == InboxOutcome::kProcessed;
    };
  }
  throw Error(ErrorCode::kInvalidArgument, "bench: no sqlguard path for op '" + op + "'");
}

// Runs the sqlguard path of `op` twice on a connection with a statement
// observer and records the second (steady-state) run.
Recorded record_op(const std::string& op, const Cell& cell) {
  Recorded rec;
  bool on = false;
  auto observer = [&rec, &on](const StatementEvent& e) {
    if (!on) return;
    ++rec.round_trips;
    switch (e.kind) {
      case StatementKind::kBegin: rec.lines.emplace_back("BEGIN"); return;
      case StatementKind::kCommit: rec.lines.emplace_back("COMMIT"); return;
      case StatementKind::kRollback: rec.lines.emplace_back("ROLLBACK"); return;
      case StatementKind::kStatement: break;
    }
    std::string line;
    if (e.catalog_name.empty()) {
      line = "-- the op's own business write (not sqlguard's)\n";
    } else {
      const auto& entry = sql_statement(e.dialect, e.catalog_name);
      line = "-- " + entry.name + " (sql/" + entry.file + ")";
      for (std::size_t i = 0; i < entry.params.size(); ++i) line += (i ? ", " : ": ") + entry.params[i];
      line += "\n";
    }
    rec.lines.push_back(line + std::string(e.sql));
  };
  Cell c = cell;
  if (op == "handoff") c.op = "lease-hot";  // the same statements; waiters add LISTEN (PostgreSQL)
  auto fn = sg_op(c, 0, [&] {
    auto conn = open_db();
    conn->set_statement_observer(observer);
    return conn;
  });
  fn();  // creates what the first run creates (lock rows, the replayed key)
  on = true;
  fn();
  on = false;
  return rec;
}

// ---- raw driver paths (same statements, same order, same values) -------------

OpFn raw_op(const Cell& cell, int client, const std::function<std::unique_ptr<Connection>()>& open) {
  std::shared_ptr<Connection> conn = open();
  Sql s(*conn);
  std::shared_ptr<RawConn> raw = make_raw(*conn);
  const std::string& op = cell.op;
  const auto kind = conn->kind();
  const bool my = kind == DialectKind::kMysql, pg = kind == DialectKind::kPostgres;
  const std::int64_t key = cell.key_base + 10000 + client;
  auto keep = [conn, raw] {};  // keeps the session alive inside closures
  (void)keep;
  if (op == "lease-distinct" || op == "lease-hot") {
    auto name = std::make_shared<std::string>(cell.prefix + (op == "lease-hot" ? ":hot" : ":raw" + std::to_string(client)));
    auto owner = std::make_shared<std::string>(owner_for(cell, client, "raw"));
    auto channel = std::make_shared<std::string>(lease_wakeup_channel(*name));
    int acq = raw->prepare(s.acquire), rel = raw->prepare(s.release);
    int ins = my ? raw->prepare(s.insert) : -1, info = my ? raw->prepare(s.info) : -1;
    int mine = my ? raw->prepare(s.read_mine) : -1, ntf = s.notify.empty() ? -1 : raw->prepare(s.notify);
    return [conn, raw, name, owner, channel, acq, rel, ins, info, mine, ntf, my] {
      try {
        if (!my) {
          auto r = raw->exec(acq, {*name, *owner, kTtlMs, 0});
          if (r.nrows == 0) return false;
          (void)to_i(r.first[0]);
        } else {
          auto r = raw->exec(acq, {*owner, kTtlMs, 0, *name});
          if (r.affected == 0) {
            if (raw->exec(info, {*name}).nrows > 0) return false;
            try {
              raw->exec(ins, {*name, *owner, kTtlMs, 0});
            } catch (const RawError& e) {
              if (e.kind == RawErr::kDuplicate) return false;
              throw;
            }
          }
          auto m = raw->exec(mine, {*name, *owner});
          if (m.nrows == 0) return false;
          (void)to_i(m.first[0]);
        }
      } catch (const RawError& e) {
        if (e.kind == RawErr::kConflict || e.kind == RawErr::kBusy) return false;  // contention = not acquired
        throw;
      }
      if (raw->exec(rel, {*name, *owner}).affected != 1) throw std::runtime_error("raw release: not held");
      if (ntf >= 0) raw->exec(ntf, {*channel});
      return true;
    };
  }
  if (op == "guarded-decrement") {
    int u = raw->prepare(s.g_update), e = raw->prepare(s.g_exists);
    return [conn, raw, u, e, key] {
      if (raw->exec(u, {1, key, 1}).affected >= 1) return true;
      raw->exec(e, {key});
      return false;
    };
  }
  if (op == "rowlock-decrement") {
    int sel = raw->prepare(s.rl_select), upd = raw->prepare(s.rl_update);
    int get = my ? raw->prepare(s.my_get_timeout) : -1, set = my ? raw->prepare(s.my_set_timeout) : -1;
    int lite = kind == DialectKind::kSqlite ? raw->prepare(s.sqlite_busy) : -1;
    int loc = pg ? raw->prepare(s.pg_set_local) : -1;
    return [conn, raw, sel, upd, get, set, lite, loc, key] {
      std::int64_t prev = 0;
      if (get >= 0) {
        prev = to_i(raw->exec(get, {}).first[0]);
        raw->exec(set, {(kRowLockTimeoutMs + 999) / 1000});
      }
      if (lite >= 0) raw->exec(lite, {});
      raw->begin();
      try {
        if (loc >= 0) raw->exec(loc, {std::to_string(kRowLockTimeoutMs) + "ms"});
        auto r = raw->exec(sel, {key});
        if (set >= 0) raw->exec(set, {prev});
        if (r.nrows == 0) {
          raw->rollback();
          return false;
        }
        raw->exec(upd, {to_i(r.first[1]) - 1, key});
        raw->commit();
        return true;
      } catch (...) {
        raw->rollback();
        throw;
      }
    };
  }
  if (op == "cas-decrement") {
    int sel = raw->prepare(s.cas_select), upd = raw->prepare(s.cas_update), ver = raw->prepare(s.cas_version);
    return [conn, raw, sel, upd, ver, key] {
      raw->begin();
      try {
        auto r = raw->exec(sel, {key});
        if (r.nrows == 0) {
          raw->rollback();
          return false;
        }
        std::int64_t v = to_i(r.first[0]), q = to_i(r.first[1]);
        if (raw->exec(upd, {q - 1, key, v}).affected != 1) {
          raw->exec(ver, {key});
          raw->rollback();
          return false;
        }
        raw->commit();
        return true;
      } catch (...) {
        raw->rollback();
        throw;
      }
    };
  }
  if (op == "idem-first" || op == "idem-replay") {
    int ins = raw->prepare(s.idem_insert), sel = raw->prepare(s.idem_select), done = raw->prepare(s.idem_complete);
    auto fp = std::make_shared<std::string>(request_fingerprint({"POST", "/orders", "{\"sku\":42}"}));
    auto owner = std::make_shared<std::string>(owner_for(cell, client, "raw"));
    auto base = std::make_shared<std::string>(cell.prefix + ":raw" + std::to_string(client));
    auto body = std::make_shared<std::string>("{\"order\":1}");
    auto first = [raw, ins, done, fp, owner, body](const std::string& k) {
      std::int64_t aff = 0;
      try {
        aff = raw->exec(ins, {"bench", k, *fp, *owner, kIdemLeaseMs, kIdemLeaseMs + kIdemRetentionMs}).affected;
      } catch (const RawError& e) {
        if (e.kind != RawErr::kDuplicate) throw;
      }
      if (aff != 1) return false;
      return raw->exec(done, {"completed", 201, P::blob(*body), kIdemRetentionMs, "bench", k, *owner}).affected == 1;
    };
    if (op == "idem-replay") {
      first(*base);
      return [conn, raw, ins, sel, fp, owner, base] {
        std::int64_t aff = 0;
        try {
          aff = raw->exec(ins, {"bench", *base, *fp, *owner, kIdemLeaseMs, kIdemLeaseMs + kIdemRetentionMs}).affected;
        } catch (const RawError& e) {
          if (e.kind != RawErr::kDuplicate) throw;
        }
        if (aff == 1) return false;
        auto r = raw->exec(sel, {"bench", *base});
        return r.nrows == 1 && r.first[0] == "completed" && r.first[1] == *fp;
      };
    }
    auto n = std::make_shared<std::uint64_t>(0);
    return [conn, raw, first, base, n] { return first(*base + ":" + std::to_string((*n)++)); };
  }
  if (op == "inbox") {
    int ins = raw->prepare(s.inbox_insert), eff = raw->prepare(s.inbox_effect);
    auto base = std::make_shared<std::string>(cell.prefix + ":raw" + std::to_string(client));
    auto n = std::make_shared<std::uint64_t>(0);
    return [conn, raw, ins, eff, base, n, key] {
      std::string id = *base + ":" + std::to_string((*n)++);
      raw->begin();
      try {
        std::int64_t aff = 0;
        try {
          aff = raw->exec(ins, {"bench", id, kInboxRetentionMs}).affected;
        } catch (const RawError& e) {
          if (e.kind != RawErr::kDuplicate) throw;
        }
        if (aff != 1) {
          raw->rollback();
          return false;
        }
        raw->exec(eff, {key});
        raw->commit();
        return true;
      } catch (...) {
        raw->rollback();
        throw;
      }
    };
  }
  throw Error(ErrorCode::kInvalidArgument, "bench: no raw path for op '" + op + "'");
}

// ---- hand-off latency ------------------------------------------------------------
// N threads contend for one name with blocking acquire (backoff + jitter;
// LISTEN/NOTIFY on PostgreSQL). A holder keeps the lease for `hold`, releases,
// and stamps steady_clock right after release() returns; the next owner
// stamps right after acquire() returns. Events are paired by fencing token
// (strictly increasing per acquisition), so the order of the stamps does not
// matter; only hand-offs to ANOTHER client count.
Stats run_handoff(int clients, const Cell& cell, const std::function<std::unique_ptr<Connection>()>& open,
                  milliseconds warmup, milliseconds duration, milliseconds hold) {
  struct Ev {
    std::int64_t fence;
    int client;
    Clock::time_point acq, rel;
  };
  std::mutex mu;
  std::vector<Ev> evs;
  std::atomic<int> phase{0}, ready{0};
  std::atomic<std::uint64_t> errors{0};
  std::string first_error;
  std::vector<std::thread> ts;
  for (int i = 0; i < clients; ++i) {
    ts.emplace_back([&, i] {
      std::unique_ptr<Connection> conn;
      std::unique_ptr<LeaseLock> lock;
      try {
        conn = open();
        LeaseOptions o;
        o.ttl = milliseconds(kTtlMs);
        lock = std::make_unique<LeaseLock>(*conn, cell.prefix + ":handoff", o);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(mu);
        if (first_error.empty()) first_error = e.what();
        ++errors;
        ready.fetch_add(1);
        return;
      }
      ready.fetch_add(1);
      while (phase.load() < 2) {
        try {
          if (!lock->acquire(milliseconds(2000))) continue;
          auto acq = Clock::now();
          auto fence = lock->fence();
          std::this_thread::sleep_for(hold);
          lock->release();
          auto rel = Clock::now();
          if (phase.load() == 1) {
            std::lock_guard<std::mutex> lk(mu);
            evs.push_back({fence, i, acq, rel});
          }
          std::this_thread::sleep_for(hold);  // step back so a waiter can take it
        } catch (const std::exception& e) {
          ++errors;
          std::lock_guard<std::mutex> lk(mu);
          if (first_error.empty()) first_error = e.what();
        }
      }
    });
  }
  while (ready.load() < clients) std::this_thread::sleep_for(milliseconds(2));
  std::this_thread::sleep_for(warmup);
  auto t0 = Clock::now();
  phase = 1;
  std::this_thread::sleep_for(duration);
  phase = 2;
  auto t1 = Clock::now();
  for (auto& t : ts) t.join();
  Stats st;
  st.elapsed_s = std::chrono::duration<double>(t1 - t0).count();
  st.errors = errors;
  st.first_error = first_error;
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.fence < b.fence; });
  for (std::size_t k = 1; k < evs.size(); ++k) {
    if (evs[k].client == evs[k - 1].client) {
      ++st.misses;  // re-acquired by the same client: not a hand-off
      continue;
    }
    ++st.ops;
    st.lat_ns.push_back(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::nanoseconds>(evs[k].acq - evs[k - 1].rel).count()));
  }
  return st;
}

// ---- scale checks -------------------------------------------------------------------

// Bulk-fills `n` EXPIRED rows (a day old on the database clock) into
// sqlguard_lock or sqlguard_idempotency: multi-row INSERTs of 500 rows with
// bound values, the same text on every dialect.
void bulk_fill(Connection& c, const std::string& table, const std::string& tag, std::int64_t n) {
  const std::int64_t old = c.db_now_ms() - 86400000;
  const bool lock = table == "sqlguard_lock";
  const std::string head =
      lock ? "INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES "
           : "INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, "
             "response_code, response_body, created_at, completed_at, expire_at) VALUES ";
  const std::string row = lock ? "(?, 'bench-fill', 0, ?, ?, ?, 0)"
                               : "('bench-fill', ?, 'completed', '" + std::string(64, '0') +
                                     "', 'bench-fill', ?, 201, NULL, ?, ?, ?)";
  constexpr std::int64_t kBatch = 500;
  for (std::int64_t done = 0; done < n;) {
    const std::int64_t k = std::min(kBatch, n - done);
    std::string sql = head;
    Params p;
    for (std::int64_t i = 0; i < k; ++i) {
      sql += i ? ", " + row : row;
      p.emplace_back(tag + ":" + std::to_string(done + i + 1));
      for (int t = 0; t < (lock ? 3 : 4); ++t) p.emplace_back(old);
    }
    c.execute(sql, p);
    done += k;
  }
}


json lat_json(const std::string& phase, const std::string& op, Stats& st) {
  return {{"phase", phase}, {"op", op}, {"ops_per_s", st.ops_per_s()}, {"p50_ms", st.pct_ms(0.5)},
          {"p99_ms", st.pct_ms(0.99)}, {"errors", st.errors}, {"duration_s", st.elapsed_s}};
}

// ---- the command -----------------------------------------------------------------------

struct Opts {
  std::string ops = "all";
  std::string clients = "1,4,16";
  std::string duration = "2s", warmup = "300ms", hold = "1ms";
  bool processes = false, no_raw = false, emit_sql = false, scale = false, keep = false;
  std::string plot, redis;
  std::int64_t scale_rows = 1000000;
  int scale_clients = 4;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, ','))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

[[noreturn]] void usage_error(const std::string& msg) { throw Error(ErrorCode::kInvalidArgument, "bench: " + msg); }

double r3(double v) { return std::round(v * 1000.0) / 1000.0; }

void print_row(const json& j) {
  auto num = [&](const char* k, int w, int prec) {
    std::ostringstream o;
    if (j.contains(k) && j[k].is_number()) o << std::fixed << std::setprecision(prec) << j[k].get<double>();
    else o << "-";
    std::cout << std::setw(w) << o.str();
  };
  std::cout << std::left << std::setw(20) << j.value("op", "") << std::right << std::setw(8) << j.value("clients", 0);
  num("ops_per_s", 11, 0);
  num("p50_ms", 9, 3);
  num("p99_ms", 9, 3);
  num("raw_ops_per_s", 11, 0);
  num("raw_p50_ms", 9, 3);
  num("overhead_ratio", 9, 3);
  std::cout << std::setw(8) << j.value("errors", 0) << "\n" << std::flush;
}

void run_bench(const Opts& o) {
  auto& g = global();
  // ---- validate everything before touching the database
  std::vector<std::string> ops;
  for (const auto& op : split(o.ops)) {
    if (op == "all") {
      ops.assign(std::begin(kAllOps), std::end(kAllOps));
      continue;
    }
    if (std::find(std::begin(kAllOps), std::end(kAllOps), op) == std::end(kAllOps)) {
      std::string known;
      for (auto* k : kAllOps) known += std::string(known.empty() ? "" : ", ") + k;
      usage_error("unknown op '" + op + "' (known: " + known + ", all)");
    }
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  if (ops.empty()) usage_error("--ops is empty");
  std::vector<int> clients;
  for (const auto& c : split(o.clients)) {
    int n = 0;
    try {
      std::size_t used = 0;
      n = std::stoi(c, &used);
      if (used != c.size()) n = -1;
    } catch (const std::exception&) {
      n = -1;
    }
    if (n < 1 || n > 512) usage_error("--clients: '" + c + "' is not a client count in 1..512");
    clients.push_back(n);
  }
  if (clients.empty()) usage_error("--clients is empty");
  auto duration = duration_flag("--duration", o.duration);
  auto warmup = duration_flag("--warmup", o.warmup);
  auto hold = duration_flag("--hold", o.hold);
  if (duration < milliseconds(50) || duration > std::chrono::hours(1))
    usage_error("--duration must be between 50ms and 1h, got " + o.duration);
  if (warmup > std::chrono::minutes(10)) usage_error("--warmup must be at most 10m");
  if (hold > std::chrono::seconds(1)) usage_error("--hold must be at most 1s");
  if (o.scale_rows < 1 || o.scale_rows > 100000000) usage_error("--scale-rows must be 1..100000000");
  if (o.scale_clients < 1 || o.scale_clients > 512) usage_error("--scale-clients must be 1..512");
  if (!o.redis.empty() && !redis_compiled())
    usage_error("--redis: this sqlguard was built without hiredis (install libhiredis-dev and rebuild)");

  auto admin = open_db();
  const std::string dialect(to_string(admin->kind()));
  migrate(*admin);
  create_stock(*admin);
  Sql sql(*admin);
  const std::string run_tag = "bench:" + random_tag();
  // Each op once, recorded: --emit-sql prints it, every cell reports its
  // statements_per_op (round trips, BEGIN/COMMIT included).
  std::map<std::string, Recorded> recorded;
  fill_stock(*admin, 0, 1);
  for (const auto& op : ops) recorded[op] = record_op(op, Cell{op, 1, run_tag + ":record:" + op, 0});
  if (o.emit_sql) {
    std::cout << "-- sqlguard bench --emit-sql, dialect " << dialect
              << ": what each op sends per operation in steady state, recorded from a run, each statement\n"
              << "-- named by its entry in the SQL catalog (sql/" << dialect << "/*.sql; `?` = bound value"
              << (admin->kind() == DialectKind::kPostgres ? ", numbered $1..$n on the wire" : "") << ").\n";
    for (const auto& op : ops) {
      std::cout << "\n-- op: " << op << " (" << recorded[op].round_trips << " round trips)\n";
      if (op == "handoff" && admin->kind() == DialectKind::kPostgres)
        std::cout << "-- waiters: LISTEN \"<lease_wakeup_channel(name)>\" once, then lease_acquire on each NOTIFY or backoff tick\n";
      for (const auto& line : recorded[op].lines) std::cout << line << ";\n";
    }
    return;
  }
  auto open = [] { return open_db(); };
  std::vector<json> cells;
  if (!g.json) {
    std::cout << "sqlguard bench: " << mask_uri(g.db) << " (" << dialect << "), " << (o.processes ? "processes" : "threads")
              << ", " << format_duration(duration) << " per cell after " << format_duration(warmup) << " warm-up\n";
    std::cout << std::left << std::setw(20) << "op" << std::right << std::setw(8) << "clients" << std::setw(11)
              << "ops/s" << std::setw(9) << "p50 ms" << std::setw(9) << "p99 ms" << std::setw(11) << "raw ops/s"
              << std::setw(9) << "raw p50" << std::setw(9) << "ratio" << std::setw(8) << "errors" << "\n";
  }
  int cell_no = 0;
  for (const auto& op : ops) {
    for (int n : clients) {
      ++cell_no;
      Cell cell{op, n, run_tag + ":" + std::to_string(cell_no), 0};
      cell.key_base = static_cast<std::int64_t>(cell_no) * 100000;
      json j = {{"dialect", dialect}, {"op", op}, {"clients", n}, {"mode", o.processes ? "processes" : "threads"}};
      if (op == "handoff") {
        if (n < 2) continue;  // a hand-off needs a second client
        Stats st = run_handoff(n, cell, open, warmup, duration, hold);
        j["ops_per_s"] = r3(st.ops_per_s());
        j["p50_ms"] = r3(st.pct_ms(0.5));
        j["p99_ms"] = r3(st.pct_ms(0.99));
        j["handoffs"] = st.ops;
        j["self_reacquired"] = st.misses;
        j["hold_ms"] = hold.count();
        j["raw_ops_per_s"] = nullptr;
        j["overhead_ratio"] = nullptr;
        j["errors"] = st.errors;
        j["duration_s"] = r3(st.elapsed_s);
        if (!st.first_error.empty()) j["first_error"] = st.first_error;
      } else {
        fill_stock(*admin, cell.key_base, n);
        fill_stock(*admin, cell.key_base + 10000, n);
        Stats raw_st;
        bool have_raw = !o.no_raw;
        // raw first, then sqlguard: both see the same warm server
        if (have_raw)
          raw_st = run_clients(n, o.processes, [&](int i) { return raw_op(cell, i, open); }, warmup, duration);
        Stats st = run_clients(n, o.processes, [&](int i) { return sg_op(cell, i, open); }, warmup, duration);
        j["ops_per_s"] = r3(st.ops_per_s());
        j["p50_ms"] = r3(st.pct_ms(0.5));
        j["p99_ms"] = r3(st.pct_ms(0.99));
        j["ops"] = st.ops;
        j["errors"] = st.errors;
        if (op == "lease-hot") j["busy_attempts"] = st.misses;
        if (have_raw) {
          j["raw_ops_per_s"] = r3(raw_st.ops_per_s());
          j["raw_p50_ms"] = r3(raw_st.pct_ms(0.5));
          j["raw_p99_ms"] = r3(raw_st.pct_ms(0.99));
          j["raw_errors"] = raw_st.errors;
          j["overhead_ratio"] = raw_st.ops_per_s() > 0 ? json(r3(st.ops_per_s() / raw_st.ops_per_s())) : json(nullptr);
          if (op == "lease-hot") j["raw_busy_attempts"] = raw_st.misses;
        } else {
          j["raw_ops_per_s"] = nullptr;
          j["overhead_ratio"] = nullptr;
        }
        j["duration_s"] = r3(st.elapsed_s);
        if (!st.first_error.empty()) j["first_error"] = st.first_error;
        if (!raw_st.first_error.empty()) j["raw_first_error"] = raw_st.first_error;
      }
      j["statements_per_op"] = recorded[op].round_trips;
      if (g.json) print_json(j);
      else print_row(j);
      cells.push_back(j);
    }
  }
  if (!o.redis.empty()) {
    std::vector<std::string> rops;
    for (const auto& op : ops)
      if (op == "lease-distinct" || op == "lease-hot") rops.push_back(op);
    for (auto& j : run_redis(o.redis, rops, clients, o.processes, warmup, duration)) {
      if (g.json) print_json(j);
      else {
        std::cout << "redis ";
        print_row(j);
      }
      cells.push_back(j);
    }
  }
  if (o.scale) {
    // Acquire latency before/after 1M rows in each table, then during cleanup.
    const auto rows = o.scale_rows;
    const int sc = o.scale_clients;
    auto measure = [&](const std::string& op, const std::string& phase) {
      ++cell_no;
      Cell cell{op, sc, run_tag + ":" + std::to_string(cell_no), static_cast<std::int64_t>(cell_no) * 100000};
      Stats st = run_clients(sc, false, [&](int i) { return sg_op(cell, i, open); }, warmup, duration);
      json j = lat_json(phase, op, st);
      j["dialect"] = dialect;
      j["scale"] = true;
      j["clients"] = sc;
      j["rows"] = rows;
      if (g.json) print_json(j);
      else
        std::cout << "scale " << std::left << std::setw(34) << (op + " " + phase) << std::right << std::setw(10)
                  << std::fixed << std::setprecision(0) << st.ops_per_s() << " ops/s  p50 " << std::setprecision(3)
                  << st.pct_ms(0.5) << " ms  p99 " << st.pct_ms(0.99) << " ms\n" << std::flush;
      return j;
    };
    const std::string fill_tag = run_tag + ":fill";
    measure("lease-distinct", "before_fill");
    auto t0 = Clock::now();
    bulk_fill(*admin, "sqlguard_lock", fill_tag, rows);
    double fill_s = std::chrono::duration<double>(Clock::now() - t0).count();
    measure("lease-distinct", "after_fill_lock_rows");
    measure("idem-first", "before_fill");
    t0 = Clock::now();
    bulk_fill(*admin, "sqlguard_idempotency", fill_tag, rows);
    fill_s += std::chrono::duration<double>(Clock::now() - t0).count();
    measure("idem-first", "after_fill_idempotency_rows");
    // Cleanup of all expired rows (2 x rows) on its own connection while
    // lease-distinct acquirers run; their latency is measured only while it runs.
    std::atomic<bool> done{false};
    CleanupReport rep;
    std::string cleanup_error;
    double cleanup_s = 0;
    ++cell_no;
    Cell cell{"lease-distinct", sc, run_tag + ":" + std::to_string(cell_no), 0};
    std::thread cleaner;
    auto start_cleanup = [&] {
      cleaner = std::thread([&] {
        auto t = Clock::now();
        try {
          auto c = open_db();
          CleanupOptions co;
          co.inbox = false;
          rep = cleanup(*c, co);
        } catch (const std::exception& e) {
          cleanup_error = e.what();
        }
        cleanup_s = std::chrono::duration<double>(Clock::now() - t).count();
        done = true;
      });
    };
    // Measure in slices until cleanup ends (bounded by 10 minutes).
    Stats during;
    start_cleanup();
    auto deadline = Clock::now() + std::chrono::minutes(10);
    while (!done && Clock::now() < deadline) {
      Stats s = run_clients(sc, false, [&](int i) { return sg_op(cell, i, open); }, milliseconds(0),
                            std::min<milliseconds>(duration, milliseconds(1000)));
      during.ops += s.ops;
      during.errors += s.errors;
      during.elapsed_s += s.elapsed_s;
      during.lat_ns.insert(during.lat_ns.end(), s.lat_ns.begin(), s.lat_ns.end());
    }
    cleaner.join();
    json j = lat_json("during_cleanup", "lease-distinct", during);
    j["dialect"] = dialect;
    j["scale"] = true;
    j["clients"] = sc;
    j["rows"] = rows;
    j["fill_s"] = r3(fill_s);
    j["cleanup_s"] = r3(cleanup_s);
    j["locks_deleted"] = rep.locks_deleted;
    j["idempotency_deleted"] = rep.idempotency_deleted;
    j["cleanup_batches"] = rep.batches;
    if (!cleanup_error.empty()) j["cleanup_error"] = cleanup_error;
    if (g.json) print_json(j);
    else
      std::cout << "scale lease-distinct during_cleanup        " << std::fixed << std::setprecision(0)
                << during.ops_per_s() << " ops/s  p50 " << std::setprecision(3) << during.pct_ms(0.5) << " ms  p99 "
                << during.pct_ms(0.99) << " ms  (cleanup deleted " << rep.locks_deleted << " lock + "
                << rep.idempotency_deleted << " idempotency rows in " << std::setprecision(1) << cleanup_s
                << " s; fill took " << fill_s << " s)\n";
  }
  if (!o.plot.empty()) {
    write_svg(o.plot, "sqlguard bench: " + dialect + " (" + (o.processes ? "processes" : "threads") + ")", cells);
    if (!g.json) std::cout << "plot: " << o.plot << "\n";
  }
  if (!o.keep) {
    // Our rows only: everything this run created carries its tag.
    const std::string like = run_tag + "%";
    admin->execute("DELETE FROM sqlguard_lock WHERE name LIKE ?", {like});
    admin->execute("DELETE FROM sqlguard_idempotency WHERE idem_key LIKE ?", {like});
    admin->execute("DELETE FROM sqlguard_inbox WHERE message_id LIKE ?", {like});
    admin->execute_script(std::string("DROP TABLE IF EXISTS ") + kStock);
  }
}

}  // namespace

void add_bench(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("bench", "Throughput/latency per op and client count, against the raw driver baseline");
  cmd->add_option("--ops", o->ops,
                  "Comma-separated: lease-distinct, lease-hot, handoff, guarded-decrement, rowlock-decrement, "
                  "cas-decrement, idem-first, idem-replay, inbox, or all")
      ->capture_default_str();
  cmd->add_option("--clients", o->clients, "Comma-separated client counts (one connection each)")->capture_default_str();
  cmd->add_option("--duration", o->duration, "Measured time per cell and path")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Unmeasured warm-up per cell and path")->capture_default_str();
  cmd->add_option("--hold", o->hold, "handoff: how long each owner holds the lock")->capture_default_str();
  cmd->add_flag("--processes", o->processes, "One forked process per client instead of threads");
  cmd->add_flag("--no-raw", o->no_raw, "Skip the raw driver baseline");
  cmd->add_flag("--emit-sql", o->emit_sql, "Print the exact statements per op and exit");
  cmd->add_option("--plot", o->plot, "Write an SVG of ops/s against clients to this file");
  cmd->add_option("--redis", o->redis, std::string("Also run lease ops on Redis at HOST:PORT (SET NX PX + Lua release)") +
                                           (redis_compiled() ? "" : " [not compiled in]"));
  cmd->add_flag("--scale", o->scale, "Scale checks: latency with 1M rows in the lock / idempotency tables and during cleanup");
  cmd->add_option("--scale-rows", o->scale_rows, "Rows filled per table by --scale")->capture_default_str();
  cmd->add_option("--scale-clients", o->scale_clients, "Clients of the --scale measurements")->capture_default_str();
  cmd->add_flag("--keep", o->keep, "Keep the rows and the bench table afterwards");
  cmd->callback([o] {
    run_bench(*o);
    exit_code() = kExitOk;
  });
}

}  // namespace sqlguard::cli
