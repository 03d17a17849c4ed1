"""``crawl_drop_pending`` and ``crawl_delete`` on SQLite: each one write transaction.

A mixin of ``SQLiteStore``: it uses the store's ``_write``, ``_now`` and ``_settle``
(keys reconciled, crawls finished with their ``on_finish``). The deleted jobs leave the
queue counts through the table's delete trigger, which keeps them in the totals as gone.
"""

from __future__ import annotations

import sqlite3
from typing import TypeVar

from crawlq.crawls import OPEN_CRAWL_STATES
from crawlq.stores._sqlfile import load_queries
from crawlq.stores.sqlite.core import Q
from crawlq.stores.sqlite.scheduling import SQLiteScheduling, Touched
from crawlq.types import Timestamp

T = TypeVar("T")

DQ = load_queries("crawlq.stores.sqlite", "crawl_delete.sql")
_OPEN = frozenset(s.value for s in OPEN_CRAWL_STATES)


class CrawlDeleteMixin(SQLiteScheduling):
    """Dropping a crawl's pending jobs; deleting a crawl with everything it has."""

    def _crawl_drop_pending(self, crawl_id: int, now: Timestamp | None) -> int:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute(DQ["crawl_state"], {"id": crawl_id}).fetchone()
            if row is None or row["state"] not in _OPEN:
                return 0
            rows = conn.execute(Q["crawl_cancel_jobs"], {"id": crawl_id, "now": t}).fetchall()
            touched = Touched()
            touched.keys.update(r["limit_key"] for r in rows if r["limit_key"] is not None)
            touched.crawls.add(crawl_id)
            self._settle(conn, touched, t)
            return len(rows)

        return self._write("dropping a crawl's pending jobs", work)

    def _crawl_delete(self, crawl_id: int, now: Timestamp | None) -> bool:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> bool:
            params = {"id": crawl_id, "now": t}
            if conn.execute(DQ["crawl_state"], params).fetchone() is None:
                return False
            conn.execute(DQ["crawl_close"], params)  # no on_finish for a deleted crawl
            rows = conn.execute(DQ["crawl_cancel_live_jobs"], params).fetchall()
            touched = Touched()
            touched.keys.update(r["limit_key"] for r in rows if r["limit_key"] is not None)
            self._settle(conn, touched, t)
            for query in (
                "crawl_delete_jobs",
                "crawl_delete_results",
                "crawl_delete_seen",
                "crawl_delete_row",
            ):
                conn.execute(DQ[query], params)
            return True

        return self._write("deleting a crawl", work)
