#include <sqlguard/connection.h>
#include <sqlguard/migrate.h>

#include <iostream>

int main() {
  auto conn = sqlguard::make_connection("sqlite::memory:");
  auto report = sqlguard::migrate(*conn);
  std::cout << "consumer: applied " << report.applied_now.size() << " migrations on "
            << sqlguard::to_string(conn->kind()) << "\n";
  return report.applied_now.empty() ? 1 : 0;
}
