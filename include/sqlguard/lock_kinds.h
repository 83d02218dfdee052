// sqlguard/lock_kinds.h — a Lock of any kind, chosen at run time: by a
// LockSpec ("lease", "fair", "semaphore:3", "rw:shared", or any kind listed in
// sqlguard/lock_kinds.def), and who holds a name now, whatever its kind.
// Code that takes its kind from configuration or a command line (`sqlguard
// run --kind`) is written once against these:
//
//   auto lock = sqlguard::make_lock(client, "nightly-report", sqlguard::parse_lock_spec("semaphore:2"));
//   sqlguard::LockGuard held(*lock, std::chrono::seconds(5));
//
// Each kind's own class (LeaseLock, Semaphore, ReadWriteLease) offers more
// (n permits, both sides of one read-write handle); make_lock gives the Lock
// face of one handle.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock.h"
#include "sqlguard/read_write_lease.h"

namespace sqlguard {

class LockClient;

// What Lock to make on a name.
struct LockSpec {
  LockKind kind = LockKind::kLease;
  // kSemaphore: its count, used when the name is new (1 .. 1,000,000); the
  // handle takes one permit. 0 for every other kind (they refuse a count).
  std::int64_t permits = 0;
  // kReadWrite: which side the Lock is. Other kinds refuse kShared.
  LeaseMode mode = LeaseMode::kExclusive;
};

// Reads "KIND" or "KIND:ARG": KIND is a name of lock_kinds.def ("lease",
// "fair", "semaphore", "rw", ...); ARG is a count for a semaphore
// ("semaphore:3") and "shared" or "exclusive" for a read-write lease
// ("rw:shared"). Throws Error(kInvalidArgument) naming the known kinds.
LockSpec parse_lock_spec(std::string_view text);
// "semaphore:3", "rw:shared", "lease": what parse_lock_spec reads back.
std::string to_string(const LockSpec& spec);

// Every kind, in lock_kinds.def order.
std::vector<LockKind> lock_kinds();

// A handle of spec.kind on `name` from `client` (validated here: a bad name,
// option or spec throws Error(kInvalidArgument) before anything is sent). A
// fair lease is LockSpec{kFairLease} (options.fair is then set for it).
// Shared: a read-write side keeps its ReadWriteLease alive.
std::shared_ptr<Lock> make_lock(std::shared_ptr<LockClient> client, std::string name, const LockSpec& spec,
                                LeaseOptions options = {}, Watchdog watchdog = Watchdog::kOn);
// The same from a URI: a handle of the process-wide client of `uri`
// (LockClient::shared), as each kind's URI constructor makes.
std::shared_ptr<Lock> make_lock(const std::string& uri, std::string name, const LockSpec& spec,
                                LeaseOptions options = {}, Watchdog watchdog = Watchdog::kOn,
                                const ConnectOptions& connect = {});

// One live holder of a name.
struct LockHolder {
  std::string owner;
  std::int64_t fence = 0;
  std::string mode;            // "" (a lease), "permits", "shared" or "exclusive"
  std::int64_t permits = 0;    // a semaphore's holding: its permits; else 0
  std::int64_t remaining_ms = 0;  // until it expires on the database clock
};
// Who holds `name`, a lock of `kind`, now (live holders only; one round trip
// on `conn`). Empty when nobody does, or when the name is not of that kind.
std::vector<LockHolder> lock_holders(Connection& conn, const std::string& name, LockKind kind);

}  // namespace sqlguard
