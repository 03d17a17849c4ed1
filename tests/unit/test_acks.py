"""The acker and stores that refuse an outcome for good (issue 14, item 15).

A child the store could never take (PostgreSQL refused its 3 kB key) made the parent's
completion fail, as StoreUnavailable, for ever: the acker retried it until the lease
expired, the body ran 3 times, and the job went dead as ``lease_expired`` with an error
that did not name the cause. A permanent refusal is now not retried: the job goes dead
at once with the store's reason, and the other outcomes of its batch are recorded."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq import App, JobContext, JobState, Worker, WorkerSettings
from crawlq.stores.base import JobFilter
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
