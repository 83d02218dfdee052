// The CLI's side of the comparators module (bench_comparators.h): finds and
// loads sqlguard-bench-comparators.so once, the first time a comparator is
// asked for, and hands out its comparators. The module stays loaded (its
// code runs the contenders it makes).
#include "bench_comparators.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <string>
#include <vector>

#include "sqlguard/errors.h"

namespace sqlguard::bench {
namespace {

struct Loaded {
  const ComparatorsModule* module = nullptr;
  std::string why;  // when module is null
};

// The directory of this executable ("" when /proc/self/exe cannot say: then
// the module is not searched for at all, never in the working directory).
std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string path(buf, static_cast<std::size_t>(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

Loaded load() {
  const std::string dir = executable_dir();
  if (dir.empty())
    return {nullptr, "the comparators module cannot be looked for: /proc/self/exe does not name this executable"};
  const std::string libdir = SQLGUARD_INSTALL_LIBDIR;  // relative to the prefix, or absolute
  const std::vector<std::string> candidates = {
      dir + "/" + kComparatorsFile,
      (libdir.starts_with("/") ? libdir : dir + "/../" + libdir) + "/sqlguard/" + kComparatorsFile,
  };
  std::string looked;
  for (const auto& path : candidates) {
    if (::access(path.c_str(), F_OK) != 0) {
      looked += (looked.empty() ? "" : ", ") + path;
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return {nullptr, "the comparators module " + path + " does not load: " + ::dlerror()};
    using Entry = const ComparatorsModule* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, kComparatorsEntry));
    const ComparatorsModule* m = entry ? entry() : nullptr;
    if (!m || m->abi != kComparatorsAbi)
      return {nullptr, "the comparators module " + path + " is not one this sqlguard can use (no entry point " +
                           kComparatorsEntry + " of interface version " + std::to_string(kComparatorsAbi) + ")"};
    if (std::string(m->version) != SQLGUARD_CLI_VERSION)
      return {nullptr, "the comparators module " + path + " belongs to sqlguard " + m->version + ", this is " +
                           SQLGUARD_CLI_VERSION + " (install the matching " + kComparatorsPackage + ")"};
    return {m, ""};
  }
  return {nullptr, std::string("the comparators are not installed: install the package ") + kComparatorsPackage +
                       " (looked for " + looked + ")"};
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

using Slot = Comparator (*)(const std::string&);

std::string unavailable(Slot ComparatorsModule::*which, const char* library) {
  const Loaded& l = loaded();
  if (!l.module) return l.why;
  if (!(l.module->*which)) return std::string("the comparators module was built without ") + library;
  return "";
}

}  // namespace

std::string redis_unavailable() { return unavailable(&ComparatorsModule::redis, "hiredis (libhiredis-dev)"); }
std::string etcd_unavailable() { return unavailable(&ComparatorsModule::etcd, "cpp-httplib (libcpp-httplib-dev)"); }

Comparator redis_comparator(const std::string& host_port) {
  if (auto why = redis_unavailable(); !why.empty()) throw Error(ErrorCode::kNotSupported, "bench --redis: " + why);
  return loaded().module->redis(host_port);
}

Comparator etcd_comparator(const std::string& host_port) {
  if (auto why = etcd_unavailable(); !why.empty()) throw Error(ErrorCode::kNotSupported, "bench --etcd: " + why);
  return loaded().module->etcd(host_port);
}

}  // namespace sqlguard::bench
