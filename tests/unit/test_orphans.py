"""A claim whose reply is lost: the store leased jobs that never reached the worker. The
worker gives them back (``crawlq.worker.orphans``) instead of leaving them running under
its id until their lease expires. The fault is a real SQLite store whose call commits
and then raises, as a connection that drops after the commit does."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from crawlq import App, JobContext, JobState, Worker, WorkerSettings
from crawlq.exceptions import StoreUnavailable
from crawlq.stores.base import JobFilter


def lose_reply(app: App, method: str, *, after: int) -> list[list[int]]:
    """Make the ``after``-th call of the store's ``method`` (1-based) commit, then raise
    StoreUnavailable; returns the ids each lost claim leased."""
    store = app.store
    real: Callable[..., Any] = getattr(store, method)
    calls = 0
    lost: list[list[int]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        answer = real(*args, **kwargs)
        if calls == after:
            jobs = answer[1] if isinstance(answer, tuple) else answer
            lost.append([job.id for job in jobs])
            raise StoreUnavailable("server closed the connection unexpectedly (injected)")
        return answer

    setattr(store, method, call)
    return lost


@pytest.mark.parametrize(("method", "after"), [("job_claim", 1), ("job_complete_claim", 3)])
def test_jobs_a_lost_claim_leased_are_given_back_and_run_once(
    app: App, method: str, after: int, caplog: pytest.LogCaptureFixture
) -> None:
    runs: dict[int, int] = {}
    lock = threading.Lock()

    @app.task(name="work", lease=300.0)
    def work(ctx: JobContext, n: int) -> None:
        with lock:
            runs[n] = runs.get(n, 0) + 1

    work.schedule_many([[n] for n in range(60)])
    lost = lose_reply(app, method, after=after)
    worker = Worker(app, WorkerSettings(burst=True, concurrency=2, poll_timeout=0.05))
    with caplog.at_level(logging.WARNING, logger="crawlq.worker"):
        worker.run()  # without the give-back, burst waits 300 s for the leased jobs
    [leased] = lost
    assert leased, "the lost call leased jobs"
    assert runs == {n: 1 for n in range(60)}
    assert all(j.state is JobState.DONE for j in app.store.job_list(JobFilter()))
    given = [r.getMessage() for r in caplog.records if "reply was lost" in r.getMessage()]
    assert given and all(str(i) in given[0] for i in leased)
    assert all(j.attempts == 1 for j in app.store.job_list(JobFilter(ids=leased)))
