// sqlguard bench --redis HOST:PORT: the Redis lease users would replace —
// SET key token NX PX ttl to acquire, the Lua check-and-delete to release
// (the single-instance pattern from the Redis docs). A busy acquire is
// retried after a 1-5 ms nap until its timeout, as the raw baseline's: plain
// Redis has no wake-up on release.
// Part of the comparators module (bench_comparators.h).
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
// One connection whose commands come from many threads: a sender thread
// takes every command queued while the previous pipeline was out, writes
// them in one go and reads their replies in order (what a pipelining Redis
// client does; Redis with appendfsync always fsyncs once per such batch
// before it answers).
class Pipeline {
 public:
  explicit Pipeline(const Address& a) : c_(connect(a)), sender_([this] { loop(); }) {}
  ~Pipeline() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    sender_.join();
  }
  Reply call(const char* what, std::vector<std::string> argv) {
    Request r;
    r.what = what;
    r.argv = std::move(argv);
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back(&r);
    }
    cv_.notify_one();
    std::unique_lock<std::mutex> lk(mu_);
    r.cv.wait(lk, [&] { return r.done; });
    if (!r.error.empty()) throw Error(ErrorCode::kConnectionLost, r.error);
    return std::move(r.reply);
  }

 private:
  struct Request {
    const char* what = "";
    std::vector<std::string> argv;
    Reply reply;
    std::string error;
    bool done = false;
    std::condition_variable cv;
  };
  void loop() {
    for (;;) {
      std::deque<Request*> batch;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        batch.swap(queue_);
      }
      std::string failed;
      for (Request* r : batch) {
        std::vector<const char*> args;
        std::vector<std::size_t> lens;
        for (const auto& a : r->argv) {
          args.push_back(a.data());
          lens.push_back(a.size());
        }
        if (redisAppendCommandArgv(c_.get(), static_cast<int>(args.size()), args.data(), lens.data()) != REDIS_OK)
          failed = std::string("redis pipeline: ") + c_->errstr;
      }
      for (Request* r : batch) {
        void* reply = nullptr;
        if (failed.empty() && redisGetReply(c_.get(), &reply) != REDIS_OK)
          failed = std::string("redis pipeline: ") + c_->errstr;
        if (!failed.empty()) {
          r->error = failed;
        } else {
          r->reply.reset(static_cast<redisReply*>(reply));
          if (r->reply->type == REDIS_REPLY_ERROR) r->error = std::string("redis ") + r->what + ": " + r->reply->str;
        }
      }
      std::lock_guard<std::mutex> lk(mu_);
      for (Request* r : batch) {
        r->done = true;
        r->cv.notify_one();
      }
    }
  }
  std::shared_ptr<redisContext> c_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request*> queue_;
  bool stop_ = false;
  std::thread sender_;
};

class PipelinedContender final : public Contender {
 public:
  PipelinedContender(std::shared_ptr<Pipeline> p, std::string key, std::string token, std::string sha)
      : p_(std::move(p)), key_(std::move(key)), token_(std::move(token)), sha_(std::move(sha)) {}
  bool acquire(milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto r = p_->call("SET NX", {"SET", key_, token_, "NX", "PX", std::to_string(kTtlMs)});
      if (r->type != REDIS_REPLY_NIL) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(jittered(milliseconds(5), milliseconds(1)));
    }
  }
  void release() override {
    auto r = p_->call("release", {"EVALSHA", sha_, "1", key_, token_});
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
      throw Error(ErrorCode::kLeaseLost, "redis: release did not delete the key");
  }
  void ping() override { p_->call("PING", {"PING"}); }

 private:
  std::shared_ptr<Pipeline> p_;
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
  out.pipelined = [a, sha]() -> MakeContender {
    // Two connections, as the lock client's two work connections.
    auto pipes = std::make_shared<std::vector<std::shared_ptr<Pipeline>>>();
    for (int i = 0; i < 2; ++i) pipes->push_back(std::make_shared<Pipeline>(a));
    return [pipes, sha](const std::string& name, int client) -> std::unique_ptr<Contender> {
      return std::make_unique<PipelinedContender>((*pipes)[static_cast<std::size_t>(client) % pipes->size()],
                                                  "sqlguard-bench:" + name,
                                                  "token-" + std::to_string(client) + "-" + std::to_string(::getpid()),
                                                  sha);
    };
  };
  return out;
}

}  // namespace sqlguard::bench
