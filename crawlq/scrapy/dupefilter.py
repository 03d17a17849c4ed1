"""``crawlq.scrapy.DupeFilter``: Scrapy's dupefilter on a crawlq crawl's seen set, for
projects that keep another scheduler (``DUPEFILTER_CLASS = "crawlq.scrapy.DupeFilter"``).

It asks the store once per request, on the reactor thread; ``crawlq.scrapy.Scheduler``
dedups on the same seen set in batches, off the reactor, and needs no dupefilter.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.dupefilters import BaseDupeFilter

from crawlq.config import DEFAULT_STORE_URL
from crawlq.crawls import CrawlSpec
from crawlq.scrapy import crawls
from crawlq.stores import Store, open_store

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger("crawlq.scrapy")


class DupeFilter(BaseDupeFilter):
    """``request_seen`` is True for a request whose fingerprint (the crawler's
    ``request_fingerprinter``) is already in the crawl's seen set."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.store: Store | None = None
        self.crawl_id = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DupeFilter:
        return cls(crawler)

    def open(self) -> None:
        settings = self.crawler.settings
        spider = self.crawler.spider
        name = settings.get("CRAWLQ_CRAWL") or getattr(spider, "crawlq_crawl", None)
        name = name or (spider.name if spider is not None else "scrapy")
        self.store = open_store(settings.get("CRAWLQ_STORE") or DEFAULT_STORE_URL)
        key = f"crawlq.scrapy.seen:{name}"
        known = self.store.cache_get(key)
        if known is None or not known.isdigit() or self.store.crawl_get(int(known)) is None:
            info = self.store.crawl_create(
                CrawlSpec(name=f"{name} (seen set)"), [crawls.sentinel(name, None, 30)]
            )
            self.store.cache_add(key, str(info.id), crawls.NAME_TTL)
            known = self.store.cache_get(key)
        assert known is not None
        self.crawl_id = int(known)

    def close(self, reason: str) -> None:
        if self.store is not None:
            self.store.close()

    def request_seen(self, request: Request) -> bool:
        assert self.store is not None
        fingerprint = self.crawler.request_fingerprinter.fingerprint(request)[:16]
        return not self.store.seen_add(self.crawl_id, [fingerprint])[0]

    def log(self, request: Request, spider: object) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value("dupefilter/filtered")
