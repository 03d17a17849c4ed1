"""Huey (https://github.com/coleifer/huey) on SQLite (``SqliteHuey``) and on Redis
(``RedisHuey``).

CONFIG: one ``huey_consumer hueytasks.huey -k thread -w 8`` process. Huey's consumer help
says "when in doubt, thread is the safest choice" (process workers are for CPU-bound
tasks, greenlets need gevent); its docs give no per-core figure, so the worker count is
crawlq's 8 slots (I/O-bound scraping jobs, 2 cores). Storage defaults: SqliteHuey
journal_mode=wal, fsync off; RedisHuey blocking (BRPOP) reads. Default logging (one line
per job start and end, written to a file). No bulk enqueue API: ``task.map(iterable)``
enqueues one job per call, and is what the bulk row measures.

Done detection: Huey does not record a no-op job's completion (results of ``None`` are
not stored), so the drain ends when ``huey.pending_count()`` reaches 0 (polled every 20
ms); the last few jobs (at most 8) may still be running then, a few milliseconds at most.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from common import BIN, BULK_BATCH, Workers, wait_until, write_module

TASKS = '''\
"""Huey tasks of the peer benchmark (written by bench/peers/huey_peer.py)."""

import os


def make_huey(store, target, name):
    from huey import RedisHuey, SqliteHuey

    if store == "redis":
        huey = RedisHuey(name, url=target)
    else:
        huey = SqliteHuey(name, filename=target)

    @huey.task()
    def noop(i):
        return None

    return huey, noop


huey, noop = make_huey(
    os.environ.get("HUEY_BENCH_STORE", "sqlite"),
    os.environ.get("HUEY_BENCH_TARGET", "huey.db"),
    os.environ.get("HUEY_BENCH_NAME", "bench"),
)
'''

WORKERS = 8


class HueyPeer:
    name = "huey"
    STORES = ("sqlite", "redis")

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        if store not in self.STORES:
            raise ValueError(f"huey peer: no {store} store")
        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.mod = write_module(tmp, "hueytasks", TASKS)
        self.counter = 0

    def fresh(self, tag: str) -> tuple[Any, Any, dict[str, str]]:
        self.counter += 1
        name = f"h{self.counter:03d}_{tag}"
        target = self.url if self.store == "redis" else str(self.tmp / f"{name}.db")
        huey, noop = self.mod.make_huey(self.store, target, name)
        env = {"HUEY_BENCH_STORE": self.store, "HUEY_BENCH_TARGET": target}
        env["HUEY_BENCH_NAME"] = name
        return huey, noop, env

    def schedule_one(self, n: int) -> float:
        huey, noop, _ = self.fresh("one")
        huey.pending_count()  # open and create the tables outside the timed part
        self.gate.wait()
        t0 = time.perf_counter()
        for i in range(n):
            noop(i)
        elapsed = time.perf_counter() - t0
        self.check(huey, n)
        return elapsed

    def schedule_bulk(self, n: int) -> float:
        huey, noop, _ = self.fresh("bulk")
        huey.pending_count()
        self.gate.wait()
        t0 = time.perf_counter()
        for start in range(0, n, BULK_BATCH):
            noop.map(range(start, min(n, start + BULK_BATCH)))
        elapsed = time.perf_counter() - t0
        self.check(huey, n)
        return elapsed

    @staticmethod
    def check(huey: Any, n: int) -> None:
        got = huey.pending_count()
        if got != n:
            raise RuntimeError(f"huey: {got} of {n} jobs queued")

    def drain(self, n: int) -> float:
        huey, noop, env = self.fresh("drain")
        for start in range(0, n, BULK_BATCH):
            noop.map(range(start, min(n, start + BULK_BATCH)))
        self.check(huey, n)
        workers = Workers(self.tmp, f"drain-{self.counter:03d}")
        cmd = [str(BIN / "huey_consumer"), "hueytasks.huey", "-k", "thread", "-w", str(WORKERS)]
        self.gate.wait()
        try:
            t0 = time.perf_counter()
            workers.start(cmd, env)
            t_done = wait_until(lambda: huey.pending_count() == 0, workers, "huey drain")
            elapsed = t_done - t0
        finally:
            workers.stop()
        return elapsed

    def close(self) -> None:
        pass
