"""Scheduling inside a SQLite write transaction, and the settling that ends every write
that touched a limit key or a crawl (``_settle``): each key gets its front back
(``crawlq.limits``), then each open crawl with nothing outstanding finishes and schedules
its ``on_finish``.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from crawlq.crawls import OPEN_CRAWL_STATES, CrawlState, no_such_crawl
from crawlq.jobs import JobSpec, Outcome, ScheduleResult
from crawlq.payload import dumps
from crawlq.stores import states
from crawlq.stores.checks import crawl_closed
from crawlq.stores.codec import limits_from, on_finish_spec, request_params
from crawlq.stores.conflict import Request, merge
from crawlq.stores.sqlite.core import Q, SQLiteCore, listed, row_batches, row_request
from crawlq.types import JobId


class DueFront(NamedTuple):
    """A limit key's new front that is due now (``_reconcile``)."""

    queue: str
    order: states.ClaimOrder
    key: str
    more: int
    """How many more of the key's jobs may start with it: the key's room under its cap
    once it has started. (A key whose front is due now after a start in the same call
    has no ``min_interval`` and no block: the start moved its gate to now.)"""


@dataclass(slots=True)
class Touched:
    """What one transaction changed that must be settled before it commits: limit keys
    to reconcile and crawls that may have finished."""

    keys: set[str] = field(default_factory=set)
    crawls: set[int] = field(default_factory=set)
    ensured: set[str] = field(default_factory=set)
    """Keys whose record this transaction already made sure of."""
    open_crawls: dict[int, sqlite3.Row] = field(default_factory=dict)
    """Open crawls this transaction read, by id (forgotten when one finishes)."""
    lone_keys: set[str] = field(default_factory=set)
    """Limit keys that one spec only of the call uses: its job may be inserted as the
    key's front (it is the only candidate)."""

    def note(self, rows: Iterable[sqlite3.Row], *, crawls: bool = True) -> None:
        for row in rows:
            if row["limit_key"] is not None:
                self.keys.add(row["limit_key"])
            if crawls and row["crawl_id"] is not None:
                self.crawls.add(row["crawl_id"])


class SQLiteScheduling(SQLiteCore):
    """Writes that schedule jobs and settle what they touched, inside a write transaction:
    shared by scheduling, completion (children, remembered requests), crawls (start
    jobs, ``on_finish``) and worker reaping."""

    def _open_crawl(
        self, conn: sqlite3.Connection, crawl_id: int, touched: Touched, *, drop_closed: bool
    ) -> sqlite3.Row | None:
        """The open crawl a job joins: ``CrawlNotFound`` if there is none; if it is
        closed, ``CrawlClosed``, or None with ``drop_closed`` (children, follow-ups).
        Read once per transaction (a batch of jobs of one crawl reads it once)."""
        row: sqlite3.Row | None = touched.open_crawls.get(crawl_id)
        if row is not None:
            return row
        row = conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
        if row is None:
            raise no_such_crawl(crawl_id)
        if row["state"] in OPEN_CRAWL_STATES:
            touched.open_crawls[crawl_id] = row
            return row
        if drop_closed:
            return None
        raise crawl_closed(crawl_id, row["state"])

    def _schedule_all(
        self,
        conn: sqlite3.Connection,
        specs: Sequence[JobSpec],
        now: float,
        touched: Touched,
        *,
        drop_closed: bool = False,
    ) -> list[ScheduleResult | None]:
        """Schedule ``specs`` as ``_schedule_one`` would, one after the other, in a few
        statements for a run of them (``_schedule_run``): a run ends before a spec whose
        unique key has a live job (before the call, or from an earlier spec of it), which
        goes alone. A page's links, a bulk schedule and a batch of fresh keys are one run.
        """
        if len(specs) <= 1:  # a completion without children costs nothing here
            one = self._schedule_one
            return [one(conn, spec, now, touched, drop_closed=drop_closed) for spec in specs]
        taken = self._live_keys(conn, specs, now)
        results: list[ScheduleResult | None] = []
        start = 0
        for i, spec in enumerate(specs):
            if spec.key is None:
                continue
            if (spec.queue, spec.key) not in taken:
                taken.add((spec.queue, spec.key))  # a later spec with it meets its job
                continue
            results += self._schedule_run(conn, specs[start:i], now, touched, drop_closed)
            results.append(self._schedule_one(conn, spec, now, touched, drop_closed=drop_closed))
            start = i + 1
        results += self._schedule_run(conn, specs[start:], now, touched, drop_closed)
        return results

    @staticmethod
    def _release_ended_keys(
        conn: sqlite3.Connection, pairs: Sequence[Sequence[str]], now: float
    ) -> bool:
        """The ended jobs holding the (queue, key) ``pairs`` release them; whether any did."""
        params = {"pairs": dumps(pairs), "now": now}
        return bool(conn.execute(Q["job_release_ended_keys"], params).fetchall())

    def _live_keys(
        self, conn: sqlite3.Connection, specs: Sequence[JobSpec], now: float
    ) -> set[tuple[str, str]]:
        """The (queue, key) pairs of ``specs`` that have a live job (none read when no spec
        has a key); the ended jobs that hold the others release them, for the new jobs."""
        pairs = [[spec.queue, spec.key] for spec in specs if spec.key is not None]
        if not pairs:
            return set()
        rows = conn.execute(Q["job_key_holders"], {"pairs": dumps(pairs)}).fetchall()
        ended = [[row["queue"], row["key"]] for row in rows if not row["live"]]
        if ended:
            self._release_ended_keys(conn, ended, now)
        return {(row["queue"], row["key"]) for row in rows if row["live"]}

    def _schedule_run(
        self,
        conn: sqlite3.Connection,
        specs: Sequence[JobSpec],
        now: float,
        touched: Touched,
        drop_closed: bool,
    ) -> list[ScheduleResult | None]:
        """Specs none of whose keys is live (each makes a new job unless seen), in order:
        their crawls read, then one statement for the fingerprints new to their crawls'
        seen sets (a spec whose fingerprint was seen, by its crawl or an earlier spec, is
        SEEN) and one for the jobs, each per 64 (``row_batches``)."""
        results: list[ScheduleResult | None] = [None] * len(specs)
        joining: list[tuple[int, JobSpec, sqlite3.Row | None]] = []
        for i, spec in enumerate(specs):
            crawl = None
            if spec.crawl is not None:
                crawl = self._open_crawl(conn, spec.crawl, touched, drop_closed=drop_closed)
                if crawl is None:
                    continue  # dropped: its result stays None
            joining.append((i, spec, crawl))
        pairs = [
            (spec.crawl, spec.fingerprint)
            for _, spec, _ in joining
            if spec.crawl is not None and spec.fingerprint is not None
        ]
        new = self._seen_new(conn, pairs)
        rows: list[tuple[Any, ...]] = []
        placed: list[tuple[int, str | None]] = []
        for i, spec, crawl in joining:
            if spec.crawl is not None and spec.fingerprint is not None:
                pair = (spec.crawl, spec.fingerprint)
                if pair not in new:
                    results[i] = ScheduleResult(0, Outcome.SEEN)
                    continue
                new.discard(pair)  # a later spec with the same fingerprint is SEEN
            request = Request.from_spec(spec, now)
            state, reconcile = self._new_state(conn, spec.queue, request, now, touched, crawl)
            p = request_params(request)
            rows.append(
                (spec.queue, spec.key, p["task"], p["args"], p["kwargs"], p["priority"],
                 p["run_at"], state, p["max_attempts"], p["lease_seconds"], p["timeout"], now,
                 request.crawl, request.limit_key)
            )  # fmt: skip
            placed.append((i, reconcile))
        ids = sorted(  # ids grow in insertion order (AUTOINCREMENT)
            int(row[0])
            for query, params in row_batches("job_insert_rows", rows)
            for row in conn.execute(query, params)
        )
        for (i, reconcile), job_id in zip(placed, ids, strict=True):
            results[i] = ScheduleResult(job_id, Outcome.CREATED)
            if reconcile is not None:
                touched.keys.add(reconcile)
        return results

    def _seen_new(
        self, conn: sqlite3.Connection, pairs: list[tuple[int, bytes]]
    ) -> set[tuple[int, bytes]]:
        """The (crawl, fingerprint) pairs new to their crawls' seen sets, added to them
        now: one statement per 64 (``seen_insert_rows``)."""
        return {
            (row[0], row[1])
            for query, params in row_batches("seen_insert_rows", pairs)
            for row in conn.execute(query, params)
        }

    def _schedule_one(
        self,
        conn: sqlite3.Connection,
        spec: JobSpec,
        now: float,
        touched: Touched,
        *,
        drop_closed: bool = False,
    ) -> ScheduleResult | None:
        """Schedule one spec; None only when ``drop_closed`` dropped it."""
        fp = spec.fingerprint  # checked by the gate
        crawl = None
        if spec.crawl is not None:
            crawl = self._open_crawl(conn, spec.crawl, touched, drop_closed=drop_closed)
            if crawl is None:
                return None
            if fp is not None and not self._seen_new(conn, [(spec.crawl, fp)]):
                return ScheduleResult(0, Outcome.SEEN)
        incoming = Request.from_spec(spec, now)
        inserted = self._insert(conn, spec.queue, spec.key, incoming, now, touched, crawl)
        if inserted is not None:
            return ScheduleResult(inserted, Outcome.CREATED)
        live = conn.execute(Q["job_get_live_by_key"], {"queue": spec.queue, "key": spec.key})
        row = live.fetchone()
        if row["state"] == "running":
            return self._defer(conn, row, incoming, spec)
        merged = merge(row_request(row), incoming, spec.on_conflict)
        if merged is None:
            return ScheduleResult(row["id"], Outcome.UNCHANGED)
        self._update_pending(conn, row["id"], merged, now, touched)
        return ScheduleResult(row["id"], Outcome.UPDATED)

    def _update_pending(
        self,
        conn: sqlite3.Connection,
        job_id: JobId,
        request: Request,
        now: float,
        touched: Touched,
    ) -> None:
        """Write a pending job's new request; its state follows (job_update_pending)."""
        params = {**request_params(request), "now": now, "id": job_id}
        touched.note(conn.execute(Q["job_update_pending"], params).fetchall(), crawls=False)

    def _defer(
        self, conn: sqlite3.Connection, row: sqlite3.Row, incoming: Request, spec: JobSpec
    ) -> ScheduleResult:
        """Remember a request for a running key (one per key, merged by the policy)."""
        if row["followup"] is None:
            merged: Request | None = incoming
        else:
            merged = merge(Request.from_json(row["followup"]), incoming, spec.on_conflict)
        if merged is None:
            return ScheduleResult(row["id"], Outcome.UNCHANGED)
        conn.execute(Q["job_set_followup"], {"id": row["id"], "followup": merged.to_json()})
        return ScheduleResult(row["id"], Outcome.DEFERRED)

    def _insert(
        self,
        conn: sqlite3.Connection,
        queue: str,
        key: str | None,
        request: Request,
        now: float,
        touched: Touched,
        crawl: sqlite3.Row | None,
    ) -> JobId | None:
        """Insert a pending job unless (queue, key) is live, in the state ``_new_state``
        gives it (an ended job holding the key releases it)."""
        state, reconcile = self._new_state(conn, queue, request, now, touched, crawl)
        params = {
            **request_params(request),
            "now": now,
            "queue": queue,
            "key": key,
            "state": state,
            "crawl_id": request.crawl,
            "limit_key": request.limit_key,
        }
        rows = conn.execute(Q["job_insert"], params).fetchall()
        if not rows:  # the key's holder: live, or ended and now releasing it
            if key is None or not self._release_ended_keys(conn, [[queue, key]], now):
                return None
            rows = conn.execute(Q["job_insert"], params).fetchall()
        if reconcile is not None:
            touched.keys.add(reconcile)
        return int(rows[0][0])

    def _new_state(
        self,
        conn: sqlite3.Connection,
        queue: str,
        request: Request,
        now: float,
        touched: Touched,
        crawl: sqlite3.Row | None,
    ) -> tuple[str, str | None]:
        """The state a new pending job starts in: held in a paused crawl, waiting behind
        its limit key (reconciled when the transaction settles), else ready or scheduled
        by run_at; and the limit key to reconcile once it is inserted, if any. A key with
        no front and room under its cap when first used in the transaction takes the job
        as its front at once if no other spec of the call uses the key (``lone_keys``) and
        the key's gate is not later than the job's run_at (else ``_reconcile`` makes it
        the front, due at the gate); a key with a front or at its cap is not reconciled
        (whatever takes its front or a running job away later notes the key itself)."""
        limit_key = request.limit_key
        paused = crawl is not None and crawl["state"] == CrawlState.PAUSED
        state = states.pending_state(paused, limit_key is not None, request.run_at <= now)
        may_front = True
        if limit_key is not None and limit_key not in touched.ensured:
            record = self._key_record(conn, limit_key, queue, crawl)
            touched.ensured.add(limit_key)
            may_front = record["front"] is None and (
                record["max_running"] is None or record["running"] < record["max_running"]
            )
            if (
                may_front
                and not paused
                and limit_key in touched.lone_keys
                and key_gate(record) <= request.run_at
            ):
                state = states.pending_state(False, False, request.run_at <= now)
        if state == "waiting" and limit_key is not None and may_front:
            return state, limit_key
        return state, None

    def _spawn_followups(
        self, conn: sqlite3.Connection, rows: list[sqlite3.Row], now: float, touched: Touched
    ) -> None:
        """Turn the remembered request of each ended job into a pending job (dropped if
        its crawl has closed meanwhile). Siblings: the update trigger of the PostgreSQL
        store (migrations/0008_rules.sql), spawn_followups in redis/scripts/prelude.lua."""
        for row in rows:
            if row["followup"] is not None:
                request = Request.from_json(row["followup"])
                crawl = None
                if request.crawl is not None:
                    crawl = self._open_crawl(conn, request.crawl, touched, drop_closed=True)
                    if crawl is None:
                        continue
                self._insert(conn, row["queue"], row["key"], request, now, touched, crawl)

    def _key_record(
        self, conn: sqlite3.Connection, key: str, queue: str, crawl: sqlite3.Row | None
    ) -> sqlite3.Row:
        """The record of ``key`` (limit_record), its settings fixed first if they are not
        (a read only, in the common case)."""
        row: sqlite3.Row | None = conn.execute(Q["limit_record"], {"key": key}).fetchone()
        if row is not None and row["source"] != "none":
            return row
        return self._ensure_key(conn, key, queue, None if crawl is None else crawl["limits"])

    def _ensure_key(
        self, conn: sqlite3.Connection, key: str, queue: str, crawl_limits: str | None
    ) -> sqlite3.Row:
        """Make sure ``key`` has a record with fixed settings before a job joins it; its
        front, cap and running count as they are now."""
        limits = limits_from(crawl_limits)
        row: sqlite3.Row = conn.execute(
            Q["limit_ensure"],
            {
                "key": key,
                "queue": queue,
                "from_crawl": limits is not None,
                "max_running": None if limits is None else limits.max_running,
                "min_interval": 0.0 if limits is None else limits.min_interval,
            },
        ).fetchone()
        return row

    def _reconcile(
        self, conn: sqlite3.Connection, keys: Iterable[str], now: float
    ) -> list[DueFront]:
        """Give each of ``keys`` a front if it has none, room under its cap and a waiting
        job: the best one, due at max(its run_at, last start + min_interval,
        blocked_until). Two statements for all the keys; returns the new fronts due now.
        Siblings: crawlq_reconcile (postgres/migrations/0008_rules.sql), reconcile in
        redis/scripts/prelude.lua."""
        names = sorted(set(keys))
        if not names:
            return []
        taken = listed(conn, "limit_take_fronts", "keys", names)
        fronts = [[row["front"], key_gate(row)] for row in taken]
        if not fronts:
            return []
        keys_of = {row["front"]: (row["key"], _more(row)) for row in taken}
        rows = listed(conn, "limit_fronts_due", "fronts", fronts, now=now)
        return [
            DueFront(
                row["queue"],
                states.claim_order(row["priority"], row["run_at"], row["id"]),
                *keys_of[row["id"]],
            )
            for row in rows
            if row["due"]
        ]

    def _retime(self, conn: sqlite3.Connection, key: str, now: float) -> None:
        """Settings or block of ``key`` changed: its front goes back and is chosen again."""
        conn.execute(Q["limit_demote_front"], {"key": key})
        self._reconcile(conn, [key], now)

    def _settle(self, conn: sqlite3.Connection, touched: Touched, now: float) -> list[DueFront]:
        """End of a write: reconcile the touched keys, then finish each touched crawl with
        nothing outstanding, scheduling its ``on_finish`` in this transaction. Returns
        the new fronts due now (a claim in the same transaction starts from them)."""
        due: list[DueFront] = []
        while touched.keys or touched.crawls:
            keys, touched.keys = touched.keys, set()
            due += self._reconcile(conn, keys, now)
            crawls, touched.crawls = sorted(touched.crawls), set()
            for crawl_id in crawls:
                self._crawl_finish(conn, crawl_id, now, touched)
        return due

    def _crawl_finish(
        self, conn: sqlite3.Connection, crawl_id: int, now: float, touched: Touched
    ) -> None:
        """Finish an open crawl with nothing outstanding and schedule its on_finish.
        Siblings: crawlq_crawl_finish (postgres/migrations/0008_rules.sql), crawl_finish
        in redis/scripts/prelude.lua."""
        row = conn.execute(Q["crawl_finish"], {"id": crawl_id, "now": now}).fetchone()
        if row is not None:
            touched.open_crawls.pop(crawl_id, None)
        if row is None or row["on_finish"] is None:
            return
        result = self._schedule_one(conn, on_finish_spec(row["on_finish"]), now, touched)
        if result is not None and result.job_id:
            conn.execute(Q["crawl_set_on_finish_job"], {"id": crawl_id, "job_id": result.job_id})

    def _leases_returned(
        self, conn: sqlite3.Connection, rows: list[sqlite3.Row], now: float
    ) -> list[JobId]:
        """The bookkeeping of running jobs taken back from their worker (expired lease,
        worker declared dead): the ones that died spawn their remembered requests, then
        keys and crawls settle. The counters follow by trigger. Returns their ids, sorted."""
        touched = Touched()
        touched.note(rows)
        self._spawn_followups(conn, [r for r in rows if r["state"] == "dead"], now, touched)
        self._settle(conn, touched, now)
        return sorted(int(r["id"]) for r in rows)


UNCAPPED = 1 << 30
"""A key's room without ``max_running``: more than any claim takes."""


def _more(record: sqlite3.Row) -> int:
    """``DueFront.more`` of a key's new front, from the key's record before it starts."""
    if record["max_running"] is None:
        return UNCAPPED
    return max(0, int(record["max_running"]) - int(record["running"]) - 1)


def key_gate(record: sqlite3.Row) -> float:
    """When a key lets its next job start: max(last start + min_interval, blocked_until)
    (0 for neither)."""
    gate = 0.0
    if record["last_start"] is not None:
        gate = record["last_start"] + record["min_interval"]
    if record["blocked_until"] is not None:
        gate = max(gate, record["blocked_until"])
    return gate


def with_crawl(spec: JobSpec, crawl_id: int) -> JobSpec:
    return dataclasses.replace(spec, crawl=crawl_id)


def lone_keys(specs: Sequence[JobSpec]) -> set[str]:
    """The limit keys that exactly one of ``specs`` uses."""
    seen: set[str] = set()
    twice: set[str] = set()
    for spec in specs:
        key = spec.limit_key
        if key is not None:
            (twice if key in seen else seen).add(key)
    return seen - twice
