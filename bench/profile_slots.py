"""Where a crawl slot's time goes: ``crawlq crawl`` in this process on bench_crawl.py's
site with a latency, each page's steps timed from the wall clock.

    .venv/bin/python bench/profile_slots.py                  # 2,000 pages, C=4, 10 ms
    .venv/bin/python bench/profile_slots.py -c 16 --latency 20

A slot of a one-process crawl goes round: the fetch, the rest of the page job, then the
job's end goes to the worker's thread, whose store call records it and claims the next
job (with a host limit of C, the next page cannot be claimed before one of the C running
has ended in the store), and that job goes back to the asyncio thread. At C requests in
flight, pages/s is C over the round's length. The script times each step of it, in
milliseconds of wall clock, by wrapping the functions that begin and end them:

- fetch: ``Fetcher.fetch``, against the server's own wait (``--latency``);
- job: ``AsyncioRuntime._run`` (the fetch and the page's parsing, links and record);
- refill: from a job's end to the next job handed to the runtime (``submit``);
- start: from ``submit`` to the job's start on the loop;
- store call: the worker's ``_claim`` (completions and claim in one transaction).

It prints the mean number of fetches in flight, against C. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_crawl  # bench/ is sys.path[0] when this file is run as a script

from crawlq.cli import cli
from crawlq.crawler import fetch
from crawlq.worker import worker
from crawlq.worker.runtimes import aio

Event = tuple[float, str, object]
events: list[Event] = []  # (perf_counter, what, job id or URL); list.append is atomic


def note(what: str, about: object = None) -> None:
    events.append((time.perf_counter(), what, about))


def wrap_sync(owner: Any, name: str, what: str, about: Callable[..., object]) -> None:
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        note(f"{what}:start", about(*args))
        try:
            return original(*args, **kwargs)
        finally:
            note(f"{what}:end", about(*args))

    setattr(owner, name, wrapper)


def wrap_async(owner: Any, name: str, what: str, about: Callable[..., object]) -> None:
    original = getattr(owner, name)

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        note(f"{what}:start", about(*args))
        try:
            return await original(*args, **kwargs)
        finally:
            note(f"{what}:end", about(*args))

    setattr(owner, name, wrapper)


def spans(what: str) -> list[float]:
    """Durations of ``what`` in ms, its start and end matched by what they are about."""
    begun: dict[object, float] = {}
    out = []
    for t, name, about in events:
        if name == f"{what}:start":
            begun[about] = t
        elif name == f"{what}:end" and about in begun:
            out.append((t - begun.pop(about)) * 1e3)
    return out


def row(name: str, values: list[float]) -> str:
    p90 = statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
    mean, median = statistics.mean(values), statistics.median(values)
    return f"| {name} | {len(values):,} | {mean:.2f} | {median:.2f} | {p90:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000, help="pages in the site (2,000)")
    parser.add_argument("-c", "--concurrency", type=int, default=4, help="and per host (4)")
    parser.add_argument("--latency", type=float, default=10.0, help="ms per response (10)")
    args = parser.parse_args()
    wrap_async(fetch.Fetcher, "fetch", "fetch", lambda self, url, *_: url)
    wrap_async(aio.AsyncioRuntime, "_run", "job", lambda self, job: job.id)
    wrap_sync(aio.AsyncioRuntime, "submit", "submit", lambda self, job: job.id)
    wrap_sync(worker.Worker, "_claim", "store call", lambda *_: None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bench_crawl.build_site(work / "site", args.n)
        server = bench_crawl.Server(work / "site")
        server.control(f"latency/{args.latency:g}")
        argv = bench_crawl.crawl_args(server.url, work, args.concurrency)
        try:
            wall = time.perf_counter()
            cli.main(argv, prog_name="crawlq", standalone_mode=False)
            wall = time.perf_counter() - wall
        finally:
            server.stop()
        pages = sum(1 for _ in (work / "out.jsonl").open())

    in_flight, area, first, last = 0, 0.0, None, None
    for t, name, _ in events:
        if name in ("fetch:start", "fetch:end"):
            if last is not None:
                area += in_flight * (t - last)
            first = t if first is None else first
            in_flight += 1 if name == "fetch:start" else -1
            last = t
    starts = {about: t for t, name, about in events if name == "job:start"}
    submits = sorted(t for t, name, _ in events if name == "submit:start")
    submitted = {about: t for t, name, about in events if name == "submit:start"}
    ends = sorted(t for t, name, _ in events if name == "job:end")
    refill = []
    for end in ends:
        i = bisect.bisect_left(submits, end)
        if i < len(submits):
            refill.append((submits[i] - end) * 1e3)
    start = [(starts[j] - t) * 1e3 for j, t in submitted.items() if j in starts]
    print(
        f"\n{pages:,} pages in {wall:.2f} s: {pages / wall:,.0f} pages/s; C={args.concurrency}, "
        f"{args.latency:g} ms latency"
    )
    if first is not None and last is not None and last > first:
        print(f"fetches in flight: {area / (last - first):.2f} on average (of {args.concurrency})")
    print("\n| step | count | mean ms | median ms | p90 ms |\n|---|---:|---:|---:|---:|")
    for name, values in (
        ("fetch", spans("fetch")),
        ("job", spans("job")),
        ("refill", refill),
        ("start", start),
        ("store call", spans("store call")),
    ):
        if values:
            print(row(name, values))


if __name__ == "__main__":
    sys.exit(main())
