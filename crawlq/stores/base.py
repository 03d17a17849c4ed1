"""The store protocol: the contract every store keeps, proven by ``tests/stores``.

Everything here is synchronous and batch-minded: one call schedules many jobs, claims up
to N, or acknowledges many leases, in one round trip and one transaction. Times are
seconds since the epoch on the *store's* clock; every operation takes an optional ``now``
so tests can move time, and uses the store's clock when it is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from crawlq.jobs import Job, JobSpec, JobState, Lease, QueueStats, ScheduleResult, WorkerInfo
from crawlq.types import JobId, JSONValue, Timestamp


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """What a store can do beyond the protocol's minimum."""

    notify: bool = False
    """``job_wait`` wakes up on new work instead of sleeping out its timeout."""
    multi_host: bool = False
    """Workers on several machines can share the store."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimParams:
    """Claim up to ``limit`` due jobs of ``queues`` for ``worker_id``."""

    queues: Sequence[str]
    worker_id: str
    limit: int = 1
    now: Timestamp | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Completion:
    """A successful end of a claimed job.

    ``children`` are scheduled in the same transaction as the completion, and only if
    the lease is still valid: a job that crashes or lost its lease adds nothing.
    """

    lease: Lease
    result: JSONValue = None
    children: Sequence[JobSpec] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Failure:
    """A failed attempt. The caller decided what happens next (see ``crawlq.retry``).

    ``retry_delay`` None sends the job to ``dead`` with ``reason``; a number makes it
    pending again that many seconds after now. The attempt stays counted.
    """

    lease: Lease
    error: str
    retry_delay: float | None
    reason: str = "error"


@dataclass(frozen=True, kw_only=True, slots=True)
class Release:
    """Give a claimed job back without using up its attempt (shutdown, snooze)."""

    lease: Lease
    delay: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class JobFilter:
    """Selects jobs for listing, requeueing and purging. Empty fields match everything."""

    ids: Sequence[JobId] | None = None
    queue: str | None = None
    task: str | None = None
    state: JobState | None = None
    finished_before: Timestamp | None = None
    """Only jobs that finished before this time."""
    limit: int | None = None
    after_id: JobId = 0
    """Only jobs with a larger id (for paging through a listing)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitParams:
    """Block until a job of ``queues`` may be claimable, or ``timeout`` seconds pass."""

    queues: Sequence[str]
    timeout: float


@runtime_checkable
class Store(Protocol):
    """Durable storage for jobs.

    Contract (each sentence is a test in ``tests/stores``):

    - Uniqueness: at most one live (pending or running) job per (queue, key), enforced
      atomically by the store. Scheduling a live key applies the spec's ``on_conflict``
      to the pending job; if the job is running the request is remembered, at most one
      per key (merged by the same policy), and becomes a pending job when the running one
      ends as done or dead. Cancelling drops it.
    - Claim is atomic: no job is leased to two workers at once. It takes due pending jobs
      in the order priority desc, run_at asc, id asc; never a job before its run_at.
      Attempts are counted at claim; each claim issues a new lease token.
    - Heartbeat, complete, fail and release need the current lease token of a running
      job; a stale token changes nothing and reports False for that item.
    - A running job whose lease expired is returned by ``job_expire_leases``: pending
      again if it has attempts left, else dead with reason ``lease_expired``.
    - Workers register and heartbeat. ``worker_reap`` declares dead every alive worker
      whose heartbeat is overdue and returns its running jobs at once, as an expired lease
      is returned (reason ``worker_lost``); their old lease tokens are stale from then on,
      and the dead worker's own heartbeat is refused.
    - ``maintenance_acquire`` is a named lease: at most one owner holds a duty until its
      ttl runs out.
    """

    capabilities: Capabilities

    def close(self) -> None:
        """Release connections. The store cannot be used afterwards."""

    def now(self) -> Timestamp:
        """The store's clock."""

    def job_schedule(
        self, specs: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> list[ScheduleResult]:
        """Schedule many jobs in one transaction; one result per spec, in order."""

    def job_claim(self, params: ClaimParams) -> list[Job]:
        """Lease up to ``params.limit`` due jobs, in claim order; [] if none is due."""

    def job_heartbeat(self, leases: Sequence[Lease], *, now: Timestamp | None = None) -> list[bool]:
        """Extend each lease by its job's lease_seconds from now; False where stale."""

    def job_complete(
        self, completions: Sequence[Completion], *, now: Timestamp | None = None
    ) -> list[bool]:
        """Mark jobs done (keeping their result) and schedule their children, atomically;
        False where the lease is stale (and then no child is scheduled)."""

    def job_fail(self, failures: Sequence[Failure], *, now: Timestamp | None = None) -> list[bool]:
        """Record failed attempts: retry later or dead, as each Failure says."""

    def job_release(
        self, releases: Sequence[Release], *, now: Timestamp | None = None
    ) -> list[bool]:
        """Return running jobs to pending and give back the attempt their claim counted."""

    def job_expire_leases(self, *, now: Timestamp | None = None) -> list[JobId]:
        """Return running jobs whose lease has expired; their ids, in id order."""

    def job_cancel(self, ids: Sequence[JobId], *, now: Timestamp | None = None) -> list[JobId]:
        """Cancel the pending or running jobs among ``ids``; returns those cancelled."""

    def job_get(self, job_id: JobId) -> Job | None:
        """One job, or None if there is no such job (or it was pruned)."""

    def job_list(self, where: JobFilter) -> list[Job]:
        """Jobs matching ``where``, in id order."""

    def job_requeue(self, where: JobFilter, *, now: Timestamp | None = None) -> list[JobId]:
        """Make matching dead jobs pending, due now, with fresh attempts.

        A dead job whose key is live again is left dead (the live job already covers it).
        """

    def job_purge(self, where: JobFilter) -> int:
        """Delete matching finished (done, dead, cancelled) jobs; returns how many."""

    def job_prune(self, *, retention: float, now: Timestamp | None = None) -> int:
        """Delete done and cancelled jobs that finished more than ``retention`` s ago."""

    def job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        """The earliest run_at among pending jobs of ``queues``, or None."""

    def job_wait(self, params: WaitParams) -> None:
        """Block until work may be claimable in ``params.queues`` or the timeout passes.

        Returning early is always allowed; callers must then try to claim.
        """

    def queue_stats(self, *, now: Timestamp | None = None) -> list[QueueStats]:
        """Counts for every queue that has or had jobs, sorted by queue name."""

    # -- workers and maintenance -------------------------------------------------------

    def worker_register(self, info: WorkerInfo, *, now: Timestamp | None = None) -> None:
        """Insert or replace the record of ``info.id``, alive, with started_at and
        last_heartbeat = now; its identity and counters come from ``info``."""

    def worker_heartbeat(
        self,
        worker_id: str,
        *,
        running: int,
        done: int,
        failed: int,
        rss_bytes: int | None,
        now: Timestamp | None = None,
    ) -> bool:
        """Record an alive worker's counters and last_heartbeat = now. False, changing
        nothing, if the worker is unknown, stopped or was declared dead (it has then lost
        every lease it held)."""

    def worker_stop(self, worker_id: str, *, now: Timestamp | None = None) -> None:
        """A clean exit: an alive worker becomes stopped, with stopped_at = now. A dead or
        unknown worker is left as it is."""

    def worker_list(self, *, now: Timestamp | None = None) -> list[WorkerInfo]:
        """Every registered worker: alive ones first, then by started_at (then id)."""

    def worker_reap(self, *, dead_after: float, now: Timestamp | None = None) -> list[str]:
        """Declare dead every alive worker whose last heartbeat is older than
        ``now - dead_after``, and in the same transaction return each running job it holds
        as ``job_expire_leases`` would (pending again if it has attempts left, else dead
        with reason ``worker_lost``), clearing their lease tokens. Returns the ids of the
        workers declared dead, sorted."""

    def worker_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        """Delete stopped and dead workers that ended more than ``older_than`` s ago;
        returns how many."""

    def maintenance_acquire(
        self, duty: str, owner: str, ttl: float, *, now: Timestamp | None = None
    ) -> bool:
        """Take or renew the named lease ``duty`` for ``owner`` until now + ttl, atomically.
        True if ``owner`` holds it now (it was free, expired, or already ``owner``'s);
        False, changing nothing, while another owner holds it unexpired."""
