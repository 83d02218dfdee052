// The lock client's renewer: one thread renews every held lease that is due
// with one statement per 1000 leases (renew_leases()) on the reserved
// renewal connection. Each statement runs on a worker it waits for only
// until the earliest trust window among its leases ends (BoundedCaller): a
// frozen server or a silent partition reports those leases lost in time,
// and the others are retried on a fresh connection.
#include <algorithm>
#include <set>
#include <string_view>
#include <thread>

#include "core/metric_hooks.h"
#include "dialect/dialect.h"
#include "client/bounded_call.h"
#include "client/client.h"
#include "core/clock_step.h"
#include "core/reconnect.h"
#include "strategies/sync/sync_ops.h"
#include "sqlguard/validate.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

void ClientCore::renew_register(const std::shared_ptr<ClientLease>& l) {
  Renewal r;
  r.lease = l;
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    r.acquisition = l->state->acquisition;
    r.fence = l->state->fence;
    r.key = l->key;
  }
  r.due = steady_clock::now() + l->period;
  {
    std::lock_guard<std::mutex> lk(renew_mu_);
    r.id = ++renewal_ids_;
    renewals_.insert_or_assign(l.get(), std::move(r));
    start_renewer_locked();  // a client over a borrowed connection starts it with its first renewed lease
  }
  renew_cv_.notify_all();
}

void ClientCore::admit(const ClientLease& l) const {
  if (!renewal_behind_.load()) return;
  std::string why;
  {
    std::lock_guard<std::mutex> lk(renew_mu_);
    why = behind_why_;
  }
  ++exhausted_;
  throw Error(ErrorCode::kResourceExhausted,
              "lock client of " + description_ + ": not taking '" + l.name + "' now: its renewals are falling behind (" +
                  why + "). Leases already held come first; new ones are taken again once a renewal round is back "
                  "in time. Retry later, or spread the leases over more lock clients (LockClient::create) or longer "
                  "ttls");
}

void ClientCore::renew_soon(const ClientLease* l) {
  {
    std::lock_guard<std::mutex> lk(renew_mu_);
    auto it = renewals_.find(l);
    if (it == renewals_.end() || !it->second.deferred) return;
    it->second.due = std::min(it->second.due, steady_clock::now());
  }
  renew_cv_.notify_all();
}

bool ClientCore::renewal_wanted(const ClientLease* l) const {
  std::lock_guard<std::mutex> lk(renew_mu_);
  auto it = renewals_.find(l);
  return it != renewals_.end() && (it->second.deferred || it->second.due <= steady_clock::now());
}

void ClientCore::renewed_in_guard(const ClientLease* l) {
  std::lock_guard<std::mutex> lk(renew_mu_);
  auto it = renewals_.find(l);
  if (it == renewals_.end()) return;
  it->second.deferred = false;
  it->second.due = steady_clock::now() + l->period;
  ++leases_renewed_;
}

std::size_t ClientCore::places_registered_locked() const {
  std::size_t n = 0;
  for (const auto& [k, r] : renewals_) n += r.lease->kind == RowKind::kPlace ? 1 : 0;
  return n;
}

void ClientCore::renew_unregister(const ClientLease* l) {
  std::lock_guard<std::mutex> lk(renew_mu_);
  const bool last = renewals_.erase(l) > 0 && renewals_.empty();
  // Nothing held: nothing for a late renewer to protect. Cleared here, not
  // when the renewer wakes next: an acquire right after the last release
  // must not be refused for a round that no longer matters.
  if (last && renewal_behind_.exchange(false))
    log(LogLevel::kInfo, "lock client: nothing held any more; new acquisitions are taken again");
}

// What the worker answers for one statement.
struct ChunkResult {
  std::shared_ptr<Connection> conn;
  std::atomic<bool> connected{false};
  std::vector<bool> renewed;
  std::vector<std::pair<LossCause, std::string>> causes;  // for the leases not renewed
  std::exception_ptr error;
  bool read_clock = false;             // the round's first statement: read the database clock too
  std::optional<ClockSample> clock;    // what it read
};

namespace {

// Renewal lags kept for stats(): more than one round of 10,000 leases.
constexpr std::size_t kLagSamples = 16384;
// The loss is reported this long before a trust window ends.
constexpr milliseconds kEarly(20);

// The database could not be reached or did not answer (core/reconnect.h's
// is_outage), or the error is not even a sqlguard::Error.
bool connection_problem(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& se) {
    return is_outage(se);
  } catch (...) {
    return true;
  }
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

// Sends one statement's renewals on the worker (which may outlive the
// client, abandoned on a hung call: it captures copies only) and fills `res`.
void renew_rows(ChunkResult& res, RowKind kind, const std::vector<RowRenewal>& reqs,
                const std::vector<std::int64_t>& known, const ConnectionFactory& open) {
  if (!res.conn) res.conn = std::shared_ptr<Connection>(open());
  res.connected = true;
  res.causes.resize(reqs.size());
  if (kind == RowKind::kLease) {
    std::vector<LeaseRenewal> leases;
    leases.reserve(reqs.size());
    for (const auto& r : reqs) leases.push_back(LeaseRenewal{r.name, r.owner, r.fence, r.ttl});
    res.renewed = renew_leases(*res.conn, leases);
  } else if (kind == RowKind::kHolding) {
    res.renewed = renew_holdings(*res.conn, reqs);
  } else {
    renew_places(*res.conn, reqs);
    res.renewed.assign(reqs.size(), true);
  }
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (res.renewed[i]) continue;
    auto& [cause, why] = res.causes[i];
    cause = kind == RowKind::kLease
                ? diagnose_lease(*res.conn, reqs[i].name, reqs[i].owner, reqs[i].fence, known[i], &why)
                : diagnose_holding(*res.conn, reqs[i].name, reqs[i].key, reqs[i].owner, reqs[i].fence, known[i] != 0,
                                   &why);
  }
  if (res.read_clock) {
    ClockSample s;
    s.sent = steady_clock::now();
    s.db_ms = res.conn->db_now_ms();
    s.back = steady_clock::now();
    res.clock = s;
  }
}

}  // namespace

// One lease in a renewal statement: the registration (Renewal::id) it was
// taken from, which its result applies to.
struct RenewItem {
  std::shared_ptr<ClientLease> lease;
  std::uint64_t id;
  std::string owner;
  std::int64_t fence;
  std::int64_t key;
  std::int64_t known_expire_at;
  steady_clock::time_point valid_until;
  steady_clock::time_point due;  // when it was needed (own schedule or its round's first due lease): the lag counts from it
};

// What the renewer carries from round to round, and what one round found.
struct RenewRound {
  BoundedCaller caller;
  bool unknown = false;  // the last failure was a sent renewal with no answer
  // The last late answer and its lease's period: new holdings are refused
  // until a round that started a period after it was in time (a round right
  // behind the late one, with the load that made it late, does not count).
  steady_clock::time_point late_at = steady_clock::time_point::min();
  milliseconds late_period{0};
  // This round.
  bool read_clock = false;  // its first answered statement reads the database clock (clock_step.h)
  steady_clock::time_point start;
  bool in_time = true;  // each answered lease's window left against half its slack
  std::string late;     // the first late statement, for admit()'s message
};

// The registration an item was taken from, if it is still the lease's
// (renew_mu_ held): the handle may have released and acquired again
// meanwhile (a new registration), which a result says nothing about.
ClientCore::Renewal* ClientCore::registration_locked(const RenewItem& it) {
  auto f = renewals_.find(it.lease.get());
  return f != renewals_.end() && f->second.id == it.id ? &f->second : nullptr;
}

void ClientCore::renewer_loop() {
  RenewRound round;
  // On the way out (the client stops): a renewal given up on (a stop, or
  // no answer within its window) may still be in its call, opening a
  // connection or waiting for an answer. The client's shutdown waits for it
  // as long as the call's own deadlines allow (connect_timeout, then
  // io_timeout per statement): a thread left running into the process's
  // exit crashes it there (OpenSSL's atexit cleanup under a connect).
  struct Drain {
    RenewRound& round;
    const ClientCore& core;
    ~Drain() {
      const auto& c = core.options().connect;
      if (!round.caller.drain(steady_clock::now() + c.connect_timeout + renewal_io_timeout(c) * 3))
        log(LogLevel::kWarning, "lock client: a renewal statement was still running at shutdown after its "
                                "deadlines; it finishes on its own thread");
    }
  } drain{round, *this};
  for (;;) {
    std::vector<RenewItem> items;
    std::vector<std::shared_ptr<ClientLease>> blocked;  // guarded past their trust window
    {
      std::unique_lock<std::mutex> lk(renew_mu_);
      if (!wait_until_due_locked(lk)) return;
      take_due_locked(items, blocked);
    }
    for (auto& l : blocked)
      l->state->mark_lost(LossCause::kOutcomeUnknown,
                          "lease '" + l->name + "' could not be renewed within its trust window: its own guarded "
                          "transaction (run_guarded) held its row that long");
    if (items.empty()) continue;
    const std::vector<std::size_t> chunk_ends = statements_of(items);
    // The round's leases are next due together, a period from the round's
    // start (each one's trust window still starts at its own statement's
    // request): a round whose statements take a while (10,000 leases on a
    // busy server) stays one group, not one per statement.
    round.start = steady_clock::now();
    round.read_clock = true;
    round.in_time = true;
    round.late.clear();
    for (std::size_t c = 0, begin = 0; c < chunk_ends.size(); begin = chunk_ends[c++])
      if (!renew_statement(round, items, begin, chunk_ends[c])) return;
    end_round(round);
  }
}

bool ClientCore::wait_until_due_locked(std::unique_lock<std::mutex>& lk) {
  for (;;) {
    if (stop_) return false;
    if (renewals_.empty()) {
      // Nothing held: nothing for a late renewer to protect (and no round
      // would ever clear it).
      if (renewal_behind_.exchange(false))
        log(LogLevel::kInfo, "lock client: nothing held any more; new acquisitions are taken again");
      renew_cv_.wait(lk);
      continue;
    }
    auto earliest = steady_clock::time_point::max();
    for (const auto& [k, r] : renewals_) earliest = std::min(earliest, r.due);
    if (earliest <= steady_clock::now()) return true;
    renew_cv_.wait_until(lk, earliest);
  }
}

// Due now, and with them every lease that would fall due before this
// round's period comes round again (a lease renewed early loses nothing: its
// window starts at this request). Renewed together, they stay one group:
// leases acquired at any moment cost one statement per 1000 per period, not
// one per acquisition time (Redisson's one timer). A lease with a much
// longer period joins only within a quarter of its own, so a 3 s lease's
// rounds do not renew a 30 s lease every second. A round started only by
// leases whose guarded transactions delayed them (deferred) renews them and
// what falls due within a quarter period, not the whole group: they rejoin
// the group's next round.
void ClientCore::take_due_locked(std::vector<RenewItem>& items, std::vector<std::shared_ptr<ClientLease>>& blocked) {
  const auto now = steady_clock::now();
  auto trigger_due = steady_clock::time_point::max();  // the round's first due lease
  milliseconds round_period = milliseconds::max();
  bool on_schedule = false;
  for (const auto& [k, r] : renewals_)
    if (r.due <= now) {
      trigger_due = std::min(trigger_due, r.due);
      if (r.deferred) continue;
      on_schedule = true;
      round_period = std::min(round_period, r.lease->period);
    }
  for (auto it = renewals_.begin(); it != renewals_.end();) {
    auto& r = it->second;
    const milliseconds p = r.lease->period;
    const bool joins = r.due <= now || r.due <= now + p / 4 || (on_schedule && p / 2 <= round_period && r.due <= now + p);
    if (!joins) {
      ++it;
      continue;
    }
    std::lock_guard<std::mutex> sl(r.lease->state->mu);
    const auto& st = *r.lease->state;
    if (st.hold == 0 || st.lost || st.acquisition != r.acquisition || st.fence != r.fence) {
      it = renewals_.erase(it);  // released, lost or re-acquired (a new registration follows)
      continue;
    }
    if (r.lease->guarded.load() > 0) {
      // Its own guarded transaction holds the row: renewing it would stall
      // the whole batch. Renewed when the transaction ends; lost if it
      // outlasts the trust window (as a renewal blocked behind it).
      if (st.valid_until - now <= kEarly) {
        blocked.push_back(r.lease);
        ++leases_lost_;
        it = renewals_.erase(it);
        continue;
      }
      if (r.due <= now) r.deferred = true;
      r.due = now + std::clamp<milliseconds>(r.lease->period / 4, milliseconds(10), milliseconds(1000));
      ++it;
      continue;
    }
    // The renewal lag counts from when it was needed: its own schedule (a
    // period after the request of its last renewal or acquisition, which its
    // trust window started at), or the round's first due lease when that was
    // earlier (a lease renewed early with a round that starts late is late
    // too, so a saturated renewer shows).
    const auto own_due = st.valid_until - (r.lease->options.ttl - r.lease->margin) + r.lease->period;
    items.push_back(
        RenewItem{r.lease, r.id, st.owner, r.fence, r.key, st.expire_at, st.valid_until, std::min(own_due, trigger_due)});
    ++it;
  }
}

// Statements of one row kind (leases, holdings, queue places), earliest
// trust window first: each statement waits only as long as its first lease's
// window allows. At most 1000 rows, in which no row appears twice (two
// handles of this client may hold the same name: one lease lost, not yet
// released, and its successor): a duplicate starts the next statement.
// Sorted in place: a round of 10,000 leases keeps one vector of them.
// Answers where each statement's leases end in `items`.
std::vector<std::size_t> ClientCore::statements_of(std::vector<RenewItem>& items) {
  std::sort(items.begin(), items.end(), [](const RenewItem& a, const RenewItem& b) {
    const auto ka = static_cast<int>(a.lease->kind), kb = static_cast<int>(b.lease->kind);
    return ka != kb ? ka < kb : a.valid_until < b.valid_until;
  });
  std::vector<std::size_t> chunk_ends;
  for (std::size_t i = 0; i < items.size();) {
    const RowKind kind = items[i].lease->kind;
    std::set<std::pair<std::string_view, std::int64_t>> rows;
    std::size_t j = i;
    while (j < items.size() && j - i < kMaxRenewalBatch && items[j].lease->kind == kind &&
           rows.insert({items[j].lease->name, kind == RowKind::kLease ? 0 : items[j].key}).second)
      ++j;
    chunk_ends.push_back(j);
    i = j;
  }
  return chunk_ends;
}

// One statement: items [begin, end). False when the client stops.
bool ClientCore::renew_statement(RenewRound& round, std::vector<RenewItem>& items, std::size_t begin,
                                 std::size_t end) {
  const RowKind kind = items[begin].lease->kind;
  std::vector<RowRenewal> reqs;
  reqs.reserve(end - begin);
  for (std::size_t i = begin; i < end; ++i)
    reqs.push_back(
        RowRenewal{items[i].lease->name, items[i].key, items[i].owner, items[i].fence, items[i].lease->options.ttl});
  const auto start = steady_clock::now();
  // Past its window (a paused process): a short while for the diagnosis,
  // never past the window of a lease of the chunk still inside its own.
  auto open_window = steady_clock::time_point::max();
  for (std::size_t i = begin; i < end && open_window == steady_clock::time_point::max(); ++i)
    if (items[i].valid_until - kEarly > start) open_window = items[i].valid_until - kEarly;
  const auto deadline = renewal_deadline(
      items[begin].valid_until, kEarly, start,
      std::clamp<milliseconds>(items[begin].lease->period, milliseconds(500), std::chrono::seconds(5)), open_window);
  auto res = std::make_shared<ChunkResult>();
  res->read_clock = round.read_clock;
  {
    std::lock_guard<std::mutex> lk(renew_mu_);
    res->conn = renew_conn_;
    renewer_worker_ = true;
  }
  std::vector<std::int64_t> known;  // leases: acquire-time expiry; holdings: 1 = sent inside its trust window
  for (std::size_t i = begin; i < end; ++i)
    known.push_back(kind == RowKind::kLease ? items[i].known_expire_at : (items[i].valid_until > start ? 1 : 0));
  auto outcome = round.caller.call(
      [res, kind, reqs = std::move(reqs), known = std::move(known), open = renewal_factory_] {
        try {
          renew_rows(*res, kind, reqs, known, open);
        } catch (...) {
          res->error = std::current_exception();
        }
      },
      deadline,
      [this] {
        std::lock_guard<std::mutex> lk(renew_mu_);
        return stop_;
      });
  if (outcome == BoundedCaller::Outcome::kStopped) return false;
  std::vector<std::pair<std::size_t, std::pair<LossCause, std::string>>> lost;  // (index in items, cause)
  {
    std::lock_guard<std::mutex> lk(renew_mu_);
    if (outcome == BoundedCaller::Outcome::kDone && !res->error) {
      answered_locked(round, items, begin, end, start, *res, lost);
      if (res->clock) {
        round.read_clock = false;
        clock_reading_locked(*res->clock);
      }
    } else {
      round.in_time = false;  // unanswered: neither behind nor back in time (an outage is reported as one)
      unanswered_locked(round, items, begin, end, outcome == BoundedCaller::Outcome::kTimedOut, *res, lost);
    }
    // Only the registration this statement was for: a result for one that
    // is gone (the handle released or is releasing it: release()
    // unregisters before it sends anything) says nothing about a lease
    // still held: it is dropped, not reported.
    lost.erase(std::remove_if(lost.begin(), lost.end(),
                              [&](const auto& l) {
                                if (!registration_locked(items[l.first])) return true;
                                renewals_.erase(items[l.first].lease.get());
                                return false;
                              }),
               lost.end());
  }
  // on_lost runs outside the renewer's mutex (it may call into the client).
  report_lost(items, lost);
  return true;
}

// A statement answered: renewed leases get a new trust window and their
// next due time; the others are lost with the cause the worker diagnosed.
void ClientCore::answered_locked(RenewRound& round, std::vector<RenewItem>& items, std::size_t begin,
                                 std::size_t end, steady_clock::time_point start, ChunkResult& res,
                                 std::vector<std::pair<std::size_t, std::pair<LossCause, std::string>>>& lost) {
  const auto now = steady_clock::now();
  renew_conn_ = res.conn;
  renew_conn_open_ = true;
  ++renewal_statements_;
  round.unknown = false;
  // Whether the renewer keeps up (admit()). A lease whose window had ended
  // before its statement was even sent (a paused process) says nothing here.
  for (std::size_t i = begin; i < end && round.late.empty(); ++i) {
    const RenewItem& it = items[i];
    const auto slack = it.lease->options.ttl - it.lease->margin - it.lease->period;
    if (it.valid_until <= start || it.valid_until - now >= slack / 2) continue;
    round.in_time = false;
    round.late_at = now;
    round.late_period = it.lease->period;
    round.late = "a renewal of " + std::to_string(end - begin) + " lease(s) came back with " +
                 format_duration(std::chrono::duration_cast<milliseconds>(it.valid_until - now)) +
                 " of a trust window left, under half of its " + format_duration(slack) + " slack; " +
                 std::to_string(renewals_.size()) + " holdings are renewed";
  }
  for (std::size_t i = begin; i < end; ++i) {
    RenewItem& it = items[i];
    if (!res.renewed[i - begin]) {
      lost.emplace_back(i, std::move(res.causes[i - begin]));
      continue;
    }
    ++leases_renewed_;
    const double lag = std::max(std::chrono::duration<double, std::milli>(start - it.due).count(), 0.0);
    if (lag_ms_.size() < kLagSamples) lag_ms_.push_back(lag);
    else lag_ms_[lag_next_++ % kLagSamples] = lag;
    {
      std::lock_guard<std::mutex> sl(it.lease->state->mu);
      auto& st = *it.lease->state;
      if (st.owner == it.owner && st.fence == it.fence && !st.lost)
        st.valid_until = start + it.lease->options.ttl - it.lease->margin;
    }
    if (Renewal* r = registration_locked(it)) {
      r->due = round.start + it.lease->period;
      r->deferred = false;
    }
  }
}

// A statement timed out (abandoned with its worker and connection) or
// failed: retried soon, or lost when its trust window ends before a retry.
void ClientCore::unanswered_locked(RenewRound& round, std::vector<RenewItem>& items, std::size_t begin,
                                   std::size_t end, bool timed_out, ChunkResult& res,
                                   std::vector<std::pair<std::size_t, std::pair<LossCause, std::string>>>& lost) {
  const auto now = steady_clock::now();
  const bool conn_problem = timed_out || connection_problem(res.error);
  if (conn_problem) {
    renew_conn_.reset();
    renew_conn_open_ = false;
    round.unknown = res.connected.load() || round.unknown;
  }
  if (!timed_out) {
    ++metric::lock_renew_errors();
    log(LogLevel::kInfo, "lock client renewal of " + std::to_string(end - begin) + " leases failed, retrying: " +
                             what_of(res.error));
  }
  for (std::size_t i = begin; i < end; ++i) {
    RenewItem& it = items[i];
    const milliseconds retry = std::clamp<milliseconds>(it.lease->period / 4, milliseconds(10), milliseconds(1000));
    if (it.valid_until - now <= retry * 2 || (timed_out && it.valid_until - kEarly <= now)) {
      const bool u = conn_problem ? round.unknown : false;
      std::string why = conn_problem ? std::string("database ") + (u ? "did not answer" : "unreachable")
                                     : "renewal failed: " + what_of(res.error);
      lost.emplace_back(i, std::make_pair(u ? LossCause::kOutcomeUnknown : LossCause::kUnreachable,
                                          "no renewal of lease '" + it.lease->name +
                                              "' succeeded within its trust window: " + why));
    } else if (Renewal* r = registration_locked(it)) {
      r->due = now + retry;
    }
  }
}

void ClientCore::report_lost(std::vector<RenewItem>& items,
                             std::vector<std::pair<std::size_t, std::pair<LossCause, std::string>>>& lost) {
  if (lost.empty()) return;
  // on_lost may drop the last handle of this client (a LeaseLock on a
  // borrowed connection owns its client): the client stays alive while the
  // callbacks run, and this reference is let go on another thread, where
  // the last one destroys the client and joins this thread (a thread cannot
  // join itself).
  auto self = weak_from_this().lock();
  struct LetGo {
    std::shared_ptr<ClientCore>& self;
    ~LetGo() {
      if (self) std::thread([s = std::move(self)]() mutable { s.reset(); }).detach();
    }
  } let_go{self};
  std::size_t reported = 0;
  for (auto& [i, cause] : lost) {
    ClientLease* lease = items[i].lease.get();
    if (lease->kind == RowKind::kPlace) {
      // A queue place is not a lease: its waiter finds it gone at its next
      // turn and queues again. Nothing to report.
      std::lock_guard<std::mutex> sl(lease->state->mu);
      if (lease->state->owner == items[i].owner && lease->state->fence == items[i].fence) lease->state->lost = true;
      continue;
    }
    reported += lease->state->mark_lost(cause.first, std::move(cause.second) + clock_note(lease->options.ttl),
                                        &items[i].owner, items[i].fence)
                    ? 1
                    : 0;
  }
  if (reported == 0) return;
  std::lock_guard<std::mutex> g(renew_mu_);
  leases_lost_ += reported;
}

void ClientCore::clock_reading_locked(const ClockSample& s) {
  if (last_clock_) {
    const std::int64_t step = clock_step_ms(*last_clock_, s);
    if (step != 0) {
      ++clock_steps_;
      last_clock_step_ms_ = step;
      last_clock_step_at_ = s.back;
      metric::clock_steps() += 1;
      log(LogLevel::kWarning,
          "lock client: the database clock stepped " + std::string(step > 0 ? "forward" : "back") + " by " +
              std::to_string(step > 0 ? step : -step) + " ms between two renewal rounds (against this process's "
              "monotonic clock). Take-overs under the default watched rule do not depend on it; lock list times, "
              "minimum holds, retention and TakeOver::kDatabaseClock take-overs shift by the step");
    }
  }
  last_clock_ = s;
}

std::string ClientCore::clock_note(milliseconds ttl) const {
  std::int64_t step = 0;
  steady_clock::time_point at;
  {
    std::lock_guard<std::mutex> lk(renew_mu_);
    step = last_clock_step_ms_;
    at = last_clock_step_at_;
  }
  // A step seen within two ttls of the loss may explain it (a
  // database-clock take-over after a forward step, a lease list that
  // looked expired).
  if (step == 0 || steady_clock::now() - at > 2 * ttl) return {};
  const auto ago = std::chrono::duration_cast<milliseconds>(steady_clock::now() - at).count();
  return " (the database clock stepped " + std::string(step > 0 ? "forward" : "back") + " by " +
         std::to_string(step > 0 ? step : -step) + " ms, seen " + std::to_string(ago) + " ms before this loss)";
}

void ClientCore::end_round(RenewRound& round) {
  std::lock_guard<std::mutex> lk(renew_mu_);
  ++renewal_rounds_;
  if (!round.late.empty()) {
    if (!renewal_behind_.load())
      log(LogLevel::kWarning, "lock client: renewals are falling behind (" + round.late +
                                  "); new acquisitions are refused until a round is back in time");
    behind_why_ = std::move(round.late);
    renewal_behind_ = true;
  } else if (round.in_time && renewal_behind_.load() && round.start >= round.late_at + round.late_period) {
    renewal_behind_ = false;
    log(LogLevel::kInfo, "lock client: renewals are back in time; new acquisitions are taken again");
  }
}

}  // namespace sqlguard::detail
