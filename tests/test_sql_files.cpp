// sql/<dialect>/statements.sql documents the exact statements sqlguard sends;
// this keeps it true (regenerate with tools/gen-sql.sh).
#include <catch2/catch.hpp>

#include <fstream>

#include "test_context.h"

using sgtest::ctx;

TEST_CASE("sql/<dialect>/statements.sql matches the statements sqlguard sends", "[sqlfiles]") {
  std::string out;
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--emit-sql"}, &out) == 0);
  std::string path = std::string(SQLGUARD_SOURCE_DIR) + "/sql/" + ctx().name + "/statements.sql";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("stale " << path << ": run tools/gen-sql.sh");
  CHECK(out == file);
}
