// Wait plan "polling": backoff with full jitter between attempts, nothing
// else (PostgreSQL behind a transaction pooler: no LISTEN, no session lock).
#include <thread>

#include "plans/waiter.h"

namespace sqlguard::detail {
namespace {

class PollingWaiter final : public Waiter {
 public:
  using Waiter::Waiter;
  PauseResult pause(Connection&, const PauseArgs& a, std::optional<Error>&) override {
    std::this_thread::sleep_for(a.nap);
    return PauseResult::kSlept;
  }
};

class Polling final : public WaitPlan {
 public:
  std::string_view name() const noexcept override { return "polling"; }
  std::unique_ptr<Waiter> make_waiter(std::string channel, std::optional<std::chrono::milliseconds>) const override {
    return std::make_unique<PollingWaiter>(std::move(channel));
  }
};

}  // namespace

const WaitPlan& polling() {
  static const Polling plan;
  return plan;
}

}  // namespace sqlguard::detail
