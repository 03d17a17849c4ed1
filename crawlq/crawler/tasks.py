"""The crawler's tasks as every worker registers them: their names, queue and options.

Every ``crawlq worker`` can run any crawl's pages, so each one registers ``crawlq.page``
and ``crawlq.recrawl``. Registering them costs nothing: their bodies, and with them the
crawler's HTTP client, parsers and WARC writer, are imported by the first job that runs
one (``crawlq.crawler.pages``, ``crawlq.crawler.recurring``). A worker that never gets a
crawl's job never loads them.

A host's politeness is counted from its jobs' claims, so a page whose fetch waits for that
import reaches the site later than its claim, closer to the next one. ``preload`` spares
the crawls running when a worker starts this: the worker imports the page task's body
then. It is a set-up (``crawlq.setups``), so each child of the process runtime (``--render``
crawls) does the same when it starts, recycled children included, before its first job.
A crawl started later meets it once per process, on its first page there.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from crawlq.crawls import CrawlState
from crawlq.exceptions import StoreError

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.context import JobContext
    from crawlq.tasks import Task

__all__ = ["PAGE_QUEUE", "PAGE_TASK", "RECRAWL_TASK", "install", "preload", "register_page"]

PAGE_QUEUE = "crawl"
"""The queue of every crawl's jobs."""
PAGE_TASK = "crawlq.page"
RECRAWL_TASK = "crawlq.recrawl"


async def crawl_page(
    ctx: JobContext,
    url: str,
    depth: int = 0,
    referrer: str | None = None,
    lastmod: str | None = None,
    sitemap: int | None = None,
) -> None:
    """The ``crawlq.page`` task: ``crawlq.crawler.pages.crawl_page``."""
    from crawlq.crawler import pages

    await pages.crawl_page(ctx, url, depth, referrer, lastmod, sitemap)


def recrawl(ctx: JobContext, name: str, meta: dict[str, Any]) -> int | None:
    """The ``crawlq.recrawl`` task: ``crawlq.crawler.recurring.recrawl``."""
    from crawlq.crawler import recurring

    return recurring.recrawl(ctx, name, meta)


def install(app: App) -> Task[Any, Any]:
    """Register ``crawlq.page`` and ``crawlq.recrawl`` on ``app`` (once, as a set-up:
    the process runtime's children register them again), and return the first."""
    app.setup(register_page)
    return app.get_task(PAGE_TASK)


def register_page(app: App) -> None:
    """The set-up ``install`` runs."""
    if RECRAWL_TASK not in app.tasks:
        app.task(name=RECRAWL_TASK, queue=PAGE_QUEUE, max_attempts=5)(recrawl)
    if PAGE_TASK not in app.tasks:
        app.task(name=PAGE_TASK, queue=PAGE_QUEUE, max_attempts=10, lease=60.0)(crawl_page)


def preload(app: App) -> bool:
    """Import the page task's body now if a crawl of ``app``'s store is running (see the
    module's docstring); whether it did. A store that cannot be read now leaves it to
    the first page. Run it as a set-up, ``app.setup(preload)``, so that the process
    runtime's children run it too."""
    try:
        running = app.store.crawl_list(state=CrawlState.RUNNING, limit=1)
    except StoreError:
        return False
    if running:
        importlib.import_module("crawlq.crawler.pages")
    return bool(running)
