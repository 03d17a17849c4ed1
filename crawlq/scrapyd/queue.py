"""``SpiderQueue``: a Scrapyd project's pending jobs, as crawlq jobs in one store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from zope.interface import implementer

from crawlq.exceptions import StoreError, StoreUnavailable
from crawlq.jobs import Job, JobState
from crawlq.scrapyd.config import (
    ScrapydSettings,
    app_for,
    queue_name,
    to_message,
    to_spec,
    worker_id,
)
from crawlq.stores.base import ClaimParams, Completion, JobFilter
from crawlq.types import JSONValue

try:
    from scrapyd.interfaces import ISpiderQueue
except ImportError as exc:  # pragma: no cover - the extra is missing
    from crawlq.exceptions import ConfigurationError

    raise ConfigurationError(
        f"crawlq.scrapyd needs Scrapyd ({exc}): pip install 'crawlq[scrapyd]'"
    ) from exc

PAGE = 1000
"""Jobs read per round trip when listing a queue."""

Message = dict[str, JSONValue]


@implementer(ISpiderQueue)
class SpiderQueue:
    """The pending jobs of one Scrapyd project (``spiderqueue = crawlq.scrapyd.SpiderQueue``).

    Every call is one or a few round trips to the store, synchronous as Scrapyd's web
    services need, and bounded by the store's timeouts. ``count()`` counts only the jobs
    that can be claimed now (not those waiting for a retry's backoff), so a poller that
    pops while ``count()`` is positive never spins.
    """

    def __init__(self, config: Any, project: str) -> None:
        self.project = project
        self.settings = ScrapydSettings.from_config(config)
        self.app = app_for(self.settings)
        self.queue = queue_name(project)

    def add(self, name: str, priority: float = 0.0, **spider_args: Any) -> None:
        """Schedule a job: ``spider_args`` holds ``_job``, ``_version``, ``settings`` and the
        spider's own arguments. Refused with a clear error while the store is down."""
        spec = to_spec(self.settings, self.app, self.project, name, priority, spider_args)
        try:
            self.app.schedule_many([spec])
        except StoreUnavailable as exc:
            raise StoreUnavailable(
                f"the crawlq store cannot be reached, so job {spider_args.get('_job')!r} was "
                f"not scheduled; schedule it again once the store is back ({exc})"
            ) from exc
        except StoreError as exc:  # permanent: a wrong store URL, nothing listening there
            raise StoreError(
                f"the crawlq store refused job {spider_args.get('_job')!r}, so it was not "
                f"scheduled: {exc}"
            ) from exc

    def pop(self) -> Message | None:
        """Take the best pending job off the queue for good (Scrapyd's own poller calls
        this). ``crawlq.scrapyd.Poller`` does not: it leases jobs instead, so that a
        server that dies loses none."""
        store = self.app.store
        jobs = store.job_claim(
            ClaimParams(queues=[self.queue], worker_id=worker_id(self.settings), limit=1)
        )
        if not jobs:
            return None
        store.job_complete([Completion(lease=jobs[0].lease, result="popped")])
        return to_message(jobs[0])

    def count(self) -> int:
        """Jobs that can be claimed now."""
        for stats in self.app.store.queue_stats():
            if stats.queue == self.queue:
                return stats.due
        return 0

    def list(self) -> list[Message]:
        """Every pending job, in the order they will run (priority, then age)."""
        jobs = sorted(self._jobs(JobState.PENDING), key=lambda j: (-j.priority, j.run_at, j.id))
        return [to_message(job) for job in jobs]

    def remove(self, func: Callable[[Message], bool]) -> int:
        """Cancel the jobs for which ``func(message)`` is true, on every server: pending
        ones never run; a running one is stopped by the server that runs it (its lease
        renewal is refused). Returns how many were cancelled."""
        chosen = [
            job.id
            for state in (JobState.PENDING, JobState.RUNNING)
            for job in self._jobs(state)
            if func(to_message(job))
        ]
        return len(self.app.store.job_cancel(chosen)) if chosen else 0

    def clear(self) -> None:
        """Cancel every pending job of the project (running ones go on)."""
        pending = [job.id for job in self._jobs(JobState.PENDING)]
        if pending:
            self.app.store.job_cancel(pending)

    def _jobs(self, state: JobState) -> Iterator[Job]:
        after = 0
        while True:
            page = self.app.store.job_list(
                JobFilter(queue=self.queue, state=state, after_id=after, limit=PAGE)
            )
            yield from page
            if len(page) < PAGE:
                return
            after = page[-1].id
