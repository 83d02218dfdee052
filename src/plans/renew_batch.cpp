// The renew plans (plans.h): many leases extended by one statement, each
// owner- and fence-checked on the database clock like lease_renew.
#include <algorithm>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "plans/batch_rows.h"
#include "plans/plans.h"

namespace sqlguard::detail {
namespace {

using Renewed = std::set<std::pair<std::string, std::int64_t>>;

// A lease_ref / sync_ref per row; padding matches no lease (none has fence 0
// or an empty name) and no holding (no name is empty).
std::string render_batch(const Catalog& cat, Sql id, std::size_t places) {
  return render_rows(cat, id, "refs", Sql::lease_ref, places);
}

Params batch_values(std::span<const LeaseRenewal> batch, std::size_t places) {
  static const Params pad{std::string(), std::string(), std::int64_t{0}, std::int64_t{0}};
  return padded_values(batch, places, pad, [](Params& v, const LeaseRenewal& l) {
    v.emplace_back(l.name);
    v.emplace_back(l.owner);
    v.emplace_back(l.fence);
    v.emplace_back(static_cast<std::int64_t>(l.ttl.count()));
  });
}

std::string render_holdings(const Catalog& cat, Sql id, std::size_t places) {
  return render_rows(cat, id, "refs", Sql::sync_ref, places);
}

Params holding_values(std::span<const RowRenewal> batch, std::size_t places) {
  static const Params pad{std::string(), std::int64_t{0}, std::string(), std::int64_t{0}, std::int64_t{0}};
  return padded_values(batch, places, pad, [](Params& v, const RowRenewal& r) {
    v.emplace_back(r.name);
    v.emplace_back(r.key);
    v.emplace_back(r.owner);
    v.emplace_back(r.fence);
    v.emplace_back(static_cast<std::int64_t>(r.ttl.count()));
  });
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
