"""How many simulated fetches the asyncio runtime keeps in flight in one process.

    .venv/bin/python bench/bench_asyncio.py                 # SQLite, 20,000 jobs of 50 ms
    .venv/bin/python bench/bench_asyncio.py --store redis --concurrency 1000 -n 20000

N jobs that each ``await asyncio.sleep(SLEEP)`` are queued, then one ``crawlq worker
--runtime asyncio --concurrency C --burst`` process drains them. Every job writes its
start and end time to a ledger file; the report gives the peak and the median number of
jobs in flight (from the ledger, over the steady part of the run), jobs/s, and the
worker's peak resident memory. PostgreSQL and Redis are private servers
(tests/servers.py). Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "bench" / "peers")]

from common import LEDGER_CODE, Ledger, Workers  # noqa: E402

TASKS = (
    '''\
"""Tasks of bench/bench_asyncio.py."""

import asyncio
import os
import time

import crawlq
'''
    + LEDGER_CODE
    + """

app = crawlq.App(os.environ["CRAWLQ_BENCH_STORE"])


@app.task(name="fetch")
async def fetch(ctx, i, seconds):
    start = time.time()
    await asyncio.sleep(seconds)
    ledger_write(f"{start} {time.time()}")
"""
)


def in_flight(spans: list[tuple[float, float]]) -> tuple[int, float]:
    """Peak and median jobs in flight, sampled every 10 ms over the middle 80% of the run."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    t0, t1 = events[0][0], events[-1][0]
    lo, hi = t0 + 0.1 * (t1 - t0), t0 + 0.9 * (t1 - t0)
    samples, level, peak, k = [], 0, 0, 0
    t = lo
    for at, delta in events:
        while t < at and t <= hi:
            samples.append(level)
            t += 0.01
        level += delta
        peak = max(peak, level)
        k += 1
    return peak, statistics.median(samples) if samples else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres", "redis"), default="sqlite")
    parser.add_argument("-n", type=int, default=20_000, help="jobs (20,000)")
    parser.add_argument("--concurrency", type=int, default=1000, help="slots (1,000)")
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds per job (0.05)")
    args = parser.parse_args()

    import crawlq
    from tests import servers

    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-asyncio-"))
    server = None
    if args.store == "sqlite":
        url = f"sqlite:///{tmp / 'jobs.db'}"
    elif args.store == "postgres":
        server = servers.PrivatePostgres()
        url = f"{server.url}?schema=bench_asyncio"
    else:
        server = servers.PrivateRedis()
        url = f"{server.url}?prefix=bench_asyncio"
    try:
        (tmp / "asynctasks.py").write_text(TASKS)
        sys.path.insert(0, str(tmp))
        app = crawlq.App(url)
        fetch = app.task(name="fetch")(lambda ctx, i, s: None)
        for start in range(0, args.n, 500):
            app.schedule_many(
                fetch.spec(i, args.sleep) for i in range(start, min(args.n, start + 500))
            )
        ledger = Ledger(tmp / "ledger.txt")
        workers = Workers(tmp, "asyncio")
        cmd = [sys.executable, "-m", "crawlq", "worker", "--app", "asynctasks:app"]
        cmd += ["--store", url, "--runtime", "asyncio", "--concurrency", str(args.concurrency)]
        cmd += ["--burst", "--log-level", "warning"]
        peak_rss = 0
        t0 = time.perf_counter()
        workers.start(cmd, {**ledger.env, "CRAWLQ_BENCH_STORE": url})
        while not workers.all_exited():
            peak_rss = max(peak_rss, workers.rss())
            time.sleep(0.1)
        elapsed = time.perf_counter() - t0
        if workers.returncodes() != [0] or ledger.count() != args.n:
            print(workers.tail(), file=sys.stderr)
            raise SystemExit(f"worker exit {workers.returncodes()}, {ledger.count()} jobs ran")
        spans = [tuple(map(float, line.split())) for line in ledger.lines()]
        peak, median = in_flight(spans)  # type: ignore[arg-type]
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        print(f"store {args.store}, {args.n:,} jobs of {args.sleep * 1000:g} ms, "
              f"--concurrency {args.concurrency}")  # fmt: skip
        print(f"in flight: peak {peak:,}, median {median:,.0f}")
        print(f"jobs/s: {args.n / (last - first):,.0f} (first start to last end); "
              f"{args.n / elapsed:,.0f} with worker start-up and exit")  # fmt: skip
        print(f"worker peak RSS: {peak_rss / 2**20:,.0f} MiB")
        app.close()
    finally:
        if server is not None:
            server.close()
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
