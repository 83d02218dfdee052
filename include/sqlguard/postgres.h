// sqlguard/postgres.h — the former name of sqlguard/postgresql.h (the
// dialect is spelled "postgresql" everywhere); kept so existing code builds.
#pragma once

#include "sqlguard/postgresql.h"

namespace sqlguard {
namespace postgres = postgresql;  // deprecated: use sqlguard::postgresql
}  // namespace sqlguard
