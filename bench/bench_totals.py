"""What the /metrics totals (SQLite migration 0006, PostgreSQL 0007) cost the store's hot
path: schedule, then claim 8 / complete 6 / fail 2 until drained, in this process, on a
fresh store with the totals' triggers and on one with them taken out (SQLite: the count
triggers of 0003 put back; PostgreSQL: the totals' branches cut out of the jobs' update
and delete trigger functions, which hold them since migration 0012), interleaved.

    .venv/bin/python bench/bench_totals.py                 # 5,000 jobs, 8 pairs
    .venv/bin/python bench/bench_totals.py -n 3000 --runs 5 --stores sqlite

SQLite time is this process's CPU time (the store runs in it; the machine is shared);
PostgreSQL time is wall time. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crawlq.jobs import JobSpec  # noqa: E402
from crawlq.stores import open_store  # noqa: E402
from crawlq.stores.base import ClaimParams, Completion, Failure, Store  # noqa: E402

MIGRATIONS = REPO / "crawlq" / "stores" / "sqlite" / "migrations"


def _sqlite_without_totals() -> str:
    """The count triggers as 0003 made them (before 0006 added the totals' statements)."""
    src = (MIGRATIONS / "0003_crawls.sql").read_text()
    parts = ["DROP TRIGGER crawlq_jobs_counts_update;", "DROP TRIGGER crawlq_jobs_counts_delete;"]
    for name in ("crawlq_jobs_counts_update", "crawlq_jobs_counts_delete"):
        start = src.index(f"CREATE TRIGGER {name}")
        parts.append(src[start : src.index("END;", start) + 4])
    return "\n".join(parts)


PG_TOTALS = {
    # function: what its totals add (migration 0012), and what stands without them
    "crawlq_jobs_updated": ("HAVING sum(n) <> 0\n    UNION ALL", "HAVING sum(n) <> 0;\n    /*"),
    "crawlq_jobs_deleted": (", ('gone_' || g.state, g.n)", ""),
}
PG_TOTALS_END = {"crawlq_jobs_updated": ("GROUP BY 1, 2;", "*/")}


def _pg_without_totals(conn: Any, schema: str) -> None:
    """Redefine the jobs' trigger functions in ``schema`` without their totals."""
    for function, (old, new) in PG_TOTALS.items():
        row = conn.execute(
            "SELECT pg_get_functiondef(%s::regproc)", (f'"{schema}".{function}',)
        ).fetchone()
        body: str = row[0]
        changed = body.replace(old, new, 1)
        if function in PG_TOTALS_END:
            end_old, end_new = PG_TOTALS_END[function]
            start = changed.index(new) + len(new)
            changed = changed[:start] + changed[start:].replace(end_old, end_new, 1)
        if changed == body:
            raise RuntimeError(f"{function}: its totals are not where this bench expects")
        conn.execute(changed)


def work(store: Store, n: int, clock: Callable[[], float]) -> tuple[float, float]:
    t0 = clock()
    for b in range(0, n, 500):
        store.job_schedule([JobSpec(queue="q", task="t", args=[i]) for i in range(b, b + 500)])
    t1 = clock()
    while jobs := store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=8)):
        store.job_complete([Completion(lease=j.lease) for j in jobs[:6]])
        store.job_fail([Failure(lease=j.lease, error="x", retry_delay=None) for j in jobs[6:]])
    t2 = clock()
    return n / (t1 - t0), n / (t2 - t1)


def one(kind: str, totals: bool, n: int) -> tuple[float, float]:
    directory = Path(tempfile.mkdtemp())
    if kind == "sqlite":
        store = open_store(f"sqlite:///{directory}/bench.db")
        if not totals:
            with sqlite3.connect(directory / "bench.db") as conn:
                conn.executescript(_sqlite_without_totals())
        clock = time.process_time
    else:
        import psycopg

        from tests import servers

        url = servers.postgres().url
        schema = servers.isolated_name(directory, "bt_")
        store = open_store(f"{url}?schema={schema}")
        if not totals:
            with psycopg.connect(url) as conn:
                _pg_without_totals(conn, schema)
        clock = time.perf_counter
    try:
        return work(store, n, clock)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="jobs per run")
    parser.add_argument("--runs", type=int, default=8, help="pairs of runs per store")
    parser.add_argument("--stores", default="sqlite,postgres")
    args = parser.parse_args()
    print("| store | totals | schedule jobs/s | drain jobs/s (claim, complete, fail) |")
    print("|---|---|---|---|")
    for kind in args.stores.split(","):
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(args.runs):
            for totals in (False, True):
                runs[totals].append(one(kind, totals, args.n))
        for totals in (False, True):
            schedule = statistics.median(r[0] for r in runs[totals])
            drain = statistics.median(r[1] for r in runs[totals])
            label = "with" if totals else "without"
            print(f"| {kind} | {label} | {schedule:,.0f} | {drain:,.0f} |")


if __name__ == "__main__":
    main()
