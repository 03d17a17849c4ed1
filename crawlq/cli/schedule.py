"""``crawlq schedule``: schedule one job from the command line."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import click

from crawlq.app import App
from crawlq.cli.common import json_option, open_app, target_options
from crawlq.cli.output import iso_utc, print_json
from crawlq.cli.params import DURATION, ISO_DATETIME, parse_json_option
from crawlq.config import DEFAULT_MAX_PAYLOAD_BYTES
from crawlq.jobs import JobSpec
from crawlq.payload import encode_arguments


@dataclasses.dataclass(frozen=True, kw_only=True)
class Request:
    """One schedule request as the options give it."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    delay: float | None
    at: datetime | None
    key: str | None
    priority: int | None
    queue: str | None


def spec_from_app(app: App, req: Request) -> JobSpec:
    """The registered task's own spec (its queue, attempts, lease...), --queue aside."""
    task = app.get_task(req.task)
    spec = task.spec_for(
        req.args, req.kwargs, delay=req.delay, at=req.at, key=req.key, priority=req.priority
    )
    return spec if req.queue is None else dataclasses.replace(spec, queue=req.queue)


def spec_without_app(req: Request) -> JobSpec:
    """A spec with default options, for a task this process does not know."""
    args, kwargs = encode_arguments(
        req.task, req.args, req.kwargs, max_bytes=DEFAULT_MAX_PAYLOAD_BYTES
    )
    return JobSpec(
        queue=req.queue or req.task,
        task=req.task,
        args=args,
        kwargs=kwargs,
        key=req.key,
        priority=req.priority or 0,
        delay=req.delay or 0.0,
        run_at=None if req.at is None else req.at.timestamp(),
    )


@click.command()
@target_options
@click.argument("task_name", metavar="TASK")
@click.option(
    "--args", "args_json", metavar="JSON_ARRAY", help="Positional arguments, e.g. '[\"https://example.com\", 2]'."
)
@click.option(
    "--kwargs",
    "kwargs_json",
    metavar="JSON_OBJECT",
    help="Keyword arguments, e.g. '{\"depth\": 2}'.",
)
@click.option(
    "--delay",
    type=DURATION,
    help="Due this long from now (seconds, or 90s, 15m, 2h, 7d).  [default: due now]",
)
@click.option(
    "--at",
    type=ISO_DATETIME,
    metavar="ISO_DATETIME",
    help="Due at this time, e.g. 2030-01-31T09:30:00+00:00 (no offset: local time).",
)
@click.option("--key", help="Unique key: at most one live job per (queue, key).")
@click.option(
    "--priority", type=int, help="Higher runs first.  [default: the task's priority, else 0]"
)
@click.option("--queue", help="The queue.  [default: the task's queue, which is its name]")
@json_option
def schedule(
    task_name: str,
    args_json: str | None,
    kwargs_json: str | None,
    delay: float | None,
    at: datetime | None,
    key: str | None,
    priority: int | None,
    queue: str | None,
    as_json: bool,
) -> None:
    """Schedule one job of TASK and print its id and what happened: created, updated or
    unchanged (a job with --key was live), or deferred (that job is running; this request
    becomes a job when it ends).

    With --app, TASK is the name of a task registered on the app, and its options apply
    (queue, max_attempts, lease, timeout, on_conflict, priority) and its arguments are
    checked. Without --app, the job goes to queue --queue or TASK with default options;
    a worker of an app that registers TASK will run it.

    \b
    Example:
      crawlq schedule fetch --app myjobs:app --args '["https://example.com", 2]' --delay 1h
      crawlq schedule fetch --args '["https://example.com"]' --key example.com
    """
    if delay is not None and at is not None:
        raise click.UsageError("give --delay or --at, not both")
    req = Request(
        task=task_name,
        args=parse_json_option("--args", args_json, list),
        kwargs=parse_json_option("--kwargs", kwargs_json, dict),
        delay=delay,
        at=at,
        key=key,
        priority=priority,
        queue=queue,
    )
    ctx = click.get_current_context()
    with open_app() as app:
        loaded = ctx.find_object(_Loaded)
        spec = spec_from_app(app, req) if _has_app(ctx) else spec_without_app(req)
        result = app.schedule_many([spec])[0]
        job = app.get_job(result.job_id)
    del loaded
    run_at = None if job is None else job.run_at
    if as_json:
        print_json(
            {
                "job_id": result.job_id,
                "outcome": result.outcome.value,
                "queue": spec.queue,
                "task": spec.task,
                "run_at": iso_utc(run_at),
            }
        )
        return
    click.echo(f"job {result.job_id} {result.outcome.value} (queue {spec.queue})")
