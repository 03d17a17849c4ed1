"""The Redis store's workers: their records, reaping the dead ones, maintenance leases."""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from typing import cast

from crawlq.jobs import WorkerInfo
from crawlq.payload import dumps
from crawlq.stores.gate import WorkerGate
from crawlq.stores.redis import keys
from crawlq.stores.redis.core import RedisCore, now_arg, number, opt, translate
from crawlq.stores.workers import Counters, listed, worker_info
from crawlq.types import Timestamp


def _counter_args(counters: Counters) -> list[str]:
    """A worker's counters as the scripts take them (rss_bytes optional)."""
    running, done, failed, rss_bytes = counters
    whole = [str(operator.index(n)) for n in (running, done, failed)]
    return [*whole, opt(None if rss_bytes is None else str(operator.index(rss_bytes)))]


class RedisWorkers(RedisCore, WorkerGate):
    """Worker records and maintenance leases (``JobStore``)."""

    def _worker_register(self, info: WorkerInfo, now: Timestamp | None) -> None:
        args = [
            now_arg(now),
            info.id,
            info.host,
            str(operator.index(info.pid)),
            dumps(list(info.queues)),
            info.runtime,
            str(operator.index(info.concurrency)),
            *_counter_args(Counters.of(info)),
            opt(info.process),
        ]
        self._run("registering a worker", "worker_register", args)

    def _worker_heartbeat(self, worker_id: str, counters: Counters, now: Timestamp | None) -> bool:
        args = [now_arg(now), worker_id, *_counter_args(counters)]
        return bool(self._run("heartbeating a worker", "worker_heartbeat", args))

    def _worker_stop(self, worker_id: str, done: int, failed: int, now: Timestamp | None) -> None:
        counters = [str(operator.index(done)), str(operator.index(failed))]
        self._run("stopping a worker", "worker_stop", [now_arg(now), worker_id, *counters])

    def _worker_list(self, now: Timestamp | None) -> list[WorkerInfo]:
        with translate("listing workers"):
            worker_ids = cast(
                "list[str]", self._client.zrange(keys.key("workers", self._prefix), 0, -1)
            )
            pipe = self._client.pipeline(transaction=False)
            for worker_id in worker_ids:
                pipe.hgetall(keys.key("worker", self._prefix, worker=worker_id))
            hashes = cast("list[dict[str, str]]", pipe.execute())
        workers = (
            worker_info({**h, "id": worker_id}, json.loads(h["queues"]))
            for worker_id, h in zip(worker_ids, hashes, strict=True)
            if h  # pruned meanwhile
        )
        return listed(workers, self.now() if now is None else now)

    def _worker_reap(
        self, dead_after: float, gone: Sequence[str], now: Timestamp | None
    ) -> list[str]:
        args = [now_arg(now), number(dead_after), *gone]
        return sorted(str(w) for w in self._run("reaping dead workers", "worker_reap", args))

    def _worker_prune(self, older_than: float, now: Timestamp | None) -> int:
        args = [now_arg(now), number(older_than)]
        return int(self._run("pruning workers", "worker_prune", args))

    def _maintenance_acquire(
        self, duty: str, owner: str, ttl: float, now: Timestamp | None
    ) -> bool:
        args = [now_arg(now), duty, owner, number(ttl)]
        return bool(self._run("acquiring a maintenance lease", "maintenance_acquire", args))
