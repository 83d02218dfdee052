// Internal: the one bounded-batch DELETE loop behind cleanup() and the
// idempotency / inbox retention purges.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/catalog.h"
#include "sqlguard/connection.h"

namespace sqlguard::detail {

struct PurgeOptions {
  int batch_size = 1000;    // 1 .. 100000
  int max_batches = 0;      // 0 = until a batch comes back short
  std::chrono::milliseconds pause{0};  // between batches
};

// Runs catalog statement `statement` (a bounded DELETE: `params`, then the
// LIMIT bound last) batch after batch; each batch autocommits, so locks are held
// only briefly. Deadlock victims and lock timeouts (cleanup racing
// acquirers on MariaDB) are retried up to 5 times. `who` names the caller in
// errors. Refuses bad options and an open transaction (kInvalidArgument).
// Adds the batches run to *batches when given; returns the rows deleted.
std::int64_t purge_in_batches(Connection& conn, std::string_view who, Sql statement, Params params,
                              const PurgeOptions& options, int* batches = nullptr);

}  // namespace sqlguard::detail
