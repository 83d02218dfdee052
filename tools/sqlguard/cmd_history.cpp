// sqlguard history NAME | --enable/--disable/--scopes, sqlguard verify
// (include/sqlguard/history.h, docs/history.md).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "common.h"
#include "sqlguard/history.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_kinds.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli {
namespace {
using std::chrono::milliseconds;

nlohmann::json to_json(const HistoryEvent& e) {
  nlohmann::json j = {{"id", e.id},           {"name", e.name},       {"at", format_db_time(e.at_ms)},   {"at_ms", e.at_ms},
                      {"event", e.event},     {"kind", e.kind},       {"mode", e.mode},           {"slot", e.slot},
                      {"owner", e.owner},     {"fence", e.fence},     {"permits", e.permits},     {"capacity", e.capacity},
                      {"until", format_db_time(e.until_ms)}, {"until_ms", e.until_ms}};
  if (!e.prev_owner.empty() || e.prev_fence != 0) {
    j["prev_owner"] = e.prev_owner;
    j["prev_fence"] = e.prev_fence;
    j["prev_until_ms"] = e.prev_until_ms;
    j["prev_ttl_ms"] = e.prev_ttl_ms;
  }
  return j;
}

std::string line_of(const HistoryEvent& e) {
  std::string s = format_db_time(e.at_ms) + "  " + e.event;
  s.resize(std::max<std::size_t>(s.size(), 36), ' ');
  s += e.kind + (e.kind == "lease" ? "" : " " + e.mode + " slot " + std::to_string(e.slot)) + "  fence " +
       std::to_string(e.fence) + "  owner " + printable(e.owner, 64) + "  until " + format_db_time(e.until_ms);
  if (e.event == "handover" || e.event == "confirm" || e.event == "takeover")
    s += "  (from fence " + std::to_string(e.prev_fence) + ", owner " + printable(e.prev_owner, 64) + ", its lease to " +
         format_db_time(e.prev_until_ms) + ")";
  return s;
}

// Where the name stands now, after its record: a release is recorded with
// the write that ends its row (the next grant, or cleanup's purge), so the
// last event may be a grant whose holding has ended since. Nothing when the
// name has no row (never held, or purged: the record is complete).
void print_now(Connection& conn, const std::string& name, const std::vector<HistoryEvent>& events) {
  const std::string kind = events.empty() ? std::string("lease") : events.back().kind;
  nlohmann::json now = {{"name", name}, {"kind", kind}};
  std::string text;
  if (kind == "lease" || kind == "fair") {
    const auto info = lease_info(conn, name);
    if (!info || info->owner.empty()) return;  // (a synchronizer's reservation row)
    now["held"] = info->held();
    now["owner"] = info->owner;
    now["fence"] = info->fence;
    now["until"] = format_db_time(info->expire_at_ms);
    text = info->held() ? "held by " + printable(info->owner, 64) + ", fence " + std::to_string(info->fence) +
                              ", until " + format_db_time(info->expire_at_ms)
                        : "released (fence " + std::to_string(info->fence) + ", owner " + printable(info->owner, 64) +
                              ", at " + format_db_time(info->expire_at_ms) +
                              "): recorded with the next grant or cleanup's purge";
  } else {
    const auto kinds = lock_kinds();
    const auto k = std::find_if(kinds.begin(), kinds.end(), [&](LockKind x) { return to_string(x) == kind; });
    if (k == kinds.end()) return;
    nlohmann::json holders = nlohmann::json::array();
    for (const auto& h : lock_holders(conn, name, *k)) {
      holders.push_back({{"owner", h.owner}, {"fence", h.fence}, {"mode", h.mode}, {"remaining_ms", h.remaining_ms}});
      text += (text.empty() ? "" : ", ") + printable(h.owner, 64) + " (fence " + std::to_string(h.fence) + ")";
    }
    now["holders"] = holders;
    text = holders.empty() ? "no live holder" : std::to_string(holders.size()) + " live: " + text;
  }
  if (global().json) print_json({{"now", now}});
  else std::cout << "now: " << text << "\n";
}

// --since: a time (2026-12-06T12:00:00Z, UTC, optional .mmm) or a duration
// before the database's now (30m, 1d).
std::int64_t since_ms(Connection& conn, const std::string& since) {
  if (since.empty()) return 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, ms = 0, n = 0;
  if (since.size() >= 20 && since[4] == '-' &&
      (std::sscanf(since.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &y, &mo, &d, &h, &mi, &s, &ms, &n) == 7 ||
       (ms = 0, std::sscanf(since.c_str(), "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h, &mi, &s, &n) == 6)) &&
      static_cast<std::size_t>(n) == since.size()) {
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    const std::time_t t = timegm(&tm);
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || t < 0 || format_db_time(t * 1000LL + ms) !=
        (since.find('.') == std::string::npos ? since.substr(0, 19) + ".000Z" : since))
      throw BadValue("--since", "'" + since + "' is not a UTC time like 2026-12-06T12:00:00Z");
    return t * 1000LL + ms;
  }
  const auto dur = duration_flag("--since", since, {milliseconds(1), std::chrono::hours(24 * 3650)});
  return std::max<std::int64_t>(0, conn.db_now_ms() - dur.count());
}
}  // namespace

void add_history(CLI::App& app) {
  struct Opts {
    std::string name, enable, disable, retain = "7d", since;
    bool enable_all = false, scopes = false;
    int limit = 1000;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "history", "Show a lock name's grant history, or choose which names are recorded (--enable PREFIX, --disable PREFIX, --scopes)");
  cmd->add_option("NAME", o->name, "The lock name whose record to show");
  cmd->add_option("--enable", o->enable, "Start recording the names that start with PREFIX");
  cmd->add_flag("--enable-all", o->enable_all, "Start recording every name");
  cmd->add_option("--disable", o->disable, "Stop recording PREFIX ('' for the scope --enable-all made)");
  cmd->add_option("--retain", o->retain, "With --enable / --enable-all: keep the scope's rows this long")->capture_default_str();
  cmd->add_flag("--scopes", o->scopes, "List the recorded prefixes");
  cmd->add_option("--since", o->since, "Only events from T (2026-12-06T12:00:00Z) or from D ago (30m; database clock)");
  cmd->add_option("--limit", o->limit, "At most N events (1..100000)")->capture_default_str()->check(whole_number(1, 100000));
  cmd->callback([o, cmd] {
    const bool disabling = cmd->count("--disable") > 0;
    const int modes = !o->name.empty() + (!o->enable.empty() || o->enable_all) + disabling + o->scopes;
    if (modes != 1) throw BadValue("history", "give exactly one of NAME, --enable PREFIX, --enable-all, --disable PREFIX, --scopes");
    if (!o->name.empty()) check_name_arg("NAME", o->name);
    if (!o->enable.empty()) check_name_arg("--enable", o->enable);
    if (disabling && !o->disable.empty()) check_name_arg("--disable", o->disable);
    const auto retain = duration_flag("--retain", o->retain, {std::chrono::minutes(1), std::chrono::hours(24 * 3650)});
    auto conn = open_db(existing_only());
    if (!o->enable.empty() || o->enable_all) {
      enable_history(*conn, o->enable, retain);
      if (global().json) print_json({{"enabled", o->enable}, {"retain_ms", retain.count()}});
      else std::cout << "history: recording " << (o->enable_all ? std::string("every name") : "names starting with '" + printable(o->enable) + "'")
                     << ", kept " << format_duration(retain) << "\n";
      return;
    }
    if (disabling) {
      const bool had = disable_history(*conn, o->disable);
      if (global().json) print_json({{"disabled", o->disable}, {"was_enabled", had}});
      else std::cout << "history: " << (had ? "stopped recording '" : "no scope '") << printable(o->disable) << "'\n";
      if (!had) exit_code() = kExitError;
      return;
    }
    if (o->scopes) {
      for (const auto& s : history_scopes(*conn)) {
        if (global().json)
          print_json({{"prefix", s.prefix}, {"retain_ms", s.retention.count()}, {"since", format_db_time(s.since_ms)}});
        else
          std::cout << (s.prefix.empty() ? std::string("(every name)") : "'" + printable(s.prefix) + "'") << "  kept "
                    << format_duration(s.retention) << "  since " << format_db_time(s.since_ms) << "\n";
      }
      return;
    }
    HistoryQuery q;
    q.name = o->name;
    q.since_ms = since_ms(*conn, o->since);
    q.limit = o->limit;
    const auto events = read_history(*conn, q);
    for (const auto& e : events) {
      if (global().json) print_json(to_json(e));
      else std::cout << line_of(e) << "\n";
    }
    print_now(*conn, o->name, events);
  });
}

void add_verify(CLI::App& app) {
  struct Opts {
    std::string since, name;
    int max = 10;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "verify", "Prove from the grant history that no two holdings of a name overlapped beyond what its kind allows; exit 4 naming the first violation");
  cmd->add_option("--since", o->since, "Only events from T (2026-12-06T12:00:00Z) or from D ago (30m; database clock)");
  cmd->add_option("--name", o->name, "Only names starting with P");
  cmd->add_option("--max", o->max, "Report at most N violations (1..10000)")->capture_default_str()->check(whole_number(1, 10000));
  cmd->callback([o] {
    if (!o->name.empty()) check_name_arg("--name", o->name);
    auto conn = open_db(existing_only());
    VerifyOptions vo;
    vo.prefix = o->name;
    vo.since_ms = since_ms(*conn, o->since);
    vo.max_violations = o->max;
    const auto r = verify_history(*conn, vo);
    if (global().json) {
      nlohmann::json v = nlohmann::json::array();
      for (const auto& x : r.violations) {
        nlohmann::json j = {{"name", x.name}, {"rule", x.rule}, {"detail", x.detail}, {"event", to_json(x.event)}};
        if (x.other) j["other"] = to_json(*x.other);
        v.push_back(j);
      }
      print_json({{"ok", r.ok()}, {"events", r.events}, {"names", r.names}, {"grants", r.grants}, {"takeovers", r.takeovers},
                  {"releases", r.releases}, {"renewal_gaps", r.renewal_gaps}, {"unmatched", r.unmatched}, {"violations", v}});
    } else {
      for (const auto& x : r.violations) std::cout << "VIOLATION " << x.rule << ": " << x.detail << "\n";
      std::cout << "verify: " << r.events << " event(s) of " << r.names << " name(s): " << r.grants << " grant(s), "
                << r.takeovers << " take-over(s), " << r.releases << " release(s), " << r.renewal_gaps
                << " late renewal(s), " << r.unmatched << " about holdings granted before the record; "
                << (r.ok() ? "no overlap" : std::to_string(r.violations.size()) + " violation(s) shown") << "\n";
    }
    if (!r.ok()) exit_code() = kExitInvariant;
  });
}

}  // namespace sqlguard::cli
