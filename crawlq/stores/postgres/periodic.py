"""Periodic schedules on the PostgreSQL store (``crawlq.stores.periodic``): a mixin of
``PostgresStore``.

A fire is one transaction for a batch of due schedules: they are read and locked with
``FOR UPDATE SKIP LOCKED`` (a concurrent scheduler takes the next ones instead of
waiting), planned in Python, checked and moved on with one ``UPDATE ... FROM unnest``
(which also reads whether each fire time is in the ledger), their jobs scheduled as
``job_schedule`` does, and recorded in the ledger with one ``INSERT`` whose primary key
(schedule, fire time) is the unique write: a violation rolls the whole transaction back
and it runs again. A fire locks schedules, then jobs; nothing locks them the other way."""

from __future__ import annotations

from typing import Any, TypeVar

import psycopg
from psycopg.rows import DictRow

from crawlq.jobs import Outcome
from crawlq.periodic import FireOutcome, FireRecord, Firing, Periodic, PeriodicInfo
from crawlq.stores._sqlfile import load_queries
from crawlq.stores.periodic import (
    Planner,
    info_from_row,
    put_outcome,
    put_params,
    record_from_row,
)
from crawlq.stores.postgres.scheduling import PostgresScheduling
from crawlq.types import Timestamp

T = TypeVar("T")
Conn = psycopg.Connection[DictRow]

PQ = load_queries("crawlq.stores.postgres", "periodic.sql")


def _info(row: DictRow) -> PeriodicInfo:
    return info_from_row(row, live=bool(row["live"]))


class PostgresPeriodic(PostgresScheduling):
    """The ``PeriodicStore`` operations of ``PostgresStore``."""

    def _periodic_rows(
        self, operation: str, query: str, params: dict[str, Any], *, transaction: bool = False
    ) -> list[DictRow]:
        def work(conn: Conn) -> list[DictRow]:
            cursor = conn.execute(PQ[query], params)
            return cursor.fetchall() if cursor.description is not None else []

        return self._run(operation, work, transaction=transaction)

    def periodic_put(
        self, periodic: Periodic, *, next_fire: Timestamp, now: Timestamp | None = None
    ) -> Outcome:
        params = put_params(periodic, next_fire, now)

        def work(conn: Conn) -> Outcome:
            if conn.execute(PQ["periodic_insert"], params).fetchall():
                return Outcome.CREATED
            row = conn.execute(PQ["periodic_definition"], params).fetchone()
            if row is None:  # removed meanwhile: put it again
                conn.execute(PQ["periodic_insert"], params)
                return Outcome.CREATED
            outcome = put_outcome(row["definition"], periodic.definition)
            if outcome is Outcome.UPDATED:
                conn.execute(PQ["periodic_update"], params)
            return outcome

        return self._run("saving a periodic schedule", work)

    def periodic_get(self, name: str) -> PeriodicInfo | None:
        rows = self._periodic_rows("reading a periodic schedule", "periodic_get", {"name": name})
        return _info(rows[0]) if rows else None

    def periodic_list(self) -> list[PeriodicInfo]:
        return [_info(r) for r in self._periodic_rows("listing schedules", "periodic_list", {})]

    def periodic_remove(self, name: str) -> bool:
        params = {"name": name}
        return bool(self._periodic_rows("removing a schedule", "periodic_remove", params))

    def periodic_pause(self, name: str, *, now: Timestamp | None = None) -> bool:
        params = {"name": name, "now": now}
        return bool(self._periodic_rows("pausing a schedule", "periodic_pause", params))

    def periodic_resume(
        self, name: str, *, next_fire: Timestamp, now: Timestamp | None = None
    ) -> bool:
        params = {"name": name, "next_fire": float(next_fire), "now": now}
        return bool(self._periodic_rows("resuming a schedule", "periodic_resume", params))

    def periodic_fire_due(
        self, plan: Planner, *, limit: int, now: Timestamp | None = None
    ) -> list[FireRecord]:
        def work(conn: Conn) -> list[FireRecord]:
            rows = conn.execute(PQ["periodic_due"], {"now": now, "limit": limit}).fetchall()
            if not rows:
                return []
            t = float(rows[0]["now"])
            return self._fire(conn, plan([_info(r) for r in rows], t), t, now)

        return self._run("firing periodic schedules", work)

    def _fire(
        self, conn: Conn, firings: list[Firing], t: float, now: Timestamp | None
    ) -> list[FireRecord]:
        params = {
            "name": [f.name for f in firings],
            "fire_at": [f.fire_at for f in firings],
            "revision": [f.revision for f in firings],
            "next_fire": [f.next_fire for f in firings],
            "now": now,
        }
        claimed = {
            (r["name"], r["fire_at"])
            for r in conn.execute(PQ["periodic_claim"], params).fetchall()
            if not r["recorded"]
        }
        kept = [f for f in firings if (f.name, f.fire_at) in claimed]
        fired = [f for f in kept if f.outcome is FireOutcome.FIRED and f.spec is not None]
        specs = [f.spec for f in fired if f.spec is not None]
        results = self._insert(conn, specs, now) if specs else []
        jobs = {f.name: r.job_id for f, r in zip(fired, results, strict=True)}
        records = [
            FireRecord(
                name=f.name,
                fire_at=f.fire_at,
                outcome=f.outcome,
                job_id=jobs.get(f.name),
                fired_at=t,
            )
            for f in kept
        ]
        if records:
            values = {
                "name": [r.name for r in records],
                "fire_at": [r.fire_at for r in records],
                "outcome": [r.outcome.value for r in records],
                "job_id": [r.job_id for r in records],
                "now": now,
            }
            conn.execute(PQ["periodic_record"], values)
        return records

    def periodic_next(self) -> Timestamp | None:
        rows = self._periodic_rows("reading the next fire time", "periodic_next", {})
        value = rows[0]["next_fire"] if rows else None
        return None if value is None else float(value)

    def periodic_fires(self, name: str, *, limit: int = 1000) -> list[FireRecord]:
        params = {"name": name, "limit": limit}
        rows = self._periodic_rows("reading a schedule's fire times", "periodic_fires", params)
        return [record_from_row(r) for r in rows]

    def periodic_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        def work(conn: Conn) -> int:
            params = {"older_than": float(older_than), "now": now}
            return conn.execute(PQ["periodic_prune"], params).rowcount

        return self._run("pruning periodic fire records", work, transaction=False)
