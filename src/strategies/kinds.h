// Internal: the lock family's kinds (include/sqlguard/lock_kinds.def) and
// what each offers: one KindOps per kind, defined in its source file in
// src/strategies/kinds/ and found here by its enumerator. make_lock(),
// lock_holders(), the kind's stored name and error noun all come from here.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/lock_kinds.h"

namespace sqlguard::detail {

struct KindOps {
  // Throws Error(kInvalidArgument) when `spec` does not fit this kind (a
  // count it takes not or out of range, a side it has not): parse_lock_spec
  // and make_lock call it before anything else.
  void (*check)(const LockSpec& spec);
  // A handle of this kind on `name` (validates name, spec and options).
  std::shared_ptr<Lock> (*make)(std::shared_ptr<LockClient> client, std::string name, const LockSpec& spec,
                                LeaseOptions options, Watchdog watchdog);
  // The same from a URI, as the kind's URI constructor makes it.
  std::shared_ptr<Lock> (*make_from_uri)(const std::string& uri, std::string name, const LockSpec& spec,
                                         LeaseOptions options, Watchdog watchdog, const ConnectOptions& connect);
  // The name's live holders when it is of this kind; empty otherwise.
  std::vector<LockHolder> (*holders)(Connection& conn, const std::string& name);
};

#define SQLGUARD_LOCK_KIND(enumerator, name, noun, ops) extern const KindOps ops;
#include "sqlguard/lock_kinds.def"
#undef SQLGUARD_LOCK_KIND

const KindOps& kind_ops(LockKind kind);
// "lease", "fair", "semaphore", "rw", ...: sqlguard_sync.kind, errors, specs.
std::string_view kind_name(LockKind kind) noexcept;
// "a lease", "a semaphore", ...; for a stored name no kind has (a newer
// version's), "a lock of kind 'x'".
std::string kind_noun(std::string_view stored_name);

// KindOps::check of a kind that takes no permit count and has one side: it
// refuses a count and the shared side. `noun`: "a lease", for errors.
void refuse_spec_extras(const LockSpec& spec, std::string_view noun);

}  // namespace sqlguard::detail
