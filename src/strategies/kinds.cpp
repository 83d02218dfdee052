// The lock family's kinds (kinds.h): the table made from lock_kinds.def,
// make_lock(), lock_holders() and LockSpec's spelling.
#include "strategies/kinds.h"

#include <charconv>

#include "sqlguard/lock_client.h"
#include "sqlguard/validate.h"

namespace sqlguard {

namespace detail {
namespace {
struct KindRow {
  LockKind kind;
  std::string_view name, noun;
  const KindOps* ops;
};
constexpr KindRow kKinds[] = {
#define SQLGUARD_LOCK_KIND(enumerator, name, noun, ops) {LockKind::enumerator, name, noun, &ops},
#include "sqlguard/lock_kinds.def"
#undef SQLGUARD_LOCK_KIND
};

const KindRow& row_of(LockKind kind) {
  for (const auto& r : kKinds)
    if (r.kind == kind) return r;
  throw Error(ErrorCode::kInvalidArgument, "unknown lock kind " + std::to_string(static_cast<int>(kind)));
}

std::string known_kinds() {
  std::string s;
  for (const auto& r : kKinds) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}
}  // namespace

const KindOps& kind_ops(LockKind kind) { return *row_of(kind).ops; }

std::string_view kind_name(LockKind kind) noexcept {
  for (const auto& r : kKinds)
    if (r.kind == kind) return r.name;
  return "?";
}

std::string kind_noun(std::string_view stored_name) {
  for (const auto& r : kKinds)
    if (r.name == stored_name) return std::string(r.noun);
  if (stored_name == "reserved") return "a semaphore or read-write lease";
  return "a lock of kind '" + printable(stored_name, 32) + "'";
}

void refuse_spec_extras(const LockSpec& spec, std::string_view noun) {
  if (spec.permits != 0)
    throw Error(ErrorCode::kInvalidArgument, std::string(noun) + " takes no permit count (LockSpec::permits is " +
                                                 std::to_string(spec.permits) + "; a semaphore does)");
  if (spec.mode != LeaseMode::kExclusive)
    throw Error(ErrorCode::kInvalidArgument,
                std::string(noun) + " has no shared side (LockSpec::mode shared is for a read-write lease)");
}

}  // namespace detail

std::string_view to_string(LockKind kind) noexcept { return detail::kind_name(kind); }

std::vector<LockKind> lock_kinds() {
  std::vector<LockKind> out;
  for (const auto& r : detail::kKinds) out.push_back(r.kind);
  return out;
}

LockSpec parse_lock_spec(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  const std::string_view arg = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  LockSpec spec;
  bool found = false;
  for (const auto& r : detail::kKinds)
    if (r.name == name) spec.kind = r.kind, found = true;
  if (!found)
    throw Error(ErrorCode::kInvalidArgument, "unknown lock kind '" + printable(name, 32) + "' (known: " +
                                                 detail::known_kinds() + "; e.g. semaphore:3, rw:shared)");
  if (colon == std::string_view::npos) return spec;
  if (arg == "shared" || arg == "exclusive") {
    spec.mode = arg == "shared" ? LeaseMode::kShared : LeaseMode::kExclusive;
  } else {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), n);
    if (ec != std::errc() || end != arg.data() + arg.size() || arg.empty())
      throw Error(ErrorCode::kInvalidArgument, "lock kind '" + printable(text, 48) +
                                                   "': after ':' a permit count (semaphore:3) or shared / exclusive "
                                                   "(rw:shared) was expected");
    spec.permits = n;
  }
  detail::kind_ops(spec.kind).check(spec);
  return spec;
}

std::string to_string(const LockSpec& spec) {
  std::string s(detail::kind_name(spec.kind));
  if (spec.permits) s += ":" + std::to_string(spec.permits);
  if (spec.kind == LockKind::kReadWrite) s += ":" + std::string(to_string(spec.mode));
  return s;
}

std::shared_ptr<Lock> make_lock(std::shared_ptr<LockClient> client, std::string name, const LockSpec& spec,
                                LeaseOptions options, Watchdog watchdog) {
  if (!client) throw Error(ErrorCode::kInvalidArgument, "make_lock: no lock client (null)");
  detail::kind_ops(spec.kind).check(spec);
  return detail::kind_ops(spec.kind).make(std::move(client), std::move(name), spec, std::move(options), watchdog);
}

std::shared_ptr<Lock> make_lock(const std::string& uri, std::string name, const LockSpec& spec, LeaseOptions options,
                                Watchdog watchdog, const ConnectOptions& connect) {
  detail::kind_ops(spec.kind).check(spec);
  return detail::kind_ops(spec.kind).make_from_uri(uri, std::move(name), spec, std::move(options), watchdog, connect);
}

std::vector<LockHolder> lock_holders(Connection& conn, const std::string& name, LockKind kind) {
  validate_name(name, "lock name");
  return detail::kind_ops(kind).holders(conn, name);
}

}  // namespace sqlguard
