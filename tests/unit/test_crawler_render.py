"""``crawlq crawl --render``: pages through Debian's headless chromium (Playwright).

A site whose links exist only after JavaScript ran is crawled fully with rendering and
not without; every request a rendered page makes obeys the scope, robots.txt and the
address guard (the servers see none of the refused ones); the process runtime's children
and their browsers are recycled after N pages and above a memory ceiling, and leave no
browser behind.
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import crawlq
from crawlq.cli import cli
from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.render import chromium_path, render_problem
from crawlq.crawler.runner import EXIT_FINISHED, CrawlRunner
from tests import servers

PAGES = 4

APP_JS = """
document.addEventListener('DOMContentLoaded', async () => {
  const add = (href) => {
    const a = document.createElement('a'); a.href = href; a.textContent = href;
    document.body.appendChild(a);
  };
  add('/js-only');
  const answer = await fetch('/api/links.json');
  for (const href of (await answer.json()).links) add(href);
  document.title = 'rendered ' + location.pathname;
  const probes = (document.body.dataset.probes || '').split(' ').filter(Boolean);
  for (const url of probes) { try { await fetch(url); } catch (e) {} }
  try { await fetch('/api/post', {method: 'POST', body: 'x'}); } catch (e) {}
  try { new WebSocket('ws://' + location.host + '/ws'); } catch (e) {}
});
"""


def page_html(path: str, probes: str) -> str:
    return (
        f"<html><head><title>raw {path}</title><script src='/app.js'></script></head>"
        f"<body data-probes='{probes}'><img src='/logo.png'><p>{path}</p></body></html>"
    )


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        server: Site = self.server  # type: ignore[assignment]
        path = urllib.parse.urlsplit(self.path).path
        with server.lock:
            server.hits[path] += 1
        if path == "/robots.txt":
            self.send(200, "text/plain", "User-agent: *\nDisallow: /private/\n")
        elif path == "/app.js":
            self.send(200, "application/javascript", APP_JS)
        elif path == "/api/links.json":
            links = [f"/p/{n}" for n in range(1, PAGES + 1)]
            self.send(200, "application/json", json.dumps({"links": links}))
        elif path == "/" or path.startswith("/p/") or path == "/js-only":
            self.send(200, "text/html; charset=utf-8", page_html(path, server.probes))
        else:
            self.send(404, "text/html", "<title>404</title>")

    def do_POST(self) -> None:
        server: Site = self.server  # type: ignore[assignment]
        with server.lock:
            server.hits["POST " + self.path] += 1
        self.send(200, "text/plain", "")

    def send(self, status: int, ctype: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Site(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), Handler)
        self.lock = threading.Lock()
        self.hits: Counter[str] = Counter()
        self.probes = ""

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


def _serve(host: str) -> Iterator[Site]:
    server = Site(host)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    yield from _serve("127.0.0.1")


@pytest.fixture
def other() -> Iterator[Site]:
    """A second server on another loopback address (a private target)."""
    yield from _serve("127.0.0.2")


@pytest.fixture(autouse=True)
def browser_installed() -> None:
    problem = render_problem()
    if problem is not None:
        servers.unavailable("chromium or playwright", problem)


def config(site: Site, **overrides: Any) -> CrawlConfig:
    settings: dict[str, Any] = {
        "start_urls": (site.url,),
        "allow_private": True,
        "delay": 0.0,
        "host_concurrency": 4,
        "retries": 0,
        "timeout": 20.0,
        **overrides,
    }
    return CrawlConfig(**settings)


def crawl(
    app: crawlq.App, cfg: CrawlConfig, out: Path, **options: Any
) -> dict[str, dict[str, Any]]:
    runner = CrawlRunner(app, cfg, output=str(out), progress=False, **options)
    assert runner.run() == EXIT_FINISHED
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return {urllib.parse.urlsplit(r["url"]).path: r for r in records}


def chromium_processes() -> set[int]:
    """Pids of the chromium processes under this test process."""
    found = set()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if b"chromium" not in command.split(b"\0")[0]:
            continue
        pid = int(entry)
        while pid > 1:  # an ancestor is this process
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
            except OSError:
                break
            pid = int(stat[stat.rfind(")") + 2 :].split()[1])
            if pid == me:
                found.add(int(entry))
                break
    return found


def test_links_made_by_javascript_are_crawled_with_render_and_not_without(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    site.probes = f"/private/secret http://localhost:{site.server_address[1]}/off-scope"
    plain = crawl(app, config(site), tmp_path / "plain.jsonl")
    assert set(plain) == {"/"}
    assert plain["/"]["title"] == "raw /" and plain["/"]["links_found"] == 0
    assert site.hits["/app.js"] == 0

    site.hits.clear()
    pages = crawl(app, config(site, render=True), tmp_path / "rendered.jsonl")
    expected = {"/", "/js-only", *(f"/p/{n}" for n in range(1, PAGES + 1))}
    assert set(pages) == expected
    for path, record in pages.items():
        assert record["error"] is None, record
        assert record["status"] == 200
        assert record["title"] == f"rendered {path}"
        assert record["links_found"] == PAGES + 1
    # each page fetched once by the crawl; what its JavaScript asked for, as allowed
    assert all(site.hits[path] == 1 for path in expected)
    assert site.hits["/app.js"] == len(expected)
    # refused: robots.txt, out of scope, POST, images, a WebSocket
    assert site.hits["/private/secret"] == 0
    assert site.hits["/off-scope"] == 0
    assert not any(hit.startswith("POST") for hit in site.hits)
    assert site.hits["/logo.png"] == 0 and site.hits["/ws"] == 0
    assert not chromium_processes(), "a browser outlived its child process"


def test_every_request_of_a_rendered_page_passes_the_address_guard(
    app: crawlq.App, site: Site, other: Site, tmp_path: Path
) -> None:
    # scope any: only the address guard stands between the page and 127.0.0.2
    site.probes = f"{other.url}secret http://127.0.0.2:{site.server_address[1]}/via-ip"
    cfg = config(site, render=True, scope="any", allow_private=False, allow_hosts=("127.0.0.1",))
    pages = crawl(app, cfg, tmp_path / "out.jsonl")
    assert pages["/"]["title"] == "rendered /"
    assert not other.hits
    assert site.hits["/via-ip"] == 0


@pytest.mark.parametrize(
    ("recycle", "why"),
    [((2, None), "jobs (--max-jobs-per-child 2)"), ((None, 1), "MiB (--max-memory-per-child")],
)
def test_children_and_their_browsers_are_recycled(
    app: crawlq.App,
    site: Site,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    recycle: tuple[int | None, int | None],
    why: str,
) -> None:
    caplog.set_level(logging.INFO, logger="crawlq.worker")
    total = PAGES + 2 if recycle[0] is not None else 3
    cfg = config(site, render=True, max_pages=None if recycle[0] is not None else total)
    pages = crawl(app, cfg, tmp_path / "out.jsonl", render_recycle=recycle)
    assert len(pages) == total
    assert all(record["title"].startswith("rendered") for record in pages.values())
    recycled = [r.getMessage() for r in caplog.records if "recycling child" in r.getMessage()]
    assert recycled and all(why in line for line in recycled)
    if recycle[0] is not None:
        assert len(recycled) >= total // 2 - 1
    else:  # every child is over 1 byte (with its browser) after each page
        assert len(recycled) >= total - 1
    assert not chromium_processes()


def test_cli_render_with_recycling(site: Site, tmp_path: Path) -> None:
    out = tmp_path / "pages.jsonl"
    result = CliRunner().invoke(
        cli,
        ["crawl", site.url, "--store", f"sqlite:///{tmp_path / 'c.db'}", "--allow-private",
         "--delay", "0", "--render", "--render-pages-per-child", "2", "--max-pages", "3",
         "-o", str(out), "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3 and all(r["title"].startswith("rendered") for r in records)


def test_a_detached_render_crawl_runs_on_a_process_runtime_worker_without_app(
    site: Site, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'c.db'}"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["crawl", site.url, "--store", store, "--allow-private", "--delay", "0", "--render",
         "--max-depth", "0", "--detach"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    crawl_id = int(result.stdout.split()[0])
    result = runner.invoke(
        cli,
        ["worker", "--store", store, "--runtime", "process", "--concurrency", "1",
         "--max-jobs-per-child", "5", "--burst"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    app = crawlq.App(store)
    try:
        assert app.get_crawl(crawl_id).state.value == "finished"
        (record,) = [json.loads(t) for _, t in app.store.result_list(crawl_id, after=0, limit=9)]
        assert record["title"] == "rendered /"
    finally:
        app.close()


def test_render_without_chromium_says_what_to_install(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRAWLQ_CHROMIUM", str(tmp_path / "no-such-chromium"))
    assert chromium_path() is None
    db = tmp_path / "c.db"
    result = CliRunner().invoke(
        cli, ["crawl", site.url, "--store", f"sqlite:///{db}", "--render", "--no-progress"]
    )
    assert result.exit_code == 2
    assert "CRAWLQ_CHROMIUM" in result.output and "not an executable" in result.output
    assert not db.exists()
