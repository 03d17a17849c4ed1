"""Shared pieces of the store conformance suite.

- ``STORE_FACTORIES``: every store the suite runs against. The ``store`` fixture in
  ``conftest.py`` and the model test in ``test_model.py`` are both parametrized over it,
  so a new store joins the whole suite by adding one entry here.
- ``spec(...)``: a ``JobSpec`` with defaults (queue "q", task "t").
- Short-hands for the calls most tests make, always with an explicit ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from crawlq.crawls import CrawlInfo, CrawlSpec
from crawlq.jobs import (
    Job,
    JobSpec,
    JobState,
    Lease,
    Outcome,
    QueueStats,
    ScheduleResult,
    WorkerInfo,
)
from crawlq.limits import KeyLimit
from crawlq.stores import open_store
from crawlq.stores.base import ClaimParams, Completion, Failure, JobFilter, Release, Store
from crawlq.types import JobId, Timestamp

StoreFactory = Callable[[Path], Store]
"""Opens a store whose data lives under (or is named after) a fresh directory.

Calling a factory twice with the same directory must open a second, independent Store
object on the *same* data: tests use that as "another process".
"""


def _open_sqlite(directory: Path) -> Store:
    return open_store("sqlite:///" + str(directory / "jobs.db"))


def _open_redis(directory: Path) -> Store:
    """The session's private redis-server, with a key prefix of this test's own."""
    from tests import servers

    prefix = servers.isolated_name(directory, "t")
    return open_store(f"{servers.redis().url}?prefix={prefix}")


def _open_postgres(directory: Path) -> Store:
    """The session's private PostgreSQL, with a schema of this test's own."""
    from tests import servers

    schema = servers.isolated_name(directory, "t_")
    return open_store(f"{servers.postgres().url}?schema={schema}")


STORE_FACTORIES: dict[str, StoreFactory] = {
    "sqlite": _open_sqlite,
    "postgres": _open_postgres,
    "redis": _open_redis,
}
"""Store name -> factory. A store that needs a server (PostgreSQL, Redis) adds its entry
here, deriving a database, schema or key prefix from the directory so that tests stay
isolated, and a session fixture of its own in conftest.py that skips on a laptop and fails
in CI when the server is missing."""

T0: Timestamp = 1_000_000.0
"""The instant most tests start at. Every call passes ``now`` explicitly."""


def spec(queue: str = "q", task: str = "t", **fields: Any) -> JobSpec:
    """A JobSpec with test defaults: queue "q", task "t"."""
    return JobSpec(queue=queue, task=task, **fields)


def schedule(store: Store, *specs: JobSpec, now: Timestamp = T0) -> list[ScheduleResult]:
    return store.job_schedule(list(specs), now=now)


def add(store: Store, now: Timestamp = T0, **fields: Any) -> JobId:
    """Schedule one new job and return its id (it must be created, not merged)."""
    [result] = store.job_schedule([spec(**fields)], now=now)
    assert result.outcome is Outcome.CREATED
    return result.job_id


def claim(
    store: Store,
    queues: Sequence[str] = ("q",),
    *,
    limit: int = 1,
    now: Timestamp = T0,
    worker: str = "w1",
) -> list[Job]:
    return store.job_claim(ClaimParams(queues=queues, worker_id=worker, limit=limit, now=now))


def claim_one(
    store: Store, queues: Sequence[str] = ("q",), *, now: Timestamp = T0, worker: str = "w1"
) -> Job:
    """Claim exactly one job (fails the test if none or more comes back)."""
    jobs = claim(store, queues, limit=1, now=now, worker=worker)
    assert len(jobs) == 1, jobs
    return jobs[0]


def get(store: Store, job_id: JobId) -> Job:
    job = store.job_get(job_id)
    assert job is not None, f"job {job_id} does not exist"
    return job


def ids(jobs: Iterable[Job]) -> list[JobId]:
    return [job.id for job in jobs]


def all_jobs(store: Store) -> list[Job]:
    return store.job_list(JobFilter())


def complete(
    store: Store,
    lease: Lease,
    *,
    now: Timestamp = T0,
    result: Any = None,
    children: Sequence[JobSpec] = (),
) -> bool:
    [ok] = store.job_complete([Completion(lease=lease, result=result, children=children)], now=now)
    return ok


def fail(
    store: Store,
    lease: Lease,
    *,
    now: Timestamp = T0,
    retry_delay: float | None = None,
    error: str = "boom",
    reason: str = "error",
) -> bool:
    failure = Failure(lease=lease, error=error, retry_delay=retry_delay, reason=reason)
    [ok] = store.job_fail([failure], now=now)
    return ok


def release(store: Store, lease: Lease, *, now: Timestamp = T0, delay: float = 0.0) -> bool:
    [ok] = store.job_release([Release(lease=lease, delay=delay)], now=now)
    return ok


def make_dead(store: Store, *, now: Timestamp = T0, **fields: Any) -> JobId:
    """Schedule a job alone in its queue, claim it and fail it for good."""
    job_id = add(store, now=now, **fields)
    job = claim_one(store, [fields.get("queue", "q")], now=now)
    assert job.id == job_id
    assert fail(store, job.lease, now=now, error="gave up")
    assert get(store, job_id).state is JobState.DEAD
    return job_id


def stats_by_queue(store: Store, now: Timestamp) -> dict[str, QueueStats]:
    return {s.queue: s for s in store.queue_stats(now=now)}


def counts(store: Store, queue: str = "q", *, now: Timestamp = T0) -> tuple[int, ...]:
    """(due, scheduled, running, done, dead, cancelled) of one queue; zeros if unknown."""
    s = stats_by_queue(store, now).get(queue)
    if s is None:
        return (0, 0, 0, 0, 0, 0)
    return (s.due, s.scheduled, s.running, s.done, s.dead, s.cancelled)


# -- crawls, seen sets and limits (issue 6) ------------------------------------------------


def new_crawl(
    store: Store,
    *start: JobSpec,
    name: str = "c",
    now: Timestamp = T0,
    **fields: Any,
) -> CrawlInfo:
    """Create a crawl named ``name`` with ``start`` jobs (``fields`` go to CrawlSpec)."""
    return store.crawl_create(CrawlSpec(name=name, **fields), list(start), now=now)


def crawl_of(store: Store, crawl_id: int) -> CrawlInfo:
    info = store.crawl_get(crawl_id)
    assert info is not None, f"crawl {crawl_id} does not exist"
    return info


def crawl_counts(store: Store, crawl_id: int) -> tuple[int, int, int, int, int]:
    """(pending, running, done, dead, cancelled) of one crawl."""
    c = crawl_of(store, crawl_id)
    return (c.pending, c.running, c.done, c.dead, c.cancelled)


def key_limit(store: Store, key: str, *, now: Timestamp = T0) -> KeyLimit:
    [record] = store.limit_get([key], now=now)
    assert record is not None, f"limit key {key!r} has no record"
    return record


def worker(worker_id: str = "w1") -> WorkerInfo:
    """A worker as it registers (for the worker_reap paths)."""
    return WorkerInfo(
        id=worker_id, host="box", pid=1, queues=("q",), runtime="thread", concurrency=4
    )
