#include "strategies/purge.h"

#include <thread>

namespace sqlguard::detail {

std::int64_t purge_in_batches(Connection& conn, std::string_view who, Sql statement, Params params,
                              const PurgeOptions& o, int* batches) {
  if (o.batch_size < 1 || o.batch_size > 100000 || o.max_batches < 0)
    throw Error(ErrorCode::kInvalidArgument, std::string(who) + ": batch_size must be 1..100000 and max_batches >= 0 "
                                                                "(0 = no limit), got " +
                                                 std::to_string(o.batch_size) + " and " + std::to_string(o.max_batches));
  require_no_transaction(conn, who, "it runs its own short autocommit batches");
  params.emplace_back(o.batch_size);
  std::int64_t total = 0;
  for (int b = 0; o.max_batches == 0 || b < o.max_batches; ++b) {
    std::int64_t n = 0;
    for (int attempt = 0;; ++attempt) {
      try {
        n = run(conn, statement, params).affected;
        break;
      } catch (const Error& e) {
        if (!(e.code() == ErrorCode::kConflict || e.code() == ErrorCode::kLockBusy) || attempt >= 5) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(5 << attempt));
      }
    }
    if (batches) ++*batches;
    total += n;
    if (n < o.batch_size) break;
    if (o.pause.count() > 0) std::this_thread::sleep_for(o.pause);
  }
  return total;
}

}  // namespace sqlguard::detail
