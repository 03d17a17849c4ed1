"""arq (https://github.com/python-arq/arq) on Redis.

CONFIG: one ``arq arqtasks.WorkerSettings`` process (``--burst`` for the drain), with
arq's defaults: ``max_jobs=10`` (ten jobs run at once as asyncio tasks, so 10 simulated
fetches in flight in the fan-out), ``poll_delay=0.5`` s (arq polls its queue's sorted
set; it has no blocking pop, so an idle worker picks a new job up within 0.5 s),
``queue_read_limit=100``, ``keep_result=3600`` s, pickle serialization, default logging
(one line per job start and end, written to a file). arq's docs scale by running more
asyncio tasks in one worker ("potentially hundreds") and give no per-core process
figure, so one process (crawlq also runs one). These defaults bound arq's rate: each
poll reads at most 100 job ids and starts jobs only while fewer than ``max_jobs`` run,
then sleeps out the rest of its 0.5 s, so one worker starts at most 100 jobs per 0.5 s
(200 no-op jobs/s) and, with its ten slots busy, at most ten 50 ms fetches per 0.5 s (20
jobs/s in the fan-out). Tasks are ``async def`` functions, the fan-out's fetch an
``asyncio.sleep``; children are enqueued from inside the task with
``ctx["redis"].enqueue_job``. The bench process enqueues with ``ArqRedis.enqueue_job``
on its own event loop. Bulk: arq has no bulk API; the closest form, and what the bulk
row measures, is 500 concurrent ``enqueue_job`` calls per ``asyncio.gather`` (also the
drain's untimed fill); the deep queue's untimed fill writes what ``enqueue_job`` writes
(arq's own ``serialize_job``, job key and queue entry) through 500-job pipelines, since
one ``enqueue_job`` per job (a WATCH transaction each) runs at about 2,000 jobs/s here.

Done detection: arq keeps a job in its queue's sorted set until the job has finished
(and its result is stored), so the drain ends when that set is empty (a ZCARD polled
every 20 ms; the burst worker exiting is checked the same way); latency, fan-out and
deep queue use the ledger. Each measurement gets its own queue name; the ``arq:*`` keys
are deleted after each measurement.
"""

from __future__ import annotations

import asyncio
import time
import uuid
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
"""arq tasks of the peer benchmark (written by bench/peers/arq_peer.py)."""

import asyncio
import os
import time

from arq.connections import RedisSettings
'''
    + LEDGER_CODE
    + """

async def noop(ctx, i):
    return None


async def latency(ctx, i, sent):
    ledger_write(f"{i} {sent} {time.time()}")


async def fan(ctx, i, total, sleep):
    await asyncio.sleep(sleep)
    for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
        if c < total:
            await ctx["redis"].enqueue_job("fan", c, total, sleep)
    ledger_write(i)


async def deep(ctx, i):
    ledger_write(i)


class WorkerSettings:
    functions = [noop, latency, fan, deep]
    redis_settings = RedisSettings.from_dsn(os.environ.get("ARQ_BENCH_URL", "redis://localhost"))
    queue_name = os.environ.get("ARQ_BENCH_QUEUE", "arq:queue")
"""
)


class ArqPeer:
    name = "arq"
    STORES = ("redis",)

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        if store not in self.STORES:
            raise ValueError(f"arq peer: no {store} store")
        import redis
        from arq.connections import RedisSettings, create_pool

        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.mod = write_module(tmp, "arqtasks", TASKS)
        self.loop = asyncio.new_event_loop()
        self.pool = self.run(create_pool(RedisSettings.from_dsn(url)))
        self.conn = redis.Redis.from_url(url)
        self.counter = 0

    def run(self, aw: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(aw)

    def fresh(self, tag: str) -> tuple[str, Workers, list[str], dict[str, str]]:
        """A new queue name, with its workers (not started), command and environment."""
        self.counter += 1
        queue = f"arq:queue:a{self.counter:03d}_{tag}"
        workers = Workers(self.tmp, f"{self.counter:03d}-{tag}")
        cmd = [str(BIN / "arq"), "arqtasks.WorkerSettings"]
        return queue, workers, cmd, {"ARQ_BENCH_URL": self.url, "ARQ_BENCH_QUEUE": queue}

    def queued(self, queue: str) -> int:
        return int(self.conn.zcard(queue))

    def check(self, queue: str, n: int) -> None:
        got = self.queued(queue)
        if got != n:
            raise RuntimeError(f"arq: {got} of {n} jobs queued")

    def cleanup(self) -> None:
        """Delete every arq key (job, result, in-progress keys and the queues)."""
        batch = []
        for key in self.conn.scan_iter(match="arq:*", count=10_000):
            batch.append(key)
            if len(batch) >= 10_000:
                self.conn.unlink(*batch)
                batch.clear()
        if batch:
            self.conn.unlink(*batch)

    def bulk(self, queue: str, function: str, n: int) -> None:
        async def go() -> None:
            for start in range(0, n, BULK_BATCH):
                await asyncio.gather(
                    *(
                        self.pool.enqueue_job(function, i, _queue_name=queue)
                        for i in range(start, min(n, start + BULK_BATCH))
                    )
                )

        self.run(go())

    def prefill(self, queue: str, function: str, n: int) -> None:
        """What ``enqueue_job`` writes for each job (its job key, then its id in the queue's
        sorted set), 500 jobs per pipeline, without its per-job uniqueness check (a WATCH
        transaction, about 2,000 jobs/s here): the deep queue's untimed fill."""
        from arq.constants import expires_extra_ms, job_key_prefix
        from arq.jobs import serialize_job
        from arq.utils import timestamp_ms

        for start in range(0, n, BULK_BATCH):
            now = timestamp_ms()
            with self.conn.pipeline(transaction=False) as pipe:
                scores = {}
                for i in range(start, min(n, start + BULK_BATCH)):
                    job_id = uuid.uuid4().hex
                    job = serialize_job(function, (i,), {}, None, now)
                    pipe.psetex(job_key_prefix + job_id, expires_extra_ms, job)
                    scores[job_id] = now
                pipe.zadd(queue, scores)
                pipe.execute()

    def schedule_one(self, n: int) -> float:
        queue, _workers, _cmd, _env = self.fresh("one")
        pool = self.pool

        async def go() -> float:
            t0 = time.perf_counter()
            for i in range(n):
                await pool.enqueue_job("noop", i, _queue_name=queue)
            return time.perf_counter() - t0

        self.gate.wait()
        elapsed = self.run(go())
        self.check(queue, n)
        self.cleanup()
        return elapsed

    def schedule_bulk(self, n: int) -> float:
        queue, _workers, _cmd, _env = self.fresh("bulk")
        self.gate.wait()
        t0 = time.perf_counter()
        self.bulk(queue, "noop", n)
        elapsed = time.perf_counter() - t0
        self.check(queue, n)
        self.cleanup()
        return elapsed

    def drain(self, n: int) -> float:
        queue, workers, cmd, env = self.fresh("drain")
        self.bulk(queue, "noop", n)
        self.check(queue, n)
        self.gate.wait()
        try:
            t0 = time.perf_counter()
            workers.start([*cmd, "--burst"], env)
            t_done = wait_until(
                lambda: self.queued(queue) == 0, workers, "arq drain", exit_ends=True
            )
            elapsed = t_done - t0
        finally:
            workers.stop()
            self.cleanup()
        return elapsed

    def latency(self, count: int, rate: float) -> list[float]:
        queue, workers, cmd, env = self.fresh("latency")
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-latency.txt")
        pool = self.pool

        def send(i: int, sent: float) -> None:
            self.run(pool.enqueue_job("latency", i, sent, _queue_name=queue))

        try:
            delays = latency_run(
                workers, cmd, {**env, **ledger.env}, send, ledger, self.gate, count, rate, "arq"
            )
        finally:
            workers.stop()
            self.cleanup()
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        queue, workers, cmd, env = self.fresh("fanout")
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-fanout.txt")
        self.run(self.pool.enqueue_job("fan", 0, total, sleep, _queue_name=queue))
        self.gate.wait()
        try:
            seconds = fanout_run(workers, cmd, {**env, **ledger.env}, ledger, total, "arq")
        finally:
            workers.stop()
            self.cleanup()
        check_tree(ledger, total, "arq")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        queue, workers, cmd, env = self.fresh("deep")
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-deep.txt")
        self.prefill(queue, "deep", n)
        self.check(queue, n)
        self.gate.wait()
        try:
            workers.start(cmd, {**env, **ledger.env})
            return wait_deep(ledger, workers, "arq deep queue", sample)
        finally:
            workers.stop()
            self.cleanup()

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.run(self.pool.aclose())
        self.loop.close()
        self.conn.close()
