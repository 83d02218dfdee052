// sqlguard bench: the ops. Each returns one client's closure for the
// sqlguard path (the public API) or the raw path (the same statements,
// same order, same values through the native driver, see bench_raw.h), plus
// the rows they run against.
#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "bench.h"
#include "bench_raw.h"
#include "bench_sql.h"
#include "sqlguard/backoff.h"
#include "sqlguard/errors.h"
#include "sqlguard/idempotency.h"
#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/row_lock.h"
#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"

namespace sqlguard::bench {

using std::chrono::milliseconds;

// ---- the rows the ops run against ----------------------------------------------

void create_stock(Connection& c) {
  c.execute_script(std::string("CREATE TABLE IF NOT EXISTS ") + kStock +
                   " (id BIGINT NOT NULL PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)");
}

void fill_stock(Connection& c, std::int64_t from, int n) {
  Transaction tx(c);
  for (int i = 0; i < n; ++i) {
    tx.execute(std::string("DELETE FROM ") + kStock + " WHERE id = ?", {from + i});
    tx.execute(std::string("INSERT INTO ") + kStock + " (id, qty, version) VALUES (?, ?, 0)", {from + i, kBigQty});
  }
  tx.commit();
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

namespace {

std::string owner_for(const Cell& cell, int client, const char* path) {
  // Same length as make_owner_token() output would be is not needed: a
  // token is an opaque string; the raw path uses a fixed one per client.
  return std::string(path) + "-" + std::to_string(client) + "@" + cell.prefix;
}

std::int64_t to_i(const std::string& s) { return std::stoll(s); }

}  // namespace

namespace {

class SgContender final : public Contender {
 public:
  SgContender(std::unique_ptr<Connection> conn, const std::string& name, ReleaseCommit commit)
      : conn_(std::move(conn)), lock_(*conn_, name, options(commit)) {}
  bool acquire(milliseconds timeout) override { return lock_.acquire(timeout); }
  void release() override {
    if (!lock_.release()) throw Error(ErrorCode::kLeaseLost, "bench: the lease was no longer held at release");
  }
  void ping() override { conn_->db_now_ms(); }

 private:
  static LeaseOptions options(ReleaseCommit commit) {
    LeaseOptions o;
    o.ttl = milliseconds(kTtlMs);
    o.release_commit = commit;
    o.take_over = bench_take_over();
    apply_barging_limit(o);
    return o;
  }
  std::unique_ptr<Connection> conn_;
  LeaseLock lock_;
};

class RawContender final : public Contender {
 public:
  RawContender(std::unique_ptr<Connection> conn, std::string name, std::string owner, ReleaseCommit commit)
      : conn_(std::move(conn)),
        session_(make_raw_session(*conn_, make_raw(*conn_))),
        name_(std::move(name)),
        owner_(std::move(owner)),
        commit_(commit) {}
  bool acquire(milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto r = acquire_lease(*session_, name_, owner_, milliseconds(kTtlMs));
      if (r.acquired) {
        fence_ = r.fence;
        return true;
      }
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(jittered(milliseconds(5), milliseconds(1)));  // no wake-ups here
    }
  }
  void release() override {
    if (!release_lease(*session_, name_, owner_, fence_, commit_)) throw std::runtime_error("raw release: not held");
  }
  void ping() override { session_->db_now_ms(); }

 private:
  std::unique_ptr<Connection> conn_;
  std::unique_ptr<Connection> session_;  // borrows conn_'s native handle
  std::string name_, owner_;
  ReleaseCommit commit_;
  std::int64_t fence_ = 0;
};

}  // namespace

MakeContender sg_contender(OpenFn open, ReleaseCommit commit) {
  return [open = std::move(open), commit](const std::string& name, int) -> std::unique_ptr<Contender> {
    return std::make_unique<SgContender>(open(), name, commit);
  };
}

MakeContender raw_contender(OpenFn open, ReleaseCommit commit) {
  return [open = std::move(open), commit](const std::string& name, int client) -> std::unique_ptr<Contender> {
    return std::make_unique<RawContender>(open(), name, "raw-" + std::to_string(client) + "@" + name, commit);
  };
}

// ---- sqlguard paths ------------------------------------------------------------

std::atomic<std::int64_t>& cart_units_sold() {
  static std::atomic<std::int64_t> units{0};
  return units;
}

std::vector<int> draw_cart(std::minstd_rand& rng) {
  std::vector<int> all(kCartCatalogue);
  for (int i = 0; i < kCartCatalogue; ++i) all[static_cast<std::size_t>(i)] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(kCartSkus);
  return all;
}

OpFn sg_op(const Cell& cell, int client, const OpenFn& open) {
  const std::string& op = cell.op;
  if (op == "lease-hot") return contended_cycle(sg_contender(open, cell.release_commit)(cell.prefix + ":hot", client));
  std::shared_ptr<Connection> conn = open();
  const std::int64_t key = cell.key_base + client;
  if (op == "lease-distinct") {
    LeaseOptions o;
    o.ttl = milliseconds(kTtlMs);
    o.release_commit = cell.release_commit;
    auto lock = std::make_shared<LeaseLock>(*conn, cell.prefix + ":sg" + std::to_string(client), o);
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
  if (cart_op(op)) {
    // Client `client`'s carts: kCartSkus distinct SKUs of the catalogue
    // (rows key_base .. key_base + kCartCatalogue - 1), 1..3 units each, in
    // a random order; the same sequence on every dialect and path.
    auto gu = std::make_shared<GuardedUpdate>(
        *conn, GuardedUpdateSpec{kStock, "id", {{"qty", AssignOp::kSubtract}}, {{"qty", Compare::kGe}}});
    auto rng = std::make_shared<std::minstd_rand>(static_cast<std::uint32_t>(client * 7919 + 17));
    const std::int64_t base = cell.key_base;
    auto next_cart = [rng, base] {
      std::vector<GuardedItem> cart;
      for (int i : draw_cart(*rng)) {
        const std::int64_t n = 1 + static_cast<std::int64_t>((*rng)() % 3);
        cart.push_back({base + i, {n, n}});
      }
      return cart;
    };
    auto units = [](const std::vector<GuardedItem>& cart) {
      std::int64_t u = 0;
      for (const auto& it : cart) u += it.values[0].as_int();
      return u;
    };
    if (op == "cart-decrement")
      return [conn, gu, next_cart, units] {
        const auto cart = next_cart();
        if (!gu->apply_all(cart)) return false;
        cart_units_sold() += units(cart);
        return true;
      };
    return [conn, gu, next_cart, units] {
      const auto cart = next_cart();
      Transaction tx(*conn);
      for (const auto& it : cart)
        if (!gu->apply(it.key, it.values)) return false;  // rolled back by tx
      tx.commit();
      cart_units_sold() += units(cart);
      return true;
    };
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

// ---- raw driver paths (same statements, same order, same values) -------------

OpFn commit_op(const Cell& cell, const OpenFn& open) {
  std::shared_ptr<Connection> conn = open();
  std::shared_ptr<RawConn> raw = make_raw(*conn);
  const int upd = raw->prepare(kInboxEffect);
  const std::int64_t key = cell.key_base;
  return [conn, raw, upd, key] {
    if (raw->exec(upd, {key}).affected != 1) throw std::runtime_error("commit-rate: the stock row is missing");
    return true;
  };
}

OpFn raw_op(const Cell& cell, int client, const OpenFn& open) {
  const std::string& op = cell.op;
  if (op == "lease-hot") return contended_cycle(raw_contender(open, cell.release_commit)(cell.prefix + ":hot", client));
  std::shared_ptr<Connection> conn = open();
  Sql s(*conn);
  std::shared_ptr<RawConn> raw = make_raw(*conn);
  const auto kind = conn->kind();
  const bool my = kind == DialectKind::kMysql, pg = kind == DialectKind::kPostgresql;
  const std::int64_t key = cell.key_base + 10000 + client;
  if (op == "lease-distinct") {
    auto name = std::make_shared<std::string>(cell.prefix + ":raw" + std::to_string(client));
    auto owner = std::make_shared<std::string>(owner_for(cell, client, "raw"));
    // The library's own protocol (the dialect's acquire plan, the catalog's
    // statements and parameter order) on statements the native driver runs.
    std::shared_ptr<Connection> session = make_raw_session(*conn, raw);
    const auto commit = cell.release_commit;
    return [conn, raw, session, name, owner, commit] {
      auto r = acquire_lease(*session, *name, *owner, milliseconds(kTtlMs));
      if (!r.acquired) return false;
      if (!release_lease(*session, *name, *owner, r.fence, commit)) throw std::runtime_error("raw release: not held");
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
    int sel = raw->prepare(s.rl_select), upd = raw->prepare(kRowLockUpdate);
    // What the catalog has for bounding the wait (MariaDB: nothing, the
    // recorded select carries SET STATEMENT ... FOR).
    int get = my && !s.lock_timeout_get.empty() ? raw->prepare(s.lock_timeout_get) : -1;
    int set = my && !s.lock_timeout_set.empty() ? raw->prepare(s.lock_timeout_set) : -1;
    int lite = kind == DialectKind::kSqlite && !s.lock_timeout_get.empty() ? raw->prepare(s.lock_timeout_get) : -1;
    int loc = pg && !s.lock_timeout_local.empty() ? raw->prepare(s.lock_timeout_local) : -1;
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
    const CatalogEntry *e_ins = s.e_idem_insert, *e_done = s.e_idem_complete, *e_sel = s.e_idem_select;
    auto first = [raw, ins, done, fp, owner, body, e_ins, e_done](const std::string& k) {
      std::int64_t aff = 0;
      try {
        aff = raw->exec(ins, in_bind_order(*e_ins,
                                           {"bench", k, *fp, *owner, kIdemLeaseMs, kIdemLeaseMs + kIdemRetentionMs}))
                  .affected;
      } catch (const RawError& e) {
        if (e.kind != RawErr::kDuplicate) throw;
      }
      if (aff != 1) return false;
      return raw->exec(done, in_bind_order(*e_done,
                                           {"completed", 201, P::blob(*body), kIdemRetentionMs, "bench", k, *owner}))
                 .affected == 1;
    };
    if (op == "idem-replay") {
      first(*base);
      return [conn, raw, ins, sel, fp, owner, base, e_ins, e_sel] {
        std::int64_t aff = 0;
        try {
          aff = raw->exec(ins, in_bind_order(*e_ins, {"bench", *base, *fp, *owner, kIdemLeaseMs,
                                                                 kIdemLeaseMs + kIdemRetentionMs}))
                    .affected;
        } catch (const RawError& e) {
          if (e.kind != RawErr::kDuplicate) throw;
        }
        if (aff == 1) return false;
        auto r = raw->exec(sel, in_bind_order(*e_sel, {"bench", *base}));
        return r.nrows == 1 && r.first[0] == "completed" && r.first[1] == *fp;
      };
    }
    auto n = std::make_shared<std::uint64_t>(0);
    return [conn, raw, first, base, n] { return first(*base + ":" + std::to_string((*n)++)); };
  }
  if (op == "inbox") {
    int ins = raw->prepare(s.inbox_insert), eff = raw->prepare(kInboxEffect);
    auto base = std::make_shared<std::string>(cell.prefix + ":raw" + std::to_string(client));
    auto n = std::make_shared<std::uint64_t>(0);
    const CatalogEntry* e_inbox = s.e_inbox_insert;
    return [conn, raw, ins, eff, base, n, key, e_inbox] {
      std::string id = *base + ":" + std::to_string((*n)++);
      raw->begin();
      try {
        std::int64_t aff = 0;
        try {
          aff = raw->exec(ins, in_bind_order(*e_inbox, {"bench", id, kInboxRetentionMs})).affected;
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

}  // namespace sqlguard::bench
