"""A Scrapy project written into a test directory, whose spider crawls the test site.

The spider ``site`` follows every ``<a href>`` on the site's host; each callback appends
``{"url", "pid"}`` to ``callbacks.jsonl`` and ``closed`` appends the close reason to
``closed.jsonl``. Settings come from ``-s`` options and the environment of the process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SETTINGS = """
BOT_NAME = "siteproject"
SPIDER_MODULES = ["siteproject.spiders"]
SCHEDULER = "crawlq.scrapy.Scheduler"
REMOTE_CONTROL_ENABLED = False
TELNETCONSOLE_ENABLED = False
ROBOTSTXT_OBEY = False
LOG_LEVEL = "INFO"
RETRY_ENABLED = False
REDIRECT_ENABLED = True
DOWNLOAD_TIMEOUT = 10
"""

SPIDER = """
import json
import os
from pathlib import Path

import scrapy

HERE = Path(os.environ["SITE_OUT"])


def note(name, **record):
    with open(HERE / name, "a") as f:
        f.write(json.dumps(record) + "\\n")


class SiteSpider(scrapy.Spider):
    name = "site"
    allowed_domains = ["127.0.0.1"]
    start_urls = [os.environ["SITE_URL"]]

    def parse(self, response):
        note("callbacks.jsonl", url=response.url, pid=os.getpid())
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
        if response.url == self.start_urls[0] and os.environ.get("SITE_EXTRA"):
            extra = json.loads(os.environ["SITE_EXTRA"])
            for item in extra:
                if item["kind"] == "delayed":
                    note("delayed.jsonl", enqueued=__import__("time").time())
                    yield scrapy.Request(item["url"], callback=self.parse_delayed,
                                         meta={"crawlq_delay": item["delay"],
                                               "handle_httpstatus_all": True})
                elif item["kind"] == "lambda":
                    yield scrapy.Request(item["url"], callback=lambda r: None)

    def parse_delayed(self, response):
        note("delayed.jsonl", fetched=__import__("time").time())

    def closed(self, reason):
        note("closed.jsonl", reason=reason, pid=os.getpid(),
             stats={k: v for k, v in self.crawler.stats.get_stats().items()
                    if isinstance(v, (int, float, str))})
"""


def write_project(root: Path) -> Path:
    """Write the project under ``root``; returns its directory (run scrapy there)."""
    project = root / "project"
    spiders = project / "siteproject" / "spiders"
    spiders.mkdir(parents=True, exist_ok=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = siteproject.settings\n")
    (project / "siteproject" / "__init__.py").write_text("")
    (project / "siteproject" / "settings.py").write_text(SETTINGS)
    (spiders / "__init__.py").write_text("")
    (spiders / "site.py").write_text(SPIDER)
    return project


def scrapy_argv(*settings: str) -> list[str]:
    argv = [sys.executable, "-m", "scrapy", "crawl", "site"]
    for setting in settings:
        argv += ["-s", setting]
    return argv


def read_jsonl(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
