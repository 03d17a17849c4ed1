"""The SQLite store's crawls, seen sets and limit keys."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from crawlq.crawls import CrawlInfo, CrawlSpec, CrawlState
from crawlq.jobs import JobSpec
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import dumps
from crawlq.stores.base import StoreSummary
from crawlq.stores.codec import limits_json, on_finish_json, summary_of
from crawlq.stores.gate import CrawlGate
from crawlq.stores.sqlite.core import Q, row_crawl, row_key_limit
from crawlq.stores.sqlite.scheduling import SQLiteScheduling, Touched, with_crawl
from crawlq.types import Timestamp


class SQLiteCrawls(SQLiteScheduling, CrawlGate):
    """Crawls, seen sets and limit keys (``CrawlStore``)."""

    def _crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], now: Timestamp | None
    ) -> CrawlInfo:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> CrawlInfo:
            params = {
                "name": spec.name,
                "meta": dumps(spec.meta),
                "limits": limits_json(spec.limits),
                "now": t,
            }
            crawl_id = int(conn.execute(Q["crawl_insert"], params).fetchone()[0])
            if spec.on_finish is not None:
                on_finish = on_finish_json(spec.on_finish, crawl_id)
                conn.execute(Q["crawl_set_on_finish"], {"id": crawl_id, "on_finish": on_finish})
            touched = Touched(crawls={crawl_id})  # finishes at once if nothing is left
            self._schedule_all(conn, [with_crawl(job, crawl_id) for job in start], t, touched)
            self._settle(conn, touched, t)
            return row_crawl(conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone())

        return self._write("creating a crawl", work)

    def crawl_get(self, crawl_id: int) -> CrawlInfo | None:
        row = self._read(
            "reading a crawl", lambda c: c.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
        )
        return None if row is None else row_crawl(row)

    def crawl_list(
        self, *, state: CrawlState | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[CrawlInfo]:
        params = {
            "after_id": after_id,
            "state": None if state is None else state.value,
            "limit": -1 if limit is None else limit,
        }
        rows = self._read("listing crawls", lambda c: c.execute(Q["crawl_list"], params).fetchall())
        return [row_crawl(r) for r in rows]

    def _crawl_transition(
        self,
        operation: str,
        crawl_id: int,
        from_states: Sequence[str],
        to_state: str,
        jobs_query: str,
        now: Timestamp | None,
    ) -> bool:
        """Move an open crawl from ``from_states`` to ``to_state`` and its pending jobs
        with ``jobs_query``, then reconcile their keys; False, changing nothing, if the
        crawl was in none of ``from_states``. Siblings: the ``_crawl_transition`` of the
        PostgreSQL and Redis stores."""
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> bool:
            params = {
                "id": crawl_id,
                "state": to_state,
                "from_states": dumps(list(from_states)),
                "now": t,
            }
            if conn.execute(Q["crawl_set_state"], params).fetchone() is None:
                return False
            touched = Touched()
            rows = conn.execute(Q[jobs_query], {"id": crawl_id, "now": t}).fetchall()
            touched.keys.update(r["limit_key"] for r in rows if r["limit_key"] is not None)
            self._settle(conn, touched, t)
            return True

        return self._write(operation, work)

    def _crawl_pause(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition(
            "pausing a crawl", crawl_id, ["running"], "paused", "crawl_hold_jobs", now
        )

    def _crawl_resume(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition(
            "resuming a crawl", crawl_id, ["paused"], "running", "crawl_unhold_jobs", now
        )

    def _crawl_cancel(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition(
            "cancelling a crawl",
            crawl_id,
            ["running", "paused"],
            "cancelled",
            "crawl_cancel_jobs",
            now,
        )

    def _seen_add(
        self, crawl_id: int, fingerprints: list[bytes], now: Timestamp | None
    ) -> list[bool] | None:
        work = self._each_fingerprint("seen_insert", crawl_id, fingerprints)
        return self._write("adding to a seen set", work)

    def _seen_has(self, crawl_id: int, fingerprints: list[bytes]) -> list[bool] | None:
        work = self._each_fingerprint("seen_has", crawl_id, fingerprints)
        return self._read("reading a seen set", work)

    def _each_fingerprint(
        self, query: str, crawl_id: int, fingerprints: list[bytes]
    ) -> Callable[[sqlite3.Connection], list[bool] | None]:
        """Run ``query`` (a row if the fingerprint is new, or known) for each
        fingerprint of the crawl's seen set; None if there is no such crawl."""

        def work(conn: sqlite3.Connection) -> list[bool] | None:
            if not self._crawl_exists(conn, crawl_id):
                return None
            return [
                conn.execute(Q[query], {"crawl_id": crawl_id, "fp": fp}).fetchone() is not None
                for fp in fingerprints
            ]

        return work

    def _limit_set(self, key: str, limits: Limits, now: Timestamp | None) -> None:
        t = self._now(now)
        params = {
            "key": key,
            "max_running": limits.max_running,
            "min_interval": limits.min_interval,
        }

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(Q["limit_set"], params)
            self._retime(conn, key, t)

        self._write("setting limits", work)

    def _limit_set_default(self, queue: str, limits: Limits | None) -> None:
        def work(conn: sqlite3.Connection) -> None:
            if limits is None:
                conn.execute(Q["limit_default_delete"], {"queue": queue})
            else:
                conn.execute(
                    Q["limit_default_set"],
                    {
                        "queue": queue,
                        "max_running": limits.max_running,
                        "min_interval": limits.min_interval,
                    },
                )

        self._write("setting default limits", work)

    def _limit_block(self, key: str, until: Timestamp, now: Timestamp | None) -> None:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(Q["limit_block"], {"key": key, "until": until})
            self._retime(conn, key, t)

        self._write("blocking a limit key", work)

    def _limit_get(self, keys: Sequence[str]) -> list[KeyLimit | None]:
        def work(conn: sqlite3.Connection) -> list[KeyLimit | None]:
            rows = [conn.execute(Q["limit_get"], {"key": k}).fetchone() for k in keys]
            return [None if r is None else row_key_limit(r) for r in rows]

        return self._read("reading limit keys", work)

    def _limit_list(self, limit: int, after: str) -> list[KeyLimit]:
        params = {"after": after, "limit": limit}
        rows = self._read(
            "listing limit keys", lambda c: c.execute(Q["limit_list"], params).fetchall()
        )
        return [row_key_limit(r) for r in rows]

    def _store_summary(self, now: Timestamp | None) -> StoreSummary:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> StoreSummary:
            crawls = conn.execute(Q["summary_crawls"]).fetchall()
            return summary_of(crawls, conn.execute(Q["summary_keys"], {"now": t}).fetchone())

        return self._read("summing up crawls and keys", work)
