"""``crawlq worker``: run an app's jobs until stopped, or until idle with ``--burst``."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import click

from crawlq.cli.common import app_reference, open_app, target_options
from crawlq.cli.params import duration_option, prefetch_count, size
from crawlq.config import (
    DEFAULT_CONCURRENCY,
    DEFAULT_POLL_TIMEOUT,
    DEFAULT_RETENTION_SECONDS,
    DEFAULT_SHUTDOWN_GRACE,
    PREFETCH_AUTO,
    RUNTIME_NAMES,
    WorkerSettings,
)
from crawlq.crawler.standalone import APP_REF as STANDALONE_APP
from crawlq.crawler.tasks import install as install_crawler
from crawlq.crawler.tasks import preload as preload_crawler
from crawlq.worker.worker import Worker

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
EXIT_RESTART = 75
"""Exit code (EX_TEMPFAIL) of a worker that stopped itself to be restarted: a job's
thread ran past its timeout and would not stop."""


@contextmanager
def logging_to_stderr(level: str) -> Iterator[None]:
    """Send log records of ``level`` and above to stderr while the worker runs."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level.upper())
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


def summary(worker: Worker) -> str:
    return f"worker {worker.id} stopped: {worker.counters.describe()}"


@click.command()
@target_options
@click.option(
    "-q",
    "--queue",
    "queues",
    multiple=True,
    metavar="QUEUE",
    help="Take jobs from this queue; repeat for several.  [default: every queue of the app's "
    "tasks]",
)
@click.option(
    "-c",
    "--concurrency",
    type=int,
    metavar="N",
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    help="Slots: jobs running at once; at most 1024 (thread), 10000 (asyncio) or 256 "
    "(process) per worker.",
)
@click.option(
    "--prefetch",
    metavar="N|auto",
    default=PREFETCH_AUTO,
    show_default=True,
    callback=prefetch_count,
    help="Extra jobs claimed ahead of free slots, held leased until a slot frees up; auto: "
    "as many as the slots start within 10 ms by the run time of recent jobs, at most 3 per "
    "slot (none for long jobs).",
)
@duration_option(
    "--shutdown-grace",
    default=f"{DEFAULT_SHUTDOWN_GRACE:g}",
    help="Seconds running jobs get to finish after SIGTERM/SIGINT; then they are released.",
)
@duration_option(
    "--poll-timeout",
    default=f"{DEFAULT_POLL_TIMEOUT:g}",
    help="Longest wait between two claims when idle.",
)
@duration_option(
    "--retention",
    default=f"{DEFAULT_RETENTION_SECONDS / 86400:g}d",
    help="How long done and cancelled jobs are kept before the worker prunes them.",
)
@click.option(
    "--runtime",
    type=click.Choice(RUNTIME_NAMES),
    default="thread",
    show_default=True,
    help="How jobs run: thread (blocking I/O), asyncio (async def tasks, thousands in "
    "flight) or process (one child process per slot: CPU work, browsers; jobs over "
    "their timeout are killed).",
)
@click.option(
    "--max-jobs-per-child",
    type=click.IntRange(min=1),
    metavar="N",
    help="Process runtime: replace a child process after N jobs (between two jobs).",
)
@click.option(
    "--max-memory-per-child",
    type=str,
    callback=size,
    metavar="SIZE",
    help="Process runtime: replace a child process once its resident memory (with the "
    "processes it started, e.g. a browser) is above SIZE (e.g. 500MB, 2GiB), between two "
    "jobs.",
)
@click.option(
    "--burst",
    is_flag=True,
    help="Exit when nothing is left that can run without outside action: no job due, "
    "running, or held back by its limit key for at most a minute (min_interval, "
    "max_running, a short block); jobs due later (delay, at, backoff) stay pending.",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="Log records of this level and above go to stderr.",
)
def worker(
    queues: tuple[str, ...],
    concurrency: int,
    prefetch: int | Literal["auto"],
    shutdown_grace: float,
    poll_timeout: float,
    retention: float,
    runtime: str,
    max_jobs_per_child: int | None,
    max_memory_per_child: int | None,
    burst: bool,
    log_level: str,
) -> None:
    """Run the jobs of an app's tasks, and the built-in crawler's pages, until stopped.

    Without --app it runs only the pages of crawls made by `crawlq crawl --detach` (use
    --runtime asyncio for them, --runtime process for `--render` crawls: one browser per
    child process, recycled with --max-jobs-per-child and --max-memory-per-child).

    Every worker also fires the store's periodic schedules (`crawlq periodic`,
    @app.periodic; it stores its app's at start): each fire time once, whichever worker
    gets there first.

    The first SIGTERM or SIGINT (Ctrl-C) stops claiming and gives running jobs
    --shutdown-grace seconds to finish; a second one releases them at once. Released
    jobs go back to pending without using up an attempt. Exits 0 after a clean stop and
    prints what the worker did; exits 75 when it stopped itself to be restarted (thread
    runtime: a job's thread ran past its timeout and has not stopped a minute later).

    \b
    Example:
      crawlq worker --app myjobs:app --concurrency 8
      crawlq worker --store postgresql://db/crawl --runtime asyncio --concurrency 64
      crawlq worker --app myjobs:app --queue pages --queue feeds --burst
      crawlq worker --app myjobs:app --runtime asyncio --concurrency 1000
      crawlq worker --app myjobs:app --runtime process --concurrency 4 \\
          --max-jobs-per-child 20 --max-memory-per-child 1GiB
    """
    settings = WorkerSettings(
        queues=queues,
        concurrency=concurrency,
        prefetch=prefetch,
        shutdown_grace=shutdown_grace,
        poll_timeout=poll_timeout,
        burst=burst,
        retention=retention,
        runtime=runtime,
        max_jobs_per_child=max_jobs_per_child,
        max_memory_per_child=max_memory_per_child,
    )
    with open_app(create=True) as app, logging_to_stderr(log_level):
        install_crawler(app)
        app.setup(preload_crawler)
        running = Worker(app, settings, app_ref=app_reference() or STANDALONE_APP)
        running.run()
        click.echo(summary(running))
    if running.stuck:
        raise SystemExit(EXIT_RESTART)
