#include "fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <vector>

namespace sqlguard::faultproxy {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::string_view to_string(Mode m) noexcept {
  switch (m) {
    case Mode::kPass: return "pass";
    case Mode::kFreeze: return "freeze";
    case Mode::kDrop: return "drop";
    case Mode::kDelay: return "delay";
  }
  return "?";
}

std::pair<std::string, int> parse_host_port(std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("expected HOST:PORT, got '" + std::string(text) + "'");
  std::string port_text(text.substr(colon + 1));
  char* end = nullptr;
  long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port < 0 || port > 65535)
    throw std::invalid_argument("bad port in '" + std::string(text) + "'");
  return {std::string(text.substr(0, colon)), static_cast<int>(port)};
}

namespace {

// [begin, end) of the host:port part of a URI's authority.
std::pair<std::size_t, std::size_t> authority_host(std::string_view uri) {
  auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) throw std::invalid_argument("not a scheme://host URI");
  std::size_t begin = scheme_end + 3;
  std::size_t end = uri.find_first_of("/?", begin);
  if (end == std::string_view::npos) end = uri.size();
  auto at = uri.rfind('@', end);
  if (at != std::string_view::npos && at >= begin) begin = at + 1;
  if (begin == end) throw std::invalid_argument("the URI names no host");
  if (uri.substr(begin, end - begin).find(',') != std::string_view::npos)
    throw std::invalid_argument("the URI names several hosts; the fault proxy forwards to one");
  return {begin, end};
}

}  // namespace

std::pair<std::string, int> uri_endpoint(std::string_view uri) {
  auto [begin, end] = authority_host(uri);
  std::string_view hp = uri.substr(begin, end - begin);
  if (hp.find(':') != std::string_view::npos) return parse_host_port(hp);
  std::string_view scheme = uri.substr(0, uri.find("://"));
  int port = scheme.starts_with("postgres") ? 5432 : scheme == "mysql" || scheme == "mariadb" ? 3306 : 0;
  if (port == 0) throw std::invalid_argument("no port in the URI and no default for its scheme");
  return {std::string(hp), port};
}

std::string uri_via(std::string_view uri, int port) {
  auto [begin, end] = authority_host(uri);
  return std::string(uri.substr(0, begin)) + "127.0.0.1:" + std::to_string(port) + std::string(uri.substr(end));
}

namespace {

// The address of a loopback host; anything else is refused.
sockaddr_in loopback_address(const std::string& host, int port, const char* what) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &a.sin_addr) != 1 || (ntohl(a.sin_addr.s_addr) >> 24) != 127)
    throw std::invalid_argument(std::string(what) + " must be a loopback IPv4 address (127.x.x.x), not '" + host + "'");
  if (port < 0 || port > 65535) throw std::invalid_argument(std::string(what) + ": bad port");
  return a;
}

// Closes with a reset (SO_LINGER 0): the peer sees ECONNRESET, as after a
// middlebox drop, not an orderly shutdown.
void reset_close(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

struct Chunk {
  Clock::time_point due;
  std::string data;
};

// Bytes read from one side and not yet written to the other.
struct Direction {
  std::deque<Chunk> q;
  std::size_t offset = 0;  // into q.front()
  std::size_t bytes = 0;
  bool due(Clock::time_point now) const { return !q.empty() && q.front().due <= now; }
};

struct Conn {
  int client = -1, target = -1;
  bool connecting = true;
  bool dead = false;
  Direction up, down;  // up: client -> target
};

// Reads what `fd` has into `d`, due at `due`. False on EOF or error.
bool read_into(int fd, Direction& d, Clock::time_point due, std::size_t max) {
  char buf[65536];
  while (d.bytes < max) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      d.q.push_back({due, std::string(buf, static_cast<std::size_t>(n))});
      d.bytes += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  return true;
}

// Writes the due part of `d` to `fd`. False on a write error.
bool write_from(int fd, Direction& d, Clock::time_point now, std::atomic<std::int64_t>& counter) {
  while (d.due(now)) {
    auto& c = d.q.front();
    ssize_t n = ::send(fd, c.data.data() + d.offset, c.data.size() - d.offset, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0) return false;
    counter += n;
    d.offset += static_cast<std::size_t>(n);
    d.bytes -= static_cast<std::size_t>(n);
    if (d.offset == c.data.size()) {
      d.q.pop_front();
      d.offset = 0;
    }
  }
  return true;
}

}  // namespace

FaultProxy::FaultProxy(ProxyOptions options) : options_(std::move(options)) {
  if (options_.target_port <= 0) throw std::invalid_argument("fault proxy: target_port is required");
  if (options_.max_connections < 1) throw std::invalid_argument("fault proxy: max_connections must be >= 1");
  if (options_.max_buffered < 1024) throw std::invalid_argument("fault proxy: max_buffered must be >= 1024");
  if (options_.lifetime < milliseconds(1) || options_.lifetime > std::chrono::hours(24))
    throw std::invalid_argument("fault proxy: lifetime must be between 1ms and 24h");
  loopback_address(options_.target_host, options_.target_port, "fault proxy target");
  sockaddr_in listen_at = loopback_address(options_.listen_host, options_.listen_port, "fault proxy listen address");

  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error(std::string("fault proxy: socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&listen_at), sizeof listen_at) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    int err = errno;
    ::close(listen_fd_);
    throw std::runtime_error("fault proxy: cannot listen on " + options_.listen_host + ":" +
                             std::to_string(options_.listen_port) + ": " + std::strerror(err));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.sin_port);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(listen_fd_);
    throw std::runtime_error(std::string("fault proxy: eventfd: ") + std::strerror(errno));
  }
  running_ = true;
  thread_ = std::thread([this] { run(); });
}

FaultProxy::~FaultProxy() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void FaultProxy::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  std::uint64_t one = 1;
  ssize_t n = ::write(wake_fd_, &one, sizeof one);
  (void)n;  // the counter cannot overflow here; a failed wake-up only delays by the 1 s tick
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void FaultProxy::set_mode(Mode mode, milliseconds delay) {
  if (delay < milliseconds(0) || delay > std::chrono::hours(1))
    throw std::invalid_argument("fault proxy: delay must be between 0 and 1h");
  std::unique_lock<std::mutex> lk(mu_);
  mode_ = mode;
  delay_ = mode == Mode::kDelay ? delay : milliseconds(0);
  std::uint64_t gen = ++requested_;
  std::uint64_t one = 1;
  ssize_t n = ::write(wake_fd_, &one, sizeof one);
  (void)n;  // see stop()
  applied_cv_.wait_for(lk, std::chrono::seconds(2), [&] { return applied_ >= gen || !running_; });
}

Mode FaultProxy::mode() const {
  std::lock_guard<std::mutex> lk(mu_);
  return mode_;
}

ProxyStats FaultProxy::stats() const {
  return {accepted_.load(), open_.load(), dropped_.load(), to_target_.load(), to_client_.load()};
}

void FaultProxy::run() {
  std::vector<std::unique_ptr<Conn>> conns;
  const auto end_of_life = Clock::now() + options_.lifetime;
  std::uint64_t applied = 0;
  auto close_conn = [&](Conn& c, bool reset) {
    if (reset) {
      reset_close(c.client);
      reset_close(c.target);
    } else {
      ::close(c.client);
      ::close(c.target);
    }
    c.client = c.target = -1;
    c.dead = true;
  };

  for (;;) {
    Mode mode;
    milliseconds delay;
    std::uint64_t requested;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) break;
      mode = mode_;
      delay = delay_;
      requested = requested_;
    }
    auto now = Clock::now();
    if (now >= end_of_life) break;
    if (requested != applied) {
      if (mode == Mode::kDrop) {
        for (auto& c : conns) {
          close_conn(*c, true);
          ++dropped_;
        }
        conns.clear();
        open_ = 0;
      }
      {
        std::lock_guard<std::mutex> lk(mu_);
        applied_ = applied = requested;
      }
      applied_cv_.notify_all();
    }

    // What to wait for. Frozen: only the control wake-up; the listen backlog
    // and the kernel buffers hold whatever arrives meanwhile.
    std::vector<pollfd> fds = {{wake_fd_, POLLIN, 0}};
    const bool frozen = mode == Mode::kFreeze;
    if (!frozen) fds.push_back({listen_fd_, POLLIN, 0});
    const std::size_t first_conn = fds.size();
    auto next = end_of_life;
    if (!frozen) {
      for (auto& c : conns) {
        short ce = 0, te = 0;
        if (c->connecting) {
          te = POLLOUT;
        } else {
          if (c->up.bytes < options_.max_buffered) ce |= POLLIN;
          if (c->down.bytes < options_.max_buffered) te |= POLLIN;
          if (!c->up.q.empty()) {
            if (c->up.due(now)) te |= POLLOUT;
            else next = std::min(next, c->up.q.front().due);
          }
          if (!c->down.q.empty()) {
            if (c->down.due(now)) ce |= POLLOUT;
            else next = std::min(next, c->down.q.front().due);
          }
        }
        fds.push_back({c->client, ce, 0});
        fds.push_back({c->target, te, 0});
      }
    }
    auto wait = std::chrono::duration_cast<milliseconds>(next - now) + milliseconds(1);
    int timeout = static_cast<int>(std::clamp(wait, milliseconds(0), milliseconds(1000)).count());
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;
    std::uint64_t drained;
    while (::read(wake_fd_, &drained, sizeof drained) > 0) {
    }
    if (frozen) continue;
    {
      // A mode change that arrived during poll() is applied first.
      std::lock_guard<std::mutex> lk(mu_);
      if (requested_ != applied) continue;
    }
    now = Clock::now();

    for (std::size_t i = 0; i < conns.size(); ++i) {
      Conn& c = *conns[i];
      short cr = fds[first_conn + 2 * i].revents, tr = fds[first_conn + 2 * i + 1].revents;
      if (c.connecting) {
        if (!(tr & (POLLOUT | POLLERR | POLLHUP))) continue;
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c.target, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          close_conn(c, true);  // target refused: the client sees a reset
          continue;
        }
        c.connecting = false;
        continue;
      }
      const auto due = now + delay;
      bool ok = true;
      if (cr & (POLLIN | POLLHUP | POLLERR)) ok = read_into(c.client, c.up, due, options_.max_buffered);
      if (ok && (tr & (POLLIN | POLLHUP | POLLERR)))
        ok = read_into(c.target, c.down, due, options_.max_buffered);
      // Forward what is due now, also what was just read in pass mode.
      bool w1 = write_from(c.target, c.up, now, to_target_);
      bool w2 = write_from(c.client, c.down, now, to_client_);
      if (!ok || !w1 || !w2) close_conn(c, false);  // one side ended: end the other
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& c) { return c->dead; }), conns.end());

    if (fds[1].revents & POLLIN) {
      for (;;) {
        int cfd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) break;  // EAGAIN: all taken; anything else: try again next round
        ++accepted_;
        if (mode == Mode::kDrop || static_cast<int>(conns.size()) >= options_.max_connections) {
          reset_close(cfd);
          ++dropped_;
          continue;
        }
        auto c = std::make_unique<Conn>();
        c->client = cfd;
        c->target = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        sockaddr_in to = loopback_address(options_.target_host, options_.target_port, "target");
        int one = 1;
        setsockopt(c->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (c->target >= 0) setsockopt(c->target, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (c->target < 0 ||
            (::connect(c->target, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)) {
          reset_close(c->client);
          if (c->target >= 0) ::close(c->target);
          ++dropped_;
          continue;
        }
        conns.push_back(std::move(c));
      }
    }
    open_ = static_cast<std::int64_t>(conns.size());
  }

  for (auto& c : conns) close_conn(*c, false);
  open_ = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);  // a set_mode() waiting now sees it
    running_ = false;
  }
  applied_cv_.notify_all();
}

}  // namespace sqlguard::faultproxy
