#include "bench_sql.h"

#include <iostream>
#include <mutex>

#include "common.h"
#include "sqlguard/catalog.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/row_lock.h"
#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"

namespace sqlguard::bench {

Sql::Sql(Connection& c) {
  const std::string d(to_string(c.kind()));
  auto text = [&](const char* name) {
    const auto& e = sql_statement(d, name);
    return e.available ? e.text : std::string();
  };
  lock_timeout_get = text("lock_timeout_get");
  lock_timeout_set = text("lock_timeout_set");
  lock_timeout_local = text("lock_timeout_local");
  idem_insert = text("idem_insert");
  idem_select = text("idem_select");
  idem_complete = text("idem_complete");
  inbox_insert = text("inbox_insert");
  e_idem_insert = &sql_statement(d, "idem_insert");
  e_idem_select = &sql_statement(d, "idem_select");
  e_idem_complete = &sql_statement(d, "idem_complete");
  e_inbox_insert = &sql_statement(d, "inbox_insert");

  // The strategies render these once from catalog templates with the bench
  // table's identifiers: record what they send on a key that has no row.
  std::map<std::string, std::string> seen;
  c.set_statement_observer([&](const StatementEvent& e) {
    if (!e.catalog_name.empty()) seen[std::string(e.catalog_name)] = std::string(e.sql);
  });
  const std::int64_t absent = -1;
  GuardedUpdate(c, GuardedUpdateSpec{kStock, "id", {{"qty", AssignOp::kSubtract}}, {{"qty", Compare::kGe}}})
      .apply(absent, {1, 1});
  RowLockSpec rs;
  rs.table = kStock;
  rs.columns = {"qty"};
  RowLocker(c, rs).lock(absent);
  VersionCasSpec cs;
  cs.table = kStock;
  cs.columns = {"qty"};
  VersionCas cas(c, cs);
  cas.read(absent);
  cas.compare_and_set(absent, 0, {1});
  c.set_statement_observer({});
  // On a table declared versioned (version_cas.h) the guarded update moves the version too.
  g_update = seen.count("guarded_update_versioned") ? seen.at("guarded_update_versioned") : seen.at("guarded_update");
  g_exists = seen.at("row_exists");
  rl_select = seen.at("row_lock_select");
  cas_select = seen.at("cas_select");
  cas_update = seen.at("cas_update");
  cas_version = seen.at("cas_version");
}

namespace {

// The durability settings a benchmark states, read from the server (the
// bench's own reads, not sqlguard statements: the catalog has none for them).
std::vector<std::string> settings(Connection& c, const char* sql) {
  auto r = c.execute(sql);
  std::vector<std::string> out;
  for (const auto& v : r.rows.at(0).cells) out.push_back(v.is_null() ? std::string() : v.as_string());
  return out;
}

Durability postgresql_cycle(Connection& c, ReleaseCommit commit) {
  const auto v = settings(c, "SELECT current_setting('fsync'), current_setting('synchronous_commit')");
  const std::string head = "PostgreSQL fsync=" + v[0] + ", synchronous_commit=" + v[1] + ": ";
  if (v[0] != "on") return {head + "no flush reaches the disk (not durable)", 0};
  if (v[1] == "off") return {head + "no commit waits for its WAL flush (not durable)", 0};
  if (commit == ReleaseCommit::kDurable) return {head + "2 WAL flushes per cycle (acquire, release)", 2};
  return {head + "1 WAL flush per cycle (acquire; the release does not wait, the next acquire's flush covers it)", 1};
}

Durability mysql_cycle(Connection& c) {
  const auto v = settings(c, "SELECT CAST(@@GLOBAL.innodb_flush_log_at_trx_commit AS CHAR), CAST(@@GLOBAL.log_bin AS "
                             "CHAR), CAST(@@GLOBAL.sync_binlog AS CHAR)");
  std::string head = "MariaDB innodb_flush_log_at_trx_commit=" + v[0];
  head += v[1] == "1" ? ", binlog on, sync_binlog=" + v[2] + ": " : ", binlog off: ";
  if (v[0] != "1") return {head + "the redo log is flushed about once a second (not durable)", 0};
  return {head + "2 redo-log flushes per cycle (take-over, release)", 2};
}

Durability sqlite_cycle(Connection& c) {
  const auto v = settings(c, "SELECT (SELECT journal_mode FROM pragma_journal_mode), "
                             "(SELECT CAST(synchronous AS TEXT) FROM pragma_synchronous)");
  static const char* kLevels[] = {"OFF", "NORMAL", "FULL", "EXTRA"};
  const int level = std::stoi(v[1]);
  const std::string head =
      "SQLite journal_mode=" + v[0] + ", synchronous=" + (level >= 0 && level < 4 ? kLevels[level] : v[1]) + ": ";
  if (level == 0) return {head + "no fsync at all (not durable)", 0};
  if (level == 1 && v[0] == "wal")
    return {head + "no fsync per commit (the WAL is synced at checkpoints: survives a process crash, not a power "
                   "loss)",
            0};
  return {head + "2 fsyncs per cycle (take-over, release)", 2};
}

}  // namespace

Durability commit_durability(Connection& c) {
  // A durable release makes every commit of a cycle wait for its flush: the
  // settings part of that statement is this one's too.
  const Durability cycle = lease_cycle_durability(c, ReleaseCommit::kDurable);
  const auto colon = cycle.summary.find(": ");
  const std::string head = cycle.summary.substr(0, colon == std::string::npos ? cycle.summary.size() : colon);
  if (!cycle.flushes_per_cycle) return {head, std::nullopt};
  if (*cycle.flushes_per_cycle == 0) return {cycle.summary, 0};
  return {head + ": each commit waits for its flush", 1};
}

Durability lease_cycle_durability(Connection& c, ReleaseCommit commit) {
  switch (c.kind()) {
    case DialectKind::kPostgresql: return postgresql_cycle(c, commit);
    case DialectKind::kMysql: return mysql_cycle(c);
    case DialectKind::kSqlite: return sqlite_cycle(c);
    default: return {"unknown for " + std::string(to_string(c.kind())), std::nullopt};
  }
}

namespace {

// One recorded statement as --emit-sql prints it.
std::string recorded_line(const StatementEvent& e) {
  switch (e.kind) {
    case StatementKind::kBegin: return "BEGIN";
    case StatementKind::kCommit: return "COMMIT";
    case StatementKind::kRollback: return "ROLLBACK";
    case StatementKind::kStatement: break;
  }
  std::string line;
  if (e.catalog_name.empty()) {
    line = "-- the op's own business write (not sqlguard's)\n";
  } else {
    const auto& entry = sql_statement(e.dialect, e.catalog_name);
    line = "-- " + entry.name + " (sql/" + entry.file + ")";
    for (std::size_t i = 0; i < entry.params.size(); ++i) line += (i ? ", " : ": ") + entry.params[i];
    line += "\n";
  }
  return line + std::string(e.sql);
}

// A synchronizer op's cycle on a lock client of its own: its connections
// are the client's, so a process-wide observer records them (nothing else
// runs meanwhile; the client's renewal thread has nothing due in a cycle).
Recorded record_sync_op(const std::string& op, const Cell& cell) {
  Recorded rec;
  std::mutex mu;
  std::vector<std::string>* into = nullptr;  // guarded by mu
  set_global_statement_observer([&](const StatementEvent& e) {
    std::lock_guard<std::mutex> lk(mu);
    if (into) into->push_back(recorded_line(e));
  });
  struct Off {
    ~Off() { set_global_statement_observer({}); }
  } off;
  LockClientOptions co;
  co.connect = cli::connect_options();
  auto client = LockClient::create(cli::single_db(), co);
  auto record = [&](bool exclusive, std::vector<std::string>& lines) {
    auto cycle = sync_solo_cycle(op, client, cell.prefix + (exclusive ? ":x" : ":s"), cell.permits, exclusive);
    cycle();  // creates what a first cycle creates (the name's row)
    {
      std::lock_guard<std::mutex> lk(mu);
      into = &lines;
    }
    cycle();
    std::lock_guard<std::mutex> lk(mu);
    into = nullptr;
  };
  record(op == "fair-lease", rec.lines);
  rec.round_trips = static_cast<int>(rec.lines.size());
  if (op == "rw-mixed") {
    record(true, rec.exclusive_lines);
    rec.round_trips_exclusive = static_cast<int>(rec.exclusive_lines.size());
  }
  return rec;
}

}  // namespace

Recorded record_op(const std::string& op, const Cell& cell) {
  if (sync_op(op)) return record_sync_op(op, cell);
  Recorded rec;
  bool on = false;
  auto observer = [&rec, &on](const StatementEvent& e) {
    if (!on) return;
    ++rec.round_trips;
    rec.lines.push_back(recorded_line(e));
  };
  Cell c = cell;
  if (op == "handoff") c.op = "lease-hot";  // the same statements; waiters add their wake-up wait
  auto fn = sg_op(c, 0, [&] {
    auto conn = cli::open_db();
    conn->set_statement_observer(observer);
    return conn;
  });
  fn();  // creates what a first run creates (lock rows, the replayed key)
  on = true;
  fn();
  on = false;
  return rec;
}

void emit_sql(const std::string& dialect, bool numbered, const std::vector<std::string>& ops,
              const std::map<std::string, Recorded>& recorded) {
  if (cli::global().json) {  // one object per op: {dialect, op, round_trips, statements[]}
    for (const auto& op : ops) {
      const auto& r = recorded.at(op);
      nlohmann::json j = {{"dialect", dialect}, {"op", op}, {"round_trips", r.round_trips}, {"statements", r.lines}};
      if (r.round_trips_exclusive >= 0) {
        j["round_trips_exclusive"] = r.round_trips_exclusive;
        j["statements_exclusive"] = r.exclusive_lines;
      }
      cli::print_json(j);
    }
    return;
  }
  std::cout << "-- sqlguard bench --emit-sql, dialect " << dialect
            << ": what each op sends per operation in steady state, recorded from a run, each statement\n"
            << "-- named by its entry in the SQL catalog (sql/" << dialect << "/*.sql; `?` = bound value"
            << (numbered ? ", numbered $1..$n on the wire" : "") << ").\n";
  for (const auto& op : ops) {
    const auto& r = recorded.at(op);
    std::cout << "\n-- op: " << op << " (" << r.round_trips << " round trips)\n";
    if (op == "handoff")
      std::cout << "-- waiters: between attempts they wait for a release by the dialect's wait plan (a wake-up lock,\n"
                   "-- NOTIFY to the head of the waiters, a futex word, or polling), with a backoff cap\n";
    if (op == "fair-lease")
      std::cout << "-- a waiter: its first busy attempt takes a place in the name's queue (fair_enqueue, a ticket in\n"
                   "-- commit order), later attempts ask fair_gate whether it is its turn, it leaves with fair_leave;\n"
                   "-- the client renews its place (fair_renew_batch) and wakes it by the dialect's wait plan\n";
    if (op == "semaphore-hot" || op == "rw-mixed")
      std::cout << "-- a waiter: each attempt is this protocol (sync_open writes the name's row first); between\n"
                   "-- attempts it naps with full jitter up to backoff_max, woken early only by a release of a handle\n"
                   "-- of the same lock client\n";
    if (op == "rw-mixed") std::cout << "-- a shared cycle:\n";
    for (const auto& line : r.lines) std::cout << line << ";\n";
    if (r.round_trips_exclusive >= 0) {
      std::cout << "-- an exclusive cycle (" << r.round_trips_exclusive << " round trips):\n";
      for (const auto& line : r.exclusive_lines) std::cout << line << ";\n";
    }
  }
}

}  // namespace sqlguard::bench
