"""Where an idle worker's latency goes: schedule call to task body, step by step.

    .venv/bin/python bench/latency_breakdown.py redis       # or postgres, sqlite; -n 500

A private server (tests/servers.py); one worker process (this file, ``--worker``: thread
runtime, concurrency 8, ``--prefetch 0``), warmed up with one job, then N jobs scheduled
at 50/s from this process, as bench/peers/run.py's latency workload does. Marks, by
``time.time_ns()`` in both processes: ``t0`` before the schedule call, ``t1`` after it;
in the worker ``woke`` when ``job_wait_claim`` returns the job, ``submit`` when the loop
hands it to the runtime, ``slot`` when a slot thread takes it, ``body`` when the task
starts. A job claimed by a plain claim (the loop was not waiting) has no ``woke``.
The crawlq imported is this checkout's; alternate two trees on a shared machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import crawlq  # noqa: E402
from crawlq.jobs import Job  # noqa: E402

STEPS = ("t0", "t1", "woke", "submit", "slot", "body")
marks: dict[int, dict[str, int]] = {}


def mark(job_id: int, name: str) -> None:
    marks.setdefault(job_id, {})[name] = time.time_ns()


def make_app(url: str) -> crawlq.App:
    app = crawlq.App(url)

    @app.task(name="probe")
    def probe(ctx: Any, i: int) -> None:
        mark(ctx.job.id, "body")

    return app


def worker(url: str, out: str) -> None:
    """Run a worker with its steps marked until SIGINT; write the marks to ``out``."""
    from crawlq.config import WorkerSettings
    from crawlq.stores.base import ClaimParams
    from crawlq.worker.runtimes import SlotQueue
    from crawlq.worker.worker import Worker

    app = make_app(url)
    cls: Any = type(app.store)
    wait_claim = cls.job_wait_claim

    def job_wait_claim(self: Any, params: ClaimParams, timeout: float) -> list[Job]:
        jobs: list[Job] = wait_claim(self, params, timeout)
        for job in jobs:
            mark(job.id, "woke")
        return jobs

    submit, next_job = SlotQueue.submit, SlotQueue.next_job

    def marked_submit(self: SlotQueue, job: Job) -> None:
        mark(job.id, "submit")
        submit(self, job)

    def marked_next_job(self: SlotQueue) -> Job | None:
        job = next_job(self)
        if job is not None:
            mark(job.id, "slot")
        return job

    cls.job_wait_claim = job_wait_claim
    SlotQueue.submit = marked_submit  # type: ignore[method-assign]
    SlotQueue.next_job = marked_next_job  # type: ignore[method-assign]
    Worker(app, WorkerSettings(concurrency=8, prefetch=0)).run()
    Path(out).write_text(json.dumps(marks))


def store_url(kind: str, tmp: Path) -> str:
    import servers

    if kind == "redis":
        return servers.redis().url
    if kind == "sqlite":
        return f"sqlite:///{tmp / 'jobs.db'}"
    import psycopg

    url = servers.postgres().url
    name = "lat" + secrets.token_hex(4)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", choices=("redis", "postgres", "sqlite"))
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--worker", nargs=2, metavar=("URL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    tmp = Path(tempfile.mkdtemp(prefix="crawlq-latency-"))
    url = store_url(args.store, tmp)
    app = make_app(url)
    probe = app.tasks["probe"]
    out = tmp / "marks.json"
    cmd = [sys.executable, __file__, args.store, "--worker", url, str(out)]
    proc = subprocess.Popen(cmd)
    time.sleep(2.0)
    probe.schedule(-1)
    time.sleep(1.5)
    sent: dict[int, dict[str, int]] = {}
    due = time.perf_counter()
    for i in range(args.n):
        due += 0.02
        time.sleep(max(0.0, due - time.perf_counter()))
        t0 = time.time_ns()
        job_id = probe.schedule(i).job_id
        sent[job_id] = {"t0": t0, "t1": time.time_ns()}
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    app.close()
    seen = {int(k): v for k, v in json.loads(out.read_text()).items()}
    steps: dict[str, list[float]] = {}
    for job_id, ends in sent.items():
        at = {**seen.get(job_id, {}), **ends}
        present = [(name, at[name]) for name in STEPS if name in at]
        for (a, ta), (b, tb) in itertools.pairwise(present):
            steps.setdefault(f"{a} -> {b}", []).append((tb - ta) / 1e6)
        if "body" in at:
            steps.setdefault("total t0 -> body", []).append((at["body"] - at["t0"]) / 1e6)
    print(f"{args.store}: {args.n} jobs at 50/s, ms")
    for name, values in steps.items():
        p50, p90, p99 = (quantile(values, q) for q in (0.5, 0.9, 0.99))
        print(f"  {name:18s} n={len(values):4d}  p50 {p50:7.3f}  p90 {p90:7.3f}  p99 {p99:7.3f}")


if __name__ == "__main__":
    main()
