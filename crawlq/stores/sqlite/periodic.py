"""Periodic schedules on the SQLite store (``crawlq.stores.periodic``): a mixin of
``SQLiteStore``. Each call is one write transaction of the store, so a fire's ledger
record, its job and the schedule's next fire time commit together."""

from __future__ import annotations

import sqlite3
from typing import Any, TypeVar

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
from crawlq.stores.sqlite.scheduling import SQLiteScheduling, Touched
from crawlq.types import Timestamp

T = TypeVar("T")

PQ = load_queries("crawlq.stores.sqlite", "periodic.sql")


def _info(row: sqlite3.Row) -> PeriodicInfo:
    return info_from_row(row, live=bool(row["live"]))


class SQLitePeriodic(SQLiteScheduling):
    """The ``PeriodicStore`` operations of ``SQLiteStore``."""

    def periodic_put(
        self, periodic: Periodic, *, next_fire: Timestamp, now: Timestamp | None = None
    ) -> Outcome:
        params = put_params(periodic, next_fire, self._now(now))

        def work(conn: sqlite3.Connection) -> Outcome:
            row = conn.execute(PQ["periodic_definition"], params).fetchone()
            outcome = put_outcome(None if row is None else row[0], periodic.definition)
            if outcome is Outcome.CREATED:
                conn.execute(PQ["periodic_insert"], params)
            elif outcome is Outcome.UPDATED:
                conn.execute(PQ["periodic_update"], params)
            return outcome

        return self._write("saving a periodic schedule", work)

    def periodic_get(self, name: str) -> PeriodicInfo | None:
        def work(conn: sqlite3.Connection) -> PeriodicInfo | None:
            row = conn.execute(PQ["periodic_get"], {"name": name}).fetchone()
            return None if row is None else _info(row)

        return self._read("reading a periodic schedule", work)

    def periodic_list(self) -> list[PeriodicInfo]:
        def work(conn: sqlite3.Connection) -> list[PeriodicInfo]:
            return [_info(r) for r in conn.execute(PQ["periodic_list"])]

        return self._read("listing periodic schedules", work)

    def _periodic_change(self, operation: str, query: str, params: dict[str, Any]) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            if not conn.execute(PQ["periodic_exists"], params).fetchall():
                return False
            conn.execute(PQ[query], params).fetchall()
            return True

        return self._write(operation, work)

    def periodic_remove(self, name: str) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            conn.execute(PQ["periodic_remove_fires"], {"name": name})
            return bool(conn.execute(PQ["periodic_remove"], {"name": name}).fetchall())

        return self._write("removing a periodic schedule", work)

    def periodic_pause(self, name: str, *, now: Timestamp | None = None) -> bool:
        params = {"name": name, "now": self._now(now)}
        return self._periodic_change("pausing a periodic schedule", "periodic_pause", params)

    def periodic_resume(
        self, name: str, *, next_fire: Timestamp, now: Timestamp | None = None
    ) -> bool:
        params = {"name": name, "next_fire": float(next_fire), "now": self._now(now)}
        return self._periodic_change("resuming a periodic schedule", "periodic_resume", params)

    def periodic_fire_due(
        self, plan: Planner, *, limit: int, now: Timestamp | None = None
    ) -> list[FireRecord]:
        t = self._now(now)

        def any_due(conn: sqlite3.Connection) -> bool:
            return conn.execute(PQ["periodic_any_due"], {"now": t}).fetchone() is not None

        if not self._read("looking for due schedules", any_due):
            return []  # no write lock taken when nothing is due (the common case)

        def work(conn: sqlite3.Connection) -> list[FireRecord]:
            due = [_info(r) for r in conn.execute(PQ["periodic_due"], {"now": t, "limit": limit})]
            if not due:
                return []
            touched = Touched()
            records = [self._fire(conn, f, t, touched) for f in plan(due, t)]
            self._settle(conn, touched, t)
            return [r for r in records if r is not None]

        return self._write("firing periodic schedules", work)

    def _fire(
        self, conn: sqlite3.Connection, firing: Firing, now: float, touched: Touched
    ) -> FireRecord | None:
        params = {
            "name": firing.name,
            "fire_at": firing.fire_at,
            "revision": firing.revision,
            "next_fire": firing.next_fire,
            "outcome": firing.outcome.value,
            "now": now,
        }
        if not conn.execute(PQ["periodic_claim"], params).fetchall():
            return None
        if not conn.execute(PQ["periodic_record"], params).fetchall():
            return None
        job_id = None
        if firing.outcome is FireOutcome.FIRED and firing.spec is not None:
            result = self._schedule_one(conn, firing.spec, now, touched)
            job_id = None if result is None else result.job_id
            conn.execute(PQ["periodic_set_job"], {**params, "job_id": job_id})
            conn.execute(PQ["periodic_set_last_job"], {**params, "job_id": job_id})
        return FireRecord(
            name=firing.name,
            fire_at=firing.fire_at,
            outcome=firing.outcome,
            job_id=job_id,
            fired_at=now,
        )

    def periodic_next(self) -> Timestamp | None:
        def work(conn: sqlite3.Connection) -> Timestamp | None:
            value = conn.execute(PQ["periodic_next"]).fetchone()[0]
            return None if value is None else float(value)

        return self._read("reading the next fire time", work)

    def periodic_fires(self, name: str, *, limit: int = 1000) -> list[FireRecord]:
        def work(conn: sqlite3.Connection) -> list[FireRecord]:
            rows = conn.execute(PQ["periodic_fires"], {"name": name, "limit": limit})
            return [record_from_row(r) for r in rows]

        return self._read("reading a schedule's fire times", work)

    def periodic_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        cutoff = self._now(now) - older_than

        def work(conn: sqlite3.Connection) -> int:
            return conn.execute(PQ["periodic_prune"], {"cutoff": cutoff}).rowcount

        return self._write("pruning periodic fire records", work)
