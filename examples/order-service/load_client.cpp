// order-load: the scripted client of the reference service, and its checker.
//
// Fires --orders POST /orders over --keys idempotency keys (keys are shared
// by two clients: the scope keeps them apart) at every --target in turn,
// with duplicates, client time-outs and retries; then (with --db) checks the
// database: stock never oversold and equal to seed - sum of orders, exactly
// one order per (client, key), every replay byte-identical, and (with
// --expect-events) every outbox event published and applied exactly once.
// Prints one JSON report; exits 0 only when every check holds.
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "../common/app_sql.h"
#include "sqlguard/connection.h"
#include "sqlguard/idempotency.h"

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

struct KeyState {
  std::mutex mu;
  std::string first_body;  // first 201 body
  int first_status = 0;    // 201, or 409/404 for a stored refusal (out of stock)
  int answers = 0, replayed = 0, mismatched_bodies = 0;
};

std::string target_host(const std::string& t, int* port) {
  auto p = t.rfind(':');
  *port = std::atoi(t.c_str() + p + 1);
  auto h = t.substr(0, p);
  if (h.rfind("http://", 0) == 0) h = h.substr(7);
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> targets;
  int orders = 2000, keys = 500, concurrency = 16, timeout_ms = 2000, seed_stock = -1, expect_events_s = 0;
  double short_timeout_share = 0.1;
  int pause_ms = 0;
  std::string db;
  CLI::App app{"order-load: scripted client and checker for order-service"};
  app.add_option("--target", targets, "service HOST:PORT (repeatable)")->required();
  app.add_option("--orders", orders, "POST /orders requests to send (default 2000)");
  app.add_option("--keys", keys, "distinct idempotency keys (default 500)");
  app.add_option("--concurrency", concurrency, "client threads (default 16)");
  app.add_option("--timeout-ms", timeout_ms, "normal client read timeout (default 2000)");
  app.add_option("--short-timeout-share", short_timeout_share, "share of first attempts with a 1 ms client timeout");
  app.add_option("--pause-ms", pause_ms, "pause of each client thread between orders (default 0)");
  app.add_option("--db", db, "database URI for the checks (none: HTTP checks only)");
  app.add_option("--seed-stock", seed_stock, "stock each sku started with (for the stock check)");
  app.add_option("--expect-events", expect_events_s, "wait up to N s for every outbox event to be applied once");
  CLI11_PARSE(app, argc, argv);

  std::vector<KeyState> states(static_cast<std::size_t>(keys));
  std::atomic<int> next{0}, sent{0}, retries{0}, timeouts{0}, conn_errors{0}, in_progress{0}, created{0},
      replays{0}, refused{0}, unexpected{0}, gave_up{0}, mismatch_ok{0}, nokey_ok{0};
  std::mutex err_mu;
  std::vector<std::string> errors;
  auto fail = [&](const std::string& e) {
    std::lock_guard<std::mutex> lk(err_mu);
    if (errors.size() < 50) errors.push_back(e);
  };
  auto body_of = [](int k) {
    return json{{"sku", "sku-" + std::to_string(k % 10 + 1)}, {"qty", 1 + k % 3}}.dump();
  };
  auto client_of = [keys](int k) { return "load-client-" + std::to_string(k < keys / 2 ? 0 : 1); };
  auto key_of = [keys](int k) { return "key-" + std::to_string(k % (keys / 2)); };  // shared by the two clients

  auto worker = [&](int tid) {
    std::mt19937 rng(static_cast<unsigned>(tid * 7919 + 1));
    for (;;) {
      int i = next++;
      if (i >= orders) return;
      int k = (i < keys) ? i : static_cast<int>(rng() % static_cast<unsigned>(keys));  // every key, then duplicates
      std::string body = body_of(k);
      bool done = false;
      for (int attempt = 1; attempt <= 60 && !done; ++attempt) {
        int port = 0;
        auto host = target_host(targets[(static_cast<std::size_t>(i) + static_cast<std::size_t>(attempt)) % targets.size()], &port);
        httplib::Client cli(host, port);
        cli.set_connection_timeout(1, 0);
        bool short_to = attempt == 1 && std::uniform_real_distribution<double>(0, 1)(rng) < short_timeout_share;
        if (short_to) cli.set_read_timeout(0, 1000);  // 1 ms: the client gives up, the server carries on
        else cli.set_read_timeout(timeout_ms / 1000, (timeout_ms % 1000) * 1000);
        httplib::Headers h{{"Idempotency-Key", key_of(k)}, {"X-Client-Id", client_of(k)}};
        ++sent;
        auto res = cli.Post("/orders", h, body, "application/json");
        if (!res) {
          (res.error() == httplib::Error::Read ? timeouts : conn_errors)++;
          ++retries;
          std::this_thread::sleep_for(std::chrono::milliseconds(5 * attempt));
          continue;
        }
        json j = json::parse(res->body, nullptr, false);
        std::string err = (!j.is_discarded() && j.is_object()) ? j.value("error", "") : "";
        if (res->status == 409 && err == "request_in_progress") {
          ++in_progress;
          ++retries;
          std::this_thread::sleep_for(std::chrono::milliseconds(10 * attempt));
          continue;
        }
        if (res->status == 503 || res->status == 500) {
          ++retries;
          std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
          continue;
        }
        if (res->status == 201 || (res->status == 409 && err == "out_of_stock")) {
          auto& st = states[static_cast<std::size_t>(k)];
          std::lock_guard<std::mutex> lk(st.mu);
          if (res->status == 201) ++created;
          else ++refused;
          if (res->get_header_value("Idempotent-Replayed") == "true") {
            ++replays;
            ++st.replayed;
          }
          if (st.answers++ == 0) {
            st.first_body = res->body;
            st.first_status = res->status;
          } else if (st.first_body != res->body || st.first_status != res->status) {
            ++st.mismatched_bodies;
            fail("key " + std::to_string(k) + ": answer differs: '" + st.first_body + "' then '" + res->body + "'");
          }
          done = true;
          continue;
        }
        ++unexpected;
        fail("key " + std::to_string(k) + ": unexpected " + std::to_string(res->status) + " " + res->body);
        done = true;
      }
      if (!done) {
        ++gave_up;
        fail("key " + std::to_string(k) + ": no answer after 60 attempts");
      }
      if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < concurrency; ++t) ts.emplace_back(worker, t);
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Contract probes, on whichever target still answers: a different body
  // under a used key is 422; no key is 400.
  auto probe = [&](const httplib::Headers& h, const std::string& body) -> int {
    for (const auto& t : targets) {
      int port = 0;
      auto host = target_host(t, &port);
      httplib::Client cli(host, port);
      cli.set_connection_timeout(1, 0);
      cli.set_read_timeout(10, 0);
      if (auto res = cli.Post("/orders", h, body, "application/json")) return res->status;
    }
    return 0;
  };
  for (int k = 0; k < 5; ++k) {
    int st = probe({{"Idempotency-Key", key_of(k)}, {"X-Client-Id", client_of(k)}},
                   json{{"sku", "sku-1"}, {"qty", 99}}.dump());
    if (st == 422) ++mismatch_ok;
    else fail("different body under a used key: expected 422, got " + std::to_string(st));
  }
  if (int st = probe({}, body_of(0)); st == 400) ++nokey_ok;
  else fail("no Idempotency-Key: expected 400, got " + std::to_string(st));

  json report{{"orders_sent", orders},
              {"http_requests", sent.load()},
              {"seconds", secs},
              {"created_answers", created.load()},
              {"out_of_stock_answers", refused.load()},
              {"replayed_answers", replays.load()},
              {"retries", retries.load()},
              {"client_timeouts", timeouts.load()},
              {"connection_errors", conn_errors.load()},
              {"in_progress_409", in_progress.load()},
              {"unexpected", unexpected.load()},
              {"gave_up", gave_up.load()},
              {"mismatch_422", mismatch_ok.load()},
              {"no_key_400", nokey_ok.load()}};
  int keys_created = 0;
  for (auto& s : states)
    if (s.first_status == 201) ++keys_created;
  report["keys_with_order"] = keys_created;

  if (!db.empty()) {
    auto conn = sqlguard::make_connection(db);
    auto one = [&](const char* sql, const sqlguard::Params& p = {}) { return conn->execute(sql, p).rows.at(0)[0].as_int(); };
    // The service scopes keys by a hash of the client identity (order-service, client_scope()).
    auto scope_of = [](const std::string& c) { return "orders:" + sqlguard::request_fingerprint("client-id:" + c).substr(0, 32); };
    auto n_orders = one(app_sql::kCheckOrdersOf, {scope_of("load-client-0"), scope_of("load-client-1")});
    auto dup_keys = one(app_sql::kCheckDuplicateKeys);
    report["orders_in_db"] = n_orders;
    if (n_orders != keys_created)
      fail("orders in the database: " + std::to_string(n_orders) + ", keys answered 201: " + std::to_string(keys_created));
    if (dup_keys != 0) fail(std::to_string(dup_keys) + " (client, key) pairs have more than one order");
    if (seed_stock >= 0) {
      auto rows = conn->execute(app_sql::kCheckStock);
      std::int64_t total_left = 0;
      for (const auto& r : rows.rows) {
        auto qty = r[1].as_int(), sold = r[2].as_int();
        total_left += qty;
        if (qty < 0) fail(r[0].as_string() + " oversold: qty " + std::to_string(qty));
        if (qty != seed_stock - sold)
          fail(r[0].as_string() + ": qty " + std::to_string(qty) + " != seed " + std::to_string(seed_stock) +
               " - sold " + std::to_string(sold));
      }
      report["stock_left"] = total_left;
    }
    if (expect_events_s > 0) {
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(expect_events_s);
      std::int64_t outbox = 0, pending = 0, applied = 0, distinct = 0;
      for (;;) {
        outbox = one(app_sql::kCheckOutbox);
        pending = one(app_sql::kOutboxPending);
        applied = one(app_sql::kCheckApplied);
        distinct = one(app_sql::kCheckAppliedDistinct);
        if ((pending == 0 && distinct >= outbox) || std::chrono::steady_clock::now() > until) break;
        std::this_thread::sleep_for(200ms);
      }
      auto orphans = one(app_sql::kCheckOrphans);
      auto terms = conn->execute(app_sql::kCheckTerms);
      bool increasing = true;
      for (std::size_t i = 1; i < terms.rows.size(); ++i)
        if (terms.rows[i][0].as_int() <= terms.rows[i - 1][0].as_int()) increasing = false;
      auto consumers = conn->execute(app_sql::kCheckAppliedBy);
      json per;
      for (const auto& r : consumers.rows) per[r[0].as_string()] = r[1].as_int();
      report["events"] = {{"outbox", outbox}, {"unpublished", pending}, {"applied", applied},
                          {"applied_distinct", distinct}, {"relay_terms", terms.rows.size()},
                          {"applied_by", per}};
      if (pending != 0) fail(std::to_string(pending) + " outbox rows never published");
      if (distinct != outbox) fail("applied " + std::to_string(distinct) + " distinct events of " + std::to_string(outbox));
      if (applied != distinct) fail(std::to_string(applied - distinct) + " events applied more than once");
      if (orphans != 0) fail(std::to_string(orphans) + " applied events have no outbox row");
      if (!increasing) fail("relay terms do not increase in election order");
      if (terms.rows.empty()) fail("no relay leader was ever elected");
    }
  }
  report["errors"] = errors;
  report["ok"] = errors.empty();
  std::cout << report.dump() << std::endl;
  return errors.empty() ? 0 : 1;
}
