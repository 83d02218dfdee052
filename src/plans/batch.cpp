// The batch plans (plans.h): many distinct names taken or released by one
// statement (PostgreSQL) or one short series (MariaDB), for the lock client's
// coalesced calls. Lists are padded up to a power of two (batch_rows.h).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "plans/acquire_common.h"
#include "plans/batch_rows.h"
#include "plans/plans.h"
#include "sqlguard/errors.h"

namespace sqlguard::detail {
namespace {

void add_try(Params& v, const BatchTry& t) {
  v.emplace_back(t.name);
  v.emplace_back(t.owner);
  v.emplace_back(static_cast<std::int64_t>(t.ttl.count()));
  v.emplace_back(static_cast<std::int64_t>(t.min_hold.count()));
}

Params release_values(std::span<const BatchRelease> batch, std::size_t places) {
  static const Params pad{std::string(), std::string(), std::int64_t{0}};
  return padded_values(batch, places, pad, [](Params& v, const BatchRelease& r) {
    v.emplace_back(r.name);
    v.emplace_back(r.owner);
    v.emplace_back(r.fence);
  });
}

std::vector<bool> released_of(std::span<const BatchRelease> batch, const std::set<std::string>& names) {
  std::vector<bool> out;
  out.reserve(batch.size());
  for (const auto& r : batch) out.push_back(names.count(r.name) > 0);
  return out;
}

class OneStatement final : public BatchPlan {
 public:
  std::string_view name() const noexcept override { return "batch one-statement"; }

  std::vector<BatchTook> acquire(Connection& conn, std::span<const BatchTry> batch) const override {
    static constexpr auto kName = column(Sql::lease_acquire_batch, "name");
    static constexpr auto kFence = column(Sql::lease_acquire_batch, "fence");
    static constexpr auto kExpireAt = column(Sql::lease_acquire_batch, "expire_at");
    static constexpr auto kHolderExpireAt = column(Sql::lease_acquire_batch, "holder_expire_at");
    static constexpr SightingColumns kSeen{column(Sql::lease_acquire_batch, "holder_fence"),
                                           column(Sql::lease_acquire_batch, "holder_beat"),
                                           column(Sql::lease_acquire_batch, "holder_expire_at"),
                                           column(Sql::lease_acquire_batch, "holder_watch_ms"),
                                           column(Sql::lease_acquire_batch, "holder_released"),
                                           column(Sql::lease_acquire_batch, "db_now_ms")};
    const std::size_t places = padded_size(batch.size());
    static const Params pad{std::string(), std::string(), std::int64_t{0}, std::int64_t{0}};
    const Params values = padded_values(batch, places, pad, add_try);
    const auto sql = render_rows(catalog(conn), Sql::lease_acquire_batch, "reqs", Sql::lease_acquire_req, places);
    const Result r = run_rendered(conn, Sql::lease_acquire_batch, sql, values);
    std::map<std::string, const Row*> rows;
    for (const auto& row : r.rows) rows.emplace(cell(row, kName).as_string(), &row);
    std::vector<BatchTook> out(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto it = rows.find(batch[i].name);
      if (it == rows.end()) continue;
      const Row& row = *it->second;
      if (!cell(row, kFence).is_null()) {
        out[i].taken = true;
        out[i].fence = cell(row, kFence).as_int();
        out[i].expire_at = cell(row, kExpireAt).as_int();
      } else if (!cell(row, kHolderExpireAt).is_null()) {
        out[i].seen = sighting_of(row, kSeen);
        out[i].holder_expire_at = cell(row, kHolderExpireAt).as_int();
      }
    }
    return out;
  }

  std::vector<bool> release(Connection& conn, std::span<const BatchRelease> batch) const override {
    static constexpr auto kName = column(Sql::lease_release_batch, "name");
    const std::size_t places = padded_size(batch.size());
    const auto sql = render_rows(catalog(conn), Sql::lease_release_batch, "refs", Sql::lease_release_ref, places);
    std::set<std::string> names;
    for (const auto& row : run_rendered(conn, Sql::lease_release_batch, sql, release_values(batch, places)).rows)
      names.insert(cell(row, kName).as_string());
    return released_of(batch, names);
  }
};

// The channels' wake-up locks, taken (lease_wakeup_take_batch) or freed
// (lease_wakeup_signal_batch); the list padded by repeating the last one.
// Never throws: without its wake-up lock a lease's waiters poll.
void wakeup_locks(Connection& conn, Sql id, const std::vector<std::string>& names) {
  if (names.empty()) return;
  try {
    std::vector<std::string> channels;
    channels.reserve(names.size());
    for (const auto& n : names) channels.push_back(lease_wakeup_channel(n));
    const std::size_t places = padded_size(channels.size());
    Params values(channels.begin(), channels.end());
    while (values.size() < places) values.push_back(values.back());
    run_rendered(conn, id, render_rows(catalog(conn), id, "channels", Sql::lease_channel_ref, places), values);
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, std::string(id == Sql::lease_wakeup_take_batch ? "taking" : "freeing") +
                                " the wake-up locks of " + std::to_string(names.size()) +
                                " leases failed (their waiters poll): " + e.what());
  }
}

class ReadThenUpsert final : public BatchPlan {
 public:
  std::string_view name() const noexcept override { return "batch read-then-upsert"; }

  std::vector<BatchTook> acquire(Connection& conn, std::span<const BatchTry> batch) const override {
    const Catalog& cat = catalog(conn);
    std::vector<BatchTook> out(batch.size());
    // The read first: a held name costs no row lock.
    static constexpr auto kPollName = column(Sql::lease_poll, "name");
    static constexpr auto kPollExpireAt = column(Sql::lease_poll, "expire_at");
    static constexpr SightingColumns kSeen = plain_sighting_columns<Sql::lease_poll>();
    std::size_t places = padded_size(batch.size());
    Params names;
    for (const auto& t : batch) names.emplace_back(t.name);
    while (names.size() < places) names.emplace_back(std::string());
    const Result polled =
        run_rendered(conn, Sql::lease_poll, render_rows(cat, Sql::lease_poll, "names", Sql::lease_name_ref, places), names);
    std::map<std::string, const Row*> seen;
    for (const auto& row : polled.rows) seen.emplace(cell(row, kPollName).as_string(), &row);
    std::vector<std::size_t> free;  // missing or released: taken by the upsert
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto it = seen.find(batch[i].name);
      if (it == seen.end()) {
        free.push_back(i);
        continue;
      }
      const Sighting s = sighting_of(*it->second, kSeen);
      if (s.released) {
        free.push_back(i);
      } else {
        out[i].seen = s;
        out[i].holder_expire_at = cell(*it->second, kPollExpireAt).as_int();
      }
    }
    if (free.empty()) return out;
    // In name order: two batches never wait on each other's rows in a cycle.
    std::sort(free.begin(), free.end(), [&](std::size_t a, std::size_t b) { return batch[a].name < batch[b].name; });
    places = padded_size(free.size());
    Params values;
    for (std::size_t k = 0; k < places; ++k) {
      const BatchTry& t = batch[free[std::min(k, free.size() - 1)]];
      values.emplace_back(t.name);
      values.emplace_back(t.owner);
      values.emplace_back(static_cast<std::int64_t>(t.ttl.count()));
      values.emplace_back(static_cast<std::int64_t>(t.min_hold.count()));
      values.emplace_back(static_cast<std::int64_t>(t.min_hold.count()));
      values.emplace_back(static_cast<std::int64_t>(t.ttl.count()));
    }
    static constexpr auto kName = column(Sql::lease_take_batch, "name");
    static constexpr auto kOwner = column(Sql::lease_take_batch, "owner");
    static constexpr auto kFence = column(Sql::lease_take_batch, "fence");
    static constexpr auto kExpireAt = column(Sql::lease_take_batch, "expire_at");
    static constexpr auto kAcquiredAt = column(Sql::lease_take_batch, "acquired_at");
    static constexpr auto kNow = column(Sql::lease_take_batch, "db_now_ms");
    const Result took = run_rendered(
        conn, Sql::lease_take_batch, render_rows(cat, Sql::lease_take_batch, "reqs", Sql::lease_take_req, places), values);
    std::map<std::string, std::size_t> index;
    for (std::size_t i : free) index.emplace(batch[i].name, i);
    std::vector<std::string> taken;
    for (const auto& row : took.rows) {
      auto it = index.find(cell(row, kName).as_string());
      if (it == index.end() || out[it->second].taken) continue;
      const BatchTry& t = batch[it->second];
      if (cell(row, kOwner).as_string() != t.owner || cell(row, kAcquiredAt).as_int() != cell(row, kNow).as_int())
        continue;  // another contender's (undecided: tried alone)
      out[it->second].taken = true;
      out[it->second].fence = cell(row, kFence).as_int();
      out[it->second].expire_at = cell(row, kExpireAt).as_int();
      taken.push_back(t.name);
    }
    wakeup_locks(conn, Sql::lease_wakeup_take_batch, taken);
    return out;
  }

  std::vector<bool> release(Connection& conn, std::span<const BatchRelease> batch) const override {
    const Catalog& cat = catalog(conn);
    static constexpr auto kName = column(Sql::lease_release_batch_lock, "name");
    std::set<std::string> names;
    {
      Transaction tx(conn, Isolation::kReadCommitted);
      std::size_t places = padded_size(batch.size());
      for (const auto& row :
           run_rendered(conn, Sql::lease_release_batch_lock,
                        render_rows(cat, Sql::lease_release_batch_lock, "refs", Sql::lease_release_ref, places),
                        release_values(batch, places))
               .rows)
        names.insert(cell(row, kName).as_string());
      if (!names.empty()) {
        // Exactly the rows locked above (one the renewer held is left out).
        std::vector<BatchRelease> locked;
        for (const auto& r : batch)
          if (names.count(r.name)) locked.push_back(r);
        places = padded_size(locked.size());
        run_rendered(conn, Sql::lease_release_batch_update,
                     render_rows(cat, Sql::lease_release_batch_update, "refs", Sql::lease_release_ref, places),
                     release_values(locked, places));
      }
      tx.commit();
    }
    wakeup_locks(conn, Sql::lease_wakeup_signal_batch, std::vector<std::string>(names.begin(), names.end()));
    return released_of(batch, names);
  }
};

}  // namespace

const BatchPlan& batch_one_statement() {
  static const OneStatement plan;
  return plan;
}

const BatchPlan& batch_read_then_upsert() {
  static const ReadThenUpsert plan;
  return plan;
}

}  // namespace sqlguard::detail
