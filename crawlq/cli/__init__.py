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

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


COMMANDS = {
    "crawl": "crawlq.cli.crawl:crawl",
    "crawl-export": "crawlq.cli.crawl:crawl_export",
    "worker": "crawlq.cli.worker:worker",
    "workers": "crawlq.cli.workers:workers",
    "schedule": "crawlq.cli.schedule:schedule",
    "periodic": "crawlq.cli.periodic:periodic",
    "stats": "crawlq.cli.stats:stats",
    "jobs": "crawlq.cli.jobs:jobs",
    "job": "crawlq.cli.jobs:job",
    "cancel": "crawlq.cli.jobs:cancel",
    "reschedule": "crawlq.cli.jobs:reschedule",
    "prune": "crawlq.cli.jobs:prune",
    "dlq": "crawlq.cli.dlq:dlq",
    "crawls": "crawlq.cli.crawls:crawls",
    "crawl-status": "crawlq.cli.crawls:crawl_status",
    "crawl-pause": "crawlq.cli.crawls:crawl_pause",
    "crawl-resume": "crawlq.cli.crawls:crawl_resume",
    "crawl-cancel": "crawlq.cli.crawls:crawl_cancel",
    "crawl-delete": "crawlq.cli.crawls:crawl_delete",
    "limit": "crawlq.cli.limits:limit",
    "web": "crawlq.cli.web:web",
}
"""Each command and where it lives (``module:attribute``). A command's module is imported
when the command runs (or ``--help`` lists it): ``crawlq worker`` does not load the
crawler's or the web server's dependencies."""


@click.group("crawlq", cls=CrawlqGroup, commands_from=COMMANDS, context_settings=CONTEXT_SETTINGS)
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


def main() -> None:
    """Entry point of the ``crawlq`` console script and of ``python -m crawlq``."""
    cli.main(prog_name="crawlq")


__all__ = ["cli", "main"]
