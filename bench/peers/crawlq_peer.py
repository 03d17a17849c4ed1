"""crawlq itself, on SQLite, PostgreSQL and Redis. Schedule and drain are
bench_stores.py's ``StoreBench`` (the same code as bench_stores.py's figures); latency,
fan-out and deep queue use the task module below, through the peer interface.

CONFIG: one ``python -m crawlq worker --app benchtasks:app --store URL --concurrency 8``
process (thread runtime, ``--prefetch 0``, crawlq's defaults otherwise; ``--burst`` for
the drain), the worker every other crawlq benchmark uses. The fan-out, whose jobs are
simulated fetches, runs as docs/workers.md recommends for fetches: an ``async def`` task
on ``--runtime asyncio --concurrency 100`` (100 fetches in flight; the peers run their
documented defaults, 2 to 16 in flight). Bulk: ``app.schedule_many`` of 500 specs per call.
Fan-out children: ``ctx.schedule``, committed with the parent's completion. Done:
``queue_stats`` showing N done (drain, polled every 20 ms) or the ledger (the others).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import bench_stores
from common import (
    BULK_BATCH,
    LEDGER_CODE,
    Ledger,
    Workers,
    check_tree,
    fanout_run,
    latency_run,
    wait_deep,
    write_module,
)

TASKS = (
    '''\
"""crawlq tasks of the peer benchmark (written by bench/peers/crawlq_peer.py)."""

import asyncio
import os
import time

import crawlq
'''
    + LEDGER_CODE
    + """

def make_app(url):
    app = crawlq.App(url)

    @app.task(name="peer.latency")
    def latency(ctx, i, sent):
        ledger_write(f"{i} {sent} {time.time()}")

    @app.task(name="peer.fan")
    async def fan(ctx, i, total, sleep):
        await asyncio.sleep(sleep)
        for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
            if c < total:
                ctx.schedule(fan, c, total, sleep)
        ledger_write(i)

    @app.task(name="peer.deep")
    def deep(ctx, i):
        ledger_write(i)

    return app


app = make_app(os.environ.get("CRAWLQ_BENCH_STORE", "sqlite:///bench.db"))
"""
)


class CrawlqPeer:
    name = "crawlq"
    STORES = ("sqlite", "postgres", "redis")

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        self.store, self.tmp, self.gate = store, tmp, gate
        self.bench = bench_stores.StoreBench(store, url, tmp, 0, 0, 50.0, gate)
        if self.bench.choose_worker() != "cli":
            raise RuntimeError(
                f"`crawlq worker --burst` did not drain 10 jobs on {store}:\n"
                f"{self.bench.worker_log('probe')}"
            )
        self.mod = write_module(tmp, "peertasks", TASKS)

    def schedule_one(self, n: int) -> float:
        self.bench.n = n
        return n / self.bench.schedule_single()[0]

    def schedule_bulk(self, n: int) -> float:
        self.bench.n = n
        return n / self.bench.schedule_batch()[0]

    def drain(self, n: int) -> float:
        self.bench.n = n
        done_rate, _exit_rate, _cpu = self.bench.drain(1)
        return n / done_rate

    # latency, fan-out, deep queue

    def fresh(self, tag: str) -> tuple[Any, Ledger, Workers, list[str], dict[str, str]]:
        """A new store (file, schema or prefix) with its app, ledger and worker command."""
        url = self.bench.url(self.bench.fresh_db(tag))
        app = self.mod.make_app(url)
        _ = app.store  # open and migrate outside the timed part
        n = self.bench.counter
        ledger = Ledger(self.tmp / f"ledger-{n:03d}-{tag}.txt")
        workers = Workers(self.tmp, f"{n:03d}-{tag}")
        cmd = [sys.executable, "-m", "crawlq", "worker", "--app", "peertasks:app"]
        cmd += ["--store", url, "--concurrency", "8", "--log-level", "warning"]
        return app, ledger, workers, cmd, {**ledger.env, "CRAWLQ_BENCH_STORE": url}

    def latency(self, count: int, rate: float) -> list[float]:
        app, ledger, workers, cmd, env = self.fresh("latency")
        task = app.tasks["peer.latency"]
        try:
            delays = latency_run(
                workers,
                cmd,
                env,
                lambda i, sent: task.schedule(i, sent),
                ledger,
                self.gate,
                count,
                rate,
                "crawlq",
            )
        finally:
            workers.stop()
            app.close()
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        app, ledger, workers, cmd, env = self.fresh("fanout")
        cmd[cmd.index("--concurrency") + 1] = "100"
        cmd += ["--runtime", "asyncio"]
        app.tasks["peer.fan"].schedule(0, total, sleep)
        self.gate.wait()
        try:
            seconds = fanout_run(workers, cmd, env, ledger, total, "crawlq")
        finally:
            workers.stop()
            app.close()
        check_tree(ledger, total, "crawlq")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        app, ledger, workers, cmd, env = self.fresh("deep")
        task = app.tasks["peer.deep"]
        for start in range(0, n, BULK_BATCH):
            app.schedule_many(task.spec(i) for i in range(start, min(n, start + BULK_BATCH)))
        self.gate.wait()
        try:
            workers.start(cmd, env)
            return wait_deep(ledger, workers, "crawlq deep queue", sample)
        finally:
            workers.stop()
            app.close()

    def close(self) -> None:
        pass
