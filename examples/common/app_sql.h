// The examples' own SQL on their own tables (eg_*), in one place. sqlguard's
// statements live in its catalog; these are the application's, written once
// for all three dialects (VARCHAR keys, BIGINT numbers: portable as is).
#pragma once

namespace app_sql {

// ---- schema (idempotent) --------------------------------------------------
inline constexpr const char* kSchema[] = {
    "CREATE TABLE IF NOT EXISTS eg_stock (sku VARCHAR(64) NOT NULL PRIMARY KEY, qty BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS eg_orders (id VARCHAR(64) NOT NULL PRIMARY KEY, client VARCHAR(64) NOT NULL, "
    "idem_key VARCHAR(255) NOT NULL, sku VARCHAR(64) NOT NULL, qty BIGINT NOT NULL, status VARCHAR(16) NOT NULL, "
    "created_ms BIGINT NOT NULL, UNIQUE (client, idem_key))",
    // published = 0 until the relay has JetStream's ack for it.
    "CREATE TABLE IF NOT EXISTS eg_outbox (id VARCHAR(96) NOT NULL PRIMARY KEY, subject VARCHAR(128) NOT NULL, "
    "payload VARCHAR(2000) NOT NULL, published BIGINT NOT NULL, published_term BIGINT)",
    // Relay terms, one row per election won (the test checks they increase).
    "CREATE TABLE IF NOT EXISTS eg_relay_terms (term BIGINT NOT NULL PRIMARY KEY, instance VARCHAR(64) NOT NULL, "
    "elected_ms BIGINT NOT NULL)",
    // Shipping consumer's effect: one row per applied event, no unique key on
    // purpose (a double application would show as two rows).
    "CREATE TABLE IF NOT EXISTS eg_applied (msg_id VARCHAR(96) NOT NULL, order_id VARCHAR(64) NOT NULL, "
    "event VARCHAR(32) NOT NULL, consumer VARCHAR(64) NOT NULL)",
};

// ---- stock ----------------------------------------------------------------
inline constexpr const char* kStockGet = "SELECT qty FROM eg_stock WHERE sku = ?";
inline constexpr const char* kStockInsert = "INSERT INTO eg_stock (sku, qty) VALUES (?, ?)";
inline constexpr const char* kStockSet = "UPDATE eg_stock SET qty = ? WHERE sku = ?";

// ---- orders ---------------------------------------------------------------
inline constexpr const char* kOrderInsert =
    "INSERT INTO eg_orders (id, client, idem_key, sku, qty, status, created_ms) VALUES (?, ?, ?, ?, ?, 'pending', ?)";
inline constexpr const char* kOrderGet = "SELECT id, sku, qty, status, created_ms FROM eg_orders WHERE id = ?";
inline constexpr const char* kOrderByKey =
    "SELECT id, sku, qty, status, created_ms FROM eg_orders WHERE client = ? AND idem_key = ?";

// ---- outbox ---------------------------------------------------------------
inline constexpr const char* kOutboxInsert =
    "INSERT INTO eg_outbox (id, subject, payload, published) VALUES (?, ?, ?, 0)";
inline constexpr const char* kOutboxMarkPublished =
    "UPDATE eg_outbox SET published = 1, published_term = ? WHERE id = ?";
inline constexpr const char* kOutboxPending = "SELECT COUNT(*) FROM eg_outbox WHERE published = 0";
inline constexpr const char* kTermInsert = "INSERT INTO eg_relay_terms (term, instance, elected_ms) VALUES (?, ?, ?)";

// ---- shipping consumer ------------------------------------------------------
inline constexpr const char* kAppliedInsert =
    "INSERT INTO eg_applied (msg_id, order_id, event, consumer) VALUES (?, ?, ?, ?)";

// ---- async-waiters (examples/async-waiters) ------------------------------------
// One counter per lock name, bumped by each waiter while it holds the lease,
// and one row per served waiter (its primary key refuses a second serving).
inline constexpr const char* kAsyncSchema[] = {
    "CREATE TABLE IF NOT EXISTS eg_async_counter (name VARCHAR(64) NOT NULL PRIMARY KEY, served BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS eg_async_served (waiter BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, "
    "fence BIGINT NOT NULL)",
};
inline constexpr const char* kAsyncResetServed = "DELETE FROM eg_async_served";
inline constexpr const char* kAsyncResetCounters = "DELETE FROM eg_async_counter";
inline constexpr const char* kAsyncCounterInsert = "INSERT INTO eg_async_counter (name, served) VALUES (?, 0)";
inline constexpr const char* kAsyncCounterBump = "UPDATE eg_async_counter SET served = served + 1 WHERE name = ?";
inline constexpr const char* kAsyncServedInsert = "INSERT INTO eg_async_served (waiter, name, fence) VALUES (?, ?, ?)";
inline constexpr const char* kAsyncCounterTotal = "SELECT COALESCE(SUM(served), 0) FROM eg_async_counter";
inline constexpr const char* kAsyncServedCount = "SELECT COUNT(*), COUNT(DISTINCT waiter) FROM eg_async_served";

// ---- order-load's checks ------------------------------------------------------
inline constexpr const char* kCheckOrdersOf = "SELECT COUNT(*) FROM eg_orders WHERE client IN (?, ?)";
inline constexpr const char* kCheckDuplicateKeys =
    "SELECT COUNT(*) FROM (SELECT client, idem_key FROM eg_orders GROUP BY client, idem_key HAVING COUNT(*) > 1) d";
inline constexpr const char* kCheckStock =
    "SELECT s.sku, s.qty, (SELECT COALESCE(SUM(o.qty), 0) FROM eg_orders o WHERE o.sku = s.sku AND o.status <> "
    "'cancelled') FROM eg_stock s ORDER BY s.sku";
inline constexpr const char* kCheckOutbox = "SELECT COUNT(*) FROM eg_outbox";
inline constexpr const char* kCheckApplied = "SELECT COUNT(*) FROM eg_applied";
inline constexpr const char* kCheckAppliedDistinct = "SELECT COUNT(DISTINCT msg_id) FROM eg_applied";
inline constexpr const char* kCheckOrphans =
    "SELECT COUNT(*) FROM eg_applied a WHERE NOT EXISTS (SELECT 1 FROM eg_outbox o WHERE o.id = a.msg_id)";
inline constexpr const char* kCheckTerms = "SELECT term FROM eg_relay_terms ORDER BY elected_ms, term";
inline constexpr const char* kCheckAppliedBy =
    "SELECT consumer, COUNT(*) FROM eg_applied GROUP BY consumer ORDER BY consumer";

}  // namespace app_sql
