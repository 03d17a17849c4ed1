"""``crawlq jobs``, ``job``, ``cancel`` and ``prune``: look at jobs and act on them."""

from __future__ import annotations

import json
from datetime import datetime

import click

from crawlq.cli.common import json_option, open_app, target_options
from crawlq.cli.output import (
    cell,
    console,
    human_age,
    iso_local,
    job_to_dict,
    print_jobs,
    print_json,
    table,
)
from crawlq.cli.params import duration_option, when_options
from crawlq.exceptions import JobEnded, WaitTimeout
from crawlq.jobs import Job, JobState
from crawlq.results import result_of
from crawlq.stores.base import JobFilter

DEFAULT_LIMIT = 50

limit_option = click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    metavar="N",
    help="Show at most this many jobs.",
)
after_id_option = click.option(
    "--after-id",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="ID",
    help="Only jobs with a larger id: the next page of a listing.",
)


@click.command()
@target_options
@click.option("--queue", metavar="QUEUE", help="Only jobs of this queue.")
@click.option(
    "--state",
    type=click.Choice([s.value for s in JobState]),
    help="Only jobs in this state.",
)
@click.option("--task", metavar="TASK", help="Only jobs of this task (its registered name).")
@click.option("--key", metavar="KEY", help="Only jobs with this unique key.")
@click.option("--crawl", type=click.IntRange(min=1), metavar="ID", help="Only jobs of this crawl.")
@click.option("--limit-key", metavar="KEY", help="Only jobs of this limit key (a host).")
@limit_option
@after_id_option
@json_option
def jobs(
    queue: str | None,
    state: str | None,
    task: str | None,
    key: str | None,
    crawl: int | None,
    limit_key: str | None,
    limit: int,
    after_id: int,
    as_json: bool,
) -> None:
    """List jobs, oldest first.

    Shows id, queue, task, state, attempts/max_attempts, priority, key, run_at (local
    time) and the last line of the last error; --json shows every field.

    \b
    Example:
      crawlq jobs --queue pages --state pending --limit 20
      crawlq jobs --crawl 7 --limit-key example.com
    """
    where = JobFilter(
        queue=queue,
        task=task,
        key=key,
        crawl=crawl,
        limit_key=limit_key,
        state=None if state is None else JobState(state),
        limit=limit,
        after_id=after_id,
    )
    with open_app() as app:
        found = app.store.job_list(where)
    print_jobs(found, as_json=as_json, limit=limit)


def _detail_rows(job: Job) -> list[tuple[str, object]]:
    return [
        ("id", job.id),
        ("queue", job.queue),
        ("task", job.task),
        ("state", job.state.value),
        ("args", json.dumps(job.args, ensure_ascii=False)),
        ("kwargs", json.dumps(job.kwargs, ensure_ascii=False)),
        ("key", job.key),
        ("priority", job.priority),
        ("run at", iso_local(job.run_at)),
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("lease", f"{job.lease_seconds:g} s"),
        ("timeout", None if job.timeout is None else human_age(job.timeout)),
        ("worker", job.worker_id),
        ("lease expires", iso_local(job.lease_expires_at)),
        ("dead reason", job.dead_reason),
        ("created", iso_local(job.created_at)),
        ("started", iso_local(job.started_at)),
        ("finished", iso_local(job.finished_at)),
    ]


class _Dead(click.ClickException):
    """``crawlq job ID --wait``: the job is dead."""

    exit_code = 3


class _Cancelled(click.ClickException):
    """``crawlq job ID --wait``: the job was cancelled."""

    exit_code = 4


class _TimedOut(click.ClickException):
    """``crawlq job ID --wait --timeout``: the job did not finish in time (as timeout(1))."""

    exit_code = 124


_ENDED = {JobState.DEAD: _Dead, JobState.CANCELLED: _Cancelled}


@click.command()
@target_options
@click.argument("job_id", metavar="ID", type=int)
@json_option
@click.option(
    "--wait",
    is_flag=True,
    help="Block until the job is done, dead or cancelled (woken by the store's "
    "notification of its end), then show it. Exits 0 done, 3 dead, 4 cancelled.",
)
@duration_option(
    "--timeout",
    help="With --wait: give up after this long (seconds, or 90s, 15m, 2h), exit 124. "
    "Default: wait as long as it takes.",
)
def job(job_id: int, as_json: bool, wait: bool, timeout: float | None) -> None:
    """Show one job in full.

    Every field, the result of a done job and the last error (with its traceback).

    Exits 1 if there is no such job (or it was pruned). With --wait: 0 once the job is
    done, 3 if it is dead, 4 if it was cancelled, 124 if it did not finish within
    --timeout.

    \b
    Examples:
      crawlq job 42
      crawlq job 42 --wait --timeout 10m --json | jq .result
    """
    if timeout is not None and not wait:
        raise click.UsageError("--timeout goes with --wait")
    with open_app() as app:
        if wait:
            try:
                found: Job | None = app.wait(job_id, timeout=timeout)
            except WaitTimeout as exc:
                raise _TimedOut(str(exc)) from exc
        else:
            found = app.get_job(job_id)
    if found is None:
        raise click.ClickException(f"no job with id {job_id} (it may have been pruned)")
    _show_job(found, as_json)
    if wait and found.state in _ENDED:
        try:
            result_of(found)
        except JobEnded as exc:
            raise _ENDED[found.state](str(exc)) from exc


def _show_job(found: Job, as_json: bool) -> None:
    if as_json:
        print_json(job_to_dict(found))
        return
    out = table("FIELD", "VALUE")
    out.show_header = False
    for name, value in _detail_rows(found):
        out.add_row(cell(name), cell(value))
    console().print(out)
    if found.result is not None:
        click.echo("\nresult:")
        click.echo(json.dumps(found.result, indent=2, ensure_ascii=False))
    if found.last_error:
        click.echo("\nlast error:")
        click.echo(found.last_error.rstrip())


@click.command()
@target_options
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True, type=int)
def cancel(job_ids: tuple[int, ...]) -> None:
    """Cancel pending or running jobs.

    A running job's worker finds out at its next heartbeat and drops the outcome. Jobs
    that already finished, or do not exist, are not cancellable and are listed as such.

    \b
    Example:
      crawlq cancel 12 13 14
    """
    with open_app() as app:
        cancelled = app.cancel(*job_ids)
    rest = sorted(set(job_ids) - set(cancelled))
    click.echo(f"cancelled {len(cancelled)}: {', '.join(map(str, cancelled)) or '-'}")
    if rest:
        click.echo(
            f"not cancellable (finished, or no such job) {len(rest)}: " + ", ".join(map(str, rest))
        )


@click.command()
@target_options
@duration_option(
    "--older-than",
    required=True,
    help="Delete done and cancelled jobs that finished more than this long ago "
    "(seconds, or 90s, 15m, 2h, 7d).",
)
def prune(older_than: float) -> None:
    """Delete done and cancelled jobs that finished long ago.

    Dead jobs are kept: see crawlq dlq purge.

    Workers prune on their own (crawlq worker --retention); this is for stores no worker
    is running on.

    \b
    Example:
      crawlq prune --older-than 7d
    """
    with open_app() as app:
        removed = app.store.job_prune(retention=older_than)
    click.echo(f"pruned {removed} done or cancelled jobs finished over {human_age(older_than)} ago")


@click.command()
@target_options
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True, type=int)
@when_options
def reschedule(job_ids: tuple[int, ...], delay: float | None, at: datetime | None) -> None:
    """Move pending jobs to run now, after --delay, or --at a time.

    The job keeps its arguments, priority and attempts; only its run_at changes. A job
    of a paused crawl stays held, and a job of a limit key still waits for its key.
    Running and finished jobs are not moved and are listed as such.

    \b
    Example:
      crawlq reschedule 12 13
      crawlq reschedule 12 --delay 2h
      crawlq reschedule 12 --at 2030-01-31T09:30:00+00:00
    """
    if delay is not None and at is not None:
        raise click.UsageError("give --delay or --at, not both")
    with open_app() as app:
        moved = app.reschedule(*job_ids, delay=delay, at=at)
    rest = sorted(set(job_ids) - set(moved))
    click.echo(f"rescheduled {len(moved)}: {', '.join(map(str, moved)) or '-'}")
    if rest:
        click.echo(
            f"not pending (running, finished, or no such job) {len(rest)}: "
            + ", ".join(map(str, rest))
        )
