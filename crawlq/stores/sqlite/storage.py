"""The SQLite store's crawl results and cache."""

from __future__ import annotations

import sqlite3
from typing import Any

from crawlq.stores.gate import StorageGate
from crawlq.stores.sqlite.core import Q, SQLiteCore
from crawlq.types import Timestamp


class SQLiteStorage(SQLiteCore, StorageGate):
    """Crawl results and the cache (``CrawlerStorage``)."""

    def _result_add(
        self, crawl_id: int, items: list[tuple[bytes, str]], now: Timestamp | None
    ) -> list[bool] | None:
        """One write transaction (``_results_insert``)."""

        def work(conn: sqlite3.Connection) -> list[bool] | None:
            return self._results_insert(conn, crawl_id, items)

        return self._write("adding crawl results", work)

    def _result_list(self, crawl_id: int, after: int, limit: int) -> list[tuple[int, str]] | None:
        params = {"crawl_id": crawl_id, "after": after, "limit": limit}

        def work(conn: sqlite3.Connection) -> list[tuple[int, str]] | None:
            if not self._crawl_exists(conn, crawl_id):
                return None
            rows = conn.execute(Q["result_list"], params).fetchall()
            return [(int(r["seq"]), str(r["record"])) for r in rows]

        return self._read("listing crawl results", work)

    def _result_count(self, crawl_id: int) -> int | None:
        def work(conn: sqlite3.Connection) -> int | None:
            if not self._crawl_exists(conn, crawl_id):
                return None
            row = conn.execute(Q["result_last_seq"], {"crawl_id": crawl_id}).fetchone()
            return int(row[0])

        return self._read("counting crawl results", work)

    def _result_get(self, crawl_id: int, keys: list[bytes]) -> list[str | None] | None:
        def work(conn: sqlite3.Connection) -> list[str | None] | None:
            if not self._crawl_exists(conn, crawl_id):
                return None
            records: list[str | None] = []
            for key in keys:
                row = conn.execute(Q["result_get"], {"crawl_id": crawl_id, "key": key}).fetchone()
                records.append(None if row is None else str(row["record"]))
            return records

        return self._read("reading crawl results", work)

    def _cache_get(self, key: str, now: Timestamp | None) -> str | None:
        params = {"key": key, "now": self._now(now)}
        row = self._read(
            "reading the cache", lambda c: c.execute(Q["cache_get"], params).fetchone()
        )
        return None if row is None else str(row["value"])

    def _cache_params(
        self, key: str, value: str, ttl: float, now: Timestamp | None
    ) -> dict[str, Any]:
        return {
            "key": key,
            "value": value,
            "ttl": ttl,
            "now": self._now(now),
        }

    def _cache_set(self, key: str, value: str, ttl: float, now: Timestamp | None) -> None:
        params = self._cache_params(key, value, ttl, now)
        self._write("writing the cache", lambda c: c.execute(Q["cache_set"], params))

    def _cache_add(self, key: str, value: str, ttl: float, now: Timestamp | None) -> bool:
        params = self._cache_params(key, value, ttl, now)
        # the losers of a race for a lock take no write lock
        doing = ("probing the cache", "adding to the cache")
        return self._take_unless_held(doing, "cache_live", "cache_add", params)

    def _cache_delete(self, key: str) -> None:
        params = {"key": key}
        self._write("deleting from the cache", lambda c: c.execute(Q["cache_delete"], params))
