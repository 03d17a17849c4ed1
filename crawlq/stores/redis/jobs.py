"""The Redis store's jobs: scheduling, claims and what ends or returns a lease (one
script each).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from crawlq.jobs import Job, JobSpec, Lease, Outcome, ScheduleResult
from crawlq.payload import dumps
from crawlq.stores.base import ClaimParams, Completion, Failure, Release
from crawlq.stores.codec import jobs_from_reply, records_json, redis_integer, spec_row
from crawlq.stores.gate import JobGate
from crawlq.stores.redis.core import RedisCore, now_arg, number, opt_number, refused
from crawlq.types import JobId, Timestamp


class RedisJobs(RedisCore, JobGate):
    """Scheduling, claiming and the ends of leases (``JobStore``)."""

    def _job_schedule(
        self, specs: Sequence[JobSpec], now: Timestamp | None
    ) -> list[ScheduleResult]:
        if all(_plain(spec) for spec in specs):
            args = [now_arg(now)]
            for spec in specs:
                args += _plain_row(spec)
            ids = self._run("scheduling jobs", "job_schedule_plain", args)
            return [ScheduleResult(job_id, Outcome.CREATED) for job_id in ids]
        args = [now_arg(now), dumps([spec_row(spec) for spec in specs])]
        rows = self._run("scheduling jobs", "job_schedule", args)
        refused(rows)
        return [ScheduleResult(int(job_id), Outcome(outcome)) for job_id, outcome in rows]

    def _job_claim(self, params: ClaimParams) -> list[Job]:
        args = [now_arg(params.now), params.worker_id, str(params.limit), *params.queues]
        return jobs_from_reply(self._run("claiming jobs", "job_claim", args))

    def _per_item(
        self, operation: str, script: str, now: Timestamp | None, items: list[str]
    ) -> list[bool]:
        if not items:
            return []
        return [bool(ok) for ok in self._run(operation, script, [now_arg(now), *items])]

    def _job_heartbeat(self, leases: Sequence[Lease], now: Timestamp | None) -> list[bool]:
        items = [part for lease in leases for part in (str(lease.job_id), lease.token)]
        return self._per_item("heartbeating leases", "job_heartbeat", now, items)

    def _job_complete(self, completions: Sequence[Completion], now: Timestamp | None) -> list[bool]:
        return self._per_item("completing jobs", "job_complete", now, [_rows(completions)])

    def _job_complete_claim(
        self, completions: Sequence[Completion], params: ClaimParams
    ) -> tuple[list[bool], list[Job]]:
        """One script: job_complete.lua, then job_claim.lua (job_complete_claim.lua)."""
        args = [
            now_arg(params.now),
            _rows(completions),
            params.worker_id,
            str(params.limit),
            *params.queues,
        ]
        answers, claimed = self._run("completing and claiming jobs", "job_complete_claim", args)
        return [bool(ok) for ok in answers], jobs_from_reply(claimed)

    def _job_fail(self, failures: Sequence[Failure], now: Timestamp | None) -> list[bool]:
        items = [
            part
            for f in failures
            for part in (
                str(f.lease.job_id),
                f.lease.token,
                f.error,
                opt_number(f.retry_delay),
                f.reason,
                dumps(records_json(f.records)) if f.records else "",
            )
        ]
        return self._per_item("recording failed attempts", "job_fail", now, items)

    def _job_release(self, releases: Sequence[Release], now: Timestamp | None) -> list[bool]:
        items = [
            part for r in releases for part in (str(r.lease.job_id), r.lease.token, number(r.delay))
        ]
        return self._per_item("releasing jobs", "job_release", now, items)

    def _job_expire_leases(self, now: Timestamp | None) -> list[JobId]:
        expired = self._run("returning expired leases", "job_expire_leases", [now_arg(now)])
        return [int(job_id) for job_id in expired]

    def _job_cancel(self, ids: Sequence[JobId], now: Timestamp | None) -> list[JobId]:
        args = [now_arg(now), *(str(operator.index(i)) for i in ids)]
        return [int(job_id) for job_id in self._run("cancelling jobs", "job_cancel", args)]

    def _job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None, now: Timestamp | None
    ) -> list[JobId]:
        when = "" if run_at is None else number(run_at)
        args = [now_arg(now), when, *(str(operator.index(i)) for i in ids)]
        return [int(job_id) for job_id in self._run("rescheduling jobs", "job_reschedule", args)]


def _plain(spec: JobSpec) -> bool:
    """A spec without key, crawl, limit key and fingerprint: always created, straight to
    the claim index (job_schedule_plain.lua)."""
    return (
        spec.key is None
        and spec.crawl is None
        and spec.limit_key is None
        and spec.fingerprint is None
    )


def _plain_row(spec: JobSpec) -> list[str]:
    """A plain spec's 10 arguments of job_schedule_plain.lua: the text job_schedule.lua
    would write for it (``%.17g`` seconds, decimal integers)."""
    return [
        spec.queue,
        spec.task,
        dumps(list(spec.args)),
        dumps(dict(spec.kwargs)),
        str(redis_integer(spec.priority, "priority")),
        "" if spec.run_at is None else repr(float(spec.run_at)),
        repr(float(spec.delay)),
        str(redis_integer(spec.max_attempts, "max_attempts")),
        f"{float(spec.lease_seconds):.17g}",
        "" if spec.timeout is None else f"{float(spec.timeout):.17g}",
    ]


def _rows(completions: Sequence[Completion]) -> str:
    """The completions as job_complete.lua reads them: one JSON list."""
    return dumps(
        [
            [
                str(c.lease.job_id),
                c.lease.token,
                dumps(c.result),
                [spec_row(child) for child in c.children],
                records_json(c.records),
            ]
            for c in completions
        ]
    )
