"""Periodic schedules with real workers on every store: three worker processes fire a
schedule once per second, exactly once per fire time, also when one of them is killed
with SIGKILL; missed fire times are caught up once or skipped; a slow job is not stacked.

``RUN_SLOW=1`` runs the long form of the SIGKILL test (30 s, killed after 12 s); CI runs
the bounded form (8 s, killed after 4 s)."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import crawlq
from crawlq.config import WorkerSettings
from crawlq.jobs import JobState
from crawlq.periodic import FireOutcome, FireRecord
from crawlq.stores.base import JobFilter
from crawlq.worker.worker import Worker
from tests.integration.conftest import Processes, wait_until

TICKS = """
    import os
    import crawlq

    app = crawlq.App(os.environ["CRAWLQ_STORE"])
    RAN = open(f"ran-{os.getpid()}.log", "a", buffering=1)

    @app.periodic("* * * * * *", name="tick", grace=10)
    def tick(ctx):
        RAN.write(f"{ctx.job_id}\\n")
"""


def fires(app: crawlq.App, name: str = "tick") -> list[FireRecord]:
    return app.schedules.fires(name, limit=100_000)


def assert_once_per_second(app: crawlq.App, records: list[FireRecord]) -> None:
    """Consecutive fire times one second apart, each with its own job, and no other job."""
    times = [r.fire_at for r in records]
    steps = {round(b - a, 6) for a, b in itertools.pairwise(times)}
    assert steps <= {1.0}, f"fire times not one second apart: {sorted(steps)}"
    assert {r.outcome for r in records} == {FireOutcome.FIRED}
    ids = [r.job_id for r in records]
    assert None not in ids and len(set(ids)) == len(ids)
    jobs = app.store.job_list(JobFilter(queue="tick", limit=100_000))
    assert sorted(j.id for j in jobs) == sorted(ids)  # type: ignore[type-var]


def run_three_workers(procs: Processes, seconds: float, kill_after: float | None) -> None:
    procs.write_module("ticks", TICKS)
    app = crawlq.App(procs.store_url)
    workers = [
        procs.crawlq("worker", "--app", "ticks:app", "--concurrency", "2", log=f"w{i}.err")
        for i in range(3)
    ]
    wait_until(lambda: bool(_safe_fires(app)), timeout=60, what="the first fire")
    started = time.monotonic()
    if kill_after is not None:
        time.sleep(kill_after)
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(10)
    time.sleep(max(0.0, seconds - (time.monotonic() - started)))
    for w in workers[1:]:
        w.send_signal(signal.SIGTERM)
    for w in workers[1:]:
        assert w.wait(60) == 0
    records = fires(app)
    assert len(records) >= seconds - 1, [r.fire_at for r in records]
    assert_once_per_second(app, records)
    ran = [
        line.strip()
        for path in procs.workdir.glob("ran-*.log")
        for line in path.read_text().splitlines()
    ]
    assert len(ran) >= len(records) - 3  # the last ones may still be pending
    app.close()


def _safe_fires(app: crawlq.App, name: str = "tick") -> list[FireRecord]:
    try:
        return fires(app, name)
    except crawlq.ConfigurationError:  # not stored yet
        return []


def test_three_workers_fire_every_second_exactly_once(procs: Processes) -> None:
    run_three_workers(procs, seconds=10, kill_after=None)


def test_a_killed_scheduler_changes_nothing_bounded(procs: Processes) -> None:
    run_three_workers(procs, seconds=8, kill_after=4)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("RUN_SLOW"), reason="RUN_SLOW=1 runs the 30 s form")
def test_a_killed_scheduler_changes_nothing_long(procs: Processes) -> None:
    run_three_workers(procs, seconds=30, kill_after=12)


@contextmanager
def worker_thread(app: crawlq.App) -> Iterator[Worker]:
    worker = crawlq.Worker(app, WorkerSettings(concurrency=4, poll_timeout=0.1))
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop(now=True)
        thread.join(60)


@pytest.mark.parametrize("catch_up", ["once", "skip"])
def test_fire_times_missed_while_no_worker_ran(store_url: str, catch_up: str) -> None:
    app = crawlq.App(store_url)

    @app.periodic(every=1, name="beat", grace=1.5, catch_up=catch_up)
    def beat(ctx: crawlq.JobContext) -> None: ...

    with worker_thread(app):
        wait_until(lambda: len(_safe_fires(app, "beat")) >= 2, 30, "two fires")
    before = fires(app, "beat")
    time.sleep(6.5)  # five fire times and more pass with no worker
    with worker_thread(app):
        wait_until(lambda: len(fires(app, "beat")) >= len(before) + 3, 30, "fires after")
    after = fires(app, "beat")[len(before) :]
    first, second = after[0], after[1]
    assert first.fire_at == before[-1].fire_at + 1  # the first fire time missed
    assert first.outcome is (FireOutcome.FIRED if catch_up == "once" else FireOutcome.MISSED)
    assert second.fire_at >= first.fire_at + 5  # the others are not recorded
    assert {r.outcome for r in after[1:]} == {FireOutcome.FIRED}
    assert all(b.fire_at - a.fire_at == 1 for a, b in itertools.pairwise(after[1:]))
    app.close()


def test_a_slow_job_is_not_stacked_without_overlap(store_url: str) -> None:
    app = crawlq.App(store_url)
    spans: list[tuple[float, float]] = []

    @app.periodic(every=1, name="slow", overlap=False)
    def slow(ctx: crawlq.JobContext) -> None:
        begin = time.monotonic()
        time.sleep(2.5)
        spans.append((begin, time.monotonic()))

    with worker_thread(app):
        wait_until(lambda: len(spans) >= 2, 30, "two slow jobs to finish")
    records = fires(app, "slow")
    fired = [r for r in records if r.outcome is FireOutcome.FIRED]
    assert any(r.outcome is FireOutcome.SKIPPED for r in records)
    spans.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans
    live = app.store.job_list(JobFilter(queue="slow", state=JobState.PENDING))
    assert len(live) <= 1  # never more than the one fired after the last finished
    assert len(app.store.job_list(JobFilter(queue="slow", limit=1000))) == len(fired)
    app.close()
