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
