"""Failure hooks: ``on_failure`` and ``on_dead``, per task and per app, to alert on them.

A worker calls them in the thread that ran the job, right after the attempt failed and
before the store records it: keep them quick (post to a webhook with a short timeout, or
hand the event to a queue). A hook that raises is logged and ignored; it never changes
what happens to the job.

- ``on_failure(event)`` runs for every failed attempt, the last one included;
- ``on_dead(event)`` runs once more when that attempt sends the job to the dead letters.

Task hooks run first, then the app's, in the order they were registered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from crawlq.jobs import Job

logger = logging.getLogger("crawlq.worker")


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureEvent:
    """One failed attempt, as a hook sees it."""

    job: Job
    """The job as it was claimed (``job.attempts`` is this attempt's number)."""
    exception: str
    """The exception on one line: ``ValueError: bad page``."""
    error: str
    """The full traceback text the store keeps as ``last_error``."""
    reason: str
    """``error``, ``timeout``, ``discarded``, ``worker_lost``, ``unknown_task``..."""
    retry_delay: float | None
    """Seconds until the next attempt; None when the job goes dead."""

    @property
    def dead(self) -> bool:
        return self.retry_delay is None


Hook = Callable[[FailureEvent], object]


def check_hook(name: str, hook: object) -> Hook | None:
    """``hook`` if it is None or callable, else a ConfigurationError naming the option."""
    from crawlq.exceptions import ConfigurationError

    if hook is not None and not callable(hook):
        raise ConfigurationError(f"{name} must be a function taking a FailureEvent")
    return hook


def run_hooks(hooks: list[Hook], event: FailureEvent) -> None:
    """Call each hook; one that raises is logged and the others still run."""
    for hook in hooks:
        try:
            hook(event)
        except Exception:
            logger.exception(
                "a failure hook (%s) raised for job %s",
                getattr(hook, "__name__", hook),
                event.job.id,
            )
