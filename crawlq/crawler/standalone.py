"""The app of a worker started without ``--app``: the crawler's pages and nothing else.

The process runtime imports the app again in each child process, by reference; a worker
given only ``--store`` (``crawlq worker --store URL --runtime process``, or ``crawlq
crawl --render``) hands its children ``APP_REF``, and each child points this app at the
worker's store.
"""

from __future__ import annotations

from crawlq.app import App
from crawlq.crawler.tasks import install

__all__ = ["APP_REF", "app"]

APP_REF = "crawlq.crawler.standalone:app"

app = App()
install(app)
