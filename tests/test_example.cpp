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
#include <functional>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_context.h"

using sgtest::ctx;
using namespace std::chrono_literals;
using namespace std::string_literals;

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

// ---- hostile-input helpers (issue 39 items 9 and 10) ----------------------

int connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{5, 0};  // no read in these tests waits longer
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

bool send_all(int fd, const std::string& bytes) {
  for (std::size_t off = 0; off < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// Sends `request` as is (curl cannot put a NUL byte in a header) and reads
// the answer until the server closes (requests say Connection: close).
std::string http_raw(int port, const std::string& request) {
  int fd = connect_loopback(port);
  if (fd < 0) return {};
  send_all(fd, request);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fd);
  return out;
}

struct HttpAnswer {
  int status = 0;
  std::string headers, body;
};

HttpAnswer parse_answer(const std::string& raw) {
  HttpAnswer a;
  auto end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return a;
  a.status = std::atoi(raw.c_str() + 9);
  a.headers = raw.substr(0, end);
  a.body = raw.substr(end + 4);
  return a;
}

// POST /orders with `extra_headers` (each ending in \r\n) and `body`.
HttpAnswer post_order(int port, const std::string& extra_headers, const std::string& body) {
  return parse_answer(http_raw(port, "POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                                     "Content-Type: application/json\r\n" +
                                         extra_headers + "Content-Length: " + std::to_string(body.size()) +
                                         "\r\n\r\n" + body));
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

template <typename F>
bool eventually(F&& done, std::chrono::seconds within) {
  auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return done();
}

// An order-service on its own SQLite file in `dir`, 10 units of sku-1..10;
// returns its port.
int start_order_service(Procs& procs, const std::string& dir, const std::vector<std::string>& extra = {}) {
  const int port = free_port();
  std::vector<std::string> argv = {SQLGUARD_ORDER_SERVICE, "--db", "sqlite://" + dir + "/os.db", "--listen",
                                   "127.0.0.1:" + std::to_string(port), "--seed-stock", "10"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  procs.add(spawn_logged(argv, dir + "/service.log"));
  REQUIRE(wait_port(port, 20s));
  return port;
}

std::int64_t stock_of(int port, const std::string& sku) {
  auto j = nlohmann::json::parse(http_get(port, "/stock/" + sku), nullptr, false);
  return j.is_object() && j.contains("qty") ? j["qty"].get<std::int64_t>() : -1;
}

std::string hostile_dir(const std::string& what) {
  const std::string dir = "/tmp/sqlguard-hostile-" + what + "-" + ctx().run_id;
  REQUIRE(sgtest::run_process({"/bin/mkdir", "-p", dir}) == 0);
  return dir;
}

// Publishes on core NATS with the raw protocol (JetStream stores what its
// streams capture): HPUB with a Nats-Msg-Id header, or PUB when `msg_id` is
// empty, then PING; the PONG says the server has processed the publish.
bool nats_publish(int port, const std::string& subject, const std::string& msg_id, const std::string& payload) {
  int fd = connect_loopback(port);
  if (fd < 0) return false;
  std::string out = "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true}\r\n";
  if (msg_id.empty()) {
    out += "PUB " + subject + " " + std::to_string(payload.size()) + "\r\n" + payload + "\r\n";
  } else {
    const std::string hdr = "NATS/1.0\r\nNats-Msg-Id: " + msg_id + "\r\n\r\n";
    out += "HPUB " + subject + " " + std::to_string(hdr.size()) + " " + std::to_string(hdr.size() + payload.size()) +
           "\r\n" + hdr + payload + "\r\n";
  }
  out += "PING\r\n";
  bool ok = send_all(fd, out);
  std::string in;
  char buf[1024];
  for (ssize_t n; ok && in.find("PONG") == std::string::npos && in.find("-ERR") == std::string::npos &&
                  (n = recv(fd, buf, sizeof buf, 0)) > 0;)
    in.append(buf, static_cast<std::size_t>(n));
  close(fd);
  return ok && in.find("PONG") != std::string::npos && in.find("-ERR") == std::string::npos;
}

// Messages in JetStream stream `name`, from nats-server's monitoring
// endpoint (/jsz); -1 when the stream is not listed.
std::int64_t stream_messages(int monitor_port, const std::string& name) {
  auto j = nlohmann::json::parse(http_get(monitor_port, "/jsz?accounts=true&streams=true"), nullptr, false);
  std::int64_t found = -1;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
    if (v.is_object() && v.value("name", std::string()) == name && v.contains("state") && v["state"].is_object())
      found = v["state"].value("messages", std::int64_t{-1});
    if (v.is_structured())
      for (const auto& child : v) walk(child);
  };
  if (!j.is_discarded()) walk(j);
  return found;
}
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

// ---- hostile input (issue 39 items 9 and 10) --------------------------------

TEST_CASE("order-service refuses an Idempotency-Key with a NUL, control bytes, a bad length or twice, and still "
          "replays a valid one",
          "[example][hostile]") {
#ifndef SQLGUARD_ORDER_SERVICE
  WARN("order-service not built");
#else
  if (ctx().name != "sqlite") return;  // the HTTP layer is the same on every dialect
  const std::string dir = hostile_dir("idem");
  Procs procs;
  const int port = start_order_service(procs, dir);
  const std::string body = R"({"sku":"sku-1","qty":1})";
  auto first = post_order(port, "Idempotency-Key: k\r\n", body);
  REQUIRE(first.status == 201);
  const std::string id = nlohmann::json::parse(first.body)["id"];

  // Cut at the NUL, "k\0b" and "k\0c" used to replay the order of "k".
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"NUL", "Idempotency-Key: k\0b\r\n"s},  // ""s keeps the NUL
      {"another NUL", "Idempotency-Key: k\0c\r\n"s},
      {"trailing NUL", "Idempotency-Key: k\0\r\n"s},
      {"escape", "Idempotency-Key: k\x1b[31m\r\n"},
      {"DEL", "Idempotency-Key: k\x7f\r\n"},
      {"tab inside", "Idempotency-Key: k\tb\r\n"},
      {"256 bytes", "Idempotency-Key: " + std::string(256, 'a') + "\r\n"},
      {"empty", "Idempotency-Key: \r\n"},
      {"absent", ""},
      {"sent twice", "Idempotency-Key: k\r\nIdempotency-Key: k2\r\n"},
  };
  for (const auto& [what, header] : refused) {
    auto r = post_order(port, header, body);
    INFO(what << ": status " << r.status << " body " << r.body);
    CHECK(r.status == 400);
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j.contains("error"));
    CHECK(r.headers.find("Idempotent-Replayed") == std::string::npos);
  }
  CHECK(stock_of(port, "sku-1") == 9);  // none of them took stock: only "k" did

  // Neighbours: 255 bytes is still a key; "k" still replays its one order.
  auto longest = post_order(port, "Idempotency-Key: " + std::string(255, 'a') + "\r\n", body);
  CHECK(longest.status == 201);
  auto again = post_order(port, "Idempotency-Key: k\r\n", body);
  CHECK(again.status == 201);
  CHECK(again.headers.find("Idempotent-Replayed: true") != std::string::npos);
  CHECK(nlohmann::json::parse(again.body)["id"] == id);
  CHECK(stock_of(port, "sku-1") == 8);  // "k" once, the 255-byte key once
#endif
}

TEST_CASE("order-service answers an oversize or chunked body with a JSON 413 / 411 and keeps serving",
          "[example][hostile]") {
#ifndef SQLGUARD_ORDER_SERVICE
  WARN("order-service not built");
#else
  if (ctx().name != "sqlite") return;
  const std::string dir = hostile_dir("body");
  Procs procs;
  const int port = start_order_service(procs, dir);
  const std::string order = R"({"sku":"sku-2","qty":1})";
  const std::size_t limit = 64 * 1024;
  for (std::size_t size : {limit + 1, std::size_t{8} * 1024 * 1024}) {
    auto r = post_order(port, "Idempotency-Key: big-" + std::to_string(size) + "\r\n",
                        order + std::string(size - order.size(), ' '));
    INFO("body of " << size << " bytes: status " << r.status << " body " << r.body);
    CHECK(r.status == 413);
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j.contains("error"));
  }
  // A chunked body would bypass the limit (cpp-httplib 0.11 checks
  // Content-Length only): refused before it is read. Only the head is sent:
  // chunks the server never reads would make its close a reset, which can
  // swallow the answer.
  auto chunked = parse_answer(http_raw(port, "POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                                             "Idempotency-Key: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"));
  INFO("chunked: " << chunked.status << " " << chunked.body);
  CHECK(chunked.status == 411);
  CHECK(stock_of(port, "sku-2") == 10);  // nothing was ordered
  // Neighbour: a body of exactly the limit is read and served, and the
  // service still answers.
  auto at_limit = post_order(port, "Idempotency-Key: at-limit\r\n", order + std::string(limit - order.size(), ' '));
  CHECK(at_limit.status == 201);
  CHECK(stock_of(port, "sku-2") == 9);
  CHECK(http_get(port, "/healthz").find("\"ok\":true") != std::string::npos);
#endif
}

TEST_CASE("order-service answers /healthz on its admin listener while 50 slow partial connections hold the "
          "public one",
          "[example][hostile]") {
#ifndef SQLGUARD_ORDER_SERVICE
  WARN("order-service not built");
#else
  if (ctx().name != "sqlite") return;
  const std::string dir = hostile_dir("slow");
  Procs procs;
  const int admin = free_port();
  const int port =
      start_order_service(procs, dir, {"--threads", "4", "--admin-listen", "127.0.0.1:" + std::to_string(admin)});
  REQUIRE(wait_port(admin, 10s));
  // 50 requests whose headers never end: one more header line every second,
  // inside the service's read timeout, so each keeps its worker.
  std::vector<int> slow;
  for (int i = 0; i < 50; ++i) {
    int fd = connect_loopback(port);
    if (fd >= 0 && send_all(fd, "POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\n")) slow.push_back(fd);
  }
  REQUIRE(slow.size() == 50);
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (int fd : slow) send_all(fd, "X-Slow: 1\r\n");
      std::this_thread::sleep_for(1s);
    }
  });
  std::this_thread::sleep_for(2s);  // the workers have them
  std::string out;
  auto t0 = std::chrono::steady_clock::now();
  int rc = sgtest::run_process({"/usr/bin/curl", "-s", "-m", "5", "http://127.0.0.1:" + std::to_string(admin) +
                                                                        "/healthz"},
                               &out);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("admin /healthz: rc " << rc << " after " << took << " s: " << out);
  CHECK(rc == 0);
  CHECK(out.find("\"ok\":true") != std::string::npos);
  // /metrics too (the pool's borrow histogram exists once /healthz borrowed).
  CHECK(http_get(admin, "/metrics").find("sqlguard_pool_borrow_seconds") != std::string::npos);
  stop = true;
  trickle.join();
  for (int fd : slow) close(fd);
  // Neighbour: once they are gone the public listener serves again.
  CHECK(eventually([&] { return http_get(port, "/healthz").find("\"ok\":true") != std::string::npos; }, 15s));
#endif
}

TEST_CASE("order-service answers input the library refuses with 400 and no database details", "[example][hostile]") {
#ifndef SQLGUARD_ORDER_SERVICE
  WARN("order-service not built");
#else
  if (ctx().name != "sqlite") return;
  const std::string dir = hostile_dir("refused");
  Procs procs;
  const int port = start_order_service(procs, dir);
  // A NUL inside the SKU: valid JSON, refused by sqlguard (kInvalidArgument:
  // text values may not hold NUL), which used to be a 500 naming the database.
  auto r = post_order(port, "Idempotency-Key: nul-sku\r\n", R"({"sku":"sku-3\u0000x","qty":1})");
  INFO("status " << r.status << " body " << r.body);
  CHECK(r.status == 400);
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j.value("error", std::string()) == "invalid_argument");
  for (const std::string& secret : {dir, std::string("os.db"), std::string("sqlite"), std::string("127.0.0.1")})
    CHECK(r.body.find(secret) == std::string::npos);
  // The full error is in the service log instead.
  CHECK(eventually([&] { return read_text(dir + "/service.log").find("create: [invalid_argument") != std::string::npos; },
                   5s));
  // Neighbour: the same SKU without the NUL is an order.
  auto fine = post_order(port, "Idempotency-Key: fine-sku\r\n", R"({"sku":"sku-3","qty":1})");
  CHECK(fine.status == 201);
  CHECK(stock_of(port, "sku-3") == 9);
#endif
}

TEST_CASE("shipping-consumer parks wrong-type, non-JSON, id-less and refused messages and keeps applying the good "
          "ones",
          "[example][hostile]") {
#ifndef SQLGUARD_ORDER_SERVICE  // defined with SQLGUARD_SHIPPING_CONSUMER; the helpers depend on it
  WARN("shipping-consumer not built");
#else
  if (ctx().name != "sqlite") return;  // the consumer's message handling is the same on every dialect
  const std::string nats = find_nats_server();
  REQUIRE_FALSE(nats.empty());
  const std::string dir = hostile_dir("consumer");
  REQUIRE(sgtest::run_process({"/bin/mkdir", "-p", dir + "/js"}) == 0);
  const std::string log = dir + "/processes.log";
  Procs procs;
  const int nats_port = free_port(), monitor_port = free_port();
  procs.add(spawn_logged({nats, "-js", "-a", "127.0.0.1", "-p", std::to_string(nats_port), "-m",
                          std::to_string(monitor_port), "-sd", dir + "/js"},
                         log));
  REQUIRE(wait_port(nats_port, 20s));
  REQUIRE(wait_port(monitor_port, 20s));
  const std::string db = "sqlite://" + dir + "/ship.db";
  auto start_consumer = [&](const std::string& consumer_log) {
    int pid = procs.add(spawn_logged({SQLGUARD_SHIPPING_CONSUMER, "--db", db, "--nats",
                                      "nats://127.0.0.1:" + std::to_string(nats_port), "--name", "ship-h",
                                      "--ack-wait-ms", "1000", "--max-tries", "3"},
                                     consumer_log));
    REQUIRE(eventually([&] { return read_text(consumer_log).find("consuming orders.>") != std::string::npos; }, 30s));
    return pid;
  };
  auto stop_consumer = [&](int pid) {
    kill(pid, SIGTERM);
    int rc = sgtest::wait_pid(pid);
    for (auto& p : procs.pids)
      if (p == pid) p = -1;
    return rc;
  };
  auto applied = [&](const std::string& order_id) {
    auto conn = sqlguard::make_connection(db);
    return conn->execute("SELECT COUNT(*) FROM eg_applied WHERE order_id = ?", {order_id}).rows.at(0)[0].as_int();
  };
  const std::string first_log = dir + "/consumer-1.log";
  int consumer = start_consumer(first_log);

  REQUIRE(nats_publish(nats_port, "orders.created", "good-1", R"({"order_id":"o-1","event":"created"})"));
  REQUIRE(eventually([&] { return applied("o-1") == 1; }, 15s));
  // Each used to stop the consumer (type_error) or come back forever.
  REQUIRE(nats_publish(nats_port, "orders.created", "bad-type", R"({"order_id":5,"event":"created"})"));
  REQUIRE(nats_publish(nats_port, "orders.created", "bad-json", "not json {"));
  REQUIRE(nats_publish(nats_port, "orders.created", "", R"({"order_id":"o-x","event":"created"})"));  // no id
  REQUIRE(nats_publish(nats_port, "orders.created", "bad-nul", R"({"order_id":"o-\u0000","event":"created"})"));
  REQUIRE(nats_publish(nats_port, "orders.created", "good-2", R"({"order_id":"o-2","event":"created"})"));
  // The negative control: the good message after the bad ones is applied.
  CHECK(eventually([&] { return applied("o-2") == 1; }, 20s));
  CHECK(waitpid(consumer, nullptr, WNOHANG) == 0);  // still running
  CHECK(applied("o-x") == 0);
  CHECK(eventually([&] { return stream_messages(monitor_port, "SHIPPING_DEADLETTER") == 4; }, 10s));
  INFO("dead-letter stream: " << stream_messages(monitor_port, "SHIPPING_DEADLETTER"));
  CHECK(stop_consumer(consumer) == 0);
  const std::string first = read_text(first_log);
  INFO("consumer log: " << first);
  CHECK(first.find("stopped; applied 2, duplicates 0, dead-lettered 4") != std::string::npos);

  // A restarted consumer is not handed the parked messages again.
  const std::string second_log = dir + "/consumer-2.log";
  consumer = start_consumer(second_log);
  REQUIRE(nats_publish(nats_port, "orders.created", "good-3", R"({"order_id":"o-3","event":"created"})"));
  CHECK(eventually([&] { return applied("o-3") == 1; }, 20s));
  CHECK(stop_consumer(consumer) == 0);
  const std::string second = read_text(second_log);
  INFO("restarted consumer log: " << second);
  CHECK(second.find("stopped; applied 1, duplicates 0, dead-lettered 0") != std::string::npos);
  CHECK(stream_messages(monitor_port, "SHIPPING_DEADLETTER") == 4);
  sgtest::run_process({"/bin/rm", "-rf", dir + "/js"});
#endif
}
