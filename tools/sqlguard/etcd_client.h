// A minimal etcd v3 client over its JSON gateway (etcd 3.4: POST /v3/...,
// bytes fields base64), enough for the bench's etcd comparator: leases and
// the lock service (v3lockpb Lock/Unlock, the service `etcdctl lock` uses).
// One HTTP/1.1 keep-alive connection per client; not thread-safe (one per
// client thread). The sqlguard_etcd_client library: the comparators module
// (bench_comparators.h) and the etcd tests link it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace httplib {
class Client;
}

namespace sqlguard::bench {

// Standard base64 (RFC 4648, with padding), as the gateway's bytes fields.
std::string base64_encode(std::string_view bytes);

class EtcdClient {
 public:
  // `endpoint` is HOST:PORT (throws Error(kInvalidArgument) otherwise).
  // Connects on the first call. Every call throws Error(kConnectionLost)
  // naming the endpoint when etcd cannot be reached or the connection
  // breaks, and Error(kInternal) with etcd's own message for an error answer.
  explicit EtcdClient(const std::string& endpoint);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  const std::string& endpoint() const noexcept { return endpoint_; }
  // GET /version: the server's version, e.g. "3.4.23".
  std::string server_version();
  // A new lease of `ttl`; returns its id.
  std::int64_t grant_lease(std::chrono::seconds ttl);
  // Revokes the lease: every key attached to it (a held or queued lock) goes.
  void revoke_lease(std::int64_t lease);
  // Waits up to `timeout` for lock `name`, owned under `lease`. Returns the
  // key that holds it (base64, as the gateway gives it: unlock() takes it as
  // is), or nullopt when the wait timed out. After a timeout the lock may
  // still be granted to the abandoned request: revoke the lease.
  std::optional<std::string> lock(std::string_view name, std::int64_t lease, std::chrono::milliseconds timeout);
  // Releases the lock held by `key` (from lock()).
  void unlock(const std::string& key);
  // A serializable (local, no consensus round) read of one key: the cheapest
  // round trip to the server.
  void ping();

 private:
  // POSTs `body` to `path` and returns the parsed answer; nullopt when no
  // answer came within `timeout` (the connection is then dropped).
  std::optional<nlohmann::json> post(const char* path, const nlohmann::json& body, std::chrono::milliseconds timeout);
  // post() of a request etcd answers at once: no answer is a broken connection.
  nlohmann::json call(const char* path, const nlohmann::json& body);
  [[noreturn]] void fail_connection(const char* path, const std::string& why);
  // Whether etcd answers GET /version now.
  bool answers();

  std::string endpoint_, host_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace sqlguard::bench
