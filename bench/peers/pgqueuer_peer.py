"""PgQueuer (https://github.com/janbjorge/pgqueuer) on PostgreSQL.

CONFIG: one ``pgq run pgqtasks:create_pgqueuer --mode drain`` process (``--mode drain``
makes it exit once the queue is empty, like the other systems' burst workers; where that
command is broken, as in pgqueuer 1.6.0, a runner file doing exactly what it does), with
the CLI's defaults otherwise: ``--batch-size 10``, no ``--max-concurrent-tasks`` limit, an
``async def`` entrypoint (PgQueuer's documented style) on a psycopg ``AsyncConnection``
with ``autocommit=True`` (``PsycopgDriver``), the factory an async context manager (what
1.6.0's CLI requires), INFO logging written to a file. PgQueuer
runs one asyncio process; its docs scale out by running more processes, and give no
per-core figure, so one process here (crawlq also runs one). Bulk: ``enqueue`` with lists
of entrypoints, payloads and priorities, 500 per call (its documented batch form).

Done detection: PgQueuer deletes a job's row once it finished (and logs it), so the drain
ends when its ``pgqueuer`` table is empty (``count(*)`` polled every 20 ms). Every
measurement gets its own schema (``search_path`` in the DSN).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import BIN, BULK_BATCH, Workers, wait_until, write_module

TASKS = '''\
"""PgQueuer tasks of the peer benchmark (written by bench/peers/pgqueuer_peer.py)."""

import os
from contextlib import asynccontextmanager

import psycopg
from pgqueuer import PgQueuer
from pgqueuer.db import PsycopgDriver
from pgqueuer.models import Job


@asynccontextmanager
async def create_pgqueuer():
    conn = await psycopg.AsyncConnection.connect(os.environ["PGQ_BENCH_DSN"], autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    try:
        yield pgq
    finally:
        await conn.close()
'''

# What `pgq run pgqtasks:create_pgqueuer --mode drain` does (pgqueuer/adapters/cli/cli.py,
# `run`), with the CLI's defaults: in pgqueuer 1.6.0 that command fails before starting
# (`AttributeError: 'str' object has no attribute 'name'` in `setup_fancy_logger`: the
# --log-level option reaches it as a str, not a LogLevel).
RUNNER = '''\
"""Runs PgQueuer like `pgq run pgqtasks:create_pgqueuer --mode drain` (peer benchmark)."""

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
        mode=types.QueueExecutionMode.drain,
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
        if not self.cli_works():
            self.cmd = [sys.executable, "pgq_runner.py"]
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
    def bulk(q: Any, n: int) -> None:
        for start in range(0, n, BULK_BATCH):
            k = min(n, start + BULK_BATCH) - start
            q.enqueue(["noop"] * k, [str(i).encode() for i in range(start, start + k)], [0] * k)

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

    def close(self) -> None:
        pass
