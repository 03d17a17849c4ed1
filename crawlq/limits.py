"""Limits: how fast the jobs of one limit key (a site) start, across every worker.

A job may carry a ``limit_key``. Per key the store keeps ``max_running`` (jobs of the key
running at once, None for no cap), ``min_interval`` (seconds between two starts) and
``blocked_until`` (no start before; set from a 429/503 Retry-After or a Crawl-delay).

Where a key's settings come from, first match wins:

1. ``limit_set(key, ...)``: an override, kept until changed;
2. the ``limits`` of the crawl of the first job that used the key;
3. the queue default (``limit_set_default(queue, ...)``) of that first job's queue;
4. no limit (``max_running`` None, ``min_interval`` 0).

The store enforces them inside the claim, Mercator style: of the pending jobs of one key,
at most one (its *front*) is in the claim index at a time, due at
``max(its run_at, last_start + min_interval, blocked_until)``, and only while the key has
fewer than ``max_running`` jobs running; the others wait beside the index, so a claim
never looks at the waiting jobs of a blocked key.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawlq.payload import MAX_COUNT, check_count, check_seconds
from crawlq.types import Timestamp


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """The settings of a limit key."""

    max_running: int | None = None
    """Jobs of the key running at once across every worker; None for no cap."""
    min_interval: float = 0.0
    """Seconds between two starts of the key's jobs."""

    def __post_init__(self) -> None:
        if self.max_running is not None:
            check_count("max_running", self.max_running, 1, MAX_COUNT)
        check_seconds("min_interval", self.min_interval, zero=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class KeyLimit:
    """The state of one limit key, as ``limit_get`` reads it."""

    key: str
    limits: Limits
    override: bool
    """True when the settings come from ``limit_set`` (not from a default)."""
    blocked_until: Timestamp | None
    running: int
    """Jobs of the key running now."""
    last_start: Timestamp | None
    """When a job of the key was last claimed."""
    pending: int
    """Jobs of the key not yet claimed (front, waiting and held)."""
    next_start: Timestamp | None
    """When the key's front job becomes claimable; None when it has none (no pending
    job, at max_running, or its pending jobs are held)."""
