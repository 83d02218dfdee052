#include "etcd_client.h"

#include <httplib.h>

#include "sqlguard/errors.h"

namespace sqlguard::bench {

using std::chrono::milliseconds;

namespace {
// Requests other than a lock's wait answer at once; this bounds them.
constexpr milliseconds kCallTimeout{5000};

// The gateway writes int64 fields as JSON strings ("ID": "7587...").
std::int64_t int64_field(const nlohmann::json& j, const char* name) {
  if (!j.contains(name)) throw Error(ErrorCode::kInternal, std::string("etcd: answer without '") + name + "': " + j.dump());
  const auto& v = j[name];
  return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<std::int64_t>();
}
}  // namespace

std::string base64_encode(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

EtcdClient::EtcdClient(const std::string& endpoint) : endpoint_(endpoint) {
  const auto colon = endpoint.rfind(':');
  try {
    std::size_t used = 0;
    port_ = colon == std::string::npos ? 0 : std::stoi(endpoint.substr(colon + 1), &used);
    if (colon != std::string::npos && used != endpoint.size() - colon - 1) port_ = 0;
  } catch (const std::exception&) {
    port_ = 0;
  }
  if (colon == 0 || port_ < 1 || port_ > 65535)
    throw Error(ErrorCode::kInvalidArgument, "etcd: want HOST:PORT, got '" + endpoint + "'");
  host_ = endpoint.substr(0, colon);
}

EtcdClient::~EtcdClient() = default;

void EtcdClient::fail_connection(const char* path, const std::string& why) {
  http_.reset();  // the next call connects afresh
  throw Error(ErrorCode::kConnectionLost, "etcd " + endpoint_ + " " + path + ": " + why);
}

std::optional<nlohmann::json> EtcdClient::post(const char* path, const nlohmann::json& body, milliseconds timeout) {
  if (!http_) {
    http_ = std::make_unique<httplib::Client>(host_, port_);
    http_->set_keep_alive(true);
    http_->set_tcp_nodelay(true);  // small requests: never wait for Nagle
    http_->set_connection_timeout(std::chrono::seconds(2));
  }
  http_->set_read_timeout(timeout);
  const auto start = std::chrono::steady_clock::now();
  auto res = http_->Post(path, body.dump(), "application/json");
  if (!res) {
    const bool read_failed = res.error() == httplib::Error::Read;
    http_.reset();
    // A read that ran into the deadline is a timeout.
    if (read_failed && std::chrono::steady_clock::now() - start >= timeout) return std::nullopt;
    // etcd's gateway sends an error answer chunked with trailers, which
    // cpp-httplib 0.11 cannot read: if etcd still answers, that was it.
    if (read_failed && answers())
      throw Error(ErrorCode::kInternal, "etcd " + endpoint_ + " " + path +
                                            ": etcd refused the request (its error answer, chunked with trailers, "
                                            "is unreadable to cpp-httplib 0.11), e.g. an unknown or expired lease");
    fail_connection(path, httplib::to_string(res.error()));
  }
  nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != 200 || j.is_discarded()) {
    const std::string msg = j.is_object() && j.contains("error") ? j["error"].get<std::string>() : res->body;
    throw Error(ErrorCode::kInternal,
                "etcd " + endpoint_ + " " + path + ": HTTP " + std::to_string(res->status) + ": " + msg);
  }
  return j;
}

nlohmann::json EtcdClient::call(const char* path, const nlohmann::json& body) {
  auto j = post(path, body, kCallTimeout);
  if (!j) fail_connection(path, "no answer within " + std::to_string(kCallTimeout.count()) + " ms");
  return *std::move(j);
}

bool EtcdClient::answers() {
  try {
    server_version();
    return true;
  } catch (const Error&) {
    return false;  // the question was only whether it answers
  }
}

std::string EtcdClient::server_version() {
  httplib::Client http(host_, port_);
  http.set_connection_timeout(std::chrono::seconds(2));
  http.set_read_timeout(kCallTimeout);
  auto res = http.Get("/version");
  if (!res) fail_connection("/version", httplib::to_string(res.error()));
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != 200 || !j.is_object() || !j.contains("etcdserver"))
    throw Error(ErrorCode::kInternal, "etcd " + endpoint_ + " /version: not etcd's answer: " + res->body);
  return j["etcdserver"].get<std::string>();
}

std::int64_t EtcdClient::grant_lease(std::chrono::seconds ttl) {
  return int64_field(call("/v3/lease/grant", {{"TTL", ttl.count()}}), "ID");
}

void EtcdClient::revoke_lease(std::int64_t lease) { call("/v3/lease/revoke", {{"ID", std::to_string(lease)}}); }

std::optional<std::string> EtcdClient::lock(std::string_view name, std::int64_t lease, milliseconds timeout) {
  auto j = post("/v3/lock/lock", {{"name", base64_encode(name)}, {"lease", std::to_string(lease)}}, timeout);
  if (!j) return std::nullopt;
  if (!j->contains("key")) throw Error(ErrorCode::kInternal, "etcd " + endpoint_ + " /v3/lock/lock: no key in " + j->dump());
  return (*j)["key"].get<std::string>();
}

void EtcdClient::unlock(const std::string& key) { call("/v3/lock/unlock", {{"key", key}}); }

void EtcdClient::ping() { call("/v3/kv/range", {{"key", base64_encode("sqlguard-bench-ping")}, {"serializable", true}}); }

}  // namespace sqlguard::bench
