"""Heartbeats: keep the leases of running jobs alive, and notice the ones we lost."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from crawlq.exceptions import StoreError
from crawlq.jobs import Lease
from crawlq.stores.base import JobStore

logger = logging.getLogger("crawlq.worker")


REGISTRY_EVERY = 5.0
"""Seconds between two heartbeats of the worker's own record in the store."""


class Heartbeat:
    """A thread that extends every held lease about three times per lease period, and
    heartbeats the worker's record every ``REGISTRY_EVERY`` seconds.

    ``leases()`` gives the held leases; ``period`` is the shortest lease any of them can
    have; ``on_lost(job_id)`` is told of each lease the store no longer honours;
    ``registry()`` heartbeats the worker's record (it handles its own errors).
    """

    def __init__(
        self,
        store: JobStore,
        leases: Callable[[], list[Lease]],
        period: float,
        on_lost: Callable[[int], None],
        registry: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._leases = leases
        self._interval = max(0.05, min(period / 3, REGISTRY_EVERY))
        self._on_lost = on_lost
        self._registry = registry
        self._next_registry = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="crawlq-heartbeat", daemon=True)
        self.last_success = time.monotonic()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            held = self._leases()
            if held:
                self.beat(held)
            if time.monotonic() >= self._next_registry:
                self._next_registry = time.monotonic() + REGISTRY_EVERY
                self._registry()

    def beat(self, held: list[Lease]) -> None:
        try:
            alive = self._store.job_heartbeat(held)
        except StoreError as exc:
            logger.warning("heartbeat failed, will retry: %s", exc)
            return
        self.last_success = time.monotonic()
        for lease, ok in zip(held, alive, strict=True):
            if not ok:
                self._on_lost(lease.job_id)
