"""Workers killed with SIGKILL lose nothing; SIGTERM stops a worker cleanly."""

from __future__ import annotations

import signal
import time

import pytest

import crawlq
from crawlq import JobState
from crawlq.stores.base import JobFilter
from tests.integration.conftest import Processes, wait_until

TASKS = """
    import os, time
    import crawlq

    app = crawlq.App(os.environ["CRAWLQ_STORE"])
    LEDGER = open(f"started-{os.getpid()}.log", "a", buffering=1)

    @app.task(name="fetch", lease=1.0, max_attempts=3)
    def fetch(ctx, n, seconds):
        LEDGER.write(f"{ctx.job_id} {ctx.attempt}\\n")
        time.sleep(seconds)
        return n
"""


def test_jobs_held_by_a_killed_worker_all_end_done(procs: Processes) -> None:
    procs.write_module("killtasks", TASKS)
    app = crawlq.App(procs.store_url)
    fetch = app.task(name="fetch", lease=1.0, max_attempts=3)(lambda ctx, n, s: n)
    ids = [r.job_id for r in fetch.schedule_many([[i, 0.2] for i in range(100)])]

    victim = procs.crawlq(
        "worker", "--app", "killtasks:app", "--concurrency", "8", log="victim.err"
    )
    wait_until(
        lambda: len(app.store.job_list(JobFilter(state=JobState.RUNNING))) >= 8,
        timeout=30,
        what="the first worker to hold 8 jobs",
    )
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    held = {j.id for j in app.store.job_list(JobFilter(state=JobState.RUNNING))}
    assert held, "the worker held no job when it was killed"

    rescuer = procs.crawlq(
        "worker", "--app", "killtasks:app", "--concurrency", "8", "--burst", log="rescuer.err"
    )
    assert rescuer.wait(120) == 0
    jobs = {i: app.get_job(i) for i in ids}
    assert all(j is not None and j.state is JobState.DONE for j in jobs.values()), [
        (i, j.state) for i, j in jobs.items() if j is not None and j.state is not JobState.DONE
    ]
    assert all(jobs[i].attempts == 2 for i in held)  # type: ignore[union-attr]
    assert [jobs[i].result for i in ids] == list(range(100))  # type: ignore[union-attr]
    app.close()


@pytest.mark.parametrize("runtime", ["thread", "asyncio", "process"])
def test_sigterm_finishes_short_jobs_and_releases_long_ones(procs: Processes, runtime: str) -> None:
    procs.write_module("killtasks", TASKS)
    app = crawlq.App(procs.store_url)
    fetch = app.task(name="fetch", lease=1.0, max_attempts=3)(lambda ctx, n, s: n)
    short = [fetch.schedule(i, 0.3).job_id for i in range(3)]
    long = fetch.schedule(99, 60).job_id

    worker = procs.crawlq(
        "worker",
        "--app",
        "killtasks:app",
        "--concurrency",
        "4",
        "--shutdown-grace",
        "2",
        "--runtime",
        runtime,
        log="worker.err",
    )
    # started, not only claimed: a job claimed but not yet begun at SIGTERM is released
    wait_until(
        lambda: (
            sum(len(f.read_text().splitlines()) for f in procs.workdir.glob("started-*.log")) == 4
        ),
        timeout=30,
        what="all four jobs to start",
    )
    started = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert time.monotonic() - started < 10
    assert all(app.get_job(i).state is JobState.DONE for i in short)  # type: ignore[union-attr]
    released = app.get_job(long)
    assert released is not None
    assert (released.state, released.attempts) == (JobState.PENDING, 0)
    app.close()
