"""on_failure / on_dead hooks, per task and per app, run by the worker."""

from __future__ import annotations

import logging

import pytest

from crawlq import App, JobContext, Worker, WorkerSettings
from crawlq.exceptions import ConfigurationError
from crawlq.hooks import FailureEvent


def drain(app: App) -> None:
    Worker(app, WorkerSettings(burst=True, poll_timeout=0.05, runtime="thread")).run()


def test_hooks_see_every_failed_attempt_and_the_death(app: App) -> None:
    seen: list[tuple[str, int, int, bool]] = []

    def note(where: str):  # type: ignore[no-untyped-def]
        return lambda e: seen.append((where, e.job.id, e.job.attempts, e.dead))

    @app.task(max_attempts=2, backoff=0.0, on_failure=note("task"), on_dead=note("task-dead"))
    def boom(ctx: JobContext) -> None:
        raise ValueError("bad page")

    @app.task
    def fine(ctx: JobContext) -> None:
        pass

    app.on_failure(note("app"))
    app.on_dead(note("app-dead"))
    job_id = boom.delay().job_id
    fine.delay()
    drain(app)
    assert seen == [
        ("task", job_id, 1, False),
        ("app", job_id, 1, False),
        ("task", job_id, 2, True),
        ("app", job_id, 2, True),
        ("task-dead", job_id, 2, True),
        ("app-dead", job_id, 2, True),
    ]


def test_the_event_carries_the_exception_and_a_raising_hook_changes_nothing(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[FailureEvent] = []

    @app.on_dead
    def broken(event: FailureEvent) -> None:
        raise RuntimeError("the webhook is down")

    app.on_dead(events.append)

    @app.task(max_attempts=1)
    def boom(ctx: JobContext, url: str) -> None:
        raise KeyError(url)

    job_id = boom.delay("https://x.example/").job_id
    with caplog.at_level(logging.ERROR, logger="crawlq.worker"):
        drain(app)
    [event] = events
    assert event.exception == "KeyError: 'https://x.example/'"
    assert "Traceback" in event.error and event.reason == "max_attempts"
    assert event.job.args == ["https://x.example/"]
    assert app.get_job(job_id).state == "dead"  # type: ignore[union-attr]
    assert any("failure hook (broken) raised" in r.getMessage() for r in caplog.records)


def test_a_hook_must_be_callable(app: App) -> None:
    with pytest.raises(ConfigurationError, match="on_dead"):

        @app.task(on_dead="https://hooks.example/")
        def t(ctx: JobContext) -> None:
            pass

    with pytest.raises(ConfigurationError, match="on_failure"):
        app.on_failure(42)  # type: ignore[arg-type]
