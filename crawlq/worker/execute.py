"""Run one job's task and turn what happened into a store operation. No store I/O."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crawlq.context import JobContext
from crawlq.exceptions import PayloadError, Snooze, TaskNotFound
from crawlq.jobs import Job
from crawlq.payload import encode_result
from crawlq.retry import Backoff, decide
from crawlq.stores.base import Completion, CrawlRecord, Failure, Release
from crawlq.worker.loops import close_loop_resources

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.tasks import Task

Outcome = Completion | Failure | Release
"""What a finished attempt asks the store to record."""

MAX_ERROR_CHARS = 16_000

logger = logging.getLogger("crawlq.worker")


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text if len(text) <= MAX_ERROR_CHARS else text[-MAX_ERROR_CHARS:]


def exception_line(exc: BaseException) -> str:
    """``exc`` as its traceback's last line says it (``ValueError: bad``), on one line."""
    text = "".join(traceback.format_exception_only(exc)).strip()
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def failure(
    job: Job,
    exc: BaseException,
    backoff: Backoff,
    reason: str = "error",
    records: Sequence[CrawlRecord] = (),
) -> Failure:
    """The Failure for an attempt that raised ``exc``, with the retry policy applied;
    ``records``: what the attempt kept (``JobContext.keep_result``)."""
    decision = decide(
        exc=exc,
        error=_error_text(exc),
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        backoff=backoff,
        reason=reason,
    )
    return Failure(
        lease=job.lease,
        error=decision.error,
        retry_delay=decision.delay,
        reason=decision.reason,
        exception=exception_line(exc),
        records=records,
    )


def timed_out(job: Job, backoff: Backoff) -> Failure:
    """The Failure for an attempt that ran past its timeout."""
    exc = TimeoutError(f"job {job.id} ran longer than its timeout of {job.timeout} s")
    return failure(job, exc, backoff, reason="timeout")


def lost(job: Job, backoff: Backoff, why: str) -> Failure:
    """The Failure for an attempt whose process died under it (killed, crashed, out of
    memory): reason ``worker_lost``; never a completion."""
    return failure(job, RuntimeError(f"job {job.id}: {why}"), backoff, reason="worker_lost")


def backoff_of(app: App, job: Job) -> Backoff:
    """The retry backoff of ``job``'s task (the default one if the task is unknown)."""
    task = app.tasks.get(job.task)
    return task.options.backoff if task is not None else Backoff()


def prepare(app: App, job: Job, worker_id: str) -> tuple[Task[Any, Any], JobContext] | Failure:
    """The task and a fresh context for ``job``, or the Failure if its task is unknown."""
    try:
        task = app.get_task(job.task)
    except TaskNotFound as exc:
        return failure(job, exc, Backoff(), reason="unknown_task")
    log = logging.LoggerAdapter(task.logger, {"job_id": job.id, "attempt": job.attempts})
    return task, JobContext(job=job, app=app, worker_id=worker_id, log=log)


def settle(
    app: App,
    job: Job,
    task: Task[Any, Any],
    ctx: JobContext,
    result: Any,
    exc: BaseException | None,
) -> Outcome:
    """Turn what the task returned (or raised) into the store operation to record."""
    if isinstance(exc, Snooze):
        return Release(lease=job.lease, delay=max(0.0, exc.delay))
    records = tuple(ctx.records)
    if exc is not None:
        return failure(job, exc, task.options.backoff, records=records)
    try:
        encoded = encode_result(job.task, result, max_bytes=app.max_payload_bytes)
    except PayloadError as err:
        # The task ran to its end: running it again would redo its work and return the
        # same kind of value, so the job is dead at once, whatever its attempts left.
        return Failure(
            lease=job.lease,
            error=_error_text(err),
            retry_delay=None,
            reason="bad_result",
            exception=exception_line(err),
            records=records,
        )
    return Completion(
        lease=job.lease, result=encoded, children=tuple(ctx.children), records=records
    )


def execute(app: App, job: Job, worker_id: str) -> Outcome:
    """Run ``job``'s task here and now (an ``async def`` task in a new event loop); never
    raises for what the task does."""
    prepared = prepare(app, job, worker_id)
    if isinstance(prepared, Failure):
        return prepared
    task, ctx = prepared
    try:
        result: Any = task.fn(ctx, *job.args, **job.kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except BaseException as exc:  # a task's SystemExit must not kill its slot's thread
        return settle(app, job, task, ctx, None, exc)
    return settle(app, job, task, ctx, result, None)


async def execute_async(app: App, job: Job, worker_id: str) -> Outcome:
    """Run ``job``'s task in the running event loop: awaited if it is ``async def``, in a
    daemon thread of its own otherwise. Cancelling the caller cancels an ``async def``
    task (CancelledError is raised in it) and abandons a thread."""
    prepared = prepare(app, job, worker_id)
    if isinstance(prepared, Failure):
        return prepared
    task, ctx = prepared
    try:
        if inspect.iscoroutinefunction(task.fn):
            result: Any = await task.fn(ctx, *job.args, **job.kwargs)
        else:
            result = await in_daemon_thread(task.fn, ctx, *job.args, **job.kwargs)
            if inspect.isawaitable(result):
                result = await result
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return settle(app, job, task, ctx, None, exc)
    return settle(app, job, task, ctx, result, None)


async def in_daemon_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``await fn(*args, **kwargs)`` run in a new daemon thread. Unlike
    ``asyncio.to_thread``, a call still blocking when the worker exits (a released or
    timed-out job) cannot keep the process alive."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, exc: BaseException | None) -> None:
        if future.done():
            return  # cancelled meanwhile
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, exc = fn(*args, **kwargs), None
        except BaseException as err:  # handed to the awaiting coroutine
            value, exc = None, err
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(settle, value, exc)

    threading.Thread(target=target, name="crawlq-sync-task", daemon=True).start()
    return await future


async def _awaited(value: Any) -> Any:
    try:
        return await value
    finally:
        await close_loop_resources()  # this loop ends with the job
