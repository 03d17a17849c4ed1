"""The SQLite store's workers: their records, reaping the dead ones, maintenance leases."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from crawlq.jobs import WorkerInfo
from crawlq.payload import dumps
from crawlq.stores import states
from crawlq.stores.gate import WorkerGate
from crawlq.stores.sqlite.core import Q
from crawlq.stores.sqlite.scheduling import SQLiteScheduling
from crawlq.stores.workers import (
    Counters,
    heartbeat_params,
    listed,
    register_params,
    stop_params,
    worker_info,
)
from crawlq.types import Timestamp


class SQLiteWorkers(SQLiteScheduling, WorkerGate):
    """Worker records and maintenance leases (``JobStore``)."""

    def _worker_register(self, info: WorkerInfo, now: Timestamp | None) -> None:
        params = register_params(info, dumps(list(info.queues)), self._now(now))
        self._write("registering a worker", lambda c: c.execute(Q["worker_register"], params))

    def _worker_heartbeat(self, worker_id: str, counters: Counters, now: Timestamp | None) -> bool:
        params = heartbeat_params(worker_id, counters, self._now(now))
        return self._write(
            "heartbeating a worker",
            lambda c: c.execute(Q["worker_heartbeat"], params).rowcount == 1,
        )

    def _worker_stop(self, worker_id: str, done: int, failed: int, now: Timestamp | None) -> None:
        params = stop_params(worker_id, done=done, failed=failed, now=self._now(now))
        self._write("stopping a worker", lambda c: c.execute(Q["worker_stop"], params))

    def _worker_list(self, now: Timestamp | None) -> list[WorkerInfo]:
        rows = self._read("listing workers", lambda c: c.execute(Q["worker_list"]).fetchall())
        return listed((worker_info(dict(r), json.loads(r["queues"])) for r in rows), self._now(now))

    def _worker_reap(
        self, dead_after: float, gone: Sequence[str], now: Timestamp | None
    ) -> list[str]:
        t = self._now(now)
        probe = {"now": t, "dead_after": dead_after}
        if not gone and not self._read(
            "probing for dead workers",
            lambda c: bool(c.execute(Q["worker_any_overdue"], probe).fetchone()[0]),
        ):
            return []  # the common case takes no write lock
        params = {**probe, "gone": dumps(list(gone))}

        def work(conn: sqlite3.Connection) -> list[str]:
            dead = sorted(r["id"] for r in conn.execute(Q["worker_reap"], params))
            for worker_id in dead:
                query = Q["job_return_worker_leases"]
                lost = {**states.WORKER_LOST, "worker_id": worker_id, "now": t}
                rows = conn.execute(query, lost).fetchall()
                self._leases_returned(conn, rows, t)
            return dead

        return self._write("reaping dead workers", work)

    def _worker_prune(self, older_than: float, now: Timestamp | None) -> int:
        before = self._now(now) - older_than
        return self._write(
            "pruning workers",
            lambda c: c.execute(Q["worker_prune"], {"before": before}).rowcount,
        )

    def _maintenance_acquire(
        self, duty: str, owner: str, ttl: float, now: Timestamp | None
    ) -> bool:
        params = {"duty": duty, "owner": owner, "ttl": ttl, "now": self._now(now)}
        # the workers that do not hold the duty take no write lock
        doing = ("probing a maintenance lease", "acquiring a maintenance lease")
        return self._take_unless_held(
            doing, "maintenance_held_elsewhere", "maintenance_acquire", params
        )
