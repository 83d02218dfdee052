// The synchronizers' acquire protocol and the fair lease's queue (see
// sync_ops.h and sql/<dialect>/sync.sql).
#include "strategies/sync/sync_ops.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "core/catalog.h"
#include "core/metric_hooks.h"
#include "dialect/dialect.h"
#include "sqlguard/validate.h"
#include "plans/batch_rows.h"
#include "core/reconnect.h"
#include "plans/plans.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;

namespace {

struct Head {
  std::string kind;
  std::int64_t permits = 0, fence = 0, writer_until = 0, version = 0, now = 0;
  std::optional<std::string> lease_owner;  // the name's sqlguard_lock row ('' = reserved by a synchronizer)
  StoredName stored() const { return StoredName{kind, permits, lease_owner}; }
};

Head read_head(Connection& conn, const std::string& name) {
  auto r = run(conn, Sql::sync_state, {name});
  if (r.rows.empty())
    throw Error(ErrorCode::kInternal, "synchronizer '" + printable(name, 64) + "': its sqlguard_sync row is missing "
                                      "inside the transaction that wrote it");
  static constexpr auto kKind = column(Sql::sync_state, "kind");
  static constexpr auto kPermits = column(Sql::sync_state, "permits");
  static constexpr auto kFence = column(Sql::sync_state, "fence");
  static constexpr auto kWriter = column(Sql::sync_state, "writer_until");
  static constexpr auto kVersion = column(Sql::sync_state, "version");
  static constexpr auto kNow = column(Sql::sync_state, "db_now_ms");
  static constexpr auto kLeaseOwner = column(Sql::sync_state, "lease_owner");
  const auto& row = r.rows.front();
  Head h{cell(row, kKind).as_string(), cell(row, kPermits).as_int(), cell(row, kFence).as_int(),
         cell(row, kWriter).as_int(),  cell(row, kVersion).as_int(), cell(row, kNow).as_int(), std::nullopt};
  if (!cell(row, kLeaseOwner).is_null()) h.lease_owner = cell(row, kLeaseOwner).as_string();
  return h;
}

// n permits of a semaphore of `permits` (its count stored now): more could
// never be granted, so the acquire would only wait out its whole wait.
void check_asked_permits(const SyncRequest& req, std::int64_t permits) {
  if (req.mode != SyncMode::kPermits || req.permits <= permits) return;
  throw Error(ErrorCode::kInvalidArgument,
              "semaphore '" + printable(req.name, 64) + "': " + std::to_string(req.permits) +
                  " permits asked for, but it has only " + std::to_string(permits) +
                  " permits (its count now): n must be within 1..permits");
}

struct Live {
  std::int64_t permits = 0, shared = 0;
  bool exclusive = false;
  std::int64_t count = 0;
  std::int64_t earliest_left = 0;  // ms until the first live holding expires
  std::vector<std::int64_t> expired;  // slots of the name's expired holder rows
};

Live read_live(Connection& conn, const std::string& name) {
  static constexpr auto kSlot = column(Sql::sync_rows, "slot");
  static constexpr auto kMode = column(Sql::sync_rows, "mode");
  static constexpr auto kPermits = column(Sql::sync_rows, "permits");
  static constexpr auto kExpire = column(Sql::sync_rows, "expire_at");
  static constexpr auto kNow = column(Sql::sync_rows, "db_now_ms");
  Live l;
  for (const auto& row : run(conn, Sql::sync_rows, {name}).rows) {
    const std::int64_t left = cell(row, kExpire).as_int() - cell(row, kNow).as_int();
    if (left <= 0) {
      l.expired.push_back(cell(row, kSlot).as_int());
      continue;
    }
    const std::string mode = cell(row, kMode).as_string();
    ++l.count;
    if (mode == "P") l.permits += cell(row, kPermits).as_int();
    else if (mode == "S") ++l.shared;
    else l.exclusive = true;
    l.earliest_left = l.count == 1 ? left : std::min(l.earliest_left, left);
  }
  return l;
}

// sync_purge_slots with `places` slots, rendered once per catalog and size
// on each thread (at most 11 sizes: padded_size).
const std::string& purge_text(const Catalog& cat, std::size_t places) {
  thread_local std::map<std::pair<const Catalog*, std::size_t>, std::string> texts;
  std::string& text = texts[{&cat, places}];
  if (text.empty()) text = render_rows(cat, Sql::sync_purge_slots, "slots", Sql::sync_slot_ref, places);
  return text;
}

// Deletes the expired holdings read_live counted as free, by slot (never a
// live one: on MariaDB a scan would wait for a live holding's guarded
// transaction). An expired holding still inside its guarded transaction
// holds the delete up until its work commits, so its permits are never
// taken while it writes. A slot that is gone already deletes nothing.
void purge_expired(Connection& conn, const std::string& name, const std::vector<std::int64_t>& slots) {
  if (slots.empty()) return;
  const Catalog& cat = catalog(conn);
  for (std::size_t at = 0; at < slots.size(); at += kMaxRenewalBatch) {
    const std::size_t n = std::min(kMaxRenewalBatch, slots.size() - at);
    const std::size_t places = padded_size(n);
    Params values;
    values.reserve(places + 1);
    values.emplace_back(name);
    for (std::size_t i = 0; i < places; ++i) values.emplace_back(i < n ? slots[at + i] : std::int64_t{-1});
    run_rendered(conn, Sql::sync_purge_slots, purge_text(cat, places), values);
  }
}

// The next fence of `name`: from the sequence, and above the name's last one
// (two Galera nodes can draw the same NOCACHE value).
std::int64_t draw_fence(Connection& conn, const Head& h) {
  auto r = run(conn, Sql::sync_draw, {});
  if (r.rows.empty())
    throw Error(ErrorCode::kResourceExhausted,
                "sqlguard_fence_seq exhausted: every fencing token up to 9223372036854775807 has been issued");
  static constexpr auto kValue = column(Sql::sync_draw, "value");
  return std::max(cell(r.rows.front(), kValue).as_int(), h.fence + 1);
}

// A plain read first: an attempt that is clearly busy ends here, writing
// nothing (waiters that poll a hot name cost reads, not a row lock, a WAL
// record and a commit flush each). The transaction decides again. True:
// busy (`g` says for how long).
bool busy_by_peek(Connection& conn, const SyncRequest& req, SyncGrant& g) {
  auto peek = run(conn, Sql::sync_peek, {req.name});
  if (!peek.rows.empty()) {
    static constexpr auto kKind = column(Sql::sync_peek, "kind");
    static constexpr auto kPermits = column(Sql::sync_peek, "permits");
    static constexpr auto kWriter = column(Sql::sync_peek, "writer_until");
    static constexpr auto kNow = column(Sql::sync_peek, "db_now_ms");
    static constexpr auto kLiveP = column(Sql::sync_peek, "live_permits");
    static constexpr auto kLiveS = column(Sql::sync_peek, "live_shared");
    static constexpr auto kLiveX = column(Sql::sync_peek, "live_exclusive");
    static constexpr auto kEarliest = column(Sql::sync_peek, "earliest_expire_at");
    const auto& row = peek.rows.front();
    check_name(req.name, StoredName{cell(row, kKind).as_string(), cell(row, kPermits).as_int(), std::nullopt},
               req.kind, req.capacity);
    const std::int64_t permits = cell(row, kPermits).as_int(), writer = cell(row, kWriter).as_int(),
                       now = cell(row, kNow).as_int(), live_p = cell(row, kLiveP).as_int(),
                       live_s = cell(row, kLiveS).as_int(), live_x = cell(row, kLiveX).as_int(),
                       earliest = cell(row, kEarliest).as_int();
    check_asked_permits(req, permits);
    bool busy = false;
    switch (req.mode) {
      case SyncMode::kPermits: busy = live_p + req.permits > permits; break;
      case SyncMode::kShared: busy = live_x > 0 || writer > now; break;
      case SyncMode::kExclusive: busy = live_p + live_s + live_x > 0; break;
    }
    // A waiting writer still goes on to (re)publish its intent when what
    // is left of it is under half.
    const bool publish = req.mode == SyncMode::kExclusive && req.intent.count() > 0 && writer - now < req.intent.count() / 2;
    if (busy && !publish) {
      g.capacity = permits;
      g.holder_remaining_ms = earliest > 0 ? earliest - now : std::max<std::int64_t>(writer - now, 0);
      ++metric::lock_busy();
      return true;
    }
  }
  return false;
}

}  // namespace

SyncGrant sync_attempt(Connection& conn, const SyncRequest& req) {
  require_no_transaction(conn, "acquiring a synchronizer",
                         "its rows would stay locked and invisible until it commits; use another connection");
  ++metric::lock_attempts();
  SyncGrant g;
  if (busy_by_peek(conn, req, g)) return g;
  try {
    Transaction tx(conn, Isolation::kReadCommitted);
    run(conn, Sql::sync_open, {req.name, std::string(kind_name(req.kind)), req.capacity});
    const Head h = read_head(conn, req.name);
    check_name(req.name, h.stored(), req.kind, req.capacity);
    check_asked_permits(req, h.permits);
    reserve_name(conn, h.stored(), req.name, req.kind);
    const Live live = read_live(conn, req.name);
    g.capacity = h.permits;
    bool ok = false;
    switch (req.mode) {
      case SyncMode::kPermits: ok = live.permits + req.permits <= h.permits; break;
      case SyncMode::kShared: ok = !live.exclusive && h.writer_until <= h.now; break;
      case SyncMode::kExclusive: ok = live.count == 0; break;
    }
    if (!ok) {
      if (req.mode == SyncMode::kExclusive && req.intent.count() > 0) {
        run(conn, Sql::sync_set, {h.fence, static_cast<std::int64_t>(req.intent.count()), req.name});
        tx.commit();
      }
      g.holder_remaining_ms = live.count > 0 ? live.earliest_left : std::max<std::int64_t>(h.writer_until - h.now, 0);
      ++metric::lock_busy();
      return g;
    }
    purge_expired(conn, req.name, live.expired);
    if (req.mode == SyncMode::kShared) {
      g.fence = h.fence;  // the last exclusive hold's: shared holders see it
    } else {
      g.fence = draw_fence(conn, h);
      // An exclusive hold withdraws the writers' intent (a writer still
      // waiting publishes it again at its next attempt).
      run(conn, Sql::sync_set, {g.fence, std::int64_t{req.mode == SyncMode::kExclusive ? 0 : -1}, req.name});
    }
    g.slot = h.version;
    run(conn, Sql::sync_hold,
        {req.name, g.slot, std::string(1, static_cast<char>(req.mode)), req.permits, req.owner, g.fence,
         static_cast<std::int64_t>(req.ttl.count()), static_cast<std::int64_t>(req.min_hold.count())});
    tx.commit();
    g.acquired = true;
    g.expire_at = h.now + req.ttl.count();
    ++metric::lock_acquired();
    return g;
  } catch (const Error& e) {
    // Two acquires of one name at once: the loser is "not acquired" (a
    // deadlock victim, a lock wait timeout, a Galera certification failure,
    // SQLite busy, a slot another node's acquire inserted first), never an
    // error.
    if (!is_insert_race(e) || conn.in_transaction()) throw;
    ++metric::lock_busy();
    return SyncGrant{};
  }
}

bool sync_release(Connection& conn, const std::string& name, std::int64_t slot, const std::string& owner,
                  std::int64_t fence) {
  const bool held = run(conn, Sql::sync_release, {name, slot, owner, fence}).affected > 0;
  ++(held ? metric::lock_releases() : metric::lock_releases_not_held());
  return held;
}

LossCause diagnose_holding(Connection& conn, const std::string& name, std::int64_t slot, const std::string& owner,
                           std::int64_t fence, bool sent_in_window, std::string* detail) {
  auto r = run(conn, Sql::sync_read, {name, slot});
  const std::string what = "holding of '" + name + "' (fence " + std::to_string(fence) + ")";
  if (r.rows.empty()) {
    if (sent_in_window) {
      *detail = what + " was ended by someone else: its row was deleted while it was held (an operator, or a "
                       "cleanup), not expired";
      return LossCause::kTakenOver;
    }
    *detail = what + " expired and its row was cleaned up";
    return LossCause::kExpired;
  }
  static constexpr auto kOwner = column(Sql::sync_read, "owner");
  static constexpr auto kFence = column(Sql::sync_read, "fence");
  static constexpr auto kExpire = column(Sql::sync_read, "expire_at");
  const auto& row = r.rows.front();
  const std::int64_t expire_at = cell(row, kExpire).as_int();
  if (cell(row, kOwner).as_string() != owner || cell(row, kFence).as_int() != fence) {
    *detail = what + " was replaced by another holding";
    return LossCause::kTakenOver;
  }
  if (sent_in_window && expire_at <= cell(row, column(Sql::sync_read, "db_now_ms")).as_int()) {
    // Released by someone else (its own release unregisters it first).
    *detail = what + " was ended by someone else while it was held, not expired";
    return LossCause::kTakenOver;
  }
  *detail = what + " expired before it was renewed";
  return LossCause::kExpired;
}

SyncStatus sync_status(Connection& conn, const std::string& name) {
  validate_name(name, "name");
  SyncStatus s;
  auto r = run(conn, Sql::sync_state, {name});
  if (r.rows.empty()) return s;
  static constexpr auto kKind = column(Sql::sync_state, "kind");
  static constexpr auto kPermits = column(Sql::sync_state, "permits");
  static constexpr auto kFence = column(Sql::sync_state, "fence");
  static constexpr auto kWriter = column(Sql::sync_state, "writer_until");
  static constexpr auto kNow = column(Sql::sync_state, "db_now_ms");
  const auto& row = r.rows.front();
  s.exists = true;
  s.kind = cell(row, kKind).as_string();
  s.permits = cell(row, kPermits).as_int();
  s.fence = cell(row, kFence).as_int();
  s.writer_waiting = cell(row, kWriter).as_int() > cell(row, kNow).as_int();
  const Live live = read_live(conn, name);
  s.in_use = live.permits;
  s.shared = live.shared;
  s.exclusive = live.exclusive;
  return s;
}

std::vector<LockHolder> sync_live_holders(Connection& conn, const std::string& name, LockKind kind) {
  std::vector<LockHolder> out;
  auto head = run(conn, Sql::sync_state, {name});
  if (head.rows.empty() || cell(head.rows.front(), column(Sql::sync_state, "kind")).as_string() != kind_name(kind))
    return out;
  static constexpr auto kMode = column(Sql::sync_holders, "mode");
  static constexpr auto kPermits = column(Sql::sync_holders, "permits");
  static constexpr auto kOwner = column(Sql::sync_holders, "owner");
  static constexpr auto kFence = column(Sql::sync_holders, "fence");
  static constexpr auto kExpire = column(Sql::sync_holders, "expire_at");
  static constexpr auto kNow = column(Sql::sync_holders, "db_now_ms");
  for (const auto& row : run(conn, Sql::sync_holders, {name}).rows) {
    const std::string m = cell(row, kMode).as_string();
    LockHolder h;
    h.owner = cell(row, kOwner).as_string();
    h.fence = cell(row, kFence).as_int();
    h.mode = m == "P" ? "permits" : m == "S" ? "shared" : "exclusive";
    h.permits = m == "P" ? cell(row, kPermits).as_int() : 0;
    h.remaining_ms = std::max<std::int64_t>(0, cell(row, kExpire).as_int() - cell(row, kNow).as_int());
    out.push_back(std::move(h));
  }
  return out;
}

std::int64_t sync_set_permits(Connection& conn, const std::string& name, std::int64_t permits) {
  require_no_transaction(conn, "changing a semaphore's permits", "use another connection");
  return with_reconnect(conn, milliseconds(0), "changing semaphore permits", [&](int) {
    Transaction tx(conn, Isolation::kReadCommitted);
    run(conn, Sql::sync_open, {name, std::string(kind_name(LockKind::kSemaphore)), permits});
    const Head h = read_head(conn, name);
    const bool created = h.version == 0;  // sync_open inserted it (an update bumps the version)
    check_name(name, h.stored(), LockKind::kSemaphore, 0);
    reserve_name(conn, h.stored(), name, LockKind::kSemaphore);
    run(conn, Sql::sync_set_permits, {permits, name});
    tx.commit();
    return created ? std::int64_t{0} : h.permits;
  });
}

std::vector<bool> renew_holdings(Connection& conn, std::span<const RowRenewal> rows) {
  const auto renewed = conn.dialect().plans().renew->renew_holdings(conn, rows);
  std::vector<bool> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    const bool ok = renewed.count({r.name, r.key}) > 0;
    if (ok) ++metric::lock_renewals();
    out.push_back(ok);
  }
  return out;
}

void renew_places(Connection& conn, std::span<const RowRenewal> rows) {
  if (rows.empty()) return;
  const std::size_t places = padded_size(rows.size());
  const std::string sql = render_rows(catalog(conn), Sql::fair_renew_batch, "refs", Sql::fair_ref, places);
  static const Params pad{std::string(), std::int64_t{0}, std::string(), std::int64_t{0}};
  const Params values = padded_values(rows, places, pad, [](Params& v, const RowRenewal& r) {
    v.emplace_back(r.name);
    v.emplace_back(r.key);
    v.emplace_back(r.owner);
    v.emplace_back(static_cast<std::int64_t>(r.ttl.count()));
  });
  run_rendered(conn, Sql::fair_renew_batch, sql, values);
}

std::int64_t fair_enqueue(Connection& conn, const std::string& name, const std::string& owner, milliseconds place_ttl,
                          LockKind kind, std::int64_t permits) {
  require_no_transaction(conn, "joining a fair lease's queue", "use another connection");
  // Two waiters arriving at once (a deadlock victim, a Galera certification
  // failure, a ticket the other node inserted first): the loser takes the
  // next ticket.
  return retry_contention(conn, [&] {
    Transaction tx(conn, Isolation::kReadCommitted);
    run(conn, Sql::sync_open, {name, std::string(kind_name(kind)), permits});
    const Head h = read_head(conn, name);
    check_name(name, h.stored(), kind, permits);
    reserve_name(conn, h.stored(), name, kind);
    run(conn, Sql::fair_purge, {name});
    run(conn, Sql::fair_enqueue, {name, h.version, owner, static_cast<std::int64_t>(place_ttl.count())});
    tx.commit();
    return h.version;
  }, is_insert_race);
}

FairTurn fair_turn(Connection& conn, const std::string& name, std::int64_t ticket, const std::string& owner) {
  auto r = run(conn, Sql::fair_gate, {name, ticket, owner});
  static constexpr auto kMine = column(Sql::fair_gate, "mine");
  static constexpr auto kAhead = column(Sql::fair_gate, "ahead");
  static constexpr auto kHolder = column(Sql::fair_gate, "holder_expire_at");
  static constexpr auto kNow = column(Sql::fair_gate, "db_now_ms");
  const auto& row = r.rows.at(0);
  const Value& holder = cell(row, kHolder);
  const bool reserved = !holder.is_null() && holder.as_int() == kReservedExpireAt;
  const std::int64_t left =
      holder.is_null() || reserved ? 0 : std::max<std::int64_t>(0, holder.as_int() - cell(row, kNow).as_int());
  return FairTurn{cell(row, kMine).as_int() > 0, cell(row, kAhead).as_int(), left, reserved};
}

void fair_leave(Connection& conn, const std::string& name, std::int64_t ticket, const std::string& owner, bool wake) {
  const bool by_ticket = wake && conn.dialect().plans().wait->wakes_fair_by_ticket();
  run(conn, by_ticket ? Sql::fair_leave_wake : Sql::fair_leave, {name, ticket, owner});
}

std::int64_t purge_idle_heads(Connection& conn, milliseconds grace, int batch_size, int max_batches,
                              milliseconds pause, int* batches) {
  require_no_transaction(conn, "cleanup() of idle heads", "it runs one short transaction per head");
  static constexpr auto kName = column(Sql::sync_head_candidates, "name");
  std::int64_t deleted = 0;
  std::string after;  // names are never empty: "" sorts first
  for (int b = 0; max_batches == 0 || b < max_batches; ++b) {
    const auto rows =
        run(conn, Sql::sync_head_candidates, {after, static_cast<std::int64_t>(grace.count()), batch_size}).rows;
    if (batches) ++*batches;
    for (const auto& row : rows) {
      after = cell(row, kName).as_string();
      const Params name{after};
      // A deadlock or certification failure against an acquire of the name
      // runs the head's transaction again; the acquire may have made it busy.
      deleted += retry_contention(conn, [&]() -> std::int64_t {
        Transaction tx(conn, Isolation::kReadCommitted);
        if (run(conn, Sql::sync_head_lock, name).rows.empty()) return 0;  // an acquire holds it now
        if (run(conn, Sql::sync_head_delete, {after, static_cast<std::int64_t>(grace.count())}).affected == 0) {
          tx.commit();
          return 0;  // no longer idle
        }
        // Its leftover rows (all expired for longer than grace) go with it: a
        // recreated head counts versions (slots, tickets) from 0 again.
        run(conn, Sql::sync_purge, name);
        run(conn, Sql::fair_purge, name);
        // And the name's reservation: a name is one lock while its rows exist.
        run(conn, Sql::sync_unreserve_name, name);
        tx.commit();
        return 1;
      });
    }
    if (static_cast<int>(rows.size()) < batch_size) break;
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  return deleted;
}

}  // namespace sqlguard::detail
