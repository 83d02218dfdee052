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
  // sync_open wrote the row in this transaction, which holds it. Missing,
  // the transaction is no longer the one that wrote it where a transaction
  // can be rolled back under a statement without an error to it
  // (Capabilities::unseen_rollbacks: a Galera node): another writer won, a
  // conflict as a deadlock would be. Elsewhere it cannot happen: internal.
  if (r.rows.empty()) {
    const bool unseen = conn.capabilities().unseen_rollbacks;
    throw Error(unseen ? ErrorCode::kConflict : ErrorCode::kInternal,
                "synchronizer '" + printable(name, 64) + "': its sqlguard_sync row is missing inside the transaction "
                "that wrote it" + (unseen ? " (the cluster rolled the transaction back under it)" : ""));
  }
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

// ---- the take-over rule for holdings and places (strategies/lease/takeover.h) ----

// A row the take-over rule judges: a holding (slot, mode, permits) or a
// place ahead of a fair waiter (its ticket as the part; mode "Q").
struct Held {
  std::int64_t part = 0;
  std::string mode;
  std::int64_t permits = 0;
  Sighting seen;
};

// What the rule leaves held, and what an acquire may take.
struct Judged {
  std::int64_t permits = 0, shared = 0, count = 0;
  bool exclusive = false;
  // The first held row: ms until it may be taken (the rest of its watch;
  // database-clock rule: until it expires). A pacing hint.
  std::int64_t next_ms = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> released;  // (part, beat): free at once
  std::vector<std::pair<std::int64_t, std::int64_t>> ripe;      // (part, beat): taken over, if unchanged
  bool first_look = false;  // this process had no watch of the key before
  bool ran_out = false;     // an unreleased row the database clock says ran out (a hint only)
};

// Judges `rows` by `rule`: a released row is free; an unreleased one is free
// only once this process has seen it unchanged for its watch (kWatched), or
// once it expired on the database clock (kDatabaseClock). A holding released
// inside its minimum hold stays held until it ends (database clock: the
// minimum hold is a rate limit, not a take-over).
Judged judge(const std::string& key, const std::vector<Held>& rows, TakeOver rule) {
  Judged j;
  std::vector<milliseconds> unchanged;
  if (rule == TakeOver::kWatched) {
    std::vector<GroupWatchBook::Part> parts;
    for (const Held& h : rows)
      if (h.seen.version.beat != 0) parts.push_back({h.part, h.seen});
    // Nothing unreleased: nothing to watch, and no entry left behind.
    if (parts.empty()) group_watches().forget(key);
    else unchanged = group_watches().sighted(key, parts, std::chrono::steady_clock::now(), &j.first_look);
  }
  std::size_t k = 0;
  for (const Held& h : rows) {
    const RowVersion& v = h.seen.version;
    std::int64_t left = v.expire_at - h.seen.db_now;
    if (h.seen.released) {
      j.released.emplace_back(h.part, v.beat);
      continue;
    }
    if (v.beat != 0) {
      j.ran_out = j.ran_out || left <= 0;
      bool ripe = left <= 0;
      if (rule == TakeOver::kWatched) {
        const milliseconds u = unchanged[k++];
        ripe = u >= h.seen.watch;
        left = (h.seen.watch - u).count();
      }
      if (ripe) {
        j.ripe.emplace_back(h.part, v.beat);
        continue;
      }
    }
    ++j.count;
    if (h.mode == "P") j.permits += h.permits;
    else if (h.mode == "S") ++j.shared;
    else if (h.mode == "X") j.exclusive = true;
    j.next_ms = j.count == 1 ? left : std::min(j.next_ms, left);
  }
  j.next_ms = std::max<std::int64_t>(j.next_ms, 1);
  return j;
}

// The watch key of `name`'s holdings, and of the places ahead of `ticket`.
std::string holdings_key(const Connection& conn, const std::string& name) {
  return holdings_watch_key(conn.description(), name);
}
std::string places_key(const Connection& conn, const std::string& name, std::int64_t ticket) {
  return places_watch_key(conn.description(), name, ticket);
}

// This process's first look at rows of `name` the database clock says ran
// out continues the watches an earlier process on this machine started
// (sqlguard_sync_watch: a CLI call, a cron job, each a new process), or
// records its own for later ones (as continue_machine_watch for a lease).
// True when it adopted an earlier sighting (judge again). Never throws.
bool continue_group_watch(Connection& conn, const std::string& name, const std::string& key,
                          const std::vector<Held>& rows) {
  const std::string& watcher = machine_watcher();
  if (watcher.empty()) return false;
  static constexpr auto kPart = column(Sql::sync_watch_read, "part");
  static constexpr auto kFence = column(Sql::sync_watch_read, "fence");
  static constexpr auto kBeat = column(Sql::sync_watch_read, "beat");
  static constexpr auto kExpireAt = column(Sql::sync_watch_read, "expire_at");
  static constexpr auto kFirstSeen = column(Sql::sync_watch_read, "first_seen_ms");
  bool adopted = false;
  try {
    const auto stored = run(conn, Sql::sync_watch_read, {name, watcher}).rows;
    const std::int64_t mono = machine_monotonic_ms();
    const auto now = std::chrono::steady_clock::now();
    int written = 0;
    for (const Held& h : rows) {
      const RowVersion& v = h.seen.version;
      if (v.beat == 0 || v.expire_at > h.seen.db_now) continue;  // released, or not ran out: not shared
      bool same = false;
      for (const Row& w : stored) {
        if (cell(w, kPart).as_int() != h.part) continue;
        same = RowVersion{cell(w, kFence).as_int(), cell(w, kBeat).as_int(), cell(w, kExpireAt).as_int()} == v;
        if (same) {
          const std::int64_t age = std::max<std::int64_t>(0, mono - cell(w, kFirstSeen).as_int());
          group_watches().adopt(key, h.part, v, now - milliseconds(age));
          adopted = true;
        }
        break;
      }
      if (!same && written++ < 64)
        run(conn, Sql::sync_watch_write, {name, h.part, watcher, v.fence, v.beat, v.expire_at, mono});
    }
  } catch (const Error& e) {
    log(LogLevel::kDebug, "sharing the sightings of '" + name + "' with this machine failed: " + e.message());
  }
  return adopted;
}

// Judges `rows`, continuing this machine's watch on a first look at rows
// that ran out (a one-shot try from a new process).
Judged judge_shared(Connection& conn, const std::string& name, const std::string& key, const std::vector<Held>& rows,
                    TakeOver rule) {
  Judged j = judge(key, rows, rule);
  if (rule == TakeOver::kWatched && j.first_look && j.ran_out && !conn.in_transaction() &&
      continue_group_watch(conn, name, key, rows))
    j = judge(key, rows, rule);
  return j;
}

// sync_purge_slots with `places` slots, rendered once per catalog and size
// on each thread (at most 11 sizes: padded_size).
const std::string& purge_text(const Catalog& cat, std::size_t places) {
  thread_local std::map<std::pair<const Catalog*, std::size_t>, std::string> texts;
  std::string& text = texts[{&cat, places}];
  if (text.empty()) text = render_rows(cat, Sql::sync_purge_slots, "slots", Sql::sync_slot_ref, places);
  return text;
}

// Deletes the released holdings judge() found, by slot (point lookups, never
// a scan: on MariaDB a scan would lock live holdings too, waiting for one in
// its guarded transaction). A released row never changes again; a slot that
// is gone already deletes nothing.
void purge_released(Connection& conn, const std::string& name,
                    const std::vector<std::pair<std::int64_t, std::int64_t>>& rows) {
  if (rows.empty()) return;
  const Catalog& cat = catalog(conn);
  for (std::size_t at = 0; at < rows.size(); at += kMaxRenewalBatch) {
    const std::size_t n = std::min(kMaxRenewalBatch, rows.size() - at);
    const std::size_t places = padded_size(n);
    Params values;
    values.reserve(places + 1);
    values.emplace_back(name);
    for (std::size_t i = 0; i < places; ++i) values.emplace_back(i < n ? rows[at + i].first : std::int64_t{-1});
    run_rendered(conn, Sql::sync_purge_slots, purge_text(cat, places), values);
  }
}

// Takes over the rows judge() found ripe (sync_take_slot, fair_take_place),
// each only if its beat is still the one seen: a compare-and-set, by primary
// key (a renewal since keeps the row). One statement per row: a take-over is
// a dead holder's or waiter's, rare. Returns the rows taken.
std::int64_t take_over_rows(Connection& conn, Sql id, const std::string& name,
                            const std::vector<std::pair<std::int64_t, std::int64_t>>& rows) {
  std::int64_t taken = 0;
  for (const auto& [part, beat] : rows) taken += run(conn, id, {name, part, beat}).affected;
  return taken;
}

// A name's holdings from sync_peek or sync_rows (the same columns).
template <Sql id>
std::vector<Held> holdings_of(const std::vector<Row>& rows) {
  static constexpr auto kSlot = column(id, "slot");
  static constexpr auto kMode = column(id, "mode");
  static constexpr auto kFence = column(id, "fence");
  static constexpr auto kBeat = column(id, "beat");
  static constexpr auto kExpire = column(id, "expire_at");
  static constexpr auto kWatch = column(id, "watch_ms");
  static constexpr auto kReleased = column(id, "released");
  static constexpr auto kNow = column(id, "db_now_ms");
  static constexpr auto kPermits = column(id, id == Sql::sync_peek ? "held_permits" : "permits");
  std::vector<Held> out;
  out.reserve(rows.size());
  for (const Row& row : rows) {
    if (cell(row, kSlot).is_null()) continue;  // sync_peek: a name with no holding
    Held h;
    h.part = cell(row, kSlot).as_int();
    h.mode = cell(row, kMode).as_string();
    h.permits = cell(row, kPermits).as_int();
    h.seen.version = {cell(row, kFence).as_int(), cell(row, kBeat).as_int(), cell(row, kExpire).as_int()};
    h.seen.watch = milliseconds(cell(row, kWatch).as_int());
    h.seen.released = cell(row, kReleased).as_int() != 0;
    h.seen.db_now = cell(row, kNow).as_int();
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<Held> read_holdings(Connection& conn, const std::string& name) {
  return holdings_of<Sql::sync_rows>(run(conn, Sql::sync_rows, {name}).rows);
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
  if (peek.rows.empty()) return false;
  static constexpr auto kKind = column(Sql::sync_peek, "kind");
  static constexpr auto kPermits = column(Sql::sync_peek, "permits");
  static constexpr auto kWriter = column(Sql::sync_peek, "writer_until");
  static constexpr auto kNow = column(Sql::sync_peek, "db_now_ms");
  const auto& row = peek.rows.front();
  check_name(req.name, StoredName{cell(row, kKind).as_string(), cell(row, kPermits).as_int(), std::nullopt}, req.kind,
             req.capacity);
  const std::int64_t permits = cell(row, kPermits).as_int(), writer = cell(row, kWriter).as_int(),
                     now = cell(row, kNow).as_int();
  check_asked_permits(req, permits);
  const Judged j = judge_shared(conn, req.name, holdings_key(conn, req.name), holdings_of<Sql::sync_peek>(peek.rows),
                                req.rule);
  bool busy = false;
  switch (req.mode) {
    case SyncMode::kPermits: busy = j.permits + req.permits > permits; break;
    case SyncMode::kShared: busy = j.exclusive || writer > now; break;
    case SyncMode::kExclusive: busy = j.count > 0; break;
  }
  // A waiting writer still goes on to (re)publish its intent when what
  // is left of it is under half.
  const bool publish = req.mode == SyncMode::kExclusive && req.intent.count() > 0 && writer - now < req.intent.count() / 2;
  if (!busy || publish) return false;
  g.capacity = permits;
  g.holder_remaining_ms = g.takeover_in_ms = j.count > 0 ? j.next_ms : std::max<std::int64_t>(writer - now, 0);
  ++metric::lock_busy();
  return true;
}

}  // namespace

namespace {

// The attempt's work inside an open transaction (READ COMMITTED: every
// statement reads what is committed now): busy, or the holding written
// (acquired; the caller commits). `tx`: the attempt's own transaction, which
// a waiting writer's published intent commits; null inside a caller's.
SyncGrant attempt_in_transaction(Connection& conn, const SyncRequest& req, Transaction* tx) {
  SyncGrant g;
  run(conn, Sql::sync_open, {req.name, std::string(kind_name(req.kind)), req.capacity});
  const Head h = read_head(conn, req.name);
  check_name(req.name, h.stored(), req.kind, req.capacity);
  check_asked_permits(req, h.permits);
  reserve_name(conn, h.stored(), req.name, req.kind);
  const Judged live = judge(holdings_key(conn, req.name), read_holdings(conn, req.name), req.rule);
  g.capacity = h.permits;
  bool ok = false;
  switch (req.mode) {
    case SyncMode::kPermits: ok = live.permits + req.permits <= h.permits; break;
    case SyncMode::kShared: ok = !live.exclusive && h.writer_until <= h.now; break;
    case SyncMode::kExclusive: ok = live.count == 0; break;
  }
  if (!ok) {
    if (req.mode == SyncMode::kExclusive && req.intent.count() > 0 && tx) {
      run(conn, Sql::sync_set, {h.fence, static_cast<std::int64_t>(req.intent.count()), req.name});
      tx->commit();
    }
    g.holder_remaining_ms = g.takeover_in_ms =
        live.count > 0 ? live.next_ms : std::max<std::int64_t>(h.writer_until - h.now, 0);
    ++metric::lock_busy();
    return g;
  }
  // Released rows go at once; a take-over only as it was watched: a
  // renewal since (the holder lives) keeps its row, and this attempt is
  // busy (rolled back: nothing it took is lost).
  purge_released(conn, req.name, live.released);
  if (take_over_rows(conn, Sql::sync_take_slot, req.name, live.ripe) < static_cast<std::int64_t>(live.ripe.size())) {
    g.holder_remaining_ms = 1;
    ++metric::lock_busy();
    return g;
  }
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
  g.acquired = true;
  g.expire_at = h.now + req.ttl.count();
  return g;
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
    g = attempt_in_transaction(conn, req, &tx);
    if (!g.acquired) return g;  // (rolled back, or its intent committed)
    tx.commit();
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

SyncGrant sync_attempt_here(Connection& conn, const SyncRequest& req) {
  ++metric::lock_attempts();
  SyncGrant g;
  if (busy_by_peek(conn, req, g)) return g;
  g = attempt_in_transaction(conn, req, nullptr);
  if (g.acquired) ++metric::lock_acquired();
  return g;
}

bool sync_release(Connection& conn, const std::string& name, std::int64_t slot, const std::string& owner,
                  std::int64_t fence) {
  // Owner-, slot- and fence-checked: safe to run again when picked as a
  // deadlock victim (MariaDB: cleanup's scan of the expiry index locks an
  // unreleased row's index entry, then its row; the release locks the other
  // way round), as the lease's release is.
  const bool held = retry_contention(conn, [&] {
    return run(conn, Sql::sync_release, {name, slot, owner, fence}).affected > 0;
  });
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
                       "taker under TakeOver::kDatabaseClock after that clock passed its expiry)";
      return LossCause::kTakenOver;
    }
    *detail = what + " was taken over: its renewals stopped for longer than its ttl, and a taker that watched it "
                     "unchanged for that long removed it";
    return LossCause::kExpired;
  }
  static constexpr auto kOwner = column(Sql::sync_read, "owner");
  static constexpr auto kFence = column(Sql::sync_read, "fence");
  static constexpr auto kBeat = column(Sql::sync_read, "beat");
  const auto& row = r.rows.front();
  if (cell(row, kOwner).as_string() != owner || cell(row, kFence).as_int() != fence) {
    *detail = what + " was replaced by another holding";
    return LossCause::kTakenOver;
  }
  if (cell(row, kBeat).as_int() == 0) {
    // Released by someone else (its own release unregisters it first).
    *detail = what + " was ended by someone else while it was held";
    return LossCause::kTakenOver;
  }
  *detail = what + " was not renewed in time";
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
  // What `lock list` shows: holdings unexpired on the database clock (who
  // may take one over is the acquire's take-over rule, not this view).
  for (const Held& h : read_holdings(conn, name)) {
    if (h.seen.version.expire_at <= h.seen.db_now) continue;
    if (h.mode == "P") s.in_use += h.permits;
    else if (h.mode == "S") ++s.shared;
    else s.exclusive = true;
  }
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
  const bool one_statement =
      kind == LockKind::kFairLease && conn.dialect().plans().acquire->joins_fair_queue_in_one_statement();
  return retry_contention(conn, [&] {
    if (one_statement) {
      // One round trip where the name is a fair lease already (or new); any
      // other kind comes back empty and the transaction below refuses it.
      auto r = run(conn, Sql::fair_join, {name, std::string(kind_name(kind)), permits, owner,
                                          static_cast<std::int64_t>(place_ttl.count())});
      if (!r.rows.empty()) return cell(r.rows.front(), column(Sql::fair_join, "ticket")).as_int();
    }
    Transaction tx(conn, Isolation::kReadCommitted);
    run(conn, Sql::sync_open, {name, std::string(kind_name(kind)), permits});
    const Head h = read_head(conn, name);
    check_name(name, h.stored(), kind, permits);
    reserve_name(conn, h.stored(), name, kind);
    run(conn, Sql::fair_enqueue, {name, h.version, owner, static_cast<std::int64_t>(place_ttl.count())});
    tx.commit();
    return h.version;
  }, is_insert_race);
}

FairTurn fair_turn(Connection& conn, const std::string& name, std::int64_t ticket, const std::string& owner,
                   TakeOver rule, milliseconds place_watch) {
  auto r = run(conn, Sql::fair_gate, {name, ticket, owner, kPlacesWatched, lease_wakeup_channel(name)});
  static constexpr auto kMine = column(Sql::fair_gate, "mine");
  static constexpr auto kAhead = column(Sql::fair_gate, "ahead");
  static constexpr auto kHolder = column(Sql::fair_gate, "holder_expire_at");
  static constexpr auto kNow = column(Sql::fair_gate, "db_now_ms");
  static constexpr auto kTicket = column(Sql::fair_gate, "ticket");
  static constexpr auto kBeat = column(Sql::fair_gate, "beat");
  static constexpr auto kExpire = column(Sql::fair_gate, "expire_at");
  static constexpr auto kWatch = column(Sql::fair_gate, "watch_ms");
  static constexpr auto kGranted = column(Sql::fair_gate, "granted");
  static constexpr auto kFence = column(Sql::fair_gate, "holder_fence");
  static constexpr auto kTtl = column(Sql::fair_gate, "holder_ttl_ms");
  static constexpr auto kWakeLock = column(Sql::fair_gate, "wake_lock");
  const auto& row = r.rows.at(0);
  const std::int64_t now = cell(row, kNow).as_int();
  const Value& holder = cell(row, kHolder);
  const bool reserved = !holder.is_null() && holder.as_int() == kReservedExpireAt;
  const std::int64_t left = holder.is_null() || reserved ? 0 : std::max<std::int64_t>(0, holder.as_int() - now);
  std::int64_t ahead = cell(row, kAhead).as_int();
  // The first places ahead: a place stays ahead until this waiter has seen
  // it unchanged for its ttl (its waiter died); then it is removed, as seen.
  std::vector<Held> places;
  for (const Row& p : r.rows) {
    if (cell(p, kTicket).is_null()) continue;
    Held h;
    h.part = cell(p, kTicket).as_int();
    h.mode = "Q";
    const std::int64_t watch = cell(p, kWatch).as_int();
    h.seen = Sighting{RowVersion{h.part, cell(p, kBeat).as_int(), cell(p, kExpire).as_int()},
                      // A place an older sqlguard wrote (no ttl_ms): as long as this waiter's own.
                      milliseconds(watch > 0 ? watch : place_watch.count()), false, now};
    places.push_back(std::move(h));
  }
  // (No place ahead: judge() forgets the waiter's watch of them.)
  const Judged j = judge_shared(conn, name, places_key(conn, name, ticket), places, rule);
  ahead -= take_over_rows(conn, Sql::fair_take_place, name, j.ripe);
  FairTurn turn;
  turn.place_live = cell(row, kMine).as_int() > 0;
  turn.ahead = std::max<std::int64_t>(ahead, 0);
  turn.holder_left_ms = left;
  turn.reserved = reserved;
  if (!owner.empty() && !cell(row, kGranted).is_null() && cell(row, kGranted).as_int() == 1) {
    turn.granted = true;
    turn.fence = cell(row, kFence).as_int();
    turn.expire_at = holder.as_int();
    turn.ttl_ms = cell(row, kTtl).as_int();
  }
  if (const Value& wl = cell(row, kWakeLock); !wl.is_null()) turn.wake_lock = wl.as_int();
  return turn;
}

void fair_leave(Connection& conn, const std::string& name, std::int64_t ticket, const std::string& owner, bool wake) {
  const bool by_ticket = wake && conn.dialect().plans().wait->wakes_fair_by_ticket();
  run(conn, by_ticket ? Sql::fair_leave_wake : Sql::fair_leave, {name, ticket, owner});
  // A lease a release granted to the place and its waiter did not take up:
  // released after the place is gone, where fair_leave cannot do it in its
  // own statement (MariaDB). Its own commit: the place's delete waited for a
  // release that had locked it, whose grant this then finds.
  if (catalog(conn).has(Sql::fair_ungrant))
    retry_contention(conn, [&] { return run(conn, Sql::fair_ungrant, {name, owner}).affected; });
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
