"""The acker and stores that refuse an outcome for good (issue 14, item 15).

A child the store could never take (PostgreSQL refused its 3 kB key) made the parent's
completion fail, as StoreUnavailable, for ever: the acker retried it until the lease
expired, the body ran 3 times, and the job went dead as ``lease_expired`` with an error
that did not name the cause. A permanent refusal is now not retried: the job goes dead
at once with the store's reason, and the other outcomes of its batch are recorded."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crawlq import App, JobContext, JobState, Worker, WorkerSettings
from crawlq.stores.base import ClaimParams, Completion, JobFilter
from crawlq.worker.acks import Acker
from tests import servers

LONG_QUEUE = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(50))
"""A 3.2 kB queue name that does not compress: PostgreSQL's claim index cannot hold it."""


@pytest.fixture(params=["sqlite", "postgres"])
def refusing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[App, str, str]]:
    """(app, a queue whose jobs the store refuses for good, the reason it gives)."""
    if request.param == "sqlite":
        path = tmp_path / "jobs.db"
        app = App(f"sqlite:///{path}")
        app.stats()  # the store opens, and migrates, on first use
        with sqlite3.connect(path) as conn:  # a real refusal, injected into the real file
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON crawlq_jobs WHEN NEW.queue = 'refused' "
                "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
        yield app, "refused", "refused by the test"
    else:
        pytest.importorskip("psycopg")
        schema = servers.isolated_name(tmp_path, "a_")
        app = App(f"{servers.postgres().url}?schema={schema}")
        yield app, LONG_QUEUE, "index row"
    app.close()


def test_a_completion_the_store_refuses_for_good_ends_dead_naming_the_cause(
    refusing: tuple[App, str, str],
) -> None:
    app, queue, reason = refusing
    runs: list[int] = []

    @app.task(name="child", queue=queue)
    def child(ctx: JobContext) -> None:
        pass

    @app.task(name="parent", max_attempts=3, lease=2.0)
    def parent(ctx: JobContext, n: int) -> None:
        runs.append(n)
        if n == 0:
            ctx.schedule(child)

    ids = [parent.schedule(n).job_id for n in range(3)]
    started = time.monotonic()
    worker = Worker(app, WorkerSettings(burst=True, poll_timeout=0.05, concurrency=3))
    worker.run()
    assert time.monotonic() - started < 10, "the refused completion was not retried for ever"
    assert sorted(runs) == [0, 1, 2], "each body ran once"
    refused = app.get_job(ids[0])
    assert refused is not None and refused.state is JobState.DEAD
    assert refused.dead_reason == "store_refused"
    assert "refused to record this job's completion" in (refused.last_error or "")
    assert reason in (refused.last_error or "")
    others = [app.get_job(i) for i in ids[1:]]
    assert [j.state if j else None for j in others] == [JobState.DONE, JobState.DONE]
    assert app.store.job_list(JobFilter(task="child")) == []


# -- inline mode: the worker's loop records, the thread only while it is away --------


@pytest.fixture
def redis_app(tmp_path: Path) -> Iterator[tuple[App, servers.PrivateRedis]]:
    """An app on a Redis server of this test's own, which the test may stop."""
    pytest.importorskip("redis")
    server = servers.PrivateRedis()
    app = App(f"{server.url}?prefix=acks")
    yield app, server
    app.close()
    server.close()


def claimed_completion(app: App) -> tuple[int, Completion]:
    """A job scheduled and claimed, with the Completion that would end it."""

    @app.task(name="t")
    def t(ctx: JobContext) -> None:
        pass

    job_id = t.schedule().job_id
    (claimed,) = app.store.job_claim(ClaimParams(queues=["t"], worker_id="w", limit=1))
    return job_id, Completion(lease=claimed.lease)


def state(app: App, job_id: int) -> JobState:
    found = app.get_job(job_id)
    assert found is not None
    return found.state


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_inline_outcomes_wait_for_record_or_for_the_owner_to_be_away(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'jobs.db'}")
    job_id, done = claimed_completion(app)
    other = app.get_task("t").schedule().job_id
    (second,) = app.store.job_claim(ClaimParams(queues=["t"], worker_id="w", limit=1))
    acker = Acker(app.store, lambda: None, inline=True)
    acker.start()
    acker.put(done)
    time.sleep(0.2)
    assert state(app, job_id) is JobState.RUNNING, "the thread recorded it: it was not away"
    assert not acker.idle
    acker.record()
    assert state(app, job_id) is JobState.DONE and acker.idle
    acker.away(True)
    acker.put(Completion(lease=second.lease))
    assert wait_until(lambda: acker.idle), "the thread did not record while the owner was away"
    assert state(app, other) is JobState.DONE
    acker.stop()
    app.close()


def test_an_inline_record_the_store_cannot_take_is_retried_by_the_thread(
    redis_app: tuple[App, servers.PrivateRedis],
) -> None:
    app, server = redis_app
    job_id, done = claimed_completion(app)
    flushed = threading.Event()
    acker = Acker(app.store, flushed.set, inline=True)
    acker.start()
    acker.put(done)
    server.stop()
    acker.record()  # one try, refused as unavailable: handed to the thread
    assert acker.retrying and not acker.idle
    acker.record()  # the thread has it: nothing tried here
    server.start()
    assert wait_until(lambda: acker.idle, 30), "the thread did not retry until recorded"
    assert flushed.is_set() and not acker.retrying
    assert state(app, job_id) is JobState.DONE
    acker.stop()
