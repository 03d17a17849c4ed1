"""One worker's burst drain with several ``--prefetch`` settings, alternated, per store.

    .venv/bin/python bench/bench_prefetch.py                       # 0 and auto, 2 rounds
    .venv/bin/python bench/bench_prefetch.py --prefetch 0,8,24,auto --stores postgres

N no-op jobs (``-n``, default 20,000) queued with ``schedule_many``, then one ``crawlq
worker --burst --concurrency 8 --prefetch P`` drains them: bench_stores.py's drain (the
same code as its figures and the peers table's drain row), on SQLite and on a private
PostgreSQL and Redis it starts. Prints jobs/s until the store shows all done and until
the worker exited, and the worker's CPU per job (start-up included), for each round and
setting in turn.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_sqlite
import bench_stores

from tests import servers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000, help="jobs per drain (default 20,000)")
    parser.add_argument("--prefetch", default="0,auto", help="settings, comma-separated")
    parser.add_argument("--stores", default="sqlite,postgres,redis")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every setting")
    args = parser.parse_args()
    stores = args.stores.split(",")
    settings = args.prefetch.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-prefetch-"))
    base: dict[str, str] = {"sqlite": ""}
    started: list[Any] = []
    try:
        if "postgres" in stores:
            started.append(servers.PrivatePostgres())
            base["postgres"] = started[-1].url
        if "redis" in stores:
            started.append(servers.PrivateRedis())
            base["redis"] = started[-1].url
        gate = bench_sqlite.QuietGate(patience=2.0)
        print("| store | round | --prefetch | done jobs/s | exit jobs/s | worker CPU µs/job |")
        print("|---|---:|---|---:|---:|---:|")
        for kind in stores:
            bench = bench_stores.StoreBench(kind, base[kind], tmp / kind, args.n, 0, 50.0, gate)
            if bench.choose_worker() != "cli":
                raise RuntimeError(f"`crawlq worker --burst` failed:\n{bench.worker_log('probe')}")
            for round_ in range(1, args.rounds + 1):
                for setting in settings:
                    bench_sqlite.PREFETCH = setting
                    done, exited, cpu = bench.drain(1)
                    print(
                        f"| {kind} | {round_} | {setting} | {done:,.0f} | {exited:,.0f} | "
                        f"{cpu:.0f} |",
                        flush=True,
                    )
    finally:
        for server in started:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
