"""Celery (https://docs.celeryq.dev) on Redis (kombu's Redis transport as the broker).

CONFIG: one ``celery -A celerytasks worker`` process with the worker's defaults: the
``prefork`` pool with ``--concurrency`` = the number of CPUs (2 here; Celery's workers
guide: the concurrency defaults to the number of CPUs, and more pool processes are to be
found by experiment, which is tuning, not the recommendation), ``worker_prefetch_multiplier``
4 (so up to 8 messages reserved), early acks,
the ``-O default`` scheduling profile (``-O fair`` is an option, not the default),
``--loglevel WARNING`` written to a file, mingle, gossip and heartbeats on, JSON
serializer (the default), no result backend (none is configured, so nothing is stored per
task). The fan-out's simulated fetches block a pool process each, so 2 are in flight at a
time. Each measurement uses its own queue (``task_default_queue``; one Redis list). Bulk:
Celery has no bulk enqueue; the closest documented form is a ``group`` of 500 signatures
per ``group(...).apply_async()`` (one producer, one message per task). One call per job:
``task.delay(i)``. Fan-out children: ``fan.delay(...)`` from inside the task. The deep
queue's untimed set-up does not go through ``group``: Celery publishes about 1,000
messages a second here, so its N messages are copies of the one Celery wrote for
``delay(0)`` (own task id, delivery tag and argument each) pushed in Redis pipelines.

Done detection: the drain's no-op task also appends ``"<i>"`` to the ledger file (one
``write(2)``; Celery records nothing for a task without a result backend, and the queue
list's length reaches 0 while up to 8 prefetched tasks have yet to run), so the drain ends
when the ledger holds ``n`` lines (polled every 20 ms); latency, fan-out and deep queue
use the ledger too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
import uuid
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
"""Celery tasks of the peer benchmark (written by bench/peers/celery_peer.py)."""

import os
import time

from celery import Celery
'''
    + LEDGER_CODE
    + """

def make_app(url, queue):
    app = Celery("celerytasks", broker=url, set_as_current=False)
    app.conf.task_default_queue = queue
    app.conf.broker_connection_retry_on_startup = True  # silences a deprecation warning

    @app.task(name="noop")
    def noop(i):
        return None

    @app.task(name="drain")
    def drain(i):
        ledger_write(i)

    @app.task(name="lat")
    def lat(i, sent):
        ledger_write(f"{i} {sent} {time.time()}")

    @app.task(name="fan")
    def fan(i, total, sleep):
        time.sleep(sleep)
        for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
            if c < total:
                fan.delay(c, total, sleep)
        ledger_write(i)

    @app.task(name="deep")
    def deep(i):
        ledger_write(i)

    return app


app = make_app(
    os.environ.get("CELERY_BENCH_URL", "redis://127.0.0.1:6379/0"),
    os.environ.get("CELERY_BENCH_QUEUE", "celery"),
)
"""
)


class CeleryPeer:
    name = "celery"
    STORES = ("redis",)

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        if store not in self.STORES:
            raise ValueError(f"celery peer: no {store} store")
        import redis

        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.mod = write_module(tmp, "celerytasks", TASKS)
        self.conn = redis.Redis.from_url(url)
        self.counter = 0

    def fresh(self, tag: str) -> tuple[str, Any, dict[str, str]]:
        """A new queue: (its name, a Celery app sending to it, the workers' environment)."""
        self.counter += 1
        queue = f"c{self.counter:03d}_{tag}"
        app = self.mod.make_app(self.url, queue)
        return queue, app, {"CELERY_BENCH_URL": self.url, "CELERY_BENCH_QUEUE": queue}

    def done_with(self, queue: str, app: Any) -> None:
        with contextlib.suppress(Exception):
            app.close()
        self.conn.delete(queue, f"_kombu.binding.{queue}")

    def worker_cmd(self) -> list[str]:
        return [str(BIN / "celery"), "-A", "celerytasks", "worker"]

    def check(self, queue: str, n: int) -> None:
        got = self.conn.llen(queue)
        if got != n:
            raise RuntimeError(f"celery: {got} of {n} jobs queued")

    @staticmethod
    def bulk(task: Any, n: int) -> None:
        from celery import group

        for start in range(0, n, BULK_BATCH):
            group(task.s(i) for i in range(start, min(n, start + BULK_BATCH))).apply_async()

    def fill(self, task: Any, queue: str, n: int) -> None:
        """Queue ``task(i)`` for i in range(n) fast: the deep queue's untimed set-up (Celery
        publishes about 1,000 messages a second, 15 minutes for a million). Copies of the
        message Celery itself wrote for ``task.delay(0)``, each with its own task id,
        delivery tag and argument, LPUSHed as kombu's Redis transport does, in pipelines
        of 5,000."""
        task.delay(0)
        template = json.loads(self.conn.rpop(queue))
        headers, props = template["headers"], template["properties"]
        _args, *rest = json.loads(base64.b64decode(template["body"]))
        with self.conn.pipeline(transaction=False) as pipe:
            for i in range(n):
                tid = str(uuid.uuid4())
                headers.update(id=tid, root_id=tid, argsrepr=repr((i,)))
                props.update(correlation_id=tid, delivery_tag=str(uuid.uuid4()))
                body = json.dumps([[i], *rest]).encode()
                template["body"] = base64.b64encode(body).decode()
                pipe.lpush(queue, json.dumps(template))
                if i % 5000 == 4999:
                    pipe.execute()
            pipe.execute()

    def schedule_one(self, n: int) -> float:
        queue, app, _ = self.fresh("one")
        try:
            noop = app.tasks["noop"]
            noop.delay(-1)  # connect outside the timed part
            self.conn.delete(queue)
            self.gate.wait()
            t0 = time.perf_counter()
            for i in range(n):
                noop.delay(i)
            elapsed = time.perf_counter() - t0
            self.check(queue, n)
        finally:
            self.done_with(queue, app)
        return elapsed

    def schedule_bulk(self, n: int) -> float:
        queue, app, _ = self.fresh("bulk")
        try:
            noop = app.tasks["noop"]
            noop.delay(-1)
            self.conn.delete(queue)
            self.gate.wait()
            t0 = time.perf_counter()
            self.bulk(noop, n)
            elapsed = time.perf_counter() - t0
            self.check(queue, n)
        finally:
            self.done_with(queue, app)
        return elapsed

    def ledger(self, tag: str, env: dict[str, str]) -> tuple[Ledger, Workers, dict[str, str]]:
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-{tag}.txt")
        workers = Workers(self.tmp, f"{self.counter:03d}-{tag}")
        return ledger, workers, {**env, **ledger.env}

    def drain(self, n: int) -> float:
        queue, app, env = self.fresh("drain")
        ledger, workers, env = self.ledger("drain", env)
        try:
            self.bulk(app.tasks["drain"], n)
            self.check(queue, n)
            self.gate.wait()
            t0 = time.perf_counter()
            workers.start(self.worker_cmd(), env)
            t_done = wait_until(lambda: ledger.count() >= n, workers, "celery drain")
            elapsed = t_done - t0
        finally:
            workers.stop()
            self.done_with(queue, app)
        return elapsed

    def latency(self, count: int, rate: float) -> list[float]:
        queue, app, env = self.fresh("latency")
        ledger, workers, env = self.ledger("latency", env)
        lat = app.tasks["lat"]
        try:
            delays = latency_run(
                workers,
                self.worker_cmd(),
                env,
                lambda i, sent: lat.delay(i, sent),
                ledger,
                self.gate,
                count,
                rate,
                "celery",
            )
        finally:
            workers.stop()
            self.done_with(queue, app)
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        queue, app, env = self.fresh("fanout")
        ledger, workers, env = self.ledger("fanout", env)
        try:
            app.tasks["fan"].delay(0, total, sleep)
            self.gate.wait()
            seconds = fanout_run(workers, self.worker_cmd(), env, ledger, total, "celery")
        finally:
            workers.stop()
            self.done_with(queue, app)
        check_tree(ledger, total, "celery")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        queue, app, env = self.fresh("deep")
        ledger, workers, env = self.ledger("deep", env)
        try:
            self.fill(app.tasks["deep"], queue, n)
            self.check(queue, n)
            self.gate.wait()
            workers.start(self.worker_cmd(), env)
            return wait_deep(ledger, workers, "celery deep queue", sample)
        finally:
            workers.stop()
            self.done_with(queue, app)

    def close(self) -> None:
        self.conn.close()
