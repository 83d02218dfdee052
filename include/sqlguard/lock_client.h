// sqlguard/lock_client.h — one lock client per process and database: it
// holds any number of leases on a handful of connections and threads.
//
//   auto client = sqlguard::LockClient::create("postgresql://app:pw@db/app");
//   sqlguard::LeaseLock lock(client, "order:42", {.ttl = std::chrono::seconds(10)});
//   if (lock.try_acquire()) { ... lock.fence() ... lock.release(); }
//
// What the client owns (and a lease handle does not):
//  * At most options.max_connections connections (default 4): one RESERVED
//    for renewals, opened by create() (so a server that later refuses new
//    connections cannot starve held leases), one for the wake-up listener,
//    opened when the first asynchronous acquire waits, and the rest for
//    acquires, releases and guarded transactions (one opened by create(),
//    the others on demand).
//  * One renewal thread (and the worker it bounds each renewal with): every
//    held lease whose renewal is due is renewed with one statement per 1000
//    leases (renew_leases()), each owner- and fence-checked on the database
//    clock; a lease's trust window starts at the start of the request that
//    renewed it. A lease the batch did not renew (taken over, force-released,
//    expired) or that could not be renewed before its trust window ends is
//    reported lost (on_lost, last_loss()) exactly once.
//  * Started with the first asynchronous wait: one waiter thread that runs
//    every waiting acquire (a queue per lock name, first come first served
//    inside the process; only its head contends in the database) and one
//    listener thread for wake-ups: PostgreSQL one LISTEN session for every
//    waited name's channel (behind a transaction pooler: none, it polls),
//    MariaDB/Galera one session that waits on the wake-up lock of the
//    longest-waiting name, SQLite one futex_waitv() over the waited names'
//    wake-up words. Names not covered by a wake-up are polled together: one
//    statement (lease_poll) per round, paced by the holders' expiries.
//
// Exhaustion: an acquire, release or guarded transaction that finds every
// work connection busy for options.borrow_timeout, or a server that refuses
// a new connection (PostgreSQL 53300, MariaDB 1040), fails with
// Error(kResourceExhausted); held leases keep being renewed on the reserved
// connection. So do asynchronous calls, through their callbacks
// (release_async after borrow_timeout; acquire_async when its deadline
// comes with no connection free).
//
// Fork: a client belongs to the process that created it. In a forked child
// every call on it, or on a handle made from it (lease, semaphore,
// read-write), throws Error(kInvalidArgument) ("... created in process N
// ..."), the observers owns(), fence(), owner(), hold_count(), remaining(),
// last_loss(), expires_at_ms(), held_permits() and mode() included: what the
// handle holds is the parent's, and a child must not act on it. Only the
// noexcept accessors (name(), options(), description()) answer, and
// destroying the handle or client there sends nothing. The child makes its
// own client (LockClient::shared() does so by itself). The child never
// closes the parent's sessions.
//
//  * Started with the first asynchronous call nobody's thread waits on (a
//    lease's first try of acquire_async, release_async): a sender thread
//    (a second while the first is busy: one per work connection, at most
//    2), which sends them, batched with each other and with blocked calls of the
//    same kind while the work connections are busy (batch_max).
//
// Thread safety: every member is thread-safe. Callbacks of asynchronous
// acquires and releases run on the client's waiter or sender thread: they
// must not block (post the work elsewhere; lock_awaitable.h resumes
// coroutines on your executor).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sqlguard/connection.h"

namespace sqlguard {
namespace detail {
class ClientCore;
}

struct LockClientOptions {
  // Connections open at most: renewal (reserved) + listener + work. Default 4.
  // Range 3 .. 64.
  std::size_t max_connections = 4;
  // How long an acquire, release, renew or guarded transaction waits for a
  // free work connection before Error(kResourceExhausted). Default 5 s.
  // Range 0 .. 10 min.
  std::chrono::milliseconds borrow_timeout{std::chrono::seconds(5)};
  // Coalescing: while every work connection is busy, try_acquire() and
  // release() calls of leases (LeaseLock handles, not fair) on distinct
  // names wait together, and the first connection to come free carries up
  // to batch_max of them in one batched statement (PostgreSQL: one
  // statement; MariaDB: a read and an upsert); each call gets its own
  // answer. With a connection free, a call is sent at once, alone: an idle
  // client adds no latency. A name a batch cannot decide without the
  // take-over rule (held, not yet watched for its ttl) is answered busy from
  // the batch's read, or tried alone. Asynchronous calls (a lease's first
  // try of acquire_async, release_async) join the same batches, sent by the
  // client's sender thread. SQLite and Galera send every call alone.
  // Range 1 .. 64; 1 = never coalesce. Default 64.
  std::size_t batch_max = 64;
  // Options of every connection the client opens. Unset io_timeout: 10 s
  // (renewal connection: bounded by the shortest renew period it serves; a
  // renewal is abandoned, never waited for, when a trust window ends).
  ConnectOptions connect{};
};

// Throws Error(kInvalidArgument) naming the field.
void validate(const LockClientOptions& options);

struct LockClientStats {
  std::size_t connections_open = 0;   // now: renewal + listener + work
  std::size_t connections_max = 0;    // options.max_connections
  std::size_t threads = 0;            // threads the client runs now
  std::size_t held_leases = 0;        // renewed by the client now (leases, semaphore and read-write holdings)
  std::size_t queue_places = 0;       // fair leases' waiters' queue places the client renews now
  std::size_t waiters = 0;            // asynchronous acquires pending now
  std::size_t listening = 0;          // names the wake-up listener covers now (0 once no one waits)
  // Names the client keeps any state of now: waiter queues, napping
  // waiters, listened channels (its cost is a function of what is held and
  // waited for now: a released name leaves nothing behind).
  std::size_t names_tracked = 0;
  std::uint64_t renewal_rounds = 0;       // renewal rounds that sent something
  std::uint64_t renewal_statements = 0;   // renewal statements sent (<= 1000 leases each)
  std::uint64_t leases_renewed = 0;
  std::uint64_t leases_lost = 0;          // reported lost by the renewer
  std::uint64_t wakeups = 0;              // listener wake-ups delivered to waiters
  // Wake-ups the listener received that were for nobody of this client (a
  // release naming a fair waiter of another client, a name no longer waited
  // for): each cost its thread a wake-up for nothing. PostgreSQL's fair
  // waiters listen on their own ticket's channel, so a hand-off wakes only
  // the client of the waiter it names.
  std::uint64_t stray_wakeups = 0;
  std::uint64_t polls = 0;                // lease_poll statements sent
  std::uint64_t attempts = 0;             // acquire attempts sent by the waiter thread
  std::uint64_t next_turns = 0;           // a lease's next turn asked for and got by its waiters (barging_limit)
  // Fair leases acquired by a wait that a release named as the queue's next
  // (PostgreSQL: the NOTIFY's payload names its place) and whose attempt went
  // straight to the take, without reading the queue first (one round trip
  // less per hand-off). 0 where wake-ups name no place (SQLite, MariaDB, a
  // pooler).
  std::uint64_t named_handoffs = 0;
  // Of those, the ones the release granted in its own commit and the wait
  // held without a statement of its own (PostgreSQL: lease_release_fair
  // writes the lease to the next place's token and its NOTIFY carries the
  // fence). A wait that waited longer than half a ttl confirms the grant by
  // a take instead (named, not counted here).
  std::uint64_t granted_handoffs = 0;
  // Default leases a release handed to a waiter's next turn (barging_limit)
  // that the waiter held as the release wrote them, its read seeing the
  // hand-over, with no confirming take (MariaDB, Galera, SQLite: the dialects
  // whose acquire reads first; PostgreSQL: a waiter of a lease handle woken
  // by the hand-over's NOTIFY, which carries it; the lock client's shared
  // waiters there confirm every hand-over with a take).
  std::uint64_t turn_grants = 0;
  std::uint64_t exhausted = 0;            // operations refused with kResourceExhausted
  // Coalescing (LockClientOptions::batch_max): batched statements sent (an
  // acquire batch or a release batch) and the calls they carried.
  std::uint64_t batches = 0;
  std::uint64_t batched_calls = 0;
  std::size_t calls_queued = 0;  // now: calls waiting for a connection to be sent together
  // The renewer is behind (a renewal came back with less than half of its
  // lease's slack left): new acquisitions are refused with kResourceExhausted
  // until a round, a renew period later, renews every lease in time again.
  // Held leases come first.
  bool renewal_behind = false;
  // Steps of the database server's clock seen between renewal rounds (its
  // clock read once a round against this process's monotonic clock; a
  // difference over 1 s plus the readings' round trips; also the metric
  // sqlguard_clock_steps_total and a warning). The last one's size, ms
  // (> 0 forward, < 0 back). A loss soon after one names it in its cause.
  std::uint64_t clock_steps = 0;
  std::int64_t last_clock_step_ms = 0;
  // How late renewals were sent after they were due, over the last 16384 leases renewed.
  double renewal_lag_p99_ms = 0;
  double renewal_lag_max_ms = 0;
};

class LockClient {
 public:
  // Connects the renewal connection and one work connection (throws the
  // connect error: kResourceExhausted when the server refuses a new
  // connection). `uri` as in make_connection().
  static std::shared_ptr<LockClient> create(const std::string& uri, LockClientOptions options = {});
  // The process-wide client for (`uri`, `connect`): made on first use, shared
  // by every caller while one holds it (the LeaseLock URI constructor uses
  // it), made anew in a forked child. Spellings of one URI share it: the
  // scheme's alias (postgres://, mariadb://, sqlite3:), the parameters'
  // order, a trailing '?', percent-encoding, a host name's case and the
  // default port written out or not (PostgreSQL: unless PGPORT is set).
  // `localhost` and 127.0.0.1 do not: libpq resolves localhost (::1 may come
  // first, another listener) and MySQL's client may take it for its socket.
  static std::shared_ptr<LockClient> shared(const std::string& uri, const ConnectOptions& connect = {});

  // Stops the threads and closes the connections. Leases still held by
  // handles keep the client alive (handles hold it); destroy handles first.
  // A renewal statement still waiting for its answer (a frozen server) is
  // waited for as long as its own deadlines allow (connect_timeout, then
  // io_timeout per statement), so that no thread of the client runs on into
  // the process's exit.
  ~LockClient();
  LockClient(const LockClient&) = delete;
  LockClient& operator=(const LockClient&) = delete;

  LockClientStats stats() const;
  // The URI with its userinfo masked.
  const std::string& description() const noexcept;
  const LockClientOptions& options() const noexcept;

  // Internal.
  const std::shared_ptr<detail::ClientCore>& core() const noexcept { return core_; }
  explicit LockClient(std::shared_ptr<detail::ClientCore> core);

 private:
  std::shared_ptr<detail::ClientCore> core_;
};

}  // namespace sqlguard
