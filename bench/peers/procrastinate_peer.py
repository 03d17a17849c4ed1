"""Procrastinate (https://github.com/procrastinate-org/procrastinate) on PostgreSQL.

CONFIG: one ``procrastinate --app proctasks.app worker --concurrency 8`` process
(``--one-shot`` for the drain: it exits once no job is left; the worker's defaults
otherwise: LISTEN/NOTIFY on, 5 s polling fallback, finished jobs kept), the tasks
``async def`` on a ``PsycopgConnector`` (psycopg 3 pool). Procrastinate's own default is
``--concurrency 1`` ("by default, each worker only takes one job at a time"); its
concurrency how-to says to raise ``--concurrency`` for asynchronous, I/O-bound tasks
rather than start more processes (its example: 30) and gives no per-core figure, so the
worker gets crawlq's 8 slots (Huey's peer also runs 8 threads): 8 simulated fetches in
flight in the fan-out. Bulk: ``task.batch_defer`` of 500 argument dicts per call (one
``procrastinate_defer_jobs_v1`` call); one call per job: ``task.defer`` on the app opened
synchronously (its sync connector). Fan-out children: ``await fan.defer_async(...)``
from inside the task.

Done detection: Procrastinate keeps finished jobs, so the drain ends when
``procrastinate_jobs`` holds ``n`` rows in state ``succeeded`` (``count(*)`` polled every
20 ms); latency, fan-out and deep queue use the ledger. Every measurement gets its own
schema (``search_path`` in the DSN; ``app.schema_manager.apply_schema()`` there), dropped
after the measurement.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from common import (
    BIN,
    BULK_BATCH,
    LEDGER_CODE,
    Ledger,
    Workers,
    analyze_postgres,
    check_tree,
    fanout_run,
    latency_run,
    wait_deep,
    wait_until,
    write_module,
)

TASKS = (
    '''\
"""Procrastinate tasks of the peer benchmark (written by bench/peers/procrastinate_peer.py)."""

import asyncio
import os
import time

from procrastinate import App, PsycopgConnector
'''
    + LEDGER_CODE
    + """

def make_app(dsn):
    app = App(connector=PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop(i):
        return None

    @app.task(name="lat")
    async def lat(i, sent):
        ledger_write(f"{i} {sent} {time.time()}")

    @app.task(name="fan")
    async def fan(i, total, sleep):
        await asyncio.sleep(sleep)
        for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
            if c < total:
                await fan.defer_async(i=c, total=total, sleep=sleep)
        ledger_write(i)

    @app.task(name="deep")
    async def deep(i):
        ledger_write(i)

    return app


app = make_app(os.environ.get("PROC_BENCH_DSN", ""))
"""
)

CONCURRENCY = 8


class ProcrastinatePeer:
    name = "procrastinate"
    STORES = ("postgres",)

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        if store not in self.STORES:
            raise ValueError(f"procrastinate peer: no {store} store")
        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.mod = write_module(tmp, "proctasks", TASKS)
        self.counter = 700  # schemas b701_proc..., dropped after each measurement

    def fresh(self) -> tuple[str, str, Any]:
        """A new schema with Procrastinate's schema applied: (schema, DSN, opened app)."""
        import psycopg

        self.counter += 1
        schema = f"b{self.counter:03d}_proc"
        dsn = f"{self.url}?options=-csearch_path%3D{schema}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        app = self.mod.make_app(dsn)
        app.open()
        app.schema_manager.apply_schema()
        return schema, dsn, app

    def drop(self, schema: str, app: Any) -> None:
        import psycopg

        with contextlib.suppress(Exception):
            app.close()
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def worker_cmd(self, *extra: str) -> list[str]:
        cmd = [str(BIN / "procrastinate"), "--app", "proctasks.app"]
        cmd += ["--log-level", "warning", "worker", "--concurrency", str(CONCURRENCY)]
        return [*cmd, *extra]

    def count(self, dsn: str, where: str = "") -> int:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(f"SELECT count(*) FROM procrastinate_jobs {where}").fetchone()
        return int(row[0]) if row else 0

    def check(self, dsn: str, n: int) -> None:
        got = self.count(dsn, "WHERE status = 'todo'")
        if got != n:
            raise RuntimeError(f"procrastinate: {got} of {n} jobs queued")

    @staticmethod
    def bulk(task: Any, n: int) -> None:
        for start in range(0, n, BULK_BATCH):
            task.batch_defer(*({"i": i} for i in range(start, min(n, start + BULK_BATCH))))

    def schedule_one(self, n: int) -> float:
        schema, dsn, app = self.fresh()
        try:
            noop = app.tasks["noop"]
            self.gate.wait()
            t0 = time.perf_counter()
            for i in range(n):
                noop.defer(i=i)
            elapsed = time.perf_counter() - t0
            self.check(dsn, n)
        finally:
            self.drop(schema, app)
        return elapsed

    def schedule_bulk(self, n: int) -> float:
        schema, dsn, app = self.fresh()
        try:
            noop = app.tasks["noop"]
            self.gate.wait()
            t0 = time.perf_counter()
            self.bulk(noop, n)
            elapsed = time.perf_counter() - t0
            self.check(dsn, n)
        finally:
            self.drop(schema, app)
        return elapsed

    def drain(self, n: int) -> float:
        schema, dsn, app = self.fresh()
        workers = Workers(self.tmp, f"drain-{self.counter:03d}")
        try:
            self.bulk(app.tasks["noop"], n)
            self.check(dsn, n)
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:

                def done() -> bool:
                    row = conn.execute(
                        "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
                    ).fetchone()
                    return bool(row) and int(row[0]) >= n

                self.gate.wait()
                t0 = time.perf_counter()
                workers.start(self.worker_cmd("--one-shot"), {"PROC_BENCH_DSN": dsn})
                t_done = wait_until(done, workers, "procrastinate drain", exit_ends=True)
                elapsed = t_done - t0
                # let the --one-shot worker see the empty queue and exit by itself
                deadline = time.perf_counter() + 5.0
                while not workers.all_exited() and time.perf_counter() < deadline:
                    time.sleep(0.05)
        finally:
            workers.stop()
            self.drop(schema, app)
        return elapsed

    # latency, fan-out, deep queue

    def ledger(self, tag: str, dsn: str) -> tuple[Ledger, Workers, dict[str, str]]:
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-{tag}.txt")
        workers = Workers(self.tmp, f"{self.counter:03d}-{tag}")
        return ledger, workers, {**ledger.env, "PROC_BENCH_DSN": dsn}

    def latency(self, count: int, rate: float) -> list[float]:
        schema, dsn, app = self.fresh()
        ledger, workers, env = self.ledger("latency", dsn)
        lat = app.tasks["lat"]
        try:
            delays = latency_run(
                workers,
                self.worker_cmd(),
                env,
                lambda i, sent: lat.defer(i=i, sent=sent),
                ledger,
                self.gate,
                count,
                rate,
                "procrastinate",
            )
        finally:
            workers.stop()
            self.drop(schema, app)
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        schema, dsn, app = self.fresh()
        ledger, workers, env = self.ledger("fanout", dsn)
        try:
            app.tasks["fan"].defer(i=0, total=total, sleep=sleep)
            self.gate.wait()
            seconds = fanout_run(workers, self.worker_cmd(), env, ledger, total, "procrastinate")
        finally:
            workers.stop()
            self.drop(schema, app)
        check_tree(ledger, total, "procrastinate")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        schema, dsn, app = self.fresh()
        ledger, workers, env = self.ledger("deep", dsn)
        try:
            self.bulk(app.tasks["deep"], n)
            analyze_postgres(self.url)
            self.gate.wait()
            workers.start(self.worker_cmd(), env)
            return wait_deep(ledger, workers, "procrastinate deep queue", sample)
        finally:
            workers.stop()
            self.drop(schema, app)

    def close(self) -> None:
        pass
