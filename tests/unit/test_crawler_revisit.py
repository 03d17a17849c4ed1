"""Revisiting only what changed (``--revisit-changed``): the second crawl of a site sends
conditional requests from the first crawl's records, records 304s as unchanged (their
links followed from the previous record), writes no new bodies to the WARC, and fetches
a changed page again."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

import crawlq
from crawlq.cli import cli
from crawlq.config import WorkerSettings
from crawlq.crawler.config import PAGE_QUEUE, CrawlConfig
from crawlq.crawler.recurring import recrawl_every
from crawlq.crawler.revisit import PREVIOUS_META_KEY, conditional_headers, usable
from crawlq.crawler.runner import EXIT_FINISHED, CrawlRunner
from crawlq.crawler.tasks import install
from crawlq.crawls import CrawlState
from crawlq.exceptions import ConfigurationError
from tests.localserver import serving

OLD = "Mon, 02 Feb 2026 10:00:00 GMT"
NEW = "Tue, 03 Feb 2026 10:00:00 GMT"


class Site(http.server.ThreadingHTTPServer):
    """Pages with validators: ``/b`` has only Last-Modified, the others an ETag too; a
    matching If-None-Match (or, without an ETag, If-Modified-Since) gets a 304. Every
    request's headers are kept in ``log`` as (path, headers)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        self.pages: dict[str, tuple[str, str]] = {  # path -> (body, Last-Modified)
            "/": ("<title>home</title><a href='/a'>a</a> <a href='/b'>b</a>", OLD),
            "/a": ("<title>a</title><a href='/c'>c</a>", OLD),
            "/b": ("<title>b</title>", OLD),
            "/c": ("<title>c</title><a href='/'>home</a>", OLD),
        }
        self.log: list[tuple[str, dict[str, str]]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Site

    def do_GET(self) -> None:
        site = self.server
        with site.lock:
            site.log.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            page = site.pages.get(self.path)
        if page is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body, modified = page
        etag = None if self.path == "/b" else f'"{hashlib.sha1(body.encode()).hexdigest()}"'
        if etag is not None:
            fresh = self.headers.get("If-None-Match") == etag
        else:
            fresh = self.headers.get("If-Modified-Since") == modified
        self.send_response(304 if fresh else 200)
        if etag is not None:
            self.send_header("ETag", etag)
        self.send_header("Last-Modified", modified)
        if fresh:
            self.end_headers()
            return
        data = body.encode()
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[Site]:
    with serving(Site()) as server:
        yield server


def settings(site: Site, tmp_path: Path, **overrides: Any) -> CrawlConfig:
    options: dict[str, Any] = {"revisit_changed": True, "warc": str(tmp_path / "site.warc.gz")}
    options.update(overrides)
    return CrawlConfig(
        start_urls=(site.url,), allow_private=True, obey_robots=False, delay=0.0, **options
    )


def crawl(app: crawlq.App, cfg: CrawlConfig, out: Path) -> dict[str, dict[str, Any]]:
    """Run one crawl of ``cfg`` to the end; its records by path."""
    runner = CrawlRunner(app, cfg, name="site", output=str(out), progress=False)
    assert runner.run() == EXIT_FINISHED
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return {urllib.parse.urlsplit(r["url"]).path: r for r in records}


def warc_types(path: str) -> list[tuple[str, str]]:
    """(WARC-Type, path) of each request/response/revisit record."""
    with open(path, "rb") as stream:
        return [
            (r.rec_type, urllib.parse.urlsplit(r.rec_headers.get_header("WARC-Target-URI")).path)
            for r in ArchiveIterator(stream)
            if r.rec_type in ("response", "revisit")
        ]


def take_log(site: Site) -> dict[str, dict[str, str]]:
    with site.lock:
        log, site.log = site.log, []
    return dict(log)


def test_an_unchanged_site_is_revisited_with_conditional_requests(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    cfg = settings(site, tmp_path)
    first = crawl(app, cfg, tmp_path / "1.jsonl")
    assert set(first) == {"/", "/a", "/b", "/c"}
    sent = take_log(site)
    assert not any("if-none-match" in h or "if-modified-since" in h for h in sent.values())
    for path, record in first.items():
        assert (record["status"], record["unchanged"]) == (200, False)
        assert record["last_modified"] == OLD
        assert (record["etag"] is None) == (path == "/b")
    assert first["/"]["links"] == [site.url + "a", site.url + "b"]

    second = crawl(app, cfg, tmp_path / "2.jsonl")
    sent = take_log(site)
    assert set(second) == set(first), "the whole site is still reached"
    assert set(sent) == set(first), "each page requested once"
    for path, headers in sent.items():
        if path == "/b":
            assert "if-none-match" not in headers
        else:
            assert headers["if-none-match"] == first[path]["etag"]
        assert headers["if-modified-since"] == OLD
    for path, record in second.items():
        assert (record["status"], record["unchanged"], record["bytes"]) == (304, True, 0)
        carried = ("title", "sha256", "content_type", "links", "etag", "last_modified")
        assert {k: record[k] for k in carried} == {k: first[path][k] for k in carried}
        assert record["error"] is None
    crawls = app.crawls()
    assert crawls[-1].meta[PREVIOUS_META_KEY] == crawls[-2].id
    assert PREVIOUS_META_KEY not in crawls[-2].meta  # the first crawl had none
    # no new bodies: the WARC holds the first crawl's responses only
    assert sorted(warc_types(str(cfg.warc))) == sorted(("response", p) for p in first)

    third = crawl(app, cfg, tmp_path / "3.jsonl")  # rests on the 304 records
    sent = take_log(site)
    assert {r["status"] for r in third.values()} == {304}
    assert sent["/a"]["if-none-match"] == first["/a"]["etag"]


def test_a_changed_page_is_fetched_again_and_its_new_links_followed(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    cfg = settings(site, tmp_path)
    first = crawl(app, cfg, tmp_path / "1.jsonl")
    site.pages["/a"] = ("<title>a, new</title><a href='/c'>c</a> <a href='/d'>d</a>", NEW)
    site.pages["/d"] = ("<title>d</title>", NEW)
    take_log(site)
    second = crawl(app, cfg, tmp_path / "2.jsonl")
    assert set(second) == {*first, "/d"}
    changed = second["/a"]
    assert (changed["status"], changed["unchanged"], changed["title"]) == (200, False, "a, new")
    assert changed["etag"] != first["/a"]["etag"] and changed["last_modified"] == NEW
    assert changed["sha256"] != first["/a"]["sha256"]
    assert (second["/d"]["status"], second["/d"]["unchanged"]) == (200, False)
    assert {p: second[p]["status"] for p in ("/", "/b", "/c")} == {"/": 304, "/b": 304, "/c": 304}
    new_bodies = warc_types(str(cfg.warc))[len(first) :]
    assert sorted(new_bodies) == [("response", "/a"), ("response", "/d")]


def test_rewrite_unchanged_writes_warc_revisit_records(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    cfg = settings(site, tmp_path, rewrite_unchanged=True)
    first = crawl(app, cfg, tmp_path / "1.jsonl")
    crawl(app, cfg, tmp_path / "2.jsonl")
    written = warc_types(str(cfg.warc))
    assert sorted(written[len(first) :]) == sorted(("revisit", p) for p in first)
    with open(str(cfg.warc), "rb") as stream:
        revisit = next(r for r in ArchiveIterator(stream) if r.rec_type == "revisit")
        profile = revisit.rec_headers.get_header("WARC-Profile")
        assert profile.endswith("/revisit/server-not-modified")
        assert revisit.rec_headers.get_header("WARC-Refers-To-Date")


def test_a_crawl_without_the_option_sends_no_conditions(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    cfg = settings(site, tmp_path, revisit_changed=False)
    crawl(app, cfg, tmp_path / "1.jsonl")
    second = crawl(app, cfg, tmp_path / "2.jsonl")
    assert {r["status"] for r in second.values()} == {200}
    assert "etag" not in second["/"] and "unchanged" not in second["/"]
    assert not any("if-none-match" in h for _, h in site.log)


def test_rewrite_unchanged_needs_revisits_and_a_warc(site: Site, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="needs --revisit-changed and --warc"):
        settings(site, tmp_path, revisit_changed=False, rewrite_unchanged=True)
    with pytest.raises(ConfigurationError, match="needs --revisit-changed and --warc"):
        CrawlConfig(start_urls=(site.url,), revisit_changed=True, rewrite_unchanged=True)


def test_the_command_takes_the_options(tmp_path: Path, site: Site) -> None:
    store = f"sqlite:///{tmp_path / 'jobs.db'}"
    base = ["--store", store, "crawl", site.url, "--allow-private", "--detach"]
    done = CliRunner().invoke(cli, [*base, "--revisit-changed"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    app = crawlq.App(store)
    try:
        assert CrawlConfig.from_meta(app.crawls()[0].meta).revisit_changed
    finally:
        app.close()
    refused = CliRunner().invoke(cli, [*base, "--rewrite-unchanged"])
    assert refused.exit_code != 0
    assert "--rewrite-unchanged writes unchanged pages to the WARC file" in refused.output


def test_which_previous_records_a_conditional_request_rests_on() -> None:
    base = {"status": 200, "error": None, "final_url": "http://x/", "links": [], "etag": '"1"'}
    assert usable(json.dumps(base)) == base
    assert conditional_headers(base) == (("If-None-Match", '"1"'),)
    dated = {**base, "etag": None, "last_modified": OLD}
    assert conditional_headers(dated) == (("If-Modified-Since", OLD),)
    assert usable(json.dumps({**base, "status": 304, "unchanged": True})) is not None
    for bad in (
        {**base, "etag": None},  # no validator
        {**base, "error": "timeout"},
        {**base, "status": 404},
        {**base, "status": 304},  # a 304 nobody asked for: nothing carried
        {k: v for k, v in base.items() if k != "links"},  # made without --revisit-changed
    ):
        assert usable(json.dumps(bad)) is None, bad
    assert usable(None) is None and usable("not json") is None and usable("[1]") is None


def test_a_recurring_crawl_revisits_only_what_changed(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    cfg = settings(site, tmp_path)
    recrawl_every(app, cfg, name="site", every=1)
    install(app)
    worker = crawlq.Worker(
        app, WorkerSettings(queues=(PAGE_QUEUE,), concurrency=4, poll_timeout=0.1)
    )
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if sum(c.state is CrawlState.FINISHED for c in app.crawls()) >= 2:
                break
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(30)
    first, second = [c for c in app.crawls() if c.state is CrawlState.FINISHED][:2]
    assert second.meta[PREVIOUS_META_KEY] == first.id
    records = [json.loads(text) for _, text in app.store.result_list(second.id)]
    assert len(records) == 4 and {(r["status"], r["unchanged"]) for r in records} == {(304, True)}
