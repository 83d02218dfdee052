// The renew plans (plans.h): many leases extended by one statement, each
// owner- and fence-checked on the database clock like lease_renew.
#include <algorithm>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "strategies/lease/plans.h"

namespace sqlguard::detail {
namespace {

using Renewed = std::set<std::pair<std::string, std::int64_t>>;

// How many lease_refs a statement for `n` leases carries: `n` rounded up to
// a power of two, at most kMaxRenewalBatch. A connection then prepares at
// most 11 texts for every batch size, instead of one per size (each would
// take a place in its statement cache).
std::size_t padded_size(std::size_t n) {
  std::size_t size = 1;
  while (size < n) size *= 2;
  return std::min(size, kMaxRenewalBatch);
}

// The statement `id` with one lease_ref per place.
std::string render_batch(const Catalog& cat, Sql id, std::size_t places) {
  return cat.render(id, {{"refs", std::vector<std::string>(places, cat.render(Sql::lease_ref, {}))}});
}

// The leases' values in order, then padding refs that match no lease (no
// lease has fence 0 or an empty name) up to `places`.
Params batch_values(std::span<const LeaseRenewal> batch, std::size_t places) {
  Params values;
  values.reserve(places * 4);
  for (const auto& l : batch) {
    values.emplace_back(l.name);
    values.emplace_back(l.owner);
    values.emplace_back(l.fence);
    values.emplace_back(static_cast<std::int64_t>(l.ttl.count()));
  }
  for (std::size_t i = batch.size(); i < places; ++i) {
    values.emplace_back(std::string());
    values.emplace_back(std::string());
    values.emplace_back(std::int64_t{0});
    values.emplace_back(std::int64_t{0});
  }
  return values;
}

// The same for holdings (sync_ref: name, slot, owner, fence, ttl_ms); padding
// matches no holding (no name is empty).
std::string render_holdings(const Catalog& cat, Sql id, std::size_t places) {
  return cat.render(id, {{"refs", std::vector<std::string>(places, cat.render(Sql::sync_ref, {}))}});
}

Params holding_values(std::span<const RowRenewal> batch, std::size_t places) {
  Params values;
  values.reserve(places * 5);
  for (const auto& r : batch) {
    values.emplace_back(r.name);
    values.emplace_back(r.key);
    values.emplace_back(r.owner);
    values.emplace_back(r.fence);
    values.emplace_back(static_cast<std::int64_t>(r.ttl.count()));
  }
  for (std::size_t i = batch.size(); i < places; ++i) {
    values.emplace_back(std::string());
    values.emplace_back(std::int64_t{0});
    values.emplace_back(std::string());
    values.emplace_back(std::int64_t{0});
    values.emplace_back(std::int64_t{0});
  }
  return values;
}

Renewed renewed_rows(const Result& r, Column name, Column fence) {
  Renewed out;
  for (const auto& row : r.rows) out.emplace(cell(row, name).as_string(), cell(row, fence).as_int());
  return out;
}

class Returning final : public RenewPlan {
 public:
  std::string_view name() const noexcept override { return "renew-returning"; }
  Renewed renew(Connection& conn, std::span<const LeaseRenewal> batch) const override {
    const std::size_t places = padded_size(batch.size());
    const std::string sql = render_batch(catalog(conn), Sql::lease_renew_batch, places);
    static constexpr Column kName = column(Sql::lease_renew_batch, "name");
    static constexpr Column kFence = column(Sql::lease_renew_batch, "fence");
    return renewed_rows(run_rendered(conn, Sql::lease_renew_batch, sql, batch_values(batch, places)), kName, kFence);
  }
  Renewed renew_holdings(Connection& conn, std::span<const RowRenewal> batch) const override {
    const std::size_t places = padded_size(batch.size());
    const std::string sql = render_holdings(catalog(conn), Sql::sync_renew_batch, places);
    static constexpr Column kName = column(Sql::sync_renew_batch, "name");
    static constexpr Column kSlot = column(Sql::sync_renew_batch, "slot");
    return renewed_rows(run_rendered(conn, Sql::sync_renew_batch, sql, holding_values(batch, places)), kName, kSlot);
  }
};

class LockThenUpdate final : public RenewPlan {
 public:
  std::string_view name() const noexcept override { return "renew-lock-then-update"; }
  Renewed renew(Connection& conn, std::span<const LeaseRenewal> batch) const override {
    const Catalog& cat = catalog(conn);
    const std::size_t places = padded_size(batch.size());
    const Params values = batch_values(batch, places);
    static constexpr Column kName = column(Sql::lease_renew_batch_lock, "name");
    static constexpr Column kFence = column(Sql::lease_renew_batch_lock, "fence");
    Transaction tx(conn);
    Renewed held = renewed_rows(
        run_rendered(conn, Sql::lease_renew_batch_lock, render_batch(cat, Sql::lease_renew_batch_lock, places),
                     values),
        kName, kFence);
    if (!held.empty())
      run_rendered(conn, Sql::lease_renew_batch_update, render_batch(cat, Sql::lease_renew_batch_update, places),
                   values);
    tx.commit();
    return held;
  }
  Renewed renew_holdings(Connection& conn, std::span<const RowRenewal> batch) const override {
    const Catalog& cat = catalog(conn);
    const std::size_t places = padded_size(batch.size());
    const Params values = holding_values(batch, places);
    static constexpr Column kName = column(Sql::sync_renew_batch_lock, "name");
    static constexpr Column kSlot = column(Sql::sync_renew_batch_lock, "slot");
    Transaction tx(conn);
    Renewed held = renewed_rows(
        run_rendered(conn, Sql::sync_renew_batch_lock, render_holdings(cat, Sql::sync_renew_batch_lock, places),
                     values),
        kName, kSlot);
    if (!held.empty())
      run_rendered(conn, Sql::sync_renew_batch_update, render_holdings(cat, Sql::sync_renew_batch_update, places),
                   values);
    tx.commit();
    return held;
  }
};

}  // namespace

const RenewPlan& renew_returning() {
  static const Returning plan;
  return plan;
}

const RenewPlan& renew_lock_then_update() {
  static const LockThenUpdate plan;
  return plan;
}

}  // namespace sqlguard::detail
