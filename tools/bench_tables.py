#!/usr/bin/env python3
"""Benchmark tables of docs/benchmarks.md, generated from the bench's JSON.

    tools/bench_tables.py DIR --write FILE   rewrite every table region of FILE
    tools/bench_tables.py DIR --check FILE   exit 1 when a region differs (ctest bench_tables)

DIR holds what tools/bench.sh wrote: <dialect>.json (one JSON object per line,
Redis cells of the same run included), settings.txt, optionally scale.json.
A region is the text between `<!-- bench-table: NAME -->` and
`<!-- /bench-table -->`; NAME is one of: run, main, redis, contention, scale.
No number in those regions is typed by hand, so none can contradict the data.
"""
import json
import os
import re
import sys

DIALECTS = [("sqlite", "SQLite"), ("postgresql", "PostgreSQL"), ("mysql", "MariaDB")]


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
    return "{:,}".format(int(round(x)))


def n2(x):
    return "—" if x is None else "{:.2f}".format(x)


def cell(rows, dialect, op, clients):  # a cell of the normal matrix (not a --scale phase)
    for r in rows:
        if r.get("dialect") == dialect and r.get("op") == op and r.get("clients") == clients and not r.get("scale"):
            return r
    return None


def table_run(d):
    settings = {}
    p = os.path.join(d, "settings.txt")
    if os.path.exists(p):
        for line in open(p):
            if ":" in line:
                k, v = line.split(":", 1)
                settings[k.strip()] = v.strip()
    keys = ["date", "host", "cpu", "matrix", "sqlite", "postgresql", "mariadb", "redis"]
    return "\n".join("- {}: {}".format(k, settings[k]) for k in keys if k in settings)


def table_main(data):
    head = "| op | clients |" + "".join(" {} ops/s | p50 / p99 ms | ratio |".format(t) for _, t in DIALECTS)
    sep = "|---|---:|" + "---:|---:|---:|" * len(DIALECTS)
    ops, clients = [], set()
    for rows in data.values():
        for r in rows:
            if r.get("dialect") in data and r["op"] not in ops:
                ops.append(r["op"])
            if r.get("dialect") in data:
                clients.add(r["clients"])
    out = [head, sep]
    for op in ops:
        for c in sorted(clients):
            cells, any_cell = [], False
            for d, _ in DIALECTS:
                r = cell(data.get(d, []), d, op, c)
                if r is None:
                    cells.append(" — | — | — |")
                    continue
                any_cell = True
                cells.append(" {} | {} / {} | {} |".format(n0(r["ops_per_s"]), n2(r["p50_ms"]), n2(r["p99_ms"]),
                                                          n2(r.get("overhead_ratio"))))
            if any_cell:
                out.append("| `{}` | {} |".format(op, c) + "".join(cells))
    return "\n".join(out)


def table_redis(data):
    out = ["| dialect run | op | clients | Redis ops/s | Redis p50 / p99 ms | sqlguard lease ops/s (same run) | ratio |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for d, title in DIALECTS:
        rows = data.get(d, [])
        for op in ("lease-distinct", "lease-hot"):
            for c in sorted({r["clients"] for r in rows if r.get("dialect") == "redis" and r["op"] == op}):
                red, sg = cell(rows, "redis", op, c), cell(rows, d, op, c)
                if red is None or sg is None:
                    continue
                out.append("| {} | `{}` | {} | {} | {} / {} | {} | {} |".format(
                    title, op, c, n0(red["ops_per_s"]), n2(red["p50_ms"]), n2(red["p99_ms"]), n0(sg["ops_per_s"]),
                    n2(sg["ops_per_s"] / red["ops_per_s"]) if red["ops_per_s"] else "—"))
    return "\n".join(out)


def table_contention(data):
    out = ["| dialect | lease-hot cycles/s at 1 / 4 / 16 clients | contention ratio at 4 / 16 | Redis lease-hot 1 / 4 / 16 (same run) | vs Redis at 16 | handoff efficiency at 4 / 16 | statements per cycle |",
           "|---|---|---|---|---|---|---|"]
    for d, title in DIALECTS:
        rows = data.get(d, [])
        hot = [cell(rows, d, "lease-hot", c) for c in (1, 4, 16)]
        red = [cell(rows, "redis", "lease-hot", c) for c in (1, 4, 16)]
        hand = [cell(rows, d, "handoff", c) for c in (4, 16)]
        if not all(hot):
            continue
        ratio = " / ".join(n2(h["ops_per_s"] / hot[0]["ops_per_s"]) for h in hot[1:])
        redis = " / ".join(n0(r["ops_per_s"]) for r in red) if all(red) else "—"
        vs = n2(hot[2]["ops_per_s"] / red[2]["ops_per_s"]) if all(red) else "—"
        eff = " / ".join(n2(h.get("handoff_efficiency")) for h in hand) if all(hand) else "—"
        dist = cell(rows, d, "lease-distinct", 1)
        spo = str(dist["statements_per_op"]) if dist and dist.get("statements_per_op") is not None else "—"
        out.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            title, " / ".join(n0(h["ops_per_s"]) for h in hot), ratio, redis, vs, eff, spo))
    return "\n".join(out)


def table_scale(rows):
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
    return "\n".join(out)


def tables(d):
    data = {name: load(os.path.join(d, name + ".json")) for name, _ in DIALECTS}
    data = {k: v for k, v in data.items() if v}
    return {"run": table_run(d), "main": table_main(data), "redis": table_redis(data),
            "contention": table_contention(data),
            # --scale rows of a tools/bench.sh run come first, then a separate scale.json
            "scale": table_scale([r for rows in data.values() for r in rows if r.get("scale")] +
                                 load(os.path.join(d, "scale.json")))}


REGION = re.compile(r"(<!-- bench-table: (\w+) -->\n)(.*?)(<!-- /bench-table -->)", re.S)


def render(text, t):
    def repl(m):
        if m.group(2) not in t:
            raise SystemExit("bench_tables: unknown region '{}'".format(m.group(2)))
        return m.group(1) + t[m.group(2)] + "\n" + m.group(4)
    return REGION.sub(repl, text)


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("--write", "--check"):
        sys.exit(__doc__)
    t = tables(sys.argv[1])
    path = sys.argv[3]
    text = open(path).read()
    if not REGION.search(text):
        sys.exit("bench_tables: {} has no <!-- bench-table: NAME --> region".format(path))
    new = render(text, t)
    if sys.argv[2] == "--write":
        if new != text:
            open(path, "w").write(new)
        return
    if new != text:
        import difflib
        sys.stderr.write("bench_tables: {} does not match the data in {} (run tools/bench_tables.py {} --write {}):\n"
                         .format(path, sys.argv[1], sys.argv[1], path))
        sys.stderr.writelines(list(difflib.unified_diff(text.splitlines(True), new.splitlines(True)))[:40])
        sys.exit(1)


if __name__ == "__main__":
    main()
