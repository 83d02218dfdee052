// sqlguard bench --redis HOST:PORT: the Redis lease users would replace —
// SET key token NX PX ttl to acquire, the Lua check-and-delete to release
// (the single-instance pattern from the Redis docs). A busy acquire is
// retried after a 1-5 ms nap until its timeout, as the raw baseline's: plain
// Redis has no wake-up on release.
// Part of the comparators module (bench_comparators.h).
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "bench_comparators.h"
#include "sqlguard/backoff.h"
#include "sqlguard/errors.h"

namespace sqlguard::bench {

namespace {
using std::chrono::milliseconds;

constexpr const char* kRelease =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, FreeReply>;

struct Address {
  std::string host;
  int port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

Address parse(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  int port = 0;
  try {
    port = colon == std::string::npos ? 0 : std::stoi(host_port.substr(colon + 1));
  } catch (const std::exception&) {
    port = 0;
  }
  if (port < 1 || port > 65535)
    throw Error(ErrorCode::kInvalidArgument, "bench: --redis wants HOST:PORT, got '" + host_port + "'");
  return {host_port.substr(0, colon), port};
}

std::shared_ptr<redisContext> connect(const Address& a) {
  std::shared_ptr<redisContext> c(redisConnect(a.host.c_str(), a.port), [](redisContext* p) {
    if (p) redisFree(p);
  });
  if (!c || c->err)
    throw Error(ErrorCode::kConnectionLost, "redis " + a.text() + ": " + (c ? c->errstr : "cannot allocate context"));
  return c;
}

// A command's reply; throws when the connection failed or Redis answered an error.
Reply command(redisContext* c, const char* what, redisReply* r) {
  Reply out(r);
  if (!r) throw Error(ErrorCode::kConnectionLost, std::string("redis ") + what + ": " + c->errstr);
  if (r->type == REDIS_REPLY_ERROR) throw Error(ErrorCode::kInternal, std::string("redis ") + what + ": " + r->str);
  return out;
}

std::string config_get(redisContext* c, const char* name) {
  auto r = command(c, "CONFIG GET", static_cast<redisReply*>(redisCommand(c, "CONFIG GET %s", name)));
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return "?";
  return std::string(r->element[1]->str, r->element[1]->len);
}

Durability durability(redisContext* c) {
  const std::string aof = config_get(c, "appendonly"), fsync = config_get(c, "appendfsync");
  const std::string head = "Redis appendonly " + aof + ", appendfsync " + fsync + ": ";
  if (aof == "yes" && fsync == "always") return {head + "2 fsyncs per cycle (SET, the Lua DEL)", 2};
  return {head + "no fsync per write (not durable)", 0};
}

class RedisContender final : public Contender {
 public:
  RedisContender(const Address& a, std::string key, std::string token, std::string sha)
      : c_(connect(a)), key_(std::move(key)), token_(std::move(token)), sha_(std::move(sha)) {}
  bool acquire(milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto r = command(c_.get(), "SET NX",
                       static_cast<redisReply*>(redisCommand(c_.get(), "SET %s %s NX PX %d", key_.c_str(),
                                                             token_.c_str(), static_cast<int>(kTtlMs))));
      if (r->type != REDIS_REPLY_NIL) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(jittered(milliseconds(5), milliseconds(1)));
    }
  }
  void release() override {
    auto r = command(c_.get(), "release",
                     static_cast<redisReply*>(redisCommand(c_.get(), "EVALSHA %s 1 %s %s", sha_.c_str(), key_.c_str(),
                                                           token_.c_str())));
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
      throw Error(ErrorCode::kLeaseLost, "redis: release did not delete the key");
  }
  void ping() override { command(c_.get(), "PING", static_cast<redisReply*>(redisCommand(c_.get(), "PING"))); }

 private:
  std::shared_ptr<redisContext> c_;
  std::string key_, token_, sha_;
};
}  // namespace

Comparator module_redis_comparator(const std::string& host_port) {
  const Address a = parse(host_port);
  auto c = connect(a);
  auto loaded = command(c.get(), "SCRIPT LOAD", static_cast<redisReply*>(redisCommand(c.get(), "SCRIPT LOAD %s", kRelease)));
  if (loaded->type != REDIS_REPLY_STRING) throw Error(ErrorCode::kInternal, "redis: SCRIPT LOAD returned no digest");
  std::string sha(loaded->str, loaded->len);
  Comparator out;
  out.name = "redis";
  out.durability = durability(c.get());
  out.round_trips = 2;
  out.make = [a, sha](const std::string& name, int client) -> std::unique_ptr<Contender> {
    return std::make_unique<RedisContender>(a, "sqlguard-bench:" + name,
                                            "token-" + std::to_string(client) + "-" + std::to_string(::getpid()), sha);
  };
  return out;
}

}  // namespace sqlguard::bench
