"""Schedule options: declared once (``crawlq.specs.ScheduleOptions``), given through
``with_options`` or, as before, as keywords the task function does not take."""

from __future__ import annotations

import pytest

import crawlq
from crawlq import App, JobContext, Worker, WorkerSettings
from crawlq.jobs import ConflictPolicy, JobSpec, Outcome
from crawlq.specs import OPTION_NAMES, ScheduleOptions
from crawlq.tasks import TaskOptions


def test_with_options_sets_the_jobs_options_and_every_keyword_goes_to_the_task(
    app: App,
) -> None:
    @app.task(name="echo", priority=2, max_attempts=7, lease=45.0, timeout=9.0)
    def echo(ctx: JobContext, key: str, delay: int = 0) -> None: ...

    bound = echo.with_options(key="unique", delay=60).with_options(priority=5)
    first = bound.schedule("k", delay=1)
    assert first.outcome is Outcome.CREATED
    assert bound.schedule("k2").outcome is Outcome.UPDATED  # the same unique key
    job = app.get_job(first.job_id)
    assert job is not None
    assert (job.key, job.priority, job.args, job.kwargs) == ("unique", 5, ["k2"], {})
    assert (job.max_attempts, job.lease_seconds, job.timeout) == (7, 45.0, 9.0)
    assert job.run_at == pytest.approx(app.store.now() + 60, abs=5)


def test_a_keyword_the_function_takes_goes_to_it_others_are_options(app: App) -> None:
    @app.task(name="echo")
    def echo(ctx: JobContext, key: str, **rest: int) -> None: ...

    result = echo.schedule(key="k", priority=3)  # **rest: mypy checks no keyword
    job = app.get_job(result.job_id)
    assert job is not None and job.key is None and job.kwargs == {"key": "k"}
    assert job.priority == 3  # priority is no parameter of echo: the option


def test_a_spec_starts_from_the_tasks_template(app: App) -> None:
    @app.task(name="t", queue="q", priority=4, max_attempts=2, lease=12.0, on_conflict="keep")
    def t(ctx: JobContext, n: int) -> None: ...

    assert t.template == JobSpec(
        queue="q",
        task="t",
        priority=4,
        max_attempts=2,
        lease_seconds=12.0,
        on_conflict=ConflictPolicy.KEEP,
    )
    spec = t.with_options(priority=1, delay=2.0, limit_key="h.example").spec(3)
    assert (spec.args, spec.priority, spec.delay, spec.limit_key) == ([3], 1, 2.0, "h.example")
    assert (spec.queue, spec.max_attempts, spec.lease_seconds) == ("q", 2, 12.0)


def test_every_task_option_that_is_a_job_field_reaches_the_template() -> None:
    shared = set(TaskOptions.__dataclass_fields__) & set(JobSpec.__dataclass_fields__)
    assert shared == {"queue", "priority", "max_attempts", "timeout", "on_conflict"}
    assert OPTION_NAMES == set(ScheduleOptions.__annotations__)


def test_unknown_options_are_refused_with_the_known_ones(app: App) -> None:
    t = app.task(name="t")(lambda ctx: None)
    with pytest.raises(crawlq.ConfigurationError, match=r"unknown schedule option.*'delya'"):
        t.with_options(delya=3).spec()  # type: ignore[call-arg]


def test_ctx_schedule_takes_a_bound_task_and_joins_the_jobs_crawl(app: App) -> None:
    seen: list[str] = []

    @app.task(name="child", queue="q")
    def child(ctx: JobContext, url: str) -> None:
        seen.append(url)

    @app.task(name="parent", queue="q")
    def parent(ctx: JobContext) -> None:
        ctx.schedule(child.with_options(seen="https://a.example/", crawl=999), "a")
        ctx.schedule(child.with_options(seen="https://a.example/"), "again")  # seen: dropped
        ctx.schedule("child", "b", seen="https://b.example/")

    crawl = app.crawl("c", [parent.spec()])
    Worker(app, WorkerSettings(burst=True, poll_timeout=0.05, runtime="thread")).run()
    assert sorted(seen) == ["a", "b"]
    info = app.get_crawl(crawl.id)
    assert (info.done, info.seen) == (3, 2)


def test_a_spec_goes_through_json_whole(app: App) -> None:
    """How a process runtime's child sends its follow-ups back (``spec_to_json``)."""
    import json

    from crawlq.jobs import spec_from_json, spec_to_json

    @app.task(name="t", on_conflict="earliest", timeout=3.0)
    def t(ctx: JobContext, url: str) -> None: ...

    spec = t.with_options(crawl=4, seen="https://a.example/", key="k", delay=1.5).spec("u")
    assert spec_from_json(json.loads(json.dumps(spec_to_json(spec)))) == spec
    assert spec_from_json({"queue": "q", "task": "t"}) == JobSpec(queue="q", task="t")
