"""The asyncio runtime: one event loop in its own thread, up to N jobs in flight.

``async def`` tasks are awaited on the loop, so one process keeps thousands of fetches in
flight; a plain ``def`` task runs in a daemon thread of its own (prefer the thread
runtime for those). Cancelling a job cancels its asyncio task. Jobs submitted beyond the
N in flight (the worker's prefetch) wait, unstarted, for one to end.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING

from crawlq.jobs import Job
from crawlq.worker.execute import execute_async
from crawlq.worker.loops import close_loop_resources

if TYPE_CHECKING:
    from crawlq.worker.runtimes import RuntimeContext

logger = logging.getLogger("crawlq.worker")


class AsyncioRuntime:
    def __init__(self, ctx: RuntimeContext) -> None:
        self._ctx = ctx
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="crawlq-asyncio", daemon=True)
        self._tasks: dict[int, asyncio.Task[None]] = {}  # touched on the loop only
        self._waiting: deque[Job] = deque()  # submitted, not started (under _lock)
        self._lock = threading.Lock()
        self._ready = threading.Event()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()
        self._loop.run_until_complete(close_loop_resources())
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def submit(self, job: Job) -> None:
        with self._lock:
            self._waiting.append(job)
        self._loop.call_soon_threadsafe(self._start_jobs)

    def _start_jobs(self) -> None:
        """Start waiting jobs while fewer than N are in flight (on the loop)."""
        while len(self._tasks) < self._ctx.settings.concurrency:
            with self._lock:
                if not self._waiting:
                    return
                job = self._waiting.popleft()
            self._tasks[job.id] = self._loop.create_task(
                self._run(job), name=f"crawlq-job-{job.id}"
            )

    async def _run(self, job: Job) -> None:
        hooks = self._ctx.hooks
        try:
            if not hooks.begin(job):
                return
            outcome = await execute_async(self._ctx.app, job, self._ctx.worker_id)
        except asyncio.CancelledError:
            return  # the worker gave up on it and has recorded why
        finally:
            self._tasks.pop(job.id, None)
            self._start_jobs()
        hooks.end(job, outcome)

    def take_unstarted(self) -> list[Job]:
        with self._lock:
            taken = list(self._waiting)
            self._waiting.clear()
        return taken

    def cancel(self, job: Job) -> None:
        def cancel_on_loop() -> None:
            task = self._tasks.get(job.id)
            if task is not None:
                task.cancel()

        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(cancel_on_loop)

    def stuck(self) -> int:
        return 0

    def stop(self) -> None:
        if self._loop.is_closed() or not self._thread.is_alive():
            return
        done: Future[None] = asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop)
        try:
            done.result(timeout=10)
        except Exception as exc:
            logger.warning("asyncio runtime: cancelling jobs at stop failed: %r", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _cancel_all(self) -> None:
        with self._lock:
            self._waiting.clear()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
