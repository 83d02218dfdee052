// sqlguard bench internals, shared by the command (cmd_bench.cpp), the ops
// (bench_ops.cpp), the runner (bench_run.cpp), the report (bench_report.cpp)
// and the Redis comparator (bench_redis.cpp). The statements themselves are
// in bench_sql.h. Not a public API.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sqlguard/connection.h"

namespace sqlguard::bench {

inline constexpr const char* kStock = "sqlguard_bench_stock";  // the decrement ops' table
inline constexpr std::int64_t kTtlMs = 30000;
inline constexpr std::int64_t kIdemLeaseMs = 30000, kIdemRetentionMs = 3600000;
inline constexpr std::int64_t kInboxRetentionMs = 3600000;
inline constexpr std::int64_t kRowLockTimeoutMs = 5000;
inline constexpr std::int64_t kBigQty = 1000000000000LL;  // stock that never runs out
inline constexpr const char* kAllOps[] = {"lease-distinct", "lease-hot",  "handoff",     "guarded-decrement",
                                          "rowlock-decrement", "cas-decrement", "idem-first", "idem-replay", "inbox"};

// One client's operation: returns true when it counts as a completed op
// (e.g. false = lock held by someone else). Exceptions count as errors.
using OpFn = std::function<bool()>;

struct Stats {
  std::uint64_t ops = 0, misses = 0, errors = 0;
  std::vector<std::int64_t> lat_ns;  // of completed ops in the measured window
  double elapsed_s = 0;
  std::string first_error;
  double ops_per_s() const { return elapsed_s > 0 ? static_cast<double>(ops) / elapsed_s : 0; }
  double pct_ms(double q);  // sorts lat_ns on first use
};

// One measured cell: an op at a client count.
struct Cell {
  std::string op;
  int clients = 1;
  std::string prefix;     // unique names of this cell
  std::int64_t key_base;  // stock rows key_base + client (sqlguard) and + 10000 + client (raw)
};

// ---- bench_ops.cpp: the ops and their rows
// Build client `client`'s op on a connection from `open` (called in the
// client's thread/process). Throw for an unknown op.
OpFn sg_op(const Cell& cell, int client, const std::function<std::unique_ptr<Connection>()>& open);
OpFn raw_op(const Cell& cell, int client, const std::function<std::unique_ptr<Connection>()>& open);
void create_stock(Connection& c);                     // kStock, if missing
void fill_stock(Connection& c, std::int64_t from, int n);  // rows from..from+n-1 with kBigQty
// --scale: `n` expired rows tagged `tag` in sqlguard_lock or sqlguard_idempotency.
void bulk_fill(Connection& c, const std::string& table, const std::string& tag, std::int64_t n);

// ---- bench_run.cpp: running a cell
// Runs `clients` copies of the loop built by `make(client)` for `warmup`
// then `duration`, each on its own thread, or in its own forked process when
// `processes`. `make` runs in the thread/child (open connections there).
Stats run_clients(int clients, bool processes, const std::function<OpFn(int client)>& make,
                  std::chrono::milliseconds warmup, std::chrono::milliseconds duration);
// `clients` threads hand one lease to each other, each holding it `hold`;
// ops = hand-offs to another client, misses = re-acquired by the same one.
Stats run_handoff(int clients, const Cell& cell, const std::function<std::unique_ptr<Connection>()>& open,
                  std::chrono::milliseconds warmup, std::chrono::milliseconds duration, std::chrono::milliseconds hold);
// The hand-off ceiling's release commit + acquire commit: one client alone
// runs the hand-off loop (acquire, hold, release, step back) for `duration`;
// returns the p50 of acquire() plus the p50 of release(), in ms.
double solo_cycle_ms(const Cell& cell, const std::function<std::unique_ptr<Connection>()>& open,
                     std::chrono::milliseconds warmup, std::chrono::milliseconds duration, std::chrono::milliseconds hold);

// ---- bench_report.cpp: output
double r3(double v);  // rounded to 3 decimals, as the JSON reports numbers
void print_table_header();
void print_row(const nlohmann::json& j);  // one cell as a row of the text table
// A cell's result fields: sqlguard path `st`, raw path `raw` (nullptr: --no-raw).
void add_cell_fields(nlohmann::json& j, const std::string& op, Stats& st, Stats* raw);
void add_handoff_fields(nlohmann::json& j, Stats& st, std::chrono::milliseconds hold);
nlohmann::json lat_json(const std::string& phase, const std::string& op, Stats& st);  // a --scale result
void print_scale_row(const std::string& label, Stats& st);
void print_cleanup_row(Stats& during, std::int64_t locks_deleted, std::int64_t idempotency_deleted,
                       double cleanup_s, double fill_s);
// Writes an SVG line chart of ops/s (log scale) against clients, one line per op
// (dashed: raw driver baseline; dotted: redis).
void write_svg(const std::string& path, const std::string& title, const std::vector<nlohmann::json>& cells);

// ---- bench_redis.cpp: Redis comparator (compiled only with hiredis). Cells have dialect "redis".
bool redis_compiled();
std::vector<nlohmann::json> run_redis(const std::string& host_port, const std::vector<std::string>& ops,
                                      const std::vector<int>& clients, bool processes,
                                      std::chrono::milliseconds warmup, std::chrono::milliseconds duration);

}  // namespace sqlguard::bench
