// sqlguard bench internals, shared by the command (cmd_bench.cpp), the ops
// (bench_ops.cpp), the runner (bench_run.cpp), the report (bench_report.cpp)
// and the comparators (bench_redis.cpp, bench_etcd.cpp). The statements
// themselves are in bench_sql.h, the statistics in bench_stats.h. Not a
// public API.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_stats.h"
#include "sqlguard/connection.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"

namespace sqlguard::bench {

inline constexpr const char* kStock = "sqlguard_bench_stock";  // the decrement ops' table
inline constexpr std::int64_t kTtlMs = 30000;
inline constexpr std::int64_t kIdemLeaseMs = 30000, kIdemRetentionMs = 3600000;
inline constexpr std::int64_t kInboxRetentionMs = 3600000;
inline constexpr std::int64_t kRowLockTimeoutMs = 5000;
inline constexpr std::int64_t kBigQty = 1000000000000LL;  // stock that never runs out
inline constexpr const char* kAllOps[] = {"lease-distinct",    "lease-hot",     "handoff",    "guarded-decrement",
                                          "rowlock-decrement", "cas-decrement", "idem-first", "idem-replay",
                                          "inbox",             "held-leases",   "waiters",    "fair-lease",
                                          "semaphore-hot",     "rw-mixed",      "takeover",   "lease-coalesced",
                                          "cart-decrement",    "cart-per-row",  "lock-set"};
// The cart ops (issue 41): orders of kCartSkus distinct SKUs (1..3 units
// each) from a catalogue of kCartCatalogue rows, as one
// GuardedUpdate::apply_all() (cart-decrement) or as one apply() per SKU in
// the cart's order inside a transaction (cart-per-row, what users write
// without it). No raw path: both are the public API.
inline constexpr int kCartSkus = 5, kCartCatalogue = 20;
bool cart_op(const std::string& op);
// One order's catalogue indexes: kCartSkus distinct of 0 .. kCartCatalogue - 1,
// in a random order drawn from `rng` (the cart ops and lock-set).
std::vector<int> draw_cart(std::minstd_rand& rng);
// Units the cart ops' orders took, counted by the clients of this process
// (threads mode), checked against what the catalogue's rows lost.
std::atomic<std::int64_t>& cart_units_sold();
// The take-over rule of the lease handles in lease-hot and handoff (--take-over).
TakeOver& bench_take_over();
// --barging-limit: the lease handles' LeaseOptions::barging_limit in
// lease-hot, handoff and the fair-lease op's default row (unset: the default).
std::optional<std::chrono::milliseconds>& bench_barging_limit();
// Sets `o.barging_limit` from --barging-limit when given.
void apply_barging_limit(LeaseOptions& o);
// The lock-client ops (bench_client.cpp): one cell per --held / --waiters
// value in one process, not one per client count; no raw path.
bool client_op(const std::string& op);

// What one call of a client's operation did. `done` counts it as a completed
// op (false: e.g. the lock was held by someone else); exceptions count as
// errors. Contended ops also report their acquire's wait (from the call until
// the lock was owned, or until the call gave up: then `timed_out`).
struct OpResult {
  bool done = false;
  std::int64_t wait_ns = -1;  // -1: not a contended op
  bool timed_out = false;
  OpResult(bool d) : done(d) {}  // NOLINT: an op that only says done or not
  OpResult(bool d, std::int64_t wait, bool timeout) : done(d), wait_ns(wait), timed_out(timeout) {}
};
using OpFn = std::function<OpResult()>;

// The contended cells (lease-hot, handoff): they report fairness
// (per-client successes, Jain's index, acquire waits, acquires that timed
// out) besides throughput. The synchronizer ops (sync_op) report the same
// fields from their own loop.
bool contended(const std::string& op);
// How long a contended acquire waits before it gives up (a timeout).
inline constexpr std::chrono::milliseconds kAcquireTimeout{2000};

// One client's handle on a lock, as the contended cells drive it: sqlguard's
// LeaseLock, the raw baseline and each comparator (Redis, etcd) implement it,
// so every system runs through the same loops and reports the same numbers.
class Contender {
 public:
  virtual ~Contender() = default;
  // Waits up to `timeout` to own the lock: true = owned.
  virtual bool acquire(std::chrono::milliseconds timeout) = 0;
  // Gives it back; throws when the lock was not held any more.
  virtual void release() = 0;
  // The cheapest round trip to the lock's server (the hand-off ceiling's
  // wake-up is half of one).
  virtual void ping() = 0;
};
// Builds client `client`'s contender on lock `name` (called in the client's
// thread or process: connect there).
using MakeContender = std::function<std::unique_ptr<Contender>(const std::string& name, int client)>;
// One contended cycle: a waited acquire (kAcquireTimeout), then release.
OpFn contended_cycle(std::shared_ptr<Contender> c);

// The durability of one lock cycle on a system, as every lease cell states
// it beside its numbers (`durability`, `flushes_per_cycle` in the JSON): the
// settings read from the server, and how many flushes to disk a cycle's
// commits wait for (nullopt: unknown).
struct Durability {
  std::string summary;
  std::optional<int> flushes_per_cycle;
};

// One measured cell: an op at a client count.
struct Cell {
  std::string op;
  int clients = 1;
  std::string prefix;     // unique names of this cell
  std::int64_t key_base;  // stock rows key_base + client (sqlguard) and + 10000 + client (raw)
  ReleaseCommit release_commit = ReleaseCommit::kCoveredByNextAcquire;  // the lease ops' (--durable-release)
  std::int64_t permits = 4;  // semaphore-hot (--permits)
};

// ---- bench_ops.cpp: the ops and their rows
using OpenFn = std::function<std::unique_ptr<Connection>()>;
// Build client `client`'s op on a connection from `open` (called in the
// client's thread/process). Throw for an unknown op.
OpFn sg_op(const Cell& cell, int client, const OpenFn& open);
OpFn raw_op(const Cell& cell, int client, const OpenFn& open);
// The database's own single-client commit: one one-row UPDATE (stock row
// cell.key_base) committing by itself, through the native driver. Its rate
// is what a lease cycle's commits are measured against (vs_commit_rate).
OpFn commit_op(const Cell& cell, const OpenFn& open);
// sqlguard's contender: a LeaseLock on its own connection from `open`,
// waiting as users do (acquire(timeout): backoff, wake-ups).
MakeContender sg_contender(OpenFn open, ReleaseCommit commit);
// The raw baseline's: the library's protocol (acquire_lease/release_lease)
// on native statements, a busy attempt retried after a 1-5 ms nap.
MakeContender raw_contender(OpenFn open, ReleaseCommit commit);
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
// `clients` threads hand lock `name` to each other, each holding it `hold`
// and stepping back `hold` after its release. ops = hand-offs to another
// client (latency: release() returned -> the next owner's acquire()
// returned), misses = re-acquired by the same one, per_client = each
// client's acquisitions, wait_ns/timeouts = every acquire's.
Stats run_handoff(int clients, const std::string& name, const MakeContender& make, std::chrono::milliseconds warmup,
                  std::chrono::milliseconds duration, std::chrono::milliseconds hold);

// The hand-off ceiling: what one hand-off physically needs, measured on the
// same server right before the cell (docs/bench.md, "The hand-off ceiling").
struct Ceiling {
  double hold_ms = 0;     // the owner's work
  double release_ms = 0;  // p50 of release(): the release's commit
  double wakeup_ms = 0;   // half the p50 of the cheapest round trip: one message to the waiter
  double acquire_ms = 0;  // p50 of an uncontended acquire(): the next owner's commit
  double cycle_ms() const { return hold_ms + release_ms + wakeup_ms + acquire_ms; }
  double per_s() const { return cycle_ms() > 0 ? 1000.0 / cycle_ms() : 0; }
};
// One client alone runs the hand-off loop on lock `name` (acquire, hold,
// release, ping, step back) for `warmup` + `duration`.
Ceiling measure_ceiling(const std::string& name, const MakeContender& make, std::chrono::milliseconds warmup,
                        std::chrono::milliseconds duration, std::chrono::milliseconds hold);

// Holds for exactly `hold` from `from` (sleeps to 0.1 ms before the end,
// then yields): what an owner's work takes in the hand-off loops.
void hold_for(std::chrono::milliseconds hold, std::chrono::steady_clock::time_point from);

// ---- bench_client.cpp: the lock-client ops
// What a lock-client cell needs from the run.
struct ClientBench {
  std::string uri;        // --db
  ConnectOptions connect; // the global --connect-timeout applied
  Connection* admin;      // the bench's own connection: server-side counts and the lock-table check
  std::string prefix;     // the cell's lock names start with it (the run's tag: deleted at the end)
  std::string tag;        // unique per cell: PostgreSQL application_name "sqlguard-bench-<tag>"
};
// How long each waiter of the `waiters` op waits before its acquire gives up
// (a timeout): far longer than a round of 1000 hand-offs takes.
inline constexpr std::chrono::milliseconds kWaiterWait{60000};
// held-leases, the lock client's model: one LockClient (default options), `n`
// handles acquired one by one with try_acquire(), held 3 ttl while the client
// renews them (every ttl/3), checked, released.
nlohmann::json held_leases_client(const ClientBench& b, std::size_t n, std::chrono::milliseconds ttl);
// takeover: time from a dead holder's last renewal to a waiting handle's
// acquisition, and from a late handle's arrival to its acquisition, under
// `rule` (`rounds` of each, ttl `ttl`).
nlohmann::json takeover_cell(const ClientBench& b, TakeOver rule, std::chrono::milliseconds ttl, int rounds);
// held-leases, today's per-lease model: `n` LeaseLock handles on one borrowed
// connection whose watchdogs (options.watchdog_connection) open a connection
// and run a thread per held lease; the same hold and checks.
nlohmann::json held_leases_per_lease(const ClientBench& b, std::size_t n, std::chrono::milliseconds ttl);
// The largest count <= `wanted` of per-lease leases the server (or, SQLite,
// the descriptor limit) has room for with 10 connections to spare; `why`
// says what it was computed from.
std::size_t per_lease_fit(Connection& admin, std::size_t wanted, std::string* why);
// waiters: one LockClient; `waiters` handles wait with acquire_async() on
// one name that a first holder has, each taking it in turn, holding `hold`,
// releasing and asking again; measured for whole rounds (every handle once
// per round), at least 2 and at least `duration`, after a first round and
// `warmup`. Hand-off fields as the handoff op's, with its ceiling measured on
// a client of its own.
// lease-coalesced (issue 40 item 5): `requesters` threads on ONE lock client
// (4 connections: 2 work), each taking and releasing a name of its own
// (try_acquire + release), with coalescing on (LockClientOptions::batch_max
// 64) and off (batch_max 1, every call alone) in the same cell.
nlohmann::json coalesced_cell(const ClientBench& b, std::size_t requesters, std::chrono::milliseconds warmup,
                              std::chrono::milliseconds duration);
// lock-set (issue 41 item 2): `clients` threads, a LockClient each, take
// orders of kCartSkus names from a catalogue of kCartCatalogue all or none,
// hold `hold`, release: as a LockSet and, in the same cell, name by name in
// byte order (LeaseLock::acquire each); holds checked for overlaps.
nlohmann::json lock_set_cell(const ClientBench& b, int clients, std::chrono::milliseconds hold,
                             std::chrono::milliseconds warmup, std::chrono::milliseconds duration);
nlohmann::json waiters_cell(const ClientBench& b, std::size_t waiters, std::chrono::milliseconds hold,
                            std::chrono::milliseconds warmup, std::chrono::milliseconds duration);
// What the lock-client ops read from the process and use to set up a cell
// (bench_client.cpp).
std::size_t process_threads();                 // /proc/self/task
std::size_t settled_threads();                 // once ending threads have ended (at most 1 s)
std::int64_t rss_bytes();                      // resident memory (/proc/self/statm)
std::int64_t heap_in_use();                    // mallinfo2: uordblks + hblkhd (every arena, mmapped blocks)
std::int64_t heap_from_system();               // mallinfo2: arena + hblkhd (what malloc holds, in use or free)
struct ResidentSplit {
  std::int64_t anon_bytes = 0;  // RssAnon: written pages (heap, stacks, arenas)
  std::int64_t file_bytes = 0;  // RssFile: mapped files' pages (code, unwind tables)
};
ResidentSplit resident_split();                // /proc/self/status
void trim_heap();                              // malloc_trim(0), before a baseline
void start_shared_threads(const ClientBench& b);  // the process's I/O deadline timer, before a baseline
double seconds_since(std::chrono::steady_clock::time_point t0);
// `b.uri` with PostgreSQL's application_name "sqlguard-bench-<tag>" (set in
// `app`; other URIs as they are, "" app).
std::string tagged_uri(const ClientBench& b, std::string* app);
LockClientOptions client_options(const ClientBench& b);  // the default options, b.connect applied

// ---- bench_soak.cpp: churn-soak (issue 43), not part of "all"
inline constexpr const char* kSoakOp = "churn-soak";
// One churn-soak cell's settings (validated by the command).
struct SoakPlan {
  std::size_t held = 10000;   // leases held all the time (--held)
  std::size_t churn = 1000;   // released and acquired on new names every cycle (--churn), <= held
  bool all_kinds = false;     // --churn-kinds all: the churn takes every kind, not only leases
  std::chrono::milliseconds ttl{5000}, duration{60000}, sample_every{60000};
  std::chrono::milliseconds cycle_every{1000};  // a cycle starts this often (0: back to back)
};
// When the baseline sample is taken: the first minute, or half the run when
// it is shorter than two minutes.
std::chrono::milliseconds soak_baseline_at(std::chrono::milliseconds duration);
// churn-soak: one LockClient holds `held` renewed leases; every cycle it
// releases the `churn` oldest holdings and acquires `churn` new ones on names
// never used before (<prefix>:<cycle>:<i>), a cycle every `cycle_every`
// (back to back when one takes longer) for `duration`. Samples (acquisitions, losses, RSS, heap, the client's stats)
// at the start, every `sample_every`, at the baseline and at the end; each
// one is passed to `on_sample` as it is taken. Reports bytes of heap
// retained per acquisition and RSS growth after the baseline.
nlohmann::json churn_soak_cell(const ClientBench& b, const SoakPlan& plan,
                               const std::function<void(const nlohmann::json&)>& on_sample);

// ---- bench_sync.cpp: the synchronizer ops (issue 28)
// fair-lease, semaphore-hot, rw-mixed: op x clients cells like lease-hot,
// but every client is a thread with a LockClient of its own (one process's
// client, as a deployment has one per process) and a handle of it, looping:
// a waited acquire (kSyncAcquireWait), hold --hold, release, pause --hold.
bool sync_op(const std::string& op);
// How long a synchronizer op's acquire waits before it gives up (a timeout).
inline constexpr std::chrono::milliseconds kSyncAcquireWait{5000};
// rw-mixed: the share of cycles that ask for the exclusive mode.
inline constexpr double kRwExclusiveShare = 0.1;
// What a synchronizer cell needs from the run.
struct SyncBench {
  std::string uri;          // --db
  ConnectOptions connect;   // the global --connect-timeout applied
  std::string prefix;       // the cell's names start with it (the run's tag: deleted at the end)
  int clients = 1;
  std::int64_t permits = 4;  // semaphore-hot: --permits
  std::chrono::milliseconds warmup{0}, duration{0}, hold{0};
};
// One cell of a synchronizer op. fair-lease: the unfair lease then the fair
// one (LeaseOptions::fair), each with fresh clients on a name of its own;
// the fair side's fields unprefixed, the unfair side's prefixed `unfair_`,
// and fair_vs_unfair. Needs clients >= 2.
nlohmann::json sync_cell(const std::string& op, const SyncBench& b);
// One uncontended cycle of `op` (rw-mixed: `exclusive` picks the mode) on
// `client`'s handle of name `name`, for --emit-sql and statements_per_op.
// The handle is made on the first call and kept.
std::function<void()> sync_solo_cycle(const std::string& op, std::shared_ptr<LockClient> client,
                                      const std::string& name, std::int64_t permits, bool exclusive);

// ---- bench_report.cpp: output
double r3(double v);  // rounded to 3 decimals, as the JSON reports numbers
void print_table_header();
void print_row(const nlohmann::json& j);  // one cell as a row of the text table
void print_client_row(const nlohmann::json& j);  // a held-leases, waiters or churn-soak cell as text
void print_soak_sample(std::ostream& out, const nlohmann::json& sample);  // one churn-soak sample as a line
void print_sync_row(const nlohmann::json& j);    // a synchronizer cell's own figures, under its row
// A cell's result fields: sqlguard path `st`, raw path `raw` (nullptr: --no-raw);
// fairness fields for a contended op.
void add_cell_fields(nlohmann::json& j, const std::string& op, Stats& st, Stats* raw);
// A handoff cell's fields: hand-offs, fairness, the ceiling and its parts.
void add_handoff_fields(nlohmann::json& j, Stats& st, const Ceiling& ceiling);
// Fairness of a contended cell, each field name prefixed by `prefix` ("" or
// "raw_"): per_client_min/max, jain_index, wait_p50/p99/max_ms, timeouts.
void add_fairness_fields(nlohmann::json& j, const std::string& prefix, Stats& st);
void add_durability_fields(nlohmann::json& j, const Durability& d);
// A synchronizer side's fields, each name prefixed by `prefix`: ops_per_s,
// p50_ms/p99_ms (acquire latency of the acquires that succeeded), ops,
// errors, the fairness fields and wait_p99_cycles/wait_max_cycles.
void add_sync_fields(nlohmann::json& j, const std::string& prefix, Stats& st);
nlohmann::json lat_json(const std::string& phase, const std::string& op, Stats& st);  // a --scale result
void print_scale_row(const std::string& label, Stats& st);
void print_cleanup_row(Stats& during, std::int64_t locks_deleted, std::int64_t idempotency_deleted,
                       double cleanup_s, double fill_s);
// Writes an SVG line chart of ops/s (log scale) against clients, one line per op
// (dashed: raw driver baseline; dash-dot: a comparator).
void write_svg(const std::string& path, const std::string& title, const std::vector<nlohmann::json>& cells);

// ---- comparators: other lock services, run through the same loops as
// sqlguard (bench_redis.cpp, bench_etcd.cpp). Their cells have dialect = name.
struct Comparator {
  std::string name;        // "redis", "etcd"
  Durability durability;   // of a lock cycle, read from the server
  int round_trips = 0;     // of an uncontended lock cycle (statements_per_op)
  MakeContender make;
  // lease-coalesced's comparator: contenders sharing two connections, each
  // of which sends what its requesters queued as one pipeline (a fresh pair
  // per call: one cell). Empty: the comparator has none.
  std::function<MakeContender()> pipelined;
};
// From the comparators module (bench_comparators.h; throws not_supported,
// saying why, when it is not there).
// SET key token NX PX + the Lua check-and-delete release at HOST:PORT.
// Throws, naming the address, when Redis cannot be reached.
Comparator redis_comparator(const std::string& host_port);
// etcd's lock service (a lease per client, Lock/Unlock) through its JSON
// gateway at HOST:PORT. Throws, naming the address, when etcd cannot be
// reached.
Comparator etcd_comparator(const std::string& host_port);

}  // namespace sqlguard::bench
