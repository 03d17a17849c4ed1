"""Huey (https://github.com/coleifer/huey) on SQLite (``SqliteHuey``) and on Redis
(``RedisHuey``).

CONFIG: one ``huey_consumer hueytasks.huey -k thread -w 8`` process. Huey's consumer help
says "when in doubt, thread is the safest choice" (process workers are for CPU-bound
tasks, greenlets need gevent); its docs give no per-core figure, so the worker count is
crawlq's 8 slots (I/O-bound scraping jobs, 2 cores): 8 simulated fetches in flight in the
fan-out. Consumer defaults otherwise: on SQLite each idle worker thread polls the table
with Huey's backoff (0.1 s, times 1.15 per empty poll, at most 10 s), which the latency
figure includes; RedisHuey's workers block on BRPOP (1 s timeout). Storage defaults:
SqliteHuey journal_mode=wal, fsync off. Default logging (one line per job start and end,
written to a file). No bulk enqueue API: ``task.map(iterable)`` enqueues one job per
call, and is what the bulk row measures. Fan-out children: calling the task inside the
task (a Huey task call enqueues it). Deep queue (untimed set-up): the messages
``huey.enqueue`` would write (``huey.serialize_task``), stored 500 per transaction
(SQLite) or per LPUSH (Redis), since ``task.map`` does ~4,000 jobs/s.

Done detection: Huey does not record a no-op job's completion (results of ``None`` are
not stored), so the drain ends when ``huey.pending_count()`` reaches 0 (polled every 20
ms); the last few jobs (at most 8) may still be running then, a few milliseconds at most.
Latency, fan-out and deep queue: the ledger the tasks write to.
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
"""Huey tasks of the peer benchmark (written by bench/peers/huey_peer.py)."""

import os
import time
'''
    + LEDGER_CODE
    + """

def make_huey(store, target, name):
    from huey import RedisHuey, SqliteHuey

    if store == "redis":
        huey = RedisHuey(name, url=target)
    else:
        huey = SqliteHuey(name, filename=target)

    @huey.task()
    def noop(i):
        return None

    @huey.task()
    def latency(i, sent):
        ledger_write(f"{i} {sent} {time.time()}")

    @huey.task()
    def fan(i, total, sleep):
        time.sleep(sleep)
        for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
            if c < total:
                fan(c, total, sleep)  # a task call enqueues
        ledger_write(i)

    @huey.task()
    def deep(i):
        ledger_write(i)

    return huey, {"noop": noop, "latency": latency, "fan": fan, "deep": deep}


huey, tasks = make_huey(
    os.environ.get("HUEY_BENCH_STORE", "sqlite"),
    os.environ.get("HUEY_BENCH_TARGET", "huey.db"),
    os.environ.get("HUEY_BENCH_NAME", "bench"),
)
"""
)

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

    def fresh(self, tag: str) -> tuple[Any, dict[str, Any], dict[str, str]]:
        self.counter += 1
        name = f"h{self.counter:03d}_{tag}"
        target = self.url if self.store == "redis" else str(self.tmp / f"{name}.db")
        huey, tasks = self.mod.make_huey(self.store, target, name)
        env = {"HUEY_BENCH_STORE": self.store, "HUEY_BENCH_TARGET": target}
        env["HUEY_BENCH_NAME"] = name
        return huey, tasks, env

    def workers(self, tag: str) -> tuple[Workers, list[str]]:
        workers = Workers(self.tmp, f"{tag}-{self.counter:03d}")
        cmd = [str(BIN / "huey_consumer"), "hueytasks.huey", "-k", "thread", "-w", str(WORKERS)]
        return workers, cmd

    def ledger(self, tag: str) -> Ledger:
        return Ledger(self.tmp / f"ledger-{self.counter:03d}-{tag}.txt")

    def schedule_one(self, n: int) -> float:
        huey, tasks, _ = self.fresh("one")
        noop = tasks["noop"]
        huey.pending_count()  # open and create the tables outside the timed part
        self.gate.wait()
        t0 = time.perf_counter()
        for i in range(n):
            noop(i)
        elapsed = time.perf_counter() - t0
        self.check(huey, n)
        return elapsed

    def schedule_bulk(self, n: int) -> float:
        huey, tasks, _ = self.fresh("bulk")
        noop = tasks["noop"]
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
        huey, tasks, env = self.fresh("drain")
        noop = tasks["noop"]
        for start in range(0, n, BULK_BATCH):
            noop.map(range(start, min(n, start + BULK_BATCH)))
        self.check(huey, n)
        workers, cmd = self.workers("drain")
        self.gate.wait()
        try:
            t0 = time.perf_counter()
            workers.start(cmd, env)
            t_done = wait_until(lambda: huey.pending_count() == 0, workers, "huey drain")
            elapsed = t_done - t0
        finally:
            workers.stop()
        return elapsed

    def latency(self, count: int, rate: float) -> list[float]:
        huey, tasks, env = self.fresh("latency")
        task = tasks["latency"]
        huey.pending_count()
        ledger = self.ledger("latency")
        workers, cmd = self.workers("latency")
        try:
            delays = latency_run(
                workers,
                cmd,
                {**env, **ledger.env},
                lambda i, sent: task(i, sent),
                ledger,
                self.gate,
                count,
                rate,
                "huey",
            )
        finally:
            workers.stop()
            self.dispose(huey)
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        huey, tasks, env = self.fresh("fanout")
        tasks["fan"](0, total, sleep)
        self.check(huey, 1)
        ledger = self.ledger("fanout")
        workers, cmd = self.workers("fanout")
        self.gate.wait()
        try:
            seconds = fanout_run(workers, cmd, {**env, **ledger.env}, ledger, total, "huey")
        finally:
            workers.stop()
            self.dispose(huey)
        check_tree(ledger, total, "huey")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        if n < LEDGER_SKIP + sample:
            raise ValueError(f"huey deep: n={n} < LEDGER_SKIP + sample = {LEDGER_SKIP + sample}")
        huey, tasks, env = self.fresh("deep")
        self.bulk(huey, tasks["deep"], n)
        self.check(huey, n)
        ledger = self.ledger("deep")
        workers, cmd = self.workers("deep")
        self.gate.wait()
        try:
            workers.start(cmd, {**env, **ledger.env})
            return wait_deep(ledger, workers, "huey deep queue", sample)
        finally:
            workers.stop()
            self.dispose(huey)

    def bulk(self, huey: Any, task: Any, n: int) -> None:
        """Queue ``n`` jobs ``task(i)`` as ``huey.enqueue`` stores them (the same
        serialized message), 500 per SQLite transaction or Redis LPUSH."""
        storage = huey.storage
        for start in range(0, n, BULK_BATCH):
            msgs = [
                huey.serialize_task(task.s(i)) for i in range(start, min(n, start + BULK_BATCH))
            ]
            if self.store == "redis":
                storage.conn.lpush(storage.queue_key, *msgs)
            else:
                rows = [(storage.name, storage.to_blob(m), 0) for m in msgs]
                with storage.db(commit=True) as curs:
                    curs.executemany(
                        "insert into task (queue, data, priority) values (?, ?, ?)", rows
                    )

    def dispose(self, huey: Any) -> None:
        """Drop what a measurement left: the Redis keys, or the SQLite file."""
        if self.store == "redis":
            huey.flush()
            huey.storage.conn.connection_pool.disconnect()
        else:
            filename = huey.storage.filename
            huey.storage.close()
            for suffix in ("", "-wal", "-shm"):
                Path(filename + suffix).unlink(missing_ok=True)

    def close(self) -> None:
        pass
