// Internal: the MySQL / MariaDB connection (mysqlcppconn 1.1), built by factory.cpp.
#pragma once

#include <memory>
#include <string>

#include "core/uri.h"
#include "sqlguard/connection.h"

namespace sqlguard::detail {
std::unique_ptr<Connection> make_mysql_connection(ParsedUri uri, std::string description, const ConnectOptions& options);
}  // namespace sqlguard::detail
