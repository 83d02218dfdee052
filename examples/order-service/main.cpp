// order-service: a reference HTTP service built on sqlguard's public API.
//
//   POST /orders {sku, qty}          Idempotency-Key required; GuardedUpdate
//                                    decrements stock, the order (pending) and
//                                    an outbox row commit in one transaction
//   POST /orders/{id}/pay|ship|cancel  declared StateMachine (audited); cancel
//                                    restocks in the same transaction
//   GET  /orders/{id}, /stock/{sku}, /metrics (Prometheus), /healthz
//                                    (the last two also on --admin-listen)
// An outbox relay runs only on the elected leader (LeaderElector) and
// publishes claimed outbox rows to NATS JetStream with the outbox id as the
// message id. See README.md, "Reference service".
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "../common/app_sql.h"
#include "../common/jetstream.h"
#include "sqlguard/errors.h"
#include "sqlguard/idempotency.h"
#include "sqlguard/leader.h"
#include "sqlguard/metrics.h"
#include "sqlguard/migrate.h"
#include "sqlguard/pool.h"
#include "sqlguard/prometheus.h"
#include "sqlguard/row_lock.h"
#include "sqlguard/transition.h"

using json = nlohmann::ordered_json;  // responses keep the documented field order
using namespace std::chrono_literals;
using sqlguard::StoredResponse;

namespace {

std::atomic<bool> g_stop{false};

std::string random_hex(int n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* d = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) s += d[rng() % 16];
  return s;
}

std::string error_body(const std::string& code, const std::string& message) {
  return json{{"error", code}, {"message", message}}.dump();
}

// Request bodies above this are refused with 413 before they are read into
// memory (an order is a few dozen bytes).
constexpr std::size_t kMaxBodyBytes = 64 * 1024;

// Every value of header `name`, whole. httplib's get_header_value() returns
// a const char*, which ends a value at its first NUL byte: "k\0b", "k\0c" and
// "k" would all read as "k".
std::vector<std::string> header_values(const httplib::Request& q, const std::string& name) {
  std::vector<std::string> out;
  auto [first, last] = q.headers.equal_range(name);
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  return out;
}

bool printable_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

// The Idempotency-Key of a request when it is usable: sent once, 1..255
// bytes of printable ASCII. Anything else is refused rather than cut or
// guessed at.
std::optional<std::string> idempotency_key(const httplib::Request& q) {
  auto keys = header_values(q, "Idempotency-Key");
  if (keys.size() != 1 || keys[0].empty() || keys[0].size() > 255 || !printable_ascii(keys[0])) return std::nullopt;
  return keys[0];
}

// What a client is told about a failure: a status and the error code name.
// e.what() names the database (host, port, database or file) and goes to
// the log only.
int http_status(sqlguard::ErrorCode code) {
  if (code == sqlguard::ErrorCode::kInvalidArgument) return 400;  // a value the library refused (NUL, too long...)
  return sqlguard::is_retryable(code) ? 503 : 500;
}

std::string generic_message(int status) {
  if (status == 400) return "a value in the request was refused";
  if (status == 503) return "temporarily unavailable; retry later";
  return "internal error; the service log has the details";
}

// The JSON body of every error cpp-httplib answers itself (unknown route
// 404, malformed request 400, body too large 413), on both listeners.
void json_error_handler(const httplib::Request&, httplib::Response& r) {
  if (!r.body.empty()) return;
  if (r.status == 404) r.set_content(error_body("not_found", "no such route"), "application/json");
  else
    r.set_content(error_body("http_" + std::to_string(r.status),
                             "the HTTP request was refused (status " + std::to_string(r.status) + ")"),
                  "application/json");
}

// Limits on what one connection may hold. cpp-httplib serves a connection
// on one worker thread from its first byte to its last, so these bound how
// long a slow or idle client keeps a worker: a read or write that makes no
// progress for 5 s ends the connection, an idle keep-alive connection is
// closed after 2 s. They do not stop a client that sends one byte every few
// seconds (slowloris): each such connection holds a worker for as long as
// it keeps trickling. That is why health probes have a listener and a
// worker pool of their own (--admin-listen) instead of a larger pool, which
// only raises the number of slow connections it takes; the real answer in
// production is a reverse proxy that buffers whole requests.
void bound_connections(httplib::Server& srv) {
  srv.set_read_timeout(5s);
  srv.set_write_timeout(5s);
  srv.set_keep_alive_timeout(2);
  srv.set_keep_alive_max_count(100);
  srv.set_payload_max_length(kMaxBodyBytes);
}

// cpp-httplib 0.11 applies the payload limit to Content-Length bodies only,
// and reads a chunked body (even one that also has a Content-Length) whole
// into memory, whatever the method and route: such requests are answered
// 411 from the pre-routing handler, before anything reads the body.
bool refuse_chunked(const httplib::Request& q, httplib::Response& r) {
  if (!q.has_header("Transfer-Encoding")) return false;
  r.status = 411;
  r.set_content(error_body("length_required",
                           "send the body with a Content-Length (at most " + std::to_string(kMaxBodyBytes) + " bytes)"),
                "application/json");
  return true;
}

// The state machine of an order, declared once. The StateMachine built from
// it per request validates it again in memory (see move()).
const sqlguard::StateMachineSpec& order_machine() {
  static const sqlguard::StateMachineSpec spec = [] {
    sqlguard::StateMachineSpec s;
    s.table = "eg_orders";
    s.states = {"pending", "paid", "shipped", "cancelled"};
    s.terminal_states = {"shipped", "cancelled"};
    s.transitions = {{"pay", {"pending"}, "paid", {}, {}},
                     {"ship", {"paid"}, "shipped", {}, {}},
                     {"cancel", {"pending", "paid"}, "cancelled", {}, {}}};
    s.audit = sqlguard::AuditSpec{};
    return s;
  }();
  return spec;
}

// Stock taken by an order and put back by a cancel.
const sqlguard::GuardedUpdateSpec kTakeStock{.table = "eg_stock",
                                             .key_column = "sku",
                                             .assignments = {{"qty", sqlguard::AssignOp::kSubtract}},
                                             .guards = {{"qty", sqlguard::Compare::kGe}}};
const sqlguard::GuardedUpdateSpec kRestock{
    .table = "eg_stock", .key_column = "sku", .assignments = {{"qty", sqlguard::AssignOp::kAdd}}, .guards = {}};

struct Options {
  std::string db;
  std::string listen = "127.0.0.1:8080";
  std::string admin_listen;  // /healthz and /metrics only; empty = none
  std::string nats;
  std::int64_t seed_stock = 1000;
  std::string instance;
  int pool_size = 8;
  int threads = 16;
  std::chrono::milliseconds lease{5000};
};

class Service {
 public:
  explicit Service(Options o) : opt_(std::move(o)), pool_(opt_.db, pool_options()) {
    {
      auto conn = pool_.borrow();
      sqlguard::migrate(*conn);
      for (const char* ddl : app_sql::kSchema) conn->execute_once(ddl);
      for (int i = 1; i <= 10 && opt_.seed_stock >= 0; ++i) {
        try {  // only SKUs that do not exist yet: a restarted instance never resets stock
          conn->execute(app_sql::kStockInsert, {"sku-" + std::to_string(i), opt_.seed_stock});
        } catch (const sqlguard::Error& e) {
          if (e.code() != sqlguard::ErrorCode::kAlreadyExists) throw;
        }
      }
    }
    if (!opt_.nats.empty()) {
      js_ = std::make_unique<example::JetStream>(opt_.nats);
      js_->ensure_stream("ORDERS", "orders.>");
      sqlguard::ElectionOptions eo;
      eo.ttl = opt_.lease;
      eo.candidate = opt_.instance;
      eo.on_elected = [this](std::int64_t term) {
        std::cerr << "order-service " << opt_.instance << ": relay leader, term " << term << std::endl;
        try {
          auto conn = pool_.borrow();
          conn->execute(app_sql::kTermInsert, {term, opt_.instance, conn->db_now_ms()});
        } catch (const std::exception& e) {
          std::cerr << "order-service: recording term failed: " << e.what() << std::endl;
        }
      };
      eo.on_revoked = [this](const sqlguard::Revocation& r) {
        std::cerr << "order-service " << opt_.instance << ": relay term " << r.term << " ended ("
                  << sqlguard::to_string(r.cause) << ")" << std::endl;
      };
      elector_ = std::make_unique<sqlguard::LeaderElector>(opt_.db, "order-outbox-relay", eo);
      elector_->campaign();
      relay_ = std::thread([this] { relay_loop(); });
    }
  }

  ~Service() {
    g_stop = true;
    if (relay_.joinable()) relay_.join();
    if (elector_) elector_->resign();
  }

  // The public API, plus the probes (also served here for callers that have
  // no admin listener).
  void routes(httplib::Server& srv) {
    bound_connections(srv);
    probe_routes(srv);
    srv.Post("/orders", [this](const httplib::Request& q, httplib::Response& r) { timed("create", r, [&] { create(q, r); }); });
    srv.Post(R"(/orders/([A-Za-z0-9_-]{1,64})/(pay|ship|cancel))", [this](const httplib::Request& q, httplib::Response& r) {
      timed(q.matches[2].str(), r, [&] { move(q.matches[1].str(), q.matches[2].str(), r); });
    });
    // pay/ship/cancel take no body, so `curl -X POST …/pay` (no body, no
    // Content-Length) must work too; cpp-httplib answers such a POST with an
    // empty 400 (after waiting for a body), so body-less POSTs are answered
    // here, before it reads. Chunked bodies are refused first.
    srv.set_pre_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
      static const std::regex kMove(R"(/orders/([A-Za-z0-9_-]{1,64})/(pay|ship|cancel))");
      std::smatch m;
      if (refuse_chunked(q, r)) return httplib::Server::HandlerResponse::Handled;
      if (q.method != "POST" || q.has_header("Content-Length")) return httplib::Server::HandlerResponse::Unhandled;
      if (std::regex_match(q.path, m, kMove)) {
        const std::string id = m[1].str(), event = m[2].str();
        timed(event, r, [&] { move(id, event, r); });
      } else {
        // Any other body-less POST: cpp-httplib would wait for a body until
        // its read timeout, then send an empty 400.
        r.status = q.path == "/orders" ? 400 : 404;
        r.set_content(q.path == "/orders"
                          ? error_body("bad_request", "body must be {\"sku\": string, \"qty\": integer 1..1000000}")
                          : error_body("not_found", "no such route"),
                      "application/json");
      }
      return httplib::Server::HandlerResponse::Handled;
    });
    srv.Get(R"(/orders/([A-Za-z0-9_-]{1,64}))", [this](const httplib::Request& q, httplib::Response& r) {
      timed("get_order", r, [&] { get_order(q.matches[1].str(), r); });
    });
    srv.Get(R"(/stock/([A-Za-z0-9_-]{1,64}))", [this](const httplib::Request& q, httplib::Response& r) {
      timed("get_stock", r, [&] { get_stock(q.matches[1].str(), r); });
    });
  }

  // /healthz and /metrics: on the public listener and on the admin one.
  void probe_routes(httplib::Server& srv) {
    srv.set_error_handler(json_error_handler);
    srv.Get("/metrics", [](const httplib::Request&, httplib::Response& r) {
      r.set_content(sqlguard::prometheus_text(), sqlguard::kPrometheusContentType);
    });
    srv.Get("/healthz", [this](const httplib::Request&, httplib::Response& r) { health(r); });
  }

 private:
  sqlguard::PoolOptions pool_options() const {
    sqlguard::PoolOptions p;
    p.min_size = 1;
    p.max_size = static_cast<std::size_t>(opt_.pool_size);
    p.borrow_timeout = 5s;
    p.connect.connect_timeout = 5s;
    if (opt_.db.rfind("sqlite", 0) != 0) p.connect.io_timeout = 10s;
    return p;
  }

  void health(httplib::Response& r) {
    json j{{"ok", true}, {"instance", opt_.instance}};
    try {
      auto conn = pool_.borrow(2s);
      j["db_now_ms"] = conn->db_now_ms();
    } catch (const std::exception& e) {
      std::cerr << "order-service " << opt_.instance << ": /healthz: " << e.what() << std::endl;
      const auto* se = dynamic_cast<const sqlguard::Error*>(&e);
      j["ok"] = false;
      j["error"] = se ? std::string(sqlguard::to_string(se->code())) : std::string("internal");
    }
    j["relay_leader"] = elector_ && elector_->is_leader();
    j["relay_term"] = elector_ ? elector_->term() : 0;
    r.status = j["ok"].get<bool>() ? 200 : 503;
    r.set_content(j.dump(), "application/json");
  }

  template <typename F>
  void timed(const std::string& route, httplib::Response& r, F&& f) {
    auto t0 = std::chrono::steady_clock::now();
    r.status = 200;  // handlers set other codes
    try {
      f();
    } catch (const sqlguard::Error& e) {
      std::cerr << "order-service " << opt_.instance << ": " << route << ": " << e.what() << std::endl;
      r.status = http_status(e.code());
      if (r.status == 503) r.set_header("Retry-After", "1");
      r.set_content(error_body(std::string(sqlguard::to_string(e.code())), generic_message(r.status)),
                    "application/json");
    } catch (const std::exception& e) {
      std::cerr << "order-service " << opt_.instance << ": " << route << ": " << e.what() << std::endl;
      r.status = 500;
      r.set_content(error_body("internal", generic_message(500)), "application/json");
    }
    sqlguard::metrics::counter("orders_http_requests_total", "HTTP requests by route and status",
                               {{"route", route}, {"code", std::to_string(r.status)}})
        .inc();
    sqlguard::metrics::histogram("orders_http_request_seconds", "HTTP request latency by route", {{"route", route}})
        .observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  // The idempotency scope of a client: a hash of its credentials (never the
  // credentials themselves), so keys of different clients never collide.
  // Whole header values (header_values()): credentials that differ after a
  // NUL byte are different clients. One value hashes as it always did (the
  // scopes of stored keys stay valid); several are joined with '\n', which
  // no header value holds.
  static std::string client_scope(const httplib::Request& q) {
    auto joined = [&](const char* name) {
      std::string all;
      for (const auto& v : header_values(q, name)) all += (all.empty() ? "" : "\n") + v;
      return all;
    };
    std::string who = joined("Authorization");
    if (who.empty()) who = "client-id:" + joined("X-Client-Id");
    return "orders:" + sqlguard::request_fingerprint(who).substr(0, 32);
  }

  static std::string order_json(const sqlguard::Row& row) {
    return json{{"id", row[0].as_string()},
                {"sku", row[1].as_string()},
                {"qty", row[2].as_int()},
                {"status", row[3].as_string()}}
        .dump();
  }

  void create(const httplib::Request& q, httplib::Response& r) {
    const auto idem_key = idempotency_key(q);
    if (!idem_key) {
      r.status = 400;
      r.set_content(error_body("idempotency_key_required",
                               "send one Idempotency-Key header: 1..255 bytes of printable ASCII"),
                    "application/json");
      return;
    }
    const std::string& key = *idem_key;
    json body = json::parse(q.body, nullptr, false);
    if (body.is_discarded() || !body.is_object() || !body.contains("sku") || !body["sku"].is_string() ||
        !body.contains("qty") || !body["qty"].is_number_integer() || body["qty"].get<std::int64_t>() < 1 ||
        body["qty"].get<std::int64_t>() > 1000000) {
      r.status = 400;
      r.set_content(error_body("bad_request", "body must be {\"sku\": string, \"qty\": integer 1..1000000}"),
                    "application/json");
      return;
    }
    const std::string sku = body["sku"], scope = client_scope(q);
    const std::int64_t qty = body["qty"];
    // The fingerprint covers the canonical body: same key + another body = 422.
    // nlohmann::json sorts keys: {"qty":1,"sku":"a"} and {"sku":"a","qty":1} are the same request.
    const std::string fp = sqlguard::request_fingerprint({"POST", "/orders", nlohmann::json::parse(q.body).dump()});

    auto conn = pool_.borrow();
    sqlguard::IdempotencyOptions io;
    io.lease = 10s;
    sqlguard::IdempotencyKeys idem(*conn, io);
    auto res = idem.execute(scope, key, fp, [&](sqlguard::IdempotencyExecution&) -> StoredResponse {
      // A take-over after a crash may find the order already committed by
      // the first execution: answer with it (same bytes), never a second order.
      auto existing = conn->execute(app_sql::kOrderByKey, {scope, key});
      if (!existing.empty()) return {201, order_json(existing.rows[0])};
      sqlguard::Transaction tx(*conn);
      sqlguard::GuardedUpdate take(*conn, kTakeStock);  // per request: see move()
      auto g = take.apply(sku, {qty, qty});
      if (g.status == sqlguard::GuardedStatus::kNotFound) return {404, error_body("unknown_sku", sku)};
      if (!g) return {409, error_body("out_of_stock", "not enough stock of " + sku)};
      std::string id = "o-" + random_hex(20);
      auto now = conn->db_now_ms();
      conn->execute(app_sql::kOrderInsert, {id, scope, key, sku, qty, now});
      outbox(*conn, now, id, "created", sku, qty);
      tx.commit();
      return {201, json{{"id", id}, {"sku", sku}, {"qty", qty}, {"status", "pending"}}.dump()};
    });
    using O = sqlguard::IdempotencyOutcome;
    r.status = res.http_status();
    if (res.outcome == O::kExecuted || res.outcome == O::kReplayed) {
      if (res.outcome == O::kReplayed) r.set_header("Idempotent-Replayed", "true");
      r.set_content(res.response.body, "application/json");
    } else if (res.outcome == O::kInProgress) {
      r.set_header("Retry-After", "1");
      r.set_content(error_body("request_in_progress", "a request with this Idempotency-Key is being processed"),
                    "application/json");
    } else if (res.outcome == O::kMismatch) {
      r.set_content(error_body("idempotency_key_reused", "this Idempotency-Key was used with a different request"),
                    "application/json");
    } else {
      r.set_content(error_body("lease_lost", "the request took too long; retry with the same key"),
                    "application/json");
    }
  }

  void outbox(sqlguard::Connection& conn, std::int64_t now, const std::string& order_id, const std::string& event,
              const std::string& sku, std::int64_t qty) {
    char ts[32];
    std::snprintf(ts, sizeof ts, "%013lld", static_cast<long long>(now));
    std::string id = std::string(ts) + "-" + random_hex(16);  // time-ordered, unique
    json payload{{"outbox_id", id}, {"order_id", order_id}, {"event", event}, {"sku", sku}, {"qty", qty}};
    conn.execute(app_sql::kOutboxInsert, {id, "orders." + event, payload.dump()});
  }

  void move(const std::string& id, const std::string& event, httplib::Response& r) {
    auto conn = pool_.borrow();
    sqlguard::Transaction tx(*conn);
    // Built per request on the borrowed connection, on purpose. sqlguard
    // objects borrow a Connection, and the Pool has no per-connection slot
    // or lifetime hook: a cache keyed by Connection* could hand out an
    // object whose connection the pool discarded (a new one may reuse the
    // address). Construction sends no statement here: it validates and
    // renders SQL in memory, skips its key-collation check inside a
    // transaction (both writers are built inside one), and its versioned-
    // table lookup shares a process-wide one-second cache with fire()/apply().
    sqlguard::StateMachine sm(*conn, order_machine());
    auto res = sm.fire(id, event, {.values = {}, .actor = opt_.instance});
    if (res.status == sqlguard::TransitionStatus::kNotFound) {
      r.status = 404;
      r.set_content(error_body("not_found", "no order " + id), "application/json");
      return;
    }
    auto row = conn->execute(app_sql::kOrderGet, {id});
    if (res.status == sqlguard::TransitionStatus::kApplied) {
      const auto& o = row.rows.at(0);
      if (event == "cancel") {
        sqlguard::GuardedUpdate restock(*conn, kRestock);
        restock.apply(o[1], {o[2]});
      }
      outbox(*conn, conn->db_now_ms(), id, event == "pay" ? "paid" : event == "ship" ? "shipped" : "cancelled",
             o[1].as_string(), o[2].as_int());
      tx.commit();
      r.status = 200;
      r.set_content(order_json(o), "application/json");
      return;
    }
    tx.rollback();
    if (res.status == sqlguard::TransitionStatus::kAlreadyInTarget) {
      r.status = 200;  // a repeat of a move that happened: same answer
      r.set_content(order_json(row.rows.at(0)), "application/json");
      return;
    }
    r.status = 409;
    r.set_content(error_body("illegal_transition", "cannot " + event + " an order that is " +
                                                        res.current_state.value_or("?")),
                  "application/json");
  }

  void get_order(const std::string& id, httplib::Response& r) {
    auto conn = pool_.borrow();
    auto row = conn->execute(app_sql::kOrderGet, {id});
    if (row.empty()) {
      r.status = 404;
      r.set_content(error_body("not_found", "no order " + id), "application/json");
      return;
    }
    r.set_content(order_json(row.rows[0]), "application/json");
  }

  void get_stock(const std::string& sku, httplib::Response& r) {
    auto conn = pool_.borrow();
    auto row = conn->execute(app_sql::kStockGet, {sku});
    if (row.empty()) {
      r.status = 404;
      r.set_content(error_body("not_found", "no sku " + sku), "application/json");
      return;
    }
    r.set_content(json{{"sku", sku}, {"qty", row.rows[0][0].as_int()}}.dump(), "application/json");
  }

  // The outbox relay: only the elected leader claims rows (SKIP LOCKED where
  // the dialect has it), publishes each with its outbox id as the JetStream
  // message id, and marks them published in the claim's transaction. A
  // leader killed between publish and commit leaves the rows unpublished;
  // the next leader publishes them again and JetStream drops the duplicates.
  void relay_loop() {
    auto& published = sqlguard::metrics::counter("orders_outbox_published_total", "Outbox rows published to JetStream");
    auto& dups = sqlguard::metrics::counter("orders_outbox_duplicates_total",
                                            "Outbox publishes JetStream reported as duplicates (re-published)");
    while (!g_stop) {
      if (!elector_->is_leader()) {
        std::this_thread::sleep_for(50ms);
        continue;
      }
      std::int64_t term = elector_->term();
      try {
        auto conn = pool_.borrow();
        sqlguard::RowLocker locker(*conn, {.table = "eg_outbox",
                                           .key_column = "id",
                                           .columns = {"subject", "payload"},
                                           .claim_filter = {"published"}});
        sqlguard::RowLockOptions lo;
        lo.wait = conn->capabilities().skip_locked ? sqlguard::LockWait::kSkipLocked : sqlguard::LockWait::kWait;
        auto scope = locker.claim(32, {std::int64_t{0}}, lo);
        if (!scope) {
          scope.rollback();
          std::this_thread::sleep_for(20ms);
          continue;
        }
        int n = 0;
        for (const auto& row : scope.rows()) {
          if (!elector_->is_leader() || elector_->term() != term) break;  // deposed: stop at once
          if (js_->publish(row[1].as_string(), row[2].as_string(), row[0].as_string())) dups.inc();
          scope.execute(app_sql::kOutboxMarkPublished, {term, row[0]});
          ++n;
        }
        if (elector_->is_leader() && elector_->term() == term) {
          scope.commit();
          published.inc(static_cast<std::uint64_t>(n));
        } else {
          scope.rollback();
        }
      } catch (const std::exception& e) {
        std::cerr << "order-service " << opt_.instance << ": relay: " << e.what() << std::endl;
        std::this_thread::sleep_for(200ms);
      }
    }
  }

  Options opt_;
  sqlguard::Pool pool_;
  std::unique_ptr<example::JetStream> js_;
  std::unique_ptr<sqlguard::LeaderElector> elector_;
  std::thread relay_;
};

// "HOST:PORT" -> host, port; false when there is no port.
bool split_host_port(const std::string& hp, std::string& host, int& port) {
  auto colon = hp.rfind(':');
  if (colon == std::string::npos) return false;
  host = hp.substr(0, colon);
  port = std::atoi(hp.c_str() + colon + 1);
  return port > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"order-service: the sqlguard reference service"};
  o.db = "sqlite://order-service.db";
  app.add_option("--db", o.db, "database URI (default: embedded SQLite file order-service.db)");
  app.add_option("--listen", o.listen, "HOST:PORT to serve HTTP on (default 127.0.0.1:8080)");
  app.add_option("--admin-listen", o.admin_listen,
                 "HOST:PORT serving only /healthz and /metrics on workers of their own, so probes are "
                 "answered while slow clients hold the public listener's workers (default: none)");
  app.add_option("--nats", o.nats, "NATS URL; enables the outbox relay (e.g. nats://127.0.0.1:4222)");
  app.add_option("--seed-stock", o.seed_stock, "units put on sku-1..sku-10 that do not exist yet (default 1000)")
      ->check(CLI::Range(static_cast<std::int64_t>(0), static_cast<std::int64_t>(1000000000)));
  app.add_option("--instance", o.instance, "name of this instance in logs, audit rows and relay terms");
  app.add_option("--pool-size", o.pool_size, "database connections (default 8)")->check(CLI::Range(1, 256));
  app.add_option("--threads", o.threads, "HTTP worker threads (default 16)")->check(CLI::Range(1, 256));
  int lease_ms = 5000;
  app.add_option("--relay-lease-ms", lease_ms, "relay leader lease (default 5000)")->check(CLI::Range(100, 600000));
  CLI11_PARSE(app, argc, argv);
  o.lease = std::chrono::milliseconds(lease_ms);
  std::string host, admin_host;
  int port = 0, admin_port = 0;
  if (!split_host_port(o.listen, host, port) ||
      (!o.admin_listen.empty() && !split_host_port(o.admin_listen, admin_host, admin_port))) {
    std::cerr << "order-service: --listen and --admin-listen must be HOST:PORT" << std::endl;
    return 2;
  }
  if (o.instance.empty()) o.instance = "orders-" + std::to_string(port);
  sqlguard::set_log_hook([inst = o.instance](sqlguard::LogLevel level, std::string_view msg) {
    if (level >= sqlguard::LogLevel::kWarning) std::cerr << "order-service " << inst << ": sqlguard: " << msg << std::endl;
  });
  {
    sigset_t set;  // blocked in every thread; the sigwait thread below takes them
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }
  try {
    Service svc(o);
    httplib::Server srv, admin;
    srv.new_task_queue = [n = o.threads] { return new httplib::ThreadPool(static_cast<std::size_t>(n)); };
    svc.routes(srv);
    // Two workers: probes are short, and this listener is for the cluster's
    // health checker and Prometheus, not for clients.
    admin.new_task_queue = [] { return new httplib::ThreadPool(2); };
    bound_connections(admin);
    admin.set_pre_routing_handler([](const httplib::Request& q, httplib::Response& r) {
      return refuse_chunked(q, r) ? httplib::Server::HandlerResponse::Handled
                                  : httplib::Server::HandlerResponse::Unhandled;
    });
    svc.probe_routes(admin);
    // SIGTERM / SIGINT stop the servers from a thread of its own (sigwait),
    // never from a signal handler.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    std::thread([set, &srv, &admin]() mutable {
      int sig = 0;
      sigwait(&set, &sig);
      admin.stop();
      srv.stop();
    }).detach();
    if (!srv.bind_to_port(host.c_str(), port)) {
      std::cerr << "order-service: cannot listen on " << o.listen << std::endl;
      return 1;
    }
    std::thread admin_thread;
    if (!o.admin_listen.empty()) {
      if (!admin.bind_to_port(admin_host.c_str(), admin_port)) {
        std::cerr << "order-service: cannot listen on " << o.admin_listen << std::endl;
        return 1;
      }
      admin_thread = std::thread([&admin] { admin.listen_after_bind(); });
    }
    std::cerr << "order-service " << o.instance << ": listening on " << o.listen
              << (o.admin_listen.empty() ? "" : ", probes also on " + o.admin_listen) << ", database "
              << sqlguard::mask_uri(o.db) << std::endl;
    srv.listen_after_bind();
    admin.stop();  // the public listener stopped: so does the admin one
    if (admin_thread.joinable()) admin_thread.join();
  } catch (const std::exception& e) {
    std::cerr << "order-service: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
