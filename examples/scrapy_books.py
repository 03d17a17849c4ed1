"""A Scrapy spider on a crawlq crawl: run several of it at once and they share the work.

    scrapy runspider examples/scrapy_books.py -a start=http://127.0.0.1:8000/ &
    scrapy runspider examples/scrapy_books.py -a start=http://127.0.0.1:8000/ &

The two settings lines are in ``custom_settings`` (in a project they go in settings.py).
``python examples/scrapy_demo.py`` serves ``examples/site`` and runs three of it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import scrapy


class BooksSpider(scrapy.Spider):
    name = "books"
    custom_settings = {  # noqa: RUF012 (Scrapy's own convention)
        "SCHEDULER": "crawlq.scrapy.Scheduler",
        "CRAWLQ_STORE": os.environ.get("BOOKS_STORE", "sqlite:///books.db"),
        "CRAWLQ_HOST_LIMITS": {"max_running": 2, "min_interval": 0.05},
        "ROBOTSTXT_OBEY": True,
        "LOG_LEVEL": "WARNING",
        "REMOTE_CONTROL_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
    }

    def __init__(self, start: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {"url": response.url, "title": response.css("title::text").get(), "pid": os.getpid()}
        yield from response.follow_all(css="a", callback=self.parse)

    def closed(self, reason: str) -> None:
        print(f"process {os.getpid()} closed: {reason}")
