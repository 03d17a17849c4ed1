"""SAQ (Simple Async Queue, https://github.com/tobymao/saq) on Redis.

CONFIG: one ``saq saqtasks.settings`` process with SAQ's documented defaults:
``concurrency=10`` (ten jobs run at once as asyncio tasks, each waiting on its own
blocking ``BLMOVE`` dequeue, so 10 simulated fetches in flight in the fan-out),
``--workers 1`` (the CLI's default; SAQ's docs give no per-core figure, and its own
benchmark runs one worker of concurrency 10), job defaults (timeout 10 s, 1 try, results
kept 600 s), JSON serialization, default logging (warnings only). No burst mode: SAQ's
needs a ``dequeue_timeout`` its defaults do not set, so the workers are stopped (SIGINT)
once all jobs are done. Tasks are ``async def`` functions taking keyword arguments, the
fan-out's fetch an ``asyncio.sleep``; children are enqueued from inside the task with the
worker's queue, ``await ctx["worker"].queue.enqueue(...)`` (SAQ 0.26 does not fill in the
``ctx["queue"]`` its types declare). The bench process enqueues with ``Queue.enqueue`` on its
own event loop. Bulk: SAQ has no bulk enqueue (``Queue.map`` enqueues with one
``asyncio.gather`` of ``enqueue`` calls and then waits for the results), so the bulk row
measures that enqueue half: 500 concurrent ``enqueue`` calls per ``asyncio.gather`` (SAQ
runs at most 20 Redis operations at once per queue object, its ``max_concurrent_ops``);
also the drain's untimed fill. The deep queue's untimed fill writes what ``enqueue``'s Lua
script writes (the job serialized by SAQ's own ``Job`` and ``Queue.serialize``, its id in
the ``incomplete`` set and on the ``queued`` list) through 500-job pipelines, since one
``enqueue`` per job runs at about 2,000 jobs/s here.

Done detection: a job stays in its queue's ``incomplete`` sorted set until it has
finished, so the drain ends when ``queue.count("incomplete")`` (a ZCARD, polled every 20
ms) reaches 0, as SAQ's own benchmark waits; latency, fan-out and deep queue use the
ledger. Each measurement gets its own queue name; the ``saq:*`` keys are deleted after each
measurement.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from common import (
    BIN,
    BULK_BATCH,
    LEDGER_CODE,
    Ledger,
    Workers,
    check_tree,
    fanout_run,
    latency_run,
    wait_deep,
    wait_until,
    write_module,
)

TASKS = (
    '''\
"""SAQ tasks of the peer benchmark (written by bench/peers/saq_peer.py)."""

import asyncio
import os
import time

from saq import Queue
'''
    + LEDGER_CODE
    + """

async def noop(ctx, *, i):
    return None


async def latency(ctx, *, i, sent):
    ledger_write(f"{i} {sent} {time.time()}")


async def fan(ctx, *, i, total, sleep):
    await asyncio.sleep(sleep)
    for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
        if c < total:
            await ctx["worker"].queue.enqueue("fan", i=c, total=total, sleep=sleep)
    ledger_write(i)


async def deep(ctx, *, i):
    ledger_write(i)


settings = {
    "queue": Queue.from_url(
        os.environ.get("SAQ_BENCH_URL", "redis://localhost"),
        name=os.environ.get("SAQ_BENCH_QUEUE", "default"),
    ),
    "functions": [noop, latency, fan, deep],
    "concurrency": 10,
}
"""
)


class SaqPeer:
    name = "saq"
    STORES = ("redis",)

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        if store not in self.STORES:
            raise ValueError(f"saq peer: no {store} store")
        import redis

        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.mod = write_module(tmp, "saqtasks", TASKS)
        self.loop = asyncio.new_event_loop()
        self.conn = redis.Redis.from_url(url)
        self.queues: list[Any] = []
        self.counter = 0

    def run(self, aw: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(aw)

    def fresh(self, tag: str) -> tuple[Any, Workers, list[str], dict[str, str]]:
        """A new queue (connected), with its workers (not started), command and
        environment."""
        from saq import Queue

        self.counter += 1
        name = f"s{self.counter:03d}_{tag}"
        queue = Queue.from_url(self.url, name=name)
        self.run(queue.connect())
        self.queues.append(queue)
        workers = Workers(self.tmp, f"{self.counter:03d}-{tag}")
        cmd = [str(BIN / "saq"), "saqtasks.settings"]
        return queue, workers, cmd, {"SAQ_BENCH_URL": self.url, "SAQ_BENCH_QUEUE": name}

    def incomplete(self, queue: Any) -> int:
        return int(self.conn.zcard(queue.namespace("incomplete")))

    def check(self, queue: Any, n: int) -> None:
        got = int(self.conn.llen(queue.namespace("queued")))
        if got != n:
            raise RuntimeError(f"saq: {got} of {n} jobs queued")

    def cleanup(self, queue: Any) -> None:
        """Close the queue's client and delete every SAQ key."""
        self.run(queue.disconnect())
        self.queues.remove(queue)
        batch = []
        for key in self.conn.scan_iter(match="saq:*", count=10_000):
            batch.append(key)
            if len(batch) >= 10_000:
                self.conn.unlink(*batch)
                batch.clear()
        if batch:
            self.conn.unlink(*batch)

    def bulk(self, queue: Any, function: str, n: int) -> None:
        async def go() -> None:
            for start in range(0, n, BULK_BATCH):
                await asyncio.gather(
                    *(
                        queue.enqueue(function, i=i)
                        for i in range(start, min(n, start + BULK_BATCH))
                    )
                )

        self.run(go())

    def prefill(self, queue: Any, function: str, n: int) -> None:
        """What ``enqueue`` writes for each job (its Lua script: the job under its id, the id
        in the ``incomplete`` sorted set and on the ``queued`` list), 500 jobs per pipeline,
        without the script's per-job existence check: the deep queue's untimed fill."""
        from saq import Job
        from saq.job import Status
        from saq.utils import now

        for start in range(0, n, BULK_BATCH):
            jobs = [
                Job(function=function, kwargs={"i": i}, queue=queue, queued=now())
                for i in range(start, min(n, start + BULK_BATCH))
            ]
            with self.conn.pipeline(transaction=False) as pipe:
                for job in jobs:
                    job.status = Status.QUEUED
                    pipe.set(job.id, queue.serialize(job))
                pipe.zadd(queue.namespace("incomplete"), {job.id: job.scheduled for job in jobs})
                pipe.rpush(queue.namespace("queued"), *(job.id for job in jobs))
                pipe.execute()

    def schedule_one(self, n: int) -> float:
        queue, _workers, _cmd, _env = self.fresh("one")

        async def go() -> float:
            t0 = time.perf_counter()
            for i in range(n):
                await queue.enqueue("noop", i=i)
            return time.perf_counter() - t0

        try:
            self.gate.wait()
            elapsed = self.run(go())
            self.check(queue, n)
        finally:
            self.cleanup(queue)
        return elapsed

    def schedule_bulk(self, n: int) -> float:
        queue, _workers, _cmd, _env = self.fresh("bulk")
        try:
            self.gate.wait()
            t0 = time.perf_counter()
            self.bulk(queue, "noop", n)
            elapsed = time.perf_counter() - t0
            self.check(queue, n)
        finally:
            self.cleanup(queue)
        return elapsed

    def drain(self, n: int) -> float:
        queue, workers, cmd, env = self.fresh("drain")
        try:
            self.bulk(queue, "noop", n)
            self.check(queue, n)
            self.gate.wait()
            t0 = time.perf_counter()
            workers.start(cmd, env)
            t_done = wait_until(lambda: self.incomplete(queue) == 0, workers, "saq drain")
            elapsed = t_done - t0
        finally:
            workers.stop()
            self.cleanup(queue)
        return elapsed

    def latency(self, count: int, rate: float) -> list[float]:
        queue, workers, cmd, env = self.fresh("latency")
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-latency.txt")

        def send(i: int, sent: float) -> None:
            self.run(queue.enqueue("latency", i=i, sent=sent))

        try:
            delays = latency_run(
                workers, cmd, {**env, **ledger.env}, send, ledger, self.gate, count, rate, "saq"
            )
        finally:
            workers.stop()
            self.cleanup(queue)
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        queue, workers, cmd, env = self.fresh("fanout")
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-fanout.txt")
        try:
            self.run(queue.enqueue("fan", i=0, total=total, sleep=sleep))
            self.gate.wait()
            seconds = fanout_run(workers, cmd, {**env, **ledger.env}, ledger, total, "saq")
        finally:
            workers.stop()
            self.cleanup(queue)
        check_tree(ledger, total, "saq")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        queue, workers, cmd, env = self.fresh("deep")
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-deep.txt")
        try:
            self.prefill(queue, "deep", n)
            self.check(queue, n)
            self.gate.wait()
            workers.start(cmd, {**env, **ledger.env})
            return wait_deep(ledger, workers, "saq deep queue", sample)
        finally:
            workers.stop()
            self.cleanup(queue)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        for queue in list(self.queues):
            self.run(queue.disconnect())
        self.queues.clear()
        self.loop.close()
        self.conn.close()
