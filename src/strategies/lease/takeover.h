// Internal: the take-over rule (TakeOver, lease_lock.h). Who may take over a
// lease its holder has not released is decided by this process's watch of the
// holder's row on its own monotonic clock, never by a wall clock alone: the
// row must be seen unchanged (no renewal: the same fence, beat and expiry) for
// the holder's whole ttl, and the take-over is a compare-and-set on what was
// seen (sql/<dialect>/lease.sql, head).
//
// Why it is safe: the holder trusts its lease for ttl - margin from the moment
// it SENT its last renewal; a watcher starts counting when the read that first
// saw that renewal RETURNED, which is later, and counts a whole ttl. With clock
// rates that differ by less than margin / (2 ttl), the holder stops trusting
// before the watcher may take over; a renewal in between changes beat, so the
// compare-and-set fails and the watch starts again.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sqlguard/connection.h"
#include "sqlguard/lease_lock.h"

namespace sqlguard::detail {

// The version of a holder's row a take-over compares and sets.
struct RowVersion {
  std::int64_t fence = -1, beat = -1, expire_at = -1;  // -1: none (matches no row)
  bool operator==(const RowVersion&) const = default;
};

// What an attempt (or the lock client's poll) saw of the holder's row.
struct Sighting {
  RowVersion version;
  std::chrono::milliseconds watch{0};  // how long it must be seen unchanged: the holder's ttl
  bool released = false;               // beat = 0 and its minimum hold has passed
  std::int64_t db_now = 0;             // database clock, when it was read
};

// What an attempt's deciding read saw of a lease's next turn (bounded
// barging: next_owner, next_since) with the holder's row beside it: a waiter
// past the limit decides from it whether the turn is its own or open,
// without a read of its own (lease_next_read).
struct NextTurnSeen {
  std::string owner;       // who holds the next turn ('' nobody)
  std::int64_t since = 0;  // when that wait began (database clock)
  Sighting holder;
};

// The process's watches: one entry per lease name (per database) an attempt
// saw held (not released), with the version seen and since when. Shared by
// every handle, client and one-shot call of the process, so a later try
// continues the watch an earlier one started. Bounded: the least recently
// seen entry goes first; a taken or released lease's entry goes at once.
class WatchBook {
 public:
  explicit WatchBook(std::size_t capacity) : capacity_(capacity) {}
  // Records `s` as seen at `at` (after the read that saw it returned); answers
  // how long this process has seen that version unchanged.
  std::chrono::milliseconds sighted(const std::string& key, const Sighting& s, std::chrono::steady_clock::time_point at);
  // What an attempt asks first: whether `key` is watched at all, and its
  // ripe version: the one a take-over may compare-and-set at `now`, seen
  // unchanged for its whole watch (one lookup).
  struct Look {
    bool known = false;
    std::optional<RowVersion> ripe;
  };
  Look look(const std::string& key, std::chrono::steady_clock::time_point now) const;
  // The caller took it: the watch is over.
  void forget(const std::string& key);
  // An earlier process on this machine saw `v` first at `first_seen`: the
  // watch of `key` counts from then if it is still watching `v`.
  void adopt(const std::string& key, const RowVersion& v, std::chrono::steady_clock::time_point first_seen);
  std::size_t size() const;

 private:
  struct Entry {
    RowVersion version;
    std::chrono::milliseconds watch;
    std::chrono::steady_clock::time_point first_seen;
    std::chrono::steady_clock::time_point last_seen;
    std::list<std::string>::iterator recent;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> recent_;  // most recently seen first
  std::size_t capacity_;
};

// The watches of a name's many rows at once: the holdings of a semaphore or
// read-write lease, the places ahead of a fair queue's waiter. One entry per
// key (a name and what looks at it), holding a part per row seen (a
// holding's slot, a place's ticket). Each look replaces the entry's parts
// with the rows it saw, keeping the first sighting of every version seen
// again: a row gone is forgotten with the look that no longer sees it.
// Bounded like WatchBook (entries, least recently seen first out).
class GroupWatchBook {
 public:
  explicit GroupWatchBook(std::size_t capacity) : capacity_(capacity) {}
  struct Part {
    std::int64_t part = 0;
    Sighting seen;
  };
  // Records `parts` as what `key` sees at `at` (the read that saw them has
  // returned); answers, in order, how long each has been seen unchanged.
  // *first: the key had no entry (this process's first look).
  std::vector<std::chrono::milliseconds> sighted(const std::string& key, const std::vector<Part>& parts,
                                                 std::chrono::steady_clock::time_point at, bool* first = nullptr);
  // An earlier process on this machine saw `v` of `part` first at
  // `first_seen`: the watch counts from then if it still watches `v`.
  void adopt(const std::string& key, std::int64_t part, const RowVersion& v,
             std::chrono::steady_clock::time_point first_seen);
  // Nothing left to watch under `key` (no unreleased row, no place ahead):
  // its entry goes, so a name no longer waited for leaves nothing behind.
  void forget(const std::string& key);
  // A wait on `key` ended: its entry goes unless a row it watches looked
  // dead at the last look (the database clock said it ran out: a hint
  // only), so that a later wait continues that watch (a process that keeps
  // asking with waits shorter than the ttl still takes a dead holding over).
  void wait_ended(const std::string& key);
  std::size_t size() const;

 private:
  struct Seen {
    std::int64_t part;
    RowVersion version;
    std::chrono::steady_clock::time_point first_seen;
  };
  struct Entry {
    std::vector<Seen> parts;  // by part
    bool suspect = false;     // a part ran out on the database clock at the last look
    std::chrono::steady_clock::time_point last_seen;
    std::list<std::string>::iterator recent;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> recent_;
  std::size_t capacity_;
};

// This process's book: at most kMaxWatches entries; an entry not seen for
// kIdleWatch (and two of its watches) goes when a new one comes.
inline constexpr std::size_t kMaxWatches = 65536;
inline constexpr std::chrono::milliseconds kIdleWatch{std::chrono::minutes(10)};
WatchBook& watches();
GroupWatchBook& group_watches();
// The book's key of lease `name` on `conn`'s database.
std::string watch_key(const Connection& conn, std::string_view name);
// The same from the database's masked URI (Connection::description()).
std::string watch_key(std::string_view description, std::string_view name);
// GroupWatchBook keys: the holdings of `name` (every attempt of the process
// on it shares the watch), and the places ahead of a fair waiter's `ticket`.
std::string holdings_watch_key(std::string_view description, std::string_view name);
std::string places_watch_key(std::string_view description, std::string_view name, std::int64_t ticket);

// The identity of this machine's monotonic clock: the kernel's boot id and
// this process's time namespace. Empty where unknown (then a watch is this
// process's only). Processes with the same identity read the same clock.
const std::string& machine_watcher();
// The machine's monotonic clock (CLOCK_MONOTONIC) in ms: what
// sqlguard_lock_watch.first_seen_ms holds.
std::int64_t machine_monotonic_ms();

// Whether a row seen as `s` may be taken over now, by `rule`, by a caller
// whose ripe watch is `ripe` (the compare-and-set in the statement decides).
bool may_take_over(const Sighting& s, const std::optional<RowVersion>& ripe, TakeOver rule);

}  // namespace sqlguard::detail
