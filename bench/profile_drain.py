"""Profile crawlq's drain path: an in-process burst worker over N queued no-op jobs.

    .venv/bin/python bench/profile_drain.py            # N=20,000
    .venv/bin/python bench/profile_drain.py -n 5000 --top 30
    .venv/bin/python bench/profile_drain.py --no-layers --crawl   # crawlq+crawl's jobs
    .venv/bin/python bench/profile_drain.py --no-layers --crawl key --statements

cProfile only sees the thread that enabled it, so every thread the worker starts (main
loop, 8 slot threads, acker, heartbeat) gets its own profiler and the stats are merged.
Functions that block (queue get, lock acquire, event wait, sleep) are listed separately
so that waiting does not hide where the CPU goes. Also prints, without the profiler, the
wall time, CPU time, and the store calls the worker made: how many, how long, and how
many jobs each claim and each ack batch carried.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bench_sqlite  # bench/ is sys.path[0] when this file is run as a script

import crawlq
from crawlq.stores.base import ClaimParams, Completion
from crawlq.worker.execute import execute

BLOCKING = (
    "method 'acquire' of '_thread.",
    "method 'get' of '_queue.SimpleQueue'",
    "threading.py:",
    "built-in method time.sleep",
)


def make_app(path: Path) -> crawlq.App:
    app = crawlq.App(f"sqlite:///{path}")

    @app.task(name="bench.noop")
    def noop(ctx: crawlq.JobContext, i: int) -> None:
        return None

    _ = app.store
    return app


HOSTS = 100
"""--crawl: limit keys (host names) the jobs are spread over, as in the peers bench."""
FEATURES = ("crawl", "key", "limit")
"""--crawl: the crawl features a job may carry (the peers' crawlq+crawl has all three)."""


def features(text: str) -> tuple[str, ...]:
    """``--crawl``'s value: a comma-separated subset of ``FEATURES``, or ``all``."""
    chosen = FEATURES if text == "all" else tuple(f for f in text.split(",") if f)
    bad = sorted(set(chosen) - set(FEATURES))
    if bad or not chosen:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(FEATURES)} or all, not {text!r}")
    return chosen


def fill(app: crawlq.App, n: int, crawl: Sequence[str] = ()) -> None:
    """Queue ``n`` no-op jobs, each with the crawl features in ``crawl`` (the peers
    bench's: membership in one crawl kept open by a job 30 days away, a unique key, a
    limit key, one of ``HOSTS``, with no limit set)."""
    noop = app.tasks["bench.noop"]
    crawl_id = None
    if "crawl" in crawl:
        keep = noop.spec(-1, delay=30 * 86_400.0, key="keep-open")
        crawl_id = app.crawl("bench", [keep]).id

    def options(i: int) -> dict[str, Any]:
        host = f"host{i % HOSTS}.test"
        chosen: dict[str, Any] = {}
        if "crawl" in crawl:
            chosen["crawl"] = crawl_id
        if "key" in crawl:
            chosen["key"] = f"https://{host}/page/{i}"
        if "limit" in crawl:
            chosen["limit_key"] = host
        return chosen

    for start in range(0, n, 500):
        app.schedule_many(noop.spec(i, **options(i)) for i in range(start, min(n, start + 500)))


class TimedLock:
    """Stands in for the store's RLock and adds up how long each thread waited for it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.waits: defaultdict[str, float] = defaultdict(float)
        self.count: Counter[str] = Counter()

    def __enter__(self) -> bool:
        t0 = time.perf_counter()
        got = self._inner.acquire()
        name = threading.current_thread().name.rsplit("-", 1)[0]
        self.waits[name] += time.perf_counter() - t0
        self.count[name] += 1
        return bool(got)

    def __exit__(self, *exc: object) -> None:
        self._inner.release()

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        return bool(self._inner.acquire(*args, **kwargs))

    def release(self) -> None:
        self._inner.release()


class CallLog:
    """Wraps store methods to count calls, time them and record batch sizes, and the
    store's connection lock to time how long threads wait for each other."""

    def __init__(self, store: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.sizes: dict[str, Counter[int]] = {}
        self._lock = threading.Lock()
        self.store_lock = TimedLock(store._lock) if hasattr(store, "_lock") else None
        if self.store_lock is not None:
            store._lock = self.store_lock
        for name in (
            "job_claim",
            "job_complete_claim",
            "job_wait_claim",
            "job_complete",
            "job_heartbeat",
            "job_expire_leases",
            "job_prune",
            "job_wait",
            "job_next_due",
        ):
            self._wrap(store, name)

    def _wrap(self, store: Any, name: str) -> None:
        inner: Callable[..., Any] = getattr(store, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            result = inner(*args, **kwargs)
            elapsed = time.perf_counter() - t0
            size = len(args[0]) if name in ("job_complete", "job_complete_claim") else None
            if name in ("job_claim", "job_wait_claim"):
                size = len(result)
            with self._lock:
                self.calls[name] += 1
                self.seconds[name] += elapsed
                if size is not None:
                    self.sizes.setdefault(name, Counter())[size] += 1
            return result

        setattr(store, name, wrapper)

    def report(self, wall: float) -> str:
        lines = [
            "| store call | calls | total s | share of wall | mean ms | sizes (size: count) |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, count in self.calls.most_common():
            sizes = self.sizes.get(name)
            shown = ""
            if sizes:
                top = sorted(sizes.items(), key=lambda kv: -kv[1])[:6]
                shown = ", ".join(f"{k}: {v}" for k, v in top)
                mean = sum(k * v for k, v in sizes.items()) / sum(sizes.values())
                shown += f" (mean {mean:.2f})"
            lines.append(
                f"| {name} | {count:,} | {self.seconds[name]:.2f} | "
                f"{self.seconds[name] / wall:.0%} | {1000 * self.seconds[name] / count:.3f} | "
                f"{shown} |"
            )
        if self.store_lock is not None:
            lines.append("")
            lines.append("| thread | store lock acquisitions | waited for the store lock, s |")
            lines.append("|---|---:|---:|")
            for name, waited in sorted(self.store_lock.waits.items(), key=lambda kv: -kv[1]):
                lines.append(f"| {name} | {self.store_lock.count[name]:,} | {waited:.2f} |")
        return "\n".join(lines)


def store_loop(app: crawlq.App, run_tasks: bool) -> int:
    """Drain through the store API from one thread: claim 8, (run,) complete 8."""
    store = app.store
    done = 0
    while True:
        jobs = store.job_claim(ClaimParams(queues=("bench.noop",), worker_id="w", limit=8))
        if not jobs:
            return done
        if run_tasks:
            outcomes: list[Any] = [execute(app, job, "w") for job in jobs]
        else:
            outcomes = [Completion(lease=job.lease, result=None) for job in jobs]
        store.job_complete(outcomes)
        done += len(jobs)


def raw_loop(path: str, table: str, batch: int = 8) -> int:
    """bench_sqlite's raw claim/ack loop, in this process."""
    conn = bench_sqlite.raw_connect(path)
    hint = " INDEXED BY crawlq_jobs_claim" if table == "crawlq_jobs" else ""
    claim = bench_sqlite.RAW_CLAIM.format(table=table, hint=hint)
    ack = bench_sqlite.RAW_ACK.format(table=table)
    done = 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        params = {"worker_id": "w", "now": time.time(), "queue": "bench.noop", "limit": batch}
        rows = conn.execute(claim, params).fetchall()
        conn.execute("COMMIT")
        if not rows:
            conn.close()
            return done
        conn.execute("BEGIN IMMEDIATE")
        for job_id, _task, args, kwargs, _attempts, token in rows:
            json.loads(args), json.loads(kwargs)
            conn.execute(ack, {"id": job_id, "token": token, "result": "null", "now": time.time()})
        conn.execute("COMMIT")
        done += len(rows)


def measure(fn: Callable[[], int]) -> tuple[float, float]:
    """(wall, CPU) seconds per job of ``fn``, which returns how many jobs it did."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    n = fn()
    return (time.perf_counter() - t0) / n, (time.process_time() - cpu0) / n


def layers(tmp: Path, n: int, runs: int) -> None:
    """The same drain, one layer of crawlq added at a time."""

    def raw(schema: str) -> Callable[[int], tuple[float, float]]:
        def fn(k: int) -> tuple[float, float]:
            path = str(tmp / f"layer-raw-{schema}-{k}.db")
            table = bench_sqlite.raw_create(path, schema)
            bench_sqlite.raw_fill(path, table, n)
            return measure(lambda: raw_loop(path, table))

        return fn

    def api(run_tasks: bool) -> Callable[[int], tuple[float, float]]:
        def fn(k: int) -> tuple[float, float]:
            app = make_app(tmp / f"layer-api-{run_tasks}-{k}.db")
            fill(app, n)
            try:
                return measure(lambda: store_loop(app, run_tasks))
            finally:
                app.close()

        return fn

    def worker(k: int) -> tuple[float, float]:
        app = make_app(tmp / f"layer-worker-{k}.db")
        fill(app, n)
        try:
            return measure(lambda: run_worker(app).counters.done)
        finally:
            app.close()

    rows: list[tuple[str, Callable[[int], tuple[float, float]]]] = [
        ("raw SQL loop, raw table (bench_sqlite's reference)", raw("raw")),
        ("raw SQL loop, crawlq's schema (indexes + count triggers)", raw("crawlq")),
        ("store API from one thread: job_claim(8) + job_complete(8)", api(False)),
        ("... + execute() of each job (task call, context, result encoding)", api(True)),
        ("the real worker, in process (8 slot threads, acker thread)", worker),
    ]
    print(f"## One layer at a time (N={n:,}, batch 8, one process, median of {runs})\n")
    print("| layer | jobs/s | wall us/job | CPU us/job |")
    print("|---|---:|---:|---:|")
    for label, fn in rows:
        results = sorted(fn(k) for k in range(runs))
        wall, cpu = results[len(results) // 2]
        print(f"| {label} | {1 / wall:,.0f} | {wall * 1e6:.0f} | {cpu * 1e6:.0f} |", flush=True)
    print()


SCHEMA_VARIANTS: list[tuple[str, list[str]]] = [
    ("crawlq's schema as it is", []),
    ("without the count trigger on UPDATE OF state", ["DROP TRIGGER crawlq_jobs_counts_update"]),
    ("without index crawlq_jobs_ready", ["DROP INDEX crawlq_jobs_ready"]),
    ("without index crawlq_jobs_lease", ["DROP INDEX crawlq_jobs_lease"]),
    ("without index crawlq_jobs_finished", ["DROP INDEX crawlq_jobs_finished"]),
    (
        "without the trigger and those three indexes",
        [
            "DROP TRIGGER crawlq_jobs_counts_update",
            "DROP INDEX crawlq_jobs_ready",
            "DROP INDEX crawlq_jobs_lease",
            "DROP INDEX crawlq_jobs_finished",
        ],
    ),
]


def schema_costs(tmp: Path, n: int, runs: int) -> None:
    """CPU per job of the raw loop on crawlq's schema with one part taken away."""
    print(f"## What crawlq's schema costs the raw loop (N={n:,}, batch 8, median of {runs})\n")
    print("| schema | CPU us/job |")
    print("|---|---:|")
    for label, drops in SCHEMA_VARIANTS:
        cpus: list[float] = []
        for k in range(runs):
            path = str(tmp / f"schema-{len(cpus)}-{k}-{abs(hash(label))}.db")
            table = bench_sqlite.raw_create(path, "crawlq")
            conn = bench_sqlite.raw_connect(path)
            for statement in drops:
                conn.execute(statement)
            conn.close()
            bench_sqlite.raw_fill(path, table, n)
            cpus.append(measure(lambda: raw_loop(path, table))[1])  # noqa: B023
        print(f"| {label} | {statistics.median(cpus) * 1e6:.0f} |", flush=True)
    print()


def run_worker(app: crawlq.App) -> crawlq.Worker:
    worker = crawlq.Worker(app, crawlq.WorkerSettings(burst=True, concurrency=8))
    worker.run()
    return worker


def profiled_run(app: crawlq.App) -> tuple[pstats.Stats, float]:
    profiles: list[cProfile.Profile] = []
    original = threading.Thread.run

    def run(self: threading.Thread) -> None:
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.enable()
        try:
            original(self)
        finally:
            prof.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    main = cProfile.Profile()
    profiles.append(main)
    t0 = time.perf_counter()
    try:
        main.enable()
        run_worker(app)
        main.disable()
    finally:
        threading.Thread.run = original  # type: ignore[method-assign]
    wall = time.perf_counter() - t0
    for t in threading.enumerate():
        if t is not threading.current_thread() and t.name.startswith("crawlq"):
            t.join(5)
    stats = pstats.Stats(profiles[0])
    for p in profiles[1:]:
        stats.add(p)
    return stats, wall


def print_stats(stats: pstats.Stats, sort: str, top: int, blocking: bool) -> None:
    """Print the top lines, with or without the blocking primitives."""
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats(sort).print_stats(400)
    lines = buf.getvalue().splitlines()
    head = [i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")]
    if not head:
        print(buf.getvalue())
        return
    start = head[0]
    print(lines[start])
    shown = 0
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        is_blocking = any(b in line for b in BLOCKING)
        if is_blocking != blocking:
            continue
        print(line)
        shown += 1
        if shown >= top:
            break


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--runs", type=int, default=3, help="runs of each layer (default 3)")
    parser.add_argument("--no-layers", action="store_true", help="skip the layer table")
    parser.add_argument(
        "--schema-costs",
        action="store_true",
        help="also time the raw loop without each part of crawlq's schema",
    )
    parser.add_argument(
        "--crawl",
        nargs="?",
        const="all",
        default=(),
        type=features,
        help="jobs with crawl features: all (the peers' crawlq+crawl), or some of crawl,key,limit",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="a third run: each SQL statement's CPU in execute, triggers included "
        "(profile_crawl.py's timer)",
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="crawlq-profile-"))
    try:
        if not args.no_layers:
            layers(tmp, args.n, args.runs)
        if args.schema_costs:
            schema_costs(tmp, args.n, args.runs)
        # 1. plain run: wall time, CPU time and the store calls
        app = make_app(tmp / "plain.db")
        fill(app, args.n, args.crawl)
        log = CallLog(app.store)
        cpu0, t0 = time.process_time(), time.perf_counter()
        worker = run_worker(app)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        print(f"## Unprofiled in-process burst worker, N={args.n:,}, concurrency 8\n")
        print(
            f"- wall {wall:.2f} s = {args.n / wall:,.0f} jobs/s; process CPU {cpu:.2f} s "
            f"({cpu / wall:.0%} of one core)"
        )
        print(f"- counters: {worker.counters}\n")
        print(log.report(wall))
        app.close()

        # 2. profiled run
        app = make_app(tmp / "profiled.db")
        fill(app, args.n, args.crawl)
        stats, pwall = profiled_run(app)
        app.close()
        print(f"\n## cProfile, every thread merged (wall {pwall:.2f} s under the profiler)\n")
        print("### by own time (tottime), blocking primitives left out\n\n```")
        print_stats(stats, "tottime", args.top, blocking=False)
        print("```\n\n### by cumulative time, blocking primitives left out\n\n```")
        print_stats(stats, "cumulative", args.top, blocking=False)
        print("```\n\n### blocking primitives (time spent waiting)\n\n```")
        print_stats(stats, "tottime", 10, blocking=True)
        print("```")

        if args.statements:  # 3. the statements of an unprofiled run
            from profile_crawl import Clocks, time_statements

            statements = Clocks()
            time_statements(statements)  # the connections opened from here on
            app = make_app(tmp / "statements.db")
            fill(app, args.n, args.crawl)
            statements.cpu.clear()
            statements.calls.clear()
            run_worker(app)
            app.close()
            total = sum(statements.cpu.values()) / args.n * 1e6
            print(f"\n## SQL statements of an unprofiled run, N={args.n:,}: {total:.1f} µs a job\n")
            print(statements.table("SQL statement (execute, thread CPU)", args.n, 12, "job"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
