// The doctor's `engine` check recognises distributed SQL engines from what
// they report about themselves (core/engines.h). The engines are not
// available here: these are version strings captured from their
// documentation and release notes (sources in docs/distributed-sql.md),
// with plain PostgreSQL and MariaDB/MySQL strings as the negative control.
#include <catch2/catch.hpp>

#include "core/engines.h"

using sqlguard::detail::detect_distributed_engine;

namespace {

std::string engine_of(std::string_view dialect, std::string_view text) {
  auto found = detect_distributed_engine(dialect, text);
  return found ? found->engine : "";
}

}  // namespace

TEST_CASE("engines speaking the PostgreSQL protocol are named from version() and the extensions", "[doctor][engines]") {
  CHECK(engine_of("postgresql", "CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu, built 2023/09/27 01:53:43, "
                                "go1.19.13) ") == "CockroachDB");
  CHECK(engine_of("postgresql", "PostgreSQL 11.2-YB-2.18.3.0-b0 on x86_64-pc-linux-gnu, compiled by clang version "
                                "15.0.3, 64-bit ") == "YugabyteDB");
  CHECK(engine_of("postgresql", "PostgreSQL 15.4 on x86_64-pc-linux-gnu, compiled by gcc 11.4.0, 64-bit "
                                "citus 12.1-1, plpgsql 1.0") == "Citus");
  auto yb = detect_distributed_engine("postgresql", "PostgreSQL 11.2-YB-2.20.1.0-b97 on x86_64-pc-linux-gnu");
  REQUIRE(yb);
  CHECK(yb->version == "11.2-YB-2.20.1.0-b97");
  CHECK(yb->reasons.find("sequence values") != std::string::npos);
  CHECK(yb->reasons.find("clock") != std::string::npos);
  auto crdb = detect_distributed_engine("postgresql", "CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu)");
  REQUIRE(crdb);
  CHECK(crdb->reasons.find("advisory-lock functions") != std::string::npos);
}

TEST_CASE("engines speaking the MySQL protocol are named from VERSION() and @@version_comment", "[doctor][engines]") {
  CHECK(engine_of("mysql", "8.0.11-TiDB-v7.5.0 TiDB Server (Apache License 2.0) Community Edition, MySQL 8.0 "
                           "compatible") == "TiDB");
  CHECK(engine_of("mysql", "5.7.25-TiDB-v6.5.0 ") == "TiDB");
  CHECK(engine_of("mysql", "8.0.30-Vitess Version: 17.0.0 (Git revision 5d4a2a4 branch 'HEAD')") == "Vitess");
  CHECK(engine_of("mysql", "5.7.9-vitess-10.0.0 Version: 10.0.0") == "Vitess");
  auto tidb = detect_distributed_engine("mysql", "8.0.11-TiDB-v7.5.0 TiDB Server");
  REQUIRE(tidb);
  CHECK(tidb->reasons.find("SKIP LOCKED") != std::string::npos);
}

TEST_CASE("plain PostgreSQL, MariaDB and MySQL are not flagged (negative control)", "[doctor][engines]") {
  CHECK_FALSE(detect_distributed_engine("postgresql", "PostgreSQL 15.5 (Debian 15.5-0+deb12u1) on "
                                                      "x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) "
                                                      "12.2.0, 64-bit plpgsql 1.0"));
  CHECK_FALSE(detect_distributed_engine("postgresql", "PostgreSQL 16.1 on aarch64-unknown-linux-gnu, 64-bit "
                                                      "pg_stat_statements 1.10, pgcrypto 1.3, plpgsql 1.0"));
  CHECK_FALSE(detect_distributed_engine("mysql", "10.11.6-MariaDB-0+deb12u1 Debian 12"));
  CHECK_FALSE(detect_distributed_engine("mysql", "8.0.35 MySQL Community Server - GPL"));
  // An engine's string under the other protocol is not that engine.
  CHECK_FALSE(detect_distributed_engine("postgresql", "8.0.11-TiDB-v7.5.0"));
  CHECK_FALSE(detect_distributed_engine("mysql", "CockroachDB CCL v23.1.11"));
  CHECK_FALSE(detect_distributed_engine("sqlite", "3.40.1"));
}
