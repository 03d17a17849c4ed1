"""PgQueuer (https://github.com/janbjorge/pgqueuer) on PostgreSQL.

CONFIG: one ``pgq run pgqtasks:create_pgqueuer --mode drain`` process for the drain
(``--mode drain`` makes it exit once the queue is empty, like the other systems' burst
workers), the CLI's default ``--mode continuous`` for latency, fan-out and deep queue
(stopped after each); where that command is broken, as in pgqueuer 1.6.0, a runner file
doing exactly what it does. The CLI's defaults otherwise: ``--batch-size 10``, no
``--max-concurrent-tasks`` limit (so the fan-out's ``asyncio.sleep`` fetches overlap as
far as the batches picked allow: no fixed slot count), ``async def`` entrypoints
(PgQueuer's documented style) on a psycopg ``AsyncConnection`` with ``autocommit=True``
(``PsycopgDriver``), the factory an async context manager (what 1.6.0's CLI requires),
INFO logging written to a file. PgQueuer runs one asyncio process; its docs scale out by
running more processes, and give no per-core figure, so one process here (crawlq also
runs one). Bulk: ``enqueue`` with lists of entrypoints, payloads and priorities, 500 per
call (its documented batch form). Fan-out children: ``Queries(driver).enqueue`` from
inside the entrypoint, on a second ``PsycopgDriver`` connection the factory opens (as
PgQueuer's examples enqueue from their own connection): on the worker's own connection
each enqueue waits behind the driver's LISTEN watcher, which holds the connection for up
to 1 s (fan-out of 500 jobs: about 11.5 s there against 2-3 s on its own connection).

Done detection: PgQueuer deletes a job's row once it finished (and logs it), so the drain
ends when its ``pgqueuer`` table is empty (``count(*)`` polled every 20 ms); latency,
fan-out and deep queue use the ledger (the deep queue's leftover rows are truncated
after). Every measurement gets its own schema (``search_path`` in the DSN).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
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
"""PgQueuer tasks of the peer benchmark (written by bench/peers/pgqueuer_peer.py)."""

import asyncio
import json
import os
import time
from contextlib import asynccontextmanager

import psycopg
from pgqueuer import PgQueuer
from pgqueuer.db import PsycopgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries
'''
    + LEDGER_CODE
    + """

@asynccontextmanager
async def create_pgqueuer():
    conn = await psycopg.AsyncConnection.connect(os.environ["PGQ_BENCH_DSN"], autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))
    # Fan-out children go through a connection of their own (opened by the first fan-out
    # job, so the other workloads run as before): on the worker's connection they wait
    # behind PsycopgDriver's notifies() watcher (up to 1 s per call).
    enqueuer = {}
    enqueuer_lock = asyncio.Lock()

    async def child_queries():
        async with enqueuer_lock:
            if "queries" not in enqueuer:
                enqueuer["conn"] = await psycopg.AsyncConnection.connect(
                    os.environ["PGQ_BENCH_DSN"], autocommit=True
                )
                enqueuer["queries"] = Queries(PsycopgDriver(enqueuer["conn"]))
        return enqueuer["queries"]

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    @pgq.entrypoint("lat")
    async def lat(job: Job) -> None:
        i, sent = job.payload.decode().split()
        ledger_write(f"{i} {sent} {time.time()}")

    @pgq.entrypoint("fan")
    async def fan(job: Job) -> None:
        args = json.loads(job.payload)
        i, total, sleep = args["i"], args["total"], args["sleep"]
        await asyncio.sleep(sleep)
        queries = await child_queries()
        for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
            if c < total:
                await queries.enqueue("fan", json.dumps({**args, "i": c}).encode())
        ledger_write(i)

    @pgq.entrypoint("deep")
    async def deep(job: Job) -> None:
        ledger_write(job.payload.decode())

    try:
        yield pgq
    finally:
        if "conn" in enqueuer:
            await enqueuer["conn"].close()
        await conn.close()
"""
)

# What `pgq run pgqtasks:create_pgqueuer --mode drain` does (pgqueuer/adapters/cli/cli.py,
# `run`), with the CLI's defaults: in pgqueuer 1.6.0 that command fails before starting
# (`AttributeError: 'str' object has no attribute 'name'` in `setup_fancy_logger`: the
# --log-level option reaches it as a str, not a LogLevel).
RUNNER = '''\
"""Runs PgQueuer like `pgq run pgqtasks:create_pgqueuer --mode MODE` (peer benchmark;
MODE is the first argument, drain when absent)."""

import sys
from datetime import timedelta

from pgqueuer.adapters.cli import cli, supervisor
from pgqueuer.core import logconfig
from pgqueuer.domain import types

import pgqtasks

logconfig.setup_fancy_logger(logconfig.LogLevel.INFO)
cli.asyncio_run(
    supervisor.run(
        pgqtasks.create_pgqueuer,
        dequeue_timeout=timedelta(seconds=30.0),
        batch_size=10,
        restart_delay=timedelta(seconds=5.0),
        restart_on_failure=False,
        mode=types.QueueExecutionMode(sys.argv[1] if len(sys.argv) > 1 else "drain"),
        max_concurrent_tasks=None,
        shutdown_on_listener_failure=False,
        heartbeat_timeout=timedelta(seconds=30.0),
    )
)
'''


class PgqueuerPeer:
    name = "pgqueuer"
    STORES = ("postgres",)

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        if store not in self.STORES:
            raise ValueError(f"pgqueuer peer: no {store} store")
        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.mod = write_module(tmp, "pgqtasks", TASKS)
        (tmp / "pgq_runner.py").write_text(RUNNER)
        self.cmd = [str(BIN / "pgq"), "run", "pgqtasks:create_pgqueuer", "--mode", "drain"]
        # latency, fan-out, deep queue: the CLI's default mode (continuous), stopped after
        self.cmd_continuous = self.cmd[:-2]
        if not self.cli_works():
            self.cmd = [sys.executable, "pgq_runner.py", "drain"]
            self.cmd_continuous = [sys.executable, "pgq_runner.py", "continuous"]
        self.counter = 500  # schemas b501_pgq..., dropped by run.py after each measurement

    def fresh(self) -> tuple[str, Any]:
        """A new schema with PgQueuer installed: (DSN, sync connection)."""
        import psycopg
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import Queries

        self.counter += 1
        schema = f"b{self.counter:03d}_pgq"
        dsn = f"{self.url}?options=-csearch_path%3D{schema}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')

        async def install() -> None:
            aconn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
            try:
                await Queries(PsycopgDriver(aconn)).install()
            finally:
                await aconn.close()

        asyncio.run(install())
        return dsn, psycopg.connect(dsn, autocommit=True)

    def cli_works(self) -> bool:
        """Whether `pgq run` starts at all (against a closed port: it must get as far as
        connecting, not fail in its logging set-up)."""
        env = {**os.environ, "PGQ_BENCH_DSN": "postgresql://bench@127.0.0.1:9/none"}
        env["PYTHONPATH"] = str(self.tmp)
        try:
            probe = subprocess.run(
                [*self.cmd, "--log-level", "INFO"],
                cwd=self.tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except subprocess.TimeoutExpired:
            return True  # it started and kept trying: not the logging failure
        return "setup_fancy_logger" not in probe.stdout + probe.stderr

    @staticmethod
    def queries(conn: Any) -> Any:
        from pgqueuer.adapters.drivers.psycopg import SyncPsycopgDriver
        from pgqueuer.queries import SyncQueries

        return SyncQueries(SyncPsycopgDriver(conn))

    @staticmethod
    def count(conn: Any) -> int:
        row = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()
        return int(row[0])

    def check(self, conn: Any, n: int) -> None:
        got = self.count(conn)
        if got != n:
            raise RuntimeError(f"pgqueuer: {got} of {n} jobs queued")

    def schedule_one(self, n: int) -> float:
        _dsn, conn = self.fresh()
        with conn:
            q = self.queries(conn)
            self.gate.wait()
            t0 = time.perf_counter()
            for i in range(n):
                q.enqueue("noop", str(i).encode())
            elapsed = time.perf_counter() - t0
            self.check(conn, n)
        return elapsed

    @staticmethod
    def bulk(q: Any, n: int, entrypoint: str = "noop") -> None:
        for start in range(0, n, BULK_BATCH):
            k = min(n, start + BULK_BATCH) - start
            payloads = [str(i).encode() for i in range(start, start + k)]
            q.enqueue([entrypoint] * k, payloads, [0] * k)

    def schedule_bulk(self, n: int) -> float:
        _dsn, conn = self.fresh()
        with conn:
            q = self.queries(conn)
            self.gate.wait()
            t0 = time.perf_counter()
            self.bulk(q, n)
            elapsed = time.perf_counter() - t0
            self.check(conn, n)
        return elapsed

    def drain(self, n: int) -> float:
        dsn, conn = self.fresh()
        with conn:
            self.bulk(self.queries(conn), n)
            self.check(conn, n)
            workers = Workers(self.tmp, f"drain-{self.counter:03d}")
            cmd = self.cmd
            self.gate.wait()
            try:
                t0 = time.perf_counter()
                workers.start(cmd, {"PGQ_BENCH_DSN": dsn})
                t_done = wait_until(
                    lambda: self.count(conn) == 0, workers, "pgqueuer drain", exit_ends=True
                )
                elapsed = t_done - t0
            finally:
                workers.stop()
        return elapsed

    # latency, fan-out, deep queue

    def ledger(self, tag: str, dsn: str) -> tuple[Ledger, Workers, dict[str, str]]:
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-{tag}.txt")
        workers = Workers(self.tmp, f"{self.counter:03d}-{tag}")
        return ledger, workers, {**ledger.env, "PGQ_BENCH_DSN": dsn}

    def latency(self, count: int, rate: float) -> list[float]:
        dsn, conn = self.fresh()
        ledger, workers, env = self.ledger("latency", dsn)
        with conn:
            q = self.queries(conn)
            try:
                delays = latency_run(
                    workers,
                    self.cmd_continuous,
                    env,
                    lambda i, sent: q.enqueue("lat", f"{i} {sent}".encode()),
                    ledger,
                    self.gate,
                    count,
                    rate,
                    "pgqueuer",
                )
            finally:
                workers.stop()
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        dsn, conn = self.fresh()
        ledger, workers, env = self.ledger("fanout", dsn)
        with conn:
            payload = json.dumps({"i": 0, "total": total, "sleep": sleep}).encode()
            self.queries(conn).enqueue("fan", payload)
            self.gate.wait()
            try:
                seconds = fanout_run(workers, self.cmd_continuous, env, ledger, total, "pgqueuer")
            finally:
                workers.stop()
        check_tree(ledger, total, "pgqueuer")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        dsn, conn = self.fresh()
        ledger, workers, env = self.ledger("deep", dsn)
        with conn:
            self.bulk(self.queries(conn), n, "deep")
            analyze_postgres(self.url)
            self.gate.wait()
            try:
                workers.start(self.cmd_continuous, env)
                return wait_deep(ledger, workers, "pgqueuer deep queue", sample)
            finally:
                workers.stop()
                conn.execute("TRUNCATE pgqueuer")

    def close(self) -> None:
        pass
