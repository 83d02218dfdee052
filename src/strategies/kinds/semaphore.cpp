// Semaphore and ReadWriteLease: thin handles over detail::SyncHandle
// (strategies/sync/sync_handle.h); the protocol is strategies/sync/sync_ops.cpp.
#include "sqlguard/semaphore.h"

#include "sqlguard/read_write_lease.h"
#include "sqlguard/validate.h"
#include "core/catalog.h"
#include "strategies/sync/sync_handle.h"
#include "strategies/sync/sync_ops.h"
#include "strategies/kinds.h"

namespace sqlguard {

using detail::SyncHandle;
using detail::SyncMode;
using std::chrono::milliseconds;

namespace {
constexpr std::int64_t kMaxPermits = 1000000;

void check_permits(std::int64_t permits, std::string_view what) {
  if (permits < 1 || permits > kMaxPermits)
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + " is " + std::to_string(permits) +
                                                 "; it must be between 1 and " + std::to_string(kMaxPermits));
}

// n (already within 1..kMaxPermits) against this handle's count: more could
// never be granted. The count stored for the name is checked at the attempt.
void check_asked(std::int64_t n, std::int64_t permits, const std::string& name) {
  if (n > permits)
    throw Error(ErrorCode::kInvalidArgument, "semaphore '" + printable(name, 64) + "': " + std::to_string(n) +
                                                 " permits asked for, but it has only " + std::to_string(permits) +
                                                 " permits: n must be within 1..permits");
}

SynchronizerInfo to_info(const detail::SyncStatus& s) {
  SynchronizerInfo i;
  i.exists = s.exists;
  i.kind = s.kind;
  i.permits = s.permits;
  i.in_use = s.in_use;
  i.shared = s.shared;
  i.exclusive = s.exclusive;
  i.writer_waiting = s.writer_waiting;
  i.fence = s.fence;
  return i;
}
}  // namespace

SynchronizerInfo synchronizer_info(Connection& conn, const std::string& name) {
  return to_info(detail::sync_status(conn, name));
}

std::int64_t resize_semaphore(Connection& conn, const std::string& name, std::int64_t permits) {
  validate_name(name, "name");
  check_permits(permits, "permits");
  return detail::sync_set_permits(conn, name, permits);
}

std::vector<HoldingInfo> list_holdings(Connection& conn) {
  using detail::Sql;
  using detail::cell;
  using detail::column;
  static constexpr auto kName = column(Sql::sync_list_held, "name");
  static constexpr auto kKind = column(Sql::sync_list_held, "kind");
  static constexpr auto kMode = column(Sql::sync_list_held, "mode");
  static constexpr auto kPermits = column(Sql::sync_list_held, "permits");
  static constexpr auto kOwner = column(Sql::sync_list_held, "owner");
  static constexpr auto kFence = column(Sql::sync_list_held, "fence");
  static constexpr auto kExpire = column(Sql::sync_list_held, "expire_at");
  static constexpr auto kNow = column(Sql::sync_list_held, "db_now_ms");
  std::vector<HoldingInfo> out;
  for (const auto& row : detail::run(conn, Sql::sync_list_held, {}).rows) {
    HoldingInfo h;
    h.name = cell(row, kName).as_string();
    h.kind = cell(row, kKind).as_string();
    const std::string m = cell(row, kMode).as_string();
    h.mode = m == "P" ? "permits" : m == "S" ? "shared" : "exclusive";
    h.permits = cell(row, kPermits).as_int();
    h.owner = cell(row, kOwner).as_string();
    h.fence = cell(row, kFence).as_int();
    h.expire_at_ms = cell(row, kExpire).as_int();
    h.db_now_ms = cell(row, kNow).as_int();
    out.push_back(std::move(h));
  }
  return out;
}

// ---- Semaphore -----------------------------------------------------------------

Semaphore::Semaphore(std::shared_ptr<LockClient> client, std::string name, std::int64_t permits,
                     LeaseOptions options, Watchdog watchdog)
    : permits_(permits) {
  check_permits(permits, "permits");
  h_ = std::make_unique<SyncHandle>(std::move(client), std::move(name), LockKind::kSemaphore, std::move(options),
                                    watchdog == Watchdog::kOn, "Semaphore");
}

Semaphore::Semaphore(const std::string& uri, std::string name, std::int64_t permits, LeaseOptions options,
                     Watchdog watchdog, const ConnectOptions& connect)
    : permits_(permits) {
  check_permits(permits, "permits");
  validate_name(name, "Semaphore name");
  detail::validate_sync_options(options, "Semaphore", true);
  auto client = detail::shared_client_for(uri, options, connect, "Semaphore");
  h_ = std::make_unique<SyncHandle>(std::move(client), std::move(name), LockKind::kSemaphore, std::move(options),
                                    watchdog == Watchdog::kOn, "Semaphore");
}

Semaphore::~Semaphore() = default;

void Semaphore::acquire_async(std::int64_t n, milliseconds wait, AcquireCallback done) {
  check_permits(n, "permits asked for");
  check_asked(n, permits_, name());
  h_->acquire_async(SyncMode::kPermits, n, permits_, wait, std::move(done));
}

std::future<bool> Semaphore::acquire_async(std::int64_t n, milliseconds wait) {
  auto [done, f] = detail::completion_future();
  acquire_async(n, wait, std::move(done));
  return std::move(f);
}

bool Semaphore::cancel_acquire() { return h_->cancel_acquire(); }

bool Semaphore::try_acquire(std::int64_t n) {
  check_permits(n, "permits asked for");
  check_asked(n, permits_, name());
  return h_->try_acquire(SyncMode::kPermits, n, permits_);
}

bool Semaphore::acquire(std::int64_t n, milliseconds wait) {
  check_permits(n, "permits asked for");
  check_asked(n, permits_, name());
  return h_->acquire(SyncMode::kPermits, n, permits_, wait);
}

bool Semaphore::release() { return h_->release(); }
bool Semaphore::owns() const { return h_->owns(); }
std::int64_t Semaphore::held_permits() const { return h_->held(); }
std::int64_t Semaphore::fence() const { return h_->fence(); }
std::string Semaphore::owner() const { return h_->owner(); }
int Semaphore::hold_count() const { return h_->hold_count(); }
milliseconds Semaphore::remaining() const { return h_->remaining(); }
std::optional<LeaseLoss> Semaphore::last_loss() const { return h_->last_loss(); }
std::optional<milliseconds> Semaphore::takeover_in() const { return h_->takeover_in(); }
const std::string& Semaphore::name() const noexcept { return h_->name(); }
milliseconds Semaphore::options_wait() const { return h_->options().wait; }

SynchronizerInfo Semaphore::info() {
  auto c = h_->core().borrow();
  return to_info(detail::sync_status(*c, h_->name()));
}

void Semaphore::set_permits(std::int64_t permits) {
  check_permits(permits, "permits");
  {
    auto c = h_->core().borrow();
    detail::sync_set_permits(*c, h_->name(), permits);
  }
  permits_ = permits;
  h_->core().sync_notify("semaphore:" + h_->name());  // a larger count may let local waiters in
}

bool Semaphore::run_guarded(const std::function<void(Transaction&)>& work) { return h_->run_guarded(work); }

SemaphoreGuard::SemaphoreGuard(Semaphore& sem, std::int64_t n, milliseconds wait) : sem_(sem) {
  if (!sem_.acquire(n, wait))
    throw Error(ErrorCode::kLockBusy, "semaphore '" + printable(sem_.name(), 64) + "': " + std::to_string(n) +
                                          " permit(s) not acquired within " + format_duration(wait));
}

SemaphoreGuard::~SemaphoreGuard() {
  try {
    sem_.release();
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, "SemaphoreGuard: release of '" + sem_.name() + "' failed (it expires by itself): " + e.what());
  }
}

// ---- ReadWriteLease --------------------------------------------------------------

std::string_view to_string(LeaseMode mode) noexcept { return mode == LeaseMode::kShared ? "shared" : "exclusive"; }

namespace {
SyncMode sync_mode(LeaseMode m) { return m == LeaseMode::kShared ? SyncMode::kShared : SyncMode::kExclusive; }
}  // namespace

ReadWriteLease::ReadWriteLease(std::shared_ptr<LockClient> client, std::string name, LeaseOptions options,
                               Watchdog watchdog)
    : h_(std::make_unique<SyncHandle>(std::move(client), std::move(name), LockKind::kReadWrite, std::move(options),
                                      watchdog == Watchdog::kOn, "ReadWriteLease")) {}

ReadWriteLease::ReadWriteLease(const std::string& uri, std::string name, LeaseOptions options, Watchdog watchdog,
                               const ConnectOptions& connect) {
  validate_name(name, "ReadWriteLease name");
  detail::validate_sync_options(options, "ReadWriteLease", false);
  auto client = detail::shared_client_for(uri, options, connect, "ReadWriteLease");
  h_ = std::make_unique<SyncHandle>(std::move(client), std::move(name), LockKind::kReadWrite, std::move(options),
                                    watchdog == Watchdog::kOn, "ReadWriteLease");
}

ReadWriteLease::~ReadWriteLease() = default;

void ReadWriteLease::acquire_async(LeaseMode mode, milliseconds wait, AcquireCallback done) {
  h_->acquire_async(sync_mode(mode), 1, 0, wait, std::move(done));
}

std::future<bool> ReadWriteLease::acquire_async(LeaseMode mode, milliseconds wait) {
  auto [done, f] = detail::completion_future();
  acquire_async(mode, wait, std::move(done));
  return std::move(f);
}

bool ReadWriteLease::cancel_acquire() { return h_->cancel_acquire(); }

bool ReadWriteLease::try_acquire(LeaseMode mode) { return h_->try_acquire(sync_mode(mode), 1, 0); }
bool ReadWriteLease::acquire(LeaseMode mode, milliseconds wait) { return h_->acquire(sync_mode(mode), 1, 0, wait); }
bool ReadWriteLease::release() { return h_->release(); }
bool ReadWriteLease::owns() const { return h_->owns(); }
std::optional<LeaseMode> ReadWriteLease::mode() const {
  auto m = h_->mode();
  if (!m) return std::nullopt;
  return *m == SyncMode::kShared ? LeaseMode::kShared : LeaseMode::kExclusive;
}
std::int64_t ReadWriteLease::fence() const { return h_->fence(); }
std::string ReadWriteLease::owner() const { return h_->owner(); }
int ReadWriteLease::hold_count() const { return h_->hold_count(); }
milliseconds ReadWriteLease::remaining() const { return h_->remaining(); }
std::optional<LeaseLoss> ReadWriteLease::last_loss() const { return h_->last_loss(); }
std::optional<milliseconds> ReadWriteLease::takeover_in() const { return h_->takeover_in(); }
const std::string& ReadWriteLease::name() const noexcept { return h_->name(); }

SynchronizerInfo ReadWriteLease::info() {
  auto c = h_->core().borrow();
  return to_info(detail::sync_status(*c, h_->name()));
}

bool ReadWriteLease::run_guarded(const std::function<void(Transaction&)>& work) { return h_->run_guarded(work); }

// ---- ReadWriteLease::Side ----------------------------------------------------------

bool ReadWriteLease::Side::owns() const { return rw_.mode() == mode_ && rw_.owns(); }
int ReadWriteLease::Side::hold_count() const { return rw_.mode() == mode_ ? rw_.hold_count() : 0; }
milliseconds ReadWriteLease::Side::remaining() const { return rw_.mode() == mode_ ? rw_.remaining() : milliseconds(0); }
milliseconds ReadWriteLease::Side::lock_wait() const { return rw_.h_->options().wait; }

bool ReadWriteLease::Side::release() {
  const auto held = rw_.mode();
  if (held && *held != mode_) {
    log(LogLevel::kWarning, "release() of the " + std::string(to_string(mode_)) + " side of read-write lease '" +
                                rw_.name() + "', which this handle holds " + std::string(to_string(*held)) +
                                ": nothing released");
    return false;
  }
  return rw_.release();
}

bool ReadWriteLease::Side::run_guarded(const std::function<void(Transaction&)>& work) {
  if (rw_.mode() != mode_) return false;  // not held in this mode: nothing runs
  return rw_.run_guarded(work);
}

// ---- the kinds kSemaphore and kReadWrite (lock_kinds.def) ------------------------

namespace detail {
namespace {
void check_semaphore(const LockSpec& spec) {
  if (spec.mode != LeaseMode::kExclusive)
    throw Error(ErrorCode::kInvalidArgument, "a semaphore has no shared side (LockSpec::mode shared is for a "
                                             "read-write lease)");
  check_permits(spec.permits, "a semaphore's permits (LockSpec::permits)");
}

std::shared_ptr<Lock> make_semaphore(std::shared_ptr<LockClient> client, std::string name, const LockSpec& spec,
                                     LeaseOptions options, Watchdog watchdog) {
  return std::make_shared<Semaphore>(std::move(client), std::move(name), spec.permits, std::move(options), watchdog);
}

std::shared_ptr<Lock> make_semaphore_from_uri(const std::string& uri, std::string name, const LockSpec& spec,
                                              LeaseOptions options, Watchdog watchdog, const ConnectOptions& connect) {
  return std::make_shared<Semaphore>(uri, std::move(name), spec.permits, std::move(options), watchdog, connect);
}

void check_read_write(const LockSpec& spec) {
  if (spec.permits != 0)
    throw Error(ErrorCode::kInvalidArgument, "a read-write lease takes no permit count (LockSpec::permits is " +
                                                 std::to_string(spec.permits) + ")");
}

// The side the spec asks for; the Lock keeps its ReadWriteLease alive.
std::shared_ptr<Lock> side_of(std::shared_ptr<ReadWriteLease> rw, LeaseMode mode) {
  Lock& side = rw->side(mode);
  return std::shared_ptr<Lock>(std::move(rw), &side);
}

std::shared_ptr<Lock> make_read_write(std::shared_ptr<LockClient> client, std::string name, const LockSpec& spec,
                                      LeaseOptions options, Watchdog watchdog) {
  return side_of(std::make_shared<ReadWriteLease>(std::move(client), std::move(name), std::move(options), watchdog),
                 spec.mode);
}

std::shared_ptr<Lock> make_read_write_from_uri(const std::string& uri, std::string name, const LockSpec& spec,
                                               LeaseOptions options, Watchdog watchdog, const ConnectOptions& connect) {
  return side_of(std::make_shared<ReadWriteLease>(uri, std::move(name), std::move(options), watchdog, connect),
                 spec.mode);
}

std::vector<LockHolder> semaphore_holders(Connection& conn, const std::string& name) {
  return sync_live_holders(conn, name, LockKind::kSemaphore);
}
std::vector<LockHolder> read_write_holders(Connection& conn, const std::string& name) {
  return sync_live_holders(conn, name, LockKind::kReadWrite);
}
}  // namespace

const KindOps kSemaphoreKind{check_semaphore, make_semaphore, make_semaphore_from_uri, semaphore_holders};
const KindOps kReadWriteKind{check_read_write, make_read_write, make_read_write_from_uri, read_write_holders};
}  // namespace detail

}  // namespace sqlguard
