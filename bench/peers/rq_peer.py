"""RQ (https://python-rq.org) on Redis.

CONFIG: ``rq worker-pool --num-workers 2 --burst QUEUE``: RQ runs one job at a time per
worker process (the default ``Worker`` forks a work horse for every job), and its docs
scale out by running more workers, one per core being the usual starting point; on a
2-core machine that is a pool of 2. Default serializer (pickle), default result TTL
(500 s: finished jobs go to the queue's finished registry), default logging (one line per
job, written to a file). Bulk: ``Queue.enqueue_many`` of ``Queue.prepare_data`` specs in
a Redis pipeline, 500 per call (as RQ's docs show).

Done detection: the size of the queue's finished job registry (a ZCARD, polled every
20 ms) reaching N.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from common import BIN, BULK_BATCH, Workers, wait_until, write_module

TASKS = '''\
"""RQ tasks of the peer benchmark (written by bench/peers/rq_peer.py)."""


def noop(i):
    return None
'''

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

    def bulk(self, q: Any, n: int) -> None:
        from rq import Queue

        noop = self.mod.noop
        for start in range(0, n, BULK_BATCH):
            with self.conn.pipeline() as pipe:
                q.enqueue_many(
                    [
                        Queue.prepare_data(noop, (i,))
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
        workers = Workers(self.tmp, f"drain-{self.counter:03d}")
        cmd = [str(BIN / "rq"), "worker-pool", "--num-workers", str(WORKERS), "--burst"]
        cmd += ["--url", self.url, q.name]
        self.gate.wait()
        try:
            t0 = time.perf_counter()
            workers.start(cmd)
            t_done = wait_until(lambda: registry.count >= n, workers, "rq drain", exit_ends=True)
            elapsed = t_done - t0
        finally:
            workers.stop()
        return elapsed

    def close(self) -> None:
        self.conn.close()
