"""Waiting for one job to finish on SQLite (``crawlq.stores.finished``): the job is read
again each time another connection commits to the file, looked at every
``poll_interval``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from crawlq.jobs import FINISHED_STATES, Job
from crawlq.types import JobId

if TYPE_CHECKING:
    from crawlq.stores.sqlite.store import SQLiteStore


def wait_finished(store: SQLiteStore, job_id: JobId, timeout: float) -> Job | None:
    """``SQLiteStore.job_wait_finished``."""
    deadline = time.monotonic() + timeout
    version = store._data_version()
    job = store.job_get(job_id)
    while job is not None and job.state not in FINISHED_STATES:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(store.settings.poll_interval, remaining))
        if (now := store._data_version()) != version:
            version = now
            job = store.job_get(job_id)
    return job
