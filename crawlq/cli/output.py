"""How commands print: rich tables for people, JSON for scripts, times and ages."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from crawlq.jobs import Job
from crawlq.types import Timestamp

T = TypeVar("T")

PIPE_WIDTH = 200
"""Columns of a table written to a pipe or file, so that lines are not wrapped at 80."""


def console() -> Console:
    """A console on the current stdout; wide when stdout is not a terminal."""
    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=PIPE_WIDTH)
    return out


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def print_rows(
    rows: Sequence[T],
    *,
    as_json: bool,
    to_dict: Callable[[T], Any],
    render: Callable[[Sequence[T]], Table],
    empty: str,
) -> bool:
    """A listing as JSON, as a table, or ``empty`` on stderr when there is nothing to list;
    whether a table was printed (the caller may add a paging hint)."""
    if as_json:
        print_json([to_dict(row) for row in rows])
        return False
    if not rows:
        click.echo(empty, err=True)
        return False
    console().print(render(rows))
    return True


def table(*columns: str, title: str | None = None) -> Table:
    """A plain table; columns named with a leading ">" are right-aligned numbers."""
    out = Table(title=title, box=None, header_style="bold", pad_edge=False)
    for name in columns:
        if name.startswith(">"):
            out.add_column(name[1:], justify="right", no_wrap=True)
        else:
            out.add_column(name, overflow="fold")
    return out


def cell(value: object) -> Text:
    """A table cell that shows ``value`` as it is (no rich markup, "-" for None)."""
    return Text("-" if value is None or value == "" else str(value))


# -- times ---------------------------------------------------------------------------


def iso_utc(ts: Timestamp | None) -> str | None:
    """An epoch time as ISO 8601 in UTC, for JSON."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds")


def iso_local(ts: Timestamp | None) -> str | None:
    """An epoch time as ISO 8601 in local time with its offset, for people."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def human_age(seconds: float | None) -> str:
    """``3.2 s``, ``4.5 min``, ``2.0 h``, ``3.1 d``; ``-`` for None."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


# -- jobs ----------------------------------------------------------------------------


def first_line(text: str | None) -> str | None:
    """The most telling line of an error: a traceback's last non-empty line."""
    if not text:
        return None
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else None


def job_to_dict(job: Job) -> dict[str, Any]:
    """Every field of a job as JSON values; times as ISO 8601 in UTC."""
    return {
        "id": job.id,
        "queue": job.queue,
        "task": job.task,
        "state": job.state.value,
        "args": job.args,
        "kwargs": job.kwargs,
        "key": job.key,
        "priority": job.priority,
        "run_at": iso_utc(job.run_at),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "lease_seconds": job.lease_seconds,
        "timeout": job.timeout,
        "worker_id": job.worker_id,
        "lease_expires_at": iso_utc(job.lease_expires_at),
        "last_error": job.last_error,
        "dead_reason": job.dead_reason,
        "result": job.result,
        "created_at": iso_utc(job.created_at),
        "started_at": iso_utc(job.started_at),
        "finished_at": iso_utc(job.finished_at),
        "crawl_id": job.crawl_id,
        "limit_key": job.limit_key,
    }


def jobs_table(jobs: Sequence[Job], *, dead: bool = False) -> Table:
    """One row per job; ``dead`` shows why and when it died instead of run_at."""
    when, why = ("FINISHED", "REASON") if dead else ("RUN AT", "STATE")
    out = table(">ID", "QUEUE", "TASK", why, ">ATTEMPTS", ">PRI", "KEY", when, "LAST ERROR")
    for job in jobs:
        out.add_row(
            cell(job.id),
            cell(job.queue),
            cell(job.task),
            cell(job.dead_reason if dead else job.state.value),
            cell(f"{job.attempts}/{job.max_attempts}"),
            cell(job.priority),
            cell(job.key),
            cell(iso_local(job.finished_at if dead else job.run_at)),
            cell(first_line(job.last_error)),
        )
    return out


def print_jobs(jobs: Sequence[Job], *, as_json: bool, limit: int, dead: bool = False) -> None:
    """Print a listing, and on stderr how to see the next page when it is full."""
    shown = print_rows(
        jobs,
        as_json=as_json,
        to_dict=job_to_dict,
        render=lambda rows: jobs_table(rows, dead=dead),
        empty="no jobs match",
    )
    if shown and len(jobs) == limit:
        click.echo(f"showing {limit} jobs; the next page: --after-id {jobs[-1].id}", err=True)
