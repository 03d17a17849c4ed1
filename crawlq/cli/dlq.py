"""``crawlq dlq``: the dead-letter queue. List dead jobs, requeue them, purge them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from crawlq.cli.common import json_option, open_app, target_options
from crawlq.cli.jobs import after_id_option, limit_option
from crawlq.cli.output import print_jobs
from crawlq.jobs import JobState
from crawlq.stores.base import JobFilter

F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def dlq() -> None:
    """List, requeue and purge dead jobs.

    The dead-letter queue holds jobs out of attempts, discarded by their task, or whose
    last lease expired. They keep their last error until requeued or purged.

    \b
    Example:
      crawlq dlq list --queue pages
      crawlq dlq requeue --queue pages
      crawlq dlq purge --all --yes
    """


@dlq.command("list")
@target_options
@click.option("--queue", metavar="QUEUE", help="Only dead jobs of this queue.")
@click.option("--task", metavar="TASK", help="Only dead jobs of this task.")
@limit_option
@after_id_option
@json_option
def list_dead(
    queue: str | None, task: str | None, limit: int, after_id: int, as_json: bool
) -> None:
    """List dead jobs.

    Shows why each job died, when, and the last line of its last error.

    \b
    Example:
      crawlq dlq list --queue pages --limit 20
    """
    where = JobFilter(queue=queue, task=task, state=JobState.DEAD, limit=limit, after_id=after_id)
    with open_app() as app:
        found = app.store.job_list(where)
    print_jobs(found, as_json=as_json, limit=limit, dead=True)


def selector_options(f: F) -> F:
    f = click.option("--all", "select_all", is_flag=True, help="Every dead job.")(f)
    f = click.option("--queue", metavar="QUEUE", help="The dead jobs of this queue.")(f)
    return click.option(
        "--id",
        "ids",
        type=int,
        multiple=True,
        metavar="ID",
        help="This dead job; repeat for several.",
    )(f)


def dead_filter(verb: str, ids: tuple[int, ...], queue: str | None, select_all: bool) -> JobFilter:
    """The filter the selector options name; refuses none, and --all with another."""
    if select_all and (ids or queue):
        raise click.UsageError(
            f"--all {verb}s every dead job: give it alone, not with --id/--queue"
        )
    if not (select_all or ids or queue):
        raise click.UsageError(
            f"say which dead jobs to {verb}: give --id ID (repeatable), --queue QUEUE or --all"
        )
    return JobFilter(ids=ids or None, queue=queue, state=JobState.DEAD)


def _plural(n: int) -> str:
    return f"{n} dead job" + ("" if n == 1 else "s")


@dlq.command()
@target_options
@selector_options
def requeue(ids: tuple[int, ...], queue: str | None, select_all: bool) -> None:
    """Put dead jobs back: pending, due now, with fresh attempts.

    A dead job whose unique key is live again stays dead (the live job covers it).

    \b
    Example:
      crawlq dlq requeue --id 12 --id 13
      crawlq dlq requeue --queue pages
    """
    where = dead_filter("requeue", ids, queue, select_all)
    with open_app() as app:
        requeued = app.store.job_requeue(where)
    click.echo(f"requeued {_plural(len(requeued))}")
    left = sorted(set(ids) - set(requeued))
    if left:
        click.echo(
            "not requeued (not dead, no such job, or its key is live again): "
            + ", ".join(map(str, left))
        )


@dlq.command()
@target_options
@selector_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def purge(ids: tuple[int, ...], queue: str | None, select_all: bool, yes: bool) -> None:
    """Delete dead jobs for good. Asks first, unless --yes.

    \b
    Example:
      crawlq dlq purge --queue pages --yes
    """
    where = dead_filter("purge", ids, queue, select_all)
    with open_app() as app:
        count = len(app.store.job_list(where))
        if count == 0:
            click.echo("purged 0 dead jobs: none match")
            return
        if not yes:
            click.confirm(f"Delete {_plural(count)} for good?", abort=True, err=True)
        purged = app.store.job_purge(where)
    click.echo(f"purged {_plural(purged)}")
