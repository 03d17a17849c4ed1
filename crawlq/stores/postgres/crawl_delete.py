"""``crawl_drop_pending`` and ``crawl_delete`` on PostgreSQL: each one transaction.

A mixin of ``PostgresStore`` (it uses the store's ``_run``). The triggers keep the
counters: the crawl finishes at the commit that leaves it with nothing pending or
running, and deleted jobs stay in the queue totals as gone.
"""

from __future__ import annotations

from typing import TypeVar

import psycopg
from psycopg.rows import DictRow

from crawlq.crawls import OPEN_CRAWL_STATES
from crawlq.stores._sqlfile import load_queries
from crawlq.stores.postgres.core import PostgresCore, Q
from crawlq.types import Timestamp

T = TypeVar("T")
Conn = psycopg.Connection[DictRow]

DQ = load_queries("crawlq.stores.postgres", "crawl_delete.sql")
_OPEN = frozenset(s.value for s in OPEN_CRAWL_STATES)


class CrawlDeleteMixin(PostgresCore):
    """Dropping a crawl's pending jobs; deleting a crawl with everything it has."""

    def _crawl_drop_pending(self, crawl_id: int, now: Timestamp | None) -> int:
        """Pending rows another transaction holds (a claim in flight) are skipped, as in
        ``crawl_cancel``: they become running, and the crawl finishes after them."""

        def work(conn: Conn) -> int:
            row = conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
            if row is None or row["state"] not in _OPEN:
                return 0
            return conn.execute(Q["crawl_cancel_jobs"], {"id": crawl_id, "now": now}).rowcount

        return self._run("dropping a crawl's pending jobs", work)

    def _crawl_delete(self, crawl_id: int, now: Timestamp | None) -> bool:
        params = {"id": crawl_id, "now": now}

        def work(conn: Conn) -> bool:
            if conn.execute(Q["crawl_get"], params).fetchone() is None:
                return False
            for query in (
                "crawl_cancel_live_jobs",
                "crawl_close",
                "crawl_delete_jobs",
                "crawl_delete_results",
                "crawl_delete_result_seq",
                "crawl_delete_seen",
            ):
                conn.execute(DQ[query], params)
            return conn.execute(DQ["crawl_delete_row"], params).fetchone() is not None

        return self._run("deleting a crawl", work)
