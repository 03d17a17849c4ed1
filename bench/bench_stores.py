"""crawlq on SQLite, PostgreSQL and Redis in one run: schedule rates, drain rate,
schedule-to-start latency, and the raw limit of each store for the same claim work.

    .venv/bin/python bench/bench_stores.py            # N=20,000, 3 runs
    .venv/bin/python bench/bench_stores.py --quick    # N=2,000, 1 run

Not a test: it asserts nothing about speed. See bench/README.md for what each row means.
The SQLite databases live in a temporary directory; PostgreSQL and Redis are private
servers started by this script from the installed binaries (tests/servers.py) on random
loopback ports, and stopped at the end. Every measurement gets a fresh SQLite file, a
fresh PostgreSQL schema or a fresh Redis prefix. The crawlq measurements reuse
bench_sqlite.py's ``Bench`` (only the store URL differs); the SQLite raw loop is
bench_sqlite.py's own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
for _p in (str(BENCH_DIR), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import bench_sqlite as bs  # noqa: E402

CONCURRENCY = bs.CONCURRENCY
SCHEDULE_BATCH = bs.SCHEDULE_BATCH
NOOP = bs.NOOP
STORES = ("sqlite", "postgres", "redis")
STORE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "redis": "Redis"}


# -- crawlq on each store: bench_sqlite's Bench with another URL -----------------------


class StoreBench(bs.Bench):
    """``bench_sqlite.Bench`` for any store: ``fresh_db`` names a new SQLite file, a new
    PostgreSQL schema or a new Redis prefix, and ``url`` turns that name into a URL."""

    def __init__(
        self,
        kind: str,
        base_url: str,
        tmp: Path,
        n: int,
        latency_jobs: int,
        latency_rate: float,
        gate: bs.QuietGate,
    ) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        super().__init__(tmp, n, latency_jobs, latency_rate)
        self.kind = kind
        self.base_url = base_url
        self.gate = gate

    def fresh_db(self, name: str) -> Any:
        self.counter += 1
        clean = "".join(c if c.isalnum() else "_" for c in name.lower())
        if self.kind == "sqlite":
            return self.tmp / f"{self.counter:03d}-{name}.db"
        return f"b{self.counter:03d}_{clean}"

    def url(self, path: Any) -> str:  # type: ignore[override]
        if self.kind == "sqlite":
            return f"sqlite:///{path}"
        if self.kind == "postgres":
            return f"{self.base_url}?schema={path}"
        return f"{self.base_url}?prefix={path}"


# -- the raw PostgreSQL loop (psycopg only) --------------------------------------------

PG_SCHEMA = """
DROP TABLE IF EXISTS raw_jobs;
CREATE TABLE raw_jobs (
    id       bigserial        PRIMARY KEY,
    queue    text             NOT NULL,
    priority integer          NOT NULL DEFAULT 0,
    run_at   double precision NOT NULL,
    args     jsonb            NOT NULL,
    state    text             NOT NULL DEFAULT 'ready'
);
CREATE INDEX raw_jobs_claim ON raw_jobs (queue, priority DESC, run_at, id)
    WHERE state = 'ready';
"""

PG_FILL = """
INSERT INTO raw_jobs (queue, run_at, args)
SELECT %(queue)s, extract(epoch FROM now())::double precision, jsonb_build_array(g)
FROM generate_series(1, %(n)s) AS g
"""

PG_CLAIM = """
DELETE FROM raw_jobs
WHERE id IN (SELECT id FROM raw_jobs
             WHERE queue = %(queue)s AND state = 'ready' AND run_at <= %(now)s
             ORDER BY priority DESC, run_at, id
             LIMIT %(limit)s
             FOR UPDATE SKIP LOCKED)
RETURNING id, args
"""


def pg_raw_drain(url: str, n: int, batch: int) -> float:
    """jobs/s of a plain psycopg loop: claim (delete) ``batch`` due jobs per statement,
    one commit each, until none is left."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(PG_SCHEMA)
        conn.execute(PG_FILL, {"queue": NOOP, "n": n})
        conn.execute("VACUUM ANALYZE raw_jobs")
    with psycopg.connect(url) as conn:
        t0 = time.perf_counter()
        done = 0
        while True:
            with conn.cursor() as cur:
                cur.execute(PG_CLAIM, {"queue": NOOP, "now": time.time(), "limit": batch})
                rows = cur.fetchall()
            conn.commit()
            if not rows:
                break
            done += len(rows)
        elapsed = time.perf_counter() - t0
    if done != n:
        raise RuntimeError(f"raw PostgreSQL loop processed {done} of {n} jobs")
    return n / elapsed


# -- the raw Redis loop (redis-py only) ------------------------------------------------

# KEYS: ready zset (score run_at), running zset; ARGV: now, limit, lease expiry, job key
# prefix. Pops up to `limit` due jobs, moves them to running, returns id, args pairs.
REDIS_CLAIM = """
local popped = redis.call('ZPOPMIN', KEYS[1], ARGV[2])
local out = {}
for i = 1, #popped, 2 do
  local id, score = popped[i], tonumber(popped[i + 1])
  if score > tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[1], score, id)
  else
    redis.call('ZADD', KEYS[2], ARGV[3], id)
    redis.call('HSET', ARGV[4] .. id, 'state', 'running')
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', ARGV[4] .. id, 'args')
  end
end
return out
"""

# KEYS: running zset; ARGV: job key prefix, finished_at, id...
REDIS_ACK = """
for i = 3, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('HSET', ARGV[1] .. ARGV[i], 'state', 'done', 'result', 'null',
             'finished_at', ARGV[2])
end
return #ARGV - 2
"""


def redis_raw_fill(client: Any, prefix: str, n: int) -> None:
    now = time.time()
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, 1000):
        stop = min(n, start + 1000)
        for i in range(start, stop):
            pipe.hset(f"{prefix}:job:{i}", mapping={"args": f"[{i}]", "state": "ready"})
        pipe.zadd(f"{prefix}:ready", {str(i): now for i in range(start, stop)})
        pipe.execute()


def redis_raw_drain(url: str, n: int, batch: int, naive: bool = False) -> float:
    """jobs/s of a plain redis-py loop. Scripted: one Lua call claims ``batch`` due jobs
    (pop from the ready zset, add to running, read the payload), one Lua call acks them.
    Naive: one command per operation (ZPOPMIN, ZADD running, HSET state, HGET payload;
    ack: ZREM running, HSET state done)."""
    import json

    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    prefix = f"raw{int(time.time() * 1000)}"
    client.flushdb()
    redis_raw_fill(client, prefix, n)
    ready, running, jobkey = f"{prefix}:ready", f"{prefix}:running", f"{prefix}:job:"
    claim = client.register_script(REDIS_CLAIM)
    ack = client.register_script(REDIS_ACK)
    done = 0
    t0 = time.perf_counter()
    if naive:
        while True:
            popped = client.zpopmin(ready, 1)
            if not popped:
                break
            job_id, score = popped[0]
            now = time.time()
            if score > now:
                client.zadd(ready, {job_id: score})
                continue
            client.zadd(running, {job_id: now + 30})
            client.hset(jobkey + job_id, "state", "running")
            json.loads(client.hget(jobkey + job_id, "args"))
            client.zrem(running, job_id)
            client.hset(
                jobkey + job_id, mapping={"state": "done", "result": "null", "finished_at": now}
            )
            done += 1
    else:
        while True:
            now = time.time()
            out = claim(keys=[ready, running], args=[now, batch, now + 30, jobkey])
            if not out:
                break
            ids = out[0::2]
            for args in out[1::2]:
                json.loads(args)
            ack(keys=[running], args=[jobkey, time.time(), *ids])
            done += len(ids)
    elapsed = time.perf_counter() - t0
    client.flushdb()
    client.close()
    if done != n:
        raise RuntimeError(f"raw Redis loop processed {done} of {n} jobs")
    return n / elapsed


# -- the SQLite raw loop: bench_sqlite's own -------------------------------------------


def sqlite_raw_drain(tmp: Path, n: int, batch: int, tag: str) -> float:
    path = str(tmp / f"raw-{tag}-b{batch}.db")
    table = bs.raw_create(path, "raw")
    bs.raw_fill(path, table, n)
    rate, _cpu = bs.raw_drain_rate(path, table, n, batch, 1)
    return rate


# -- server versions -------------------------------------------------------------------


def pg_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


def redis_version(url: str) -> str:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return str(client.info("server")["redis_version"])
    finally:
        client.close()


def pg_drop_schemas(url: str) -> None:
    """Drop the schemas of earlier measurements (keeps the server small)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname ~ '^b[0-9]{3}_'"
            ).fetchall()
        ]
        for name in names:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
        conn.execute("DROP TABLE IF EXISTS raw_jobs")


def redis_flush(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


# -- the run ---------------------------------------------------------------------------

Rows = list[tuple[str, str, str, str]]  # (store, key, label, unit)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=2,000, 1 run")
    parser.add_argument("-n", type=int, help="jobs per figure (default 20,000; quick 2,000)")
    parser.add_argument("--runs", type=int, help="runs per figure (default 3; quick 1)")
    parser.add_argument(
        "--single-fraction",
        type=float,
        default=0.25,
        help="one-call-per-job scheduling uses this fraction of N (default 0.25)",
    )
    parser.add_argument("--latency-jobs", type=int, default=300, help="default 300")
    parser.add_argument("--latency-rate", type=float, default=50.0, help="jobs/s (default 50)")
    parser.add_argument(
        "--stores", default=",".join(STORES), help="comma-separated subset of sqlite,postgres,redis"
    )
    parser.add_argument(
        "--gate-patience",
        type=float,
        default=2.0,
        help="seconds to wait for a quiet machine before each measurement (default 2)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the SQLite temp directory")
    args = parser.parse_args(argv)
    n = args.n or (2_000 if args.quick else 20_000)
    runs = args.runs or (1 if args.quick else 3)
    n_single = max(1, int(n * args.single_fraction))
    stores = [s for s in args.stores.split(",") if s]

    from tests import servers

    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-stores-"))
    started = time.perf_counter()
    pg: Any = None
    rd: Any = None
    versions = {"sqlite": sqlite3.sqlite_version}
    try:
        gate = bs.QuietGate(patience=args.gate_patience)
        base = {"sqlite": ""}
        if "postgres" in stores:
            pg = servers.PrivatePostgres()
            base["postgres"] = pg.url
            versions["postgres"] = pg_version(pg.url)
        if "redis" in stores:
            rd = servers.PrivateRedis()
            base["redis"] = rd.url
            versions["redis"] = redis_version(rd.url)
        print(f"# working in {tmp}; servers: {base}", file=sys.stderr, flush=True)

        benches: dict[str, StoreBench] = {}
        for kind in stores:
            b = StoreBench(
                kind, base[kind], tmp / kind, n, args.latency_jobs, args.latency_rate, gate
            )
            worker = b.choose_worker()
            if worker != "cli":
                raise RuntimeError(
                    f"`crawlq worker --burst` did not drain 10 jobs on {kind}:\n"
                    f"{b.worker_log('probe')}"
                )
            benches[kind] = b

        res = bs.Results()
        rows: Rows = []
        steps: list[tuple[str, str, Callable[[], None]]] = []

        def add(store: str, key: str, label: str, unit: str, fn: Callable[[], float]) -> None:
            rows.append((store, key, label, unit))
            full = f"{store}:{key}"
            steps.append((store, key, lambda: res.add(full, label, unit, fn())))

        for kind in stores:
            b = benches[kind]

            def sched_batch(b: StoreBench = b) -> float:
                return b.schedule_batch()[0]

            def sched_single(b: StoreBench = b) -> float:
                b.n = n_single
                try:
                    return b.schedule_single()[0]
                finally:
                    b.n = n

            add(kind, "schedB", f"`app.schedule_many`, batches of {SCHEDULE_BATCH}", "jobs/s",
                sched_batch)  # fmt: skip
            add(kind, "sched1", f"`task.schedule`, one call per job ({n_single:,} jobs)",
                "jobs/s", sched_single)  # fmt: skip

            rows.append((kind, "drain1", "drain, 1 worker process (start to exit)", "jobs/s"))
            rows.append((kind, "drain2", "drain, 2 worker processes (start to all done)", "jobs/s"))

            def drain1(kind: str = kind, b: StoreBench = b) -> None:
                _, exit_rate, _ = b.drain(1)
                res.add(f"{kind}:drain1", "", "jobs/s", exit_rate)

            def drain2(kind: str = kind, b: StoreBench = b) -> None:
                done_rate, _, _ = b.drain(2)
                res.add(f"{kind}:drain2", "", "jobs/s", done_rate)

            steps.append((kind, "drain1", drain1))
            steps.append((kind, "drain2", drain2))

            rows.append((kind, "lat50", "schedule-to-start p50 (idle worker)", "ms"))
            rows.append((kind, "lat99", "schedule-to-start p99 (idle worker)", "ms"))

            def lat(kind: str = kind, b: StoreBench = b) -> None:
                p50, p99, _ = b.latency()
                res.add(f"{kind}:lat50", "", "ms", p50)
                res.add(f"{kind}:lat99", "", "ms", p99)

            steps.append((kind, "latency", lat))

            for batch in (CONCURRENCY, 1):
                if kind == "sqlite":
                    label = f"raw loop: sqlite3 UPDATE..RETURNING claim + UPDATE ack, batch {batch}"

                    def fn(batch: int = batch, b: StoreBench = b) -> float:
                        b.counter += 1
                        gate.wait()
                        return sqlite_raw_drain(b.tmp, n, batch, f"{b.counter:03d}")
                elif kind == "postgres":
                    label = (
                        f"raw loop: psycopg DELETE..SKIP LOCKED..RETURNING, batch {batch}, "
                        "one commit each"
                    )

                    def fn(batch: int = batch) -> float:
                        gate.wait()
                        return pg_raw_drain(base["postgres"], n, batch)
                else:
                    label = f"raw loop: redis-py, one Lua claim + one Lua ack per {batch} jobs"

                    def fn(batch: int = batch) -> float:
                        gate.wait()
                        return redis_raw_drain(base["redis"], n, batch)

                add(kind, f"raw-b{batch}", label, "jobs/s", fn)
            if kind == "redis":

                def naive() -> float:
                    gate.wait()
                    return redis_raw_drain(base["redis"], n_single, 1, naive=True)

                add(kind, "raw-naive", "raw loop: redis-py, one command per operation "
                    f"(6 round trips per job; {n_single:,} jobs)", "jobs/s", naive)  # fmt: skip

        for run in range(runs):
            for store, key, step in steps:
                t = time.perf_counter()
                step()
                if store == "postgres":
                    pg_drop_schemas(base["postgres"])
                elif store == "redis":
                    redis_flush(base["redis"])
                print(
                    f"# run {run + 1}/{runs} {store} {key}: {time.perf_counter() - t:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )

        report(res, rows, stores, versions, n, n_single, runs, args, tmp, started, argv, gate)
    finally:
        for server in (pg, rd):
            if server is not None:
                server.close()
        if args.keep:
            print(f"# kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def report(
    res: bs.Results,
    rows: Rows,
    stores: Sequence[str],
    versions: dict[str, str],
    n: int,
    n_single: int,
    runs: int,
    args: argparse.Namespace,
    tmp: Path,
    started: float,
    argv: Sequence[str] | None,
    gate: bs.QuietGate,
) -> None:
    cmd = " ".join([".venv/bin/python", "bench/bench_stores.py", *(argv or sys.argv[1:])])
    import os

    servers_text = ", ".join(
        f"{STORE_NAMES[s]} {versions[s]}" for s in ("sqlite", "postgres", "redis") if s in versions
    )
    print(f"- command: `{cmd}`")
    print(
        f"- machine: {os.cpu_count()} cores ({bs.cpu_model()}), {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, {servers_text}, "
        f"temp dir on {bs.filesystem_of(str(tmp))}"
    )
    print(f"- code: {bs.crawlq_version()}")
    print(f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"- N = {n:,} jobs per figure ({n_single:,} for one call per job); {runs} "
        f"run{'s' if runs > 1 else ''} per figure (median, min, max); latency: "
        f"{args.latency_jobs} jobs at {args.latency_rate:g}/s; wall time "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(
        f"- worker: `python -m crawlq worker --app benchtasks:app --store URL --concurrency "
        f"{CONCURRENCY} --burst` (thread runtime)"
    )
    print(
        "- servers: SQLite WAL, synchronous=NORMAL; private PostgreSQL (fsync=off, "
        "full_page_writes=off, as in tests/servers.py) and Redis (appendonly yes, "
        "appendfsync everysec) on loopback"
    )
    print(f"- load: {gate.describe()}")
    print()
    print("| store | measurement | median | min | max | unit | crawlq drain / raw loop batch 8 |")
    print("|---|---|---:|---:|---:|---|---:|")
    for store in stores:
        raw8 = res.median(f"{store}:raw-b8")
        for s, key, label, unit in rows:
            if s != store:
                continue
            fig = res.figures.get(f"{store}:{key}")
            if fig is None or not fig.values:
                continue
            ratio = ""
            if key.startswith("drain") and raw8:
                ratio = f"{fig.median / raw8:.1%}"
            print(
                f"| {STORE_NAMES[store]} | {label} | {bs.fmt(fig.median, unit)} "
                f"| {bs.fmt(min(fig.values), unit)} | {bs.fmt(max(fig.values), unit)} "
                f"| {unit} | {ratio} |"
            )
    print()
    print("| ratio (medians) | value |")
    print("|---|---:|")
    for store in stores:
        name = STORE_NAMES[store]
        for a, b, what in (
            ("drain1", "raw-b8", "crawlq drain, 1 process / raw loop batch 8"),
            ("drain2", "raw-b8", "crawlq drain, 2 processes / raw loop batch 8"),
            ("drain1", "raw-b1", "crawlq drain, 1 process / raw loop batch 1"),
            ("drain1", "raw-naive", "crawlq drain, 1 process / raw loop one command per op"),
        ):
            va, vb = res.median(f"{store}:{a}"), res.median(f"{store}:{b}")
            if va is not None and vb:
                print(f"| {name}: {what} | {va / vb:.1%} |")
    sq = res.median("sqlite:drain1")
    for store in stores:
        if store == "sqlite":
            continue
        v = res.median(f"{store}:drain1")
        if v and sq:
            print(f"| crawlq drain, 1 process: {STORE_NAMES[store]} / SQLite | {v / sq:.1%} |")


if __name__ == "__main__":
    raise SystemExit(main())
