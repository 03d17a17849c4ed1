"""crawlq web on a big store: every API route's p99 and /metrics' p99, on SQLite and
PostgreSQL, and a worker's drain rate with and without the web process polled every second.

    .venv/bin/python bench/bench_web.py                      # 1,000,000 jobs (the goal)
    .venv/bin/python bench/bench_web.py --jobs 200000        # a smaller store
    .venv/bin/python bench/bench_web.py --quick              # 20,000 jobs, smoke run

The store: JOBS jobs of one task over 4 queues, each with one of KEYS limit keys (no
limit set, so none is held back) and one of CRAWLS crawls, scheduled in batches of 5,000;
1% of them are dead (spread over the ids), 1% done, the rest pending. One of every 100
keys is blocked. The web app (``crawlq.web.create_app``) is served by uvicorn in a
subprocess; each route is asked REQUESTS times, one request at a time, from this process
(httpx, keep-alive), after 5 warm-up requests. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

import crawlq  # noqa: E402
from crawlq.jobs import JobSpec  # noqa: E402
from crawlq.stores.base import ClaimParams, Completion, Failure  # noqa: E402

BATCH = 5000
QUEUES = ("pages", "parse", "images", "feeds")

SERVE = textwrap.dedent(
    """
    import sys, uvicorn
    from crawlq.web import create_app
    uvicorn.run(create_app(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]),
                log_level="warning", access_log=False)
    """
)
TASKS = textwrap.dedent(
    """
    import crawlq, os
    app = crawlq.App(os.environ["BENCH_STORE"])

    @app.task(name="bench.noop", queue="drain")
    def noop(ctx, i):
        return None
    """
)


def build(url: str, jobs: int, keys: int, crawls: int) -> dict[str, Any]:
    """Fill the store; returns a few ids and names the routes ask for."""
    app = crawlq.App(url)
    store = app.store
    started = time.perf_counter()
    crawl_ids = []
    for c in range(crawls):
        hold = JobSpec(queue="hold", task="bench.hold", delay=30 * 86400)  # keeps it open
        crawl_ids.append(store.crawl_create(crawlq.CrawlSpec(name=f"crawl-{c}"), [hold]).id)
    made = 0
    while made < jobs:
        n = min(BATCH, jobs - made)
        specs = [
            JobSpec(
                queue=QUEUES[i % len(QUEUES)],
                task="bench.fetch",
                args=[f"https://host{i % keys}.example/{i}"],
                limit_key=f"host{i % keys}.example",
                crawl=crawl_ids[i % crawls],
            )
            for i in range(made, made + n)
        ]
        store.job_schedule(specs)
        made += n
        # 1% dead and 1% done, spread over the ids: claim 2% of each batch
        claimed = store.job_claim(ClaimParams(queues=QUEUES, worker_id="bench", limit=n // 50))
        half = len(claimed) // 2
        store.job_fail(
            [
                Failure(lease=j.lease, error="Traceback...\nValueError: no title", retry_delay=None)
                for j in claimed[:half]
            ]
        )
        store.job_complete([Completion(lease=j.lease) for j in claimed[half:]])
        if made % 100_000 == 0:
            rate = made / (time.perf_counter() - started)
            print(f"#   {made:,} jobs ({rate:,.0f}/s)", file=sys.stderr, flush=True)
    now = store.now()
    for k in range(0, keys, 100):
        store.limit_block(f"host{k}.example", now + 3600)
    for w in range(8):
        store.worker_register(
            crawlq.WorkerInfo(
                id=f"w{w}", host="h", pid=w, queues=QUEUES, runtime="thread", concurrency=8
            )
        )
    took = time.perf_counter() - started
    print(f"# built {jobs:,} jobs in {took:.0f} s", file=sys.stderr, flush=True)
    first = store.job_list(crawlq.stores.base.JobFilter(limit=1))[0].id
    app.close()
    return {"job": first + jobs // 2, "crawl": crawl_ids[len(crawl_ids) // 2], "build_s": took}


def routes(made: dict[str, Any], keys: int) -> list[str]:
    key = f"host{keys // 2 + 1}.example"
    return [
        "/api/stats",
        "/api/overview",
        "/api/queues",
        "/api/jobs",
        "/api/jobs?queue=parse&state=pending",
        "/api/jobs?state=dead",
        f"/api/jobs?crawl={made['crawl']}",
        f"/api/jobs?limit_key={key}",
        f"/api/jobs?key=https://x/{made['job']}",
        f"/api/jobs?after_id={made['job']}",
        f"/api/jobs/{made['job']}",
        "/api/dead",
        "/api/failures",
        "/api/crawls",
        f"/api/crawls/{made['crawl']}",
        "/api/limits",
        f"/api/limits/{key}",
        "/api/workers",
        "/metrics",
    ]


def serve(url: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", SERVE, url, str(port)])
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def measure(port: int, paths: list[str], requests: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        for path in paths:
            for _ in range(5):
                client.get(path)
            times = []
            for _ in range(requests):
                t = time.perf_counter()
                r = client.get(path)
                times.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, (path, r.text[:200])
            out[path] = (statistics.median(times), p99(times))
            print(f"#   {path}: p50 {out[path][0]:.1f} ms, p99 {out[path][1]:.1f} ms",
                  file=sys.stderr, flush=True)  # fmt: skip
    return out


def drain_rate(url: str, n: int, polled: bool, port: int, tmp: Path) -> float:
    """Jobs/s of one burst worker (8 threads) draining n no-op jobs, with the web
    process serving and polled every second (overview, jobs, /metrics) or not running."""
    env = {**os.environ, "BENCH_STORE": url, "PYTHONPATH": f"{tmp}{os.pathsep}{REPO}"}
    (tmp / "webbench_tasks.py").write_text(TASKS)
    app = crawlq.App(url)
    app.store.job_schedule([JobSpec(queue="drain", task="bench.noop", args=[i]) for i in range(n)])
    app.close()
    stop = threading.Event()
    web = serve(url, port) if polled else None

    def poll() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            while not stop.wait(1.0):
                for path in ("/api/overview", "/api/jobs?queue=drain", "/metrics"):
                    client.get(path)

    poller = threading.Thread(target=poll) if polled else None
    if poller:
        poller.start()
    try:
        cmd = [sys.executable, "-m", "crawlq", "worker", "--app", "webbench_tasks:app",
               "--burst", "--concurrency", "8"]  # fmt: skip
        started = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, cwd=tmp, stderr=subprocess.DEVNULL)
        took = time.perf_counter() - started
    finally:
        stop.set()
        if poller:
            poller.join()
        if web:
            web.send_signal(signal.SIGINT)
            web.wait(30)
    return n / took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--crawls", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--drain-jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3, help="drain runs with and without web")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.keys, args.crawls = 20_000, 1000, 100
        args.requests, args.drain_jobs, args.runs = 50, 3000, 1
    from tests import servers

    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-web-"))
    pg = None
    results: dict[str, Any] = {}
    try:
        for kind in args.stores.split(","):
            if kind == "sqlite":
                url = f"sqlite:///{tmp / 'big.db'}"
                drain_url = lambda i: f"sqlite:///{tmp / f'drain{i}.db'}"  # noqa: E731
            else:
                pg = pg or servers.PrivatePostgres()
                url = f"{pg.url}?schema=big"
                base = pg.url
                drain_url = lambda i, base=base: f"{base}?schema=drain{i}"  # noqa: E731
            print(f"# {kind}: building", file=sys.stderr, flush=True)
            made = build(url, args.jobs, args.keys, args.crawls)
            port = servers.free_port()
            web = serve(url, port)
            try:
                timings = measure(port, routes(made, args.keys), args.requests)
            finally:
                web.send_signal(signal.SIGINT)
                web.wait(30)
            rates: dict[bool, list[float]] = {False: [], True: []}
            for run in range(args.runs):
                for polled in (False, True):  # interleaved
                    rate = drain_rate(
                        drain_url(f"{run}{int(polled)}"), args.drain_jobs, polled,
                        servers.free_port(), tmp,
                    )  # fmt: skip
                    rates[polled].append(rate)
                    print(f"#   drain polled={polled}: {rate:,.0f} jobs/s", file=sys.stderr,
                          flush=True)  # fmt: skip
            results[kind] = {"made": made, "timings": timings, "rates": rates}
    finally:
        if pg is not None:
            pg.close()
    report(args, results)
    return 0


def report(args: argparse.Namespace, results: dict[str, Any]) -> None:
    kinds = list(results)
    print(f"\n{args.jobs:,} jobs, {args.keys:,} limit keys, {args.crawls:,} crawls; "
          f"{args.requests} requests per route, one at a time\n")  # fmt: skip
    head = " | ".join(f"{k} p50 / p99 (ms)" for k in kinds)
    print(f"| route | {head} |\n|---|" + "---|" * len(kinds))
    for path in results[kinds[0]]["timings"]:
        cells = " | ".join("{:.1f} / {:.1f}".format(*results[k]["timings"][path]) for k in kinds)
        print(f"| `{path}` | {cells} |")
    print()
    for k in kinds:
        r = results[k]["rates"]
        off, on = statistics.median(r[False]), statistics.median(r[True])
        print(f"- {k}: built in {results[k]['made']['build_s']:.0f} s; drain of "
              f"{args.drain_jobs:,} jobs {off:,.0f} jobs/s without web, {on:,.0f} jobs/s "
              f"polled every second (drain rate {(on / off - 1) * 100:+.1f}% with web; median of "
              f"{len(r[False])})")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
