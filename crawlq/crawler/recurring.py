"""Recurring crawls: a periodic schedule (``crawlq.periodic``) whose job starts a new
crawl with the same settings (``crawlq crawl URL --every 6h``, or ``recrawl_every``).

The schedule's job is ``crawlq.recrawl`` (queue ``crawl``), run by any worker of the
built-in crawler: it creates the crawl, as ``crawlq crawl --detach`` would, and the
workers fetch its pages. While an earlier crawl of the same name and settings is still
open (running or paused), a fire starts nothing: crawls are never stacked. With
``revisit_changed`` each new crawl revisits only what changed since the one before
(``crawlq.crawler.revisit``).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from crawlq.crawler.config import CONFIG_META_KEY, CrawlConfig, stored_settings
from crawlq.crawler.pages import page_spec, sitemap_spec
from crawlq.crawler.revisit import PREVIOUS_META_KEY, previous_crawl
from crawlq.crawler.tasks import RECRAWL_TASK, install
from crawlq.crawls import OPEN_CRAWL_STATES, CrawlInfo
from crawlq.jobs import Outcome
from crawlq.periodic import Periodic

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.context import JobContext

logger = logging.getLogger("crawlq.crawler")


def schedule_name(name: str) -> str:
    """The periodic schedule of the recurring crawl named ``name``."""
    return f"crawl:{name}"


def open_crawl(app: App, name: str, meta: dict[str, Any]) -> CrawlInfo | None:
    """The open crawl named ``name`` with these settings, if there is one."""
    wanted = meta.get(CONFIG_META_KEY)
    after = 0
    while True:
        batch = app.store.crawl_list(limit=500, after_id=after)
        for crawl in batch:
            if (
                crawl.state in OPEN_CRAWL_STATES
                and crawl.name == name
                and stored_settings(crawl.meta) == wanted
            ):
                return crawl
        if len(batch) < 500:
            return None
        after = batch[-1].id


def start_crawl(app: App, name: str, config: CrawlConfig) -> CrawlInfo:
    """A new crawl of ``config``, its start URLs scheduled; with ``revisit_changed`` its
    meta names the previous crawl of the same name and settings, if there is one
    (``crawlq.crawler.revisit``)."""
    start = [page_spec(app, url) for url in config.start_urls]
    start += [sitemap_spec(app, url) for url in config.sitemaps]
    meta = config.to_meta()
    if config.revisit_changed:
        previous = previous_crawl(app, name, config)
        if previous is not None:
            meta[PREVIOUS_META_KEY] = previous
    return app.crawl(name, start, meta=meta, limits=config.limits)


def recrawl(ctx: JobContext, name: str, meta: dict[str, Any]) -> int | None:
    """The job of a recurring crawl's fire time: start a new crawl named ``name`` with
    the settings ``meta`` (``CrawlConfig.to_meta``); its id, or None while an earlier one
    is still open."""
    app = ctx.app
    config = CrawlConfig.from_meta(meta)
    earlier = open_crawl(app, name, config.to_meta())
    if earlier is not None:
        logger.info("recurring crawl %s: crawl %d is still %s, none started", name, earlier.id,
                    earlier.state)  # fmt: skip
        return None
    crawl = start_crawl(app, name, config)
    logger.info("recurring crawl %s: started crawl %d", name, crawl.id)
    return crawl.id


def recrawl_every(
    app: App,
    config: CrawlConfig,
    *,
    name: str,
    every: float | timedelta | str | None = None,
    cron: str | None = None,
    tz: str = "UTC",
) -> tuple[Periodic, Outcome]:
    """Store the schedule that starts a new crawl of ``config`` named ``name`` every
    ``every`` (or on ``cron`` in ``tz``); the schedule and what happened to it."""
    install(app)
    task = app.get_task(RECRAWL_TASK)
    periodic = app.schedules.build(
        task,
        cron,
        every=every,
        tz=tz,
        args=[name, config.to_meta()],
        schedule_name=schedule_name(name),
    )
    return periodic, app.schedules.add(periodic)
