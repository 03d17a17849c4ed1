"""``crawl_drop_pending`` and ``crawl_delete`` on SQLite: each one write transaction.

A mixin of ``SQLiteStore``: it uses the store's ``_write``, ``_now`` and ``_settle``
(keys reconciled, crawls finished with their ``on_finish``). The deleted jobs leave the
queue counts through the table's delete trigger, which keeps them in the totals as gone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from crawlq.crawls import OPEN_CRAWL_STATES
from crawlq.stores._sqlfile import load_queries
from crawlq.types import Timestamp

if TYPE_CHECKING:
    from crawlq.stores.sqlite.store import _Touched

T = TypeVar("T")

Q = load_queries("crawlq.stores.sqlite", "crawl_delete.sql")
STORE_Q = load_queries("crawlq.stores.sqlite")
_OPEN = frozenset(s.value for s in OPEN_CRAWL_STATES)


def _touched() -> _Touched:
    from crawlq.stores.sqlite.store import _Touched  # the store imports this module

    return _Touched()


class CrawlDeleteMixin:
    """Dropping a crawl's pending jobs; deleting a crawl with everything it has."""

    if TYPE_CHECKING:

        def _write(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T: ...
        def _now(self, now: Timestamp | None) -> Timestamp: ...
        def _settle(self, conn: sqlite3.Connection, touched: _Touched, now: float) -> None: ...

    def crawl_drop_pending(self, crawl_id: int, *, now: Timestamp | None = None) -> int:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute(Q["crawl_state"], {"id": crawl_id}).fetchone()
            if row is None or row["state"] not in _OPEN:
                return 0
            rows = conn.execute(STORE_Q["crawl_cancel_jobs"], {"id": crawl_id, "now": t}).fetchall()
            touched = _touched()
            touched.keys.update(r["limit_key"] for r in rows if r["limit_key"] is not None)
            touched.crawls.add(crawl_id)
            self._settle(conn, touched, t)
            return len(rows)

        return self._write("dropping a crawl's pending jobs", work)

    def crawl_delete(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> bool:
            params = {"id": crawl_id, "now": t}
            if conn.execute(Q["crawl_state"], params).fetchone() is None:
                return False
            conn.execute(Q["crawl_close"], params)  # no on_finish for a deleted crawl
            rows = conn.execute(Q["crawl_cancel_live_jobs"], params).fetchall()
            touched = _touched()
            touched.keys.update(r["limit_key"] for r in rows if r["limit_key"] is not None)
            self._settle(conn, touched, t)
            for query in (
                "crawl_delete_jobs",
                "crawl_delete_results",
                "crawl_delete_seen",
                "crawl_delete_row",
            ):
                conn.execute(Q[query], params)
            return True

        return self._write("deleting a crawl", work)
