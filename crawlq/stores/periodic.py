"""The periodic-schedule operations every store keeps, proven by
``tests/stores/test_periodic.py``.

A store holds each schedule (``crawlq.periodic.Periodic``, stored as its canonical
definition text) with a revision, a paused flag, its next fire time and its last job,
and a ledger of fire times: at most one record per (schedule, fire time), written by a
unique insert in the same transaction (or Lua script) that schedules the fire's job and
moves the schedule to its next fire time. So a fire time fires once, whatever the number
of schedulers racing for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from crawlq.exceptions import ConfigurationError
from crawlq.jobs import Outcome
from crawlq.periodic import FireOutcome, FireRecord, Firing, Periodic, PeriodicInfo
from crawlq.stores.codec import Row
from crawlq.types import Timestamp

Planner = Callable[[Sequence[PeriodicInfo], Timestamp], list[Firing]]
"""Plans the fires of due schedules, one ``Firing`` per schedule (``crawlq.periodic.
plan_all``); called with the store's now, inside the store's transaction where it has
one. It must be pure: a store may call it again when it retries a transaction."""

LIVE_INTERNAL_STATES = ("held", "ready", "running", "scheduled", "waiting")
"""The SQL stores' internal job states of a pending or running job."""


@runtime_checkable
class PeriodicStore(Protocol):
    """Periodic schedules and their ledger (see the module).

    - ``periodic_put`` creates a schedule, or replaces its definition when it differs
      (revision + 1, next fire time as given; paused stays as it was); an equal
      definition changes nothing (``UNCHANGED``), so every worker may put the schedules
      of its app at start.
    - ``periodic_fire_due`` reads up to ``limit`` unpaused schedules with next_fire <=
      now, in next_fire then name order (with more due, a store may start further on
      than the first, to spread concurrent callers), asks ``plan`` what each does, and applies each
      ``Firing`` whose schedule still has the planned revision and next_fire and is not
      paused: a ledger record (schedule, fire_at) is inserted unless one exists, the
      ``FIRED`` job is scheduled as ``job_schedule`` would (its key's ``on_conflict``
      applies), and the schedule moves to the planned next_fire, all atomically. A firing
      whose check fails, or whose fire time is in the ledger already, schedules nothing
      and is not returned. Concurrent callers never fire one (schedule, fire time) twice.
    """

    def periodic_put(
        self, periodic: Periodic, *, next_fire: Timestamp, now: Timestamp | None = None
    ) -> Outcome:
        """Create (``CREATED``) or change (``UPDATED``) a schedule; ``UNCHANGED`` if the
        stored definition is the same."""

    def periodic_get(self, name: str) -> PeriodicInfo | None:
        """One schedule, or None."""

    def periodic_list(self) -> list[PeriodicInfo]:
        """Every schedule, by name."""

    def periodic_remove(self, name: str) -> bool:
        """Delete a schedule (its ledger too); False if there was none."""

    def periodic_pause(self, name: str, *, now: Timestamp | None = None) -> bool:
        """Fire nothing until resumed; False if there is no such schedule."""

    def periodic_resume(
        self, name: str, *, next_fire: Timestamp, now: Timestamp | None = None
    ) -> bool:
        """Fire again, from ``next_fire`` (fire times passed while paused do not fire).
        A schedule that is not paused is left as it is; False if there is none."""

    def periodic_fire_due(
        self, plan: Planner, *, limit: int, now: Timestamp | None = None
    ) -> list[FireRecord]:
        """Fire due schedules (see the class); the records written, in order."""

    def periodic_next(self) -> Timestamp | None:
        """The earliest next_fire among unpaused schedules, or None."""

    def periodic_fires(self, name: str, *, limit: int = 1000) -> list[FireRecord]:
        """The schedule's ledger, latest ``limit`` records, in fire time order."""

    def periodic_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        """Delete ledger records of fire times more than ``older_than`` s before now,
        keeping each schedule's latest; returns how many."""


def periodic_store(store: object) -> PeriodicStore:
    """``store`` as a PeriodicStore, or ConfigurationError if it keeps no schedules."""
    if not isinstance(store, PeriodicStore):
        raise ConfigurationError(
            f"{type(store).__name__} keeps no periodic schedules: use the SQLite, "
            "PostgreSQL or Redis store"
        )
    return store


def info_from_row(row: Row, *, live: bool) -> PeriodicInfo:
    """A schedule from a SQL row (columns named as the fields)."""
    return PeriodicInfo(
        periodic=Periodic.from_definition(row["name"], row["definition"]),
        revision=int(row["revision"]),
        paused=bool(row["paused"]),
        next_fire=float(row["next_fire"]),
        last_fire=None if row["last_fire"] is None else float(row["last_fire"]),
        last_job=None if row["last_job"] is None else int(row["last_job"]),
        last_job_live=live,
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


def record_from_row(row: Row) -> FireRecord:
    """A ledger record from a SQL row."""
    return FireRecord(
        name=row["name"],
        fire_at=float(row["fire_at"]),
        outcome=FireOutcome(row["outcome"]),
        job_id=None if row["job_id"] is None else int(row["job_id"]),
        fired_at=float(row["fired_at"]),
    )


def put_params(
    periodic: Periodic, next_fire: Timestamp, now: Timestamp | None
) -> dict[str, object]:
    """The parameters of the SQL stores' ``periodic_put`` queries."""
    return {
        "name": periodic.name,
        "definition": periodic.definition,
        "next_fire": float(next_fire),
        "now": now,
    }


def put_outcome(existing: str | None, definition: str) -> Outcome:
    """What ``periodic_put`` does to a schedule whose stored definition is ``existing``."""
    if existing is None:
        return Outcome.CREATED
    return Outcome.UNCHANGED if existing == definition else Outcome.UPDATED
