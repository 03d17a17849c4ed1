"""The PostgreSQL store's crawls, seen sets and limit keys."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from crawlq.crawls import CrawlInfo, CrawlSpec, CrawlState
from crawlq.jobs import JobSpec
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import dumps
from crawlq.stores.base import StoreSummary
from crawlq.stores.codec import limits_json, on_finish_json, summary_of
from crawlq.stores.gate import CrawlGate
from crawlq.stores.postgres.core import Conn, Q, Restart, limited, row_crawl, row_key_limit
from crawlq.stores.postgres.scheduling import PostgresScheduling, insert_params
from crawlq.types import Timestamp


class PostgresCrawls(PostgresScheduling, CrawlGate):
    """Crawls, seen sets and limit keys (``CrawlStore``)."""

    def _crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], now: Timestamp | None
    ) -> CrawlInfo:
        meta = dumps(spec.meta)
        limits = limits_json(spec.limits)
        insert_params(start, now)  # arguments that are not JSON fail before any I/O

        def work(conn: Conn) -> CrawlInfo:
            row = conn.execute(Q["crawl_next_id"], {"now": now}).fetchone()
            assert row is not None
            crawl_id = int(row["id"])
            on_finish = None if spec.on_finish is None else on_finish_json(spec.on_finish, crawl_id)
            conn.execute(
                Q["crawl_insert"],
                {
                    "id": crawl_id,
                    "name": spec.name,
                    "meta": meta,
                    "on_finish": on_finish,
                    "limits": limits,
                    "now": now,
                },
            )
            self._insert(conn, [dataclasses.replace(s, crawl=crawl_id) for s in start], now)
            conn.execute(Q["constraints_immediate"])
            info = conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
            assert info is not None
            return row_crawl(info)

        return self._run("creating a crawl", work)

    def crawl_get(self, crawl_id: int) -> CrawlInfo | None:
        rows = self._execute("reading a crawl", "crawl_get", {"id": crawl_id})
        return row_crawl(rows[0]) if rows else None

    def crawl_list(
        self, *, state: CrawlState | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[CrawlInfo]:
        params = {"after_id": after_id, "state": None if state is None else str(state)}
        rows = self._run(
            "listing crawls",
            lambda c: c.execute(limited("crawl_list", limit), params).fetchall(),
            transaction=False,
        )
        return [row_crawl(r) for r in rows]

    def _crawl_transition(
        self,
        operation: str,
        crawl_id: int,
        states: tuple[str, str],
        to: str,
        jobs: str,
        now: Timestamp | None,
    ) -> bool:
        """A crawl in one of ``states`` takes state ``to`` and ``jobs`` moves its jobs,
        in one transaction; False, changing nothing, if it was in another state.

        Pause and cancel move the jobs before they lock the crawl row (a claim holds its
        job rows while it waits for the crawl row, its counters), then once more for the
        jobs that joined meanwhile. Resume sets the state first: the triggers hold a
        job that turns pending in a crawl still paused. Siblings: the
        ``_crawl_transition`` of the SQLite and Redis stores."""
        params = {"id": crawl_id, "from": list(states), "to": to, "now": now}
        resume = to == CrawlState.RUNNING

        def work(conn: Conn) -> bool:
            row = conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
            if row is None or row["state"] not in states:
                return False
            if not resume:
                conn.execute(Q[jobs], {"id": crawl_id, "now": now})
            if conn.execute(Q["crawl_set_state"], params).fetchone() is None:
                raise Restart(f"crawl {crawl_id} changed state meanwhile")
            conn.execute(Q[jobs], {"id": crawl_id, "now": now})
            return True

        return self._run(operation, work)

    def _crawl_pause(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition(
            "pausing a crawl", crawl_id, ("running", "running"), "paused", "crawl_hold", now
        )

    def _crawl_resume(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition(
            "resuming a crawl", crawl_id, ("paused", "paused"), "running", "crawl_unhold", now
        )

    def _crawl_cancel(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition(
            "cancelling a crawl",
            crawl_id,
            ("running", "paused"),
            "cancelled",
            "crawl_cancel_jobs",
            now,
        )

    def _seen_add(
        self, crawl_id: int, fingerprints: list[bytes], now: Timestamp | None
    ) -> list[bool] | None:
        def work(conn: Conn) -> list[bool] | None:
            if not conn.execute(Q["crawl_lock"], {"ids": [crawl_id]}).fetchall():
                return None
            return self._seen_insert(conn, [(crawl_id, fp) for fp in fingerprints], now)

        return self._run("adding to a seen set", work)

    def _seen_has(self, crawl_id: int, fingerprints: list[bytes]) -> list[bool] | None:
        fps = fingerprints
        params = {"crawl_id": crawl_id, "fps": fps}
        rows = self._execute("reading a seen set", "seen_has", params)
        if not rows:
            return None
        known = {bytes(fp) for fp in rows[0]["known"]}
        return [fp in known for fp in fps]

    def _limit_write(self, operation: str, query: str, params: dict[str, Any]) -> None:
        """Write a key's record, then re-time its front (or give it one) at once."""

        def work(conn: Conn) -> None:
            # The front first (a job row before the key's, the order every write keeps);
            # the front its key then got is ours, demoted again under the new record.
            conn.execute(Q["limit_demote_front"], {"key": params["key"]})
            row = conn.execute(Q[query], params).fetchone()
            if row is not None and row["front"] is not None:
                conn.execute(Q["limit_demote"], {"id": row["front"]})
            conn.execute(Q["limit_reconcile"], {"key": params["key"], "now": params["now"]})

        self._run(operation, work)

    def _limit_set(self, key: str, limits: Limits, now: Timestamp | None) -> None:
        params = {
            "key": key,
            "max_running": limits.max_running,
            "min_interval": float(limits.min_interval),
            "now": now,
        }
        self._limit_write("setting a key's limits", "limit_set", params)

    def _limit_set_default(self, queue: str, limits: Limits | None) -> None:
        if limits is None:
            self._execute(
                "removing a queue's default limits", "limit_default_delete", {"queue": queue}
            )
            return
        params = {
            "queue": queue,
            "max_running": limits.max_running,
            "min_interval": float(limits.min_interval),
        }
        self._execute("setting a queue's default limits", "limit_default_set", params)

    def _limit_block(self, key: str, until: Timestamp, now: Timestamp | None) -> None:
        params = {"key": key, "until": float(until), "now": now}
        self._limit_write("blocking a key", "limit_block", params)

    def _limit_get(self, keys: Sequence[str]) -> list[KeyLimit | None]:
        rows = self._execute("reading keys", "limit_get", {"keys": list(keys)})
        found = {r["key"]: row_key_limit(r) for r in rows}
        return [found.get(key) for key in keys]

    def _limit_list(self, limit: int, after: str) -> list[KeyLimit]:
        rows = self._run(
            "listing keys",
            lambda c: c.execute(limited("limit_list", limit), {"after": after}).fetchall(),
            transaction=False,
        )
        return [row_key_limit(r) for r in rows]

    def _store_summary(self, now: Timestamp | None) -> StoreSummary:
        def work(conn: Conn) -> StoreSummary:
            crawls = conn.execute(Q["summary_crawls"]).fetchall()
            keys = conn.execute(Q["summary_keys"], {"now": now}).fetchone()
            return summary_of(crawls, keys)

        return self._run("summing up crawls and keys", work, transaction=False)
