// Worker modes for the foundation tests.
#include "sqlguard/migrate.h"
#include "worker_registry.h"

// migrate: runs migrate() once; prints how many migrations it applied.
static sgworker::Register migrate_mode("migrate", [](const std::string& uri, const std::vector<std::string>&) {
  auto conn = sqlguard::make_connection(uri);
  auto report = sqlguard::migrate(*conn);
  std::printf("%zu\n", report.applied_now.size());
  return 0;
});
