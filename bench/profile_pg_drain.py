"""Profile the PostgreSQL drain: server CPU per job, and where the statements spend it.

    .venv/bin/python bench/profile_pg_drain.py                  # 20,000 plain jobs
    .venv/bin/python bench/profile_pg_drain.py --crawl limit    # key + crawl + limit key
    .venv/bin/python bench/profile_pg_drain.py -n 100000 --vacuum-every 2
    .venv/bin/python bench/profile_pg_drain.py --statements     # pg_stat_statements top 15
    .venv/bin/python bench/profile_pg_drain.py -n 300000 --analyze-only  # a deep queue
    .venv/bin/python bench/profile_pg_drain.py -n 1000000 --deep-sample 20000 --statements

A private PostgreSQL (tests/servers.py, fsync off) per run; N no-op jobs queued with
``schedule_many`` (500 a call), ``VACUUM ANALYZE`` (``--analyze-only``: ``ANALYZE``, as
the peers bench's deep queue), then one ``crawlq worker --burst
--concurrency 8`` drains them. ``--deep-sample K`` measures the peers bench's deep queue
instead: ``ANALYZE`` only, the worker runs without ``--burst``, and the rates are those of
K jobs done after the first 1,000 (each job appends a line to a ledger file, as the
peers bench's do, and the lines are counted every 20 ms); the worker is then stopped,
with most of the N jobs still queued. Server CPU is what the postmaster's children (backends,
autovacuum, exited ones included) spent in the drain, from /proc (Linux, and the cluster's
processes must be readable: run as root or as their user). ``--statements`` loads
pg_stat_statements (track all) and pg_stat_user_functions, whose instrumentation itself
costs: compare CPU figures only between runs without it. ``--no-triggers`` disables
the jobs' triggers (counts, crawls and keys go wrong: an upper bound, not a mode).
The crawlq imported is this checkout's. One run says little on a shared machine:
alternate runs of two trees (``cd other-tree && python .../profile_pg_drain.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402

from tests.servers import PrivatePostgres  # noqa: E402

sys.path.insert(0, str(REPO / "bench" / "peers"))
from common import LEDGER_CODE, LEDGER_SKIP, Ledger  # noqa: E402  (the peers bench's ledger)

SCHEMA = "prof"
TASKS = (
    """
import os

import crawlq

LEDGER = "BENCH_LEDGER" in os.environ
"""
    + LEDGER_CODE
    + """

app = crawlq.App({url!r})


@app.task(name="bench.noop")
def noop(ctx, i):
    if LEDGER:  # a deep queue's job appends a line, as the peers bench's does
        ledger_write(i)
    return None
"""
)
TOP_STATEMENTS = """
SELECT calls, round(total_exec_time::numeric, 1) AS ms,
       round((total_exec_time / calls)::numeric, 3) AS ms_per_call,
       shared_blks_hit / calls AS buffers_per_call, wal_records / calls AS wal_per_call,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS query
FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 15
"""
TOP_FUNCTIONS = """
SELECT funcname, calls, round(total_time::numeric, 1) AS ms, round(self_time::numeric, 1) AS self_ms
FROM pg_stat_user_functions ORDER BY total_time DESC LIMIT 6
"""


def server_cpu(pg: PrivatePostgres) -> float:
    """CPU seconds of the cluster's processes so far: the postmaster's own and its reaped
    children's, plus its live children's."""
    postmaster = int((pg.data / "postmaster.pid").read_text().split()[0])

    def stat(pid: int) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    ticks = sum(int(x) for x in stat(postmaster)[11:15])  # utime stime cutime cstime
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = stat(int(entry))
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def options(kind: str, crawl_id: int | None) -> Any:
    """The keyword arguments of job ``i``: none, or the crawl features of the peers bench."""
    if kind == "none":
        return lambda i: {}
    limit = kind == "limit"
    return lambda i: {
        "crawl": crawl_id,
        "key": f"https://host{i % 100}.test/page/{i}",
        **({"limit_key": f"host{i % 100}.test"} if limit else {}),
    }


def vacuum_every(url: str, seconds: float, stop: threading.Event) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.wait(seconds):
            conn.execute(f"VACUUM {SCHEMA}.crawlq_jobs")


def deep(
    worker: list[str], env: dict[str, str], sample: int, ledger: Ledger, pg: PrivatePostgres
) -> tuple[int, float, float, float]:
    """Run the worker until ``sample`` jobs are done after the first ``LEDGER_SKIP``,
    then stop it: (jobs, seconds, server CPU, worker CPU) over those jobs. Each job
    appends a line to ``ledger``, which is what is counted (reading the store's counts
    would cost the server CPU)."""
    env = {**env, **ledger.env}

    def until(count: int) -> None:
        while ledger.count() < count:
            if proc.poll() is not None:
                raise SystemExit(f"the worker exited with {proc.returncode}")
            time.sleep(0.02)

    def worker_cpu() -> float:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def switches() -> dict[str, int]:
        out: dict[str, int] = {}
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            status = Path(f"/proc/{proc.pid}/task/{tid}/status").read_text()
            for line in status.splitlines():
                if "ctxt_switches" in line:
                    name, value = line.split(":")
                    out[name] = out.get(name, 0) + int(value)
        return out

    proc = subprocess.Popen(worker, env=env)
    try:
        until(LEDGER_SKIP)
        t0, cpu0, own0, sw0 = time.perf_counter(), server_cpu(pg), worker_cpu(), switches()
        until(LEDGER_SKIP + sample)
        t1, cpu1, own1, sw1 = time.perf_counter(), server_cpu(pg), worker_cpu(), switches()
        jobs = ledger.count() - LEDGER_SKIP
        print(
            "worker context switches a job: "
            + ", ".join(f"{k} {(sw1[k] - sw0[k]) / jobs:.1f}" for k in sorted(sw1))
        )
    finally:
        proc.terminate()
        proc.wait()
    return jobs, t1 - t0, cpu1 - cpu0, own1 - own0


def run(args: argparse.Namespace, pg: PrivatePostgres, workdir: Path) -> None:
    url = f"{pg.url}?schema={SCHEMA}"
    (workdir / "proftasks.py").write_text(TASKS.format(url=url))
    sys.path.insert(0, str(workdir))
    import proftasks  # type: ignore[import-not-found]

    app = proftasks.app
    noop = app.tasks["bench.noop"]
    crawl_id = None
    if args.crawl != "none":
        crawl_id = app.crawl("bench", [noop.spec(-2, delay=30 * 86_400.0, key="keep")]).id
    opts = options(args.crawl, crawl_id)
    t0, cpu0 = time.perf_counter(), server_cpu(pg)
    for start in range(0, args.n, 500):
        app.schedule_many(noop.spec(i, **opts(i)) for i in range(start, min(args.n, start + 500)))
    elapsed, cpu = time.perf_counter() - t0, server_cpu(pg) - cpu0
    print(f"schedule: {args.n / elapsed:,.0f} jobs/s, server CPU {cpu / args.n * 1e6:.0f} us/job")
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute("ANALYZE" if args.analyze_only or args.deep_sample else "VACUUM ANALYZE")
        if args.no_triggers:
            conn.execute(f"ALTER TABLE {SCHEMA}.crawlq_jobs DISABLE TRIGGER USER")
        if args.statements:
            conn.execute("SELECT pg_stat_statements_reset()")
            conn.execute("SELECT pg_stat_reset()")
    stop = threading.Event()
    if args.vacuum_every:
        threading.Thread(target=vacuum_every, args=(pg.url, args.vacuum_every, stop)).start()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(workdir), str(REPO)])}
    worker = [sys.executable, "-m", "crawlq", "worker", "--app", "proftasks:app"]
    worker += ["--store", url, "--concurrency", "8", "--log-level", "warning"]
    worker += [] if args.deep_sample else ["--burst"]
    worker += ["--prefetch", str(args.prefetch)]
    if args.deep_sample:
        ledger = Ledger(workdir / "ledger.txt")
        jobs, elapsed, cpu, worker_cpu = deep(worker, env, args.deep_sample, ledger, pg)
    else:
        t0, cpu0, own0 = time.perf_counter(), server_cpu(pg), os.times()
        subprocess.run(worker, env=env, check=True)
        elapsed, cpu, own1 = time.perf_counter() - t0, server_cpu(pg) - cpu0, os.times()
        jobs = args.n
        worker_cpu = (own1.children_user + own1.children_system) - (
            own0.children_user + own0.children_system
        )
    stop.set()
    print(
        f"{'deep queue' if args.deep_sample else 'drain'}: {jobs / elapsed:,.0f} jobs/s, "
        f"server CPU {cpu / jobs * 1e6:.0f} us/job, worker CPU {worker_cpu / jobs * 1e6:.0f} us/job"
    )
    with psycopg.connect(pg.url, autocommit=True) as conn:
        vacuums = conn.execute(
            "SELECT vacuum_count, autovacuum_count FROM pg_stat_user_tables"
            f" WHERE relid = '{SCHEMA}.crawlq_jobs'::regclass"
        ).fetchone()
    print(f"vacuums of the job table: {vacuums[0]} by hand or the store, {vacuums[1]} autovacuum")
    if args.statements:
        with psycopg.connect(pg.url, autocommit=True) as conn:
            for query in (TOP_STATEMENTS, TOP_FUNCTIONS):
                for row in conn.execute(query):
                    print("  " + " | ".join(str(v) for v in row))
    app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20_000, help="jobs (default 20,000)")
    parser.add_argument("--crawl", choices=("none", "key", "limit"), default="none")
    parser.add_argument("--statements", action="store_true", help="pg_stat_statements top")
    parser.add_argument("--vacuum-every", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--no-triggers", action="store_true", help="upper bound only")
    parser.add_argument(
        "--analyze-only",
        action="store_true",
        help="ANALYZE, not VACUUM ANALYZE, before the drain (as the peers bench's deep queue)",
    )
    parser.add_argument(
        "--deep-sample",
        type=int,
        default=0,
        metavar="K",
        help="a deep queue: time K jobs of the N, the rest left queued (ANALYZE only)",
    )
    parser.add_argument("--prefetch", default="auto", help="the worker's --prefetch (N or auto)")
    args = parser.parse_args()
    pg = PrivatePostgres()
    try:
        if args.statements:
            with (pg.data / "postgresql.conf").open("a") as conf:
                conf.write(
                    "\nshared_preload_libraries = 'pg_stat_statements'\n"
                    "pg_stat_statements.track = 'all'\ntrack_functions = 'all'\n"
                )
            pg.restart("fast")
            with psycopg.connect(pg.url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION pg_stat_statements")
        with tempfile.TemporaryDirectory() as workdir:
            run(args, pg, Path(workdir))
    finally:
        pg.close()


if __name__ == "__main__":
    main()
