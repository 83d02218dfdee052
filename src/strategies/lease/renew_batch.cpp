// The renew plans (plans.h): many leases extended by one statement, each
// owner- and fence-checked on the database clock like lease_renew.
#include <string>
#include <vector>

#include "core/catalog.h"
#include "strategies/lease/plans.h"

namespace sqlguard::detail {
namespace {

using Renewed = std::set<std::pair<std::string, std::int64_t>>;

// The statement `id` with one lease_ref per lease, and its values in order.
std::string render_batch(const Catalog& cat, Sql id, std::size_t n) {
  return cat.render(id, {{"refs", std::vector<std::string>(n, cat.render(Sql::lease_ref, {}))}});
}

Params batch_values(std::span<const LeaseRenewal> batch) {
  Params values;
  values.reserve(batch.size() * 4);
  for (const auto& l : batch) {
    values.emplace_back(l.name);
    values.emplace_back(l.owner);
    values.emplace_back(l.fence);
    values.emplace_back(static_cast<std::int64_t>(l.ttl.count()));
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
    const std::string sql = render_batch(catalog(conn), Sql::lease_renew_batch, batch.size());
    static constexpr Column kName = column(Sql::lease_renew_batch, "name");
    static constexpr Column kFence = column(Sql::lease_renew_batch, "fence");
    return renewed_rows(run_rendered(conn, Sql::lease_renew_batch, sql, batch_values(batch)), kName, kFence);
  }
};

class LockThenUpdate final : public RenewPlan {
 public:
  std::string_view name() const noexcept override { return "renew-lock-then-update"; }
  Renewed renew(Connection& conn, std::span<const LeaseRenewal> batch) const override {
    const Catalog& cat = catalog(conn);
    const Params values = batch_values(batch);
    static constexpr Column kName = column(Sql::lease_renew_batch_lock, "name");
    static constexpr Column kFence = column(Sql::lease_renew_batch_lock, "fence");
    Transaction tx(conn);
    Renewed held = renewed_rows(
        run_rendered(conn, Sql::lease_renew_batch_lock, render_batch(cat, Sql::lease_renew_batch_lock, batch.size()),
                     values),
        kName, kFence);
    if (!held.empty())
      run_rendered(conn, Sql::lease_renew_batch_update, render_batch(cat, Sql::lease_renew_batch_update, batch.size()),
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
