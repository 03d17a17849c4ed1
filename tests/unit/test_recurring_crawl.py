"""Recurring crawls: ``crawlq crawl URL --every`` and ``recrawl_every`` start a new crawl
of the same settings at each fire time, never while the previous one is open."""

from __future__ import annotations

import http.server
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import crawlq
from crawlq.cli import cli
from crawlq.config import WorkerSettings
from crawlq.crawler.config import PAGE_QUEUE, CrawlConfig
from crawlq.crawler.recurring import recrawl_every
from crawlq.crawler.tasks import RECRAWL_TASK, install
from crawlq.crawls import CrawlState

PAGES = {"/": b"<title>home</title><a href='/a'>a</a>", "/a": b"<title>a</title>"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = PAGES.get(self.path, b"<title>404</title>")
        self.send_response(200 if self.path in PAGES else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_recurring_crawl_starts_new_crawls_of_the_same_settings(
    app: crawlq.App, site: str
) -> None:
    config = CrawlConfig(start_urls=(site,), allow_private=True, delay=0.0, obey_robots=False)
    periodic, outcome = recrawl_every(app, config, name="site", every=1)
    assert (periodic.name, outcome.value, periodic.spec.task) == (
        "crawl:site",
        "created",
        RECRAWL_TASK,
    )
    assert recrawl_every(app, config, name="site", every=1)[1].value == "unchanged"
    install(app)
    worker = crawlq.Worker(
        app, WorkerSettings(queues=(PAGE_QUEUE,), concurrency=4, poll_timeout=0.1)
    )
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            finished = [c for c in app.crawls() if c.state is CrawlState.FINISHED]
            if len(finished) >= 2:
                break
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(30)
    crawls = app.crawls()
    assert len(crawls) >= 2 and {c.name for c in crawls} == {"site"}
    assert {CrawlConfig.from_meta(c.meta).start_urls[0] for c in crawls} == {site}
    done = [c for c in crawls if c.state is CrawlState.FINISHED]
    assert all(c.done == 2 for c in done)  # both pages, each time
    for earlier, later in itertools.pairwise(crawls):
        assert earlier.finished_at is not None and earlier.finished_at <= later.created_at


def test_the_command_stores_the_schedule_and_starts_the_first_crawl(
    tmp_path: Path, site: str
) -> None:
    store = f"sqlite:///{tmp_path / 'jobs.db'}"
    base = ["--store", store, "crawl", site, "--allow-private", "--name", "mine"]
    result = CliRunner().invoke(cli, [*base, "--every", "6h"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "schedule crawl:mine created: a new crawl every 6h" in result.output
    assert result.stdout.strip() == "1"  # the first crawl's id, as with --detach
    listed = CliRunner().invoke(cli, ["--store", store, "periodic", "list", "--json"])
    assert '"name": "crawl:mine"' in listed.stdout and '"every": 21600.0' in listed.stdout
    refused = CliRunner().invoke(cli, [*base, "--every", "6h", "-o", "x.jsonl"])
    assert refused.exit_code == 2 and "crawlq crawl-export ID" in refused.output


def test_a_crawl_an_earlier_release_started_is_found_again_after_the_upgrade(
    tmp_path: Path,
) -> None:
    """Settings stored before a field existed take its default: the same command finds
    (and resumes) the open crawl instead of starting a new one; other settings do not."""
    from crawlq.crawler.config import CONFIG_META_KEY
    from crawlq.crawler.pages import page_spec
    from crawlq.crawler.recurring import open_crawl

    app = crawlq.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    install(app)
    config = CrawlConfig(start_urls=("http://127.0.0.1:9/",), allow_private=True)
    meta = config.to_meta()
    older = {k: v for k, v in meta[CONFIG_META_KEY].items() if k not in {"render", "parse"}}
    start = [page_spec(app, "http://127.0.0.1:9/")]  # no worker runs: it stays open
    crawl = app.crawl("old", start, meta={CONFIG_META_KEY: older})
    assert open_crawl(app, "old", meta) is not None
    assert open_crawl(app, "old", meta).id == crawl.id  # type: ignore[union-attr]
    other = CrawlConfig(start_urls=("http://127.0.0.1:9/",), allow_private=True, max_depth=1)
    assert open_crawl(app, "old", other.to_meta()) is None
