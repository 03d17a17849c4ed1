"""The thread runtime: N long-lived threads in the worker process, for blocking I/O."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from crawlq.jobs import Job
from crawlq.worker.execute import execute
from crawlq.worker.runtimes import SlotQueue

if TYPE_CHECKING:
    from crawlq.worker.runtimes import RuntimeContext

logger = logging.getLogger("crawlq.worker")


class ThreadRuntime(SlotQueue):
    """N daemon threads take jobs from one queue. A thread cannot be stopped from
    outside: ``cancel`` abandons it (being a daemon, it cannot keep the process alive)
    and starts a new thread for its slot; ``stuck`` counts abandoned threads still
    running ``stuck_after`` seconds later."""

    stuck_after = 60.0

    def __init__(self, ctx: RuntimeContext) -> None:
        super().__init__()
        self._ctx = ctx
        self._count = 0
        self._lock = threading.Lock()
        self._running: dict[int, threading.Thread] = {}
        self._abandoned: dict[threading.Thread, float] = {}

    def _spawn(self) -> None:
        with self._lock:
            self._count += 1
            name = f"crawlq-slot-{self._count}"
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        me = threading.current_thread()
        hooks, app, worker_id = self._ctx.hooks, self._ctx.app, self._ctx.worker_id
        while (job := self.next_job()) is not None:
            if not hooks.begin(job):
                continue
            with self._lock:
                self._running[job.id] = me
            outcome = execute(app, job, worker_id)
            with self._lock:
                self._running.pop(job.id, None)
                abandoned = me in self._abandoned
            hooks.end(job, outcome)
            if abandoned:
                with self._lock:
                    self._abandoned.pop(me, None)
                return  # its slot has a new thread already

    def start(self) -> None:
        for _ in range(self._ctx.settings.concurrency):
            self._spawn()

    def cancel(self, job: Job) -> None:
        with self._lock:
            thread = self._running.pop(job.id, None)
            if thread is None:
                return
            self._abandoned[thread] = time.monotonic()
        logger.warning(
            "job %s cannot be stopped in the thread runtime: its thread %s is abandoned and "
            "a new thread takes its slot (use --runtime process to kill such jobs)",
            job.id,
            thread.name,
        )
        self._spawn()

    def stuck(self) -> int:
        limit = time.monotonic() - self.stuck_after
        with self._lock:
            return sum(1 for t, at in self._abandoned.items() if t.is_alive() and at < limit)

    def stop(self) -> None:
        with self._lock:
            count = self._count
        self.stop_slots(count)
