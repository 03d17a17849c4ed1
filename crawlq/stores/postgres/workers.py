"""The PostgreSQL store's workers: their records, reaping the dead ones, maintenance
leases.
"""

from __future__ import annotations

from collections.abc import Sequence

from crawlq.jobs import WorkerInfo
from crawlq.stores.gate import WorkerGate
from crawlq.stores.postgres.core import PostgresCore, Q
from crawlq.stores.states import WORKER_LOST
from crawlq.stores.workers import (
    Counters,
    heartbeat_params,
    listed,
    register_params,
    stop_params,
    worker_info,
)
from crawlq.types import Timestamp


class PostgresWorkers(PostgresCore, WorkerGate):
    """Worker records and maintenance leases (``JobStore``)."""

    def _worker_register(self, info: WorkerInfo, now: Timestamp | None) -> None:
        params = register_params(info, list(info.queues), now)
        self._execute("registering a worker", "worker_register", params)

    def _worker_heartbeat(self, worker_id: str, counters: Counters, now: Timestamp | None) -> bool:
        params = heartbeat_params(worker_id, counters, now)
        return self._run(
            "heartbeating a worker",
            lambda c: c.execute(Q["worker_heartbeat"], params).rowcount == 1,
            transaction=False,
        )

    def _worker_stop(self, worker_id: str, done: int, failed: int, now: Timestamp | None) -> None:
        params = stop_params(worker_id, done=done, failed=failed, now=now)
        self._execute("stopping a worker", "worker_stop", params)

    def _worker_list(self, now: Timestamp | None) -> list[WorkerInfo]:
        rows = self._execute("listing workers", "worker_list", {"now": now})
        if not rows:
            return []
        return listed((worker_info(r, r["queues"]) for r in rows), float(rows[0]["listed_at"]))

    def _worker_reap(
        self, dead_after: float, gone: Sequence[str], now: Timestamp | None
    ) -> list[str]:
        params = {
            **WORKER_LOST,
            "dead_after": float(dead_after),
            "gone": list(gone),
            "now": now,
        }
        rows = self._execute("reaping dead workers", "worker_reap", params)
        if rows:
            self._compact_counts()
        return [str(r["id"]) for r in rows]

    def _worker_prune(self, older_than: float, now: Timestamp | None) -> int:
        params = {"older_than": float(older_than), "now": now}
        return self._run(
            "pruning workers",
            lambda c: c.execute(Q["worker_prune"], params).rowcount,
            transaction=False,
        )

    def _maintenance_acquire(
        self, duty: str, owner: str, ttl: float, now: Timestamp | None
    ) -> bool:
        params = {"duty": duty, "owner": owner, "ttl": float(ttl), "now": now}
        return bool(self._execute("acquiring a maintenance lease", "maintenance_acquire", params))
