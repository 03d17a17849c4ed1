"""Distributed Scrapy on a crawlq crawl: ``SCHEDULER = "crawlq.scrapy.Scheduler"``.

Install with ``pip install 'crawlq[scrapy]'``; see docs/scrapy.md.
"""

from __future__ import annotations

try:
    import scrapy  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the install
    from crawlq.exceptions import ConfigurationError

    raise ConfigurationError("crawlq.scrapy needs Scrapy: pip install 'crawlq[scrapy]'") from exc

from crawlq.scrapy.dupefilter import DupeFilter
from crawlq.scrapy.scheduler import Scheduler

__all__ = ["DupeFilter", "Scheduler"]
