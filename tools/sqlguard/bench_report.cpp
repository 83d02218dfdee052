// sqlguard bench: what a run reports. Percentiles, the text table, the
// JSON of a cell, the scale lines and the SVG plot.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "bench.h"
#include "sqlguard/errors.h"

namespace sqlguard::bench {

using nlohmann::json;

// ---- numbers, rows, cells --------------------------------------------------------

double r3(double v) { return std::round(v * 1000.0) / 1000.0; }

namespace {
std::string num_mb(double bytes) {  // "36.2 MB"
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << bytes / 1e6 << " MB";
  return o.str();
}
}  // namespace

void print_table_header() {
  std::cout << std::left << std::setw(20) << "op" << std::right << std::setw(8) << "clients" << std::setw(11)
            << "ops/s" << std::setw(9) << "p50 ms" << std::setw(9) << "p99 ms" << std::setw(11) << "raw ops/s"
            << std::setw(9) << "raw p50" << std::setw(9) << "ratio" << std::setw(8) << "errors" << std::setw(7)
            << "rt/op" << std::setw(11) << "contention" << std::setw(9) << "vs_redis" << std::setw(9) << "vs_etcd"
            << std::setw(11) << "handoff_eff" << std::setw(7) << "jain" << std::setw(10) << "wait p99"
            << std::setw(9) << "timeouts" << "\n";
}

void print_row(const json& j) {
  auto num = [&](const char* k, int w, int prec) {
    std::ostringstream o;
    if (j.contains(k) && j[k].is_number()) o << std::fixed << std::setprecision(prec) << j[k].get<double>();
    else o << "-";
    std::cout << std::setw(w) << o.str();
  };
  std::cout << std::left << std::setw(20) << j.value("op", "") << std::right << std::setw(8) << j.value("clients", 0);
  num("ops_per_s", 11, 0);
  num("p50_ms", 9, 3);
  num("p99_ms", 9, 3);
  num("raw_ops_per_s", 11, 0);
  num("raw_p50_ms", 9, 3);
  num("overhead_ratio", 9, 3);
  std::cout << std::setw(8) << j.value("errors", 0);
  num("statements_per_op", 7, 0);
  num("contention_ratio", 11, 3);
  num("vs_redis", 9, 3);
  num("vs_etcd", 9, 3);
  num("handoff_efficiency", 11, 3);
  num("jain_index", 7, 3);
  num("wait_p99_ms", 10, 3);
  num("timeouts", 9, 0);
  std::cout << "\n" << std::flush;
}

void print_client_row(const json& j) {
  auto num = [&](const char* k, int prec) {
    std::ostringstream o;
    if (j.contains(k) && j[k].is_number()) o << std::fixed << std::setprecision(prec) << j[k].get<double>();
    else o << "-";
    return o.str();
  };
  const std::string op = j.value("op", "");
  if (op == "held-leases") {
    std::cout << "held-leases " << j.value("model", "") << " N=" << j.value("held", 0) << ": acquired "
              << num("acquired", 0) << " in " << num("acquire_s", 2) << " s; connections " << num("connections", 0)
              << " (server " << num("server_sessions", 0) << "), threads " << num("threads", 0)
              << ", renewal statements/period " << num("renewal_statements_per_period", 2) << ", RSS/lease "
              << num("rss_per_lease_bytes", 0) << " B (after 3 ttl " << num("rss_per_lease_held_bytes", 0)
              << " B), renewal lag p99 " << num("renewal_lag_p99_ms", 1) << " ms; owned after 3 ttl "
              << num("owned_after", 0) << " (lock table " << num("db_owned_after", 0) << ")";
    if (j.contains("heap_per_waiter_bytes"))
      std::cout << "; heap/waiter " << num("heap_per_waiter_bytes", 0) << " B over " << num("waiters_measured", 0)
                << " waiters, left after their waits " << num("heap_left_by_waits_bytes", 0) << " B";
    std::cout << ", errors " << j.value("errors", 0) << "\n";
  } else if (op == "lock-set") {
    std::cout << "lock-set clients=" << j.value("clients", 0) << " (" << j.value("names_per_order", 0)
              << " names of " << j.value("catalogue", 0) << " per order, hold " << j.value("hold_ms", 0)
              << " ms): as a set " << num("ops_per_s", 0) << " orders/s, p50 " << num("p50_ms", 2) << " ms, p99 "
              << num("p99_ms", 2) << " ms, timeouts " << j.value("timeouts", 0) << "; name by name "
              << num("one_by_one_ops_per_s", 0) << "/s, p99 " << num("one_by_one_p99_ms", 2) << " ms, timeouts "
              << j.value("one_by_one_timeouts", 0) << "; ratio " << num("set_vs_one_by_one", 2) << "; overlaps "
              << j.value("overlaps", 0) << " / " << j.value("one_by_one_overlaps", 0) << ", errors "
              << j.value("errors", 0) << " / " << j.value("one_by_one_errors", 0) << "\n";
  } else if (op == "lease-coalesced" && j.value("comparator", false)) {
    std::cout << "lease-coalesced " << j.value("dialect", "") << " requesters=" << j.value("requesters", 0)
              << " on 2 pipelined connections: " << num("ops_per_s", 0) << " acquire+release/s, p50 " << num("p50_ms", 2)
              << " ms, p99 " << num("p99_ms", 2) << " ms (" << j.value("durability", "") << "), errors "
              << j.value("errors", 0) << "\n";
  } else if (op == "lease-coalesced") {
    std::cout << "lease-coalesced requesters=" << j.value("requesters", 0) << " on one lock client ("
              << num("connections", 0) << " connections): " << num("ops_per_s", 0) << " acquire+release/s, p50 "
              << num("p50_ms", 2) << " ms, p99 " << num("p99_ms", 2) << " ms, " << num("calls_per_batch", 1)
              << " calls/batch; each call alone: " << num("alone_ops_per_s", 0) << "/s (p99 " << num("alone_p99_ms", 2)
              << " ms), ratio " << num("coalesced_vs_alone", 2);
    if (j.contains("coroutine_ops_per_s"))
      std::cout << "; as coroutines on " << num("coroutine_executor_threads", 0) << " threads: "
                << num("coroutine_ops_per_s", 0) << "/s (p50 " << num("coroutine_p50_ms", 2) << " ms, p99 "
                << num("coroutine_p99_ms", 2) << " ms, " << num("coroutine_calls_per_batch", 1) << " calls/batch, errors "
                << j.value("coroutine_errors", 0) << ")";
    if (j.contains("vs_redis")) std::cout << ", vs pipelined redis " << num("vs_redis", 2);
    std::cout << ", errors " << j.value("errors", 0) << "\n";
  } else if (op == "takeover") {
    std::cout << "takeover rule=" << j.value("rule", "") << " ttl " << num("ttl_ms", 0) << " ms: waiting handle "
              << num("waiting_p50_ms", 0) << " / " << num("waiting_max_ms", 0)
              << " ms (p50/max from the dead holder's last renewal; target " << num("waiting_target_ms", 0)
              << "), late handle " << num("late_p50_ms", 0) << " / " << num("late_max_ms", 0)
              << " ms (from its arrival), " << num("rounds", 0) << " rounds, errors " << j.value("errors", 0) << "\n";
  } else if (op == kSoakOp) {
    auto mb = [&](const json& v) { return v.is_number() ? num_mb(v.get<double>()) : std::string("-"); };
    std::cout << "churn-soak N=" << j.value("held", 0) << " churn=" << j.value("churn", 0) << " ("
              << j.value("churn_kinds", "") << "): " << num("duration_s", 0) << " s, " << num("acquisitions", 0)
              << " acquisitions (" << num("churn_per_s", 0) << "/s), losses " << num("losses", 0) << "; RSS "
              << mb(j.value("rss_baseline_bytes", json())) << " at " << num("baseline_s", 0) << " s -> "
              << mb(j.value("rss_end_bytes", json())) << " (growth " << num("rss_growth_pct", 1)
              << " %), heap retained " << num("heap_settled_retained_per_acquisition_bytes", 1)
              << " B/acquisition; target (RSS flat within 5 %, 0 losses) met: "
              << (j.value("target_met", false) ? "yes" : "no") << ", errors " << j.value("errors", 0) << "\n";
  } else {
    std::cout << "waiters N=" << j.value("waiters", 0) << ": " << num("ops_per_s", 0) << " hand-offs/s, efficiency "
              << num("handoff_efficiency", 3) << ", " << num("rounds", 1) << " rounds; threads " << num("threads", 0)
              << ", connections " << num("connections", 0) << " (server " << num("server_sessions", 0)
              << "); wait p50/p99/max " << num("wait_p50_ms", 1) << " / " << num("wait_p99_ms", 1) << " / "
              << num("wait_max_ms", 1) << " ms, jain " << num("jain_index", 3) << ", timed out "
              << num("timeouts_total", 0) << ", errors " << j.value("errors", 0) << "\n";
  }
  if (j.contains("first_error")) std::cout << "  first error: " << j["first_error"].get<std::string>() << "\n";
  std::cout << std::flush;
}

void print_soak_sample(std::ostream& out, const json& s) {
  auto mb = [&](const char* k) { return num_mb(s.at(k).get<double>()); };
  out << "  churn-soak t=" << std::fixed << std::setprecision(1) << s.at("t_s").get<double>() << " s"
      << (s.value("baseline", false) ? " (baseline)" : "") << ": " << s.at("acquisitions").get<std::uint64_t>()
      << " acquisitions, losses " << s.at("losses").get<std::uint64_t>() << ", RSS " << mb("rss_bytes") << ", heap "
      << mb("heap_bytes") << "; client: held " << s.at("held_leases").get<std::uint64_t>() << ", queue places "
      << s.at("queue_places").get<std::uint64_t>() << ", waiters " << s.at("waiters").get<std::uint64_t>()
      << ", listening " << s.at("listening").get<std::uint64_t>() << ", renewal statements "
      << s.at("renewal_statements").get<std::uint64_t>() << ", renewal lag p99/max "
      << s.value("renewal_lag_p99_ms", 0.0) << "/" << s.value("renewal_lag_max_ms", 0.0) << " ms, slowest cycle "
      << s.value("cycle_s_max", 0.0) << " s, refused " << s.value("refused", 0) << (s.value("renewal_behind", false) ? " (renewer behind)" : "")
      << ", errors " << s.at("errors").get<std::uint64_t>() << std::endl;
}

void print_sync_row(const json& j) {
  auto num = [&](const std::string& k, int prec) {
    std::ostringstream o;
    if (j.contains(k) && j[k].is_number()) o << std::fixed << std::setprecision(prec) << j[k].get<double>();
    else o << "-";
    return o.str();
  };
  const std::string op = j.value("op", "");
  std::cout << "  " << op << ": ";
  if (op == "fair-lease") {
    std::cout << "fair " << num("ops_per_s", 0) << " cycles/s, jain " << num("jain_index", 3) << ", wait max "
              << num("wait_max_cycles", 0) << " cycles / " << num("wait_max_ms", 1) << " ms; unfair "
              << num("unfair_ops_per_s", 0) << " cycles/s, jain " << num("unfair_jain_index", 3) << ", wait max "
              << num("unfair_wait_max_cycles", 0) << " cycles / " << num("unfair_wait_max_ms", 1)
              << " ms; fair/unfair " << num("fair_vs_unfair", 2) << ", overlaps " << num("overlaps", 0) << " / "
              << num("unfair_overlaps", 0) << ", unfair errors " << num("unfair_errors", 0);
  } else if (op == "semaphore-hot") {
    std::cout << num("permits", 0) << " permits: most holders seen " << num("max_holders", 0) << ", overlaps "
              << num("overlaps", 0) << ", wait max " << num("wait_max_cycles", 0) << " cycles";
  } else {
    std::cout << "shared " << num("shared_ops_per_s", 0) << "/s p99 " << num("shared_p99_ms", 2) << " ms; exclusive "
              << num("exclusive_ops_per_s", 0) << "/s p99 " << num("exclusive_p99_ms", 2)
              << " ms, writer wait max " << num("writer_wait_max_ms", 1) << " ms; most shared holders "
              << num("max_shared_holders", 0) << ", overlaps " << num("overlaps", 0);
  }
  std::cout << "\n";
  if (j.contains("first_error")) std::cout << "  first error: " << j["first_error"].get<std::string>() << "\n";
  std::cout << std::flush;
}

void add_fairness_fields(json& j, const std::string& prefix, Stats& st) {
  const auto [lo, hi] = std::minmax_element(st.per_client.begin(), st.per_client.end());
  j[prefix + "per_client_min"] = lo == st.per_client.end() ? json(nullptr) : json(*lo);
  j[prefix + "per_client_max"] = hi == st.per_client.end() ? json(nullptr) : json(*hi);
  const auto jain = jain_index(st.per_client);
  j[prefix + "jain_index"] = jain ? json(r3(*jain)) : json(nullptr);
  j[prefix + "wait_p50_ms"] = r3(st.wait_pct_ms(0.5));
  j[prefix + "wait_p99_ms"] = r3(st.wait_pct_ms(0.99));
  j[prefix + "wait_max_ms"] = r3(st.wait_pct_ms(1.0));
  j[prefix + "timeouts"] = st.timeouts;
}

void add_sync_fields(json& j, const std::string& prefix, Stats& st) {
  j[prefix + "ops_per_s"] = r3(st.ops_per_s());
  j[prefix + "p50_ms"] = r3(st.pct_ms(0.5));
  j[prefix + "p99_ms"] = r3(st.pct_ms(0.99));
  j[prefix + "ops"] = st.ops;
  j[prefix + "errors"] = st.errors;
  add_fairness_fields(j, prefix, st);
  j[prefix + "wait_p99_cycles"] = percentile(st.wait_cycles, 0.99);
  j[prefix + "wait_max_cycles"] = percentile(st.wait_cycles, 1.0);
  if (prefix.empty()) j["duration_s"] = r3(st.elapsed_s);
  if (!st.first_error.empty()) j[prefix + "first_error"] = st.first_error;
}

void add_durability_fields(json& j, const Durability& d) {
  j["durability"] = d.summary;
  j["flushes_per_cycle"] = d.flushes_per_cycle ? json(*d.flushes_per_cycle) : json(nullptr);
}

void add_cell_fields(json& j, const std::string& op, Stats& st, Stats* raw) {
  j["ops_per_s"] = r3(st.ops_per_s());
  j["p50_ms"] = r3(st.pct_ms(0.5));
  j["p99_ms"] = r3(st.pct_ms(0.99));
  j["ops"] = st.ops;
  j["errors"] = st.errors;
  if (contended(op)) add_fairness_fields(j, "", st);
  if (raw) {
    j["raw_ops_per_s"] = r3(raw->ops_per_s());
    j["raw_p50_ms"] = r3(raw->pct_ms(0.5));
    j["raw_p99_ms"] = r3(raw->pct_ms(0.99));
    j["raw_errors"] = raw->errors;
    j["overhead_ratio"] = raw->ops_per_s() > 0 ? json(r3(st.ops_per_s() / raw->ops_per_s())) : json(nullptr);
    if (contended(op)) add_fairness_fields(j, "raw_", *raw);
    if (!raw->first_error.empty()) j["raw_first_error"] = raw->first_error;
  } else {
    j["raw_ops_per_s"] = nullptr;
    j["overhead_ratio"] = nullptr;
  }
  j["duration_s"] = r3(st.elapsed_s);
  if (!st.first_error.empty()) j["first_error"] = st.first_error;
}

void add_handoff_fields(json& j, Stats& st, const Ceiling& ceiling) {
  j["ops_per_s"] = r3(st.ops_per_s());
  j["p50_ms"] = r3(st.pct_ms(0.5));
  j["p99_ms"] = r3(st.pct_ms(0.99));
  j["handoffs"] = st.ops;
  j["self_reacquired"] = st.misses;
  add_fairness_fields(j, "", st);
  j["hold_ms"] = r3(ceiling.hold_ms);
  j["ceiling_release_ms"] = r3(ceiling.release_ms);
  j["ceiling_wakeup_ms"] = r3(ceiling.wakeup_ms);
  j["ceiling_acquire_ms"] = r3(ceiling.acquire_ms);
  j["ceiling_cycle_ms"] = r3(ceiling.cycle_ms());
  j["ceiling_per_s"] = r3(ceiling.per_s());
  j["handoff_efficiency"] = ceiling.per_s() > 0 ? json(r3(st.ops_per_s() / ceiling.per_s())) : json(nullptr);
  j["raw_ops_per_s"] = nullptr;
  j["overhead_ratio"] = nullptr;
  j["errors"] = st.errors;
  j["duration_s"] = r3(st.elapsed_s);
  if (!st.first_error.empty()) j["first_error"] = st.first_error;
}

json lat_json(const std::string& phase, const std::string& op, Stats& st) {
  return {{"phase", phase}, {"op", op}, {"ops_per_s", st.ops_per_s()}, {"p50_ms", st.pct_ms(0.5)},
          {"p99_ms", st.pct_ms(0.99)}, {"errors", st.errors}, {"duration_s", st.elapsed_s}};
}

void print_scale_row(const std::string& label, Stats& st) {
  std::cout << "scale " << std::left << std::setw(34) << label << std::right << std::setw(10)
            << std::fixed << std::setprecision(0) << st.ops_per_s() << " ops/s  p50 " << std::setprecision(3)
            << st.pct_ms(0.5) << " ms  p99 " << st.pct_ms(0.99) << " ms\n" << std::flush;
}

void print_cleanup_row(Stats& during, std::int64_t locks_deleted, std::int64_t idempotency_deleted, double cleanup_s,
                       double fill_s) {
  std::cout << "scale lease-distinct during_cleanup        " << std::fixed << std::setprecision(0)
            << during.ops_per_s() << " ops/s  p50 " << std::setprecision(3) << during.pct_ms(0.5) << " ms  p99 "
            << during.pct_ms(0.99) << " ms  (cleanup deleted " << locks_deleted << " lock + "
            << idempotency_deleted << " idempotency rows in " << std::setprecision(1) << cleanup_s
            << " s; fill took " << fill_s << " s)\n";
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
    const bool comparator = c.value("comparator", false);
    std::string name = comparator ? c.value("dialect", "") + " " + op : op;
    series[name][n] = c["ops_per_s"].get<double>();
    style[name] = comparator ? "4,2,1,2" : "";
    xs.insert(n);
    if (!comparator && c.contains("raw_ops_per_s") && c["raw_ops_per_s"].is_number()) {
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
