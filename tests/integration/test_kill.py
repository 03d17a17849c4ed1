"""Workers killed with SIGKILL lose nothing; SIGTERM stops a worker cleanly."""

from __future__ import annotations

import signal
import subprocess
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


HOLD = """
    import os, sys, time
    import crawlq

    app = crawlq.App(os.environ["CRAWLQ_STORE"])

    @app.task(name="hold", lease=300.0, max_attempts=3)
    def hold(ctx, n):
        if ctx.attempt == 1:
            open(f"held-{n}", "w").close()
            time.sleep(600)
        return n

    if __name__ == "__main__":  # `python holdtasks.py`: a worker started from Python
        crawlq.Worker(app, crawlq.WorkerSettings(burst=True, concurrency=4)).run()
"""
"""The first attempt holds its job (with a 300 s lease) until killed; the second ends."""

STARTERS = {
    "cli": ("crawlq", "worker", "--app", "holdtasks:app", "--concurrency", "4"),
    "process": ("crawlq", "worker", "--app", "holdtasks:app", "--concurrency", "4",
                "--runtime", "process"),
    "python": ("python", "holdtasks.py"),
}  # fmt: skip
"""Every way a worker starts (`crawlq crawl` is in test_crawler.py): the arguments after
``python -m``, or of python."""


def start(procs: Processes, how: str, log: str, *more: str) -> subprocess.Popen[str]:
    kind, *args = STARTERS[how]
    if kind == "python":
        return procs.python(*args, log=log)
    return procs.crawlq(*args, *more, log=log)


def hold_four(procs: Processes, how: str) -> tuple[crawlq.App, list[int], subprocess.Popen[str]]:
    """Four jobs, each started and held by one worker started as ``how``."""
    procs.write_module("holdtasks", HOLD)
    app = crawlq.App(procs.store_url)
    hold = app.task(name="hold", lease=300.0, max_attempts=3)(lambda ctx, n: n)
    ids = [r.job_id for r in hold.schedule_many([[n] for n in range(4)])]
    victim = start(procs, "cli" if how == "python" else how, "victim.err")
    wait_until(
        lambda: len(list(procs.workdir.glob("held-*"))) == 4,
        timeout=60,
        what="the first worker to start all four jobs",
    )
    return app, ids, victim


@pytest.mark.parametrize("how", sorted(STARTERS))
def test_a_worker_started_after_a_kill_takes_the_killed_workers_jobs_back_at_once(
    procs: Processes, how: str
) -> None:
    """Not after the 30 s a lapsed heartbeat takes, nor the 300 s lease: the new worker
    runs on the same machine and sees that the killed one's process is gone."""
    app, ids, victim = hold_four(procs, how)
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    began = time.monotonic()
    rescuer = start(procs, how, "rescuer.err", "--burst")
    assert rescuer.wait(60) == 0, (procs.workdir / "rescuer.err").read_text()
    elapsed = time.monotonic() - began
    jobs = [app.get_job(i) for i in ids]
    assert [(j.state, j.attempts, j.result) for j in jobs if j is not None] == [
        (JobState.DONE, 2, n) for n in range(4)
    ]
    workers = {w.pid: w for w in app.workers()}
    assert workers[victim.pid].state == "dead"
    assert workers[rescuer.pid].state == "stopped"
    assert workers[rescuer.pid].done == 4  # the final counters, written at exit
    # On the store's clock, from the new worker's start to the last job's end:
    last = max(j.finished_at or 0.0 for j in jobs if j is not None)
    assert last - workers[rescuer.pid].started_at < 5.0
    assert elapsed < 20.0  # with the interpreter's start; the heartbeat alone takes 30 s
    assert "process gone" in (procs.workdir / "rescuer.err").read_text()
    app.close()


def test_a_worker_started_next_to_a_live_or_frozen_one_leaves_its_jobs(
    procs: Processes,
) -> None:
    """The process exists (running, then stopped by SIGSTOP): it is not gone."""
    app, ids, victim = hold_four(procs, "cli")
    for i, sig in enumerate((signal.SIGCONT, signal.SIGSTOP)):
        victim.send_signal(sig)
        other = start(procs, "cli", f"other-{i}.err", "--burst")
        assert other.wait(60) == 0
        jobs = [app.get_job(i) for i in ids]
        assert [(j.state, j.attempts) for j in jobs if j is not None] == [(JobState.RUNNING, 1)] * 4
        assert {w.pid: w.state for w in app.workers()}[victim.pid] == "alive"
    victim.send_signal(signal.SIGCONT)
    app.close()
