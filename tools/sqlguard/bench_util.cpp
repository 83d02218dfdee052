// sqlguard bench: the client loop runner (threads or processes) and the SVG plot.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bench.h"
#include "sqlguard/errors.h"

namespace sqlguard::bench {

using Clock = std::chrono::steady_clock;

double Stats::pct_ms(double q) {
  if (lat_ns.empty()) return 0;
  if (!std::is_sorted(lat_ns.begin(), lat_ns.end())) std::sort(lat_ns.begin(), lat_ns.end());
  auto idx = static_cast<std::size_t>(std::ceil(q * static_cast<double>(lat_ns.size()))) ;
  idx = std::min(lat_ns.size() - 1, idx == 0 ? 0 : idx - 1);
  return static_cast<double>(lat_ns[idx]) / 1e6;
}

namespace {

// Phases shared by the coordinator and the clients (also across fork()).
struct Shared {
  std::atomic<int> ready{0};
  std::atomic<int> phase{0};  // 0 warmup, 1 measure, 2 stop
};

// One client's loop; only ops that START in the measured phase are counted.
void client_loop(Shared& sh, const OpFn& fn, Stats& st) {
  while (true) {
    int ph = sh.phase.load(std::memory_order_acquire);
    if (ph == 2) return;
    auto t0 = Clock::now();
    try {
      bool ok = fn();
      auto t1 = Clock::now();
      if (ph == 1) {
        if (ok) {
          ++st.ops;
          st.lat_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        } else {
          ++st.misses;
        }
      }
    } catch (const std::exception& e) {
      if (ph == 1) ++st.errors;
      if (st.first_error.empty()) st.first_error = e.what();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // never spin on a broken session
    }
  }
}

void merge(Stats& into, Stats& from) {
  into.ops += from.ops;
  into.misses += from.misses;
  into.errors += from.errors;
  into.lat_ns.insert(into.lat_ns.end(), from.lat_ns.begin(), from.lat_ns.end());
  if (into.first_error.empty()) into.first_error = from.first_error;
}

bool write_all(int fd, const void* p, std::size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}
bool read_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

Stats run_clients(int clients, bool processes, const std::function<OpFn(int client)>& make,
                  std::chrono::milliseconds warmup, std::chrono::milliseconds duration) {
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw Error(ErrorCode::kInternal, "bench: mmap failed");
  auto* sh = new (mem) Shared();
  struct Unmap {
    void* m;
    ~Unmap() { munmap(m, sizeof(Shared)); }
  } unmap{mem};

  Stats total;
  std::vector<Stats> per(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  std::vector<std::pair<pid_t, int>> children;  // pid, read fd
  std::mutex err_mu;
  std::string setup_error;

  auto body = [&](int i, Stats& st) {
    OpFn fn;
    try {
      fn = make(i);
    } catch (const std::exception& e) {
      st.first_error = std::string("client setup failed: ") + e.what();
      st.errors = 1;
      sh->ready.fetch_add(1);
      return false;
    }
    sh->ready.fetch_add(1);
    client_loop(*sh, fn, st);
    fn = nullptr;  // close connections before reporting
    return true;
  };

  for (int i = 0; i < clients; ++i) {
    if (!processes) {
      threads.emplace_back([&, i] {
        if (!body(i, per[static_cast<std::size_t>(i)])) {
          std::lock_guard<std::mutex> lk(err_mu);
          if (setup_error.empty()) setup_error = per[static_cast<std::size_t>(i)].first_error;
        }
      });
      continue;
    }
    int fds[2];
    if (pipe(fds) != 0) throw Error(ErrorCode::kInternal, "bench: pipe failed");
    pid_t pid = fork();
    if (pid < 0) throw Error(ErrorCode::kInternal, "bench: fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      Stats st;
      bool ok = body(i, st);
      std::uint64_t hdr[5] = {ok ? 1u : 0u, st.ops, st.misses, st.errors, st.lat_ns.size()};
      std::uint64_t elen = st.first_error.size();
      bool w = write_all(fds[1], hdr, sizeof hdr) && write_all(fds[1], &elen, sizeof elen) &&
               write_all(fds[1], st.first_error.data(), elen) &&
               write_all(fds[1], st.lat_ns.data(), st.lat_ns.size() * sizeof(std::int64_t));
      _exit(w ? 0 : 1);
    }
    ::close(fds[1]);
    children.emplace_back(pid, fds[0]);
  }
  // Wait for every client to be connected (bounded: connect timeouts apply).
  while (sh->ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::this_thread::sleep_for(warmup);
  auto t0 = Clock::now();
  sh->phase.store(1, std::memory_order_release);
  std::this_thread::sleep_for(duration);
  sh->phase.store(2, std::memory_order_release);
  auto t1 = Clock::now();
  total.elapsed_s = std::chrono::duration<double>(t1 - t0).count();
  for (auto& t : threads) t.join();
  for (auto& s : per) merge(total, s);
  for (auto& [pid, fd] : children) {
    std::uint64_t hdr[5] = {0, 0, 0, 0, 0}, elen = 0;
    Stats st;
    if (read_all(fd, hdr, sizeof hdr) && read_all(fd, &elen, sizeof elen)) {
      st.first_error.resize(elen);
      read_all(fd, st.first_error.data(), elen);
      st.ops = hdr[1];
      st.misses = hdr[2];
      st.errors = hdr[3];
      st.lat_ns.resize(hdr[4]);
      read_all(fd, st.lat_ns.data(), hdr[4] * sizeof(std::int64_t));
      if (!hdr[0] && setup_error.empty()) setup_error = st.first_error;
    } else if (setup_error.empty()) {
      setup_error = "a client process died";
    }
    ::close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
    merge(total, st);
  }
  if (!setup_error.empty()) throw Error(ErrorCode::kInternal, "bench: " + setup_error);
  return total;
}

// ---- SVG plot ------------------------------------------------------------------

namespace {
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}
}  // namespace

void write_svg(const std::string& path, const std::string& title, const std::vector<nlohmann::json>& cells) {
  // series name -> clients -> ops/s
  std::map<std::string, std::map<int, double>> series;
  std::map<std::string, std::string> style;
  std::set<int> xs;
  for (const auto& c : cells) {
    if (!c.contains("op") || !c.contains("clients") || !c.contains("ops_per_s")) continue;
    std::string op = c["op"].get<std::string>();
    int n = c["clients"].get<int>();
    bool redis = c.value("dialect", "") == "redis";
    std::string name = redis ? "redis " + op : op;
    series[name][n] = c["ops_per_s"].get<double>();
    style[name] = redis ? "4,2,1,2" : "";
    xs.insert(n);
    if (!redis && c.contains("raw_ops_per_s") && c["raw_ops_per_s"].is_number()) {
      series[op + " (raw)"][n] = c["raw_ops_per_s"].get<double>();
      style[op + " (raw)"] = "6,4";
    }
  }
  double ymin = 1e18, ymax = 1;
  for (auto& [_, m] : series)
    for (auto& [__, v] : m)
      if (v > 0) {
        ymin = std::min(ymin, v);
        ymax = std::max(ymax, v);
      }
  if (ymin > ymax) ymin = 1;
  double lo = std::floor(std::log10(std::max(ymin, 1.0))), hi = std::ceil(std::log10(ymax));
  if (hi <= lo) hi = lo + 1;
  const int W = 960, H = 560, L = 70, R = 300, T = 40, B = 50;
  const int pw = W - L - R, ph = H - T - B;
  std::vector<int> xv(xs.begin(), xs.end());
  auto xpos = [&](int n) {
    if (xv.size() <= 1) return static_cast<double>(L + pw / 2);
    double a = std::log2(static_cast<double>(xv.front())), b = std::log2(static_cast<double>(xv.back()));
    return L + (std::log2(static_cast<double>(n)) - a) / (b - a) * pw;
  };
  auto ypos = [&](double v) { return T + ph - (std::log10(std::max(v, 1.0)) - lo) / (hi - lo) * ph; };
  static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                 "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"};
  std::map<std::string, std::string> color_of;
  int ci = 0;
  for (auto& [name, _] : series) {
    std::string base = name;
    auto p = base.find(" (raw)");
    if (p != std::string::npos) base = base.substr(0, p);
    if (base.rfind("redis ", 0) == 0) base = base;  // redis gets its own colour
    if (!color_of.count(base)) color_of[base] = colors[ci++ % 12];
  }
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::kInvalidArgument, "bench: cannot write plot '" + path + "'");
  f << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
  f << "<text x='" << L << "' y='22' font-size='15'>" << esc(title) << "</text>\n";
  f << "<rect x='" << L << "' y='" << T << "' width='" << pw << "' height='" << ph
    << "' fill='none' stroke='#444'/>\n";
  for (double e = lo; e <= hi + 1e-9; e += 1) {
    double y = ypos(std::pow(10, e));
    f << "<line x1='" << L << "' x2='" << L + pw << "' y1='" << y << "' y2='" << y << "' stroke='#ddd'/>";
    f << "<text x='" << L - 6 << "' y='" << y + 4 << "' text-anchor='end'>" << static_cast<long long>(std::pow(10, e))
      << "</text>\n";
  }
  for (int n : xv) {
    double x = xpos(n);
    f << "<line x1='" << x << "' x2='" << x << "' y1='" << T << "' y2='" << T + ph << "' stroke='#eee'/>";
    f << "<text x='" << x << "' y='" << T + ph + 18 << "' text-anchor='middle'>" << n << "</text>\n";
  }
  f << "<text x='" << L + pw / 2 << "' y='" << H - 10 << "' text-anchor='middle'>clients</text>\n";
  f << "<text transform='translate(16," << T + ph / 2 << ") rotate(-90)' text-anchor='middle'>ops/s (log)</text>\n";
  int ly = T + 10;
  for (auto& [name, pts] : series) {
    std::string base = name;
    auto p = base.find(" (raw)");
    if (p != std::string::npos) base = base.substr(0, p);
    const std::string& col = color_of[base];
    std::string dash = style[name].empty() ? "" : " stroke-dasharray='" + style[name] + "'";
    f << "<polyline fill='none' stroke='" << col << "' stroke-width='2'" << dash << " points='";
    for (auto& [n, v] : pts) f << xpos(n) << "," << ypos(v) << " ";
    f << "'/>\n";
    for (auto& [n, v] : pts) f << "<circle cx='" << xpos(n) << "' cy='" << ypos(v) << "' r='3' fill='" << col << "'/>";
    f << "\n<line x1='" << L + pw + 15 << "' x2='" << L + pw + 45 << "' y1='" << ly << "' y2='" << ly
      << "' stroke='" << col << "' stroke-width='2'" << dash << "/>";
    f << "<text x='" << L + pw + 52 << "' y='" << ly + 4 << "'>" << esc(name) << "</text>\n";
    ly += 18;
  }
  f << "</svg>\n";
}

}  // namespace sqlguard::bench
