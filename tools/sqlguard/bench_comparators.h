// The bench's comparators (Redis, etcd) live in a module of their own,
// sqlguard-bench-comparators.so (package sqlguard-bench-comparators), so that
// the CLI links neither hiredis nor cpp-httplib and a host that only wants
// `sqlguard run` does not install them. `sqlguard bench --redis / --etcd`
// loads the module when asked (bench_comparators.cpp): first next to the
// executable (the build tree), then <exe>/../<libdir>/sqlguard/ (an
// install). The module (bench_comparators_module.cpp, bench_redis.cpp,
// bench_etcd.cpp, etcd_client.cpp) exports one C entry point; the CLI refuses
// a module of another sqlguard version (the table holds C++ types, so both
// sides must come from one build).
#pragma once

#include <string>

#include "bench.h"

namespace sqlguard::bench {

inline constexpr int kComparatorsAbi = 2;  // 2: Comparator::pipelined
inline constexpr const char* kComparatorsEntry = "sqlguard_bench_comparators";
inline constexpr const char* kComparatorsFile = "sqlguard-bench-comparators.so";
inline constexpr const char* kComparatorsPackage = "sqlguard-bench-comparators";

struct ComparatorsModule {
  int abi;                                            // kComparatorsAbi of the module's build
  const char* version;                                // the sqlguard version it was built with
  Comparator (*redis)(const std::string& host_port);  // null: built without hiredis
  Comparator (*etcd)(const std::string& host_port);   // null: built without cpp-httplib
};

// In the module (bench_redis.cpp, bench_etcd.cpp).
Comparator module_redis_comparator(const std::string& host_port);
Comparator module_etcd_comparator(const std::string& host_port);

// In the CLI: why the comparator cannot be used ("" = it can: the module
// loaded and has it). Loads the module on the first call.
std::string redis_unavailable();
std::string etcd_unavailable();

}  // namespace sqlguard::bench
