// renew_leases(): many leases renewed by one statement per 1000 (issue 26's
// batched renewal), each owner- and fence-checked on the database clock
// exactly like renew_lease().
#include <catch2/catch.hpp>

#include "sql_audit.h"
#include "sqlguard/catalog.h"
#include "sqlguard/lease_lock.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::code_of;
using sgtest::ctx;
using std::chrono::milliseconds;

namespace {

struct Held {
  LeaseRenewal renewal;
  std::int64_t expire_at_ms = 0;
};

std::vector<Held> acquire_many(Connection& conn, const std::string& prefix, int n, milliseconds ttl) {
  std::vector<Held> out;
  for (int i = 0; i < n; ++i) {
    const std::string name = prefix + "-" + std::to_string(i), owner = make_owner_token();
    auto r = acquire_lease(conn, name, owner, ttl);
    REQUIRE(r.acquired);
    out.push_back({{name, owner, r.fence, 60s}, r.expire_at_ms});
  }
  return out;
}

std::vector<LeaseRenewal> renewals(const std::vector<Held>& held) {
  std::vector<LeaseRenewal> out;
  for (const auto& h : held) out.push_back(h.renewal);
  return out;
}

}  // namespace

TEST_CASE("renew_leases extends exactly the leases still held, and reports the others", "[lease][renew-batch]") {
  auto c = ctx().connect();
  auto other = ctx().connect();
  auto held = acquire_many(*c, ctx().unique("rb"), 5, 5s);
  // In between: lease 1 force-released, lease 2 taken over after a release
  // (a newer fence), lease 3 asked with a wrong owner, lease 4 with a stale fence.
  REQUIRE(force_release(*other, held[1].renewal.name));
  REQUIRE(release_lease(*c, held[2].renewal.name, held[2].renewal.owner, held[2].renewal.fence));
  REQUIRE(acquire_lease(*other, held[2].renewal.name, "someone-else", 5s).acquired);
  auto asked = renewals(held);
  asked[3].owner = "not-the-owner";
  asked[4].fence -= 1;
  const auto before = lease_info(*c, held[0].renewal.name);
  REQUIRE(before);

  const auto result = renew_leases(*c, asked);
  REQUIRE(result.size() == 5);
  CHECK(result == std::vector<bool>{true, false, false, false, false});
  // The renewed one runs 60 s from now on the database clock; the others are untouched.
  const auto after = lease_info(*c, held[0].renewal.name);
  REQUIRE(after);
  CHECK(after->expire_at_ms >= after->db_now_ms + 59'000);
  CHECK(after->expire_at_ms > before->expire_at_ms + 50'000);
  CHECK_FALSE(lease_info(*c, held[1].renewal.name)->held());
  auto taken = lease_info(*c, held[2].renewal.name);
  CHECK(taken->owner == "someone-else");
  CHECK(taken->expire_at_ms < taken->db_now_ms + 6'000);  // the new owner's lease, not extended by us
  CHECK(lease_info(*c, held[4].renewal.name)->expire_at_ms < after->db_now_ms + 6'000);
}

TEST_CASE("renew_leases renews more than one batch and keeps each lease's own ttl", "[lease][renew-batch]") {
  auto c = ctx().connect();
  const int n = static_cast<int>(kMaxRenewalBatch) + 7;
  auto held = acquire_many(*c, ctx().unique("rbn"), n, 5s);
  auto asked = renewals(held);
  asked.front().ttl = 90s;
  asked.back().ttl = 20s;
  const auto result = renew_leases(*c, asked);
  REQUIRE(result.size() == asked.size());
  CHECK(std::count(result.begin(), result.end(), true) == n);
  const auto first = lease_info(*c, asked.front().name), last = lease_info(*c, asked.back().name);
  CHECK(first->expire_at_ms - first->db_now_ms > 80'000);
  CHECK(last->expire_at_ms - last->db_now_ms > 15'000);
  CHECK(last->expire_at_ms - last->db_now_ms <= 20'000);
  // Negative control: renewing after every lease was released renews none.
  for (const auto& a : asked) release_lease(*c, a.name, a.owner, a.fence);
  const auto none = renew_leases(*c, asked);
  CHECK(std::count(none.begin(), none.end(), true) == 0);
}

TEST_CASE("renew_leases refuses a bad entry before sending anything, naming it", "[lease][renew-batch]") {
  auto c = ctx().connect();
  auto held = acquire_many(*c, ctx().unique("rbv"), 2, 5s);
  auto asked = renewals(held);
  const auto before = lease_info(*c, asked[0].name)->expire_at_ms;
  std::string what;
  auto dup = asked;
  dup.push_back(asked[0]);
  CHECK(code_of([&] { renew_leases(*c, dup); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(what.find("entry 2") != std::string::npos);
  auto bad_fence = asked;
  bad_fence[1].fence = 0;
  CHECK(code_of([&] { renew_leases(*c, bad_fence); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(what.find("entry 1") != std::string::npos);
  auto bad_ttl = asked;
  bad_ttl[1].ttl = 1ms;
  CHECK(code_of([&] { renew_leases(*c, bad_ttl); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(what.find("ttl") != std::string::npos);
  CHECK(lease_info(*c, asked[0].name)->expire_at_ms == before);  // nothing was renewed
  CHECK(renew_leases(*c, {}).empty());
}

TEST_CASE("the SQL audit matches a batch of any size and still refuses a literal value in it", "[renew-batch][catalog]") {
  const std::string d = ctx().name;
  const std::string id = sqlguard::sql_statement(d, "lease_renew_batch").available ? "lease_renew_batch"
                                                                                   : "lease_renew_batch_lock";
  const std::string templ = sqlguard::sql_statement(d, id).text, ref = sqlguard::sql_statement(d, "lease_ref").text;
  const auto slot = templ.find('{'), close = templ.find('}', slot);
  const std::string sep = templ.substr(templ.find('*', slot) + 1, close - templ.find('*', slot) - 1);
  auto with = [&](const std::vector<std::string>& refs) {
    std::string list;
    for (std::size_t i = 0; i < refs.size(); ++i) list += (i ? sep : "") + refs[i];
    return templ.substr(0, slot) + list + templ.substr(close + 1);
  };
  CHECK(sgtest::matches_catalog(d, id, with({ref})));
  CHECK(sgtest::matches_catalog(d, id, with(std::vector<std::string>(1000, ref))));
  // Negative control: a value written into the statement instead of bound.
  std::string literal = ref;
  literal.replace(literal.find('?'), 1, "'x'");
  CHECK_FALSE(sgtest::matches_catalog(d, id, with({ref, literal, ref})));
  CHECK_FALSE(sgtest::matches_catalog(d, id, with({literal})));
}
