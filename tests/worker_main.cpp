// Worker process for multi-process tests: `sqlguard_test_worker MODE URI ARGS...`.
// Each test area registers its modes from its own worker_*.cpp.
#include <cstdio>
#include <exception>

#include "sqlguard/errors.h"
#include "worker_registry.h"

namespace sgworker {
std::map<std::string, Mode>& registry() {
  static std::map<std::string, Mode> r;
  return r;
}
}  // namespace sgworker

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: sqlguard_test_worker MODE URI [ARGS...]\n");
    return 2;
  }
  auto& r = sgworker::registry();
  auto it = r.find(argv[1]);
  if (it == r.end()) {
    std::fprintf(stderr, "unknown worker mode '%s'\n", argv[1]);
    return 2;
  }
  std::vector<std::string> args(argv + 3, argv + argc);
  try {
    return it->second(argv[2], args);
  } catch (const sqlguard::Error& e) {
    std::fprintf(stderr, "worker %s failed: %s (statement: %s)\n", argv[1], e.what(), e.statement().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker %s failed: %s\n", argv[1], e.what());
    return 1;
  }
}
