"""``Poller``: hands Scrapyd's free process slots the globally best jobs, leased."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from twisted.internet import reactor as _reactor
from twisted.internet import threads
from twisted.internet.defer import Deferred, DeferredQueue, maybeDeferred, succeed
from twisted.python.failure import Failure
from zope.interface import implementer

from crawlq.exceptions import ConfigurationError, CrawlqError
from crawlq.jobs import Job
from crawlq.scrapyd.config import (
    ScrapydSettings,
    app_for,
    check_plugins,
    queue_name,
    to_message,
    worker_id,
)
from crawlq.scrapyd.queue import SpiderQueue
from crawlq.stores.base import ClaimParams, Release

from scrapyd.interfaces import IPoller  # isort: skip  (after the check in queue.py)
from scrapyd.utils import get_spider_queues  # isort: skip

logger = logging.getLogger("crawlq.scrapyd")
reactor: Any = _reactor  # twisted types the global reactor by its interfaces only

T = TypeVar("T")

JOB_KEY = "_crawlq_job"
"""The message key that carries the leased crawlq job from the poller to the launcher
(which removes it before the spider's arguments are built)."""


def off_reactor(fn: Callable[..., T], *args: Any) -> Deferred[T]:
    """Run a store call in a thread while the reactor runs (a slow or unreachable store
    never freezes Scrapyd's web services), inline otherwise (tests, start-up)."""
    if getattr(reactor, "running", False):
        return threads.deferToThread(fn, *args)
    return maybeDeferred(fn, *args)


@implementer(IPoller)
class Poller:
    """``poller = crawlq.scrapyd.Poller``: one claim per poll, for as many jobs as the
    launcher has free slots, across every project this server has, in the store's claim
    order (priority, then age). A claim that finds nothing, or fails because the store is
    down, is simply tried again at the next poll: the poller never raises, never spins,
    and polling resumes by itself when the store is back. ``next()`` also polls at once,
    so a slot that frees up is refilled without waiting for ``poll_interval``.
    """

    def __init__(self, config: Any) -> None:
        check_plugins(config)
        self.config = config
        self.settings = ScrapydSettings.from_config(config)
        self.app = app_for(self.settings)
        self.worker_id = worker_id(self.settings)
        self.dq: DeferredQueue[dict[str, Any]] = DeferredQueue()
        self._polling = False
        self._again = False
        self._warned = False
        self.queues: dict[str, SpiderQueue] = {}
        self.update_projects()

    def update_projects(self) -> None:
        queues = get_spider_queues(self.config)
        for project, queue in queues.items():
            if not isinstance(queue, SpiderQueue):
                raise ConfigurationError(
                    f"project {project!r} has a {type(queue).__name__}: set spiderqueue = "
                    "crawlq.scrapyd.SpiderQueue in scrapyd.conf"
                )
        self.queues = queues

    def next(self) -> Deferred[dict[str, Any]]:
        """A Deferred fired with the next job for a free slot; polls right away."""
        waiting = self.dq.get()
        if getattr(reactor, "running", False):
            reactor.callLater(0, self.poll)
        return waiting

    def poll(self) -> Deferred[None]:
        """Claim a job for each free slot; never fails (errors are logged)."""
        if self._polling:  # a slot freed during this poll: look again right after it
            self._again = True
            return succeed(None)
        free = len(self.dq.waiting)
        if not free or not self.queues:
            return succeed(None)
        self._polling = True
        queues = [queue_name(project) for project in self.queues]
        claimed = off_reactor(self._claim, queues, free)
        claimed.addCallbacks(self._hand_out, self._claim_failed)
        return claimed.addBoth(self._done)

    def _claim(self, queues: list[str], free: int) -> list[Job]:
        params = ClaimParams(queues=queues, worker_id=self.worker_id, limit=free)
        return self.app.store.job_claim(params)

    def _hand_out(self, jobs: list[Job]) -> None:
        if self._warned:
            logger.warning("the crawlq store is reachable again: polling goes on")
            self._warned = False
        for job in jobs:
            if not self.dq.waiting:  # a slot went away meanwhile: give the job back
                self.app.store.job_release([Release(lease=job.lease)])
                continue
            message: dict[str, Any] = to_message(job)
            message.setdefault("_job", str(job.id))
            message["_project"] = job.queue.partition(":")[2]
            message["_spider"] = message.pop("name")
            message[JOB_KEY] = job
            self.dq.put(message)

    def _claim_failed(self, failure: Failure) -> None:
        expected = isinstance(failure.value, CrawlqError)
        if expected and not self._warned:
            logger.warning("could not claim jobs, will retry at the next poll: %s", failure.value)
            self._warned = True
        elif not expected:
            logger.error("claiming jobs failed: %s", failure.getTraceback())

    def _done(self, result: object) -> None:
        self._polling = False
        if self._again:
            self._again = False
            if getattr(reactor, "running", False):
                reactor.callLater(0, self.poll)
