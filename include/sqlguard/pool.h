// sqlguard/pool.h — a thread-safe pool of connections to one database URI.
//
// Connections are not thread-safe (connection.h); a Pool is how threads
// share sqlguard: each thread borrows a connection, uses it alone, and the
// lease gives it back when it goes out of scope.
//
//   sqlguard::Pool pool("postgresql://app:pw@db/app", {.max_size = 16});
//   {
//     auto conn = pool.borrow();          // waits up to options.borrow_timeout
//     sqlguard::IdempotencyKeys keys(*conn, ...);
//     ...
//   }                                      // returned (or discarded) here
//
// Contract:
//  * At most max_size connections exist at any time (idle + borrowed +
//    being opened). min_size are opened by the constructor (a failure
//    throws); the pool never closes a healthy idle connection below it.
//  * Health check on borrow: an idle connection is checked with one round
//    trip (catalog statement pool_ping) before it is handed out, unless it
//    was returned less than health_check_after ago. A connection that fails
//    the check is discarded and the borrow moves on to the next idle one or
//    opens a replacement, all within the borrow timeout.
//  * Broken connections are discarded, never handed out again: those that
//    fail the health check, those whose holder calls PooledConnection::
//    discard() (do it after a kConnectionLost / kCommitInDoubt error), and
//    those returned while a transaction is still open (counted and logged:
//    a connection with an open transaction is never handed to another
//    borrower; closing the session rolls the transaction back).
//  * Opening a connection that fails with kConnectionLost / kTimeout (server
//    down or restarting) is retried with backoff until the borrow deadline;
//    other errors (wrong password, missing database) are thrown at once.
//  * Session state other than the transaction (PostgreSQL LISTEN, session
//    variables you set yourself) stays with the connection when it is
//    returned.
//
// Thread safety: every member of Pool is thread-safe. A PooledConnection is
// used by one thread at a time; it keeps the pool's state alive, so it may
// outlive the Pool object (it is then closed when returned).
//
// Errors: borrow() throws Error(kTimeout) when no connection could be had
// within the timeout (the message says why: all in use, or the last connect
// error), or the connect error itself when it is not retryable.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sqlguard/connection.h"

namespace sqlguard {

struct PoolOptions {
  // Connections opened by the constructor and kept. Default: 1. Range 0..max_size.
  std::size_t min_size = 1;
  // Upper bound on open connections. Default: 8. Range 1..1000.
  std::size_t max_size = 8;
  // borrow() without an argument waits this long. Default: 5 s. Range 0 .. 1 h.
  std::chrono::milliseconds borrow_timeout{std::chrono::seconds(5)};
  // An idle connection returned less than this long ago is handed out
  // without a health check (HikariCP's alive-bypass window). Default: 0 =
  // check on every borrow. Range 0 .. 1 h.
  std::chrono::milliseconds health_check_after{0};
  // Options for every connection the pool opens.
  ConnectOptions connect{};
};

// Throws Error(kInvalidArgument) naming the field.
void validate(const PoolOptions& options);

struct PoolStats {
  std::size_t idle = 0;       // open, waiting in the pool
  std::size_t in_use = 0;     // borrowed now
  std::size_t total = 0;      // idle + in_use + being opened
  std::uint64_t borrows = 0;          // successful borrows
  std::uint64_t opened = 0;           // connections opened
  std::uint64_t discarded = 0;        // closed for any reason below
  std::uint64_t health_failures = 0;  // failed the health check on borrow
  std::uint64_t returned_in_transaction = 0;  // returned with an open transaction
  std::uint64_t discarded_by_holder = 0;      // PooledConnection::discard()
  std::uint64_t borrow_timeouts = 0;
  std::uint64_t connect_failures = 0;
};

class Pool;

// RAII lease of one pooled connection. Movable, not copyable. Returns the
// connection in its destructor (never throws).
class PooledConnection {
 public:
  PooledConnection() = default;
  PooledConnection(PooledConnection&&) noexcept;
  PooledConnection& operator=(PooledConnection&&) noexcept;
  ~PooledConnection();

  Connection& operator*() const { return *conn_; }
  Connection* operator->() const { return conn_.get(); }
  Connection& get() const { return *conn_; }
  explicit operator bool() const noexcept { return conn_ != nullptr; }

  // Gives the connection back now (as the destructor would).
  void release() noexcept;
  // Closes the connection instead of returning it: call this after
  // kConnectionLost / kCommitInDoubt, or whenever its session state is
  // unknown. The pool opens a replacement when a borrower needs one.
  void discard() noexcept;

  struct State;  // internal

 private:
  friend class Pool;
  PooledConnection(std::shared_ptr<State> pool, std::unique_ptr<Connection> conn);
  std::shared_ptr<State> pool_;
  std::unique_ptr<Connection> conn_;
};

class Pool {
 public:
  // Opens min_size connections (throws the connect error if one fails).
  // `uri` as in make_connection(). An in-memory SQLite URI with max_size > 1
  // is refused (each connection would see its own database).
  explicit Pool(std::string uri, PoolOptions options = {});
  // Closes idle connections; borrowed ones are closed when returned.
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  PooledConnection borrow();
  PooledConnection borrow(std::chrono::milliseconds timeout);
  // One attempt without waiting for a connection to be returned (it may
  // still open a new one): empty when all max_size are in use.
  std::optional<PooledConnection> try_borrow();

  PoolStats stats() const;
  const PoolOptions& options() const noexcept { return options_; }
  // The URI with its userinfo masked.
  const std::string& description() const noexcept { return description_; }

 private:
  std::optional<PooledConnection> borrow_until(std::chrono::steady_clock::time_point deadline, bool wait);
  PoolOptions options_;
  std::string description_;
  std::shared_ptr<PooledConnection::State> state_;
};

}  // namespace sqlguard
