"""The PostgreSQL store's crawl results and cache."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg.rows import DictRow

from crawlq.stores.codec import records_by_crawl
from crawlq.stores.gate import StorageGate
from crawlq.stores.postgres.core import Conn, PostgresCore, Q, first_of_each, limited
from crawlq.types import Timestamp

if TYPE_CHECKING:
    from crawlq.stores.base import CrawlRecord


def _cache_key(key: str) -> dict[str, bytes]:
    """A cache key's parameters: its UTF-8 bytes, and their SHA-256 that finds it."""
    encoded = key.encode("utf-8")
    return {"key": encoded, "key_hash": hashlib.sha256(encoded).digest()}


def insert_results(
    conn: Conn, crawl_id: int, items: Sequence[tuple[bytes, str]]
) -> list[bool] | None:
    """Keep each (key, record) new to the crawl; True for each new one, None for no such
    crawl. Numbered from the crawl's row in ``crawlq_result_seqs``, locked until commit,
    so one crawl's records commit in seq order (see migration 0004)."""
    row = conn.execute(Q["result_lock"], {"crawl_id": crawl_id}).fetchone()
    if row is None:
        return None
    if not items:
        return []
    firsts = first_of_each([key for key, _ in items])
    keys = [items[i][0] for i in firsts]
    known = {
        bytes(r["key"])
        for r in conn.execute(Q["result_known"], {"crawl_id": crawl_id, "keys": keys})
    }
    last_seq = int(row["last_seq"])
    answers: list[bool] = []
    new: dict[str, list[Any]] = {"keys": [], "seqs": [], "records": []}
    first = set(firsts)
    for i, (key, record) in enumerate(items):
        is_new = i in first and key not in known
        answers.append(is_new)
        if is_new:
            last_seq += 1
            new["keys"].append(key)
            new["seqs"].append(last_seq)
            new["records"].append(record.encode("utf-8"))
    if new["keys"]:
        conn.execute(Q["result_insert"], {"crawl_id": crawl_id, **new})
        conn.execute(Q["result_seq_set"], {"crawl_id": crawl_id, "last_seq": last_seq})
    return answers


def keep_records(
    conn: Conn, records: Sequence[Sequence[CrawlRecord]], applied: Sequence[bool]
) -> None:
    """Keep the records of the job ends applied in this transaction (``Completion`` and
    ``Failure.records``), one run per crawl, the crawls' counter rows locked in id order
    (no deadlock between two batches); unknown crawls drop theirs."""
    for crawl_id, pairs in records_by_crawl(records, applied):
        insert_results(conn, crawl_id, pairs)


class PostgresStorage(PostgresCore, StorageGate):
    """Crawl results and the cache (``CrawlerStorage``)."""

    def _result_add(
        self, crawl_id: int, items: list[tuple[bytes, str]], now: Timestamp | None
    ) -> list[bool] | None:
        """One transaction (``insert_results``)."""

        def work(conn: Conn) -> list[bool] | None:
            return insert_results(conn, crawl_id, items)

        return self._run("adding crawl results", work)

    def _result_list(self, crawl_id: int, after: int, limit: int) -> list[tuple[int, str]] | None:
        def work(conn: Conn) -> list[DictRow] | None:
            if conn.execute(Q["result_count"], {"crawl_id": crawl_id}).fetchone() is None:
                return None
            params = {"crawl_id": crawl_id, "after": after}
            return conn.execute(limited("result_list", limit), params).fetchall()

        rows = self._run("listing crawl results", work, transaction=False)
        if rows is None:
            return None
        return [(int(r["seq"]), bytes(r["record"]).decode("utf-8")) for r in rows]

    def _result_count(self, crawl_id: int) -> int | None:
        rows = self._execute("counting crawl results", "result_count", {"crawl_id": crawl_id})
        return int(rows[0]["n"]) if rows else None

    def _result_get(self, crawl_id: int, keys: list[bytes]) -> list[str | None] | None:
        def work(conn: Conn) -> dict[bytes, str] | None:
            if conn.execute(Q["result_count"], {"crawl_id": crawl_id}).fetchone() is None:
                return None
            rows = conn.execute(Q["result_get"], {"crawl_id": crawl_id, "keys": keys})
            return {bytes(r["key"]): bytes(r["record"]).decode("utf-8") for r in rows}

        by_key = self._run("reading crawl results", work, transaction=False)
        if by_key is None:
            return None
        return [by_key.get(key) for key in keys]

    def _cache_get(self, key: str, now: Timestamp | None) -> str | None:
        rows = self._execute("reading the cache", "cache_get", {**_cache_key(key), "now": now})
        return bytes(rows[0]["value"]).decode("utf-8") if rows else None

    @staticmethod
    def _cache_params(key: str, value: str, ttl: float, now: Timestamp | None) -> dict[str, Any]:
        return {
            **_cache_key(key),
            "value": value.encode("utf-8"),
            "ttl": ttl,
            "now": now,
        }

    def _cache_set(self, key: str, value: str, ttl: float, now: Timestamp | None) -> None:
        self._execute("writing the cache", "cache_set", self._cache_params(key, value, ttl, now))

    def _cache_add(self, key: str, value: str, ttl: float, now: Timestamp | None) -> bool:
        params = self._cache_params(key, value, ttl, now)
        return bool(self._execute("adding to the cache", "cache_add", params))

    def _cache_delete(self, key: str) -> None:
        self._execute("deleting from the cache", "cache_delete", _cache_key(key))
