"""The scheduler duty of every worker: fire the periodic schedules that are due.

There is no leader: every worker runs this thread, wakes at the earliest next fire time
(or at least every ``LOOK_EVERY`` s, to see schedules added meanwhile) and fires what is
due. The store's unique (schedule, fire time) write, in the transaction that schedules
the job, makes each fire time fire once however many workers race for it
(``crawlq.stores.periodic``). Old ledger records are pruned under the "periodic_prune"
maintenance duty, by one worker at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from crawlq.exceptions import CrawlqError
from crawlq.jobs import Outcome
from crawlq.worker.maintenance import PRUNE_EVERY

if TYPE_CHECKING:
    from crawlq.app import App

logger = logging.getLogger("crawlq.worker")

LOOK_EVERY = 1.0
"""Most seconds between two looks at the schedules."""
FIRE_BATCH = 500
"""Due schedules fired per store call."""
RETRY_AFTER = 1.0
"""Seconds to wait after a failed look."""


class Scheduler:
    """A thread firing the app's store's due schedules until stopped.

    ``owner`` names the worker (for the prune duty); records of fire times older than
    ``retention`` seconds are pruned (each schedule keeps its latest)."""

    def __init__(self, app: App, owner: str, retention: float) -> None:
        self._app = app
        self._owner = owner
        self._retention = retention
        self._stop = threading.Event()
        self._next_prune = 0.0
        self._thread = threading.Thread(target=self._loop, name="crawlq-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        self._sync()
        while not self._stop.is_set():
            try:
                wait = self.tick()
            except CrawlqError as exc:
                logger.warning("could not fire periodic schedules, will retry: %s", exc)
                wait = RETRY_AFTER
            except Exception:  # a bug must not stop the worker's schedules silently
                logger.exception("firing periodic schedules failed, will retry")
                wait = RETRY_AFTER
            self._stop.wait(wait)

    def _sync(self) -> None:
        """Store the schedules the app declares; retried until it works or we stop."""
        while not self._stop.is_set():
            try:
                for name, outcome in self._app.schedules.sync().items():
                    if outcome is not Outcome.UNCHANGED:
                        logger.info("periodic schedule %s %s", name, outcome.value)
                return
            except CrawlqError as exc:
                logger.warning("could not store the app's periodic schedules: %s", exc)
                self._stop.wait(RETRY_AFTER)

    def tick(self) -> float:
        """Fire every due schedule; returns the seconds to wait before the next look."""
        schedules = self._app.schedules
        while not self._stop.is_set():
            fired = schedules.fire_due(limit=FIRE_BATCH)
            for record in fired:
                logger.debug(
                    "periodic %s fire time %.3f: %s (job %s)",
                    record.name,
                    record.fire_at,
                    record.outcome.value,
                    record.job_id,
                )
            if not fired:
                break
        self._prune()
        store = schedules.store
        upcoming = store.periodic_next()
        if upcoming is None:
            return LOOK_EVERY
        return min(LOOK_EVERY, max(0.01, upcoming - self._app.store.now()))

    def _prune(self) -> None:
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + PRUNE_EVERY
        if self._app.store.maintenance_acquire("periodic_prune", self._owner, PRUNE_EVERY / 2):
            self._app.schedules.store.periodic_prune(older_than=self._retention)
