"""Runtimes run claimed jobs; the worker loop never branches on which one it has.

A runtime takes jobs with ``submit`` and, for each, calls ``hooks.begin(job)`` when a
slot starts it (False: the worker took it back, skip it) and ``hooks.end(job, outcome)``
when it is over. ``cancel(job)`` stops a job the worker gave up on (timeout, lost
lease): its outcome is then ignored, and the runtime keeps its slot count.

- ``thread``: N threads in this process, for blocking I/O (``threads.py``).
- ``asyncio``: one event loop, N tasks in flight, for ``async def`` tasks (``aio.py``).
- ``process``: N child processes, one job at a time each, recycled after a number of
  jobs or above a memory ceiling, killed on timeout (``processes.py``).
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from crawlq.jobs import Job
from crawlq.worker.execute import Outcome

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.config import WorkerSettings


class Hooks(Protocol):
    """What a runtime tells the worker."""

    def begin(self, job: Job) -> bool:
        """A slot is about to run ``job``; False if the worker no longer holds it."""

    def end(self, job: Job, outcome: Outcome) -> None:
        """``job`` is over; ``outcome`` is what to record."""


class Runtime(Protocol):
    def start(self) -> None:
        """Start the slots (threads, event loop, child processes)."""

    def submit(self, job: Job) -> None:
        """Run ``job`` in the next free slot."""

    def take_unstarted(self) -> list[Job]:
        """Jobs submitted that no slot has begun (given back at shutdown)."""

    def cancel(self, job: Job) -> None:
        """Stop running ``job`` if it can (the slot stays usable either way)."""

    def stuck(self) -> int:
        """Slots lost to jobs that could not be stopped (threads only)."""

    def stop(self) -> None:
        """End the slots; a job still running is stopped if the runtime can."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeContext:
    """What every runtime is built from."""

    app: App
    worker_id: str
    settings: WorkerSettings
    hooks: Hooks
    app_ref: str | None = None
    """``module:attribute`` of the app, for runtimes that import it in child processes."""


class SlotQueue:
    """The jobs of a runtime whose slots each take one at a time (threads, child
    processes): ``submit`` and ``take_unstarted`` of the Runtime protocol, ``next_job``
    for a slot (None: the slot stops) and ``stop_slots``."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def take_unstarted(self) -> list[Job]:
        """Everything waiting, sentinels left out."""
        taken: list[Job] = []
        while True:
            try:
                item = self._jobs.get_nowait()
            except queue.Empty:
                return taken
            if item is not None:
                taken.append(item)

    def next_job(self) -> Job | None:
        """The next job for a slot, waiting for one; None when the slot is to stop."""
        return self._jobs.get()

    def stop_slots(self, count: int) -> None:
        """Tell ``count`` slots to stop once the jobs before are taken."""
        for _ in range(count):
            self._jobs.put(None)


def _thread(ctx: RuntimeContext) -> Runtime:
    from crawlq.worker.runtimes.threads import ThreadRuntime

    return ThreadRuntime(ctx)


def _asyncio(ctx: RuntimeContext) -> Runtime:
    from crawlq.worker.runtimes.aio import AsyncioRuntime

    return AsyncioRuntime(ctx)


def _process(ctx: RuntimeContext) -> Runtime:
    from crawlq.worker.runtimes.processes import ProcessRuntime

    return ProcessRuntime(ctx)


RUNTIMES: dict[str, Callable[[RuntimeContext], Runtime]] = {
    "thread": _thread,
    "asyncio": _asyncio,
    "process": _process,
}
"""Runtimes by the name ``crawlq worker --runtime`` takes."""
