"""What the crawler knows about a host: its limit key and its robots.txt, shared by
every worker through the store.

robots.txt is fetched once per origin (scheme, host, port) for all crawls and workers
of a store, and kept in the store's cache for ``robots_ttl`` seconds (an unavailable file,
429/5xx/network error, for 60 s only, so it is tried again soon). One worker fetches it
while the others wait: within a process an ``asyncio.Lock`` per origin, across processes a
short lease in the store's cache (``cache_add``); a page whose origin's file is being
fetched by another process is snoozed for a second (``RobotsPending``). When the file
gives a ``Crawl-delay`` above the crawl's delay, the host's limit gets that interval.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import urllib.parse
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

from crawlq.crawler.fetch import Fetcher
from crawlq.crawler.robots import Robots, robots_url
from crawlq.stores.base import CrawlerStorage

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.crawler.config import CrawlConfig

__all__ = ["RobotsCache", "RobotsPending", "host_delay", "limit_key"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_TEMPORARY_TTL = 60.0
_MEMO_SIZE = 4096
_MEMO_SECONDS = 300.0
_KEYS = 32_768


@functools.lru_cache(maxsize=_KEYS)
def limit_key(url: str) -> str:
    """The politeness key of ``url``: its host, lower case, with the port when it is not
    the scheme's default (``example.com``, ``127.0.0.1:8001``, ``[::1]:8080``).
    ValueError for a URL without a host or with an invalid port. The last ``_KEYS``
    answers are remembered."""
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ValueError(f"no host in {url!r}")
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        return host
    return f"{host}:{port}"


def host_delay(config: CrawlConfig, robots: Robots) -> float:
    """The least interval between two fetches from a host: the crawl's delay, or the
    robots.txt ``Crawl-delay`` when longer (at most an hour)."""
    delay = robots.crawl_delay(config.user_agent)
    return config.delay if delay is None else max(config.delay, min(delay, 3600.0))


class RobotsPending(Exception):
    """Another process is fetching this origin's robots.txt: try the page a bit later."""


def _encode(robots_text: str | None, status: int | None, error: str | None = None) -> str:
    return json.dumps({"status": status, "text": robots_text, "error": error})


def _decode(value: str, url: str) -> Robots:
    data = json.loads(value)
    status, text = data.get("status"), data.get("text")
    if text is not None:
        return Robots.parse(text, url)
    return Robots.unavailable(status, url, data.get("error"))


class RobotsCache:
    """robots.txt per origin, for one process: a memo in front of the store's cache."""

    def __init__(self) -> None:
        self._memo: OrderedDict[str, tuple[float, Robots]] = OrderedDict()
        self._locks: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Lock]
        ] = weakref.WeakKeyDictionary()  # a lock belongs to one event loop

    def _remember(self, origin: str, robots: Robots, ttl: float) -> None:
        self._memo[origin] = (time.monotonic() + min(ttl, _MEMO_SECONDS), robots)
        self._memo.move_to_end(origin)
        while len(self._memo) > _MEMO_SIZE:
            self._memo.popitem(last=False)

    def _recall(self, origin: str) -> Robots | None:
        hit = self._memo.get(origin)
        if hit is None or hit[0] < time.monotonic():
            return None
        return hit[1]

    async def get(
        self, app: App, fetcher: Fetcher, config: CrawlConfig, url: str, owner: str
    ) -> Robots:
        """The rules of ``url``'s origin; ``RobotsPending`` when another process is
        fetching them now."""
        origin = robots_url(url)
        robots = self._recall(origin)
        if robots is not None:
            return robots
        locks = self._locks.setdefault(asyncio.get_running_loop(), {})
        lock = locks.setdefault(origin, asyncio.Lock())
        async with lock:
            robots = self._recall(origin)
            if robots is not None:
                return robots
            store: CrawlerStorage = app.store  # only the cache
            key = f"robots:{origin}"
            cached = await asyncio.to_thread(store.cache_get, key)
            if cached is not None:
                robots = _decode(cached, origin)
                self._remember(origin, robots, _TEMPORARY_TTL if robots.temporary else 3600)
                return robots
            lease = f"robots-fetch:{origin}"
            won = await asyncio.to_thread(store.cache_add, lease, owner, config.timeout + 5.0)
            if not won:
                raise RobotsPending(origin)
            try:
                robots, value = await self._fetch(fetcher, origin)
                ttl = _TEMPORARY_TTL if robots.temporary else config.robots_ttl
                if value is not None:
                    await asyncio.to_thread(store.cache_set, key, value, ttl)
            finally:
                await asyncio.to_thread(store.cache_delete, lease)
            self._remember(origin, robots, ttl)
            await self._apply_delay(app, config, url, robots)
            return robots

    async def _fetch(self, fetcher: Fetcher, origin: str) -> tuple[Robots, str | None]:
        """The rules and what to keep in the store (None: keep nothing)."""
        result = await fetcher.fetch(origin)
        if result.error is not None and result.error.startswith("refused:"):
            # this crawl may not connect there; the page's own fetch says so. Another
            # crawl's address policy may differ: nothing is kept.
            return Robots.unavailable(404, origin), None
        status = result.status
        complete = result.error is None or result.truncated  # a cut file: its first part
        if status is not None and 200 <= status < 300 and complete:
            text = result.body.decode("utf-8", "replace")
            return Robots.parse(text, origin), _encode(text, status)
        if status is not None and status < 300:
            status = None  # no usable answer: like a network error, tried again soon
        error = result.error if status is None else None
        return Robots.unavailable(status, origin, error), _encode(None, status, error)

    async def _apply_delay(self, app: App, config: CrawlConfig, url: str, robots: Robots) -> None:
        delay = host_delay(config, robots)
        if delay <= config.delay:
            return
        await asyncio.to_thread(
            app.set_limit,
            limit_key(url),
            max_running=config.host_concurrency,
            min_interval=delay,
        )
