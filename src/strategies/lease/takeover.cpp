#include "strategies/lease/takeover.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

milliseconds WatchBook::sighted(const std::string& key, const Sighting& s, steady_clock::time_point at) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(key);
  if (s.released) {  // nothing to watch: a released lease is free
    if (it != entries_.end()) {
      recent_.erase(it->second.recent);
      entries_.erase(it);
    }
    return milliseconds(0);
  }
  if (it == entries_.end()) {
    // Full, or the least recently seen entry idle long enough that a later
    // look may as well start again (and this machine's sighting, if shared,
    // is in the database): it goes.
    while (!recent_.empty()) {
      const Entry& old = entries_.at(recent_.back());
      if (entries_.size() < capacity_ && at - old.last_seen < std::max<milliseconds>(kIdleWatch, old.watch * 2)) break;
      entries_.erase(recent_.back());
      recent_.pop_back();
    }
    recent_.push_front(key);
    entries_.emplace(key, Entry{s.version, s.watch, at, at, recent_.begin()});
    return milliseconds(0);
  }
  Entry& e = it->second;
  e.last_seen = at;
  recent_.splice(recent_.begin(), recent_, e.recent);
  if (!(e.version == s.version)) {  // renewed, released or taken: a new watch from now
    e.version = s.version;
    e.first_seen = at;
  }
  e.watch = s.watch;
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(at - e.first_seen));
}

void WatchBook::forget(const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  recent_.erase(it->second.recent);
  entries_.erase(it);
}

WatchBook::Look WatchBook::look(const std::string& key, steady_clock::time_point now) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return {};
  Look l{true, std::nullopt};
  if (now - it->second.first_seen >= it->second.watch) l.ripe = it->second.version;
  return l;
}

void WatchBook::adopt(const std::string& key, const RowVersion& v, steady_clock::time_point first_seen) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.version == v && first_seen < it->second.first_seen)
    it->second.first_seen = first_seen;
}

std::size_t WatchBook::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return entries_.size();
}

std::vector<milliseconds> GroupWatchBook::sighted(const std::string& key, const std::vector<Part>& parts,
                                                  steady_clock::time_point at, bool* first) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(key);
  if (first) *first = it == entries_.end();
  if (it == entries_.end()) {
    while (!recent_.empty() && entries_.size() >= capacity_) {
      entries_.erase(recent_.back());
      recent_.pop_back();
    }
    // Idle entries go as WatchBook's do (a later look starts again).
    while (!recent_.empty() && at - entries_.at(recent_.back()).last_seen >= kIdleWatch) {
      entries_.erase(recent_.back());
      recent_.pop_back();
    }
    recent_.push_front(key);
    it = entries_.emplace(key, Entry{{}, false, at, recent_.begin()}).first;
  } else {
    recent_.splice(recent_.begin(), recent_, it->second.recent);
  }
  Entry& e = it->second;
  e.last_seen = at;
  std::vector<Seen> next;
  next.reserve(parts.size());
  std::vector<milliseconds> out;
  out.reserve(parts.size());
  e.suspect = false;
  for (const Part& p : parts) {
    e.suspect = e.suspect || p.seen.version.expire_at <= p.seen.db_now;
    auto old = std::lower_bound(e.parts.begin(), e.parts.end(), p.part,
                                [](const Seen& s, std::int64_t v) { return s.part < v; });
    const bool same = old != e.parts.end() && old->part == p.part && old->version == p.seen.version;
    next.push_back(Seen{p.part, p.seen.version, same ? old->first_seen : at});
    out.push_back(std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(at - next.back().first_seen)));
  }
  std::sort(next.begin(), next.end(), [](const Seen& a, const Seen& b) { return a.part < b.part; });
  e.parts = std::move(next);
  return out;
}

void GroupWatchBook::adopt(const std::string& key, std::int64_t part, const RowVersion& v,
                           steady_clock::time_point first_seen) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  for (Seen& s : it->second.parts)
    if (s.part == part && s.version == v && first_seen < s.first_seen) s.first_seen = first_seen;
}

void GroupWatchBook::forget(const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  recent_.erase(it->second.recent);
  entries_.erase(it);
}

void GroupWatchBook::wait_ended(const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.suspect) return;
  recent_.erase(it->second.recent);
  entries_.erase(it);
}

std::size_t GroupWatchBook::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return entries_.size();
}

GroupWatchBook& group_watches() {
  static GroupWatchBook book(kMaxWatches);
  return book;
}

WatchBook& watches() {
  static WatchBook book(kMaxWatches);
  return book;
}

const std::string& machine_watcher() {
  static const std::string id = [] {
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string b;
    if (!(boot >> b) || b.size() != 36) return std::string();
    char ns[128];
    const ssize_t n = readlink("/proc/self/ns/time", ns, sizeof ns - 1);
    // No time namespaces (a kernel before 5.6): every process reads the one clock.
    return b + ":" + (n > 0 ? std::string(ns, static_cast<std::size_t>(n)) : std::string("time:host"));
  }();
  return id;
}

std::int64_t machine_monotonic_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string watch_key(std::string_view description, std::string_view name) {
  std::string k(description);
  k += '\n';
  k += name;
  return k;
}

std::string watch_key(const Connection& conn, std::string_view name) { return watch_key(conn.description(), name); }

std::string holdings_watch_key(std::string_view description, std::string_view name) {
  return watch_key(description, name) + "\n#h";
}

std::string places_watch_key(std::string_view description, std::string_view name, std::int64_t ticket) {
  return watch_key(description, name) + "\n@" + std::to_string(ticket);
}

bool may_take_over(const Sighting& s, const std::optional<RowVersion>& ripe, TakeOver rule) {
  if (s.released) return true;
  if (rule == TakeOver::kDatabaseClock) return s.version.expire_at <= s.db_now;
  return ripe && *ripe == s.version;
}

}  // namespace sqlguard::detail

const char* sqlguard::to_string(TakeOver rule) noexcept {
  return rule == TakeOver::kDatabaseClock ? "database-clock" : "watched";
}
