// SQLite checks of check_environment() (framework: core/doctor.h; SQL:
// sql/sqlite/doctor.sql): journal mode, durability (synchronous level), and whether the
// file is on a local filesystem (WAL's shared memory needs one host).
#include <sys/vfs.h>

#include <cerrno>
#include <cstring>

#include "core/doctor.h"

namespace sqlguard::detail {
namespace {

void journal_mode(DoctorContext& ctx) {
  std::string m = ctx.setting("journal_mode");
  if (m == "wal")
    ctx.ok("journal_mode", "WAL (readers do not block the writer)");
  else if (m == "memory" && ctx.setting("file").empty())
    ctx.warn("journal_mode", "in-memory database: private to this connection, nothing to coordinate across processes");
  else
    ctx.warn("journal_mode", "journal_mode=" + m + ": sqlguard's connections switch the file to WAL; another "
                             "program may have changed it back (readers then block the writer)");
}

// What a commit survives (see the PostgreSQL check). The processes sharing
// the file share its machine, so a power loss also ends every holder; what
// is lost then is a fence another system may already have seen.
void durability(DoctorContext& ctx) {
  std::string s = ctx.setting("synchronous");
  if (s == "0")
    ctx.fail("durability", "synchronous=OFF: a crash of the machine (power loss, kernel panic) can corrupt the file "
                           "and lose committed leases and fences, so a fence is issued twice; use NORMAL or FULL");
  else if (s == "1")
    ctx.ok("durability", "synchronous=NORMAL (WAL: durable across crashes of the process; a power loss can roll "
                         "back the last commits, and a fence seen outside the machine may then be issued again: "
                         "use FULL where that matters)");
  else
    ctx.ok("durability", "synchronous=" + std::string(s == "2" ? "FULL" : s == "3" ? "EXTRA" : s));
}

// Network filesystems break WAL (shared memory, POSIX locks between hosts).
void filesystem(DoctorContext& ctx) {
  std::string file = ctx.setting("file");
  if (file.empty()) {
    ctx.ok("filesystem", "in-memory database (no file)");
    return;
  }
  struct statfs st{};
  if (::statfs(file.c_str(), &st) != 0) {
    ctx.warn("filesystem", "cannot statfs " + file + ": " + std::strerror(errno));
    return;
  }
  struct Fs {
    unsigned long magic;
    const char* name;
  };
  static constexpr Fs kRemote[] = {{0x6969, "NFS"},        {0x517B, "SMB"},    {0xFF534D42, "CIFS"},
                                   {0xFE534D42, "SMB2"},   {0x01021997, "9p"}, {0x65735546, "FUSE"},
                                   {0x564c, "NCP"},        {0x73757245, "Coda"}, {0x5346414F, "AFS"}};
  for (const auto& fs : kRemote)
    if (static_cast<unsigned long>(st.f_type) == fs.magic) {
      ctx.fail("filesystem", file + " is on " + fs.name + ": SQLite's WAL and locks need a local filesystem "
                             "shared by every process on ONE host; use a server dialect across hosts");
      return;
    }
  ctx.ok("filesystem", file + " is on a local filesystem (processes on this host only)");
}

}  // namespace

void sqlite_doctor(DoctorContext& ctx) {
  ctx.check("journal_mode", [&] { journal_mode(ctx); });
  ctx.check("durability", [&] { durability(ctx); });
  ctx.check("filesystem", [&] { filesystem(ctx); });
}

}  // namespace sqlguard::detail
