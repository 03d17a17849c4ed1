"""The few places where the scheduler reaches into Scrapy's engine, all in one module.

Scrapy has no public hook for "this request is fully processed" nor for "the scheduler
has work now", so these use the engine's slot, present since Scrapy 1.x and tested
against the pinned version by ``tests/integration/test_scrapy.py``:

- ``on_request_done``: the engine's slot removes a request from ``inprogress`` once its
  download, redirects or retries, callback or errback, child requests and items are all
  done, whatever the outcome; that is when the request's job is acknowledged.
- ``wake``: ``slot.nextcall.schedule()`` makes the engine ask for requests now, instead of
  at its 5-second heartbeat.
- ``start_exhausted``: ``engine._start`` is None once ``Spider.start()`` is consumed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crawlq.exceptions import ConfigurationError

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


def _slot(crawler: Crawler) -> Any:
    slot = getattr(crawler.engine, "_slot", None)
    if slot is None or not hasattr(slot, "remove_request") or not hasattr(slot, "nextcall"):
        raise ConfigurationError(
            "this Scrapy version's engine has no slot crawlq.scrapy can use: "
            "install scrapy>=2.13 (pip install 'crawlq[scrapy]')"
        )
    return slot


def on_request_done(crawler: Crawler, callback: Callable[[Request], None]) -> None:
    """Call ``callback(request)`` (on the reactor thread) when the engine is done with a
    request it took from the scheduler."""
    slot = _slot(crawler)
    remove = slot.remove_request

    def remove_request(request: Request) -> None:
        callback(request)
        remove(request)

    slot.remove_request = remove_request


def wake(crawler: Crawler) -> None:
    """Make the engine ask the scheduler for requests now."""
    slot = getattr(crawler.engine, "_slot", None)
    if slot is not None:
        slot.nextcall.schedule()


def start_exhausted(crawler: Crawler) -> bool:
    """True once the engine has consumed the spider's ``start()``."""
    engine = crawler.engine
    return engine is None or getattr(engine, "_start", None) is None


def close_spider(crawler: Crawler, reason: str) -> None:
    from scrapy.utils.defer import deferred_from_coro

    assert crawler.engine is not None
    deferred_from_coro(crawler.engine.close_spider_async(reason=reason))


def thread_safe_caller() -> Callable[[Callable[[], None]], Any]:
    """A function another thread calls to run a function on the reactor's thread."""
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:
        from twisted.internet import reactor

        return reactor.callFromThread  # type: ignore[no-any-return]


def preload_download_handlers(crawler: Crawler) -> None:
    """Load the http and https download handlers now rather than at the first request:
    a job is claimed (its limit key's interval starts) before it is fetched, and the first
    fetch of a process would otherwise start late by the handler's load time."""
    handlers = getattr(getattr(crawler.engine, "downloader", None), "handlers", None)
    get = getattr(handlers, "_get_handler", None)
    if get is not None:
        for scheme in ("http", "https"):
            get(scheme)
