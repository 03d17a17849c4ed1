"""``crawlq periodic add|list|remove|pause|resume|fires``: periodic schedules in the store."""

from __future__ import annotations

import click

from crawlq.cli.common import json_option, open_app, target_options
from crawlq.cli.output import cell, console, iso_utc, print_json, table
from crawlq.cli.schedule import Request
from crawlq.payload import MAX_PRIORITY
from crawlq.periodic import FireRecord, Periodic, PeriodicInfo


def info_to_dict(i: PeriodicInfo) -> dict[str, object]:
    p = i.periodic
    return {
        "name": p.name,
        "task": p.spec.task,
        "queue": p.spec.queue,
        "cron": p.cron,
        "every": p.every,
        "tz": p.tz,
        "args": p.spec.args,
        "kwargs": p.spec.kwargs,
        "key": p.spec.key,
        "priority": p.spec.priority,
        "catch_up": p.catch_up.value,
        "overlap": p.overlap,
        "grace": p.grace,
        "paused": i.paused,
        "next_fire": iso_utc(i.next_fire),
        "last_fire": iso_utc(i.last_fire),
        "last_job": i.last_job,
        "revision": i.revision,
    }


def record_to_dict(r: FireRecord) -> dict[str, object]:
    return {
        "fire_at": iso_utc(r.fire_at),
        "outcome": r.outcome.value,
        "job_id": r.job_id,
        "fired_at": iso_utc(r.fired_at),
    }


@click.group()
def periodic() -> None:
    """Periodic schedules: jobs scheduled on a cron expression or every so often.

    Schedules live in the store, so one added here is fired by the workers already
    running; every worker fires them (there is no leader) and each fire time fires
    once. Schedules declared with @app.periodic are stored by the app's workers when
    they start. See docs/periodic.md.

    \b
    Example:
      crawlq periodic add refresh fetch --cron '0 */6 * * *' --tz Europe/Berlin \\
          --args '["https://example.com/catalogue"]'
      crawlq periodic add ping ping --every 30s --no-overlap
      crawlq periodic list
      crawlq periodic pause refresh
    """


@periodic.command()
@target_options
@click.argument("name")
@click.argument("task_name", metavar="TASK")
@click.option(
    "--cron",
    metavar="EXPR",
    help="Cron expression: 5 fields (minute hour day month weekday), or 6 with seconds first.",
)
@click.option("--every", metavar="DURATION", help="Fire every 90, 30s, 15m, 6h, 1d, 1h30m...")
@click.option("--tz", default="UTC", show_default=True, help="Time zone of --cron (an IANA name).")
@click.option("--args", "args_json", metavar="JSON_ARRAY", help="Positional arguments.")
@click.option("--kwargs", "kwargs_json", metavar="JSON_OBJECT", help="Keyword arguments.")
@click.option("--key", metavar="KEY", help="Unique key of the jobs (see `crawlq schedule`).")
@click.option(
    "--priority",
    type=click.IntRange(-MAX_PRIORITY, MAX_PRIORITY),
    metavar="N",
    help="Priority of the jobs.  [default: the task's priority, else 0]",
)
@click.option("--queue", metavar="QUEUE", help="The queue.  [default: the task's queue]")
@click.option(
    "--catch-up",
    type=click.Choice(["once", "skip"]),
    default="once",
    show_default=True,
    help="Fire times missed while no worker ran: one job for all of them, or none.",
)
@click.option(
    "--no-overlap",
    is_flag=True,
    help="Skip a fire time while the previous job is still pending or running.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds a fire time may be found late and still fire as itself.",
)
@json_option
def add(
    name: str,
    task_name: str,
    cron: str | None,
    every: str | None,
    tz: str,
    args_json: str | None,
    kwargs_json: str | None,
    key: str | None,
    priority: int | None,
    queue: str | None,
    catch_up: str,
    no_overlap: bool,
    grace: float,
    as_json: bool,
) -> None:
    """Add schedule NAME of TASK, or change it (it keeps its paused state).

    With --app, TASK is a task of the app and its options apply (queue, attempts, lease,
    timeout, on_conflict, priority); without, its jobs get default options, as with
    `crawlq schedule`.
    """
    req = Request.from_options(
        task_name,
        args_json,
        kwargs_json,
        queue=queue,
        key=key,
        priority=priority,
    )
    with open_app(create=True) as app:
        spec = req.spec(app)
        schedule = Periodic(
            name=name,
            spec=spec,
            cron=cron,
            every=every,  # type: ignore[arg-type]  # Periodic parses it
            tz=tz,
            catch_up=catch_up,  # type: ignore[arg-type]  # Periodic checks it
            overlap=not no_overlap,
            grace=grace,
        )
        outcome = app.schedules.add(schedule)
        info = app.schedules.get(name)
    if as_json:
        print_json({**info_to_dict(info), "outcome": outcome.value})
        return
    click.echo(
        f"schedule {name} {outcome.value}: {schedule.describe()}, next fire time "
        f"{iso_utc(info.next_fire)}" + (" (paused)" if info.paused else "")
    )


@periodic.command("list")
@target_options
@json_option
def list_(as_json: bool) -> None:
    """List the stored schedules with their next and last fire times."""
    with open_app() as app:
        infos = app.schedules.stored()
    if as_json:
        print_json([info_to_dict(i) for i in infos])
        return
    if not infos:
        click.echo("no periodic schedules")
        return
    out = table("NAME", "TASK", "QUEUE", "WHEN", "NEXT FIRE", "LAST FIRE", "LAST JOB", "STATE")
    for i in infos:
        p = i.periodic
        policy = [] if p.overlap else ["no overlap"]
        if p.catch_up.value != "once":
            policy.append("skip missed")
        out.add_row(
            cell(p.name),
            cell(p.spec.task),
            cell(p.spec.queue),
            cell(p.describe()),
            cell(iso_utc(i.next_fire)),
            cell(iso_utc(i.last_fire) or "-"),
            cell(i.last_job if i.last_job is not None else "-"),
            cell(", ".join(["paused" if i.paused else "active", *policy])),
        )
    console().print(out)


def _act(verb: str, name: str) -> None:
    with open_app() as app:
        getattr(app.schedules, verb)(name)
    click.echo(f"schedule {name} {verb}d")


@periodic.command()
@target_options
@click.argument("name")
def remove(name: str) -> None:
    """Delete schedule NAME and its record of fire times. One declared with
    @app.periodic comes back when a worker of the app starts."""
    with open_app() as app:
        app.schedules.remove(name)
    click.echo(f"schedule {name} removed")


@periodic.command()
@target_options
@click.argument("name")
def pause(name: str) -> None:
    """Fire nothing of schedule NAME until it is resumed."""
    _act("pause", name)


@periodic.command()
@target_options
@click.argument("name")
def resume(name: str) -> None:
    """Fire schedule NAME again, from its next fire time after now."""
    _act("resume", name)


@periodic.command()
@target_options
@click.argument("name")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@json_option
def fires(name: str, limit: int, as_json: bool) -> None:
    """The latest fire times of schedule NAME and what each did: fired (with its job),
    skipped (the previous job was still live, --no-overlap) or missed (--catch-up
    skip)."""
    with open_app() as app:
        records = app.schedules.fires(name, limit=limit)
    if as_json:
        print_json([record_to_dict(r) for r in records])
        return
    if not records:
        click.echo(f"schedule {name} has not fired yet")
        return
    out = table("FIRE TIME", "OUTCOME", "JOB", "RECORDED")
    for r in records:
        out.add_row(
            cell(iso_utc(r.fire_at)),
            cell(r.outcome.value),
            cell(r.job_id if r.job_id is not None else "-"),
            cell(iso_utc(r.fired_at)),
        )
    console().print(out)
