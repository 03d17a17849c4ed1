"""crawlq on SQLite: schedule rate, drain rate, schedule-to-start latency, and the raw
SQLite limit for the same claim/ack work, measured in one run and printed as Markdown.

    .venv/bin/python bench/bench_sqlite.py            # N=20,000, 3 runs (a few minutes)
    .venv/bin/python bench/bench_sqlite.py --quick    # N=2,000, 1 run

Not a test: it asserts nothing about speed. See bench/README.md for what each row means.
Every database lives in a temporary directory that is removed at the end (``--keep``
keeps it). Worker processes are real subprocesses: ``python -m crawlq worker`` when the
CLI offers ``--app``, ``--burst`` and ``--concurrency``, else a small runner file that
calls ``crawlq.Worker(app, WorkerSettings(...)).run()`` (the same worker code).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import multiprocessing as mp
import os
import platform
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONCURRENCY = 8
PREFETCH: int | str = "auto"
"""Jobs a worker claims ahead of its free slots (``--prefetch``, crawlq's default auto)."""
SCHEDULE_BATCH = 500
NOOP = "bench.noop"
LATENCY = "bench.latency"

# -- the task module the worker subprocesses import -----------------------------------

TASKS_MODULE = '''\
"""Tasks of the crawlq benchmark (written by bench/bench_sqlite.py)."""

from __future__ import annotations

import os
import time

import crawlq


def make_app(url: str) -> crawlq.App:
    app = crawlq.App(url)

    @app.task(name="bench.noop")
    def noop(ctx, i):
        return None

    @app.task(name="bench.latency")
    def latency(ctx, i):
        return time.time()

    return app


app = make_app(os.environ.get("CRAWLQ_BENCH_STORE", "sqlite:///bench.db"))
'''

RUNNER = '''\
"""Runs one crawlq worker the way `crawlq worker --app benchtasks:app` would."""

from __future__ import annotations

import sys

import benchtasks
import crawlq

burst = "--burst" in sys.argv
crawlq.Worker(benchtasks.app, crawlq.WorkerSettings(burst=burst, concurrency={concurrency})).run()
'''


# -- results ---------------------------------------------------------------------------


@dataclass
class Figure:
    key: str
    label: str
    unit: str
    values: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """CPU microseconds per job of the processes doing the work, when measured."""
    note: str = ""

    def add(self, value: float, cpu: float | None = None) -> None:
        self.values.append(value)
        if cpu is not None:
            self.cpu.append(cpu)

    @property
    def median(self) -> float:
        return statistics.median(self.values)


class Results:
    def __init__(self) -> None:
        self.figures: dict[str, Figure] = {}

    def add(self, key: str, label: str, unit: str, value: float, cpu: float | None = None) -> None:
        fig = self.figures.setdefault(key, Figure(key, label, unit))
        fig.add(value, cpu)

    def median(self, key: str) -> float | None:
        fig = self.figures.get(key)
        return fig.median if fig and fig.values else None

    def cpu_median(self, key: str) -> float | None:
        fig = self.figures.get(key)
        return statistics.median(fig.cpu) if fig and fig.cpu else None


Rate = tuple[float, float | None]
"""jobs/s, and CPU microseconds per job (None when not measured)."""


def children_cpu() -> float:
    """CPU seconds of all waited-for child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fmt(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:,.1f}"
    if unit == "s":
        return f"{value:,.2f}"
    return f"{value:,.0f}"


# -- machine ---------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def filesystem_of(path: str) -> str:
    try:
        out = subprocess.run(
            ["df", "-T", path], capture_output=True, text=True, check=True
        ).stdout.splitlines()[-1]
        return out.split()[1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def cpu_busy(interval: float = 0.5) -> float | None:
    """Fraction of all cores busy during ``interval`` (from /proc/stat), or None."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return idle, sum(fields)

    try:
        idle0, total0 = sample()
        time.sleep(interval)
        idle1, total1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return None if total <= 0 else 1.0 - (idle1 - idle0) / total


class QuietGate:
    """Before each measurement, wait (up to ``patience`` s) until other processes leave
    the machine nearly idle, so that a test suite running next door skews less."""

    def __init__(self, threshold: float = 0.15, patience: float = 15.0) -> None:
        self.threshold = threshold
        self.patience = patience
        self.steps = 0
        self.busy: list[float] = []
        self.waited = 0.0

    def wait(self) -> None:
        self.steps += 1
        start = time.perf_counter()
        while True:
            busy = cpu_busy()
            if busy is None or busy < self.threshold:
                break
            if time.perf_counter() - start > self.patience:
                self.busy.append(busy)
                break
        self.waited += time.perf_counter() - start

    def describe(self) -> str:
        text = (
            f"before each measurement the script waited up to {self.patience:.0f} s for other "
            f"processes to use under {self.threshold:.0%} of all cores; "
            f"{len(self.busy)} of {self.steps} measurements started with the machine busy"
        )
        if self.busy:
            text += f" (others using {statistics.mean(self.busy):.0%} of all cores on average)"
        return text


def crawlq_version() -> str:
    """The crawlq under test: its git commit, and the files of crawlq/ changed since."""
    import crawlq

    repo = Path(crawlq.__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%h %cd", "--date=iso"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "crawlq"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return f"crawlq {crawlq.__version__} (no git information)"
    changed = sorted(line[3:] for line in dirty if line.strip())
    extra = f", with uncommitted changes to {', '.join(changed)}" if changed else ""
    return f"crawlq {crawlq.__version__} at commit {head}{extra}"


def machine_line(tmp: str) -> str:
    return (
        f"{os.cpu_count()} cores ({cpu_model()}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"temp dir on {filesystem_of(tmp)}"
    )


# -- crawlq side -----------------------------------------------------------------------


class Bench:
    def __init__(self, tmp: Path, n: int, latency_jobs: int, latency_rate: float) -> None:
        self.tmp = tmp
        self.n = n
        self.latency_jobs = latency_jobs
        self.latency_rate = latency_rate
        self.counter = 0
        (tmp / "benchtasks.py").write_text(TASKS_MODULE)
        (tmp / "bench_runner.py").write_text(RUNNER.format(concurrency=CONCURRENCY))
        sys.path.insert(0, str(tmp))
        import benchtasks  # type: ignore[import-not-found]

        self.tasks_module: Any = benchtasks
        self.worker_kind = "runner"
        self.gate = QuietGate()

    # files and apps

    def fresh_db(self, name: str) -> Path:
        self.counter += 1
        return self.tmp / f"{self.counter:03d}-{name}.db"

    @staticmethod
    def url(path: Path) -> str:
        return f"sqlite:///{path}"  # an absolute path gives sqlite:////...

    def app(self, path: Path) -> Any:
        app = self.tasks_module.make_app(self.url(path))
        _ = app.store  # open and migrate outside the timed part
        return app

    def jobs(self, app: Any, task: Any) -> tuple[Callable[[int], Any], Callable[[int], Any]]:
        """(schedule, spec): schedule job ``i`` of ``task`` in one call, and build its
        spec. Plain jobs (the task's own methods); bench/peers/crawlq_peer.py's
        ``CrawlStoreBench`` gives each a crawl, a unique key and a limit key. Called
        before the timer starts."""
        return task.schedule, task.spec

    def fill(self, path: Path, n: int) -> None:
        app = self.app(path)
        _, spec = self.jobs(app, app.tasks[NOOP])
        for start in range(0, n, SCHEDULE_BATCH):
            app.schedule_many(spec(i) for i in range(start, min(n, start + SCHEDULE_BATCH)))
        app.close()

    # worker subprocesses

    def worker_cmd(self, path: Path, burst: bool) -> list[str]:
        if self.worker_kind == "cli":
            cmd = [sys.executable, "-m", "crawlq", "worker", "--app", "benchtasks:app"]
            cmd += ["--store", self.url(path), "--concurrency", str(CONCURRENCY)]
            cmd += ["--prefetch", str(PREFETCH)]
            return [*cmd, "--burst"] if burst else cmd
        cmd = [sys.executable, "bench_runner.py"]
        return [*cmd, "--burst"] if burst else cmd

    def start_worker(self, path: Path, burst: bool, tag: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "CRAWLQ_BENCH_STORE": self.url(path)}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(self.tmp), env.get("PYTHONPATH", "")) if p
        )
        log = open(self.tmp / f"worker-{tag}.log", "ab")
        try:
            return subprocess.Popen(
                self.worker_cmd(path, burst), cwd=self.tmp, env=env, stdout=log, stderr=log
            )
        finally:
            log.close()

    def worker_log(self, tag: str) -> str:
        path = self.tmp / f"worker-{tag}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def choose_worker(self) -> str:
        """Use the CLI if it runs a burst worker; else the runner file."""
        probe = subprocess.run(
            [sys.executable, "-m", "crawlq", "worker", "--help"],
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=60,
        )
        text = probe.stdout + probe.stderr
        if probe.returncode == 0 and all(f in text for f in ("--app", "--burst", "--concurrency")):
            self.worker_kind = "cli"
            path = self.fresh_db("probe")
            self.fill(path, 10)
            proc = self.start_worker(path, burst=True, tag="probe")
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            app = self.app(path)
            done = sum(s.done for s in app.stats())
            app.close()
            if proc.returncode == 0 and done == 10:
                return "cli"
        self.worker_kind = "runner"
        return "runner"

    def worker_description(self) -> str:
        if self.worker_kind == "cli":
            return (
                "`python -m crawlq worker --app benchtasks:app --store sqlite:///... "
                f"--concurrency {CONCURRENCY} --prefetch {PREFETCH} [--burst]` (thread runtime)"
            )
        return (
            "runner file: `crawlq.Worker(benchtasks.app, crawlq.WorkerSettings(burst=..., "
            f"concurrency={CONCURRENCY})).run()` (thread runtime; `crawlq worker` CLI not "
            "available yet)"
        )

    # 1. schedule, one call per job

    def schedule_single(self) -> Rate:
        app = self.app(self.fresh_db("schedule-single"))
        schedule, _ = self.jobs(app, app.tasks[NOOP])
        n = self.n
        self.gate.wait()
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(n):
            schedule(i)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        app.close()
        return n / elapsed, cpu / n * 1e6

    # 2. schedule in batches

    def schedule_batch(self) -> Rate:
        app = self.app(self.fresh_db("schedule-batch"))
        _, spec = self.jobs(app, app.tasks[NOOP])
        n = self.n
        self.gate.wait()
        c0, t0 = time.process_time(), time.perf_counter()
        for start in range(0, n, SCHEDULE_BATCH):
            app.schedule_many(spec(i) for i in range(start, min(n, start + SCHEDULE_BATCH)))
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        app.close()
        return n / elapsed, cpu / n * 1e6

    # 3. drain

    def worker_startup(self) -> tuple[float, float]:
        """Seconds (wall, CPU) a burst worker process takes to start and exit on an empty
        queue."""
        path = self.fresh_db("startup")
        self.app(path).close()
        self.gate.wait()
        c0, t0 = children_cpu(), time.perf_counter()
        proc = self.start_worker(path, burst=True, tag="startup")
        rc = proc.wait(timeout=120)
        elapsed, cpu = time.perf_counter() - t0, children_cpu() - c0
        if rc != 0:
            raise RuntimeError(f"worker exited with {rc}:\n{self.worker_log('startup')}")
        return elapsed, cpu

    def drain(self, processes: int) -> tuple[float, float, float]:
        """N queued no-op jobs, ``processes`` burst workers; returns jobs/s until the
        store shows all done, jobs/s until every worker exited, and the workers' CPU
        microseconds per job (their start-up included)."""
        path = self.fresh_db(f"drain{processes}")
        n = self.n
        self.fill(path, n)
        app = self.app(path)
        tag = f"drain{processes}-{self.counter}"
        self.gate.wait()
        c0, t0 = children_cpu(), time.perf_counter()
        procs = [self.start_worker(path, burst=True, tag=tag) for _ in range(processes)]
        t_done = None
        deadline = t0 + max(600.0, n / 50)
        while time.perf_counter() < deadline:
            stats = {s.queue: s for s in app.stats()}
            s = stats.get(NOOP)
            if s is not None and s.done >= n and t_done is None:
                t_done = time.perf_counter()
            if all(p.poll() is not None for p in procs):
                break
            time.sleep(0.02)
        t_exit = time.perf_counter()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        stats = {s.queue: s for s in app.stats()}
        app.close()
        done = stats[NOOP].done if NOOP in stats else 0
        if t_done is None or done != n or any(p.returncode != 0 for p in procs):
            raise RuntimeError(
                f"drain with {processes} workers: {done}/{n} done, exit codes "
                f"{[p.returncode for p in procs]}:\n{self.worker_log(tag)}"
            )
        cpu = children_cpu() - c0
        return n / (t_done - t0), n / (t_exit - t0), cpu / n * 1e6

    # 4. latency

    def latency(self) -> tuple[float, float, float]:
        """An idle worker; jobs scheduled one at a time at ``latency_rate``/s; returns
        p50, p99 and max of started_at(task clock) - created_at, in ms."""
        from crawlq.stores.base import JobFilter

        path = self.fresh_db("latency")
        app = self.app(path)
        task = app.tasks[LATENCY]
        tag = f"latency-{self.counter}"
        self.gate.wait()
        proc = self.start_worker(path, burst=False, tag=tag)
        try:
            warm = task.schedule(-1).job_id  # wait until the worker is up and idle
            deadline = time.monotonic() + 120
            while (job := app.get_job(warm)) is None or job.state.value != "done":
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"latency worker never started:\n{self.worker_log(tag)}")
                time.sleep(0.05)
            time.sleep(1.5)  # let it settle into its idle wait
            ids = set()
            t0 = time.perf_counter()
            for i in range(self.latency_jobs):
                target = t0 + i / self.latency_rate
                pause = target - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                ids.add(task.schedule(i).job_id)
            deadline = time.monotonic() + 120
            while True:
                stats = {s.queue: s for s in app.stats()}
                if stats[LATENCY].done >= self.latency_jobs + 1:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"latency jobs did not finish:\n{self.worker_log(tag)}")
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        jobs = [j for j in app.store.job_list(JobFilter(queue=LATENCY)) if j.id in ids]
        app.close()
        lat = sorted((j.result - j.created_at) * 1000.0 for j in jobs)
        if len(lat) != self.latency_jobs:
            raise RuntimeError(f"expected {self.latency_jobs} latency jobs, found {len(lat)}")
        return percentile(lat, 50), percentile(lat, 99), lat[-1]


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile."""
    k = max(0, min(len(sorted_values) - 1, math.ceil(p / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


# -- the raw SQLite loop (no crawlq code) ----------------------------------------------

RAW_SCHEMA = """
CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT    NOT NULL,
    task             TEXT    NOT NULL,
    args             TEXT    NOT NULL,
    kwargs           TEXT    NOT NULL,
    key              TEXT,
    priority         INTEGER NOT NULL,
    run_at           REAL    NOT NULL,
    state            TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    lease_seconds    REAL    NOT NULL,
    timeout          REAL,
    worker_id        TEXT,
    lease_token      TEXT,
    lease_expires_at REAL,
    last_error       TEXT,
    result           TEXT,
    created_at       REAL    NOT NULL,
    started_at       REAL,
    finished_at      REAL
);
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, id) WHERE state = 'ready';
"""

RAW_INSERT = """
INSERT INTO {table} (queue, task, args, kwargs, key, priority, run_at, state, max_attempts,
                     lease_seconds, timeout, created_at)
VALUES (:queue, :task, :args, '{{}}', NULL, 0, :now, 'ready', 3, 30.0, NULL, :now)
"""

RAW_CLAIM = """
UPDATE {table}
SET state = 'running', attempts = attempts + 1, worker_id = :worker_id,
    lease_token = lower(hex(randomblob(8))), lease_expires_at = :now + lease_seconds,
    started_at = :now
WHERE id IN (SELECT id FROM {table}{hint}
             WHERE queue = :queue AND state = 'ready' AND run_at <= :now
             ORDER BY priority DESC, run_at, id LIMIT :limit)
RETURNING id, task, args, kwargs, attempts, lease_token
"""

RAW_ACK = """
UPDATE {table}
SET state = 'done', result = :result, finished_at = :now,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
"""


def raw_connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=60.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def raw_create(path: str, schema: str) -> str:
    """Create the raw table (``raw``) or crawlq's own schema (``crawlq``); its name."""
    if schema == "crawlq":
        from crawlq.stores import open_store

        open_store(f"sqlite:///{path}").close()
        return "crawlq_jobs"
    conn = raw_connect(path)
    conn.executescript(RAW_SCHEMA)
    conn.close()
    return "jobs"


def raw_fill(path: str, table: str, n: int) -> None:
    conn = raw_connect(path)
    now = time.time()
    sql = RAW_INSERT.format(table=table)
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        sql, ({"queue": NOOP, "task": NOOP, "args": f"[{i}]", "now": now} for i in range(n))
    )
    conn.execute("COMMIT")
    conn.close()


def raw_insert_rate(path: str, table: str, n: int, batch: int) -> Rate:
    conn = raw_connect(path)
    sql = RAW_INSERT.format(table=table)
    c0, t0 = time.process_time(), time.perf_counter()
    for start in range(0, n, batch):
        now = time.time()
        rows = [
            {"queue": NOOP, "task": NOOP, "args": json.dumps([i]), "now": now}
            for i in range(start, min(n, start + batch))
        ]
        conn.execute("BEGIN IMMEDIATE")
        if batch == 1:
            conn.execute(sql, rows[0])
        else:
            conn.executemany(sql, rows)
        conn.execute("COMMIT")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    conn.close()
    return n / elapsed, cpu / n * 1e6


def raw_drain_proc(path: str, table: str, batch: int, ready: Any, go: Any, out: Any) -> None:
    """One raw worker: claim a batch (one transaction), ack each row (one transaction)."""
    conn = raw_connect(path)
    # On crawlq's schema, the same index hint crawlq's claim query uses: without it SQLite
    # picks crawlq_jobs_ready (queue, run_at) and sorts every due job on each claim.
    hint = " INDEXED BY crawlq_jobs_claim" if table == "crawlq_jobs" else ""
    claim = RAW_CLAIM.format(table=table, hint=hint)
    ack = RAW_ACK.format(table=table)
    worker_id = f"raw:{os.getpid()}"
    ready.set()
    go.wait()
    c0 = time.process_time()
    done = 0
    while True:
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(
            claim, {"worker_id": worker_id, "now": now, "queue": NOOP, "limit": batch}
        ).fetchall()
        conn.execute("COMMIT")
        if not rows:
            break
        acks = []
        for job_id, _task, args, kwargs, _attempts, token in rows:
            json.loads(args), json.loads(kwargs)  # what a worker must do to run it
            acks.append({"id": job_id, "token": token, "result": "null", "now": time.time()})
        conn.execute("BEGIN IMMEDIATE")
        for item in acks:
            conn.execute(ack, item)
        conn.execute("COMMIT")
        done += len(rows)
    conn.close()
    out.put((done, time.process_time() - c0))


def raw_drain_rate(path: str, table: str, n: int, batch: int, processes: int) -> Rate:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    go = ctx.Event()
    readies = [ctx.Event() for _ in range(processes)]
    procs = [
        ctx.Process(target=raw_drain_proc, args=(path, table, batch, r, go, out)) for r in readies
    ]
    for p in procs:
        p.start()
    for r in readies:
        if not r.wait(60):
            raise RuntimeError("a raw worker process did not start")
    t0 = time.perf_counter()
    go.set()
    reports = [out.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - t0
    total = sum(done for done, _ in reports)
    cpu = sum(cpu for _, cpu in reports)
    for p in procs:
        p.join()
    if total != n:
        raise RuntimeError(f"raw drain processed {total} of {n} jobs")
    return n / elapsed, cpu / n * 1e6


# -- the run ---------------------------------------------------------------------------


ROWS: list[tuple[str, str, str, str]] = []  # (key, section, label, unit), in print order


def row(key: str, section: str, label: str, unit: str) -> None:
    ROWS.append((key, section, label, unit))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=2,000, 1 run")
    parser.add_argument("-n", type=int, help="jobs per figure (default 20,000; quick 2,000)")
    parser.add_argument("--runs", type=int, help="runs per figure (default 3; quick 1)")
    parser.add_argument("--latency-jobs", type=int, help="default 500 (quick 100)")
    parser.add_argument("--latency-rate", type=float, default=50.0, help="jobs/s (default 50)")
    parser.add_argument(
        "--no-full-schema", action="store_true", help="skip the raw loop on crawlq's full schema"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--prefetch", default="auto", help="worker --prefetch: N or auto (default auto, crawlq's)"
    )
    args = parser.parse_args(argv)
    global PREFETCH
    PREFETCH = args.prefetch
    n = args.n or (2_000 if args.quick else 20_000)
    runs = args.runs or (1 if args.quick else 3)
    latency_jobs = args.latency_jobs or (100 if args.quick else 500)

    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-"))
    started = time.perf_counter()
    try:
        bench = Bench(tmp, n, latency_jobs, args.latency_rate)
        kind = bench.choose_worker()
        print(f"# working in {tmp}; worker: {kind}", file=sys.stderr)
        res = Results()
        schemas = ["raw"] if args.no_full_schema else ["raw", "crawlq"]

        steps: list[tuple[str, Callable[[], None]]] = []

        def add(key: str, section: str, label: str, unit: str, fn: Callable[[], Rate]) -> None:
            row(key, section, label, unit)
            steps.append((key, lambda: res.add(key, label, unit, *fn())))

        add(
            "sched1",
            "schedule",
            "crawlq `task.schedule(i)`, one call per job",
            "jobs/s",
            bench.schedule_single,
        )
        add(
            "schedB",
            "schedule",
            f"crawlq `app.schedule_many`, batches of {SCHEDULE_BATCH}",
            "jobs/s",
            bench.schedule_batch,
        )

        def raw_insert(batch: int) -> Callable[[], Rate]:
            def fn() -> Rate:
                path = str(bench.fresh_db(f"raw-insert{batch}"))
                table = raw_create(path, "raw")
                bench.gate.wait()
                return raw_insert_rate(path, table, n, batch)

            return fn

        add("rawins1", "raw", "raw SQL insert, one transaction per job", "jobs/s", raw_insert(1))
        add(
            "rawinsB",
            "raw",
            f"raw SQL insert, {SCHEDULE_BATCH} per transaction (executemany)",
            "jobs/s",
            raw_insert(SCHEDULE_BATCH),
        )

        row("drain1", "drain", "crawlq, 1 worker process (start to exit)", "jobs/s")
        row(
            "drain2",
            "drain",
            "crawlq, 2 worker processes (start to all done in the store)",
            "jobs/s",
        )
        row("drain2x", "drain", "crawlq, 2 worker processes (start to both exited)", "jobs/s")

        row("startup", "drain", "worker process start + exit, empty queue: wall", "s")
        row("startupcpu", "drain", "worker process start + exit, empty queue: CPU", "s")

        def drain1() -> None:
            _, exit_rate, cpu = bench.drain(1)
            res.add("drain1", "", "jobs/s", exit_rate, cpu)

        def drain2() -> None:
            done_rate, exit_rate, cpu = bench.drain(2)
            res.add("drain2", "", "jobs/s", done_rate, cpu)
            res.add("drain2x", "", "jobs/s", exit_rate, cpu)

        def startup() -> None:
            wall, cpu = bench.worker_startup()
            res.add("startup", "", "s", wall)
            res.add("startupcpu", "", "s", cpu)

        steps.append(("drain1", drain1))
        steps.append(("drain2", drain2))
        steps.append(("startup", startup))

        def raw_drain(schema: str, batch: int, procs: int) -> Callable[[], Rate]:
            def fn() -> Rate:
                path = str(bench.fresh_db(f"raw-{schema}-b{batch}-p{procs}"))
                table = raw_create(path, schema)
                raw_fill(path, table, n)
                bench.gate.wait()
                return raw_drain_rate(path, table, n, batch, procs)

            return fn

        for schema in schemas:
            where = (
                "raw table (same columns + claim index)"
                if schema == "raw"
                else "crawlq's full schema (5 indexes + count triggers)"
            )
            for batch in (CONCURRENCY, 1):
                if schema == "crawlq" and batch == 1:
                    continue
                for procs in (1, 2):
                    add(
                        f"raw-{schema}-b{batch}-p{procs}",
                        "raw",
                        f"raw SQL loop on {where}, batch {batch}, {procs} process"
                        f"{'es' if procs > 1 else ''}",
                        "jobs/s",
                        raw_drain(schema, batch, procs),
                    )

        row("lat50", "latency", "schedule-to-start p50", "ms")
        row("lat99", "latency", "schedule-to-start p99", "ms")
        row("latmax", "latency", "schedule-to-start max", "ms")

        def lat() -> None:
            p50, p99, mx = bench.latency()
            res.add("lat50", "", "ms", p50)
            res.add("lat99", "", "ms", p99)
            res.add("latmax", "", "ms", mx)

        steps.append(("latency", lat))

        for run in range(runs):
            for key, step in steps:
                t = time.perf_counter()
                step()
                print(
                    f"# run {run + 1}/{runs} {key}: {time.perf_counter() - t:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )

        report(
            res,
            bench,
            n,
            runs,
            latency_jobs,
            args.latency_rate,
            tmp,
            time.perf_counter() - started,
            argv,
        )
    finally:
        if args.keep:
            print(f"# kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def report(
    res: Results,
    bench: Bench,
    n: int,
    runs: int,
    latency_jobs: int,
    latency_rate: float,
    tmp: Path,
    total: float,
    argv: Sequence[str] | None,
) -> None:
    cmd = " ".join([".venv/bin/python", "bench/bench_sqlite.py", *(argv or sys.argv[1:])])
    print(f"- command: `{cmd}`")
    print(f"- machine: {machine_line(str(tmp))}")
    print(f"- code: {crawlq_version()}")
    print(f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"- N = {n:,} jobs per figure; {runs} run{'s' if runs > 1 else ''} per figure "
        f"(median, min, max); latency: {latency_jobs} jobs at {latency_rate:g}/s; "
        f"wall time {total:.0f} s"
    )
    print(f"- worker: {bench.worker_description()}")
    print(f"- load: {bench.gate.describe()}")
    print("- SQLite: WAL, synchronous=NORMAL (crawlq's default) everywhere")
    print()
    print("| item | measurement | median | min | max | unit | CPU µs/job |")
    print("|---|---|---:|---:|---:|---|---:|")
    numbers = {"schedule": "1", "drain": "3", "raw": "5", "latency": "4"}
    order = ["schedule", "drain", "latency", "raw"]
    for section in order:
        for key, sec, label, unit in ROWS:
            if sec != section:
                continue
            fig = res.figures.get(key)
            if fig is None or not fig.values:
                continue
            num = numbers[section]
            if key == "schedB":
                num = "2"
            cpu = f"{statistics.median(fig.cpu):,.0f}" if fig.cpu else ""
            print(
                f"| {num} | {label} | {fmt(fig.median, unit)} | {fmt(min(fig.values), unit)} "
                f"| {fmt(max(fig.values), unit)} | {unit} | {cpu} |"
            )
    print()
    print(
        "CPU µs/job: CPU time (user + system) of the processes doing the work, per job, "
        "median of the runs; for worker subprocesses it includes their start-up (the "
        "`start + exit: CPU` row). Less disturbed than jobs/s when other processes share "
        "the cores, but not immune (a busy neighbour inflated it by up to ~30%)."
    )
    print()
    ratios = [
        ("crawlq drain, 1 process / raw loop batch 8, 1 process", "drain1", "raw-raw-b8-p1"),
        ("crawlq drain, 1 process / raw loop batch 1, 1 process", "drain1", "raw-raw-b1-p1"),
        ("crawlq drain, 2 processes / raw loop batch 8, 2 processes", "drain2", "raw-raw-b8-p2"),
        ("crawlq drain, 2 processes / raw loop batch 1, 2 processes", "drain2", "raw-raw-b1-p2"),
        (
            "crawlq drain, 1 process / raw loop on crawlq's schema, batch 8, 1 process",
            "drain1",
            "raw-crawlq-b8-p1",
        ),
        (
            "crawlq drain, 2 processes / raw loop on crawlq's schema, batch 8, 2 processes",
            "drain2",
            "raw-crawlq-b8-p2",
        ),
        (
            "raw loop on crawlq's schema / raw table, batch 8, 1 process",
            "raw-crawlq-b8-p1",
            "raw-raw-b8-p1",
        ),
        ("crawlq `task.schedule` / raw insert, one transaction per job", "sched1", "rawins1"),
        ("crawlq `schedule_many` (500) / raw insert, 500 per transaction", "schedB", "rawinsB"),
    ]
    print("| ratio (medians) | value |")
    print("|---|---:|")
    for label, a, b in ratios:
        va, vb = res.median(a), res.median(b)
        if va is not None and vb:
            print(f"| {label} | {va / vb:.1%} |")
    drain1, startup, raw1 = res.median("drain1"), res.median("startup"), res.median("raw-raw-b8-p1")
    if drain1 and startup is not None and raw1 and n / drain1 > startup:
        warm = n / (n / drain1 - startup)
        print(
            f"| crawlq drain, 1 process, process start+exit left out ({warm:,.0f} jobs/s) "
            f"/ raw loop batch 8, 1 process | {warm / raw1:.1%} |"
        )
    start_cpu = res.median("startupcpu") or 0.0
    for procs, key in ((1, "drain1"), (2, "drain2")):
        worker_cpu = res.cpu_median(key)
        for raw_key, what in (
            (f"raw-raw-b8-p{procs}", "raw table"),
            (f"raw-crawlq-b8-p{procs}", "crawlq's schema"),
        ):
            raw_cpu = res.cpu_median(raw_key)
            if worker_cpu and raw_cpu:
                warm_cpu = worker_cpu - start_cpu * procs * 1e6 / n
                print(
                    f"| CPU per job: raw loop on {what}, batch 8 / crawlq worker "
                    f"({warm_cpu:,.0f} µs/job, start-up left out), {procs} process"
                    f"{'es' if procs > 1 else ''} | {raw_cpu / warm_cpu:.1%} |"
                )
    for key, raw_key, what in (
        ("sched1", "rawins1", "one transaction per job"),
        ("schedB", "rawinsB", "500 per transaction"),
    ):
        crawlq_cpu, insert_cpu = res.cpu_median(key), res.cpu_median(raw_key)
        if crawlq_cpu and insert_cpu:
            print(
                f"| CPU per job: raw insert / crawlq schedule, {what} | "
                f"{insert_cpu / crawlq_cpu:.1%} |"
            )


if __name__ == "__main__":
    raise SystemExit(main())
