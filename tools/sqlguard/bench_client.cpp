// sqlguard bench: the lock-client ops (issue 26). `held-leases` holds N
// renewed leases for 3 ttl on one LockClient and, for comparison in the same
// run, today's per-lease model (a LeaseLock on a borrowed connection whose
// watchdog opens a connection and runs a thread per lease); `waiters` makes
// N handles of one client wait for one hot name with acquire_async() while
// they hand it to each other. What each cell costs is measured from outside
// the client too: threads from /proc/self/task, memory from
// /proc/self/statm, sessions from the server (pg_stat_activity,
// information_schema.processlist), renewal statements from a statement
// observer and owned leases from the lock table, beside the client's own
// stats().
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bench.h"
#include "sqlguard/errors.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"

namespace sqlguard::bench {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using nlohmann::json;

// ---- what the process and the server say ----------------------------------------

std::size_t process_threads() {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// The thread count once threads that are ending have ended (a lock client's
// or a watchdog's renewal worker finishes on its own after its owner is
// gone): two equal reads 20 ms apart, at most 1 s.
std::size_t settled_threads() {
  std::size_t last = process_threads();
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    const std::size_t now = process_threads();
    if (now == last) return now;
    last = now;
  }
  return last;
}

// Resident memory now. Before a baseline, trim_heap() first: memory an
// earlier cell freed but malloc kept would otherwise be reused unseen.
// sqlguard runs one timer thread per process for I/O deadlines, started by
// the first statement of a connection with an io_timeout (the lock client's
// connections and the watchdogs' have one) and shared by all of them. It is
// started here, before a cell's baseline, so no cell counts it as its own.
void start_shared_threads(const ClientBench& b) {
  ConnectOptions o = b.connect;
  o.io_timeout = std::chrono::seconds(10);
  make_connection(b.uri, o)->db_now_ms();
}

std::int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

// RssAnon and RssFile of /proc/self/status: resident memory split into what
// the process wrote (heap, stacks, arenas) and pages of mapped files (code,
// unwind tables, read on first use). A step in RSS with a flat heap is one of
// the two; this says which.
ResidentSplit resident_split() {
  ResidentSplit r;
  std::ifstream f("/proc/self/status");
  std::string line;
  auto kb = [&](const char* key, std::int64_t& out) {
    const std::size_t n = std::strlen(key);
    if (line.compare(0, n, key) == 0) out = std::stoll(line.substr(n)) * 1024;
  };
  while (std::getline(f, line)) {
    kb("RssAnon:", r.anon_bytes);
    kb("RssFile:", r.file_bytes);
  }
  return r;
}

void trim_heap() { ::malloc_trim(0); }

// What malloc has taken from the system (every arena's pages and the mmapped
// blocks) and how much of it is free: the allocator's share of RssAnon.
std::int64_t heap_from_system() {
  const struct mallinfo2 m = ::mallinfo2();
  return static_cast<std::int64_t>(m.arena + m.hblkhd);
}

// Heap memory the program has allocated and not freed (malloc's own count):
// beside RSS, it tells live memory from what the allocator keeps.
std::int64_t heap_in_use() {
  const struct mallinfo2 m = ::mallinfo2();
  return static_cast<std::int64_t>(m.uordblks + m.hblkhd);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

namespace {

bool behind_pooler(const std::string& uri) { return uri.find("pooler=") != std::string::npos; }

// The sessions the server has for this cell, counted on the bench's own
// connection: the ones of the bench's database user that were not there at
// the baseline (PostgreSQL: also carrying the cell's application_name when
// the cell set one). nullopt where there is nothing to count (SQLite, a
// transaction pooler in between).
class ServerSessions {
 public:
  ServerSessions(Connection& admin, const std::string& uri, std::string app) : admin_(admin), app_(std::move(app)) {
    if (admin.kind() == DialectKind::kSqlite) {
      source_ = "none: SQLite has no server sessions";
      return;
    }
    if (behind_pooler(uri)) {
      source_ = "none: behind a connection pooler the server's sessions are the pooler's";
      return;
    }
    if (admin.kind() == DialectKind::kPostgresql) {
      sql_ = "SELECT pid FROM pg_stat_activity WHERE usename = current_user AND datname = current_database()";
      if (!app_.empty()) sql_ += " AND application_name = ?";
      source_ = app_.empty() ? "pg_stat_activity: sessions of the user opened since the baseline"
                             : "pg_stat_activity: sessions with application_name '" + app_ + "'";
    } else {
      sql_ = "SELECT id FROM information_schema.processlist WHERE user = SUBSTRING_INDEX(USER(), '@', 1)";
      source_ = "information_schema.processlist: sessions of the user opened since the baseline";
    }
    for (auto id : ids()) baseline_.insert(id);
  }
  std::optional<std::int64_t> count() {
    if (sql_.empty()) return std::nullopt;
    std::int64_t n = 0;
    for (auto id : ids()) n += baseline_.count(id) ? 0 : 1;
    return n;
  }
  const std::string& source() const { return source_; }

 private:
  std::vector<std::int64_t> ids() {
    Params p;
    if (admin_.kind() == DialectKind::kPostgresql && !app_.empty()) p.emplace_back(app_);
    auto r = admin_.execute_once(sql_, p);
    std::vector<std::int64_t> out;
    for (const auto& row : r.rows) out.push_back(row[0].as_int());
    return out;
  }
  Connection& admin_;
  std::string app_, sql_, source_;
  std::set<std::int64_t> baseline_;
};

json opt_json(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

// `uri` with PostgreSQL's application_name set to `app`, so that the server
// can tell this cell's sessions apart; other URIs as they are ("" app).
std::string tagged_uri(const ClientBench& b, std::string* app) {
  app->clear();
  if (b.admin->kind() != DialectKind::kPostgresql || behind_pooler(b.uri) ||
      b.uri.find("application_name=") != std::string::npos)
    return b.uri;
  *app = "sqlguard-bench-" + b.tag;
  return b.uri + (b.uri.find('?') == std::string::npos ? "?" : "&") + "application_name=" + *app;
}

namespace {

// Counts the renewal statements every connection of the process sends
// (catalog entries lease_renew*: today's per-lease renew, the batch, and
// MariaDB's batch lock + update) while it lives.
class RenewStatements {
 public:
  RenewStatements() : count_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
    set_global_statement_observer([c = count_](const StatementEvent& e) {
      if (e.kind == StatementKind::kStatement && e.catalog_name.rfind("lease_renew", 0) == 0) ++*c;
    });
  }
  ~RenewStatements() { set_global_statement_observer({}); }
  RenewStatements(const RenewStatements&) = delete;
  RenewStatements& operator=(const RenewStatements&) = delete;
  std::uint64_t now() const { return count_->load(); }

 private:
  std::shared_ptr<std::atomic<std::uint64_t>> count_;
};

}  // namespace

LockClientOptions client_options(const ClientBench& b) {
  LockClientOptions o;
  o.connect = b.connect;
  return o;
}

namespace {

// What a held-leases cell measures while it holds, sampled every 50 ms.
struct HoldSamples {
  std::size_t threads_max = 0;      // over the process's thread count at the baseline
  std::size_t connections_max = 0;  // the client's connections_open (lock-client model)
};

// Heap in use at its lowest over 1.2 s (longer than a renew period of the
// cells' 3 s leases): a renewal round's statement buffers (hundreds of KB at
// 10,000 held) are freed when it ends, so the lowest of 30 readings is what
// stays.
std::int64_t settled_heap() {
  std::int64_t low = heap_in_use();
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(milliseconds(40));
    low = std::min(low, heap_in_use());
  }
  return low;
}

// What a waiter costs (lock-client model): up to 1,000 other handles wait
// with acquire_async() on names the cell holds. Heap in use is read once
// every one of them is pending (the client counts it), then they are
// cancelled and destroyed and it is read again: what the waits left behind.
// Twice: the first round also starts what a client sets up once (its waiter
// and listener threads, their statements, containers grown to 1,000), the
// second is what every later wait costs and leaves.
struct WaitRound {
  std::size_t pending = 0, served = 0, after_cancel = 0;
  std::int64_t per_waiter = 0, left = 0;
};

WaitRound wait_round(const std::vector<std::unique_ptr<LeaseLock>>& locks, const std::shared_ptr<LockClient>& client,
                     milliseconds ttl) {
  WaitRound r;
  const std::size_t k = std::min<std::size_t>(locks.size(), 1000);
  const std::size_t before = client->stats().waiters;
  LeaseOptions o;
  o.ttl = ttl;
  const std::int64_t heap0 = settled_heap();
  {
    std::vector<std::unique_ptr<LeaseLock>> waiters;
    std::vector<std::future<bool>> done;
    waiters.reserve(k);
    done.reserve(k);
    for (std::size_t i = 0; i < k; ++i) {
      waiters.push_back(std::make_unique<LeaseLock>(client, locks[i]->name(), o, Watchdog::kOn));
      done.push_back(waiters.back()->acquire_async(std::chrono::seconds(60)));
    }
    const auto until = Clock::now() + std::chrono::seconds(10);
    while ((r.pending = client->stats().waiters - before) < k && Clock::now() < until)
      std::this_thread::sleep_for(milliseconds(10));
    r.per_waiter = std::llround(static_cast<double>(settled_heap() - heap0) / static_cast<double>(k));
    for (auto& w : waiters) w->cancel_acquire();
    for (auto& f : done) {
      try {
        r.served += f.get() ? 1 : 0;  // a waiter on a held name: 0 unless a lease was lost
      } catch (const std::exception&) {
      }
    }
  }
  std::this_thread::sleep_for(milliseconds(100));  // completions run on the client's threads
  r.after_cancel = client->stats().waiters - before;
  r.left = settled_heap() - heap0;
  return r;
}

void measure_waiters(json& j, const std::vector<std::unique_ptr<LeaseLock>>& locks,
                     const std::shared_ptr<LockClient>& client, milliseconds ttl) {
  const WaitRound first = wait_round(locks, client, ttl);
  const WaitRound again = wait_round(locks, client, ttl);
  j["waiters_measured"] = again.pending;
  j["heap_per_waiter_bytes"] = again.pending ? json(again.per_waiter) : json(nullptr);
  j["heap_left_by_waits_bytes"] = again.left;
  j["heap_first_waits_setup_bytes"] = first.left;  // the client's one-time set-up for waiting
  j["waiters_served"] = first.served + again.served;
  j["waiters_after_cancel"] = again.after_cancel;
}

// The part every held-leases cell shares: acquire `locks` one by one, hold
// for 3 ttl while sampling, then check what is still owned, locally and in
// the lock table, and release. `client` is null for the per-lease model.
void hold_and_check(json& j, const ClientBench& b, std::vector<std::unique_ptr<LeaseLock>>& locks,
                    const std::shared_ptr<LockClient>& client, milliseconds ttl, std::size_t threads0,
                    std::int64_t rss0, std::int64_t heap0, ServerSessions& sessions,
                    const RenewStatements& renews) {
  const std::size_t n = locks.size();
  std::size_t acquired = 0;
  std::uint64_t errors = 0;
  std::string first_error;
  const auto t_acq = Clock::now();
  for (auto& l : locks) {
    try {
      acquired += l->try_acquire() ? 1 : 0;
    } catch (const std::exception& e) {
      ++errors;
      if (first_error.empty()) first_error = std::string("acquiring: ") + e.what();
    }
  }
  const double acquire_s = seconds_since(t_acq);
  const std::int64_t rss_acquired = rss_bytes();
  const std::int64_t heap_acquired = heap_in_use();
  // The hold: 3 ttl from the end of the acquisitions, sampling threads and
  // (lock client) its connections. The renewal counters start once the set of
  // held leases is settled: for the lock client, when the renewal round
  // running at the end of the acquisitions (or else the next one) has
  // finished; a round that began while leases were still being acquired
  // renews a set that was still growing, and its last statement holds fewer
  // than 1,000 of them. For the per-lease model, at once.
  LockClientStats st0 = client ? client->stats() : LockClientStats{};
  std::uint64_t renews0 = renews.now();
  HoldSamples s;
  const auto t_hold = Clock::now();
  const auto hold_end = t_hold + 3 * ttl;
  auto t_count = t_hold;
  bool counting = !client;
  for (auto now = Clock::now(); now < hold_end; now = Clock::now()) {
    const std::size_t t = process_threads();
    s.threads_max = std::max(s.threads_max, t > threads0 ? t - threads0 : 0);
    if (client) {
      const LockClientStats st = client->stats();
      s.connections_max = std::max(s.connections_max, st.connections_open);
      if (!counting && st.renewal_rounds > st0.renewal_rounds) {
        st0 = st;
        renews0 = renews.now();
        t_count = now;
        counting = true;
      }
    }
    std::this_thread::sleep_until(std::min(hold_end, now + milliseconds(20)));
  }
  const double hold_s = seconds_since(t_hold);
  const double counted_s = seconds_since(t_count);
  const LockClientStats st1 = client ? client->stats() : LockClientStats{};
  const std::uint64_t renews1 = renews.now();
  const std::int64_t rss_held = rss_bytes();
  const auto server = sessions.count();
  {
    const std::size_t t = process_threads();
    s.threads_max = std::max(s.threads_max, t > threads0 ? t - threads0 : 0);
  }
  // Still owned: by the handles' own account, and by the lock table's (read
  // on the bench's connection: the row carries the handle's owner and fence
  // and has not expired).
  std::size_t owned = 0;
  for (auto& l : locks) owned += l->owns() ? 1 : 0;
  std::size_t db_owned = 0;
  try {
    std::map<std::string, LeaseInfo> rows;
    for (auto& info : list_leases(*b.admin)) rows.emplace(info.name, std::move(info));
    for (auto& l : locks) {
      auto it = rows.find(l->name());
      if (it != rows.end() && it->second.held() && it->second.owner == l->owner() && it->second.fence == l->fence())
        ++db_owned;
    }
  } catch (const std::exception& e) {
    ++errors;
    if (first_error.empty()) first_error = std::string("reading the lock table: ") + e.what();
  }
  if (client) measure_waiters(j, locks, client, ttl);
  const auto t_rel = Clock::now();
  for (auto& l : locks) {
    try {
      if (l->hold_count() > 0) l->release();
    } catch (const std::exception& e) {
      ++errors;
      if (first_error.empty()) first_error = std::string("releasing: ") + e.what();
    }
  }
  const double release_s = seconds_since(t_rel);

  const double period_s = std::chrono::duration<double>(ttl / 3).count();
  const double periods = counted_s / period_s;  // of the renewal counters
  j["ttl_ms"] = ttl.count();
  j["renew_period_ms"] = (ttl / 3).count();
  j["acquired"] = acquired;
  j["acquire_s"] = r3(acquire_s);
  j["acquires_per_s"] = acquire_s > 0 ? json(r3(static_cast<double>(acquired) / acquire_s)) : json(nullptr);
  j["hold_s"] = r3(hold_s);
  j["periods"] = r3(periods);
  j["counted_s"] = r3(counted_s);
  j["threads"] = s.threads_max;
  j["server_sessions"] = opt_json(server);
  j["server_sessions_source"] = sessions.source();
  j["rss_per_lease_bytes"] = n ? json(std::llround(static_cast<double>(rss_acquired - rss0) / static_cast<double>(n)))
                               : json(nullptr);
  j["heap_per_lease_bytes"] =
      n ? json(std::llround(static_cast<double>(heap_acquired - heap0) / static_cast<double>(n))) : json(nullptr);
  j["rss_per_lease_held_bytes"] =
      n ? json(std::llround(static_cast<double>(rss_held - rss0) / static_cast<double>(n))) : json(nullptr);
  j["renew_sql_observed_per_period"] = r3(static_cast<double>(renews1 - renews0) / periods);
  j["owned_after"] = owned;
  j["db_owned_after"] = db_owned;
  j["release_s"] = r3(release_s);
  if (client) {
    j["connections"] = s.connections_max;
    j["client_threads"] = st1.threads;
    const std::uint64_t statements = st1.renewal_statements - st0.renewal_statements;
    j["renewal_statements_per_period"] = r3(static_cast<double>(statements) / periods);
    j["renewal_rounds_per_period"] = r3(static_cast<double>(st1.renewal_rounds - st0.renewal_rounds) / periods);
    // Per cycle (every held lease renewed once): the hold's statements over
    // its renewals ÷ N. A hold of 3 ttl holds 9 or 10 rounds depending on
    // where it starts; per cycle does not depend on it.
    const std::uint64_t renewed = st1.leases_renewed - st0.leases_renewed;
    j["renewal_statements_per_cycle"] =
        renewed ? json(r3(static_cast<double>(statements) * static_cast<double>(n) / static_cast<double>(renewed)))
                : json(nullptr);
    j["leases_renewed"] = renewed;
    j["leases_lost"] = st1.leases_lost;
    j["renewal_lag_p99_ms"] = r3(st1.renewal_lag_p99_ms);
    j["renewal_lag_max_ms"] = r3(st1.renewal_lag_max_ms);
    j["exhausted"] = st1.exhausted;
  } else {
    // One statement per lease per period: what the observer counted is all there is.
    j["renewal_statements_per_period"] = j["renew_sql_observed_per_period"];
    j["renewal_lag_p99_ms"] = nullptr;
    j["renewal_lag_max_ms"] = nullptr;
  }
  j["errors"] = errors;
  if (!first_error.empty()) j["first_error"] = first_error;
}

}  // namespace

// ---- held-leases -------------------------------------------------------------------

json held_leases_client(const ClientBench& b, std::size_t n, milliseconds ttl) {
  json j = {{"model", "lock-client"}, {"held", n}};
  const auto t0 = Clock::now();
  std::string app;
  const std::string uri = tagged_uri(b, &app);
  RenewStatements renews;
  start_shared_threads(b);
  const std::size_t threads0 = settled_threads();
  trim_heap();
  const std::int64_t rss_start = rss_bytes();
  ServerSessions sessions(*b.admin, b.uri, app);
  auto lost = std::make_shared<std::atomic<std::uint64_t>>(0);
  {
    auto client = LockClient::create(uri, client_options(b));
    // What a lease costs on top of the client: measured from here. The
    // client's own cost (its first connections, its thread) is reported apart.
    const std::int64_t rss0 = rss_bytes();
    const std::int64_t heap0 = heap_in_use();
    j["rss_fixed_bytes"] = rss0 - rss_start;
    std::vector<std::unique_ptr<LeaseLock>> locks;
    locks.reserve(n);
    LeaseOptions o;
    o.ttl = ttl;
    o.on_lost = [lost](const LeaseLoss&) { ++*lost; };
    for (std::size_t i = 0; i < n; ++i)
      locks.push_back(std::make_unique<LeaseLock>(client, b.prefix + ":" + std::to_string(i), o, Watchdog::kOn));
    hold_and_check(j, b, locks, client, ttl, threads0, rss0, heap0, sessions, renews);
    locks.clear();
  }
  j["on_lost_calls"] = lost->load();
  j["duration_s"] = r3(seconds_since(t0));
  return j;
}

std::size_t per_lease_fit(Connection& admin, std::size_t wanted, std::string* why) {
  // Spare capacity left to everyone else on the server (and to the bench's
  // own connection for the checks).
  constexpr std::int64_t kSpare = 10;
  std::int64_t room = 0;
  if (admin.kind() == DialectKind::kSqlite) {
    // No server limit; each SQLite connection takes a few descriptors.
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    room = rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : static_cast<std::int64_t>(rl.rlim_cur / 4) - 64;
    *why = "RLIMIT_NOFILE " + std::to_string(rl.rlim_cur) + " (4 descriptors per SQLite connection)";
  } else {
    std::int64_t max = 0, used = 0, reserved = 0;
    if (admin.kind() == DialectKind::kPostgresql) {
      auto r = admin.execute_once(
          "SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int, "
          "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')");
      max = r.rows.at(0)[0].as_int();
      reserved = r.rows.at(0)[1].as_int();
      used = r.rows.at(0)[2].as_int();
    } else {
      auto r = admin.execute_once(
          "SELECT @@max_connections, (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE "
          "VARIABLE_NAME = 'THREADS_CONNECTED')");
      max = r.rows.at(0)[0].as_int();
      used = std::stoll(r.rows.at(0)[1].as_string());
    }
    room = max - reserved - used - kSpare;
    *why = "server max_connections " + std::to_string(max) + ", " + std::to_string(used) + " in use" +
           (reserved ? ", " + std::to_string(reserved) + " reserved" : std::string()) + ", " + std::to_string(kSpare) +
           " left spare";
  }
  // One shared connection for the acquisitions + one per lease's watchdog.
  const std::int64_t fit = std::max<std::int64_t>(0, room - 1);
  return std::min<std::size_t>(wanted, static_cast<std::size_t>(fit));
}

json held_leases_per_lease(const ClientBench& b, std::size_t n, milliseconds ttl) {
  json j = {{"model", "per-lease"}, {"held", n}};
  const auto t0 = Clock::now();
  std::string app;
  const std::string uri = tagged_uri(b, &app);
  RenewStatements renews;
  start_shared_threads(b);
  const std::size_t threads0 = settled_threads();
  trim_heap();
  const std::int64_t rss_start = rss_bytes();
  ServerSessions sessions(*b.admin, b.uri, app);
  auto lost = std::make_shared<std::atomic<std::uint64_t>>(0);
  auto opened = std::make_shared<std::atomic<std::uint64_t>>(0);
  {
    // Today's per-lease model as a user writes it: the handles borrow one
    // connection; each held lease's watchdog opens its own (bounded by the
    // renew period, as LeaseLock's URI constructor does) on its own thread.
    ConnectOptions wo = b.connect;
    const milliseconds bound = std::max<milliseconds>(ttl / 3, milliseconds(1000));
    wo.connect_timeout = std::min(wo.connect_timeout, bound);
    wo.io_timeout = bound;
    auto conn = make_connection(uri, b.connect);
    const std::int64_t rss0 = rss_bytes();  // per lease: on top of the shared connection
    const std::int64_t heap0 = heap_in_use();
    j["rss_fixed_bytes"] = rss0 - rss_start;
    std::vector<std::unique_ptr<LeaseLock>> locks;
    locks.reserve(n);
    LeaseOptions o;
    o.ttl = ttl;
    o.on_lost = [lost](const LeaseLoss&) { ++*lost; };
    o.watchdog_connection = [uri, wo, opened] {
      ++*opened;
      return make_connection(uri, wo);
    };
    for (std::size_t i = 0; i < n; ++i)
      locks.push_back(std::make_unique<LeaseLock>(*conn, b.prefix + ":" + std::to_string(i), o));
    hold_and_check(j, b, locks, nullptr, ttl, threads0, rss0, heap0, sessions, renews);
    locks.clear();
  }
  // Connections it took: the shared one and every watchdog connection opened.
  j["connections"] = 1 + opened->load();
  j["on_lost_calls"] = lost->load();
  j["duration_s"] = r3(seconds_since(t0));
  return j;
}

// ---- waiters -------------------------------------------------------------------------

namespace {

// A handle of a lock client as the hand-off ceiling drives it: the client's
// blocking acquire() and release(); the round trip on a connection of its own.
class ClientContender final : public Contender {
 public:
  ClientContender(std::shared_ptr<LockClient> client, const std::string& name, std::unique_ptr<Connection> ping)
      : ping_(std::move(ping)), lock_(std::move(client), name, options()) {}
  bool acquire(milliseconds timeout) override { return lock_.acquire(timeout); }
  void release() override {
    if (!lock_.release()) throw Error(ErrorCode::kLeaseLost, "bench: the lease was no longer held at release");
  }
  void ping() override { ping_->db_now_ms(); }

 private:
  static LeaseOptions options() {
    LeaseOptions o;
    o.ttl = milliseconds(kTtlMs);
    o.take_over = bench_take_over();
    apply_barging_limit(o);
    return o;
  }
  std::unique_ptr<Connection> ping_;
  LeaseLock lock_;
};

// The completions of the handles' asynchronous acquires, in the order they
// ran (on the client's waiter thread; the bench's thread consumes them).
struct Completions {
  struct Done {
    std::size_t who;
    bool acquired;
    std::exception_ptr error;
    Clock::time_point at;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Done> q;
  // Waits up to `limit` for the next one.
  std::optional<Done> next(milliseconds limit) {
    std::unique_lock<std::mutex> lk(mu);
    if (!cv.wait_for(lk, limit, [&] { return !q.empty(); })) return std::nullopt;
    Done d = std::move(q.front());
    q.pop_front();
    return d;
  }
};

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

}  // namespace

json waiters_cell(const ClientBench& b, std::size_t waiters, milliseconds hold, milliseconds warmup,
                  milliseconds duration) {
  json j = {{"waiters", waiters}, {"clients", waiters + 1}, {"wait_limit_ms", kWaiterWait.count()}};
  const auto t_cell = Clock::now();
  // The ceiling first, on a client of its own (gone before the baseline).
  Ceiling ceiling;
  std::string ceiling_error;
  try {
    auto cc = LockClient::create(b.uri, client_options(b));
    MakeContender make = [&](const std::string& name, int) -> std::unique_ptr<Contender> {
      return std::make_unique<ClientContender>(cc, name, make_connection(b.uri, b.connect));
    };
    ceiling = measure_ceiling(b.prefix + ":solo", make, warmup, std::min(duration, milliseconds(1000)), hold);
  } catch (const std::exception& e) {
    ceiling_error = std::string("measuring the hand-off ceiling: ") + e.what();
  }

  std::string app;
  const std::string uri = tagged_uri(b, &app);
  start_shared_threads(b);
  const std::size_t threads0 = settled_threads();
  ServerSessions sessions(*b.admin, b.uri, app);
  auto client = LockClient::create(uri, client_options(b));
  const std::size_t n = waiters + 1;  // handle `waiters` is the first holder
  const std::string name = b.prefix + ":hot";
  std::vector<std::unique_ptr<LeaseLock>> locks;
  LeaseOptions o;
  o.ttl = milliseconds(kTtlMs);
  for (std::size_t i = 0; i < n; ++i) locks.push_back(std::make_unique<LeaseLock>(client, name, o, Watchdog::kOn));
  auto done = std::make_shared<Completions>();
  std::vector<Clock::time_point> asked(n);
  std::size_t outstanding = 0;
  Stats st;
  st.per_client.assign(n, 0);
  std::uint64_t timeouts_total = 0;
  std::size_t threads_max = 0, connections_max = 0;
  auto note_error = [&](const std::string& what) {
    ++st.errors;
    if (st.first_error.empty()) st.first_error = what;
  };
  auto ask = [&](std::size_t i) {
    asked[i] = Clock::now();
    try {
      locks[i]->acquire_async(kWaiterWait, [done, i](bool acquired, std::exception_ptr error) {
        const auto at = Clock::now();
        {
          std::lock_guard<std::mutex> lk(done->mu);
          done->q.push_back({i, acquired, std::move(error), at});
        }
        done->cv.notify_one();
      });
      ++outstanding;
    } catch (const std::exception& e) {
      note_error(std::string("acquire_async: ") + e.what());
    }
  };
  auto sample = [&] {
    const std::size_t t = process_threads();
    threads_max = std::max(threads_max, t > threads0 ? t - threads0 : 0);
    connections_max = std::max(connections_max, client->stats().connections_open);
  };

  // Phases: 0 the first round (every handle owns the lock once: the queue
  // then holds them in turn order), 1 the warm-up, 2 measured, 3 stopping.
  int phase = 0;
  std::vector<bool> owned_once(n, false);
  std::size_t owned_count = 0;
  Clock::time_point warm_end{}, t0{}, t1{}, last_sample{};
  std::uint64_t counted = 0;
  LockClientStats st0{};
  const auto cap = t_cell + std::chrono::minutes(5);
  std::size_t owner = waiters;
  Clock::time_point acquired_at = Clock::now();
  if (!locks[owner]->try_acquire()) throw Error(ErrorCode::kInternal, "bench: the waiters' fresh lock name was held");
  for (std::size_t i = 0; i < waiters; ++i) ask(i);
  bool broken = false;
  while (phase < 3) {
    hold_for(hold, acquired_at);
    bool released = false;
    try {
      released = locks[owner]->release();
      if (!released) note_error("the lease was no longer held at release");
    } catch (const std::exception& e) {
      note_error(std::string("release: ") + e.what());
    }
    const auto rel = Clock::now();
    ask(owner);
    // The next owner, by the order of the completions.
    std::optional<Completions::Done> got;
    while (!got) {
      auto d = done->next(kWaiterWait + std::chrono::seconds(10));
      if (!d) {
        note_error("no waiter got the lock within the wait limit after a release");
        broken = true;
        break;
      }
      --outstanding;
      if (d->acquired) {
        got = d;
        break;
      }
      const std::int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(d->at - asked[d->who]).count();
      if (d->error) {
        note_error(what_of(d->error));
        std::this_thread::sleep_for(milliseconds(1));  // never spin on a broken database
      } else {
        ++timeouts_total;  // ended unacquired inside its wait
        if (phase == 2) {
          ++st.timeouts;
          st.wait_ns.push_back(waited);
        }
      }
      ask(d->who);
    }
    if (broken) break;
    const std::size_t next = got->who;
    if (phase == 2) {
      if (next == owner) ++st.misses;
      else st.lat_ns.push_back(std::max<std::int64_t>(
               0, std::chrono::duration_cast<std::chrono::nanoseconds>(got->at - rel).count()));
      ++st.per_client[next];
      st.wait_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(got->at - asked[next]).count());
      ++counted;
    }
    owner = next;
    acquired_at = got->at;
    const auto now = Clock::now();
    if (!owned_once[next]) {
      owned_once[next] = true;
      ++owned_count;
    }
    if (phase == 0 && owned_count == n) {
      phase = 1;
      warm_end = now + warmup;
    }
    if (phase == 1 && now >= warm_end) {
      phase = 2;
      t0 = got->at;
      st0 = client->stats();
      sample();
      last_sample = now;
    }
    if (phase == 2) {
      if (now - last_sample >= milliseconds(100)) {
        sample();
        last_sample = now;
      }
      // Whole rounds, at least two and at least --duration: each handle's
      // share of a window of whole rounds is the same under FIFO.
      if (counted % n == 0 && counted / n >= 2 && now - t0 >= duration) {
        t1 = got->at;
        phase = 3;
      }
    }
    if (now >= cap && phase < 3) {
      note_error(std::string("the cell hit its 5 minute limit before ") +
                 (phase == 2 ? "two whole rounds" : "it measured"));
      if (phase == 2) t1 = got->at;
      phase = 3;
    }
  }
  if (phase == 3 || broken) sample();
  const LockClientStats st1 = client->stats();
  const auto server = sessions.count();
  // Stop: the owner releases, every pending acquire is cancelled, and a
  // lease one of them took meanwhile is released. A cancelled acquire's
  // callback runs at once or right after its running attempt: the drain
  // waits 2 s for them, and reports the ones that never came.
  try {
    if (!broken && locks[owner]->hold_count() > 0) locks[owner]->release();
  } catch (const std::exception& e) {
    note_error(std::string("release: ") + e.what());
  }
  for (auto& l : locks) l->cancel_acquire();
  const auto drain_end = Clock::now() + std::chrono::seconds(2);
  while (outstanding > 0 && Clock::now() < drain_end) {
    auto d = done->next(milliseconds(100));
    if (!d) continue;
    --outstanding;
    if (d->acquired) {
      try {
        locks[d->who]->release();
      } catch (const std::exception& e) {
        note_error(std::string("release: ") + e.what());
      }
    }
  }
  locks.clear();
  client.reset();

  st.ops = st.lat_ns.size();
  st.elapsed_s = t1 > t0 ? std::chrono::duration<double>(t1 - t0).count() : 0;
  add_handoff_fields(j, st, ceiling);
  if (!ceiling_error.empty()) {
    for (const char* k : {"ceiling_release_ms", "ceiling_wakeup_ms", "ceiling_acquire_ms", "ceiling_cycle_ms",
                          "ceiling_per_s", "handoff_efficiency"})
      j[k] = nullptr;
    j["errors"] = j["errors"].get<std::uint64_t>() + 1;
    if (!j.contains("first_error")) j["first_error"] = ceiling_error;
  }
  j["hold_ms"] = r3(static_cast<double>(hold.count()));
  j["rounds"] = r3(static_cast<double>(counted) / static_cast<double>(n));
  j["timeouts_total"] = timeouts_total;
  j["threads"] = threads_max;
  j["client_threads"] = st1.threads;
  j["connections"] = connections_max;
  j["server_sessions"] = opt_json(server);
  j["server_sessions_source"] = sessions.source();
  j["attempts"] = st1.attempts - st0.attempts;
  j["wakeups"] = st1.wakeups - st0.wakeups;
  j["polls"] = st1.polls - st0.polls;
  j["exhausted"] = st1.exhausted;
  j["callbacks_missing"] = outstanding;
  j["cell_s"] = r3(seconds_since(t_cell));
  return j;
}

// ---- takeover ----------------------------------------------------------------------
// Issue 38 item 2: how long a dead holder's lease takes to reach a new holder
// under `rule`. The holder "dies" by being a raw acquire_lease() on the
// bench's connection that is renewed once (its last renewal, timed) and
// never again; a release never comes.
//  - waiting: a handle that was already waiting (acquire_async) when the
//    holder renewed for the last time: from that renewal to its acquisition
//    (the watched rule's target: within ttl + one poll, backoff_max);
//  - late: a handle of the same client that arrives 1.5 ttl after the last
//    renewal (the holder long dead): from its arrival to its acquisition.
// Each round uses fresh names (no earlier watch of them in this process).
json takeover_cell(const ClientBench& b, TakeOver rule, milliseconds ttl, int rounds) {
  json j = {{"rule", to_string(rule)}, {"ttl_ms", ttl.count()}, {"rounds", rounds}, {"clients", 2}};
  const auto t_cell = Clock::now();
  auto conn = make_connection(b.uri, b.connect);
  auto client = LockClient::create(b.uri, client_options(b));
  LeaseOptions o;
  o.ttl = ttl;
  o.take_over = rule;
  std::vector<double> waiting, late;
  std::uint64_t errors = 0;
  std::string first_error;
  auto ms_since = [](Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  const std::string base = b.prefix + ":takeover:" + to_string(rule) + ":";
  for (int r = 0; r < rounds; ++r) {
    try {
      const std::string name = base + "w" + std::to_string(r);
      const auto held = acquire_lease(*conn, name, "dies", ttl);
      if (!held.acquired) throw Error(ErrorCode::kInternal, "bench: a fresh takeover name was held");
      LeaseLock w(client, name, o, Watchdog::kOn);
      auto got = w.acquire_async(4 * ttl);
      std::this_thread::sleep_for(ttl / 3);
      const auto last = Clock::now();  // before it is sent: no sighting of it can be earlier
      if (!renew_lease(*conn, name, "dies", held.fence, ttl))
        throw Error(ErrorCode::kInternal, "bench: the dying holder's last renewal failed");
      if (!got.get()) throw Error(ErrorCode::kInternal, "bench: the waiting handle did not get the dead lease in 4 ttl");
      waiting.push_back(ms_since(last));
      w.release();

      const std::string name2 = base + "l" + std::to_string(r);
      if (!acquire_lease(*conn, name2, "dies", ttl).acquired)
        throw Error(ErrorCode::kInternal, "bench: a fresh takeover name was held");
      std::this_thread::sleep_for(ttl + ttl / 2);
      LeaseLock l(client, name2, o, Watchdog::kOn);
      const auto arrive = Clock::now();
      if (!l.acquire(4 * ttl)) throw Error(ErrorCode::kInternal, "bench: the late handle did not get the dead lease in 4 ttl");
      late.push_back(ms_since(arrive));
      l.release();
    } catch (const std::exception& e) {
      ++errors;
      if (first_error.empty()) first_error = e.what();
    }
  }
  auto pct = [](std::vector<double> v, double q) -> json {
    if (v.empty()) return nullptr;
    std::sort(v.begin(), v.end());
    return r3(v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))]);
  };
  j["waiting_p50_ms"] = pct(waiting, 0.5);
  j["waiting_max_ms"] = pct(waiting, 1.0);
  j["late_p50_ms"] = pct(late, 0.5);
  j["late_max_ms"] = pct(late, 1.0);
  // The watched rule's target for a waiter already waiting: ttl + one poll
  // (backoff_max) of the holder's last renewal.
  j["waiting_target_ms"] = (ttl + o.backoff_max).count();
  j["errors"] = errors;
  if (!first_error.empty()) j["first_error"] = first_error;
  j["cell_s"] = r3(seconds_since(t_cell));
  return j;
}

}  // namespace sqlguard::bench
