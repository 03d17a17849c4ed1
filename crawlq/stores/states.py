"""The internal job states of the SQL stores and how they map to ``JobState``.

Pending is split so that the claim index holds only jobs that may be claimed now:
``scheduled`` (pending, due later when last looked at), ``ready`` (pending and due),
``waiting`` (pending behind its limit key's front job: see ``crawlq.limits``) and
``held`` (pending in a paused crawl).
"""

from __future__ import annotations

from collections.abc import Mapping

from crawlq.jobs import JobState, QueueTotals

PUBLIC_STATE: dict[str, JobState] = {
    "scheduled": JobState.PENDING,
    "ready": JobState.PENDING,
    "waiting": JobState.PENDING,
    "held": JobState.PENDING,
    "running": JobState.RUNNING,
    "done": JobState.DONE,
    "dead": JobState.DEAD,
    "cancelled": JobState.CANCELLED,
}
"""Internal state -> public state."""

INTERNAL_STATES: dict[JobState, list[str]] = {
    JobState.PENDING: ["scheduled", "ready", "waiting", "held"],
    JobState.RUNNING: ["running"],
    JobState.DONE: ["done"],
    JobState.DEAD: ["dead"],
    JobState.CANCELLED: ["cancelled"],
}
"""Public state -> the internal states it covers."""

FINISHED: list[str] = ["cancelled", "dead", "done"]
"""Internal states of finished jobs, sorted."""

LEASE_EXPIRED = {
    "error": "lease expired: the worker holding it stopped heartbeating",
    "reason": "lease_expired",
}
"""Why a running job was taken back from its worker: its lease expired."""
WORKER_LOST = {
    "error": "worker lost: the worker holding it was declared dead "
    "(heartbeat overdue or process gone)",
    "reason": "worker_lost",
}
"""Why a running job was taken back from its worker: the worker was declared dead."""


def pending_state(paused: object, keyed: object, due: object) -> str:
    """The pending-state rule: where a job that is (again) pending waits.

    ``held`` in a paused crawl, else ``waiting`` behind its limit key (the key's
    reconcile picks its front), else ``ready`` when due, else ``scheduled``. A null
    (SQL NULL, None) counts as false. The SQLite store states it here only: its queries
    call this function as ``crawlq_pending_state(paused, keyed, due)`` (registered on
    every connection). Siblings: ``crawlq_pending_state`` of the PostgreSQL store
    (postgres/migrations/0008_rules.sql) and ``place`` of the Redis store
    (redis/scripts/prelude.lua, which keeps no ready/scheduled split).
    """
    if paused:
        return "held"
    if keyed:
        return "waiting"
    return "ready" if due else "scheduled"


ClaimOrder = tuple[int, float, int]
"""A job's claim order as a sort key (``claim_order``)."""


def claim_order(priority: int, run_at: float, job_id: int) -> ClaimOrder:
    """The claim order as a sort key: priority highest first, then run_at, then id.

    The stores read jobs in this order from their claim index (the SQL stores' fragment
    ``claim_order`` in queries.sql, the Redis store's priority levels); jobs claimed from
    several queues or rounds are merged with this key.
    """
    return (-priority, run_at, job_id)


def totals_of(queue: str, counts: Mapping[str, int]) -> QueueTotals:
    """A queue's totals on a SQL store, from its counters (by name; absent ones are 0).

    Only transitions nothing else counts have counters of their own, so inserts and
    completions pay nothing for the totals: ``gone_<state>`` (jobs deleted in each
    internal state), ``total_retried`` (failed attempts sent back to pending) and
    ``total_left_dead`` (dead jobs requeued). Every job ever created is in a state or
    gone; done is left only by deletion; dead by deletion or a requeue.
    """

    def n(name: str) -> int:
        return int(counts.get(name, 0))

    return QueueTotals(
        queue=queue,
        enqueued=sum(n(state) + n(f"gone_{state}") for state in PUBLIC_STATE),
        completed=n("done") + n("gone_done"),
        retried=n("total_retried"),
        dead_lettered=n("dead") + n("gone_dead") + n("total_left_dead"),
    )
