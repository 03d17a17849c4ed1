"""How many jobs a worker claims ahead of its free slots (``--prefetch``).

A fixed number, or ``auto`` (the default): as many as its slots would start within
``HORIZON`` by the run time of its recent jobs, at most ``PER_SLOT`` per slot. Short
jobs are then claimed in batches of up to ``(1 + PER_SLOT) x concurrency`` (one store
round trip and one statement for many jobs, where one per slot-sized batch costs the
store its per-call work again and again), while long jobs get no prefetch at all, so
that no job waits here behind a slow one while another worker is free. A worker that
has run nothing yet prefetches nothing.
"""

from __future__ import annotations

from typing import Literal

from crawlq.config import PREFETCH_AUTO

HORIZON = 0.01
"""Auto: seconds the last prefetched job may wait for a slot, by the recent run times."""
PER_SLOT = 3
"""Auto: the most jobs prefetched per slot."""
MOST = 256
"""Auto: the most jobs prefetched, whatever the slot count."""
SMOOTHING = 0.2
"""Weight of the newest run time in the running mean."""


class Prefetch:
    """The prefetch of one worker; ``ran`` tells it how long each job ran."""

    def __init__(self, setting: int | Literal["auto"], concurrency: int) -> None:
        self.auto = setting == PREFETCH_AUTO
        self._concurrency = concurrency
        self.most = min(PER_SLOT * concurrency, MOST) if self.auto else int(setting)
        self._mean: float | None = None

    def ran(self, seconds: float) -> None:
        """A job of this worker ran for ``seconds`` (from its slot's start to its end)."""
        mean = self._mean
        self._mean = seconds if mean is None else mean + SMOOTHING * (seconds - mean)

    def extra(self) -> int:
        """Jobs to claim now beyond the slots."""
        if not self.auto:
            return self.most
        mean = self._mean
        if mean is None:
            return 0
        if mean <= 0:
            return self.most
        return min(self.most, int(HORIZON * self._concurrency / mean))

    def describe(self) -> str:
        """``prefetch auto (up to 24)`` or ``prefetch 4``."""
        return f"prefetch auto (up to {self.most})" if self.auto else f"prefetch {self.most}"
