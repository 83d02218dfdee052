// sqlguard lock acquire|renew|release|list, sqlguard run, sqlguard cleanup.
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <random>
#include <thread>

#include "common.h"
#include "leased_command.h"
#include "run_supervisor.h"
#include "text.h"
#include "sqlguard/cleanup.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_set.h"
#include "sqlguard/semaphore.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

nlohmann::json info_json(const LeaseInfo& i) {
  return {{"name", i.name},
          {"kind", "lease"},
          {"owner", i.owner},
          {"fence", i.fence},
          {"held", i.held()},
          {"expires_at", format_db_time(i.expire_at_ms)},
          {"expire_at_ms", i.expire_at_ms},
          {"remaining_ms", i.remaining_ms()},
          {"acquired_at", format_db_time(i.acquired_at_ms)},
          {"renewed_at", format_db_time(i.renewed_at_ms)}};
}

// Polls with exponential backoff and full jitter until acquired or `wait`
// passes. The lease outlives this process (no watchdog, no release).
AcquireResult acquire_waiting(Connection& conn, const std::string& name, const std::string& owner, milliseconds ttl,
                              milliseconds min_hold, milliseconds wait) {
  auto deadline = steady_clock::now() + wait;
  milliseconds backoff(5);
  std::mt19937_64 rng{std::random_device{}()};
  for (;;) {
    auto r = acquire_lease(conn, name, owner, ttl, min_hold);
    if (r.acquired || steady_clock::now() >= deadline) return r;
    auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    std::uniform_int_distribution<long long> d(1, backoff.count());
    std::this_thread::sleep_for(std::min(milliseconds(d(rng)), std::max(left, milliseconds(1))));
    backoff = std::min(backoff * 2, milliseconds(500));
  }
}

// Why renew/release found the lease not held by (owner, fence): nobody holds
// it, someone else does, or the same owner string holds a newer acquisition
// (the fence is what differs). Read after the refused statement, so it
// describes the current row.
std::string not_held_reason(const std::optional<LeaseInfo>& info, const std::string& owner, std::int64_t fence) {
  if (!info || !info->held()) return "it is not held by anyone (expired or released)";
  if (info->owner != owner)
    return "it is held by " + terminal_safe(info->owner) + " (fence " + std::to_string(info->fence) + "), not by " +
           terminal_safe(owner);
  if (fence > 0 && info->fence != fence)
    return "owner " + terminal_safe(owner) + " holds it with fence " + std::to_string(info->fence) + ", not fence " +
           std::to_string(fence) + " (a newer acquisition under the same owner string)";
  return "it is not held by " + terminal_safe(owner);
}

nlohmann::json not_held_json(const std::optional<LeaseInfo>& info, const std::string& owner, std::int64_t fence) {
  nlohmann::json j = {{"reason", not_held_reason(info, owner, fence)}};
  if (info && info->held()) j["holder"] = {{"owner", info->owner}, {"fence", info->fence}};
  return j;
}

void add_lock_acquire(CLI::App* lock) {
  struct Opts {
    std::string name, ttl = "30s", wait = "0s", owner, min_hold = "0s";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = lock->add_subcommand("acquire", "Take a lease; exits 0 if acquired, 75 if held elsewhere");
  cmd->add_option("NAME", o->name, "Lock name (1..255 bytes)")->required();
  cmd->add_option("--ttl", o->ttl, "Lease duration")->capture_default_str();
  cmd->add_option("--wait", o->wait, "Keep trying this long")->capture_default_str();
  cmd->add_option("--owner", o->owner, "Owner token (default: random, printed)");
  cmd->add_option("--min-hold", o->min_hold, "Keep the lease at least this long even if released")->capture_default_str();
  cmd->callback([o] {
    check_name_arg("NAME", o->name);
    if (!o->owner.empty()) check_name_arg("--owner", o->owner);
    auto ttl = duration_flag("--ttl", o->ttl, kLeaseTtl);
    auto wait = duration_flag("--wait", o->wait, kAnyDuration);
    auto min_hold = duration_flag("--min-hold", o->min_hold, {milliseconds(0), ttl});
    auto conn = open_db(existing_only());
    std::string owner = o->owner.empty() ? make_owner_token() : o->owner;
    auto r = acquire_waiting(*conn, o->name, owner, ttl, min_hold, wait);
    if (r.acquired) {
      if (global().json)
        print_json({{"acquired", true}, {"name", o->name}, {"owner", owner}, {"fence", r.fence},
                    {"expires_at", format_db_time(r.expire_at_ms)}, {"expire_at_ms", r.expire_at_ms}, {"ttl_ms", ttl.count()}});
      else
        std::cout << "acquired '" << terminal_safe(o->name) << "' fence=" << r.fence
                  << " owner=" << terminal_safe(owner) << " expires_at=" << format_db_time(r.expire_at_ms) << "\n";
      return;
    }
    auto info = lease_info(*conn, o->name);
    if (global().json) {
      nlohmann::json j = {{"acquired", false}, {"name", o->name}};
      if (info) {
        j["holder"] = info->owner;
        j["fence"] = info->fence;
        j["expires_at"] = format_db_time(info->expire_at_ms);
        j["remaining_ms"] = info->remaining_ms();
      }
      if (r.watch_ms > 0) {
        j["unchanged_ms"] = r.holder_unchanged_ms;
        j["watch_ms"] = r.watch_ms;
        j["takeover_in_ms"] = r.holder_remaining_ms;
      }
      print_json(j);
    } else {
      std::cerr << "not acquired: '" << terminal_safe(o->name) << "'";
      if (info)
        std::cerr << " is held by " << terminal_safe(info->owner) << " (fence " << info->fence << ")"
                  << (info->held() ? "; its lease runs for another " + remaining_text(info->remaining_ms()) +
                                         " on the database clock"
                                   : std::string("; the database clock says its lease ran out"));
      if (r.watch_ms > 0)
        std::cerr << ". A take-over needs its row unchanged (not renewed) for " << remaining_text(r.watch_ms)
                  << ", the holder's ttl, on one machine's clock; seen unchanged for "
                  << remaining_text(r.holder_unchanged_ms) << " so far: a try in "
                  << remaining_text(r.holder_remaining_ms)
                  << " takes it over if it is not renewed or released by then (a --wait that long waits for it)";
      std::cerr << "\n";
    }
    exit_code() = kExitTempFail;
  });
}

void add_lock_renew(CLI::App* lock) {
  struct Opts {
    std::string name, owner, ttl = "30s";
    std::int64_t fence = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = lock->add_subcommand("renew", "Extend a lease you hold; exits 3 if you no longer hold it");
  cmd->add_option("NAME", o->name)->required();
  cmd->add_option("--owner", o->owner, "Owner token printed by acquire")->required();
  cmd->add_option("--ttl", o->ttl, "New lease duration from now")->capture_default_str();
  cmd->add_option("--fence", o->fence,
                  "Fencing token printed by acquire: renew only that acquisition (recommended when an owner string "
                  "is reused)")
      ->check(whole_number(1, std::numeric_limits<std::int64_t>::max()));
  cmd->callback([o] {
    check_name_arg("NAME", o->name);
    check_name_arg("--owner", o->owner);
    auto ttl = duration_flag("--ttl", o->ttl, kLeaseTtl);
    auto conn = open_db(existing_only());
    bool ok = o->fence > 0 ? renew_lease(*conn, o->name, o->owner, o->fence, ttl)
                           : renew_lease(*conn, o->name, o->owner, ttl);
    auto info = lease_info(*conn, o->name);
    if (global().json) {
      nlohmann::json j = {{"renewed", ok}, {"name", o->name}, {"owner", o->owner}};
      if (info && ok) {
        j["fence"] = info->fence;
        j["expires_at"] = format_db_time(info->expire_at_ms);
      }
      if (!ok) j.update(not_held_json(info, o->owner, o->fence));
      print_json(j);
    } else if (ok) {
      std::cout << "renewed '" << terminal_safe(o->name) << "' until " << (info ? format_db_time(info->expire_at_ms) : "?")
                << "\n";
    } else {
      std::cerr << "not renewed: '" << terminal_safe(o->name) << "': " << not_held_reason(info, o->owner, o->fence)
                << "\n";
    }
    if (!ok) exit_code() = kExitNotHeld;
  });
}

void add_lock_release(CLI::App* lock) {
  struct Opts {
    std::string name, owner;
    std::int64_t fence = 0;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = lock->add_subcommand("release", "Release a lease you hold (or --force for an operator); exits 3 if not held");
  cmd->add_option("NAME", o->name)->required();
  auto* owner = cmd->add_option("--owner", o->owner, "Owner token printed by acquire");
  auto* fence = cmd->add_option("--fence", o->fence,
                                "Fencing token printed by acquire: release only that acquisition (recommended when "
                                "an owner string is reused)")
                    ->check(whole_number(1, std::numeric_limits<std::int64_t>::max()))
                    ->needs(owner);
  cmd->add_flag("--force", o->force, "Operator override: end the lease whoever holds it, ignoring the minimum hold")
      ->excludes(owner)
      ->excludes(fence);
  cmd->callback([o] {
    check_name_arg("NAME", o->name);
    if (!o->force && o->owner.empty()) throw BadValue("--owner", "release needs --owner ID (or --force)");
    if (!o->force) check_name_arg("--owner", o->owner);
    auto conn = open_db(existing_only());
    bool ok = o->force       ? force_release(*conn, o->name)
              : o->fence > 0 ? release_lease(*conn, o->name, o->owner, o->fence)
                             : release_lease(*conn, o->name, o->owner);
    std::optional<LeaseInfo> info;
    if (!ok && !o->force) info = lease_info(*conn, o->name);
    if (global().json) {
      nlohmann::json j = {{"released", ok}, {"name", o->name}, {"forced", o->force}};
      if (!ok && !o->force) j.update(not_held_json(info, o->owner, o->fence));
      print_json(j);
    } else if (ok) {
      std::cout << "released '" << terminal_safe(o->name) << "'\n";
    } else {
      std::cerr << "not released: '" << terminal_safe(o->name) << "'"
                << (o->force ? " is not held" : ": " + not_held_reason(info, o->owner, o->fence)) << "\n";
    }
    if (!ok) exit_code() = kExitNotHeld;
  });
}

void add_lock_list(CLI::App* lock) {
  auto all = std::make_shared<bool>(false);
  auto* cmd = lock->add_subcommand("list", "Show held leases: holder, fence, remaining time");
  cmd->add_flag("--all", *all, "Include released/expired rows not yet cleaned up");
  cmd->callback([all] {
    auto conn = open_db(existing_only());  // a look: never creates a database
    auto leases = list_leases(*conn, *all);
    // Semaphore and read-write lease holdings (migration 0007; an older
    // schema has none to show).
    std::vector<HoldingInfo> holdings;
    try {
      holdings = list_holdings(*conn);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kSchemaMismatch) throw;
    }
    if (global().json) {
      // Nothing to list is an outcome too: one object, never no output.
      if (leases.empty() && holdings.empty()) print_json({{"locks", nlohmann::json::array()}});
      for (const auto& l : leases) print_json(info_json(l));
      for (const auto& h : holdings)
        print_json({{"name", h.name},
                    {"kind", h.kind},
                    {"mode", h.mode},
                    {"permits", h.permits},
                    {"owner", h.owner},
                    {"fence", h.fence},
                    {"held", true},
                    {"expires_at", format_db_time(h.expire_at_ms)},
                    {"expire_at_ms", h.expire_at_ms},
                    {"remaining_ms", h.remaining_ms()}});
      return;
    }
    // Names and owners are escaped: a newline in a name cannot forge a row,
    // an escape sequence cannot reach the terminal.
    std::printf("%-32s %-48s %12s %12s\n", "NAME", "HOLDER", "FENCE", "REMAINING");
    for (const auto& l : leases)
      std::printf("%-32s %-48s %12lld %12s\n", terminal_safe(l.name).c_str(),
                  l.held() ? terminal_safe(l.owner).c_str() : "(free)", static_cast<long long>(l.fence),
                  l.held() ? remaining_text(l.remaining_ms()).c_str() : "-");
    if (holdings.empty()) return;
    std::printf("\n%-32s %-10s %-9s %7s %-48s %12s %12s\n", "SEMAPHORE / READ-WRITE LEASE", "KIND", "MODE", "PERMITS",
                "HOLDER", "FENCE", "REMAINING");
    for (const auto& h : holdings)
      std::printf("%-32s %-10s %-9s %7lld %-48s %12lld %12s\n", terminal_safe(h.name).c_str(), h.kind.c_str(),
                  h.mode.c_str(), static_cast<long long>(h.permits), terminal_safe(h.owner).c_str(),
                  static_cast<long long>(h.fence), remaining_text(h.remaining_ms()).c_str());
  });
}

void add_lock_resize(CLI::App* lock) {
  struct Opts {
    std::string name;
    std::int64_t permits = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = lock->add_subcommand(
      "resize", "Change the permit count of the semaphore NAME for every user of it (`run --permits` asks with it)");
  cmd->add_option("NAME", o->name)->required();
  cmd->add_option("--permits", o->permits, "The new count, 1..1000000")->required()->check(whole_number(1, 1000000));
  cmd->callback([o] {
    check_name_arg("NAME", o->name);
    auto conn = open_db(existing_only());
    const std::int64_t before = resize_semaphore(*conn, o->name, o->permits);
    if (global().json) {
      print_json({{"name", o->name}, {"kind", "semaphore"}, {"permits", o->permits}, {"previous_permits", before}});
    } else if (before == 0) {
      std::cout << "semaphore '" << terminal_safe(o->name) << "' created with " << o->permits << " permits\n";
    } else {
      std::cout << "semaphore '" << terminal_safe(o->name) << "': " << before << " -> " << o->permits << " permits\n";
    }
  });
}

// What `run` holds: --kind, or its short forms (--permits N, --fair,
// --shared, --exclusive; none: a lease). A bad --kind exits 2 naming the
// known kinds.
LockSpec lock_spec_of(const std::string& kind, bool shared, bool exclusive, std::int64_t permits, bool fair) {
  if (!kind.empty()) {
    try {
      return parse_lock_spec(kind);
    } catch (const Error& e) {
      throw BadValue("--kind", e.what());
    }
  }
  LockSpec spec;
  if (shared || exclusive) {
    spec.kind = LockKind::kReadWrite;
    spec.mode = shared ? LeaseMode::kShared : LeaseMode::kExclusive;
  } else if (permits > 0) {
    spec.kind = LockKind::kSemaphore;
    spec.permits = permits;
  } else if (fair) {
    spec.kind = LockKind::kFairLease;
  }
  return spec;
}

}  // namespace

void add_lock(CLI::App& app) {
  auto* lock = app.add_subcommand("lock", "Lease locks: acquire, renew, release, list; resize a semaphore");
  lock->require_subcommand(1);
  add_lock_acquire(lock);
  add_lock_renew(lock);
  add_lock_release(lock);
  add_lock_list(lock);
  add_lock_resize(lock);
}

void add_run(CLI::App& app) {
  struct Opts {
    std::vector<std::string> names;
    std::string ttl = "30s", wait = "0s", grace = "10s", min_hold = "0s";
    int conflict_exit = kExitTempFail;
    bool shared = false, exclusive = false, fair = false;
    std::int64_t permits = 0;
    std::string kind;
    std::vector<std::string> cmd;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "Run CMD while holding a lease (flock(1) for a cluster)");
  cmd->add_option("--lock", o->names,
                  "Lock name; repeat it to hold several leases all or none (--lock a --lock b: taken in one "
                  "transaction, none while any is busy)")
      ->required()
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--ttl", o->ttl, "Lease duration; the watchdog renews every ttl/3")->capture_default_str();
  cmd->add_option("--wait", o->wait, "How long to wait for the lock; then exit 75")->capture_default_str();
  cmd->add_option("--kill-grace", o->grace, "Stopping CMD's tree: SIGKILL this long after SIGTERM")->capture_default_str();
  cmd->add_option("--min-hold", o->min_hold, "Keep the lease at least this long after CMD ends")->capture_default_str();
  cmd->add_option("--conflict-exit-code", o->conflict_exit,
                  "Exit code when the lock is held by someone else after --wait (flock -E; 0 makes a skip a success)")
      ->check(whole_number(0, 255))
      ->capture_default_str();
  auto* shared = cmd->add_flag("--shared", o->shared,
                               "Hold the read-write lease NAME shared (flock -s): many --shared runs at once, none "
                               "with an --exclusive one");
  auto* exclusive = cmd->add_flag("--exclusive", o->exclusive,
                                  "Hold the read-write lease NAME exclusively (flock -x against --shared runs; a waiting "
                                  "--exclusive run blocks new --shared ones)");
  auto* permits = cmd->add_option("--permits", o->permits,
                                  "Take one permit of the semaphore NAME of N permits: at most N runs at once (N is "
                                  "used when NAME is new)")
                      ->check(whole_number(1, 1000000));
  auto* fair = cmd->add_flag("--fair", o->fair,
                             "A fair lease (with --permits: a fair semaphore): waiting runs get it in arrival order "
                             "(with --wait), and a run cannot overtake one that waits");
  auto* kind = cmd->add_option("--kind", o->kind,
                               "Hold NAME as this kind of lock: KIND or KIND:ARG, e.g. lease, fair, semaphore:3, "
                               "rw:shared, rw:exclusive, or any kind this build knows (the error lists them); "
                               "--permits N, --fair, --shared and --exclusive are its short forms");
  shared->excludes(exclusive)->excludes(permits)->excludes(fair);
  exclusive->excludes(permits)->excludes(fair);
  kind->excludes(shared)->excludes(exclusive)->excludes(permits)->excludes(fair);
  cmd->add_option("CMD", o->cmd, "Command and arguments (after --)")->required();
  cmd->callback([o] {
    for (const auto& n : o->names) check_name_arg("--lock", n);
    LeasedCommand c;
    c.words = {"run", "lock", "acquired", "fence", "lock", "acquired", "waiting for", "lease"};
    c.spec = lock_spec_of(o->kind, o->shared, o->exclusive, o->permits, o->fair);
    if (o->names.size() > LockSet::kMaxNames)
      throw BadValue("--lock", "at most " + std::to_string(LockSet::kMaxNames) + " names");
    if (o->names.size() > 1 && c.spec.kind != LockKind::kLease)
      throw BadValue("--lock", "several --lock names are held as leases, all or none; --kind, "
                                           "--permits, --fair, --shared and --exclusive take one name");
    if (o->names.size() > 1) {
      c.names = o->names;
      std::sort(c.names.begin(), c.names.end());  // the set's order, as it takes them
      if (auto d = std::adjacent_find(c.names.begin(), c.names.end()); d != c.names.end())
        throw BadValue("--lock", "'" + terminal_safe(*d) + "' is given twice");
      for (const auto& n : c.names) c.name += (c.name.empty() ? "" : ",") + n;
    } else {
      c.name = o->names.front();
    }
    c.lease.fair = o->fair && o->permits > 0;  // a fair semaphore; a fair lease is its own kind
    c.lease.ttl = duration_flag("--ttl", o->ttl, kLeaseTtl);
    c.lease.min_hold = duration_flag("--min-hold", o->min_hold, {milliseconds(0), c.lease.ttl});
    c.wait = duration_flag("--wait", o->wait);
    c.kill_grace = duration_flag("--kill-grace", o->grace);
    c.conflict_exit = o->conflict_exit;
    c.cmd = o->cmd;
    run_leased(c);
  });
  add_run_supervisor(app);
}

void add_cleanup(CLI::App& app) {
  struct Opts {
    std::string every, grace = "10m", pause = "0ms";
    int batch = 1000;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("cleanup", "Delete released lock rows, holdings and queue places, stale sightings, idle heads, expired idempotency and inbox rows and grant history past its retention in bounded batches (an unreleased lock row, holding or place is never deleted by a clock)");
  cmd->add_option("--every", o->every, "Run as a daemon every D until SIGTERM/SIGINT");
  cmd->add_option("--grace", o->grace, "Delete lock rows, holdings and places released for longer than this")->capture_default_str();
  cmd->add_option("--batch", o->batch, "Rows per DELETE (1..100000)")->capture_default_str()->check(whole_number(1, 100000));
  cmd->add_option("--pause", o->pause, "Sleep between batches")->capture_default_str();
  cmd->callback([o] {
    CleanupOptions co;
    co.lock_grace = duration_flag("--grace", o->grace, {milliseconds(0), std::chrono::hours(24 * 365)});
    co.batch_size = o->batch;
    co.pause = duration_flag("--pause", o->pause, {milliseconds(0), std::chrono::minutes(10)});
    milliseconds every{0};
    if (!o->every.empty()) every = duration_flag("--every", o->every, {milliseconds(10), std::chrono::hours(24 * 7)});
    auto conn = open_db(existing_only());
    install_signal_handlers();
    int rounds = 0;
    do {
      auto r = cleanup(*conn, co);
      ++rounds;
      if (global().json)
        print_json({{"locks_deleted", r.locks_deleted}, {"holdings_deleted", r.holdings_deleted},
                    {"queue_places_deleted", r.queue_places_deleted}, {"sync_heads_deleted", r.sync_heads_deleted},
                    {"lease_watches_deleted", r.lease_watches_deleted}, {"idempotency_deleted", r.idempotency_deleted},
                    {"inbox_deleted", r.inbox_deleted}, {"history_deleted", r.history_deleted},
                    {"batches", r.batches}});
      else
        std::cout << "cleanup: deleted " << r.locks_deleted << " lock, " << r.holdings_deleted << " holding, "
                  << r.queue_places_deleted << " queue place, " << r.sync_heads_deleted << " idle head, " << r.lease_watches_deleted << " sighting, "
                  << r.idempotency_deleted << " idempotency, "
                  << r.inbox_deleted << " inbox, " << r.history_deleted << " history rows in " << r.batches << " batch(es)" << std::endl;
      auto until = steady_clock::now() + every;
      while (every.count() > 0 && !g_signal && steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(20));
    } while (every.count() > 0 && !g_signal);
    if (every.count() > 0 && !global().json) std::cout << "cleanup: stopped after " << rounds << " round(s)" << std::endl;
  });
}

}  // namespace sqlguard::cli
