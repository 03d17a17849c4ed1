"""Where a crawl's CPU goes: ``crawlq crawl`` in this process on bench_crawl.py's site,
CPU per page split by thread, by SQL statement and by function, without a profiler.

    .venv/bin/python bench/profile_crawl.py                   # 2,000 pages, C=4
    .venv/bin/python bench/profile_crawl.py -n 4000 -c 16
    .venv/bin/python bench/profile_crawl.py --latency 10     # 10 ms before each response
    .venv/bin/python bench/profile_crawl.py --time crawlq.crawler.links:page_title

The crawl runs as ``crawlq crawl URL --processes 1`` does (its worker in a thread of this
process, the fetches on an asyncio thread), against bench_crawl.py's site server in a
process of its own. Three views, each in microseconds of CPU per page:

- threads: each thread's CPU (``/proc/self/task``, read every 50 ms, so a thread's last
  50 ms may be missed), by thread name; the main thread's share excludes what ran before
  the crawl (building the site).
- SQL: the CPU the store's thread spent in each statement's ``execute`` (its first step;
  rows fetched afterwards are not in it), by query name (``queries.sql``; the padded
  texts ``row_batches`` makes of a query count under its name) or text.
- functions: the calling thread's CPU inside each function named by ``--time`` and the
  default list (synchronous functions only: a coroutine's time is not its caller's).
  A function nested in another counts in both.

Sampling profilers (py-spy) count a thread waiting in a C call that released the GIL as
busy, and cProfile or yappi inflate fine-grained Python several times over; the thread
CPU clock does neither. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_crawl  # bench/ is sys.path[0] when this file is run as a script

from crawlq.cli import cli
from crawlq.stores.sqlite.core import Q

TIMED = (
    "crawlq.stores.sqlite.jobs:SQLiteJobs._job_complete_claim",
    "crawlq.stores.sqlite.jobs:SQLiteJobs._end",
    "crawlq.stores.sqlite.jobs:SQLiteJobs._claim",
    "crawlq.stores.sqlite.scheduling:SQLiteScheduling._schedule_all",
    "crawlq.stores.sqlite.scheduling:SQLiteScheduling._reconcile",
    "crawlq.stores.sqlite.scheduling:SQLiteScheduling._settle",
    "crawlq.stores.sqlite.core:SQLiteCore._keep_records",
    "crawlq.crawler.links:extract_links",
    "crawlq.crawler.links:page_title",
    "crawlq.crawler.records:page_record",
    "crawlq.crawler.pages:_follow",
    "crawlq.crawler.pages:_keep",
    "h11._connection:Connection.next_event",
    "h11._connection:Connection.send",
    "httpx._urls:URL.__init__",
)
"""module:qualified.name of the functions timed by default."""


class Clocks:
    """CPU seconds and calls per key."""

    def __init__(self) -> None:
        self.cpu: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def timed(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cpu[key] += time.thread_time() - start
                self.calls[key] += 1

        return wrapper

    def table(self, title: str, pages: int, top: int, unit: str = "page") -> str:
        lines = [f"| {title} | us/{unit} | calls |", "|---|---:|---:|"]
        for key, cpu in self.cpu.most_common(top):
            lines.append(f"| {key} | {cpu / pages * 1e6:,.1f} | {self.calls[key]:,} |")
        return "\n".join(lines)


def time_functions(clocks: Clocks, names: list[str]) -> None:
    """Replace each ``module:Owner.name`` (or ``module:name``) by its timed wrapper."""
    for name in names:
        module_name, _, path = name.partition(":")
        owner: Any = importlib.import_module(module_name)
        *parents, attribute = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        fn = getattr(owner, attribute)
        if isinstance(owner, type) and isinstance(owner.__dict__.get(attribute), staticmethod):
            fn = staticmethod(clocks.timed(path, fn))
        else:
            fn = clocks.timed(path, fn)
        setattr(owner, attribute, fn)


def time_statements(clocks: Clocks) -> None:
    """Every SQLite connection opened from now on times its ``execute`` calls."""
    names = {text: name for name, text in Q.items()}
    heads = {text[:80]: name for name, text in Q.items()}  # row_batches' texts: same head

    class TimedConnection(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            start = time.thread_time()
            try:
                return super().execute(sql, *args)
            finally:
                key = names.get(sql) or heads.get(sql[:80]) or " ".join(sql.split())[:60]
                clocks.cpu[key] += time.thread_time() - start
                clocks.calls[key] += 1

    connect = sqlite3.connect

    def timed_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return connect(*args, factory=TimedConnection, **kwargs)

    sqlite3.connect = timed_connect  # type: ignore[assignment]


class ThreadClock:
    """CPU seconds of each thread of this process, by name, read from /proc every 50 ms
    until stopped."""

    def __init__(self) -> None:
        self.last: dict[int, tuple[str, float]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="profile-clock", daemon=True)

    def _read(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        names = {t.native_id: t.name for t in threading.enumerate()}
        for tid in os.listdir("/proc/self/task"):
            try:
                fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu = (int(fields[11]) + int(fields[12])) / tick
            self.last[int(tid)] = (names.get(int(tid), "?"), cpu)

    def _loop(self) -> None:
        while not self.stop.wait(0.05):
            self._read()

    def __enter__(self) -> ThreadClock:
        self._read()
        self.before = {tid: cpu for tid, (_, cpu) in self.last.items()}
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._read()

    def by_name(self) -> collections.Counter[str]:
        out: collections.Counter[str] = collections.Counter()
        for tid, (name, cpu) in self.last.items():
            out[name] += cpu - self.before.get(tid, 0.0)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000, help="pages in the site (2,000)")
    parser.add_argument("-c", "--concurrency", type=int, default=4, help="and per host (4)")
    parser.add_argument("--time", action="append", default=[], metavar="MODULE:NAME")
    parser.add_argument("--top", type=int, default=20, help="rows per table (20)")
    parser.add_argument("--latency", type=float, default=0.0, help="ms before each response (0)")
    args = parser.parse_args()
    functions, statements = Clocks(), Clocks()
    time_functions(functions, [*TIMED, *args.time])
    time_statements(statements)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bench_crawl.build_site(work / "site", args.n)
        server = bench_crawl.Server(work / "site")
        server.control(f"latency/{args.latency:g}")
        argv = bench_crawl.crawl_args(server.url, work, args.concurrency)
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            with ThreadClock() as threads:
                cli.main(argv, prog_name="crawlq", standalone_mode=False)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            server.stop()
        pages = sum(1 for _ in (work / "out.jsonl").open())
    rate, per_page = pages / wall, cpu / pages * 1e3
    print(f"\n{pages:,} pages in {wall:.2f} s: {rate:,.0f} pages/s, CPU {per_page:.2f} ms/page\n")
    print("| thread | us/page |\n|---|---:|")
    for name, seconds in threads.by_name().most_common():
        if seconds > 0:
            print(f"| {name} | {seconds / pages * 1e6:,.0f} |")
    print()
    print(statements.table("SQL statement (execute)", pages, args.top))
    print()
    print(functions.table("function", pages, args.top))


if __name__ == "__main__":
    sys.exit(main())
