"""Maintenance duties shared by every process that holds leases (``crawlq worker``, the
Scrapyd launcher): each is done by one owner at a time, under a lease on the duty."""

from __future__ import annotations

import logging

from crawlq.config import DEAD_AFTER
from crawlq.stores.base import JobStore

logger = logging.getLogger("crawlq.worker")

EXPIRE_EVERY = 0.5
"""Seconds between two looks for expired leases and dead workers (by the owner holding
that duty; the others only try to take the duty over)."""
DUTY_TTL = 1.25
"""Seconds the "leases" duty stays with an owner that stopped renewing it: how long a
dead maintainer delays the return of expired leases, at most."""
PRUNE_EVERY = 60.0
"""Seconds between two prunes of finished jobs past retention."""


def return_leases(store: JobStore, owner: str) -> None:
    """If ``owner`` holds the "leases" duty: return expired leases, and the jobs of
    workers whose heartbeat is overdue (``DEAD_AFTER``)."""
    if not store.maintenance_acquire("leases", owner, DUTY_TTL):
        return
    returned = store.job_expire_leases()
    if returned:
        logger.warning("returned %d expired leases: %s", len(returned), returned)
    dead = store.worker_reap(dead_after=DEAD_AFTER)
    if dead:
        logger.warning("declared dead (no heartbeat for %s s): %s", DEAD_AFTER, dead)


def prune(store: JobStore, owner: str, retention: float) -> None:
    """If ``owner`` holds the "prune" duty: delete finished jobs and worker records older
    than ``retention`` seconds."""
    if store.maintenance_acquire("prune", owner, PRUNE_EVERY / 2):
        store.job_prune(retention=retention)
        store.worker_prune(older_than=retention)
