// Internal: the PostgreSQL connection (libpqxx 6.4), built by factory.cpp.
#pragma once

#include <memory>
#include <string>

#include "sqlguard/connection.h"

namespace sqlguard::detail {
// `connstr` is handed to libpq as is; `password` is scrubbed from every driver
// message; `description` is the masked URI.
std::unique_ptr<Connection> make_pg_connection(std::string connstr, std::string password, std::string description);
}  // namespace sqlguard::detail
