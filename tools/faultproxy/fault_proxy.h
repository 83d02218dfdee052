// sqlguard::faultproxy — a fault-injecting TCP proxy for tests and `sqlguard
// chaos`: it listens on a loopback port, forwards every connection to one
// loopback target (a database server), and misbehaves on demand:
//
//   pass    forward as it comes
//   freeze  a silent partition: nothing is read, written, accepted or
//           closed; both sides keep their sockets open and hear nothing
//           (a server that closes meanwhile is noticed only after pass)
//   drop    close every connection now with a reset, and any new one at once
//   delay   forward each chunk `delay` ms after it arrived (order kept)
//
// Modes switch at run time from any thread (set_mode() returns once the
// proxy applied it), or, for the `sqlguard-faultproxy` binary, by lines on
// its stdin. Loopback only (IPv4 127.0.0.0/8 on both ends), bounded (max
// connections, bytes buffered per direction) and it stops by itself after
// `lifetime`. Not for production traffic: one thread, no TLS awareness
// (TLS passes through as bytes).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace sqlguard::faultproxy {

enum class Mode { kPass, kFreeze, kDrop, kDelay };
std::string_view to_string(Mode m) noexcept;

struct ProxyOptions {
  std::string target_host = "127.0.0.1";  // loopback IPv4 literal, or "localhost"
  int target_port = 0;                    // required
  std::string listen_host = "127.0.0.1";  // loopback IPv4 literal, or "localhost"
  int listen_port = 0;                    // 0: an ephemeral port (see port())
  // Connections beyond this are closed at accept. Default: 256.
  int max_connections = 256;
  // Per direction of each connection: reading stops while this much waits
  // to be written (a delay mode fills it). Default: 4 MiB.
  std::size_t max_buffered = 4u << 20;
  // The proxy stops (closing everything) this long after it started.
  // Default: 1 h. Range 1 ms .. 24 h.
  std::chrono::milliseconds lifetime{std::chrono::hours(1)};
};

struct ProxyStats {
  std::int64_t accepted = 0;       // connections accepted (in any mode)
  std::int64_t open = 0;           // open right now
  std::int64_t dropped = 0;        // closed by drop mode or for the limit
  std::int64_t bytes_to_target = 0, bytes_to_client = 0;
};

// Thread safety: every public member may be called from any thread.
class FaultProxy {
 public:
  // Binds and starts forwarding (mode pass). Throws std::invalid_argument
  // for a non-loopback address or a bad option, std::runtime_error when the
  // port cannot be bound.
  explicit FaultProxy(ProxyOptions options);
  ~FaultProxy();  // stops the thread and closes every socket
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const noexcept { return port_; }  // the listening port
  const ProxyOptions& options() const noexcept { return options_; }

  // Switches the mode; returns once the proxy thread has applied it (for
  // drop: every connection open at the call is closed), or after 2 s if the
  // proxy has stopped. `delay` is used by Mode::kDelay only (0 .. 1 h).
  void set_mode(Mode mode, std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  void pass() { set_mode(Mode::kPass); }
  void freeze() { set_mode(Mode::kFreeze); }
  void drop() { set_mode(Mode::kDrop); }
  void delay(std::chrono::milliseconds d) { set_mode(Mode::kDelay, d); }
  Mode mode() const;

  ProxyStats stats() const;
  bool running() const noexcept { return running_; }  // false once the lifetime ended
  void stop();  // idempotent; the destructor calls it

 private:
  void run();

  ProxyOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: a mode change or stop()
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable applied_cv_;
  Mode mode_ = Mode::kPass;
  std::chrono::milliseconds delay_{0};
  std::uint64_t requested_ = 0, applied_ = 0;  // mode-change generations
  bool stop_ = false;

  std::atomic<bool> running_{false};
  std::atomic<std::int64_t> accepted_{0}, open_{0}, dropped_{0}, to_target_{0}, to_client_{0};
  std::thread thread_;
};

// "127.0.0.1:5432" -> {"127.0.0.1", 5432}; throws std::invalid_argument.
std::pair<std::string, int> parse_host_port(std::string_view text);

// Database URIs (scheme://[user[:password]@]host[:port][/db][?query]), to
// put the proxy between a client and its server. One host only; the port
// defaults by scheme (postgresql 5432, mysql 3306). Throw std::invalid_argument.
std::pair<std::string, int> uri_endpoint(std::string_view uri);
// `uri` with its host:port replaced by 127.0.0.1:`port` (everything else kept).
std::string uri_via(std::string_view uri, int port);

}  // namespace sqlguard::faultproxy
