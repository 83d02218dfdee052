// Internal: minimal RFC 3986 parsing for scheme://user:pw@host:port/db?k=v.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace sqlguard::detail {

struct ParsedUri {
  std::string scheme;
  std::string user;
  std::string password;  // percent-decoded; never print it
  std::string host;
  int port = 0;  // 0 = not given
  std::string path;  // without the leading '/', percent-decoded
  std::map<std::string, std::string> query;
};

// Throws Error(kInvalidArgument) naming the masked URI when malformed.
ParsedUri parse_uri(std::string_view uri);

// Replaces every occurrence of `secret` (if non-empty) in `text` with ***.
std::string scrub(std::string text, const std::string& secret);

}  // namespace sqlguard::detail
