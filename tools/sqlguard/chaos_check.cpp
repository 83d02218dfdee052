// `sqlguard chaos`: the invariant checker, and (ChaosSql) every statement
// the coordinator sends. See chaos_coordinator.h.
#include <algorithm>
#include <map>
#include <tuple>

#include "chaos_coordinator.h"
#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"

namespace sqlguard::cli::chaos {

using nlohmann::json;

// =================================================================================
// ChaosSql: every statement of the chaos coordinator on the run's OWN tables
// (created by us, checked by us; the same text on every dialect). What it
// does to sqlguard's tables and sessions goes through the public API
// (sqlguard/admin.h).
// =================================================================================

ChaosSql::ChaosSql(const Names& n) {
  create_tables = {
      "CREATE TABLE " + n.res +
          " (id INTEGER NOT NULL PRIMARY KEY, version BIGINT NOT NULL, last_fence BIGINT NOT NULL, "
          "last_worker INTEGER NOT NULL)",
      "CREATE TABLE " + n.audit +
          " (resource INTEGER NOT NULL, seq BIGINT NOT NULL, fence BIGINT NOT NULL, worker INTEGER NOT "
          "NULL, pid BIGINT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL, paused INTEGER "
          "NOT NULL, PRIMARY KEY (resource, seq))",
      // Deliberately no CHECK (qty >= 0) and no UNIQUE on effect.message: the
      // checker, not the schema, must catch a broken strategy.
      "CREATE TABLE " + n.stock +
          " (id INTEGER NOT NULL PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL, initial_qty "
          "BIGINT NOT NULL)",
      "CREATE TABLE " + n.sale + " (item INTEGER NOT NULL, worker INTEGER NOT NULL, method VARCHAR(16) NOT NULL)",
      "CREATE TABLE " + n.effect + " (message BIGINT NOT NULL, worker INTEGER NOT NULL)",
  };
  insert_resource = "INSERT INTO " + n.res + " (id, version, last_fence, last_worker) VALUES (?, 0, 0, -1)";
  insert_stock = "INSERT INTO " + n.stock + " (id, qty, version, initial_qty) VALUES (?, ?, 0, ?)";
  tables = {n.res, n.audit, n.stock, n.sale, n.effect};
  insert_final_effect = "INSERT INTO " + n.effect + " (message, worker) VALUES (?, -1)";
  select_audit = "SELECT resource, seq, fence, worker, start_ms, end_ms, paused FROM " + n.audit +
                 " ORDER BY resource, seq";
  select_stock = "SELECT s.id, s.qty, s.initial_qty, (SELECT COUNT(*) FROM " + n.sale +
                 " x WHERE x.item = s.id) FROM " + n.stock + " s ORDER BY s.id";
  select_effects = "SELECT message, COUNT(*) FROM " + n.effect + " GROUP BY message";
  count_worker_effects = "SELECT COUNT(*) FROM " + n.effect + " WHERE worker >= 0";
}

std::string ChaosSql::drop_table(const std::string& table) { return "DROP TABLE IF EXISTS " + table; }

// ---- the checker -------------------------------------------------------------------

Verdict check(Run& run, Db& db, std::vector<KillRecord>& kills, const Workers& w) {
  const ChaosSql sql(run.names);
  const WorkerTotals t = w.totals();
  Verdict v;
  json& inv = v.invariants;
  inv = {{"fence_order", 0}, {"overlap", 0},      {"stock", 0},       {"inbox_effects", 0},
         {"stale_lock", 0},  {"lost_commits", 0}, {"worker_exits", 0}};
  json& examples = v.examples;
  auto example = [&](const std::string& s) {
    if (examples.size() < 10) examples.push_back(s);
  };

  // Finish the inbox: deliver every message once more (the broker's final
  // redelivery), so "exactly one effect" is checked for EVERY message.
  db.with([&](Connection& c) {
    Inbox inbox(c);
    for (int m = 1; m <= run.messages; ++m) {
      auto r = inbox.process(run.names.consumer, "m" + std::to_string(m), [&](Transaction& tx) {
        tx.execute(sql.insert_final_effect, {m});
      });
      if (r.outcome == InboxOutcome::kProcessed) ++v.drained;
    }
    return 0;
  });

  // 1+2. Fenced writes: per resource in commit order (seq), tokens strictly
  // increase and critical sections [start_ms, end_ms] do not overlap.
  auto audit = db.with([&](Connection& c) { return c.execute(sql.select_audit); });
  v.accepted = static_cast<std::int64_t>(audit.rows.size());
  for (std::size_t i = 0; i < audit.rows.size(); ++i) {
    const auto& row = audit.rows[i];
    if (row[6].as_int() != 0) ++v.paused_accepted;
    if (i == 0 || audit.rows[i - 1][0].as_int() != row[0].as_int()) continue;
    const auto& prev = audit.rows[i - 1];
    if (row[2].as_int() <= prev[2].as_int()) {
      inv["fence_order"] = inv["fence_order"].get<int>() + 1;
      example("fence_order: resource " + row[0].as_string() + " seq " + row[1].as_string() + " fence " +
              row[2].as_string() + " (worker " + row[3].as_string() + (row[6].as_int() ? ", after a pause" : "") +
              ") committed after fence " + prev[2].as_string());
    }
    if (row[4].as_int() < prev[5].as_int()) {
      inv["overlap"] = inv["overlap"].get<int>() + 1;
      example("overlap: resource " + row[0].as_string() + " fence " + row[2].as_string() + " started at " +
              row[4].as_string() + " before fence " + prev[2].as_string() + " ended at " + prev[5].as_string() +
              " (" + std::to_string(prev[5].as_int() - row[4].as_int()) + " ms)");
    }
  }

  // 3. Stock: never below zero, sold + left == initial.
  auto stock = db.with([&](Connection& c) { return c.execute(sql.select_stock); });
  for (const auto& row : stock.rows) {
    std::int64_t qty = row[1].as_int(), initial = row[2].as_int(), sold = row[3].as_int();
    v.sold_total += sold;
    v.left_total += qty;
    v.initial_total += initial;
    if (qty < 0 || sold + qty != initial) {
      inv["stock"] = inv["stock"].get<int>() + 1;
      example("stock: item " + row[0].as_string() + " qty " + std::to_string(qty) + ", sold " + std::to_string(sold) +
              ", initial " + std::to_string(initial));
    }
  }

  // 4. Inbox: every message has exactly one effect.
  auto effects = db.with([&](Connection& c) { return c.execute(sql.select_effects); });
  std::map<std::int64_t, std::int64_t> per_msg;
  for (const auto& row : effects.rows) {
    per_msg[row[0].as_int()] = row[1].as_int();
    v.effect_rows += row[1].as_int();
  }
  for (int m = 1; m <= run.messages; ++m) {
    auto it = per_msg.find(m);
    std::int64_t n = it == per_msg.end() ? 0 : it->second;
    if (n != 1) {
      inv["inbox_effects"] = inv["inbox_effects"].get<int>() + 1;
      example("inbox: message m" + std::to_string(m) + " has " + std::to_string(n) + " effects");
    }
  }

  // 5. Stale locks: a lease whose holder was killed must expire within the
  // ttl of the kill (the watchdog died with it: nothing may extend it). If
  // the row now carries another fence, it was taken over, i.e. it expired.
  const std::int64_t slack = 250;  // kill timestamp estimate + a renewal already in flight
  for (auto& k : kills) {
    if (!k.checked) {
      auto info = db.with([&](Connection& c) { return lease_info(c, run.names.lock(k.resource)); });
      k.checked = true;
      k.taken_over = !info || info->fence != k.fence;
      if (!k.taken_over) k.expire_at_ms = info->expire_at_ms;
    }
    if (k.taken_over) {
      ++v.verified_by_takeover;
      continue;
    }
    ++v.verified_in_row;
    std::int64_t orphan = k.expire_at_ms - k.kill_db_ms;
    v.max_orphan_ms = std::max(v.max_orphan_ms, orphan);
    if (orphan > run.ttl.count() + slack) {
      inv["stale_lock"] = inv["stale_lock"].get<int>() + 1;
      example("stale_lock: " + run.names.lock(k.resource) + " fence " + std::to_string(k.fence) + " held " +
              std::to_string(orphan) + " ms after its holder was killed (ttl " + std::to_string(run.ttl.count()) + ")");
    }
  }
  // And nobody is alive now: no lease of the run may outlast the last exit by more than the ttl.
  auto leases = db.with([&](Connection& c) { return list_leases(c, true); });
  for (const auto& l : leases) {
    if (l.name.rfind(run.names.prefix, 0) != 0) continue;
    if (l.expire_at_ms > w.last_exit_db_ms + run.ttl.count() + slack) {
      inv["stale_lock"] = inv["stale_lock"].get<int>() + 1;
      example("stale_lock: " + l.name + " fence " + std::to_string(l.fence) + " expires " +
              std::to_string(l.expire_at_ms - w.last_exit_db_ms) + " ms after the last worker exited");
    }
  }

  // 6. Lost commits: every transaction a worker saw commit left its rows.
  // A worker counts a commit only after it returned, so a killed worker can
  // leave more rows than it counted, never fewer: fewer rows means the
  // database acknowledged a commit and then lost it (an asynchronous standby
  // promoted, a crash of a server that acknowledges before writing its log).
  const std::int64_t worker_effects =
      db.with([&](Connection& c) { return c.execute(sql.count_worker_effects).rows.at(0)[0].as_int(); });
  for (auto [what, acked, found] : {std::tuple{"fenced writes", t.writes, v.accepted},
                                    {"sales", t.sales_g + t.sales_c, v.sold_total},
                                    {"inbox effects", t.processed, worker_effects}}) {
    if (found >= acked) continue;
    inv["lost_commits"] = inv["lost_commits"].get<int>() + static_cast<int>(acked - found);
    example(std::string("lost_commits: workers saw ") + std::to_string(acked) + " " + what + " commit, " +
            std::to_string(found) + " are in the database");
  }

  // 7. Workers never die unless the injector killed them.
  inv["worker_exits"] = w.unexpected_exits;
  if (w.unexpected_exits > 0)
    example("worker_exits: " + std::to_string(w.unexpected_exits) + " workers died without a kill by the injector");

  for (auto& [k, n] : inv.items()) v.violations += n.get<int>();
  return v;
}

}  // namespace sqlguard::cli::chaos
