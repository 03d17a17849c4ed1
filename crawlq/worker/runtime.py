"""Runtimes run claimed jobs. The worker loop never branches on which one it has.

A runtime offers three things: ``submit`` a job, ``take_unstarted`` jobs back at
shutdown, and ``replace_slot`` when a job overstayed its timeout and its slot must be
given a fresh unit. ``ThreadRuntime`` runs each job in one of N long-lived threads.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Protocol

from crawlq.jobs import Job


class Runtime(Protocol):
    def start(self) -> None: ...
    def submit(self, job: Job) -> None: ...
    def take_unstarted(self) -> list[Job]: ...
    def replace_slot(self) -> None: ...
    def stop(self) -> None: ...


class ThreadRuntime:
    """N daemon threads take jobs from one queue. A thread stuck in a job past its
    timeout is abandoned and a new one takes its slot; being a daemon, it cannot keep
    the process alive."""

    def __init__(self, slots: int, run: Callable[[Job], None], name: str = "crawlq") -> None:
        self._slots = slots
        self._run = run
        self._name = name
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._count = 0
        self._lock = threading.Lock()

    def _spawn(self) -> None:
        with self._lock:
            self._count += 1
            name = f"{self._name}-slot-{self._count}"
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        while (job := self._queue.get()) is not None:
            self._run(job)

    def start(self) -> None:
        for _ in range(self._slots):
            self._spawn()

    def submit(self, job: Job) -> None:
        self._queue.put(job)

    def take_unstarted(self) -> list[Job]:
        jobs: list[Job] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return jobs
            if item is not None:
                jobs.append(item)

    def replace_slot(self) -> None:
        self._spawn()

    def stop(self) -> None:
        with self._lock:
            count = self._count
        for _ in range(count):
            self._queue.put(None)


RUNTIMES: dict[str, Callable[[int, Callable[[Job], None]], Runtime]] = {
    "thread": ThreadRuntime,
}
"""Runtimes by the name ``crawlq worker --runtime`` takes."""
