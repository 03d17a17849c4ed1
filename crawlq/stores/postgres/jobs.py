"""The PostgreSQL store's jobs: scheduling, claims and what ends or returns a lease."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from typing import Any

from psycopg.rows import DictRow

from crawlq.jobs import Job, JobSpec, Lease, ScheduleResult
from crawlq.payload import dumps
from crawlq.stores.base import ClaimParams, Completion, Failure, Release
from crawlq.stores.gate import JobGate
from crawlq.stores.postgres.core import Conn, Q, first_of_each, limited, opt_float, pg_text, row_job
from crawlq.stores.postgres.scheduling import (
    PostgresScheduling,
    checked_crawl,
    created_one,
    insert_params,
    live_from_row,
    pending_params,
)
from crawlq.stores.postgres.storage import keep_records
from crawlq.stores.states import LEASE_EXPIRED, claim_order
from crawlq.types import JobId, Timestamp


class PostgresJobs(PostgresScheduling, JobGate):
    """Scheduling, claiming and the ends of leases (``JobStore``)."""

    def _job_schedule(
        self, specs: Sequence[JobSpec], now: Timestamp | None
    ) -> list[ScheduleResult]:
        params = insert_params(specs, now)  # arguments that are not JSON fail before any I/O

        def work(conn: Conn) -> list[ScheduleResult]:
            return self._insert(conn, specs, now, params)

        if len(specs) == 1 and specs[0].fingerprint is None:
            # One statement, which locks and checks the job's crawl too: done unless
            # its key is live, then merged in a transaction (this one wrote nothing).
            query = Q["job_insert_one" if specs[0].crawl is None else "job_insert_crawl_one"]
            row = self._run(
                "scheduling jobs",
                lambda c: c.execute(query, params).fetchone(),
                transaction=False,
            )
            checked_crawl(specs[0], row)
            created = created_one(row)
            if created is not None:
                return [created]
        # else one statement, nothing to merge or check
        several = any(s.key is not None or s.crawl is not None for s in specs)
        return self._run("scheduling jobs", work, transaction=several)

    def _job_claim(self, params: ClaimParams) -> list[Job]:
        args = {
            "queues": list(dict.fromkeys(params.queues)),
            "limit": params.limit,
            "worker_id": params.worker_id,
            "now": params.now,
        }

        def work(conn: Conn) -> list[Job]:
            return [row_job(r) for r in conn.execute(limited("job_claim", wanted), args)]

        # A claimed front gives its key a new front, maybe due now: while keyed jobs were
        # claimed and room remains, claim again (each round its own statement).
        jobs: list[Job] = []
        while True:
            wanted = params.limit - len(jobs)
            args["limit"] = wanted
            got = self._run("claiming jobs", work, transaction=False)
            jobs.extend(got)
            if len(jobs) >= params.limit or not any(j.limit_key is not None for j in got):
                break
        jobs.sort(key=lambda j: claim_order(j.priority, j.run_at, j.id))
        return jobs

    def _acknowledge(
        self,
        conn: Conn,
        query: str,
        leases: Sequence[Lease],
        columns: dict[str, list[Any]],
        now: Timestamp | None,
        then: Callable[[list[DictRow]], None] | None = None,
    ) -> list[bool]:
        """One statement for a batch of leases; True where the lease was current. A lease
        repeated in the batch is stale by its second time, as if applied one by one."""
        rows = conn.execute(Q[query], _ack_params(leases, columns, now)).fetchall()
        if then is not None:
            then(rows)
        return _applied(leases, rows)

    def _job_heartbeat(self, leases: Sequence[Lease], now: Timestamp | None) -> list[bool]:
        params = {"ids": [x.job_id for x in leases], "tokens": [x.token for x in leases]}

        def work(conn: Conn) -> set[Lease]:
            rows = conn.execute(Q["job_heartbeat"], {**params, "now": now}).fetchall()
            return {Lease(r["id"], r["token"]) for r in rows}

        if not leases:
            return []
        applied = self._run("heartbeating leases", work, transaction=False)
        return [lease in applied for lease in leases]

    def _job_release(self, releases: Sequence[Release], now: Timestamp | None) -> list[bool]:
        leases = [r.lease for r in releases]
        columns = {"delays": [float(r.delay) for r in releases]}

        def work(conn: Conn) -> list[bool]:
            return self._acknowledge(conn, "job_release", leases, columns, now)

        return self._run("releasing jobs", work, transaction=False) if leases else []

    def _job_fail(self, failures: Sequence[Failure], now: Timestamp | None) -> list[bool]:
        leases = [f.lease for f in failures]
        columns: dict[str, list[Any]] = {
            "errors": [pg_text(f.error) for f in failures],
            "delays": [opt_float(f.retry_delay) for f in failures],
            "reasons": [pg_text(f.reason) for f in failures],
        }

        with_records = any(f.records for f in failures)

        def work(conn: Conn) -> list[bool]:
            def keep(rows: list[DictRow]) -> None:
                keep_records(conn, [f.records for f in failures], _applied(leases, rows))

            then = keep if with_records else None
            return self._acknowledge(conn, "job_fail", leases, columns, now, then)

        if not leases:
            return []
        return self._run("recording failed attempts", work, transaction=with_records)

    def _job_complete(self, completions: Sequence[Completion], now: Timestamp | None) -> list[bool]:
        children = [list(c.children) for c in completions]
        for kids in children:
            insert_params(kids, now)  # arguments that are not JSON fail before any I/O

        def batch(conn: Conn) -> list[bool]:
            return self._complete(conn, completions, children, now)

        def one_by_one(conn: Conn) -> list[bool]:
            return [
                answer
                for c, kids in zip(completions, children, strict=True)
                for answer in self._complete(conn, [c], [kids], now)
            ]

        several = any(c.children or c.records for c in completions)  # else one statement
        try:
            return self._run("completing jobs", batch, transaction=several)
        except _OneByOne:
            return self._run("completing jobs", one_by_one)

    def _job_complete_claim(
        self, completions: Sequence[Completion], params: ClaimParams
    ) -> tuple[list[bool], list[Job]]:
        """Without children or records: the completions and the claim's first round sent
        together, one round trip (pipeline mode; one implicit transaction up to its sync)."""
        if any(c.children or c.records for c in completions):
            return super()._job_complete_claim(completions, params)
        leases = [c.lease for c in completions]
        results = {"results": [dumps(c.result) for c in completions]}
        done = _ack_params(leases, results, params.now)
        claim = {
            "queues": list(dict.fromkeys(params.queues)),
            "limit": params.limit,
            "worker_id": params.worker_id,
            "now": params.now,
        }

        def work(conn: Conn) -> tuple[list[DictRow], list[Job]]:
            with conn.pipeline() as pipeline:
                completed = conn.execute(Q["job_complete"], done)
                claimed = conn.execute(limited("job_claim", params.limit), claim)
                pipeline.sync()
            return completed.fetchall(), [row_job(r) for r in claimed.fetchall()]

        rows, jobs = self._run("completing and claiming jobs", work, transaction=False)
        room = params.limit - len(jobs)
        if room > 0 and any(j.limit_key is not None for j in jobs):
            jobs.extend(self._job_claim(dataclasses.replace(params, limit=room)))
        jobs.sort(key=lambda j: claim_order(j.priority, j.run_at, j.id))
        return _applied(leases, rows), jobs

    def _complete(
        self,
        conn: Conn,
        completions: Sequence[Completion],
        children: Sequence[list[JobSpec]],
        now: Timestamp | None,
    ) -> list[bool]:
        """All completions in one statement (whose trigger turns the remembered requests of
        the completed jobs into jobs), then their children, in order, then their records.
        That equals completing them one by one unless a child names the key of a job
        completed later in the batch: then ``_OneByOne`` rolls the transaction back, and
        the caller completes them one at a time."""
        leases = [c.lease for c in completions]
        columns = {"results": [dumps(c.result) for c in completions]}

        def spawn(rows: list[DictRow]) -> None:
            by_lease = {Lease(r["id"], r["token"]): r for r in rows}
            done = [
                (by_lease[leases[i]], children[i])
                for i in first_of_each(leases)
                if leases[i] in by_lease
            ]
            _refuse_later_keys(done)
            self._insert(conn, [kid for _, kids in done for kid in kids], now, children=True)
            if any(c.records for c in completions):
                keep_records(conn, [c.records for c in completions], _applied(leases, rows))

        return self._acknowledge(conn, "job_complete", leases, columns, now, spawn)

    def _job_expire_leases(self, now: Timestamp | None) -> list[JobId]:
        def work(conn: Conn) -> list[JobId]:
            rows = conn.execute(Q["job_expire_leases"], {**LEASE_EXPIRED, "now": now}).fetchall()
            return sorted(int(r["id"]) for r in rows)

        expired = self._run("returning expired leases", work, transaction=False)
        self._compact_counts()
        self._analyze_once()
        self._vacuum_claimed()
        return expired

    def _job_cancel(self, ids: Sequence[JobId], now: Timestamp | None) -> list[JobId]:
        if not ids:
            return []
        params = {"ids": list(ids), "now": now}
        rows = self._run(
            "cancelling jobs",
            lambda c: c.execute(Q["job_cancel"], params).fetchall(),
            transaction=False,
        )
        return sorted(int(r["id"]) for r in rows)

    def _job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None, now: Timestamp | None
    ) -> list[JobId]:
        if not ids:
            return []
        params = {"ids": sorted({operator.index(i) for i in ids}), "now": now}

        def work(conn: Conn) -> list[JobId]:
            rows = conn.execute(Q["job_lock_pending"], params).fetchall()
            jobs = [live_from_row(r) for r in rows]
            for job, row in zip(jobs, rows, strict=True):
                when = row["now"] if run_at is None else run_at
                job.request = dataclasses.replace(job.request, run_at=when)
            if jobs:
                conn.execute(Q["job_update_pending"], pending_params(jobs, now))
            return [j.id for j in jobs]

        return self._run("rescheduling jobs", work)


class _OneByOne(Exception):
    """A batch of completions must run one completion at a time (see ``_complete``)."""


def _refuse_later_keys(done: Sequence[tuple[DictRow, list[JobSpec]]]) -> None:
    """Raise ``_OneByOne`` if a child names the key of a job completed after its parent."""
    later: set[tuple[str, str | None]] = set()
    for row, kids in reversed(done):
        if any((kid.queue, kid.key) in later for kid in kids):
            raise _OneByOne()
        if row["key"] is not None:
            later.add((row["queue"], row["key"]))


def _ack_params(
    leases: Sequence[Lease], columns: dict[str, list[Any]], now: Timestamp | None
) -> dict[str, Any]:
    """The parameters of a statement that ends or returns a batch of leases: each lease
    once, at its first place in the batch (``_applied``)."""
    first = first_of_each(leases)
    return {
        "ids": [leases[i].job_id for i in first],
        "tokens": [leases[i].token for i in first],
        "now": now,
        **{name: [values[i] for i in first] for name, values in columns.items()},
    }


def _applied(leases: Sequence[Lease], rows: list[DictRow]) -> list[bool]:
    """True where the statement applied the lease: a lease repeated in the batch is stale
    by its second time, as if applied one by one."""
    applied = {Lease(r["id"], r["token"]) for r in rows}
    chosen = set(first_of_each(leases))
    return [i in chosen and lease in applied for i, lease in enumerate(leases)]
