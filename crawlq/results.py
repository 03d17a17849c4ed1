"""Waiting for a job to finish and taking its result: ``app.wait`` and ``app.result``.

The wait is woken by the store's notification of that job (``crawlq.stores.finished``),
not by polling: on PostgreSQL and Redis it returns within milliseconds of the job's end,
on SQLite within the store's ``poll_interval``. A result is what the task returned, as
JSON (capped with the arguments by ``App(max_payload_bytes=...)``, see
``crawlq.payload.encode_result``).
"""

from __future__ import annotations

import time

from crawlq.exceptions import (
    ConfigurationError,
    JobCancelled,
    JobFailed,
    JobNotFound,
    WaitTimeout,
)
from crawlq.jobs import FINISHED_STATES, Job, JobState, Outcome, ScheduleResult
from crawlq.payload import check_count, check_seconds
from crawlq.stores.base import Store
from crawlq.types import JobId, JSONValue

WAIT_SLICE = 30.0
"""The longest one store wait lasts; a longer wait asks again (and so renews its
registration with the store)."""


def job_id_of(job: int | ScheduleResult) -> JobId:
    """The id of a job to wait for: an id, or what ``task.schedule`` returned. A schedule
    that made no job of its own (``seen``, ``deferred``) is refused, saying why."""
    if isinstance(job, ScheduleResult):
        if job.outcome is Outcome.SEEN:
            raise ConfigurationError(
                "nothing was scheduled (outcome seen: the crawl had seen this URL or key), "
                "so there is no job to wait for"
            )
        if job.outcome is Outcome.DEFERRED:
            raise ConfigurationError(
                f"the request was deferred behind running job {job.job_id}, which holds "
                "the same key: it becomes a job of its own only when that one ends. Wait "
                f"for job {job.job_id}, then find the new job by its key"
            )
        return job.job_id
    return check_count("job id", job, 1)


def wait_finished(store: Store, job_id: JobId, timeout: float | None) -> Job:
    """Block until the job is done, dead or cancelled and return it; ``WaitTimeout``
    after ``timeout`` seconds (None: no limit; 0: look once), ``JobNotFound`` if there is
    no such job."""
    if timeout is not None:
        timeout = check_seconds("timeout", timeout, zero=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        remaining = WAIT_SLICE if deadline is None else deadline - time.monotonic()
        wait = min(remaining, WAIT_SLICE)
        job = store.job_wait_finished(job_id, wait) if wait > 0 else store.job_get(job_id)
        if job is None:
            raise JobNotFound(
                f"no job with id {job_id} (done and cancelled jobs are pruned after the "
                "retention, 7 days by default)"
            )
        if job.state in FINISHED_STATES:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(job, timeout or 0.0)


def result_of(job: Job) -> JSONValue:
    """The result of a finished job; ``JobFailed`` (with its last error) if it is dead,
    ``JobCancelled`` if it was cancelled."""
    if job.state is JobState.DONE:
        return job.result
    if job.state is JobState.DEAD:
        raise JobFailed(job)
    if job.state is JobState.CANCELLED:
        raise JobCancelled(job)
    raise ValueError(f"job {job.id} is {job.state.value}: it has not finished")
