// Internal: the per-connection prepared-statement cache, keyed by SQL text,
// looked up by string_view without building a std::string per call (C++20
// heterogeneous lookup) and bounded: least recently used entries are evicted
// and handed to the dialect, which deallocates them on the server (PG
// DEALLOCATE, MariaDB COM_STMT_CLOSE, sqlite3_finalize). Without the bound,
// 20,000 distinct texts on one MariaDB connection hit the server-wide
// max_prepared_stmt_count (16,382) and broke every other client.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace sqlguard::detail {

struct SqlHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

inline constexpr std::size_t kDefaultStatementCacheSize = 256;

template <typename V>
class StatementCache {
 public:
  explicit StatementCache(std::size_t capacity = kDefaultStatementCacheSize) : capacity_(capacity) {}
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  std::size_t size() const noexcept { return index_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }

  // The cached value for `sql` (now the most recently used), or nullptr.
  V* find(std::string_view sql) {
    auto it = index_.find(sql);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return &it->second->second;
  }

  // Caches `value` for `sql` (which must not be cached yet). When the cache
  // is full, the least recently used entry is first handed to `evict` and
  // dropped. Returns the cached value. Capacity 0: callers do not cache.
  template <typename Evict>
  V& insert(std::string_view sql, V value, Evict&& evict) {
    while (!lru_.empty() && index_.size() >= capacity_) {
      auto& last = lru_.back();
      index_.erase(std::string_view(last.first));
      evict(last.first, last.second);
      lru_.pop_back();
    }
    lru_.emplace_front(std::string(sql), std::move(value));
    index_.emplace(std::string_view(lru_.front().first), lru_.begin());
    return lru_.front().second;
  }

  // Drops the entry for `sql`, handing it to `evict` first. False if none.
  template <typename Evict>
  bool erase(std::string_view sql, Evict&& evict) {
    auto it = index_.find(sql);
    if (it == index_.end()) return false;
    auto node = it->second;
    index_.erase(it);
    evict(node->first, node->second);
    lru_.erase(node);
    return true;
  }

  // Drops the least recently used entry, handing it to `evict` first. False
  // when empty.
  template <typename Evict>
  bool evict_oldest(Evict&& evict) {
    if (lru_.empty()) return false;
    auto& last = lru_.back();
    index_.erase(std::string_view(last.first));
    evict(last.first, last.second);
    lru_.pop_back();
    return true;
  }

  // Visits every entry (most recent first), e.g. to finalize them.
  template <typename F>
  void for_each(F&& f) {
    for (auto& [sql, v] : lru_) f(sql, v);
  }

  // Forgets every entry without calling anything (the session is gone, and
  // its statements with it).
  void clear() noexcept {
    index_.clear();
    lru_.clear();
  }

 private:
  using Entry = std::pair<std::string, V>;
  std::size_t capacity_;
  std::list<Entry> lru_;  // front = most recently used; list nodes keep the keys' storage stable
  std::unordered_map<std::string_view, typename std::list<Entry>::iterator, SqlHash, std::equal_to<>> index_;
};

}  // namespace sqlguard::detail
