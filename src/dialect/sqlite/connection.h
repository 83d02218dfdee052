// Internal: the SQLite connection, built by factory.cpp.
#pragma once

#include <memory>
#include <string>

#include "sqlguard/connection.h"

namespace sqlguard::detail {
// `path` is a file path or ":memory:"; `description` is what messages name.
std::unique_ptr<Connection> make_sqlite_connection(std::string path, std::string description, const ConnectOptions& options);
}  // namespace sqlguard::detail
