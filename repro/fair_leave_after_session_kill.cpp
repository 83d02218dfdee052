// Reproduction (not built by CMake): a fair waiter that gives up right after
// its lock client's sessions were killed does not leave the queue. Its
// place stays until place_ttl, and every later waiter of the name waits
// behind it although docs/synchronizers.md says "A waiter that gives up or
// is cancelled leaves at once".
//
// Why: ClientCore::leave_place (src/strategies/lease/client_core.cpp) runs
// fair_leave once on a borrowed work connection; after a session kill the
// pooled connection is dead, the DELETE fails ("leaving the queue of fair
// lease ... failed (the place expires by itself)") and is not retried on a
// fresh connection, while the other paths (fair_turn, fair_enqueue, acquire)
// go through with_reconnect.
//
// Build and run (PostgreSQL or MariaDB; terminate_sessions needs a server):
//   g++ -std=c++20 -I include repro/fair_leave_after_session_kill.cpp build/libsqlguard.so -o /tmp/repro_leave
//   LD_LIBRARY_PATH=build /tmp/repro_leave "$SQLGUARD_TEST_PG_URI"
// Expected: "the next waiter got the lease after ~0 ms". Seen: it waits
// about place_ttl (10 s here) for the abandoned place to expire.
#include <chrono>
#include <iostream>
#include <thread>

#include "sqlguard/admin.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/migrate.h"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: repro_leave URI\n";
    return 2;
  }
  const std::string uri = argv[1];
  sqlguard::set_log_hook([](sqlguard::LogLevel, std::string_view m) { std::cerr << "  log: " << m << "\n"; });
  auto admin = sqlguard::make_connection(uri);
  sqlguard::migrate(*admin);
  const std::string name = "repro_fair_leave_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  sqlguard::LeaseOptions o;
  o.ttl = 30s;
  o.fair = true;
  o.place_ttl = 10s;
  o.backoff_initial = 1s;
  o.backoff_max = 1s;
  auto a = sqlguard::LockClient::create(uri);
  auto b = sqlguard::LockClient::create(uri);
  sqlguard::LeaseLock holder(a, name, o), quitter(b, name, o);
  if (!holder.try_acquire()) return 3;
  auto gave_up = quitter.acquire_async(1500ms);  // takes its place, waits behind the holder
  // Kill the sessions after its last attempt (backoff_initial 1 s: it tries
  // at once, then once more within a second) and before it gives up.
  std::this_thread::sleep_for(1300ms);
  std::cerr << "killed " << sqlguard::admin::terminate_sessions(*admin) << " sqlguard sessions\n";
  std::cerr << "quitter acquired: " << gave_up.get() << " (gave up; it should have left the queue)\n";
  holder.release();  // the lease is free now
  auto c = sqlguard::LockClient::create(uri);
  sqlguard::LeaseLock next(c, name, o);
  const auto t0 = std::chrono::steady_clock::now();
  const bool got = next.acquire(20s);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "the next waiter " << (got ? "got the lease after " : "did not get the lease in ") << ms << " ms\n";
  if (got) next.release();
  return got && ms < 2000 ? 0 : 1;
}
