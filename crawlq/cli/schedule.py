"""``crawlq schedule``: schedule one job from the command line."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Unpack

import click

from crawlq.app import App
from crawlq.cli.common import current_target, json_option, open_app, target_options
from crawlq.cli.output import print_json
from crawlq.cli.params import parse_json_option, when_options
from crawlq.config import DEFAULT_MAX_PAYLOAD_BYTES
from crawlq.jobs import JobSpec
from crawlq.payload import MAX_PRIORITY, check_name, encode_arguments
from crawlq.specs import ScheduleOptions, spec_fields
from crawlq.tasks import TaskOptions


@dataclasses.dataclass(frozen=True, kw_only=True)
class Request:
    """One schedule request as the options give it."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    options: ScheduleOptions
    queue: str | None

    @classmethod
    def from_options(
        cls,
        task: str,
        args_json: str | None,
        kwargs_json: str | None,
        *,
        queue: str | None,
        **options: Unpack[ScheduleOptions],
    ) -> Request:
        """A request from the command's options, --args and --kwargs as given (JSON)."""
        return cls(
            task=task,
            args=parse_json_option("--args", args_json, list),
            kwargs=parse_json_option("--kwargs", kwargs_json, dict),
            options=options,
            queue=queue,
        )

    def spec(self, app: App) -> JobSpec:
        """The spec: the task's own with --app (``spec_from_app``), else default options
        (``spec_without_app``)."""
        return spec_from_app(app, self) if current_target().app_ref else spec_without_app(self)


def spec_from_app(app: App, req: Request) -> JobSpec:
    """The registered task's own spec (its queue, attempts, lease...), --queue aside."""
    task = app.get_task(req.task)
    spec = task.spec_for(req.args, req.kwargs, **req.options)
    if req.queue is None:
        return spec
    return dataclasses.replace(spec, queue=check_name(req.queue, "queue name"))


def spec_without_app(req: Request) -> JobSpec:
    """A spec with a task's default options, for a task this process does not know: the
    template of ``TaskOptions`` with only its queue set, checked as a task's call is."""
    check_name(req.task, "task name")
    template = TaskOptions(queue=req.queue or req.task).template(req.task)
    fields = spec_fields(req.task, req.options)
    args, kwargs = encode_arguments(
        req.task, req.args, req.kwargs, max_bytes=DEFAULT_MAX_PAYLOAD_BYTES
    )
    return dataclasses.replace(template, args=args, kwargs=kwargs, **fields)


@click.command()
@target_options
@click.argument("task_name", metavar="TASK")
@click.option(
    "--args",
    "args_json",
    metavar="JSON_ARRAY",
    help="Positional arguments, e.g. '[\"https://example.com\", 2]'.",
)
@click.option(
    "--kwargs",
    "kwargs_json",
    metavar="JSON_OBJECT",
    help="Keyword arguments, e.g. '{\"depth\": 2}'.",
)
@when_options
@click.option("--key", metavar="KEY", help="Unique key: at most one live job per (queue, key).")
@click.option(
    "--priority",
    type=click.IntRange(-MAX_PRIORITY, MAX_PRIORITY),
    metavar="N",
    help="Higher runs first; a whole number within ±(2**53-1).  [default: the task's "
    "priority, else 0]",
)
@click.option(
    "--queue", metavar="QUEUE", help="The queue.  [default: the task's queue, which is its name]"
)
@click.option(
    "--crawl",
    "crawl_id",
    type=click.IntRange(min=1),
    metavar="ID",
    help="Add the job to this crawl (it must be running or paused).",
)
@click.option(
    "--limit-key",
    metavar="KEY",
    help="Submit the job to this key's limits (see `crawlq limit`), e.g. a host.",
)
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
    crawl_id: int | None,
    limit_key: str | None,
    as_json: bool,
) -> None:
    """Schedule one job of TASK.

    Prints the job id and what happened: created, updated or unchanged (a job with this
    --key was live), or deferred (that job is running; this request becomes a job when
    it ends).

    With --app, TASK is the name of a task registered on the app, and its options apply
    (queue, max_attempts, lease, timeout, on_conflict, priority). Without --app, the job
    goes to queue --queue or TASK with default options; a worker of an app that registers
    TASK will run it. Arguments must be JSON values either way.

    \b
    Example:
      crawlq schedule fetch --app myjobs:app --args '["https://example.com", 2]' --delay 1h
      crawlq schedule fetch --args '["https://example.com"]' --key example.com
      crawlq schedule fetch --args '["https://a.com/x"]' --crawl 3 --limit-key a.com
    """
    if delay is not None and at is not None:
        raise click.UsageError("give --delay or --at, not both")
    req = Request.from_options(
        task_name,
        args_json,
        kwargs_json,
        queue=queue,
        delay=delay,
        at=at,
        key=key,
        priority=priority,
        crawl=crawl_id,
        limit_key=limit_key,
    )
    with open_app(create=True) as app:
        spec = req.spec(app)
        result = app.schedule_many([spec])[0]
    if as_json:
        print_json(
            {
                "job_id": result.job_id,
                "outcome": result.outcome.value,
                "queue": spec.queue,
                "task": spec.task,
            }
        )
        return
    click.echo(f"job {result.job_id} {result.outcome.value} (queue {spec.queue})")
