"""The crawler's tasks as every worker registers them: their names, queue and options.

Every ``crawlq worker`` can run any crawl's pages, so each one registers ``crawlq.page``
and ``crawlq.recrawl``. Registering them costs nothing: their bodies, and with them the
crawler's HTTP client, parsers and WARC writer, are imported by the first job that runs
one (``crawlq.crawler.pages``, ``crawlq.crawler.recurring``). A worker that never gets a
crawl's job never loads them.

A host's politeness is counted from its jobs' claims, so a page whose fetch waits for that
import reaches the site later than its claim, closer to the next one. ``preload`` spares
the crawler's crawls running when a worker starts this: the worker imports the page
task's body then. Crawls of other tasks (``app.crawl`` of the user's own) do not count:
their worker never needs the crawler. It is a set-up (``crawlq.setups``), so each child
of the process runtime (``--render`` crawls) does the same when it starts, recycled
children included, before its first job.
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

__all__ = [
    "CONFIG_META_KEY",
    "PAGE_QUEUE",
    "PAGE_TASK",
    "RECRAWL_TASK",
    "install",
    "preload",
    "register_page",
]

PAGE_QUEUE = "crawl"
"""The queue of every crawl's jobs."""
PAGE_TASK = "crawlq.page"
RECRAWL_TASK = "crawlq.recrawl"
CONFIG_META_KEY = "crawler"
"""The key of a crawl's meta under which ``crawlq crawl`` keeps its settings: a crawl
with it is the crawler's (``crawlq.crawler.config``)."""
PRELOAD_LOOKS, PRELOAD_PAGE = 1_000, 100
"""Running crawls ``preload`` reads at most, looking for one of the crawler's, and per
call (crawls are paged as ``crawlq.crawler.recurring.open_crawl`` pages them)."""


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
    """Import the page task's body now if one of the crawler's crawls (its meta has
    ``CONFIG_META_KEY``) is running in ``app``'s store, among the first
    ``PRELOAD_LOOKS`` running crawls (see the module's docstring); whether it did. A
    store that cannot be read now leaves it to the first page. Run it as a set-up,
    ``app.setup(preload)``, so that the process runtime's children run it too."""
    after = 0
    for _ in range(PRELOAD_LOOKS // PRELOAD_PAGE):
        try:
            batch = app.store.crawl_list(
                state=CrawlState.RUNNING, limit=PRELOAD_PAGE, after_id=after
            )
        except StoreError:
            return False
        if any(CONFIG_META_KEY in crawl.meta for crawl in batch):
            importlib.import_module("crawlq.crawler.pages")
            return True
        if len(batch) < PRELOAD_PAGE:
            return False
        after = batch[-1].id
    return False
