// PostgreSQL: URI -> libpq keyword/value connection string, and the registry
// entry. libpq never sees the raw URI: it gets the values sqlguard parsed
// (core/uri.h), quoted, so nothing it echoes can carry a piece of a password
// that a malformed URI put in the host or database part.
#include <libpq-fe.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "core/uri.h"
#include "dialect/postgresql/connection.h"
#include "dialect/registry.h"

namespace sqlguard {
namespace detail {
namespace {

// The keywords this libpq accepts (PQconndefaults), read once.
const std::set<std::string>& libpq_keywords() {
  static const std::set<std::string> keywords = [] {
    std::set<std::string> out;
    if (PQconninfoOption* opts = PQconndefaults()) {
      for (auto* o = opts; o->keyword; ++o) out.insert(o->keyword);
      PQconninfoFree(opts);
    }
    return out;
  }();
  return keywords;
}

// A conninfo value: single-quoted, with \ and ' escaped.
std::string quoted(std::string_view v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

// libpq connection parameters whose values are a fixed set: refused here
// with the allowed values (libpq's own refusal comes from PQconnectStart
// without a SQLSTATE, and read as an unreachable server).
void check_enumerated_keyword(std::string_view key, const std::string& value, std::string_view uri) {
  static const std::pair<const char*, std::vector<const char*>> kEnums[] = {
      {"sslmode", {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}},
      {"gssencmode", {"disable", "prefer", "require"}},
      {"channel_binding", {"disable", "prefer", "require"}},
      {"target_session_attrs", {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}},
  };
  for (const auto& [k, allowed] : kEnums) {
    if (key != k) continue;
    std::string list;
    for (const char* a : allowed) {
      if (value == a) return;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    throw Error(ErrorCode::kInvalidArgument,
                "URI parameter " + std::string(key) + "=" + uri_fragment(uri, value) + " in '" + mask_uri(uri) +
                    "' must be one of: " + list,
                "postgresql");
  }
}

std::string build_conninfo(const ParsedUri& u, std::string_view uri, const ConnectOptions& o) {
  std::string ci;
  auto add = [&](std::string_view k, std::string_view v) {
    ci += (ci.empty() ? "" : " ") + std::string(k) + "=" + quoted(v);
  };
  if (!u.hosts.empty()) {
    std::string hosts, ports;
    bool any_port = false;
    for (std::size_t i = 0; i < u.hosts.size(); ++i) {
      hosts += (i ? "," : "") + u.hosts[i].host;
      ports += (i ? "," : "") + (u.hosts[i].port ? std::to_string(u.hosts[i].port) : "");
      any_port = any_port || u.hosts[i].port;
    }
    add("host", hosts);
    if (any_port) add("port", ports);
  }
  if (!u.path.empty()) add("dbname", u.path);
  if (!u.user.empty()) add("user", u.user);
  if (!u.password.empty()) add("password", u.password);
  const auto& known = libpq_keywords();
  for (const auto& [k, v] : u.query) {
    if (!known.empty() && !known.count(k))
      throw Error(ErrorCode::kInvalidArgument,
                  "malformed PostgreSQL URI '" + mask_uri(uri) + "': unknown connection parameter " +
                      uri_fragment(uri, k) + " (query parameters are libpq keywords, plus sqlguard's "
                      "connect_timeout, io_timeout, statement_cache_size and pooler)",
                  "postgresql");
    check_enumerated_keyword(k, v, uri);
    add(k, v);
  }
  if (!u.query.count("application_name")) add("application_name", "sqlguard");
  // With an I/O deadline, the kernel also detects a dead peer or a black
  // hole in about that time (keepalives; tcp_user_timeout bounds unacked
  // data), unless the URI sets these itself. A frozen peer whose kernel
  // still acknowledges is caught by the client-side deadline (connection.cpp).
  if (o.io_timeout) {
    const long long ms = o.io_timeout->count();
    const long long idle_s = std::max<long long>(1, ms / 2000);
    const std::pair<const char*, std::string> tcp[] = {
        {"keepalives", "1"},
        {"keepalives_idle", std::to_string(idle_s)},
        {"keepalives_interval", "1"},
        {"keepalives_count", "3"},
        {"tcp_user_timeout", std::to_string(ms)},
    };
    for (const auto& [k, v] : tcp)
      if (!u.query.count(k) && (known.empty() || known.count(k))) add(k, v);
  }
  // Read by sqlguard's own connect loop (connection.cpp), whole seconds.
  add("connect_timeout", std::to_string(std::max<long long>(1, (o.connect_timeout.count() + 999) / 1000)));
  return ci;
}

// `?pooler=transaction`: a transaction-pooling proxy (PgBouncer pool_mode =
// transaction) is between sqlguard and the server, so the connection keeps no
// session state (connection.cpp). `?pooler=session` accepts a session
// pooler found at connect; without it (or with `none`) a pooler in the path
// is refused at connect. Removed from the query: libpq does not know it.
PgPooler take_pooler_parameter(ParsedUri& u, std::string_view uri) {
  auto it = u.query.find("pooler");
  if (it == u.query.end()) return PgPooler::kUndeclared;
  const std::string v = it->second;
  if (v != "transaction" && v != "session" && v != "none")
    throw Error(ErrorCode::kInvalidArgument,
                "URI parameter pooler=" + uri_fragment(uri, v) + " in '" + mask_uri(uri) +
                    "' must be transaction, session or none",
                "postgresql");
  u.query.erase(it);
  return v == "transaction" ? PgPooler::kTransaction : v == "session" ? PgPooler::kSession : PgPooler::kNone;
}

std::unique_ptr<Connection> open_postgresql(std::string_view uri, const ConnectOptions& options) {
  ParsedUri u = parse_uri(uri);
  ConnectOptions o = take_connect_parameters(u, uri, options);
  const PgPooler pooler = take_pooler_parameter(u, uri);
  // The unnamed statement only: named prepared statements live in a server
  // session, which a transaction pooler hands to other clients.
  if (pooler == PgPooler::kTransaction) o.statement_cache_size = 0;
  std::string conninfo = build_conninfo(u, uri, o);
  return make_pg_connection(std::move(conninfo), std::move(u), mask_uri(uri), o, pooler);
}
}  // namespace

void postgresql_doctor(DoctorContext& ctx);  // doctor.cpp
extern const DialectEntry kPostgresqlDialect{"postgresql", {"postgresql", "postgres"}, "postgresql://host:port/db", true, &open_postgresql, &postgresql_doctor,
                                      /*uri_is_path=*/false, nullptr, /*default_port=*/5432, /*port_env=*/"PGPORT"};
}  // namespace detail


}  // namespace sqlguard
