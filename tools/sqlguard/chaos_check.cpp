// `sqlguard chaos`: the invariant checker, and (ChaosSql) every statement
// the coordinator sends. See chaos_coordinator.h.
#include <algorithm>
#include <functional>
#include <map>
#include <thread>
#include <tuple>

#include "chaos_coordinator.h"
#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/semaphore.h"

namespace sqlguard::cli::chaos {

using nlohmann::json;

// =================================================================================
// ChaosSql: every statement of the chaos coordinator on the run's OWN tables
// (created by us, checked by us; the same text on every dialect). What it
// does to sqlguard's tables and sessions goes through the public API
// (sqlguard/admin.h).
// =================================================================================

ChaosSql::ChaosSql(const Names& n, const KindSpec& kind) {
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
  // The journals (written by the workers, read by the checker).
  {
    // One row per hold whose end owns() confirmed; mode x (a lease, a
    // semaphore holding, an exclusive hold) or s (a shared hold);
    // seen_fence: the resource's last fence as a shared holder read it (-1:
    // a writer).
    create_tables.push_back("CREATE TABLE " + n.hold +
                            " (resource INTEGER NOT NULL, worker INTEGER NOT NULL, pid BIGINT NOT NULL, mode "
                            "VARCHAR(1) NOT NULL, permits BIGINT NOT NULL, fence BIGINT NOT NULL, start_ms BIGINT NOT "
                            "NULL, end_ms BIGINT NOT NULL, seen_fence BIGINT NOT NULL, paused INTEGER NOT NULL)");
    tables.push_back(n.hold);
  }
  if (kind.kind == LockKind::kFair) {
    // One row per fair wait that ended (granted: fence > 0).
    create_tables.push_back("CREATE TABLE " + n.wait +
                            " (resource INTEGER NOT NULL, worker INTEGER NOT NULL, pid BIGINT NOT NULL, fence BIGINT "
                            "NOT NULL, arrive_ms BIGINT NOT NULL, queued_ms BIGINT NOT NULL, wait_ms BIGINT NOT NULL, "
                            "end_ms BIGINT NOT NULL, stalled INTEGER NOT NULL)");
    tables.push_back(n.wait);
  }
  select_hold = "SELECT resource, mode, permits, fence, start_ms, end_ms, seen_fence, worker FROM " + n.hold +
                " ORDER BY resource, start_ms";
  select_wait = "SELECT resource, worker, fence, arrive_ms, queued_ms, wait_ms, end_ms, stalled FROM " + n.wait +
                " ORDER BY resource, arrive_ms";
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

namespace {

// One hold interval of the journal (--lock-kind semaphore / rw).
struct Hold {
  int resource;
  bool exclusive;
  std::int64_t permits, fence, start_ms, end_ms, seen_fence;
  int worker;
};

// One fair wait of the journal (--lock-kind fair).
struct Wait {
  int resource, worker;
  std::int64_t fence, arrive_ms, queued_ms, wait_ms, end_ms;
  bool stalled;
};

std::string interval(const Hold& h) {
  return "[" + std::to_string(h.start_ms) + ", " + std::to_string(h.end_ms) + "]";
}

// ---- the checks of --lock-kind ------------------------------------------------------
// The evidence is the workers' journals, stamped with this host's
// CLOCK_MONOTONIC (every worker runs here; no wall-clock step, of the
// database or of a worker, moves it). A hold row is written only if owns()
// was true after its end_ms was read, so by the trust window its
// [start_ms, end_ms] lies inside the hold; two intervals that share an
// instant (start of one < end of the other, strictly: the stamps have 1 ms
// steps) were held at once.

// semaphore:N: the permits of the holds of each instant never exceed N.
void check_permits(Verdict& v, const std::vector<Hold>& holds, std::int64_t limit,
                   const std::function<void(const std::string&)>& example) {
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> events;  // (time, +permits / -permits)
  for (const auto& h : holds) {
    events[h.resource].push_back({h.start_ms, h.permits});
    events[h.resource].push_back({h.end_ms, -h.permits});
  }
  std::int64_t most = 0;
  int over = 0;
  for (auto& [r, ev] : events) {
    // Ends before starts at the same millisecond: [a, t] and [t, b] touch,
    // they do not overlap.
    std::sort(ev.begin(), ev.end());
    std::int64_t held = 0;
    for (auto [t, d] : ev) {
      held += d;
      most = std::max(most, held);
      if (d > 0 && held > limit) {
        ++over;
        example("permit_limit: resource " + std::to_string(r) + " had " + std::to_string(held) +
                " permits held at db time " + std::to_string(t) + " (semaphore of " + std::to_string(limit) + ")");
      }
    }
  }
  v.invariants["permit_limit"] = over;
  v.holds["max_permits_held"] = most;
}

// rw: no exclusive hold shares an instant with another hold; no shared
// holder read a fence larger than its own (a write by an exclusive holder
// that acquired while it held). The lease and the fair lease (every hold
// exclusive) count theirs under `invariant` "overlap".
void check_rw(Verdict& v, const std::vector<Hold>& holds, const std::function<void(const std::string&)>& example,
              const std::string& invariant = "rw_exclusion") {
  int bad = 0;
  std::int64_t shared_overlaps = 0, readers = 0, writers = 0;
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const Hold& a = holds[i];
    ++(a.exclusive ? writers : readers);
    if (!a.exclusive && a.seen_fence > a.fence) {
      ++bad;
      example("rw_exclusion: a shared holder of resource " + std::to_string(a.resource) + " (fence " +
              std::to_string(a.fence) + ", " + interval(a) + ") read a write of fence " + std::to_string(a.seen_fence));
    }
    // Sorted by (resource, start_ms): the holds that start before a ends.
    for (std::size_t j = i + 1; j < holds.size(); ++j) {
      const Hold& b = holds[j];
      if (b.resource != a.resource || b.start_ms >= a.end_ms) break;
      if (a.exclusive || b.exclusive) {
        ++bad;
        example(invariant + ": resource " + std::to_string(a.resource) + ": " +
                (a.exclusive ? "exclusive" : "shared") + " fence " + std::to_string(a.fence) + " " + interval(a) +
                " and " + (b.exclusive ? "exclusive" : "shared") + " fence " + std::to_string(b.fence) + " " +
                interval(b) + " overlap");
      } else {
        ++shared_overlaps;
      }
    }
  }
  v.invariants[invariant] = (v.invariants.contains(invariant) ? v.invariants[invariant].get<int>() : 0) + bad;
  v.holds["exclusive_holds"] = writers;
  v.holds["shared_holds"] = readers;
  v.holds["shared_overlaps"] = shared_overlaps;  // > 0: readers did share
}

// fair: a wait X whose place was taken (queued_ms) before another wait Y
// arrived (arrive_ms) has the smaller ticket (tickets of a name are drawn
// one at a time, in commit order). While X's place is live Y cannot be
// granted, so Y's grant must come after X's grant (fences follow grants) or
// after X gave up (no earlier than arrive_ms + wait_ms). Excused: a wait
// whose place may have lapsed, i.e. its client went 2/3 of the place's ttl
// without renewing it, or the worker stood still a third of it (a SIGSTOP,
// a partition, a server restart; the worker measures it: `stalled`). Places
// that lapsed are what the fair lease may skip. A killed waiter leaves no
// row.
void check_fifo(Verdict& v, const std::vector<Wait>& waits,
                const std::function<void(const std::string&)>& example) {
  const std::int64_t slack = 50;  // db_now_ms readings, one round trip each
  std::int64_t checked = 0, excused_pairs = 0, granted = 0, gave_up = 0;
  int overtaken = 0;
  for (const auto& x : waits) {
    ++(x.fence > 0 ? granted : gave_up);
    const bool ex = x.stalled;
    bool bad = false;
    for (const auto& y : waits) {
      if (&x == &y || y.resource != x.resource || y.fence <= 0 || !(x.queued_ms < y.arrive_ms)) continue;
      // Y arrived after X's place was taken: Y must not be granted while X waits.
      if (ex) {
        ++excused_pairs;
        continue;
      }
      ++checked;
      const bool before_x_granted = x.fence > 0 && y.fence < x.fence;
      const bool before_x_gave_up = x.fence <= 0 && y.end_ms < x.arrive_ms + x.wait_ms - slack;
      if ((before_x_granted || before_x_gave_up) && !bad) {
        bad = true;
        ++overtaken;
        example("fifo_order: resource " + std::to_string(x.resource) + ": worker " + std::to_string(y.worker) +
                " arrived at " + std::to_string(y.arrive_ms) + ", after worker " + std::to_string(x.worker) +
                " queued at " + std::to_string(x.queued_ms) + ", and was granted fence " + std::to_string(y.fence) +
                (x.fence > 0 ? " before its fence " + std::to_string(x.fence)
                             : " while it still waited (it gave up unserved)"));
      }
    }
  }
  v.invariants["fifo_order"] = overtaken;
  v.holds["waits_granted"] = granted;
  v.holds["waits_unserved"] = gave_up;
  v.holds["fifo_pairs_checked"] = checked;
  v.holds["fifo_pairs_excused"] = excused_pairs;
}

}  // namespace

Verdict check(Run& run, Db& db, std::vector<KillRecord>& kills, const Workers& w) {
  const KindSpec& kind = run.o.kind;
  const ChaosSql sql(run.names, kind);
  const WorkerTotals t = w.totals();
  Verdict v;
  json& inv = v.invariants;
  inv = {{"fence_order", 0}, {"overlap", 0},      {"stock", 0},       {"inbox_effects", 0},
         {"stale_lock", 0},  {"lost_commits", 0}, {"worker_exits", 0}};
  // A semaphore's holders overlap by design: permit_limit replaces overlap.
  if (kind.kind == LockKind::kSemaphore) inv.erase("overlap");
  json& examples = v.examples;
  std::function<void(const std::string&)> example = [&](const std::string& s) {
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
    if (kind.kind != LockKind::kSemaphore && row[4].as_int() < prev[5].as_int()) {
      inv["overlap"] = inv["overlap"].get<int>() + 1;
      example("overlap: resource " + row[0].as_string() + " fence " + row[2].as_string() + " started at " +
              row[4].as_string() + " before fence " + prev[2].as_string() + " ended at " + prev[5].as_string() +
              " (" + std::to_string(prev[5].as_int() - row[4].as_int()) + " ms)");
    }
  }

  // 2b. The kind's own invariant, from its journal (the lease kinds: no
  // two holders that believed they held at one instant, "overlap").
  {
    auto rows = db.with([&](Connection& c) { return c.execute(sql.select_hold); });
    std::vector<Hold> holds;
    for (const auto& r : rows.rows)
      holds.push_back({static_cast<int>(r[0].as_int()), r[1].as_string() == "x", r[2].as_int(), r[3].as_int(),
                       r[4].as_int(), r[5].as_int(), r[6].as_int(), static_cast<int>(r[7].as_int())});
    v.holds["holds_journaled"] = static_cast<std::int64_t>(holds.size());
    v.holds["holds_unconfirmed"] = t.holds_unconfirmed;  // owns() false at their end: not journaled
    if (kind.kind == LockKind::kSemaphore)
      check_permits(v, holds, kind.permits, example);
    else if (kind.kind == LockKind::kReadWrite)
      check_rw(v, holds, example);
    else
      check_rw(v, holds, example, "overlap");
  }
  if (kind.kind == LockKind::kFair) {
    auto rows = db.with([&](Connection& c) { return c.execute(sql.select_wait); });
    std::vector<Wait> waits;
    for (const auto& r : rows.rows)
      waits.push_back({static_cast<int>(r[0].as_int()), static_cast<int>(r[1].as_int()), r[2].as_int(), r[3].as_int(),
                       r[4].as_int(), r[5].as_int(), r[6].as_int(), r[7].as_int() != 0});
    check_fifo(v, waits, example);
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
  // Expiries are database-clock times: under clock steps (a holding written
  // at +1 h "expires" an hour late by what `lock list` shows, while the
  // watched take-over frees it after its ttl unrenewed) this is not judged.
  if (run.clock_steps) {
    inv.erase("stale_lock");
  } else {
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
    // Semaphore holdings and read-write holds are not lease rows: once the
    // ttl has passed since the last worker exited, none may be live.
    if (!kind.lease_rows()) {
      const std::int64_t at = w.last_exit_db_ms + run.ttl.count() + slack;
      while (run.db_now_ms() < at) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (int r = 0; r < run.resources; ++r) {
        auto info = db.with([&](Connection& c) { return synchronizer_info(c, run.names.lock(r)); });
        if (info.in_use > 0 || info.shared > 0 || info.exclusive) {
          inv["stale_lock"] = inv["stale_lock"].get<int>() + 1;
          example("stale_lock: " + run.names.lock(r) + " still has " +
                  (kind.kind == LockKind::kSemaphore ? std::to_string(info.in_use) + " permits held"
                                                     : std::to_string(info.shared) + " shared / " +
                                                           (info.exclusive ? "1" : "0") + " exclusive holds") +
                  " more than the ttl after the last worker exited");
        }
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
