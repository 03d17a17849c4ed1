"""How many jobs a worker claims ahead of its free slots (``--prefetch``).

A fixed number, or ``auto`` (the default): as many as its slots would start within
``HORIZON`` by the run time of its recent jobs, at most ``PER_SLOT`` per slot. Short
jobs are then claimed in batches of up to ``(1 + PER_SLOT) x concurrency`` (one store
round trip and one statement for many jobs, where one per slot-sized batch costs the
store its per-call work again and again), while long jobs get no prefetch at all, so
that no job waits here behind a slow one while another worker is free. A worker that
has run nothing yet prefetches nothing.

When to claim (``room``): as soon as a slot is free, unless the store's calls cost more
than the jobs they carry (``Capabilities.batched_claims``: PostgreSQL) and the jobs are
so short that all the worker may hold would run within one claim's round trip. Then the
store is what bounds the rate, and a claim waits until the prefetch's room is free
(every job held is running, or done), so that each store call carries a full batch. A
claim for each job that ended instead costs the store its per-call work for a few jobs
at a time; worse, jobs whose code releases the GIL (any system call) finish a few at a
time while the worker's loop holds it between statements, which halves the batches.
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
"""Weight of the newest figure in a running mean (run times, claim round trips)."""


class Prefetch:
    """The prefetch of one worker; ``ran`` tells it how long each job ran."""

    def __init__(
        self, setting: int | Literal["auto"], concurrency: int, *, batches: bool = False
    ) -> None:
        self.auto = setting == PREFETCH_AUTO
        self._batches = batches
        self._concurrency = concurrency
        self.most = min(PER_SLOT * concurrency, MOST) if self.auto else int(setting)
        self._mean: float | None = None
        self._trip: float | None = None

    def ran(self, seconds: float) -> None:
        """A job of this worker ran for ``seconds`` (from its slot's start to its end)."""
        self._mean = _smoothed(self._mean, seconds)

    def claimed(self, seconds: float) -> None:
        """A claim of this worker (with the completions it carried) took ``seconds``."""
        self._trip = _smoothed(self._trip, seconds)

    def room(self, extra: int) -> int:
        """The least free room (slots and prefetch, of ``concurrency + extra``) worth a
        claim: ``extra`` (at least 1) when the store ``batches`` and a full batch of the
        recent jobs would run within one claim's round trip, else 1."""
        mean, trip = self._mean, self._trip
        if not self._batches or extra <= 0 or mean is None or trip is None:
            return 1
        if mean * (self._concurrency + extra) / self._concurrency >= trip:
            return 1
        return extra

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


def _smoothed(mean: float | None, value: float) -> float:
    """The running mean with ``value`` added (``value`` itself for the first)."""
    return value if mean is None else mean + SMOOTHING * (value - mean)
