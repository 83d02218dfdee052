// Worker modes for the idempotency and inbox multi-process tests.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "sqlguard/idempotency.h"
#include "sqlguard/inbox.h"
#include "worker_registry.h"

namespace {

std::vector<std::string> split(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string fingerprint_of(const std::string& key) { return sqlguard::request_fingerprint({"POST", "/orders", key}); }

}  // namespace

// idem-hold URI SCOPE KEY LEASE_MS RUNS_TABLE: takes the key, records a
// "hold" run, then sleeps in the handler until killed (kill -9 by the test).
static sgworker::Register idem_hold("idem-hold", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = sqlguard::make_connection(uri);
  sqlguard::IdempotencyOptions o;
  o.lease = std::chrono::milliseconds(std::stoll(a.at(2)));
  sqlguard::IdempotencyKeys idem(*conn, o);
  idem.execute(a.at(0), a.at(1), fingerprint_of(a.at(1)), [&](sqlguard::IdempotencyExecution&) {
    conn->execute("INSERT INTO " + a.at(3) + " (k, who) VALUES (?, ?)", {a.at(1), "hold"});
    std::printf("holding\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return sqlguard::StoredResponse{200, "never"};
  });
  return 0;
});

// idem-request URI SCOPE KEYS_CSV LEASE_MS WAIT_MS RUNS_TABLE: sends one request
// per listed key (same canonical request per key). The handler records its
// run and answers a body unique to this execution (with a NUL byte). Prints
// "KEY OUTCOME HTTP BODY_HEX" per request.
static sgworker::Register idem_request("idem-request", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = sqlguard::make_connection(uri);
  sqlguard::IdempotencyOptions o;
  o.lease = std::chrono::milliseconds(std::stoll(a.at(2)));
  o.in_progress_wait = std::chrono::milliseconds(std::stoll(a.at(3)));
  sqlguard::IdempotencyKeys idem(*conn, o);
  const std::string who = std::to_string(getpid());
  for (const auto& key : split(a.at(1))) {
    auto r = idem.execute(a.at(0), key, fingerprint_of(key), [&](sqlguard::IdempotencyExecution& ex) {
      conn->execute("INSERT INTO " + a.at(4) + " (k, who) VALUES (?, ?)", {key, who});
      return sqlguard::StoredResponse{201, std::string("order ") + key + '\0' + who + ":" + ex.owner()};
    });
    std::printf("%s %s %d %s\n", key.c_str(), std::string(sqlguard::to_string(r.outcome)).c_str(), r.http_status(),
                sgworker::hex(r.response.body).c_str());
  }
  std::fflush(stdout);
  return 0;
});

// inbox-consume URI CONSUMER EFFECTS_TABLE COUNTER_TABLE MSGS_CSV CRASH_AFTER:
// processes each delivery through the inbox; the handler inserts one effect
// row and bumps a shared counter. With CRASH_AFTER = n > 0 the process
// _exit(3)s inside the n-th handler call, mid-transaction (after its writes,
// before the commit). Prints "MSG OUTCOME ATTEMPTS" per delivery.
static sgworker::Register inbox_consume("inbox-consume", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = sqlguard::make_connection(uri);
  sqlguard::Inbox inbox(*conn);
  const long crash_after = std::stol(a.at(4));
  long calls = 0;
  const std::string who = std::to_string(getpid());
  for (const auto& msg : split(a.at(3))) {
    auto r = inbox.process(a.at(0), msg, [&](sqlguard::Transaction& tx) {
      tx.execute("INSERT INTO " + a.at(1) + " (msg, who) VALUES (?, ?)", {msg, who});
      tx.execute("UPDATE " + a.at(2) + " SET n = n + 1 WHERE id = 1");
      if (crash_after > 0 && ++calls == crash_after) {
        std::fflush(stdout);
        _exit(3);  // a crash mid-transaction: nothing of it may survive
      }
    });
    std::printf("%s %s %d\n", msg.c_str(), std::string(sqlguard::to_string(r.outcome)).c_str(), r.attempts);
  }
  std::fflush(stdout);
  return 0;
});
