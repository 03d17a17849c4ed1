"""The internal job states of the SQL stores and how they map to ``JobState``.

Pending is split so that the claim index holds only jobs that may be claimed now:
``scheduled`` (pending, due later when last looked at), ``ready`` (pending and due),
``waiting`` (pending behind its limit key's front job: see ``crawlq.limits``) and
``held`` (pending in a paused crawl).
"""

from __future__ import annotations

from crawlq.jobs import JobState

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
