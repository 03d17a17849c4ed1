"""The SQLite store's jobs: scheduling, claims and what ends or returns a lease."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from crawlq.jobs import Job, JobSpec, Lease, ScheduleResult
from crawlq.payload import dumps
from crawlq.stores import states
from crawlq.stores.base import ClaimParams, Completion, CrawlRecord, Failure, Release
from crawlq.stores.gate import JobGate
from crawlq.stores.sqlite.core import Q, listed, row_job, row_request
from crawlq.stores.sqlite.scheduling import DueFront, SQLiteScheduling, Touched, lone_keys
from crawlq.stores.states import ClaimOrder
from crawlq.types import JobId, Timestamp


class SQLiteJobs(SQLiteScheduling, JobGate):
    """Scheduling, claiming and the ends of leases (``JobStore``)."""

    def _job_schedule(
        self, specs: Sequence[JobSpec], now: Timestamp | None
    ) -> list[ScheduleResult]:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> list[ScheduleResult]:
            touched = Touched(lone_keys=lone_keys(specs))
            results = self._schedule_all(conn, specs, t, touched)
            self._settle(conn, touched, t)
            return [r for r in results if r is not None]

        return self._write("scheduling jobs", work)

    def _job_claim(self, params: ClaimParams) -> list[Job]:
        now = self._now(params.now)
        if not self._read("probing for due jobs", lambda c: self._any_due(c, params.queues, now)):
            return []
        return self._write("claiming jobs", lambda conn: self._claim(conn, params, now))

    @staticmethod
    def _any_due(conn: sqlite3.Connection, queues: Sequence[str], now: float) -> bool:
        return any(
            conn.execute(Q["job_has_due"], {"queue": q, "now": now}).fetchone()[0] for q in queues
        )

    def _claim(
        self,
        conn: sqlite3.Connection,
        params: ClaimParams,
        now: float,
        fronts: Sequence[DueFront] = (),
    ) -> list[Job]:
        """Claim rounds. The first claims the best due jobs of the claim index. A round
        that claimed a limit key's front reconciles its key, and while room remains the
        next claims the fronts that made due now, in the claimed queues: a round claims
        every due job up to the room and ``now`` is the call's, so nothing else is due
        (the index's promotion and candidates would find just those fronts).

        A key's next front is its best waiting job once the one before has started. For a
        key with no gate and room under its cap, the jobs that would be its next fronts in
        this call (``_line``) are claimed in the same statement as its front: the jobs
        that rounds of one front a key each would take (``_rounds``), in one statement.
        So are those of ``fronts``, the fronts that the same transaction made due before
        the claim (``_end``), when the index finds them among the best due jobs."""
        jobs: list[Job] = []
        queues = set(params.queues)
        candidates = self._candidates(conn, params.queues, params.limit, now)
        known = {front.order[2]: front for front in fronts}
        lines = [
            self._line(conn, known[order[2]], queues, params.limit, now)
            if order[2] in known
            else [order]
            for order in candidates
        ]
        while lines:
            picked = _rounds(lines, params.limit - len(jobs))
            claimed = self._claim_ids(conn, params, [order[2] for order in picked], now)
            jobs.extend(claimed)
            keys = {j.limit_key for j in claimed if j.limit_key is not None}
            due = self._reconcile(conn, keys, now)
            room = params.limit - len(jobs)
            if room <= 0:
                break
            lines = [self._line(conn, front, queues, room, now) for front in due]
            lines = [line for line in lines if line]
        jobs.sort(key=lambda j: states.claim_order(j.priority, j.run_at, j.id))
        return jobs

    @staticmethod
    def _line(
        conn: sqlite3.Connection, front: DueFront, queues: set[str], room: int, now: float
    ) -> list[ClaimOrder]:
        """The claim orders of the jobs that would be ``front``'s key's next fronts in a
        claim of ``room`` jobs from ``queues``: the front, then while the key has room
        (``DueFront.more``) its next waiting jobs that are due and in ``queues``, each due
        at the start before it, now, as a front is due at its key's last start (the claim
        writes that run_at). Empty when the front is in another queue."""
        if front.queue not in queues:
            return []
        line = [front.order]
        more = min(front.more, room - 1)
        if more > 0:
            params = {"key": front.key, "limit": more}
            for row in conn.execute(Q["job_key_next"], params):
                if row["queue"] not in queues or row["run_at"] > now:
                    break
                line.append(states.claim_order(row["priority"], now, row["id"]))
        return line

    @staticmethod
    def _candidates(
        conn: sqlite3.Connection, queues: Sequence[str], limit: int, now: float
    ) -> list[ClaimOrder]:
        """The claim order of the best ``limit`` due jobs of each of ``queues``, once
        their due scheduled jobs are promoted."""
        candidates: list[ClaimOrder] = []
        for queue in dict.fromkeys(queues):
            conn.execute(Q["job_promote_due"], {"queue": queue, "now": now})
            found = conn.execute(
                Q["job_claim_candidates"], {"queue": queue, "now": now, "limit": limit}
            )
            candidates.extend(
                states.claim_order(r["priority"], r["run_at"], r["id"]) for r in found
            )
        return candidates

    @staticmethod
    def _claim_ids(
        conn: sqlite3.Connection, params: ClaimParams, ids: Sequence[JobId], now: float
    ) -> list[Job]:
        rows = listed(conn, "job_claim_ids", "ids", ids, worker_id=params.worker_id, now=now)
        return [row_job(r) for r in rows]

    def _per_item(self, operation: str, query: str, items: Sequence[dict[str, Any]]) -> list[bool]:
        def work(conn: sqlite3.Connection) -> list[bool]:
            return [conn.execute(Q[query], item).rowcount == 1 for item in items]

        return self._write(operation, work) if items else []

    def _job_heartbeat(self, leases: Sequence[Lease], now: Timestamp | None) -> list[bool]:
        t = self._now(now)
        items = [{"id": lease.job_id, "token": lease.token, "now": t} for lease in leases]
        return self._per_item("heartbeating leases", "job_heartbeat", items)

    def _job_release(self, releases: Sequence[Release], now: Timestamp | None) -> list[bool]:
        t = self._now(now)
        items = [
            {"id": r.lease.job_id, "token": r.lease.token, "delay": r.delay, "now": t}
            for r in releases
        ]

        def work(conn: sqlite3.Connection) -> list[bool]:
            touched = Touched()
            applied = []
            for item in items:
                rows = conn.execute(Q["job_release"], item).fetchall()
                touched.note(rows, crawls=False)  # released jobs stay outstanding
                applied.append(bool(rows))
            self._settle(conn, touched, t)
            return applied

        return self._write("releasing jobs", work) if items else []

    def _ending(
        self,
        operation: str,
        query: str,
        ends: Sequence[End],
        now: float,
        children: Sequence[Sequence[JobSpec]] = (),
        records: Sequence[Sequence[CrawlRecord]] = (),
    ) -> list[bool]:
        """``_end`` in a write transaction of its own."""

        def work(conn: sqlite3.Connection) -> list[bool]:
            return self._end(conn, query, ends, now, children, records)[0]

        return self._write(operation, work) if ends else []

    def _end(
        self,
        conn: sqlite3.Connection,
        query: str,
        ends: Sequence[End],
        now: float,
        children: Sequence[Sequence[JobSpec]] = (),
        records: Sequence[Sequence[CrawlRecord]] = (),
    ) -> tuple[list[bool], list[DueFront]]:
        """End leases (``query``, job_complete or job_fail, takes one ``End`` per lease),
        then spawn the remembered requests of the jobs that ended and schedule the
        children of each completion applied (dropped when their crawl is closed), keep
        the records of those applied, then settle keys and crawls: whether each lease
        was applied, and the keys' new fronts due now (``_settle``).

        One statement ends each run of leases (``_runs``), and one ``_schedule_all`` call
        schedules the children of the run's applied completions, in order: a lease with
        children that have unique keys ends its run, so those children are scheduled
        after the leases before it and before the leases after it, as when each lease
        ends in turn (a child may take the key of a later lease's job). Children without
        a key (a crawl page's links) meet no lease's job, and wait for the run's end."""
        touched = Touched()
        applied: list[bool] = []
        for run in _runs(ends, children):
            rows = listed(conn, query, "ends", [ends[i] for i in run], now=now)
            touched.note(rows)
            by_id = {r["id"]: r for r in rows}
            kids: list[JobSpec] = []
            for i in run:
                row = by_id.get(ends[i][0])
                applied.append(row is not None)
                if row is None:
                    continue
                if row["state"] in ("done", "dead"):
                    self._spawn_followups(conn, [row], now, touched)
                if children:
                    kids += children[i]
            if kids:
                self._schedule_all(conn, kids, now, touched, drop_closed=True)
        if records:
            self._keep_records(conn, records, applied, touched.open_crawls)
        return applied, self._settle(conn, touched, now)

    def _job_complete(self, completions: Sequence[Completion], now: Timestamp | None) -> list[bool]:
        t = self._now(now)
        items = _completion_items(completions)
        kids = [c.children for c in completions]
        records = _records(completions)
        return self._ending("completing jobs", "job_complete", items, t, kids, records)

    def _job_complete_claim(
        self, completions: Sequence[Completion], params: ClaimParams
    ) -> tuple[list[bool], list[Job]]:
        """The completions, then the claim, in one write transaction."""
        t = self._now(params.now)
        items = _completion_items(completions)
        kids = [c.children for c in completions]
        records = _records(completions)

        def work(conn: sqlite3.Connection) -> tuple[list[bool], list[Job]]:
            applied, due = self._end(conn, "job_complete", items, t, kids, records)
            return applied, self._claim(conn, params, t, due)

        return self._write("completing and claiming jobs", work)

    def _job_fail(self, failures: Sequence[Failure], now: Timestamp | None) -> list[bool]:
        t = self._now(now)
        items: list[End] = [
            [f.lease.job_id, f.lease.token, f.error, f.retry_delay, f.reason] for f in failures
        ]
        records = _records(failures)
        return self._ending("recording failed attempts", "job_fail", items, t, (), records)

    def _job_expire_leases(self, now: Timestamp | None) -> list[JobId]:
        t = self._now(now)

        def any_expired(conn: sqlite3.Connection) -> bool:
            return bool(conn.execute(Q["job_any_lease_expired"], {"now": t}).fetchone()[0])

        if not self._read("probing for expired leases", any_expired):
            return []  # the common case takes no write lock

        def work(conn: sqlite3.Connection) -> list[JobId]:
            rows = conn.execute(
                Q["job_expire_leases"], {**states.LEASE_EXPIRED, "now": t}
            ).fetchall()
            return self._leases_returned(conn, rows, t)

        return self._write("returning expired leases", work)

    def _job_cancel(self, ids: Sequence[JobId], now: Timestamp | None) -> list[JobId]:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> list[JobId]:
            rows = conn.execute(Q["job_cancel"], {"ids": dumps(list(ids)), "now": t}).fetchall()
            touched = Touched()
            touched.note(rows)
            self._settle(conn, touched, t)
            return sorted(int(r["id"]) for r in rows)

        return self._write("cancelling jobs", work) if ids else []

    def _job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None, now: Timestamp | None
    ) -> list[JobId]:
        t = self._now(now)
        when = t if run_at is None else run_at

        def work(conn: sqlite3.Connection) -> list[JobId]:
            touched = Touched()
            moved: list[JobId] = []
            for job_id in sorted(set(ids)):
                row = conn.execute(Q["job_pending_by_id"], {"id": job_id}).fetchone()
                if row is not None:
                    request = dataclasses.replace(row_request(row), run_at=when)
                    self._update_pending(conn, job_id, request, t, touched)
                    moved.append(job_id)
            self._settle(conn, touched, t)
            return moved

        return self._write("rescheduling jobs", work) if ids else []


End = list[Any]
"""A lease to end as job_complete and job_fail take it: [id, token, ...their values]."""


def _rounds(lines: Sequence[Sequence[ClaimOrder]], room: int) -> list[ClaimOrder]:
    """What claim rounds would take from ``lines`` (each a key's jobs in the order they
    would become its front, or one ready job), up to ``room`` jobs: each round the best
    ``room`` of the lines' first jobs not yet taken."""
    picked: list[ClaimOrder] = []
    taken = [0] * len(lines)
    while room > 0:
        heads = sorted((line[taken[i]], i) for i, line in enumerate(lines) if taken[i] < len(line))
        if not heads:
            break
        for order, i in heads[:room]:
            picked.append(order)
            taken[i] += 1
            room -= 1
    return picked


def _completion_items(completions: Sequence[Completion]) -> list[End]:
    """The ``End`` of each completion: [id, token, result as JSON]."""
    return [[c.lease.job_id, c.lease.token, dumps(c.result)] for c in completions]


def _runs(ends: Sequence[End], children: Sequence[Sequence[JobSpec]]) -> Iterator[list[int]]:
    """The indexes of ``ends`` in runs that one statement may end together: a run stops
    after a completion with children that have unique keys (they are scheduled before
    the next lease ends) and before a job id it holds already (SQLite would join one row
    to both)."""
    run: list[int] = []
    ids: set[int] = set()
    for i, end in enumerate(ends):
        if end[0] in ids:
            yield run
            run, ids = [], set()
        run.append(i)
        ids.add(end[0])
        if children and any(spec.key is not None for spec in children[i]):
            yield run
            run, ids = [], set()
    if run:
        yield run


def _records(outcomes: Sequence[Completion | Failure]) -> list[Sequence[CrawlRecord]]:
    """Each outcome's records; [] when none has any (``_end`` then skips them)."""
    records = [o.records for o in outcomes]
    return records if any(records) else []
