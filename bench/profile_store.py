"""The store's side of a crawl, without fetching: the store calls a one-process crawl
makes for bench_crawl.py's site, made from one thread, and the CPU they cost per page.

    .venv/bin/python bench/profile_store.py                  # 2,000 pages, C=4, SQLite
    .venv/bin/python bench/profile_store.py --statements     # and each statement's share
    .venv/bin/python bench/profile_store.py -c 16 --ends 8
    .venv/bin/python bench/profile_store.py --store redis://127.0.0.1:6379/9

A crawl's worker, with every slot busy on one host limited to C, hands each page's end
to the store with the next claim (``job_complete_claim``): the completion with the
page's links as children (each with the crawl's seen-set fingerprint and the host's
limit key) and the page's record, then a claim of as many jobs as ended. This script
makes those calls, in that order, for a link graph like bench_crawl.py's site's (each
page links to its ``FANOUT`` tree children and seeded random pages, ``LINKS`` in all),
ending ``--ends`` pages a call (2 by default: what a crawl's worker ends a call at C=4
on loopback; about 8 at C=16). There is no HTTP, no parsing and no asyncio thread, so
the figures are the store's alone (and the building of the calls' arguments, which a
crawl does on its asyncio thread).

It prints the thread CPU and wall time per page. With ``--statements`` (SQLite) it also
prints each statement's calls and CPU per page, by query name, from profile_crawl.py's
timer, which adds its own cost to the figures above. The thread CPU varies from run to
run with what else the machine does; an instruction count does not. ``--pages`` (N) and
2N under callgrind give the instructions per page as their difference over N, start-up
and imports left out::

    for n in 500 1000; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/profile_store.py --pages $n 2>&1 | grep Collected; done

Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_crawl  # bench/ is sys.path[0] when this file is run as a script
import profile_crawl

import crawlq
from crawlq.crawler.records import page_record, record_text
from crawlq.crawler.tasks import PAGE_QUEUE, install
from crawlq.fingerprint import fingerprint
from crawlq.jobs import Job
from crawlq.limits import Limits
from crawlq.stores.base import ClaimParams, Completion

ORIGIN = "http://127.0.0.1:8000"
HOST = "127.0.0.1:8000"


def link_graph(n: int, seed: int = 7) -> list[list[int]]:
    """Each page's links: its ``FANOUT`` tree children, then seeded random pages
    (``LINKS`` per page)."""
    rng = random.Random(seed)
    graph = []
    for i in range(n):
        links = [c for c in range(bench_crawl.FANOUT * i + 1, bench_crawl.FANOUT * (i + 1) + 1)]
        links = [c for c in links if c < n]
        links += [rng.randrange(n) for _ in range(bench_crawl.LINKS - len(links))]
        graph.append(links)
    return graph


def crawl(app: crawlq.App, pages: int, concurrency: int, ends: int) -> int:
    """Crawl the graph's pages through the store calls alone; how many pages ended."""
    graph = link_graph(pages)
    task = install(app)
    index = {ORIGIN + bench_crawl.page_path(i): i for i in range(pages)}

    def url(i: int) -> str:
        return ORIGIN + bench_crawl.page_path(i)

    def spec(i: int, depth: int, referrer: str | None, crawl_id: int | None) -> Any:
        return task.from_template(
            args=[url(i), depth, referrer], priority=-depth, crawl=crawl_id,
            limit_key=HOST, fingerprint=fingerprint(url(i)),
        )  # fmt: skip

    info = app.crawl("profile", [spec(0, 0, None, None)], limits=Limits(max_running=concurrency))
    store = app.store

    def claim(limit: int) -> list[Job]:
        return store.job_claim(ClaimParams(queues=[PAGE_QUEUE], worker_id="w", limit=limit))

    running = collections.deque(claim(concurrency))
    ended = 0
    while running:
        ending = [running.popleft() for _ in range(min(ends, len(running)))]
        completions = []
        for job in ending:
            page, depth, referrer = job.args[0], int(job.args[1]), job.args[2]
            assert isinstance(page, str) and (referrer is None or isinstance(referrer, str))
            children = [spec(j, depth + 1, page, info.id) for j in graph[index[page]]]
            found = page_record(page, depth=depth, referrer=referrer, links_found=len(children))
            kept = (info.id, fingerprint(page), record_text(found))
            completions.append(Completion(lease=job.lease, children=children, records=[kept]))
        room = concurrency - len(running)  # the slots free once these pages end
        params = ClaimParams(queues=[PAGE_QUEUE], worker_id="w", limit=room)
        _, claimed = store.job_complete_claim(completions, params)
        ended += len(ending)
        running.extend(claimed)
    return ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", "-n", type=int, default=2000, help="pages (2,000)")
    parser.add_argument("-c", "--concurrency", type=int, default=4, help="host limit (4)")
    parser.add_argument("--ends", type=int, default=2, help="pages ended a call (2)")
    parser.add_argument("--store", help="a store URL (default: SQLite in a temp dir)")
    parser.add_argument(
        "--statements", action="store_true", help="each SQL statement's calls and CPU"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clocks = profile_crawl.Clocks()
        if args.statements and args.store is None:
            profile_crawl.time_statements(clocks)
        app = crawlq.App(args.store or f"sqlite:///{Path(tmp) / 'crawl.db'}")
        try:
            app.store.job_claim(ClaimParams(queues=[PAGE_QUEUE], worker_id="w"))  # migrated
            clocks.cpu.clear()
            clocks.calls.clear()
            cpu, wall = time.thread_time(), time.perf_counter()
            ended = crawl(app, args.pages, args.concurrency, args.ends)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        finally:
            app.close()
    per_page = f"thread CPU {cpu / ended * 1e6:,.0f} us, wall {wall / ended * 1e6:,.0f} us"
    print(f"{ended:,} pages, C={args.concurrency}, {args.ends} ended a call: {per_page} a page")
    if clocks.calls:
        print("\n" + clocks.table("SQL statement (execute)", ended, top=25))


if __name__ == "__main__":
    main()
