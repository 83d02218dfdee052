#!/usr/bin/env python3
"""Rules of tools/bench_tables.py on made-up runs (ctest bench_tables_rules):
a table never mixes runs, every table names its run, fairness and durability
reach the rows, and a comparison that is not like for like says so."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_tables  # noqa: E402

PG = "PostgreSQL fsync=on, synchronous_commit=on: 1 WAL flush per cycle"
PG2 = "PostgreSQL fsync=on, synchronous_commit=on: 2 WAL flushes per cycle"
REDIS = "Redis appendonly yes, appendfsync always: 2 fsyncs per cycle"


def cell(dialect, op, clients, ops, run="r1", **extra):
    c = {"dialect": dialect, "op": op, "clients": clients, "ops_per_s": ops, "p50_ms": 1.0, "p99_ms": 2.0,
         "overhead_ratio": None, "statements_per_op": 2, "run_id": run}
    c.update(extra)
    return c


def hot(dialect, clients, ops, per_client, durability, flushes, run="r1", **extra):
    jain = bench_tables_jain(per_client)
    return cell(dialect, "lease-hot", clients, ops, run, per_client_min=min(per_client), per_client_max=max(per_client),
                jain_index=jain, wait_p50_ms=0.5, wait_p99_ms=9.0, wait_max_ms=2000.0, timeouts=1,
                durability=durability, flushes_per_cycle=flushes, **extra)


def bench_tables_jain(x):
    return sum(x) ** 2 / (len(x) * sum(v * v for v in x))


def write_run(d, files, run="r1"):
    with open(os.path.join(d, "settings.txt"), "w") as f:
        f.write("run_id: {}\ndate: 2026-12-01T10:00:00Z\nhost: testhost, 2 cores\ncpu: TestCPU\n"
                "matrix: clients 1,4\n".format(run))
    for name, cells in files.items():
        with open(os.path.join(d, name + ".json"), "w") as f:
            for c in cells:
                f.write(json.dumps(c) + "\n")


def render(d, region):
    return bench_tables.tables(d)[region]


def check(cond, what):
    if not cond:
        sys.exit("bench_tables_test: FAILED: " + what)


def main():
    with tempfile.TemporaryDirectory() as d:
        pg = [hot("postgresql", 1, 1000, [2000], PG, 1), hot("postgresql", 4, 900, [600, 600, 600, 0], PG, 1),
              hot("redis", 1, 800, [1600], REDIS, 2), hot("redis", 4, 700, [350, 350, 350, 350], REDIS, 2)]
        durable = [hot("postgresql", 1, 600, [1200], PG2, 2), hot("postgresql", 4, 550, [275] * 4, PG2, 2)]
        write_run(d, {"postgresql": pg, "postgresql-durable-release": durable})

        contention = render(d, "contention")
        check("| PostgreSQL — sqlguard | " + PG + " | 4 | 900 | 0.90 | 0 / 600 | 0.750 |" in contention,
              "a starved client shows as per-client min 0 and Jain 0.750:\n" + contention)
        check("Redis (beside PostgreSQL) | " + REDIS in contention, "the comparator row states its durability")
        check("<sub>Run 2026-12-01T10:00:00Z · testhost, 2 cores · TestCPU" in contention,
              "the table names its run, machine and matrix:\n" + contention)

        comparators = render(d, "comparators")
        check("**no**: 1 vs 2 flushes per cycle" in comparators, "1 flush vs 2 is flagged:\n" + comparators)
        check("`--durable-release`: " + PG2 + " | Redis: " + REDIS + " | yes: 2 vs 2 flushes per cycle" in comparators,
              "the durable release is like for like with Redis:\n" + comparators)

        # A file of another run next to this one: refused, naming the file.
        write_run(d, {"postgresql": pg, "postgresql-durable-release": [dict(c, run_id="r0") for c in durable]})
        try:
            bench_tables.tables(d)
            check(False, "a mixed run was rendered")
        except bench_tables.DataError as e:
            check("postgresql-durable-release.json" in str(e) and "r0" in str(e), "the error names the file: " + str(e))

        # An unknown region is an error, not left alone.
        try:
            bench_tables.render("<!-- bench-table: nope -->\n<!-- /bench-table -->\n", {"run": ""})
            check(False, "an unknown region was accepted")
        except bench_tables.DataError:
            pass
    print("bench_tables_test: ok")


if __name__ == "__main__":
    main()
