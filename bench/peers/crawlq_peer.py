"""crawlq itself, on SQLite, PostgreSQL and Redis: bench_stores.py's ``StoreBench`` (the
same code as bench_stores.py's figures), driven through the peer interface.

CONFIG: one ``python -m crawlq worker --app benchtasks:app --store URL --concurrency 8
--burst`` process (thread runtime, ``--prefetch 0``, crawlq's defaults otherwise), the
worker every other crawlq benchmark uses. Bulk: ``app.schedule_many`` of 500 specs per
call. Done: ``queue_stats`` showing N done (polled every 20 ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bench_stores


class CrawlqPeer:
    name = "crawlq"
    STORES = ("sqlite", "postgres", "redis")

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        self.store = store
        self.bench = bench_stores.StoreBench(store, url, tmp, 0, 0, 50.0, gate)
        if self.bench.choose_worker() != "cli":
            raise RuntimeError(
                f"`crawlq worker --burst` did not drain 10 jobs on {store}:\n"
                f"{self.bench.worker_log('probe')}"
            )

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

    def close(self) -> None:
        pass
