"""``crawlq crawls``, ``crawl-status``, ``crawl-pause``, ``crawl-resume``, ``crawl-cancel``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click
from rich.table import Table

from crawlq.app import App
from crawlq.cli.common import json_option, open_app, target_options
from crawlq.cli.output import cell, console, human_age, iso_utc, print_json, print_rows, table
from crawlq.cli.watch import check_watch, run_watch, stamp, watch_option
from crawlq.crawls import CrawlInfo, CrawlState
from crawlq.payload import MAX_EXACT
from crawlq.types import Timestamp


def crawl_to_dict(c: CrawlInfo) -> dict[str, object]:
    return {
        "id": c.id,
        "name": c.name,
        "state": c.state.value,
        "meta": c.meta,
        "pending": c.pending,
        "running": c.running,
        "done": c.done,
        "dead": c.dead,
        "cancelled": c.cancelled,
        "seen": c.seen,
        "created_at": iso_utc(c.created_at),
        "finished_at": iso_utc(c.finished_at),
        "on_finish_job": c.on_finish_job,
        "limits": None
        if c.limits is None
        else {"max_running": c.limits.max_running, "min_interval": c.limits.min_interval},
    }


def progress(c: CrawlInfo) -> str:
    """Ended jobs out of all the crawl has had so far (the total grows while it runs)."""
    ended = c.done + c.dead + c.cancelled
    total = ended + c.outstanding
    return "-" if total == 0 else f"{ended}/{total} ({100 * ended / total:.0f}%)"


def _age(c: CrawlInfo, now: Timestamp) -> str:
    end = c.finished_at if c.finished_at is not None else now
    return human_age(end - c.created_at)


@click.command()
@target_options
@click.option(
    "--state",
    type=click.Choice([s.value for s in CrawlState]),
    help="Only crawls in this state.",
)
@click.option("--limit", type=click.IntRange(min=1, max=MAX_EXACT), default=100, show_default=True)
@json_option
@watch_option
def crawls(state: str | None, limit: int, as_json: bool, watch: float | None) -> None:
    """List crawls with their progress, oldest first.

    \b
    PENDING   jobs not yet started (due, scheduled, waiting for their limit key, held)
    RUNNING   jobs running now
    DONE, DEAD, CANCELLED  jobs that ended so
    SEEN      URLs (keys) in the crawl's seen set
    PROGRESS  ended jobs out of every job the crawl has had so far: the total grows
              while pages add pages
    TOOK      from creation to its end (or until now while open)

    \b
    Example:
      crawlq --store sqlite:///crawl.db crawls --state running
      crawlq crawls --watch 5
    """
    check_watch(watch, as_json)
    wanted = None if state is None else CrawlState(state)
    with open_app() as app:
        if watch is not None:
            run_watch(
                watch,
                lambda: stamp(crawls_table(app.crawls(state=wanted, limit=limit), app.store.now())),
            )
            return
        rows = app.crawls(state=wanted, limit=limit)
        now = app.store.now()
    print_rows(
        rows,
        as_json=as_json,
        to_dict=crawl_to_dict,
        render=lambda shown: crawls_table(shown, now),
        empty="no crawls" + (f" in state {state}" if state else ""),
    )


def crawls_table(rows: Sequence[CrawlInfo], now: Timestamp) -> Table:
    out = table(
        ">ID",
        "NAME",
        "STATE",
        ">PENDING",
        ">RUNNING",
        ">DONE",
        ">DEAD",
        ">CANCELLED",
        ">SEEN",
        ">PROGRESS",
        ">TOOK",
    )
    for c in rows:
        out.add_row(
            cell(c.id),
            cell(c.name),
            cell(c.state.value),
            *(cell(n) for n in (c.pending, c.running, c.done, c.dead, c.cancelled, c.seen)),
            cell(progress(c)),
            cell(_age(c, now)),
        )
    return out


def _show(c: CrawlInfo, now: Timestamp) -> Table:
    out = table("FIELD", "VALUE", title=f"crawl {c.id}")
    for name, value in (
        ("name", c.name),
        ("state", c.state.value),
        ("pending", c.pending),
        ("running", c.running),
        ("done", c.done),
        ("dead", c.dead),
        ("cancelled", c.cancelled),
        ("seen", c.seen),
        ("progress", progress(c)),
        ("created", iso_utc(c.created_at)),
        ("finished", iso_utc(c.finished_at)),
        ("took", _age(c, now)),
        ("on_finish job", c.on_finish_job),
        ("meta", c.meta or None),
    ):
        out.add_row(cell(name), cell(value))
    return out


@click.command("crawl-status")
@target_options
@click.argument("crawl_id", type=int, metavar="ID")
@json_option
@watch_option
def crawl_status(crawl_id: int, as_json: bool, watch: float | None) -> None:
    """Show one crawl: state, counters, progress, times.

    Exit code 0 whatever its state; 1 if there is no such crawl. --json prints the
    fields of `crawlq crawls --json` for this crawl.

    \b
    Example:
      crawlq --store postgresql://db/jobs crawl-status 7
      crawlq crawl-status 7 --watch
    """
    check_watch(watch, as_json)
    with open_app() as app:
        info = app.get_crawl(crawl_id)
        if watch is not None:
            run_watch(watch, lambda: stamp(_show(app.get_crawl(crawl_id), app.store.now())))
            return
        now = app.store.now()
    if as_json:
        print_json(crawl_to_dict(info))
    else:
        console().print(_show(info, now))


def _change(name: str, action: Callable[[App, int], CrawlInfo], doc: str) -> click.Command:
    @click.command(name, help=doc)
    @target_options
    @click.argument("crawl_id", type=int, metavar="ID")
    def command(crawl_id: int) -> None:
        with open_app() as app:
            info = action(app, crawl_id)
        click.echo(f"crawl {info.id} ({info.name}) is {info.state.value}")

    return command


crawl_pause = _change(
    "crawl-pause",
    App.pause_crawl,
    """Pause a crawl: its pending jobs are held, on every worker, until crawl-resume.

    Running jobs finish; the jobs they add are held too. Pausing a paused crawl is
    allowed; a finished or cancelled one is an error (exit 1).

    \b
    Example:
      crawlq --store postgresql://db/jobs crawl-pause 7""",
)
crawl_resume = _change(
    "crawl-resume",
    App.resume_crawl,
    """Resume a paused crawl: its held jobs can be claimed again.

    \b
    Example:
      crawlq --store postgresql://db/jobs crawl-resume 7""",
)
crawl_cancel = _change(
    "crawl-cancel",
    App.cancel_crawl,
    """Cancel a crawl: its pending jobs are cancelled, its on_finish task never runs.

    Running jobs finish but add no pages. A finished crawl cannot be cancelled (exit 1).

    \b
    Example:
      crawlq --store postgresql://db/jobs crawl-cancel 7""",
)


@click.command("crawl-delete")
@target_options
@click.argument("crawl_id", type=int, metavar="ID")
@click.option(
    "--force",
    is_flag=True,
    help="Delete a running or paused crawl too: it is cancelled first, its running pages "
    "finish but their outcome is dropped.",
)
def crawl_delete(crawl_id: int, force: bool) -> None:
    """Delete a crawl with its jobs, its page records and its seen set, from the store.

    A running or paused crawl is refused (exit 1) unless --force. The queue totals keep
    counting the deleted jobs. Files the crawl wrote (-o, --warc) are not touched.

    \b
    Example:
      crawlq crawl-delete 7
      crawlq --store postgresql://db/jobs crawl-delete 7 --force
    """
    with open_app() as app:
        info = app.delete_crawl(crawl_id, force=force)
    ended = info.done + info.dead + info.cancelled
    click.echo(
        f"crawl {info.id} ({info.name}) deleted: {ended + info.outstanding:,} jobs, "
        f"{info.seen:,} seen URLs and its records"
    )
