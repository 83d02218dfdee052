// shipping-consumer: a JetStream pull consumer (durable "shipping", explicit
// acks, short ack wait) that applies each order event through sqlguard's
// Inbox in the same transaction as its effect. Killed mid-message, the
// message is redelivered after the ack wait; the Inbox row committed with the
// effect (or not at all) makes the effect happen exactly once.
//
// A message that can never be applied (not JSON, wrong field types, a value
// the database layer refuses, or failing --max-tries deliveries) is parked:
// published as it came, with the reason in headers, on deadletter.shipping
// (stream SHIPPING_DEADLETTER, outside ORDERS' orders.>), then terminated so
// JetStream never delivers it again. The consumer goes on with the next one.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "../common/app_sql.h"
#include "../common/jetstream.h"
#include "sqlguard/connection.h"
#include "sqlguard/inbox.h"
#include "sqlguard/metrics.h"
#include "sqlguard/migrate.h"

using json = nlohmann::json;

namespace {

std::atomic<bool> g_stop{false};

constexpr const char* kDeadLetterStream = "SHIPPING_DEADLETTER";
constexpr const char* kDeadLetterSubject = "deadletter.shipping";

struct Options {
  std::string db = "sqlite://order-service.db", nats_url = "nats://127.0.0.1:4222", name = "shipping-1";
  int ack_wait_ms = 2000, batch = 16, slow_ms = 0, max_tries = 5;
};

struct Event {
  std::string order_id, event;
};

// The event a message carries, or std::nullopt with `why`. Types and sizes
// (the eg_applied columns) are checked here, so no message can make the
// consumer throw: a wrong type would otherwise be a json::type_error.
std::optional<Event> parse_event(const std::string& data, std::string& why) {
  const json ev = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (ev.is_discarded() || !ev.is_object()) {
    why = "not a JSON object";
    return std::nullopt;
  }
  auto text = [&](const char* field, std::size_t max_bytes) -> std::optional<std::string> {
    auto it = ev.find(field);
    if (it == ev.end() || !it->is_string()) return std::nullopt;
    const auto& s = it->get_ref<const std::string&>();
    if (s.empty() || s.size() > max_bytes) return std::nullopt;
    return s;
  };
  auto order_id = text("order_id", 64), event = text("event", 32);
  if (!order_id || !event) {
    why = "order_id (1..64 bytes) and event (1..32 bytes) must be strings";
    return std::nullopt;
  }
  return Event{*order_id, *event};
}

std::string payload_of(natsMsg* m) {
  const char* data = natsMsg_GetData(m);
  return data ? std::string(data, static_cast<std::size_t>(natsMsg_GetDataLength(m))) : std::string();
}

// JetStream's delivery count (1 on the first delivery) and stream sequence.
struct Delivery {
  std::uint64_t count = 1, stream_seq = 0;
};

Delivery delivery_of(natsMsg* m) {
  Delivery d;
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, m) != NATS_OK) return d;
  d.count = meta->NumDelivered;
  d.stream_seq = meta->Sequence.Stream;
  jsMsgMetaData_Destroy(meta);
  return d;
}

// Whether a message that failed is parked now (else it is left unacked and
// redelivered after the ack wait). A value the library refuses stays
// refused. An outage (retryable codes, commit in doubt) never parks: it would
// drain the stream into the dead-letter subject while the database is down.
// Anything else is parked once it has been delivered `max_tries` times.
bool park_now(std::optional<sqlguard::ErrorCode> code, const Delivery& d, int max_tries) {
  if (code == sqlguard::ErrorCode::kInvalidArgument) return true;
  if (code && (sqlguard::is_retryable(*code) || *code == sqlguard::ErrorCode::kCommitInDoubt)) return false;
  return d.count >= static_cast<std::uint64_t>(max_tries);
}

class Consumer {
 public:
  Consumer(const Options& o, sqlguard::Connection& conn, example::JetStream& js)
      : opt_(o), conn_(conn), inbox_(conn), js_(js) {
    js_.ensure_stream(kDeadLetterStream, kDeadLetterSubject);
  }

  // Applies, parks or leaves `m` for redelivery; never throws for what the
  // message holds.
  void handle(natsMsg* m) {
    const Delivery d = delivery_of(m);
    const char* mid = nullptr;
    if (natsMsgHeader_Get(m, "Nats-Msg-Id", &mid) != NATS_OK || !mid) return park(m, d, "no Nats-Msg-Id header");
    const std::string msg_id = mid;
    std::string why;
    auto ev = parse_event(payload_of(m), why);
    if (!ev) return park(m, d, why);
    std::optional<sqlguard::ErrorCode> code;
    try {
      auto r = inbox_.process("shipping", msg_id, [&](sqlguard::Transaction& tx) {
        tx.execute(app_sql::kAppliedInsert, {msg_id, ev->order_id, ev->event, opt_.name});
        if (opt_.slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opt_.slow_ms));
      });
      (r.outcome == sqlguard::InboxOutcome::kProcessed ? applied_ : duplicates_)++;
      // Acked only after the effect committed; a crash before this line
      // means redelivery, and the Inbox row turns it into a duplicate.
      natsMsg_AckSync(m, nullptr, nullptr);
      return;
    } catch (const sqlguard::Error& e) {
      why = e.what();
      code = e.code();
      recover(e.code());
    } catch (const std::exception& e) {
      why = e.what();
    }
    std::cerr << "shipping-consumer " << opt_.name << ": " << msg_id << " not applied (delivery " << d.count
              << "): " << why << std::endl;
    if (park_now(code, d, opt_.max_tries)) return park(m, d, why);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // not acked: redelivered after the ack wait
  }

  std::string summary() const {
    return "applied " + std::to_string(applied_) + ", duplicates " + std::to_string(duplicates_) +
           ", dead-lettered " + std::to_string(dead_.value());
  }

 private:
  void recover(sqlguard::ErrorCode code) {
    if (code != sqlguard::ErrorCode::kConnectionLost && code != sqlguard::ErrorCode::kCommitInDoubt) return;
    try {
      conn_.reconnect();
    } catch (const std::exception& re) {
      std::cerr << "shipping-consumer " << opt_.name << ": reconnect failed: " << re.what() << std::endl;
    }
  }

  // Publishes `m` as it came to the dead-letter subject, then terminates it.
  // The dead-letter id is the stream sequence, so parking a message again
  // (the Term was lost) is dropped as a duplicate. If publishing fails the
  // message stays unacked and is parked on a later delivery.
  void park(natsMsg* m, const Delivery& d, const std::string& why) {
    const char* subject = natsMsg_GetSubject(m);
    example::JetStream::Headers headers = {{"Dead-Letter-Reason", why},
                                           {"Dead-Letter-Subject", subject ? subject : ""},
                                           {"Dead-Letter-Deliveries", std::to_string(d.count)}};
    const char* mid = nullptr;
    if (natsMsgHeader_Get(m, "Nats-Msg-Id", &mid) == NATS_OK && mid) headers.emplace_back("Dead-Letter-Msg-Id", mid);
    try {
      // No stream sequence (no metadata): no de-duplication id either.
      js_.publish(kDeadLetterSubject, payload_of(m), d.stream_seq ? "shipping-" + std::to_string(d.stream_seq) : "",
                  headers);
    } catch (const std::exception& e) {
      std::cerr << "shipping-consumer " << opt_.name << ": parking stream message " << d.stream_seq
                << " failed: " << e.what() << std::endl;
      return;
    }
    natsMsg_Term(m, nullptr);
    dead_.inc();
    std::cerr << "shipping-consumer " << opt_.name << ": parked stream message " << d.stream_seq << " on "
              << kDeadLetterSubject << ": " << why << std::endl;
  }

  const Options& opt_;
  sqlguard::Connection& conn_;
  sqlguard::Inbox inbox_;
  example::JetStream& js_;
  sqlguard::metrics::Counter& dead_ = sqlguard::metrics::counter(
      "shipping_dead_lettered_total", "Messages parked on deadletter.shipping (never applied)");
  std::uint64_t applied_ = 0, duplicates_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"shipping-consumer: applies order events exactly once"};
  app.add_option("--db", o.db, "database URI");
  app.add_option("--nats", o.nats_url, "NATS URL");
  app.add_option("--name", o.name, "this consumer instance (recorded with each applied event)");
  app.add_option("--ack-wait-ms", o.ack_wait_ms, "JetStream ack wait (default 2000)")->check(CLI::Range(100, 600000));
  app.add_option("--batch", o.batch, "messages per fetch (default 16)")->check(CLI::Range(1, 1000));
  app.add_option("--slow-ms", o.slow_ms, "pause inside each message's transaction (tests: widen the kill window)")
      ->check(CLI::Range(0, 60000));
  app.add_option("--max-tries", o.max_tries,
                 "deliveries after which a failing message is dead-lettered (default 5; database outages "
                 "never dead-letter)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGINT, [](int) { g_stop = true; });
  try {
    auto conn = sqlguard::make_connection(o.db);
    sqlguard::migrate(*conn);
    for (const char* ddl : app_sql::kSchema) conn->execute_once(ddl);
    example::JetStream js(o.nats_url);
    js.ensure_stream("ORDERS", "orders.>");
    Consumer consumer(o, *conn, js);
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = static_cast<int64_t>(o.ack_wait_ms) * 1000 * 1000;  // ns
    so.Config.MaxDeliver = -1;  // the consumer parks messages itself (--max-tries), JetStream never drops one
    jsErrCode jerr = static_cast<jsErrCode>(0);
    natsSubscription* sub = nullptr;
    example::JetStream::check(js_PullSubscribe(&sub, js.context(), "orders.>", "shipping", nullptr, &so, &jerr),
                              "subscribing durable 'shipping'");
    std::cerr << "shipping-consumer " << o.name << ": consuming orders.> on " << sqlguard::mask_uri(o.db) << std::endl;
    while (!g_stop) {
      natsMsgList list{};
      natsStatus s = natsSubscription_Fetch(&list, sub, o.batch, 500, &jerr);
      if (s == NATS_TIMEOUT) continue;
      if (s != NATS_OK) {
        std::cerr << "shipping-consumer " << o.name << ": fetch: " << natsStatus_GetText(s) << std::endl;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      for (int i = 0; i < list.Count; ++i) consumer.handle(list.Msgs[i]);
      natsMsgList_Destroy(&list);
    }
    natsSubscription_Destroy(sub);
    std::cerr << "shipping-consumer " << o.name << ": stopped; " << consumer.summary() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "shipping-consumer " << o.name << ": " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
