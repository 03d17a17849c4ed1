"""Three Scrapyd servers with max_proc = 2: crawlq's shared queue (crawlq.scrapyd on one
store) against Scrapyd's default per-server queues with the same jobs scheduled
round-robin.

    .venv/bin/python bench/bench_scrapyd.py                 # 200 jobs, PostgreSQL store
    .venv/bin/python bench/bench_scrapyd.py --jobs 60 --store redis

Not a test: it asserts nothing about speed. Each configuration starts its own servers
(tests/scrapyd_pool.py: real ``scrapyd`` processes, the ``ledgerbot`` egg deployed with
addversion.json) and measures:

- wall: from the first schedule.json to the last spider's end, for ``--jobs`` short jobs
  (the spider writes one ledger line and exits; ``--sleep`` adds seconds), against the
  ideal ``ceil(jobs / slots) x job time``, where the job time is the median run time of a
  spider process in the same run (listjobs.json: end_time - start_time);
- latency: on idle servers, one job at a time (``--probes`` of them), the time from the
  schedule.json answer to the spider's start (its ledger line), p50 and p99.

The default queues poll every ``poll_interval`` = 5 s (Scrapyd's default); crawlq's
servers use ``--crawlq-poll`` (0.2 s) and also poll whenever a slot frees up.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests import servers  # noqa: E402
from tests.scrapyd_pool import Pool, build_egg, idle  # noqa: E402

SERVERS = 3
MAX_PROC = 2


def store_url(kind: str, root: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{root / 'jobs.db'}"
    if kind == "postgres":
        return f"{servers.postgres().url}?schema={servers.isolated_name(root, 'b_')}"
    return f"{servers.redis().url}?prefix={servers.isolated_name(root, 'b')}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def run(name: str, pool: Pool, jobs: int, sleep: float, probes: int) -> dict[str, float]:
    pool.start()
    pool.deploy(EGG, "bench")
    ledger = str(pool.ledger)
    # latency on idle servers, one job at a time
    latencies = []
    for i in range(probes):
        before = len(pool.lines())
        server = pool.servers[i % SERVERS]
        server.schedule("bench", ledger=ledger, _version="1.0")
        answered = time.time()
        lines = pool.wait_for(before + 1, 60)
        latencies.append(lines[-1]["t"] - answered)
        deadline = time.monotonic() + 60
        while not all(idle(s) for s in pool.servers) and time.monotonic() < deadline:
            time.sleep(0.05)
    # the batch, round-robin over the servers
    base = len(pool.lines())
    start = time.time()
    for i in range(jobs):
        pool.servers[i % SERVERS].schedule("bench", ledger=ledger, sleep=sleep, _version="1.0")
    scheduled = time.time() - start
    pool.wait_for(base + jobs, 60 + jobs * 10)
    while not all(idle(s) for s in pool.servers):
        time.sleep(0.05)
    wall = time.time() - start
    runs = []
    seen = set()
    for server in pool.servers:
        for job in server.call("listjobs.json", project="bench")["finished"]:
            if job["id"] in seen:
                continue
            seen.add(job["id"])
            began = datetime.fromisoformat(job["start_time"])
            ended = datetime.fromisoformat(job["end_time"])
            runs.append((ended - began).total_seconds())
    pool.stop()
    job_time = statistics.median(runs)
    ideal = math.ceil(jobs / (SERVERS * MAX_PROC)) * job_time
    nodes = {line["node"] for line in pool.lines()[base:]}
    result = {
        "wall": wall,
        "ideal": ideal,
        "ratio": wall / ideal,
        "job_time": job_time,
        "scheduling": scheduled,
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "servers_used": len(nodes),
    }
    print(f"{name}: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()), flush=True)
    return result


def main() -> None:
    global EGG
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--store", choices=("sqlite", "postgres", "redis"), default="postgres")
    parser.add_argument("--crawlq-poll", type=float, default=0.2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-scrapyd-"))
    EGG = build_egg(root / "project")
    options = {"max_proc": MAX_PROC, "lease": 30.0}
    crawlq_pool = Pool(
        root / "crawlq",
        SERVERS,
        store=store_url(args.store, root),
        poll_interval=args.crawlq_poll,
        **options,
    )
    default_pool = Pool(root / "default", SERVERS, store=None, poll_interval=5.0, **options)
    for pool in (crawlq_pool, default_pool):
        for server in pool.servers:
            server.options["finished_to_keep"] = str(args.jobs + args.probes + 10)
    try:
        shape = (args.jobs, args.sleep, args.probes)
        mine = run(f"crawlq.scrapyd ({args.store})", crawlq_pool, *shape)
        theirs = run("Scrapyd default queues", default_pool, *shape)
    finally:
        crawlq_pool.stop()
        default_pool.stop()
    print()
    print("| | wall (s) | ideal (s) | wall / ideal | job time (s) | latency p50 (s) | p99 (s) |")
    print("|---|---|---|---|---|---|---|")
    for name, r in ((f"crawlq.scrapyd, {args.store}", mine), ("Scrapyd default", theirs)):
        print(
            f"| {name} | {r['wall']:.1f} | {r['ideal']:.1f} | {r['ratio']:.2f} | "
            f"{r['job_time']:.2f} | {r['p50']:.2f} | {r['p99']:.2f} |"
        )


EGG = b""

if __name__ == "__main__":
    main()
