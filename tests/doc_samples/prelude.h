// tests/doc_samples/run.sh: what every documentation fragment can use.
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sqlguard/connection.h>
#include <sqlguard/fenced_write.h>
#include <sqlguard/idempotency.h>
#include <sqlguard/inbox.h>
#include <sqlguard/leader.h>
#include <sqlguard/lease_lock.h>
#include <sqlguard/lock_client.h>
#include <sqlguard/migrate.h>
#include <sqlguard/pool.h>
#include <sqlguard/row_lock.h>
#include <sqlguard/transition.h>
#include <sqlguard/version_cas.h>

using namespace std::chrono_literals;
