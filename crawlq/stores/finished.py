"""Waiting for one job to finish: the store operation behind ``app.wait`` and
``app.result`` (``crawlq.results``), and what each store wakes it with.

- PostgreSQL: a waiter registers the job in ``crawlq_finish_waits`` (migration 0009) and
  LISTENs on channel ``crawlq_finished``; a statement trigger NOTIFYs ``<schema>:<id>``
  for each registered job that becomes done, dead or cancelled. Every other update of
  jobs pays one look at that (usually empty) table, and sends nothing.
- Redis: a waiter SUBSCRIBEs to ``{p}:fdone:{id}`` and marks the job with the key
  ``{p}:fwait:{id}`` (expiring after the wait); every script that finishes a marked job
  publishes on the channel.
- SQLite (one machine): the waiter looks at the job again whenever the file changed
  (``PRAGMA data_version``, looked at every ``poll_interval``, 2 ms by default).

Registering and reading the job's state are ordered so that a job finishing meanwhile is
never missed: either the wait sees it finished, or its finish sees the registration.
"""

from __future__ import annotations

from typing import Protocol

from crawlq.jobs import Job
from crawlq.types import JobId

MARK_MARGIN = 60.0
"""Seconds a waiter's registration outlives its wait (a waiter that dies leaves it
behind; it only costs a notification no one reads, and goes away after this)."""


class FinishWaits(Protocol):
    """The store operation of waiting for one job (part of ``Store``)."""

    def job_wait_finished(self, job_id: JobId, timeout: float) -> Job | None:
        """Block until job ``job_id`` is finished (done, dead or cancelled) or ``timeout``
        seconds pass, woken by the store's notification of that job; then return the job
        as it is (finished or not), or None if there is no such job (pruned, purged, never
        scheduled). Returning an unfinished job early is allowed: callers ask again."""
