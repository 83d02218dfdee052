// The reference service end to end, on the dialect under test, with a real
// nats-server: three order-service instances, two shipping consumers, the
// scripted load client (2,000 orders over 500 keys, retries, duplicates,
// client time-outs), kill -9 of one instance, of the relay leader and of a
// consumer mid-run. The load client checks the invariants (see
// examples/order-service/load_client.cpp) and prints a JSON report.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_context.h"

using sgtest::ctx;
using namespace std::chrono_literals;

namespace {

#ifdef SQLGUARD_ORDER_SERVICE
bool port_open(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int p = ntohs(a.sin_port);
  close(fd);
  return p;
}

// Starts argv with stdout and stderr appended to `log`; returns the pid of
// the program itself (sh execs it).
int spawn_logged(std::vector<std::string> argv, const std::string& log) {
  std::vector<std::string> sh = {"/bin/sh", "-c", "exec \"$@\" >>" + log + " 2>&1", "sh"};
  sh.insert(sh.end(), argv.begin(), argv.end());
  return sgtest::spawn(sh);
}

bool wait_port(int port, std::chrono::seconds within) {
  auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    if (port_open(port)) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::string http_get(int port, const std::string& path) {
  std::string out;
  sgtest::run_process({"/usr/bin/curl", "-s", "-m", "2", "http://127.0.0.1:" + std::to_string(port) + path}, &out);
  return out;
}

std::string find_nats_server() {
  for (const char* p : {"/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"})
    if (access(p, X_OK) == 0) return p;
  return {};
}

struct Procs {
  std::vector<int> pids;
  ~Procs() {
    for (int p : pids)
      if (p > 0) {
        kill(p, SIGKILL);
        sgtest::wait_pid(p);
      }
  }
  int add(int p) {
    pids.push_back(p);
    return p;
  }
  void kill9(int p) {
    kill(p, SIGKILL);
    sgtest::wait_pid(p);
    for (auto& x : pids)
      if (x == p) x = -1;
  }
};
#endif

}  // namespace

TEST_CASE("the reference service keeps every invariant with three instances, a relay leader killed, a consumer "
          "killed and 2,000 retried orders",
          "[example][slow]") {
#ifndef SQLGUARD_ORDER_SERVICE
  FAIL("the examples were not built: install libcpp-httplib-dev libnats-dev prometheus-cpp-dev (tools/deps.sh)");
#else
  std::string nats = find_nats_server();
  REQUIRE_FALSE(nats.empty());  // a missing nats-server is a failure, not a skip (tools/deps.sh installs it)
  REQUIRE(access("/usr/bin/curl", X_OK) == 0);
  std::string db = ctx().fresh_database();
  std::string dir = "/tmp/sgtest_example_" + ctx().run_id + "_" + ctx().name;
  REQUIRE(sgtest::run_process({"/bin/mkdir", "-p", dir + "/js"}) == 0);
  const std::string log = dir + "/processes.log";
  Procs procs;
  int nats_port = free_port();
  procs.add(spawn_logged({nats, "-js", "-a", "127.0.0.1", "-p", std::to_string(nats_port), "-sd", dir + "/js"}, log));
  REQUIRE(wait_port(nats_port, 20s));
  const std::string nats_url = "nats://127.0.0.1:" + std::to_string(nats_port);
  const int seed = 90;  // 900 units for ~1,000 demanded: every SKU runs out

  std::vector<int> ports, service_pids;
  for (int i = 0; i < 3; ++i) {
    int p = free_port();
    ports.push_back(p);
    service_pids.push_back(procs.add(spawn_logged(
        {SQLGUARD_ORDER_SERVICE, "--db", db, "--listen", "127.0.0.1:" + std::to_string(p), "--nats", nats_url,
         "--seed-stock", std::to_string(seed), "--instance", "svc" + std::to_string(i), "--relay-lease-ms", "2000"},
        log)));
    REQUIRE(wait_port(p, 30s));  // sequential start: the first one creates the schema
  }
  int consumer_a = procs.add(spawn_logged({SQLGUARD_SHIPPING_CONSUMER, "--db", db, "--nats", nats_url, "--name",
                                           "ship-a", "--ack-wait-ms", "1000", "--slow-ms", "20"},
                                          log));
  procs.add(spawn_logged({SQLGUARD_SHIPPING_CONSUMER, "--db", db, "--nats", nats_url, "--name", "ship-b",
                          "--ack-wait-ms", "1000"},
                         log));

  std::string report_file = dir + "/report.json";
  std::vector<std::string> load = {SQLGUARD_ORDER_LOAD, "--orders", "2000", "--keys", "500", "--concurrency", "8", "--pause-ms", "10",
                                   "--db", db, "--seed-stock", std::to_string(seed), "--expect-events", "90"};
  for (int p : ports) load.insert(load.end(), {"--target", "127.0.0.1:" + std::to_string(p)});
  int load_pid = sgtest::spawn(load, report_file);

  // Mid-run: kill -9 the relay leader, then another instance, then consumer A.
  std::this_thread::sleep_for(700ms);
  int leader = -1;
  for (int i = 0; i < 3 && leader < 0; ++i)
    if (http_get(ports[static_cast<std::size_t>(i)], "/healthz").find("\"relay_leader\":true") != std::string::npos)
      leader = i;
  INFO("relay leader before the kill: svc" << leader);
  CHECK(leader >= 0);
  if (leader >= 0) procs.kill9(service_pids[static_cast<std::size_t>(leader)]);
  std::this_thread::sleep_for(700ms);
  int other = leader == 0 ? 1 : 0;
  procs.kill9(service_pids[static_cast<std::size_t>(other)]);
  std::this_thread::sleep_for(300ms);
  procs.kill9(consumer_a);
  int load_status = 0;
  pid_t reaped = waitpid(load_pid, &load_status, WNOHANG);
  bool load_still_running = reaped == 0;

  int rc = load_still_running ? sgtest::wait_pid(load_pid)
                              : (WIFEXITED(load_status) ? WEXITSTATUS(load_status) : 128 + WTERMSIG(load_status));
  std::ifstream f(report_file);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string report = ss.str();
  INFO("report: " << report);
  INFO("process log: " << log);
  CHECK(load_still_running);  // the kills happened mid-run
  CHECK(rc == 0);
  CHECK(report.find("\"ok\":true") != std::string::npos);
  CHECK(report.find("\"out_of_stock_answers\":0,") == std::string::npos);  // stock ran out: oversell was possible
  // Consumer A (killed mid-run, 20 ms inside each message's transaction)
  // applied some events before it died; B got the rest, redelivered included.
  std::smatch m;
  REQUIRE(std::regex_search(report, m, std::regex("\"ship-a\":([0-9]+)")));
  CHECK(std::stoi(m[1].str()) >= 1);
  sgtest::run_process({"/bin/rm", "-rf", dir + "/js"});
  // The surviving instance serves the metrics Prometheus scrapes; promtool accepts them.
  int survivor = 3 - leader - other;
  std::string metrics_file = dir + "/metrics.prom";
  REQUIRE(sgtest::run_process({"/usr/bin/curl", "-s", "-m", "5", "-o", metrics_file,
                               "http://127.0.0.1:" + std::to_string(ports[static_cast<std::size_t>(survivor)]) +
                                   "/metrics"}) == 0);
  std::string check_out;
  CHECK(sgtest::run_process({"/bin/sh", "-c", "promtool check metrics < " + metrics_file + " 2>&1"}, &check_out) ==
        0);
  std::ifstream mf(metrics_file);
  std::stringstream ms;
  ms << mf.rdbuf();
  CHECK(ms.str().find("sqlguard_idempotency_replays_total") != std::string::npos);
  CHECK(ms.str().find("orders_http_requests_total") != std::string::npos);
#endif
}

TEST_CASE("the reference service accepts a body-less POST for pay/ship/cancel and answers every error with JSON",
          "[example]") {
#ifndef SQLGUARD_ORDER_SERVICE
  WARN("order-service not built");
#else
  if (ctx().name != "sqlite") return;  // the HTTP layer is the same on every dialect
  const std::string dir = "/tmp/sqlguard-os-" + ctx().run_id;
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  const int port = free_port();
  Procs procs;
  procs.add(spawn_logged({SQLGUARD_ORDER_SERVICE, "--db", "sqlite://" + dir + "/os.db", "--listen",
                          "127.0.0.1:" + std::to_string(port), "--seed-stock", "10"},
                         dir + "/service.log"));
  REQUIRE(wait_port(port, 20s));
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  // -w: the status after the body, on its own line.
  auto curl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/curl", "-s", "-m", "5", "-w", "\n%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string out;
    sgtest::run_process(argv, &out);
    auto nl = out.rfind('\n');
    return std::make_pair(out.substr(nl + 1), out.substr(0, nl));
  };
  auto created = curl({"-X", "POST", "-H", "Idempotency-Key: k1", "-H", "Content-Type: application/json", "-d",
                       R"({"sku":"sku-1","qty":1})", base + "/orders"});
  REQUIRE(created.first == "201");
  const std::string id = nlohmann::json::parse(created.second)["id"];
  // curl -X POST without -d: no body, no Content-Length (an empty 400 before).
  auto paid = curl({"-X", "POST", base + "/orders/" + id + "/pay"});
  CHECK(paid.first == "200");
  CHECK(nlohmann::json::parse(paid.second)["status"] == "paid");
  auto missing = curl({"-X", "POST", base + "/orders/no-such-order/ship"});
  CHECK(missing.first == "404");
  CHECK(nlohmann::json::parse(missing.second)["error"] == "not_found");
  // Errors the HTTP layer answers itself carry a JSON body too.
  for (const auto& args : std::vector<std::vector<std::string>>{{"-X", "POST", base + "/orders"},  // no body at all
                                                                {base + "/no-such-route"}}) {
    auto r = curl(args);
    INFO("status " << r.first << " body " << r.second);
    CHECK(r.first.at(0) == '4');
    auto j = nlohmann::json::parse(r.second, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j.contains("error"));
  }
#endif
}
