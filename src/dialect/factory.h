// Internal: per-dialect connection factories. A dialect that was not compiled
// in has a stub that throws NotSupported (see CMakeLists.txt).
#pragma once

#include <memory>
#include <string_view>

#include "sqlguard/connection.h"

namespace sqlguard::detail {

extern const bool kHaveSqlite;
extern const bool kHavePostgres;
extern const bool kHaveMysql;

std::unique_ptr<Connection> open_sqlite(std::string_view uri, const ConnectOptions& options);
std::unique_ptr<Connection> open_postgres(std::string_view uri, const ConnectOptions& options);
std::unique_ptr<Connection> open_mysql(std::string_view uri, const ConnectOptions& options);

}  // namespace sqlguard::detail
