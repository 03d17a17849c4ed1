"""Scheduling inside a PostgreSQL transaction: the batch insert, the seen-set check of
crawl jobs, and merging requests into the live jobs of their keys (``on_conflict``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.rows import DictRow

from crawlq.crawls import OPEN_CRAWL_STATES, CrawlState, no_such_crawl
from crawlq.jobs import JobSpec, Outcome, ScheduleResult
from crawlq.payload import dumps
from crawlq.stores.checks import crawl_closed
from crawlq.stores.codec import request_params
from crawlq.stores.conflict import Request, merge
from crawlq.stores.postgres.core import Conn, PostgresCore, Q, Restart, row_request
from crawlq.types import JobId, Timestamp

_LEFT_OUT = {
    **dict.fromkeys(("key", "given_run_at", "timeout", "crawl_id", "limit_key")),
    "hold": False,
}
"""The columns ``insert_row`` leaves out, with the value each stands for (json_to_recordset
reads a missing key as NULL; ``job_insert_many`` takes a missing hold as false)."""


def insert_row(spec: JobSpec, hold: bool) -> dict[str, Any]:
    """One job as ``job_insert_many`` reads it: a JSON object, NULL columns left out (a
    plain job's object is a third shorter, to encode, send and parse)."""
    row: dict[str, Any] = {
        "queue": spec.queue,
        "task": spec.task,
        "args": spec.args,
        "kwargs": spec.kwargs,
        "priority": spec.priority,
        "delay": float(spec.delay),
        "max_attempts": spec.max_attempts,
        "lease_seconds": float(spec.lease_seconds),
    }
    if spec.key is not None:
        row["key"] = spec.key
    if spec.run_at is not None:
        row["given_run_at"] = float(spec.run_at)
    if spec.timeout is not None:
        row["timeout"] = float(spec.timeout)
    if spec.crawl is not None:
        row["crawl_id"] = spec.crawl
    if hold:
        row["hold"] = True
    if spec.limit_key is not None:
        row["limit_key"] = spec.limit_key
    return row


def insert_params(
    specs: Sequence[JobSpec], now: Timestamp | None, paused: frozenset[int] = frozenset()
) -> dict[str, Any]:
    """Parameters of ``job_insert_one`` for one spec (one per column), else of
    ``job_insert_many`` (the specs as one JSON list of rows, ``insert_row``); jobs of the
    ``paused`` crawls are held. Arguments that are not JSON raise here, before any I/O."""
    if len(specs) != 1:
        return {"rows": dumps([insert_row(s, s.crawl in paused) for s in specs]), "now": now}
    [spec] = specs
    return {
        **_LEFT_OUT,
        **insert_row(spec, spec.crawl in paused),
        "args": dumps(spec.args),
        "kwargs": dumps(spec.kwargs),
        "now": now,
    }


def created_one(row: DictRow | None) -> ScheduleResult | None:
    """The result of ``job_insert_one`` or ``job_insert_crawl_one``: CREATED, or None when
    nothing was inserted (its key is live, or its crawl is not open)."""
    return None if row is None or row["id"] is None else ScheduleResult(row["id"], Outcome.CREATED)


def checked_crawl(spec: JobSpec, row: DictRow | None) -> None:
    """Raise if ``job_insert_crawl_one`` found the spec's crawl unknown or closed."""
    if spec.crawl is None or row is None:
        return
    if row["crawl_state"] is None:
        raise no_such_crawl(spec.crawl)
    if row["crawl_state"] not in OPEN_CRAWL_STATES:
        raise crawl_closed(spec.crawl, row["crawl_state"])


@dataclass(slots=True)
class Live:
    """A live job of a key, as the conflicting requests of one call change it."""

    id: JobId
    running: bool
    request: Request
    followup: Request | None
    changed: bool = False


def live_from_row(row: DictRow) -> Live:
    return Live(
        id=row["id"],
        running=row["state"] == "running",
        request=row_request(row),
        followup=None if row["followup"] is None else Request(**row["followup"]),
    )


def apply_request(job: Live, incoming: Request, spec: JobSpec) -> Outcome:
    """Merge a request into the live job of its key (or into its remembered request)."""
    if job.running:
        merged = (
            incoming if job.followup is None else merge(job.followup, incoming, spec.on_conflict)
        )
        if merged is None:
            return Outcome.UNCHANGED
        job.followup, job.changed = merged, True
        return Outcome.DEFERRED
    merged = merge(job.request, incoming, spec.on_conflict)
    if merged is None:
        return Outcome.UNCHANGED
    job.request, job.changed = merged, True
    return Outcome.UPDATED


def pending_params(jobs: Sequence[Live], now: Timestamp | None) -> dict[str, Any]:
    """Parameters of ``job_update_pending``: one array per column."""
    rows = [request_params(j.request) for j in jobs]
    columns = {name: [row[name] for row in rows] for name in rows[0]}
    return {"id": [j.id for j in jobs], **columns, "now": now}


class PostgresScheduling(PostgresCore):
    """Inserting jobs, with their crawls locked, their fingerprints added to seen sets and
    their keys' live jobs merged: shared by scheduling, completion (children) and crawl
    creation (start jobs)."""

    def _insert(
        self,
        conn: Conn,
        specs: Sequence[JobSpec],
        now: Timestamp | None,
        params: dict[str, Any] | None = None,
        *,
        children: bool = False,
    ) -> list[ScheduleResult]:
        """Insert jobs in order; a spec whose key is live is merged into the live job by
        its policy (or remembered, if the job is running), in order too. Specs of a crawl
        lock it first: an unknown crawl raises CrawlNotFound, a closed one CrawlClosed
        (with ``children`` such a spec is dropped, and has no result); a fingerprint
        already seen gives SEEN and writes nothing."""
        if not specs:
            return []
        crawls = {s.crawl for s in specs if s.crawl is not None}
        if not crawls:
            return self._insert_many(conn, specs, now, params)
        states = {
            r["id"]: r["state"]
            for r in conn.execute(Q["crawl_lock"], {"ids": sorted(crawls)}).fetchall()
        }
        for crawl in sorted(crawls):
            if crawl not in states:
                raise no_such_crawl(crawl)
            if states[crawl] not in OPEN_CRAWL_STATES and not children:
                raise crawl_closed(crawl, states[crawl])
        results: list[ScheduleResult | None] = [None] * len(specs)
        kept = [
            i
            for i, s in enumerate(specs)
            if s.crawl is None or states[s.crawl] in OPEN_CRAWL_STATES
        ]
        pairs: list[tuple[int, bytes]] = []
        for i in kept:
            owner, fp = specs[i].crawl, specs[i].fingerprint
            if owner is not None and fp is not None:
                pairs.append((owner, fp))
        fresh = self._seen_insert(conn, pairs, now)
        new_fps = iter(fresh)
        chosen: list[int] = []
        for i in kept:
            if specs[i].fingerprint is not None and not next(new_fps):
                results[i] = ScheduleResult(0, Outcome.SEEN)
            else:
                chosen.append(i)
        paused = frozenset(c for c, state in states.items() if state == CrawlState.PAUSED)
        chosen_specs = [specs[i] for i in chosen]
        inserted = self._insert_many(
            conn, chosen_specs, now, insert_params(chosen_specs, now, paused)
        )
        for i, result in zip(chosen, inserted, strict=True):
            results[i] = result
        return [r for r in results if r is not None]  # only dropped children have none

    def _seen_insert(
        self, conn: Conn, pairs: Sequence[tuple[int, bytes]], now: Timestamp | None
    ) -> list[bool]:
        """Add (crawl, fingerprint) pairs to seen sets in order; True where new (the
        crawls are locked by the caller)."""
        if not pairs:
            return []
        params = {"crawl_id": [c for c, _ in pairs], "fp": [f for _, f in pairs]}
        added = {
            (r["crawl_id"], bytes(r["fp"]))
            for r in conn.execute(Q["seen_insert"], params).fetchall()
        }
        answers: list[bool] = []
        for pair in pairs:
            answers.append(pair in added)
            added.discard(pair)
        return answers

    def _insert_many(
        self,
        conn: Conn,
        specs: Sequence[JobSpec],
        now: Timestamp | None,
        params: dict[str, Any] | None,
    ) -> list[ScheduleResult]:
        if not specs:
            return []
        query_params = insert_params(specs, now) if params is None else params
        created: list[ScheduleResult | None]
        if "rows" not in query_params:  # insert_params made one spec's columns
            row = conn.execute(Q["job_insert_one"], query_params).fetchone()
            created = [created_one(row)]
        else:
            rows = conn.execute(Q["job_insert_many"], query_params).fetchall()
            created = [
                ScheduleResult(r["id"], Outcome.CREATED) if r["created"] else None for r in rows
            ]
        conflicts = [i for i, r in enumerate(created) if r is None]
        merged = (
            self._merge_conflicts(conn, [specs[i] for i in conflicts], now) if conflicts else []
        )
        answers = dict(zip(conflicts, merged, strict=True))
        return [r if r is not None else answers[i] for i, r in enumerate(created)]

    def _merge_conflicts(
        self, conn: Conn, specs: Sequence[JobSpec], now: Timestamp | None
    ) -> list[ScheduleResult]:
        """Lock the live jobs of the specs' keys, merge each spec into its job in order,
        and write what changed."""
        params = {"queue": [s.queue for s in specs], "key": [s.key for s in specs], "now": now}
        found = conn.execute(Q["job_lock_live"], params).fetchall()
        live = {(r["queue"], r["key"]): live_from_row(r) for r in found}
        results: list[ScheduleResult] = []
        for spec in specs:
            job = live.get((spec.queue, spec.key))
            if job is None:  # it ended between the insert and the lock
                raise Restart(f"the live job of key {spec.key!r} ended meanwhile")
            incoming = Request.from_spec(spec, found[0]["now"])
            results.append(ScheduleResult(job.id, apply_request(job, incoming, spec)))
        changed = [j for j in live.values() if j.changed]
        pending = [j for j in changed if not j.running]
        running = [j for j in changed if j.running and j.followup is not None]
        if pending:
            conn.execute(Q["job_update_pending"], pending_params(pending, now))
        if running:
            followups = [j.followup.to_json() for j in running if j.followup is not None]
            conn.execute(
                Q["job_set_followup"], {"id": [j.id for j in running], "followup": followups}
            )
        return results
