"""The one exception hierarchy of crawlq.

A subclass's docstring is its default message::

    CrawlqError
    ├── ConfigurationError      bad settings, an unknown store URL, a missing driver
    ├── PayloadError            arguments that are not JSON, or too large
    ├── TaskNotFound            a job names a task this app does not know
    ├── CrawlNotFound           no crawl has this id
    ├── CrawlClosed             the crawl finished or was cancelled: it takes no jobs
    ├── AddressRefused          the crawler refuses to connect to this host or address
    ├── JobNotFound             no job has this id (or it was pruned)
    ├── JobEnded                the awaited job ended without a result (``job``):
    │   ├── JobFailed           it is dead: its last error and dead reason
    │   └── JobCancelled        it was cancelled
    ├── WaitTimeout             the awaited job did not finish in time (a TimeoutError)
    └── StoreError              a store failed an operation for good: the same call
        │                       would fail the same way (unless StoreUnavailable)
        └── StoreUnavailable    transient: the store cannot be reached, is restarting,
                                stayed locked or is full; the same call may work later

Task control flow is kept apart from failures: ``Retry``, ``Discard`` and ``Snooze``
derive from ``TaskControl``, not from ``CrawlqError``; a task raises them to tell the
worker what to do with the current attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawlq.jobs import Job


class CrawlqError(Exception):
    """A crawlq error."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip())


class ConfigurationError(CrawlqError):
    """The configuration is not valid."""


class PayloadError(CrawlqError, TypeError):
    """Task arguments must be JSON values (None, bool, int, float, str, list, dict)."""


class TaskNotFound(CrawlqError):
    """The job names a task that is not registered on this app."""


class CrawlNotFound(CrawlqError):
    """No crawl has this id."""


class CrawlClosed(CrawlqError):
    """The crawl has finished or was cancelled: it accepts no more jobs."""


class CrawlOpen(CrawlqError):
    """The crawl is still running or paused: deleting it needs ``force``."""


class AddressRefused(CrawlqError):
    """The host is, or resolves to, an address the crawler must not connect to."""


class JobNotFound(CrawlqError, LookupError):
    """No job has this id (done and cancelled jobs are pruned after the retention)."""


class JobEnded(CrawlqError):
    """The awaited job ended without a result. ``job`` is the job as the store holds it."""

    def __init__(self, job: Job, message: str) -> None:
        super().__init__(message)
        self.job = job

    def __reduce__(self) -> tuple[type[JobEnded], tuple[Job]]:
        """Pickled as the job it is about (JobFailed and JobCancelled take only it)."""
        return type(self), (self.job,)


class JobFailed(JobEnded):
    """The awaited job is dead. ``error`` is its last error (the traceback of its last
    attempt), ``reason`` why it died (``max_attempts``, ``discarded``, ``timeout``,
    ``lease_expired``, ``bad_result`` ...)."""

    def __init__(self, job: Job) -> None:
        self.error = job.last_error or ""
        self.reason = job.dead_reason or "unknown"
        last = self.error.strip().splitlines()[-1:] or ["no error recorded"]
        super().__init__(
            job,
            f"job {job.id} ({job.task}) is dead ({self.reason}) after {job.attempts} "
            f"attempt(s): {last[0]}",
        )


class JobCancelled(JobEnded):
    """The awaited job was cancelled before it finished."""

    def __init__(self, job: Job) -> None:
        super().__init__(job, f"job {job.id} ({job.task}) was cancelled")


class WaitTimeout(CrawlqError, TimeoutError):
    """The awaited job did not finish in time. ``job`` is the job as it was then."""

    def __init__(self, job: Job, timeout: float) -> None:
        super().__init__(
            f"job {job.id} ({job.task}) did not finish within {timeout:g} s: it is "
            f"{job.state.value}"
        )
        self.job = job
        self.timeout = timeout

    def __reduce__(self) -> tuple[type[WaitTimeout], tuple[Job, float]]:
        return type(self), (self.job, self.timeout)


class StoreError(CrawlqError):
    """The store failed to carry out an operation."""


class StoreUnavailable(StoreError):
    """The store cannot be reached, or stayed busy for too long."""


class TaskControl(Exception):
    """Raised by a task to steer what happens to its current attempt."""


class Retry(TaskControl):
    """Fail this attempt and run the job again after ``delay`` seconds.

    The attempt counts towards ``max_attempts``; with none left the job goes to the
    dead-letter queue. ``delay=None`` uses the task's backoff policy.
    """

    def __init__(self, delay: float | None = None, reason: str = "retry requested") -> None:
        super().__init__(reason)
        self.delay = None if delay is None else _seconds("Retry delay", delay)
        self.reason = reason


class Discard(TaskControl):
    """Send the job straight to the dead-letter queue, with no further attempts."""

    def __init__(self, reason: str = "discarded by the task") -> None:
        super().__init__(reason)
        self.reason = reason


class Snooze(TaskControl):
    """Put the job back for ``delay`` seconds; this attempt is not counted."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = _seconds("Snooze delay", delay)
        super().__init__(f"snoozed for {delay} s")


def _seconds(name: str, value: object) -> float:
    """``value`` by the rule of every duration (``crawlq.payload.check_seconds``): a task
    that raises ``Retry`` or ``Snooze`` with NaN, infinity or a negative delay fails with
    a ConfigurationError saying so."""
    from crawlq.payload import check_seconds  # crawlq.payload imports this module

    return check_seconds(name, value, zero=True)
