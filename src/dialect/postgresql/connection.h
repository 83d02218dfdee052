// Internal: the PostgreSQL connection (libpqxx 6.4), built by factory.cpp.
#pragma once

#include <memory>
#include <string>

#include "core/uri.h"
#include "sqlguard/connection.h"

namespace sqlguard::detail {
// `conninfo` is the keyword/value string handed to libpq (never the raw
// URI); `uri` supplies the credentials scrubbed from every driver message;
// `description` is the masked URI. `pooler`: a transaction pooler is in the
// path (`?pooler=transaction`): no LISTEN, no named prepared statements (the
// caller passes statement_cache_size 0), the pooler variant of the dialect (polling waiters).
enum class PgPooler {
  kUndeclared,   // no ?pooler=: a pooler found at connect is refused
  kNone,         // ?pooler=none: the same, said explicitly
  kSession,      // ?pooler=session: a session pooler is accepted
  kTransaction,  // ?pooler=transaction
};
std::unique_ptr<Connection> make_pg_connection(std::string conninfo, ParsedUri uri, std::string description,
                                               const ConnectOptions& options, PgPooler pooler = PgPooler::kUndeclared);
}  // namespace sqlguard::detail
