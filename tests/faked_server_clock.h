// The test server's wall clock under libfaketime (tools/dbservers.sh).
#pragma once

#include <string>

#include "test_context.h"
#include "test_helpers.h"

namespace sgtest {

// The test server's wall clock under libfaketime: on construction the
// server (pg or mariadb, by the dialect under test) is restarted under it
// (`SQLGUARD_SERVER_CLOCK=faketime tools/dbservers.sh restart`), its offset
// 0; step_to() moves it (`tools/dbservers.sh clock`); on destruction it is
// set back and the server restarted on its real clock. Server dialects
// only: SQLGUARD_DBSERVERS (tools/test.sh sets it) must name the script.
class FakedServerClock {
 public:
  FakedServerClock() : script_(required_env("SQLGUARD_DBSERVERS")) {
    target_ = ctx().is(sqlguard::DialectKind::kPostgresql) ? "pg" : "mariadb";
    const int rc = run_process({"/bin/bash", script_, "restart", target_}, nullptr, {"SQLGUARD_SERVER_CLOCK=faketime"});
    // (A failed constructor runs no destructor: put the real clock back here.)
    if (rc != 0) run_process({"/bin/bash", script_, "restart", target_}, nullptr, {"SQLGUARD_SERVER_CLOCK=real"});
    REQUIRE(rc == 0);
  }
  ~FakedServerClock() {
    run_process({"/bin/bash", script_, "clock", target_, "0"});
    run_process({"/bin/bash", script_, "restart", target_}, nullptr, {"SQLGUARD_SERVER_CLOCK=real"});
  }
  FakedServerClock(const FakedServerClock&) = delete;
  FakedServerClock& operator=(const FakedServerClock&) = delete;
  // "+30s", "-1h", "0": from the real time.
  void step_to(const std::string& offset) {
    REQUIRE(run_process({"/bin/bash", script_, "clock", target_, offset}) == 0);
  }

 private:
  std::string script_, target_;
};

}  // namespace sgtest
