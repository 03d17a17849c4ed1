"""An app's periodic schedules: ``@app.periodic``, the schedules its code declares, and
the operations on those the store holds (``app.schedules``; ``crawlq periodic``).

Declared schedules are written to the store by every worker of the app when it starts
(an unchanged definition is left as it is, paused or not); schedules added with
``crawlq periodic add`` or ``app.schedules.add`` live only in the store. Either way
every worker fires every schedule (``crawlq.worker.scheduler``), whatever its tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from crawlq.exceptions import ConfigurationError
from crawlq.jobs import Outcome
from crawlq.periodic import (
    DEFAULT_GRACE,
    CatchUp,
    FireRecord,
    Periodic,
    PeriodicInfo,
    plan_all,
)
from crawlq.stores.periodic import PeriodicStore, periodic_store
from crawlq.tasks import Task

if TYPE_CHECKING:
    from crawlq.app import App

P = ParamSpec("P")
R = TypeVar("R")

SCHEDULE_OPTIONS = frozenset(
    {"every", "tz", "args", "kwargs", "key", "catch_up", "overlap", "grace", "schedule_name"}
)
"""The options of ``@app.periodic`` that belong to the schedule; the others are the
task's (``crawlq.tasks.TaskOptions``, and ``name``)."""


class Schedules:
    """The periodic schedules of one app (``app.schedules``)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.declared: dict[str, Periodic] = {}
        """Schedules declared in code (``@app.periodic``), by name."""

    @property
    def store(self) -> PeriodicStore:
        return periodic_store(self.app.store)

    # -- declaring -------------------------------------------------------------------

    def decorator(
        self, cron: str | None, options: Mapping[str, Any]
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """``@app.periodic(cron, **options)``: see ``App.periodic``."""
        schedule = {k: v for k, v in options.items() if k in SCHEDULE_OPTIONS}
        task_options = {k: v for k, v in options.items() if k not in SCHEDULE_OPTIONS}

        def register(fn: Callable[P, R]) -> Task[P, R]:
            if isinstance(fn, Task):
                if task_options:
                    raise ConfigurationError(
                        f"task {fn.name!r} is registered already: give its options "
                        f"{sorted(task_options)} where it was registered"
                    )
                task: Task[P, R] = fn
            else:
                task = self.app.task(**task_options)(fn)
            self.declare(self.build(task, cron, **schedule))
            return task

        return register

    def build(
        self,
        task: Task[Any, Any],
        cron: str | None = None,
        *,
        every: float | timedelta | str | None = None,
        tz: str = "UTC",
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        key: str | None = None,
        catch_up: CatchUp | str = CatchUp.ONCE,
        overlap: bool = True,
        grace: float = DEFAULT_GRACE,
        schedule_name: str | None = None,
    ) -> Periodic:
        """A schedule of ``task`` (its options apply to the jobs), checked."""
        if isinstance(args, str | bytes) or not isinstance(args, Sequence):
            raise ConfigurationError(
                f"args={args!r:.40} for the schedule of task {task.name!r}: give a list "
                "of the task's positional arguments"
            )
        spec = task.spec_for(list(args), dict(kwargs or {}), key=key)
        return Periodic(
            name=schedule_name or task.name,
            spec=spec,
            cron=cron,
            every=every,  # type: ignore[arg-type]  # Periodic parses it
            tz=tz,
            catch_up=catch_up,  # type: ignore[arg-type]  # Periodic checks it
            overlap=overlap,
            grace=grace,
        )

    def declare(self, periodic: Periodic) -> None:
        """Add a schedule declared in code (written to the store by ``sync``)."""
        if periodic.name in self.declared:
            raise ConfigurationError(
                f"a schedule named {periodic.name!r} is declared already; pass "
                "schedule_name=... to tell them apart"
            )
        self.declared[periodic.name] = periodic

    def sync(self) -> dict[str, Outcome]:
        """Write the declared schedules to the store; what happened to each."""
        return {name: self.add(p) for name, p in self.declared.items()}

    # -- the stored schedules ----------------------------------------------------------

    def add(self, periodic: Periodic) -> Outcome:
        """Store a schedule: created, updated (its definition changed: it fires from its
        next fire time after now), or unchanged."""
        store = self.store
        now = self.app.store.now()
        return store.periodic_put(periodic, next_fire=periodic.next_after(now), now=now)

    def get(self, name: str) -> PeriodicInfo:
        """One stored schedule; ConfigurationError if there is none."""
        info = self.store.periodic_get(name)
        if info is None:
            raise self._unknown(name)
        return info

    def stored(self) -> list[PeriodicInfo]:
        """Every stored schedule, by name."""
        return self.store.periodic_list()

    def remove(self, name: str) -> None:
        """Delete a stored schedule and its record of fire times. A schedule declared in
        code comes back when a worker of the app starts."""
        if not self.store.periodic_remove(name):
            raise self._unknown(name)

    def pause(self, name: str) -> None:
        """Fire nothing until ``resume``."""
        if not self.store.periodic_pause(name):
            raise self._unknown(name)

    def resume(self, name: str) -> None:
        """Fire again from the next fire time after now (none of those passed while
        paused). Resuming a schedule that is not paused changes nothing."""
        info = self.get(name)
        now = self.app.store.now()
        next_fire = info.periodic.next_after(now)
        if not self.store.periodic_resume(name, next_fire=next_fire, now=now):
            raise self._unknown(name)

    def fires(self, name: str, *, limit: int = 100) -> list[FireRecord]:
        """The latest ``limit`` fire times of a schedule and what each did, in order."""
        self.get(name)
        return self.store.periodic_fires(name, limit=limit)

    def fire_due(self, *, limit: int = 500) -> list[FireRecord]:
        """Fire up to ``limit`` due schedules (what each worker's scheduler does)."""
        return self.store.periodic_fire_due(plan_all, limit=limit)

    def _unknown(self, name: str) -> ConfigurationError:
        known = sorted(i.name for i in self.store.periodic_list())
        return ConfigurationError(
            f"no periodic schedule named {name!r}; stored: {', '.join(known) or 'none'}"
        )
