"""The fields of a crawl's records: the ones every record has, then the crawl's own.

A crawl's options add fields to every one of its records, after ``RECORD_FIELDS`` and in
this order: with sitemaps ``kind`` ("page" or "sitemap") and ``lastmod`` (the sitemap's
``<lastmod>`` of the page, null otherwise); the ``--extract`` fields, in the order given;
with a parse hook ``items`` (what it returned for the page) and ``traceback`` (null unless
it raised); with ``revisit_changed`` the ``REVISIT_FIELDS`` (``crawlq.crawler.revisit``).
A record made before any of them was known (a page that failed early) gets them as null,
so every record of a crawl has the same fields, which are CSV's columns.
"""

from __future__ import annotations

from typing import Any

from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.records import RECORD_FIELDS, REVISIT_FIELDS

__all__ = ["crawl_fields", "record_fields", "with_crawl_fields"]


def crawl_fields(config: CrawlConfig) -> list[str]:
    """The fields ``config`` adds to its records, in order."""
    names: list[str] = []
    if config.sitemaps:
        names += ["kind", "lastmod"]
    if config.extractor is not None:
        names += config.extractor.names
    if config.parse is not None:
        names += ["items", "traceback"]
    if config.revisit_changed:
        names += REVISIT_FIELDS
    return names


def record_fields(config: CrawlConfig) -> list[str]:
    """Every field of the records of a crawl made with ``config``, in order."""
    return [*RECORD_FIELDS, *crawl_fields(config)]


def with_crawl_fields(config: CrawlConfig, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the crawl's own fields it lacks, as null (``kind`` "page")."""
    for name in crawl_fields(config):
        if name not in record:
            record[name] = "page" if name == "kind" else None
    return record
