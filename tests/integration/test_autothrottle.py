"""``crawlq crawl --autothrottle`` with two ``crawlq worker`` processes on every store: a
host that slows down mid-crawl gets a longer ``min_interval`` in the store, and both
workers space their fetches by it.

The site is a binary tree of pages on 127.0.0.1 (always more pages queued than fetched)
whose response time the test changes while the crawl runs.
"""

from __future__ import annotations

import http.server
import itertools
import json
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import crawlq
from crawlq.crawler.config import PAGE_QUEUE
from crawlq.crawler.hosts import limit_key
from crawlq.jobs import Job
from crawlq.stores.base import JobFilter
from tests.integration.conftest import Processes, wait_until

PAGES = 20_000
FAST_FLOOR = 0.1  # --delay
SLOW = 0.6  # seconds per response after the slowdown; target 1: that interval


class SlowingSite:
    """Pages /p/N linking to /p/2N+1 and /p/2N+2; each response waits ``latency``."""

    def __init__(self) -> None:
        self.latency = 0.0
        self.starts: list[float] = []  # time.time() of each page request
        self._lock = threading.Lock()
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if not self.path.startswith("/p/"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with site._lock:
                    site.starts.append(time.time())
                time.sleep(site.latency)
                n = int(self.path[3:])
                links = "".join(
                    f'<a href="/p/{k}">{k}</a>' for k in (2 * n + 1, 2 * n + 2) if k < PAGES
                )
                body = f"<html><title>{n}</title><body>{links}</body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/p/0"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def starts_between(self, first: float, last: float) -> list[float]:
        with self._lock:
            return sorted(t for t in self.starts if first <= t <= last)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[SlowingSite]:
    served = SlowingSite()
    yield served
    served.close()


def page_jobs(app: crawlq.App) -> list[Job]:
    jobs: list[Job] = []
    after = 0
    while batch := app.store.job_list(JobFilter(queue=PAGE_QUEUE, limit=1000, after_id=after)):
        jobs.extend(batch)
        after = batch[-1].id
    return jobs


def shown(procs: Processes, key: str) -> dict[str, Any]:
    """``crawlq limit show KEY --json``: what an operator sees."""
    out = subprocess.run(
        [*procs.argv("limit", "show", key, "--json")],
        cwd=procs.workdir, env=procs.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    (row,) = json.loads(out.stdout)
    assert isinstance(row, dict)
    return row


@pytest.fixture
def app(procs: Processes) -> Iterator[crawlq.App]:
    application = crawlq.App(procs.store_url)
    yield application
    application.close()


def test_a_host_that_slows_down_gets_a_longer_interval_on_every_worker(
    procs: Processes, site: SlowingSite, app: crawlq.App
) -> None:
    args = [
        site.url, "--allow-private", "--autothrottle", "--delay", str(FAST_FLOOR),
        "--autothrottle-start", "0.5", "--autothrottle-max", "5", "--host-concurrency", "4",
        "--timeout", "10", "--retries", "0", "--no-progress", "--detach",
    ]  # fmt: skip
    created = subprocess.run(
        procs.argv("crawl", *args), cwd=procs.workdir, env=procs.env(),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    crawl_id = int(created.stdout.split()[0])
    workers = [
        procs.crawlq("worker", "--runtime", "asyncio", "--concurrency", "4", log=f"w{i}.log")
        for i in range(2)
    ]
    key = limit_key(site.url)

    def interval() -> float:
        (state,) = app.limits(key)
        return 0.0 if state is None else state.limits.min_interval

    try:
        # fast answers: from the start interval down to the crawl's delay
        wait_until(lambda: 0 < interval() <= FAST_FLOOR * 1.5, 60, "the fast host's interval")
        fast = interval()
        site.latency = SLOW
        wait_until(lambda: interval() >= SLOW * 0.8, 60, "the slow host's longer interval")
        slow = interval()
        assert slow >= 3 * fast
        first = app.store.now()
        time.sleep(8.0)
        last = app.store.now()
        slow_end = interval()
        assert SLOW * 0.8 <= slow_end <= SLOW * 1.6, slow_end
        row = shown(procs, key)
        assert row["min_interval"] == pytest.approx(slow_end, abs=0.2)
        assert row["max_running"] == 4 and row["override"]  # --host-concurrency kept
        app.cancel_crawl(crawl_id)
        # both workers were waiting for the host's pages all through the slow window
        assert [worker.poll() for worker in workers] == [None, None]
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(30)

    # Both workers fetched from the host, and the store spaced every start of its pages,
    # from either worker, by the interval. Which worker takes each page once the interval
    # is over is a race between two waiting workers (under load one can win every time),
    # so the window's starts are not required to come from both: that the loser never
    # started one early is what the gaps show.
    starts = sorted(
        (job.started_at, job.worker_id) for job in page_jobs(app) if job.started_at is not None
    )
    assert len({worker for at, worker in starts}) == 2, starts
    window = [(at, worker) for at, worker in starts if first <= at <= last]
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(window)]
    assert len(gaps) >= 5, window
    assert min(gaps) >= 0.9 * min(slow, slow_end) - 0.01, sorted(gaps)[:5]
    # and the server saw it: requests about one interval apart, not --delay
    seen = site.starts_between(first, last)
    server_gaps = [b - a for a, b in itertools.pairwise(seen)]
    assert statistics.median(server_gaps) >= 0.9 * min(slow, slow_end), server_gaps
