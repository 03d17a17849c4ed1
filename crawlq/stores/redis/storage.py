"""The Redis store's crawl results and cache."""

from __future__ import annotations

import operator
from typing import Any

from crawlq.stores.gate import StorageGate
from crawlq.stores.redis import keys
from crawlq.stores.redis.core import RedisCore, now_arg, number, translate
from crawlq.types import Timestamp


class RedisStorage(RedisCore, StorageGate):
    """Crawl results and the cache (``CrawlerStorage``)."""

    def _result_add(
        self, crawl_id: int, items: list[tuple[bytes, str]], now: Timestamp | None
    ) -> list[bool] | None:
        """Numbered 1, 2, 3, ... by the script (HLEN of the crawl's keys + 1)."""
        pairs = [part for item in items for part in item]
        args: list[Any] = [now_arg(now), str(operator.index(crawl_id)), *pairs]
        answers = self._run("adding crawl results", "result_add", args)
        if answers == [-1]:
            return None
        return [bool(a) for a in answers]

    def _result_read(self, operation: str, crawl_id: int, *args: str | bytes) -> list[Any] | None:
        """The script's reply: [n, record...] (see result_read.lua)."""
        call: list[Any] = ["", str(operator.index(crawl_id)), *args]
        reply: list[Any] = self._run(operation, "result_read", call)
        return None if reply == [-1] else reply

    def _result_list(self, crawl_id: int, after: int, limit: int) -> list[tuple[int, str]] | None:
        reply = self._result_read("listing crawl results", crawl_id, "list", str(after), str(limit))
        if reply is None:
            return None
        return [(after + i, str(record)) for i, record in enumerate(reply[1:], start=1)]

    def _result_count(self, crawl_id: int) -> int | None:
        reply = self._result_read("counting crawl results", crawl_id, "count")
        return None if reply is None else int(reply[0])

    def _result_get(self, crawl_id: int, keys: list[bytes]) -> list[str | None] | None:
        reply = self._result_read("reading crawl results", crawl_id, "get", *keys)
        if reply is None:
            return None
        return [None if r is None else str(r) for r in reply[1:]]

    def _cache_get(self, key: str, now: Timestamp | None) -> str | None:
        args = [now_arg(now), key]
        value = self._run("reading the cache", "cache_get", args)
        return None if value is None else str(value)

    def _cache_write(
        self, operation: str, mode: str, key: str, value: str, ttl: float, now: Timestamp | None
    ) -> bool:
        args = [
            now_arg(now),
            key,
            value,
            number(ttl),
            mode,
        ]
        return bool(self._run(operation, "cache_set", args))

    def _cache_set(self, key: str, value: str, ttl: float, now: Timestamp | None) -> None:
        self._cache_write("writing the cache", "set", key, value, ttl, now)

    def _cache_add(self, key: str, value: str, ttl: float, now: Timestamp | None) -> bool:
        return self._cache_write("adding to the cache", "add", key, value, ttl, now)

    def _cache_delete(self, key: str) -> None:
        name = keys.key("cache", self._prefix, ckey=key)
        with translate("deleting from the cache"):
            self._client.delete(name)
