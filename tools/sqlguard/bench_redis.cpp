// sqlguard bench --redis HOST:PORT: the Redis lease users would replace —
// SET key token NX PX ttl to acquire, the Lua check-and-delete to release
// (the single-instance pattern from the Redis docs), same clients/durations.
#include "bench.h"
#include "sqlguard/errors.h"

#ifdef SQLGUARD_BENCH_REDIS
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <memory>
#include <string>
#endif

namespace sqlguard::bench {

#ifdef SQLGUARD_BENCH_REDIS
bool redis_compiled() { return true; }

namespace {
constexpr const char* kRelease =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

struct Reply {
  redisReply* r;
  ~Reply() {
    if (r) freeReplyObject(r);
  }
};

std::shared_ptr<redisContext> connect(const std::string& host, int port) {
  std::shared_ptr<redisContext> c(redisConnect(host.c_str(), port), [](redisContext* p) {
    if (p) redisFree(p);
  });
  if (!c || c->err)
    throw Error(ErrorCode::kConnectionLost,
                "redis " + host + ":" + std::to_string(port) + ": " + (c ? c->errstr : "cannot allocate context"));
  return c;
}
}  // namespace

std::vector<nlohmann::json> run_redis(const std::string& host_port, const std::vector<std::string>& ops,
                                      const std::vector<int>& clients, bool processes,
                                      std::chrono::milliseconds warmup, std::chrono::milliseconds duration) {
  auto colon = host_port.rfind(':');
  int port = 0;
  try {
    port = colon == std::string::npos ? 0 : std::stoi(host_port.substr(colon + 1));
  } catch (const std::exception&) {
    port = 0;
  }
  if (port < 1 || port > 65535)
    throw Error(ErrorCode::kInvalidArgument, "bench: --redis wants HOST:PORT, got '" + host_port + "'");
  const std::string host = host_port.substr(0, colon);
  std::string sha;
  {
    auto c = connect(host, port);
    Reply r{static_cast<redisReply*>(redisCommand(c.get(), "SCRIPT LOAD %s", kRelease))};
    if (!r.r || r.r->type != REDIS_REPLY_STRING) throw Error(ErrorCode::kInternal, "redis: SCRIPT LOAD failed");
    sha.assign(r.r->str, r.r->len);
  }
  std::vector<nlohmann::json> out;
  static int run = 0;
  ++run;
  for (const auto& op : ops) {
    for (int n : clients) {
      auto make = [&](int i) -> OpFn {
        auto c = connect(host, port);
        auto key = std::make_shared<std::string>("sqlguard-bench:" + std::to_string(run) + ":" + op + ":" +
                                                 std::to_string(n) + (op == "lease-hot" ? "" : ":" + std::to_string(i)));
        auto token = std::make_shared<std::string>("token-" + std::to_string(i) + "-" + std::to_string(::getpid()));
        return [c, key, token, sha] {
          Reply a{static_cast<redisReply*>(redisCommand(c.get(), "SET %s %s NX PX %d", key->c_str(), token->c_str(), 30000))};
          if (!a.r) throw Error(ErrorCode::kConnectionLost, std::string("redis: ") + c->errstr);
          if (a.r->type == REDIS_REPLY_NIL) return false;
          Reply d{static_cast<redisReply*>(
              redisCommand(c.get(), "EVALSHA %s 1 %s %s", sha.c_str(), key->c_str(), token->c_str()))};
          if (!d.r || d.r->type != REDIS_REPLY_INTEGER || d.r->integer != 1)
            throw Error(ErrorCode::kInternal, "redis: release did not delete the key");
          return true;
        };
      };
      Stats st = run_clients(n, processes, make, warmup, duration);
      nlohmann::json j = {{"dialect", "redis"}, {"op", op}, {"clients", n}, {"mode", processes ? "processes" : "threads"},
                          {"ops_per_s", r3(st.ops_per_s())},
                          {"p50_ms", st.pct_ms(0.5)}, {"p99_ms", st.pct_ms(0.99)}, {"ops", st.ops},
                          {"errors", st.errors}, {"raw_ops_per_s", nullptr}, {"overhead_ratio", nullptr},
                          {"duration_s", st.elapsed_s}, {"statements_per_op", 2}};
      if (op == "lease-hot") j["busy_attempts"] = st.misses;
      if (!st.first_error.empty()) j["first_error"] = st.first_error;
      out.push_back(j);
    }
  }
  return out;
}
#else
bool redis_compiled() { return false; }
std::vector<nlohmann::json> run_redis(const std::string&, const std::vector<std::string>&, const std::vector<int>&,
                                      bool, std::chrono::milliseconds, std::chrono::milliseconds) {
  throw Error(ErrorCode::kNotSupported, "bench: built without hiredis; --redis is unavailable");
}
#endif

}  // namespace sqlguard::bench
