"""The acker: reports finished attempts to the store in batches, and drops one only when
the store refuses it for good (a permanent StoreError, not StoreUnavailable)."""

from __future__ import annotations

import logging
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
    """Takes outcomes, groups what is waiting into one call per kind, and records them.

    Without ``inline``, a thread records every outcome, retrying a call while the store
    is unavailable, until it succeeds or ``stop(now=True)``. With ``inline``, the owner
    records the waiting outcomes itself, one try per call (``record``: the worker's loop
    does it once per turn, before it claims, so a job costs no wake-up of another
    thread; or ``take`` then ``settle`` after a call of its own that recorded them), and
    the thread records only while the owner is ``away`` (waiting on the store) or after
    a try failed (``hand_back``): it takes those outcomes, and all that wait, until none
    is left. A call the store refuses for good is not retried
    (``_record``)."""

    def __init__(
        self, store: JobStore, on_flushed: Callable[[], None], *, inline: bool = False
    ) -> None:
        self._store = store
        self._on_flushed = on_flushed
        self._lock = threading.Lock()
        self._pending: list[Outcome] = []  # put and not yet taken (under _lock)
        self._unrecorded = 0  # put and not yet recorded (under _lock)
        self._away = not inline  # the thread records what is put (under _lock)
        self._handed = False  # a try of record() failed: the thread records (under _lock)
        self._closing = False  # stop(): the thread records the rest, then ends
        self._wake = threading.Event()
        self._abort = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="crawlq-acker", daemon=True)
        self.stale = 0
        """Outcomes the store refused because the lease was no longer ours."""

    def start(self) -> None:
        self._thread.start()

    def put(self, outcome: Outcome) -> None:
        with self._lock:
            self._pending.append(outcome)
            self._unrecorded += 1
            wake = self._away or self._handed
        if wake:
            self._wake.set()

    @property
    def idle(self) -> bool:
        """True when every outcome put so far has been recorded."""
        with self._lock:
            return self._unrecorded == 0

    @property
    def retrying(self) -> bool:
        """True while the thread records what a try of ``record`` failed to."""
        with self._lock:
            return self._handed

    def away(self, away: bool) -> None:
        """The owner stops (True) or resumes (False) recording with ``record``; while it
        is away, the thread records what is put."""
        with self._lock:
            self._away = away
            wake = away and bool(self._pending)
        if wake:
            self._wake.set()

    @property
    def unrecorded(self) -> int:
        """Outcomes put and not yet recorded."""
        with self._lock:
            return self._unrecorded

    def take(self) -> list[Outcome]:
        """The waiting outcomes, for the owner to record (``record``, ``settle``,
        ``hand_back``); none while the thread has outcomes to retry: they stay in the
        order they came."""
        with self._lock:
            if self._handed or not self._pending:
                return []
            batch = self._pending[:MAX_BATCH]
            del self._pending[:MAX_BATCH]
            return batch

    def keep(self, items: Sequence[Outcome]) -> None:
        """``items`` taken and not recorded: first in line again for the owner's next
        ``take`` (or for the thread, if the owner goes away meanwhile)."""
        if not items:
            return
        with self._lock:
            self._pending[:0] = items
            wake = self._away or self._handed
        if wake:
            self._wake.set()

    def record(self, batch: Sequence[Outcome] | None = None) -> None:
        """Record ``batch`` (default: what ``take`` gives) here, one try per call; what a
        call fails to record (the store unavailable, or refusing it) is handed back."""
        items = self.take() if batch is None else batch
        for kind, group, call in self._groups(items):
            try:
                applied = call(group)
            except StoreError as exc:
                logger.debug("could not %s jobs, handed to the acker thread: %s", kind, exc)
                self.hand_back(group)
                continue
            self.settle(kind, group, applied)

    def settle(self, kind: str, items: Sequence[Outcome], applied: list[bool]) -> None:
        """``items`` taken are recorded; ``applied`` is what the store answered."""
        self._report(kind, items, applied)
        with self._lock:
            self._unrecorded -= len(items)

    def hand_back(self, items: Sequence[Outcome]) -> None:
        """``items`` taken could not be recorded: the thread records them, retrying while
        the store is unavailable, and then all that waits, until none is left."""
        if not items:
            return
        with self._lock:
            self._pending[:0] = items
            self._handed = True
        self._wake.set()

    def stop(self, *, now: bool = False) -> None:
        """Flush what is waiting (unless ``now``), then end the thread."""
        if now:
            self._abort.set()
        with self._lock:
            self._closing = True
        self._wake.set()
        self._thread.join()

    def _take(self) -> list[Outcome] | None:
        """The next batch for the thread, or None if it has nothing to record now."""
        with self._lock:
            if not self._pending:
                self._handed = False
                return None
            if not (self._away or self._handed or self._closing):
                return None
            batch = self._pending[:MAX_BATCH]
            del self._pending[:MAX_BATCH]
            return batch

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while (batch := self._take()) is not None:
                self._flush(batch)
                with self._lock:
                    self._unrecorded -= len(batch)
                self._on_flushed()
            with self._lock:
                if self._closing and not self._pending:
                    return

    def _groups(self, batch: Sequence[Outcome]) -> list[tuple[str, Sequence[Outcome], Call]]:
        """The outcomes of ``batch`` by kind, each with the store call that records it."""
        completions = [o for o in batch if isinstance(o, Completion)]
        failures = [o for o in batch if isinstance(o, Failure)]
        releases = [o for o in batch if isinstance(o, Release)]
        groups: tuple[tuple[str, Sequence[Outcome], Call], ...] = (
            ("complete", completions, self._store.job_complete),
            ("fail", failures, self._store.job_fail),
            ("release", releases, self._store.job_release),
        )
        return [group for group in groups if group[1]]

    def _report(self, kind: str, items: Sequence[Outcome], applied: list[bool]) -> None:
        """Count and log the outcomes the store refused as stale."""
        for item, ok in zip(items, applied, strict=False):
            if not ok:
                self.stale += 1
                logger.warning(
                    "the store refused to %s job %s: its lease was no longer ours "
                    "(expired, cancelled or claimed again)",
                    kind,
                    item.lease.job_id,
                )

    def _flush(self, batch: Sequence[Outcome]) -> None:
        for kind, items, call in self._groups(batch):
            self._report(kind, items, self._record(kind, call, items))

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
