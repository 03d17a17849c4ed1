"""RQ (https://python-rq.org) on Redis.

CONFIG: ``rq worker-pool --num-workers 2 QUEUE`` (``--burst`` for the drain): RQ runs one
job at a time per worker process (the default ``Worker`` forks a work horse for every
job), and its docs scale out by running more workers, one per core being the usual
starting point; on a 2-core machine that is a pool of 2, so 2 simulated fetches in flight
in the fan-out. Default serializer (pickle), default result TTL (500 s: finished jobs go
to the queue's finished registry), default logging (one line per job, written to a file).
Bulk: ``Queue.enqueue_many`` of ``Queue.prepare_data`` specs in a Redis pipeline, 500 per
call (as RQ's docs show); the deep queue is queued the same way. Fan-out children:
``Queue(job.origin, connection=job.connection).enqueue`` inside the job
(``rq.get_current_job()``). Latency, fan-out and deep-queue workers run without
``--burst`` (they wait for jobs) and are stopped after.

Done detection: the size of the queue's finished job registry (a ZCARD, polled every
20 ms) reaching N (drain); the ledger the tasks write to (the others).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from common import (
    BIN,
    BULK_BATCH,
    LEDGER_CODE,
    LEDGER_SKIP,
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
"""RQ tasks of the peer benchmark (written by bench/peers/rq_peer.py)."""

import time

from rq import Queue, get_current_job
'''
    + LEDGER_CODE
    + """

def noop(i):
    return None


def latency(i, sent):
    ledger_write(f"{i} {sent} {time.time()}")


def fan(i, total, sleep):
    time.sleep(sleep)
    job = get_current_job()
    queue = Queue(job.origin, connection=job.connection)
    for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
        if c < total:
            queue.enqueue(fan, c, total, sleep)
    ledger_write(i)


def deep(i):
    ledger_write(i)
"""
)

WORKERS = 2


class RqPeer:
    name = "rq"
    STORES = ("redis",)

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        if store not in self.STORES:
            raise ValueError(f"rq peer: no {store} store")
        import redis

        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.mod = write_module(tmp, "rqtasks", TASKS)
        self.conn = redis.Redis.from_url(url)
        self.counter = 0

    def queue(self, tag: str) -> Any:
        from rq import Queue

        self.counter += 1
        return Queue(f"r{self.counter:03d}_{tag}", connection=self.conn)

    def workers(self, q: Any, burst: bool = False) -> tuple[Workers, list[str]]:
        workers = Workers(self.tmp, f"{q.name}")
        cmd = [str(BIN / "rq"), "worker-pool", "--num-workers", str(WORKERS)]
        cmd += ["--burst"] if burst else []
        cmd += ["--url", self.url, q.name]
        return workers, cmd

    def ledger(self, q: Any) -> Ledger:
        return Ledger(self.tmp / f"ledger-{q.name}.txt")

    def schedule_one(self, n: int) -> float:
        q = self.queue("one")
        noop = self.mod.noop
        self.gate.wait()
        t0 = time.perf_counter()
        for i in range(n):
            q.enqueue(noop, i)
        elapsed = time.perf_counter() - t0
        self.check(q, n)
        return elapsed

    def bulk(self, q: Any, n: int, func: Any = None) -> None:
        from rq import Queue

        func = func or self.mod.noop
        for start in range(0, n, BULK_BATCH):
            with self.conn.pipeline() as pipe:
                q.enqueue_many(
                    [
                        Queue.prepare_data(func, (i,))
                        for i in range(start, min(n, start + BULK_BATCH))
                    ],
                    pipeline=pipe,
                )
                pipe.execute()

    def schedule_bulk(self, n: int) -> float:
        q = self.queue("bulk")
        self.gate.wait()
        t0 = time.perf_counter()
        self.bulk(q, n)
        elapsed = time.perf_counter() - t0
        self.check(q, n)
        return elapsed

    @staticmethod
    def check(q: Any, n: int) -> None:
        got = q.count
        if got != n:
            raise RuntimeError(f"rq: {got} of {n} jobs queued")

    def drain(self, n: int) -> float:
        q = self.queue("drain")
        self.bulk(q, n)
        self.check(q, n)
        registry = q.finished_job_registry
        workers, cmd = self.workers(q, burst=True)
        self.gate.wait()
        try:
            t0 = time.perf_counter()
            workers.start(cmd)
            t_done = wait_until(lambda: registry.count >= n, workers, "rq drain", exit_ends=True)
            elapsed = t_done - t0
        finally:
            workers.stop()
        return elapsed

    def latency(self, count: int, rate: float) -> list[float]:
        q = self.queue("latency")
        task = self.mod.latency
        ledger = self.ledger(q)
        workers, cmd = self.workers(q)
        try:
            delays = latency_run(
                workers,
                cmd,
                ledger.env,
                lambda i, sent: q.enqueue(task, i, sent),
                ledger,
                self.gate,
                count,
                rate,
                "rq",
            )
        finally:
            workers.stop()
            q.delete()
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        q = self.queue("fanout")
        q.enqueue(self.mod.fan, 0, total, sleep)
        self.check(q, 1)
        ledger = self.ledger(q)
        workers, cmd = self.workers(q)
        self.gate.wait()
        try:
            seconds = fanout_run(workers, cmd, ledger.env, ledger, total, "rq")
        finally:
            workers.stop()
            q.delete()
        check_tree(ledger, total, "rq")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        if n < LEDGER_SKIP + sample:
            raise ValueError(f"rq deep: n={n} < LEDGER_SKIP + sample = {LEDGER_SKIP + sample}")
        q = self.queue("deep")
        self.bulk(q, n, self.mod.deep)
        self.check(q, n)
        ledger = self.ledger(q)
        workers, cmd = self.workers(q)
        self.gate.wait()
        try:
            workers.start(cmd, ledger.env)
            return wait_deep(ledger, workers, "rq deep queue", sample)
        finally:
            workers.stop()
            q.delete()  # the queued jobs' hashes too (a Lua loop in Redis)

    def close(self) -> None:
        self.conn.close()
