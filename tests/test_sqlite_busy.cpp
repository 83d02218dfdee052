// SQLite's write lock: a busy writer waits in sqlguard's busy handler, which
// the holder's end of transaction wakes through the wake-up file beside the
// database (src/dialect/sqlite/connection.cpp, set_busy_timeout), within its
// busy timeout; a writer that is not sqlguard's is waited out too.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <thread>

#include "sqlguard/connection.h"
#include "test_context.h"

#ifdef SQLGUARD_TEST_SQLITE
#include <sqlite3.h>

#include "sqlguard/sqlite.h"

using namespace sqlguard;
using sgtest::ctx;
using namespace std::chrono_literals;
using std::chrono::steady_clock;

namespace {

// A database file of its own (no migrations needed: the write lock is the
// database's), removed with its side files.
struct ScratchDb {
  std::string path;
  ScratchDb() {
    static std::atomic<int> n{0};
    path = (std::filesystem::temp_directory_path() /
            ("sg-busy-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".db"))
               .string();
  }
  ~ScratchDb() {
    for (const auto* suffix : {"", "-wal", "-shm", "-sqlguard-wake"}) std::filesystem::remove(path + suffix);
  }
  std::unique_ptr<Connection> connect(std::chrono::milliseconds busy = 5s) const {
    ConnectOptions o;
    o.busy_timeout = busy;
    return make_connection("sqlite://" + path, o);
  }
};

// The write lock's words of the wake-up file, as every process maps them:
// after the 4096 channel words, the release counter and the sleepers' count.
struct WriteWords {
  std::uint32_t* words = nullptr;
  std::size_t size = 0;
  explicit WriteWords(const std::string& db) {
    const int fd = ::open((db + "-sqlguard-wake").c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    size = (4096 + 3) * sizeof(std::uint32_t);
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    REQUIRE(m != MAP_FAILED);
    words = static_cast<std::uint32_t*>(m);
  }
  ~WriteWords() {
    if (words) ::munmap(words, size);
  }
  std::uint32_t ended() const { return __atomic_load_n(words + 4096, __ATOMIC_SEQ_CST); }
  std::uint32_t sleepers() const { return __atomic_load_n(words + 4097, __ATOMIC_SEQ_CST); }
};

// The error f throws (code kInternal and an empty message when it throws none).
struct Thrown {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};
template <class F>
Thrown thrown_by(F&& f) {
  Thrown t;
  try {
    f();
  } catch (const Error& e) {
    t.code = e.code();
    t.message = e.what();
  }
  return t;
}

// Two writers of a scratch database, both with the default busy timeout;
// none on another dialect (the case has nothing to do there).
struct TwoWriters {
  ScratchDb db;
  std::unique_ptr<Connection> a = db.connect();
  std::unique_ptr<Connection> b = db.connect();
};
std::unique_ptr<TwoWriters> sqlite_writers() {
  if (!ctx().is_sqlite()) {
    SUCCEED("SQLite only");
    return nullptr;
  }
  return std::make_unique<TwoWriters>();
}

long long ms_since(steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("a SQLite writer waits for the write lock until its holder ends, and no longer than its busy timeout",
          "[sqlite-busy]") {
  auto w = sqlite_writers();
  if (!w) return;
  auto& [db, a, b] = *w;
  CHECK(sqlite::busy_timeout(*b) == 5s);
  // The wait is sqlguard's handler: SQLite's own timeout reads 0.
  CHECK(b->execute("PRAGMA busy_timeout").rows.at(0).cells.at(0).as_int() == 0);

  // Held 300 ms, then committed: the waiting writer goes on, after the commit.
  a->begin();
  std::atomic<bool> committed{false};
  std::thread holder([&] {
    std::this_thread::sleep_for(300ms);
    committed = true;
    a->commit();
  });
  const auto t0 = steady_clock::now();
  const auto got_b = thrown_by([&] { b->begin(); });
  const auto waited = ms_since(t0);
  holder.join();
  CHECK(got_b.message == "");
  CHECK(committed.load());
  CHECK(waited >= 250);
  if (b->in_transaction()) b->rollback();

  // Past its busy timeout a writer gets LockBusy, the holder keeps the lock.
  auto c = db.connect(200ms);
  CHECK(sqlite::busy_timeout(*c) == 200ms);
  a->begin();
  const auto t1 = steady_clock::now();
  auto got = thrown_by([&] { c->begin(); });
  const auto gave_up = ms_since(t1);
  CHECK(got.code == ErrorCode::kLockBusy);
  CHECK(gave_up >= 150);
  CHECK(gave_up < 3000);
  CHECK(a->in_transaction());
  a->rollback();
  CHECK_FALSE(c->in_transaction());
  c->begin();  // free again
  c->rollback();
}

TEST_CASE("a SQLite writer's end of transaction is told through the wake-up file: the waiting writer sleeps on it",
          "[sqlite-busy]") {
  auto w = sqlite_writers();
  if (!w) return;
  auto& [db, a, b] = *w;
  WriteWords words(db.path);
  a->begin();
  std::atomic<bool> done{false};
  Thrown got_b;
  std::thread waiter([&] {
    got_b = thrown_by([&] { b->begin(); });
    done = true;
  });
  // The waiting writer counts itself a sleeper on the release counter.
  const auto t0 = steady_clock::now();
  while (words.sleepers() == 0 && ms_since(t0) < 5000) std::this_thread::sleep_for(1ms);
  CHECK(words.sleepers() >= 1);
  CHECK_FALSE(done.load());
  const auto before = words.ended();
  a->commit();  // bumps the counter and wakes it
  CHECK(words.ended() != before);
  waiter.join();
  CHECK(got_b.message == "");
  CHECK(words.sleepers() == 0);
  // A write outside a transaction bumps it too (it was its own transaction).
  if (b->in_transaction()) b->rollback();
  const auto before_write = words.ended();
  b->execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)");
  b->execute("INSERT INTO t VALUES (1)");
  CHECK(words.ended() != before_write);
  // Reads do not.
  const auto before_read = words.ended();
  b->execute("SELECT count(*) FROM t");
  CHECK(words.ended() == before_read);
}

TEST_CASE("a SQLite writer outside sqlguard, which bumps nothing, is waited out too", "[sqlite-busy]") {
  if (!ctx().is_sqlite()) {
    SUCCEED("SQLite only");
    return;
  }
  ScratchDb db;
  auto b = db.connect();  // creates the file (WAL)
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open_v2(db.path.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_exec(raw, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  std::thread holder([&] {
    std::this_thread::sleep_for(200ms);
    sqlite3_exec(raw, "COMMIT", nullptr, nullptr, nullptr);
  });
  const auto t0 = steady_clock::now();
  const auto got_b = thrown_by([&] { b->begin(); });  // its naps end; the lock is free once the raw connection commits
  const auto waited = ms_since(t0);
  holder.join();
  CHECK(got_b.message == "");
  CHECK(waited >= 150);
  CHECK(waited < 4000);
  if (b->in_transaction()) b->rollback();
  sqlite3_close(raw);
}

TEST_CASE("sqlite::busy_timeout refuses a connection of another dialect", "[sqlite-busy]") {
  if (ctx().is_sqlite()) {
    auto c = ctx().connect();
    CHECK(sqlite::busy_timeout(*c) == ConnectOptions{}.busy_timeout);
    return;
  }
  auto c = ctx().connect();
  auto got = thrown_by([&] { sqlite::busy_timeout(*c); });
  CHECK(got.code == ErrorCode::kInvalidArgument);
  CHECK_THAT(got.message, Catch::Contains(ctx().name));
}

#endif
