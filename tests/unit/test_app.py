from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import crawlq
from crawlq import App, ConflictPolicy, JobState, Outcome


def test_task_defaults_and_options(app: App) -> None:
    @app.task
    def plain(ctx: crawlq.JobContext, url: str) -> None: ...

    @app.task(
        name="links",
        queue="fetch",
        max_attempts=5,
        backoff=0.5,
        lease=12,
        timeout=3,
        on_conflict="earliest",
        priority=4,
    )
    def links(ctx: crawlq.JobContext, url: str) -> None: ...

    assert plain.name.endswith("plain") and plain.options.queue == plain.name
    assert plain.options.max_attempts == 3 and plain.options.on_conflict is ConflictPolicy.REPLACE
    assert links.name == "links" and links.options.queue == "fetch"
    assert links.options.backoff == crawlq.Backoff(base=0.5)
    assert (links.options.lease, links.options.timeout, links.options.priority) == (12, 3, 4)
    assert links.options.on_conflict is ConflictPolicy.EARLIEST
    assert app.queues() == tuple(sorted(["fetch", plain.name]))
    assert app.get_task("links") is links


def test_a_calls_spec_is_the_one_the_dataclass_builds(app: App) -> None:
    """``Task.spec`` makes its JobSpec from the task's template by setting slots
    (``jobs.SpecTemplate``): it must equal, field for field, what ``JobSpec(...)`` and
    ``dataclasses.replace`` give, stay frozen, and refuse a field JobSpec does not have."""
    import dataclasses

    from crawlq.jobs import JobSpec, SpecTemplate

    @app.task(name="links", queue="fetch", max_attempts=5, lease=12, timeout=3, priority=4)
    def links(ctx: crawlq.JobContext, url: str, depth: int = 0) -> None: ...

    made = links.with_options(key="k", delay=5, limit_key="a.test").spec("https://a.test/", depth=2)
    built = JobSpec(
        queue="fetch", task="links", args=["https://a.test/"], kwargs={"depth": 2}, key="k",
        priority=4, delay=5.0, max_attempts=5, lease_seconds=12, timeout=3,
        limit_key="a.test",
    )  # fmt: skip
    assert made == built and repr(made) == repr(built) and type(made) is JobSpec
    assert links.spec("u") == dataclasses.replace(links.template, args=["u"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.key = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"JobSpec has no field\(s\) \['url'\]"):
        SpecTemplate(built).make({"url": "x"})


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"retries": 3}, "unknown option(s) ['retries']"),
        ({"on_conflict": "merge"}, "on_conflict='merge'"),
        ({"max_attempts": 0}, "max_attempts must be a whole number from 1 to 2147483647, not 0"),
        ({"lease": 0}, "lease must be a positive number of seconds"),
        ({"timeout": -1}, "timeout must be a positive number of seconds"),
    ],
)
def test_bad_task_options_fail_at_decoration(
    app: App, options: dict[str, object], fragment: str
) -> None:
    with pytest.raises(crawlq.ConfigurationError) as err:
        app.task(name="bad", **options)(lambda ctx: None)
    assert fragment in str(err.value)


def test_duplicate_task_name_is_refused(app: App) -> None:
    app.task(name="x")(lambda ctx: None)
    with pytest.raises(crawlq.ConfigurationError, match="already registered"):
        app.task(name="x")(lambda ctx: None)


def test_unknown_task_lookup_names_known_ones(app: App) -> None:
    app.task(name="known")(lambda ctx: None)
    with pytest.raises(crawlq.TaskNotFound, match="known"):
        app.get_task("nope")


def test_schedule_delay_at_key_priority(app: App) -> None:
    @app.task(name="fetch", priority=2)
    def fetch(ctx: crawlq.JobContext, url: str, depth: int = 0) -> None: ...

    now = app.store.now()
    first = fetch.schedule("https://a.example/", depth=1, delay=60, key="a")
    assert first.outcome is Outcome.CREATED
    job = app.get_job(first.job_id)
    assert job is not None
    assert job.args == ["https://a.example/"] and job.kwargs == {"depth": 1}
    assert job.key == "a" and job.priority == 2 and job.state is JobState.PENDING
    assert now + 59 < job.run_at < now + 62

    at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=6)
    again = fetch.schedule("https://a.example/", at=at, key="a", priority=9)
    assert again == crawlq.ScheduleResult(first.job_id, Outcome.UPDATED)
    job = app.get_job(first.job_id)
    assert job is not None
    assert job.run_at == pytest.approx(at.timestamp()) and job.priority == 9


def test_delay_is_the_celery_spelling(app: App) -> None:
    @app.task(name="echo")
    def echo(ctx: crawlq.JobContext, key: str, delay: int) -> None: ...

    result = echo.delay(key="k", delay=5)  # every keyword goes to the task
    job = app.get_job(result.job_id)
    assert job is not None and job.kwargs == {"key": "k", "delay": 5} and job.key is None


def test_schedule_many_is_one_call_with_results_in_order(app: App) -> None:
    @app.task(name="n")
    def n(ctx: crawlq.JobContext, i: int) -> None: ...

    results = app.schedule_many(n.spec(i, key=str(i % 3)) for i in range(6))
    assert [r.outcome for r in results] == [Outcome.CREATED] * 3 + [Outcome.UPDATED] * 3
    assert results[0].job_id == results[3].job_id
    assert n.schedule_many([[10], [11]])[1].outcome is Outcome.CREATED


def test_both_delay_and_at_is_refused(app: App) -> None:
    task = app.task(name="t")(lambda ctx: None)
    with pytest.raises(crawlq.ConfigurationError, match="both delay= and at="):
        task.schedule(delay=1, at=dt.datetime.now(dt.UTC))


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (
            {"delay": float("nan")},
            "task 't': delay must be a number of seconds >= 0, at most 3155760000 "
            "(100 years), not nan",
        ),
        ({"delay": float("inf")}, "not inf"),
        (
            {"delay": "5"},
            "delay must be a number of seconds >= 0, at most 3155760000 (100 years), not '5'",
        ),
        ({"delay": True}, "not True"),
        (
            {"at": float("-inf")},
            "at must be a datetime (or seconds since the epoch) from 1970-01-01 to "
            "9999-12-31 UTC, not -inf",
        ),
        ({"key": "a\x00b"}, "holds a NUL character"),
        ({"key": "a\ud800b"}, "key is not valid Unicode text"),
        ({"key": 5}, "key must be a str, not a int"),
        ({"limit_key": "host\x00"}, "limit_key 'host\\x00' holds a NUL character"),
        ({"seen": "https://x.test/\udfff", "crawl": 1}, "seen is not valid Unicode text"),
    ],
)
def test_bad_times_and_keys_are_refused_before_anything_is_stored(
    app: App, options: dict[str, object], fragment: str
) -> None:
    task = app.task(name="t")(lambda ctx: None)
    with pytest.raises(crawlq.ConfigurationError) as caught:
        task.schedule(**options)  # type: ignore[arg-type]
    assert fragment in str(caught.value)
    assert app.stats() == []


def test_times_and_keys_every_store_keeps_are_accepted(app: App) -> None:
    task = app.task(name="t")(lambda ctx: None)
    assert task.schedule(delay=0).outcome is Outcome.CREATED
    assert task.schedule(delay=2, key="https://x.test/é").outcome is Outcome.CREATED
    assert task.schedule(at=dt.datetime.now(dt.UTC), key="k").outcome is Outcome.CREATED
    assert task.schedule(at=1.5e9, key="k").outcome is Outcome.UPDATED


def test_non_json_argument_is_refused_before_anything_is_stored(app: App) -> None:
    @app.task(name="t")
    def t(ctx: crawlq.JobContext, when: object) -> None: ...

    with pytest.raises(crawlq.PayloadError, match="argument 'when' of task 't'"):
        t.schedule(dt.datetime.now())
    assert app.stats() == []


def test_payload_limit_is_configurable(tmp_path: Path) -> None:
    small = App(f"sqlite:///{tmp_path / 'j.db'}", max_payload_bytes=100)
    task = small.task(name="t")(lambda ctx, body: None)
    with pytest.raises(crawlq.PayloadError, match="over the limit of 100"):
        task.schedule("x" * 200)
    small.close()


def test_store_is_opened_lazily_and_can_be_repointed(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'first.db'}")
    app.use_store(f"sqlite:///{tmp_path / 'second.db'}")
    app.task(name="t")(lambda ctx: None).schedule()
    assert not (tmp_path / "first.db").exists() and (tmp_path / "second.db").exists()
    with pytest.raises(crawlq.ConfigurationError, match="already open"):
        app.use_store("sqlite:///other.db")
    app.close()


def test_open_without_create_refuses_a_missing_file_and_keeps_an_existing_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    app = App(f"sqlite:///{path}")
    with pytest.raises(crawlq.ConfigurationError, match=f"no store at {path}: the file does"):
        app.open(create=False)
    assert list(tmp_path.iterdir()) == []
    app.task(name="t")(lambda ctx: None).schedule()  # opens, creating the file
    app.close()
    again = App(f"sqlite:///{path}")
    assert [s.queue for s in again.open(create=False).queue_stats()] == ["t"]
    again.close()


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("jobs.db", "no scheme"),
        ("mysql://localhost/db", "no store for scheme 'mysql'"),
        ("sqlite://host/jobs.db", "three slashes"),
        ("", "the store URL is empty"),
        ("sqlite:jobs.db", "lacks the // after sqlite: write sqlite:///relative/path.db or"),
        ("sqlite:/var/jobs.db", "sqlite:////absolute/path.db"),
        ("sqlite:///", "names no file"),
        ("redis:localhost", "lacks the // after redis: write redis://host:6379/0"),
        ("postgresql:crawl", "write postgresql://user@host:5432/dbname"),
        ("sqlite:///:memory:", "not an in-memory database"),
        ("sqlite:///x.db?synchronous=off", "synchronous='off'"),
        ("sqlite:///x.db?busy=1", "unknown SQLite store option"),
        ("sqlite:///x.db?busy_timeout=soon", "not a number"),
    ],
)
def test_bad_store_urls_say_how_to_fix_them(url: str, fragment: str) -> None:
    with pytest.raises(crawlq.ConfigurationError) as err:
        crawlq.open_store(url)
    assert fragment in str(err.value)


def test_arguments_the_function_cannot_take_are_refused_at_schedule_time(app: App) -> None:
    @app.task(name="fetch")
    def fetch(ctx: crawlq.JobContext, url: str, depth: int = 0) -> None: ...

    with pytest.raises(
        crawlq.PayloadError, match=r"task 'fetch' cannot be called.*ctx, url, depth"
    ):
        fetch.schedule("a", 1, 2)
    with pytest.raises(crawlq.PayloadError, match="unexpected keyword argument 'proxy'"):
        fetch.schedule("a", proxy="p")
    with pytest.raises(crawlq.PayloadError, match="missing a required argument"):
        fetch.schedule()
    assert app.stats() == []


def _sig_plain(ctx, a, b=1): ...  # type: ignore[no-untyped-def]
def _sig_none(ctx): ...  # type: ignore[no-untyped-def]
def _sig_all_defaults(ctx=None, a=1): ...  # type: ignore[no-untyped-def]
def _sig_varargs(ctx, a, *rest): ...  # type: ignore[no-untyped-def]
def _sig_positional_only(ctx, a, /, b=2): ...  # type: ignore[no-untyped-def]
def _sig_keyword_only(ctx, a, *, k): ...  # type: ignore[no-untyped-def]
def _sig_varkw(ctx, a=0, **kw): ...  # type: ignore[no-untyped-def]
def _sig_empty(): ...  # type: ignore[no-untyped-def]


@pytest.mark.parametrize(
    "fn",
    [
        _sig_plain,
        _sig_none,
        _sig_all_defaults,
        _sig_varargs,
        _sig_positional_only,
        _sig_keyword_only,
        _sig_varkw,
        _sig_empty,
    ],
)
def test_arguments_are_checked_as_inspect_binds_them(app: App, fn: Any) -> None:
    """check_call's shortcut (plain positional parameters, no keywords) refuses exactly
    what ``inspect.Signature.bind`` refuses."""
    import inspect

    task = app.task(name=fn.__name__)(fn)
    for args in [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)]:
        for kwargs in [{}, {"b": 5}, {"k": 1}]:
            try:
                inspect.signature(fn).bind(None, *args, **kwargs)
                binds = True
            except TypeError:
                binds = False
            try:
                task.check_call(args, kwargs)
                accepted = True
            except crawlq.PayloadError:
                accepted = False
            assert accepted == binds, (fn.__name__, args, kwargs)
