#include "core/uri.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>

#include "dialect/registry.h"
#include "sqlguard/errors.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {

bool is_scheme_token(std::string_view s) {
  if (s.empty() || s.size() > 32 || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  });
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Keys whose values are secrets, in URI queries and libpq keyword strings.
bool secret_key(std::string_view key) {
  std::string k = lower(key);
  for (std::string_view s : {"password", "passwd", "pwd"})
    if (k.size() >= s.size() && k.compare(k.size() - s.size(), s.size(), s) == 0) return true;
  return false;
}

// Masks the value of every `key=value` (URI query or libpq keyword form)
// whose key is a secret. A value ends at '&', ';', whitespace or the end (in
// free text, `quotes_end_values`, also at a quote);
// a quoted libpq value ('...' with \' escapes) at its closing quote.
void mask_secret_values(std::string& s, bool quotes_end_values) {
  std::size_t i = 0;
  while ((i = s.find('=', i)) != std::string::npos) {
    std::size_t kend = i;
    while (kend > 0 && s[kend - 1] == ' ') --kend;
    std::size_t kbeg = kend;
    while (kbeg > 0 && (std::isalnum(static_cast<unsigned char>(s[kbeg - 1])) || s[kbeg - 1] == '_' ||
                        s[kbeg - 1] == '-' || s[kbeg - 1] == '%'))
      --kbeg;
    std::size_t v = i + 1;
    if (kbeg == kend || !secret_key(std::string_view(s).substr(kbeg, kend - kbeg))) {
      i = v;
      continue;
    }
    while (v < s.size() && s[v] == ' ') ++v;
    if (quotes_end_values && s.compare(v, 3, "***") == 0) {
      // Masked already (a message quoting a masked URI, masked again on its
      // way out): the punctuation after it is the message's, not the
      // secret's ("...&password=***: connection refused" keeps its ": ").
      std::size_t e = v + 3;
      while (e < s.size() && (s[e] == ':' || s[e] == ',' || s[e] == '.' || s[e] == ')')) ++e;
      if (e == s.size() || std::isspace(static_cast<unsigned char>(s[e]))) {
        i = v + 3;
        continue;
      }
    }
    std::size_t vend = v;
    if (v < s.size() && s[v] == '\'') {
      vend = v + 1;
      while (vend < s.size() && s[vend] != '\'') vend += s[vend] == '\\' ? 2 : 1;
      vend = std::min(vend + 1, s.size());
    } else {
      // In free text a quote or backtick ends it too: a URI quoted in a
      // message keeps its closing quote. Not in one whole URI, whose query
      // may hold a raw quote inside a password.
      auto quote = [&](char c) { return quotes_end_values && (c == '\'' || c == '"' || c == '`'); };
      while (vend < s.size() && s[vend] != '&' && s[vend] != ';' && !quote(s[vend]) &&
             !std::isspace(static_cast<unsigned char>(s[vend])))
        ++vend;
    }
    s.replace(v, vend - v, "***");
    i = v + 3;
  }
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

namespace {
// Masks the userinfo of ONE URI-like string (all of `s`). `whole`: `s` is
// the entire input (not a URI quoted in a message), so "user:password"
// without an '@' is masked too.
void mask_one(std::string& s, bool whole) {
  auto colon = s.find(':');
  const std::string scheme = colon == std::string::npos ? "" : lower(s.substr(0, colon));
  const auto* dialect = is_scheme_token(scheme) ? detail::find_dialect_by_scheme(scheme) : nullptr;
  std::size_t start = colon == std::string::npos ? 0 : colon + 1;
  if (dialect && dialect->uri_is_path) {
    // A path, not an authority: only a relative path whose first segment
    // holds an '@' can be (mistaken) credentials.
    if (s.compare(start, 2, "//") == 0) start += 2;
    auto seg_end = s.find('/', start);
    auto at = s.rfind('@', seg_end == std::string::npos ? std::string::npos : seg_end);
    if (start < s.size() && s[start] != '/' && at != std::string::npos && at >= start) s.replace(start, at - start, "***");
    return;
  }
  const bool slashes = s.compare(start, 1, "/") == 0;
  if (!dialect && !slashes) start = 0;  // "user:pw@host" without a scheme: all of it may be userinfo
  while (start < s.size() && s[start] == '/') ++start;  // "scheme:/u:pw@" typos included
  auto at = s.rfind('@');
  if (at != std::string::npos && at >= start) {
    s.replace(start, at - start, "***");
  } else if (dialect && whole) {
    // No '@': "user:password" without a host still reads as host:port; a
    // non-numeric "port" is masked.
    auto auth_end = s.find_first_of("/?#", start);
    std::string_view auth = std::string_view(s).substr(start, auth_end == std::string::npos ? auth_end : auth_end - start);
    auto c = auth.find(':');
    if (c != std::string_view::npos && auth.find('[') == std::string_view::npos && !all_digits(auth.substr(c + 1)))
      s.replace(start + c + 1, auth.size() - c - 1, "***");
  }
}

bool has_space(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}
}  // namespace

std::string mask_uri(std::string_view uri) {
  std::string s(uri);
  auto colon = s.find(':');
  const std::string scheme = colon == std::string::npos ? "" : lower(s.substr(0, colon));
  const bool single = is_scheme_token(scheme) && (detail::find_dialect_by_scheme(scheme) || !has_space(s) ||
                                                   s.compare(colon, 3, "://") == 0);
  if (single) {
    // The text is one URI (what sqlguard masks before any driver sees it):
    // everything up to its last '@' may be userinfo, whatever it contains.
    mask_one(s, true);
  } else {
    // Free text (a message): mask each embedded "scheme://..." up to the
    // next space or quote.
    for (std::size_t p = s.find("://"); p != std::string::npos; p = s.find("://", p + 3)) {
      std::size_t b = p;
      while (b > 0 && (std::isalnum(static_cast<unsigned char>(s[b - 1])) || s[b - 1] == '+' || s[b - 1] == '-' ||
                       s[b - 1] == '.'))
        --b;
      if (b == p || !std::isalpha(static_cast<unsigned char>(s[b]))) continue;
      std::size_t e = p + 3;
      while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e])) && s[e] != '\'' && s[e] != '"' && s[e] != '`')
        ++e;
      std::string one = s.substr(b, e - b);
      mask_one(one, false);
      s.replace(b, e - b, one);
      p = b + one.size() - std::min<std::size_t>(one.size(), 3);
    }
  }
  mask_secret_values(s, !single);
  return s;
}

namespace detail {
namespace {

[[noreturn]] void bad(std::string_view uri, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "malformed database URI '" + mask_uri(uri) + "': " + why);
}

std::string decode(std::string_view s, std::string_view uri, std::string_view part) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int v = 0;
    auto [p, ec] = i + 2 < s.size() ? std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16)
                                    : std::from_chars_result{nullptr, std::errc::invalid_argument};
    if (ec != std::errc() || p != s.data() + i + 3)
      bad(uri, "invalid percent-escape in the " + std::string(part) + " (write a literal '%' as %25)");
    if (v == 0) bad(uri, "%00 (a NUL byte) in the " + std::string(part) + " is not allowed");
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

int parse_port(std::string_view port, std::string_view uri) {
  int n = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
  if (port.empty() || ec != std::errc() || p != port.data() + port.size())
    bad(uri, "port " + uri_fragment(uri, port) + " is not a number");
  if (n < 1 || n > 65535) bad(uri, "port " + std::string(port) + " is out of range (1..65535)");
  return n;
}

HostPort parse_host(std::string_view h, std::string_view uri) {
  HostPort out;
  if (!h.empty() && h.front() == '[') {
    auto close = h.find(']');
    if (close == std::string_view::npos) bad(uri, "unterminated [IPv6] host (a ']' is missing)");
    out.host = std::string(h.substr(1, close - 1));
    std::string_view tail = h.substr(close + 1);
    if (!tail.empty()) {
      if (tail.front() != ':') bad(uri, "junk after the [IPv6] host");
      out.port = parse_port(tail.substr(1), uri);
    }
    return out;
  }
  if (h.find_first_of("[]") != std::string_view::npos) bad(uri, "a '[' or ']' outside an [IPv6] host");
  auto colon = h.rfind(':');
  out.host = decode(h.substr(0, colon), uri, "host");
  if (colon != std::string_view::npos) out.port = parse_port(h.substr(colon + 1), uri);
  return out;
}

bool quoted_at(const std::string& text, std::size_t pos, std::size_t len) {
  if (pos == 0 || pos + len >= text.size()) return false;
  char a = text[pos - 1], b = text[pos + len];
  return (a == '\'' || a == '"' || a == '`') && a == b;
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80); }

// A whole token at `pos`: the secret is not the middle of a longer word (a
// password "sqlguard" inside the table name "sqlguard_fence_seq" is not the
// password, and masking it there would hide what the message is about).
bool token_at(const std::string& text, std::size_t pos, const std::string& secret) {
  // A secret with a symbol in it is no identifier's part: masked everywhere.
  if (!std::all_of(secret.begin(), secret.end(), word_char)) return true;
  const bool open_left = pos == 0 || !word_char(secret.front()) || !word_char(text[pos - 1]);
  const std::size_t end = pos + secret.size();
  const bool open_right = end >= text.size() || !word_char(secret.back()) || !word_char(text[end]);
  return open_left && open_right;
}

// Replaces `secret` in `text` with ***: wherever it stands as a token of its
// own, or only where quoted.
void scrub(std::string& text, const std::string& secret, bool only_quoted) {
  if (secret.empty()) return;
  std::size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    if (only_quoted ? !quoted_at(text, pos, secret.size()) : !token_at(text, pos, secret)) {
      pos += 1;
      continue;
    }
    text.replace(pos, secret.size(), "***");
    pos += 3;
  }
}

}  // namespace

ParsedUri parse_uri(std::string_view uri) {
  ParsedUri u;
  auto se = uri.find("://");
  auto colon = uri.find(':');
  if (se == std::string_view::npos || se == 0 || colon < se)
    bad(uri, "expected scheme://user:password@host:port/database");
  u.scheme = lower(uri.substr(0, se));
  std::string_view rest = uri.substr(se + 3);
  if (rest.find('#') != std::string_view::npos)
    bad(uri, "a '#' is not allowed (percent-encode it as %23, also inside a password)");
  // RFC 3986: the authority ends at the first '/' or '?'; inside it, the
  // userinfo ends at the last '@'.
  auto auth_end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, auth_end);
  std::string_view after = auth_end == std::string_view::npos ? std::string_view() : rest.substr(auth_end);
  auto qpos = after.find('?');
  std::string_view path = after.substr(0, qpos);
  std::string_view query = qpos == std::string_view::npos ? std::string_view() : after.substr(qpos + 1);
  if (path.find('@') != std::string_view::npos)
    bad(uri, "an '@' after the host: percent-encode '/', '?' and '#' in a password (%2F, %3F, %23)");
  auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view cred = authority.substr(0, at);
    u.userinfo = std::string(cred);
    auto c = cred.find(':');
    u.user = decode(cred.substr(0, c), uri, "user name");
    if (c != std::string_view::npos) u.password = decode(cred.substr(c + 1), uri, "password");
    authority = authority.substr(at + 1);
  }
  if (!authority.empty()) {
    std::size_t start = 0;
    for (;;) {
      auto comma = authority.find(',', start);
      std::string_view one = authority.substr(start, comma == std::string_view::npos ? comma : comma - start);
      if (one.empty()) bad(uri, "an empty host in the host list");
      u.hosts.push_back(parse_host(one, uri));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    u.host = u.hosts[0].host;
    u.port = u.hosts[0].port;
  }
  if (!path.empty()) u.path = decode(path.substr(1), uri, "database name");
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    if (!kv.empty()) {
      auto eq = kv.find('=');
      if (eq == std::string_view::npos) bad(uri, "query parameter " + uri_fragment(uri, kv) + " has no '='");
      std::string key = decode(kv.substr(0, eq), uri, "query");
      // Refused rather than "the last one wins": which one the writer meant
      // is not ours to guess (and a driver might take the first).
      if (u.query.count(key))
        bad(uri, "query parameter " + uri_fragment(uri, key) + " is given twice; give it once");
      u.query[std::move(key)] = decode(kv.substr(eq + 1), uri, "query");
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return u;
}

namespace {
// Every byte outside RFC 3986's unreserved set percent-encoded: one spelling
// per decoded value, and no separator can appear inside one.
std::string encoded(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}
}  // namespace

// Only what provably names the same server, database, credentials and
// parameters is made one: the scheme's aliases (postgres, mariadb,
// sqlite3), percent-encoding, the order of the parameters and an empty
// query ('?', '&' left over), a host name's case (DNS names and IPv6
// addresses; not a socket directory), and the dialect's default port
// written out when the URI has none (PostgreSQL: unless PGPORT is set,
// which libpq would use). Not `localhost` and 127.0.0.1: libpq resolves
// localhost (::1 may come first: another listener can own it) and the
// MySQL client library may take localhost for its Unix socket.
std::string canonical_uri(std::string_view uri) {
  const auto colon = uri.find(':');
  const auto* d = colon == std::string_view::npos ? nullptr : detail::find_dialect_by_scheme(lower(uri.substr(0, colon)));
  if (!d) return std::string(uri);
  std::string out(d->name);
  if (d->uri_is_path) {
    // The file path as the dialect opens it: sqlite:p and sqlite://p are one.
    std::string_view rest = uri.substr(colon + 1);
    if (rest.substr(0, 2) == "//") rest.remove_prefix(2);
    return out + ":" + std::string(rest);
  }
  const ParsedUri u = parse_uri(uri);
  out += "://";
  if (!u.userinfo.empty()) {
    out += encoded(u.user);
    if (u.userinfo.find(':') != std::string::npos) out += ":" + encoded(u.password);
    out += "@";
  }
  int default_port = d->default_port;
  if (const char* env = d->port_env ? std::getenv(d->port_env) : nullptr; env && *env) default_port = 0;
  for (std::size_t i = 0; i < u.hosts.size(); ++i) {
    const HostPort& h = u.hosts[i];
    out += i ? "," : "";
    out += "[" + encoded(!h.host.empty() && h.host.front() == '/' ? h.host : lower(h.host)) + "]";
    if (const int port = h.port ? h.port : default_port) out += ":" + std::to_string(port);
  }
  out += "/" + encoded(u.path);
  char sep = '?';
  for (const auto& [k, v] : u.query) {  // a std::map: in key order
    out += sep + encoded(k) + "=" + encoded(v);
    sep = '&';
  }
  return out;
}

std::string uri_fragment(std::string_view uri, std::string_view fragment) {
  if (fragment.empty() || mask_uri(uri).find(fragment) == std::string::npos) return "(masked)";
  return "'" + printable(fragment, 80) + "'";
}

std::string scrub_credentials(std::string text, const ParsedUri& u) {
  // The user name is not a secret: "password authentication failed for
  // user \"app\"" keeps it, as the message is useless without it. The raw
  // userinfo goes only when it holds a password ("app:pw").
  const bool has_password = u.userinfo.find(':') != std::string::npos;
  if (has_password) scrub(text, u.userinfo, false);
  scrub(text, u.password, u.password.size() < 4);
  std::string raw_password = has_password ? u.userinfo.substr(u.userinfo.find(':') + 1) : "";
  if (raw_password != u.password) scrub(text, raw_password, raw_password.size() < 4);
  for (const auto& [k, v] : u.query)
    if (secret_key(k)) scrub(text, v, v.size() < 4);
  return text;
}

ConnectOptions take_connect_parameters(ParsedUri& u, std::string_view uri, const ConnectOptions& options) {
  ConnectOptions o = options;
  auto number = [&](const char* key, long long min, long long max) -> std::optional<long long> {
    auto it = u.query.find(key);
    if (it == u.query.end()) return std::nullopt;
    long long n = 0;
    const std::string& v = it->second;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n < min || n > max)
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("URI parameter ") + key + "=" + uri_fragment(uri, v) + " in '" + mask_uri(uri) +
                      "' must be a whole number in " + std::to_string(min) + ".." + std::to_string(max) +
                      (std::string_view(key) == "connect_timeout" || std::string_view(key) == "io_timeout"
                           ? " (seconds; 0 or a negative value would mean \"wait forever\")"
                           : ""));
    u.query.erase(it);
    return n;
  };
  if (auto secs = number("connect_timeout", 1, 3600))
    o.connect_timeout = std::min<std::chrono::milliseconds>(o.connect_timeout, std::chrono::seconds(*secs));
  if (auto secs = number("io_timeout", 1, 86400)) {
    const std::chrono::milliseconds t = std::chrono::seconds(*secs);
    o.io_timeout = o.io_timeout ? std::min(*o.io_timeout, t) : t;
  }
  if (auto n = number("statement_cache_size", 0, 10000))
    o.statement_cache_size = std::min<std::size_t>(o.statement_cache_size, static_cast<std::size_t>(*n));
  return o;
}

}  // namespace detail
}  // namespace sqlguard
