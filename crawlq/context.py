"""The job context: the first argument of every task."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec, overload

from crawlq.app import App
from crawlq.crawls import check_seen_has_crawl
from crawlq.exceptions import ConfigurationError
from crawlq.jobs import Job, JobSpec
from crawlq.specs import OPTION_NAMES, ScheduleOptions, split_options
from crawlq.stores.base import CrawlRecord
from crawlq.tasks import BoundTask, Task

P = ParamSpec("P")

_FOLLOW_UP_OPTIONS = OPTION_NAMES - {"crawl"}
"""A follow-up joins its job's crawl: ``crawl=`` is an argument of the task."""


@dataclass(kw_only=True)
class JobContext:
    """What a running task knows about its job, and how it schedules follow-ups.

    ``ctx.schedule(...)`` does not write at once: the jobs it names are scheduled in the
    same transaction that records this job as done. A job that fails, crashes or loses
    its lease schedules nothing, and a retried job does not add its children twice.
    ``ctx.keep_result(...)`` likewise keeps a record in the crawl's results in the
    transaction that ends this attempt (done or failed), if the lease is still valid.
    """

    job: Job
    app: App
    worker_id: str
    log: logging.LoggerAdapter[logging.Logger]
    children: list[JobSpec] = field(default_factory=list)
    records: list[CrawlRecord] = field(default_factory=list)

    @property
    def job_id(self) -> int:
        return self.job.id

    @property
    def attempt(self) -> int:
        """This attempt's number, from 1."""
        return self.job.attempts

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def key(self) -> str | None:
        return self.job.key

    @property
    def crawl_id(self) -> int | None:
        """The crawl this job belongs to, if any."""
        return self.job.crawl_id

    @property
    def limit_key(self) -> str | None:
        return self.job.limit_key

    @overload
    def schedule(
        self, task: Task[P, Any] | BoundTask[P, Any], /, *args: P.args, **kwargs: P.kwargs
    ) -> JobSpec: ...

    @overload
    def schedule(self, task: str, /, *args: Any, **kwargs: Any) -> JobSpec: ...

    def schedule(
        self, task: Task[Any, Any] | BoundTask[Any, Any] | str, /, *args: Any, **kwargs: Any
    ) -> JobSpec:
        """Schedule a follow-up job when this one completes; returns its spec.

        The job joins this job's crawl. Options go through ``with_options``:
        ``ctx.schedule(page.with_options(seen=link, limit_key=host), link)``; ``seen`` (a
        URL or key) drops it at completion if the crawl has already seen it,
        ``limit_key`` (a host) submits it to that key's limits. With a task (or its
        name), keywords named like options that it has no parameter for are still taken
        as options.
        """
        arguments: Mapping[str, Any] = kwargs
        if isinstance(task, BoundTask):
            target, options = task.task, task.options
        else:
            target = self.app.get_task(task) if isinstance(task, str) else task
            arguments, options = split_options(kwargs, target.params, _FOLLOW_UP_OPTIONS)
        joined: ScheduleOptions = {**options, "crawl": self.job.crawl_id}
        spec = target.spec_for(args, arguments, **joined)
        check_seen_has_crawl([spec])
        self.children.append(spec)
        return spec

    def keep_result(self, key: bytes, record: str, *, crawl: int | None = None) -> None:
        """Keep ``record`` under ``key`` (16 bytes, e.g. ``crawlq.fingerprint(url)``) in
        the results of ``crawl`` (default: this job's crawl) when this attempt ends, in
        the same transaction as its completion or failure and only if its lease is still
        valid: as ``Store.result_add`` keeps it (a key's first record wins). The worker
        writes it as it records the attempt's end, so it is kept once the job is."""
        crawl_id = crawl if crawl is not None else self.job.crawl_id
        if crawl_id is None:
            raise ConfigurationError(
                "ctx.keep_result() needs a crawl: this job has none; pass crawl=<id>"
            )
        self.records.append((crawl_id, key, record))

    def block(self, seconds: float, *, key: str | None = None) -> None:
        """Start no job of ``key`` (default: this job's limit key) for ``seconds``, on every
        worker, at once (not at completion): after a 429 or 503 with Retry-After."""
        limit_key = key if key is not None else self.job.limit_key
        if limit_key is None:
            raise ConfigurationError(
                "ctx.block() needs a limit key: this job has none; pass key='example.com'"
            )
        self.app.block_key(limit_key, seconds)
