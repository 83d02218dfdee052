#include "core/uri.h"

#include <charconv>

#include "sqlguard/connection.h"
#include "sqlguard/errors.h"

namespace sqlguard::detail {
namespace {
[[noreturn]] void bad(std::string_view uri, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "malformed database URI '" + mask_uri(uri) + "': " + why);
}

std::string decode(std::string_view s, std::string_view uri) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) bad(uri, "truncated percent-escape");
      int v = 0;
      auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
      if (ec != std::errc() || p != s.data() + i + 3) bad(uri, "invalid percent-escape");
      out += static_cast<char>(v);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}
}  // namespace

ParsedUri parse_uri(std::string_view uri) {
  ParsedUri u;
  auto se = uri.find("://");
  if (se == std::string_view::npos || se == 0) bad(uri, "expected scheme://");
  u.scheme = std::string(uri.substr(0, se));
  std::string_view rest = uri.substr(se + 3);
  auto qpos = rest.find('?');
  std::string_view query = qpos == std::string_view::npos ? std::string_view() : rest.substr(qpos + 1);
  rest = rest.substr(0, qpos);
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) u.path = decode(rest.substr(slash + 1), uri);
  auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view cred = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto colon = cred.find(':');
    u.user = decode(cred.substr(0, colon), uri);
    if (colon != std::string_view::npos) u.password = decode(cred.substr(colon + 1), uri);
  }
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) bad(uri, "unterminated [IPv6] host");
    u.host = std::string(authority.substr(1, close - 1));
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') bad(uri, "junk after [IPv6] host");
    if (!authority.empty()) authority = authority.substr(1);
    else authority = {};
    if (!authority.empty()) {
      auto [p, ec] = std::from_chars(authority.data(), authority.data() + authority.size(), u.port);
      if (ec != std::errc() || p != authority.data() + authority.size()) bad(uri, "port is not a number");
    }
  } else {
    auto colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      std::string_view port = authority.substr(colon + 1);
      auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), u.port);
      if (port.empty() || ec != std::errc() || p != port.data() + port.size()) bad(uri, "port is not a number");
    }
  }
  if (u.port < 0 || u.port > 65535) bad(uri, "port out of range");
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) bad(uri, "query parameter without '='");
    u.query[decode(kv.substr(0, eq), uri)] = decode(kv.substr(eq + 1), uri);
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return u;
}

std::string scrub(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  std::size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    text.replace(pos, secret.size(), "***");
    pos += 3;
  }
  return text;
}

}  // namespace sqlguard::detail
