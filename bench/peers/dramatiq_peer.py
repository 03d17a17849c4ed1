"""Dramatiq (https://dramatiq.io) on Redis (``RedisBroker``).

CONFIG: ``dramatiq dramtasks --processes P --threads 8`` with the CLI's defaults: P = the
number of CPUs (2 here) worker processes of 8 worker threads each (the defaults of the
CLI's ``--processes`` and ``--threads``), so 16 jobs in flight, 16
simulated fetches at a time in the fan-out; the broker's default middleware (age limit,
time limit, shutdown notifications, callbacks, pipelines, retries), the default prefetch
(2 messages per thread), the default idle back-off (up to ``--worker-timeout`` 1,000 ms
between fetches of an empty queue), INFO logging (a few lines per process, none per job)
written to a file, no result backend. Each measurement uses its own key namespace
(``RedisBroker(namespace=...)``). Bulk: Dramatiq has no bulk enqueue; the closest
documented form is ``group(...).run()`` of 500 messages per call (one ``enqueue``, one
Lua script call, per message). One call per job: ``actor.send(i)``. Fan-out children:
``fan.send(...)`` from inside the actor. The deep queue's untimed set-up does not go
through ``group`` (a few thousand messages a second here): ``actor.send(i)`` with the
broker's Lua dispatch calls sent in Redis pipelines of 5,000.

Done detection: the drain's no-op actor also appends ``"<i>"`` to the ledger file (one
``write(2)``; without a result backend Dramatiq records nothing per message, and the
queue's length reaches 0 while prefetched messages have yet to run), so the drain ends
when the ledger holds ``n`` lines (polled every 20 ms); latency, fan-out and deep queue
use the ledger too.
"""

from __future__ import annotations

import os
import time
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
"""Dramatiq actors of the peer benchmark (written by bench/peers/dramatiq_peer.py)."""

import os
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker
'''
    + LEDGER_CODE
    + """

def make_broker(url, namespace):
    broker = RedisBroker(url=url, namespace=namespace)

    @dramatiq.actor(broker=broker)
    def noop(i):
        return None

    @dramatiq.actor(broker=broker)
    def drain(i):
        ledger_write(i)

    @dramatiq.actor(broker=broker)
    def lat(i, sent):
        ledger_write(f"{i} {sent} {time.time()}")

    @dramatiq.actor(broker=broker)
    def fan(i, total, sleep):
        time.sleep(sleep)
        for c in (3 * i + 1, 3 * i + 2, 3 * i + 3):
            if c < total:
                fan.send(c, total, sleep)
        ledger_write(i)

    @dramatiq.actor(broker=broker)
    def deep(i):
        ledger_write(i)

    return broker


broker = make_broker(
    os.environ.get("DRAMATIQ_BENCH_URL", "redis://127.0.0.1:6379/0"),
    os.environ.get("DRAMATIQ_BENCH_NAMESPACE", "dramatiq"),
)
dramatiq.set_broker(broker)
"""
)

PROCESSES = os.cpu_count() or 1  # the CLI's default
THREADS = 8  # the CLI's default


class DramatiqPeer:
    name = "dramatiq"
    STORES = ("redis",)

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        if store not in self.STORES:
            raise ValueError(f"dramatiq peer: no {store} store")
        import redis

        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.mod = write_module(tmp, "dramtasks", TASKS)
        self.conn = redis.Redis.from_url(url)
        self.counter = 0

    def fresh(self, tag: str) -> tuple[Any, dict[str, str]]:
        """A new key namespace: (a broker on it with the actors declared, the workers'
        environment)."""
        self.counter += 1
        namespace = f"d{self.counter:03d}_{tag}"
        broker = self.mod.make_broker(self.url, namespace)
        return broker, {"DRAMATIQ_BENCH_URL": self.url, "DRAMATIQ_BENCH_NAMESPACE": namespace}

    def done_with(self, broker: Any) -> None:
        keys = list(self.conn.scan_iter(match=f"{broker.namespace}*", count=1000))
        for start in range(0, len(keys), 1000):
            self.conn.delete(*keys[start : start + 1000])
        broker.close()

    def worker_cmd(self) -> list[str]:
        cmd = [str(BIN / "dramatiq"), "dramtasks"]
        return [*cmd, "--processes", str(PROCESSES), "--threads", str(THREADS)]

    @staticmethod
    def check(broker: Any, n: int) -> None:
        got = broker.do_qsize("default")
        if got != n:
            raise RuntimeError(f"dramatiq: {got} of {n} jobs queued")

    @staticmethod
    def bulk(actor: Any, n: int) -> None:
        from dramatiq import group

        for start in range(0, n, BULK_BATCH):
            messages = [actor.message(i) for i in range(start, min(n, start + BULK_BATCH))]
            group(messages, broker=actor.broker).run()

    @staticmethod
    def fill(actor: Any, n: int) -> None:
        """``actor.send(i)`` for i in range(n) fast: the deep queue's untimed set-up
        (``group(...).run()`` enqueues a few thousand messages a second, minutes for a
        million). Each message goes through Dramatiq's own ``broker.enqueue``; only its
        Lua dispatch script calls are sent in Redis pipelines of 5,000."""
        broker = actor.broker
        script = broker.scripts["dispatch"]
        pipe = broker.client.pipeline(transaction=False)

        def pipelined(args: list[Any], keys: list[str]) -> None:
            script(keys=keys, args=args, client=pipe)

        broker.scripts["dispatch"] = pipelined
        try:
            for i in range(n):
                actor.send(i)
                if i % 5000 == 4999:
                    pipe.execute()
            pipe.execute()
        finally:
            broker.scripts["dispatch"] = script
            pipe.reset()

    def schedule_one(self, n: int) -> float:
        broker, _ = self.fresh("one")
        try:
            noop = broker.get_actor("noop")
            self.gate.wait()
            t0 = time.perf_counter()
            for i in range(n):
                noop.send(i)
            elapsed = time.perf_counter() - t0
            self.check(broker, n)
        finally:
            self.done_with(broker)
        return elapsed

    def schedule_bulk(self, n: int) -> float:
        broker, _ = self.fresh("bulk")
        try:
            noop = broker.get_actor("noop")
            self.gate.wait()
            t0 = time.perf_counter()
            self.bulk(noop, n)
            elapsed = time.perf_counter() - t0
            self.check(broker, n)
        finally:
            self.done_with(broker)
        return elapsed

    def ledger(self, tag: str, env: dict[str, str]) -> tuple[Ledger, Workers, dict[str, str]]:
        ledger = Ledger(self.tmp / f"ledger-{self.counter:03d}-{tag}.txt")
        workers = Workers(self.tmp, f"{self.counter:03d}-{tag}")
        return ledger, workers, {**env, **ledger.env}

    def drain(self, n: int) -> float:
        broker, env = self.fresh("drain")
        ledger, workers, env = self.ledger("drain", env)
        try:
            self.bulk(broker.get_actor("drain"), n)
            self.check(broker, n)
            self.gate.wait()
            t0 = time.perf_counter()
            workers.start(self.worker_cmd(), env)
            t_done = wait_until(lambda: ledger.count() >= n, workers, "dramatiq drain")
            elapsed = t_done - t0
        finally:
            workers.stop()
            self.done_with(broker)
        return elapsed

    def latency(self, count: int, rate: float) -> list[float]:
        broker, env = self.fresh("latency")
        ledger, workers, env = self.ledger("latency", env)
        lat = broker.get_actor("lat")
        try:
            delays = latency_run(
                workers,
                self.worker_cmd(),
                env,
                lambda i, sent: lat.send(i, sent),
                ledger,
                self.gate,
                count,
                rate,
                "dramatiq",
            )
        finally:
            workers.stop()
            self.done_with(broker)
        return delays

    def fanout(self, total: int, sleep: float) -> float:
        broker, env = self.fresh("fanout")
        ledger, workers, env = self.ledger("fanout", env)
        try:
            broker.get_actor("fan").send(0, total, sleep)
            self.gate.wait()
            seconds = fanout_run(workers, self.worker_cmd(), env, ledger, total, "dramatiq")
        finally:
            workers.stop()
            self.done_with(broker)
        check_tree(ledger, total, "dramatiq")
        return seconds

    def deep(self, n: int, sample: int) -> tuple[float, int]:
        broker, env = self.fresh("deep")
        ledger, workers, env = self.ledger("deep", env)
        try:
            self.fill(broker.get_actor("deep"), n)
            self.check(broker, n)
            self.gate.wait()
            workers.start(self.worker_cmd(), env)
            return wait_deep(ledger, workers, "dramatiq deep queue", sample)
        finally:
            workers.stop()
            self.done_with(broker)

    def close(self) -> None:
        self.conn.close()
