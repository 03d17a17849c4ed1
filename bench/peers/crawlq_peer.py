"""crawlq itself, on SQLite, PostgreSQL and Redis. Schedule and drain are
bench_stores.py's ``StoreBench`` (the same code as bench_stores.py's figures); latency,
fan-out and deep queue use the task module below, through the peer interface.

CONFIG: one ``python -m crawlq worker --app benchtasks:app --store URL --concurrency 8``
process (thread runtime, crawlq's defaults otherwise: ``--prefetch auto``; ``--burst`` for
the drain), the worker every other crawlq benchmark uses. crawlq's modules are
byte-compiled before the run (bench/bytecode.py), as ``pip install`` does and as the peers'
installs did. The fan-out, whose jobs are
simulated fetches, runs as docs/workers.md recommends for fetches: an ``async def`` task
on ``--runtime asyncio --concurrency 100`` (100 fetches in flight; the peers run their
documented defaults, 2 to 16 in flight). Bulk: ``app.schedule_many`` of 500 specs per call.
Fan-out children: ``ctx.schedule``, committed with the parent's completion. Done:
``queue_stats`` showing N done (drain, polled every 20 ms) or the ledger (the others).
The crawlq+crawl column (``CrawlqCrawlPeer``) is the same worker and the same six
workloads with crawlq's crawl features on every job: a unique key (``key=`` a URL,
``https://host{i % 100}.test/page/{i}``), membership in one crawl created up front, and a
limit key (``limit_key=`` one of 100 host names, ``host{i % 100}.test``) with no limit
set, so the per-key machinery runs without throttling anything. The crawl is created by
``app.crawl`` with one job delayed by 30 days, which keeps it open while jobs are
scheduled into it (``crawl=`` on each schedule or spec; the fan-out's root is the crawl's
start job instead, and ``ctx.schedule`` children join it with their own key and limit
key). No seen set (``seen=``): its cost is bench_seen.py's.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_stores
from common import (
    BULK_BATCH,
    LEDGER_CODE,
    Ledger,
    Workers,
    analyze_postgres,
    check_tree,
    fanout_run,
    latency_run,
    wait_deep,
    write_module,
)

HOSTS = 100
"""crawlq+crawl: limit keys (host names) the jobs are spread over."""
KEEP_OPEN = 30 * 86_400.0
"""crawlq+crawl: the delay of the job that keeps the crawl open (seconds)."""


def crawl_options(i, crawl):
    """The crawl features of job ``i`` (a unique key and a limit key), or none."""
    if not crawl:
        return {}
    host = f"host{i % HOSTS}.test"
    return {"key": f"https://{host}/page/{i}", "limit_key": host}


TASKS = (
    '''\
"""crawlq tasks of the peer benchmark (written by bench/peers/crawlq_peer.py)."""

import asyncio
import os
import time

import crawlq
'''
    + LEDGER_CODE
    + f"""

HOSTS = {HOSTS}


{inspect.getsource(crawl_options)}"""
    + """

def make_app(url, crawl=False):
    app = crawlq.App(url)

    @app.task(name="peer.latency")
    def latency(ctx, i, sent):
        ledger_write(f"{i} {sent} {time.time()}")

    @app.task(name="peer.fan")
    async def fan(ctx, i, total, sleep):
        await asyncio.sleep(sleep)
        for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
            if c < total:
                ctx.schedule(fan, c, total, sleep, **crawl_options(c, crawl))
        ledger_write(i)

    @app.task(name="peer.deep")
    def deep(ctx, i):
        ledger_write(i)

    return app


app = make_app(
    os.environ.get("CRAWLQ_BENCH_STORE", "sqlite:///bench.db"),
    os.environ.get("CRAWLQ_BENCH_CRAWL") == "1",
)
"""
)


def open_crawl(app: Any, task: Any, *args: Any) -> Callable[[int], dict[str, Any]]:
    """crawlq+crawl: create a crawl in ``app``'s store, kept open by one job ``task(*args)``
    delayed by ``KEEP_OPEN``; the keyword arguments that put job ``i`` in it, with its key
    and limit key."""
    info = app.crawl("bench", [task.spec(*args, delay=KEEP_OPEN, key="keep-open")])

    def options(i: int) -> dict[str, Any]:
        return {"crawl": info.id, **crawl_options(i, True)}

    return options


class CrawlStoreBench(bench_stores.StoreBench):
    """``StoreBench`` whose schedule and drain jobs carry the crawl features."""

    def fresh_db(self, name: str) -> Any:
        # not the plain crawlq peer's names: both probe the shared servers at start-up
        return super().fresh_db(f"{name}-crawl")

    def jobs(self, app: Any, task: Any) -> tuple[Callable[[int], Any], Callable[[int], Any]]:
        options = open_crawl(app, task, -2)
        return (
            lambda i: task.schedule(i, **options(i)),
            lambda i: task.spec(i, **options(i)),
        )


class CrawlqPeer:
    name = "crawlq"
    STORES = ("sqlite", "postgres", "redis")
    crawl = False
    """Every job with a crawl, a unique key and a limit key (``CrawlqCrawlPeer``)."""

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        self.store, self.server_url, self.tmp, self.gate = store, url, tmp, gate
        bench = CrawlStoreBench if self.crawl else bench_stores.StoreBench
        self.bench = bench(store, url, tmp, 0, 0, 50.0, gate)
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
        app = self.mod.make_app(url, self.crawl)
        _ = app.store  # open and migrate outside the timed part
        n = self.bench.counter
        ledger = Ledger(self.tmp / f"ledger-{n:03d}-{tag}.txt")
        workers = Workers(self.tmp, f"{n:03d}-{tag}")
        cmd = [sys.executable, "-m", "crawlq", "worker", "--app", "peertasks:app"]
        cmd += ["--store", url, "--concurrency", "8", "--log-level", "warning"]
        env = {**ledger.env, "CRAWLQ_BENCH_STORE": url}
        env["CRAWLQ_BENCH_CRAWL"] = "1" if self.crawl else ""
        return app, ledger, workers, cmd, env

    def options(self, app: Any, task: Any, *keep: Any) -> Callable[[int], dict[str, Any]]:
        """The keyword arguments of job ``i``: none, or its crawl features (``keep``: the
        arguments of the job that keeps the crawl open)."""
        return open_crawl(app, task, *keep) if self.crawl else lambda i: {}

    def latency(self, count: int, rate: float) -> list[float]:
        app, ledger, workers, cmd, env = self.fresh("latency")
        task = app.tasks["peer.latency"]
        options = self.options(app, task, -2, 0.0)
        try:
            delays = latency_run(
                workers,
                cmd,
                env,
                lambda i, sent: task.schedule(i, sent, **options(i)),
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
        fan = app.tasks["peer.fan"]
        if self.crawl:  # the root starts the crawl; its children join it
            app.crawl("bench", [fan.spec(0, total, sleep, **self.mod.crawl_options(0, True))])
        else:
            fan.schedule(0, total, sleep)
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
        options = self.options(app, task, -2)
        for start in range(0, n, BULK_BATCH):
            stop = min(n, start + BULK_BATCH)
            app.schedule_many(task.spec(i, **options(i)) for i in range(start, stop))
        if self.store == "postgres":
            analyze_postgres(self.server_url)
        self.gate.wait()
        try:
            workers.start(cmd, env)
            return wait_deep(ledger, workers, "crawlq deep queue", sample)
        finally:
            workers.stop()
            app.close()

    def close(self) -> None:
        pass


class CrawlqCrawlPeer(CrawlqPeer):
    """crawlq with its crawl features on every job: one crawl, a unique key per job, one
    of 100 limit keys (no limit set)."""

    name = "crawlq+crawl"
    crawl = True
