"""Screenshots of the dashboard's main pages into docs/web-*.png.

Builds a demo store (queues, dead jobs, a crawl, limit keys, a worker draining jobs),
serves ``crawlq.web`` on it and drives Debian's chromium through Playwright (never a
downloaded browser: ``apt-get install chromium``, ``pip install playwright``).

    .venv/bin/python docs/web_screenshots.py

The browser test (tests/web/test_browser.py) uses the same pieces.
"""

from __future__ import annotations

import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from crawlq import App, Worker, WorkerSettings
from crawlq.crawler.render import chromium_path
from crawlq.stores.base import ClaimParams, Failure
from crawlq.web import create_app

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS = Path(__file__).parent


def demo_app(path: Path) -> App:
    """An App on a SQLite store at ``path`` with the tasks the demo and the test use."""
    app = App(f"sqlite:///{path}")

    @app.task(name="fetch", queue="pages", max_attempts=1)
    def fetch(ctx: Any, url: str) -> None:
        time.sleep(0.02)

    @app.task(name="parse", queue="parse")
    def parse(ctx: Any, n: int) -> None:
        pass

    @app.task(name="flaky", queue="flaky", max_attempts=1)
    def flaky(ctx: Any, n: int) -> None:
        raise ValueError(f"page {n} has no title")

    return app


def fill(app: App, jobs: int = 400) -> dict[str, Any]:
    """Work for the worker, dead jobs (two exceptions), a crawl held in its own queue,
    limit keys (one blocked)."""
    fetch, parse, flaky = app.tasks["fetch"], app.tasks["parse"], app.tasks["flaky"]
    app.schedule_many(
        fetch.with_options(limit_key=f"site{i % 7}.example").spec(
            f"https://site{i % 7}.example/{i}"
        )
        for i in range(jobs)
    )
    app.schedule_many(parse.with_options(delay=3600).spec(i) for i in range(30))
    for i in range(6):
        flaky.schedule(i)
    store = app.store
    claimed = store.job_claim(ClaimParams(queues=["flaky"], worker_id="demo", limit=6))
    store.job_fail(
        [
            Failure(
                lease=j.lease,
                error='Traceback (most recent call last):\n  File "tasks.py", line 9, in flaky\n'
                + ("ValueError: page has no title" if j.id % 3 else "KeyError: 'href'"),
                retry_delay=None,
            )
            for j in claimed
        ]
    )
    crawl = app.crawl("docs.example", [parse.spec(1000 + i) for i in range(20)])
    app.set_limit("site0.example", max_running=2, min_interval=0.5)
    app.block_key("site3.example", 900)
    return {"dead": [j.id for j in claimed], "crawl": crawl.id}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(app: App, **tokens: Any) -> Iterator[str]:
    """``crawlq.web`` on ``app`` in a thread; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(
        create_app(app, **tokens), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the web server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def worker(app: App, queues: tuple[str, ...] = ("pages",)) -> Iterator[None]:
    """A worker draining ``queues`` in a thread."""
    w = Worker(app, WorkerSettings(queues=queues, concurrency=4, poll_timeout=0.05))
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        w.stop()
        thread.join(30)


@contextmanager
def browser() -> Iterator[Any]:
    """A Playwright page in Debian's headless chromium."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError("chromium is not installed: apt-get install chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


PAGES = [
    ("overview", "#/"),
    ("jobs", "#/jobs?queue=pages"),
    ("dead", "#/dead"),
    ("failures", "#/failures"),
    ("crawl", "#/crawls/{crawl}"),
    ("limits", "#/limits"),
    ("workers", "#/workers"),
]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app = demo_app(Path(tmp) / "demo.db")
        made = fill(app, jobs=3000)
        with serve(app) as url, worker(app), browser() as b:
            for name, fragment in PAGES:
                for width, suffix in ((1280, ""), (390, "-phone")):
                    if suffix and name not in ("overview", "crawl"):
                        continue
                    page = b.new_page(viewport={"width": width, "height": 800})
                    page.goto(url + fragment.format(**made))
                    page.wait_for_selector("#status:has-text('updated')")
                    if name == "overview":
                        time.sleep(12)  # two throughput samples
                        page.reload()
                        page.wait_for_selector("#status:has-text('updated')")
                    out = DOCS / f"web-{name}{suffix}.png"
                    page.screenshot(path=str(out), full_page=False)
                    print(out, file=sys.stderr)
                    page.close()
        app.close()


if __name__ == "__main__":
    main()
