"""Values: every store refuses the same values with the same ConfigurationError (or
PayloadError), before anything is stored, and keeps every value inside the rule exactly.

One test per value class: priorities, seconds (delay, lease, timeout, backoff, limits),
due times, counts (max_attempts, max_running), task and queue names, argument depth.
The rules are stated once, in ``crawlq.payload``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import crawlq
from crawlq import App, JobContext
from crawlq.jobs import JobSpec, Lease
from crawlq.limits import Limits
from crawlq.payload import MAX_COUNT, MAX_DEPTH, MAX_PRIORITY, MAX_SECONDS, MAX_TIMESTAMP
from crawlq.stores.base import Failure, Release, Store

NAN, INF = float("nan"), float("inf")


@pytest.fixture
def app(store: Store) -> App:
    return App(store)


def refused(app: App, call: Any, error: type[Exception] = crawlq.ConfigurationError) -> str:
    """The message of the error ``call()`` raises; nothing may have been stored."""
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, crawlq.CrawlqError)
    assert app.stats() == []
    return str(caught.value)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


# -- priority ---------------------------------------------------------------------------

PRIORITY_RULE = f"priority must be a whole number from {-MAX_PRIORITY} to {MAX_PRIORITY}"


@pytest.mark.parametrize(
    "bad", [MAX_PRIORITY + 1, -MAX_PRIORITY - 1, 2**63, 10**20, NAN, INF, 1.5, "high", True]
)
def test_a_priority_outside_the_rule_is_refused_alike(app: App, bad: object) -> None:
    task = app.task(name="t")(lambda ctx: None)
    message = refused(app, lambda: task.schedule(priority=bad))
    assert message == f"task 't': {PRIORITY_RULE}, not {bad!r}"
    message = refused(app, lambda: app.task(name="u", priority=bad)(lambda ctx: None))
    assert message == f"task 'u': {PRIORITY_RULE}, not {bad!r}"


def test_the_extreme_priorities_are_kept_exactly_and_ordered(app: App, store: Store) -> None:
    task = app.task(name="t")(lambda ctx: None)
    values = [-MAX_PRIORITY, MAX_PRIORITY - 1, 0, MAX_PRIORITY, -MAX_PRIORITY + 1]
    ids = {task.schedule(priority=p).job_id: p for p in values}
    for job_id, priority in ids.items():
        job = app.get_job(job_id)
        assert job is not None and job.priority == priority
    claimed = store.job_claim(
        crawlq.stores.base.ClaimParams(queues=("t",), worker_id="w", limit=len(values))
    )
    assert [j.priority for j in claimed] == sorted(values, reverse=True)


# -- seconds: delay, lease, timeout, backoff, limits ------------------------------------

BAD_SECONDS = [NAN, INF, -INF, -1, MAX_SECONDS * 2, "5", True, None]


@pytest.mark.parametrize("bad", BAD_SECONDS)
@pytest.mark.parametrize("option", ["lease", "timeout", "backoff"])
def test_task_seconds_outside_the_rule_are_refused_at_decoration(
    app: App, option: str, bad: object
) -> None:
    if bad is None and option != "lease":
        pytest.skip(f"{option}=None is the default")
    message = refused(app, lambda: app.task(name="t", **{option: bad})(lambda ctx: None))
    assert message.startswith("task 't': ")
    assert "seconds" in message or "Backoff" in message


@pytest.mark.parametrize("bad", [NAN, INF, -10, -0.5, MAX_SECONDS + 1, "5", True])
def test_a_delay_outside_the_rule_is_refused_alike(app: App, bad: object) -> None:
    task = app.task(name="t")(lambda ctx: None)
    message = refused(app, lambda: task.schedule(delay=bad))
    assert message == (
        "task 't': delay must be a number of seconds >= 0, at most 3155760000 (100 years), "
        f"not {bad!r}"
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda app: app.set_limit("k", max_running=MAX_COUNT + 1),
        lambda app: app.set_limit("k", max_running=0),
        lambda app: app.set_limit("k", min_interval=NAN),
        lambda app: app.set_limit("k", min_interval=MAX_SECONDS * 2),
        lambda app: app.block_key("k", INF),
        lambda app: app.block_key("k", -1),
    ],
)
def test_limits_outside_the_rule_are_refused_alike(app: App, call: Any) -> None:
    refused(app, lambda: call(app))
    assert app.limits("k") == [None]


def test_the_longest_seconds_and_the_largest_counts_are_kept(app: App) -> None:
    task = app.task(name="t", lease=MAX_SECONDS, timeout=MAX_SECONDS, max_attempts=MAX_COUNT)(
        lambda ctx: None
    )
    job_id = task.schedule(delay=MAX_SECONDS).job_id
    job = app.get_job(job_id)
    assert job is not None
    assert (job.lease_seconds, job.timeout, job.max_attempts) == (
        MAX_SECONDS,
        MAX_SECONDS,
        MAX_COUNT,
    )
    assert job.run_at > MAX_SECONDS
    app.set_limit("k", max_running=MAX_COUNT, min_interval=MAX_SECONDS)
    app.block_key("k", MAX_SECONDS)
    [state] = app.limits("k")
    assert state is not None
    assert state.limits == Limits(max_running=MAX_COUNT, min_interval=MAX_SECONDS)


# -- due times --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        NAN,
        -1,
        MAX_TIMESTAMP + 1,
        dt.datetime(1, 1, 1),
        dt.datetime(1969, 12, 31, tzinfo=dt.UTC),
        "2030-01-01",
    ],
)
def test_a_due_time_outside_the_rule_is_refused_alike(app: App, bad: object) -> None:
    task = app.task(name="t")(lambda ctx: None)
    message = refused(app, lambda: task.schedule(at=bad))
    shown = bad.isoformat() if isinstance(bad, dt.datetime) else repr(bad)
    assert message == (
        "task 't': at must be a datetime (or seconds since the epoch) from 1970-01-01 to "
        f"9999-12-31 UTC, not {shown}"
    )


def test_the_extreme_due_times_are_kept(app: App) -> None:
    task = app.task(name="t")(lambda ctx: None)
    last = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
    for at in (0, last, MAX_TIMESTAMP):
        job = app.get_job(task.schedule(at=at).job_id)
        assert job is not None and job.run_at == (0 if at == 0 else MAX_TIMESTAMP)


# -- counts -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, MAX_COUNT + 1, 2**63, 2.0, "3", True])
def test_max_attempts_outside_the_rule_is_refused_alike(app: App, bad: object) -> None:
    message = refused(app, lambda: app.task(name="t", max_attempts=bad)(lambda ctx: None))
    assert message == (
        f"task 't': max_attempts must be a whole number from 1 to {MAX_COUNT}, not {bad!r}"
    )


# -- task and queue names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("a\x00b", "holds a NUL character (\\x00), which PostgreSQL cannot store"),
        ("a\ud800b", "is not valid Unicode text: surrogates not allowed"),
        ("", "must not be empty"),
        (5, "must be a str, not a int"),
    ],
)
def test_a_task_or_queue_name_outside_the_rule_is_refused_alike(
    app: App, bad: object, fragment: str
) -> None:
    if bad != "":  # name="" is no name: the task takes its function's name
        message = refused(app, lambda: app.task(name=bad)(lambda ctx: None))  # type: ignore[arg-type]
        assert message.startswith("task name") and fragment in message
    message = refused(app, lambda: app.task(name="t", queue=bad)(lambda ctx: None))
    assert message.startswith("task 't': queue name") and fragment in message
    message = refused(app, lambda: crawlq.WorkerSettings(queues=(bad,)))  # type: ignore[arg-type]
    assert message.startswith("queue name") and fragment in message


def test_any_other_unicode_name_is_kept(app: App) -> None:
    name = "tâche/ページ 🕷️\t" + "x" * 200
    task = app.task(name=name, queue=name[::-1])(lambda ctx: None)
    job = app.get_job(task.schedule().job_id)
    assert job is not None and (job.task, job.queue) == (name, name[::-1])


# -- arguments --------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_arguments_nested_too_deep_are_refused_alike(app: App, depth: int) -> None:
    @app.task(name="t")
    def t(ctx: JobContext, value: object) -> None: ...

    message = refused(app, lambda: t.schedule(nested(depth)), crawlq.PayloadError)
    assert message == (
        f"argument 'value' of task 't' nests lists or dicts more than {MAX_DEPTH} deep; "
        "flatten it (e.g. a list of rows) or store it elsewhere and pass its location"
    )
    message = refused(app, lambda: t.schedule({"k": nested(depth)}), crawlq.PayloadError)
    assert "more than 100 deep" in message


def test_arguments_as_deep_as_the_rule_allows_are_kept(app: App) -> None:
    @app.task(name="t")
    def t(ctx: JobContext, value: object) -> None: ...

    deepest = nested(MAX_DEPTH)
    job = app.get_job(t.schedule(deepest).job_id)
    assert job is not None and job.args == [deepest]


# -- ids, limits of listings and crawl names --------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda app: app.get_job(2**63), "job id must be a whole number from 1 to "),
        (lambda app: app.cancel(1, 10**20), "job id must be a whole number from 1 to "),
        (lambda app: app.get_crawl(2**63), "crawl id must be a whole number from 1 to "),
        (lambda app: app.pause_crawl(0), "crawl id must be a whole number from 1 to "),
        (lambda app: app.seen_add(2**64, ["u"]), "crawl id must be a whole number from 1 to "),
        (lambda app: app.crawls(limit=2**63), "limit must be a whole number from -"),
        (
            lambda app: app.store.job_list(crawlq.JobFilter(limit=2**63)),
            "limit must be a whole number from -",
        ),
        (
            lambda app: app.store.job_list(crawlq.JobFilter(after_id=-(2**63))),
            "after_id must be a whole number from -",
        ),
        (
            lambda app: app.task(name="t")(lambda ctx: None).schedule(crawl=2**63),
            "crawl=9223372036854775808 is not a crawl id",
        ),
        (lambda app: app.crawl("a\x00b"), "a crawl's name 'a\\x00b' holds a NUL character"),
    ],
)
def test_ids_and_limits_outside_the_rule_are_refused_alike(
    app: App, call: Any, message: str
) -> None:
    assert refused(app, lambda: call(app)).startswith(message)
    assert app.crawls() == []


def test_ids_nobody_has_are_simply_absent(app: App) -> None:
    task = app.task(name="t")(lambda ctx: None)
    assert app.get_job(2**53 - 1) is None and app.cancel(2**53 - 1) == []
    with pytest.raises(crawlq.CrawlNotFound) as caught:
        task.schedule(crawl=2**53 - 1)
    assert str(caught.value) == "no crawl has id 9007199254740991: `crawlq crawls` lists them"
    with pytest.raises(crawlq.CrawlNotFound) as caught:
        app.pause_crawl(2**53 - 1)
    assert str(caught.value) == "no crawl has id 9007199254740991: `crawlq crawls` lists them"


@pytest.mark.parametrize(
    "value", [2**63, -(2**63), 10**30, 2**53 + 1, 1e308, -0.0, "a\x00b", "a\ud800b", "ページ"]
)
def test_any_json_value_of_the_arguments_is_kept_exactly(app: App, value: object) -> None:
    @app.task(name="t")
    def t(ctx: JobContext, v: object) -> None: ...

    job = app.get_job(t.schedule(value, key="k").job_id)
    assert job is not None and job.args == [value] and repr(job.args) == repr([value])


# -- numbers given to the store itself ---------------------------------------------------


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("now", lambda s, x: s.job_schedule([JobSpec(queue="q", task="t")], now=x)),
        ("delay", lambda s, x: s.job_schedule([JobSpec(queue="q", task="t", delay=x)])),
        ("run_at", lambda s, x: s.job_schedule([JobSpec(queue="q", task="t", run_at=x)])),
        (
            "lease_seconds",
            lambda s, x: s.job_schedule([JobSpec(queue="q", task="t", lease_seconds=x)]),
        ),
        ("timeout", lambda s, x: s.job_schedule([JobSpec(queue="q", task="t", timeout=x)])),
        (
            "retry_delay",
            lambda s, x: s.job_fail([Failure(lease=Lease(1, "t"), error="e", retry_delay=x)]),
        ),
        ("delay", lambda s, x: s.job_release([Release(lease=Lease(1, "t"), delay=x)])),
        ("run_at", lambda s, x: s.job_reschedule([1], x)),
        ("retention", lambda s, x: s.job_prune(retention=x)),
        ("within", lambda s, x: s.job_next_gated(["q"], within=x)),
        ("dead_after", lambda s, x: s.worker_reap(dead_after=x)),
        ("ttl", lambda s, x: s.maintenance_acquire("duty", "me", x)),
        ("until", lambda s, x: s.limit_block("k", x)),
        ("now", lambda s, x: s.queue_stats(now=x)),
        ("finished_before", lambda s, x: s.job_list(crawlq.JobFilter(finished_before=x))),
    ],
    ids=[
        "schedule-now",
        "schedule-delay",
        "schedule-run_at",
        "schedule-lease",
        "schedule-timeout",
        "fail",
        "release",
        "reschedule",
        "prune",
        "next_gated",
        "reap",
        "maintenance",
        "block",
        "stats-now",
        "filter",
    ],
)
def test_a_number_that_is_not_finite_is_refused_alike_by_the_store(
    store: Store, name: str, call: Any, bad: float
) -> None:
    """The store gate (crawlq.stores.gate) refuses it before any I/O, with one message
    on every store (Redis raised StoreError for some of these)."""
    with pytest.raises(crawlq.ConfigurationError) as caught:
        call(store, bad)
    assert str(caught.value) == f"{name} must be a finite number, not {bad!r}"
    assert store.job_list(crawlq.JobFilter()) == []
    assert store.limit_get(["k"]) == [None]
