"""The raw store loops: what the store itself allows with no queue library in the way.
Every crawlq figure is divided by these too (the "limit ratio"), so a table shows how
close crawlq gets to its store as well as how it compares with its peers.

CONFIG: no worker processes; loops in the bench process (SQLite drain: 2 processes, as
many as the cores). Schedule, one call per job: one INSERT and one commit per job
(SQLite: bench_sqlite's raw table; PostgreSQL: psycopg, a table like bench_stores.py's;
Redis: one pipelined HSET payload + ZADD ready per job, one round trip). Bulk: 500 rows
per transaction / pipeline. Drain: claim and acknowledge one job at a time (SQLite:
``UPDATE..RETURNING`` claim + ``UPDATE`` ack, 2 processes; PostgreSQL: ``DELETE..FOR
UPDATE SKIP LOCKED..RETURNING``, one commit each, which claims and acks in one statement;
Redis: one Lua claim + one Lua ack per job). Latency, fan-out and deep queue have no raw
loop.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import bench_sqlite as bs
import bench_stores
from common import BULK_BATCH

NOOP = bs.NOOP


class RawPeer:
    name = "raw loop"
    STORES = ("sqlite", "postgres", "redis")

    def __init__(self, store: str, url: str, tmp: Path, gate: Any) -> None:
        self.store, self.url, self.tmp, self.gate = store, url, tmp, gate
        tmp.mkdir(parents=True, exist_ok=True)
        self.counter = 0

    def _schedule(self, n: int, batch: int) -> float:
        self.counter += 1
        if self.store == "sqlite":
            path = str(self.tmp / f"raw-{self.counter:03d}.db")
            table = bs.raw_create(path, "raw")
            self.gate.wait()
            return n / bs.raw_insert_rate(path, table, n, batch)[0]
        if self.store == "postgres":
            return self._pg_schedule(n, batch)
        return self._redis_schedule(n, batch)

    def _pg_schedule(self, n: int, batch: int) -> float:
        import psycopg

        sql = (
            "INSERT INTO raw_jobs (queue, run_at, args) "
            "VALUES (%s, extract(epoch FROM now()), %s::jsonb)"
        )
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(bench_stores.PG_SCHEMA)
        with psycopg.connect(self.url) as conn:
            self.gate.wait()
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                for start in range(0, n, batch):
                    rows = [(NOOP, json.dumps([i])) for i in range(start, min(n, start + batch))]
                    if batch == 1:
                        cur.execute(sql, rows[0])
                    else:
                        cur.executemany(sql, rows)
                    conn.commit()
            elapsed = time.perf_counter() - t0
            row = conn.execute("SELECT count(*) FROM raw_jobs").fetchone()
        if row is None or row[0] != n:
            raise RuntimeError(f"raw PostgreSQL schedule: {row} rows for {n}")
        return elapsed

    def _redis_schedule(self, n: int, batch: int) -> float:
        import redis

        client = redis.Redis.from_url(self.url)
        prefix = f"raw{self.counter:03d}"
        self.gate.wait()
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            pipe = client.pipeline(transaction=False)
            now = time.time()
            for i in range(start, min(n, start + batch)):
                pipe.hset(f"{prefix}:job:{i}", mapping={"args": json.dumps([i]), "state": "ready"})
                pipe.zadd(f"{prefix}:ready", {str(i): now})
            pipe.execute()
        elapsed = time.perf_counter() - t0
        got = client.zcard(f"{prefix}:ready")
        client.close()
        if got != n:
            raise RuntimeError(f"raw Redis schedule: {got} queued for {n}")
        return elapsed

    def schedule_one(self, n: int) -> float:
        return self._schedule(n, 1)

    def schedule_bulk(self, n: int) -> float:
        return self._schedule(n, BULK_BATCH)

    def drain(self, n: int) -> float:
        self.counter += 1
        if self.store == "sqlite":
            path = str(self.tmp / f"raw-drain-{self.counter:03d}.db")
            table = bs.raw_create(path, "raw")
            bs.raw_fill(path, table, n)
            self.gate.wait()
            return n / bs.raw_drain_rate(path, table, n, 1, 2)[0]
        self.gate.wait()
        if self.store == "postgres":
            return n / bench_stores.pg_raw_drain(self.url, n, 1)
        return n / bench_stores.redis_raw_drain(self.url, n, 1)

    def latency(self, count: int, rate: float) -> None:
        return None

    def fanout(self, total: int, sleep: float) -> None:
        return None

    def deep(self, n: int, sample: int) -> None:
        return None

    def close(self) -> None:
        pass
