"""CPU per fetch of the crawler's ``Fetcher`` against a bare asyncio client, on
bench_crawl.py's site: the fetch path's own cost, outside a crawl.

    .venv/bin/python bench/profile_fetch.py              # 2,000 pages, 3 rounds
    .venv/bin/python bench/profile_fetch.py -n 4000 --rounds 5

Each round fetches every page of the site three ways, one after another in this
process, and prints the thread CPU per page of each:

- ``Fetcher.fetch`` one page at a time (``C=1``), then from 4 tasks at once (``C=4``),
  through one keep-alive connection per task, as a crawl does;
- a bare client: one ``asyncio.open_connection``, a GET written as bytes, the head read
  with ``readuntil`` and the body with ``readexactly``; the floor that asyncio's streams
  set.

The site server runs in a process of its own. Not a test: it asserts only that every
fetch got its page.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import bench_crawl  # bench/ is sys.path[0] when this file is run as a script

from crawlq.crawler.addresses import AddressPolicy
from crawlq.crawler.fetch import Fetcher, FetchSettings


async def fetcher_round(base: str, paths: list[str], concurrency: int) -> float:
    """Thread CPU (µs) per page of ``Fetcher.fetch`` over ``paths``."""
    async with Fetcher(FetchSettings(policy=AddressPolicy(allow_private=True))) as fetcher:
        await fetcher.fetch(base + "/")  # connections and imports warmed
        queue = list(reversed(paths))

        async def fetch_some() -> None:
            while queue:
                result = await fetcher.fetch(base + queue.pop())
                assert result.status == 200, result.error

        started = time.thread_time()
        await asyncio.gather(*(fetch_some() for _ in range(concurrency)))
        return (time.thread_time() - started) / len(paths) * 1e6


async def bare_round(port: int, paths: list[str]) -> float:
    """Thread CPU (µs) per page of a bare keep-alive client over ``paths``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.thread_time()
    for path in paths:
        writer.write(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: bench\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
    spent = (time.thread_time() - started) / len(paths) * 1e6
    writer.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="pages in the site (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="crawlq-fetch-"))
    bench_crawl.build_site(root, args.n)
    server = bench_crawl.Server(root)
    base = server.url.rstrip("/")
    paths = [bench_crawl.page_path(i) for i in range(args.n)]
    try:
        print("| round | Fetcher, C=1 | Fetcher, C=4 | bare client |")
        print("|---:|---:|---:|---:|")
        for round_ in range(1, args.rounds + 1):
            one = asyncio.run(fetcher_round(base, paths, 1))
            four = asyncio.run(fetcher_round(base, paths, 4))
            bare = asyncio.run(bare_round(server.port, paths))
            print(f"| {round_} | {one:.0f} µs | {four:.0f} µs | {bare:.0f} µs |", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
