// The comparators module's entry point (bench_comparators.h): the table of
// the comparators this build has. The one symbol of its own the module
// exports (the module is built with hidden visibility).
#include "bench_comparators.h"

namespace sqlguard::bench {
namespace {

const ComparatorsModule kModule{
    kComparatorsAbi,
    SQLGUARD_CLI_VERSION,
#ifdef SQLGUARD_BENCH_REDIS
    &module_redis_comparator,
#else
    nullptr,
#endif
#ifdef SQLGUARD_BENCH_ETCD
    &module_etcd_comparator,
#else
    nullptr,
#endif
};

}  // namespace
}  // namespace sqlguard::bench

extern "C" __attribute__((visibility("default"))) const sqlguard::bench::ComparatorsModule* sqlguard_bench_comparators() {
  return &sqlguard::bench::kModule;
}
