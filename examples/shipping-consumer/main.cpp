// shipping-consumer: a JetStream pull consumer (durable "shipping", explicit
// acks, short ack wait) that applies each order event through sqlguard's
// Inbox in the same transaction as its effect. Killed mid-message, the
// message is redelivered after the ack wait; the Inbox row committed with the
// effect (or not at all) makes the effect happen exactly once.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "../common/app_sql.h"
#include "../common/jetstream.h"
#include "sqlguard/connection.h"
#include "sqlguard/inbox.h"
#include "sqlguard/migrate.h"

using json = nlohmann::json;

namespace {
std::atomic<bool> g_stop{false};
}

int main(int argc, char** argv) {
  std::string db = "sqlite://order-service.db", nats_url = "nats://127.0.0.1:4222", name = "shipping-1";
  int ack_wait_ms = 2000, batch = 16, slow_ms = 0;
  CLI::App app{"shipping-consumer: applies order events exactly once"};
  app.add_option("--db", db, "database URI");
  app.add_option("--nats", nats_url, "NATS URL");
  app.add_option("--name", name, "this consumer instance (recorded with each applied event)");
  app.add_option("--ack-wait-ms", ack_wait_ms, "JetStream ack wait (default 2000)")->check(CLI::Range(100, 600000));
  app.add_option("--batch", batch, "messages per fetch (default 16)")->check(CLI::Range(1, 1000));
  app.add_option("--slow-ms", slow_ms, "pause inside each message's transaction (tests: widen the kill window)")
      ->check(CLI::Range(0, 60000));
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGINT, [](int) { g_stop = true; });
  try {
    auto conn = sqlguard::make_connection(db);
    sqlguard::migrate(*conn);
    for (const char* ddl : app_sql::kSchema) conn->execute_once(ddl);
    sqlguard::Inbox inbox(*conn);
    example::JetStream js(nats_url);
    js.ensure_stream("ORDERS", "orders.>");
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = static_cast<int64_t>(ack_wait_ms) * 1000 * 1000;  // ns
    so.Config.MaxDeliver = -1;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    natsSubscription* sub = nullptr;
    example::JetStream::check(js_PullSubscribe(&sub, js.context(), "orders.>", "shipping", nullptr, &so, &jerr),
                              "subscribing durable 'shipping'");
    std::cerr << "shipping-consumer " << name << ": consuming orders.> on " << sqlguard::mask_uri(db) << std::endl;
    std::uint64_t applied = 0, duplicates = 0;
    while (!g_stop) {
      natsMsgList list{};
      natsStatus s = natsSubscription_Fetch(&list, sub, batch, 500, &jerr);
      if (s == NATS_TIMEOUT) continue;
      if (s != NATS_OK) {
        std::cerr << "shipping-consumer " << name << ": fetch: " << natsStatus_GetText(s) << std::endl;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      for (int i = 0; i < list.Count; ++i) {
        natsMsg* m = list.Msgs[i];
        const char* mid = nullptr;
        std::string data(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m)));
        json ev = json::parse(data, nullptr, false);
        if (natsMsgHeader_Get(m, "Nats-Msg-Id", &mid) != NATS_OK || !mid || ev.is_discarded()) {
          std::cerr << "shipping-consumer " << name << ": malformed message, terminated" << std::endl;
          natsMsg_Term(m, nullptr);
          continue;
        }
        std::string msg_id = mid;
        try {
          auto r = inbox.process("shipping", msg_id, [&](sqlguard::Transaction& tx) {
            tx.execute(app_sql::kAppliedInsert,
                       {msg_id, ev.value("order_id", std::string()), ev.value("event", std::string()), name});
            if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
          });
          (r.outcome == sqlguard::InboxOutcome::kProcessed ? applied : duplicates)++;
        } catch (const sqlguard::Error& e) {
          // Not acked: JetStream redelivers it after the ack wait.
          std::cerr << "shipping-consumer " << name << ": " << msg_id << " not applied: " << e.what() << std::endl;
          if (e.code() == sqlguard::ErrorCode::kConnectionLost || e.code() == sqlguard::ErrorCode::kCommitInDoubt) {
            try {
              conn->reconnect();
            } catch (const std::exception& re) {
              std::cerr << "shipping-consumer " << name << ": reconnect failed: " << re.what() << std::endl;
            }
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        // Acked only after the effect committed; a crash before this line
        // means redelivery, and the Inbox row turns it into a duplicate.
        natsMsg_AckSync(m, nullptr, &jerr);
      }
      natsMsgList_Destroy(&list);
    }
    natsSubscription_Destroy(sub);
    std::cerr << "shipping-consumer " << name << ": stopped; applied " << applied << ", duplicates " << duplicates
              << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "shipping-consumer " << name << ": " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
