"""The Redis store's listings and counts of jobs and their clean-up."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterator, Sequence
from typing import Any, cast

from crawlq.jobs import FINISHED_STATES, Job, JobState, QueueStats, QueueTotals
from crawlq.stores.base import JobFilter
from crawlq.stores.codec import job_from_hash, jobs_from_reply
from crawlq.stores.gate import JobGate
from crawlq.stores.redis import keys
from crawlq.stores.redis.core import RedisCore, now_arg, number, opt, opt_number, translate
from crawlq.types import JobId, Timestamp

SCAN_BUDGET = 1000
"""Job ids one listing, requeue or purge script looks at per call (bounds its run time)."""

PRUNE_BUDGET = 1000
"""Jobs one prune script deletes per call."""


class RedisQueues(RedisCore, JobGate):
    """Reading jobs, requeueing, purging and pruning them, and the counts of queues
    (``JobStore``)."""

    def job_get(self, job_id: JobId) -> Job | None:
        with translate("reading a job"):
            raw = self._client.hgetall(keys.key("job", self._prefix, id=job_id))
        h = cast("dict[str, str]", raw)  # decode_responses=True: text only
        return job_from_hash(job_id, h) if h else None

    def _scan(
        self,
        operation: str,
        script: str,
        where: JobFilter,
        states: Sequence[str] | None,
        now: Timestamp | None = None,
    ) -> Iterator[Any]:
        """Run a filter script page by page; yields each page's payload."""
        ids = ""
        if where.ids is not None:
            chosen = sorted({operator.index(i) for i in where.ids if i > where.after_id})
            if not chosen:
                return
            ids = "=" + ",".join(map(str, chosen))
        remaining = -1 if where.limit is None or where.limit < 0 else where.limit
        cursor = where.after_id
        while remaining != 0:
            args = [
                now_arg(now),
                str(cursor),
                ids,
                opt(where.queue),
                opt(where.task),
                "" if states is None else "=" + ",".join(states),
                opt_number(where.finished_before),
                str(remaining),
                str(SCAN_BUDGET),
                opt(where.key),
                "" if where.crawl is None else "=" + str(where.crawl),
                opt(where.limit_key),
            ]
            cursor, done, matched, payload = self._run(operation, script, args)
            yield payload
            if done:
                return
            if remaining > 0:
                remaining = max(0, remaining - int(matched))

    def job_list(self, where: JobFilter) -> list[Job]:
        if where.state is JobState.RUNNING and where.ids is None:
            # The running zset holds every running job: look at those, not at every job.
            with translate("listing running jobs"):
                running = cast(
                    "list[str]", self._client.zrange(keys.key("running", self._prefix), 0, -1)
                )
            if not running:
                return []
            where = dataclasses.replace(where, ids=[int(i) for i in running])
        states = None if where.state is None else [where.state.value]
        pages = self._scan("listing jobs", "job_list", where, states)
        return [job for page in pages for job in jobs_from_reply(page)]

    def _job_recent(self, queues: Sequence[str], limit: int) -> list[Job]:
        """The last ``limit`` of each queue's finished zsets (score = finished_at), merged."""
        with translate("listing finished jobs"):
            pipe = self._client.pipeline(transaction=False)
            for queue in queues:
                for state in ("cancelled", "dead", "done"):
                    name = keys.key("finished", self._prefix, queue=queue, state=state)
                    pipe.zrevrange(name, 0, limit - 1, withscores=True)
            ranked = sorted(
                ((float(score), int(job_id)) for page in pipe.execute() for job_id, score in page),
                reverse=True,
            )[:limit]
            pipe = self._client.pipeline(transaction=False)
            for _, job_id in ranked:
                pipe.hgetall(keys.key("job", self._prefix, id=job_id))
            hashes = cast("list[dict[str, str]]", pipe.execute())
        return [
            job_from_hash(job_id, h) for (_, job_id), h in zip(ranked, hashes, strict=True) if h
        ]

    def _job_requeue(self, where: JobFilter, now: Timestamp | None) -> list[JobId]:
        pages = self._scan("requeueing dead jobs", "job_requeue", where, ["dead"], now)
        return [int(job_id) for page in pages for job_id in page]

    def _job_purge(self, where: JobFilter) -> int:
        if where.state is None:
            states = sorted(s.value for s in FINISHED_STATES)
        else:
            states = [where.state.value]
        return sum(int(n) for n in self._scan("purging jobs", "job_purge", where, states))

    def _job_prune(self, retention: float, now: Timestamp | None) -> int:
        """Also deletes the records of idle limit keys (keys.py, job_prune.lua)."""
        args = [now_arg(now), number(retention), str(PRUNE_BUDGET)]
        total, cursor = 0, ""
        while True:
            deleted, more, cursor = self._run("pruning finished jobs", "job_prune", [*args, cursor])
            total += int(deleted)
            if not more:
                return total

    def _job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        return self._next_due_and_now(queues)[0]

    def _job_next_gated(
        self, queues: Sequence[str], within: float, now: Timestamp | None
    ) -> Timestamp | None:
        args = [now_arg(now), number(within), *queues]
        first = self._run("finding the next job a limit key keeps back", "job_next_gated", args)
        return float(first) if first else None

    def _queue_stats(self, now: Timestamp | None) -> list[QueueStats]:
        server_now, rows = self._run("reading queue stats", "queue_stats", [now_arg(now)])
        t = float(server_now)
        return sorted((self._stats_of_row(row, t) for row in rows), key=lambda s: s.queue)

    def queue_totals(self) -> list[QueueTotals]:
        rows = self._run("reading queue totals", "queue_totals", [])
        return sorted(
            (
                QueueTotals(
                    queue=queue,
                    enqueued=int(enqueued),
                    completed=int(completed),
                    retried=int(retried),
                    dead_lettered=int(dead_lettered),
                )
                for queue, enqueued, completed, retried, dead_lettered in rows
            ),
            key=lambda t: t.queue,
        )

    @staticmethod
    def _stats_of_row(row: Sequence[Any], now: float) -> QueueStats:
        queue, pending, running, done, dead, cancelled, due, oldest, recent, waiting, held = row
        return QueueStats(
            queue=queue,
            due=int(due),
            scheduled=int(pending) - int(due) - int(waiting) - int(held),
            waiting=int(waiting),
            held=int(held),
            running=int(running),
            done=int(done),
            dead=int(dead),
            cancelled=int(cancelled),
            oldest_due_age=now - float(oldest) if oldest else None,
            done_last_minute=int(recent),
        )
