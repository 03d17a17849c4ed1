"""``crawlq stats``: counts per queue, read without scanning jobs."""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich.table import Table

from crawlq.cli.common import json_option, open_app, target_options
from crawlq.cli.output import cell, human_age, iso_local, print_rows, table
from crawlq.cli.watch import check_watch, run_watch, stamp, watch_option
from crawlq.config import store_command
from crawlq.jobs import QueueStats
from crawlq.periodic import PeriodicInfo


def stats_to_dict(s: QueueStats) -> dict[str, object]:
    return {
        "queue": s.queue,
        "due": s.due,
        "scheduled": s.scheduled,
        "waiting": s.waiting,
        "held": s.held,
        "running": s.running,
        "done": s.done,
        "dead": s.dead,
        "cancelled": s.cancelled,
        "oldest_due_age": s.oldest_due_age,
        "done_last_minute": s.done_last_minute,
    }


@click.command()
@target_options
@json_option
@watch_option
def stats(as_json: bool, watch: float | None) -> None:
    """Show counts for every queue.

    \b
    due          pending jobs whose run_at has come (the past-due count)
    scheduled    pending jobs due later
    waiting      pending jobs held back by their limit key (see `crawlq limit`)
    held         pending jobs of paused crawls
    running      jobs leased by a worker
    done, dead, cancelled
    oldest due   how long the oldest due job has been waiting
    done/min     jobs done in the last minute

    --json prints a list of objects with the fields queue, due, scheduled, waiting, held,
    running, done, dead, cancelled, oldest_due_age (seconds or null) and done_last_minute.
    The table is followed, when the store holds periodic schedules, by one line: how many,
    how many paused, and the next fire time (`crawlq periodic list` shows each).

    \b
    Example:
      crawlq --store sqlite:///jobs.db stats
      crawlq stats --watch 1
    """
    check_watch(watch, as_json)
    with open_app() as app:
        if watch is not None:
            run_watch(watch, lambda: stamp(stats_table(app.stats())))
            return
        rows = app.stats()
        schedules = [] if as_json else app.schedules.stored()
        hint = store_command("periodic list", app.store_url)
    print_rows(
        rows,
        as_json=as_json,
        to_dict=stats_to_dict,
        render=stats_table,
        empty="no queues yet: nothing has been scheduled in this store",
    )
    if schedules:
        click.echo(periodic_line(schedules, hint))


def periodic_line(schedules: Sequence[PeriodicInfo], hint: str) -> str:
    """One line on the store's periodic schedules: how many, how many paused, the next
    fire time of the running ones, and the command that lists them."""
    paused = sum(1 for s in schedules if s.paused)
    running = [s.next_fire for s in schedules if not s.paused]
    next_fire = f"; next fire {iso_local(min(running))}" if running else ""
    return f"periodic schedules: {len(schedules)} ({paused} paused){next_fire}; {hint} lists them"


def stats_table(rows: Sequence[QueueStats]) -> Table:
    out = table(
        "QUEUE",
        ">DUE",
        ">SCHEDULED",
        ">WAITING",
        ">HELD",
        ">RUNNING",
        ">DONE",
        ">DEAD",
        ">CANCELLED",
        ">OLDEST DUE",
        ">DONE/MIN",
    )
    for s in rows:
        out.add_row(
            cell(s.queue),
            *(
                cell(n)
                for n in (
                    s.due,
                    s.scheduled,
                    s.waiting,
                    s.held,
                    s.running,
                    s.done,
                    s.dead,
                    s.cancelled,
                )
            ),
            cell(human_age(s.oldest_due_age)),
            cell(s.done_last_minute),
        )
    return out
