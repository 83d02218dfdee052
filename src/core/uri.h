// Internal: the ONE URI parser and masker. Every server dialect parses its
// URI here and hands its driver the parsed values, never the raw text, so a
// driver can never echo a piece of a password; every message that shows a
// URI shows mask_uri() of it (the implementation of the public mask_uri()
// is in uri.cpp too).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard::detail {

struct HostPort {
  std::string host;  // percent-decoded; IPv6 without brackets; may be a socket directory
  int port = 0;      // 0 = not given
};

struct ParsedUri {
  std::string scheme;
  std::string user;      // percent-decoded; not a secret: errors may name it
  std::string password;  // percent-decoded; never print it
  std::string userinfo;  // as written in the URI; never print it
  std::vector<HostPort> hosts;  // in order; empty = the driver's default
  std::string host;      // hosts[0].host, or ""
  int port = 0;          // hosts[0].port, or 0
  std::string path;      // without the leading '/', percent-decoded
  std::map<std::string, std::string> query;  // percent-decoded
};

// scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v&...].
// The userinfo ends at the LAST '@' of the authority (so an unencoded '@' in
// a password works); '/', '?' and '#' must be percent-encoded in it: an '@'
// after the authority, a '#', a bad or NUL percent-escape, an unclosed '['
// or a bad port is refused with Error(kInvalidArgument) showing only the
// masked URI.
ParsedUri parse_uri(std::string_view uri);

// One spelling of a URI per server, database, credentials and parameters:
// the key LockClient::shared() keeps its clients under. See uri.cpp.
std::string canonical_uri(std::string_view uri);

// `fragment` quoted for a message about `uri`, or "(masked)" when the masked
// URI does not show it (it may be part of a password).
std::string uri_fragment(std::string_view uri, std::string_view fragment);

// Removes the secrets of `u` from a driver's message: the password (decoded
// and as written) and the raw "user:password" userinfo wherever they appear.
// The user name stays (an auth error names the user it rejected). Short
// passwords (< 4 bytes) are only removed where quoted, so that messages stay
// readable.
std::string scrub_credentials(std::string text, const ParsedUri& u);

// The URI parameters sqlguard reads itself, removed from u.query:
// connect_timeout (whole seconds, 1..3600; the smaller of it and
// options.connect_timeout wins) and statement_cache_size (0..10000; the
// smaller wins). Error(kInvalidArgument) for a bad value, naming the
// parameter and the masked URI.
ConnectOptions take_connect_parameters(ParsedUri& u, std::string_view uri, const ConnectOptions& options);

}  // namespace sqlguard::detail
