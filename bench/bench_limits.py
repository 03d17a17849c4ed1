"""Claim rate of a deep queue whose keys are mostly blocked, against the same queue with
no key blocked (issue 6's goal: at least 80 %), on SQLite, PostgreSQL and Redis.

    .venv/bin/python bench/bench_limits.py                 # 1,000,000 jobs, 10,000 keys
    .venv/bin/python bench/bench_limits.py --jobs 100000   # quicker

For each store and each case, a fresh store gets ``--jobs`` pending jobs, each given one
of ``--keys`` limit keys at random (seeded; no cap, no interval), as a crawl frontier
mixes hosts; then ``--timed`` jobs are claimed
(batches of 10, as a worker does) and completed, one loop, and the rate is reported:

- ``none blocked``: every key may start;
- ``99% blocked``: all but 1 % of the keys are blocked for an hour before the timing
  (their jobs wait behind the index; a claim must not look at them);
- ``no keys``: the same jobs without a limit key, for the cost of keys themselves.

Not a test: it asserts nothing. PostgreSQL and Redis are private servers started from
the installed binaries (tests/servers.py).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from crawlq.jobs import JobSpec  # noqa: E402
from crawlq.stores import Store, open_store  # noqa: E402
from crawlq.stores.base import ClaimParams, Completion  # noqa: E402

BATCH = 10
FILL_BATCH = 5_000
CASES = ("none blocked", "99% blocked", "no keys")


def open_fresh(kind: str, tmp: Path, name: str) -> Store:
    if kind == "sqlite":
        return open_store(f"sqlite:///{tmp / name}.db")
    from tests import servers

    if kind == "postgres":
        return open_store(f"{servers.postgres().url}?schema={name.replace('-', '_')}")
    return open_store(f"{servers.redis().url}?prefix={name}")


def fill(store: Store, jobs: int, keys: int, keyed: bool) -> float:
    """Round-robin keys would put the first job of every key in consecutive rows: the
    unblocked case would claim neighbours (a few pages per commit on SQLite) and the
    blocked one rows far apart, a page-locality effect, not the cost of blocked keys."""
    rng = random.Random(7)
    key_of = [rng.randrange(keys) for _ in range(jobs)]
    started = time.perf_counter()
    for first in range(0, jobs, FILL_BATCH):
        store.job_schedule(
            [
                JobSpec(
                    queue="q",
                    task="noop",
                    args=[i],
                    limit_key=f"host{key_of[i]}.test" if keyed else None,
                )
                for i in range(first, min(first + FILL_BATCH, jobs))
            ]
        )
    return time.perf_counter() - started


def claim_rate(store: Store, timed: int) -> float:
    done = 0
    started = time.perf_counter()
    while done < timed:
        jobs = store.job_claim(ClaimParams(queues=["q"], worker_id="bench", limit=BATCH))
        if not jobs:
            raise RuntimeError(f"the queue ran dry after {done} jobs")
        store.job_complete([Completion(lease=j.lease) for j in jobs])
        done += len(jobs)
    return done / (time.perf_counter() - started)


def run(kind: str, tmp: Path, jobs: int, keys: int, timed: int) -> dict[str, float]:
    rates: dict[str, float] = {}
    for n, case in enumerate(CASES):
        store = open_fresh(kind, tmp, f"bl{n}{int(time.time())}")
        try:
            took = fill(store, jobs, keys, keyed=case != "no keys")
            if case == "99% blocked":
                until = store.now() + 3600
                for k in range(keys):
                    if k % 100:  # 99 keys in 100
                        store.limit_block(f"host{k}.test", until)
            rates[case] = claim_rate(store, timed)
            print(
                f"  {kind:8} {case:13} filled {jobs:,} in {took:.0f} s; "
                f"claim+complete {rates[case]:,.0f} jobs/s",
                flush=True,
            )
        finally:
            store.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--timed", type=int, default=5_000, help="jobs claimed while timed")
    parser.add_argument("--stores", default="sqlite,postgres,redis")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.stores.split(","):
            results[kind] = run(kind, Path(tmp), args.jobs, args.keys, args.timed)
    print()
    print(f"| store | {' | '.join(CASES)} | 99% blocked / none blocked |")
    print("|---|" + "---:|" * (len(CASES) + 1))
    for kind, rates in results.items():
        ratio = rates["99% blocked"] / rates["none blocked"]
        cells = " | ".join(f"{rates[c]:,.0f}" for c in CASES)
        print(f"| {kind} | {cells} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
