"""Run one job's task and turn what happened into a store operation. No store I/O."""

from __future__ import annotations

import asyncio
import inspect
import logging
import traceback
from typing import TYPE_CHECKING, Any

from crawlq.context import JobContext
from crawlq.exceptions import PayloadError, Snooze, TaskNotFound
from crawlq.jobs import Job
from crawlq.payload import encode_result
from crawlq.retry import Backoff, decide
from crawlq.stores.base import Completion, Failure, Release

if TYPE_CHECKING:
    from crawlq.app import App

Outcome = Completion | Failure | Release
"""What a finished attempt asks the store to record."""

MAX_ERROR_CHARS = 16_000

logger = logging.getLogger("crawlq.worker")


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text if len(text) <= MAX_ERROR_CHARS else text[-MAX_ERROR_CHARS:]


def failure(job: Job, exc: BaseException, backoff: Backoff, reason: str = "error") -> Failure:
    """The Failure for an attempt that raised ``exc``, with the retry policy applied."""
    decision = decide(
        exc=exc,
        error=_error_text(exc),
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        backoff=backoff,
        reason=reason,
    )
    return Failure(
        lease=job.lease, error=decision.error, retry_delay=decision.delay, reason=decision.reason
    )


def timed_out(job: Job, backoff: Backoff) -> Failure:
    """The Failure for an attempt that ran past its timeout."""
    exc = TimeoutError(f"job {job.id} ran longer than its timeout of {job.timeout} s")
    return failure(job, exc, backoff, reason="timeout")


def execute(app: App, job: Job, worker_id: str) -> Outcome:
    """Run ``job``'s task with a fresh context; never raises for what the task does."""
    try:
        task = app.get_task(job.task)
    except TaskNotFound as exc:
        return failure(job, exc, Backoff(), reason="unknown_task")
    log = logging.LoggerAdapter(task.logger, {"job_id": job.id, "attempt": job.attempts})
    ctx = JobContext(job=job, app=app, worker_id=worker_id, log=log)
    backoff = task.options.backoff
    try:
        result: Any = task.fn(ctx, *job.args, **job.kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except Snooze as snooze:
        return Release(lease=job.lease, delay=max(0.0, snooze.delay))
    except BaseException as exc:  # a task's SystemExit must not kill its slot's thread
        return failure(job, exc, backoff)
    try:
        encoded = encode_result(job.task, result, max_bytes=app.max_payload_bytes)
    except PayloadError as exc:
        return failure(job, exc, backoff, reason="bad_result")
    return Completion(lease=job.lease, result=encoded, children=tuple(ctx.children))


async def _awaited(value: Any) -> Any:
    return await value
