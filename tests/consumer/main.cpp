// A downstream program built against an INSTALLED sqlguard (three ways: CMake
// find_package, find_package with the prometheus component, pkg-config; see
// run_consumer_test.cmake): opens SQLite, migrates, takes and releases a lease.
#include <sqlguard/connection.h>
#include <sqlguard/lease_lock.h>
#include <sqlguard/migrate.h>
#ifdef CONSUMER_PROMETHEUS
#include <sqlguard/prometheus.h>
#endif

#include <chrono>
#include <exception>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const std::string me = argc > 1 ? argv[1] : "consumer";
  try {
    auto conn = sqlguard::make_connection("sqlite::memory:");
    auto report = sqlguard::migrate(*conn);
    sqlguard::LeaseOptions options;
    options.ttl = 30s;
    sqlguard::LeaseLock lease(*conn, "consumer-job", options);
    if (!lease.try_acquire()) {
      std::cerr << me << ": lease not acquired\n";
      return 1;
    }
    const auto fence = lease.fence();
    if (!lease.release()) {
      std::cerr << me << ": release failed\n";
      return 1;
    }
    std::cout << me << ": C++ " << __cplusplus << ", applied " << report.applied_now.size() << " migrations on "
              << sqlguard::to_string(conn->kind()) << ", lease fence " << fence;
#ifdef CONSUMER_PROMETHEUS
    const std::string text = sqlguard::prometheus_text();
    if (text.find("sqlguard_") == std::string::npos) {
      std::cerr << me << ": no sqlguard metrics in the exposition\n";
      return 1;
    }
    std::cout << ", " << text.size() << " bytes of Prometheus text";
#endif
    std::cout << "\n";
    return report.applied_now.empty() || fence <= 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << me << ": " << e.what() << "\n";
    return 1;
  }
}
