// sqlguard bench: the statements the ops send, for the raw baseline,
// --emit-sql and statements_per_op. Everything here comes from the public
// SQL catalog (sqlguard/catalog.h) or from recording what the strategies
// send (a statement observer), never from SQL rebuilt by hand.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench.h"
#include "sqlguard/catalog.h"
#include "sqlguard/connection.h"

namespace sqlguard::bench {

// The ops' own business writes (what a user's code would send).
inline constexpr const char* kRowLockUpdate = "UPDATE sqlguard_bench_stock SET qty = ? WHERE id = ?";
inline constexpr const char* kInboxEffect = "UPDATE sqlguard_bench_stock SET qty = qty - 1 WHERE id = ?";

// Every statement the ops issue, exactly as sqlguard sends them: lease and
// dedup statements straight from the catalog (sql/<dialect>/*.sql); the
// statements on the bench table (catalog templates filled with its
// identifiers) recorded from the strategies. An entry the dialect does not
// have is "". `c` must have the bench table (create_stock).
struct Sql {
  std::string g_update, g_exists;
  std::string rl_select, lock_timeout_get, lock_timeout_set, lock_timeout_local;
  std::string cas_select, cas_update, cas_version;
  std::string idem_insert, idem_select, idem_complete;
  std::string inbox_insert;
  // Their catalog entries: the raw path binds values in the canonical order
  // through each entry's bind_order (in_bind_order, bench_raw.h).
  const CatalogEntry *e_idem_insert, *e_idem_select, *e_idem_complete, *e_inbox_insert;
  explicit Sql(Connection& c);
};

// What one op sends per completed operation in steady state, recorded from
// a real run of the sqlguard path: one line per round trip (BEGIN/COMMIT
// included), each statement under its catalog entry and parameters.
struct Recorded {
  std::vector<std::string> lines;
  int round_trips = 0;
  // rw-mixed: `lines` are a shared cycle's, these an exclusive one's (-1: none).
  std::vector<std::string> exclusive_lines;
  int round_trips_exclusive = -1;
};
// Runs the sqlguard path of `op` twice (stock row `cell.key_base` must
// exist) and records the second run. The synchronizer ops: one uncontended
// cycle on a lock client of their own, recorded by a process-wide observer.
Recorded record_op(const std::string& op, const Cell& cell);

// What one lease cycle (acquire + release) waits for on the server behind
// `c`, from its durability settings (read here: what the server runs with,
// not what it was meant to run with) and `commit`.
Durability lease_cycle_durability(Connection& c, ReleaseCommit commit);
// What one commit of commit_op waits for on that server (flushes_per_cycle:
// per commit, 1 or 0).
Durability commit_durability(Connection& c);

// --emit-sql: the recorded statements per op, as SQL text, or with --json one
// object per op: dialect, op, round_trips, statements[].
void emit_sql(const std::string& dialect, bool numbered, const std::vector<std::string>& ops,
              const std::map<std::string, Recorded>& recorded);

}  // namespace sqlguard::bench
