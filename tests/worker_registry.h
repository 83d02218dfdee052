// Registry of worker modes (see worker_main.cpp). Register with:
//   static sgworker::Register reg("mode-name", [](const std::string& uri,
//       const std::vector<std::string>& args) -> int { ...; return 0; });
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace sgworker {
using Mode = std::function<int(const std::string& uri, const std::vector<std::string>& args)>;
std::map<std::string, Mode>& registry();
struct Register {
  Register(const std::string& name, Mode m) { registry()[name] = std::move(m); }
};
// Bytes as lowercase hex (workers print stored responses this way).
inline std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}
}  // namespace sgworker
