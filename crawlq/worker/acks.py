"""The acker: reports finished attempts to the store in batches, and drops one only when
the store refuses it for good (a permanent StoreError, not StoreUnavailable)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from crawlq.exceptions import StoreError, StoreUnavailable
from crawlq.stores.base import Completion, Failure, JobStore, Release
from crawlq.worker.execute import Outcome

logger = logging.getLogger("crawlq.worker")

Call = Callable[[Any], list[bool]]
"""A store call that records a batch of one kind of outcome (``job_complete``...)."""

MAX_BATCH = 512
RETRY_DELAYS = (0.05, 0.1, 0.25, 0.5, 1.0)


class Acker:
    """A thread that takes outcomes, groups what is waiting into one call per kind, and
    retries a call while the store is unavailable, until it succeeds or
    ``stop(now=True)``. A call the store refuses for good is not retried (``_record``)."""

    def __init__(self, store: JobStore, on_flushed: Callable[[], None]) -> None:
        self._store = store
        self._on_flushed = on_flushed
        self._queue: queue.SimpleQueue[Outcome | None] = queue.SimpleQueue()
        self._pending = 0  # outcomes put and not yet recorded (under _count_lock)
        self._count_lock = threading.Lock()
        self._abort = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="crawlq-acker", daemon=True)
        self.stale = 0
        """Outcomes the store refused because the lease was no longer ours."""

    def start(self) -> None:
        self._thread.start()

    def put(self, outcome: Outcome) -> None:
        with self._count_lock:
            self._pending += 1
        self._queue.put(outcome)

    @property
    def idle(self) -> bool:
        """True when every outcome put so far has been recorded."""
        with self._count_lock:
            return self._pending == 0

    def stop(self, *, now: bool = False) -> None:
        """Flush what is queued (unless ``now``), then end the thread."""
        if now:
            self._abort.set()
        self._queue.put(None)
        self._thread.join()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            batch: list[Outcome] = [] if first is None else [first]
            ending = first is None
            while len(batch) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    ending = True
                else:
                    batch.append(item)
            if batch:
                self._flush(batch)
                with self._count_lock:
                    self._pending -= len(batch)
            self._on_flushed()
            if ending:
                return

    def _flush(self, batch: Sequence[Outcome]) -> None:
        completions = [o for o in batch if isinstance(o, Completion)]
        failures = [o for o in batch if isinstance(o, Failure)]
        releases = [o for o in batch if isinstance(o, Release)]
        groups: tuple[tuple[str, Sequence[Outcome], Call], ...] = (
            ("complete", completions, self._store.job_complete),
            ("fail", failures, self._store.job_fail),
            ("release", releases, self._store.job_release),
        )
        for kind, items, call in groups:
            if items:
                applied = self._record(kind, call, items)
                for item, ok in zip(items, applied, strict=False):
                    if not ok:
                        self.stale += 1
                        logger.warning(
                            "the store refused to %s job %s: its lease was no longer ours "
                            "(expired, cancelled or claimed again)",
                            kind,
                            item.lease.job_id,
                        )

    def _record(self, kind: str, call: Call, items: Sequence[Outcome]) -> list[bool]:
        """Record a batch, retrying while the store is unavailable. A permanent refusal
        (any other StoreError: the same call would fail the same way) is not retried:
        the batch is recorded one outcome at a time, and an outcome refused alone is
        given up (a completion becomes a dead failure that names the cause)."""
        try:
            return self._call_until_done(kind, call, items)
        except StoreError as exc:
            if len(items) > 1:
                return [ok for item in items for ok in self._record(kind, call, [item])]
            return [self._refused(kind, items[0], exc)]

    def _refused(self, kind: str, item: Outcome, exc: StoreError) -> bool:
        job_id = item.lease.job_id
        if isinstance(item, Completion):
            logger.error(
                "the store refused to record the completion of job %s, which goes to the "
                "dead-letter queue: %s",
                job_id,
                exc,
            )
            dead = Failure(
                lease=item.lease,
                error=f"the store refused to record this job's completion: {exc}",
                retry_delay=None,
                reason="store_refused",
            )
            return all(self._record("fail", self._store.job_fail, [dead]))
        logger.error(
            "the store refused to %s job %s, given up (its lease will expire): %s",
            kind,
            job_id,
            exc,
        )
        return True

    def _call_until_done(self, kind: str, call: Call, items: Sequence[Outcome]) -> list[bool]:
        """``call(items)``, again after each StoreUnavailable until it succeeds or
        ``stop(now=True)``; any other StoreError is raised."""
        attempt = 0
        while True:
            try:
                return call(items)
            except StoreUnavailable as exc:
                if self._abort.is_set():
                    logger.error("gave up reporting a %s at shutdown: %s", kind, exc)
                    return []
                delay = RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)]
                logger.warning("could not %s jobs, retrying in %.2f s: %s", kind, delay, exc)
                self._abort.wait(delay)
                attempt += 1
