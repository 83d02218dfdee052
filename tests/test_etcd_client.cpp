// The bench's etcd client (tools/sqlguard/etcd_client.h) and `sqlguard bench
// --etcd` against a real etcd 3.4: tools/test.sh starts one with
// tools/etcdserver.sh and exports SQLGUARD_TEST_ETCD_ENDPOINT. Without it
// these tests fail: a missing etcd is never a skip.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <random>
#include <string>

#include "etcd_client.h"
#include "sqlguard/errors.h"
#include "test_helpers.h"

using namespace std::chrono_literals;
using sqlguard::ErrorCode;
using sqlguard::bench::EtcdClient;
using sgtest::code_of;

namespace {

std::string endpoint() {
  const char* ep = std::getenv("SQLGUARD_TEST_ETCD_ENDPOINT");
  if (!ep || !*ep)
    FAIL("SQLGUARD_TEST_ETCD_ENDPOINT is not set: start etcd (tools/etcdserver.sh start; "
         "eval \"$(tools/etcdserver.sh env)\") or run tools/test.sh");
  return ep;
}

std::string unique(const std::string& what) {
  static std::mt19937_64 rng(std::random_device{}());
  return "sqlguard-test/" + what + "/" + std::to_string(rng());
}

// Runs a shell command line; its stdout and stderr, and its exit status.
int run(const std::string& cmd, std::string& out) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST_CASE("base64 follows RFC 4648's test vectors", "[bench]") {
  using sqlguard::bench::base64_encode;
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("foob") == "Zm9vYg==");
  CHECK(base64_encode("fooba") == "Zm9vYmE=");
  CHECK(base64_encode("foobar") == "Zm9vYmFy");
  CHECK(base64_encode(std::string("\xff\xfe\x00", 3)) == "//4A");
}

TEST_CASE("an etcd endpoint that is not HOST:PORT is refused", "[bench]") {
  CHECK(code_of([] { EtcdClient c("localhost"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { EtcdClient c("127.0.0.1:0"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { EtcdClient c("127.0.0.1:12x"); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("an unreachable etcd is a connection error naming the endpoint", "[bench]") {
  EtcdClient c("127.0.0.1:1");
  std::string what;
  CHECK(code_of([&] { c.grant_lease(30s); }, &what) == ErrorCode::kConnectionLost);
  CHECK(what.find("127.0.0.1:1") != std::string::npos);
}

TEST_CASE("etcd's lock admits one holder; unlock hands it to the waiter", "[etcd]") {
  EtcdClient a(endpoint()), b(endpoint());
  CHECK(a.server_version().rfind("3.", 0) == 0);
  const auto name = unique("lock");
  const auto la = a.grant_lease(30s), lb = b.grant_lease(30s);
  auto held = a.lock(name, la, 2s);
  REQUIRE(held);
  // The second owner times out while the first holds it.
  CHECK_FALSE(b.lock(name, lb, 300ms));
  // ... and a fresh lease after that timeout (the abandoned wait may still be
  // granted) gets it once the holder unlocks.
  b.revoke_lease(lb);
  const auto lb2 = b.grant_lease(30s);
  auto waiter = std::async(std::launch::async, [&] { return b.lock(name, lb2, 5s); });
  CHECK(waiter.wait_for(200ms) == std::future_status::timeout);  // still waiting: a is the holder
  a.unlock(*held);
  auto got = waiter.get();
  REQUIRE(got);
  CHECK(*got != *held);  // a key of its own
  b.unlock(*got);
  a.revoke_lease(la);
  b.revoke_lease(lb2);
}

TEST_CASE("revoking its lease frees a lock", "[etcd]") {
  EtcdClient a(endpoint()), b(endpoint());
  const auto name = unique("revoke");
  const auto la = a.grant_lease(30s), lb = b.grant_lease(30s);
  REQUIRE(a.lock(name, la, 2s));
  a.revoke_lease(la);
  auto got = b.lock(name, lb, 2s);
  REQUIRE(got);
  b.unlock(*got);
  b.revoke_lease(lb);
}

TEST_CASE("a request etcd refuses is an error, not a lost connection", "[etcd]") {
  EtcdClient c(endpoint());
  std::string what;
  // A lease that was never granted.
  CHECK(code_of([&] { c.lock(unique("nolease"), 1234567, 2s); }, &what) == ErrorCode::kInternal);
  CHECK(what.find("etcd refused the request") != std::string::npos);
  CHECK(what.find(endpoint()) != std::string::npos);
  // The client is still usable.
  const auto lease = c.grant_lease(30s);
  auto key = c.lock(unique("after-error"), lease, 2s);
  REQUIRE(key);
  c.unlock(*key);
  c.revoke_lease(lease);
}

TEST_CASE("bench --etcd runs the lease cells through etcd and reports fairness and durability", "[etcd]") {
  const auto db = std::filesystem::temp_directory_path() / ("sg-bench-etcd-" + std::to_string(::getpid()) + ".db");
  std::string out;
  const int rc = run(std::string(SQLGUARD_CLI) + " --db sqlite://" + db.string() +
                         " --json bench --no-raw --ops lease-hot,handoff --clients 2 --duration 300ms --warmup 50ms"
                         " --etcd " + endpoint(),
                     out);
  for (const auto* suffix : {"", "-wal", "-shm", "-sqlguard-wake"}) std::filesystem::remove(db.string() + suffix);
  INFO(out);
  REQUIRE(rc == 0);
  int etcd_cells = 0;
  std::size_t start = 0;
  for (auto nl = out.find('\n'); nl != std::string::npos; start = nl + 1, nl = out.find('\n', start)) {
    auto j = nlohmann::json::parse(out.substr(start, nl - start), nullptr, false);
    if (!j.is_object() || j.value("dialect", "") != "etcd") continue;
    ++etcd_cells;
    INFO(j.dump());
    CHECK(j["errors"] == 0);
    CHECK(j["comparator"] == true);
    CHECK(j["ops_per_s"].get<double>() > 0);
    CHECK(j["jain_index"].is_number());
    CHECK(j["per_client_max"].get<int>() > 0);
    CHECK(j["wait_max_ms"].get<double>() >= j["wait_p50_ms"].get<double>());
    CHECK(j["durability"].get<std::string>().find("etcd 3.") == 0);
    CHECK(j["flushes_per_cycle"] == 2);
    if (j["op"] == "handoff") CHECK(j["ceiling_per_s"].get<double>() > 0);
  }
  CHECK(etcd_cells == 2);
  // The sqlguard cells of the same run compare themselves with etcd's.
  CHECK(out.find("\"vs_etcd\":") != std::string::npos);
}

TEST_CASE("bench --etcd at an address where nothing answers fails naming it", "[bench]") {
  std::string out;
  const int rc = run(std::string(SQLGUARD_CLI) + " --db sqlite::memory: bench --ops lease-hot --clients 1"
                                                 " --duration 100ms --etcd 127.0.0.1:1",
                     out);
  INFO(out);
  CHECK(rc != 0);
  CHECK(out.find("127.0.0.1:1") != std::string::npos);
}
