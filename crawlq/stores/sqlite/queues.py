"""The SQLite store's listings and counts of jobs, their clean-up, and waiting for work."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from crawlq.jobs import Job, QueueStats, QueueTotals
from crawlq.payload import dumps
from crawlq.stores.base import JobFilter, WaitParams
from crawlq.stores.gate import JobGate
from crawlq.stores.sqlite.core import Q, row_job, translate
from crawlq.stores.sqlite.scheduling import SQLiteScheduling, Touched
from crawlq.stores.states import FINISHED, INTERNAL_STATES, totals_of
from crawlq.types import JobId, Timestamp


class SQLiteQueues(SQLiteScheduling, JobGate):
    """Reading jobs, requeueing, purging and pruning them, waiting for them, and the
    counts of queues (``JobStore``)."""

    def job_get(self, job_id: JobId) -> Job | None:
        row = self._read(
            "reading a job", lambda c: c.execute(Q["job_get"], {"id": job_id}).fetchone()
        )
        return None if row is None else row_job(row)

    @staticmethod
    def _filter_params(where: JobFilter) -> dict[str, Any]:
        return {
            "after_id": where.after_id,
            "ids": None if where.ids is None else dumps(list(where.ids)),
            "queue": where.queue,
            "task": where.task,
            "key": where.key,
            "crawl": where.crawl,
            "limit_key": where.limit_key,
            "state": None if where.state is None else dumps(INTERNAL_STATES[where.state]),
            "finished_before": where.finished_before,
            "limit": -1 if where.limit is None else where.limit,
        }

    def job_list(self, where: JobFilter) -> list[Job]:
        params = self._filter_params(where)
        rows = self._read("listing jobs", lambda c: c.execute(Q["job_list"], params).fetchall())
        return [row_job(r) for r in rows]

    def _job_recent(self, queues: Sequence[str], limit: int) -> list[Job]:
        params = {"queues": dumps(list(queues)), "limit": limit}
        rows = self._read(
            "listing finished jobs", lambda c: c.execute(Q["job_recent"], params).fetchall()
        )
        return [row_job(r) for r in rows]

    def _job_requeue(self, where: JobFilter, now: Timestamp | None) -> list[JobId]:
        t = self._now(now)
        params = self._filter_params(where)
        params["state"] = dumps(["dead"])

        def work(conn: sqlite3.Connection) -> list[JobId]:
            touched = Touched()
            requeued: list[JobId] = []
            for row in conn.execute(Q["job_list"], params).fetchall():
                if row["limit_key"] is not None:  # its record may have been pruned
                    crawl = None
                    if row["crawl_id"] is not None:
                        crawl = conn.execute(Q["crawl_get"], {"id": row["crawl_id"]}).fetchone()
                    limits = None if crawl is None else crawl["limits"]
                    self._ensure_key(conn, row["limit_key"], row["queue"], limits)
                if row["key"] is not None and row["key_released"] is not None:
                    # a later job took its key: released if that job has ended too
                    self._release_ended_keys(conn, [[row["queue"], row["key"]]], t)
                done = conn.execute(Q["job_requeue"], {"id": row["id"], "now": t}).fetchall()
                if done:
                    touched.note(done, crawls=False)
                    requeued.append(int(row["id"]))
            self._settle(conn, touched, t)
            return requeued

        return self._write("requeueing dead jobs", work)

    def _job_purge(self, where: JobFilter) -> int:
        params = self._filter_params(where)
        if where.state is None:  # select finished jobs before ``limit`` applies
            params["state"] = dumps(FINISHED)

        def work(conn: sqlite3.Connection) -> int:
            rows = conn.execute(Q["job_list"], params).fetchall()
            ids = [r["id"] for r in rows if r["state"] in FINISHED]
            return sum(conn.execute(Q["job_delete"], {"id": i}).rowcount for i in ids)

        return self._write("purging jobs", work)

    def _job_prune(self, retention: float, now: Timestamp | None) -> int:
        t = self._now(now)
        before = t - retention

        def work(conn: sqlite3.Connection) -> int:
            conn.execute(Q["limit_prune"], {"now": t})  # key records that say nothing
            conn.execute(Q["cache_prune"], {"now": t})  # expired cache entries
            queues = {r["queue"] for r in conn.execute(Q["queue_counts"])}
            return sum(
                conn.execute(
                    Q["job_prune"], {"queue": q, "state": state, "before": before}
                ).rowcount
                for q in sorted(queues)
                for state in ("done", "cancelled")
            )

        return self._write("pruning finished jobs", work)

    def _min_run_at(self, conn: sqlite3.Connection, queue: str, state: str) -> float | None:
        query = Q[f"queue_min_run_at_{state}"]
        value = conn.execute(query, {"queue": queue}).fetchone()[0]
        return None if value is None else float(value)

    def _job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        def work(conn: sqlite3.Connection) -> float | None:
            times = [
                t
                for q in queues
                for state in ("ready", "scheduled")
                if (t := self._min_run_at(conn, q, state)) is not None
            ]
            return min(times, default=None)

        return self._read("finding the next due job", work)

    def _job_next_gated(
        self, queues: Sequence[str], within: float, now: Timestamp | None
    ) -> Timestamp | None:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> float | None:
            args = {"until": t + within, "now": t}
            rows = [
                conn.execute(Q["job_next_gated"], {**args, "queue": q}).fetchone() for q in queues
            ]
            return min((float(r[0]) for r in rows if r is not None), default=None)

        return self._read("finding the next job a limit key keeps back", work)

    def _data_version(self) -> int:
        with self._wait_lock, translate("watching for new jobs"):
            return int(self._wait_conn.execute("PRAGMA data_version").fetchone()[0])

    def job_wait(self, params: WaitParams) -> None:
        deadline = time.monotonic() + params.timeout
        version = self._data_version()
        next_due = self.job_next_due(params.queues)
        if next_due is not None:
            deadline = min(deadline, time.monotonic() + (next_due - time.time()))
        while (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(self.settings.poll_interval, remaining))
            if self._data_version() != version:
                return

    def _queue_stats(self, now: Timestamp | None) -> list[QueueStats]:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> list[QueueStats]:
            counts: dict[str, dict[str, int]] = {}
            for row in conn.execute(Q["queue_counts"]):
                counts.setdefault(row["queue"], {})[row["state"]] = row["n"]
            return [self._queue_counts(conn, q, c, t) for q, c in sorted(counts.items())]

        return self._read("reading queue stats", work)

    def queue_totals(self) -> list[QueueTotals]:
        def work(conn: sqlite3.Connection) -> list[QueueTotals]:
            totals: dict[str, dict[str, int]] = {}
            for row in conn.execute(Q["queue_counts"]):
                totals.setdefault(row["queue"], {})[row["state"]] = row["n"]
            return [totals_of(q, counts) for q, counts in sorted(totals.items())]

        return self._read("reading queue totals", work)

    def _queue_counts(
        self, conn: sqlite3.Connection, queue: str, counts: dict[str, int], now: float
    ) -> QueueStats:
        args = {"queue": queue, "now": now}
        unpromoted = conn.execute(Q["queue_due_unpromoted"], args).fetchone()[0]
        oldest = [
            t
            for state in ("ready", "scheduled")
            if (t := self._min_run_at(conn, queue, state)) is not None and t <= now
        ]
        done_recent = conn.execute(
            Q["queue_done_since"], {"queue": queue, "since": now - 60.0}
        ).fetchone()[0]
        return QueueStats(
            queue=queue,
            due=counts.get("ready", 0) + unpromoted,
            scheduled=counts.get("scheduled", 0) - unpromoted,
            running=counts.get("running", 0),
            done=counts.get("done", 0),
            dead=counts.get("dead", 0),
            cancelled=counts.get("cancelled", 0),
            waiting=counts.get("waiting", 0),
            held=counts.get("held", 0),
            oldest_due_age=now - min(oldest) if oldest else None,
            done_last_minute=done_recent,
        )
