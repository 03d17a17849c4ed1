"""Periodic schedules at scale (issue 20's goal): N schedules (10,000) due in the same
second, W `crawlq worker` processes (4) acting as schedulers, on a private PostgreSQL
(or Redis) this script starts: how long until every fire time is fired, and that none
fired twice.

    .venv/bin/python bench/bench_periodic.py                     # 10,000 schedules, 4 workers
    .venv/bin/python bench/bench_periodic.py --store redis --runs 3
    .venv/bin/python bench/bench_periodic.py -n 1000 --workers 1

The schedules (``every`` 1 h, so each fires once in a run) are stored first, due in a
day; once the workers run (they serve an empty queue, so they only schedule), every next
fire time is moved to T, a whole second about two seconds ahead, in one transaction.
Figures come from the store's own ledger
(fired_at is the store's clock when the firing transaction began): first, median and
last fire after T; "all fired" is when the script, polling every 20 ms, first saw every
schedule moved past T (committed), on the store's clock; fires per second over that.
"None twice" checks that the ledger and the jobs both hold exactly N entries.
Not a test: a figure over 2 s is printed, not failed.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crawlq.jobs import JobSpec  # noqa: E402
from crawlq.periodic import Periodic  # noqa: E402
from crawlq.stores import open_store  # noqa: E402
from crawlq.stores.base import JobFilter  # noqa: E402
from crawlq.stores.periodic import periodic_store  # noqa: E402

LEAD = 2.0
"""Seconds between moving the schedules' next fire time to T and T."""


def store_url(kind: str, directory: Path) -> str:
    from tests import servers

    if kind == "postgres":
        return f"{servers.postgres().url}?schema={servers.isolated_name(directory, 'bp_')}"
    return f"{servers.redis().url}?prefix={servers.isolated_name(directory, 'bp')}"


def due_at(kind: str, url: str, names: list[str], fire_at: float) -> None:
    """Move every schedule's next fire time to ``fire_at``, at once, behind the store's
    back (a bench shortcut: storing 10,000 schedules takes longer than the lead)."""
    if kind == "postgres":
        import psycopg

        base, _, query = url.partition("?")
        schema = query.removeprefix("schema=")
        with psycopg.connect(base) as conn:
            conn.execute(f'UPDATE "{schema}".crawlq_periodic SET next_fire = %s', [fire_at])
        return
    import redis

    from crawlq.stores.redis import keys

    base, _, query = url.partition("?")
    prefix = query.removeprefix("prefix=")
    client = redis.Redis.from_url(base)
    with client.pipeline(transaction=True) as pipe:
        for name in names:
            pipe.hset(keys.key("periodic", prefix, schedule=name), "next_fire", repr(fire_at))
        pipe.zadd(keys.key("periodic_due", prefix), dict.fromkeys(names, fire_at))
        pipe.execute()
    client.close()


def remaining(kind: str, url: str, fire_at: float) -> int:
    """How many schedules have not moved past ``fire_at`` yet (committed state)."""
    base, _, query = url.partition("?")
    if kind == "postgres":
        import psycopg

        schema = query.removeprefix("schema=")
        with psycopg.connect(base) as conn:
            sql = f'SELECT count(*) FROM "{schema}".crawlq_periodic WHERE next_fire <= %s'
            row = conn.execute(sql, [fire_at]).fetchone()
            return int(row[0]) if row else 0
    import redis

    from crawlq.stores.redis import keys

    client = redis.Redis.from_url(base)
    try:
        due = keys.key("periodic_due", query.removeprefix("prefix="))
        return int(client.zcount(due, "-inf", fire_at))
    finally:
        client.close()


def one(kind: str, n: int, workers: int) -> dict[str, float]:
    directory = Path(tempfile.mkdtemp(prefix="bench-periodic-"))
    url = store_url(kind, directory)
    store = open_store(url)
    ps = periodic_store(store)
    spec = JobSpec(queue="q", task="t")
    for i in range(n):
        periodic = Periodic(name=f"s{i:05d}", spec=spec, every=3600)
        ps.periodic_put(periodic, next_fire=store.now() + 86400)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    env["CRAWLQ_STORE"] = url
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "crawlq", "worker", "--queue", "idle"],
            cwd=directory,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(directory / f"w{i}.err", "w"),
        )
        for i in range(workers)
    ]
    try:
        deadline = time.monotonic() + 120
        while sum(w.state == "alive" for w in store.worker_list()) < workers:
            if time.monotonic() > deadline:
                raise SystemExit(f"the workers did not start: see {directory}/w*.err")
            time.sleep(0.1)
        time.sleep(1.0)  # their scheduler threads have looked once
        fire_at = math.ceil(store.now() + LEAD)
        due_at(kind, url, [f"s{i:05d}" for i in range(n)], fire_at)
        while store.now() < fire_at - 0.2:
            time.sleep(0.05)
        deadline = time.monotonic() + 60
        while remaining(kind, url, fire_at) and time.monotonic() < deadline:
            time.sleep(0.02)
        done = store.now() - fire_at
        records = [r for i in range(n) for r in ps.periodic_fires(f"s{i:05d}")]
        jobs = store.job_list(JobFilter(queue="q", limit=10 * n))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(60)
        store.close()
    after = sorted(r.fired_at - fire_at for r in records)
    once = len(records) == n and len(jobs) == n and len({r.job_id for r in records}) == n
    return {
        "fired": len(records),
        "jobs": len(jobs),
        "once": float(once),
        "first": after[0],
        "median": statistics.median(after),
        "last": after[-1],
        "done": done,
        "rate": n / done,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="schedules due in one second")
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--store", choices=["postgres", "redis"], default="postgres")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    print(f"# {args.n:,} schedules due at T, {args.workers} workers, {args.store}")
    print(
        "| run | fired | jobs | none twice | first after T | median | last | all fired | fires/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in range(1, args.runs + 1):
        r = one(args.store, args.n, args.workers)
        print(
            f"| {run} | {r['fired']:,.0f} | {r['jobs']:,.0f} | {'yes' if r['once'] else 'NO'} "
            f"| {r['first']:.3f} s | {r['median']:.3f} s | {r['last']:.3f} s "
            f"| {r['done']:.3f} s | {r['rate']:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
