// sqlguard/cleanup.h — retention: deletes expired rows in bounded batches.
//
// Each batch is one short autocommit DELETE of at most batch_size rows, so
// cleanup never holds locks long enough to stall acquirers. Deleting lock
// rows never breaks fencing: tokens come from a database-wide sequence.
// Idle heads of semaphores, read-write leases and fair queues (sqlguard_sync)
// go last, one short transaction each that locks the head, skipping one an
// acquire holds at that moment, and checks again that it is idle: a
// concurrent acquire never loses a holding. Their batch_size is how many
// candidates are read at a time.
#pragma once

#include <chrono>
#include <cstdint>

#include "sqlguard/connection.h"

namespace sqlguard {

struct CleanupOptions {
  // Released lock rows, released holdings and left queue places are deleted
  // once released for longer than this (an unreleased lease, holding or place
  // is never deleted by the database clock: the next acquirer or waiter of the
  // name takes it over after watching it, TakeOver). Default: 10 min.
  std::chrono::milliseconds lock_grace{std::chrono::minutes(10)};
  // Rows per DELETE. Default: 1000. Range 1 .. 100000.
  int batch_size = 1000;
  // Stop after this many batches per table (0 = until none are left).
  // Default: 0.
  int max_batches = 0;
  // Sleep between batches to leave room for other writers. Default: 0.
  std::chrono::milliseconds pause{0};
  bool locks = true;        // sqlguard_lock, its sightings, the semaphore / read-write holdings, fair queue places and idle heads
  bool idempotency = true;  // sqlguard_idempotency (retention expired)
  bool inbox = true;        // sqlguard_inbox (retention expired)
  bool history = true;      // sqlguard_history (past its scope's retention, history.h)
};

struct CleanupReport {
  std::int64_t locks_deleted = 0;
  std::int64_t holdings_deleted = 0;      // sqlguard_sync_holder: released holdings (semaphores, read-write leases)
  std::int64_t queue_places_deleted = 0;  // sqlguard_lock_queue: places left (fair leases' waiters)
  // sqlguard_sync: the heads of semaphores, read-write leases and fair queues
  // with no holding and no queue place left (none unreleased, none released
  // less than lock_grace ago). A name used again gets a new head; its fences still
  // only grow (a new head starts at the fence sequence's last value).
  std::int64_t sync_heads_deleted = 0;
  // sqlguard_lock_watch and sqlguard_sync_watch: machines' sightings of
  // leases, holdings and places that have changed since.
  std::int64_t lease_watches_deleted = 0;
  std::int64_t idempotency_deleted = 0;
  std::int64_t inbox_deleted = 0;
  std::int64_t history_deleted = 0;  // grant history rows past their scope's retention
  int batches = 0;
};

// Throws kInvalidArgument for bad options; database errors propagate after
// a deadlock victim batch has been retried a few times.
CleanupReport cleanup(Connection& conn, const CleanupOptions& options = {});

}  // namespace sqlguard
