"""The ``crawlq`` command: ``main()`` and the assembly of its subcommands.

One module per subcommand group: ``crawl`` (crawl, crawl-export: the built-in
crawler), ``worker``, ``workers``, ``stats``, ``jobs`` (jobs, job,
cancel, reschedule, prune), ``dlq``, ``schedule``, ``crawls`` (crawls, crawl-status,
crawl-pause, crawl-resume, crawl-cancel, crawl-delete), ``limits`` (limit set, default,
block, show) and ``periodic`` (periodic add, list, remove, pause, resume, fires).
``common`` holds the ``--app``/``--store`` target and error handling, ``output`` the
tables and JSON, ``params`` the option types.
cli/ is the only part of crawlq that reads environment variables (``CRAWLQ_APP`` and
``CRAWLQ_STORE``, in ``common``).
"""

from __future__ import annotations

import click

from crawlq.cli.common import CrawlqGroup, Target, group_target_options
from crawlq.cli.crawl import crawl, crawl_export
from crawlq.cli.crawls import (
    crawl_cancel,
    crawl_delete,
    crawl_pause,
    crawl_resume,
    crawl_status,
    crawls,
)
from crawlq.cli.dlq import dlq
from crawlq.cli.jobs import cancel, job, jobs, prune, reschedule
from crawlq.cli.limits import limit
from crawlq.cli.periodic import periodic
from crawlq.cli.schedule import schedule
from crawlq.cli.stats import stats
from crawlq.cli.web import web
from crawlq.cli.worker import worker
from crawlq.cli.workers import workers

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group("crawlq", cls=CrawlqGroup, context_settings=CONTEXT_SETTINGS)
@group_target_options
@click.version_option(package_name="crawlq", prog_name="crawlq")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """crawlq: a durable job queue for web scraping.

    --app and --store can be given here or to each command (the command's value wins).
    Every command works with only a store (default: sqlite:///crawlq.db); worker runs
    the built-in crawler's pages, plus the tasks of --app when given.

    \b
    Example:
      crawlq crawl https://example.com/ --max-pages 100 -o pages.jsonl
      export CRAWLQ_STORE=sqlite:///jobs.db
      crawlq schedule fetch --app myjobs:app --args '["https://example.com"]'
      crawlq worker --app myjobs:app --concurrency 8
      crawlq stats
    """
    ctx.ensure_object(Target)


for command in (
    crawl,
    crawl_export,
    worker,
    workers,
    schedule,
    periodic,
    stats,
    jobs,
    job,
    cancel,
    reschedule,
    prune,
    dlq,
    crawls,
    crawl_status,
    crawl_pause,
    crawl_resume,
    crawl_cancel,
    crawl_delete,
    limit,
    web,
):
    cli.add_command(command)


def main() -> None:
    """Entry point of the ``crawlq`` console script and of ``python -m crawlq``."""
    cli.main(prog_name="crawlq")


__all__ = ["cli", "main"]
