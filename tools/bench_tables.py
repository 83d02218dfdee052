#!/usr/bin/env python3
"""Benchmark tables of docs/benchmarks.md and docs/bench.md, generated from the bench's JSON.

    tools/bench_tables.py DIR --write FILE...   rewrite every table region of each FILE
    tools/bench_tables.py DIR --check FILE...   exit 1 when a region differs (ctest bench_tables)

DIR holds ONE run of tools/bench.sh: <dialect>.json (one JSON object per line,
the comparators' cells of the same invocation included),
postgresql-durable-release.json, settings.txt, optionally scale.json (the
1 M-row checks of an earlier run, first line {"run": {...}} saying which),
optionally <dialect>-cpu-load.json (the waiters and handoff ops again beside
`--cpu-load N` spinning processes, same run), optionally churn-soak.json (`sqlguard bench --ops churn-soak` runs, an hour
long: a run of their own, first line {"run": {...}} saying which, every cell
carrying that run's run_id).
Every cell's run_id must equal settings.txt's: a table never mixes runs.
A region is the text between `<!-- bench-table: NAME -->` and
`<!-- /bench-table -->`; NAME is one of: run, main, contention, handoff, barging,
comparators, scale, round-trips, held-leases, held-leases-summary (README.md), waiters,
fair-lease, semaphore-hot, rw-mixed, churn-soak, cpu-load, commit-rate, takeover, coalesced, cart, history, lock-set. Each
table ends with the run it comes from
(date, machine, matrix); durability is stated in the rows. No number in those
regions is typed by hand, so none can contradict the data.
"""
import json
import os
import re
import sys

DIALECTS = [("sqlite", "SQLite"), ("postgresql", "PostgreSQL"), ("mysql", "MariaDB")]
COMPARATORS = [("redis", "Redis"), ("etcd", "etcd")]
DURABLE = "postgresql-durable-release"  # PostgreSQL's lease ops with --durable-release
LOADED = "-cpu-load"  # <dialect>-cpu-load.json: waiters and handoff beside --cpu-load N (issue 40 item 6)
LEASE_OPS = ("lease-distinct", "lease-hot")
# The lock-client ops: one cell per --held / --waiters value, not per client
# count; they have tables of their own and stay out of the matrix tables.
CLIENT_OPS = ("held-leases", "waiters", "churn-soak", "takeover", "lease-coalesced", "lock-set")
# The synchronizer ops (issue 28): op x clients cells, but each has a table of
# its own (fair-lease holds two sides per cell) and none is in the main table.
SYNC_OPS = ("fair-lease", "semaphore-hot", "rw-mixed")
# The database's own one-client commit rate (issue 40 item 4): one cell per
# dialect run, in a table of its own beside lease-hot.
COMMIT_OP = "commit-rate"


class DataError(Exception):
    pass


def load(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def n0(x):
    return "—" if x is None else "{:,}".format(int(round(x)))


def n1(x):
    return "—" if x is None else "{:,.1f}".format(x)


def n2(x):
    return "—" if x is None else "{:.2f}".format(x)


def n3(x):
    return "—" if x is None else "{:.3f}".format(x)


def slash(*xs):
    return " / ".join(xs)


def matrix(r):  # a cell of the op x clients matrix (not a --scale phase, not a lock-client op)
    return not r.get("scale") and r.get("op") not in CLIENT_OPS and r.get("op") != COMMIT_OP


def cell(rows, dialect, op, clients):  # a cell of the normal matrix
    for r in rows:
        if r.get("dialect") == dialect and r.get("op") == op and r.get("clients") == clients and matrix(r):
            return r
    return None


def load_soak(d, name):
    """A churn-soak run file: its first line the run, then its cells, all of that run."""
    soak = load(os.path.join(d, name))
    run = soak[0]["run"] if soak and "run" in soak[0] else None
    cells = [r for r in soak if "run" not in r]
    if cells and run is None:
        raise DataError("{}/{} has no first line {{\"run\": {{...}}}} saying which run it is".format(d, name))
    for r in cells:
        if r.get("run_id") != run.get("run_id"):
            raise DataError("{}/{} has a cell of run {} but its first line is run {}: a table never "
                            "mixes runs".format(d, name, r.get("run_id"), run.get("run_id")))
    return run, cells


def side_run(d, sub):
    """A run of its own in DIR/SUB/ (<dialect>.json + settings.txt): its rows by dialect and its settings;
    every cell must carry the settings' run_id."""
    out = {}
    sdir = os.path.join(d, sub)
    settings = read_settings(os.path.join(sdir, "settings.txt"))
    if os.path.isdir(sdir):
        for name, _ in DIALECTS:
            rows = load(os.path.join(sdir, name + ".json"))
            for r in rows:
                if r.get("run_id") != settings.get("run_id"):
                    raise DataError("{}/{}/{}.json has a cell of run {} but its settings.txt is run {}: a table "
                                    "never mixes runs".format(d, sub, name, r.get("run_id"), settings.get("run_id")))
            if rows:
                out[name] = rows
    return out, settings


def read_settings(path):
    """A run's settings.txt as a dict of its `key: value` lines (empty when there is none)."""
    settings = {}
    if os.path.exists(path):
        for line in open(path):
            if ":" in line:
                k, v = line.split(":", 1)
                settings[k.strip()] = v.strip()
    return settings


class Run:
    """One tools/bench.sh run: its settings and every file's cells."""

    def __init__(self, d):
        self.dir = d
        self.settings = read_settings(os.path.join(d, "settings.txt"))
        self.files = {}
        for name in [n for n, _ in DIALECTS] + [DURABLE] + [n + LOADED for n, _ in DIALECTS]:
            rows = load(os.path.join(d, name + ".json"))
            if rows:
                self.files[name] = rows
        run_id = self.settings.get("run_id")
        for name, rows in self.files.items():
            for r in rows:
                if r.get("run_id") != run_id:
                    raise DataError("{}/{}.json has a cell of run {} but settings.txt is run {}: a table never mixes "
                                    "runs (publish a whole tools/bench.sh run)".format(d, name, r.get("run_id"), run_id))
        scale = load(os.path.join(d, "scale.json"))
        self.scale_run = scale[0]["run"] if scale and "run" in scale[0] else None
        self.scale_file = [r for r in scale if "run" not in r]
        self.soak_run, self.soak_file = load_soak(d, "churn-soak.json")
        # The renewer-overload comparison (issue 36 item 10): one soak run per
        # file of overload/, before and after, under the same load.
        self.overload = [load_soak(d, os.path.join("overload", f))
                         for f in sorted(os.listdir(os.path.join(d, "overload")), key=lambda f: (f != "before" and
                                                                                                  not f.startswith("before"), f))
                         if f.endswith(".json")] if os.path.isdir(os.path.join(d, "overload")) else []

        # Bounded barging (issue 40, tools/bench_barging.sh): lease-hot under each
        # --barging-limit, in rounds, a run of its own in barging/.
        self.barging, self.barging_settings = side_run(d, "barging")
        # Coalesced calls (issue 40 item 5, tools/bench_coalesced.sh): lease-coalesced
        # beside per-call lease-distinct and Redis, a run of its own in coalesced/.
        self.coalesced, self.coalesced_settings = side_run(d, "coalesced")
        # Carts (issue 41 item 1, tools/bench_cart.sh): cart-decrement beside
        # cart-per-row, a run of its own in cart/.
        self.cart, self.cart_settings = side_run(d, "cart")
        # The grant history's cost (issue 41 item 3, tools/bench_history.sh):
        # lease-hot and lease-distinct with --history and without, in rounds.
        self.history, self.history_settings = side_run(d, "history")
        # Lock sets (issue 41 item 2, tools/bench_lockset.sh): orders of several
        # names as one LockSet beside the same orders name by name, one cell.
        self.lock_set, self.lock_set_settings = side_run(d, "lock-set")

    def rows(self, name):
        return self.files.get(name, [])

    def main_files(self):  # every file but the passes under --cpu-load (their own table)
        return [n for n in self.files if not n.endswith(LOADED)]

    def footer(self, names):
        s = self.settings
        files = ", ".join("{}.json".format(n) for n in names if n in self.files)
        return "<sub>Run {} · {} · {} · {} · data: docs/bench/{}</sub>".format(
            s.get("date", "of unknown date"), s.get("host", "unknown host"), s.get("cpu", "unknown cpu"),
            s.get("matrix", "unknown matrix"), files or "none")

    def clients(self, names):
        return sorted({r["clients"] for n in names for r in self.rows(n) if matrix(r)})


def table_run(run):
    keys = ["run_id", "date", "host", "cpu", "matrix", "sqlite", "postgresql", "mariadb", "redis", "etcd", "cpu load", "release"]
    return "\n".join("- {}: {}".format(k, run.settings[k]) for k in keys if k in run.settings)


def table_main(run):
    names = [d for d, _ in DIALECTS]
    head = "| op | clients |" + "".join(" {} ops/s | p50 / p99 ms | ratio |".format(t) for _, t in DIALECTS)
    sep = "|---|---:|" + "---:|---:|---:|" * len(DIALECTS)
    ops = []
    for d in names:
        for r in run.rows(d):
            if r.get("dialect") == d and matrix(r) and r["op"] not in ops and r["op"] not in SYNC_OPS:
                ops.append(r["op"])
    out = [head, sep]
    for op in ops:
        for c in run.clients(names):
            cells, any_cell = [], False
            for d, _ in DIALECTS:
                r = cell(run.rows(d), d, op, c)
                if r is None:
                    cells.append(" — | — | — |")
                    continue
                any_cell = True
                cells.append(" {} | {} / {} | {} |".format(n0(r["ops_per_s"]), n2(r["p50_ms"]), n2(r["p99_ms"]),
                                                          n2(r.get("overhead_ratio"))))
            if any_cell:
                out.append("| `{}` | {} |".format(op, c) + "".join(cells))
    out += ["", run.footer(names)]
    return "\n".join(out)


def systems(run):
    """Every system of the run, grouped by the dialect run it ran beside:
    (label, file, dialect, field prefix)."""
    out = []
    for d, title in DIALECTS:
        if d not in run.files:
            continue
        out.append(("{} — sqlguard".format(title), d, d, ""))
        out.append(("{} — raw baseline".format(title), d, d, "raw_"))
        if d == "postgresql" and DURABLE in run.files:
            out.append(("{} — sqlguard, `--durable-release`".format(title), DURABLE, d, ""))
        for c, ctitle in COMPARATORS:
            out.append(("{} (beside {})".format(ctitle, title), d, c, ""))
    return out


def durability(r):
    # A raw-baseline row states its cell's: it runs the same statements.
    return r.get("durability") or "—"


def table_contention(run):
    out = ["| system | durability of a cycle | clients | cycles/s | × 1 client | per-client cycles min / max | "
           "Jain index | acquire wait p50 / p99 / max ms | timed out |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, f, d, p in systems(run):
        rows = run.rows(f)
        one = cell(rows, d, "lease-hot", 1)
        for c in [c for c in run.clients([f]) if c > 1]:
            r = cell(rows, d, "lease-hot", c)
            if r is None or r.get(p + "ops_per_s") is None:
                continue
            base = one.get(p + "ops_per_s") if one else None
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                label, durability(r), c, n0(r[p + "ops_per_s"]),
                n2(r[p + "ops_per_s"] / base) if base else "—",
                slash(n0(r.get(p + "per_client_min")), n0(r.get(p + "per_client_max"))),
                n3(r.get(p + "jain_index")),
                slash(n2(r.get(p + "wait_p50_ms")), n2(r.get(p + "wait_p99_ms")), n2(r.get(p + "wait_max_ms"))),
                n0(r.get(p + "timeouts"))))
    out += ["", run.footer(run.main_files())]
    return "\n".join(out)


def table_commit_rate(run):
    """Each dialect's one-client commit rate beside its lease-hot cycles/s (vs_commit_rate)."""
    rows = []
    for d, title in DIALECTS:
        cr = next((r for r in run.rows(d) if r.get("dialect") == d and r.get("op") == COMMIT_OP), None)
        if cr is not None:
            rows.append((d, title, cr))
    if not rows:
        return no_cells(run, COMMIT_OP)
    out = ["| dialect | durability of a commit | commits/s, one client | p50 / p99 ms | `lease-hot` clients | "
           "`lease-hot` cycles/s | ÷ commit rate | durability of a cycle |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    for d, title, cr in rows:
        hot = [cell(run.rows(d), d, "lease-hot", c) for c in run.clients([d])]
        hot = [r for r in hot if r is not None]
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            title, durability(cr), n0(cr.get("ops_per_s")), slash(n2(cr.get("p50_ms")), n2(cr.get("p99_ms"))),
            slash(*[str(r["clients"]) for r in hot]) or "—", slash(*[n0(r["ops_per_s"]) for r in hot]) or "—",
            slash(*[n2(r.get("vs_commit_rate")) for r in hot]) or "—",
            durability(hot[0]) if hot else "—"))
    out += ["", run.footer([d for d, _, _ in rows])]
    return "\n".join(out)


def table_handoff(run):
    out = ["| system | durability of a cycle | clients | hand-offs/s | latency p50 / p99 ms | ceiling/s "
           "(hold + release + wake-up + acquire ms) | efficiency | Jain index | acquire wait p99 ms | timed out |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, f, d, p in systems(run):
        if p:  # the raw baseline has no hand-off
            continue
        for c in [c for c in run.clients([f]) if c > 1]:
            r = cell(run.rows(f), d, "handoff", c)
            if r is None:
                continue
            parts = [r.get(k) for k in ("hold_ms", "ceiling_release_ms", "ceiling_wakeup_ms", "ceiling_acquire_ms")]
            ceiling = "{} ({})".format(n0(r.get("ceiling_per_s")), " + ".join(n2(x) for x in parts)) \
                if r.get("ceiling_per_s") is not None else "—"
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                label, durability(r), c, n0(r["ops_per_s"]), slash(n2(r["p50_ms"]), n2(r["p99_ms"])), ceiling,
                n2(r.get("handoff_efficiency")), n3(r.get("jain_index")), n2(r.get("wait_p99_ms")),
                n0(r.get("timeouts"))))
    out += ["", run.footer(run.main_files())]
    return "\n".join(out)


def like_for_like(a, b):
    fa, fb = a.get("flushes_per_cycle"), b.get("flushes_per_cycle")
    if fa is None or fb is None:
        return "unknown"
    if fa == fb:
        return "yes: {} vs {} flushes per cycle".format(fa, fb)
    return "**no**: {} vs {} flushes per cycle".format(fa, fb)


def table_comparators(run):
    out = ["| sqlguard side | comparator | like for like? | op | sqlguard cycles/s at {0} | comparator at {0} | "
           "ratio at {0} |".format(" / ".join(str(c) for c in run.clients(list(run.files)))),
           "|---|---|---|---|---:|---:|---:|"]
    clients = run.clients(list(run.files))
    for d, title in DIALECTS:
        sides = [(d, "{} — sqlguard".format(title))]
        if d == "postgresql" and DURABLE in run.files:
            sides.append((DURABLE, "{} — sqlguard, `--durable-release`".format(title)))
        for f, label in sides:
            for comp, ctitle in COMPARATORS:
                for op in LEASE_OPS:
                    sg = [cell(run.rows(f), d, op, c) for c in clients]
                    # The comparator ran in the dialect's own invocation, beside it.
                    cp = [cell(run.rows(d), comp, op, c) for c in clients]
                    if not any(sg) or not any(cp):
                        continue
                    ref_sg = next(r for r in sg if r)
                    ref_cp = next(r for r in cp if r)
                    ratio = [n2(a["ops_per_s"] / b["ops_per_s"]) if a and b and b["ops_per_s"] else "—"
                             for a, b in zip(sg, cp)]
                    out.append("| {}: {} | {}: {} | {} | `{}` | {} | {} | {} |".format(
                        label, durability(ref_sg), ctitle, durability(ref_cp), like_for_like(ref_sg, ref_cp),
                        op, slash(*[n0(r["ops_per_s"]) if r else "—" for r in sg]),
                        slash(*[n0(r["ops_per_s"]) if r else "—" for r in cp]), slash(*ratio)))
    out += ["", run.footer(run.main_files())]
    return "\n".join(out)


def table_scale(run):
    # This run's --scale rows when it has them, else scale.json's earlier run: never both.
    current = [r for n in (d for d, _ in DIALECTS) for r in run.rows(n) if r.get("scale")]
    rows = current or run.scale_file

    def get(d, op, phase):
        for r in rows:
            if r["dialect"] == d and r["op"] == op and r["phase"] == phase:
                return r
        return None
    out = ["| dialect | lease acquire+release p50 / p99 ms: empty → 1 M lock rows | idempotency first-execute p50 / p99 ms: empty → 1 M rows | acquirers' p50 / p99 ms while cleanup deletes the expired rows | cleanup time |",
           "|---|---|---|---|---:|"]
    for d, title in DIALECTS:
        a, b = get(d, "lease-distinct", "before_fill"), get(d, "lease-distinct", "after_fill_lock_rows")
        c, e = get(d, "idem-first", "before_fill"), get(d, "idem-first", "after_fill_idempotency_rows")
        cl = get(d, "lease-distinct", "during_cleanup")
        if not all((a, b, c, e, cl)):
            continue
        pp = lambda r: "{} / {}".format(n2(r["p50_ms"]), n2(r["p99_ms"]))
        out.append("| {} | {} → {} | {} → {} | {} | {} s |".format(title, pp(a), pp(b), pp(c), pp(e), pp(cl),
                                                                   n0(cl.get("cleanup_s", 0))))
    if current:
        out += ["", run.footer([d for d, _ in DIALECTS])]
    elif run.scale_run:
        s = run.scale_run
        out += ["", "<sub>Run {} · {} · {} · data: docs/bench/scale.json</sub>".format(
            s.get("date", "of unknown date"), s.get("host", "unknown host"), s.get("settings", "unknown settings"))]
    return "\n".join(out)


def table_round_trips(run):
    names = [d for d, _ in DIALECTS]
    ops = []
    for d in names:
        for r in run.rows(d):
            if r.get("dialect") == d and matrix(r) and r["op"] not in ops:
                ops.append(r["op"])
    out = ["| op | " + " | ".join(t for _, t in DIALECTS) + " |", "|---|" + "---:|" * len(DIALECTS)]
    for op in ops:
        vals = []
        for d in names:
            spo = [(r.get("statements_per_op"), r.get("statements_per_exclusive_op")) for r in run.rows(d)
                   if r.get("dialect") == d and r.get("op") == op and matrix(r)]
            if not spo or spo[0][0] is None:
                vals.append("—")
            elif spo[0][1] is not None:  # rw-mixed: a shared cycle, then an exclusive one
                vals.append("{} (exclusive {})".format(spo[0][0], spo[0][1]))
            else:
                vals.append(str(spo[0][0]))
        out.append("| `{}` | {} |".format(op, " | ".join(vals)))
    out += ["", run.footer(names)]
    return "\n".join(out)


def client_cells(run, op):
    """(dialect title, cell) of lock-client op `op`, dialect by dialect in run order."""
    return [(title, r) for d, title in DIALECTS for r in run.rows(d) if r.get("dialect") == d and r.get("op") == op]


def no_cells(run, op):
    return "No `{}` cells in this run (data: docs/bench/, run {}).".format(op, run.settings.get("run_id", "unknown"))


def misses(checks):
    """'yes', or the targets a cell missed: checks are (met, 'what was measured vs the target')."""
    missed = [what for met, what in checks if not met]
    return "yes" if not missed else "**no**: " + "; ".join(missed)


def num(x):
    return x if isinstance(x, (int, float)) else None


def held_targets(r, title):
    """Issue 26's targets for a lock client's held leases (SQLite's is 1,000 leases)."""
    n = r["held"]
    if title == "SQLite" and n > 1000:
        return "— (SQLite's target is 1,000)"
    conns = max(x for x in (num(r.get("connections")), num(r.get("server_sessions")), 0) if x is not None)
    per_period = -(-n // 1000)
    rss = num(r.get("rss_per_lease_bytes"))
    # Per renewal cycle (every lease renewed once): a hold of 3 ttl holds 9 or
    # 10 rounds depending on where it starts, so per period can read 1.11
    # where every round was one statement.
    stmts = num(r.get("renewal_statements_per_cycle"))
    within = stmts is not None and stmts <= per_period + 1e-9
    return misses([
        (conns <= 4, "{} connections > 4".format(n0(conns))),
        ((num(r.get("threads")) or 0) <= 4, "{} threads > 4".format(n0(r.get("threads")))),
        (within, "{} renewal statements per cycle > {}".format(n2(stmts), per_period) if stmts is not None
         else "no renewal statements per cycle reported"),
        # Per lease only where leases dominate what the pages and the
        # allocator's own slack add (4 KB pages; below 1,000 leases a swing
        # of the heap's top is more than 2 KB per lease).
        (n < 1000 or (rss is not None and rss <= 2048), "{} B per lease > 2 KB".format(n0(rss))),
        (r.get("owned_after") == n and r.get("db_owned_after") == n,
         "{} / {} of {} still owned".format(n0(r.get("owned_after")), n0(r.get("db_owned_after")), n0(n))),
        (r.get("errors", 0) == 0, "{} errors".format(n0(r.get("errors")))),
    ])


def table_held_leases(run):
    cells = client_cells(run, "held-leases")
    if not cells:
        return no_cells(run, "held-leases")
    out = ["| dialect | model | held leases | acquire s | connections: client / server | threads | renewal "
           "statements per period (per cycle: every lease renewed once) | RSS per lease, after acquire / after 3 ttl "
           "| heap per lease (allocated, not freed) | renewal lag p99 ms | still owned after 3 ttl: handles / lock table | issue 26 targets met? |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for title, r in cells:
        client = r.get("model") == "lock-client"
        model = "one `LockClient`" if client else "today: a watchdog connection + thread per lease"
        held = n0(r["held"])
        if not client and r.get("per_lease_requested") is not None:
            held += " (of {}: {})".format(n0(r["per_lease_requested"]), r.get("per_lease_limited_by", "server limit"))
        heap = r.get("heap_per_lease_bytes")
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            title, model, held, n2(r.get("acquire_s")),
            slash(n0(r.get("connections")), n0(r.get("server_sessions"))), n0(r.get("threads")),
            "{} ({})".format(n2(r.get("renewal_statements_per_period")), n2(r.get("renewal_statements_per_cycle"))),
            slash(n0(r.get("rss_per_lease_bytes")) + " B", n0(r.get("rss_per_lease_held_bytes")) + " B"),
            n0(heap) + " B" if heap is not None else "—",
            n2(r.get("renewal_lag_p99_ms")),
            slash(n0(r.get("owned_after")), n0(r.get("db_owned_after"))),
            held_targets(r, title) if client else "— (the cost the client removes)"))
    out += ["", run.footer([d for d, _ in DIALECTS])]
    return "\n".join(out)


def table_held_summary(run):
    """README's short form of held-leases: per dialect the most leases one client held (SQLite's
    target is 1,000), beside the per-lease model of the same run."""
    rows = []
    for d, title in DIALECTS:
        cells = [r for r in run.rows(d) if r.get("dialect") == d and r.get("op") == "held-leases"]
        limit = 1000 if d == "sqlite" else None
        client = [r for r in cells if r.get("model") == "lock-client" and (limit is None or r["held"] <= limit)]
        if client:
            rows.append((title, "one `LockClient`", max(client, key=lambda r: r["held"])))
        rows += [(title, "a connection + thread per lease (before the client)", r)
                 for r in cells if r.get("model") != "lock-client"]
    if not rows:
        return no_cells(run, "held-leases")
    out = ["| dialect | model | held leases | connections | threads | renewal statements per renew period | RSS per "
           "lease | still owned after 3 ttl |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for title, model, r in rows:
        conns = [x for x in (num(r.get("connections")), num(r.get("server_sessions"))) if x is not None]
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            title, model, n0(r["held"]), n0(max(conns)) if conns else "—", n0(r.get("threads")),
            n2(r.get("renewal_statements_per_period")), n0(r.get("rss_per_lease_bytes")) + " B",
            slash(n0(r.get("owned_after")), n0(r["held"]))))
    out += ["", run.footer([d for d, _ in DIALECTS])]
    return "\n".join(out)


def table_waiters(run):
    cells = client_cells(run, "waiters")
    if not cells:
        return no_cells(run, "waiters")
    out = ["| dialect | waiters | hand-offs/s | latency p50 / p99 ms | ceiling/s (hold + release + wake-up + acquire "
           "ms) | efficiency | rounds | threads | connections: client / server | timed out | Jain index | acquire "
           "wait p50 / p99 / max ms | issue 26 targets met? |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for title, r in cells:
        parts = [r.get(k) for k in ("hold_ms", "ceiling_release_ms", "ceiling_wakeup_ms", "ceiling_acquire_ms")]
        ceiling = "{} ({})".format(n0(r.get("ceiling_per_s")), " + ".join(n2(x) for x in parts)) \
            if r.get("ceiling_per_s") is not None else "—"
        conns = max(x for x in (num(r.get("connections")), num(r.get("server_sessions")), 0) if x is not None)
        eff = num(r.get("handoff_efficiency"))
        targets = misses([
            ((num(r.get("threads")) or 0) <= 8, "{} threads > 8".format(n0(r.get("threads")))),
            (conns <= 4, "{} connections > 4".format(n0(conns))),
            (r.get("timeouts_total", 0) == 0, "{} acquires timed out".format(n0(r.get("timeouts_total")))),
            (eff is not None and eff >= 0.8, "efficiency {} < 0.8".format(n2(eff))),
            (r.get("errors", 0) == 0, "{} errors".format(n0(r.get("errors")))),
        ])
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            title, n0(r["waiters"]), n0(r.get("ops_per_s")), slash(n2(r.get("p50_ms")), n2(r.get("p99_ms"))),
            ceiling, n2(eff), n2(r.get("rounds")), n0(r.get("threads")),
            slash(n0(r.get("connections")), n0(r.get("server_sessions"))), n0(r.get("timeouts_total")),
            n3(r.get("jain_index")),
            slash(n2(r.get("wait_p50_ms")), n2(r.get("wait_p99_ms")), n2(r.get("wait_max_ms"))), targets))
    out += ["", run.footer([d for d, _ in DIALECTS])]
    return "\n".join(out)


def mb(x):
    return "—" if x is None else "{:.1f} MB".format(x / 1e6)


def soak_targets(r):
    """Issue 43's target: RSS after the first minute flat within 5 %, 0 losses."""
    growth, base = num(r.get("rss_growth_pct")), num(r.get("baseline_s"))
    return misses([
        (base is not None and base >= 60, "baseline at {} s, before the first minute".format(n0(base))),
        (growth is not None and growth <= 5, "RSS grew {} % > 5 %".format(n2(growth))),
        (r.get("losses") == 0, "{} losses".format(n0(r.get("losses")))),
        (r.get("errors", 0) == 0, "{} errors".format(n0(r.get("errors")))),
    ])


def settled_heap_retained(r):
    """Heap retained per acquisition, settled: the lowest heap of the five samples from the baseline on
    against the lowest of the last five (a renewal round's freed statement buffers, several MB at
    10,000 held, would otherwise make one sample read high). The cell's own field when it has it
    (sqlguard bench computes it the same way); else from its samples."""
    if "heap_settled_retained_per_acquisition_bytes" in r:
        return r["heap_settled_retained_per_acquisition_bytes"]
    samples = r.get("samples") or []
    base = next((i for i, s in enumerate(samples) if s.get("baseline")), None)
    if base is None:
        return r.get("heap_retained_per_acquisition_bytes")
    after = samples[base:]
    k = min(5, len(after) // 2)
    acq = after[-1]["acquisitions"] - after[0]["acquisitions"]
    if k == 0 or acq <= 0:
        return None
    return (min(s["heap_bytes"] for s in after[-k:]) - min(s["heap_bytes"] for s in after[:k])) / acq


def soak_growth(r):
    """The largest RSS growth after the baseline; where the cell has the split, the end's growth of
    written pages (RssAnon) and mapped files' pages (RssFile), each against the baseline's RSS."""
    out = "{} %".format(n2(r.get("rss_growth_pct")))
    if r.get("rss_anon_growth_pct") is not None:
        out += " (at the end: written pages {} %, files' pages {} %)".format(
            n2(r.get("rss_anon_growth_pct")), n2(r.get("rss_file_growth_pct")))
    return out


def table_churn_soak(run):
    cells = [(title + (" via PgBouncer" if r.get("via") == "pgbouncer" else ""), r)
             for d, title in DIALECTS for r in run.soak_file if r.get("dialect") == d]
    if not cells:
        return "No `churn-soak` cells (data: docs/bench/churn-soak.json, first line the run's date and machine)."
    out = ["| dialect | churn kinds | duration | held | churn / s | acquisitions | losses | refused (renewer behind) | renewal lag p99 / max | "
           "RSS at the baseline → end | RSS growth after the baseline | heap retained per acquisition (settled) | errors | "
           "issue 43 target met? |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for title, r in cells:
        dur = num(r.get("duration_s"))
        causes = r.get("losses_by_cause") or {}
        losses = n0(r.get("losses")) + ("" if not causes else " ({})".format(
            ", ".join("{} {}".format(n0(v), k) for k, v in sorted(causes.items()))))
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} ms | {} → {} (baseline at {} s) | {} | {} B | {} | {} |".format(
            title, r.get("churn_kinds", "lease"), "—" if dur is None else "{} s".format(n0(dur)) if dur < 120 else "{} min".format(n0(dur / 60)),
            n0(r.get("held")), n0(r.get("churn_per_s")), n0(r.get("acquisitions")), losses, n0(r.get("refused", 0)),
            n0(r.get("renewal_lag_p99_ms")), n0(r.get("renewal_lag_max_ms")),
            mb(r.get("rss_baseline_bytes")), mb(r.get("rss_end_bytes")), n0(r.get("baseline_s")),
            soak_growth(r), n1(settled_heap_retained(r)), n0(r.get("errors")),
            soak_targets(r)))
    s = run.soak_run
    out += ["", "<sub>Run {} · {} · {} · {} · data: docs/bench/churn-soak.json</sub>".format(
        s.get("date", "of unknown date"), s.get("host", "unknown host"), s.get("cpu", "unknown cpu"),
        s.get("settings", "unknown settings"))]
    return "\n".join(out)


def sync_cells(run, op):
    """(dialect title, cell) of synchronizer op `op`, dialect by dialect, by client count."""
    return [(title, r) for d, title in DIALECTS
            for r in sorted((r for r in run.rows(d) if r.get("dialect") == d and r.get("op") == op and matrix(r)),
                            key=lambda r: r["clients"])]


def fair_targets(r):
    """Issue 28's targets for the fair lease: reported, never asserted."""
    n = r["clients"]
    jain, cycles, ratio = num(r.get("jain_index")), num(r.get("wait_max_cycles")), num(r.get("fair_vs_unfair"))
    return misses([
        (jain is not None and jain >= 0.95, "Jain {} < 0.95".format(n3(jain))),
        (cycles is not None and cycles <= 2 * n, "max wait {} cycles > {}".format(n0(cycles), 2 * n)),
        (ratio is not None and ratio >= 0.7, "{} × the unfair lease's cycles/s < 0.7".format(n3(ratio))),
        (r.get("overlaps", 0) == 0 and r.get("unfair_overlaps", 0) == 0,
         "{} / {} overlapping holders".format(n0(r.get("overlaps")), n0(r.get("unfair_overlaps")))),
        (r.get("errors", 0) == 0 and r.get("unfair_errors", 0) == 0,
         "{} / {} errors".format(n0(r.get("errors")), n0(r.get("unfair_errors")))),
    ])


def table_fair_lease(run):
    cells = sync_cells(run, "fair-lease")
    if not cells:
        return no_cells(run, "fair-lease")
    out = ["| dialect | clients | lease | cycles/s | per-client cycles min / max | Jain index | acquire wait p50 / p99 "
           "/ max ms | acquire wait p99 / max in cycles | timed out | fair ÷ unfair cycles/s | issue 28 targets met? |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for title, r in cells:
        for p, label in (("unfair_", "unfair (default)"), ("", "fair (`LeaseOptions::fair`)")):
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                title, r["clients"], label, n0(r.get(p + "ops_per_s")),
                slash(n0(r.get(p + "per_client_min")), n0(r.get(p + "per_client_max"))), n3(r.get(p + "jain_index")),
                slash(n2(r.get(p + "wait_p50_ms")), n2(r.get(p + "wait_p99_ms")), n2(r.get(p + "wait_max_ms"))),
                slash(n0(r.get(p + "wait_p99_cycles")), n0(r.get(p + "wait_max_cycles"))), n0(r.get(p + "timeouts")),
                n2(r.get("fair_vs_unfair")) if not p else "", fair_targets(r) if not p else ""))
    out += ["", run.footer([d for d, _ in DIALECTS])]
    return "\n".join(out)


def table_semaphore_hot(run):
    cells = sync_cells(run, "semaphore-hot")
    if not cells:
        return no_cells(run, "semaphore-hot")
    out = ["| dialect | permits | clients | cycles/s | acquire latency p50 / p99 ms | per-client cycles min / max | "
           "Jain index | acquire wait max ms / cycles | timed out | most holders seen (≤ permits) | errors |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for title, r in cells:
        held, permits = num(r.get("max_holders")), num(r.get("permits"))
        seen = n0(held) if held is None or permits is None or (held <= permits and r.get("overlaps", 0) == 0) \
            else "**{}** ({} overlapping grants)".format(n0(held), n0(r.get("overlaps")))
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            title, n0(permits), r["clients"], n0(r.get("ops_per_s")), slash(n2(r.get("p50_ms")), n2(r.get("p99_ms"))),
            slash(n0(r.get("per_client_min")), n0(r.get("per_client_max"))), n3(r.get("jain_index")),
            slash(n2(r.get("wait_max_ms")), n0(r.get("wait_max_cycles"))), n0(r.get("timeouts")), seen,
            n0(r.get("errors"))))
    out += ["", run.footer([d for d, _ in DIALECTS])]
    return "\n".join(out)


def table_rw_mixed(run):
    cells = sync_cells(run, "rw-mixed")
    if not cells:
        return no_cells(run, "rw-mixed")
    out = ["| dialect | clients | exclusive share | cycles/s: shared / exclusive | acquire latency p99 ms: shared / "
           "exclusive | writer wait max ms | Jain index | most shared holders | overlapping grants | timed out: "
           "shared / exclusive | errors |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for title, r in cells:
        share = num(r.get("exclusive_share"))
        overlaps = r.get("overlaps")
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            title, r["clients"], "—" if share is None else "{:.0f} %".format(share * 100),
            slash(n0(r.get("shared_ops_per_s")), n0(r.get("exclusive_ops_per_s"))),
            slash(n2(r.get("shared_p99_ms")), n2(r.get("exclusive_p99_ms"))), n2(r.get("writer_wait_max_ms")),
            n3(r.get("jain_index")), n0(r.get("max_shared_holders")),
            n0(overlaps) if not overlaps else "**{}**".format(n0(overlaps)),
            slash(n0(r.get("shared_timeouts")), n0(r.get("exclusive_timeouts"))), n0(r.get("errors"))))
    out += ["", run.footer([d for d, _ in DIALECTS])]
    return "\n".join(out)


def table_renewer_overload(run):
    if not run.overload:
        return "No overload runs (data: docs/bench/overload/*.json, churn-soak runs with a label)."
    out = ["| code | dialect | held + churn | ttl | acquisitions | held leases lost (on_lost, by cause) | releases "
           "that found their holding gone | refused (renewer behind) | renewal lag max | errors |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r0, cells in run.overload:
        for d, title in DIALECTS:
            for r in cells:
                if r.get("dialect") != d:
                    continue
                causes = r.get("losses_by_cause") or {}
                lost = n0(max(r.get("on_lost_calls", 0), r.get("leases_lost", 0))) + ("" if not causes else " ({})".format(
                    ", ".join("{} {}".format(n0(v), k) for k, v in sorted(causes.items()))))
                out.append("| {} | {} | {} + {} | {} s | {} | {} | {} | {} | {} ms | {} |".format(
                    r0.get("label", r0.get("run_id")), title + (" via PgBouncer" if r.get("via") == "pgbouncer" else ""),
                    n0(r.get("held")), n0(r.get("churn")), n1(r.get("ttl_ms", 0) / 1000.0), n0(r.get("acquisitions")),
                    lost, n0(r.get("release_not_held", 0)), "—" if r.get("refused") is None else n0(r.get("refused")),
                    n0(r.get("renewal_lag_max_ms")), n0(r.get("errors"))))
    out.append("")
    for r0, _ in run.overload:
        out.append("<sub>{}: run {} · {} · {} · {}</sub><br>".format(
            r0.get("label", "?"), r0.get("date", "of unknown date"), r0.get("host", "unknown host"),
            r0.get("cpu", "unknown cpu"), r0.get("settings", "unknown settings")))
    out.append("<sub>data: docs/bench/overload/*.json</sub>")
    return "\n".join(out)


def table_takeover(run):
    """The takeover op (issue 38): a holder dies, how long a waiting and a late handle take to get the lease, by rule."""
    cells = client_cells(run, "takeover")
    if not cells:
        return no_cells(run, "takeover")
    out = ["| dialect | take-over rule | rounds | ttl ms | waiting handle p50 / max ms (target) | late handle p50 / max ms "
           "| errors |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for title, r in cells:
        out.append("| {} | {} | {} | {} | {} ({}) | {} | {} |".format(
            title, r.get("rule", "—"), n0(r.get("rounds")), n0(r.get("ttl_ms")),
            slash(n0(r.get("waiting_p50_ms")), n0(r.get("waiting_max_ms"))), n0(r.get("waiting_target_ms")),
            slash(n0(r.get("late_p50_ms")), n0(r.get("late_max_ms"))), n0(r.get("errors"))))
    out += ["", run.footer([d for d, _ in DIALECTS])]
    return "\n".join(out)


def limit_text(ms):
    if ms >= 3600000:
        return "1 h (no bound: the rule off)"
    return "{} ms".format(n0(ms)) + (" (default)" if ms == 200 else "")


def table_barging(run):
    """lease-hot under each barging_limit (issue 40 item 1), every round of the run side by side."""
    if not run.barging:
        return "_No bounded-barging run in docs/bench/barging/ (tools/bench_barging.sh --publish)._"
    out = ["| dialect | `barging_limit` | clients | cycles/s (each round) | longest wait ms (each round) "
           "| least / most cycles per client (each round) | Jain index (each round) | timed out |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for d, title in DIALECTS:
        rows = run.barging.get(d, [])
        for lim in sorted({r.get("barging_limit_ms") for r in rows}, key=lambda x: -x):
            cells = sorted([r for r in rows if r.get("barging_limit_ms") == lim], key=lambda r: r.get("round", 0))
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
                title, limit_text(lim), n0(cells[0].get("clients")),
                " · ".join(n0(c.get("ops_per_s")) for c in cells),
                " · ".join(n0(c.get("wait_max_ms")) for c in cells),
                " · ".join(slash(n0(c.get("per_client_min")), n0(c.get("per_client_max"))) for c in cells),
                " · ".join(n3(c.get("jain_index")) for c in cells),
                n0(sum(c.get("timeouts") or 0 for c in cells))))
    s = run.barging_settings
    out += ["", "<sub>Run {} · {} · {} · {} · durable servers · data: docs/bench/barging/</sub>".format(
        s.get("date", "of unknown date"), s.get("host", "unknown host"), s.get("cpu", "unknown cpu"),
        s.get("matrix", "unknown matrix"))]
    return "\n".join(out)


def table_coalesced(run):
    """lease-coalesced (issue 40 item 5) beside per-call lease-distinct at 16 clients and Redis, one run."""
    if not run.coalesced:
        return "_No coalescing run in docs/bench/coalesced/ (tools/bench_coalesced.sh --publish)._"
    out = ["| dialect | requesters (connections) | threads: acquire+release/s | p50 / p99 ms | calls per batch "
           "| each call alone /s (p99 ms) | coroutines: acquire+release/s (p99 ms) "
           "| ÷ per-call `lease-distinct` at 16 clients (its /s): threads / coroutines "
           "| Redis pipelined /s (p99 ms) | ÷ Redis |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    durability = {}
    for d, title in DIALECTS:
        rows = run.coalesced.get(d, [])
        ours = [r for r in rows if r.get("op") == "lease-coalesced" and not r.get("comparator")]
        distinct = [r for r in rows if r.get("op") == "lease-distinct" and not r.get("comparator")
                    and r.get("clients") == 16]
        base = distinct[0].get("ops_per_s") if distinct else None
        if distinct:
            durability[title] = distinct[0].get("durability")
        for r in sorted(ours, key=lambda r: r.get("requesters", 0)):
            redis = [c for c in rows if c.get("comparator") and c.get("dialect") == "redis"
                     and c.get("op") == "lease-coalesced" and c.get("requesters") == r.get("requesters")]
            rc = redis[0] if redis else {}
            if rc:
                durability["Redis"] = rc.get("durability")
            cor = r.get("coroutine_ops_per_s")
            out.append("| {} | {} ({}) | {} | {} | {} | {} ({}) | {} ({}) | {} / {} ({}) | {} ({}) | {} |".format(
                title, n0(r.get("requesters")), n0(r.get("connections")), n0(r.get("ops_per_s")),
                slash(n1(r.get("p50_ms")), n1(r.get("p99_ms"))), n1(r.get("calls_per_batch")),
                n0(r.get("alone_ops_per_s")), n0(r.get("alone_p99_ms")),
                n0(cor), n1(r.get("coroutine_p99_ms")),
                n2(r["ops_per_s"] / base) if base and r.get("ops_per_s") else "-",
                n2(cor / base) if base and cor else "-", n0(base),
                n0(rc.get("ops_per_s")), n1(rc.get("p99_ms")), n2(r.get("vs_redis"))))
    s = run.coalesced_settings
    out += [""] + ["<sub>{}: {}</sub><br>".format(k, v) for k, v in durability.items() if v]
    out += ["<sub>Run {} · {} · {} · {} · {} · durable servers · data: docs/bench/coalesced/</sub>".format(
        s.get("date", "of unknown date"), s.get("host", "unknown host"), s.get("cpu", "unknown cpu"),
        s.get("matrix", "unknown matrix"), s.get("redis", "no redis"))]
    return "\n".join(out)


def table_cart(run):
    """cart-decrement (GuardedUpdate::apply_all) beside cart-per-row (apply() per SKU in a transaction), one run."""
    if not run.cart:
        return "_No cart run in docs/bench/cart/ (tools/bench_cart.sh --publish)._"
    out = ["| dialect | clients | `apply_all()`: orders/s | p50 / p99 ms | errors | `apply()` per SKU in a transaction: "
           "orders/s | p50 / p99 ms | errors (deadlocks) | ÷ | statements per order | units taken / unaccounted | "
           "rows below 0 |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    durability = {}
    for d, title in DIALECTS:
        rows = [r for r in run.cart.get(d, []) if matrix(r)]
        for c in sorted({r["clients"] for r in rows}):
            a = cell(rows, d, "cart-decrement", c)
            b = cell(rows, d, "cart-per-row", c)
            if a is None or b is None:
                raise DataError("docs/bench/cart/{}.json lacks cart-decrement or cart-per-row at {} clients".format(d, c))
            durability[title] = a.get("durability")
            ratio = a["ops_per_s"] / b["ops_per_s"] if b.get("ops_per_s") else None
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} + {} / {} | {} / {} |".format(
                title, c, n0(a.get("ops_per_s")), slash(n2(a.get("p50_ms")), n2(a.get("p99_ms"))), n0(a.get("errors")),
                n0(b.get("ops_per_s")), slash(n2(b.get("p50_ms")), n2(b.get("p99_ms"))), n0(b.get("errors")),
                n2(ratio), a.get("statements_per_op"), b.get("statements_per_op"),
                n0(a.get("units_taken")), n0(a.get("units_unaccounted")), n0(b.get("units_taken")),
                n0(b.get("units_unaccounted")), n0(a.get("oversold_rows")), n0(b.get("oversold_rows"))))
    s = run.cart_settings
    out += [""] + ["<sub>{}: {}</sub><br>".format(k, v) for k, v in durability.items() if v]
    out += ["<sub>Run {} · {} · {} · {} · durable servers · data: docs/bench/cart/</sub>".format(
        s.get("date", "of unknown date"), s.get("host", "unknown host"), s.get("cpu", "unknown cpu"),
        s.get("matrix", "unknown matrix"))]
    return "\n".join(out)


def table_lock_set(run):
    """lock-set: orders of several names as one LockSet beside the same orders name by name, one cell each."""
    if not run.lock_set:
        return "_No lock-set run in docs/bench/lock-set/ (tools/bench_lockset.sh --publish)._"
    out = ["| dialect | clients | as a `LockSet`: orders/s | p50 / p99 ms | timeouts | name by name: orders/s | "
           "p50 / p99 ms | timeouts | ÷ | overlaps | errors |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    durability = {}
    for d, title in DIALECTS:
        rows = [r for r in run.lock_set.get(d, []) if r.get("op") == "lock-set"]
        for r in sorted(rows, key=lambda r: r.get("clients", 0)):
            for k in ("ops_per_s", "one_by_one_ops_per_s", "overlaps", "one_by_one_overlaps"):
                if r.get(k) is None:
                    raise DataError("docs/bench/lock-set/{}.json: the cell at {} clients lacks {}".format(
                        d, r.get("clients"), k))
            durability[title] = r.get("durability")
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} |".format(
                title, r["clients"], n0(r["ops_per_s"]), slash(n2(r.get("p50_ms")), n2(r.get("p99_ms"))),
                n0(r.get("timeouts")), n0(r["one_by_one_ops_per_s"]),
                slash(n2(r.get("one_by_one_p50_ms")), n2(r.get("one_by_one_p99_ms"))), n0(r.get("one_by_one_timeouts")),
                n2(r.get("set_vs_one_by_one")), n0(r["overlaps"]), n0(r["one_by_one_overlaps"]),
                n0(r.get("errors")), n0(r.get("one_by_one_errors"))))
    s = run.lock_set_settings
    out += [""] + ["<sub>{}: {}</sub><br>".format(k, v) for k, v in durability.items() if v]
    out += ["<sub>Run {} · {} · {} · {} · durable servers · data: docs/bench/lock-set/</sub>".format(
        s.get("date", "of unknown date"), s.get("host", "unknown host"), s.get("cpu", "unknown cpu"),
        s.get("matrix", "unknown matrix"))]
    return "\n".join(out)


def table_history(run):
    """lease-hot and lease-distinct with the grant history recording (--history) against without, same run."""
    if not run.history:
        return "_No history run in docs/bench/history/ (tools/bench_history.sh --publish)._"
    out = ["| dialect | op | clients | without history: cycles/s (each round) | with history: cycles/s (each round) "
           "| with ÷ without (median of rounds) | p99 ms without / with (round 1) |",
           "|---|---|---:|---:|---:|---:|---:|"]
    durability = {}
    for d, title in DIALECTS:
        rows = [r for r in run.history.get(d, []) if matrix(r)]
        for op in ("lease-hot", "lease-distinct"):
            for c in sorted({r["clients"] for r in rows if r.get("op") == op}):
                def cells(on):
                    return sorted([r for r in rows if r.get("op") == op and r.get("clients") == c
                                   and bool(r.get("history")) == on], key=lambda r: r.get("round", 0))
                off, on = cells(False), cells(True)
                if not off or not on or len(off) != len(on):
                    raise DataError("docs/bench/history/{}.json: {} at {} clients lacks a round with or without "
                                    "history".format(d, op, c))
                durability[title] = off[0].get("durability")
                ratios = sorted(b["ops_per_s"] / a["ops_per_s"] for a, b in zip(off, on) if a.get("ops_per_s"))
                med = ratios[len(ratios) // 2] if len(ratios) % 2 else (ratios[len(ratios) // 2 - 1] +
                                                                        ratios[len(ratios) // 2]) / 2
                out.append("| {} | {} | {} | {} | {} | {} | {} |".format(
                    title, op, c, " · ".join(n0(r.get("ops_per_s")) for r in off),
                    " · ".join(n0(r.get("ops_per_s")) for r in on), n2(med),
                    slash(n1(off[0].get("p99_ms")), n1(on[0].get("p99_ms")))))
    s = run.history_settings
    out += [""] + ["<sub>{}: {}</sub><br>".format(k, v) for k, v in durability.items() if v]
    out += ["<sub>Run {} · {} · {} · {} · durable servers · data: docs/bench/history/</sub>".format(
        s.get("date", "of unknown date"), s.get("host", "unknown host"), s.get("cpu", "unknown cpu"),
        s.get("matrix", "unknown matrix"))]
    return "\n".join(out)


def table_cpu_load(run):
    """waiters and handoff quiet (<dialect>.json) beside the same cells under --cpu-load (<dialect>-cpu-load.json)."""
    pairs = []
    for d, title in DIALECTS:
        for r in run.rows(d + LOADED):
            if r.get("op") == "handoff" and matrix(r):
                quiet = cell(run.rows(d), d, "handoff", r["clients"])
                what = "handoff, {} clients".format(r["clients"])
            elif r.get("op") == "waiters":
                quiet = next((q for q in run.rows(d) if q.get("op") == "waiters" and
                              q.get("waiters") == r.get("waiters")), None)
                what = "waiters {}".format(n0(r.get("waiters")))
            else:
                continue
            pairs.append((title, what, r, quiet))
    if not pairs:
        return no_cells(run, "--cpu-load")
    out = ["| dialect | op | spinning processes | hand-offs/s quiet → loaded | loaded ÷ quiet | latency p50 / p99 ms "
           "quiet → loaded | efficiency quiet → loaded | Jain index loaded | timed out loaded |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for title, what, r, q in pairs:
        qo, lo = (q or {}).get("ops_per_s"), r.get("ops_per_s")
        ratio = n2(lo / qo) if num(qo) and num(lo) and qo > 0 else "—"
        timeouts = r.get("timeouts_total", r.get("timeouts"))
        out.append("| {} | {} | {} | {} → {} | {} | {} → {} | {} → {} | {} | {} |".format(
            title, what, n0(r.get("cpu_load")), n0(qo), n0(lo), ratio,
            slash(n2((q or {}).get("p50_ms")), n2((q or {}).get("p99_ms"))), slash(n2(r.get("p50_ms")), n2(r.get("p99_ms"))),
            n2((q or {}).get("handoff_efficiency")), n2(r.get("handoff_efficiency")), n3(r.get("jain_index")),
            n0(timeouts)))
    out += ["", run.footer([d for d, _ in DIALECTS] + [d + LOADED for d, _ in DIALECTS])]
    return "\n".join(out)


def tables(d):
    run = Run(d)
    return {"run": table_run(run), "main": table_main(run), "contention": table_contention(run),
            "handoff": table_handoff(run), "comparators": table_comparators(run), "scale": table_scale(run),
            "round-trips": table_round_trips(run), "held-leases": table_held_leases(run),
            "held-leases-summary": table_held_summary(run),
            "waiters": table_waiters(run), "fair-lease": table_fair_lease(run),
            "semaphore-hot": table_semaphore_hot(run), "rw-mixed": table_rw_mixed(run),
            "churn-soak": table_churn_soak(run), "renewer-overload": table_renewer_overload(run),
            "cpu-load": table_cpu_load(run), "commit-rate": table_commit_rate(run),
            "takeover": table_takeover(run), "barging": table_barging(run), "coalesced": table_coalesced(run),
            "cart": table_cart(run), "history": table_history(run), "lock-set": table_lock_set(run)}


REGION = re.compile(r"(<!-- bench-table: ([\w-]+) -->\n)(.*?)(<!-- /bench-table -->)", re.S)


def render(text, t):
    def repl(m):
        if m.group(2) not in t:
            raise DataError("unknown region '{}' (known: {})".format(m.group(2), ", ".join(sorted(t))))
        return m.group(1) + t[m.group(2)] + "\n" + m.group(4)
    return REGION.sub(repl, text)


def main(argv):
    if len(argv) < 4 or argv[2] not in ("--write", "--check"):
        sys.exit(__doc__)
    try:
        t = tables(argv[1])
        failed = False
        for path in argv[3:]:
            text = open(path).read()
            if not REGION.search(text):
                raise DataError("{} has no <!-- bench-table: NAME --> region".format(path))
            new = render(text, t)
            if argv[2] == "--write":
                if new != text:
                    open(path, "w").write(new)
            elif new != text:
                import difflib
                sys.stderr.write("bench_tables: {} does not match the data in {} (run tools/bench_tables.py {} "
                                 "--write {}):\n".format(path, argv[1], argv[1], path))
                sys.stderr.writelines(list(difflib.unified_diff(text.splitlines(True), new.splitlines(True)))[:40])
                failed = True
        if failed:
            sys.exit(1)
    except DataError as e:
        sys.exit("bench_tables: {}".format(e))


if __name__ == "__main__":
    main(sys.argv)
