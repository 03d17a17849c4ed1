"""Jobs: what is scheduled (``JobSpec``), what is stored (``Job``) and their states.

The life of a job::

                 schedule               claim (lease)            complete
      (none) ───────────▶ pending ───────────────────▶ running ───────────▶ done
                            ▲  ▲                         │  │
           retry (backoff)  │  └─── release (shutdown) ──┘  │ fail, attempts left
                            └───────────────────────────────┘
                                                            │ fail, none left / discard
                                                            ▼
                                    requeue ◀───────────  dead
      pending/running ── cancel ──▶ cancelled
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from crawlq.types import JobId, JSONValue, Timestamp


class JobState(StrEnum):
    """Where a job is in its life."""

    PENDING = "pending"
    """Waiting to run: due now (run_at <= now) or scheduled for later."""
    RUNNING = "running"
    """Leased by a worker, which must heartbeat and then complete, fail or release it."""
    DONE = "done"
    """Finished successfully; kept for the retention period, then pruned."""
    DEAD = "dead"
    """In the dead-letter queue: out of attempts, discarded, or its lease expired last."""
    CANCELLED = "cancelled"
    """Cancelled by a user before it finished; kept for the retention period."""


LIVE_STATES = frozenset({JobState.PENDING, JobState.RUNNING})
"""States in which a job holds its unique key."""

FINISHED_STATES = frozenset({JobState.DONE, JobState.DEAD, JobState.CANCELLED})


class ConflictPolicy(StrEnum):
    """What scheduling a key that is already live does to the pending job."""

    REPLACE = "replace"
    """The pending job takes the new run_at, priority and arguments."""
    KEEP = "keep"
    """The pending job is left as it is."""
    EARLIEST = "earliest"
    """run_at becomes the earlier of the two, priority the higher."""


class Outcome(StrEnum):
    """What a schedule request did."""

    CREATED = "created"
    """A new pending job."""
    UPDATED = "updated"
    """The live pending job with this key was changed by the conflict policy."""
    UNCHANGED = "unchanged"
    """A job with this key was live and the policy left it as it was."""
    DEFERRED = "deferred"
    """The job with this key is running: the request is remembered (one per key) and
    becomes a pending job when the running one ends."""
    SEEN = "seen"
    """The spec's fingerprint was already in its crawl's seen set: nothing was scheduled
    (``job_id`` is 0)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class JobSpec:
    """One job to schedule. Arguments must already be valid JSON values."""

    queue: str
    task: str
    args: list[JSONValue] = field(default_factory=list)
    kwargs: dict[str, JSONValue] = field(default_factory=dict)
    key: str | None = None
    priority: int = 0
    delay: float = 0.0
    """Seconds after the store's now; ignored when ``run_at`` is given."""
    run_at: Timestamp | None = None
    max_attempts: int = 3
    lease_seconds: float = 30.0
    timeout: float | None = None
    on_conflict: ConflictPolicy = ConflictPolicy.REPLACE
    crawl: int | None = None
    """The id of the crawl the job belongs to (``crawl_create``); it must be running or
    paused. A child scheduled by a running job of a crawl belongs to the same crawl."""
    limit_key: str | None = None
    """The limit key (the crawler uses the host): the store starts the jobs of one key
    within that key's ``max_running``, ``min_interval`` and ``blocked_until``."""
    fingerprint: bytes | None = None
    """16 bytes (``crawlq.fingerprint``): with ``crawl`` set, the job is scheduled only if
    the fingerprint is new to the crawl's seen set, and is added to it in the same
    transaction; otherwise the outcome is ``SEEN`` and nothing is written."""


_SPEC_FIELDS = tuple(JobSpec.__dataclass_fields__)
SPEC_FIELD_NAMES = frozenset(_SPEC_FIELDS)
"""The names of JobSpec's fields."""


class SpecTemplate:
    """A spec to make many from: ``template.make(fields)`` is
    ``dataclasses.replace(spec, **fields)`` for fields already checked, in half its time
    (a task's calls and the crawler's links are built this way). The frozen dataclass's
    ``__init__`` sets each of the 15 fields through ``object.__setattr__``; this sets
    their slots directly, which is what that does (JobSpec has no ``__post_init__`` to
    skip)."""

    __slots__ = ("_fields",)

    def __init__(self, spec: JobSpec) -> None:
        self._fields = [
            (name, getattr(JobSpec, name).__set__, getattr(spec, name)) for name in _SPEC_FIELDS
        ]

    def make(self, fields: Mapping[str, Any]) -> JobSpec:
        """A spec with ``fields`` (by name) and the template's values for the others."""
        if not fields.keys() <= SPEC_FIELD_NAMES:
            unknown = sorted(fields.keys() - SPEC_FIELD_NAMES)
            raise TypeError(f"JobSpec has no field(s) {unknown}")
        spec = object.__new__(JobSpec)
        for name, set_slot, value in self._fields:
            set_slot(spec, fields.get(name, value))
        return spec


def spec_to_json(spec: JobSpec) -> dict[str, Any]:
    """A spec as JSON values, every field by name (the fingerprint as hex, JSON has no
    bytes); ``spec_from_json`` reads it back."""
    fields = {name: getattr(spec, name) for name in _SPEC_FIELDS}
    if spec.fingerprint is not None:
        fields["fingerprint"] = spec.fingerprint.hex()
    return fields


def spec_from_json(fields: Mapping[str, Any]) -> JobSpec:
    """The spec ``spec_to_json`` gave (fields left out take their defaults)."""
    values = dict(fields)
    if "on_conflict" in values:
        values["on_conflict"] = ConflictPolicy(values["on_conflict"])
    if values.get("fingerprint") is not None:
        values["fingerprint"] = bytes.fromhex(values["fingerprint"])
    return JobSpec(**values)


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """A job as the store holds it."""

    id: JobId
    queue: str
    task: str
    args: list[JSONValue]
    kwargs: dict[str, JSONValue]
    key: str | None
    priority: int
    run_at: Timestamp
    state: JobState
    attempts: int
    max_attempts: int
    lease_seconds: float
    timeout: float | None
    worker_id: str | None
    lease_token: str | None
    lease_expires_at: Timestamp | None
    last_error: str | None
    dead_reason: str | None
    result: JSONValue
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    crawl_id: int | None = None
    limit_key: str | None = None

    @property
    def lease(self) -> Lease:
        """The lease this job was claimed with (only meaningful while running)."""
        return Lease(self.id, self.lease_token or "")


class Lease(NamedTuple):
    """Proof of a claim: a job id and the token its claim issued."""

    job_id: JobId
    token: str


class ScheduleResult(NamedTuple):
    """The answer to one schedule request."""

    job_id: JobId
    outcome: Outcome


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueStats:
    """Counts of one queue, read without scanning its jobs."""

    queue: str
    due: int
    """Pending jobs with run_at <= now (the past-due count)."""
    scheduled: int
    """Pending jobs with run_at > now."""
    running: int
    done: int
    dead: int
    cancelled: int
    waiting: int = 0
    """Pending jobs held back by their limit key (not yet the key's front)."""
    held: int = 0
    """Pending jobs of paused crawls."""
    oldest_due_age: float | None
    """Seconds since the run_at of the oldest due job, or None if none is due."""
    done_last_minute: int

    @property
    def pending(self) -> int:
        return self.due + self.scheduled + self.waiting + self.held


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueTotals:
    """Counts of one queue that only grow (kept by the store; pruning never lowers them;
    a store migrated from a version without them starts them at 0)."""

    queue: str
    enqueued: int = 0
    """Jobs created (scheduled, children, follow-ups); a requeue is not one."""
    completed: int = 0
    """Jobs that became done."""
    retried: int = 0
    """Failed attempts sent back to pending: a retry, an expired lease, a lost worker (a
    release, as on shutdown or ``Snooze``, gives its attempt back and is not one)."""
    dead_lettered: int = 0
    """Jobs that became dead."""

    @property
    def failed(self) -> int:
        """Failed attempts: each is either retried or dead-lettered."""
        return self.retried + self.dead_lettered


class WorkerState(StrEnum):
    """Where a registered worker is in its life."""

    ALIVE = "alive"
    """Registered and heartbeating."""
    LOST = "lost"
    """Alive in the store, but its last heartbeat is older than ``DEAD_AFTER``: it
    crashed, hangs or cannot reach the store. Only ``worker_list`` says so (from the
    heartbeat's age); the next ``worker_reap`` makes it dead and returns its leases."""
    STOPPED = "stopped"
    """Exited cleanly (``worker_stop``), with its final counters."""
    DEAD = "dead"
    """Declared dead by ``worker_reap`` (its heartbeat was overdue, or its process was
    seen gone from its machine), which returned its leases."""


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerInfo:
    """A worker as the store knows it. Times are on the store's clock.

    ``worker_register`` takes one with the identity fields filled in (id, host, pid,
    process, queues, runtime, concurrency) and sets ``started_at``, ``last_heartbeat``
    and ``state`` itself; ``worker_list`` returns them whole.
    """

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    runtime: str
    """``asyncio``, ``thread`` or ``process``."""
    concurrency: int
    """Slots: the most jobs it runs at once."""
    started_at: Timestamp = 0.0
    last_heartbeat: Timestamp = 0.0
    running: int = 0
    done: int = 0
    failed: int = 0
    rss_bytes: int | None = None
    """Resident memory of the worker (and its children), if it reports it."""
    state: WorkerState = WorkerState.ALIVE
    stopped_at: Timestamp | None = None
    """When it stopped cleanly or was declared dead; None while alive."""
    process: str | None = None
    """Which process this is, on which kernel and pid namespace, with its start time
    (``crawlq.worker.processes``): how a worker starting on the same machine tells that
    this one's process has gone. None where it cannot be known (not Linux)."""
