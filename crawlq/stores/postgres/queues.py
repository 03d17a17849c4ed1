"""The PostgreSQL store's listings and counts of jobs, their clean-up, and waiting for
work (``LISTEN``/``NOTIFY``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, LiteralString

from psycopg.rows import DictRow

from crawlq.jobs import Job, QueueStats, QueueTotals
from crawlq.stores.base import JobFilter, WaitParams
from crawlq.stores.gate import JobGate
from crawlq.stores.postgres.connections import unwell
from crawlq.stores.postgres.core import (
    COMPACT_AFTER,
    Conn,
    PostgresCore,
    Q,
    filtered,
    limited,
    row_job,
    translate,
)
from crawlq.stores.states import FINISHED, INTERNAL_STATES, totals_of
from crawlq.types import JobId, Timestamp


class PostgresQueues(PostgresCore, JobGate):
    """Reading jobs, requeueing, purging and pruning them, waiting for them (LISTEN),
    and the counts of queues (``JobStore``)."""

    def job_get(self, job_id: JobId) -> Job | None:
        row = self._run(
            "reading a job",
            lambda c: c.execute(Q["job_get"], {"id": job_id}).fetchone(),
            transaction=False,
        )
        return None if row is None else row_job(row)

    @staticmethod
    def _filter_params(where: JobFilter) -> dict[str, Any]:
        return {
            "after_id": where.after_id,
            "ids": None if where.ids is None else list(where.ids),
            "queue": where.queue,
            "task": where.task,
            "key": where.key,
            "crawl": where.crawl,
            "limit_key": where.limit_key,
            "states": None if where.state is None else INTERNAL_STATES[where.state],
            "finished_before": where.finished_before,
            "limit": where.limit,
        }

    def job_list(self, where: JobFilter) -> list[Job]:
        params = self._filter_params(where)
        rows = self._run(
            "listing jobs",
            lambda c: c.execute(
                filtered(limited("job_list", where.limit), params), params
            ).fetchall(),
            transaction=False,
        )
        return [row_job(r) for r in rows]

    def _job_recent(self, queues: Sequence[str], limit: int) -> list[Job]:
        params = {"queues": list(queues), "limit": limit}
        rows = self._run(
            "listing finished jobs",
            lambda c: c.execute(Q["job_recent"], params).fetchall(),
            transaction=False,
        )
        return [row_job(r) for r in rows]

    def _job_requeue(self, where: JobFilter, now: Timestamp | None) -> list[JobId]:
        params = {**self._filter_params(where), "now": now}
        rows = self._run(
            "requeueing dead jobs",
            lambda c: c.execute(
                filtered(limited("job_requeue", where.limit), params), params
            ).fetchall(),
            transaction=False,
        )
        return sorted(int(r["id"]) for r in rows)

    def _job_purge(self, where: JobFilter) -> int:
        params = self._filter_params(where)
        if where.state is None:  # select finished jobs before ``limit`` applies
            params["states"] = FINISHED
        return self._run(
            "purging jobs",
            lambda c: (
                c.execute(filtered(limited("job_purge", where.limit), params), params).rowcount
            ),
            transaction=False,
        )

    def _job_prune(self, retention: float, now: Timestamp | None) -> int:
        params = {"retention": retention, "now": now}

        def work(conn: Conn) -> int:
            pruned = conn.execute(Q["job_prune"], params).rowcount
            conn.execute(Q["job_prune_keys"], {"now": now})
            conn.execute(Q["cache_prune"], {"now": now})  # expired cache entries
            return pruned

        return self._run("pruning finished jobs", work, transaction=False)

    def _job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        row = self._run(
            "finding the next due job",
            lambda c: c.execute(Q["job_next_due"], {"queues": list(queues)}).fetchone(),
            transaction=False,
        )
        return None if row is None or row["next_due"] is None else float(row["next_due"])

    def _job_next_gated(
        self, queues: Sequence[str], within: float, now: Timestamp | None
    ) -> Timestamp | None:
        args = {"queues": list(queues), "within": within, "now": now}
        row = self._run(
            "finding the next job a limit key keeps back",
            lambda c: c.execute(Q["job_next_gated"], args).fetchone(),
            transaction=False,
        )
        return None if row is None or row["next_start"] is None else float(row["next_start"])

    def _queue_stats(self, now: Timestamp | None) -> list[QueueStats]:
        rows = self._run(
            "reading queue stats",
            lambda c: c.execute(Q["queue_stats"], {"now": now}).fetchall(),
            transaction=False,
        )
        if rows and rows[0]["deltas"] > COMPACT_AFTER:
            self._compact_counts()
        stats = [stats_of_row(r) for r in rows]
        stats.sort(key=lambda s: s.queue)
        return stats

    def queue_totals(self) -> list[QueueTotals]:
        rows = self._run(
            "reading queue totals",
            lambda c: c.execute(Q["queue_totals"]).fetchall(),
            transaction=False,
        )
        totals: dict[str, dict[str, int]] = {}
        for row in rows:
            totals.setdefault(row["queue"], {})[row["state"]] = row["n"]
        return [totals_of(q, counts) for q, counts in sorted(totals.items())]

    def job_wait(self, params: WaitParams) -> None:
        deadline = time.monotonic() + params.timeout
        wanted = {f"{self.settings.schema}:{q}" for q in params.queues}
        with translate("waiting for jobs"), self._listening() as conn:
            row = conn.execute(Q["job_next_due"], {"queues": list(params.queues)}).fetchone()
            if row is not None and row["next_due"] is not None:
                if row["next_due"] <= row["now"]:
                    return
                deadline = min(deadline, time.monotonic() + row["next_due"] - row["now"])
            while (remaining := deadline - time.monotonic()) > 0:
                for notify in conn.notifies(timeout=remaining):
                    if notify.payload in wanted:
                        return

    @contextmanager
    def _listening(
        self, listen: LiteralString = Q["listen"], unlisten: LiteralString = Q["unlisten"]
    ) -> Iterator[Conn]:
        """A dedicated connection that LISTENs (on new jobs, unless told otherwise) for
        the call's duration; notifications that arrived before are dropped (the caller
        looks at the store after this)."""
        conn = self._take_listener()
        clean = False
        try:
            conn.execute(listen)
            for _ in conn.notifies(timeout=0):
                pass
            yield conn
            conn.execute(unlisten)
            clean = True
        finally:
            if clean and not self._closed:
                with self._listeners_lock:
                    self._listeners.append(conn)
            else:
                conn.close()

    def _take_listener(self) -> Conn:
        while True:
            with self._listeners_lock:
                conn = self._listeners.pop() if self._listeners else None
            if conn is None:
                break
            if not unwell(conn):
                return conn
            conn.close()
        return self._connections.connect(deadline=time.monotonic())  # one attempt


def stats_of_row(row: DictRow) -> QueueStats:
    now = row["now"]
    unpromoted = row["unpromoted"]
    oldest = [
        t for t in (row["oldest_ready"], row["oldest_scheduled"]) if t is not None and t <= now
    ]
    return QueueStats(
        queue=row["queue"],
        due=row["ready"] + unpromoted,
        scheduled=row["scheduled"] - unpromoted,
        waiting=row["waiting"],
        held=row["held"],
        running=row["running"],
        done=row["done"],
        dead=row["dead"],
        cancelled=row["cancelled"],
        oldest_due_age=now - min(oldest) if oldest else None,
        done_last_minute=row["done_recent"],
    )
